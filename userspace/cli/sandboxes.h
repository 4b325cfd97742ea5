// The CLI's view of the sandbox use cases: done here with the loader
// (ops/ops.h), or by the agent over its control socket. The commands pick one
// (the agent when it runs), call it and render the outcome, whichever did it.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "agent/control.h"
#include "control.pb.h"
#include "ops/contain.h"
#include "ops/ops.h"

namespace cordon::cli {

// Status adds the agent's own accounting when one answered.
struct StatusOutcome : ops::StatusOutcome {
  std::optional<cordon::v1::StatusReply> agent;
  std::string agent_problem;  // the agent runs but did not answer: why
};

class Sandboxes {
 public:
  virtual ~Sandboxes() = default;
  virtual ops::AttachOutcome Attach(const ops::AttachRequest& request) = 0;
  virtual ops::AttachOutcome Update(const ops::AttachRequest& request) = 0;
  virtual ops::DetachOutcome Detach(const ops::DetachRequest& request) = 0;
  virtual StatusOutcome Status() = 0;
  // Through the agent, its own audit file and requester are used (the
  // request's audit_path, by and via are the CLI's, for the direct way).
  virtual ops::ContainOutcome Contain(const ops::ContainRequest& request) = 0;
  virtual ops::ReleaseContainmentOutcome ReleaseContainment(const ops::ReleaseContainmentRequest& request) = 0;
  virtual bool through_agent() const = 0;
};

// The agent's attach (or update) request for `request`, the policy given as
// text; and the outcome its Response carries.
cordon::v1::Request AttachRequestFrame(const ops::AttachRequest& request, const std::string& policy_text, bool update);
ops::AttachOutcome AttachOutcomeOf(const cordon::v1::Response& response);

std::unique_ptr<Sandboxes> DirectSandboxes();
std::unique_ptr<Sandboxes> AgentSandboxes(agent::AgentClient client);

// The agent when one is reachable, else direct. Null when one seems to run
// but cannot be reached (*agent_failed set; ReachAgent already said why).
std::unique_ptr<Sandboxes> PickSandboxes(bool* agent_failed);

}  // namespace cordon::cli
