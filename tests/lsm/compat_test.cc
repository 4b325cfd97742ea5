// Attach mode (BPF LSM alone decides: no seccomp, no Landlock): the 32-bit
// system call path of a 64-bit task (int $0x80: file_ioctl_compat and the
// compat open), io_uring passthrough commands (uring_cmd), and process
// accounting (acct(): host-wide). Run for real in the BPF LSM test VMs
// (tests/vm); skipped where BPF LSM is unusable (LsmHonesty covers that).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/acct.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/integration/harness.h"
#include "tests/lsm/probes.h"

namespace cordon::test {
namespace {

int Count(const std::vector<cordon::v1::AuditEvent>& events, const std::string& kind,
          const std::function<bool(const cordon::v1::AuditEvent&)>& match = nullptr) {
  int n = 0;
  for (const auto& e : events) n += e.kind() == kind && e.verdict() == "denied" && (!match || match(e));
  return n;
}

class LsmEscapes : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root";
    bool usable = LsmUsableHere();
    const char* expect = std::getenv("CORDON_EXPECT_LSM");
    if (expect && std::string(expect) == "1") {
      ASSERT_TRUE(usable) << "this VM boots with bpf in lsm=: cordon must be able to enforce";
    }
    if (!usable) GTEST_SKIP() << "BPF LSM not usable on this kernel (LsmHonesty covers it)";
    char tmpl[] = "/tmp/cordon-lsmesc-XXXXXX";
    root_ = ::mkdtemp(tmpl);
    for (const char* d : {"in", "out", "secret"}) ::mkdir((root_ + "/" + d).c_str(), 0755);
    WriteText(P("in/input.txt"), "input\n");
    WriteText(P("secret/key"), "TOP SECRET\n");
    WriteText(P("out/existing"), "x\n");
  }
  void TearDown() override {
    if (!root_.empty()) cordon::test::Run({"rm", "-rf", root_});
  }
  std::string P(const std::string& rel) const { return root_ + "/" + rel; }
  void Attach(const TestCgroup& cg, const std::string& extra_spec = "") {
    PolicyFile policy("apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: lsm-escapes}\nspec:\n" +
                      extra_spec + "  files:\n    include: [runtime-minimal]\n    read: [" + P("in") +
                      "]\n    write: [" + P("out") + "]\n");
    CommandResult r = Cordon({"attach", "--cgroup", cg.path(), "--policy", policy.path()});
    ASSERT_EQ(r.status, 0) << r.err;
    ASSERT_EQ(r.err.find("NOT enforced"), std::string::npos) << r.err;
  }
  std::string root_;
};

// ---- the 32-bit system call path (int $0x80 from 64-bit code)

constexpr long kIa32Open = 5, kIa32Getpid = 20, kIa32Ioctl = 54;

long Int80(long nr, long a = 0, long b = 0, long c = 0) {
  long ret;
  // The i386 ABI: ebx, ecx, edx. The kernel clobbers r8-r11 on this path.
  asm volatile("int $0x80" : "=a"(ret) : "a"(nr), "b"(a), "c"(b), "d"(c) : "memory", "r8", "r9", "r10", "r11");
  return ret;
}

// Memory the 32-bit calls can point at (their pointers are 32 bits).
class LowPage {
 public:
  LowPage() {
    p_ = static_cast<char*>(::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0));
  }
  ~LowPage() {
    if (p_ != MAP_FAILED) ::munmap(p_, 4096);
  }
  bool ok() const { return p_ != MAP_FAILED; }
  long Str(const std::string& s) {
    std::memcpy(p_, s.c_str(), s.size() + 1);
    return static_cast<long>(reinterpret_cast<uintptr_t>(p_));
  }
  long Int(int v) {
    std::memcpy(p_ + 3072, &v, sizeof v);
    return static_cast<long>(reinterpret_cast<uintptr_t>(p_ + 3072));
  }

 private:
  char* p_ = static_cast<char*>(MAP_FAILED);
};

int CompatOpen(const std::string& path, int flags) {
  LowPage low;
  if (!low.ok()) return 1000 + errno;
  long fd = Int80(kIa32Open, low.Str(path), flags | O_CLOEXEC, 0);
  if (fd < 0) return static_cast<int>(-fd);
  ::close(static_cast<int>(fd));
  return 0;
}

int CompatTiocsti(int tty) {
  LowPage low;
  if (!low.ok()) return 1000 + errno;
  long r = Int80(kIa32Ioctl, tty, TIOCSTI, low.Str("x"));
  return r < 0 ? static_cast<int>(-r) : 0;
}

int GetFlags(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  int flags = -1;
  if (fd >= 0 && ::ioctl(fd, kFsIocGetflags, &flags) != 0) flags = -1;
  if (fd >= 0) ::close(fd);
  return flags;
}

// FS_IOC32_SETFLAGS through the compat path: FS_NOATIME_FL on or off.
int CompatSetNoatime(const std::string& path, bool on) {
  int flags = GetFlags(path);
  if (flags < 0) return 2000 + errno;
  LowPage low;
  if (!low.ok()) return 1000 + errno;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 3000 + errno;
  long r = Int80(kIa32Ioctl, fd, static_cast<long>(kFsIoc32Setflags),
                 low.Int(on ? (flags | kFsNoatimeFl) : (flags & ~kFsNoatimeFl)));
  ::close(fd);
  return r < 0 ? static_cast<int>(-r) : 0;
}

// A 64-bit task entering the kernel's 32-bit system call path: compat open
// and compat ioctl (lsm/file_ioctl_compat on 6.12; the matrix's 6.1 build
// has that hook backported). TIOCSTI and FS_IOC32_SETFLAGS (the compat
// number of FS_IOC_SETFLAGS) must be judged like their 64-bit forms.
TEST_F(LsmEscapes, CompatSyscallIoctlsAreChecked) {
  if (Int80(kIa32Getpid) != ::getpid())
    GTEST_SKIP() << "no IA32 emulation in this kernel (CONFIG_IA32_EMULATION off or ia32_emulation=0): int $0x80 "
                    "returned "
                 << Int80(kIa32Getpid);
  const std::string input = P("in/input.txt"), existing = P("out/existing"), key = P("secret/key");
  int master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  ASSERT_GE(master, 0);
  ASSERT_EQ(::grantpt(master), 0);
  ASSERT_EQ(::unlockpt(master), 0);
  int slave = ::open(::ptsname(master), O_RDWR | O_NOCTTY | O_CLOEXEC);
  ASSERT_GE(slave, 0);
  struct Close {
    int a, b;
    ~Close() {
      ::close(a);
      ::close(b);
    }
  } close_pty{master, slave};
  auto drain = [&] {
    char buf[16];
    int fl = ::fcntl(master, F_GETFL);
    ::fcntl(master, F_SETFL, fl | O_NONBLOCK);
    ssize_t n = ::read(master, buf, sizeof buf);
    ::fcntl(master, F_SETFL, fl);
    return n;
  };
  // Negative control: unconfined, the compat path opens, injects and sets flags.
  EXPECT_EQ(CompatOpen(key, O_RDONLY), 0);
  EXPECT_EQ(CompatOpen(input, 3), 0);
  EXPECT_EQ(CompatTiocsti(slave), 0);
  EXPECT_EQ(drain(), 1) << "the compat TIOCSTI reached the pty";
  ASSERT_EQ(CompatSetNoatime(input, true), 0) << "FS_IOC32_SETFLAGS through int $0x80";
  EXPECT_TRUE(GetFlags(input) & kFsNoatimeFl);
  ASSERT_EQ(CompatSetNoatime(input, false), 0);
  EXPECT_FALSE(GetFlags(input) & kFsNoatimeFl);

  TestCgroup cg("compat");
  Attach(cg);
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return CompatOpen(key, O_RDONLY); }), EPERM);
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return CompatOpen(input, 3); }), EPERM);
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return CompatOpen(existing, 3); }), 0);
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return CompatTiocsti(slave); }), EPERM);
  EXPECT_EQ(drain(), -1) << "nothing injected";
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return CompatSetNoatime(input, true); }), EPERM);
  EXPECT_FALSE(GetFlags(input) & kFsNoatimeFl);
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return CompatSetNoatime(existing, true); }), 0) << "write rule";
  EXPECT_TRUE(GetFlags(existing) & kFsNoatimeFl);
  auto events = TakeEvents(cg.path());
  EXPECT_EQ(Count(events, "file.open",
                  [](const cordon::v1::AuditEvent& e) {
                    return EndsWith(e.file().path(), "/secret/key") && e.file().access() == "read";
                  }),
            1)
      << Dump(events);
  EXPECT_EQ(Count(events, "file.open",
                  [](const cordon::v1::AuditEvent& e) {
                    return EndsWith(e.file().path(), "/in/input.txt") && e.file().access() == "read,write";
                  }),
            1)
      << Dump(events);
  EXPECT_EQ(Count(events, "tamper.terminal",
                  [](const cordon::v1::AuditEvent& e) { return e.target().arg() == static_cast<uint32_t>(TIOCSTI); }),
            1)
      << Dump(events);
  EXPECT_EQ(Count(events, "file.ioctl",
                  [](const cordon::v1::AuditEvent& e) {
                    return EndsWith(e.file().path(), "/in/input.txt") && e.target().arg() == kFsIoc32Setflags;
                  }),
            1)
      << Dump(events);
  EXPECT_EQ(Count(events, "file.ioctl",
                  [](const cordon::v1::AuditEvent& e) { return EndsWith(e.file().path(), "/out/existing"); }),
            0)
      << Dump(events);
  for (const auto& e : events) EXPECT_EQ(e.enforcement(), "kernel-lsm") << Dump(events);
}

// ---- io_uring passthrough (IORING_OP_URING_CMD)

constexpr uint8_t kOpUringCmd = 46;      // IORING_OP_URING_CMD (5.19+)
constexpr uint32_t kSocketSiocinq = 0;   // SOCKET_URING_OP_SIOCINQ (6.7+)

int UringCmd(int fd, uint32_t cmd_op) {
  Uring ring;
  if (ring.error()) return 1000 + ring.error();
  return -ring.Submit([&](io_uring_sqe* sqe) {
    sqe->opcode = kOpUringCmd;
    sqe->fd = fd;
    sqe->cmd_op = cmd_op;
  });
}

// uring_cmd hands a command straight to the file's driver (for sockets since
// 6.7: SOCKET_URING_OP_*), without file_ioctl: refused in a sandbox. Before
// 6.7 only NVMe and ublk character devices implement it (neither exists in
// the test VMs; the 6.1 build has no ublk): the kernel answers EOPNOTSUPP
// before the hook, with or without a sandbox, which is asserted there.
TEST_F(LsmEscapes, IoUringPassthroughCommandsAreRefused) {
  int sock = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);  // made outside, inherited
  ASSERT_GE(sock, 0);
  struct Close {
    int fd;
    ~Close() { ::close(fd); }
  } close_sock{sock};
  int control = UringCmd(sock, kSocketSiocinq);
  TestCgroup cg("uringcmd");
  Attach(cg);
  int confined = RunInCgroup(cg.path(), [&] { return UringCmd(sock, kSocketSiocinq); });
  auto events = TakeEvents(cg.path());
  int uring_cmd_events = Count(events, "tamper.io_uring", [](const cordon::v1::AuditEvent& e) {
    return e.target().arg() == 3 && e.target().arg2() == kSocketSiocinq;
  });
  if (control == EOPNOTSUPP) {
    struct utsname u;
    ::uname(&u);
    int major = 0, minor = 0;
    std::sscanf(u.release, "%d.%d", &major, &minor);
    EXPECT_TRUE(major < 6 || (major == 6 && minor < 7)) << u.release << ": sockets implement uring_cmd since 6.7";
    EXPECT_EQ(confined, EOPNOTSUPP) << "refused before the hook on " << u.release;
    EXPECT_EQ(uring_cmd_events, 0) << Dump(events);
    return;
  }
  ASSERT_EQ(control, 0) << "negative control: SIOCINQ through uring_cmd works unconfined";
  EXPECT_EQ(confined, EPERM);
  EXPECT_EQ(uring_cmd_events, 1) << Dump(events);
}

// ---- process accounting (issue 11: host-wide objects)

// acct() makes the kernel write a record for every process that exits on the
// machine into the named file: a sandbox with a writable file could watch
// the whole host. Refused for sandboxed root, also when the policy grants
// sys_pacct (like sys_boot, sys_time and sys_module). Only the test's own
// directory is written; accounting is switched off again at the end.
TEST_F(LsmEscapes, AcctIsRefusedForSandboxedRoot) {
  const std::string file = P("out/acct");
  WriteText(file, "");
  struct AcctOff {
    ~AcctOff() { ::acct(nullptr); }
  } off;
  auto size = [&] {
    struct stat st;
    return ::stat(file.c_str(), &st) == 0 ? st.st_size : -1;
  };
  // Negative control: unconfined, accounting starts (a child's exit is
  // recorded) and stops.
  ASSERT_EQ(::acct(file.c_str()), 0) << std::strerror(errno);
  pid_t pid = ::fork();
  if (pid == 0) _exit(0);
  ::waitpid(pid, nullptr, 0);
  ASSERT_EQ(::acct(nullptr), 0);
  const off_t recorded = size();
  EXPECT_GT(recorded, 0) << "the control's child was recorded";

  for (const char* extra : {"", "  capabilities: [sys_pacct]\n"}) {
    TestCgroup cg("acct");
    Attach(cg, extra);
    EXPECT_EQ(RunInCgroup(cg.path(), [&] { return ::acct(file.c_str()) ? errno : 0; }), EPERM) << extra;
    pid = ::fork();  // an exit that would be recorded
    if (pid == 0) _exit(0);
    ::waitpid(pid, nullptr, 0);
    EXPECT_EQ(size(), recorded) << "accounting stayed off " << extra;
    auto events = TakeEvents(cg.path());
    EXPECT_EQ(Count(events, "tamper.acct"), 1) << extra << Dump(events);
    for (const auto& e : events) EXPECT_EQ(e.enforcement(), "kernel-lsm") << Dump(events);
  }
}

// Tamper hooks that no other test reached: PTRACE_TRACEME by a parent outside
// the sandbox, pivot_root and move_mount (each hook runs right after the path
// lookups, before the kernel's own checks, so with sys_admin granted the
// refusal is the hook's). Controls: unconfined, the same calls get past the
// hook (TRACEME succeeds; pivot_root and move_mount fail with EINVAL because
// the paths are no mount points).
TEST_F(LsmEscapes, TracemePivotRootAndMoveMountAreRefused) {
  ASSERT_EQ(::mkdir(P("out/old").c_str(), 0755), 0);
  const std::string in = P("in"), out = P("out"), old = P("out/old");
  auto traceme = [] { return ::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr) == 0 ? 0 : errno; };
  auto pivot = [&] { return ::syscall(SYS_pivot_root, out.c_str(), old.c_str()) == 0 ? 0 : errno; };
  auto move = [&] {
    return ::syscall(SYS_move_mount, AT_FDCWD, in.c_str(), AT_FDCWD, out.c_str(), 0) == 0 ? 0 : errno;
  };
  TestCgroup cg("tamper-hooks");
  // Controls, in the cgroup before anything is attached.
  EXPECT_EQ(RunInCgroup(cg.path(), traceme), 0);
  EXPECT_EQ(RunInCgroup(cg.path(), pivot), EINVAL);
  EXPECT_EQ(RunInCgroup(cg.path(), move), EINVAL);
  Attach(cg, "  capabilities: [sys_admin]\n");
  EXPECT_EQ(RunInCgroup(cg.path(), traceme), EPERM);
  EXPECT_EQ(RunInCgroup(cg.path(), pivot), EPERM);
  EXPECT_EQ(RunInCgroup(cg.path(), move), EPERM);
  auto events = TakeEvents(cg.path());
  EXPECT_EQ(Count(events, "tamper.ptrace",
                  [](const cordon::v1::AuditEvent& e) { return e.target().pid() == static_cast<uint32_t>(::getpid()); }),
            1)
      << "TRACEME names the outside parent\n" << Dump(events);
  EXPECT_EQ(Count(events, "tamper.mount", [](const cordon::v1::AuditEvent& e) { return EndsWith(e.file().path(), "/out"); }),
            2)
      << "pivot_root and move_mount, each naming its target\n" << Dump(events);
  EXPECT_EQ(Count(events, "tamper.capability"), 0) << "sys_admin was granted: the hooks decided\n" << Dump(events);
}

// unix_may_send: a datagram to a host socket is write access to the socket's
// path (unix_dgram sendto has no connect to judge). Control: unconfined, both
// receive; sandboxed, only the one under the write rule.
TEST_F(LsmEscapes, UnixDatagramsToHostSocketsNeedWriteOnTheirPath) {
  auto bind_dgram = [](const std::string& path) {
    int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un a = {};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
    if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd);
      return -1;
    }
    return fd;
  };
  const std::string host = P("secret/host.dgram"), ok = P("out/ok.dgram");
  int host_fd = bind_dgram(host), ok_fd = bind_dgram(ok);
  ASSERT_GE(host_fd, 0);
  ASSERT_GE(ok_fd, 0);
  auto send_to = [](const std::string& path) {
    return [path] {
      int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      if (fd < 0) return 1000 + errno;
      sockaddr_un a = {};
      a.sun_family = AF_UNIX;
      std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
      int r = ::sendto(fd, "x", 1, 0, reinterpret_cast<sockaddr*>(&a), sizeof a) == 1 ? 0 : errno;
      ::close(fd);
      return r;
    };
  };
  auto received = [](int fd) {
    int n = 0;
    char c;
    while (::recv(fd, &c, 1, 0) == 1) ++n;
    return n;
  };
  TestCgroup cg("unix-dgram");
  EXPECT_EQ(RunInCgroup(cg.path(), send_to(host)), 0);
  EXPECT_EQ(RunInCgroup(cg.path(), send_to(ok)), 0);
  EXPECT_EQ(received(host_fd), 1);
  EXPECT_EQ(received(ok_fd), 1);
  Attach(cg);
  EXPECT_EQ(RunInCgroup(cg.path(), send_to(host)), EPERM);
  EXPECT_EQ(RunInCgroup(cg.path(), send_to(ok)), 0);
  EXPECT_EQ(received(host_fd), 0) << "nothing reached the host socket";
  EXPECT_EQ(received(ok_fd), 1);
  auto events = TakeEvents(cg.path());
  EXPECT_EQ(Count(events, "net.unix", [](const cordon::v1::AuditEvent& e) { return EndsWith(e.file().path(), "/secret/host.dgram"); }),
            1)
      << Dump(events);
  EXPECT_EQ(Count(events, "net.unix", [](const cordon::v1::AuditEvent& e) { return EndsWith(e.file().path(), "/out/ok.dgram"); }),
            0)
      << Dump(events);
  ::close(host_fd);
  ::close(ok_fd);
}

}  // namespace
}  // namespace cordon::test
