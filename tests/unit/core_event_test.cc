// Event decoding and JSON encoding, without a kernel: the decoder must
// reject malformed records and never misread or crash on hostile input.
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "abi/cordon_event.h"
#include "abi/cordon_file.h"
#include "cli/args.h"
#include "events/decoder.h"
#include "events/json_line.h"
#include "policy/compiler.h"
#include "tests/unit/event_records.h"

namespace cordon {
namespace {

using testing::MakeObjectRecord;
using testing::NetRecord;

cordon_net_event SampleEvent() {
  cordon_net_event e = NetRecord(CORDON_EV_NET_CONNECT, CORDON_REASON_PORT);
  e.hdr.boot_ns = 123456789;
  e.hdr.pid = 1000;
  e.hdr.tid = 1001;
  e.hdr.ppid = 999;
  e.hdr.uid = 1234;
  e.hdr.gid = 5678;
  e.hdr.rule = 2;
  std::strcpy(e.hdr.comm, "python3");
  const uint8_t mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 169, 254, 169, 254};
  std::memcpy(e.addr, mapped, 16);
  e.port = 80;
  e.family = 10;
  e.sock_type = 1;
  e.protocol = 6;
  return e;
}

const SandboxContext kSandbox{42, "agent-1", "build-agent", "/sandboxes/agent-1"};

TEST(EventDecoder, DecodesAllFields) {
  EventDecoder decoder("/nonexistent-cgroup-mount");
  cordon_net_event e = SampleEvent();
  auto event = decoder.Decode(&e, sizeof e, kSandbox);
  ASSERT_TRUE(event.ok()) << event.error().ToString();
  EXPECT_EQ(event->kind(), "net.connect");
  EXPECT_EQ(event->verdict(), "denied");
  EXPECT_EQ(event->sandbox(), "agent-1");
  EXPECT_EQ(event->policy(), "build-agent");
  EXPECT_EQ(event->cgroup_path(), "/sandboxes/agent-1");
  EXPECT_EQ(event->pid(), 1000u);
  EXPECT_EQ(event->tid(), 1001u);
  EXPECT_EQ(event->ppid(), 999u);
  EXPECT_EQ(event->uid(), 1234u);
  EXPECT_EQ(event->gid(), 5678u);
  EXPECT_EQ(event->comm(), "python3");
  EXPECT_EQ(event->net().address(), "169.254.169.254");  // mapped shown as IPv4
  EXPECT_EQ(event->net().port(), 80u);
  EXPECT_EQ(event->net().protocol(), "tcp");
  EXPECT_EQ(event->net().family(), "inet6");
  EXPECT_EQ(event->net().sock_type(), "stream");
  EXPECT_EQ(event->net().rule(), 2u);
  EXPECT_NE(event->reason().find("rule #2"), std::string::npos);
  EXPECT_EQ(event->enforcement(), "kernel-cgroup");
}

// Issue 16 finding 6: the record's kernel identity. The id is the sandbox's
// cgroup id and the record's sequence number; a record without a number (the
// stored first occurrence of a repeats entry) has no id. The same record
// decoded twice, by two decoders, has the same time.
TEST(EventDecoder, FillsTheRecordsSequenceIdAndOneTime) {
  EventDecoder decoder("/nonexistent-cgroup-mount");
  cordon_net_event e = SampleEvent();
  e.hdr.seq = 17;
  auto event = decoder.Decode(&e, sizeof e, kSandbox);
  ASSERT_TRUE(event.ok()) << event.error().ToString();
  EXPECT_EQ(event->seq(), 17u);
  EXPECT_EQ(event->id(), "42-17");
  testing::ObjectRecord file = MakeObjectRecord(CORDON_EV_FILE_OPEN, CORDON_REASON_FILE_RULE, "/etc/shadow");
  file.fe.hdr.seq = 18;
  auto second = decoder.Decode(file.data(), file.size(), kSandbox);
  ASSERT_TRUE(second.ok()) << second.error().ToString();
  EXPECT_EQ(second->id(), "42-18");
  e.hdr.seq = 0;
  auto unnumbered = decoder.Decode(&e, sizeof e, kSandbox);
  ASSERT_TRUE(unnumbered.ok());
  EXPECT_EQ(unnumbered->seq(), 0u);
  EXPECT_EQ(unnumbered->id(), "") << "a record that was never in the ring has no id";
  EventDecoder other("/nonexistent-cgroup-mount");
  e.hdr.seq = 17;
  auto again = other.Decode(&e, sizeof e, kSandbox);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->time().seconds(), event->time().seconds());
  EXPECT_EQ(again->time().nanos(), event->time().nanos()) << "one boot-to-wall offset for every read";
}

// spec.quiet: the decoder marks the events its sandbox's patterns match (and
// only those: a message reused for the next record does not keep the mark);
// the compact line says so and does not paint the verdict as an alarm.
TEST(EventDecoder, MarksTheEventsOfTheSandboxsQuietPatterns) {
  policy::ParsedPolicy parsed;
  policy::Diagnostics diags;
  ASSERT_TRUE(
      policy::ParsePolicyText("apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: t}\nspec:\n"
                              "  quiet:\n    - {kind: net.connect, address: 169.254.169.254, ports: [80]}\n",
                              "q.yaml", &parsed, &diags))
      << policy::FormatDiagnostics(diags);
  policy::CompiledPolicy compiled;
  ASSERT_TRUE(policy::Compile(parsed, &compiled, &diags)) << policy::FormatDiagnostics(diags);
  SandboxContext quiet = kSandbox;
  quiet.quiet = std::make_shared<const std::vector<policy::QuietPattern>>(compiled.quiet);

  EventDecoder decoder("/nonexistent-cgroup-mount");
  cordon_net_event e = SampleEvent();
  cordon::v1::AuditEvent out;
  ASSERT_TRUE(decoder.DecodeInto(&e, sizeof e, quiet, &out).ok());
  EXPECT_TRUE(out.quiet());
  EXPECT_EQ(out.verdict(), "denied") << "a quiet denial is still a denial";
  EXPECT_NE(ToCompactLine(out).find(" denied (quiet) net.connect python3[1000] -> 169.254.169.254:80/tcp"),
            std::string::npos)
      << ToCompactLine(out);
  EXPECT_EQ(ToCompactLine(out, true).find("\x1b[31m"), std::string::npos) << "not red";
  EXPECT_NE(ToJsonLine(out).find("\"quiet\":true}"), std::string::npos) << ToJsonLine(out);

  e.port = 81;  // the control: no pattern matches
  ASSERT_TRUE(decoder.DecodeInto(&e, sizeof e, quiet, &out).ok());
  EXPECT_FALSE(out.quiet());
  EXPECT_NE(ToCompactLine(out).find(" denied net.connect python3[1000]"), std::string::npos) << ToCompactLine(out);
  EXPECT_EQ(ToJsonLine(out).find("quiet"), std::string::npos);
  e.port = 80;  // and a sandbox without patterns
  ASSERT_TRUE(decoder.DecodeInto(&e, sizeof e, kSandbox, &out).ok());
  EXPECT_FALSE(out.quiet());

  // After a replacement the policy's patterns apply by the event's time: one
  // from before the replacement is judged by the previous policy's.
  // So does the policy digest the event carries.
  const std::string kOld = "sha256:" + std::string(64, 'a'), kNew = "sha256:" + std::string(64, 'b');
  SandboxContext replaced = kSandbox;
  replaced.quiet = quiet.quiet;
  replaced.policy_digest = kOld;
  ASSERT_TRUE(decoder.DecodeInto(&e, sizeof e, replaced, &out).ok());
  EXPECT_EQ(out.policy_digest(), kOld);
  EXPECT_NE(ToJsonLine(out).find("\"policyDigest\":\"" + kOld + "\""), std::string::npos) << ToJsonLine(out);
  replaced.Replaced(nullptr, 1, kNew);  // replaced long before the event (boot + 0.12 s): the new (no) patterns
  ASSERT_TRUE(decoder.DecodeInto(&e, sizeof e, replaced, &out).ok());
  EXPECT_FALSE(out.quiet());
  EXPECT_EQ(out.policy_digest(), kNew);
  replaced.quiet_since_ns = (out.time().seconds() + 1) * 1000000000;  // a second after it
  ASSERT_TRUE(decoder.DecodeInto(&e, sizeof e, replaced, &out).ok());
  EXPECT_TRUE(out.quiet()) << "the event happened under the previous policy";
  EXPECT_EQ(out.policy_digest(), kOld) << "the event happened under the previous policy";
}

// lsm/socket_connect and socket_sendmsg on a socket created outside the
// sandbox: a net record like the cgroup programs', judged by BPF LSM.
TEST(EventDecoder, ForeignSocketDenialsSayWhereTheSocketCameFrom) {
  EventDecoder decoder("/nonexistent-cgroup-mount");
  cordon_net_event e = SampleEvent();
  e.hdr.reason = CORDON_REASON_FOREIGN_SOCKET;
  e.hdr.layer = CORDON_LAYER_LSM;
  e.hdr.rule = 0;
  auto none = decoder.Decode(&e, sizeof e, kSandbox);
  ASSERT_TRUE(none.ok()) << none.error().ToString();
  EXPECT_EQ(none->kind(), "net.connect");
  EXPECT_EQ(none->enforcement(), "kernel-lsm");
  EXPECT_EQ(none->net().address(), "169.254.169.254");
  EXPECT_NE(none->reason().find("created outside the sandbox"), std::string::npos) << none->reason();
  EXPECT_NE(none->reason().find("no egress rule allows 169.254.169.254 port 80/tcp"), std::string::npos)
      << none->reason();
  e.hdr.rule = 3;
  e.hdr.kind = CORDON_EV_NET_SENDMSG;
  auto port = decoder.Decode(&e, sizeof e, kSandbox);
  ASSERT_TRUE(port.ok());
  EXPECT_EQ(port->kind(), "net.sendmsg");
  EXPECT_NE(port->reason().find("egress rule #3 matches the address but not 80/tcp"), std::string::npos)
      << port->reason();
  e.sock_type = 3;  // SOCK_RAW
  auto raw = decoder.Decode(&e, sizeof e, kSandbox);
  ASSERT_TRUE(raw.ok());
  EXPECT_NE(raw->reason().find("never allowed"), std::string::npos) << raw->reason();
  e.hdr.reason = CORDON_REASON_MAX + 1;
  EXPECT_FALSE(decoder.Decode(&e, sizeof e, kSandbox).ok());
}

// resource.egress (cgroup_skb/egress): the resource layout, Resource{egress,
// warn|max, limit, value}, the packet's destination, enforcement kernel-cgroup
// for both verdicts; a layout of another size or an unknown threshold is refused.
TEST(EventDecoder, EgressBudgetRecordsCarryTheLimitAndTheValue) {
  EventDecoder decoder("/nonexistent-cgroup-mount");
  cordon_resource_event r = {};
  r.hdr.size = sizeof r;
  r.hdr.kind = CORDON_EV_RESOURCE_EGRESS;
  r.hdr.verdict = CORDON_VERDICT_DETECTED;
  r.hdr.reason = CORDON_REASON_EGRESS_BUDGET;
  r.hdr.layout = CORDON_EVL_RESOURCE;
  r.hdr.layer = CORDON_LAYER_CGROUP;
  r.hdr.sandbox_id = 42;
  r.hdr.seq = 7;
  r.limit = 1 << 20;
  r.value = 600000;
  const uint8_t v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
  std::memcpy(r.addr, v4, 16);
  r.port = 8080;
  r.family = 2;
  r.protocol = 6;
  r.threshold = CORDON_RES_WARN;
  auto warn = decoder.Decode(&r, sizeof r, kSandbox);
  ASSERT_TRUE(warn.ok()) << warn.error().ToString();
  EXPECT_EQ(warn->kind(), "resource.egress");
  EXPECT_EQ(warn->verdict(), "detected");
  EXPECT_EQ(warn->enforcement(), "kernel-cgroup");
  EXPECT_EQ(warn->resource().name(), "egress");
  EXPECT_EQ(warn->resource().event(), "warn");
  EXPECT_EQ(warn->resource().limit(), 1u << 20);
  EXPECT_EQ(warn->resource().value(), 600000u);
  EXPECT_EQ(warn->net().address(), "127.0.0.1");
  EXPECT_EQ(warn->net().port(), 8080u);
  EXPECT_EQ(warn->id(), "42-7");
  r.hdr.verdict = CORDON_VERDICT_DENIED;
  r.threshold = CORDON_RES_MAX;
  auto max = decoder.Decode(&r, sizeof r, kSandbox);
  ASSERT_TRUE(max.ok()) << max.error().ToString();
  EXPECT_EQ(max->resource().event(), "max");
  EXPECT_EQ(max->verdict(), "denied");
  EXPECT_EQ(max->enforcement(), "kernel-cgroup");
  EXPECT_NE(max->reason().find("budget is 1048576"), std::string::npos) << max->reason();
  // The next record of another kind carries no resource.
  cordon_net_event n = SampleEvent();
  auto net = decoder.Decode(&n, sizeof n, kSandbox);
  ASSERT_TRUE(net.ok());
  EXPECT_FALSE(net->has_resource());
  r.threshold = 3;
  EXPECT_FALSE(decoder.Decode(&r, sizeof r, kSandbox).ok());
  r.threshold = CORDON_RES_MAX;
  r.hdr.size = sizeof r - 8;
  EXPECT_FALSE(decoder.Decode(&r, sizeof r, kSandbox).ok());
  r.hdr.size = sizeof r;
  r.hdr.layout = CORDON_EVL_NET;
  EXPECT_FALSE(decoder.Decode(&r, sizeof r, kSandbox).ok());
}

// BPF LSM's proc.coredump: an observation (detected, by the LSM object),
// the working directory as its file path.
TEST(EventDecoder, CoreDumpIsAnObservationWithTheWorkingDirectory) {
  EventDecoder decoder("/nonexistent-cgroup-mount");
  const std::string dir = "/work/out";
  auto record = MakeObjectRecord(CORDON_EV_PROC_COREDUMP, CORDON_REASON_COREDUMP, dir);
  record.fe.hdr.verdict = CORDON_VERDICT_DETECTED;
  auto event = decoder.Decode(record.data(), record.size(), kSandbox);
  ASSERT_TRUE(event.ok()) << event.error().ToString();
  EXPECT_EQ(event->kind(), "proc.coredump");
  EXPECT_EQ(event->verdict(), "detected");
  EXPECT_EQ(event->enforcement(), "kernel-lsm");
  EXPECT_EQ(event->file().path(), dir);
  EXPECT_FALSE(event->has_net());
  EXPECT_NE(event->reason().find("core dump"), std::string::npos) << event->reason();
  EXPECT_NE(event->reason().find("working directory /work/out"), std::string::npos) << event->reason();
}

// BPF LSM's credential.read: which credential (name and sandbox from its
// path, the sandbox's id from the kernel's mark), no value, fingerprint or
// times; a record decoded after it (the message is reused) has none of it.
TEST(EventDecoder, CredentialReadNamesTheCredentialAndItsSandbox) {
  EventDecoder decoder("/nonexistent-cgroup-mount");
  const std::string path = "/run/cordon/credentials/build-7/GITHUB_TOKEN";
  auto record = MakeObjectRecord(CORDON_EV_CREDENTIAL_READ, CORDON_REASON_OUTSIDE_SANDBOX, path);
  const uint64_t owner = (uint64_t{7} << 32) | 12345;
  record.fe.arg = static_cast<uint32_t>(owner);
  record.fe.arg2 = static_cast<uint32_t>(owner >> 32);
  record.fe.access = CORDON_FILE_READ;
  cordon::v1::AuditEvent event;
  ASSERT_TRUE(decoder.DecodeInto(record.data(), record.size(), kSandbox, &event).ok());
  EXPECT_EQ(event.kind(), "credential.read");
  EXPECT_EQ(event.verdict(), "denied");
  EXPECT_EQ(event.enforcement(), "kernel-lsm");
  EXPECT_EQ(event.file().path(), path);
  EXPECT_EQ(event.credential().name(), "GITHUB_TOKEN");
  EXPECT_EQ(event.credential().sandbox(), "build-7");
  EXPECT_EQ(event.credential().sandbox_cgroup_id(), owner);
  EXPECT_EQ(event.credential().path(), path);
  EXPECT_EQ(event.credential().deliver(), "file");
  EXPECT_TRUE(event.credential().fingerprint().empty());
  EXPECT_EQ(event.credential().issued_at(), 0);
  EXPECT_EQ(event.reason(),
            "credential GITHUB_TOKEN of sandbox build-7: only that sandbox's processes (and root outside every "
            "sandbox) may open it (read on " +
                path + ")");
  // Not a path of the layout cordon writes: the name still, no sandbox.
  auto bare = MakeObjectRecord(CORDON_EV_CREDENTIAL_READ, CORDON_REASON_OUTSIDE_SANDBOX, "/TOKEN");
  ASSERT_TRUE(decoder.DecodeInto(bare.data(), bare.size(), kSandbox, &event).ok());
  EXPECT_EQ(event.credential().name(), "TOKEN");
  EXPECT_EQ(event.credential().sandbox(), "");
  EXPECT_NE(event.reason().find("of sandbox cgroup id 0"), std::string::npos) << event.reason();
  auto other = MakeObjectRecord(CORDON_EV_FILE_OPEN, CORDON_REASON_FILE_RULE, path);
  ASSERT_TRUE(decoder.DecodeInto(other.data(), other.size(), kSandbox, &event).ok());
  EXPECT_FALSE(event.has_credential());
}

TEST(EventDecoder, JsonIsCanonicalProtobufJson) {
  EventDecoder decoder("/nonexistent-cgroup-mount");
  cordon_net_event e = SampleEvent();
  auto event = decoder.Decode(&e, sizeof e, kSandbox);
  ASSERT_TRUE(event.ok());
  std::string line = ToJsonLine(*event);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_NE(line.find("\"kind\":\"net.connect\""), std::string::npos) << line;
  EXPECT_NE(line.find("\"cgroupPath\":\"/sandboxes/agent-1\""), std::string::npos) << line;
  EXPECT_NE(line.find("\"cgroupId\":\"42\""), std::string::npos) << "uint64 as string: " << line;
  // RFC 3339 UTC with a fractional part.
  size_t t = line.find("\"time\":\"");
  ASSERT_NE(t, std::string::npos);
  std::string time = line.substr(t + 8, line.find('"', t + 8) - t - 8);
  EXPECT_EQ(time.size() >= 20u, true) << time;
  EXPECT_EQ(time[4], '-');
  EXPECT_EQ(time[10], 'T');
  EXPECT_EQ(time.back(), 'Z');
  // Round trip.
  cordon::v1::AuditEvent parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(line, &parsed).ok());
  EXPECT_EQ(parsed.SerializeAsString(), event->SerializeAsString());
}

TEST(EventDecoder, RejectsMalformedRecords) {
  EventDecoder decoder("/nonexistent-cgroup-mount");
  cordon_net_event e = SampleEvent();
  EXPECT_FALSE(decoder.Decode(&e, sizeof e - 1, kSandbox).ok());
  EXPECT_FALSE(decoder.Decode(&e, 0, kSandbox).ok());
  cordon_net_event bad = e;
  bad.hdr.size = 12;
  EXPECT_FALSE(decoder.Decode(&bad, sizeof bad, kSandbox).ok());
  bad = e;
  bad.hdr.kind = 99;
  auto r = decoder.Decode(&bad, sizeof bad, kSandbox);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("unknown kind 99"), std::string::npos);
  bad = e;
  bad.hdr.verdict = 7;
  EXPECT_FALSE(decoder.Decode(&bad, sizeof bad, kSandbox).ok());
  bad = e;
  bad.hdr.reason = 0;
  EXPECT_FALSE(decoder.Decode(&bad, sizeof bad, kSandbox).ok());
  // The layout is declared, never guessed: unknown layouts and writers, a
  // kind in a layout it is never written in, and an object record declaring
  // the net layout are refused.
  bad = e;
  bad.hdr.layout = 0;
  r = decoder.Decode(&bad, sizeof bad, kSandbox);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("unknown layout 0"), std::string::npos) << r.error().message;
  bad = e;
  bad.hdr.layer = 9;
  r = decoder.Decode(&bad, sizeof bad, kSandbox);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("unknown layer 9"), std::string::npos) << r.error().message;
  bad = e;
  bad.hdr.layout = CORDON_EVL_OBJECT;
  r = decoder.Decode(&bad, sizeof bad, kSandbox);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("net.connect record in layout 2"), std::string::npos) << r.error().message;
  auto file = MakeObjectRecord(CORDON_EV_FILE_OPEN, CORDON_REASON_FILE_RULE, "/etc/shadow");
  ASSERT_TRUE(decoder.Decode(file.data(), file.size(), kSandbox).ok());
  file.fe.hdr.layout = CORDON_EVL_NET;
  EXPECT_FALSE(decoder.Decode(file.data(), file.size(), kSandbox).ok());
  file.fe.hdr.layout = CORDON_EVL_OBJECT;
  file.fe.hdr.size += 1;  // one byte more than its path
  EXPECT_FALSE(decoder.Decode(file.data(), sizeof file, kSandbox).ok());
}

// The enforcement named in an event comes from the record's writer, and from
// the reason where another layer refused (seccomp, Landlock).
TEST(EventDecoder, EnforcementIsTheWriterOrTheLayerTheReasonNames) {
  EventDecoder decoder("/nonexistent-cgroup-mount");
  auto enforcement = [&](const void* data, size_t size) {
    auto event = decoder.Decode(data, size, kSandbox);
    EXPECT_TRUE(event.ok()) << event.error().ToString();
    return event.ok() ? event->enforcement() : std::string();
  };
  cordon_net_event socket = NetRecord(CORDON_EV_NET_SOCKET, CORDON_REASON_FAMILY);
  socket.family = 17;  // AF_PACKET
  socket.sock_type = 3;
  EXPECT_EQ(enforcement(&socket, sizeof socket), "kernel-cgroup");
  socket.hdr.layer = CORDON_LAYER_LSM;
  EXPECT_EQ(enforcement(&socket, sizeof socket), "kernel-lsm");
  auto decoded = decoder.Decode(&socket, sizeof socket, kSandbox);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->net().family(), "packet");
  EXPECT_EQ(decoded->net().sock_type(), "raw");
  socket.hdr.reason = CORDON_REASON_SECCOMP;
  EXPECT_EQ(enforcement(&socket, sizeof socket), "seccomp");
  auto unix_path = MakeObjectRecord(CORDON_EV_NET_UNIX, CORDON_REASON_UNIX_PATH, "/run/x.sock", CORDON_LAYER_CGROUP);
  EXPECT_EQ(enforcement(unix_path.data(), unix_path.size()), "kernel-cgroup");
  auto landlock = MakeObjectRecord(CORDON_EV_FILE_OPEN, CORDON_REASON_LANDLOCK, "/etc/x", CORDON_LAYER_DETECT);
  EXPECT_EQ(enforcement(landlock.data(), landlock.size()), "landlock");
  auto detected = MakeObjectRecord(CORDON_EV_FILE_OPEN, CORDON_REASON_FILE_RULE, "/etc/x", CORDON_LAYER_DETECT);
  detected.fe.hdr.verdict = CORDON_VERDICT_KILLED;
  EXPECT_EQ(enforcement(detected.data(), detected.size()), "detect+kill");
  detected.fe.hdr.verdict = CORDON_VERDICT_DETECTED;
  EXPECT_EQ(enforcement(detected.data(), detected.size()), "detect");
}

TEST(EventDecoder, SanitizesProcessChosenStrings) {
  EventDecoder decoder("/nonexistent-cgroup-mount");
  cordon_net_event e = SampleEvent();
  std::memcpy(e.hdr.comm, "a\nb\x1b[2J\x7f\x01zzzzzzz", 16);  // 16 bytes, no terminating NUL
  auto event = decoder.Decode(&e, sizeof e, kSandbox);
  ASSERT_TRUE(event.ok());
  // All 16 bytes, controls escaped (tests/unit/core_text_test.cc has the forms).
  EXPECT_EQ(event->comm(), "a\\x0ab\\x1b[2J\\x7f\\x01zzzzzzz");
  for (char c : event->comm()) EXPECT_GE(static_cast<unsigned char>(c), 0x20);
  EXPECT_EQ(ToCompactLine(*event).find('\n'), std::string::npos);
}

TEST(EventDecoder, RandomBytesNeverCrash) {
  EventDecoder decoder("/nonexistent-cgroup-mount");
  std::mt19937 rng(7);
  for (int i = 0; i < 20000; ++i) {
    cordon_net_event e = SampleEvent();
    auto* bytes = reinterpret_cast<uint8_t*>(&e);
    for (int k = 0; k < 4; ++k) bytes[rng() % sizeof e] = static_cast<uint8_t>(rng());
    auto event = decoder.Decode(&e, sizeof e, kSandbox);
    if (event.ok()) {
      std::string line = ToJsonLine(*event);
      EXPECT_FALSE(line.empty());
    }
  }
}

TEST(EventDecoder, LossRecord) {
  EventDecoder decoder("/x");
  auto loss = decoder.LossRecord(kSandbox, 17);
  EXPECT_EQ(loss.kind(), "loss");
  EXPECT_EQ(loss.loss().dropped(), 17u);
  EXPECT_NE(ToCompactLine(loss).find("LOSS 17 events lost"), std::string::npos) << ToCompactLine(loss);
}

TEST(Args, StrictParsing) {
  using cli::OptionSpec;
  std::vector<OptionSpec> specs = {{"--policy", "", true}, {"--quiet", "-q"}, {"--tag", "", true, true}};
  cli::ParsedArgs a;
  std::string err;
  ASSERT_TRUE(cli::ParseArgs({"--policy=p.yaml", "-q", "--tag", "x", "--tag", "y", "--", "cmd", "--policy"}, specs,
                             &a, &err))
      << err;
  EXPECT_EQ(a.Get("--policy").value(), "p.yaml");
  EXPECT_TRUE(a.Has("--quiet"));
  EXPECT_EQ(a.options["--tag"].size(), 2u);
  EXPECT_EQ(a.after_dashdash, (std::vector<std::string>{"cmd", "--policy"}));

  cli::ParsedArgs b;
  EXPECT_FALSE(cli::ParseArgs({"--policy"}, specs, &b, &err));
  EXPECT_EQ(err, "option --policy needs a value");
  cli::ParsedArgs c;
  EXPECT_FALSE(cli::ParseArgs({"--policy", "a", "--policy", "b"}, specs, &c, &err));
  EXPECT_EQ(err, "option --policy given more than once");
  cli::ParsedArgs d;
  EXPECT_FALSE(cli::ParseArgs({"--nope"}, specs, &d, &err));
  EXPECT_EQ(err, "unknown option --nope");
  cli::ParsedArgs e;
  EXPECT_FALSE(cli::ParseArgs({"--quiet=1"}, specs, &e, &err));
  cli::ParsedArgs f;
  ASSERT_TRUE(cli::ParseArgs({"-q", "python3", "-c", "x"}, specs, &f, &err, /*stop_at_first_positional=*/true));
  EXPECT_EQ(f.positionals, (std::vector<std::string>{"python3"}));
  EXPECT_EQ(f.after_dashdash, (std::vector<std::string>{"-c", "x"}));
}

// `--policy -- CMD` lacks the file (it is not a file named "--"); a value
// outside the choices or refused by the check is a usage error naming the
// option and, escaped, the value.
TEST(Args, ValuesAreChecked) {
  using cli::OptionSpec;
  std::vector<OptionSpec> specs = {{"--policy", "", true}, cli::ModeOption(), cli::SandboxNameOption(),
                                   {"--even", "", true, false, {}, [](const std::string& v) {
                                      return v.size() % 2 ? std::string("odd length") : std::string();
                                    }}};
  std::string err;
  cli::ParsedArgs a;
  EXPECT_FALSE(cli::ParseArgs({"--policy", "--", "/bin/true"}, specs, &a, &err));
  EXPECT_EQ(err, "option --policy needs a value (the '--' after it ends the options)");
  cli::ParsedArgs b;
  ASSERT_TRUE(cli::ParseArgs({"--policy=--", "--mode", "audit"}, specs, &b, &err)) << "explicitly inline: " << err;
  EXPECT_EQ(b.Get("--policy").value(), "--");
  EXPECT_EQ(b.Get("--mode").value(), "audit");
  cli::ParsedArgs c;
  EXPECT_FALSE(cli::ParseArgs({"--mode", "bogus\x1b[2J"}, specs, &c, &err));
  EXPECT_EQ(err, "option --mode must be one of enforce, audit, not 'bogus\\x1b[2J'");
  cli::ParsedArgs d;
  EXPECT_FALSE(cli::ParseArgs({"--mode=Enforce"}, specs, &d, &err));
  EXPECT_NE(err.find("must be one of enforce, audit"), std::string::npos) << err;
  cli::ParsedArgs e;
  EXPECT_FALSE(cli::ParseArgs({"--even", "abc"}, specs, &e, &err));
  EXPECT_EQ(err, "option --even: odd length");
  cli::ParsedArgs f;
  EXPECT_TRUE(cli::ParseArgs({"--even", "ab"}, specs, &f, &err)) << err;
  for (const char* good : {"task-17", "ci.build_42", "user@host:7+1", "caf\xc3\xa9", "A"}) {
    cli::ParsedArgs g;
    EXPECT_TRUE(cli::ParseArgs({"--name", good}, specs, &g, &err)) << good << ": " << err;
  }
  const std::pair<const char*, const char*> bad[] = {
      {"bad name!", "the sandbox name 'bad name!' has ' ': use letters, digits and . _ - : @ + only"},
      {"a/b", "has '/'"},
      {"tab\there", "holds control, invisible or bidi characters or invalid UTF-8"},
      {"rtl\xe2\x80\xaex", "holds control, invisible or bidi characters"},
      {"\xff", "invalid UTF-8"},
      {"", "the sandbox name is empty"},
  };
  for (const auto& [name, want] : bad) {
    cli::ParsedArgs g;
    EXPECT_FALSE(cli::ParseArgs({"--name", name}, specs, &g, &err)) << name;
    EXPECT_NE(err.find(want), std::string::npos) << err;
    EXPECT_EQ(err.find_first_of("\t\x1b"), std::string::npos) << "raw bytes echoed: " << err;
  }
  cli::ParsedArgs h;
  EXPECT_FALSE(cli::ParseArgs({"--name", std::string(64, 'n')}, specs, &h, &err));
  EXPECT_EQ(err, "option --name: the sandbox name is longer than 63 bytes");
  EXPECT_TRUE(cli::ParseArgs({"--name", std::string(63, 'n')}, specs, &h, &err)) << err;
}

}  // namespace
}  // namespace cordon
