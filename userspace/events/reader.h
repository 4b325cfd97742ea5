// Consumes the ring buffers of one or more sandboxes and turns each record
// into an AuditEvent; notices kernel-side losses (the counters' dropped slot)
// and reports them as loss records.
#pragma once

#include <bpf/libbpf.h>

#include <functional>
#include <memory>
#include <vector>

#include "events/decoder.h"
#include "util/fd.h"
#include "util/result.h"

namespace cordon {

class EventReader {
 public:
  using Callback = std::function<void(const cordon::v1::AuditEvent&)>;
  // Asked once per record before it is decoded: false consumes the record
  // without decoding or delivering it (the caller counts it, e.g. as
  // suppressed by a rate limit).
  using Admit = std::function<bool()>;

  EventReader(std::string cgroup_mount, Callback callback);
  ~EventReader();
  EventReader(const EventReader&) = delete;
  EventReader& operator=(const EventReader&) = delete;

  // Starts consuming the sandbox's ring buffer. `report_existing_losses`:
  // drops not yet reported by any reader (the counters' LOSS_REPORTED slot,
  // which every report advances) are reported at the next CheckLosses();
  // false: only drops from now on.
  Status Add(const SandboxContext& sandbox, UniqueFd events_fd, UniqueFd counters_fd,
             bool report_existing_losses = true);
  // Replaces the name/policy/path used for the sandbox's events (after a
  // policy replacement). False if the sandbox is not read here.
  bool Update(const SandboxContext& sandbox);
  void SetAdmit(Admit admit) { admit_ = std::move(admit); }

  // Waits up to timeout_ms for records and consumes everything available.
  // Returns the number of records consumed.
  Result<int> Poll(int timeout_ms);
  // Consumes what is available without waiting.
  Result<int> Drain();
  // Consumes at most max_records (> 0) without waiting; returns how many.
  Result<int> Drain(int max_records);
  // Emits a loss record for every sandbox whose drop counter grew.
  void CheckLosses();

  int epoll_fd() const;
  uint64_t malformed() const { return malformed_; }
  uint64_t delivered() const { return delivered_; }
  uint64_t consumed() const { return consumed_; }   // records taken from the ring buffers
  uint64_t refused() const { return refused_; }     // records Admit said no to

 private:
  struct Source {
    EventReader* reader;
    SandboxContext sandbox;
    UniqueFd events_fd;
    UniqueFd counters_fd;
    uint64_t drops_reported = 0;
  };
  static int OnRecord(void* ctx, void* data, size_t size);

  EventDecoder decoder_;
  Callback callback_;
  Admit admit_;
  ring_buffer* ring_ = nullptr;
  std::vector<std::unique_ptr<Source>> sources_;
  uint64_t malformed_ = 0;
  uint64_t delivered_ = 0;
  uint64_t consumed_ = 0;
  uint64_t refused_ = 0;
  int budget_ = 0;  // > 0: records left before Drain(max_records) stops
};

}  // namespace cordon
