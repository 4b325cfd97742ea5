#include "cli/sandboxes.h"

#include "util/fs.h"

namespace cordon::cli {

namespace {

// Without an agent, the events of credentials (attach issues them, detach
// revokes them) go to the host's credential log (ops::kCredentialSweepLog),
// as cordon run's sweep's do; a note says when they could not.
template <typename Outcome>
void LogCredentialEvents(Outcome* out, std::vector<std::string>* notes) {
  std::string error;
  if (size_t unwritten = ops::WriteCredentialLog(out->credential_events, &error))
    notes->push_back(std::to_string(unwritten) + " credential event(s) could not be written to " +
                     ops::kCredentialSweepLog + ": " + error);
}

class Direct : public Sandboxes {
 public:
  ops::AttachOutcome Attach(const ops::AttachRequest& request) override { return Logged(ops::Attach(request)); }
  ops::AttachOutcome Update(const ops::AttachRequest& request) override { return Logged(ops::Update(request)); }
  ops::DetachOutcome Detach(const ops::DetachRequest& request) override {
    ops::DetachOutcome out = ops::Detach(request);
    std::vector<std::string> notes;
    LogCredentialEvents(&out, &notes);
    for (const auto& n : notes) out.credential_error += (out.credential_error.empty() ? "" : "; ") + n;
    return out;
  }
  StatusOutcome Status() override {
    StatusOutcome out;
    static_cast<ops::StatusOutcome&>(out) = ops::Status();
    return out;
  }
  ops::ContainOutcome Contain(const ops::ContainRequest& request) override { return ops::Contain(request); }
  ops::ReleaseContainmentOutcome ReleaseContainment(const ops::ReleaseContainmentRequest& request) override {
    return ops::ReleaseContainment(request);
  }
  bool through_agent() const override { return false; }

 private:
  static ops::AttachOutcome Logged(ops::AttachOutcome out) {
    std::vector<std::string> notes;
    LogCredentialEvents(&out, &notes);
    for (auto& n : notes) out.notes.push_back(std::move(n));
    return out;
  }
};

// A contain or release reply into its outcome.
template <typename Outcome>
Outcome FromContainReply(const Result<cordon::v1::Response>& response, const char* unsure) {
  Outcome out;
  if (!response) return out.error = response.error().ToString() + unsure, out;
  out.error = response->error();
  out.notes.assign(response->notes().begin(), response->notes().end());
  for (const auto& note : out.notes)
    out.partial = out.partial || note.rfind("contained, but", 0) == 0 || note.rfind("killed, but", 0) == 0 ||
                  note.rfind("released, but", 0) == 0;
  const auto& reply = response->contain();
  out.sandbox_id = reply.sandbox_id();
  out.name = reply.name();
  out.events.assign(reply.events().begin(), reply.events().end());
  return out;
}

// The existing control requests (userspace/proto/control.proto).
class ThroughAgent : public Sandboxes {
 public:
  explicit ThroughAgent(agent::AgentClient client) : client_(std::move(client)) {}

  ops::AttachOutcome Attach(const ops::AttachRequest& request) override { return Send(request, false); }
  ops::AttachOutcome Update(const ops::AttachRequest& request) override { return Send(request, true); }

  ops::DetachOutcome Detach(const ops::DetachRequest& request) override {
    ops::DetachOutcome out;
    cordon::v1::Request req;
    req.mutable_detach()->set_sandbox_id(request.sandbox_id);
    auto response = client_.Call(req);
    if (!response)
      out.error = response.error().ToString();
    else if (!response->error().empty())
      out.error = response->error();
    else
      out.detached = true, out.drained = response->drain().drained(),
      out.removed_cgroup = response->drain().removed_cgroup();
    if (response) {
      out.credential_events.assign(response->drain().credential_events().begin(),
                                   response->drain().credential_events().end());
      out.credential_error = response->drain().credential_error();
      for (const auto& note : response->drain().limit_notes()) out.limit_notes.push_back(note);
    }
    return out;
  }

  // The pinned state is read here; the agent adds its accounting.
  StatusOutcome Status() override {
    StatusOutcome out;
    static_cast<ops::StatusOutcome&>(out) = ops::Status();
    if (!out.error.empty()) return out;
    cordon::v1::Request req;
    req.mutable_status();
    auto response = client_.Call(req, 10000);
    if (!response)
      out.agent_problem = response.error().ToString();
    else if (!response->error().empty())
      out.agent_problem = response->error();
    else
      out.agent = response->status();
    return out;
  }

  ops::ContainOutcome Contain(const ops::ContainRequest& request) override {
    cordon::v1::Request req;
    auto* c = req.mutable_contain();
    c->set_sandbox_id(request.sandbox_id);
    c->set_kill(request.kill);
    c->set_reason(request.reason);
    auto response = client_.Call(req, 60000);
    auto out = FromContainReply<ops::ContainOutcome>(
        response, " (the agent may or may not have contained it: see `cordon status`)");
    if (response) out.evidence_path = response->contain().evidence();
    return out;
  }

  ops::ReleaseContainmentOutcome ReleaseContainment(const ops::ReleaseContainmentRequest& request) override {
    cordon::v1::Request req;
    auto* r = req.mutable_release_containment();
    r->set_sandbox_id(request.sandbox_id);
    r->set_reason(request.reason);
    return FromContainReply<ops::ReleaseContainmentOutcome>(
        client_.Call(req, 60000), " (the agent may or may not have released it: see `cordon status`)");
  }

  bool through_agent() const override { return true; }

 private:
  ops::AttachOutcome Send(const ops::AttachRequest& request, bool update) {
    ops::AttachOutcome out;
    std::string text = request.policy_text;
    if (text.empty() && !request.policy_file.empty()) {
      auto read = ReadFile(request.policy_file);
      if (!read) return out.error = read.error().ToString() + "; nothing attached", out;
      text = std::move(*read);
    }
    auto response = client_.Call(AttachRequestFrame(request, text, update));
    if (!response)
      return out.error = response.error().ToString() + " (the agent may or may not have attached: see `cordon status`)",
             out;
    return AttachOutcomeOf(*response);
  }

  agent::AgentClient client_;
};

}  // namespace

cordon::v1::Request AttachRequestFrame(const ops::AttachRequest& request, const std::string& policy_text, bool update) {
  cordon::v1::Request req;
  if (update) {
    auto* u = req.mutable_update();
    u->set_sandbox_id(request.sandbox_id);
    u->set_policy_text(policy_text);
    u->set_policy_file(request.policy_file);
    u->set_mode(request.mode);
    u->set_allow_degraded(request.allow_degraded);
  } else {
    auto* at = req.mutable_attach();
    at->set_cgroup(request.cgroup);
    at->set_policy_text(policy_text);
    at->set_policy_file(request.policy_file);
    at->set_mode(request.mode);
    at->set_name(request.name);
    at->set_allow_degraded(request.allow_degraded);
  }
  return req;
}

ops::AttachOutcome AttachOutcomeOf(const cordon::v1::Response& response) {
  ops::AttachOutcome out;
  // A refused attach may still have issued and revoked credentials: their
  // events come with the error.
  out.credential_events.assign(response.attach().credential_events().begin(),
                               response.attach().credential_events().end());
  if (!response.error().empty()) return out.error = response.error(), out;
  const auto& at = response.attach();
  out.sandbox_id = at.sandbox_id();
  out.name = at.name();
  out.cgroup = at.cgroup();
  out.policy = at.policy();
  out.mode = at.mode();
  out.replaced = at.replaced();
  out.swap_ns = at.swap_ns();
  out.notes.assign(response.notes().begin(), response.notes().end());
  out.retro_events.assign(at.retro_events().begin(), at.retro_events().end());
  out.retro_summary = at.retro_summary();
  out.retro_destroy_failed = at.retro_destroy_failed();
  out.retro_error = at.retro_error();
  return out;
}

std::unique_ptr<Sandboxes> DirectSandboxes() { return std::make_unique<Direct>(); }
std::unique_ptr<Sandboxes> AgentSandboxes(agent::AgentClient client) {
  return std::make_unique<ThroughAgent>(std::move(client));
}

std::unique_ptr<Sandboxes> PickSandboxes(bool* agent_failed) {
  std::optional<agent::AgentClient> client;
  *agent_failed = false;
  if (agent::ReachAgent(&client, agent_failed)) return AgentSandboxes(std::move(*client));
  if (*agent_failed) return nullptr;
  return DirectSandboxes();
}

}  // namespace cordon::cli
