#include "events/reader.h"

#include <cstdio>

#include "abi/cordon_common.h"
#include "loader/sandbox.h"

namespace cordon {

EventReader::EventReader(std::string cgroup_mount, Callback callback)
    : decoder_(std::move(cgroup_mount)), callback_(std::move(callback)) {}

EventReader::~EventReader() {
  if (ring_) ring_buffer__free(ring_);
}

int EventReader::OnRecord(void* ctx, void* data, size_t size) {
  auto* source = static_cast<Source*>(ctx);
  EventReader* self = source->reader;
  auto event = self->decoder_.Decode(data, size, source->sandbox);
  if (!event) {
    self->malformed_++;
    std::fprintf(stderr, "cordon: sandbox %s: %s (record skipped)\n", source->sandbox.name.c_str(),
                 event.error().ToString().c_str());
    return 0;
  }
  self->delivered_++;
  self->callback_(*event);
  return 0;
}

Status EventReader::Add(const SandboxContext& sandbox, UniqueFd events_fd, UniqueFd counters_fd,
                        bool report_existing_losses) {
  auto source = std::make_unique<Source>();
  source->reader = this;
  source->sandbox = sandbox;
  if (!report_existing_losses && counters_fd.valid()) {
    auto sums = ReadCounters(counters_fd.get());
    if (sums) source->drops_reported = (*sums)[CORDON_CNT_EVENTS_DROPPED];
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

Result<int> EventReader::Poll(int timeout_ms) {
  if (!ring_) return 0;
  int n = ring_buffer__poll(ring_, timeout_ms);
  if (n < 0 && n != -EINTR) return Error{"poll ring buffers", -n};
  return n < 0 ? 0 : n;
}

Result<int> EventReader::Drain() {
  if (!ring_) return 0;
  int n = ring_buffer__consume(ring_);
  if (n < 0 && n != -EINTR) return Error{"consume ring buffers", -n};
  return n < 0 ? 0 : n;
}

void EventReader::CheckLosses() {
  for (auto& source : sources_) {
    if (!source->counters_fd.valid()) continue;
    auto sums = ReadCounters(source->counters_fd.get());
    if (!sums) continue;
    uint64_t dropped = (*sums)[CORDON_CNT_EVENTS_DROPPED];
    if (dropped > source->drops_reported) {
      callback_(decoder_.LossRecord(source->sandbox, dropped - source->drops_reported));
      source->drops_reported = dropped;
    }
  }
}

int EventReader::epoll_fd() const { return ring_ ? ring_buffer__epoll_fd(ring_) : -1; }

}  // namespace cordon
