// The pinned state the agent reads: each sandbox's `info` map under
// <bpffs>/cordon/v<layout>/sandboxes/<cgroup id>/, never read unless it is of
// this build's layout (CORDON_LAYOUT_VERSION).
#pragma once

#include <cstdint>
#include <string>

#include "abi/cordon_common.h"
#include "abi/cordon_pins.h"
#include "sys/bpffs.h"
#include "util/result.h"

namespace cordon::agent {

using PinnedInfo = PinnedSandboxInfo;

// Reads <dir>/info (ReadSandboxInfo), its strings terminated. *foreign: the
// state is of another layout (never misread).
Result<PinnedInfo> ReadPinnedInfo(const std::string& dir, bool* foreign);
// Reads the info again through the map fd an adopted sandbox holds (one
// system call, no pin reopened) into pinned->info; false if that fails or
// the info is of another layout.
bool ReadHeldInfo(int info_fd, PinnedInfo* pinned);

// A pin directory named by a cgroup id (not staging-*, ".", "..").
bool IsNumber(const std::string& s);

// `cordon run` reads its own sandbox's ring buffer when it found no agent:
// while that run lives, a rescan must not become a second consumer.
bool RunStillReading(const cordon_sandbox_info& info);

// The enforcement level its flags say ("kernel-lsm", "kernel-cgroup+landlock", ...).
std::string EnforcementLevel(uint32_t flags);

}  // namespace cordon::agent
