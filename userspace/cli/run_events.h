// `cordon run`'s events: to its audit log and its summary, from the agent
// (when one adopted the sandbox) or read from the sandbox's ring buffer
// directly; and the sandbox's removal at the end, by the agent or here.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_set>

#include "agent/control.h"
#include "cli/commands.h"
#include "events/reader.h"
#include "events/sink.h"
#include "ops/ephemeral.h"
#include "ops/resource_watch.h"
#include "util/result.h"

namespace cordon::cli {

// cordon run's exit status when a limit of spec.resources ended the command
// (README "Resource limits"); otherwise the command's own.
constexpr int kExitWallTime = 124;     // wallTime reached (as timeout(1))
constexpr int kExitMemoryLimit = 125;  // the OOM killer killed the command at memory.max
// --fail-on-violation: the command succeeded, but something was refused or
// reported (or events were lost, so that nothing can be said).
constexpr int kExitViolations = 123;
constexpr int kWallTimeGraceSeconds = 5;  // SIGTERM at wallTime, SIGKILL this much later

struct RunSummary {
  std::map<std::string, uint64_t> by_kind;
  // By verdict: denied (refused), audited (would have been refused), detected
  // (it happened, seen afterwards), killed (it happened, then the task was killed).
  uint64_t denied = 0;
  uint64_t audited = 0;
  uint64_t detected = 0;
  uint64_t killed = 0;
  uint64_t noted = 0;  // credential.* records (not violations)
  uint64_t Violations() const { return denied + audited + detected + killed; }
  // Expected events (AuditEvent.quiet: the policy's spec.quiet), by kind:
  // recorded, not violations (not in the counts above).
  std::map<std::string, uint64_t> quiet_by_kind;
  uint64_t Quiet() const;
  uint64_t lost = 0;
  uint64_t suppressed = 0;    // held back by the agent's rate limit (its "suppressed" records)
  uint64_t not_received = 0;  // the agent had them but this run fell behind (its sinks have them)
};

// The summary's text (without "cordon: " and the audit log's path), e.g.
// "2 violations (2 denied, 0 audited: net.connect x2)", and expected events
// apart: "no violations; 3 expected (spec.quiet: file.exec x2 net.connect x1)".
std::string SummaryLine(const RunSummary& summary, bool colour = false);

// The sandbox's events: to the audit log and the summary, from the agent
// (when one adopted the sandbox) or read from the ring buffer directly.
class RunEvents {
 public:
  // Events go to `sink` (not owned); `quiet`: no notes.
  RunEvents(const ops::EphemeralSandbox& sandbox, std::string name, std::string policy_name, std::string policy_digest,
            AuditSink* sink, bool quiet);

  // Also: at the resource.egress max record (spec.resources.egressBytes
  // reached), the sandbox's connections are destroyed (sock_diag, as
  // containment does; their net.preexisting records go to the sink), once.
  void OnEvent(const cordon::v1::AuditEvent& event);
  // An event this run made itself (resource.*, credential.*): the sandbox's names and ids
  // added, then as OnEvent.
  void OnOwnEvent(cordon::v1::AuditEvent event);
  // This run reads the ring buffer itself only without an agent (or once the
  // agent went away): a ring buffer has one reader, and the lock each reader
  // holds (LockSandboxEvents) refuses a second.
  Status ReadDirectly();
  // A ring buffer has one consumer. With an agent running, it is the agent:
  // it adopts this sandbox now (before the command exists), streams its
  // events here as a tail (and to its own sinks), and at the end delivers
  // the rest and detaches. Without one, this run reads the ring buffer itself.
  // `use_agent` false: this run reads the ring buffer itself even when an
  // agent runs (cordon learn: the agent's rate limit would hold events back).
  Status Connect(bool use_agent = true);
  // Frames waiting from the agent; false when it went away (then this run
  // reads the ring buffer itself from that point on).
  bool ReadAgent(int timeout_ms);
  // What the ring buffer holds, when this run reads it.
  // final: the command ended; every count of repeats the kernel holds is taken.
  void Drain(bool final = false);
  int reader_fd() const { return reader_.epoll_fd(); }

  RunSummary summary;
  Status sink_status;
  std::optional<agent::AgentClient> agent_link;
  // While the agent watches this sandbox's resources: its resource events
  // are taken as covered here (ResourceWatch::Covered).
  ops::ResourceWatch* covered = nullptr;
  bool release_answered = false, agent_detached = false;

 private:
  void CutConnections();  // see OnEvent
  const ops::EphemeralSandbox* sandbox_;
  bool egress_cut_ = false;
  AuditSink* sink_;
  bool quiet_;
  uint64_t sandbox_id_;
  std::string name_;
  std::string policy_name_;
  std::string policy_digest_;
  std::string relative_;
  EventReader reader_;
  bool reading_ = false;
  // Ids seen (AuditEvent.id): a record delivered twice (an agent killed
  // between writing and committing it) is counted and written once.
  std::unordered_set<std::string> ids_;
};

// `cordon run` for another command (cordon learn): the same run, its
// events read here and never through the agent (events_directly), and its
// summary handed back.
struct RunHooks {
  bool events_directly = false;
  RunSummary* summary = nullptr;  // set at the end (when the command ran)
  bool* ran = nullptr;            // set true when the command ran (its status is the command's)
  // cordon regress run: the policy's spec.credentials are dropped, so no
  // issue or revoke program runs (they run as root on the host, and a case
  // directory is data a CI run reads, not code it should execute).
  bool without_credentials = false;
};
int RunCommandWith(const Args& args, const RunHooks& hooks);

// The sandbox removed once the command ended: leftovers killed first, then
// detached (by the agent, when it adopted the sandbox). True when clean.
bool FinishSandbox(ops::EphemeralSandbox* sandbox, RunEvents* events);

// sandbox->Cleanup(), printing "cleanup: ..." for what failed. True when clean.
bool CleanupSandbox(ops::EphemeralSandbox* sandbox);

}  // namespace cordon::cli
