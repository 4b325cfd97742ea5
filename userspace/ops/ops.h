// The sandbox use cases (issue #13): attach, update, detach, status, done
// directly with the loader. They take a plain request and return an outcome;
// they know nothing of sockets, terminals or control frames. The CLI renders
// an outcome (cli/sandboxes.h picks whether it comes from here or from the
// agent); the agent's handlers call these and send the outcome back.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "event.pb.h"
#include "loader/sandbox.h"
#include "ops/credentials.h"
#include "policy/compiler.h"
#include "sys/block_device.h"
#include "sys/cgroup.h"
#include "sys/cgroup_limits.h"

namespace cordon::ops {

// Whose words the degraded-enforcement refusal uses: the CLI names its flag
// and `cordon doctor`, the agent its request's field.
enum class Wording { kAgent, kCli };

struct AttachRequest {
  std::string cgroup;       // absolute or relative to the cgroup2 mount
  uint64_t sandbox_id = 0;  // update: the sandbox's cgroup id, when the caller knows it
  std::string policy_text;  // empty: the built-in default
  std::string policy_file;  // names the policy in diagnostics ("<policy>" when empty)
  // Already compiled by the caller (mode override applied): used instead of
  // policy_text and mode.
  std::optional<policy::CompiledPolicy> compiled;
  // Said first among the outcome's notes (the agent's, from compiling it).
  std::vector<std::string> notes;
  std::string mode;  // "", "enforce" or "audit": overrides the policy's mode
  std::string name;  // attach only; default: the cgroup's directory name
  bool allow_degraded = false;
  Wording wording = Wording::kAgent;
  NetworkInstancePool* pool = nullptr;  // see AttachOptions::pool
  // Called right after the kernel attached, before the notes and the
  // retroactive check: the notes it returns come first.
  std::function<std::vector<std::string>(const AttachResult&, const CgroupRef&)> after_attach;
  // spec.credentials of a fresh attach (README "Credentials"): issued before
  // the programs attach. The agent holds them (AttachOutcome::credentials:
  // it refreshes, expires and revokes them); else (cordon attach without an
  // agent) they are released: issued once, ended by a sweep or detach.
  bool hold_credentials = false;
  // Through the agent: it watches the sandbox's wallTime and warnAt (agent/adoption.cc).
  bool agent_watches = false;
  // Through the agent: it runs cordon's resolver for the sandbox's name rules
  // (agent/adoption.cc ServeNames); otherwise a policy with one is refused.
  bool names_served = false;
  OidcContext oidc;  // issuer and keys of oidc credentials (subject and policy filled in here)
};

struct AttachOutcome {
  std::string error;  // non-empty: failed, nothing attached (or, through the agent, maybe)
  uint64_t sandbox_id = 0;
  std::string name;
  std::string cgroup;  // absolute path
  std::string policy;
  std::string mode;  // "enforce" or "audit"
  bool replaced = false;
  uint64_t swap_ns = 0;
  std::vector<std::string> notes;  // controls not enforced here, skipped paths, ...
  // The retroactive check: its events and summary line, or its error.
  std::vector<cordon::v1::AuditEvent> retro_events;
  std::string retro_summary;
  uint64_t retro_destroy_failed = 0;
  std::string retro_error;
  // Direct only: for the agent's log and instance preparation.
  bool prepared_instance = false;
  int64_t attach_ns = 0;  // AttachSandbox itself
  int64_t after_ns = 0;   // after_attach and the retroactive check
  // spec.credentials: their events (issued; on failure issue_failed and
  // revoked: also when `error` is set), never their values; and, when the
  // request held them, the credentials themselves.
  std::vector<cordon::v1::AuditEvent> credential_events;
  std::shared_ptr<SandboxCredentials> credentials;
};

struct DetachRequest {
  uint64_t sandbox_id = 0;
};

// The platform's resource limits recorded for a cgroup given to attach
// (put back when a replacement drops a limit): forgotten once the cgroup is gone.
void ForgetPlatformLimits(uint64_t cgroup_id);
// Detach: writes back the recorded platform values of cgroup `cgroup_id`
// (at `cgroup_path` below the cgroup2 mount); what was put back, or why not.
std::vector<std::string> PutBackPlatformLimits(uint64_t cgroup_id, const std::string& cgroup_path);

struct DetachOutcome {
  std::string error;
  bool detached = false;
  // A cordon run's sandbox whose run has ended or cannot be found
  // (RunOwner): what was left in its cgroup was killed first, and the cgroup
  // removed; its path. (A running run's sandbox with processes in it is
  // refused: detaching it would set its command free.)
  std::string removed_cgroup;
  std::optional<uint64_t> drained;  // through the agent: the events it delivered before detaching
  // An attached sandbox's credentials, removed and revoked once it is
  // detached: their events; or why they were not (they stay for a sweep).
  std::vector<cordon::v1::AuditEvent> credential_events;
  std::string credential_error;
  // The resource limits put back as the platform had them before the attach
  // ("pids.max: ... the platform's '8' is back"), or why they were not.
  std::vector<std::string> limit_notes;
};

struct StatusOutcome {
  std::string error;
  std::vector<SandboxInfo> sandboxes;  // with owner_pid and orphaned filled in
  // spec.credentials per sandbox id (from the credential store's states):
  // names, fingerprints, expiry; never values.
  std::map<uint64_t, std::vector<CredentialStatus>> credentials;
};

// The explicit spec.files paths this host lacks (README "File rules"); the
// same for policy check, run, attach and update. A missing path the policy
// lets the task write is an error: outputs are explicit, and cordon never
// creates them. A missing read or exec path is a warning, and its rule is
// marked not required (skipped as absent profile paths are): it grants
// nothing, and a file made there after the sandbox starts is not granted
// either, since rules are resolved when it starts. Each line starts with the
// entry's file:line:column and field. Name rules (spec.network.egress[].host)
// are errors too (their first), unless `names_served`: the caller runs
// cordon's resolver for the sandbox (cordon run, ops/name_service.h).
struct HostPathCheck {
  std::vector<std::string> errors, warnings;
};
HostPathCheck CheckHostPaths(policy::CompiledPolicy* policy, bool names_served = false);
// errors joined for one error message: the first, then the rest indented.
std::string HostPathErrors(const HostPathCheck& check);

// "enforce" / "audit" into *mode; "" leaves it. False for anything else.
bool ParseMode(const std::string& mode, uint32_t* out);
// "mode must be enforce or audit, not '<mode>'"
std::string BadModeError(const std::string& mode);
// Parses and compiles policy text (the default when empty) and applies the
// mode override; false with the diagnostics and "policy F rejected (N
// errors); nothing attached" in *error.
bool CompilePolicyText(const std::string& text, const std::string& file, const std::string& mode,
                       policy::CompiledPolicy* out, std::string* error);
// The refusal when the kernel cannot enforce `missing` and degraded
// enforcement was not allowed; `detail` is the LSM probe's (CLI wording only).
// For an update (`update`) it says that the sandbox keeps its policy.
std::string DegradedError(const std::vector<std::string>& missing, const std::string& detail, Wording wording,
                          bool update = false);

// spec.resources (ops/resources.cc). The cgroup v2 limit values of a policy;
// the limits set but not enforced ("resource limit pids.max (<reason>)", also
// the ones not implemented: disk for attach; and wallTime and warnAt
// (of memory and pids) but for `cordon run` (`for_run`: its own clock and
// loop watch them) and an attach through the agent (`agent`: it watches
// them)), as
// DegradedError lists them; and one note line per limit saying what applies.
// ioWriteBytesPerSecond is one io.max value per whole disk in `io`
// (IoWriteDevices of the policy): none without them.
std::vector<CgroupLimitValue> CgroupLimitsOf(const policy::ResourceLimits& limits, const WriteDevices& io = {});
// The block devices the policy lets its sandbox write to: those of its
// spec.files write and create paths (cordon run's scratch rules included),
// of every mount when files are not restricted. Empty without
// ioWriteBytesPerSecond (nothing is resolved then).
WriteDevices IoWriteDevices(const policy::CompiledPolicy& policy);
// "resources: ioWriteBytesPerSecond 2Mi: not applicable to /tmp (tmpfs at
// /tmp has no block device)", and a line when no write path is on one.
std::vector<std::string> IoWriteNotes(const policy::ResourceLimits& limits, const WriteDevices& io);
std::vector<std::string> UnenforcedLimits(const policy::ResourceLimits& limits,
                                          const std::vector<CgroupLimitOutcome>& outcomes, bool for_run = false,
                                          bool agent = false);
std::vector<std::string> LimitNotes(const policy::ResourceLimits& limits,
                                    const std::vector<CgroupLimitOutcome>& outcomes, bool agent = false);
// spec.resources.egressBytes of a sandbox, as `cordon status` shows it: "N
// bytes sent (P packets) of 1Mi ..." ("" for a sandbox without the
// accounting), and as JSON {"bytes","packets","droppedBytes",
// "droppedPackets","limit" (0: none),"destinations":[{"destination":
// "127.0.0.1:80/tcp","bytes"}] (the `top` most, most first)} or null.
std::string EgressText(const SandboxInfo& s);
std::string EgressJson(const SandboxInfo& s, size_t top);

// Attach applies spec.resources before the BPF programs (the stricter of the
// cgroup's own value and the policy's; Update: the new policy's), counts a
// limit it cannot enforce as degraded enforcement, and restores the files if
// the attach fails or is refused.
AttachOutcome Attach(const AttachRequest& request);
// Replaces the policy of a sandbox already attached to request.cgroup.
AttachOutcome Update(const AttachRequest& request);
DetachOutcome Detach(const DetachRequest& request);
StatusOutcome Status();

}  // namespace cordon::ops
