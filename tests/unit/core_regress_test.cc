// ops/regress.h without a kernel: cases from events (distinct, counted, only
// denied violations), the case YAML read back, the strict reader's errors
// (file:line:column: field), the judgement of a probe's result and events,
// and the JUnit text.
#include <gtest/gtest.h>

#include <cerrno>

#include "events/decoder.h"
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

// `text` with `from` replaced by `to` is refused, naming the file and `says`.
void ExpectRefused(std::string text, const std::string& from, const std::string& to, const std::string& says) {
  size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  text.replace(at, from.size(), to);
  std::string error;
  EXPECT_FALSE(ParseCaseYaml(text, "c.case.yaml", &error)) << to;
  EXPECT_EQ(error.rfind("c.case.yaml:", 0), 0u) << error;
  EXPECT_NE(error.find(says), std::string::npos) << to << ": " << error;
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
  for (const auto& b : bads) ExpectRefused(good, b.from, b.to, b.says);
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

v1::AuditEvent SeccompRefusal(const std::string& kind, uint32_t nr, uint32_t argument) {
  v1::AuditEvent e;
  e.set_kind(kind);
  e.set_verdict("denied");
  e.set_enforcement("seccomp");
  e.mutable_target()->set_arg(nr);
  e.mutable_target()->set_arg2(argument);
  return e;
}

v1::AuditEvent Socket(const std::string& family, const std::string& type, const std::string& protocol) {
  v1::AuditEvent e;
  e.set_kind("net.socket");
  e.set_verdict("denied");
  e.set_enforcement("seccomp");
  e.mutable_net()->set_family(family);
  e.mutable_net()->set_sock_type(type);
  e.mutable_net()->set_protocol(protocol);
  return e;
}

RegressCase CaseOf(const v1::AuditEvent& e) {
  auto cases = DistinctCases({{e, {"a.jsonl"}}});
  EXPECT_EQ(cases.size(), 1u) << e.kind();
  RegressCase c = cases.empty() ? RegressCase{} : cases[0];
  c.policy_file = "policy-0123456789ab.yaml";
  c.policy_digest = "sha256:" + std::string(64, 'f');
  return c;
}

// The probes of net.bind, net.socket and a seccomp refusal: their fields
// written and read back, what each takes and nothing else, and which kinds
// have no probe (with the reason).
TEST(RegressCase, NewProbeFieldsReadBackStrictly) {
  v1::AuditEvent bind = Connect("0.0.0.0", 8080);
  bind.set_kind("net.bind");
  const RegressCase cases[] = {
      CaseOf(bind), CaseOf(Socket("netlink", "raw", "0")), CaseOf(SeccompRefusal("tamper.keyring", 250, 0)),
      CaseOf(SeccompRefusal("file.memfd", 319, 1)), CaseOf(SeccompRefusal("file.ioctl", 16, 0x5412))};
  for (const auto& c : cases) {
    std::string error;
    auto back = ParseCaseYaml(CaseYaml(c), "x.case.yaml", &error);
    ASSERT_TRUE(back) << error << "\n" << CaseYaml(c);
    EXPECT_TRUE(back->probe == c.probe) << CaseYaml(c);
    EXPECT_EQ(NoProbeReason(c.probe), "") << c.probe.kind;
  }
  EXPECT_EQ(cases[0].probe.Target(), "tcp 0.0.0.0:8080");
  EXPECT_EQ(cases[1].probe.Target(), "netlink raw 0");
  EXPECT_EQ(cases[2].probe.Target(), "syscall 250");
  EXPECT_EQ(cases[2].probe.syscall, 250u);
  EXPECT_EQ(cases[4].probe.Target(), "syscall 16 argument 0x5412");
  const std::string socket = CaseYaml(cases[1]);
  const std::string keyring = CaseYaml(cases[2]);
  EXPECT_NE(keyring.find("  syscall: 250\n  argument: 0\n"), std::string::npos) << keyring;
  struct Bad {
    const std::string* text;
    std::string from, to, says;
  } bads[] = {
      {&socket, "  type: \"raw\"\n", "", "probe.type: missing (required for net.socket)"},
      {&socket, "  type: \"raw\"", "  type: \"r w\"", "probe.type: expected a name as events write it"},
      {&socket, "  type: \"raw\"", "  type: \"raw\"\n  port: 1", "probe.port: not a field of a net.socket probe"},
      {&keyring, "  syscall: 250", "  syscall: 0", "probe.syscall: expected a system call number"},
      {&keyring, "  syscall: 250", "  syscall: -1", "probe.syscall: expected a number"},
      {&keyring, "  syscall: 250", "  syscall: 4294967296", "probe.syscall: out of range"},
      {&keyring, "  syscall: 250", "  syscall: 250\n  arg: 3", "probe.arg: not a field of a probe with a syscall"},
      {&keyring, "  syscall: 250\n", "", "probe.argument: not a field of a tamper.keyring probe"},
      {&keyring, "  syscall: 250", "  syscall: 250\n  type: \"raw\"", "probe.type: not a field"},
      {&socket, "  type: \"raw\"", "  type: \"raw\"\n  syscall: 41", "probe.syscall: not a field of a net.socket"},
  };
  for (const auto& b : bads) ExpectRefused(*b.text, b.from, b.to, b.says);
  // No probe, with the reason.
  RegressProbe p;
  p.kind = "file.unlink";  // captured before it had a probe
  EXPECT_NE(NoProbeReason(p).find("names no path"), std::string::npos) << NoProbeReason(p);
  p.kind = "tamper.userns";
  p.syscall = 272;
  EXPECT_NE(NoProbeReason(p).find("namespace flags"), std::string::npos) << NoProbeReason(p);
  p.kind = "tamper.capability";
  p.syscall = 0;
  EXPECT_NE(NoProbeReason(p).find("a capability is asked for by many calls"), std::string::npos) << NoProbeReason(p);
  p.kind = "tamper.signal";  // BPF LSM's refusal: a signal to the runner's stand-in
  EXPECT_EQ(NoProbeReason(p), "");
}

// The net.sockopt probe: level and option from the event's target, read
// back strictly, matched by both, and only for options the sandbox's
// setsockopt program refuses.
TEST(RegressCase, SockoptCasesReadBackMatchAndNameTheirOption) {
  v1::AuditEvent e;
  e.set_kind("net.sockopt");
  e.set_verdict("denied");
  e.set_enforcement("kernel-cgroup");
  e.set_policy("p");
  e.mutable_target()->set_arg(1);    // SOL_SOCKET
  e.mutable_target()->set_arg2(36);  // SO_MARK
  const RegressCase c = CaseOf(e);
  EXPECT_EQ(c.probe.level, 1u);
  EXPECT_EQ(c.probe.option, 36u);
  EXPECT_EQ(c.probe.Target(), "level 1 option 36");
  EXPECT_EQ(NoProbeReason(c.probe), "");
  const std::string yaml = CaseYaml(c);
  EXPECT_NE(yaml.find("  level: 1\n  option: 36\n"), std::string::npos) << yaml;
  std::string error;
  auto back = ParseCaseYaml(yaml, "x.case.yaml", &error);
  ASSERT_TRUE(back) << error << "\n" << yaml;
  EXPECT_TRUE(back->probe == c.probe);
  // Judged by the event of that level and option.
  ProbeResult refused;
  refused.error = EPERM;
  refused.step = "setsockopt";
  EXPECT_EQ(JudgeCase(c, refused, {e}).kind, CaseOutcome::Kind::kPassed);
  v1::AuditEvent other = e;
  other.mutable_target()->set_arg2(15);
  EXPECT_EQ(JudgeCase(c, refused, {other}).kind, CaseOutcome::Kind::kFailed);
  other = e;
  other.mutable_target()->set_arg(0);
  EXPECT_EQ(JudgeCase(c, refused, {other}).kind, CaseOutcome::Kind::kFailed);
  ExpectRefused(yaml, "  option: 36\n", "", "probe.option: missing (required for net.sockopt)");
  ExpectRefused(yaml, "  level: 1\n", "", "probe.level: missing (required for net.sockopt)");
  ExpectRefused(yaml, "  option: 36", "  option: 36\n  path: \"/x\"", "probe.path: not a field of a net.sockopt probe");
  ExpectRefused(yaml, "  option: 36", "  option: 36\n  port: 1", "probe.port: not a field of a net.sockopt probe");
  // level and option belong to net.sockopt only.
  const std::string connect = CaseYaml(Captured());
  ExpectRefused(connect, "  port: 9", "  port: 9\n  level: 1", "probe.level: not a field of a net.connect probe");
  // An option that program does not refuse (SO_KEEPALIVE): no probe, with the reason.
  RegressProbe keepalive = c.probe;
  keepalive.option = 9;
  EXPECT_NE(NoProbeReason(keepalive).find("not an option the sandbox's setsockopt program refuses"), std::string::npos)
      << NoProbeReason(keepalive);
}

v1::AuditEvent FileEvent(const std::string& kind, const std::string& enforcement, const std::string& path) {
  v1::AuditEvent e = Read(path);
  e.set_kind(kind);
  e.set_enforcement(enforcement);
  e.mutable_file()->set_access(kind == "file.mmap_exec" ? "map_exec" : "write");
  return e;
}

// The probes of file.create, file.setattr and file.mmap_exec: the path
// captured and read back (a case captured before they had a probe, without
// a path, is read and skipped with the reason), which need BPF LSM wherever
// they were recorded, a relative path (as a workload wrote it) not probed,
// and the event matched by kind and path.
TEST(RegressCase, CreateSetattrAndMmapExecCasesReadBackAndMatch) {
  for (const char* kind : {"file.create", "file.setattr", "file.mmap_exec"}) {
    const RegressCase c = CaseOf(FileEvent(kind, "kernel-lsm", "/srv/data/x"));
    EXPECT_EQ(c.probe.path, "/srv/data/x") << kind;
    EXPECT_EQ(c.probe.Target(), "/srv/data/x") << kind;
    std::string error;
    auto back = ParseCaseYaml(CaseYaml(c), "x.case.yaml", &error);
    ASSERT_TRUE(back) << error << "\n" << CaseYaml(c);
    EXPECT_TRUE(back->probe == c.probe) << CaseYaml(c);
    EXPECT_EQ(NoProbeReason(c.probe), "") << kind;
    EXPECT_EQ(NeedsBpfLsm(c), "recorded at kernel-lsm") << kind;
    // Without a path (an older capture): read, and skipped with the reason.
    std::string old = CaseYaml(c);
    old.erase(old.find("  path: "), std::string("  path: \"/srv/data/x\"\n").size());
    auto without = ParseCaseYaml(old, "x.case.yaml", &error);
    ASSERT_TRUE(without) << error << "\n" << old;
    EXPECT_NE(NoProbeReason(without->probe).find("names no path"), std::string::npos) << NoProbeReason(without->probe);
    ExpectRefused(CaseYaml(c), "  path: \"/srv/data/x\"", "  path: \"\"", "probe.path: expected a path");
    ExpectRefused(CaseYaml(c), "  path: \"/srv/data/x\"", "  path: \"/x\"\n  port: 1",
                  std::string("probe.port: not a field of a ") + kind);
    // A relative path, as the workload wrote it (Landlock's refusals).
    RegressProbe relative = c.probe;
    relative.path = "data/x";
    EXPECT_NE(NoProbeReason(relative).find("of a relative path (data/x"), std::string::npos) << NoProbeReason(relative);
  }
  // Recorded under Landlock: a create runs where Landlock refuses it; chmod
  // and executable mappings only BPF LSM judges.
  EXPECT_EQ(NeedsBpfLsm(CaseOf(FileEvent("file.create", "landlock", "/srv/x"))), "");
  EXPECT_EQ(NeedsBpfLsm(CaseOf(FileEvent("file.setattr", "landlock", "/srv/x"))), "Landlock does not judge chmod");
  EXPECT_EQ(NeedsBpfLsm(CaseOf(FileEvent("file.mmap_exec", "kernel-lsm", "/srv/x"))), "recorded at kernel-lsm");
  // The other file kinds keep their reasons.
  RegressProbe p;
  for (const char* kind : {"file.unlink", "file.rename", "file.link"}) {
    p.kind = kind;
    EXPECT_NE(NoProbeReason(p), "") << kind;
  }

  // Matched by kind and path, as file.open and file.exec.
  const RegressCase setattr = CaseOf(FileEvent("file.setattr", "kernel-lsm", "/tmp/t/f"));
  ProbeResult refused;
  refused.error = EPERM;
  refused.step = "chmod";
  auto o = JudgeCase(setattr, refused, {FileEvent("file.setattr", "kernel-lsm", "/tmp/t/f")});
  EXPECT_EQ(o.kind, CaseOutcome::Kind::kPassed) << o.message;
  for (const auto& e :
       {FileEvent("file.setattr", "kernel-lsm", "/host/tmp/t/f"), FileEvent("file.open", "kernel-lsm", "/tmp/t/f"),
        FileEvent("file.setattr", "kernel-lsm", "/tmp/t/g")})
    EXPECT_EQ(JudgeCase(setattr, refused, {e}).kind, CaseOutcome::Kind::kFailed) << e.kind() << " " << e.file().path();
  // A create: a file.open event of the path (Landlock's refusal of an open with O_CREAT) is not its event.
  const RegressCase create = CaseOf(FileEvent("file.create", "landlock", "/tmp/t/new"));
  ProbeResult create_refused;
  create_refused.error = EACCES;
  create_refused.step = "mknod";
  EXPECT_EQ(JudgeCase(create, create_refused, {FileEvent("file.create", "landlock", "/tmp/t/new")}).kind,
            CaseOutcome::Kind::kPassed);
  EXPECT_EQ(JudgeCase(create, create_refused, {FileEvent("file.open", "landlock", "/tmp/t/new")}).kind,
            CaseOutcome::Kind::kFailed);
}

// A seccomp case matches the event of the call as the probe makes it: the
// ioctl command it judged must be the same; a pid it was made on need not.
TEST(RegressCase, ASeccompCaseMatchesTheCallAsTheProbeMakesIt) {
  ProbeResult refused;
  refused.error = EPERM;
  refused.step = "syscall";
  const RegressCase ioctl = CaseOf(SeccompRefusal("tamper.terminal", 16, 0x5412));
  EXPECT_EQ(JudgeCase(ioctl, refused, {SeccompRefusal("tamper.terminal", 16, 0x5412)}).kind,
            CaseOutcome::Kind::kPassed);
  EXPECT_EQ(JudgeCase(ioctl, refused, {SeccompRefusal("tamper.terminal", 16, 0x541C)}).kind,
            CaseOutcome::Kind::kFailed);
  const RegressCase prlimit = CaseOf(SeccompRefusal("tamper.rlimit", 302, 4242));
  EXPECT_EQ(JudgeCase(prlimit, refused, {SeccompRefusal("tamper.rlimit", 302, 1)}).kind, CaseOutcome::Kind::kPassed);
  EXPECT_EQ(JudgeCase(prlimit, refused, {SeccompRefusal("tamper.rlimit", 141, 1)}).kind, CaseOutcome::Kind::kFailed);
}

// BPF LSM reports a write below /run/cordon as tamper.bpf naming the file: a
// case of it must not be probed (and so passed) with a bpf() call.
TEST(RegressCase, ATamperRefusalOnAFileIsNotProbedAsItsKindsCall) {
  v1::AuditEvent e;
  e.set_kind("tamper.bpf");
  e.set_verdict("denied");
  e.set_enforcement("kernel-lsm");
  e.mutable_file()->set_path("/run/cordon/clock");
  const RegressCase c = CaseOf(e);
  EXPECT_EQ(c.probe.path, "/run/cordon/clock");
  EXPECT_NE(NoProbeReason(c.probe).find("on a file (/run/cordon/clock)"), std::string::npos) << NoProbeReason(c.probe);
  // The control: the bpf() call's refusal has its probe, and is not the file's.
  v1::AuditEvent call = e;  // BPF LSM refusing bpf(BPF_MAP_CREATE)
  call.clear_file();
  call.mutable_target()->set_arg(0);
  const RegressCase bpf = CaseOf(call);
  EXPECT_EQ(NoProbeReason(bpf.probe), "");
  ProbeResult refused;
  refused.error = EPERM;
  refused.step = "bpf";
  EXPECT_EQ(JudgeCase(bpf, refused, {call}).kind, CaseOutcome::Kind::kPassed);
  EXPECT_EQ(JudgeCase(c, refused, {call}).kind, CaseOutcome::Kind::kFailed) << "another target";
  // Written and read back with its path.
  std::string error;
  RegressCase named = c;
  named.policy_file = "policy-x.yaml";
  named.policy_digest = "sha256:" + std::string(64, 'a');
  auto back = ParseCaseYaml(CaseYaml(named), "c.case.yaml", &error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(back->probe.path, "/run/cordon/clock");
}

// socket() of a family or protocol not built into the kernel loads a module
// on the host: such a case is skipped, never probed.
TEST(RegressCase, ASocketThatCouldLoadAModuleIsNotProbed) {
  RegressProbe p;
  p.kind = "net.socket";
  p.type = "stream";
  for (const auto& [family, protocol] : std::vector<std::pair<std::string, std::string>>{
           {"inet", "tcp"}, {"inet6", "udp"}, {"unix", "ip"}, {"netlink", "ip"}}) {
    p.family = family;
    p.protocol = protocol;
    EXPECT_EQ(NoProbeReason(p), "") << family << " " << protocol;
  }
  for (const auto& [family, protocol] : std::vector<std::pair<std::string, std::string>>{
           {"inet", "sctp"}, {"vsock", "ip"}, {"38", "ip"}, {"netlink", "9"}, {"packet", "ip"}}) {
    p.family = family;
    p.protocol = protocol;
    EXPECT_NE(NoProbeReason(p).find("load a module"), std::string::npos) << family << " " << protocol;
  }
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

// The probes that act beside the recorded path (unlink, rename, link): the
// path captured, and for rename and link which rule refused it (a gain of
// rights elsewhere is not probed: the event does not name where); matched by
// either of the runner's two fresh names, never by the recorded path.
TEST(RegressCase, UnlinkRenameAndLinkCasesSayWhichRuleAndMatchTheFreshNames) {
  for (const char* kind : {"file.unlink", "file.rename", "file.link"}) {
    const RegressCase c = CaseOf(FileEvent(kind, "landlock", "/srv/data/x"));
    EXPECT_EQ(c.probe.path, "/srv/data/x") << kind;
    EXPECT_EQ(c.probe.access, std::string(kind) == "file.unlink" ? "" : "directory") << kind;
    EXPECT_EQ(NoProbeReason(c.probe), "") << kind;
    std::string error;
    auto back = ParseCaseYaml(CaseYaml(c), "x.case.yaml", &error);
    ASSERT_TRUE(back) << error << "\n" << CaseYaml(c);
    EXPECT_TRUE(back->probe == c.probe) << CaseYaml(c);
    ProbeResult refused;
    refused.error = EACCES;
    refused.step = "unlink";
    RegressCase run = c;
    run.probe.scratch = "/srv/data/.cordon-regress-1-1";
    for (const std::string& name : {run.probe.scratch, ScratchSecondName(run.probe.scratch)})
      EXPECT_EQ(JudgeCase(run, refused, {FileEvent(kind, "landlock", name)}).kind, CaseOutcome::Kind::kPassed)
          << kind << " " << name;
    // The recorded path's own event is not the probe's: the probe never acts on it.
    EXPECT_EQ(JudgeCase(run, refused, {FileEvent(kind, "landlock", "/srv/data/x")}).kind, CaseOutcome::Kind::kFailed);
    EXPECT_EQ(JudgeCase(c, refused, {FileEvent(kind, "landlock", "/srv/data/x")}).kind, CaseOutcome::Kind::kFailed)
        << "without a fresh name nothing matches";
  }
  v1::AuditEvent gain = FileEvent("file.link", "kernel-lsm", "/srv/data/x");
  gain.set_reason(std::string(cordon::kLinkGainReason) + " (/srv/data/x)");
  const RegressCase g = CaseOf(gain);
  EXPECT_EQ(g.probe.access, "gain");
  EXPECT_NE(NoProbeReason(g.probe).find("would gain rights where it went"), std::string::npos)
      << NoProbeReason(g.probe);
  ExpectRefused(CaseYaml(g), "  access: \"gain\"", "  access: \"elsewhere\"",
                "probe.access: unknown value 'elsewhere'");
  // A NUL byte would cut the path short for the system calls.
  ExpectRefused(CaseYaml(g), "  path: \"/srv/data/x\"", "  path: \"/srv/data\\\\x00/x\"",
                "probe.path: a path cannot hold a NUL byte");
  RegressProbe old = g.probe;
  old.access.clear();
  EXPECT_NE(NoProbeReason(old).find("capture it again"), std::string::npos) << NoProbeReason(old);
}

v1::AuditEvent Tamper(const std::string& kind, uint32_t arg, uint32_t arg2 = 0, const std::string& path = "") {
  v1::AuditEvent e;
  e.set_kind(kind);
  e.set_verdict("denied");
  e.set_enforcement(kind == "tamper.device" || kind == "tamper.sysctl" ? "kernel-cgroup" : "kernel-lsm");
  e.mutable_target()->set_arg(arg);
  e.mutable_target()->set_arg2(arg2);
  if (!path.empty()) e.mutable_file()->set_path(path);
  return e;
}

// The probes on stand-ins and the kernel's checks: a device's type and
// access, a sysctl's name and direction, a signal's number; matched on the
// stand-in the runner made (its pid, its cgroup's id), read back strictly.
TEST(RegressCase, StandInAndKernelCheckCasesReadBackAndMatch) {
  const RegressCase device = CaseOf(Tamper("tamper.device", 1u << 20 | 11, 2 | 2 << 16));
  EXPECT_EQ(device.probe.type, "char");
  EXPECT_EQ(device.probe.access, "read");
  EXPECT_EQ(device.probe.Target(), "char device 1:11 read");
  EXPECT_EQ(NoProbeReason(device.probe), "");
  EXPECT_EQ(CaseOf(Tamper("tamper.device", 8u << 20, 6 | 1 << 16)).probe.Target(), "block device 8:0 read,write");
  EXPECT_NE(NoProbeReason(CaseOf(Tamper("tamper.device", 1u << 20 | 11, 1 | 2 << 16)).probe).find("of a mknod"),
            std::string::npos);
  EXPECT_NE(NoProbeReason(CaseOf(Tamper("tamper.device", 1u << 20 | 11, 2)).probe).find("capture it again"),
            std::string::npos)
      << "recorded by a cordon that did not say the type";
  const RegressCase sysctl = CaseOf(Tamper("tamper.sysctl", 1, 0, "kernel/domainname"));
  EXPECT_EQ(sysctl.probe.Target(), "write kernel/domainname");
  EXPECT_EQ(NoProbeReason(sysctl.probe), "") << "a sysctl's name is not a file";
  const RegressCase signal = CaseOf(Tamper("tamper.signal", 9));
  const RegressCase cgroup = CaseOf(Tamper("tamper.cgroup", 4242));
  EXPECT_NE(NoProbeReason(CaseOf(Tamper("tamper.ptrace", 0)).probe).find("PTRACE_TRACEME"), std::string::npos);
  for (const RegressCase* c : {&device, &sysctl, &signal, &cgroup}) {
    std::string error;
    auto back = ParseCaseYaml(CaseYaml(*c), "t.case.yaml", &error);
    ASSERT_TRUE(back) << error << "\n" << CaseYaml(*c);
    EXPECT_TRUE(back->probe == c->probe) << CaseYaml(*c);
  }
  ExpectRefused(CaseYaml(device), "  type: \"char\"", "  type: \"pipe\"", "probe.type: unknown value 'pipe'");
  ExpectRefused(CaseYaml(device), "  access: \"read\"", "  access: \"read,exec\"", "probe.access: unknown value");
  ExpectRefused(CaseYaml(sysctl), "  path: \"kernel/domainname\"", "  path: \"../../etc/shadow\"",
                "probe.path: expected a sysctl name");

  ProbeResult refused;
  refused.error = EPERM;
  refused.step = "access";
  EXPECT_EQ(JudgeCase(device, refused, {Tamper("tamper.device", 1u << 20 | 11, 2 | 2 << 16)}).kind,
            CaseOutcome::Kind::kPassed);
  EXPECT_EQ(JudgeCase(device, refused, {Tamper("tamper.device", 1u << 20 | 11, 2 | 1 << 16)}).kind,
            CaseOutcome::Kind::kFailed)
      << "a block device of the same numbers is another device";
  EXPECT_EQ(JudgeCase(sysctl, refused, {Tamper("tamper.sysctl", 0, 0, "kernel/domainname")}).kind,
            CaseOutcome::Kind::kFailed)
      << "a read is not the write";
  RegressCase on = signal;
  on.probe.target_pid = 4321;
  v1::AuditEvent sent = Tamper("tamper.signal", 9);
  sent.mutable_target()->set_pid(4321);
  EXPECT_EQ(JudgeCase(on, refused, {sent}).kind, CaseOutcome::Kind::kPassed);
  sent.mutable_target()->set_pid(1);
  EXPECT_EQ(JudgeCase(on, refused, {sent}).kind, CaseOutcome::Kind::kFailed) << "not the stand-in";
  // /proc's ptrace checks answer EACCES: the probe says so, the layer's EPERM is not expected.
  RegressCase ptrace = CaseOf(Tamper("tamper.ptrace", 1));
  ptrace.probe.target_pid = 4321;
  v1::AuditEvent read = Tamper("tamper.ptrace", 1);
  read.mutable_target()->set_pid(4321);
  ProbeResult proc;
  proc.error = EACCES;
  proc.step = "readlink /proc/PID/exe";
  EXPECT_EQ(JudgeCase(ptrace, proc, {read}).kind, CaseOutcome::Kind::kFailed);
  proc.refused_as = "EACCES";
  EXPECT_EQ(JudgeCase(ptrace, proc, {read}).kind, CaseOutcome::Kind::kPassed);
  auto result = ParseProbeResult(ProbeResultJson(proc));
  ASSERT_TRUE(result);
  EXPECT_EQ(result->refused_as, "EACCES");
  // A BPF LSM refusal whose operation is one call cordon run's seccomp
  // filter refuses as the same kind is probed with that call, and matched by
  // the filter's event of it.
  const RegressCase mount = CaseOf(Tamper("tamper.mount", 0));
  EXPECT_EQ(NoProbeReason(mount.probe), "");
  EXPECT_EQ(SeccompFormOf(mount.probe).syscall, 165u);
  EXPECT_EQ(SeccompFormOf(CaseOf(Tamper("tamper.userns", 0)).probe).argument, 0x10000000u);
  ProbeResult seccomp_refused;
  seccomp_refused.error = EPERM;
  seccomp_refused.step = "syscall";
  auto o = JudgeCase(mount, seccomp_refused, {SeccompRefusal("tamper.mount", 165, 0)});
  EXPECT_EQ(o.kind, CaseOutcome::Kind::kPassed) << o.message;
  EXPECT_NE(o.message.find("recorded at kernel-lsm, refused here by seccomp"), std::string::npos) << o.message;
  EXPECT_EQ(JudgeCase(mount, seccomp_refused, {SeccompRefusal("tamper.module", 175, 0)}).kind,
            CaseOutcome::Kind::kFailed);
  EXPECT_NE(NoProbeReason(CaseOf(Tamper("tamper.notify", 0)).probe).find("did not refuse it"), std::string::npos)
      << "inotify marks outside the allowed files: no call the filter refuses";
  RegressCase scratch_cgroup = cgroup;
  scratch_cgroup.probe.scratch = "/sys/fs/cgroup/cordon-regress-1-1";
  scratch_cgroup.probe.arg = 777;
  EXPECT_EQ(JudgeCase(scratch_cgroup, refused, {Tamper("tamper.cgroup", 777)}).kind, CaseOutcome::Kind::kPassed);
  EXPECT_EQ(JudgeCase(scratch_cgroup, refused, {Tamper("tamper.cgroup", 4242)}).kind, CaseOutcome::Kind::kFailed);
}

}  // namespace
}  // namespace cordon::ops
