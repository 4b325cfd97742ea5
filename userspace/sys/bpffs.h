// bpffs: mounting it when needed and the pin directory layout.
#pragma once

#include <cstdint>
#include <string>

#include "util/fd.h"
#include "util/result.h"

namespace cordon {

constexpr const char* kBpffsDefault = "/sys/fs/bpf";

// Mounts bpffs at /sys/fs/bpf unless a bpffs is already there. Returns the mount.
Result<std::string> EnsureBpffs();

// <bpffs>/cordon/v<layout>/sandboxes, created on demand.
Result<std::string> SandboxPinRoot();
std::string SandboxPinDir(const std::string& root, uint64_t sandbox_id);

// Pinned state of another layout version (<bpffs>/cordon/v<N>/ holding any
// pin, N not this cordon's): an error naming it, which an attach refuses on
// (another cordon release's sandboxes must be detached by that release).
// Directories left empty by a detach are no state.
Status CheckNoForeignLayoutState();

// Exclusive lock serialising attach/detach/update across cordon processes.
Result<UniqueFd> LockPinRoot(const std::string& root);

// An fd of one of the sandbox's pinned maps ("events", "counters", ...).
Result<UniqueFd> OpenSandboxMap(uint64_t sandbox_id, const std::string& map_name);

}  // namespace cordon
