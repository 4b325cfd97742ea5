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

// Exclusive lock serialising attach/detach/update across cordon processes.
Result<UniqueFd> LockPinRoot(const std::string& root);

}  // namespace cordon
