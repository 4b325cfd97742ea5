// bpffs: mounting it when needed and the pin directory layout.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "abi/cordon_pins.h"
#include "util/fd.h"
#include "util/result.h"

namespace cordon {

constexpr const char* kBpffsDefault = "/sys/fs/bpf";

// Mounts bpffs at /sys/fs/bpf unless a bpffs is already there. Returns the mount.
Result<std::string> EnsureBpffs();

// <bpffs>/cordon/v<layout>/sandboxes, created on demand.
Result<std::string> SandboxPinRoot();
std::string SandboxPinDir(const std::string& root, uint64_t sandbox_id);

// Trees of another layout version: <bpffs>/cordon/v<N>/, N not this
// cordon's, with the first pin found below each ("" if it holds none).
struct ForeignLayoutTree {
  std::string dir;
  std::string version;
  std::string first_pin;
};
std::vector<ForeignLayoutTree> ForeignLayoutTrees();

// Pinned state of another layout version (a ForeignLayoutTree holding any
// pin): an error naming it, which an attach refuses on (another cordon
// release's sandboxes must be detached by that release). Directories left
// empty by a detach are no state.
Status CheckNoForeignLayoutState();

// A sandbox's pinned info (<dir>/info) of this layout, never misread: one of
// another size or layout version is an error naming it (*foreign = true).
struct PinnedSandboxInfo {
  cordon_sandbox_info info = {};
  uint32_t map_id = 0;  // the info map's id: changes when the sandbox is re-created
};
Result<PinnedSandboxInfo> ReadSandboxInfo(const std::string& dir, bool* foreign);

// Exclusive lock serialising attach/detach/update across cordon processes.
Result<UniqueFd> LockPinRoot(const std::string& root);

// An fd of one of the sandbox's pinned maps ("events", "counters", ...).
Result<UniqueFd> OpenSandboxMap(uint64_t sandbox_id, const std::string& map_name);

}  // namespace cordon
