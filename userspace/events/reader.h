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

  EventReader(std::string cgroup_mount, Callback callback);
  ~EventReader();
  EventReader(const EventReader&) = delete;
  EventReader& operator=(const EventReader&) = delete;

  // Starts consuming the sandbox's ring buffer. `report_existing_losses`:
  // a drop count already present is reported at the next CheckLosses().
  Status Add(const SandboxContext& sandbox, UniqueFd events_fd, UniqueFd counters_fd,
             bool report_existing_losses = true);

  // Waits up to timeout_ms for records and consumes everything available.
  // Returns the number of records consumed.
  Result<int> Poll(int timeout_ms);
  // Consumes what is available without waiting.
  Result<int> Drain();
  // Emits a loss record for every sandbox whose drop counter grew.
  void CheckLosses();

  int epoll_fd() const;
  uint64_t malformed() const { return malformed_; }
  uint64_t delivered() const { return delivered_; }

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
  ring_buffer* ring_ = nullptr;
  std::vector<std::unique_ptr<Source>> sources_;
  uint64_t malformed_ = 0;
  uint64_t delivered_ = 0;
};

}  // namespace cordon
