// Unix-socket connects without BPF LSM: cgroup/connect_unix and
// cgroup/sendmsg_unix (kernel 6.7+) refuse addresses outside the policy, as
// written; aliases they cannot see (a symlink in a writable directory) are
// caught by the detect layer at syscall exit. Where BPF LSM is usable it
// decides (tests/lsm) and these hooks stand aside.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "tests/integration/harness.h"
#include "loader/kernel_features.h"

namespace cordon::test {
namespace {

sockaddr_un UnixAddr(const std::string& path, socklen_t* len) {
  sockaddr_un a = {};
  a.sun_family = AF_UNIX;
  if (!path.empty() && path[0] == '@') {  // abstract
    std::memcpy(a.sun_path + 1, path.data() + 1, path.size() - 1);
    *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size());
  } else {
    std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
    *len = sizeof a;
  }
  return a;
}

int Listen(const std::string& path, int type) {
  int fd = ::socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
  socklen_t len;
  sockaddr_un a = UnixAddr(path, &len);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0) return -1;
  if (type == SOCK_STREAM) ::listen(fd, 16);
  return fd;
}

std::function<int()> ConnectTo(const std::string& path, const std::string& cwd = "") {
  return [path, cwd] {
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) return 1000 + errno;
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    socklen_t len;
    sockaddr_un a = UnixAddr(path, &len);
    int r = ::connect(fd, reinterpret_cast<sockaddr*>(&a), len) ? errno : 0;
    ::close(fd);
    return r;
  };
}

std::function<int()> SendTo(const std::string& path) {
  return [path] {
    int fd = ::socket(AF_UNIX, SOCK_DGRAM, 0);
    socklen_t len;
    sockaddr_un a = UnixAddr(path, &len);
    int r = ::sendto(fd, "x", 1, 0, reinterpret_cast<sockaddr*>(&a), len) == 1 ? 0 : errno;
    ::close(fd);
    return r;
  };
}

class UnixHooksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root";
    if (LsmUsableHere()) GTEST_SKIP() << "BPF LSM decides unix connects here (tests/lsm covers it)";
    if (!UnixHooks().available()) GTEST_SKIP() << "kernel without cgroup/connect_unix (before 6.7)";
    char tmpl[] = "/tmp/cordon-unix-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    allowed_ = dir_ + "/allowed";
    ::mkdir(allowed_.c_str(), 0755);
    daemon_ = dir_ + "/daemon.sock";
    ok_ = allowed_ + "/ok.sock";
    fds_ = {Listen(daemon_, SOCK_STREAM), Listen(ok_, SOCK_STREAM), Listen(dir_ + "/daemon.dgram", SOCK_DGRAM),
            Listen(allowed_ + "/ok.dgram", SOCK_DGRAM), Listen("@cordon-test-abstract-" + std::to_string(getpid()),
                                                                 SOCK_STREAM)};
    for (int fd : fds_) ASSERT_GE(fd, 0) << std::strerror(errno);
  }
  void TearDown() override {
    for (int fd : fds_) ::close(fd);
    if (!dir_.empty()) cordon::test::Run({"rm", "-rf", dir_});
  }
  std::string Policy(const std::string& extra_spec, const std::string& files = "") {
    return "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: unix}\nspec:\n" + extra_spec +
           (files.empty() ? "  files:\n    include: [runtime-minimal]\n    write: [" + allowed_ + "]\n" : files);
  }
  std::string abstract() const { return "@cordon-test-abstract-" + std::to_string(getpid()); }

  std::string dir_, allowed_, daemon_, ok_;
  std::vector<int> fds_;
};

const cordon::v1::AuditEvent* FindUnix(const std::vector<cordon::v1::AuditEvent>& events, const std::string& path) {
  for (const auto& e : events)
    if (e.kind() == "net.unix" && e.file().path() == path) return &e;
  return nullptr;
}

TEST_F(UnixHooksTest, PathsOutsideThePolicyAreRefusedAsWritten) {
  TestCgroup cg("unix");
  PolicyFile policy(Policy(""));
  CommandResult r = Cordon({"attach", "--cgroup", cg.path(), "--policy", policy.path(), "--allow-degraded"});
  ASSERT_EQ(r.status, 0) << r.err;

  EXPECT_EQ(RunInCgroup(cg.path(), ConnectTo(ok_)), 0) << "a socket under a write rule";
  EXPECT_EQ(RunInCgroup(cg.path(), ConnectTo(daemon_)), EPERM) << "a host daemon's socket";
  EXPECT_EQ(RunInCgroup(cg.path(), SendTo(allowed_ + "/ok.dgram")), 0);
  EXPECT_EQ(RunInCgroup(cg.path(), SendTo(dir_ + "/daemon.dgram")), EPERM) << "sendto() without connect()";
  // Strings that could alias: "..", relative paths (even to allowed sockets).
  EXPECT_EQ(RunInCgroup(cg.path(), ConnectTo(allowed_ + "/../daemon.sock")), EPERM);
  EXPECT_EQ(RunInCgroup(cg.path(), ConnectTo("daemon.sock", dir_)), EPERM);
  EXPECT_EQ(RunInCgroup(cg.path(), ConnectTo("ok.sock", allowed_)), EPERM) << "relative: refused, not guessed";
  EXPECT_EQ(RunInCgroup(cg.path(), ConnectTo(abstract())), EPERM) << "abstract needs network.abstractUnix";

  auto events = TakeEvents(cg.path());
  const auto* daemon = FindUnix(events, daemon_);
  ASSERT_NE(daemon, nullptr);
  EXPECT_EQ(daemon->verdict(), "denied");
  EXPECT_EQ(daemon->enforcement(), "kernel-cgroup");
  EXPECT_EQ(daemon->file().access(), "write");
  EXPECT_NE(daemon->reason().find("checked as written"), std::string::npos) << daemon->reason();
  ASSERT_NE(FindUnix(events, dir_ + "/daemon.dgram"), nullptr) << "sendto reported";
  const auto* dotdot = FindUnix(events, allowed_ + "/../daemon.sock");
  ASSERT_NE(dotdot, nullptr);
  EXPECT_NE(dotdot->reason().find("\"..\""), std::string::npos) << dotdot->reason();
  ASSERT_NE(FindUnix(events, "daemon.sock"), nullptr);
  ASSERT_NE(FindUnix(events, "ok.sock"), nullptr);
  const auto* abs = FindUnix(events, abstract());
  ASSERT_NE(abs, nullptr) << "abstract names are shown as @name";
  EXPECT_NE(abs->reason().find("abstractUnix"), std::string::npos);
  int unix_events = 0;
  for (const auto& e : events) unix_events += e.kind() == "net.unix";
  EXPECT_EQ(unix_events, 6) << "one event per refusal, none for allowed sockets";
}

// A symlink in a writable directory aliases a forbidden socket: the string
// layer lets it through (it cannot see it), and the detect layer reports the
// connect from the inode it reached, or kills the process with onViolation: kill.
TEST_F(UnixHooksTest, SymlinkAliasIsDetectedAndKilled) {
  std::string link = allowed_ + "/alias.sock";
  ASSERT_EQ(::symlink(daemon_.c_str(), link.c_str()), 0);
  TestCgroup cg("unix-alias");
  PolicyFile report(Policy(""));
  CommandResult r = Cordon({"attach", "--cgroup", cg.path(), "--policy", report.path(), "--allow-degraded"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(RunInCgroup(cg.path(), ConnectTo(link)), 0) << "not prevented: the string is under the write rule";
  auto events = TakeEvents(cg.path());
  const auto* detected = FindUnix(events, daemon_);
  ASSERT_NE(detected, nullptr) << "reported by the inode it reached";
  EXPECT_EQ(detected->verdict(), "detected");
  EXPECT_EQ(detected->enforcement(), "detect");

  PolicyFile kill(Policy("  onViolation: kill\n"));
  r = Cordon({"attach", "--cgroup", cg.path(), "--policy", kill.path(), "--allow-degraded"});
  ASSERT_EQ(r.status, 0) << r.err;
  ChildOutcome killed = RunInCgroupStatus(cg.path(), ConnectTo(link));
  EXPECT_TRUE(killed.KilledBy(SIGKILL)) << "killed by SIGKILL before connect() returns; answered=" << killed.answered
                                        << " result=" << killed.result << " wait status " << killed.wait_status;
  events = TakeEvents(cg.path());
  const auto* kill_event = FindUnix(events, daemon_);
  ASSERT_NE(kill_event, nullptr) << "the kill is reported";
  EXPECT_EQ(kill_event->verdict(), "killed");
  EXPECT_EQ(RunInCgroup(cg.path(), ConnectTo(ok_)), 0);
}

TEST_F(UnixHooksTest, AuditModeAbstractAllowanceAndNoFileRules) {
  TestCgroup cg("unix-modes");
  PolicyFile audit(Policy("  mode: audit\n"));
  CommandResult r = Cordon({"attach", "--cgroup", cg.path(), "--policy", audit.path(), "--allow-degraded"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(RunInCgroup(cg.path(), ConnectTo(daemon_)), 0);
  auto events = TakeEvents(cg.path());
  const auto* audited = FindUnix(events, daemon_);
  ASSERT_NE(audited, nullptr);
  EXPECT_EQ(audited->verdict(), "audited");

  PolicyFile abstract_ok(Policy("  network:\n    abstractUnix: true\n"));
  r = Cordon({"attach", "--cgroup", cg.path(), "--policy", abstract_ok.path(), "--allow-degraded"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(RunInCgroup(cg.path(), ConnectTo(abstract())), 0);
  EXPECT_EQ(RunInCgroup(cg.path(), ConnectTo(daemon_)), EPERM) << "paths still need a rule";
  events = TakeEvents(cg.path());
  const auto* path_refused = FindUnix(events, daemon_);
  ASSERT_NE(path_refused, nullptr) << "the refused path is reported";
  EXPECT_EQ(path_refused->verdict(), "denied");
  EXPECT_EQ(events.size(), 1u) << "the allowed abstract connect is not";

  // Without spec.files, socket paths are not restricted (as with BPF LSM).
  PolicyFile no_files("apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: nofiles}\nspec: {}\n");
  r = Cordon({"attach", "--cgroup", cg.path(), "--policy", no_files.path(), "--allow-degraded"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(RunInCgroup(cg.path(), ConnectTo(daemon_)), 0);
  EXPECT_EQ(RunInCgroup(cg.path(), ConnectTo(abstract())), EPERM) << "abstract still needs the allowance";
  events = TakeEvents(cg.path());
  ASSERT_EQ(events.size(), 1u) << "only the abstract refusal is reported";
  EXPECT_EQ(events[0].kind(), "net.unix");
  EXPECT_EQ(events[0].verdict(), "denied");
}

}  // namespace
}  // namespace cordon::test
