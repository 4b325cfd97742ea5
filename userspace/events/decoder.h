// Ring-buffer records (bpf/abi/cordon_event.h) -> AuditEvent protobufs.
// Records are validated: one of the wrong size for its declared layout, or
// with unknown enum values, is rejected with an error, never misread. Their
// text and wire encodings: events/json_line.h, events/wire.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "event.pb.h"
#include "policy/quiet.h"
#include "util/result.h"

namespace cordon {

// Wall-clock nanoseconds as a protobuf Timestamp (nanos in [0, 1e9)).
void SetTimestamp(int64_t ns, google::protobuf::Timestamp* ts);

struct SandboxContext {
  uint64_t id = 0;
  std::string name;
  std::string policy;
  std::string cgroup_path;  // of the sandbox root, relative to the cgroup2 mount
  // The digest of the policy in force (SandboxInfo::policy_digest), carried
  // by every event; like the quiet patterns below, an event that happened
  // before a replacement carries the digest of the policy before.
  std::string policy_digest = {};
  std::string previous_policy_digest = {};
  // The policy's spec.quiet patterns (null: none): a matching event is
  // decoded with quiet set. After a policy replacement at quiet_since_ns
  // (CLOCK_REALTIME; 0: none seen), an event that happened before it is
  // judged by the patterns of the policy before (previous_quiet).
  using QuietPatterns = std::shared_ptr<const std::vector<policy::QuietPattern>>;
  QuietPatterns quiet = nullptr;
  QuietPatterns previous_quiet = nullptr;
  int64_t quiet_since_ns = 0;
  void Replaced(QuietPatterns patterns, int64_t since_ns, std::string digest) {
    previous_quiet = std::move(quiet);
    quiet = std::move(patterns);
    quiet_since_ns = since_ns;
    previous_policy_digest = std::move(policy_digest);
    policy_digest = std::move(digest);
  }
  bool Before(int64_t at_ns) const { return quiet_since_ns && at_ns < quiet_since_ns; }
};

// How many occurrences an event stands for: 1, plus the repeats the kernel
// counted instead of recording them; only those when the record is a pending
// count taken by the reader (Repeats.pending). Status, metrics, summaries
// and the rate limit count with this.
inline uint64_t Occurrences(const cordon::v1::AuditEvent& e) {
  if (!e.has_repeats()) return 1;
  return e.repeats().pending() ? e.repeats().count() : 1 + e.repeats().count();
}

class EventDecoder {
 public:
  explicit EventDecoder(std::string cgroup_mount) : cgroup_mount_(std::move(cgroup_mount)) {}

  Result<cordon::v1::AuditEvent> Decode(const void* data, size_t size, const SandboxContext& sandbox);
  // The same into *out (cleared first; reusing one message saves its
  // allocations). On error *out is unspecified.
  Status DecodeInto(const void* data, size_t size, const SandboxContext& sandbox, cordon::v1::AuditEvent* out);

  // A batch: records consumed together (one ring-buffer drain). Within it,
  // each process's exe (/proc/<pid>/exe) is read once per (pid, comm): as if
  // the whole batch had been consumed at its start. Outside a batch every
  // record reads it afresh.
  void BeginBatch();
  void EndBatch();

  // A record stating that `dropped` events of this sandbox were lost (the
  // kernel could not reserve ring-buffer space for them).
  cordon::v1::AuditEvent LossRecord(const SandboxContext& sandbox, uint64_t dropped) const;

  // A boot-clock time of a record (bpf_ktime_get_boot_ns) as wall-clock ns,
  // with the boot's one offset (BootClockOffsetNs, events/identity.h).
  int64_t BootToRealNs(uint64_t boot_ns) const;

 private:
  const std::string& CgroupPath(uint64_t cgroup_id, const SandboxContext& sandbox);

  const std::string& Exe(uint32_t pid, const char (&comm)[16]);

  struct ExeEntry {
    char comm[16];
    std::string exe;  // "" if the process was gone
  };

  std::string cgroup_mount_;
  std::unordered_map<uint64_t, std::string> cgroup_paths_;
  std::string root_raw_, root_escaped_;  // the sandbox root's path, escaped once
  bool batch_ = false;
  std::unordered_map<uint32_t, ExeEntry> exes_;  // this batch's, by pid (bounded)
  std::string exe_scratch_;
};

// Names used in events.
std::string KindName(uint32_t kind);
// How the reason of a link or rename refused because the new name would
// gain rights begins (CORDON_REASON_LINK_GAIN; cordon regress tells it from
// a directory's refusal by it).
inline constexpr char kLinkGainReason[] = "the new name would have more rights than the old";
std::string ProtocolName(uint32_t protocol);
std::string SocketFamilyName(uint32_t family);
std::string SocketTypeName(uint32_t type);
std::string RightsString(uint32_t rights);  // "read,write,create,exec,map_exec"

}  // namespace cordon
