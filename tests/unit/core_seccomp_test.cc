// The seccomp layer of `cordon run`: the generated program is loaded for real
// in a forked child (unprivileged processes may install filters once
// no_new_privs is set), which then makes the syscalls and reports back.
// Refused syscalls are called with arguments that are harmless (or invalid)
// should the filter fail to refuse them, also as root.
#include <fcntl.h>
#include <linux/seccomp.h>
#include <linux/bpf.h>
#include <linux/io_uring.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/timex.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <string>

#include "confine/seccomp.h"
#include "tests/common/in_child.h"
#include "policy/compiler.h"
#include "policy/parser.h"

namespace cordon {
namespace {

using test::InChild;

policy::CompiledPolicy CompileSpec(const std::string& spec) {
  std::string text = "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata:\n  name: t\nspec:\n" + spec;
  policy::ParsedPolicy parsed;
  policy::Diagnostics diags;
  policy::CompiledPolicy compiled;
  bool ok = policy::ParsePolicyText(text, "t.yaml", &parsed, &diags) && policy::Compile(parsed, &compiled, &diags);
  EXPECT_TRUE(ok) << policy::FormatDiagnostics(diags);
  return compiled;
}

// Checks collected in the child: "name: expected X, got Y" lines on failure.
struct Checks {
  std::string failures;
  // `ret` from a syscall: -1 with errno, or >= 0.
  void Errno(const char* what, long ret, int want) {
    int err = errno;
    if (ret >= 0) {
      failures += std::string(what) + ": expected errno " + std::to_string(want) + ", succeeded\n";
    } else if (err != want) {
      failures += std::string(what) + ": expected errno " + std::to_string(want) + " (" + std::strerror(want) +
                  "), got " + std::to_string(err) + " (" + std::strerror(err) + ")\n";
    }
  }
  // A socket/fd-returning call that must succeed; the fd is closed.
  void Fd(const char* what, long ret) {
    if (ret < 0) failures += std::string(what) + ": expected success, got " + std::strerror(errno) + "\n";
    else ::close(static_cast<int>(ret));
  }
  void True(const char* what, bool cond) {
    if (!cond) failures += std::string(what) + "\n";
  }
};

// The errno the filter's refusals return in these tests. cordon's filter
// answers EPERM, which the kernel also gives on its own (an unprivileged
// caller, a missing capability such as CAP_SYS_MODULE): Install() loads a
// copy whose EPERM answers are EHWPOISON instead, an errno none of these
// calls can produce, so a kRefused result is the filter's doing and nothing
// else's. The program is otherwise the one `cordon run` installs.
constexpr int kRefused = EHWPOISON;

SeccompPlan Marked(const SeccompPlan& plan) {
  SeccompPlan marked = plan;
  int answers = 0;
  for (auto& insn : marked.program)
    if (insn.code == (BPF_RET | BPF_K) && insn.k == (SECCOMP_RET_ERRNO | EPERM)) {
      insn.k = SECCOMP_RET_ERRNO | kRefused;
      ++answers;
    }
  EXPECT_GT(answers, 0) << "the filter has no EPERM answer to mark";
  return marked;
}

// Installs the (marked) filter; returns a failure line or "".
std::string Install(const SeccompPlan& plan) {
  int err = ApplySeccompInChild(Marked(plan));
  return err == 0 ? std::string() : std::string("ApplySeccompInChild: ") + std::strerror(err) + "\n";
}

long SocketPair(int family) {
  int sv[2];
  long r = ::socketpair(family, SOCK_STREAM, 0, sv);
  if (r == 0) ::close(sv[0]), ::close(sv[1]);
  return r == 0 ? 0 : -1;
}

const char* kDefaultFamilies = "  network:\n    families: [unix, inet, inet6]\n";

TEST(ConfineSeccomp, ProgramIsSmallAndDescribed) {
  SeccompPlan plan = PrepareSeccomp(CompileSpec(kDefaultFamilies));
  ASSERT_FALSE(plan.program.empty());
  EXPECT_LT(plan.program.size(), 200u);
  // First instruction loads the arch; the last one kills (wrong arch).
  EXPECT_EQ(plan.program.front().code, BPF_LD | BPF_W | BPF_ABS);
  std::string all;
  for (const auto& r : plan.refused) all += r + "\n";
  for (const char* name : {"netlink", "packet", "vsock", "other", "bpf", "mount", "pivot_root", "fsopen",
                           "init_module", "kexec_load", "ptrace", "process_vm_writev", "setns", "clock_settime",
                           "adjtimex", "reboot", "io_uring_setup", "perf_event_open", "clone3", "x32"})
    EXPECT_NE(all.find(name), std::string::npos) << name << " missing from:\n" << all;
  EXPECT_EQ(all.find("unix,"), std::string::npos) << all;
}

TEST(ConfineSeccomp, EmptyProgramIsRefused) { EXPECT_EQ(ApplySeccompInChild(SeccompPlan{}), EINVAL); }

TEST(ConfineSeccomp, RefusesFamiliesAndTamperSyscalls) {
  SeccompPlan plan = PrepareSeccomp(CompileSpec(kDefaultFamilies));
  std::string result = InChild([&] {
    Checks c;
    // Baseline, before the filter: netlink sockets work for everyone here.
    long nl = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, 0 /* NETLINK_ROUTE */);
    c.Fd("baseline socket(AF_NETLINK)", nl);
    c.Errno("baseline clone3(NULL, 0)", ::syscall(SYS_clone3, nullptr, 0), EINVAL);
    std::string installed = Install(plan);
    if (!installed.empty()) return installed;

    c.Errno("socket(AF_NETLINK)", ::socket(AF_NETLINK, SOCK_RAW, 0), kRefused);
    c.Errno("socket(AF_PACKET)", ::socket(AF_PACKET, SOCK_RAW, 0), kRefused);
    c.Errno("socket(AF_VSOCK)", ::socket(40, SOCK_STREAM, 0), kRefused);
    c.Errno("socket(AF_ALG) (other)", ::socket(38, SOCK_SEQPACKET, 0), kRefused);
    c.Errno("socket(AF_XDP) (other)", ::socket(44, SOCK_RAW, 0), kRefused);
    c.Errno("socketpair(AF_NETLINK)", SocketPair(AF_NETLINK), kRefused);
    // Upper bits of the int family are ignored by the kernel, and by the filter.
    c.Errno("socket(AF_NETLINK | 1<<32)", ::syscall(SYS_socket, 0x100000000L | AF_NETLINK, SOCK_RAW, 0), kRefused);
    c.Fd("socket(AF_INET, SOCK_STREAM)", ::socket(AF_INET, SOCK_STREAM, 0));
    c.Fd("socket(AF_INET, SOCK_DGRAM)", ::socket(AF_INET, SOCK_DGRAM, 0));
    c.Fd("socket(AF_UNIX, SOCK_STREAM)", ::socket(AF_UNIX, SOCK_STREAM, 0));
    c.True("socketpair(AF_UNIX) failed", SocketPair(AF_UNIX) == 0);
    {
      long r = ::socket(AF_INET6, SOCK_STREAM, 0);
      if (!(r < 0 && errno == EAFNOSUPPORT)) c.Fd("socket(AF_INET6, SOCK_STREAM)", r);  // EAFNOSUPPORT: no IPv6 here
    }

    c.Errno("bpf()", ::syscall(SYS_bpf, BPF_MAP_CREATE, nullptr, 0), kRefused);
    c.Errno("mount()", ::mount("none", "/nonexistent-cordon", "tmpfs", 0, nullptr), kRefused);
    c.Errno("umount2()", ::umount2("/nonexistent-cordon", 0), kRefused);
    c.Errno("pivot_root()", ::syscall(SYS_pivot_root, "/nonexistent-a", "/nonexistent-b"), kRefused);
    c.Errno("fsopen()", ::syscall(430, "tmpfs", 0), kRefused);
    c.Errno("fsconfig()", ::syscall(431, -1, 0, nullptr, nullptr, 0), kRefused);
    c.Errno("fsmount()", ::syscall(432, -1, 0, 0), kRefused);
    c.Errno("fspick()", ::syscall(433, AT_FDCWD, "/nonexistent-cordon", 0), kRefused);
    c.Errno("open_tree()", ::syscall(428, AT_FDCWD, "/nonexistent-cordon", 0), kRefused);
    c.Errno("open_tree_attr()", ::syscall(467, AT_FDCWD, "/nonexistent-cordon", 0, nullptr, 0), kRefused);
    c.Errno("move_mount()", ::syscall(429, -1, "", -1, "", 0), kRefused);
    c.Errno("mount_setattr()", ::syscall(442, -1, "", 0, nullptr, 0), kRefused);
    c.Errno("init_module()", ::syscall(SYS_init_module, nullptr, 0, ""), kRefused);
    c.Errno("finit_module()", ::syscall(SYS_finit_module, -1, "", 0), kRefused);
    c.Errno("delete_module()", ::syscall(SYS_delete_module, "cordon_nonexistent", O_NONBLOCK), kRefused);
    c.Errno("kexec_load()", ::syscall(SYS_kexec_load, 0, 0, nullptr, 0), kRefused);
    c.Errno("kexec_file_load()", ::syscall(SYS_kexec_file_load, -1, -1, 0, "", 0), kRefused);
    // Not PTRACE_TRACEME: should it succeed, this child would stop on its next signal.
    c.Errno("ptrace(PTRACE_ATTACH, no such pid)", ::ptrace(PTRACE_ATTACH, 0x7ffffff0, nullptr, nullptr), kRefused);
    c.Errno("process_vm_readv()", ::syscall(SYS_process_vm_readv, ::getpid(), nullptr, 0, nullptr, 0, 0), kRefused);
    c.Errno("process_vm_writev()", ::syscall(SYS_process_vm_writev, ::getpid(), nullptr, 0, nullptr, 0, 0), kRefused);
    c.Errno("unshare(CLONE_NEWNS)", ::unshare(CLONE_NEWNS), kRefused);
    c.Errno("unshare(CLONE_NEWUSER)", ::unshare(CLONE_NEWUSER), kRefused);
    c.Errno("unshare(CLONE_NEWNET)", ::unshare(CLONE_NEWNET), kRefused);
    c.Errno("unshare(CLONE_NEWTIME)", ::unshare(CLONE_NEWTIME), kRefused);
    c.Errno("setns()", ::setns(-1, 0), kRefused);
    {
      // Should the filter fail, this would be a real child: it exits at once.
      long r = ::syscall(SYS_clone, CLONE_NEWUTS | SIGCHLD, 0, 0, 0, 0);
      if (r == 0) _exit(0);
      if (r > 0) ::waitpid(static_cast<pid_t>(r), nullptr, 0);
      c.Errno("clone(CLONE_NEWUTS)", r, kRefused);
    }
    {
      struct timespec ts = {0, 0};
      // CLOCK_MONOTONIC cannot be set (EINVAL): harmless if not refused.
      c.Errno("clock_settime()", ::clock_settime(CLOCK_MONOTONIC, &ts), kRefused);
      struct timex tx;
      std::memset(&tx, 0, sizeof tx);  // modes == 0: a read, refused too
      c.Errno("adjtimex()", ::adjtimex(&tx), kRefused);
      c.Errno("clock_adjtime()", ::syscall(SYS_clock_adjtime, CLOCK_REALTIME, &tx), kRefused);
      c.Errno("settimeofday()", ::syscall(SYS_settimeofday, nullptr, nullptr), kRefused);
    }
    c.Errno("reboot() (bad magic)", ::syscall(SYS_reboot, 0, 0, 0, nullptr), kRefused);
    {
      struct io_uring_params params;
      std::memset(&params, 0, sizeof params);
      long r = ::syscall(SYS_io_uring_setup, 1, &params);
      if (r >= 0) ::close(static_cast<int>(r));
      c.Errno("io_uring_setup()", r, kRefused);
      c.Errno("io_uring_enter()", ::syscall(SYS_io_uring_enter, -1, 0, 0, 0, nullptr, 0), kRefused);
      c.Errno("io_uring_register()", ::syscall(SYS_io_uring_register, -1, 0, nullptr, 0), kRefused);
    }
    c.Errno("perf_event_open()", ::syscall(SYS_perf_event_open, nullptr, 0, -1, -1, 0), kRefused);
    c.Errno("clone3()", ::syscall(SYS_clone3, nullptr, 0), ENOSYS);
    c.Errno("x32 getpid", ::syscall(0x40000000 | SYS_getpid), kRefused);

    // Still allowed: fork (clone without namespace flags), threads (glibc
    // falls back from clone3 to clone), ordinary syscalls.
    pid_t child = ::fork();
    if (child == 0) _exit(7);
    int status = 0;
    c.True("fork() failed", child > 0);
    if (child > 0) {
      ::waitpid(child, &status, 0);
      c.True("forked child did not exit 7", WIFEXITED(status) && WEXITSTATUS(status) == 7);
    }
    pthread_t thread;
    int created = ::pthread_create(&thread, nullptr, [](void*) -> void* { return nullptr; }, nullptr);
    c.True("pthread_create failed", created == 0);
    if (created == 0) ::pthread_join(thread, nullptr);
    c.True("getpid failed", ::getpid() > 0);
    int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    c.Fd("open(/dev/null)", fd);
    return c.failures;
  });
  EXPECT_EQ(result, "");
}

// The host-wide refusals: each call is first made without the filter with
// harmless arguments and must NOT fail with EPERM there (a baseline: an
// unprivileged test would get EPERM from the kernel itself), then with it.
TEST(ConfineSeccomp, RefusesHostWideCallsWithTheirArgumentsOnly) {
  SeccompPlan plan = PrepareSeccomp(CompileSpec(kDefaultFamilies));
  std::string all;
  for (const auto& r : plan.refused) all += r + "\n";
  for (const char* name : {"TIOCSTI", "TIOCLINUX", "vhangup", "fanotify_init", "syslog", "acct", "prlimit64",
                           "setpriority", "personality", "memfd_create", "F_SETOWN", "keyctl", "pidfd_getfd"})
    EXPECT_NE(all.find(name), std::string::npos) << name << " missing from:\n" << all;
  std::string result = InChild([&] {
    Checks c;
    const pid_t parent = ::getppid();
    int fds[2];
    if (::pipe(fds) != 0) return std::string("pipe failed\n");
    // Calls refused only with some arguments, and their allowed forms.
    struct Call {
      const char* what;
      std::function<long()> refused;  // must be EPERM under the filter, not EPERM before
      std::function<long()> allowed;  // must not be EPERM under the filter (nullptr: none)
    };
    int prio = ::getpriority(PRIO_PROCESS, 0);
    const Call calls[] = {
        {"ioctl(TIOCSTI) on a pipe", [&] { char ch = 'x'; return ::syscall(SYS_ioctl, fds[0], 0x5412, &ch); },
         [&] { int n; return ::syscall(SYS_ioctl, fds[0], FIONREAD, &n); }},
        {"ioctl(FS_IOC_SETFLAGS) on a pipe", [&] { long f = 0; return ::syscall(SYS_ioctl, fds[0], 0x40086602, &f); },
         nullptr},
        {"prlimit64(parent, NOFILE, read)",
         [&] { struct rlimit r; return ::syscall(SYS_prlimit64, parent, RLIMIT_NOFILE, nullptr, &r); },
         [&] { struct rlimit r; return ::syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, nullptr, &r); }},
        {"setpriority(parent, its own value)",
         [&] { return ::syscall(SYS_setpriority, PRIO_PROCESS, parent, ::getpriority(PRIO_PROCESS, parent)); },
         [&] { return ::syscall(SYS_setpriority, PRIO_PROCESS, 0, prio); }},
        {"personality(ADDR_NO_RANDOMIZE)", [&] { return ::syscall(SYS_personality, 0x0040000); },
         [&] { return ::syscall(SYS_personality, 0xffffffff); }},
        {"memfd_create(0)", [&] { long r = ::syscall(SYS_memfd_create, "x", 0); if (r >= 0) ::close(int(r)); return r; },
         nullptr},
        {"fcntl(F_SETOWN, parent)", [&] { return ::syscall(SYS_fcntl, fds[0], F_SETOWN, parent); },
         [&] { return ::syscall(SYS_fcntl, fds[0], F_SETOWN, 0); }},
        {"fcntl(F_SETSIG, SIGKILL)", [&] { return ::syscall(SYS_fcntl, fds[0], F_SETSIG, SIGKILL); }, nullptr},
        {"fcntl(F_SETFL, O_ASYNC)", [&] { return ::syscall(SYS_fcntl, fds[0], F_SETFL, O_ASYNC | O_NONBLOCK); },
         [&] { return ::syscall(SYS_fcntl, fds[0], F_SETFL, O_NONBLOCK); }},
        {"ioctl(FIOASYNC)", [&] { int on = 0; return ::syscall(SYS_ioctl, fds[0], FIOASYNC, &on); }, nullptr},
        {"keyctl(GET_KEYRING_ID)", [&] { return ::syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3, 0); },
         nullptr},
        {"openat(/dev/null, access mode 3)",
         [&] { long r = ::syscall(SYS_openat, AT_FDCWD, "/dev/null", 3); if (r >= 0) ::close(int(r)); return r; },
         [&] { long r = ::syscall(SYS_openat, AT_FDCWD, "/dev/null", O_RDWR); if (r >= 0) ::close(int(r)); return r; }},
        {"open(/dev/null, access mode 3)",
         [&] { long r = ::syscall(SYS_open, "/dev/null", 3); if (r >= 0) ::close(int(r)); return r; },
         [&] { long r = ::syscall(SYS_open, "/dev/null", O_WRONLY); if (r >= 0) ::close(int(r)); return r; }},
    };
    for (const auto& call : calls) {
      errno = 0;
      long before = call.refused();
      if (before < 0 && errno == EPERM)
        c.failures += std::string("baseline ") + call.what + ": EPERM without the filter\n";
    }
    // Personality may have been changed by the baseline: restore.
    ::syscall(SYS_personality, 0);
    // Root: these work without the filter (vhangup in a session without a
    // terminal, where it does nothing).
    const bool root = ::geteuid() == 0;
    if (root) {
      ::setsid();
      if (::syscall(SYS_syslog, 10, nullptr, 0) < 0) c.failures += "baseline syslog failed\n";
      if (::syscall(SYS_vhangup) < 0) c.failures += "baseline vhangup failed\n";
      long fan = ::syscall(SYS_fanotify_init, 0, 0);
      if (fan < 0) c.failures += "baseline fanotify_init failed\n";
      else ::close(static_cast<int>(fan));
    }
    std::string installed = Install(plan);
    if (!installed.empty()) return installed;
    for (const auto& call : calls) {
      c.Errno(call.what, call.refused(), kRefused);
      if (call.allowed) {
        errno = 0;
        long r = call.allowed();
        if (r < 0 && errno == kRefused) c.failures += std::string("allowed form of ") + call.what + ": refused\n";
      }
    }
    // Refused whatever the arguments. acct(NULL) has no baseline (as root
    // it would switch the host's process accounting off).
    c.Errno("acct(NULL)", ::syscall(SYS_acct, nullptr), kRefused);
    c.Errno("openat2()", ::syscall(437, AT_FDCWD, "/dev/null", nullptr, 0), ENOSYS);
    {
      // open_by_handle_at: its flags are judged like openat's (the empty
      // handle makes the allowed form fail with EINVAL, or EPERM unprivileged).
      struct {
        unsigned int bytes = 0;
        int type = 0;
        unsigned char data[8] = {};
      } handle;
      c.Errno("open_by_handle_at(access mode 3)", ::syscall(304, AT_FDCWD, &handle, 3), kRefused);
      errno = 0;
      long r = ::syscall(304, AT_FDCWD, &handle, O_RDONLY);
      c.True("open_by_handle_at(O_RDONLY) refused by the filter", !(r < 0 && errno == kRefused));
    }
    c.Errno("pidfd_getfd(-1) (EBADF without the filter)", ::syscall(438, -1, 0, 0), kRefused);
    if (root) {
      c.Errno("syslog(SIZE_BUFFER)", ::syscall(SYS_syslog, 10, nullptr, 0), kRefused);
      c.Errno("vhangup() (no controlling terminal)", ::syscall(SYS_vhangup), kRefused);
      c.Errno("fanotify_init()", ::syscall(SYS_fanotify_init, 0, 0), kRefused);
    }
    return c.failures;
  });
  EXPECT_EQ(result, "");
}

TEST(ConfineSeccomp, MemfdExecAndKeyringsAllowedByPolicy) {
  SeccompPlan plan = PrepareSeccomp(CompileSpec("  allowKeyrings: true\n  files:\n    allowMemfdExec: true\n"));
  std::string result = InChild([&] {
    Checks c;
    std::string installed = Install(plan);
    if (!installed.empty()) return installed;
    c.Fd("memfd_create(0)", ::syscall(SYS_memfd_create, "x", 0));
    errno = 0;
    long r = ::syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3, 0);
    c.True("keyctl refused although allowKeyrings", !(r < 0 && errno == kRefused));
    return c.failures;
  });
  EXPECT_EQ(result, "");
}

TEST(ConfineSeccomp, NoFamiliesRefusesUnixToo) {
  SeccompPlan plan = PrepareSeccomp(CompileSpec("  network:\n    families: []\n"));
  std::string all;
  for (const auto& r : plan.refused) all += r + "\n";
  EXPECT_NE(all.find("families unix, netlink"), std::string::npos) << all;
  std::string result = InChild([&] {
    Checks c;
    std::string installed = Install(plan);
    if (!installed.empty()) return installed;
    c.Errno("socket(AF_UNIX)", ::socket(AF_UNIX, SOCK_STREAM, 0), kRefused);
    c.Errno("socketpair(AF_UNIX)", SocketPair(AF_UNIX), kRefused);
    // inet and inet6 are left to the cgroup sock_create program (which
    // reports events); seccomp lets them through.
    c.Fd("socket(AF_INET)", ::socket(AF_INET, SOCK_STREAM, 0));
    c.Fd("socket(AF_INET6)", ::socket(AF_INET6, SOCK_DGRAM, 0));
    c.Errno("socket(AF_NETLINK)", ::socket(AF_NETLINK, SOCK_RAW, 0), kRefused);
    return c.failures;
  });
  EXPECT_EQ(result, "");
}

TEST(ConfineSeccomp, OtherFamilyBitAllowsUnlistedFamiliesOnly) {
  // No policy spelling sets CORDON_FAM_OTHER today; the filter honours the bit.
  policy::CompiledPolicy compiled = CompileSpec("  network:\n    families: [unix]\n");
  compiled.families |= 1u << CORDON_FAM_OTHER;
  SeccompPlan plan = PrepareSeccomp(compiled);
  std::string result = InChild([&] {
    Checks c;
    // Unlisted families, checked where this kernel (and our privileges) allow them unfiltered:
    // AF_XDP needs CAP_NET_RAW, AF_ALG may not be built in.
    long xdp = ::socket(44 /* AF_XDP */, SOCK_RAW | SOCK_CLOEXEC, 0);
    long alg = ::socket(38 /* AF_ALG */, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    std::string installed = Install(plan);
    if (!installed.empty()) return installed;
    if (xdp >= 0) c.Fd("socket(AF_XDP)", ::socket(44, SOCK_RAW, 0));
    if (alg >= 0) c.Fd("socket(AF_ALG)", ::socket(38, SOCK_SEQPACKET, 0));
    c.Errno("socket(AF_NETLINK)", ::socket(AF_NETLINK, SOCK_RAW, 0), kRefused);
    c.Fd("socket(AF_UNIX)", ::socket(AF_UNIX, SOCK_STREAM, 0));
    return c.failures;
  });
  EXPECT_EQ(result, "");
}

TEST(ConfineSeccomp, AllowUserNamespacesPermitsOnlyNewUser) {
  policy::CompiledPolicy compiled = CompileSpec("  allowUserNamespaces: true\n");
  ASSERT_TRUE(compiled.lsm_flags & CORDON_LSM_F_USERNS);
  SeccompPlan plan = PrepareSeccomp(compiled);
  // What the kernel itself says, unfiltered (it may refuse for its own reasons).
  int baseline = -1;
  {
    std::string r = InChild([] { return std::to_string(::unshare(CLONE_NEWUSER) == 0 ? 0 : errno); });
    baseline = std::stoi(r);
  }
  std::string result = InChild([&] {
    Checks c;
    std::string installed = Install(plan);
    if (!installed.empty()) return installed;
    int r = ::unshare(CLONE_NEWUSER);
    int err = r == 0 ? 0 : errno;
    if (err != baseline)
      c.failures += "unshare(CLONE_NEWUSER): " + std::to_string(err) + " filtered, " + std::to_string(baseline) +
                    " unfiltered\n";
    c.True("unshare(CLONE_NEWUSER) refused by the filter", err != kRefused);
    c.Errno("unshare(CLONE_NEWNS) still refused", ::unshare(CLONE_NEWNS), kRefused);
    return c.failures;
  });
  EXPECT_EQ(result, "");
}

// An i386 syscall (int 0x80) is refused with EPERM (bpf/detect reports it as
// tamper.abi), no longer by killing the process.
TEST(ConfineSeccomp, ForeignSyscallAbiIsRefused) {
  SeccompPlan plan = PrepareSeccomp(CompileSpec(kDefaultFamilies));
  // Baseline: does this kernel run int 0x80 at all (IA32 emulation)?
  pid_t probe = ::fork();
  if (probe == 0) {
    long ret;
    asm volatile("int $0x80" : "=a"(ret) : "a"(20 /* i386 getpid */) : "memory", "r8", "r9", "r10", "r11");
    _exit(ret > 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(probe, &status, 0), probe);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) GTEST_SKIP() << "no IA32 syscall emulation here";
  pid_t pid = ::fork();
  if (pid == 0) {
    if (ApplySeccompInChild(plan) != 0) _exit(2);
    long ret;
    asm volatile("int $0x80" : "=a"(ret) : "a"(20) : "memory", "r8", "r9", "r10", "r11");
    _exit(static_cast<int>(ret) == -EPERM ? 0 : 3);
  }
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "int 0x80 getpid not refused with EPERM";
}

}  // namespace
}  // namespace cordon
