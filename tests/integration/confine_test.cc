// The Landlock layer of `cordon run`, for real on the host kernel: a policy is
// compiled, its plan prepared in this process, and a forked child restricts
// itself (exactly as `cordon run`'s child does before exec), makes real
// syscalls and reports each unexpected outcome through a pipe. No cgroup and
// no BPF program is involved, so every denial seen here is Landlock's.
// Hermetic: a temporary directory (removed), loopback listeners owned by the
// test, every child reaped.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "confine/landlock.h"
#include "policy/compiler.h"
#include "policy/parser.h"
#include "tests/common/in_child.h"
#include "tests/integration/harness.h"

namespace cordon::test {
namespace {

// Runs `body` in a forked child after ApplyLandlockInChild; returns what the
// body returned (empty = every check passed), or how the child failed.
std::string RunConfined(int ruleset_fd, const std::function<std::string()>& body) {
  return InChild([&] {
    int err = ApplyLandlockInChild(ruleset_fd);
    return err ? std::string("ApplyLandlockInChild: ") + std::strerror(err) : body();
  });
}

struct Checks {
  std::string failures;
  // 0 or an errno, compared with `want`.
  void Result(const std::string& what, int got, int want) {
    if (got != want)
      failures += what + ": expected " + (want ? std::strerror(want) : "success") + ", got " +
                  (got ? std::strerror(got) : "success") + "\n";
  }
};

// open() as 0 or errno; the fd is closed.
int OpenErrno(const std::string& path, int flags, mode_t mode = 0644) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
  if (fd < 0) return errno;
  ::close(fd);
  return 0;
}

// execv in a grandchild. Returns the exec errno (0 when exec succeeded) and
// the program's exit status in *status.
int ExecErrno(const std::vector<std::string>& argv, int* status, int exec_fd = -1) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    char* env[] = {nullptr};
    if (exec_fd >= 0)
      ::fexecve(exec_fd, args.data(), env);
    else
      ::execve(args[0], args.data(), env);
    int err = errno;
    (void)!::write(fds[1], &err, sizeof err);
    _exit(127);
  }
  ::close(fds[1]);
  int err = 0;
  if (::read(fds[0], &err, sizeof err) != sizeof err) err = 0;
  ::close(fds[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return err;
}


// A listening abstract unix socket owned by the test process.
class AbstractListener {
 public:
  explicit AbstractListener(const std::string& name) : name_(name) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a = Address(name_);
    socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name_.size());
    ok_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&a), len) == 0 && ::listen(fd_, 16) == 0;
  }
  ~AbstractListener() { ::close(fd_); }
  bool ok() const { return ok_; }
  static sockaddr_un Address(const std::string& name) {
    sockaddr_un a;
    std::memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path + 1, name.data(), name.size());
    return a;
  }
  // connect() to abstract `name`: 0 or errno.
  static int Connect(const std::string& name) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return errno;
    sockaddr_un a = Address(name);
    socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    int r = ::connect(fd, reinterpret_cast<sockaddr*>(&a), len) == 0 ? 0 : errno;
    ::close(fd);
    return r;
  }

 private:
  std::string name_;
  int fd_ = -1;
  bool ok_ = false;
};

class ConfineLandlock : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "integration tests need root";
    support_ = ProbeLandlock();
    ASSERT_GE(support_.abi, 1) << "Landlock unavailable: " << support_.detail;
    char tmpl[] = "/tmp/cordon-confine-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ASSERT_EQ(::mkdir((dir_ + "/in").c_str(), 0755), 0);
    ASSERT_EQ(::mkdir((dir_ + "/out").c_str(), 0755), 0);
    std::ofstream(dir_ + "/in/file") << "hello\n";
    std::ofstream(dir_ + "/out/script.sh") << "#!/bin/sh\nexit 5\n";
    ASSERT_EQ(::chmod((dir_ + "/out/script.sh").c_str(), 0755), 0);
    std::filesystem::copy_file("/bin/true", dir_ + "/out/true");
    ASSERT_EQ(::chmod((dir_ + "/out/true").c_str(), 0755), 0);
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }

  policy::CompiledPolicy Compile(const std::string& spec) {
    std::string text = "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata:\n  name: confine\nspec:\n" + spec;
    policy::ParsedPolicy parsed;
    policy::Diagnostics diags;
    policy::CompiledPolicy compiled;
    bool ok = policy::ParsePolicyText(text, "confine.yaml", &parsed, &diags) &&
              policy::Compile(parsed, &compiled, &diags);
    EXPECT_TRUE(ok) << policy::FormatDiagnostics(diags);
    return compiled;
  }

  // runtime-minimal + shell, read in/, write out/, TCP egress to 127.0.0.1:port.
  std::string FilesSpec(uint16_t port, bool abstract_unix = false) {
    return "  network:\n"
           "    families: [unix, inet, inet6]\n" +
           std::string(abstract_unix ? "    abstractUnix: true\n" : "") +
           "    egress:\n"
           "      - cidr: 127.0.0.1\n"
           "        ports: [" +
           std::to_string(port) +
           "]\n"
           "        protocols: [tcp]\n"
           "  files:\n"
           "    include: [runtime-minimal, shell]\n"
           "    read: [" +
           dir_ + "/in]\n    write: [" + dir_ + "/out]\n";
  }

  static bool HasNote(const LandlockPlan& plan, const std::string& needle) {
    for (const auto& n : plan.notes)
      if (n.find(needle) != std::string::npos) return true;
    return false;
  }

  LandlockSupport support_;
  std::string dir_;
};

TEST_F(ConfineLandlock, ProbeReportsAbi) {
  EXPECT_GE(support_.abi, 1);
  EXPECT_TRUE(support_.detail.empty()) << support_.detail;
  // This host (kernel 6.18) has ABI 7; the checks below use 4 and 6 when present.
  std::printf("Landlock ABI %d\n", support_.abi);
}

TEST_F(ConfineLandlock, UnavailableIsAnError) {
  auto plan = PrepareLandlock(Compile(FilesSpec(80)), LandlockSupport{0, "not here"});
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.error().ToString().find("not here"), std::string::npos) << plan.error().ToString();
  EXPECT_EQ(ApplyLandlockInChild(-1), EBADF);  // checked before anything is changed
}

TEST_F(ConfineLandlock, MissingRequiredPathNamesItsRule) {
  std::string spec = "  files:\n    read: [" + dir_ + "/in, " + dir_ + "/no-such-dir]\n";
  auto plan = PrepareLandlock(Compile(spec), support_);
  ASSERT_FALSE(plan.ok());
  std::string message = plan.error().ToString();
  EXPECT_NE(message.find("spec.files.read[1]"), std::string::npos) << message;
  EXPECT_NE(message.find("no-such-dir"), std::string::npos) << message;
  EXPECT_EQ(plan.error().err, ENOENT);
}

TEST_F(ConfineLandlock, FileRulesEnforced) {
  TcpListener listener;
  auto plan = PrepareLandlock(Compile(FilesSpec(listener.port())), support_);
  ASSERT_TRUE(plan.ok()) << plan.error().ToString();
  ASSERT_TRUE(plan->ruleset.valid());
  EXPECT_TRUE(plan->files);
  EXPECT_EQ(plan->abi, support_.abi);
  EXPECT_TRUE(HasNote(*plan, "PROT_EXEC")) << "the MAP_EXEC limitation must be stated";
  EXPECT_TRUE(HasNote(*plan, "/proc/<pid>"));
  EXPECT_TRUE(HasNote(*plan, "ld-linux"));
  // Unconfined, as root, all of this would succeed (controls).
  ASSERT_EQ(OpenErrno("/etc/shadow", O_RDONLY), 0);
  ASSERT_EQ(OpenErrno("/proc/self/status", O_RDONLY), 0);

  const std::string d = dir_;
  std::string result = RunConfined(plan->ruleset.get(), [&] {
    Checks c;
    c.Result("read in/file", OpenErrno(d + "/in/file", O_RDONLY), 0);
    c.Result("list in/", OpenErrno(d + "/in", O_RDONLY | O_DIRECTORY), 0);
    c.Result("write in/file", OpenErrno(d + "/in/file", O_WRONLY), EACCES);
    c.Result("create in/new", OpenErrno(d + "/in/new", O_WRONLY | O_CREAT), EACCES);
    c.Result("unlink in/file", ::unlink((d + "/in/file").c_str()) == 0 ? 0 : errno, EACCES);
    c.Result("read /etc/shadow", OpenErrno("/etc/shadow", O_RDONLY), EACCES);
    c.Result("list /", OpenErrno("/", O_RDONLY | O_DIRECTORY), EACCES);
    c.Result("read /proc/self/status", OpenErrno("/proc/self/status", O_RDONLY), EACCES);
    c.Result("read /etc/passwd (runtime-minimal)", OpenErrno("/etc/passwd", O_RDONLY), 0);
    c.Result("write /dev/null (runtime-minimal)", OpenErrno("/dev/null", O_WRONLY), 0);
    c.Result("create out/new", OpenErrno(d + "/out/new", O_WRONLY | O_CREAT), 0);
    c.Result("mkdir out/sub", ::mkdir((d + "/out/sub").c_str(), 0755) == 0 ? 0 : errno, 0);
    c.Result("rename within out/", ::rename((d + "/out/new").c_str(), (d + "/out/sub/new").c_str()) == 0 ? 0 : errno,
             0);
    c.Result("unlink out/sub/new", ::unlink((d + "/out/sub/new").c_str()) == 0 ? 0 : errno, 0);
    c.Result("rename in/file into out/", ::rename((d + "/in/file").c_str(), (d + "/out/file").c_str()) == 0 ? 0 : errno,
             EACCES);
    c.Result("mknod char device in out/",
             ::mknod((d + "/out/null").c_str(), S_IFCHR | 0600, makedev(1, 3)) == 0 ? 0 : errno, EACCES);
    int status = -1;
    c.Result("exec /bin/sh", ExecErrno({"/bin/sh", "-c", "exit 3"}, &status), 0);
    if (status != 3) c.failures += "/bin/sh -c 'exit 3' exited " + std::to_string(status) + "\n";
    c.Result("exec out/script.sh (no exec right)", ExecErrno({d + "/out/script.sh"}, &status), EACCES);
    c.Result("exec /usr/sbin/nologin (not in the policy)",
             ExecErrno({"/usr/sbin/nologin"}, &status), EACCES);
    c.Result("exec out/true (no exec right)", ExecErrno({d + "/out/true"}, &status), EACCES);
    // Stated limitations: exec rules bind execve, not code execution. The
    // dynamic loader runs any readable ELF file, an allowed interpreter any
    // readable script.
    c.Result("ld.so out/true", ExecErrno({"/lib64/ld-linux-x86-64.so.2", d + "/out/true"}, &status), 0);
    if (status != 0) c.failures += "ld.so out/true exited " + std::to_string(status) + "\n";
    c.Result("sh out/script.sh", ExecErrno({"/bin/sh", d + "/out/script.sh"}, &status), 0);
    if (status != 5) c.failures += "sh out/script.sh exited " + std::to_string(status) + "\n";
    return c.failures;
  });
  EXPECT_EQ(result, "");
  // The parent is not confined.
  EXPECT_EQ(OpenErrno(dir_ + "/in/new2", O_WRONLY | O_CREAT), 0);
}

// The network half of the plan `cordon run` builds: Landlock handles no
// network access, so every TCP connect (also TCP Fast Open, which Landlock's
// connect check misses on some kernels) reaches the cgroup egress programs,
// which judge address and port and report each refusal.
TEST_F(ConfineLandlock, RunPlanLeavesTcpToTheCgroupPrograms) {
  TestCgroup cg("confine");
  TcpListener allowed, other;
  std::string yaml = LoopbackPolicy("confine-tcp", allowed.port());
  PolicyFile file(yaml);
  CommandResult attached = Cordon({"attach", "--cgroup", cg.path(), "--policy", file.path(), "--allow-degraded"});
  ASSERT_EQ(attached.status, 0) << attached.err;
  policy::ParsedPolicy parsed;
  policy::Diagnostics diags;
  policy::CompiledPolicy compiled;
  ASSERT_TRUE(policy::ParsePolicyText(yaml + "  files:\n    include: [runtime-minimal]\n", "p.yaml", &parsed, &diags) &&
              policy::Compile(parsed, &compiled, &diags))
      << policy::FormatDiagnostics(diags);
  auto plan = PrepareLandlock(compiled, support_);
  ASSERT_TRUE(plan.ok()) << plan.error().ToString();
  EXPECT_TRUE(plan->files);
  EXPECT_TRUE(HasNote(*plan, "left to the cgroup egress programs"));
  ASSERT_TRUE(plan->ruleset.valid());
  const int fd = plan->ruleset.get();
  auto confined = [fd](std::function<int()> body) {
    return [fd, body] {
      int err = ApplyLandlockInChild(fd);
      return err ? 1000 + err : body();
    };
  };
  // Control, unconfined and outside the sandbox: both ports connect, by
  // connect() and by TCP Fast Open.
  ASSERT_EQ(TcpConnect(V4("127.0.0.1", other.port())), 0);
  ASSERT_EQ(TcpFastOpen(V4("127.0.0.1", other.port())), 0);
  ASSERT_EQ(other.AcceptCount(2), 2);

  // Inside, with run's Landlock plan: the cgroup program decides (EPERM, not
  // Landlock's EACCES) and reports.
  EXPECT_EQ(RunInCgroup(cg.path(), confined([&] { return TcpConnect(V4("127.0.0.1", other.port())); })), EPERM);
  EXPECT_EQ(RunInCgroup(cg.path(), confined([&] { return TcpFastOpen(V4("127.0.0.1", other.port())); })), EPERM);
  EXPECT_EQ(RunInCgroup(cg.path(), confined([&] { return TcpConnect(V4("127.0.0.2", allowed.port())); })), EPERM);
  EXPECT_EQ(RunInCgroup(cg.path(), confined([&] { return TcpConnect(V4("127.0.0.1", allowed.port())); })), 0);
  EXPECT_EQ(allowed.AcceptPending(), 1);
  EXPECT_EQ(other.AcceptPending(), 0);
  auto events = TakeEvents(cg.path());
  int to_other = 0, to_other_address = 0;
  for (const auto& e : events) {
    if (e.kind() != "net.connect" || e.verdict() != "denied") continue;
    to_other += e.net().address() == "127.0.0.1" && e.net().port() == other.port();
    to_other_address += e.net().address() == "127.0.0.2" && e.net().port() == allowed.port();
  }
  EXPECT_EQ(to_other, 2) << "connect and TCP Fast Open to the unlisted port, each reported";
  EXPECT_EQ(to_other_address, 1);
  EXPECT_EQ(events.size(), 3u);
}

// proc_self (profile runtime-minimal): the confined process reads its own
// /proc/<pid>, through no alias anything else; its children not even their own.
TEST_F(ConfineLandlock, ProcSelfForTheFirstProcessOnly) {
  auto plan = PrepareLandlock(Compile(FilesSpec(80)), support_);
  ASSERT_TRUE(plan.ok()) << plan.error().ToString();
  EXPECT_TRUE(HasNote(*plan, "/proc/<pid>"));
  const int fd = plan->ruleset.get();
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    Checks c;
    int err = ApplyLandlockInChild(fd, /*proc_self=*/true);
    if (err) c.failures = std::string("ApplyLandlockInChild: ") + std::strerror(err);
    else {
      c.Result("read /proc/self/status", OpenErrno("/proc/self/status", O_RDONLY), 0);
      c.Result("list /proc/self/fd", OpenErrno("/proc/self/fd", O_RDONLY | O_DIRECTORY), 0);
      c.Result("read /proc/1/status", OpenErrno("/proc/1/status", O_RDONLY), EACCES);
      c.Result("read /proc/self/root/etc/shadow", OpenErrno("/proc/self/root/etc/shadow", O_RDONLY), EACCES);
      c.Result("write /proc/self/comm", OpenErrno("/proc/self/comm", O_WRONLY), EACCES);
      int probe[2];
      if (::pipe(probe) == 0) {
        pid_t grandchild = ::fork();
        if (grandchild == 0) {
          int r = OpenErrno("/proc/self/status", O_RDONLY);
          (void)!::write(probe[1], &r, sizeof r);
          _exit(0);
        }
        ::close(probe[1]);
        int r = -1;
        if (::read(probe[0], &r, sizeof r) != sizeof r) r = -1;
        ::close(probe[0]);
        ::waitpid(grandchild, nullptr, 0);
        c.Result("a child reads its own /proc/self/status", r, EACCES);
      }
    }
    (void)!::write(fds[1], c.failures.data(), c.failures.size());
    _exit(0);
  }
  ::close(fds[1]);
  std::string result;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) result.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(result, "");
}

TEST_F(ConfineLandlock, WithoutFilesFilesAreNotRestricted) {
  auto plan = PrepareLandlock(Compile("  network:\n    families: [unix, inet]\n"), support_);
  ASSERT_TRUE(plan.ok()) << plan.error().ToString();
  EXPECT_FALSE(plan->files);
  if (!plan->ruleset.valid()) GTEST_SKIP() << "nothing for Landlock to enforce at ABI " << support_.abi;
  std::string result = RunConfined(plan->ruleset.get(), [&] {
    Checks c;
    c.Result("read /etc/shadow", OpenErrno("/etc/shadow", O_RDONLY), 0);
    return c.failures;
  });
  EXPECT_EQ(result, "");
}

TEST_F(ConfineLandlock, SignalsAndAbstractSocketsScopedToTheDomain) {
  if (support_.abi < 6) GTEST_SKIP() << "scoping needs Landlock ABI 6";
  TcpListener unused;
  Sleeper outside;
  std::string name = "cordon-confine-" + std::to_string(::getpid());
  AbstractListener listener(name);
  ASSERT_TRUE(listener.ok());
  ASSERT_EQ(AbstractListener::Connect(name), 0);  // control, unconfined
  auto plan = PrepareLandlock(Compile(FilesSpec(unused.port())), support_);
  ASSERT_TRUE(plan.ok()) << plan.error().ToString();
  EXPECT_TRUE(plan->scoped);
  const pid_t target = outside.pid();
  std::string result = RunConfined(plan->ruleset.get(), [&] {
    Checks c;
    c.Result("kill(outside, SIGTERM)", ::kill(target, SIGTERM) == 0 ? 0 : errno, EPERM);
    // Inside the domain signals work: a grandchild started after the restriction.
    pid_t inner = ::fork();
    if (inner == 0) {
      for (;;) ::pause();
    }
    c.Result("kill(own child, SIGTERM)", ::kill(inner, SIGTERM) == 0 ? 0 : errno, 0);
    ::waitpid(inner, nullptr, 0);
    c.Result("connect to an abstract socket outside", AbstractListener::Connect(name), EPERM);
    // One the sandbox creates itself is reachable.
    AbstractListener own(name + "-inner");
    if (!own.ok()) c.failures += "bind own abstract socket failed\n";
    c.Result("connect to its own abstract socket", AbstractListener::Connect(name + "-inner"), 0);
    return c.failures;
  });
  EXPECT_EQ(result, "");
  EXPECT_TRUE(outside.Alive());
}

TEST_F(ConfineLandlock, AbstractUnixAllowedByPolicyIsNotScoped) {
  if (support_.abi < 6) GTEST_SKIP() << "scoping needs Landlock ABI 6";
  TcpListener unused;
  std::string name = "cordon-confine-allowed-" + std::to_string(::getpid());
  AbstractListener listener(name);
  ASSERT_TRUE(listener.ok());
  auto plan = PrepareLandlock(Compile(FilesSpec(unused.port(), /*abstract_unix=*/true)), support_);
  ASSERT_TRUE(plan.ok()) << plan.error().ToString();
  std::string result = RunConfined(plan->ruleset.get(), [&] {
    Checks c;
    c.Result("connect to an abstract socket outside", AbstractListener::Connect(name), 0);
    return c.failures;
  });
  EXPECT_EQ(result, "");
}

// A stated limitation, checked so that the note stays true: memfd execution
// is not mediated by Landlock (the memfd lives on an internal mount).
TEST_F(ConfineLandlock, MemfdExecIsNotRefusedAsStated) {
  TcpListener unused;
  auto plan = PrepareLandlock(Compile(FilesSpec(unused.port())), support_);
  ASSERT_TRUE(plan.ok()) << plan.error().ToString();
  ASSERT_TRUE(HasNote(*plan, "memfd"));
  std::string result = RunConfined(plan->ruleset.get(), [&] {
    Checks c;
    // /bin/true is exec-allowed (shell profile), hence readable.
    int src = ::open("/bin/true", O_RDONLY | O_CLOEXEC);
    int mem = ::memfd_create("cordon-test", MFD_CLOEXEC);
    if (src < 0 || mem < 0) return std::string("open /bin/true or memfd_create failed\n");
    char buf[65536];
    ssize_t n;
    while ((n = ::read(src, buf, sizeof buf)) > 0) (void)!::write(mem, buf, static_cast<size_t>(n));
    ::close(src);
    int status = -1;
    // MFD_CLOEXEC + fexecve of a binary works (no script: /proc/self/fd is not reachable).
    c.Result("fexecve(memfd copy of /bin/true)", ExecErrno({"true"}, &status, mem), 0);
    if (status != 0) c.failures += "memfd true exited " + std::to_string(status) + "\n";
    return c.failures;
  });
  EXPECT_EQ(result, "");
}

}  // namespace
}  // namespace cordon::test
