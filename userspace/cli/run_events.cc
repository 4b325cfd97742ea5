#include "cli/run_events.h"

#include "cli/common.h"
#include "cli/tail.h"
#include "inspect/retro.h"
#include "ops/name_service.h"
#include "sys/bpffs.h"
#include "util/colour.h"

namespace cordon::cli {

RunEvents::RunEvents(const ops::EphemeralSandbox& sandbox, std::string name, std::string policy_name,
                     std::string policy_digest, AuditSink* sink, bool quiet)
    : sandbox_(&sandbox),
      sink_(sink),
      quiet_(quiet),
      sandbox_id_(sandbox.id()),
      name_(std::move(name)),
      policy_name_(std::move(policy_name)),
      policy_digest_(std::move(policy_digest)),
      relative_(sandbox.cgroup().relative),
      reader_(sandbox.cgroup().mount, [this](const cordon::v1::AuditEvent& event) { OnEvent(event); }) {}

void RunEvents::OnEvent(const cordon::v1::AuditEvent& event) {
  if (auto named = ops::WithGrantHost(event)) return OnEvent(*named);  // a name rule's address: its name
  if (!event.id().empty() && !ids_.insert(event.id()).second) return;  // the same record again
  if (event.kind() == "loss") {
    summary.lost += event.loss().dropped();
  } else if (event.kind() == "suppressed") {
    summary.suppressed += event.suppressed().count();
  } else if (event.verdict() == "noted") {
    summary.noted++;  // credential.*: records of what cordon did, not violations
  } else if (event.quiet()) {
    summary.quiet_by_kind[event.kind()] += Occurrences(event);  // expected (spec.quiet): recorded, not a violation
  } else {
    // A record with repeats counts what it stands for, under its verdict.
    const uint64_t n = Occurrences(event);
    summary.by_kind[event.kind()] += n;
    const std::string& v = event.verdict();
    (v == "denied"    ? summary.denied
     : v == "audited" ? summary.audited
     : v == "killed"  ? summary.killed
                      : summary.detected) += n;
  }
  Status s = sink_->Write(event);
  if (!s.ok() && sink_status.ok()) sink_status = s;
  if (!egress_cut_ && event.kind() == "resource.egress" && event.resource().event() == "max") {
    egress_cut_ = true;
    CutConnections();
  }
}

// spec.resources.egressBytes reached: the kernel drops every packet but TCP
// resets from now on; destroying the connections (their resets leave) tells
// the peers and the command at once, instead of at their timeouts.
void RunEvents::CutConnections() {
  SandboxContext ctx{sandbox_id_, name_, policy_name_, relative_, policy_digest_};
  auto snap = SnapshotAndDisconnect(sandbox_->cgroup(), ctx, "spec.resources.egressBytes reached",
                                    "connection of a sandbox over its egress budget");
  if (!snap) {
    if (!quiet_) PrintNote("egress budget reached; its connections were not destroyed: " + snap.error().ToString());
    return;
  }
  for (const auto& e : snap->events) {
    Status s = sink_->Write(e);
    if (!s.ok() && sink_status.ok()) sink_status = s;
  }
}

void RunEvents::OnOwnEvent(cordon::v1::AuditEvent event) {
  event.set_sandbox(name_);
  event.set_policy(policy_name_);
  event.set_policy_digest(policy_digest_);
  event.set_cgroup_path(relative_);
  event.set_cgroup_id(sandbox_id_);
  event.set_sandbox_cgroup_id(sandbox_id_);
  OnEvent(event);
}

Status RunEvents::ReadDirectly() {
  if (reading_) return {};
  auto events = OpenSandboxMap(sandbox_id_, "events");
  auto counters = OpenSandboxMap(sandbox_id_, "counters");
  SandboxContext ctx{sandbox_id_, name_, policy_name_, relative_, policy_digest_};
  // The pinned spec.quiet patterns, read as the agent and cordon tail read them.
  if (auto info = GetSandbox(sandbox_id_)) ctx.quiet = DirectReaderContext(*info).quiet;
  Status added = events && counters ? reader_.Add(ctx, std::move(*events), std::move(*counters))
                                    : Status(Error{"open the sandbox's event maps"});
  reading_ = added.ok();
  return added;
}

Status RunEvents::Connect(bool use_agent) {
  std::optional<agent::AgentClient> client;
  bool unreachable = false;
  if (use_agent && agent::ReachAgent(&client, &unreachable)) {
    cordon::v1::Request request;
    auto* tail = request.mutable_tail();
    tail->set_follow(true);
    tail->add_sandbox_ids(sandbox_id_);
    tail->set_adopt_sandbox_id(sandbox_id_);
    auto response = client->Call(request, 10000);
    if (response && response->error().empty())
      agent_link = std::move(client);
    else if (!quiet_)
      PrintNote("the agent did not take this sandbox (" +
                (response ? response->error() : response.error().ToString()) + "); reading its events directly");
  }
  if (!agent_link) return ReadDirectly();
  return {};
}

bool RunEvents::ReadAgent(int timeout_ms) {
  for (;;) {
    auto frame = agent_link->ReadFrame(timeout_ms);
    if (!frame) return frame.error().err == EAGAIN || frame.error().err == EINTR;
    timeout_ms = 0;
    cordon::v1::TailFrame tf;
    if (!tf.ParseFromString(*frame)) return false;
    if (tf.has_event()) {
      if (covered && tf.event().has_resource()) covered->Covered(tf.event());
      OnEvent(tf.event());
    } else if (tf.has_notice()) {
      summary.not_received += tf.notice().dropped();
      if (!tf.notice().disconnect_reason().empty()) return false;
    } else if (tf.has_response()) {
      release_answered = true;
      agent_detached = tf.response().error().empty() && tf.response().drain().detached();
      if (!tf.response().error().empty() && !quiet_) PrintNote("agent: " + tf.response().error());
      return true;
    }
  }
}

void RunEvents::Drain(bool final) {
  (void)reader_.Drain();
  reader_.CheckLosses(final);
}

// The sandbox removed once the command ended: leftovers killed first, then
// detached (by the agent, when it adopted the sandbox). True when clean.
bool CleanupSandbox(ops::EphemeralSandbox* sandbox) {
  std::vector<std::string> errors;
  bool cleaned = sandbox->Cleanup(&errors);
  for (const auto& error : errors) PrintError("cleanup: " + error);
  return cleaned;
}

bool FinishSandbox(ops::EphemeralSandbox* sandbox, RunEvents* events) {
  if (!events->agent_link) {
    bool cleaned = CleanupSandbox(sandbox);  // kills leftovers first, then detaches
    events->Drain(/*final=*/true);
    return cleaned;
  }
  // Leftovers killed first; then the agent delivers what the ring buffer
  // still holds (to its sinks and, before its answer, to us) and detaches.
  bool cleaned;
  Status removed = sandbox->KillAndRemove();
  if (!removed.ok()) PrintError("cleanup: " + removed.error().ToString());
  cordon::v1::Request request;
  request.mutable_release()->set_sandbox_id(sandbox->id());
  request.mutable_release()->set_detach(true);
  if (events->agent_link->Send(request).ok())
    while (!events->release_answered && events->ReadAgent(10000)) {
    }
  if (!events->agent_detached) {
    // The agent is gone or refused: finish here (if it still reads the
    // ring buffer, what is left stays with it).
    (void)events->ReadDirectly();
    events->Drain(/*final=*/true);
    Status detached = sandbox->Detach();
    if (!detached.ok()) PrintError("cleanup: " + detached.error().ToString());
    cleaned = removed.ok() && detached.ok();
  } else {
    sandbox->DetachedElsewhere();
    cleaned = removed.ok();
  }
  sandbox->RemoveSharedParent();
  return cleaned;
}

uint64_t RunSummary::Quiet() const {
  uint64_t n = 0;
  for (const auto& [kind, count] : quiet_by_kind) n += count;
  return n;
}

std::string SummaryLine(const RunSummary& summary, bool colour) {
  std::string line;
  if (summary.Violations() == 0) {
    line = Paint("no violations", Colour::kGreen, colour);
  } else {
    const bool refused = summary.denied || summary.killed;
    line = Paint(std::to_string(summary.Violations()) + " violation" + (summary.Violations() == 1 ? "" : "s"),
                 refused ? Colour::kRed : Colour::kYellow, colour) +
           " (" + std::to_string(summary.denied) + " denied, " + std::to_string(summary.audited) + " audited";
    if (summary.detected) line += ", " + std::to_string(summary.detected) + " detected";
    if (summary.killed) line += ", " + std::to_string(summary.killed) + " killed";
    line += ":";
    for (const auto& [kind, count] : summary.by_kind) line += " " + kind + " x" + std::to_string(count);
    line += ")";
  }
  if (const uint64_t quiet = summary.Quiet()) {
    line += "; " + std::to_string(quiet) + " expected (spec.quiet:";
    for (const auto& [kind, count] : summary.quiet_by_kind) line += " " + kind + " x" + std::to_string(count);
    line += ")";
  }
  if (summary.suppressed)
    line +=
        "; " + std::to_string(summary.suppressed) + " more suppressed by the agent's rate limit (counted, not logged)";
  if (summary.lost)
    line += "; " + Paint(std::to_string(summary.lost) + " events LOST", Colour::kRed, colour) + " (ring buffer full)";
  if (summary.not_received)
    line +=
        "; " + std::to_string(summary.not_received) + " events not received from the agent (its audit log has them)";
  return line;
}

}  // namespace cordon::cli
