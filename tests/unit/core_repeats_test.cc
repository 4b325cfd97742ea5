// The kernel's repeats (README "Repeats"): a record carrying the count of the
// same (kind, verdict, reason, process, target) aggregated in the kernel
// before it. The decoder must carry the count and its first/last times on the
// same clock as the record's own time, and a decoder message reused for the
// next record must not keep them. Sanitized with the unit suites: the
// integration floods that also drive this are not (tests/run.sh).
#include <google/protobuf/util/time_util.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "abi/cordon_event.h"
#include "events/decoder.h"
#include "tests/unit/event_records.h"

namespace cordon {
namespace {

using google::protobuf::util::TimeUtil;
using testing::NetRecord;

const SandboxContext kSandbox{42, "agent-1", "build-agent", "/sandboxes/agent-1"};

TEST(Repeats, CountAndTimesAreCarriedOnTheRecordsClock) {
  EventDecoder decoder("/nonexistent-cgroup-mount");
  cordon_net_event e = NetRecord(CORDON_EV_NET_SENDMSG, CORDON_REASON_NO_RULE);
  e.hdr.boot_ns = 5'000'000'000;
  e.hdr.repeats = 999'999;
  e.hdr.repeats_first_ns = 3'000'000'000;
  e.hdr.repeats_last_ns = 4'500'000'000;
  auto event = decoder.Decode(&e, sizeof e, kSandbox);
  ASSERT_TRUE(event.ok()) << event.error().ToString();
  ASSERT_TRUE(event->has_repeats());
  EXPECT_EQ(event->repeats().count(), 999'999u);
  EXPECT_FALSE(event->repeats().pending());
  EXPECT_EQ(Occurrences(*event), 1'000'000u) << "the record itself and its repeats";
  const int64_t at = TimeUtil::TimestampToNanoseconds(event->time());
  EXPECT_NEAR(at - TimeUtil::TimestampToNanoseconds(event->repeats().first()), 2'000'000'000, 1'000'000);
  EXPECT_NEAR(at - TimeUtil::TimestampToNanoseconds(event->repeats().last()), 500'000'000, 1'000'000);

  // The next record, without repeats, decoded into a reused message.
  cordon_net_event plain = NetRecord(CORDON_EV_NET_CONNECT, CORDON_REASON_NO_RULE);
  plain.hdr.boot_ns = 6'000'000'000;
  auto next = decoder.Decode(&plain, sizeof plain, kSandbox);
  ASSERT_TRUE(next.ok()) << next.error().ToString();
  EXPECT_FALSE(next->has_repeats());
  EXPECT_EQ(Occurrences(*next), 1u);
}

// BPF LSM's records are counted too (bpf/lib/repeats.bpf.h): a file record
// carries its count like a net record; the copy of a first record kept in the
// kernel's table (a full ring buffer) holds the tail of a long path, marked
// truncated, and its header's size says so (the decoder checks size against
// the path length).
TEST(Repeats, FileRecordsCarryTheirCountAndAKeptOneTheTailOfItsPath) {
  using testing::MakeObjectRecord;
  EventDecoder decoder("/nonexistent-cgroup-mount");
  auto r = MakeObjectRecord(CORDON_EV_FILE_OPEN, CORDON_REASON_FILE_RULE, "/srv/data/flooded");
  r.fe.hdr.boot_ns = 5'000'000'000;
  r.fe.hdr.repeats = 41;
  r.fe.hdr.repeats_first_ns = 4'000'000'000;
  r.fe.hdr.repeats_last_ns = 4'900'000'000;
  auto event = decoder.Decode(r.data(), r.size(), kSandbox);
  ASSERT_TRUE(event.ok()) << event.error().ToString();
  EXPECT_EQ(event->file().path(), "/srv/data/flooded");
  EXPECT_EQ(Occurrences(*event), 42u);

  // As cordon_repeat_open keeps a record over CORDON_REPEAT_RECORD_MAX bytes.
  struct {
    cordon_object_event fe;
    char path[CORDON_REPEAT_RECORD_MAX - sizeof(cordon_object_event)];
  } kept = {};
  static_assert(sizeof kept == CORDON_REPEAT_RECORD_MAX);
  kept.fe = MakeObjectRecord(CORDON_EV_FILE_OPEN, CORDON_REASON_FILE_RULE).fe;
  const std::string tail(sizeof kept.path, 'x');
  std::memcpy(kept.path, tail.data(), tail.size());
  kept.fe.path_len = sizeof kept.path;
  kept.fe.path_flags = CORDON_PATH_F_TRUNCATED;
  kept.fe.hdr.size = CORDON_REPEAT_RECORD_MAX;
  auto stored = decoder.Decode(&kept, sizeof kept, kSandbox);
  ASSERT_TRUE(stored.ok()) << stored.error().ToString();
  EXPECT_EQ(stored->file().path(), tail);
  EXPECT_TRUE(stored->file().truncated());
}

}  // namespace
}  // namespace cordon
