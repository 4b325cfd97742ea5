#include "events/reader.h"

#include <bpf/bpf.h>

#include <cstdio>

#include "abi/cordon_common.h"
#include "loader/sandbox.h"

namespace cordon {
namespace {

// Returned by OnRecord when Drain(max_records) has its records: libbpf stops
// consuming after that record (it is consumed) and returns this error.
constexpr int kBudgetSpent = -ECANCELED;

// The LOSS_REPORTED slot is written by userspace only: all of it on CPU 0.
void WriteLossWatermark(int counters_fd, uint64_t value) {
  int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) return;
  std::vector<uint64_t> per_cpu(static_cast<size_t>(ncpu), 0);
  per_cpu[0] = value;
  uint32_t key = CORDON_CNT_LOSS_REPORTED;
  (void)bpf_map_update_elem(counters_fd, &key, per_cpu.data(), BPF_ANY);
}

}  // namespace

EventReader::EventReader(std::string cgroup_mount, Callback callback)
    : decoder_(std::move(cgroup_mount)), callback_(std::move(callback)) {}

EventReader::~EventReader() {
  if (ring_) ring_buffer__free(ring_);
}

int EventReader::OnRecord(void* ctx, void* data, size_t size) {
  auto* source = static_cast<Source*>(ctx);
  EventReader* self = source->reader;
  self->consumed_++;
  if (self->admit_ && !self->admit_()) {
    self->refused_++;
  } else if (auto event = self->decoder_.Decode(data, size, source->sandbox); !event) {
    self->malformed_++;
    std::fprintf(stderr, "cordon: sandbox %s: %s (record skipped)\n", source->sandbox.name.c_str(),
                 event.error().ToString().c_str());
  } else {
    self->delivered_++;
    self->callback_(*event);
  }
  if (self->budget_ > 0 && --self->budget_ == 0) return kBudgetSpent;
  return 0;
}

Status EventReader::Add(const SandboxContext& sandbox, UniqueFd events_fd, UniqueFd counters_fd,
                        bool report_existing_losses) {
  auto source = std::make_unique<Source>();
  source->reader = this;
  source->sandbox = sandbox;
  if (counters_fd.valid()) {
    auto sums = ReadCounters(counters_fd.get());
    if (sums) {
      uint64_t dropped = (*sums)[CORDON_CNT_EVENTS_DROPPED];
      uint64_t reported = (*sums)[CORDON_CNT_LOSS_REPORTED];
      source->drops_reported = report_existing_losses ? std::min(reported, dropped) : dropped;
    }
  }
  source->events_fd = std::move(events_fd);
  source->counters_fd = std::move(counters_fd);
  int fd = source->events_fd.get();
  if (!ring_) {
    ring_ = ring_buffer__new(fd, OnRecord, source.get(), nullptr);
    if (!ring_) return SysError("open ring buffer of sandbox " + sandbox.name);
  } else if (int err = ring_buffer__add(ring_, fd, OnRecord, source.get())) {
    return Error{"open ring buffer of sandbox " + sandbox.name, -err};
  }
  sources_.push_back(std::move(source));
  return {};
}

bool EventReader::Update(const SandboxContext& sandbox) {
  for (auto& source : sources_) {
    if (source->sandbox.id != sandbox.id) continue;
    source->sandbox = sandbox;
    return true;
  }
  return false;
}

Result<int> EventReader::Poll(int timeout_ms) {
  if (!ring_) return 0;
  budget_ = 0;
  int n = ring_buffer__poll(ring_, timeout_ms);
  if (n < 0 && n != -EINTR) return Error{"poll ring buffers", -n};
  return n < 0 ? 0 : n;
}

Result<int> EventReader::Drain() {
  if (!ring_) return 0;
  budget_ = 0;
  int n = ring_buffer__consume(ring_);
  if (n < 0 && n != -EINTR) return Error{"consume ring buffers", -n};
  return n < 0 ? 0 : n;
}

Result<int> EventReader::Drain(int max_records) {
  if (!ring_) return 0;
  if (max_records <= 0) return Drain();
  uint64_t before = consumed_;
  budget_ = max_records;
  int n = ring_buffer__consume(ring_);
  budget_ = 0;
  if (n < 0 && n != kBudgetSpent && n != -EINTR) return Error{"consume ring buffers", -n};
  return static_cast<int>(consumed_ - before);
}

void EventReader::CheckLosses() {
  for (auto& source : sources_) {
    if (!source->counters_fd.valid()) continue;
    auto sums = ReadCounters(source->counters_fd.get());
    if (!sums) continue;
    uint64_t dropped = (*sums)[CORDON_CNT_EVENTS_DROPPED];
    if (dropped > source->drops_reported) {
      // Reported first, then remembered: a reader killed in between reports
      // these again rather than never.
      callback_(decoder_.LossRecord(source->sandbox, dropped - source->drops_reported));
      source->drops_reported = dropped;
      WriteLossWatermark(source->counters_fd.get(), dropped);
    }
  }
}

int EventReader::epoll_fd() const { return ring_ ? ring_buffer__epoll_fd(ring_) : -1; }

}  // namespace cordon
