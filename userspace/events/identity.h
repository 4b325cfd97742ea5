// Event identity (README "Event identity"): the id and time of a record,
// the same for every reader and every read of it, and the rule by which a
// reader of a sandbox's ring buffer tells a record it already committed, a
// record it sees for the first time, and a number it will never see (lost).
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace cordon {

// CLOCK_REALTIME - CLOCK_BOOTTIME, fixed once per boot: the first reader
// measures it and stores it with the boot's id (/proc/sys/kernel/random/boot_id)
// in /run/cordon/clock; every later reader of this boot uses the stored
// value, so a record's wall time (its boot_ns plus this) is the same in the
// agent's file, a tail and a run, and in a record read twice. A clock step
// after that (NTP) does not move it: times stay consistent with each other and
// with the boot clock, off the stepped wall clock by the step, until reboot.
// Where /run/cordon cannot be written, this process's first measurement.
int64_t BootClockOffsetNs();
// The same, given where the stored value lives (for tests).
int64_t BootClockOffsetNs(const std::string& file, const std::string& boot_id);

// "<sandbox_cgroup_id>-<seq>" in decimal (AuditEvent.id).
std::string EventId(uint64_t sandbox_id, uint64_t seq);

// One sandbox's record sequence as one reader sees it. Numbers are taken by
// the kernel once the ring buffer has room for the record, so every number
// is a record in the ring; but two CPUs may write them in the other order
// (the one that reserved first took its number second). A number missing
// below a number h seen is therefore not lost until the ring has been read up
// to a producer position observed after h was read: every record that took a
// smaller number than h had reserved its place, below that position, before
// h took its number. TakeGaps() applies that rule with one checkpoint at a
// time (the highest number seen and the producer position loaded after it),
// so gaps are settled while a flooding workload keeps the ring from ever
// being empty, about once per ring's worth of records read; a drained ring
// (consumer at the producer) settles everything seen. At most max_ahead
// numbers are held above the lowest one not yet seen: beyond that, the
// lowest gap is taken as lost at once (a ring far larger than any today's).
class SequenceTracker {
 public:
  static constexpr size_t kMaxAhead = 1 << 16;
  explicit SequenceTracker(size_t max_ahead = kMaxAhead) : max_ahead_(max_ahead) {}

  // committed: the last number a reader committed (0: none). Numbers at or
  // below it were written out already.
  void Start(uint64_t committed) {
    next_ = committed + 1;
    ahead_.clear();
    forced_.clear();
    checkpoint_ = 0;
  }
  // True for a number seen for the first time; false for one at or below
  // what was committed or already seen (drop it: written out already).
  bool Observe(uint64_t seq);
  // The ranges [first, last] of numbers never seen that are lost by now
  // (afterwards they count as seen). consumed: the ring's consumer position
  // (the end of what was read); produced: its producer position, loaded after
  // those reads. Called after every batch of reads.
  std::vector<std::pair<uint64_t, uint64_t>> TakeGaps(uint64_t consumed, uint64_t produced);
  // Every number up to this one was seen (or taken as lost): what a reader
  // commits once it wrote out what it read (and the loss records TakeGaps
  // returned).
  uint64_t contiguous() const { return next_ - 1; }
  // Numbers held above the lowest one not seen (bounded by max_ahead).
  size_t ahead() const { return ahead_.size(); }

 private:
  // Takes every number below `limit` not seen as lost (into gaps).
  void SettleBelow(uint64_t limit, std::vector<std::pair<uint64_t, uint64_t>>* gaps);

  size_t max_ahead_;
  uint64_t next_ = 1;         // the lowest number not yet seen
  std::set<uint64_t> ahead_;  // seen, above next_ (out of order)
  std::vector<std::pair<uint64_t, uint64_t>> forced_;  // taken as lost over max_ahead, not yet returned
  uint64_t checkpoint_ = 0;                            // 0: none; else a number seen whose smaller ones settle ...
  uint64_t checkpoint_pos_ = 0;                        // ... once the consumer reaches this producer position
};

}  // namespace cordon
