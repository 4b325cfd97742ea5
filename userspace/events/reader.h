// Consumes the ring buffers of one or more sandboxes and turns each record
// into an AuditEvent; notices kernel-side losses (the counters' dropped slot)
// and reports them as loss records.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "events/decoder.h"
#include "events/identity.h"
#include "util/fd.h"
#include "util/result.h"

namespace cordon {

// The lock every reader of the sandbox's ring buffer holds (EventReader::Add
// takes it): an exclusive flock on its pin directory. Refused with err
// EWOULDBLOCK and the holder's pid and command name while another has it.
Result<UniqueFd> LockSandboxEvents(const SandboxContext& sandbox);

class EventReader {
 public:
  using Callback = std::function<void(const cordon::v1::AuditEvent&)>;
  // Asked for each decoded record (so that it can tell quiet ones apart):
  // false consumes it without delivering it (the caller counts it, e.g. as
  // suppressed by a rate limit).
  using Admit = std::function<bool(const cordon::v1::AuditEvent&)>;

  EventReader(std::string cgroup_mount, Callback callback);
  ~EventReader();
  EventReader(const EventReader&) = delete;
  EventReader& operator=(const EventReader&) = delete;

  // Starts consuming the sandbox's ring buffer. Refused (err EWOULDBLOCK,
  // naming the holder) while another reader has it: every reader holds an
  // exclusive flock on the sandbox's pin directory for as long as it reads. `report_existing_losses`:
  // drops not yet reported by any reader (the counters' LOSS_REPORTED slot,
  // which every report advances) are reported at the next CheckLosses();
  // false: only drops from now on.
  Status Add(const SandboxContext& sandbox, UniqueFd events_fd, UniqueFd counters_fd,
             bool report_existing_losses = true);
  // Replaces the name/policy/path used for the sandbox's events (after a
  // policy replacement). False if the sandbox is not read here.
  bool Update(const SandboxContext& sandbox);
  void SetAdmit(Admit admit) { admit_ = std::move(admit); }
  // Deferred commit: a ring buffer's consumer position advances only at
  // Commit(), so records delivered to the callback but not yet committed are
  // read again by the next reader if this process dies. A caller that
  // buffers what the callback gets commits after writing it out: delivery is
  // then at least once, never lost, and a record delivered twice is the same
  // record (same id and time). Commit() also remembers the sandbox's last
  // committed sequence number (the counters' SEQ_COMMITTED slot, pinned): a
  // later reader drops records at or below it and reports numbers it never
  // sees as lost (README "Event identity"). Default: each record is
  // committed as soon as its callback returns (the sequence once per drain).
  void SetDeferCommit(bool defer) { defer_commit_ = defer; }
  void Commit();

  // Waits up to timeout_ms for records and consumes everything available.
  // Returns the number of records consumed.
  Result<int> Poll(int timeout_ms);
  // Consumes what is available without waiting.
  Result<int> Drain();
  // Consumes at most max_records (> 0) without waiting; returns how many.
  Result<int> Drain(int max_records);
  // Emits a loss record for every sandbox whose drop counter grew, and the
  // counts of repeats (bpf/abi/cordon_event.h) the kernel holds for keys idle
  // for a window: taken from its map (atomically: lookup and delete) and
  // written as records of the key's first occurrence with Repeats.pending.
  // `final`: the sandboxes ended (no process left to add to them) or this
  // reader stops: every count is taken.
  void CheckLosses(bool final = false);
  // A ring buffer is mapped (its 2 x 256 KiB of data pages count in this
  // process's RSS from the mmap on) only while it has records: unmaps those
  // with nothing consumed for `idle_ns` and nothing left to commit.
  void UnmapIdle(int64_t idle_ns);
  // Unconsumed bytes / ring size, of the fullest ring (0 for unmapped ones,
  // which held nothing when last looked at).
  double Fill() const;
  // Whether some ring buffer is mapped (had records lately). An unmapped one
  // is empty and committed; its next record wakes the epoll fd.
  bool AnyMapped() const;

  int epoll_fd() const;
  uint64_t malformed() const { return malformed_; }
  uint64_t delivered() const { return delivered_; }
  uint64_t consumed() const { return consumed_; }   // records taken from the ring buffers
  uint64_t refused() const { return refused_; }     // records Admit said no to
  // Records read again whose number was committed already (a reader killed
  // between writing them out and committing): consumed, never delivered.
  uint64_t repeated() const { return repeated_; }
  // Sequence numbers never seen (reported in loss records with their range).
  uint64_t gaps() const { return gaps_; }

 private:
  // One sandbox's ring buffer, mapped as libbpf maps it: the consumer
  // position page read-write, the producer position page and the data
  // (mapped twice in a row, so a record that wraps around reads contiguously)
  // read-only. Mapped when there is something to read (see UnmapIdle).
  struct Source {
    SandboxContext sandbox;
    UniqueFd lock_fd;  // the sandbox's pin directory, flock()ed: one reader at a time
    UniqueFd events_fd;
    UniqueFd counters_fd;
    UniqueFd repeats_fd;  // the sandbox's repeats map (invalid: none pinned)
    uint64_t drops_reported = 0;
    SequenceTracker sequence;    // README "Event identity"
    uint64_t seq_committed = 0;  // the counters' SEQ_COMMITTED slot as last written
    uint64_t* consumer_pos = nullptr;
    const uint64_t* producer_pos = nullptr;
    const uint8_t* data = nullptr;
    size_t data_map_size = 0;
    uint64_t mask = 0;
    uint32_t ring_size = 0;
    uint64_t cons = 0;  // next record to read; > *consumer_pos while uncommitted
    int64_t last_active_ns = 0;
    bool watermark_due = false;  // a loss record awaits Commit() to be remembered
    bool mapped() const { return consumer_pos != nullptr; }
    Status Map();
    void Unmap();
    ~Source() { Unmap(); }
  };
  // Consumes records of one source; stops after `budget` (> 0) records or
  // when the ring is empty. Returns the records consumed.
  int ConsumeRing(Source& source, int budget);
  int ReadRing(Source& source, int budget);  // ConsumeRing's reads, before the gaps are settled
  void OnRecord(Source& source, const void* data, size_t size);
  // Delivers a decoded event_ (unless Admit refuses it).
  void Offer();
  void SweepRepeats(Source& source, bool all);
  // Loss records for the numbers the source's reads skipped (after each batch).
  void ReportGaps(Source& source);
  // Remembers the source's committed sequence in its counters (pinned).
  void CommitSequence(Source& source);
  Result<int> Consume(int max_records);

  EventDecoder decoder_;
  Callback callback_;
  Admit admit_;
  UniqueFd epoll_fd_;
  bool defer_commit_ = false;
  cordon::v1::AuditEvent event_;  // reused for every record
  std::vector<std::unique_ptr<Source>> sources_;
  uint64_t malformed_ = 0;
  uint64_t delivered_ = 0;
  uint64_t consumed_ = 0;
  uint64_t refused_ = 0;
  uint64_t repeated_ = 0;
  uint64_t gaps_ = 0;
};

}  // namespace cordon
