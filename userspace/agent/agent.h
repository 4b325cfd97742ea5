// `cordon agent`: the long-running consumer of every sandbox's ring buffer.
//
// One thread, one epoll loop: the ring buffers (one EventReader per sandbox,
// drained in bounded batches so a flooding sandbox cannot starve the others),
// the control socket and its clients, the metrics endpoint, signals and a
// 100 ms timer (loss checks, suppressed records, sink flushes, and every
// 200 ms a rescan of the pins that adopts sandboxes attached without the
// agent and finishes those detached without it).
//
// Fail-closed: the agent only reads. Enforcement lives in pinned links and
// never depends on it; kill -9 leaves every sandbox as confined as before,
// with events waiting in its ring buffer (what does not fit is counted by the
// kernel and reported as a loss record when an agent next runs).
#pragma once

#include "agent/config.h"
#include "util/result.h"

namespace cordon::agent {

// Read-only check of the pinned state under <bpffs>/cordon: every layout
// directory and every sandbox's info must be of this build's layout version
// (CORDON_LAYOUT_VERSION). The error names each foreign piece.
Status CheckPinnedLayout();

// Runs the agent in the foreground until SIGTERM or SIGINT (then drains,
// flushes and returns 0). Returns 1 if it cannot start.
int RunAgent(const AgentConfig& config);

}  // namespace cordon::agent
