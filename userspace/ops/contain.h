// Containment (issue 18): `cordon contain` and `cordon release`, done
// directly (the CLI without an agent, and the agent's handlers, call these).
//
// Contain: the sandbox's pinned state says "contained" (one map write: every
// program of the sandbox refuses every operation from then on, its policy
// staying loaded underneath), its processes are frozen (cgroup.freeze), every
// connection they hold is destroyed (sock_diag), the evidence is written (one
// JSON document next to the audit file, 0600 root), and with `kill` every
// process is killed (cgroup.kill) after that. Release clears the state (the
// policy that was in force is in force again, exactly: it never left) and
// thaws the processes. Both return the event that records them
// (sandbox.contained, sandbox.released); the caller delivers it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "event.pb.h"
#include "loader/sandbox.h"

namespace cordon::ops {

struct ContainRequest {
  uint64_t sandbox_id = 0;
  bool kill = false;
  std::string reason;      // the operator's words (--reason)
  std::string by;          // who asked (Requester())
  std::string via;         // cli | agent
  std::string audit_path;  // the audit file: the evidence goes next to it, its tail gives the last events ("" none)
  size_t last_events = 100;
  // Called once the sandbox is contained and frozen, before the evidence is
  // taken: the agent delivers what the sandbox's ring buffer holds, so that
  // the audit file has the sandbox's last events.
  std::function<void()> before_evidence;
  // How long to wait for another contain or release of the sandbox (they
  // hold its containment lock from start to end): 0 gives up at once with
  // `busy` (the agent's main loop tries again later).
  int lock_wait_ms = 10000;
};

struct ContainOutcome {
  std::string error;  // non-empty: nothing was contained (or, after "contained, but", only partly)
  std::string name;
  uint64_t sandbox_id = 0;
  std::string evidence_path;
  std::vector<std::string> notes;
  bool partial = false;  // contained, but a step failed (a note says which: freeze, listing, evidence, kill)
  bool busy = false;     // lock_wait_ms 0 and another contain or release holds the sandbox: nothing done
  // net.preexisting events of the connections destroyed, then sandbox.contained.
  std::vector<cordon::v1::AuditEvent> events;
};

struct ReleaseContainmentRequest {
  uint64_t sandbox_id = 0;
  std::string reason;
  std::string by;
  std::string via;
};

struct ReleaseContainmentOutcome {
  std::string error;
  std::string name;
  uint64_t sandbox_id = 0;
  std::vector<std::string> notes;
  bool partial = false;                        // released, but its processes could not be thawed (a note says why)
  std::vector<cordon::v1::AuditEvent> events;  // sandbox.released
};

ContainOutcome Contain(const ContainRequest& request);
ReleaseContainmentOutcome ReleaseContainment(const ReleaseContainmentRequest& request);

// Who a process is, for Containment.by: "uid 0 (root), login uid 1000
// (alice), pid 4242 (cordon)" (the login uid where the kernel keeps one:
// the person behind sudo).
std::string Requester(pid_t pid, uid_t uid);

// The last `n` events of sandbox `sandbox_id` in the audit file `path`
// (its last 16 MiB are read), oldest first; *source says what was read.
std::vector<cordon::v1::AuditEvent> LastEventsOf(const std::string& path, uint64_t sandbox_id, size_t n,
                                                 std::string* source);

}  // namespace cordon::ops
