// spec.quiet (issue 19, item 7): expected denials stay denials, are recorded
// with quiet:true and counted by the kernel, but are not violations: the run
// summary shows them apart and --fail-on-violation ignores them. Each probe
// has a control: the same probe unconfined succeeds, and a denial that no
// pattern matches stays a violation.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "abi/cordon_common.h"
#include "loader/sandbox.h"
#include "tests/integration/harness.h"

namespace cordon::test {
namespace {

using cordon::v1::AuditEvent;

class Quiet : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "integration tests need root";
    char tmpl[] = "/tmp/cordon-quiet-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override {
    if (!dir_.empty()) cordon::test::Run({"rm", "-rf", dir_});
  }
  std::string dir_;
};

// Each argument is connect=PORT (127.0.0.1) or open=PATH; prints one line
// per probe ("connect 9 ok" or "connect 9 errno 1") and exits 0.
const char* kProbe =
    "import socket,sys\n"
    "for arg in sys.argv[1:]:\n"
    "  what, target = arg.split('=', 1)\n"
    "  try:\n"
    "    if what == 'connect':\n"
    "      s = socket.socket(); s.connect(('127.0.0.1', int(target))); s.close()\n"
    "    else:\n"
    "      open(target).read()\n"
    "    print(what, target, 'ok')\n"
    "  except OSError as e:\n"
    "    print(what, target, 'errno', e.errno)\n";

std::vector<std::string> Probe(const std::vector<std::string>& probes) {
  std::vector<std::string> argv = {"/usr/bin/python3", "-c", kProbe};
  argv.insert(argv.end(), probes.begin(), probes.end());
  return argv;
}

// No egress; files: what python3 needs to start. Quiet: connects to
// 127.0.0.1:quiet_port, and reads of /etc/issue*.
std::string QuietPolicy(const std::string& name, uint16_t quiet_port) {
  return "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata:\n  name: " + name +
         "\nspec:\n"
         "  files:\n"
         "    include: [runtime-minimal, python3]\n"
         "  quiet:\n"
         "    - kind: net.connect\n"
         "      address: 127.0.0.1\n"
         "      ports: [" +
         std::to_string(quiet_port) +
         "]\n"
         "      description: the probe's expected connect\n"
         "    - kind: file.open\n"
         "      path: /etc/issue*\n";
}

const AuditEvent* Find(const std::vector<AuditEvent>& events, const std::string& kind, uint32_t port,
                       const std::string& path = "") {
  for (const auto& e : events)
    if (e.kind() == kind && (path.empty() ? e.net().port() == port : e.file().path() == path)) return &e;
  return nullptr;
}

TEST_F(Quiet, RunShowsExpectedDenialsApartAndFailOnViolationIgnoresThem) {
  TcpListener expected, control;  // loopback, outside every sandbox
  const std::string qport = std::to_string(expected.port()), cport = std::to_string(control.port());
  // Negative control: unconfined, every probe succeeds.
  CommandResult unconfined =
      cordon::test::Run(Probe({"connect=" + qport, "connect=" + cport, "open=/etc/issue", "open=/etc/debian_version"}));
  ASSERT_EQ(unconfined.status, 0) << unconfined.err;
  EXPECT_NE(unconfined.out.find("connect " + qport + " ok"), std::string::npos) << unconfined.out;
  EXPECT_NE(unconfined.out.find("connect " + cport + " ok"), std::string::npos) << unconfined.out;
  EXPECT_NE(unconfined.out.find("open /etc/issue ok"), std::string::npos) << unconfined.out;
  EXPECT_NE(unconfined.out.find("open /etc/debian_version ok"), std::string::npos) << unconfined.out;
  EXPECT_EQ(expected.AcceptCount(1), 1);
  EXPECT_EQ(control.AcceptCount(1), 1);

  PolicyFile policy(QuietPolicy("quiet-run", expected.port()));
  const std::string audit = dir_ + "/both.jsonl";
  CommandResult r = Cordon({"run", "--policy", policy.path(), "--audit", audit, "--", "/usr/bin/python3", "-c", kProbe,
                            "connect=" + qport, "connect=" + cport, "open=/etc/issue", "open=/etc/debian_version"});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  // Quiet is no weaker: the expected connect and read are refused too.
  EXPECT_NE(r.out.find("connect " + qport + " errno 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("connect " + cport + " errno 1"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("open /etc/issue ok"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("open /etc/debian_version ok"), std::string::npos) << r.out;
  EXPECT_EQ(expected.AcceptPending(), 0);
  EXPECT_EQ(control.AcceptPending(), 0);

  // The audit file has all four, the expected ones marked, the verdict unchanged.
  auto events = AuditFileEvents(audit);
  const AuditEvent* q_connect = Find(events, "net.connect", expected.port());
  const AuditEvent* c_connect = Find(events, "net.connect", control.port());
  const AuditEvent* q_open = Find(events, "file.open", 0, "/etc/issue");
  const AuditEvent* c_open = Find(events, "file.open", 0, "/etc/debian_version");
  ASSERT_TRUE(q_connect && c_connect && q_open && c_open) << r.err;
  EXPECT_TRUE(q_connect->quiet());
  EXPECT_EQ(q_connect->verdict(), "denied");
  EXPECT_FALSE(c_connect->quiet());
  EXPECT_EQ(c_connect->verdict(), "denied");
  EXPECT_TRUE(q_open->quiet());
  EXPECT_EQ(q_open->verdict(), "denied");
  EXPECT_FALSE(c_open->quiet());
  const std::string text = cordon::test::Run({"cat", audit}).out;
  EXPECT_NE(text.find("\"quiet\":true"), std::string::npos) << text;
  size_t quiet_lines = 0;
  for (size_t at = 0; (at = text.find("\"quiet\":true", at)) != std::string::npos; ++at) quiet_lines++;
  EXPECT_EQ(quiet_lines, 2u) << text;
  // The summary counts the controls as violations and the expected ones apart.
  EXPECT_NE(r.err.find("cordon: 2 violations (2 denied, 0 audited: file.open x1 net.connect x1); 2 expected "
                       "(spec.quiet: file.open x1 net.connect x1); "),
            std::string::npos)
      << r.err;

  // --fail-on-violation: only the expected denials: the command's status.
  r = Cordon({"run", "--policy", policy.path(), "--audit", dir_ + "/quiet.jsonl", "--fail-on-violation", "--",
              "/usr/bin/python3", "-c", kProbe, "connect=" + qport, "open=/etc/issue"});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("connect " + qport + " errno 1"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("cordon: no violations; 2 expected (spec.quiet: file.open x1 net.connect x1)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("--fail-on-violation:"), std::string::npos) << r.err;
  // ... and the control denial: 123.
  r = Cordon({"run", "--policy", policy.path(), "--audit", dir_ + "/control.jsonl", "--fail-on-violation", "--",
              "/usr/bin/python3", "-c", kProbe, "connect=" + qport, "connect=" + cport});
  EXPECT_EQ(r.status, 123) << r.out << r.err;
  EXPECT_NE(r.err.find("--fail-on-violation: 1 violation: exit status 123"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("1 violation (1 denied, 0 audited: net.connect x1); 1 expected (spec.quiet: net.connect x1)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(expected.AcceptPending(), 0);
  EXPECT_EQ(control.AcceptPending(), 0);
}

// An attached sandbox read by `cordon tail` (no agent): the patterns pinned
// with it mark its events, a replacement's patterns apply to what follows,
// and the kernel counts every denial, quiet or not.
TEST_F(Quiet, AttachedSandboxesEventsFollowTheirPolicysPatternsAcrossAReplacement) {
  TcpListener first, second;
  const uint16_t p1 = first.port(), p2 = second.port();
  // Negative control: unconfined, both connect.
  TestCgroup unconfined("quiet-unconfined");
  EXPECT_EQ(RunInCgroup(unconfined.path(), [&] { return TcpConnect(V4("127.0.0.1", p1)); }), 0);
  EXPECT_EQ(RunInCgroup(unconfined.path(), [&] { return TcpConnect(V4("127.0.0.1", p2)); }), 0);
  EXPECT_EQ(first.AcceptCount(1), 1);
  EXPECT_EQ(second.AcceptCount(1), 1);

  TestCgroup cg("quiet-attach");
  PolicyFile a(QuietConnectPolicy("quiet-a", p1, "net")), b(QuietConnectPolicy("quiet-b", p2, "net"));
  CommandResult r = Cordon({"attach", "--cgroup", cg.path(), "--policy", a.path(), "--allow-degraded"});
  ASSERT_EQ(r.status, 0) << r.err;
  auto connect_both = [&] {
    EXPECT_EQ(RunInCgroup(cg.path(), [&] { return TcpConnect(V4("127.0.0.1", p1)); }), EPERM);
    EXPECT_EQ(RunInCgroup(cg.path(), [&] { return TcpConnect(V4("127.0.0.1", p2)); }), EPERM);
  };
  connect_both();
  auto events = TakeEvents(cg.path());
  const AuditEvent* e1 = Find(events, "net.connect", p1);
  const AuditEvent* e2 = Find(events, "net.connect", p2);
  ASSERT_TRUE(e1 && e2);
  EXPECT_TRUE(e1->quiet());
  EXPECT_FALSE(e2->quiet()) << "control: no pattern names it";
  EXPECT_EQ(e1->policy(), "quiet-a");

  r = Cordon({"update", "--cgroup", cg.path(), "--policy", b.path(), "--allow-degraded"});
  ASSERT_EQ(r.status, 0) << r.err;
  connect_both();
  events = TakeEvents(cg.path());
  e1 = Find(events, "net.connect", p1);
  e2 = Find(events, "net.connect", p2);
  ASSERT_TRUE(e1 && e2);
  EXPECT_FALSE(e1->quiet()) << "the old policy's pattern no longer applies";
  EXPECT_TRUE(e2->quiet()) << "the new policy's does";
  EXPECT_EQ(e2->policy(), "quiet-b");
  EXPECT_EQ(first.AcceptPending(), 0);
  EXPECT_EQ(second.AcceptPending(), 0);
  // The kernel counted all four (cordon status shows them): quiet is a
  // reader's mark, not a kernel one.
  auto info = GetSandbox(cg.id());
  ASSERT_TRUE(info.ok()) << info.error().ToString();
  EXPECT_EQ(info->counters[CORDON_CNT_DENIED_CONNECT], 4u);
  // And back: the pin follows every replacement.
  r = Cordon({"update", "--cgroup", cg.path(), "--policy", a.path(), "--allow-degraded"});
  ASSERT_EQ(r.status, 0) << r.err;
  connect_both();
  events = TakeEvents(cg.path());
  e1 = Find(events, "net.connect", p1);
  ASSERT_TRUE(e1);
  EXPECT_TRUE(e1->quiet()) << "back to the first policy's patterns";
}

// `cordon tail -f` without an agent reads the ring buffer itself: a policy
// replaced while it follows brings the new patterns (and names) with it.
TEST_F(Quiet, AFollowingTailTakesTheReplacementsPatterns) {
  TcpListener first, second;
  const uint16_t p1 = first.port(), p2 = second.port();
  TestCgroup cg("quiet-follow");
  PolicyFile a(QuietConnectPolicy("quiet-follow-a", p1)), b(QuietConnectPolicy("quiet-follow-b", p2));
  CommandResult r = Cordon({"attach", "--cgroup", cg.path(), "--policy", a.path(), "--allow-degraded"});
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string out = dir_ + "/tail.jsonl";
  const pid_t tail = ::fork();
  if (tail == 0) {
    int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ::dup2(fd, 1);
    ::execl(CORDON_BINARY, CORDON_BINARY, "tail", "-f", "--cgroup", cg.path().c_str(), nullptr);
    _exit(127);
  }
  ASSERT_GT(tail, 0);
  auto connects = [&] {
    std::vector<AuditEvent> found;
    for (auto& e : ParseJsonLines(Slurp(out), /*growing=*/true))
      if (e.kind() == "net.connect") found.push_back(std::move(e));
    return found;
  };
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return TcpConnect(V4("127.0.0.1", p1)); }), EPERM);
  const bool first_seen = WaitFor([&] { return connects().size() == 1; }, 10000);
  r = Cordon({"update", "--cgroup", cg.path(), "--policy", b.path(), "--allow-degraded"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return TcpConnect(V4("127.0.0.1", p1)); }), EPERM);
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return TcpConnect(V4("127.0.0.1", p2)); }), EPERM);
  const bool all_seen = WaitFor([&] { return connects().size() == 3; }, 10000);
  ::kill(tail, SIGTERM);  // our own child
  int status = 0;
  ::waitpid(tail, &status, 0);
  ASSERT_TRUE(first_seen && all_seen) << Slurp(out);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  auto events = connects();
  EXPECT_TRUE(events[0].quiet()) << "policy a: port " << p1 << " is expected";
  EXPECT_EQ(events[0].policy(), "quiet-follow-a");
  EXPECT_EQ(events[1].net().port(), p1);
  EXPECT_FALSE(events[1].quiet()) << "policy b no longer expects it";
  EXPECT_TRUE(events[2].quiet()) << "policy b expects port " << p2;
  EXPECT_EQ(events[2].policy(), "quiet-follow-b");
  EXPECT_EQ(first.AcceptPending() + second.AcceptPending(), 0);
}

}  // namespace
}  // namespace cordon::test
