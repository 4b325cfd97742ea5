// `cordon tail` through the agent: the request, the replay of the audit
// files the agent passes (their fds, SCM_RIGHTS), then the live frames. The
// replay also serves `cordon tail --since` without an agent.
#pragma once

#include <cstdint>

#include "agent/control.h"

namespace cordon::cli {

// What `cordon tail` asked for: the agent's filter, and how to show it.
struct TailOptions : agent::TailFilter {
  bool follow = false;
  int64_t since_unix_ns = 0;
  bool json = true;
  bool colour = false;  // compact lines on a terminal (NO_COLOR unset)
};

int TailThroughAgent(agent::AgentClient& client, const TailOptions& options);

// Replays audit-file lines (JSONL) matching the options to stdout; stops at
// end_offset (0: the whole file). Returns false if stdout failed.
bool ReplayAuditFile(int fd, uint64_t end_offset, const TailOptions& options);

}  // namespace cordon::cli
