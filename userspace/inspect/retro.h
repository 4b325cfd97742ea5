// Retroactive attach: what a policy does to what already exists when it is
// attached to a cgroup with live processes.
//
// The cgroup hooks judge connect() and sendmsg() from the moment of attach;
// connections opened before it never pass them. ApplyRetroactively finds the
// TCP, UDP and UDP-Lite sockets (IPv4 and IPv6) held by the processes of the
// cgroup subtree, judges each connected one's destination with the same
// two-step LPM lookup the BPF programs make (bpf/lib/egress_match.bpf.h), and
// destroys the ones the policy denies with sock_diag SOCK_DESTROY (the owner
// sees ECONNABORTED; a TCP peer gets a reset). In audit mode nothing is
// destroyed. Regular files the processes hold open are listed: they cannot be
// revoked, but the operator learns what predates the policy. So are the
// environment variables of each process that look like credentials (names
// only, credential.exposed): a running process's environment cannot be taken
// back either. The environments are read by a child process with deadlines
// (inspect/environ.h): a workload cannot stall the check through them.
//
// Not judged (mirroring what the hooks judge after attach): listening and
// unconnected sockets, and inbound TCP connections (accepted ones: their local
// address and port are those of a listening socket in the same network
// namespace), since accept() passes no egress hook.
//
// The core is a library function returning events; callers (cordon attach, the
// agent) decide where they go.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "event.pb.h"
#include "events/decoder.h"
#include "inspect/environ.h"
#include "policy/compiler.h"
#include "policy/egress_match.h"
#include "sys/cgroup.h"
#include "util/result.h"

namespace cordon {

struct RetroOptions {
  size_t max_files_per_event = 1000;  // file.preexisting: paths listed per event; the rest are counted in reason
  size_t max_variables_per_event = 100;  // credential.exposed: names listed per event; the rest are counted in reason
  EnvironLimits environ;
};

struct RetroReport {
  // net.preexisting events (one per destroyed, audited or undestroyable
  // connection), then file.preexisting events (one per process holding
  // regular files open), then credential.exposed events (one per process
  // whose environment holds credential-like variables), in the canonical
  // AuditEvent form of the audit file.
  std::vector<cordon::v1::AuditEvent> events;
  size_t processes = 0;           // processes scanned
  size_t connections = 0;         // connected inet sockets judged
  size_t allowed = 0;             // ... kept: the policy allows them (no event)
  size_t inbound = 0;             // accepted TCP connections, not judged (no event)
  size_t destroyed = 0;
  size_t audited = 0;             // denied, kept because the policy is in audit mode
  size_t destroy_failed = 0;      // denied, SOCK_DESTROY failed (event verdict "destroy-failed")
  size_t processes_with_files = 0;
  size_t environments_read = 0;
  size_t environments_unread = 0;  // the process let no read finish in time, or refused it (reasons in unread_reasons)
  size_t processes_exposed = 0;    // ... with credential-like variables (one credential.exposed each)
  std::vector<std::string> unread_reasons;  // "pid 123: timed out after 1000 ms", at most 10
};

// Scans the processes of `cgroup` and every cgroup below it and applies
// `policy` to their pre-existing connections (see above). `sandbox` names the
// sandbox in events (id, name, policy, cgroup path). A process that exits
// during the scan is skipped silently, so is a socket that closes before it
// can be destroyed. Errors (listing the cgroup, a sock_diag dump failing)
// name the step; connections destroyed before the error stay destroyed.
Result<RetroReport> ApplyRetroactively(const CgroupRef& cgroup, const policy::CompiledPolicy& policy,
                                       const SandboxContext& sandbox, const RetroOptions& options = {});

// Containment (ops::Contain): the sandbox's processes as they are, the inet
// sockets they hold, and every connection of theirs destroyed (outbound and
// inbound alike; listeners and unconnected sockets are kept and listed).
struct SnapshotProcess {
  uint32_t pid = 0, ppid = 0, uid = 0, gid = 0;
  std::string comm, exe, cwd, cgroup_path;       // escaped (util/text.h)
  std::vector<std::string> cmdline;              // escaped
  std::vector<std::pair<int, std::string>> fds;  // fd, escaped target (at most 4096 a process)
};
struct SnapshotSocket {
  uint32_t inode = 0, pid = 0;
  std::string protocol, family, state, local, remote;
  std::string action;  // destroyed | destroy-failed: <why> | kept (...) | gone (...)
};
struct ContainmentSnapshot {
  std::vector<SnapshotProcess> processes;
  std::vector<SnapshotSocket> sockets;
  size_t destroyed = 0, destroy_failed = 0;
  // net.preexisting events (verdict destroyed / destroy-failed), one per connection acted on.
  std::vector<cordon::v1::AuditEvent> events;
};
// `reason` ends each event's reason ("contained by ..."), which begins with
// `what` (the spec.resources.egressBytes cut of cordon run names itself).
Result<ContainmentSnapshot> SnapshotAndDisconnect(const CgroupRef& cgroup, const SandboxContext& sandbox,
                                                  const std::string& reason,
                                                  const std::string& what = "connection of a contained sandbox");

// One line for the operator: what the retroactive check found and did.
std::string RetroSummaryLine(const RetroReport& report);

}  // namespace cordon
