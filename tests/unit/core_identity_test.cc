// Event identity (README "Event identity", issue 16 finding 6): the rule by
// which a reader tells committed, new and lost sequence numbers apart, and
// the boot's one clock offset. No kernel: the reader feeds SequenceTracker
// the numbers of the records it reads.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "events/identity.h"

namespace cordon {
namespace {

using Gaps = std::vector<std::pair<uint64_t, uint64_t>>;
// A ring read to empty: the consumer at the producer position.
constexpr uint64_t kDrained = 4096;

TEST(SequenceTracker, InOrderNumbersAreNewAndLeaveNoGap) {
  SequenceTracker t;
  t.Start(0);
  for (uint64_t s = 1; s <= 5; ++s) EXPECT_TRUE(t.Observe(s)) << s;
  EXPECT_EQ(t.TakeGaps(kDrained, kDrained), Gaps{});
  EXPECT_EQ(t.contiguous(), 5u);
}

// A restarted reader: what an earlier reader committed is read again (it was
// killed between writing and committing) and dropped; the rest is new.
TEST(SequenceTracker, NumbersAtOrBelowTheCommittedOneAreDropped) {
  SequenceTracker t;
  t.Start(3);
  EXPECT_FALSE(t.Observe(2));
  EXPECT_FALSE(t.Observe(3));
  EXPECT_TRUE(t.Observe(4));
  EXPECT_FALSE(t.Observe(4)) << "the same number twice";
  EXPECT_EQ(t.TakeGaps(kDrained, kDrained), Gaps{});
  EXPECT_EQ(t.contiguous(), 4u);
}

// Two CPUs: the record that reserved its place first took the larger number.
// A number missing below the highest one is no gap while the rest of the
// ring may still hold it; the reader asks for gaps only once it drained the
// ring, and by then the record is read.
TEST(SequenceTracker, ReorderedNumbersFilledBeforeTheDrainAreNoGap) {
  SequenceTracker t;
  t.Start(0);
  EXPECT_TRUE(t.Observe(1));
  EXPECT_TRUE(t.Observe(3));
  EXPECT_EQ(t.contiguous(), 1u) << "2 not seen yet: only 1 may be committed";
  EXPECT_TRUE(t.Observe(2));
  EXPECT_EQ(t.contiguous(), 3u);
  EXPECT_EQ(t.TakeGaps(kDrained, kDrained), Gaps{});
}

TEST(SequenceTracker, NumbersNeverSeenByTheDrainAreLostRanges) {
  SequenceTracker t;
  t.Start(10);  // committed by an earlier reader
  EXPECT_TRUE(t.Observe(14));
  EXPECT_TRUE(t.Observe(15));
  EXPECT_TRUE(t.Observe(20));
  EXPECT_EQ(t.TakeGaps(kDrained, kDrained), (Gaps{{11, 13}, {16, 19}}));
  EXPECT_EQ(t.contiguous(), 20u) << "the lost ones are reported once, then count as seen";
  EXPECT_EQ(t.TakeGaps(kDrained, kDrained), Gaps{});
  EXPECT_FALSE(t.Observe(12)) << "a number reported lost is never delivered after its loss record";
  EXPECT_TRUE(t.Observe(21));
}

// Issue 16: a flood that never lets the ring be read to empty. Gaps used to
// settle only at empty, so the numbers seen ahead of one lost record piled
// up without bound and the committed sequence stayed behind it. A number
// missing below h is lost once the consumer has passed the producer position
// loaded after h was read: every smaller number's record lies below it.
TEST(SequenceTracker, GapsSettleOnceTheConsumerPassesTheProducerPositionSeenAfterThem) {
  SequenceTracker t;
  t.Start(0);
  EXPECT_TRUE(t.Observe(1));
  EXPECT_TRUE(t.Observe(3));  // 2 not read (yet)
  EXPECT_EQ(t.TakeGaps(1000, 5000), Gaps{}) << "2 may still be in the ring, up to position 5000";
  for (uint64_t s = 4; s <= 50; ++s) EXPECT_TRUE(t.Observe(s));
  EXPECT_EQ(t.TakeGaps(4999, 9000), Gaps{}) << "not yet at 5000";
  EXPECT_EQ(t.contiguous(), 1u);
  for (uint64_t s = 52; s <= 80; ++s) EXPECT_TRUE(t.Observe(s));  // 51 not read either
  EXPECT_EQ(t.TakeGaps(5000, 13000), (Gaps{{2, 2}})) << "passed 5000: 2 is lost, 51 not yet (seen after 5000)";
  EXPECT_EQ(t.contiguous(), 50u) << "the committed sequence moves on while the ring is never empty";
  EXPECT_FALSE(t.Observe(2)) << "reported lost: never delivered after its loss record";
  EXPECT_EQ(t.TakeGaps(12999, 20000), Gaps{});
  EXPECT_EQ(t.TakeGaps(13000, 20000), (Gaps{{51, 51}}));
  EXPECT_EQ(t.contiguous(), 80u);
  EXPECT_EQ(t.ahead(), 0u);
}

// A reordered number that arrives before the checkpoint is passed is no gap.
TEST(SequenceTracker, ReorderedNumberReadBeforeTheCheckpointIsNoGap) {
  SequenceTracker t;
  t.Start(0);
  EXPECT_TRUE(t.Observe(2));
  EXPECT_EQ(t.TakeGaps(100, 200), Gaps{});
  EXPECT_TRUE(t.Observe(1));  // the other CPU's record, below position 200
  EXPECT_TRUE(t.Observe(3));
  EXPECT_EQ(t.TakeGaps(200, 300), Gaps{});
  EXPECT_EQ(t.contiguous(), 3u);
}

// The numbers held ahead of a gap are bounded: beyond the cap the oldest gap
// is reported lost at once (never silently dropped), and the rest goes on.
TEST(SequenceTracker, NumbersHeldAheadOfAGapAreCapped) {
  SequenceTracker t(/*max_ahead=*/4);
  t.Start(0);
  for (uint64_t s = 2; s <= 5; ++s) EXPECT_TRUE(t.Observe(s));
  EXPECT_EQ(t.ahead(), 4u);
  EXPECT_TRUE(t.Observe(7));  // the fifth held: over the cap
  EXPECT_LE(t.ahead(), 4u);
  EXPECT_EQ(t.contiguous(), 5u);
  EXPECT_EQ(t.TakeGaps(0, 1000), (Gaps{{1, 1}})) << "reported with the next gaps taken, before any commit";
  EXPECT_FALSE(t.Observe(1));
  EXPECT_EQ(t.TakeGaps(1000, 1000), (Gaps{{6, 6}}));
  EXPECT_EQ(t.contiguous(), 7u);
  SequenceTracker big;
  big.Start(0);
  for (uint64_t s = 2; s < 2 + 3 * SequenceTracker::kMaxAhead; ++s) big.Observe(s);
  EXPECT_LE(big.ahead(), SequenceTracker::kMaxAhead);
}

TEST(EventId, IsTheSandboxAndTheSequenceInDecimal) {
  EXPECT_EQ(EventId(4242, 7), "4242-7");
  EXPECT_EQ(EventId(18446744073709551615ull, 18446744073709551615ull), "18446744073709551615-18446744073709551615");
}

// The offset is measured once per boot and stored: every later reader (and
// a reader of a record read twice) uses the stored one. A file of another
// boot is replaced.
TEST(BootClockOffset, IsFixedOncePerBootAndSharedThroughItsFile) {
  char dir[] = "/tmp/cordon-clock-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string file = std::string(dir) + "/clock";
  const int64_t first = BootClockOffsetNs(file, "boot-a");
  ::usleep(2000);
  EXPECT_EQ(BootClockOffsetNs(file, "boot-a"), first);
  std::ofstream(file, std::ios::trunc) << "boot-a 12345\n";
  EXPECT_EQ(BootClockOffsetNs(file, "boot-a"), 12345) << "the stored value, not a new measurement";
  const int64_t other = BootClockOffsetNs(file, "boot-b");
  EXPECT_NE(other, 12345) << "a file of another boot is not used";
  EXPECT_EQ(BootClockOffsetNs(file, "boot-b"), other);
  ::unlink(file.c_str());
  ::rmdir(dir);
}

// The file is trusted only as a regular file of this user that nobody else
// may write, read without following a symlink; a symlink planted at the
// temporary name is not written through (the write is O_EXCL).
TEST(BootClockOffset, AFileOthersMayWriteOrASymlinkIsNotTrusted) {
  char dir[] = "/tmp/cordon-clock-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string file = std::string(dir) + "/clock";
  std::ofstream(file, std::ios::trunc) << "boot-a 12345\n";
  ASSERT_EQ(::chmod(file.c_str(), 0644), 0);
  EXPECT_EQ(BootClockOffsetNs(file, "boot-a"), 12345) << "control: a file only its owner writes is used";
  ASSERT_EQ(::chmod(file.c_str(), 0666), 0);
  EXPECT_NE(BootClockOffsetNs(file, "boot-a"), 12345) << "a file anyone may write is not used";
  ::unlink(file.c_str());
  const std::string target = std::string(dir) + "/target";
  std::ofstream(target, std::ios::trunc) << "boot-a 12345\n";
  ::chmod(target.c_str(), 0644);
  ASSERT_EQ(::symlink(target.c_str(), file.c_str()), 0);
  EXPECT_NE(BootClockOffsetNs(file, "boot-a"), 12345) << "a symlink is not followed";
  ::unlink(file.c_str());
  // The temporary name taken by a symlink to a victim: the victim is untouched.
  const std::string victim = std::string(dir) + "/victim";
  std::ofstream(victim, std::ios::trunc) << "keep\n";
  ASSERT_EQ(::symlink(victim.c_str(), (file + "." + std::to_string(::getpid())).c_str()), 0);
  (void)BootClockOffsetNs(file, "boot-c");
  std::ifstream in(victim);
  std::string kept;
  std::getline(in, kept);
  EXPECT_EQ(kept, "keep");
  ::unlink((file + "." + std::to_string(::getpid())).c_str());
  for (const std::string& f : {file, target, victim}) ::unlink(f.c_str());
  ::rmdir(dir);
}

}  // namespace
}  // namespace cordon
