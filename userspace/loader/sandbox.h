// Attaching a compiled policy to a cgroup: load one instance of the BPF
// object for the sandbox, fill its maps, attach and pin. Follows
// prepare -> setup: every kernel object is created and verified before the
// first attach, and a failure half-way detaches what was attached.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "abi/cordon_common.h"
#include "abi/cordon_net.h"
#include "policy/compiler.h"
#include "sys/cgroup.h"
#include "util/fd.h"
#include "util/result.h"

namespace cordon {

// Every sandbox's event ring buffer has this size: the BPF LSM programs reach
// it through a map-in-map whose inner maps must all match.
constexpr uint32_t kRingbufBytes = 256 * 1024;

// A device node the sandbox may open beyond the built-in safe set
// (bpf/net/host.bpf.c): e.g. `cordon run`'s own pty slave, {'c', 136, N}.
struct DeviceRule {
  static constexpr uint32_t kAnyMinor = 0xffffffffu;  // CORDON_DEV_MINOR_ANY
  static constexpr uint32_t kMknod = 1, kRead = 2, kWrite = 4;  // BPF_DEVCG_ACC_*
  char type = 'c';     // 'c' character or 'b' block device
  uint32_t major = 0;
  uint32_t minor = 0;  // or kAnyMinor
  uint32_t access = kRead | kWrite;
};

class NetworkInstancePool;

struct AttachOptions {
  std::string name;                    // sandbox name; default: cgroup directory name
  bool ephemeral = false;              // created by `cordon run`
  bool seccomp_events = false;         // `cordon run` will apply its seccomp filter: report its refusals
  bool landlock_events = false;        // `cordon run` will apply Landlock file rules: report their refusals
  bool landlock_scope_events = false;  // ... and Landlock scoping (signals, abstract unix sockets)
  bool read_only_events = false;       // `cordon run` gives its command read-only mounts: report their EROFS
  // Devices allowed beyond the safe set (at most CORDON_DEV_RULES_MAX); kept
  // for this attach only: a later replacement passes its own.
  std::vector<DeviceRule> allowed_devices;
  // A fresh attach takes a prepared network instance from here when the
  // policy fits (AttachResult::prepared_instance); null: it loads its own.
  NetworkInstancePool* pool = nullptr;
};

struct SandboxInfo {
  uint64_t id = 0;                // sandbox cgroup id
  std::string pin_dir;
  std::string name;
  std::string policy;
  std::string policy_digest;      // "sha256:<hex>", "builtin:default", or "" (attached by an older cordon)
  std::string cgroup_path;        // relative to the cgroup2 mount, as attached
  bool cgroup_alive = true;       // false: the cgroup was removed under us
  uint32_t mode = CORDON_MODE_ENFORCE;
  uint32_t generation = 0;
  bool ephemeral = false;
  bool lsm = false;               // file/exec/family/tamper rules enforced by BPF LSM
  bool landlock = false;          // `cordon run` applied Landlock to the command
  bool seccomp = false;           // `cordon run` applied a seccomp filter to the command
  bool detect = false;            // file/exec rules checked after the fact (no BPF LSM)
  bool detect_kill = false;       // ... and violators are killed
  bool degraded = false;          // attached accepting that some of its policy's controls are not enforced
  std::string Level() const;      // "kernel-lsm", "kernel-cgroup+landlock+seccomp", ...
  uint64_t attached_at_ns = 0;
  uint64_t updated_at_ns = 0;
  // Filled in by ops::Status (ops::OwnerOfRun): the cordon run that made an
  // ephemeral sandbox (0: none), and whether that run has ended without
  // removing it (killed with -9): its policy still holds, nobody owns it.
  int owner_pid = 0;
  bool orphaned = false;
  std::array<uint64_t, CORDON_CNT_MAX> counters{};  // summed over CPUs
  // Containment (`cordon contain`, onViolation: contain): the pinned state;
  // has_state false for a sandbox attached by a cordon without it.
  bool has_state = false;
  cordon_sandbox_state state{};
  bool contained() const { return state.flags & CORDON_STATE_F_CONTAINED; }
  // spec.resources.egressBytes: the sandbox's bytes sent (has_egress false for
  // a sandbox attached by a cordon without the accounting) and the budget of
  // the policy in force (0: none).
  bool has_egress = false;
  cordon_egress_usage egress{};
  uint64_t egress_limit = 0;
  std::string problem;            // non-empty: pinned state is incomplete or foreign
};

struct AttachResult {
  SandboxInfo info;
  bool replaced = false;  // an existing policy was swapped
  uint64_t swap_ns = 0;   // replace: time from the first to the last program swap
  // replace: from the first program swap until the whole policy is in force
  // (the file layer's entry switched too, right after; swap_ns without one)
  uint64_t switch_ns = 0;
  std::vector<std::string> skipped_paths;  // profile paths absent on this host
  bool prepared_instance = false;  // a fresh attach took an instance of AttachOptions::pool
};

// Attaches `policy` to `cgroup`, or atomically replaces the policy of a
// sandbox already attached there (counters and pending events carry over).
Result<AttachResult> AttachSandbox(const CgroupRef& cgroup, const policy::CompiledPolicy& policy,
                                   const AttachOptions& options);

// Instances of the network object loaded ahead of time (programs verified,
// empty maps, nothing attached) for the next fresh AttachSandbox() calls that
// name this pool (AttachOptions::pool), which then only fill and attach one:
// loading is most of an attach's time. A prepared instance takes policies of
// up to kPreparedRuleEntries address and port entries, kPreparedUnixEntries
// unix entries and kPreparedListenEntries listen entries (larger ones load
// their own). Thread-safe: the agent fills its pool from a thread of its own.
// Destroying the pool unloads what no attach took.
constexpr size_t kPreparedInstances = 2;
constexpr uint32_t kPreparedRuleEntries = 1u << 16;
constexpr uint32_t kPreparedUnixEntries = 1u << 12;
constexpr uint32_t kPreparedListenEntries = 1u << 12;  // listen address and port entries
class NetworkInstancePool {
 public:
  NetworkInstancePool();
  ~NetworkInstancePool();
  NetworkInstancePool(const NetworkInstancePool&) = delete;
  NetworkInstancePool& operator=(const NetworkInstancePool&) = delete;

  Result<size_t> Fill();  // loads until kPreparedInstances are ready; how many it loaded
  size_t Ready() const;   // how many are ready

  struct Instances;  // defined in loader/net_object.h
  Instances& instances() { return *instances_; }

 private:
  std::unique_ptr<Instances> instances_;
};

// Bytes sent per destination (bpf/abi/cordon_net.h egress_dests) of the
// sandbox pinned at `pin_dir`, most first.
struct EgressDest {
  cordon_egress_dest_key key;
  uint64_t bytes = 0;
};
Result<std::vector<EgressDest>> ReadEgressDests(const std::string& pin_dir);

// Detaches and unpins everything of the sandbox. NotFound is an error.
Status DetachSandbox(uint64_t sandbox_id);

Result<std::vector<SandboxInfo>> ListSandboxes();
Result<SandboxInfo> GetSandbox(uint64_t sandbox_id);

// The spec.quiet patterns pinned with the sandbox whose pin directory is
// `dir` (bpf/abi/cordon_pins.h, "quiet"), if they are those of `generation`
// (its info's); null when there are none: no pin (attached by an earlier
// cordon), no patterns, or patterns of another generation (a replacement in
// progress: read again when the info's generation changes).
Result<std::shared_ptr<const std::vector<policy::QuietPattern>>> ReadSandboxQuiet(const std::string& dir,
                                                                                  uint32_t generation);

// Clears `clear`, then sets `set` (CORDON_STATE_F_*) in the sandbox's containment
// state, under the pin root's lock, with atomic operations that a program
// containing the sandbox meanwhile does not undo (nor they its change);
// clearing CONTAINED also resets the violation count and trigger. Returns
// the state before the change.
// Where BPF LSM enforces the sandbox's files, its LSM entry's CONTAINED flag
// follows (a failure there, the network state changed, in *lsm_problem).
// With `with_files` false the LSM entry is left as it is (see
// SetSandboxFilesContained).
Result<cordon_sandbox_state> ChangeSandboxState(uint64_t sandbox_id, uint32_t set, uint32_t clear,
                                                std::string* lsm_problem = nullptr, bool with_files = true);
// The BPF LSM entry's CONTAINED flag alone, under the pin root's lock:
// `cordon contain` sets it once the processes are frozen, so that none of
// them sees a file access refused half-way (it would not take that back).
Status SetSandboxFilesContained(uint64_t sandbox_id, bool contained);

// Records extra layers (CORDON_INFO_F_LANDLOCK / _SECCOMP) in the sandbox's
// info, or with `clear` the flags that no longer hold (CORDON_INFO_F_DEGRADED).
Status AddSandboxFlags(uint64_t sandbox_id, uint32_t flags, uint32_t clear = 0);

}  // namespace cordon
