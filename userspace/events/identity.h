// Event identity (README "Event identity"): the id and time of a record,
// the same for every reader and every read of it, and the rule by which a
// reader of a sandbox's ring buffer tells a record it already committed, a
// record it sees for the first time, and a number it will never see (lost).
#pragma once

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
// below the highest one seen is therefore not lost until the ring has been
// read up to a producer position observed after that highest record was
// read: by then every record that took a smaller number had reserved its
// place before it, and has been read. The reader calls TakeGaps() only when
// it drained the ring to empty (not when it stopped at a record still being
// written, or at its budget).
class SequenceTracker {
 public:
  // committed: the last number a reader committed (0: none). Numbers at or
  // below it were written out already.
  void Start(uint64_t committed) {
    next_ = committed + 1;
    ahead_.clear();
  }
  // True for a number seen for the first time; false for one at or below
  // what was committed or already seen (drop it: written out already).
  bool Observe(uint64_t seq);
  // The ranges [first, last] below the highest number seen that were never
  // seen (lost); afterwards they count as seen.
  std::vector<std::pair<uint64_t, uint64_t>> TakeGaps();
  // Every number up to this one was seen (or taken as lost): what a reader
  // commits once it wrote out what it read.
  uint64_t contiguous() const { return next_ - 1; }

 private:
  uint64_t next_ = 1;         // the lowest number not yet seen
  std::set<uint64_t> ahead_;  // seen, above next_ (out of order)
};

}  // namespace cordon
