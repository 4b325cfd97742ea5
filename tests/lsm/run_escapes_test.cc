// Issue 12's escapes under `cordon run` (the attach-mode tests are in
// lsm_test.cc). The workload here is this very binary, started by cordon run
// as `lsm_tests --cordon-probe NAME ARGS...`: a constructor runs the probe
// before gtest's main and prints `name=result` lines (0 or an errno).
//
// In run mode the command is confined by three layers, in this order:
// seccomp (refuses mounts, io_uring, acct, namespaces, TIOCSTI/inode-flag
// ioctls, F_SETOWN, access mode 3 by syscall number and arguments), Landlock
// (file rules, on opens and path operations) and BPF LSM. Each probe is run
//   1. unconfined (the negative control: the probe works),
//   2. under cordon run as the default dynamic uid without capabilities,
//   3. with --user root and a policy granting the capabilities the kernel
//      would want (sys_admin, sys_pacct), where DAC or a capability check
//      would otherwise refuse first: what still refuses is cordon,
//   4. where BPF LSM is usable, as 3 in audit mode: seccomp and Landlock are
//      not applied, so BPF LSM is the layer that decides (allows and reports
//      with verdict "audited"): its hooks see these paths for cordon run's
//      workloads too.
// and every refusal is asserted with its errno and the event of the layer
// that refused (seccomp and Landlock refusals are reported by the detect
// tracepoint at system call exit, enforcement "seccomp" / "landlock").
// Where BPF LSM decides in enforce mode (uses of descriptors opened outside,
// signals through an owner set outside), that is asserted too.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/mount.h>
#include <sched.h>
#include <signal.h>
#include <sys/acct.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "confine/seccomp.h"
#include "events/decoder.h"
#include "tests/integration/harness.h"
#include "tests/lsm/probes.h"

namespace cordon::test {
namespace {

// ---- the probe side (runs inside cordon run, or unconfined as the control)

int Errno(long r) { return r < 0 ? errno : 0; }
int CloseOk(long fd) {
  if (fd < 0) return errno;
  ::close(static_cast<int>(fd));
  return 0;
}
int PreadErrno(int fd) {
  char b[4];
  return ::pread(fd, b, sizeof b, 0) >= 0 ? 0 : errno;
}
// A forked child's exit status (its body's result), 200 if it died otherwise.
template <typename F>
int InForkedChild(F body) {
  pid_t pid = ::fork();
  if (pid == 0) _exit(body());
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return 201;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 200;
}

using Args = std::vector<std::string>;
std::string Line(const char* name, long value) { return std::string(name) + "=" + std::to_string(value) + "\n"; }
int Fd(const Args& a, size_t i) { return i < a.size() ? std::atoi(a[i].c_str()) : -1; }

// args: tree root, a tmpfs fs context made outside (fsmount), acct file ("-": none)
std::string ProbeMounts(const Args& a) {
  std::string out;
  out += Line("open_tree", CloseOk(OpenTreeClone(a[0])));
  out += Line("fsopen", CloseOk(::syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC)));
  out += Line("fspick", CloseOk(::syscall(SYS_fspick, AT_FDCWD, "/", FSPICK_CLOEXEC)));
  out += Line("fsmount", CloseOk(::syscall(SYS_fsmount, Fd(a, 1), FSMOUNT_CLOEXEC, 0)));
  out += Line("unshare_mnt", InForkedChild([] { return ::unshare(CLONE_NEWNS) ? errno : 0; }));
  if (a[2] != "-") {
    int r = Errno(::acct(a[2].c_str()));
    if (r == 0) ::acct(nullptr);  // host-wide: off again at once
    out += Line("acct", r);
  }
  return out;
}

// args: O_PATH handles (secret and in below a detached clone, secret from a
// dead mount namespace) and O_RDONLY descriptors of secret/key through both.
std::string ProbeDetached(const Args& a) {
  std::string out;
  out += Line("open_detached", OpenAtErrno(Fd(a, 0), "key", O_RDONLY));
  out += Line("open_detached_in", OpenAtErrno(Fd(a, 1), "input.txt", O_RDONLY));
  out += Line("open_foreign", OpenAtErrno(Fd(a, 2), "key", O_RDONLY));
  out += Line("read_detached", PreadErrno(Fd(a, 3)));
  out += Line("read_foreign", PreadErrno(Fd(a, 4)));
  return out;
}

// args: a plain ring made outside, the secret's path
std::string ProbeUring(const Args& a) {
  std::string out;
  {
    Uring ring;
    out += Line("setup", ring.error());
    int r = ring.error();
    if (!r) {
      int id = ring.RegisterPersonality();
      r = id <= 0 ? 1000 - id : -ring.OpenAt(a[1], O_RDONLY, id, /*async=*/false);
    }
    out += Line("personality_open", r);
  }
  {
    Uring sqpoll(IORING_SETUP_SQPOLL);
    out += Line("sqpoll", sqpoll.error());
  }
  int kept = Fd(a, 0);
  long id = ::syscall(SYS_io_uring_register, kept, IORING_REGISTER_PERSONALITY, nullptr, 0);
  out += Line("kept_register", Errno(id));
  out += Line("kept_enter", Errno(::syscall(SYS_io_uring_enter, kept, 0, 0, 0, nullptr, 0)));
  return out;
}

// args: the directory to crash in. dumped=1 if the kernel wrote a core. A
// second crash there with RLIMIT_CORE 0 (no core can be written) must not be
// reported as a core dump.
std::string ProbeCoreDump(const Args& a) {
  auto crash = [&](bool allow_core) {
    pid_t pid = ::fork();
    if (pid == 0) {
      struct rlimit rl;
      ::getrlimit(RLIMIT_CORE, &rl);
      rl.rlim_cur = allow_core ? rl.rlim_max : 0;
      ::setrlimit(RLIMIT_CORE, &rl);
      if (::chdir(a[0].c_str())) _exit(1);
      ::signal(SIGABRT, SIG_DFL);
      ::abort();
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return status;
  };
  int status = crash(true);
  int no_core = crash(false);
  struct rlimit rl;
  ::getrlimit(RLIMIT_CORE, &rl);
  // What a refusal must not be mistaken for: no core allowed at all.
  return Line("crashed", WIFSIGNALED(status)) + Line("dumped", WIFSIGNALED(status) && WCOREDUMP(status)) +
         Line("crashed_without_core", WIFSIGNALED(no_core) && !WCOREDUMP(no_core)) +
         Line("core_allowed", rl.rlim_max != 0) + Line("dumpable", ::prctl(PR_GET_DUMPABLE));
}

// args: a readable file's path, a kept pty slave, a kept descriptor of that file
std::string ProbeIoctls(const Args& a) {
  std::string out;
  out += Line("open_mode3", CloseOk(::open(a[0].c_str(), 3 | O_CLOEXEC)));
  char c = 'x';
  out += Line("tiocsti", Errno(::ioctl(Fd(a, 1), TIOCSTI, &c)));
  int flags = 0;
  ::ioctl(Fd(a, 2), kFsIocGetflags, &flags);
  out += Line("setflags", Errno(::ioctl(Fd(a, 2), kFsIocSetflags, &flags)));  // to what they are
  return out;
}

// args: a pid outside; a kept pipe whose read end's owner was set outside
// (read end, write end); a kept pipe armed entirely outside (owner,
// F_SETSIG, O_ASYNC: read end, write end), or "-".
std::string ProbeSigio(const Args& a) {
  std::string out;
  pid_t victim = Fd(a, 0);
  int p[2];
  if (::pipe2(p, O_CLOEXEC)) return "pipe=1\n";
  int r = ArmSigio(p[0], victim, SIGKILL);
  if (r == 0) r = ::write(p[1], "x", 1) == 1 ? 0 : 4000 + errno;
  out += Line("setown", r);
  ::close(p[0]);
  ::close(p[1]);
  int sv[2];  // FIOSETOWN is a socket ioctl
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
    out += Line("fiosetown", 3000 + errno);
  } else {
    out += Line("fiosetown", Errno(::ioctl(sv[0], FIOSETOWN, &victim)));
    ::close(sv[0]);
    ::close(sv[1]);
  }
  // The owner was set outside: the signal and the trigger are the command's.
  int rfd = Fd(a, 1), wfd = Fd(a, 2);
  r = ::fcntl(rfd, F_SETSIG, SIGKILL) ? 1000 + errno : 0;
  if (!r) r = ::fcntl(rfd, F_SETFL, ::fcntl(rfd, F_GETFL) | O_ASYNC) ? 2000 + errno : 0;
  if (!r) r = ::write(wfd, "x", 1) == 1 ? 0 : 4000 + errno;
  out += Line("outside_owner", r);
  // Armed outside: only the trigger is the command's.
  if (a.size() > 4 && a[3] != "-") out += Line("outside_armed", ::write(Fd(a, 4), "x", 1) == 1 ? 0 : errno);
  return out;
}

// args: a readable file, a directory the command may not write, one it may
// write, a pid outside the sandbox (signalled SIGWINCH: ignored by default).
// Each line is the errno of one refusal-prone call (0: it worked).
std::string ProbeRefusals(const Args& a) {
  std::string out;
  {
    struct {
      struct file_handle h;
      unsigned char bytes[128];
    } fh = {};
    fh.h.handle_bytes = sizeof fh.bytes;
    int mount_id = 0;
    int r = ::name_to_handle_at(AT_FDCWD, a[0].c_str(), &fh.h, &mount_id, 0) ? errno : 0;
    out += Line("name_to_handle", r);
    int dir = ::open(a[0].substr(0, a[0].rfind('/')).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    out += Line("open_by_handle", r ? 1000 + r : CloseOk(::syscall(SYS_open_by_handle_at, dir, &fh.h, O_RDONLY | O_CLOEXEC)));
    if (dir >= 0) ::close(dir);
  }
  {
    // The same through a handle of a file the policy does not let it read.
    struct {
      struct file_handle h;
      unsigned char bytes[128];
    } fh = {};
    fh.h.handle_bytes = sizeof fh.bytes;
    int mount_id = 0;
    int r = ::name_to_handle_at(AT_FDCWD, a[4].c_str(), &fh.h, &mount_id, 0) ? errno : 0;
    int dir = ::open(a[0].substr(0, a[0].rfind('/')).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    out += Line("open_by_handle_secret",
                r ? 1000 + r : CloseOk(::syscall(SYS_open_by_handle_at, dir, &fh.h, O_RDONLY | O_CLOEXEC)));
    if (dir >= 0) ::close(dir);
  }
  {
    std::string name = "/cordon-refusal-" + std::to_string(::getpid());
    long q = ::syscall(SYS_mq_open, name.c_str() + 1, O_CREAT | O_RDWR | O_CLOEXEC, 0600, nullptr);
    out += Line("mq_open", q < 0 ? errno : 0);
    if (q >= 0) {
      ::close(static_cast<int>(q));
      ::syscall(SYS_mq_unlink, name.c_str() + 1);
    }
  }
  auto bind_at = [](const std::string& dir) {
    int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return 3000 + errno;
    sockaddr_un addr = {};
    addr.sun_family = AF_UNIX;
    std::string path = dir + "/sock";
    std::memcpy(addr.sun_path, path.data(), std::min(path.size(), sizeof addr.sun_path - 1));
    int r = ::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) ? errno : 0;
    ::close(s);
    if (r == 0) ::unlink(path.c_str());
    return r;
  };
  out += Line("bind_forbidden", bind_at(a[1]));
  out += Line("bind_allowed", bind_at(a[2]));
  pid_t victim = Fd(a, 3);
  {
    long pidfd = ::syscall(SYS_pidfd_open, victim, 0);
    out += Line("pidfd_open", pidfd < 0 ? errno : 0);
    out += Line("pidfd_send_signal",
                pidfd < 0 ? 1000 : Errno(::syscall(SYS_pidfd_send_signal, static_cast<int>(pidfd), SIGWINCH, nullptr, 0)));
    if (pidfd >= 0) ::close(static_cast<int>(pidfd));
  }
  siginfo_t info = {};
  info.si_signo = SIGWINCH;
  info.si_code = SI_QUEUE;
  info.si_pid = ::getpid();
  info.si_uid = ::getuid();
  out += Line("rt_sigqueueinfo", Errno(::syscall(SYS_rt_sigqueueinfo, victim, SIGWINCH, &info)));
  out += Line("rt_tgsigqueueinfo", Errno(::syscall(SYS_rt_tgsigqueueinfo, victim, victim, SIGWINCH, &info)));
  {
    // A device opened read-only (the policy lets the command read it, not
    // write it): TCGETS is not among Landlock's always-allowed commands.
    int fd = ::open("/dev/zero", O_RDONLY | O_CLOEXEC);
    struct termios t;
    out += Line("ioctl_dev", fd < 0 ? 1000 + errno : Errno(::ioctl(fd, TCGETS, &t)));
    if (fd >= 0) ::close(fd);
  }
  return out;
}

// Every refusal of cordon run's seccomp filter, walked from the filter's own
// table (SeccompRefusalTable) and the argument-dependent refusals, one line
// each: <name>=<errno or 0>. Each call runs in a forked child in a session of
// its own (vhangup finds no terminal there; personality and namespaces stay
// the child's), with arguments the kernel itself rejects (-1: a bad
// descriptor, pointer, flag or clock), so the unconfined control changes
// nothing on the host and shows the call reached the kernel (not EPERM).
std::string ProbeSeccompWalk(const Args&) {
  std::string out;
  auto line = [&out](const std::string& name, int r) { out += name + "=" + std::to_string(r) + "\n"; };
  auto call = [](long nr, long a0, long a1, long a2, long a3 = -1, long a4 = -1, long a5 = -1) {
    return InForkedChild([=] {
      ::setsid();
      long r = ::syscall(nr, a0, a1, a2, a3, a4, a5);
      return r < 0 ? errno : 0;
    });
  };
  // The calls as SeccompCallFor makes them (cordon regress's probe makes the
  // same): the arguments judged, the rest invalid, pid (or who) 1.
  auto made = [&](uint32_t nr, uint32_t argument) {
    std::string why;
    auto c = SeccompCallFor(nr, argument, &why);
    if (!c) return 2000;  // not makeable: the line shows it
    return call(c->nr, c->args[0], c->args[1], c->args[2], c->args[3], c->args[4], c->args[5]);
  };
  const SeccompRefusals table = SeccompRefusalTable();
  for (const auto& s : table.syscalls) line("sys_" + s.name, made(s.nr, 0));
  for (const auto& s : table.on_other_processes) line("other_" + s.name, made(s.nr, 0));
  for (const auto& s : table.ioctls) line("ioctl_" + s.name, made(SYS_ioctl, s.nr));
  line("fcntl_F_SETOWN", made(SYS_fcntl, 1));
  line("fcntl_F_SETOWN_EX", made(SYS_fcntl, F_SETOWN_EX));
  line("fcntl_F_SETSIG", made(SYS_fcntl, F_SETSIG));
  line("fcntl_F_SETFL_O_ASYNC", made(SYS_fcntl, F_SETFL));
  for (long persona : {0x0040000L, 0x0100000L, 0x0200000L, 0x0400000L})
    line("personality_" + std::to_string(persona), made(SYS_personality, static_cast<uint32_t>(persona)));
  line("memfd_create", InForkedChild([] { return CloseOk(::syscall(SYS_memfd_create, "walk", 0)); }));
  line("open_mode3", InForkedChild([] { return CloseOk(::syscall(SYS_open, "/dev/null", O_ACCMODE)); }));
  line("openat_mode3", InForkedChild([] { return CloseOk(::syscall(SYS_openat, AT_FDCWD, "/dev/null", O_ACCMODE)); }));
  line("open_by_handle_at_mode3", call(SYS_open_by_handle_at, -1, 0, O_ACCMODE));
  const std::pair<const char*, long> namespaces[] = {
      {"NEWNS", CLONE_NEWNS},   {"NEWUTS", CLONE_NEWUTS},       {"NEWIPC", CLONE_NEWIPC}, {"NEWNET", CLONE_NEWNET},
      {"NEWPID", CLONE_NEWPID}, {"NEWCGROUP", CLONE_NEWCGROUP}, {"NEWTIME", 0x00000080L}, {"NEWUSER", CLONE_NEWUSER}};
  for (const auto& [name, flag] : namespaces) line(std::string("unshare_") + name, call(SYS_unshare, flag, 0, 0));
  line("clone_NEWUTS", InForkedChild([] {
         long r = ::syscall(SYS_clone, CLONE_NEWUTS | SIGCHLD, 0, 0, 0, 0);
         if (r == 0) _exit(0);  // the unconfined control's child
         if (r > 0) ::waitpid(static_cast<pid_t>(r), nullptr, 0);
         return r < 0 ? errno : 0;
       }));
  line("socket_netlink", InForkedChild([] { return CloseOk(::socket(AF_NETLINK, SOCK_RAW, 0)); }));
  line("socket_packet", InForkedChild([] { return CloseOk(::socket(AF_PACKET, SOCK_DGRAM, 0)); }));
  line("x32_getpid", call(0x40000000L | SYS_getpid, 0, 0, 0));
  return out;
}

// Every file access right of cordon run's Landlock ruleset, refused once each
// on the test's tree (args: in/ (read-only), secret/ (nothing), out/
// (writable)): <right>=<errno or 0>. As root with no capability for DAC to
// refuse first, an EACCES here is Landlock's.
std::string ProbeLandlockWalk(const Args& a) {
  const std::string in = a[0], secret = a[1], out_dir = a[2];
  std::string out;
  auto line = [&out](const char* name, int r) { out += Line(name, r); };
  line("read_file", CloseOk(::open((secret + "/key").c_str(), O_RDONLY | O_CLOEXEC)));
  line("read_dir", CloseOk(::open(secret.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)));
  line("write_file", CloseOk(::open((in + "/input.txt").c_str(), O_WRONLY | O_CLOEXEC)));
  line("execute", InForkedChild([&] {
         const std::string tool = in + "/tool";
         char* const argv[] = {const_cast<char*>(tool.c_str()), nullptr};
         ::execve(tool.c_str(), argv, environ);
         return errno;
       }));
  line("make_reg", CloseOk(::open((in + "/new").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600)));
  line("make_dir", Errno(::mkdir((in + "/newdir").c_str(), 0700)));
  line("make_sym", Errno(::symlink("x", (in + "/newlink").c_str())));
  line("make_fifo", Errno(::mknod((in + "/fifo").c_str(), S_IFIFO | 0600, 0)));
  line("make_char", Errno(::mknod((in + "/char").c_str(), S_IFCHR | 0600, makedev(1, 3))));
  line("make_block", Errno(::mknod((in + "/block").c_str(), S_IFBLK | 0600, makedev(7, 0))));
  {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s/sock", in.c_str());
    line("make_sock", fd < 0 ? 1000 + errno : Errno(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr)));
    if (fd >= 0) ::close(fd);
  }
  line("truncate", Errno(::truncate((in + "/input.txt").c_str(), 0)));
  line("remove_file", Errno(::unlink((in + "/input.txt").c_str())));
  line("remove_dir", Errno(::rmdir((in + "/sub").c_str())));
  const std::string mine = out_dir + "/mine";
  ::close(::open(mine.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
  line("link_into", Errno(::link(mine.c_str(), (in + "/mine").c_str())));
  line("rename_into", Errno(::rename(mine.c_str(), (secret + "/mine").c_str())));
  return out;
}

// An i386 system call from this 64-bit process: int $0x80 with eax 20 (i386
// getpid). i386_getpid=0 when it returned this process's pid, the errno when
// it failed, 200 when the process died (a kernel without IA32 emulation
// faults on int 0x80; a filter that kills).
std::string ProbeI386(const Args&) {
  std::string out;
  out += Line("i386_getpid", InForkedChild([] {
                long r = 0;
                asm volatile("int $0x80" : "=a"(r) : "a"(20L) : "memory", "r8", "r9", "r10", "r11");
                const int ret = static_cast<int>(r);  // the i386 ABI returns an int in eax
                return ret == ::getpid() ? 0 : ret < 0 && ret > -4096 ? -ret : 199;
              }));
  return out;
}

__attribute__((constructor)) void ProbeMain(int argc, char** argv, char**) {
  if (argc < 3 || std::strcmp(argv[1], "--cordon-probe") != 0) return;
  std::string name = argv[2];
  Args args(argv + 3, argv + argc);
  std::string out = name == "mounts"          ? ProbeMounts(args)
                    : name == "detached"      ? ProbeDetached(args)
                    : name == "uring"         ? ProbeUring(args)
                    : name == "coredump"      ? ProbeCoreDump(args)
                    : name == "ioctls"        ? ProbeIoctls(args)
                    : name == "sigio"         ? ProbeSigio(args)
                    : name == "refusals"      ? ProbeRefusals(args)
                    : name == "seccomp_walk"  ? ProbeSeccompWalk(args)
                    : name == "landlock_walk" ? ProbeLandlockWalk(args)
                    : name == "i386"          ? ProbeI386(args)
                                              : "unknown=" + name + "\n";
  size_t off = 0;
  while (off < out.size()) {
    ssize_t n = ::write(1, out.data() + off, out.size() - off);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  _exit(0);
}

// ---- the test side

std::string Self() {
  char buf[4096] = {};
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
std::map<std::string, std::string> Fields(const std::string& out) {
  std::map<std::string, std::string> m;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    size_t eq = line.find('=');
    if (eq != std::string::npos) m[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return m;
}

std::string E(int err) { return std::to_string(err); }

// Events of `kind` by `enforcement` with `verdict`; `match` narrows further.
int Count(const std::vector<cordon::v1::AuditEvent>& events, const std::string& kind, const std::string& enforcement,
          const std::string& verdict, const std::function<bool(const cordon::v1::AuditEvent&)>& match = nullptr) {
  // Refusals, not records: the same refusal again within a second is
  // counted in the kernel (README "Repeats": the record says x N).
  int n = 0;
  for (const auto& e : events)
    if (e.kind() == kind && e.enforcement() == enforcement && e.verdict() == verdict && (!match || match(e)))
      n += static_cast<int>(Occurrences(e));
  return n;
}
size_t Refusals(const std::vector<cordon::v1::AuditEvent>& events) {
  size_t n = 0;
  for (const auto& e : events) n += Occurrences(e);
  return n;
}
auto Syscall(uint32_t nr) {
  return [nr](const cordon::v1::AuditEvent& e) { return e.target().arg() == nr; };
}
auto Path(const std::string& suffix) {
  return [suffix](const cordon::v1::AuditEvent& e) { return EndsWith(e.file().path(), suffix); };
}

int LandlockAbi() {
  long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, 1 /* LANDLOCK_CREATE_RULESET_VERSION */);
  return abi > 0 ? static_cast<int>(abi) : 0;
}

// Descriptors handed to the command (--keep-fd): inheritable, closed at the end.
class KeptFds {
 public:
  ~KeptFds() {
    for (int fd : fds_) ::close(fd);
  }
  int Add(int fd) {
    if (fd >= 0) {
      ::fcntl(fd, F_SETFD, 0);
      fds_.push_back(fd);
    }
    return fd;
  }
  std::vector<std::string> Options() const {
    std::vector<std::string> out;
    for (int fd : fds_) out.insert(out.end(), {"--keep-fd", std::to_string(fd)});
    return out;
  }

 private:
  std::vector<int> fds_;
};

enum class Who { kDynamic, kRoot, kRootAudit };
const char* WhoName(Who w) { return w == Who::kDynamic ? "dynamic" : w == Who::kRoot ? "root" : "root, audit mode"; }

class RunEscapes : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root";
    lsm_ = LsmUsableHere();
    const char* expect = std::getenv("CORDON_EXPECT_LSM");
    if (expect && std::string(expect) == "1") {
      ASSERT_TRUE(lsm_) << "this VM boots with bpf in lsm=: cordon must be able to enforce";
    }
    landlock_ = LandlockAbi() > 0;
    const std::string built = Self();
    ASSERT_FALSE(built.empty());
    char tmpl[] = "/tmp/cordon-runesc-XXXXXX";
    root_ = ::mkdtemp(tmpl);
    // Searchable by others: the dynamic uid must be refused by the policy,
    // not by this directory's mode.
    ::chmod(root_.c_str(), 0755);
    for (const char* d : {"in", "out", "secret", "bin"}) ::mkdir((root_ + "/" + d).c_str(), 0755);
    // The probe is this binary, run as the dynamic uid: a copy in the test's
    // own directory, since the build tree may sit below a directory others
    // cannot search (a checkout in /root, or in a 0700 mktemp directory).
    self_ = P("bin/lsm_tests");
    std::error_code ec;
    std::filesystem::copy_file(built, self_, std::filesystem::copy_options::overwrite_existing, ec);
    ASSERT_FALSE(ec) << "copy " << built << ": " << ec.message();
    ASSERT_EQ(::chmod(self_.c_str(), 0755), 0);
    WriteText(root_ + "/in/input.txt", "input\n");
    WriteText(root_ + "/secret/key", "TOP SECRET\n");
  }
  void TearDown() override {
    if (!root_.empty()) cordon::test::Run({"rm", "-rf", root_});
  }
  std::string P(const std::string& rel) const { return root_ + "/" + rel; }

  std::string Policy(Who who) const {
    std::string caps = who == Who::kDynamic ? "" : "  capabilities: [sys_admin, sys_pacct" + extra_caps_ + "]\n";
    return "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: run-escapes}\nspec:\n" + caps +
           "  files:\n    include: [runtime-minimal]\n    read: [" + P("in") + "]\n    write: [" + P("out") +
           "]\n    exec: [" + self_ + "]\n";
  }
  // The probe unconfined.
  std::map<std::string, std::string> Unconfined(const std::string& probe, const std::vector<std::string>& args) {
    std::vector<std::string> argv = {self_, "--cordon-probe", probe};
    argv.insert(argv.end(), args.begin(), args.end());
    CommandResult r = cordon::test::Run(argv);
    EXPECT_EQ(r.status, 0) << r.err;
    return Fields(r.out);
  }
  // The probe under cordon run; its events in *events.
  std::map<std::string, std::string> Confined(Who who, const std::string& probe, const std::vector<std::string>& args,
                                              const KeptFds& kept, std::vector<cordon::v1::AuditEvent>* events) {
    PolicyFile policy(Policy(who));
    std::string audit = P("audit-" + std::to_string(runs_++) + ".jsonl");
    std::vector<std::string> argv = {"run", "--quiet", "--policy", policy.path(), "--audit", audit};
    if (who != Who::kDynamic) argv.insert(argv.end(), {"--user", "root"});
    if (who == Who::kRootAudit) argv.insert(argv.end(), {"--mode", "audit"});
    auto keep = kept.Options();
    argv.insert(argv.end(), keep.begin(), keep.end());
    argv.insert(argv.end(), {"--", self_, "--cordon-probe", probe});
    argv.insert(argv.end(), args.begin(), args.end());
    CommandResult r = Cordon(argv);
    EXPECT_EQ(r.status, 0) << WhoName(who) << ": " << r.err << r.out;
    *events = ParseJsonLines(ReadText(audit));
    return Fields(r.out);
  }
  // The dynamic uid always; root with the capabilities granted where that
  // changes which check is reached (DAC, capabilities), else only in audit
  // mode (each cordon run costs seconds under the test VMs' TCG).
  std::vector<Who> Variants(bool root_enforce = false) const {
    std::vector<Who> out = {Who::kDynamic};
    if (root_enforce) out.push_back(Who::kRoot);
    if (lsm_) out.push_back(Who::kRootAudit);
    return out;
  }

  bool lsm_ = false, landlock_ = false;
  std::string self_, root_;
  std::string extra_caps_;  // appended to the root variants' capabilities
  int runs_ = 0;
};

// A fresh tmpfs context ready for fsmount (FSCONFIG_CMD_CREATE done).
int TmpfsContext() {
  int fd = static_cast<int>(::syscall(SYS_fsopen, "tmpfs", 0));
  if (fd < 0) return -1;
  if (::syscall(SYS_fsconfig, fd, FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// open_tree(OPEN_TREE_CLONE), the new mount API, mount namespaces and acct:
// seccomp refuses them by number in every variant (root with sys_admin and
// sys_pacct granted too), so BPF LSM never sees them under cordon run (its
// own refusal, for attached workloads, is Lsm.CapabilitiesNotGrantedAreRefused
// and Lsm.AcctIsRefusedForSandboxedRoot).
TEST_F(RunEscapes, NewMountApiMountNamespacesAndAcctAreRefused) {
  const std::string acct_file = P("out/acct");
  WriteText(acct_file, "");
  // acct() switches accounting on for the whole machine: the unconfined
  // control only in the test VMs (which run nothing else), never on a host
  // whose own accounting it would switch off again.
  const bool in_vm = std::getenv("CORDON_VM") != nullptr;
  {
    KeptFds control;
    int ctx = control.Add(TmpfsContext());
    ASSERT_GE(ctx, 0) << std::strerror(errno);
    auto f = Unconfined("mounts", {root_, std::to_string(ctx), in_vm ? acct_file : "-"});
    for (const char* k : {"open_tree", "fsopen", "fspick", "fsmount", "unshare_mnt"})
      EXPECT_EQ(f[k], "0") << k << " must work unconfined (the probe itself)";
    if (in_vm) {
      EXPECT_EQ(f["acct"], "0") << "acct must work unconfined";
    }
  }
  for (Who who : {Who::kDynamic, Who::kRoot}) {
    KeptFds kept;
    int ctx = kept.Add(TmpfsContext());
    ASSERT_GE(ctx, 0);
    std::vector<cordon::v1::AuditEvent> events;
    auto f = Confined(who, "mounts", {root_, std::to_string(ctx), acct_file}, kept, &events);
    for (const char* k : {"open_tree", "fsopen", "fspick", "fsmount", "unshare_mnt", "acct"})
      EXPECT_EQ(f[k], E(EPERM)) << WhoName(who) << ": " << k;
    for (uint32_t nr : {428u, 430u, 433u, 432u})  // open_tree, fsopen, fspick, fsmount
      EXPECT_EQ(Count(events, "tamper.mount", "seccomp", "denied", Syscall(nr)), 1)
          << WhoName(who) << ": syscall " << nr << "\n" << Dump(events);
    EXPECT_EQ(Count(events, "tamper.userns", "seccomp", "denied", Syscall(272)), 1) << WhoName(who) << Dump(events);
    EXPECT_EQ(Count(events, "tamper.acct", "seccomp", "denied", Syscall(163)), 1) << WhoName(who) << Dump(events);
  }
}

// A detached mount (an open_tree clone whose tree fd was closed) and a mount
// namespace that is gone (its creator unshared, sent its handles back and
// exited): handles below them, made outside, kept by the command. Opening a
// forbidden file through them is refused by Landlock (its walk stops at the
// detached root without a grant) or, without Landlock, by BPF LSM; reading
// through descriptors opened there is refused by BPF LSM (Landlock judges
// opens only).
TEST_F(RunEscapes, DetachedAndForeignMountHandlesAreJudged) {
  auto handles = [&](KeptFds* kept) -> std::vector<std::string> {
    int tree = OpenTreeClone(root_);
    if (tree < 0) return {};
    int secret = kept->Add(::openat(tree, "secret", O_PATH));
    int in = kept->Add(::openat(tree, "in", O_PATH));
    int key = kept->Add(::openat(tree, "secret/key", O_RDONLY));
    ::close(tree);  // detached from here on
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) return {};
    pid_t helper = ::fork();
    if (helper == 0) {
      if (::unshare(CLONE_NEWNS) != 0) _exit(1);
      int fds[2] = {::open(P("secret").c_str(), O_PATH), ::open(P("secret/key").c_str(), O_RDONLY)};
      char byte = 0;
      struct iovec iov = {&byte, 1};
      char control[CMSG_SPACE(sizeof fds)] = {};
      struct msghdr msg = {};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof fds);
      std::memcpy(CMSG_DATA(c), fds, sizeof fds);
      _exit(::sendmsg(sv[1], &msg, 0) == 1 ? 0 : 2);  // and its namespace goes with it
    }
    int status = 0;
    ::waitpid(helper, &status, 0);
    int fds[2] = {-1, -1};
    char byte;
    struct iovec iov = {&byte, 1};
    char control[CMSG_SPACE(sizeof fds)] = {};
    struct msghdr msg = {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n = ::recvmsg(sv[0], &msg, 0);
    ::close(sv[0]);
    ::close(sv[1]);
    struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
    if (n != 1 || !c || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return {};
    std::memcpy(fds, CMSG_DATA(c), sizeof fds);
    int foreign = kept->Add(fds[0]), foreign_key = kept->Add(fds[1]);
    if (secret < 0 || in < 0 || key < 0 || foreign < 0 || foreign_key < 0) return {};
    return {std::to_string(secret), std::to_string(in), std::to_string(foreign), std::to_string(key),
            std::to_string(foreign_key)};
  };
  const char* kAll[] = {"open_detached", "open_detached_in", "open_foreign", "read_detached", "read_foreign"};
  {
    KeptFds control;
    auto args = handles(&control);
    ASSERT_EQ(args.size(), 5u) << "handles: " << std::strerror(errno);
    auto f = Unconfined("detached", args);
    for (const char* k : kAll) EXPECT_EQ(f[k], "0") << k << " must work unconfined";
  }
  for (Who who : Variants()) {
    KeptFds kept;
    auto args = handles(&kept);
    ASSERT_EQ(args.size(), 5u);
    std::vector<cordon::v1::AuditEvent> events;
    auto f = Confined(who, "detached", args, kept, &events);
    EXPECT_EQ(f["open_detached_in"], "0") << WhoName(who) << ": the read rule names the object `in`";
    if (who == Who::kRootAudit) {
      for (const char* k : kAll) EXPECT_EQ(f[k], "0") << WhoName(who) << ": " << k;
      // Two opens and two reads (the first read of each descriptor; a
      // verdict is remembered per file).
      EXPECT_GE(Count(events, "file.open", "kernel-lsm", "audited", Path("/secret/key")), 4) << Dump(events);
      continue;
    }
    const std::string open_errno = landlock_ ? E(EACCES) : lsm_ ? E(EPERM) : "0";
    EXPECT_EQ(f["open_detached"], open_errno) << WhoName(who);
    EXPECT_EQ(f["open_foreign"], open_errno) << WhoName(who);
    if (landlock_) {
      // Reported by the detect tracepoint, with the path as written.
      EXPECT_EQ(Count(events, "file.open", "landlock", "denied", Path("key")), 2) << WhoName(who) << Dump(events);
    } else if (lsm_) {
      EXPECT_GE(Count(events, "file.open", "kernel-lsm", "denied", Path("/secret/key")), 2) << Dump(events);
    }
    if (lsm_) {
      EXPECT_EQ(f["read_detached"], E(EPERM)) << WhoName(who);
      EXPECT_EQ(f["read_foreign"], E(EPERM)) << WhoName(who);
      EXPECT_GE(Count(events, "file.open", "kernel-lsm", "denied",
                      [](const cordon::v1::AuditEvent& e) {
                        return EndsWith(e.file().path(), "/secret/key") && e.file().access() == "read";
                      }),
                2)
          << WhoName(who) << Dump(events);
    } else {
      // Landlock judges opens only: a descriptor opened outside stays usable.
      EXPECT_EQ(f["read_detached"], "0") << WhoName(who);
      EXPECT_EQ(f["read_foreign"], "0") << WhoName(who);
    }
  }
}

// io_uring personalities and SQPOLL (overridden credentials): seccomp refuses
// io_uring as a whole under cordon run, a ring made outside included.
TEST_F(RunEscapes, IoUringPersonalitiesAndSqpollAreRefused) {
  const char* kAll[] = {"setup", "personality_open", "sqpoll", "kept_register", "kept_enter"};
  {
    Uring ring;
    ASSERT_EQ(ring.error(), 0) << "io_uring unusable here";
    KeptFds control;
    int fd = control.Add(::dup(ring.fd()));
    auto f = Unconfined("uring", {std::to_string(fd), P("secret/key")});
    for (const char* k : kAll) EXPECT_EQ(f[k], "0") << k << " must work unconfined";
  }
  for (Who who : Variants()) {
    Uring ring;
    ASSERT_EQ(ring.error(), 0);
    KeptFds kept;
    int fd = kept.Add(::dup(ring.fd()));
    std::vector<cordon::v1::AuditEvent> events;
    auto f = Confined(who, "uring", {std::to_string(fd), P("secret/key")}, kept, &events);
    if (who == Who::kRootAudit) {
      for (const char* k : kAll) EXPECT_EQ(f[k], "0") << WhoName(who) << ": " << k;
      auto arg = [](uint32_t a) { return [a](const cordon::v1::AuditEvent& e) { return e.target().arg() == a; }; };
      EXPECT_GE(Count(events, "tamper.io_uring", "kernel-lsm", "audited", arg(1)), 1) << "personality" << Dump(events);
      EXPECT_EQ(Count(events, "tamper.io_uring", "kernel-lsm", "audited", arg(2)), 1) << "SQPOLL" << Dump(events);
      continue;
    }
    for (const char* k : kAll) EXPECT_EQ(f[k], E(EPERM)) << WhoName(who) << ": " << k;
    EXPECT_EQ(Count(events, "tamper.io_uring", "seccomp", "denied", Syscall(425)), 2)
        << WhoName(who) << ": the plain ring (for the personality) and the SQPOLL one\n" << Dump(events);
    EXPECT_EQ(Count(events, "tamper.io_uring", "seccomp", "denied", Syscall(427)), 1) << WhoName(who) << Dump(events);
    EXPECT_EQ(Count(events, "tamper.io_uring", "seccomp", "denied", Syscall(426)), 1) << WhoName(who) << Dump(events);
  }
}

// The core dump writer (overridden credentials) replacing a file in a
// directory the command may not write. Under enforcement Landlock refuses the
// writer's unlink and create before BPF LSM, without an event: no core is
// written, and BPF LSM's proc.coredump (cred_prepare of the writer) is the
// record, once per dump (not for the crash whose RLIMIT_CORE allows none). In
// audit mode BPF LSM's path_unlink also reports the writer's unlink (its
// credentials were prepared in the sandbox).
// Only the test's own directory is written; core_pattern is only read.
TEST_F(RunEscapes, CoreDumpCannotReplaceForbiddenFiles) {
  std::string pattern = ReadText("/proc/sys/kernel/core_pattern");
  if (pattern != "core\n") GTEST_SKIP() << "core_pattern is " << pattern << " (needs the kernel default, core)";
  const std::string core = P("secret/core");
  WriteText(core, "old\n");
  auto f = Unconfined("coredump", {P("secret")});
  ASSERT_EQ(f["dumped"], "1") << "no core dump unconfined (RLIMIT_CORE hard limit?)";
  EXPECT_NE(ReadText(core), "old\n");
  for (Who who : Variants(/*root_enforce=*/true)) {  // root: DAC would let it replace the file
    WriteText(core, "old\n");
    ::chmod(core.c_str(), 0644);
    KeptFds none;
    std::vector<cordon::v1::AuditEvent> events;
    auto g = Confined(who, "coredump", {P("secret")}, none, &events);
    EXPECT_EQ(g["crashed"], "1") << WhoName(who);
    EXPECT_EQ(g["crashed_without_core"], "1") << WhoName(who);
    EXPECT_EQ(g["core_allowed"], "1") << WhoName(who) << ": RLIMIT_CORE lets the command dump";
    EXPECT_EQ(g["dumpable"], "1") << WhoName(who) << ": the command is dumpable";
    // Without BPF LSM there is nothing that sees a core dump begin.
    EXPECT_EQ(Count(events, "proc.coredump", "kernel-lsm", "detected", Path("/secret")), lsm_ ? 1 : 0)
        << WhoName(who) << Dump(events);
    if (who == Who::kRootAudit) {
      EXPECT_EQ(g["dumped"], "1") << WhoName(who);
      EXPECT_NE(ReadText(core), "old\n");
      EXPECT_GE(Count(events, "file.unlink", "kernel-lsm", "audited", Path("/secret/core")), 1) << Dump(events);
      continue;
    }
    EXPECT_EQ(g["dumped"], "0") << WhoName(who);
    EXPECT_EQ(ReadText(core), "old\n") << WhoName(who);
  }
}

// Access mode 3 and the ioctls it would enable: terminal injection and inode
// flags, on descriptors the command keeps. seccomp refuses them by argument.
TEST_F(RunEscapes, AccessMode3TerminalInjectionAndInodeFlagsAreRefused) {
  int master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  ASSERT_GE(master, 0);
  ASSERT_EQ(::grantpt(master), 0);
  ASSERT_EQ(::unlockpt(master), 0);
  struct CloseMaster {
    int fd;
    ~CloseMaster() { ::close(fd); }
  } close_master{master};
  const std::string slave_path = ::ptsname(master);
  const std::string input = P("in/input.txt");
  auto drain = [&] {
    char buf[16];
    int fl = ::fcntl(master, F_GETFL);
    ::fcntl(master, F_SETFL, fl | O_NONBLOCK);
    ssize_t n = ::read(master, buf, sizeof buf);
    ::fcntl(master, F_SETFL, fl);
    return n;
  };
  auto fds = [&](KeptFds* kept) -> std::vector<std::string> {
    int slave = kept->Add(::open(slave_path.c_str(), O_RDWR | O_NOCTTY));
    int file = kept->Add(::open(input.c_str(), O_RDONLY));
    return {input, std::to_string(slave), std::to_string(file)};
  };
  const char* kAll[] = {"open_mode3", "tiocsti", "setflags"};
  {
    KeptFds control;
    auto f = Unconfined("ioctls", fds(&control));
    for (const char* k : kAll) EXPECT_EQ(f[k], "0") << k << " must work unconfined";
    EXPECT_EQ(drain(), 1) << "the unconfined TIOCSTI reached the pty";
  }
  for (Who who : Variants()) {
    KeptFds kept;
    std::vector<cordon::v1::AuditEvent> events;
    auto f = Confined(who, "ioctls", fds(&kept), kept, &events);
    if (who == Who::kRootAudit) {
      for (const char* k : kAll) EXPECT_EQ(f[k], "0") << WhoName(who) << ": " << k;
      EXPECT_EQ(drain(), 1);
      EXPECT_EQ(Count(events, "file.open", "kernel-lsm", "audited",
                      [](const cordon::v1::AuditEvent& e) {
                        return EndsWith(e.file().path(), "/in/input.txt") && e.file().access() == "read,write";
                      }),
                1)
          << Dump(events);
      EXPECT_EQ(Count(events, "tamper.terminal", "kernel-lsm", "audited"), 1) << Dump(events);
      EXPECT_EQ(Count(events, "file.ioctl", "kernel-lsm", "audited", Path("/in/input.txt")), 1) << Dump(events);
      continue;
    }
    for (const char* k : kAll) EXPECT_EQ(f[k], E(EPERM)) << WhoName(who) << ": " << k;
    EXPECT_EQ(drain(), -1) << WhoName(who) << ": nothing was injected";
    auto arg2 = [](uint32_t nr, uint32_t a) {
      return [nr, a](const cordon::v1::AuditEvent& e) { return e.target().arg() == nr && e.target().arg2() == a; };
    };
    EXPECT_EQ(Count(events, "file.open", "seccomp", "denied",
                    [](const cordon::v1::AuditEvent& e) { return (e.target().arg2() & 3) == 3; }),
              1)
        << WhoName(who) << Dump(events);
    EXPECT_EQ(Count(events, "tamper.terminal", "seccomp", "denied", arg2(16, TIOCSTI)), 1) << WhoName(who) << Dump(events);
    EXPECT_EQ(Count(events, "file.ioctl", "seccomp", "denied", arg2(16, kFsIocSetflags)), 1)
        << WhoName(who) << Dump(events);
  }
}

// Kills `pid` (our own child) with SIGTERM and reports the signal it died of:
// SIGKILL if one was already queued (a fatal signal makes the kernel drop the
// later SIGTERM), SIGTERM if not. No waiting on time.
int DeathSignal(pid_t pid) {
  ::kill(pid, SIGTERM);
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

// SIGIO through F_SETOWN + F_SETSIG(SIGKILL) + O_ASYNC. seccomp refuses
// F_SETOWN and FIOSETOWN to any pid, and F_SETSIG and O_ASYNC: on a
// descriptor the command keeps whose owner was set outside they would leave
// the signal and the trigger to the command. One armed entirely outside
// leaves it the trigger only: BPF LSM's file_send_sigiotask refuses that
// signal (without BPF LSM it is the caller's own arrangement: not run).
TEST_F(RunEscapes, SigioCannotSignalOutsideTheSandbox) {
  // Pipes whose read ends are owned by `owner` (the second one also armed
  // with SIGKILL and O_ASYNC), kept by the command.
  auto pipes = [&](KeptFds* kept, pid_t victim, pid_t owner, pid_t armed_owner) -> std::vector<std::string> {
    int p[2], q[2];
    if (::pipe(p) || ::pipe(q)) return {};
    for (int fd : {p[0], p[1], q[0], q[1]}) kept->Add(fd);
    if (::fcntl(p[0], F_SETOWN, owner)) return {};
    std::vector<std::string> args = {std::to_string(victim), std::to_string(p[0]), std::to_string(p[1])};
    if (armed_owner <= 0) return args.push_back("-"), args;
    if (ArmSigio(q[0], armed_owner, SIGKILL)) return {};
    args.insert(args.end(), {std::to_string(q[0]), std::to_string(q[1])});
    return args;
  };
  {
    pid_t v1 = SpawnSleeper(), v2 = SpawnSleeper(), v3 = SpawnSleeper();
    KeptFds control;
    auto args = pipes(&control, v1, v2, v3);
    ASSERT_EQ(args.size(), 5u);
    auto f = Unconfined("sigio", args);
    for (const char* k : {"setown", "fiosetown", "outside_owner", "outside_armed"}) EXPECT_EQ(f[k], "0") << k;
    EXPECT_EQ(DeathSignal(v1), SIGKILL) << "the unconfined probe kills through SIGIO";
    EXPECT_EQ(DeathSignal(v2), SIGKILL) << "the unconfined probe kills through an owner set outside";
    EXPECT_EQ(DeathSignal(v3), SIGKILL) << "the unconfined probe kills through a pipe armed outside";
  }
  auto signal_to = [](pid_t p, int sig) {
    return [p, sig](const cordon::v1::AuditEvent& e) {
      return e.target().pid() == static_cast<uint32_t>(p) && e.target().arg() == static_cast<uint32_t>(sig);
    };
  };
  for (Who who : Variants()) {
    pid_t v1 = SpawnSleeper(), v2 = SpawnSleeper(), v3 = lsm_ ? SpawnSleeper() : -1;
    KeptFds kept;
    auto args = pipes(&kept, v1, v2, v3);
    ASSERT_EQ(args.size(), lsm_ ? 5u : 4u);
    std::vector<cordon::v1::AuditEvent> events;
    auto f = Confined(who, "sigio", args, kept, &events);
    if (who == Who::kRootAudit) {
      for (const char* k : {"setown", "fiosetown", "outside_owner", "outside_armed"})
        EXPECT_EQ(f[k], "0") << WhoName(who) << ": " << k;
      for (pid_t v : {v1, v2, v3}) {
        EXPECT_EQ(DeathSignal(v), SIGKILL) << "audit mode allows";
        EXPECT_GE(Count(events, "tamper.signal", "kernel-lsm", "audited", signal_to(v, SIGKILL)), 1)
            << "pid " << v << Dump(events);
      }
      continue;
    }
    EXPECT_EQ(f["setown"], E(1000 + EPERM)) << WhoName(who) << ": F_SETOWN";
    EXPECT_EQ(f["fiosetown"], E(EPERM)) << WhoName(who);
    EXPECT_EQ(f["outside_owner"], E(1000 + EPERM)) << WhoName(who) << ": F_SETSIG";
    EXPECT_EQ(DeathSignal(v1), SIGTERM) << WhoName(who);
    EXPECT_EQ(DeathSignal(v2), SIGTERM) << WhoName(who);
    auto call = [](uint32_t nr, uint32_t a) {
      return [nr, a](const cordon::v1::AuditEvent& e) { return e.target().arg() == nr && e.target().arg2() == a; };
    };
    EXPECT_EQ(Count(events, "tamper.signal", "seccomp", "denied", call(72, static_cast<uint32_t>(v1))), 1)
        << WhoName(who) << ": F_SETOWN\n" << Dump(events);
    EXPECT_EQ(Count(events, "tamper.signal", "seccomp", "denied", call(16, FIOSETOWN)), 1) << WhoName(who) << Dump(events);
    EXPECT_EQ(Count(events, "tamper.signal", "seccomp", "denied", call(72, F_SETSIG)), 1)
        << WhoName(who) << ": F_SETSIG\n" << Dump(events);
    if (lsm_) {
      EXPECT_EQ(f["outside_armed"], "0") << WhoName(who) << ": the write succeeds, its signal is refused";
      EXPECT_EQ(DeathSignal(v3), SIGTERM) << WhoName(who) << ": killed through a pipe armed outside";
      EXPECT_EQ(Count(events, "tamper.signal", "kernel-lsm", "denied", signal_to(v3, SIGKILL)), 1)
          << WhoName(who) << Dump(events);
    }
  }
}

// Issue 16: every refusal of cordon run's Landlock ruleset produces exactly one
// event: each file access right it handles, refused once on the test's tree
// (in/ readable, secret/ nothing, out/ writable) as root, whom DAC would let
// do all of it. The control: the same probe unconfined succeeds at each. The
// ioctl right, mq_open and the scopes are RefusalsWithoutEventOfTheirOwnAre-
// Reported's; a right the kernel's Landlock does not have (truncate before
// ABI 3, refer before ABI 2) is not asserted.
TEST_F(RunEscapes, EveryLandlockRefusalIsReportedOnce) {
  if (!landlock_) GTEST_SKIP() << "no Landlock";
  auto prepare = [&] {
    WriteText(P("in/input.txt"), "input\n");
    WriteText(P("in/tool"), "#!/bin/sh\nexit 0\n");
    ::chmod(P("in/tool").c_str(), 0755);
    ::mkdir(P("in/sub").c_str(), 0755);
    for (const char* f : {"new", "newlink", "fifo", "char", "block", "sock", "mine"})
      ::unlink(P(std::string("in/") + f).c_str());
    ::rmdir(P("in/newdir").c_str());
    ::unlink(P("secret/mine").c_str());
  };
  const std::vector<std::string> args = {P("in"), P("secret"), P("out")};
  prepare();
  auto control = Unconfined("landlock_walk", args);
  ASSERT_EQ(control.size(), 16u);
  for (const auto& [name, result] : control) EXPECT_EQ(result, "0") << name << " must work unconfined";
  const int abi = LandlockAbi();
  auto handled = [abi](const std::string& name) {
    if (name == "truncate") return abi >= 3;
    if (name == "link_into" || name == "rename_into") return abi >= 2;
    return true;
  };
  // kind and the path the event names (its suffix), per probe line
  const std::map<std::string, std::pair<std::string, std::string>> expected = {
      {"read_file", {"file.open", "/secret/key"}},      {"read_dir", {"file.open", "/secret"}},
      {"write_file", {"file.open", "/in/input.txt"}},   {"execute", {"file.exec", "/in/tool"}},
      {"make_reg", {"file.open", "/in/new"}},           {"make_dir", {"file.create", "/in/newdir"}},
      {"make_sym", {"file.create", "/in/newlink"}},     {"make_fifo", {"file.create", "/in/fifo"}},
      {"make_char", {"file.create", "/in/char"}},       {"make_block", {"file.create", "/in/block"}},
      {"make_sock", {"file.create", "/in/sock"}},       {"remove_file", {"file.unlink", "/in/input.txt"}},
      {"remove_dir", {"file.unlink", "/in/sub"}},       {"link_into", {"file.link", "/in/mine"}},
      {"rename_into", {"file.rename", "/secret/mine"}}, {"truncate", {"file.setattr", "/in/input.txt"}},
  };
  prepare();
  KeptFds none;
  std::vector<cordon::v1::AuditEvent> events;
  auto f = Confined(Who::kRoot, "landlock_walk", args, none, &events);
  ASSERT_EQ(f.size(), control.size());
  int asserted = 0;
  for (const auto& [name, want] : expected) {
    if (!handled(name)) continue;
    ++asserted;
    // Landlock answers a link or rename that would gain rights with EXDEV
    // where the destination's rights are a superset, else EACCES.
    if (name == "link_into" || name == "rename_into") {
      EXPECT_TRUE(f[name] == E(EACCES) || f[name] == E(EXDEV)) << name << ": " << f[name];
    } else {
      EXPECT_EQ(f[name], E(EACCES)) << name;
    }
    // A link or rename names its source as written (the detect tracepoint
    // cannot tell which of the two directories Landlock refused).
    const bool two_paths = name == "link_into" || name == "rename_into";
    EXPECT_EQ(Count(events, want.first, "landlock", "denied",
                    [&](const cordon::v1::AuditEvent& e) {
                      return EndsWith(e.file().path(), want.second) ||
                             (two_paths && EndsWith(e.file().path(), "/out/mine"));
                    }),
              1)
        << name << ": one " << want.first << " event naming " << want.second << "\n"
        << Dump(events);
  }
  // Nothing else: one event per refusal.
  int landlock_events = 0;
  for (const auto& e : events) landlock_events += e.enforcement() == "landlock";
  EXPECT_EQ(landlock_events, asserted) << Dump(events);
}

// Issue 16: every refusal of cordon run's seccomp filter produces exactly one
// event. The walk is the filter's own table (SeccompRefusalTable: a refusal
// added there is walked here) and each argument-dependent refusal; each is
// made with arguments the kernel rejects by itself, so that the control
// (unconfined, as root) changes nothing and answers with the kernel's own
// errno, never EPERM; under cordon run each must be EPERM with one event of
// enforcement "seccomp" naming the call (target.arg) and its argument
// (target.arg2) where the filter judged one. Not walked: clone3 and openat2,
// which the filter answers with ENOSYS (a redirect to clone and openat, whose
// arguments it can read and which are walked), and the socket families the
// policy allows.
TEST_F(RunEscapes, EverySeccompRefusalIsReportedOnce) {
  auto control = Unconfined("seccomp_walk", {});
  ASSERT_GT(control.size(), 60u) << "the walk ran";
  // The host may refuse a call for root already (kexec or module loading
  // disabled, io_uring_disabled, lockdown): then an EPERM proves nothing
  // about cordon, and that call's event is not asserted (printed).
  std::set<std::string> host_refuses;
  // Calls whose arguments the filter judges succeed harmlessly in a child
  // (a personality, a namespace, a socket, an anonymous file, /dev/null in
  // access mode 3, vhangup without a terminal); every other call must be
  // refused by the kernel for its invalid arguments.
  auto may_succeed = [](const std::string& n) {
    for (const char* prefix : {"personality_", "unshare_", "socket_", "open_mode3", "openat_mode3"})
      if (n.rfind(prefix, 0) == 0) return true;
    return n == "memfd_create" || n == "clone_NEWUTS" || n == "sys_vhangup";
  };
  for (const auto& [name, result] : control) {
    if (result == E(EPERM)) host_refuses.insert(name);
    if (!may_succeed(name)) {
      EXPECT_NE(result, "0") << name << ": unconfined, the kernel refuses its invalid arguments";
    }
  }
  for (const auto& name : host_refuses) std::fprintf(stderr, "the host refuses %s for root already\n", name.c_str());
  EXPECT_LE(host_refuses.size(), 4u) << "too many calls the host refuses: the walk would prove little";
  auto arg = [](uint32_t nr, std::optional<uint32_t> shown = std::nullopt) {
    return [nr, shown](const cordon::v1::AuditEvent& e) {
      return e.target().arg() == nr && (!shown || e.target().arg2() == *shown);
    };
  };
  auto seccomp = [](const std::vector<cordon::v1::AuditEvent>& events,
                    const std::function<bool(const cordon::v1::AuditEvent&)>& m) {
    int n = 0;
    for (const auto& e : events) n += e.enforcement() == "seccomp" && e.verdict() == "denied" && m(e);
    return n;
  };
  const SeccompRefusals table = SeccompRefusalTable();
  for (Who who : Variants(/*root_enforce=*/true)) {
    if (who == Who::kRootAudit) continue;  // audit mode applies no seccomp filter
    KeptFds none;
    std::vector<cordon::v1::AuditEvent> events;
    auto f = Confined(who, "seccomp_walk", {}, none, &events);
    const std::string w = WhoName(who);
    ASSERT_EQ(f.size(), control.size()) << w;
    for (const auto& [name, result] : f) EXPECT_EQ(result, E(EPERM)) << w << ": " << name;
    auto expect_one = [&](const std::string& name, const std::function<bool(const cordon::v1::AuditEvent&)>& m) {
      if (host_refuses.count(name)) return;
      EXPECT_EQ(seccomp(events, m), 1) << w << ": " << name << "\n" << Dump(events);
    };
    for (const auto& c : table.syscalls) expect_one("sys_" + c.name, arg(c.nr));
    for (const auto& c : table.on_other_processes) expect_one("other_" + c.name, arg(c.nr, 1));
    for (const auto& c : table.ioctls) expect_one("ioctl_" + c.name, arg(SYS_ioctl, c.nr));
    expect_one("fcntl_F_SETOWN", arg(SYS_fcntl, 1));
    expect_one("fcntl_F_SETOWN_EX", arg(SYS_fcntl, F_SETOWN_EX));
    expect_one("fcntl_F_SETSIG", arg(SYS_fcntl, F_SETSIG));
    expect_one("fcntl_F_SETFL_O_ASYNC", arg(SYS_fcntl, F_SETFL));
    for (uint32_t persona : {0x0040000u, 0x0100000u, 0x0200000u, 0x0400000u})
      expect_one("personality_" + std::to_string(persona), arg(SYS_personality, persona));
    expect_one("memfd_create", arg(SYS_memfd_create, 0));
    expect_one("open_mode3", arg(SYS_open, O_ACCMODE));
    expect_one("openat_mode3", arg(SYS_openat, O_ACCMODE));
    expect_one("open_by_handle_at_mode3", arg(SYS_open_by_handle_at, O_ACCMODE));
    EXPECT_EQ(seccomp(events, arg(SYS_unshare)), 8) << w << ": one per namespace flag\n" << Dump(events);
    for (const auto& [name, flag] :  // each with the flags it asked for (regress probes them again)
         std::vector<std::pair<std::string, uint32_t>>{
             {"NEWNS", CLONE_NEWNS}, {"NEWNET", CLONE_NEWNET}, {"NEWTIME", 0x80u}, {"NEWUSER", CLONE_NEWUSER}})
      expect_one("unshare_" + name, arg(SYS_unshare, flag));
    expect_one("clone_NEWUTS", arg(SYS_clone, CLONE_NEWUTS | SIGCHLD));
    EXPECT_EQ(seccomp(events, [](const cordon::v1::AuditEvent& e) { return e.kind() == "net.socket"; }), 2)
        << w << ": netlink and packet\n"
        << Dump(events);
    expect_one("x32_getpid", arg(0x40000000u | SYS_getpid));
    // Nothing else: one event per refusal (the calls the host refuses too:
    // the filter refuses them first).
    EXPECT_EQ(seccomp(events, [](const cordon::v1::AuditEvent&) { return true; }), static_cast<int>(f.size()))
        << w << Dump(events);
    for (const auto& e : events) EXPECT_NE(e.kind(), "") << w << Dump(events);
  }
}

// Issue 16: an i386 system call (int $0x80 from a 64-bit process) has other
// numbers than x86_64's, so cordon run's seccomp filter refuses every one. It
// used to kill the process without any event; it is refused with EPERM and
// reported once, as tamper.abi (target.arg the i386 number, target.arg2
// AUDIT_ARCH_I386), like an x32 call. Control: unconfined, the same int 0x80
// getpid returns the pid. Skipped where the kernel has no IA32 emulation (the
// host's: int 0x80 faults there); the test VMs' Debian kernels have it.
TEST_F(RunEscapes, I386SystemCallIsRefusedAndReportedOnce) {
  auto control = Unconfined("i386", {});
  if (control["i386_getpid"] == "200") GTEST_SKIP() << "int 0x80 faults here: no IA32 syscall emulation";
  ASSERT_EQ(control["i386_getpid"], "0") << "unconfined, i386 getpid returns the pid";
  KeptFds none;
  std::vector<cordon::v1::AuditEvent> events;
  auto f = Confined(Who::kDynamic, "i386", {}, none, &events);
  EXPECT_EQ(f["i386_getpid"], E(EPERM)) << "refused, not killed (200)";
  EXPECT_EQ(Count(events, "tamper.abi", "seccomp", "denied",
                  [](const cordon::v1::AuditEvent& e) {
                    return e.target().arg() == 20 && e.target().arg2() == AUDIT_ARCH_I386 &&
                           e.reason().find("i386 syscall 20") != std::string::npos;
                  }),
            1)
      << Dump(events);
  EXPECT_EQ(Count(events, "tamper.abi", "seccomp", "denied"), 1) << Dump(events);
}

// Issue 16 finding 4: refusals that produced no event. Each is asserted with
// its errno and exactly one event of the layer that refused, next to the
// unconfined control.
TEST_F(RunEscapes, RefusalsWithoutEventOfTheirOwnAreReported) {
  Sleeper outside;
  const pid_t victim = outside.pid();
  ASSERT_GT(victim, 0);
  const std::vector<std::string> args = {P("in/input.txt"), P("secret"), P("out"), std::to_string(victim),
                                         P("secret/key")};
  const char* kAll[] = {"name_to_handle", "open_by_handle", "open_by_handle_secret", "mq_open", "bind_forbidden", "bind_allowed",
                        "pidfd_open", "pidfd_send_signal", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "ioctl_dev"};
  {
    auto f = Unconfined("refusals", args);
    for (const char* k : kAll) {
      if (std::string(k) == "ioctl_dev") {
        EXPECT_EQ(f[k], E(ENOTTY)) << "the driver's own answer unconfined";
      } else {
        EXPECT_EQ(f[k], "0") << k << " must work unconfined";
      }
    }
  }
  // Under cordon run. open_by_handle_at needs CAP_DAC_READ_SEARCH, which
  // neither variant has (the root variant is granted sys_admin and sys_pacct
  // only): the kernel's capability check refuses it, and only BPF LSM's
  // capable hook sees that (no event without BPF LSM). The dynamic uid's
  // signals to the (root) sleeper are refused by the kernel's own credential
  // check (kill_ok_by_cred) before Landlock is asked: only root's reach
  // Landlock's scoping.
  const bool scoped = LandlockAbi() >= 6;
  const bool ioctl_dev = LandlockAbi() >= 5;
  for (Who who : Variants(/*root_enforce=*/true)) {
    KeptFds none;
    std::vector<cordon::v1::AuditEvent> events;
    auto f = Confined(who, "refusals", args, none, &events);
    const std::string w = WhoName(who);
    if (std::getenv("CORDON_VM")) std::fprintf(stderr, "%s:%s\n", w.c_str(), Dump(events).c_str());
    EXPECT_EQ(f["name_to_handle"], "0") << w;
    EXPECT_EQ(f["open_by_handle"], E(EPERM)) << w << ": no CAP_DAC_READ_SEARCH";
    EXPECT_EQ(f["open_by_handle_secret"], E(EPERM)) << w << ": no CAP_DAC_READ_SEARCH";
    EXPECT_EQ(f["bind_allowed"], "0") << w << ": out/ is writable";
    EXPECT_EQ(f["pidfd_open"], "0") << w;
    if (who == Who::kRootAudit) {
      for (const char* k : {"mq_open", "bind_forbidden", "pidfd_send_signal", "rt_sigqueueinfo", "rt_tgsigqueueinfo"})
        EXPECT_EQ(f[k], "0") << w << ": " << k;
      EXPECT_EQ(f["ioctl_dev"], E(ENOTTY)) << w;
      continue;
    }
    EXPECT_EQ(Count(events, "file.create", "landlock", "denied", Path("/out/sock")), 0) << w << Dump(events);
    // Landlock: MAKE_SOCK on secret/ (EACCES), reported as a create of the
    // path as written.
    EXPECT_EQ(f["bind_forbidden"], landlock_ ? E(EACCES) : lsm_ ? E(EPERM) : "0") << w;
    if (landlock_) {
      EXPECT_EQ(Count(events, "file.create", "landlock", "denied", Path("/secret/sock")), 1) << w << Dump(events);
    }
    // Landlock refuses opening the new queue (EACCES; no seccomp rule).
    const std::string mq = landlock_ ? E(EACCES) : "0";
    EXPECT_EQ(f["mq_open"], mq) << w;
    if (f["mq_open"] == E(EACCES)) {
      EXPECT_EQ(Count(events, "file.open", "landlock", "denied",
                          [](const cordon::v1::AuditEvent& e) {
                            return e.file().path().find("cordon-refusal-") != std::string::npos;
                          }),
                1)
          << w << Dump(events);
    }
    // ioctl on a device opened read-only: LANDLOCK_ACCESS_FS_IOCTL_DEV.
    EXPECT_EQ(f["ioctl_dev"], ioctl_dev ? E(EACCES) : E(ENOTTY)) << w;
    EXPECT_EQ(Count(events, "file.ioctl", "landlock", "denied",
                    [](const cordon::v1::AuditEvent& e) {
                      return e.file().path() == "/dev/zero" && e.target().arg() == TCGETS;
                    }),
              ioctl_dev ? 1 : 0)
        << w << Dump(events);
    // Signals to a process outside (SIGWINCH).
    const bool refused = who == Who::kDynamic || scoped || lsm_;
    for (const char* k : {"pidfd_send_signal", "rt_sigqueueinfo", "rt_tgsigqueueinfo"})
      EXPECT_EQ(f[k], refused ? E(EPERM) : "0") << w << ": " << k;
    auto to_victim = [victim](const cordon::v1::AuditEvent& e) {
      return e.target().pid() == static_cast<uint32_t>(victim) && e.target().arg() == SIGWINCH;
    };
    // The dynamic uid's are the kernel's refusals (kill_ok_by_cred): no event.
    const bool root = who == Who::kRoot;
    EXPECT_EQ(Count(events, "tamper.signal", "landlock", "denied", to_victim), root && scoped ? 3 : 0)
        << w << Dump(events);
    EXPECT_EQ(Count(events, "tamper.signal", "kernel-lsm", "denied", to_victim), root && !scoped && lsm_ ? 3 : 0)
        << w << Dump(events);
    // Where BPF LSM is absent nothing else is reported: one event per
    // refusal (bind, mq_open, ioctl, three signals), none for the
    // capability refusal of open_by_handle_at.
    if (!lsm_ && landlock_ && scoped && ioctl_dev) {
      EXPECT_EQ(Refusals(events), who == Who::kRoot ? 6u : 3u) << w << Dump(events);
    }
  }
}

// open_by_handle_at with CAP_DAC_READ_SEARCH granted: the capability check
// passes and Landlock judges the open like any other (EACCES for a file the
// policy does not let it read, reported once, without a path: a handle names
// none).
TEST_F(RunEscapes, OpenByHandleBeyondTheCapabilityIsJudgedByLandlock) {
  if (!landlock_) GTEST_SKIP() << "no Landlock";
  extra_caps_ = ", dac_read_search";
  Sleeper outside;
  const std::vector<std::string> args = {P("in/input.txt"), P("secret"), P("out"), std::to_string(outside.pid()),
                                         P("secret/key")};
  KeptFds none;
  std::vector<cordon::v1::AuditEvent> events;
  auto f = Confined(Who::kRoot, "refusals", args, none, &events);
  EXPECT_EQ(f["open_by_handle"], "0") << "in/ is readable";
  EXPECT_EQ(f["open_by_handle_secret"], E(EACCES));
  EXPECT_EQ(Count(events, "file.open", "landlock", "denied",
                  [](const cordon::v1::AuditEvent& e) {
                    return e.file().path().empty();
                  }),
            1)
      << Dump(events);
  EXPECT_EQ(Count(events, "file.open", "kernel-lsm", "denied", Path("/secret/key")), 0)
      << "Landlock refuses before BPF LSM" << Dump(events);
}

}  // namespace
}  // namespace cordon::test
