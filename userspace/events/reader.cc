#include "events/reader.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <optional>

#include "abi/cordon_common.h"
#include "abi/cordon_event.h"
#include "abi/cordon_pins.h"
#include "sys/bpffs.h"
#include "sys/counters.h"
#include "util/clock.h"
#include "util/fs.h"
#include "util/text.h"

namespace cordon {
namespace {

constexpr uint32_t kRingBusyBit = 1u << 31;     // BPF_RINGBUF_BUSY_BIT: reserved, not yet committed
constexpr uint32_t kRingDiscardBit = 1u << 30;  // BPF_RINGBUF_DISCARD_BIT
constexpr uint32_t kRingHeaderSize = 8;         // BPF_RINGBUF_HDR_SZ

// The LOSS_REPORTED and SEQ_COMMITTED slots are written by userspace only:
// all of each on CPU 0.
void WriteUserSlot(int counters_fd, uint32_t key, uint64_t value) {
  int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) return;
  std::vector<uint64_t> per_cpu(static_cast<size_t>(ncpu), 0);
  per_cpu[0] = value;
  (void)bpf_map_update_elem(counters_fd, &key, per_cpu.data(), BPF_ANY);
}

void WriteLossWatermark(int counters_fd, uint64_t value) {
  WriteUserSlot(counters_fd, CORDON_CNT_LOSS_REPORTED, value);
}

// One counter summed over CPUs (CheckLosses runs for every sandbox every
// 200 ms in the agent: one lookup, not one per counter).
std::optional<uint64_t> ReadCounter(int counters_fd, uint32_t key) {
  int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) return std::nullopt;
  std::vector<uint64_t> per_cpu(static_cast<size_t>(ncpu));
  if (bpf_map_lookup_elem(counters_fd, &key, per_cpu.data())) return std::nullopt;
  uint64_t sum = 0;
  for (uint64_t v : per_cpu) sum += v;
  return sum;
}

size_t PageSize() { return static_cast<size_t>(::sysconf(_SC_PAGESIZE)); }

}  // namespace

Status EventReader::Source::Map() {
  if (mapped()) return {};
  const int fd = events_fd.get();
  const size_t page = PageSize();
  void* c = ::mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (c == MAP_FAILED) return SysError("map ring buffer of sandbox " + sandbox.name);
  const size_t size = page + 2 * static_cast<size_t>(ring_size);
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(page));
  if (p == MAP_FAILED) {
    Status err = SysError("map ring buffer of sandbox " + sandbox.name);
    ::munmap(c, page);
    return err;
  }
  consumer_pos = static_cast<uint64_t*>(c);
  producer_pos = static_cast<const uint64_t*>(p);
  data_map_size = size;
  data = static_cast<const uint8_t*>(p) + page;
  mask = ring_size - 1;
  // The kernel's consumer position is where the last reader committed.
  cons = __atomic_load_n(consumer_pos, __ATOMIC_ACQUIRE);
  last_active_ns = MonoNs();
  return {};
}

void EventReader::Source::Unmap() {
  if (consumer_pos) ::munmap(consumer_pos, PageSize());
  if (producer_pos) ::munmap(const_cast<uint64_t*>(producer_pos), data_map_size);
  consumer_pos = nullptr;
  producer_pos = nullptr;
  data = nullptr;
}

EventReader::EventReader(std::string cgroup_mount, Callback callback)
    : decoder_(std::move(cgroup_mount)), callback_(std::move(callback)) {}

EventReader::~EventReader() = default;

void EventReader::OnRecord(Source& source, const void* data, size_t size) {
  consumed_++;
  if (Status s = decoder_.DecodeInto(data, size, source.sandbox, &event_); !s.ok()) {
    malformed_++;
    std::fprintf(stderr, "cordon: sandbox %s: %s (record skipped)\n", source.sandbox.name.c_str(),
                 s.error().ToString().c_str());
  } else if (event_.seq() && !source.sequence.Observe(event_.seq())) {
    repeated_++;  // committed by an earlier reader: written out already
  } else {
    Offer();
  }
}

void EventReader::ReportGaps(Source& source) {
  // The producer position loaded after every record read so far
  // (events/identity.h: what was read before it settles gaps below it).
  const uint64_t produced = __atomic_load_n(source.producer_pos, __ATOMIC_ACQUIRE);
  for (const auto& [first, last] : source.sequence.TakeGaps(source.cons, produced)) {
    const uint64_t count = last - first + 1;
    gaps_ += count;
    cordon::v1::AuditEvent loss = decoder_.LossRecord(source.sandbox, count);
    loss.mutable_loss()->set_first_seq(first);
    loss.mutable_loss()->set_last_seq(last);
    loss.set_reason(std::to_string(count) + " events lost: sequence numbers " + std::to_string(first) + " to " +
                    std::to_string(last) + " of the sandbox were never read here");
    callback_(loss);
  }
}

void EventReader::CommitSequence(Source& source) {
  const uint64_t seq = source.sequence.contiguous();
  if (seq == source.seq_committed || !source.counters_fd.valid()) return;
  source.seq_committed = seq;
  WriteUserSlot(source.counters_fd.get(), CORDON_CNT_SEQ_COMMITTED, seq);
}

void EventReader::Offer() {
  if (admit_ && !admit_(event_)) {
    refused_++;
  } else {
    delivered_++;
    callback_(event_);
  }
}

void EventReader::SweepRepeats(Source& source, bool all) {
  if (!source.repeats_fd.valid()) return;
  const int fd = source.repeats_fd.get();
  std::vector<cordon_repeat_key> keys;
  cordon_repeat_key key = {}, next = {};
  const void* prev = nullptr;
  while (keys.size() < 2 * CORDON_REPEATS_MAX && bpf_map_get_next_key(fd, prev, &next) == 0) {
    keys.push_back(next);
    key = next;
    prev = &key;
  }
  if (keys.empty()) return;
  const uint64_t now = static_cast<uint64_t>(NowNs(CLOCK_BOOTTIME));
  decoder_.BeginBatch();
  for (const auto& k : keys) {
    cordon_repeat_value v;
    if (bpf_map_lookup_elem(fd, &k, &v)) continue;
    // Idle: no record and nothing counted for a window. The kernel's next
    // occurrence opens a new window with a record of its own, so an entry
    // taken now is not also carried by a record (barring one racing with
    // the delete itself, within nanoseconds after a window of silence).
    const uint64_t seen = std::max(v.window_ns, v.last_ns);
    const bool idle = now >= seen && now - seen >= CORDON_REPEAT_WINDOW_NS;
    if (!all && !idle) continue;
    // Taken whole, atomically: entries without a count are only forgotten.
    if (bpf_map_lookup_and_delete_elem(fd, &k, &v) || v.count == 0) continue;
    if (v.size > sizeof v.record) v.size = sizeof v.record;
    if (Status st = decoder_.DecodeInto(v.record, v.size, source.sandbox, &event_); !st.ok()) {
      malformed_++;
      std::fprintf(stderr, "cordon: sandbox %s: %s (%llu repeats not recorded)\n", source.sandbox.name.c_str(),
                   st.error().ToString().c_str(), static_cast<unsigned long long>(v.count));
      continue;
    }
    auto* r = event_.mutable_repeats();
    r->set_count(v.count);
    SetTimestamp(decoder_.BootToRealNs(v.first_ns ? v.first_ns : v.window_ns), r->mutable_first());
    SetTimestamp(decoder_.BootToRealNs(v.last_ns), r->mutable_last());
    r->set_pending(true);
    *event_.mutable_time() = r->last();
    Offer();
  }
  decoder_.EndBatch();
}

// As libbpf's ringbuf_process_ring, with a budget and an optional deferred
// commit of the consumer position.
int EventReader::ConsumeRing(Source& source, int budget) {
  const int count = ReadRing(source, budget);
  // After every batch, drained or not: a flood that never lets the ring
  // empty still has its gaps settled (events/identity.h).
  if (source.mapped()) ReportGaps(source);
  return count;
}

int EventReader::ReadRing(Source& source, int budget) {
  if (!source.mapped()) {
    // Unmapped: look first (the ring's poll says whether it holds data).
    struct pollfd pfd = {source.events_fd.get(), POLLIN, 0};
    if (::poll(&pfd, 1, 0) <= 0 || !(pfd.revents & POLLIN)) return 0;
    if (Status s = source.Map(); !s.ok()) {
      std::fprintf(stderr, "cordon: %s\n", s.error().ToString().c_str());
      return 0;
    }
  }
  int count = 0;
  bool more = true;
  while (more) {
    more = false;
    const uint64_t prod = __atomic_load_n(source.producer_pos, __ATOMIC_ACQUIRE);
    while (source.cons < prod) {
      const uint8_t* header = source.data + (source.cons & source.mask);
      const uint32_t len = __atomic_load_n(reinterpret_cast<const uint32_t*>(header), __ATOMIC_ACQUIRE);
      if (len & kRingBusyBit) return count;  // not committed yet: the producer's commit wakes us
      more = true;
      const uint32_t size = len & ~(kRingBusyBit | kRingDiscardBit);
      source.cons += (size + kRingHeaderSize + 7) & ~7ull;
      if (!(len & kRingDiscardBit)) {
        OnRecord(source, header + kRingHeaderSize, size);
        count++;
      }
      source.last_active_ns = -1;  // stamped below, once per call
      if (!defer_commit_) __atomic_store_n(source.consumer_pos, source.cons, __ATOMIC_RELEASE);
      if (budget > 0 && count >= budget) return count;
    }
  }
  return count;
}

void EventReader::Commit() {
  for (auto& source : sources_) {
    // The sequence first: a reader killed before the consumer position moves
    // reads these records again and drops them by number.
    CommitSequence(*source);
    if (source->mapped() && __atomic_load_n(source->consumer_pos, __ATOMIC_RELAXED) != source->cons)
      __atomic_store_n(source->consumer_pos, source->cons, __ATOMIC_RELEASE);
    if (source->watermark_due) {
      source->watermark_due = false;
      WriteLossWatermark(source->counters_fd.get(), source->drops_reported);
    }
  }
}

Result<UniqueFd> LockSandboxEvents(const SandboxContext& sandbox) {
  auto root = SandboxPinRoot();
  if (!root) return root.error();
  const std::string dir = SandboxPinDir(*root, sandbox.id);
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return SysError("open " + dir + " (to read the events of sandbox " + sandbox.name + ")");
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) return fd;
  if (errno != EWOULDBLOCK) return SysError("lock " + dir);
  struct stat st;
  std::string holder = ::fstat(fd.get(), &st) == 0 ? FlockHolder(st) : std::string();
  return Error{"the events of sandbox " + sandbox.name + " are already read by " +
                   (holder.empty() ? std::string("another process") : holder) +
                   " (one reader per ring buffer, held by a lock on " + dir +
                   "): a running agent has them (cordon tail and cordon status reach it through its socket; "
                   "CORDON_AGENT_SOCKET names another one)",
               EWOULDBLOCK};
}

Status EventReader::Add(const SandboxContext& sandbox, UniqueFd events_fd, UniqueFd counters_fd,
                        bool report_existing_losses) {
  auto source = std::make_unique<Source>();
  source->sandbox = sandbox;
  // One consumer per ring buffer: two would each see part of the records
  // (or, with deferred commits, the same records twice).
  auto lock = LockSandboxEvents(sandbox);
  if (!lock) return lock.error();
  source->lock_fd = std::move(*lock);
  if (auto root = SandboxPinRoot()) {
    const std::string pin = SandboxPinDir(*root, sandbox.id) + "/" + CORDON_REPEATS_PIN;
    source->repeats_fd = UniqueFd(bpf_obj_get(pin.c_str()));
    if (!source->repeats_fd.valid() && errno != ENOENT) return SysError("open " + pin);
  }
  if (counters_fd.valid()) {
    auto sums = ReadCounters(counters_fd.get());
    if (sums) {
      uint64_t dropped = (*sums)[CORDON_CNT_EVENTS_DROPPED];
      uint64_t reported = (*sums)[CORDON_CNT_LOSS_REPORTED];
      source->drops_reported = report_existing_losses ? std::min(reported, dropped) : dropped;
      source->seq_committed = (*sums)[CORDON_CNT_SEQ_COMMITTED];
    }
  }
  const int fd = events_fd.get();
  struct bpf_map_info info = {};
  uint32_t len = sizeof info;
  if (bpf_obj_get_info_by_fd(fd, &info, &len)) return SysError("open ring buffer of sandbox " + sandbox.name);
  if (info.type != BPF_MAP_TYPE_RINGBUF || info.max_entries == 0 || (info.max_entries & (info.max_entries - 1)))
    return Error{"open ring buffer of sandbox " + sandbox.name + ": not a ring buffer"};
  source->ring_size = info.max_entries;
  source->sequence.Start(source->seq_committed);
  if (!epoll_fd_.valid()) {
    epoll_fd_ = UniqueFd(::epoll_create1(EPOLL_CLOEXEC));
    if (!epoll_fd_.valid()) return SysError("epoll_create1");
  }
  struct epoll_event ev = {};
  ev.events = EPOLLIN;
  ev.data.ptr = source.get();
  if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, fd, &ev) != 0)
    return SysError("watch ring buffer of sandbox " + sandbox.name);
  source->events_fd = std::move(events_fd);
  source->counters_fd = std::move(counters_fd);
  CORDON_TRY(source->Map());  // unmapped again by UnmapIdle() once idle
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

Result<int> EventReader::Consume(int max_records) {
  decoder_.BeginBatch();
  int total = 0;
  int64_t now = 0;
  for (auto& source : sources_) {
    int left = max_records > 0 ? max_records - total : 0;
    total += ConsumeRing(*source, left);
    if (!defer_commit_) CommitSequence(*source);  // each record was committed as it was delivered
    if (source->last_active_ns < 0) source->last_active_ns = now ? now : (now = MonoNs());
    if (max_records > 0 && total >= max_records) break;
  }
  decoder_.EndBatch();
  return total;
}

Result<int> EventReader::Poll(int timeout_ms) {
  if (sources_.empty()) return 0;
  struct epoll_event evs[16];
  int n = ::epoll_wait(epoll_fd_.get(), evs, 16, timeout_ms);
  if (n < 0 && errno != EINTR) return SysError("poll ring buffers");
  return Consume(0);
}

Result<int> EventReader::Drain() { return sources_.empty() ? 0 : Consume(0); }

Result<int> EventReader::Drain(int max_records) {
  if (sources_.empty()) return 0;
  return Consume(max_records <= 0 ? 0 : max_records);
}

void EventReader::CheckLosses(bool final) {
  for (auto& source : sources_) {
    SweepRepeats(*source, final);
    if (!source->counters_fd.valid()) continue;
    auto counted = ReadCounter(source->counters_fd.get(), CORDON_CNT_EVENTS_DROPPED);
    if (!counted) continue;
    uint64_t dropped = *counted;
    if (dropped > source->drops_reported) {
      // Reported first, then remembered: a reader killed in between reports
      // these again rather than never.
      callback_(decoder_.LossRecord(source->sandbox, dropped - source->drops_reported));
      source->drops_reported = dropped;
      if (defer_commit_) source->watermark_due = true;  // once the record is written out
      else WriteLossWatermark(source->counters_fd.get(), dropped);
    }
  }
}

void EventReader::UnmapIdle(int64_t idle_ns) {
  const int64_t now = MonoNs();
  for (auto& source : sources_) {
    if (!source->mapped() || now - source->last_active_ns < idle_ns) continue;
    if (__atomic_load_n(source->consumer_pos, __ATOMIC_RELAXED) != source->cons) continue;  // not committed
    if (__atomic_load_n(source->producer_pos, __ATOMIC_ACQUIRE) != source->cons) continue;  // records waiting
    source->Unmap();
  }
}

double EventReader::Fill() const {
  double fill = 0;
  for (const auto& source : sources_) {
    if (!source->mapped() || !source->ring_size) continue;
    uint64_t cons = __atomic_load_n(source->consumer_pos, __ATOMIC_ACQUIRE);
    uint64_t prod = __atomic_load_n(source->producer_pos, __ATOMIC_ACQUIRE);
    fill = std::max(fill, prod > cons ? static_cast<double>(prod - cons) / source->ring_size : 0.0);
  }
  return fill;
}

bool EventReader::AnyMapped() const {
  for (const auto& source : sources_)
    if (source->mapped()) return true;
  return false;
}

int EventReader::epoll_fd() const { return epoll_fd_.valid() ? epoll_fd_.get() : -1; }

}  // namespace cordon
