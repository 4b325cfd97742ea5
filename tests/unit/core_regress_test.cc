// ops/regress.h without a kernel: cases from events (distinct, counted, only
// denied violations), the case YAML read back, the strict reader's errors
// (file:line:column: field), the judgement of a probe's result and events,
// and the JUnit text.
#include <gtest/gtest.h>

#include <cerrno>

#include "ops/regress.h"

namespace cordon::ops {
namespace {

namespace v1 = cordon::v1;

v1::AuditEvent Connect(const std::string& address, uint32_t port, const std::string& verdict = "denied") {
  v1::AuditEvent e;
  e.set_kind("net.connect");
  e.set_verdict(verdict);
  e.set_enforcement("kernel-cgroup");
  e.set_policy("p");
  e.set_sandbox("s");
  e.set_chain(std::string(64, 'a'));
  e.mutable_net()->set_address(address);
  e.mutable_net()->set_port(port);
  e.mutable_net()->set_protocol("tcp");
  e.mutable_net()->set_family("inet");
  e.mutable_time()->set_seconds(1764900000);
  return e;
}

v1::AuditEvent Read(const std::string& path) {
  v1::AuditEvent e;
  e.set_kind("file.open");
  e.set_verdict("denied");
  e.set_enforcement("landlock");
  e.set_policy("p");
  e.mutable_file()->set_path(path);
  e.mutable_file()->set_access("read");
  return e;
}

RegressCase Captured() {
  std::vector<std::pair<v1::AuditEvent, CaptureSource>> events = {{Connect("127.0.0.1", 9), {"a.jsonl"}}};
  auto cases = DistinctCases(events);
  EXPECT_EQ(cases.size(), 1u);
  RegressCase c = cases.at(0);
  c.policy_file = "policy-0123456789ab.yaml";
  c.policy_digest = "sha256:" + std::string(64, 'f');
  return c;
}

TEST(RegressCase, OneCasePerDistinctDeniedViolationCounted) {
  v1::AuditEvent quiet = Connect("10.0.0.1", 80);
  quiet.set_quiet(true);
  v1::AuditEvent repeated = Connect("127.0.0.1", 9);
  repeated.mutable_repeats()->set_count(4);  // five occurrences
  v1::AuditEvent noted;
  noted.set_kind("credential.issued");
  noted.set_verdict("noted");
  std::vector<std::pair<v1::AuditEvent, CaptureSource>> events = {{Connect("127.0.0.1", 9), {"a"}},
                                                                  {repeated, {"a"}},
                                                                  {Connect("127.0.0.1", 10), {"a"}},
                                                                  {quiet, {"a"}},
                                                                  {Connect("10.0.0.2", 1, "audited"), {"a"}},
                                                                  {Connect("10.0.0.3", 1, "detected"), {"a"}},
                                                                  {noted, {"a"}},
                                                                  {Read("/etc/x"), {"a"}}};
  auto cases = DistinctCases(events);
  ASSERT_EQ(cases.size(), 3u);
  EXPECT_EQ(cases[0].probe.Target(), "tcp 127.0.0.1:9");
  EXPECT_EQ(cases[0].occurrences, 6u);
  EXPECT_EQ(cases[0].errno_name, "EPERM");
  EXPECT_EQ(cases[1].probe.port, 10u);
  EXPECT_EQ(cases[2].probe.Target(), "read /etc/x");
  EXPECT_EQ(cases[2].errno_name, "EACCES");
}

TEST(RegressCase, YamlReadsBackToTheSameCase) {
  RegressCase c = Captured();
  c.sandbox = "a \"quoted\" name\\";  // quoting survives
  std::string error;
  auto back = ParseCaseYaml(CaseYaml(c), "x.case.yaml", &error);
  ASSERT_TRUE(back) << error;
  EXPECT_TRUE(back->probe == c.probe);
  EXPECT_EQ(back->sandbox, c.sandbox);
  EXPECT_EQ(back->policy_digest, c.policy_digest);
  EXPECT_EQ(back->errno_name, "EPERM");
  EXPECT_EQ(back->occurrences, 1u);
  EXPECT_EQ(CaseFileStem(c), "net.connect-tcp_127.0.0.1_9");
}

TEST(RegressCase, StrictErrorsNameFileLineAndField) {
  const std::string good = CaseYaml(Captured());
  struct Bad {
    std::string from, to, says;
  } bads[] = {
      {"  port: 9", "  port: 70000", ":18:9: probe.port: out of range"},
      {"  port: 9", "  port: \"9\"", "probe.port: expected a number"},
      {"  port: 9\n", "", "probe.port: missing (required for net.connect)"},
      {"  family: \"inet\"", "  family: \"unix\"", "probe.family: unknown value"},
      {"  kind: net.connect\n  family", "  kind: file.open\n  family", "probe.path: missing"},
      {"expect:\n  verdict: denied\n  kind: net.connect", "expect:\n  verdict: denied\n  kind: net.sendmsg",
       "expect.kind: differs from probe.kind"},
      {"  errno: \"EPERM\"", "  errno: \"EWHAT\"", "expect.errno: not an errno name"},
      {"version: 1", "version: 1\nversion: 2", "duplicate"},
      {"  audit:", "  bogus: 1\n  audit:", "source.bogus: unknown field"},
  };
  for (const auto& b : bads) {
    std::string text = good;
    size_t at = text.find(b.from);
    ASSERT_NE(at, std::string::npos) << b.from;
    text.replace(at, b.from.size(), b.to);
    std::string error;
    EXPECT_FALSE(ParseCaseYaml(text, "c.case.yaml", &error)) << b.to;
    EXPECT_EQ(error.rfind("c.case.yaml:", 0), 0u) << error;
    EXPECT_NE(error.find(b.says), std::string::npos) << b.to << ": " << error;
  }
  std::string error;
  EXPECT_FALSE(ParseCaseYaml("", "e.yaml", &error));
  EXPECT_FALSE(ParseCaseYaml("- a\n- b\n", "e.yaml", &error));
  EXPECT_NE(error.find("expected a mapping"), std::string::npos) << error;
}

TEST(RegressCase, JudgedByTheErrnoOfTheRefusingLayerAndTheEvent) {
  const RegressCase c = Captured();
  ProbeResult refused;
  refused.error = EPERM;
  refused.step = "connect";
  const std::vector<v1::AuditEvent> seen = {Connect("127.0.0.1", 9)};
  EXPECT_EQ(JudgeCase(c, refused, seen).kind, CaseOutcome::Kind::kPassed);
  // No event: not passed, whatever the errno.
  auto o = JudgeCase(c, refused, {});
  EXPECT_EQ(o.kind, CaseOutcome::Kind::kFailed);
  EXPECT_NE(o.message.find("no denied net.connect event"), std::string::npos) << o.message;
  // Another target's event does not count.
  EXPECT_EQ(JudgeCase(c, refused, {Connect("127.0.0.1", 10)}).kind, CaseOutcome::Kind::kFailed);
  // Refused by the destination, not the sandbox.
  ProbeResult refused_by_peer = refused;
  refused_by_peer.error = ECONNREFUSED;
  EXPECT_EQ(JudgeCase(c, refused_by_peer, seen).kind, CaseOutcome::Kind::kFailed);
  ProbeResult ok;
  ok.ok = true;
  o = JudgeCase(c, ok, {});
  EXPECT_EQ(o.kind, CaseOutcome::Kind::kFailed);
  EXPECT_NE(o.message.find("not denied"), std::string::npos);
  EXPECT_EQ(JudgeCase(c, std::nullopt, seen).kind, CaseOutcome::Kind::kFailed);
  // The probe's line round-trips.
  auto parsed = ParseProbeResult(ProbeResultJson(refused));
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->error, EPERM);
  EXPECT_EQ(parsed->step, "connect");
}

TEST(RegressCase, JunitSaysFailuresAndSkipsEscaped) {
  std::vector<JunitCase> cases = {{"a<b>.case.yaml", "k", {CaseOutcome::Kind::kPassed, ""}, 0.1},
                                  {"b", "k", {CaseOutcome::Kind::kFailed, "not denied: \"x\" & y"}, 0.2},
                                  {"c", "k", {CaseOutcome::Kind::kSkipped, "needs BPF LSM"}, 0}};
  const std::string x = JunitXml(cases);
  EXPECT_NE(x.find("tests=\"3\" failures=\"1\" errors=\"0\" skipped=\"1\""), std::string::npos) << x;
  EXPECT_NE(x.find("a&lt;b&gt;.case.yaml"), std::string::npos) << x;
  EXPECT_NE(x.find("<failure message=\"not denied: &quot;x&quot; &amp; y\""), std::string::npos) << x;
  EXPECT_NE(x.find("<skipped message=\"needs BPF LSM\"/>"), std::string::npos) << x;
}

}  // namespace
}  // namespace cordon::ops
