// `cordon tail` through the agent: the request, the replay of the audit
// files the agent passes (their fds, SCM_RIGHTS), then the live frames. The
// replay also serves `cordon tail --since` without an agent.
#pragma once

#include <cstdint>

#include "agent/control.h"
#include "events/decoder.h"
#include "loader/sandbox.h"

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

// What a direct reader of a sandbox's ring buffer (`cordon tail` and `cordon
// run` without an agent) decodes its events with: its names, and the
// spec.quiet patterns pinned with it for its current generation. A pin that
// cannot be read is said on stderr (its events are then not marked quiet).
SandboxContext DirectReaderContext(const SandboxInfo& sandbox);

}  // namespace cordon::cli
