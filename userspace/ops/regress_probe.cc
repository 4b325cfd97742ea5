// The probe of `cordon regress run` (hidden mode `cordon regress probe`): it
// runs inside the case's fresh sandbox and attempts exactly one operation.
#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/bpf.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "confine/child.h"
#include "confine/seccomp.h"
#include "events/decoder.h"
#include "ops/regress.h"
#include "sys/cgroup.h"
#include "util/fd.h"
#include "util/fs.h"
#include "util/text.h"

namespace cordon::ops {
namespace {

ProbeResult Failed(const char* step, int error, std::string detail = "") {
  ProbeResult r;
  r.error = error;
  r.errno_name = ErrnoName(error);
  r.step = step;
  r.detail = std::move(detail);
  return r;
}
ProbeResult Succeeded(std::string detail = "") {
  ProbeResult r;
  r.ok = true;
  r.detail = std::move(detail);
  return r;
}

ProbeResult NetProbe(const RegressProbe& p) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  const int family = p.family == "inet6" ? AF_INET6 : AF_INET;
  if (family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&ss);
    in->sin_family = AF_INET;
    in->sin_port = htons(static_cast<uint16_t>(p.port));
    if (inet_pton(AF_INET, p.address.c_str(), &in->sin_addr) != 1)
      return Failed("address", EINVAL, "not an IPv4 address");
    len = sizeof *in;
  } else {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(static_cast<uint16_t>(p.port));
    std::string addr = p.address;
    if (addr.find(':') == std::string::npos) addr = "::ffff:" + addr;  // a v4-mapped destination, as events show it
    if (inet_pton(AF_INET6, addr.c_str(), &in6->sin6_addr) != 1)
      return Failed("address", EINVAL, "not an IPv6 address");
    len = sizeof *in6;
  }
  const bool tcp = p.protocol == "tcp";
  UniqueFd fd(::socket(family, (tcp ? SOCK_STREAM : SOCK_DGRAM) | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Failed("socket", errno);
  if (p.kind == "net.bind") {
    // Bound and closed at once: no listen(), nothing is received. A port
    // another socket holds is EADDRINUSE: the kernel got that far, not denied.
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0) return Failed("bind", errno);
    return Succeeded("bound (closed at once)");
  }
  if (p.kind == "net.sendmsg") {
    const char byte = 0;
    if (::sendto(fd.get(), &byte, 1, 0, reinterpret_cast<sockaddr*>(&ss), len) < 0) return Failed("sendto", errno);
    return Succeeded("datagram sent");
  }
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) == 0) {
    if (tcp) return Succeeded("connected");
    // A UDP connect to a denied destination of a sandbox with a DNS
    // resolver is diverted to it (README "Egress by name: the kernel side")
    // and succeeds; what it refuses is the datagram, as a sendmsg case.
    const char byte = 0;
    if (::send(fd.get(), &byte, 1, 0) < 0) return Failed("send on the connected socket", errno);
    return Succeeded("connected, datagram sent");
  }
  if (errno != EINPROGRESS) return Failed("connect", errno);
  pollfd pfd{fd.get(), POLLOUT, 0};
  int n;
  do n = ::poll(&pfd, 1, 2000);
  while (n < 0 && errno == EINTR);
  if (n == 0) return Succeeded("connect neither refused nor completed within 2 s (not denied)");
  int error = 0;
  socklen_t elen = sizeof error;
  ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &elen);
  // Refused by the destination (ECONNREFUSED) is not a denial by the sandbox.
  if (error) return Failed("connect", error);
  return Succeeded("connected");
}

ProbeResult UnixProbe(const std::string& path) {
  sockaddr_un sun{};
  sun.sun_family = AF_UNIX;
  std::string name = path;
  if (!name.empty() && name[0] == '@') name[0] = '\0';  // abstract, as events write it
  if (name.size() >= sizeof sun.sun_path) return Failed("address", ENAMETOOLONG);
  std::memcpy(sun.sun_path, name.data(), name.size());
  const socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size() + (name[0] ? 1 : 0));
  for (int type : {SOCK_STREAM, SOCK_DGRAM}) {
    UniqueFd fd(::socket(AF_UNIX, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return Failed("socket", errno);
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sun), len) == 0) return Succeeded("connected");
    if (errno == EPROTOTYPE && type == SOCK_STREAM) continue;  // a datagram socket: try that
    if (errno == EINPROGRESS || errno == EAGAIN) return Succeeded("connect in progress");
    return Failed("connect", errno);
  }
  return Failed("connect", EPROTOTYPE);
}

ProbeResult OpenProbe(const std::string& path, const std::string& access) {
  const bool read = access.find("read") != std::string::npos;
  const bool write = access.find("write") != std::string::npos;
  const bool create = access.find("create") != std::string::npos;
  int flags = O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
  flags |= (read && (write || create)) ? O_RDWR : (write || create) ? O_WRONLY : O_RDONLY;
  struct stat st;
  const bool existed = ::lstat(path.c_str(), &st) == 0;
  if (create) flags |= O_CREAT | O_EXCL;  // never truncates, never changes what exists
  UniqueFd fd(::open(path.c_str(), flags, 0600));
  if (!fd.valid()) {
    if (create && errno == EEXIST) return Failed("open", EEXIST, "the file exists: a create cannot be probed");
    return Failed("open", errno);
  }
  if (create && !existed) ::unlink(path.c_str());  // the probe leaves nothing
  return Succeeded("opened");
}

// A regular file made by mknod (as BPF LSM's path_mknod and Landlock's
// MAKE_REG judge an open with O_CREAT too; a refusal of mknod is reported as
// file.create by either layer, while Landlock's refusal of an open is
// reported as file.open). mknod never follows a symlink and fails with
// EEXIST on any existing name, so a name it made is the probe's own: removed
// at once, nothing is left.
ProbeResult CreateProbe(const std::string& path) {
  if (::mknodat(AT_FDCWD, path.c_str(), S_IFREG | 0600, 0) != 0) {
    if (errno == EEXIST) return Failed("mknod", EEXIST, "the path exists: a create cannot be probed");
    return Failed("mknod", errno);
  }
  if (::unlinkat(AT_FDCWD, path.c_str(), 0) != 0) {
    const int error = errno;
    return Succeeded("created; removing it failed: " + ErrnoName(error));
  }
  return Succeeded("created (and removed at once: nothing is left)");
}

// chmod to the mode the path has: nothing changes, yet the kernel asks the
// LSMs (security_path_chmod before notify_change). A symlink is not
// followed to its target.
ProbeResult SetattrProbe(const std::string& path) {
  struct stat st;
  if (::fstatat(AT_FDCWD, path.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return Failed("fstatat", errno);
  if (S_ISLNK(st.st_mode)) return Failed("fstatat", ELOOP, "a symlink: chmod would change its target");
  const mode_t mode = st.st_mode & 07777;
  if (::fchmodat(AT_FDCWD, path.c_str(), mode, 0) != 0) return Failed("chmod", errno);
  char octal[16];
  std::snprintf(octal, sizeof octal, "%04o", static_cast<unsigned>(mode));
  return Succeeded(std::string("chmod to its own mode ") + octal + " (unchanged)");
}

// One page of the file mapped PROT_READ|PROT_EXEC, MAP_PRIVATE, then
// unmapped: nothing is run and nothing written.
ProbeResult MmapExecProbe(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd.valid()) return Failed("open", errno);
  const long page = ::sysconf(_SC_PAGESIZE);
  void* map = ::mmap(nullptr, static_cast<size_t>(page), PROT_READ | PROT_EXEC, MAP_PRIVATE, fd.get(), 0);
  if (map == MAP_FAILED) return Failed("mmap", errno);
  ::munmap(map, static_cast<size_t>(page));
  return Succeeded("mapped PROT_READ|PROT_EXEC (unmapped at once)");
}

// The filter of the exec probe's child, installed just before its execve:
// execve and execveat pass (the operation probed), exit and exit_group pass
// (a failed exec ends), write passes on the report descriptor only (a failed
// exec says its errno; the descriptor is O_CLOEXEC, so a new image cannot
// have it), and every other system call, and any other ABI (x32, int 0x80),
// kills the process. A filter survives execve: an exec that succeeds dies at
// the new image's first system call (the dynamic loader's first brk or mmap,
// a static program's first call), so no code of the target ever makes one.
struct ExecProbeFilter {
  sock_filter insns[17];
  sock_fprog prog;
};
void BuildExecProbeFilter(int report_fd, ExecProbeFilter* f) {
  const auto nr = offsetof(seccomp_data, nr), arch = offsetof(seccomp_data, arch), arg0 = offsetof(seccomp_data, args);
  const sock_filter insns[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, arch),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, nr),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_execve, 5, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_execveat, 4, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_exit, 3, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_exit_group, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_write, 2, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      // write: only on the report descriptor (the low 32 bits of arg0; the
      // high ones must be 0 too, else it is another descriptor to the kernel).
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, arg0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(report_fd), 0, 3),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, arg0 + 4),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
  };
  static_assert(sizeof insns == sizeof f->insns);
  std::memcpy(f->insns, insns, sizeof insns);
  f->prog = {static_cast<unsigned short>(sizeof insns / sizeof insns[0]), f->insns};
}

ProbeResult ExecProbe(const std::string& path) {
  // The child reports exec's errno over a pipe closed on a successful exec.
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return Failed("pipe", errno);
  ExecProbeFilter filter;
  BuildExecProbeFilter(pipefd[1], &filter);
  char* argv[] = {const_cast<char*>(path.c_str()), nullptr};
  char* envp[] = {nullptr};
  pid_t pid = ::fork();
  if (pid < 0) return Failed("fork", errno);
  if (pid == 0) {
    ::close(pipefd[0]);
    int null = ::open("/dev/null", O_RDWR);
    if (null >= 0) {
      ::dup2(null, 0);
      ::dup2(null, 1);
      ::dup2(null, 2);
      if (null > 2) ::close(null);
    }
    // The filter's kill is a SIGSYS, whose default action dumps core: no
    // core file of the target (core_pattern "core" writes in the cwd).
    const rlimit no_core = {0, 0};
    int error = ::setrlimit(RLIMIT_CORE, &no_core) != 0 ? errno : 0;
    // A target that loops before its first system call (or execs itself on
    // and on) is ended by the kernel: one second of CPU, then SIGKILL.
    const rlimit one_second = {1, 1};
    if (!error && ::setrlimit(RLIMIT_CPU, &one_second) != 0) error = errno;
    if (!error && ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) error = errno;
    if (!error && ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &filter.prog) != 0) error = errno;
    if (error) {
      // Not probed: the parent reports the step (a negative errno).
      error = -error;
    } else {
      ::execve(path.c_str(), argv, envp);
      error = errno;
    }
    (void)!::write(pipefd[1], &error, sizeof error);
    ::_exit(127);
  }
  ::close(pipefd[1]);
  int error = 0;
  ssize_t n;
  do n = ::read(pipefd[0], &error, sizeof error);
  while (n < 0 && errno == EINTR);
  ::close(pipefd[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);  // the filter ends it: an exec that succeeded dies at its first system call
  if (n == static_cast<ssize_t>(sizeof error) && error < 0)
    return Failed("seccomp", -error, "the probe could not install its own filter: the exec was not attempted");
  if (n == static_cast<ssize_t>(sizeof error)) return Failed("execve", error);
  const bool stopped = WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS;
  return Succeeded(stopped ? "executed (killed at the new program's first system call)"
                           : "executed (the new program ended before making a system call)");
}

ProbeResult SocketProbe(const RegressProbe& p) {
  auto call = SocketOf(p);
  if (!call) return Failed("socket", EINVAL, "family, type or protocol unknown");
  UniqueFd fd(::socket(call->family, call->type | SOCK_CLOEXEC, call->protocol));
  if (!fd.valid()) return Failed("socket", errno);
  return Succeeded("socket created (closed at once)");
}

// A refusal of cordon run's seccomp filter, made as the walk of every refusal
// makes it (SeccompCallFor): what the filter judges as recorded, the rest
// arguments the kernel rejects, in a child of its own session (a persona or
// terminal change stays the child's). EPERM is the filter's refusal; any
// other result means the call reached the kernel.
ProbeResult SeccompProbe(const RegressProbe& p) {
  std::string why;
  auto call = SeccompCallFor(p.syscall, p.argument, &why);
  if (!call) return Failed("syscall", ENOSYS, why);
  pid_t pid = ::fork();
  if (pid < 0) return Failed("fork", errno);
  if (pid == 0) {
    ::setsid();
    long r =
        ::syscall(call->nr, call->args[0], call->args[1], call->args[2], call->args[3], call->args[4], call->args[5]);
    ::_exit(r < 0 ? (errno & 0xff) : 0);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status)) return Failed("syscall", EINTR, "the probe's child did not exit");
  const int error = WEXITSTATUS(status);
  const std::string what = "syscall " + std::to_string(p.syscall);
  if (error == 0) return Succeeded(what + " succeeded");
  if (error != call->refusal) return Succeeded(what + " reached the kernel: " + ErrnoName(error));
  ProbeResult refused = Failed("syscall", error);
  if (call->refusal != EPERM) refused.refused_as = ErrnoName(call->refusal);  // clone3's ENOSYS
  return refused;
}

// An option the sandbox's setsockopt program refuses, set to a value it
// refuses (SockoptOf) on a fresh socket closed at once: where a policy (or a
// cordon that lost the rule) lets it through, it acts on nothing else (a mark,
// a device, a buffer size, a reuseport group of a socket never bound).
ProbeResult SockoptProbe(uint32_t level, uint32_t option) {
  auto c = SockoptOf(level, option);
  if (!c) return Failed("setsockopt", EINVAL, "not an option the probe knows");
  UniqueFd fd(::socket(c->family, c->type | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Failed("socket", errno);
  int number = 1;
  const char device[] = "lo";
  const uint8_t garbage[4] = {0xff, 0xff, 0xff, 0xff};
  const void* value = &number;
  socklen_t size = sizeof number;
  switch (c->value) {
    case SockoptCall::kInt1: number = 1; break;
    case SockoptCall::kInt7: number = 7; break;
    case SockoptCall::kInt65536: number = 65536; break;
    case SockoptCall::kDevice: value = device, size = sizeof device; break;
    case SockoptCall::kGarbage: value = garbage, size = sizeof garbage; break;
  }
  if (::setsockopt(fd.get(), static_cast<int>(level), static_cast<int>(option), value, size) == 0)
    return Succeeded("option set (on a socket closed at once)");
  // The sandbox's refusal is EPERM; the kernel's own checks give EPERM too
  // where a capability is missing (TCP_REPAIR, IP_TRANSPARENT): only the
  // matching event tells the two apart, and the run checks it.
  if (errno != EPERM) return Succeeded(std::string("setsockopt reached the kernel: ") + ErrnoName(errno));
  return Failed("setsockopt", EPERM);
}

ProbeResult BpfProbe(uint32_t cmd) {
  union bpf_attr attr;
  std::memset(&attr, 0, sizeof attr);
  long fd = ::syscall(SYS_bpf, static_cast<int>(cmd), &attr, sizeof attr);
  if (fd >= 0) {
    ::close(static_cast<int>(fd));
    return Succeeded("bpf() returned a descriptor");
  }
  // An empty attribute is refused by bpf() itself (EINVAL, ...) when cordon
  // lets the call through: only the sandbox's refusal is EPERM.
  if (errno != EPERM) return Succeeded(std::string("bpf() reached the kernel: ") + ErrnoName(errno));
  return Failed("bpf", errno);
}

// file.unlink, file.rename, file.link on the fresh name the runner made
// beside the recorded path (ProbeScratch): the recorded file is not touched.
ProbeResult BesideProbe(const RegressProbe& p) {
  auto name = UnescapeWorkloadBytes(p.scratch);
  if (p.scratch.empty() || !name) return Failed("scratch", EINVAL, "no fresh name to act on (regress run makes one)");
  const std::string second = *UnescapeWorkloadBytes(ScratchSecondName(p.scratch));
  if (p.kind == "file.unlink") {
    struct stat st;
    if (::lstat(name->c_str(), &st) != 0) return Failed("lstat", errno);
    const bool dir = S_ISDIR(st.st_mode);
    if (::unlinkat(AT_FDCWD, name->c_str(), dir ? AT_REMOVEDIR : 0) != 0)
      return Failed(dir ? "rmdir" : "unlink", errno);
    return Succeeded(std::string(dir ? "removed the runner's fresh directory" : "removed the runner's fresh name") +
                     " beside it");
  }
  if (p.kind == "file.rename") {
    if (::renameat2(AT_FDCWD, name->c_str(), AT_FDCWD, second.c_str(), RENAME_NOREPLACE) != 0)
      return Failed("rename", errno);
    return Succeeded("renamed the runner's fresh name beside it to a second fresh name");
  }
  if (::linkat(AT_FDCWD, name->c_str(), AT_FDCWD, second.c_str(), 0) != 0) return Failed("link", errno);
  return Succeeded("linked the runner's fresh name beside it as a second fresh name");
}

// A signal to the runner's stand-in outside the sandbox (same uid: only
// cordon's rule can refuse it). It ignores what it can; KILL and STOP act on
// it alone.
ProbeResult SignalProbe(const RegressProbe& p) {
  if (!p.target_pid) return Failed("scratch", EINVAL, "no stand-in process (regress run starts one)");
  const int sig = p.arg <= 64 ? static_cast<int>(p.arg) : 0;
  if (::kill(static_cast<pid_t>(p.target_pid), sig) != 0) return Failed("kill", errno);
  return Succeeded("signal " + std::to_string(sig) + " sent to the runner's stand-in outside the sandbox");
}

// A ptrace read check of the stand-in (the link /proc/PID/exe asks
// ptrace_may_access(PTRACE_MODE_READ_FSCREDS)): cordon's rule refuses every
// mode alike, and a read changes nothing. /proc answers a refusal with EACCES.
ProbeResult PtraceProbe(const RegressProbe& p) {
  if (!p.target_pid) return Failed("scratch", EINVAL, "no stand-in process (regress run starts one)");
  char buf[PATH_MAX];
  const std::string link = "/proc/" + std::to_string(p.target_pid) + "/exe";
  if (::readlink(link.c_str(), buf, sizeof buf) < 0) {
    ProbeResult r = Failed("readlink /proc/PID/exe", errno);
    r.refused_as = "EACCES";
    return r;
  }
  return Succeeded("read the stand-in's /proc/PID/exe (a ptrace read check) outside the sandbox");
}

// The runner's scratch cgroup's cgroup.procs opened for writing (the write
// check is made at open); nothing is written.
ProbeResult CgroupProbe(const RegressProbe& p) {
  auto dir = UnescapeWorkloadBytes(p.scratch);
  if (p.scratch.empty() || !dir) return Failed("scratch", EINVAL, "no scratch cgroup (regress run makes one)");
  UniqueFd fd(::open((*dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd.valid()) return Failed("open cgroup.procs", errno);
  return Succeeded("opened a cgroup's cgroup.procs outside the sandbox for writing (nothing written)");
}

// access(2) of the device's node in /dev (found by the runner) with the
// recorded access: the kernel's device check (the sandbox's device program)
// is asked as at open, but no driver code runs.
ProbeResult DeviceProbe(const RegressProbe& p) {
  auto node = UnescapeWorkloadBytes(p.scratch);
  if (p.scratch.empty() || !node) return Failed("scratch", EINVAL, "no device node (regress run finds one)");
  int mode = 0;
  if (p.access.find("read") != std::string::npos) mode |= R_OK;
  if (p.access.find("write") != std::string::npos) mode |= W_OK;
  if (!mode) return Failed("access", EINVAL, "no read or write access to probe");
  if (::faccessat(AT_FDCWD, node->c_str(), mode, 0) != 0) return Failed("access", errno);
  return Succeeded("the device check allowed " + p.access + " (asked with access(2): the device was not opened)");
}

// A sysctl read (one byte) or a write of nothing (the sandbox's sysctl
// program is asked before the handler; a handler given nothing changes
// nothing).
ProbeResult SysctlProbe(const RegressProbe& p) {
  auto name = UnescapeWorkloadBytes(p.path);
  if (!name || name->empty() || name->find("..") != std::string::npos || (*name)[0] == '/')
    return Failed("path", EINVAL, "not a sysctl name");
  const std::string file = "/proc/sys/" + *name;
  const bool write = p.arg != 0;
  UniqueFd fd(::open(file.c_str(), (write ? O_WRONLY : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) return Failed("open", errno);
  char byte;
  if ((write ? ::write(fd.get(), "", 0) : ::read(fd.get(), &byte, 1)) < 0)
    return Failed(write ? "write" : "read", errno);
  return Succeeded(write ? "wrote nothing to " + file + " (its value is unchanged)" : "read " + file);
}

// fs.protected_hardlinks (on unless it says 0).
bool ProtectedHardlinks() {
  auto text = ReadFile("/proc/sys/fs/protected_hardlinks", 16);
  return !text || text->empty() || (*text)[0] != '0';
}

// The first node of `dev` (of `type`) below `dir`, /dev's own entries
// first, then its directories (a few levels; no symlink followed).
std::string DeviceNode(const std::string& dir, mode_t type, dev_t dev, int depth) {
  std::vector<std::string> subdirs;
  if (auto names = ListDir(dir)) {
    std::vector<std::string> sorted = *names;
    std::sort(sorted.begin(), sorted.end());
    for (const auto& n : sorted) {
      const std::string path = dir + "/" + n;
      struct stat st;
      if (::lstat(path.c_str(), &st) != 0) continue;
      if ((st.st_mode & S_IFMT) == type && st.st_rdev == dev) return path;
      if (S_ISDIR(st.st_mode) && depth < 3 && n != "shm" && n != "mqueue" && n != "pts") subdirs.push_back(path);
    }
  }
  for (const auto& d : subdirs)
    if (auto found = DeviceNode(d, type, dev, depth + 1); !found.empty()) return found;
  return "";
}

}  // namespace

namespace {

// The identity the probe runs as: nullopt for a dynamic uid (fresh for the
// run: it owns nothing and nothing outside has it).
Result<std::optional<RunIdentity>> IdentityOf(const std::string& run_as) {
  if (run_as.empty() || run_as == "dynamic") return std::optional<RunIdentity>();
  auto id = ResolveIdentity(run_as);
  if (!id) return Error{"spec.runAs " + run_as + ": " + id.error().ToString()};
  return std::optional<RunIdentity>(id->id());
}

// Whether the file mode of `st` gives `who` (nullopt: a dynamic uid, "other")
// the `want` bits (4 read, 2 write, 1 search), as the kernel checks them for
// a task without capabilities (cordon run grants none unless the policy does).
bool ModeAllows(const struct stat& st, const std::optional<RunIdentity>& who, unsigned want) {
  const unsigned bits = who && st.st_uid == who->uid   ? (st.st_mode >> 6) & 7
                        : who && st.st_gid == who->gid ? (st.st_mode >> 3) & 7
                                                       : st.st_mode & 7;
  return (bits & want) == want;
}

std::string IdentityName(const std::string& run_as) { return run_as.empty() ? "dynamic" : run_as; }

// File systems whose directories are kernel objects (mkdir makes a cgroup, a
// tracefs instance, a configfs item ...) or cordon's and the kernel's state.
bool PseudoFileSystem(long type) {
  switch (static_cast<unsigned long>(type)) {
    case 0x9fa0:      // proc
    case 0x62656572:  // sysfs
    case 0x27e0eb:    // cgroup
    case 0x63677270:  // cgroup2
    case 0xcafe4a11:  // bpf
    case 0x74726163:  // tracefs
    case 0x64626720:  // debugfs
    case 0x62656570:  // configfs
    case 0x73636673:  // securityfs
    case 0x7655821:   // resctrl
    case 0x42494e4d:  // binfmt_misc
    case 0x6e736673:  // nsfs
      return true;
  }
  return false;
}

std::string RandomHex() {
  uint64_t r = 0;
  if (::getrandom(&r, sizeof r, 0) != static_cast<ssize_t>(sizeof r)) r = static_cast<uint64_t>(::getpid()) << 32;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(r));
  return hex;
}

}  // namespace

ProbeScratch::~ProbeScratch() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  // Only names that are still the runner's own object (the fresh name, or
  // the second name it was renamed or linked to): never what another
  // process put there.
  if (dir_.valid())
    for (const std::string& name : names_) {
      struct stat st;
      if (::fstatat(dir_.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_ino == ino_ && st.st_dev == dev_)
        ::unlinkat(dir_.get(), name.c_str(), S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0);
    }
  for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) ::rmdir(it->c_str());
}

std::string ProbeScratch::Prepare(RegressProbe* p, const std::string& run_as, const std::string& self) {
  const std::string tag = "cordon-regress-" + std::to_string(::getpid()) + "-" + RandomHex();
  const std::string& kind = p->kind;
  const bool beside = kind == "file.unlink" || kind == "file.rename" || kind == "file.link";
  auto who = IdentityOf(run_as);
  if (!who) return who.error().ToString();
  if (beside) {
    auto raw = UnescapeWorkloadBytes(p->path);
    if (!raw || raw->empty() || (*raw)[0] != '/' || raw->find('\0') != std::string::npos)
      return "";  // NoProbeReason or the probe says so
    const size_t slash = raw->rfind('/');
    char resolved[PATH_MAX];
    if (!::realpath(slash == 0 ? "/" : raw->substr(0, slash).c_str(), resolved))
      return "the recorded path's directory cannot be examined now (" + ErrnoName(errno) +
             "): no fresh name can be made beside the recorded path";
    const std::string dir = resolved;
    for (const char* own : {"/var/lib/cordon", "/run/cordon", "/var/log/cordon", "/etc/cordon"})
      if (dir == own || dir.rfind(std::string(own) + "/", 0) == 0)
        return "the recorded path " + p->path + " is in cordon's own state (" + own + "): no fresh name is made there";
    // The directory as resolved, with no symlink on the way (a component
    // swapped for one since is refused), kept for every later step.
    open_how how{};
    how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
    how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    dir_ = UniqueFd(static_cast<int>(::syscall(SYS_openat2, AT_FDCWD, dir.c_str(), &how, sizeof how)));
    if (!dir_.valid())
      return "the recorded path's directory " + EscapeWorkloadBytes(dir) + " cannot be opened now (" +
             ErrnoName(errno) + "): no fresh name can be made beside the recorded path";
    struct statfs fs;
    struct stat st;
    if (::fstatfs(dir_.get(), &fs) != 0 || ::fstat(dir_.get(), &st) != 0)
      return "the recorded path's directory " + EscapeWorkloadBytes(dir) + ": " + ErrnoName(errno);
    if (PseudoFileSystem(fs.f_type))
      return "the recorded path's directory " + EscapeWorkloadBytes(dir) +
             " is on a kernel file system (proc, sysfs, cgroup, bpf, tracefs, configfs, ...), where a name made is a "
             "kernel object: not probed";
    // The kernel's file-mode checks come after the LSMs' path hooks but
    // would refuse a name made, moved or linked where the policy now allows
    // it, and a layer cannot be told from them (Landlock's refusals are
    // EACCES too): the directory must let the run's identity write there.
    const bool root = who->has_value() && (*who)->uid == 0;
    if (!ModeAllows(st, *who, 3) && !(root && st.st_uid == 0 && (st.st_mode & S_IWUSR)))
      return "the recorded path's directory " + EscapeWorkloadBytes(dir) + " does not let the policy's identity (" +
             IdentityName(run_as) +
             ") write there: the file mode would refuse the probe as Landlock does, and the two cannot be told apart";
    const bool sticky = st.st_mode & S_ISVTX;
    if ((sticky || kind == "file.link") && !who->has_value() && (sticky || ProtectedHardlinks()))
      return sticky ? "the recorded path's directory is sticky and the policy runs its command as a dynamic uid, "
                      "which cannot own the fresh name: the file mode would refuse the probe before cordon's rule"
                    : "fs.protected_hardlinks lets only a file's owner link it, and the policy runs its command as "
                      "a dynamic uid, which cannot own the fresh name: the probe could not make the link";
    const std::string name = "." + tag;
    const bool as_dir = kind == "file.unlink" && ::lstat(raw->c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    if (as_dir) {
      if (::mkdirat(dir_.get(), name.c_str(), 0700) != 0)
        return "a fresh directory beside the recorded path: " + ErrnoName(errno);
    } else {
      UniqueFd made(::openat(dir_.get(), name.c_str(), O_CREAT | O_EXCL | O_NOFOLLOW | O_WRONLY | O_CLOEXEC, 0600));
      if (!made.valid()) return "a fresh name beside the recorded path: " + ErrnoName(errno);
    }
    if (::fstatat(dir_.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
      return "a fresh name beside the recorded path: " + ErrnoName(errno);
    ino_ = st.st_ino;
    dev_ = st.st_dev;
    names_ = {name, name + ".2"};  // ScratchSecondName
    // Owned by the run's identity (mode 0600): it may remove, move or link it,
    // and nobody else may write it or link it.
    if (who->has_value() && ::fchownat(dir_.get(), name.c_str(), (*who)->uid, (*who)->gid, AT_SYMLINK_NOFOLLOW) != 0)
      return "a fresh name beside the recorded path: chown: " + ErrnoName(errno);
    p->scratch = EscapeWorkloadBytes((dir == "/" ? "" : dir) + "/" + name);
    return "";
  }
  if (kind == "tamper.sysctl" && p->arg) {
    // A write of nothing still runs the handler, and some act on any write
    // (vm/drop_caches, vm/compact_memory, route/flush, conf/all/*): only the
    // sysctls of the namespaces cordon run gives each command its own of
    // (UTS, IPC) are written, and as root (only root may open one to write).
    bool namespaced = false;
    for (const char* prefix :
         {"kernel/hostname", "kernel/domainname", "kernel/msg", "kernel/sem", "kernel/shm", "fs/mqueue/"})
      namespaced = namespaced || p->path.rfind(prefix, 0) == 0;
    if (!namespaced)
      return "a write of " + p->path +
             " would act on the host where cordon let it through (its handler runs even for a write of nothing): "
             "only the sysctls of the UTS and IPC namespaces cordon run gives the command are written";
    if (!who->has_value() || (*who)->uid != 0)
      return "the policy runs its command as " + IdentityName(run_as) +
             ": only root may open a sysctl for writing, so the file mode would refuse the probe before cordon's "
             "rule";
    return "";
  }
  if (kind == "tamper.signal" || kind == "tamper.ptrace") {
    if (!who->has_value())
      return "the policy runs its command as a dynamic uid (spec.runAs): no process outside the sandbox has it, so "
             "the kernel's own credential check would refuse the probe before cordon's rule";
    if (self.empty()) return "cordon's own executable is unknown: no stand-in process";
    const uid_t uid = (*who)->uid;
    const gid_t gid = (*who)->gid;
    int ready[2];
    if (::pipe2(ready, O_CLOEXEC) != 0) return std::string("a stand-in process: pipe: ") + ErrnoName(errno);
    const pid_t parent = ::getpid();
    const char* argv[] = {self.c_str(), "regress", "stand-in", nullptr};
    const char* envp[] = {nullptr};
    const pid_t pid = ::fork();
    if (pid < 0) {
      ::close(ready[0]);
      ::close(ready[1]);
      return std::string("a stand-in process: fork: ") + ErrnoName(errno);
    }
    if (pid == 0) {
      // Only async-signal-safe calls: the runner may have threads. Then an
      // exec of cordon's stand-in mode: nothing of the runner (its memory,
      // environment, descriptors) is left in a process that other processes
      // of the run's uid may read.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);
      const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
      if (null < 0 || ::dup2(null, 0) < 0 || ::dup2(null, 1) < 0 || ::dup2(null, 2) < 0 || ::dup2(ready[1], 3) < 0)
        ::_exit(1);
      ::syscall(SYS_close_range, 4u, ~0u, 0u);
      // No capabilities after the exec (a root stand-in would get every one
      // back): a tracer must hold every capability its tracee has, so the
      // kernel's own check would refuse a sandboxed root before cordon's rule.
      for (int cap = 0; cap < 64; ++cap) ::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
      if (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0) ::_exit(1);
      ::execve(argv[0], const_cast<char* const*>(argv), const_cast<char* const*>(envp));
      ::_exit(127);
    }
    ::close(ready[1]);
    pid_ = pid;
    char c = 0;
    ssize_t n;
    do n = ::read(ready[0], &c, 1);
    while (n < 0 && errno == EINTR);
    ::close(ready[0]);
    if (n != 1) return "a stand-in process as " + IdentityName(run_as) + " did not start";
    p->target_pid = static_cast<uint32_t>(pid);
    return "";
  }
  if (kind == "tamper.cgroup") {
    auto root = FindCgroup2Mount();
    if (!root) return "a scratch cgroup: " + root.error().ToString();
    const std::string dir = *root + "/" + tag;
    if (::mkdir(dir.c_str(), 0755) != 0) return "a scratch cgroup " + dir + ": " + ErrnoName(errno);
    dirs_.push_back(dir);
    struct stat st;
    // Any uid may open it: only cordon's rule refuses (a move needs write
    // access to the common ancestor's cgroup.procs too: the root's, 0644).
    if (::chmod((dir + "/cgroup.procs").c_str(), 0666) != 0 || ::stat(dir.c_str(), &st) != 0)
      return "a scratch cgroup " + dir + ": " + ErrnoName(errno);
    p->scratch = dir;
    p->arg = static_cast<uint32_t>(st.st_ino);  // the cgroup's id, as the event gives it (low 32 bits)
    return "";
  }
  if (kind == "tamper.device") {
    // The device's own node in /dev (never one made for the probe: a node of
    // a raw device that other users could open, however briefly, would hand
    // them the device). access(2) opens nothing.
    const mode_t type = p->type == "block" ? S_IFBLK : S_IFCHR;
    const dev_t dev = makedev(p->arg >> 20, p->arg & 0xfffff);
    std::string node = DeviceNode("/dev", type, dev, 0);
    if (node.empty()) return "no node of " + p->Target() + " in /dev to ask the device check with";
    // The kernel's file-mode check comes before the device check: a mode the
    // run's identity fails would refuse the probe before cordon's rule.
    struct stat st;
    const unsigned want =
        (p->access.find("read") != std::string::npos ? 4 : 0) | (p->access.find("write") != std::string::npos ? 2 : 0);
    const bool root = who->has_value() && (*who)->uid == 0;
    if (::stat(node.c_str(), &st) == 0 && !ModeAllows(st, *who, want) && !(root && st.st_uid == 0))
      return "the device's node " + node + " does not let the policy's identity (" + IdentityName(run_as) + ") " +
             p->access + " it: the file mode would refuse the probe before the device check";
    p->scratch = EscapeWorkloadBytes(node);
    return "";
  }
  return "";
}

std::optional<SocketCall> SocketOf(const RegressProbe& p) {
  // The number whose name the decoder writes (or the number it writes).
  auto number = [](const std::string& name, std::string (*name_of)(uint32_t), uint32_t max) -> std::optional<int> {
    if (name.empty() || name.size() > 16) return std::nullopt;
    if (name.find_first_not_of("0123456789") == std::string::npos) {
      const unsigned long n = std::strtoul(name.c_str(), nullptr, 10);
      return n <= max ? std::optional<int>(static_cast<int>(n)) : std::nullopt;
    }
    for (uint32_t n = 0; n <= max; ++n)
      if (name_of(n) == name) return static_cast<int>(n);
    return std::nullopt;
  };
  auto family = number(p.family, SocketFamilyName, 63);   // AF_MAX is below 64
  auto type = number(p.type, SocketTypeName, 15);         // the type without its flags
  auto protocol = number(p.protocol, ProtocolName, 511);  // IPPROTO_MPTCP is 262
  if (!family || !type || !protocol) return std::nullopt;
  return SocketCall{*family, *type, *protocol};
}

std::string ProbePrecondition(const RegressProbe& p) {
  if (p.kind != "file.create" && p.kind != "file.setattr") return "";
  auto raw = UnescapeWorkloadBytes(p.path);
  if (!raw) return "";  // the probe says so
  struct stat st;
  const bool exists = ::fstatat(AT_FDCWD, raw->c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
  const int error = errno;
  if (p.kind == "file.create")
    return exists ? "the recorded path " + p.path +
                        " exists now: creating it cannot be probed (only a name the "
                        "probe itself made could be removed)"
                  : "";
  if (!exists)
    return "the recorded path " + p.path + " cannot be examined now (" + ErrnoName(error) + "): no mode to set again";
  if (S_ISLNK(st.st_mode))
    return "the recorded path " + p.path + " is a symlink now: chmod would change its target, not the link";
  return "";
}

std::optional<ProbeResult> RunProbe(const RegressProbe& p) {
  if (!NoProbeReason(p).empty()) return std::nullopt;
  if (p.syscall) return SeccompProbe(p);
  if (const RegressProbe call = SeccompFormOf(p); call.syscall) return SeccompProbe(call);
  if (p.kind == "net.connect" || p.kind == "net.sendmsg" || p.kind == "net.bind") return NetProbe(p);
  if (p.kind == "net.socket") return SocketProbe(p);
  if (p.kind == "tamper.bpf") return BpfProbe(p.arg);
  if (p.kind == "net.sockopt") return SockoptProbe(p.level, p.option);
  if (p.kind == "tamper.signal") return SignalProbe(p);
  if (p.kind == "tamper.ptrace") return PtraceProbe(p);
  if (p.kind == "tamper.cgroup") return CgroupProbe(p);
  if (p.kind == "tamper.device") return DeviceProbe(p);
  if (p.kind == "tamper.sysctl") return SysctlProbe(p);
  auto raw = UnescapeWorkloadBytes(p.path);
  if (!raw) return Failed("path", EINVAL, "not in the escaped form of events");
  if (p.kind == "net.unix") return UnixProbe(*raw);
  if (p.kind == "file.open") return OpenProbe(*raw, p.access);
  if (p.kind == "file.exec") return ExecProbe(*raw);
  if (p.kind == "file.create") return CreateProbe(*raw);
  if (p.kind == "file.setattr") return SetattrProbe(*raw);
  if (p.kind == "file.mmap_exec") return MmapExecProbe(*raw);
  if (p.kind == "file.unlink" || p.kind == "file.rename" || p.kind == "file.link") return BesideProbe(p);
  return std::nullopt;
}

}  // namespace cordon::ops
