// The audit-file line is written by hand (events/decoder.cc, for speed) and
// must stay byte-identical to protobuf's canonical JSON mapping: compared
// here with MessageToJsonString on varied and random events.
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "abi/cordon_event.h"
#include "abi/cordon_file.h"
#include "events/decoder.h"
#include "events/wire.h"
#include "events/json_line.h"
#include "policy/cidr.h"
#include "tests/unit/event_records.h"

namespace cordon {
namespace {

using cordon::v1::AuditEvent;

std::string Canonical(const AuditEvent& event) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = false;
  options.preserve_proto_field_names = false;
  (void)google::protobuf::util::MessageToJsonString(event, &json, options);
  return json;
}

void ExpectSame(const AuditEvent& event, bool compare_wire = true) {
  std::string line = ToJsonLine(event);
  EXPECT_EQ(line, Canonical(event)) << event.DebugString();
  std::string appended = "prefix";
  AppendJsonLine(event, &appended);
  EXPECT_EQ(appended, "prefix" + line);
  // The hand-written wire encoding too (the agent's tail frames).
  if (!compare_wire) return;
  std::string wire = "prefix";
  AppendWireEvent(event, &wire);
  std::string expected;
  ASSERT_TRUE(event.SerializeToString(&expected));
  EXPECT_EQ(wire, "prefix" + expected) << event.DebugString();
}

TEST(JsonLine, EmptyAndMinimalEvents) {
  AuditEvent e;
  ExpectSame(e);
  e.mutable_time();
  ExpectSame(e);
  e.mutable_net();
  e.mutable_file();
  e.mutable_target();
  e.mutable_loss();
  e.mutable_suppressed();
  ExpectSame(e);
  e.add_open_files("");
  ExpectSame(e);
  e.set_quiet(true);  // the last member (field 28)
  ExpectSame(e);
  EXPECT_NE(ToJsonLine(e).find(",\"quiet\":true}"), std::string::npos) << ToJsonLine(e);
}

TEST(JsonLine, EveryAsciiCharacterInEveryStringField) {
  for (int c = 1; c < 128; ++c) {
    std::string s = "a" + std::string(1, static_cast<char>(c)) + "b" + std::string(1, static_cast<char>(c));
    AuditEvent e;
    e.set_sandbox(s);
    e.set_comm(s);
    e.set_reason(s);
    e.mutable_net()->set_address(s);
    e.mutable_file()->set_path(s);
    e.add_open_files(s);
    ExpectSame(e);
  }
  AuditEvent nul;
  nul.set_sandbox(std::string("a\0b", 3));
  ExpectSame(nul);
}

// Every field of AuditEvent and of its sub-messages set (by reflection, so a
// field added later is covered without a change here): the hand-written wire
// encoding is protobuf's, byte for byte. (A tail through the agent once lost
// the resource, credential and chain fields this way.)
void FillEveryField(google::protobuf::Message* m, int depth) {
  const auto* d = m->GetDescriptor();
  const auto* r = m->GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const auto* f = d->field(i);
    using FD = google::protobuf::FieldDescriptor;
    const std::string text = "v" + std::to_string(f->number()) + "\xc3\xa9";
    const int n = f->number() + 1;
    if (f->is_repeated()) {
      for (int k = 0; k < 2; ++k) {
        if (f->cpp_type() == FD::CPPTYPE_STRING) r->AddString(m, f, text + std::to_string(k));
        else if (f->cpp_type() == FD::CPPTYPE_MESSAGE && depth < 3) FillEveryField(r->AddMessage(m, f), depth + 1);
      }
      continue;
    }
    switch (f->cpp_type()) {
      case FD::CPPTYPE_STRING: r->SetString(m, f, text); break;
      case FD::CPPTYPE_BOOL: r->SetBool(m, f, true); break;
      case FD::CPPTYPE_UINT32: r->SetUInt32(m, f, static_cast<uint32_t>(n * 1000)); break;
      case FD::CPPTYPE_UINT64: r->SetUInt64(m, f, static_cast<uint64_t>(n) << 40); break;
      case FD::CPPTYPE_INT32: r->SetInt32(m, f, -n); break;
      case FD::CPPTYPE_INT64: r->SetInt64(m, f, -(static_cast<int64_t>(n) << 33)); break;
      case FD::CPPTYPE_MESSAGE:
        if (depth < 3) FillEveryField(r->MutableMessage(m, f), depth + 1);
        break;
      default: break;
    }
  }
}

TEST(WireEvent, EveryFieldIsEncodedAsProtobufDoes) {
  AuditEvent e;
  FillEveryField(&e, 0);
  e.mutable_time()->set_nanos(123);  // a valid Timestamp
  e.mutable_time()->set_seconds(1796442859);
  std::string wire;
  AppendWireEvent(e, &wire);
  EXPECT_EQ(wire, e.SerializeAsString()) << e.DebugString();
  AuditEvent back;
  ASSERT_TRUE(back.ParseFromString(wire));
  EXPECT_TRUE(back.has_credential() && back.has_resource() && back.has_chain_start() && !back.chain().empty());
}

// Protobuf does not print unknown fields (of an event from a newer agent);
// neither does the hand-written line.
TEST(JsonLine, UnknownFieldsAreNotPrinted) {
  AuditEvent e;
  e.set_kind("net.connect");
  e.mutable_net()->set_port(5);
  std::string wire = e.SerializeAsString();
  wire += std::string("\x98\x06\x07", 3);   // field 99, varint 7
  wire += std::string("\x92\x03\x02hi", 5);  // field 50, "hi"
  AuditEvent parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire));
  ASSERT_EQ(parsed.GetReflection()->GetUnknownFields(parsed).field_count(), 2);
  ExpectSame(parsed, false);
  EXPECT_EQ(ToJsonLine(parsed), ToJsonLine(e));
  // The wire encoding leaves them out (the agent's own events have none).
  std::string a, b;
  AppendWireEvent(parsed, &a);
  AppendWireEvent(e, &b);
  EXPECT_EQ(a, b);
}

TEST(JsonLine, NonAsciiFallsBackToProtobuf) {
  const char* samples[] = {"caf\xc3\xa9", "\xe2\x80\xa8", "\xc2\xad", "\xef\xbb\xbf", "\xf0\x9f\x98\x80"};
  for (const char* s : samples) {
    AuditEvent e;
    e.set_exe(std::string("/usr/bin/") + s);
    e.set_kind("file.open");
    ExpectSame(e);
  }
}

TEST(JsonLine, Timestamps) {
  const int64_t seconds[] = {0, 1, -1, 59, 86399, 86400, 951782400 /* 2000-02-29 */, 1764436241, 4102444800,
                             -62135596800, 253402300799, -62135596801, 253402300800};
  const int32_t nanos[] = {0, 1, 999999999, 1000, 1000000, 123000000, 123456000, 123456789, -1, 1000000000};
  for (int64_t s : seconds)
    for (int32_t n : nanos) {
      AuditEvent e;
      e.mutable_time()->set_seconds(s);
      e.mutable_time()->set_nanos(n);
      e.set_kind("net.connect");
      ExpectSame(e);
    }
}

TEST(JsonLine, DecodedEventsOfEveryLayout) {
  EventDecoder decoder("/nonexistent-cgroup-mount");
  const SandboxContext sandbox{42, "agent-1", "build-agent", "/sandboxes/agent-1"};
  cordon_net_event net = testing::NetRecord(CORDON_EV_NET_SENDMSG, CORDON_REASON_NO_RULE);
  net.hdr.boot_ns = 5000000123;
  net.hdr.pid = static_cast<uint32_t>(::getpid());  // a live process: exe is set
  net.hdr.tid = net.hdr.pid;
  std::strcpy(net.hdr.comm, "flood<\"x\">");
  net.addr[10] = net.addr[11] = 0xff;
  net.addr[12] = 127;
  net.addr[15] = 1;
  net.port = 9;
  net.family = 2;
  net.sock_type = 2;
  net.protocol = 17;
  auto event = decoder.Decode(&net, sizeof net, sandbox);
  ASSERT_TRUE(event.ok());
  EXPECT_FALSE(event->exe().empty());
  ExpectSame(*event);

  testing::ObjectRecord rec = testing::MakeObjectRecord(CORDON_EV_TAMPER_SIGNAL, CORDON_REASON_OUTSIDE_SANDBOX,
                                                         "/etc/a\tb\\", CORDON_LAYER_DETECT);
  rec.fe.hdr.boot_ns = net.hdr.boot_ns;
  rec.fe.hdr.pid = rec.fe.hdr.tid = net.hdr.pid;
  std::strcpy(rec.fe.hdr.comm, net.hdr.comm);
  rec.fe.hdr.verdict = CORDON_VERDICT_KILLED;
  rec.fe.access = CORDON_FILE_READ | CORDON_FILE_WRITE;
  rec.fe.ino = 1ull << 40;
  rec.fe.dev = 0x800001;
  rec.fe.target_pid = 1;
  rec.fe.arg = 9;
  event = decoder.Decode(rec.data(), rec.size(), sandbox);
  ASSERT_TRUE(event.ok()) << event.error().ToString();
  EXPECT_TRUE(event->has_file());
  EXPECT_TRUE(event->has_target());
  ExpectSame(*event);

  decoder.BeginBatch();
  for (uint32_t pid : {1u, 999999999u, net.hdr.pid}) {
    net.hdr.pid = pid;
    event = decoder.Decode(&net, sizeof net, sandbox);
    ASSERT_TRUE(event.ok());
    ExpectSame(*event);
  }
  decoder.EndBatch();
  ExpectSame(decoder.LossRecord(sandbox, 12345));
}

// Batches read each process's exe once, and give the same events as reading
// record by record.
TEST(JsonLine, BatchedDecodingMatchesUnbatched) {
  EventDecoder batched("/nonexistent-cgroup-mount"), single("/nonexistent-cgroup-mount");
  const SandboxContext sandbox{7, "s", "p", "/s"};
  cordon_net_event e = testing::NetRecord(CORDON_EV_NET_CONNECT, CORDON_REASON_PORT);
  e.hdr.verdict = CORDON_VERDICT_AUDITED;
  e.hdr.rule = 3;
  e.hdr.sandbox_id = e.hdr.cgroup_id = 7;
  e.hdr.pid = static_cast<uint32_t>(::getpid());
  std::strcpy(e.hdr.comm, "core_unit_tests");
  e.port = 443;
  e.family = 10;
  e.sock_type = 1;
  e.protocol = 6;
  batched.BeginBatch();
  AuditEvent reused;
  for (int i = 0; i < 100; ++i) {
    e.hdr.boot_ns = 1000000000ull * i;
    ASSERT_TRUE(batched.DecodeInto(&e, sizeof e, sandbox, &reused).ok());
    auto fresh = single.Decode(&e, sizeof e, sandbox);
    ASSERT_TRUE(fresh.ok());
    EXPECT_EQ(reused.exe(), fresh->exe());
    reused.clear_time();
    fresh->clear_time();  // the clock offset is read at different instants
    EXPECT_EQ(ToJsonLine(reused), ToJsonLine(*fresh));
  }
  batched.EndBatch();
}

// DecodeInto reuses one message from record to record: whatever a record
// does not set must not survive from the one before.
TEST(JsonLine, ReusedMessageEqualsFreshDecode) {
  EventDecoder reused_decoder("/nonexistent-cgroup-mount"), fresh_decoder("/nonexistent-cgroup-mount");
  const SandboxContext sandbox{42, "s", "p", "/s"};
  const uint32_t pid = static_cast<uint32_t>(::getpid());
  cordon_net_event connect = testing::NetRecord(CORDON_EV_NET_CONNECT, CORDON_REASON_PORT);
  connect.hdr.pid = pid;
  std::strcpy(connect.hdr.comm, "t");
  connect.addr[10] = connect.addr[11] = 0xff;
  connect.addr[12] = 10;
  connect.port = 443;
  connect.hdr.rule = 4;
  connect.family = 2;
  connect.sock_type = 1;
  connect.protocol = 6;
  cordon_net_event socket_cg = testing::NetRecord(CORDON_EV_NET_SOCKET, CORDON_REASON_SOCK_KIND);
  socket_cg.hdr.pid = pid;
  socket_cg.family = 2;
  socket_cg.sock_type = 3;
  socket_cg.protocol = 1;
  cordon_net_event socket_lsm = testing::NetRecord(CORDON_EV_NET_SOCKET, CORDON_REASON_FAMILY, CORDON_LAYER_LSM);
  socket_lsm.hdr.pid = pid;
  socket_lsm.family = 16;
  socket_lsm.sock_type = 3;
  auto file = testing::MakeObjectRecord(CORDON_EV_FILE_OPEN, CORDON_REASON_FILE_RULE, "/etc/x");
  file.fe.hdr.pid = pid;
  file.fe.access = CORDON_FILE_WRITE;
  file.fe.ino = 77;
  auto tamper = testing::MakeObjectRecord(CORDON_EV_TAMPER_SIGNAL, CORDON_REASON_OUTSIDE_SANDBOX);
  tamper.fe.hdr.pid = pid;
  tamper.fe.target_pid = 1;
  tamper.fe.arg = 9;
  auto mount = testing::MakeObjectRecord(CORDON_EV_TAMPER_MOUNT, CORDON_REASON_FORBIDDEN, "/mnt");
  mount.fe.hdr.pid = pid;
  cordon_net_event gone = connect;
  gone.hdr.pid = 999999999;  // no such process: no exe
  using testing::Bytes;
  const std::vector<char> c = Bytes(connect), f = Bytes(file, file.size()), s_cg = Bytes(socket_cg),
                          s_lsm = Bytes(socket_lsm), t = Bytes(tamper, tamper.size()), m = Bytes(mount, mount.size()),
                          g = Bytes(gone);
  const std::vector<char> sequence[] = {c, f, c, s_cg, c, s_lsm, t, m, f, g, c, t, s_cg, g, f, s_lsm, m, c};
  AuditEvent reused;
  for (const std::vector<char>& r : sequence) {
    ASSERT_TRUE(reused_decoder.DecodeInto(r.data(), r.size(), sandbox, &reused).ok());
    auto fresh = fresh_decoder.Decode(r.data(), r.size(), sandbox);
    ASSERT_TRUE(fresh.ok()) << fresh.error().ToString();
    AuditEvent a = reused, b = *fresh;
    a.clear_time();
    b.clear_time();
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(a, b)) << a.DebugString() << " vs " << b.DebugString();
    EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString());
    EXPECT_EQ(ToJsonLine(a), ToJsonLine(b));
  }
}

// The decoder formats IPv4 (and IPv4-mapped) addresses itself: as inet_ntop.
TEST(JsonLine, AddressesAsInetNtop) {
  EventDecoder decoder("/nonexistent-cgroup-mount");
  const SandboxContext sandbox{1, "s", "p", "/s"};
  cordon_net_event e = testing::NetRecord(CORDON_EV_NET_CONNECT, CORDON_REASON_NO_RULE);
  e.hdr.pid = 999999999;
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::array<uint8_t, 16> addr = {};
    if (i % 3 != 2) addr[10] = addr[11] = 0xff;  // mapped, else IPv6
    for (int b = (i % 3 != 2) ? 12 : 0; b < 16; ++b) {
      const uint8_t kEdges[] = {0, 1, 9, 10, 99, 100, 199, 255};
      addr[b] = i < 500 ? kEdges[rng() % 8] : static_cast<uint8_t>(rng());
    }
    std::memcpy(e.addr, addr.data(), 16);
    auto event = decoder.Decode(&e, sizeof e, sandbox);
    ASSERT_TRUE(event.ok());
    EXPECT_EQ(event->net().address(), policy::AddressToString(addr));
  }
}

TEST(JsonLine, RandomEvents) {
  std::mt19937_64 rng(12345);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  auto str = [&]() -> std::string {
    static const char* const kPool[] = {"", "net.connect", "denied", "/usr/bin/python3.11",
                                        "no egress rule allows 127.0.0.1 port 9/udp", "a\"b\\c", "<script>",
                                        "tab\there", "\x01\x1f\x7f", "caf\xc3\xa9", "x"};
    if (pick(4) == 0) {
      std::string s;
      int n = pick(20);
      for (int i = 0; i < n; ++i) s.push_back(static_cast<char>(1 + pick(127)));
      return s;
    }
    return kPool[pick(11)];
  };
  auto num32 = [&]() -> uint32_t { return pick(3) == 0 ? 0 : pick(2) ? static_cast<uint32_t>(rng()) : pick(100); };
  auto num64 = [&]() -> uint64_t { return pick(3) == 0 ? 0 : pick(2) ? rng() : static_cast<uint64_t>(pick(100)); };
  for (int iter = 0; iter < 5000; ++iter) {
    AuditEvent e;
    if (pick(5)) {
      e.mutable_time()->set_seconds(static_cast<int64_t>(rng() % 4102444800ull) - (pick(10) == 0 ? 2000000000 : 0));
      int32_t nanos[] = {0, static_cast<int32_t>(rng() % 1000000000), static_cast<int32_t>(rng() % 1000) * 1000000,
                         static_cast<int32_t>(rng() % 1000000) * 1000};
      e.mutable_time()->set_nanos(nanos[pick(4)]);
    }
    e.set_sandbox(str());
    e.set_cgroup_path(str());
    e.set_cgroup_id(num64());
    e.set_sandbox_cgroup_id(num64());
    e.set_pid(num32());
    e.set_tid(num32());
    e.set_ppid(num32());
    e.set_uid(num32());
    e.set_gid(num32());
    e.set_comm(str());
    e.set_exe(str());
    e.set_kind(str());
    e.set_verdict(str());
    e.set_policy(str());
    e.set_reason(str());
    e.set_enforcement(str());
    if (pick(2)) {
      auto* n = e.mutable_net();
      n->set_address(str());
      n->set_port(num32());
      n->set_protocol(str());
      n->set_family(str());
      n->set_sock_type(str());
      n->set_rule(num32());
    }
    if (pick(4) == 0) {
      e.mutable_loss()->set_dropped(num64());
      e.mutable_loss()->set_first_seq(num64());
      e.mutable_loss()->set_last_seq(num64());
    }
    if (pick(3) == 0) {
      auto* f = e.mutable_file();
      f->set_path(str());
      f->set_access(str());
      f->set_granted(str());
      f->set_truncated(pick(2));
      f->set_inode(num64());
      f->set_device(num32());
      f->set_rule(num32());
    }
    if (pick(4) == 0) {
      e.mutable_target()->set_pid(num32());
      e.mutable_target()->set_arg(num32());
    }
    for (int i = pick(3) == 0 ? pick(4) : 0; i > 0; --i) e.add_open_files(str());
    if (pick(4) == 0) {
      e.mutable_suppressed()->set_count(num64());
      e.mutable_suppressed()->set_final(pick(2));
    }
    if (pick(3) == 0) e.set_quiet(true);
    if (pick(2)) {
      e.set_seq(num64());
      e.set_id(str());
    }
    ExpectSame(e);
    if (HasFailure()) break;
  }
}

}  // namespace
}  // namespace cordon
