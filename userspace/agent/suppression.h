// Rate limiting of each sandbox's events: a token bucket admits them; what
// it refuses is counted, not delivered, and a "suppressed" record carrying
// the count is due at most once a second while suppression lasts and once
// more when it ends (so delivered + suppressed + lost = generated).
//
// Times are CLOCK_MONOTONIC nanoseconds passed in by the caller: nothing here
// reads a clock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "event.pb.h"
#include "events/decoder.h"
#include "util/result.h"

namespace cordon::agent {

constexpr int64_t kSuppressedEveryNs = 1000000000;  // at most one record a second while suppressing
constexpr int64_t kSuppressionEndNs = 500000000;    // no suppression for this long: it has ended

// `rate` tokens a second, holding at most `burst`; full when configured.
// A rate of 0 admits everything.
class TokenBucket {
 public:
  void Configure(double rate, double burst, int64_t now_ns);
  bool Take(int64_t now_ns);

 private:
  double rate_ = 0;
  double burst_ = 0;
  double tokens_ = 0;
  int64_t last_ns_ = 0;
};

// One sandbox's suppression: admission through its bucket, its counts, and
// when its next "suppressed" record is due. Holds a pointer to its own
// pending count (or a slot of PendingState): neither copied nor moved.
class Suppression {
 public:
  Suppression() = default;
  Suppression(const Suppression&) = delete;
  Suppression& operator=(const Suppression&) = delete;

  // A rate of 0 admits everything.
  void Configure(uint64_t rate_per_second, uint64_t burst, int64_t now_ns);
  // Counts suppressed events in `slot` (of PendingState; null: in memory).
  // What a previous agent left there is reported at the next Due(): the
  // count, which is returned.
  uint64_t Resume(uint64_t* slot, int64_t now_ns);
  // True: deliver the event. False: it is counted as suppressed. Quiet
  // events (spec.quiet: expected denials) take their tokens from a bucket of
  // their own, with the same rate and burst: a flood of expected denials
  // cannot use up the budget of the violations (nor the other way round).
  // Both are counted alike (suppressed, pending, the records). A record
  // takes one token whatever it stands for; refused, it counts as the
  // `occurrences` it stands for (events/decoder.h Occurrences: the kernel's
  // repeats), so the suppressed count and the kernel's agree.
  bool Admit(int64_t now_ns, bool quiet = false, uint64_t occurrences = 1);
  // Whether a "suppressed" record is due; *final: suppression has ended
  // (the record then may count 0, if the last periodic one took them all).
  bool Due(int64_t now_ns, bool* final) const;
  // A record of pending() went to the sinks: the count starts again.
  void Recorded(bool final, int64_t now_ns);

  uint64_t pending() const { return *pending_; }      // suppressed, not yet in a record
  uint64_t suppressed() const { return suppressed_; }  // since adoption
  bool suppressing() const { return suppressing_; }    // suppressed since the last final record

 private:
  bool limited_ = false;
  TokenBucket bucket_;
  TokenBucket quiet_bucket_;
  uint64_t suppressed_ = 0;
  uint64_t own_pending_ = 0;           // used when the state table is full
  uint64_t* pending_ = &own_pending_;
  int64_t last_suppressed_ns_ = 0;
  int64_t last_record_ns_ = 0;
  bool suppressing_ = false;
};

// The "suppressed" record of `count` events of a sandbox, stamped `unix_ns`.
cordon::v1::AuditEvent SuppressedRecord(const SandboxContext& sandbox, uint64_t count, uint64_t rate_per_second,
                                        uint64_t burst, bool final, int64_t unix_ns);

// Events suppressed but not yet written in a "suppressed" record are counted
// in a shared mapping of <socket dir>/agent.state, not in the heap: the page
// cache keeps the counts when the agent dies (kill -9 included), and the next
// agent writes them out. A count is cleared only after its record went to the
// sinks, so a crash in between reports it twice, never not at all.
class PendingState {
 public:
  struct Slot {
    uint64_t sandbox_id;
    uint64_t pending;
  };
  static constexpr size_t kSlots = 4096;

  PendingState() = default;
  PendingState(const PendingState&) = delete;
  PendingState& operator=(const PendingState&) = delete;
  ~PendingState();
  Status Open(const std::string& path);
  // The sandbox's counter (claimed if new); null when the table is full.
  uint64_t* Claim(uint64_t id);
  void Release(uint64_t id);
  std::vector<Slot> Used() const;

 private:
  Slot* slots_ = nullptr;
};

}  // namespace cordon::agent
