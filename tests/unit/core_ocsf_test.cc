// OCSF 1.3.0 rendering (events/ocsf.h): each kind in its class and activity,
// the verdict as action/disposition, the acting process, the target, and the
// whole event under unmapped.cordon; workload-chosen strings survive as JSON
// strings, never as structure.
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <string>

#include "events/json_line.h"
#include "events/ocsf.h"
#include "events/sink.h"

namespace cordon {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

Struct Parse(const std::string& json) {
  Struct s;
  auto status = google::protobuf::util::JsonStringToMessage(json, &s);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << json;
  return s;
}

// The value at a dotted path ("dst_endpoint.ip"); a null value if absent.
Value At(const Struct& root, const std::string& path) {
  const Struct* s = &root;
  size_t start = 0;
  for (;;) {
    const size_t dot = path.find('.', start);
    const std::string key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    auto it = s->fields().find(key);
    if (it == s->fields().end()) return Value();
    if (dot == std::string::npos) return it->second;
    if (!it->second.has_struct_value()) return Value();
    s = &it->second.struct_value();
    start = dot + 1;
  }
}
double Number(const Struct& root, const std::string& path) { return At(root, path).number_value(); }
std::string Text(const Struct& root, const std::string& path) { return At(root, path).string_value(); }

v1::AuditEvent Base(const std::string& kind, const std::string& verdict) {
  v1::AuditEvent e;
  e.mutable_time()->set_seconds(1700000000);
  e.mutable_time()->set_nanos(123456789);
  e.set_sandbox("build-42");
  e.set_sandbox_cgroup_id(9876);
  e.set_seq(5);
  e.set_id("9876-5");
  e.set_pid(4242);
  e.set_tid(4243);
  e.set_ppid(4000);
  e.set_uid(1000);
  e.set_comm("python3");
  e.set_exe("/usr/bin/python3.11");
  e.set_kind(kind);
  e.set_verdict(verdict);
  e.set_policy("build-agent");
  e.set_policy_digest("sha256:abcd");
  e.set_reason("not allowed by the policy");
  e.set_enforcement("kernel-cgroup");
  return e;
}

TEST(Ocsf, ADeniedConnectIsARefusedNetworkActivityBlockedByTheControl) {
  v1::AuditEvent e = Base("net.connect", "denied");
  e.mutable_net()->set_address("93.184.216.34");
  e.mutable_net()->set_port(443);
  e.mutable_net()->set_protocol("tcp");
  e.mutable_net()->set_family("inet");
  e.mutable_net()->set_host("pypi.org");
  const Struct o = Parse(ToOcsfJson(e, "host-1"));
  EXPECT_EQ(Number(o, "class_uid"), 4001);
  EXPECT_EQ(Number(o, "category_uid"), 4);
  EXPECT_EQ(Number(o, "activity_id"), 5);
  EXPECT_EQ(Number(o, "type_uid"), 400105);
  EXPECT_EQ(Number(o, "time"), 1700000000123.0);
  EXPECT_EQ(Number(o, "action_id"), 2);
  EXPECT_EQ(Number(o, "disposition_id"), 2);
  EXPECT_EQ(Number(o, "status_id"), 2);
  EXPECT_TRUE(At(o, "is_alert").bool_value());
  EXPECT_EQ(Text(o, "dst_endpoint.ip"), "93.184.216.34");
  EXPECT_EQ(Number(o, "dst_endpoint.port"), 443);
  EXPECT_EQ(Text(o, "dst_endpoint.hostname"), "pypi.org");
  EXPECT_EQ(Text(o, "connection_info.protocol_name"), "tcp");
  EXPECT_EQ(Number(o, "connection_info.protocol_ver_id"), 4);
  EXPECT_EQ(Number(o, "connection_info.direction_id"), 2);
  EXPECT_EQ(Number(o, "actor.process.pid"), 4242);
  EXPECT_EQ(Text(o, "actor.process.name"), "python3");
  EXPECT_EQ(Text(o, "actor.process.file.path"), "/usr/bin/python3.11");
  EXPECT_EQ(Text(o, "actor.process.user.uid"), "1000");
  EXPECT_EQ(Number(o, "actor.process.parent_process.pid"), 4000);
  EXPECT_EQ(Text(o, "metadata.version"), kOcsfVersion);
  EXPECT_EQ(Text(o, "metadata.product.name"), "cordon");
  EXPECT_EQ(Text(o, "metadata.uid"), "9876-5");
  EXPECT_EQ(Text(o, "metadata.event_code"), "net.connect");
  EXPECT_EQ(Text(o, "device.hostname"), "host-1");
  EXPECT_EQ(Text(o, "policy.name"), "build-agent");
  EXPECT_EQ(Text(o, "policy.uid"), "sha256:abcd");
  // Nothing lost: the event as the audit file has it.
  const Struct cordon_event = Parse(ToJsonLine(e));
  EXPECT_EQ(At(o, "unmapped.cordon").struct_value().DebugString(), cordon_event.DebugString());
  EXPECT_EQ(Text(o, "unmapped.cordon.sandboxCgroupId"), "9876") << "64-bit numbers as strings, exact";
}

TEST(Ocsf, EachKindInItsClassAndActivity) {
  struct Case {
    const char* kind;
    const char* verdict;
    int class_uid, activity_id, action_id, disposition_id;
  };
  const Case cases[] = {
      {"net.connect", "audited", 4001, 1, 1, 15},
      {"net.sendmsg", "denied", 4001, 5, 2, 2},
      {"net.sendmsg", "audited", 4001, 6, 1, 15},
      {"net.bind", "audited", 4001, 7, 1, 15},
      {"net.unix", "denied", 4001, 5, 2, 2},
      {"net.socket", "denied", 4001, 99, 2, 2},
      {"net.preexisting", "destroyed", 4001, 3, 2, 2},
      {"dns.query", "denied", 4003, 1, 2, 2},
      {"dns.query", "noted", 4003, 1, 1, 17},
      {"file.open", "denied", 1001, 14, 2, 2},
      {"file.open", "detected", 1001, 14, 1, 15},
      {"file.create", "denied", 1001, 1, 2, 2},
      {"file.unlink", "denied", 1001, 4, 2, 2},
      {"file.rename", "denied", 1001, 5, 2, 2},
      {"file.setattr", "denied", 1001, 6, 2, 2},
      {"file.mmap_exec", "denied", 1001, 99, 2, 2},
      {"file.exec", "denied", 1007, 1, 2, 2},
      {"file.exec", "killed", 1007, 1, 2, 99},
      {"tamper.ptrace", "denied", 1007, 4, 2, 2},
      {"tamper.signal", "denied", 0, 99, 2, 2},
      {"resource.memory", "noted", 0, 99, 1, 17},
      {"sandbox.contained", "noted", 0, 99, 2, 4},
      {"loss", "", 0, 99, 0, 0},
  };
  for (const Case& c : cases) {
    v1::AuditEvent e = Base(c.kind, c.verdict);
    e.mutable_file()->set_path("/work/secret.txt");
    e.mutable_target()->set_pid(77);
    const Struct o = Parse(ToOcsfJson(e, ""));
    const std::string what = std::string(c.kind) + " " + c.verdict;
    EXPECT_EQ(Number(o, "class_uid"), c.class_uid) << what;
    EXPECT_EQ(Number(o, "activity_id"), c.activity_id) << what;
    EXPECT_EQ(Number(o, "type_uid"), c.class_uid * 100 + c.activity_id) << what;
    EXPECT_EQ(Number(o, "action_id"), c.action_id) << what;
    EXPECT_EQ(Number(o, "disposition_id"), c.disposition_id) << what;
    EXPECT_EQ(At(o, "device").kind_case(), Value::KIND_NOT_SET) << "no hostname given: " << what;
    if (c.class_uid == 1001) {
      EXPECT_EQ(Text(o, "file.path"), "/work/secret.txt") << what;
      EXPECT_EQ(Text(o, "file.name"), "secret.txt") << what;
    }
    if (std::string(c.kind) == "file.exec") {
      EXPECT_EQ(Text(o, "process.file.path"), "/work/secret.txt") << what;
    }
    if (std::string(c.kind) == "tamper.ptrace") {
      EXPECT_EQ(Number(o, "process.pid"), 77) << what;
    }
    if (c.class_uid == 4001) {
      EXPECT_NE(At(o, "dst_endpoint").kind_case(), Value::KIND_NOT_SET) << what;
    }
  }
}

TEST(Ocsf, ADnsQueryNamesTheNameAndTheRefusal) {
  v1::AuditEvent e = Base("dns.query", "denied");
  e.set_enforcement("cordon-dns");
  e.mutable_dns()->set_name("exfil.attacker.example");
  e.mutable_dns()->set_type("TXT");
  const Struct o = Parse(ToOcsfJson(e, "h"));
  EXPECT_EQ(Text(o, "query.hostname"), "exfil.attacker.example");
  EXPECT_EQ(Text(o, "query.type"), "TXT");
  EXPECT_EQ(Number(o, "rcode_id"), 5);
  EXPECT_EQ(Text(o, "src_endpoint.name"), "build-42");
}

// The workload chooses comm, paths and names: quotes, braces, newlines,
// controls and escaped bytes stay strings, the object keeps its shape.
TEST(Ocsf, HostileStringsStayStrings) {
  v1::AuditEvent e = Base("file.open", "denied");
  const std::string hostile = "\"},\"class_uid\":1,\"x\":{\"\n\x1b[31m\\x80\u202e";
  e.set_comm(hostile);
  e.mutable_file()->set_path("/tmp/" + hostile);
  e.set_reason(hostile);
  const std::string json = ToOcsfJson(e, "h");
  EXPECT_EQ(json.find('\n'), std::string::npos) << "one line";
  const Struct o = Parse(json);
  EXPECT_EQ(Number(o, "class_uid"), 1001);
  EXPECT_EQ(Text(o, "actor.process.name"), hostile);
  EXPECT_EQ(Text(o, "file.path"), "/tmp/" + hostile);
  EXPECT_EQ(Text(o, "message"), "file.open denied: " + hostile);
}

// The syslog sink's body: the OCSF object after the structured data.
TEST(Ocsf, SyslogMessagesCarryTheOcsfObjectWhenAskedTo) {
  v1::AuditEvent e = Base("net.connect", "denied");
  e.mutable_net()->set_address("10.0.0.1");
  e.mutable_net()->set_port(22);
  auto json = SyslogSink::Formatter("cordon", SyslogSink::kFacilityAuthpriv);
  auto ocsf = SyslogSink::Formatter("cordon", SyslogSink::kFacilityAuthpriv, SyslogSink::Body::kOcsf);
  const std::string a = json->Format(e), b = ocsf->Format(e);
  ASSERT_NE(a.find("] {"), std::string::npos);
  ASSERT_NE(b.find("] {"), std::string::npos);
  EXPECT_EQ(a.substr(0, a.find("] {")), b.substr(0, b.find("] {"))) << "the same header and structured data";
  EXPECT_EQ(a.substr(a.find("] {") + 2), ToJsonLine(e));
  const Struct o = Parse(b.substr(b.find("] {") + 2));
  EXPECT_EQ(Number(o, "class_uid"), 4001);
  EXPECT_EQ(Text(o, "dst_endpoint.ip"), "10.0.0.1");
}

// A stdout sink with format ocsf: one object a line.
TEST(Ocsf, AStreamSinkWritesOneObjectALine) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  StreamSink sink(fds[1], StreamSink::Format::kOcsf);
  EXPECT_FALSE(sink.TakesJsonLines()) << "not the audit file's lines";
  ASSERT_TRUE(sink.Write(Base("file.open", "denied")).ok());
  ASSERT_TRUE(sink.Write(Base("net.connect", "audited")).ok());
  ::close(fds[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  const size_t nl = text.find('\n');
  ASSERT_NE(nl, std::string::npos);
  EXPECT_EQ(text.back(), '\n');
  EXPECT_EQ(Number(Parse(text.substr(0, nl)), "class_uid"), 1001);
  EXPECT_EQ(Number(Parse(text.substr(nl + 1, text.size() - nl - 2)), "class_uid"), 4001);
}

// A syslog message holds 8 KiB: an OCSF object that would not fit goes
// without its unmapped.cordon copy, and stays whole JSON.
TEST(Ocsf, ASyslogMessageTooLargeForTheCopyDropsItAndStaysJson) {
  v1::AuditEvent e = Base("file.open", "denied");
  e.mutable_file()->set_path("/" + std::string(3000, 'a'));
  auto ocsf = SyslogSink::Formatter("cordon", SyslogSink::kFacilityAuthpriv, SyslogSink::Body::kOcsf);
  const std::string msg = ocsf->Format(e);
  EXPECT_LE(msg.size(), SyslogSink::kMaxMessage);
  const Struct o = Parse(msg.substr(msg.find("] {") + 2));
  EXPECT_EQ(Text(o, "file.path"), e.file().path());
  EXPECT_TRUE(At(o, "unmapped.cordon_omitted").bool_value());
  EXPECT_EQ(At(o, "unmapped.cordon").kind_case(), Value::KIND_NOT_SET);
  // A path too long for the message even without the copy (4,096 bytes the
  // decoder escaped, 16 KiB): the strings are cut, the JSON stays whole.
  e.mutable_file()->set_path("/" + std::string(4095, 'x'));
  for (int i = 0; i < 4000; i += 4) e.mutable_file()->mutable_path()->replace(1 + i, 4, "\\x1b");
  e.set_reason("refused: " + e.file().path());
  const std::string huge = ocsf->Format(e);
  EXPECT_LE(huge.size(), SyslogSink::kMaxMessage);
  const Struct cut = Parse(huge.substr(huge.find("] {") + 2));
  EXPECT_TRUE(At(cut, "unmapped.cut").bool_value());
  EXPECT_EQ(Text(cut, "file.path").substr(0, 512), e.file().path().substr(0, 512));
  EXPECT_EQ(Number(cut, "class_uid"), 1001) << "the mapped fields stay";
  EXPECT_EQ(Number(cut, "time"), 1700000000123.0);
  // Control: a small event keeps the copy.
  e.mutable_file()->set_path("/a");
  e.set_reason("not allowed");
  const std::string small = ocsf->Format(e);
  EXPECT_EQ(Text(Parse(small.substr(small.find("] {") + 2)), "unmapped.cordon.file.path"), "/a");
}

}  // namespace
}  // namespace cordon
