// An allocation beyond a memory limit beside a process that allocates
// nothing (the negative control): the resource.memory oom_kill event names
// the allocating process only (issue 17, bpf/oom). Shared by ResourcesV2,
// ResourcesHybrid (cordon run) and AgentResources (an attached sandbox).
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "event.pb.h"

namespace cordon::test {

// Forks an idle python3 that waits for its parent to go (a pipe's EOF),
// then allocates 64 MiB and touches every page. Each prints its pid first.
inline const char* kAllocateBesideIdle =
    "import os\n"
    "r, w = os.pipe()\n"
    "if os.fork() == 0:\n"
    "  os.close(w)\n"
    "  print('idle', os.getpid(), flush=True)\n"
    "  os.read(r, 1)\n"
    "  os._exit(0)\n"
    "os.close(r)\n"
    "print('allocating', os.getpid(), flush=True)\n"
    "b = bytearray(64 << 20)\n"
    "for i in range(0, len(b), 4096): b[i] = 1\n"
    "print('touched', len(b))\n";

// The pid the script printed after `word` ("allocating 123"), 0 if none.
inline uint32_t PrintedPid(const std::string& out, const std::string& word) {
  const size_t at = out.find(word + " ");
  unsigned pid = 0;
  if (at == std::string::npos || std::sscanf(out.c_str() + at + word.size() + 1, "%u", &pid) != 1) return 0;
  return pid;
}

// Exactly one oom_kill event, verdict killed, naming the allocating process
// (pid and comm python3); no event names the idle one.
inline void ExpectOnlyTheAllocatorNamed(const std::vector<cordon::v1::AuditEvent>& events, const std::string& out,
                                        const std::string& context) {
  const uint32_t allocating = PrintedPid(out, "allocating"), idle = PrintedPid(out, "idle");
  ASSERT_NE(allocating, 0u) << out;
  ASSERT_NE(idle, 0u) << out;
  std::vector<cordon::v1::AuditEvent> kills;
  for (const auto& e : events) {
    EXPECT_NE(e.pid(), idle) << "the idle process is named: " << e.DebugString();
    if (e.kind() == "resource.memory" && e.resource().event() == "oom_kill") kills.push_back(e);
  }
  ASSERT_EQ(kills.size(), 1u) << context;
  EXPECT_EQ(kills[0].verdict(), "killed");
  EXPECT_EQ(kills[0].resource().count(), 1u);
  EXPECT_EQ(kills[0].pid(), allocating) << kills[0].DebugString() << context;
  EXPECT_EQ(kills[0].comm(), "python3") << kills[0].DebugString();
  EXPECT_NE(kills[0].reason().find("killed python3 (pid " + std::to_string(allocating) + ")"), std::string::npos)
      << kills[0].reason();
}

}  // namespace cordon::test
