#include "agent/suppression.h"

#include <fcntl.h>
#include <google/protobuf/util/time_util.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "util/fd.h"
#include "util/text.h"

namespace cordon::agent {

void TokenBucket::Configure(double rate, double burst, int64_t now_ns) {
  rate_ = rate;
  burst_ = burst;
  tokens_ = burst;
  last_ns_ = now_ns;
}

bool TokenBucket::Take(int64_t now_ns) {
  if (rate_ <= 0) return true;
  if (now_ns > last_ns_) {
    tokens_ = std::min(burst_, tokens_ + static_cast<double>(now_ns - last_ns_) * rate_ / 1e9);
    last_ns_ = now_ns;
  }
  if (tokens_ < 1) return false;
  tokens_ -= 1;
  return true;
}

void Suppression::Configure(uint64_t rate_per_second, uint64_t burst, int64_t now_ns) {
  limited_ = rate_per_second != 0;
  bucket_.Configure(static_cast<double>(rate_per_second), static_cast<double>(burst), now_ns);
  quiet_bucket_.Configure(static_cast<double>(rate_per_second), static_cast<double>(burst), now_ns);
}

uint64_t Suppression::Resume(uint64_t* slot, int64_t now_ns) {
  if (slot) pending_ = slot;
  if (*pending_) {
    // Counted by an agent that died before writing them: due at once.
    suppressing_ = true;
    last_suppressed_ns_ = last_record_ns_ = now_ns - kSuppressedEveryNs;
  }
  return *pending_;
}

bool Suppression::Admit(int64_t now_ns, bool quiet, uint64_t occurrences) {
  if (!limited_ || (quiet ? quiet_bucket_ : bucket_).Take(now_ns)) return true;
  suppressed_ += occurrences;
  *pending_ += occurrences;
  last_suppressed_ns_ = now_ns;
  if (!suppressing_) last_record_ns_ = now_ns;  // the first record comes a second into suppression
  suppressing_ = true;
  return false;
}

bool Suppression::Due(int64_t now_ns, bool* final) const {
  if (!suppressing_) return false;
  *final = now_ns - last_suppressed_ns_ >= kSuppressionEndNs;
  return *final || (*pending_ && now_ns - last_record_ns_ >= kSuppressedEveryNs);
}

void Suppression::Recorded(bool final, int64_t now_ns) {
  last_record_ns_ = now_ns;
  suppressing_ = !final;
  *pending_ = 0;
}

cordon::v1::AuditEvent SuppressedRecord(const SandboxContext& sandbox, uint64_t count, uint64_t rate_per_second,
                                        uint64_t burst, bool final, int64_t unix_ns) {
  cordon::v1::AuditEvent e;
  *e.mutable_time() = google::protobuf::util::TimeUtil::NanosecondsToTimestamp(unix_ns);
  e.set_sandbox(sandbox.name);
  e.set_cgroup_path(EscapeWorkloadBytes(sandbox.cgroup_path));
  e.set_cgroup_id(sandbox.id);
  e.set_sandbox_cgroup_id(sandbox.id);
  e.set_kind("suppressed");
  e.set_policy(sandbox.policy);
  e.set_policy_digest(sandbox.policy_digest);
  e.set_reason(std::to_string(count) + " events not delivered: over the agent's rate limit of " +
               std::to_string(rate_per_second) + "/s (burst " + std::to_string(burst) + ") for this sandbox" +
               (final ? "; suppression ended" : "; still suppressing"));
  e.mutable_suppressed()->set_count(count);
  e.mutable_suppressed()->set_final(final);
  return e;
}

PendingState::~PendingState() {
  if (slots_) ::munmap(slots_, kSlots * sizeof(Slot));
}

Status PendingState::Open(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!fd.valid()) return SysError("open " + path);
  const off_t size = static_cast<off_t>(kSlots * sizeof(Slot));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0 || (st.st_size != size && ::ftruncate(fd.get(), size) != 0))
    return SysError("size " + path);
  void* p = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) return SysError("map " + path);
  slots_ = static_cast<Slot*>(p);
  return {};
}

uint64_t* PendingState::Claim(uint64_t id) {
  if (!slots_) return nullptr;
  Slot* free_slot = nullptr;
  for (size_t i = 0; i < kSlots; ++i) {
    if (slots_[i].sandbox_id == id) return &slots_[i].pending;
    if (!free_slot && slots_[i].sandbox_id == 0) free_slot = &slots_[i];
  }
  if (!free_slot) return nullptr;
  free_slot->pending = 0;
  free_slot->sandbox_id = id;
  return &free_slot->pending;
}

void PendingState::Release(uint64_t id) {
  if (!slots_) return;
  for (size_t i = 0; i < kSlots; ++i)
    if (slots_[i].sandbox_id == id) slots_[i] = Slot{0, 0};
}

std::vector<PendingState::Slot> PendingState::Used() const {
  std::vector<Slot> out;
  for (size_t i = 0; slots_ && i < kSlots; ++i)
    if (slots_[i].sandbox_id) out.push_back(slots_[i]);
  return out;
}

}  // namespace cordon::agent
