// The impact report (inspect/impact.h, `cordon report`): events in, the
// report model out; the renderers keep the workload's names as data; the
// audit file reader names FILE:LINE and finds a broken chain. No root.
#include <gtest/gtest.h>

#include <fstream>

#include "events/audit_chain.h"
#include "events/audit_file.h"
#include "events/json_line.h"
#include "inspect/impact.h"
#include "tests/unit/temp_dir.h"
#include "util/text.h"

namespace cordon::inspect {
namespace {

using cordon::v1::AuditEvent;

AuditEvent Event(int64_t second, const std::string& kind, const std::string& verdict = "denied",
                 const std::string& sandbox = "job-1") {
  AuditEvent e;
  e.mutable_time()->set_seconds(1700000000 + second);
  e.set_sandbox(sandbox);
  e.set_sandbox_cgroup_id(sandbox == "job-1" ? 77 : 78);
  e.set_cgroup_path("/agents/" + sandbox);
  e.set_kind(kind);
  e.set_verdict(verdict);
  e.set_policy("build");
  e.set_pid(100);
  e.set_comm("python3");
  e.set_exe("/usr/bin/python3.11");
  return e;
}

AuditEvent Connect(int64_t second, const std::string& address, uint32_t port) {
  AuditEvent e = Event(second, "net.connect");
  e.mutable_net()->set_address(address);
  e.mutable_net()->set_port(port);
  e.mutable_net()->set_protocol("tcp");
  return e;
}

AuditEvent File(int64_t second, const std::string& path, const std::string& access) {
  AuditEvent e = Event(second, "file.open");
  e.mutable_file()->set_path(path);
  e.mutable_file()->set_access(access);
  return e;
}

TEST(Impact, DestinationsAreCountedWithTheirFirstAndLastTime) {
  ImpactBuilder b({});
  b.Add(Connect(1, "203.0.113.9", 443));
  b.Add(Connect(5, "203.0.113.9", 443));
  b.Add(Connect(3, "203.0.113.9", 443));
  b.Add(Connect(2, "10.0.0.1", 53));
  auto r = b.Finish();
  ASSERT_EQ(r.sandboxes_size(), 1);
  const auto& s = r.sandboxes(0);
  EXPECT_EQ(s.name(), "job-1");
  EXPECT_EQ(s.events().count(), 4u);
  ASSERT_EQ(s.network_size(), 2);
  EXPECT_EQ(s.network(0).address(), "203.0.113.9");  // most seen first
  EXPECT_EQ(s.network(0).seen().count(), 3u);
  EXPECT_EQ(s.network(0).seen().first().seconds(), 1700000001);
  EXPECT_EQ(s.network(0).seen().last().seconds(), 1700000005);
  EXPECT_EQ(s.network(0).verdict(), "denied");
  EXPECT_EQ(s.network(1).address(), "10.0.0.1");
  EXPECT_EQ(s.network(1).seen().count(), 1u);
  // Control: no file, tamper, credential or containment row was made up.
  EXPECT_TRUE(s.files().empty());
  EXPECT_TRUE(s.tamper().empty());
  EXPECT_TRUE(s.credentials().empty());
  EXPECT_TRUE(s.containment().empty());
  ASSERT_EQ(s.processes_size(), 1);
  EXPECT_EQ(s.processes(0).exe(), "/usr/bin/python3.11");
  EXPECT_EQ(s.processes(0).events().count(), 4u);
  uint64_t in_timeline = 0;
  for (const auto& bucket : s.timeline().buckets())
    for (const auto& [family, n] : bucket.by_family()) {
      EXPECT_EQ(family, "net");
      in_timeline += n;
    }
  EXPECT_EQ(in_timeline, 4u);
}

// The kernel's repeats (issue 16): a record standing for 1 + N occurrences
// over [first, last], and a pending count taken by the reader (N, not one
// more) are counted as what they stand for.
TEST(Impact, RepeatsCountAsTheOccurrencesTheyStandFor) {
  ImpactBuilder b({});
  AuditEvent first = Connect(1, "203.0.113.9", 443);
  AuditEvent repeated = Connect(3, "203.0.113.9", 443);
  repeated.mutable_repeats()->set_count(40);
  repeated.mutable_repeats()->mutable_first()->set_seconds(1700000002);
  repeated.mutable_repeats()->mutable_last()->set_seconds(1700000009);
  AuditEvent pending = Connect(1, "203.0.113.9", 443);
  pending.mutable_repeats()->set_count(7);
  pending.mutable_repeats()->set_pending(true);
  pending.mutable_repeats()->mutable_first()->set_seconds(1700000010);
  pending.mutable_repeats()->mutable_last()->set_seconds(1700000012);
  b.Add(first);
  b.Add(repeated);
  b.Add(pending);
  auto r = b.Finish();
  ASSERT_EQ(r.sandboxes_size(), 1);
  const auto& s = r.sandboxes(0);
  EXPECT_EQ(s.events().count(), 1u + 41u + 7u);
  ASSERT_EQ(s.network_size(), 1);
  EXPECT_EQ(s.network(0).seen().count(), 49u);
  EXPECT_EQ(s.network(0).seen().first().seconds(), 1700000001);
  EXPECT_EQ(s.network(0).seen().last().seconds(), 1700000012);
  EXPECT_EQ(s.by_verdict().at("denied"), 49u);
}

// Issue 16, finding 6: a record an agent killed between writing and
// committing wrote twice (same id) counts once; records without an id
// (made in userspace) and records of other ids count each.
TEST(Impact, ARecordWrittenTwiceCountsOnceById) {
  ImpactBuilder b({});
  AuditEvent first = Connect(1, "203.0.113.9", 443);
  first.set_seq(7);
  first.set_id("77-7");
  AuditEvent second = Connect(2, "203.0.113.9", 443);
  second.set_seq(8);
  second.set_id("77-8");
  b.Add(first);
  b.Add(second);
  b.Add(first);                           // the same record again
  b.Add(Connect(3, "203.0.113.9", 443));  // no id: counted
  auto r = b.Finish();
  ASSERT_EQ(r.sandboxes_size(), 1);
  EXPECT_EQ(r.sandboxes(0).events().count(), 3u);
  ASSERT_EQ(r.sandboxes(0).network_size(), 1);
  EXPECT_EQ(r.sandboxes(0).network(0).seen().count(), 3u);
}

TEST(Impact, FilesAreCollapsedByDirectoryAccessAndVerdict) {
  ImpactBuilder b({});
  b.Add(File(1, "/etc/shadow", "read"));
  b.Add(File(2, "/etc/gshadow", "read"));
  b.Add(File(3, "/etc/shadow", "read"));
  b.Add(File(4, "/etc/passwd", "write"));
  AuditEvent unlink = Event(5, "file.unlink");
  unlink.mutable_file()->set_path("/srv/data/x");
  b.Add(unlink);
  auto s = b.Finish().sandboxes(0);
  ASSERT_EQ(s.files_size(), 3);
  EXPECT_EQ(s.files(0).directory(), "/etc");
  EXPECT_EQ(s.files(0).access(), "read");
  EXPECT_EQ(s.files(0).seen().count(), 3u);
  EXPECT_EQ(s.files(0).distinct_files(), 2u);
  bool write = false, unlinked = false;
  for (const auto& f : s.files()) {
    write |= f.directory() == "/etc" && f.access() == "write" && f.seen().count() == 1;
    unlinked |= f.directory() == "/srv/data" && f.access() == "unlink";
  }
  EXPECT_TRUE(write);
  EXPECT_TRUE(unlinked);
}

TEST(Impact, CredentialsResourcesTamperAndContainment) {
  ImpactBuilder b({}, [](const std::string& path, std::string* text, std::string*) {
    EXPECT_EQ(path, "/var/log/cordon/contain-job-1.json");
    *text = R"({"version":1,"time":"2023-11-14T22:13:40Z","processes":[{"pid":100,"exe":"/usr/bin/python3.11"}],)"
            R"("sockets":[{"protocol":"tcp","state":"established","remote":"198.51.100.7:443"}]})";
    return true;
  });
  AuditEvent issued = Event(1, "credential.issued", "noted");
  issued.set_enforcement("cordon-run");
  issued.mutable_credential()->set_name("REPO_TOKEN");
  issued.mutable_credential()->set_fingerprint("3f2a9c1e");
  issued.mutable_credential()->set_expires_at(1700003600);
  b.Add(issued);
  AuditEvent revoked = issued;
  revoked.set_kind("credential.revoked");
  revoked.mutable_time()->set_seconds(1700000009);
  revoked.set_reason("the sandbox was contained");
  b.Add(revoked);
  for (uint64_t v : {1000u, 5000u, 3000u}) {
    AuditEvent mem = Event(2 + v / 1000, "resource.memory", "noted");
    mem.mutable_resource()->set_name("memory");
    mem.mutable_resource()->set_event("high");
    mem.mutable_resource()->set_count(2);
    mem.mutable_resource()->set_value(v);
    mem.mutable_resource()->set_limit(8000);
    b.Add(mem);
  }
  AuditEvent bpf = Event(4, "tamper.bpf");
  bpf.mutable_target()->set_arg(5);
  b.Add(bpf);
  AuditEvent contained = Event(8, "sandbox.contained", "noted");
  contained.mutable_containment()->set_reason("ticket 4711");
  contained.mutable_containment()->set_evidence("/var/log/cordon/contain-job-1.json");
  b.Add(contained);
  auto s = b.Finish().sandboxes(0);
  ASSERT_EQ(s.credentials_size(), 1);
  EXPECT_EQ(s.credentials(0).name(), "REPO_TOKEN");
  EXPECT_EQ(s.credentials(0).fingerprint(), "3f2a9c1e");
  EXPECT_EQ(s.credentials(0).issuer(), "cordon-run");
  EXPECT_EQ(s.credentials(0).issued().seconds(), 1700000001);
  EXPECT_EQ(s.credentials(0).expires().seconds(), 1700003600);
  EXPECT_EQ(s.credentials(0).revoked().seconds(), 1700000009);
  EXPECT_EQ(s.credentials(0).revoked_reason(), "the sandbox was contained");
  ASSERT_EQ(s.resources_size(), 1);
  EXPECT_EQ(s.resources(0).peak(), 5000u);
  EXPECT_EQ(s.resources(0).at().seconds(), 1700000007);
  EXPECT_EQ(s.resources(0).limit(), 8000u);
  EXPECT_EQ(s.resources(0).counters().at("high"), 6u);
  ASSERT_EQ(s.tamper_size(), 1);
  EXPECT_EQ(s.tamper(0).kind(), "tamper.bpf");
  ASSERT_EQ(s.containment_size(), 1);
  EXPECT_EQ(s.containment(0).containment().reason(), "ticket 4711");
  EXPECT_EQ(s.containment(0).evidence_error(), "");
  ASSERT_EQ(s.containment(0).processes_size(), 1);
  // The connection open at containment: a destination that was allowed.
  ASSERT_EQ(s.network_size(), 1);
  EXPECT_EQ(s.network(0).address(), "198.51.100.7");
  EXPECT_EQ(s.network(0).port(), 443u);
  EXPECT_EQ(s.network(0).verdict(), "connected");
  EXPECT_EQ(s.network(0).source(), "evidence");
}

TEST(Impact, TheScopeChoosesSandboxesAndTheWindow) {
  ImpactScope scope;
  scope.since_unix_ns = (1700000000LL + 2) * 1000000000LL;
  scope.until_unix_ns = (1700000000LL + 4) * 1000000000LL;
  ImpactBuilder all(scope);
  for (int second = 1; second <= 5; ++second) {
    all.Add(Connect(second, "10.0.0.1", 80));
    AuditEvent other = Connect(second, "10.0.0.2", 80);
    other.set_sandbox("job-2");
    other.set_sandbox_cgroup_id(78);
    other.set_cgroup_path("/agents/job-2/child");
    all.Add(other);
  }
  auto r = all.Finish();
  ASSERT_EQ(r.sandboxes_size(), 2);
  EXPECT_EQ(r.sandboxes(0).events().count(), 3u);  // seconds 2, 3, 4
  EXPECT_EQ(r.sandboxes(0).events().first().seconds(), 1700000002);
  EXPECT_EQ(r.sandboxes(0).events().last().seconds(), 1700000004);

  ImpactScope by_cgroup;
  by_cgroup.cgroup = "agents/job-2";
  ImpactBuilder one(by_cgroup);
  for (int second = 1; second <= 2; ++second) {
    AuditEvent other = Connect(second, "10.0.0.2", 80);
    other.set_sandbox("job-2");
    other.set_cgroup_path("/agents/job-2/child");
    one.Add(other);
    one.Add(Connect(second, "10.0.0.1", 80));
    AuditEvent lookalike = Connect(second, "10.0.0.3", 80);
    lookalike.set_cgroup_path("/agents/job-20");
    one.Add(lookalike);
  }
  auto o = one.Finish();
  ASSERT_EQ(o.sandboxes_size(), 1);
  EXPECT_EQ(o.sandboxes(0).name(), "job-2");
  EXPECT_EQ(o.sandboxes(0).events().count(), 2u);
}

// Names the workload chose, as events carry them (the escaped data form),
// never become markup or terminal controls in the rendered report.
TEST(Impact, HostileNamesStayData) {
  ImpactBuilder b({});
  AuditEvent e = File(1, "/tmp/<script>alert(1)</script>/\u202egnp.exe", "write");
  e.set_comm("<img src=x onerror=alert(1)>");
  e.set_exe(
      EscapeWorkloadBytes("/tmp/\x1b[2J\x07"
                          "evil\"'&"));
  b.Add(e);
  auto r = b.Finish();
  const std::string html = ImpactHtml(r), text = ImpactText(r);
  EXPECT_EQ(html.find("<script"), std::string::npos) << html;
  EXPECT_EQ(html.find("<img"), std::string::npos) << html;
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos) << html;
  EXPECT_NE(html.find("\\u{202E}"), std::string::npos) << html;  // the bidi override shown, not applied
  EXPECT_EQ(html.find("\u202e"), std::string::npos);
  EXPECT_NE(html.find("\\x1b[2J\\x07evil&quot;&#39;&amp;"), std::string::npos) << html;
  EXPECT_NE(html.find("Content-Security-Policy"), std::string::npos);
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"));  // no fetch: only the SVG namespace
  for (const std::string* out : {&html, &text})
    for (unsigned char c : *out) EXPECT_TRUE(c >= 0x20 || c == '\n') << int(c);
  EXPECT_EQ(text.find("\u202e"), std::string::npos);
  EXPECT_NE(text.find("\\u{202E}"), std::string::npos) << text;
}

TEST(AuditFileReader, NamesTheFileAndLineOfWhatIsNotAnAuditEvent) {
  cordon::test::TempDir dir("impact");
  std::string previous, chained;
  chained = "";
  AppendChained(ChainStartBody("", 1700000000), &previous, &chained);
  for (int i = 1; i <= 3; ++i) AppendChained(ToJsonLine(Connect(i, "10.0.0.1", 80)), &previous, &chained);
  std::ofstream(dir / "good.jsonl") << chained;
  std::ofstream(dir / "passwd") << "root:x:0:0:root:/root:/bin/bash\n";
  std::string broken = chained;
  broken.insert(broken.find('\n', broken.find('\n') + 1) + 1, "{\"kind\":\"net.con\n");
  std::ofstream(dir / "broken.jsonl") << broken;

  AuditFileReader good;
  int events = 0;
  ASSERT_TRUE(good.ReadFile(dir / "good.jsonl", [&](const AuditEvent&) { ++events; })) << good.error();
  EXPECT_EQ(events, 3);
  EXPECT_EQ(good.chain_error(), "");
  EXPECT_EQ(good.lines(), 4u);

  AuditFileReader passwd;
  EXPECT_FALSE(passwd.ReadFile(dir / "passwd", [](const AuditEvent&) {}));
  EXPECT_EQ(passwd.error().rfind(dir / "passwd:1: not an audit event", 0), 0u) << passwd.error();
  AuditFileReader bad;
  EXPECT_FALSE(bad.ReadFile(dir / "broken.jsonl", [](const AuditEvent&) {}));
  EXPECT_EQ(bad.error().rfind(dir / "broken.jsonl:3: not an audit event", 0), 0u) << bad.error();
  AuditFileReader missing;
  EXPECT_FALSE(missing.ReadFile(dir / "missing.jsonl", [](const AuditEvent&) {}));
  EXPECT_EQ(missing.error(), dir / "missing.jsonl: No such file or directory");

  // A changed line: reported, and every line still read.
  std::string edited = chained;
  edited.replace(edited.find("10.0.0.1"), 8, "10.0.0.9");
  std::ofstream(dir / "edited.jsonl") << edited;
  AuditFileReader changed;
  events = 0;
  ASSERT_TRUE(changed.ReadFile(dir / "edited.jsonl", [&](const AuditEvent&) { ++events; })) << changed.error();
  EXPECT_EQ(events, 3);
  EXPECT_EQ(changed.chain_error().rfind(dir / "edited.jsonl:2: chain value does not match", 0), 0u)
      << changed.chain_error();
}

}  // namespace
}  // namespace cordon::inspect
