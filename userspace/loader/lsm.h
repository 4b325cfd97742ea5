// The host-wide BPF LSM object: file, exec, socket-family, unix-socket and
// tamper enforcement for every sandbox. Loaded on first use, pinned in
// <bpffs>/cordon/v6/lsm, unloaded when the last sandbox leaves.
//
// Usable only when BOTH hold: "bpf" is in the active LSM list (otherwise the
// programs load and attach but the kernel never calls them — the silent
// non-enforcement trap) AND the programs load (on some kernels every
// trampoline program is refused with EPERM).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "policy/compiler.h"
#include "util/result.h"

namespace cordon {

struct LsmAvailability {
  bool listed = false;    // "bpf" in /sys/kernel/security/lsm
  bool loadable = false;  // the LSM programs load and attach
  std::string lsm_list;   // the kernel's active LSMs, as read
  std::string detail;     // why not usable, for a person (empty when usable)
  bool usable() const { return listed && loadable; }
};

// Reads the LSM list (mounting securityfs if needed) and, when bpf is listed,
// checks that the programs load. Cached for the life of the process.
const LsmAvailability& ProbeLsm();

// Why this kernel refuses BPF LSM programs, as far as the host tells (for
// doctor, where bpf is listed but they do not load): whether other BPF
// trampoline programs (an fentry program) load and attach, the lockdown mode,
// and CONFIG_BPF_LSM where the kernel's configuration is readable.
std::string LsmRefusalCause();

// One policy file rule resolved to the object it names.
struct ResolvedFileRule {
  uint32_t dev = 0;  // kernel encoding (major << 20 | minor)
  uint64_t ino = 0;
  uint32_t rights = 0;
  uint32_t rule = 0;
  std::string path;
};

// stat()s every file rule (following symlinks: a rule names the object).
// Missing explicit paths are errors naming the field; missing profile paths
// are skipped (listed in *skipped).
Result<std::vector<ResolvedFileRule>> ResolveFileRules(const policy::CompiledPolicy& policy,
                                                       std::vector<std::string>* skipped);

// Another layer of a sandbox's policy (its network programs), prepared for
// a replacement and switched back to back with the file layer. AddSandbox
// writes the new file rules first (under a version nothing reads yet), then
// calls Commit(), then switches its own entry (one map update) and only then
// deletes the old rules. If Commit() fails nothing has switched; if its own
// switch fails after Commit(), it calls Rollback().
class SwitchedLayer {
 public:
  virtual ~SwitchedLayer() = default;
  virtual Status Commit() = 0;  // puts this layer's new policy in force
  virtual void Rollback() = 0;  // after Commit(): its old policy again
  // Called by AddSandbox right after its own entry switched (CLOCK_MONOTONIC).
  virtual void FileLayerSwitched(uint64_t monotonic_ns) = 0;
};

// A sandbox's egress tries: the addr_rules and port_rules maps of the
// network object that is (or, for a replacement, is about to be) in force.
// The LSM programs reference them (map-in-map, under the policy version) to
// judge inet sockets created outside the sandbox (lsm/socket_connect,
// lsm/socket_sendmsg), with the same rules as the cgroup programs.
// cfg_fd: the same object's sandbox_cfg, so that BPF LSM's refusals count
// towards its spec.onViolation: contain like the cgroup programs' (-1: not).
struct EgressTries {
  int addr_fd = -1;
  int port_fd = -1;
  int cfg_fd = -1;
};

// Registers (or atomically replaces) a sandbox's LSM policy. events_fd,
// counters_fd, seq_fd and state_fd are the sandbox's ring buffer, counters,
// record sequence counter and containment state (-1: none), shared with its
// network programs: its LSM checks refuse as soon as its state says
// contained. `with`: see SwitchedLayer.
Status LsmAddSandbox(uint64_t sandbox_id, uint32_t cgroup_level, const policy::CompiledPolicy& policy,
                     const std::vector<ResolvedFileRule>& rules, int events_fd, int counters_fd, int seq_fd,
                     int state_fd,
                     const EgressTries& egress, SwitchedLayer* with = nullptr);

// Whether the BPF LSM object (loaded, or the one this cordon would load)
// judges inet sockets created outside a sandbox. False only when an object
// pinned by an earlier cordon of this layout, without those programs, is
// still in force (until the last sandbox leaves and it is unloaded).
bool LsmJudgesForeignSockets();
// A note for `cordon attach` when !LsmJudgesForeignSockets(), else empty.
std::string ForeignSocketsNote();

// Detect mode (kernels without usable BPF LSM, `cordon attach`): the same
// rules checked after the fact by a tracepoint at system call exit; verdict
// "detected", and SIGKILL before the task returns with onViolation: kill.
// extra_flags: CORDON_LSM_F_SECCOMP to report the refusals of `cordon run`'s seccomp filter.
// state_fd, cfg_fd: the sandbox's containment state and its network object's
// sandbox_cfg (-1: none): the refusals this object reports count towards
// spec.onViolation: contain there.
Status DetectAddSandbox(uint64_t sandbox_id, uint32_t cgroup_level, const policy::CompiledPolicy& policy,
                        const std::vector<ResolvedFileRule>& rules, int events_fd, int counters_fd, int seq_fd,
                        int state_fd, int cfg_fd, uint32_t extra_flags = 0, SwitchedLayer* with = nullptr);

// Whether the detect-mode program loads here (*detail says why not).
bool DetectLoadable(std::string* detail);

// Removes a sandbox from the LSM and detect objects; unloads each when no
// sandbox is left in it.
// Not registered is not an error.
Status LsmRemoveSandbox(uint64_t sandbox_id);

// Sets or clears CORDON_LSM_F_CONTAINED in the sandbox's BPF LSM entry (one
// hash update): every path check of its tasks refuses while it is set. Not
// registered with BPF LSM: nothing to do. (The caller holds the pin root's
// lock, so no replacement of the entry races with it.)
Status LsmSetContained(uint64_t sandbox_id, bool contained);

// Credential files (spec.credentials, deliver: file), guarded by BPF LSM
// (credential.read): each file's inode is marked with its sandbox in the LSM
// object's cred_owners (an inode storage map: the mark dies with the inode),
// and lsm/file_open refuses every task outside that sandbox but unconfined
// root (EPERM).
// Whether credential files are guarded here: BPF LSM usable, and the object
// in force (or the one this cordon would load) has the guard.
bool LsmGuardsCredentials();
// Marks the file open at `fd` (an O_PATH descriptor will do) as a credential
// of `sandbox_id`. false: no BPF LSM object with the guard is in force
// (nothing done; not an error).
Result<bool> LsmGuardCredential(int fd, uint64_t sandbox_id);
// The sandbox the file open at `fd` is marked for, 0 when none (or no object
// with the guard is in force).
uint64_t LsmCredentialOwner(int fd);

// Whether the sandbox is registered with the (loaded) LSM object.
bool LsmHasSandbox(uint64_t sandbox_id);

}  // namespace cordon
