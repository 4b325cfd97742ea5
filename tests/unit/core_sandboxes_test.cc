// The CLI's choice of implementation (cli/sandboxes.h) and what the direct
// one refuses before it touches the kernel: no root needed.
#include <gtest/gtest.h>

#include <cstdlib>

#include "cli/sandboxes.h"

namespace cordon::cli {
namespace {

TEST(Sandboxes, NoAgentMeansDirect) {
  ::setenv("CORDON_AGENT_SOCKET", "/nonexistent/cordon-unit-test/agent.sock", 1);
  bool failed = true;
  auto sandboxes = PickSandboxes(&failed);
  ::unsetenv("CORDON_AGENT_SOCKET");
  ASSERT_NE(sandboxes, nullptr);
  EXPECT_FALSE(failed);
}

TEST(Sandboxes, DirectRefusesABadModeBeforeAnything) {
  ops::AttachRequest request;
  request.cgroup = "/nonexistent";
  request.mode = "sometimes";
  auto out = DirectSandboxes()->Attach(request);
  EXPECT_EQ(out.error, "mode must be enforce or audit, not 'sometimes'");
  EXPECT_EQ(out.sandbox_id, 0u);
  EXPECT_TRUE(out.notes.empty());
}

TEST(Sandboxes, DirectRefusesARejectedPolicyAndSaysNothingAttached) {
  ops::AttachRequest request;
  request.cgroup = "/nonexistent";
  request.policy_text = "spec: [";
  request.policy_file = "bad.yaml";
  auto out = DirectSandboxes()->Update(request);
  EXPECT_NE(out.error.find("policy bad.yaml rejected"), std::string::npos) << out.error;
  EXPECT_NE(out.error.find("nothing attached"), std::string::npos) << out.error;
}

}  // namespace
}  // namespace cordon::cli
