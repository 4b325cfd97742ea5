// cgroup v2 resource limits of a sandbox cgroup (issue 17): which controllers
// the cgroup can have, enabling them in the ancestors' cgroup.subtree_control,
// and writing memory.max, memory.high, memory.swap.max, pids.max, cpu.max and
// cpu.weight, and io.max (wbps, one outcome per device). Returns per-limit
// outcomes as data; prints nothing.
//
// Where a controller is not in the cgroup2 root's cgroup.controllers (hybrid
// hosts keep memory, pids and cpu on cgroup v1) the limit is unavailable
// here; `cordon run` then uses sys/cgroup_v1.h.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sys/cgroup.h"
#include "util/result.h"

namespace cordon {

enum class CgroupLimit { kMemoryMax, kMemoryHigh, kSwapMax, kPidsMax, kCpuMax, kCpuWeight, kIoWriteBps };

constexpr uint64_t kCgroupCpuPeriodUs = 100000;

struct CgroupLimitValue {
  CgroupLimit limit;
  uint64_t value;  // bytes, pids, weight; kCpuMax: the quota in us per kCgroupCpuPeriodUs; kIoWriteBps: bytes/s
  uint32_t dev_major = 0, dev_minor = 0;  // kIoWriteBps: the whole disk (sys/block_device.h)
};

const char* CgroupLimitFile(CgroupLimit limit);        // "memory.max"
const char* CgroupLimitController(CgroupLimit limit);  // "memory"
// The value as the limit's file is written: "536870912", "150000 100000", "254:0 wbps=2097152".
std::string CgroupLimitText(const CgroupLimitValue& value);
// The limit's file, with the device for io.max: "memory.max", "io.max 254:0".
std::string CgroupLimitLabel(const CgroupLimitValue& value);

// How a limit meets the value already in the cgroup's file.
enum class LimitMerge {
  kPolicy,    // the policy's value is written (a cgroup cordon created; a policy replacement)
  kStricter,  // attach: the stricter of the file's value and the policy's (cpu.weight: the policy's)
};

// The platform's value of each limit file cordon manages in a cgroup given
// to attach, as it was before cordon first wrote it: CgroupLimitLabel ->
// the value as written back ("max", "8", "max 100000", "254:0 wbps=max").
using PlatformLimits = std::map<std::string, std::string>;

struct CgroupLimitOutcome {
  CgroupLimitValue requested{};
  bool enforced = false;       // the file holds a value at least as strict as requested
  bool platform_kept = false;  // kStricter: the platform's value was stricter and is kept
  bool restored = false;       // RestorePlatformLimits: the new policy sets none, the platform's value is back
  std::string platform;        // kStricter, restored: the platform's value (as `previous`)
  bool written = false;        // cordon wrote the file (restored by RestoreCgroupLimits)
  std::string previous;        // the file's content before, trimmed ("max", "max 100000")
  std::string reason;          // not enforced: why ("no memory controller in cgroup2 at /sys/fs/cgroup/unified")
  std::string v1_file;         // enforced on cgroup v1 (cordon run, sys/cgroup_v1.h): "pids.max 16" as written
  // One line: "memory.max 512Mi enforced (cgroup v2)", "pids.max: the platform's 64 applies (policy: 128)",
  // "memory.max NOT enforced: <reason>", "memory.max 33554432 enforced (cgroup v1 memory.limit_in_bytes 33554432)",
  // "io.max 254:0 wbps=2097152 enforced (cgroup v1 blkio.throttle.write_bps_device 254:0 2097152; direct I/O
  // only ...)".
  std::string Describe() const;
};

// The limit a label names ("io.max 254:0": kIoWriteBps of 254:0; value 0).
std::optional<CgroupLimitValue> CgroupLimitOfLabel(const std::string& label);

// Applies `limits` to `cgroup`. Each controller a limit needs is enabled,
// where missing, in the cgroup.subtree_control of the ancestors: with
// `enable_from_root` every ancestor from the cgroup2 root down (the cgroups
// cordon creates), else only the direct parent (a cgroup given to attach).
// A limit whose controller cannot be had is not enforced (outcome.reason);
// that is not an error, nor is io.max refusing a device (EINVAL, ENODEV: a
// device the kernel does not throttle). An error (a write to a limit file failed) names the
// file and errno, and every limit file already written is restored first:
// nothing is left half-applied.
// kStricter compares with `platform`'s value of a limit where it has one
// (recorded at the first attach: the file may hold an earlier policy's
// since), writing it back where the file no longer holds it, else with the
// file's.
Result<std::vector<CgroupLimitOutcome>> ApplyCgroupLimits(const CgroupRef& cgroup,
                                                          const std::vector<CgroupLimitValue>& limits, LimitMerge merge,
                                                          bool enable_from_root,
                                                          const PlatformLimits* platform = nullptr);

// Writes back the platform's value of each limit in `limits` (a replacement
// that no longer sets them). On an error the ones written are restored and
// the error names the file.
Result<std::vector<CgroupLimitOutcome>> RestorePlatformLimits(const CgroupRef& cgroup, const PlatformLimits& limits);

// Writes back the previous values of the limits cordon wrote (an attach that
// failed after its limits were applied). Controllers enabled stay enabled.
Status RestoreCgroupLimits(const CgroupRef& cgroup, const std::vector<CgroupLimitOutcome>& outcomes);

// For `cordon doctor`: whether the cgroup2 root at `mount` offers
// `controller` ("memory", "pids", "cpu", "io"); false with *reason if not.
bool Cgroup2HasController(const std::string& mount, const std::string& controller, std::string* reason);

}  // namespace cordon
