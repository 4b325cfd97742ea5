// cgroup v1 resource limits for `cordon run` on hybrid hosts (issue 17):
// where memory, pids or cpu are bound to a cgroup v1 hierarchy (so not in
// cgroup2), run also places its command in v1 cgroups of its own, one per
// hierarchy a limit needs, and writes the v1 files:
//
//   memory.max       memory.limit_in_bytes
//   memory.swap.max  memory.memsw.limit_in_bytes = memory + swap (v1 limits
//                    them together: needs memory, and swap accounting)
//   memory.high      unavailable: v1 has no throttle (soft_limit_in_bytes
//                    only reclaims under host-wide pressure)
//   pids.max         pids.max
//   cpu.max          cpu.cfs_period_us 100000, cpu.cfs_quota_us
//   cpu.weight       cpu.shares = weight * 1024 / 100 (100 <-> 1024)
//   io.max wbps      blkio.throttle.write_bps_device "MAJ:MIN N" (the blkio
//                    hierarchy): direct I/O, and the writeback a command's
//                    own fsync issues; v1 charges the kernel's background
//                    writeback of buffered writes to the root cgroup
//
// The hierarchies come from /proc/self/mountinfo (a controller may be
// co-mounted, e.g. "cpu,cpuacct"); each cgroup is made below cordon's own
// cgroup of that hierarchy (<own>/cordon/<run>), so the limits the platform
// set for the caller still apply above the run's. `cordon attach` never uses
// v1: a workload's v1 cgroups are the platform's.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sys/cgroup_limits.h"
#include "util/result.h"

namespace cordon {

struct CgroupV1Hierarchy {
  std::string mountpoint;                // /sys/fs/cgroup/cpu,cpuacct
  std::vector<std::string> controllers;  // cpu, cpuacct
  std::string own;                       // this process's cgroup directory in it
};

// The v1 hierarchies mounted here (named ones like name=systemd left out).
std::vector<CgroupV1Hierarchy> FindCgroupV1Hierarchies();
// The hierarchy that has `controller`, if any.
std::optional<CgroupV1Hierarchy> FindCgroupV1Controller(const std::string& controller);
// The v1 file a limit is written to ("" for memory.high: none).
const char* CgroupV1LimitFile(CgroupLimit limit);
// The v1 controller of a limit: CgroupLimitController's, but "blkio" for io.
const char* CgroupV1Controller(CgroupLimit limit);

// What the run's v1 cgroups used (each only where the file exists).
struct CgroupV1Usage {
  std::optional<uint64_t> memory_current, memory_peak, memory_max;  // memory_max unset when unlimited
  std::optional<uint64_t> pids_current, pids_peak, pids_max;        // pids_max unset when "max"
  uint64_t oom_kills = 0;                                           // memory.oom_control oom_kill
  uint64_t pids_refused = 0;                                        // pids.events max
};

// The v1 cgroups of one run; removed (leftover processes, which only the
// run put there, killed first) when destroyed.
class CgroupV1Placement {
 public:
  // For each outcome of `*outcomes` (the cgroup2 attempt) that is not
  // enforced and whose controller is on a v1 hierarchy: creates
  // <own>/cordon/<leaf> there (once per hierarchy) and writes the limit,
  // replacing the outcome with the v1 one (or why v1 cannot have it).
  // Returns null when no limit needed v1. An error (mkdir or a write failed)
  // names the file; whatever was created is removed first.
  static Result<std::unique_ptr<CgroupV1Placement>> Create(const std::string& leaf,
                                                           std::vector<CgroupLimitOutcome>* outcomes);
  ~CgroupV1Placement();
  CgroupV1Placement(const CgroupV1Placement&) = delete;
  CgroupV1Placement& operator=(const CgroupV1Placement&) = delete;

  // Moves `pid` into each of the run's v1 cgroups (before it execs).
  Status Place(pid_t pid) const;
  CgroupV1Usage ReadUsage() const;
  // Kills what is left in them and removes them (and the shared "cordon"
  // parents once empty). Once; later calls: ok.
  Status Remove(int timeout_ms = 5000);
  // The cgroup directories, for tests and messages.
  std::vector<std::string> paths() const;

 private:
  CgroupV1Placement() = default;
  struct Dir {
    std::string path;                      // <own>/cordon/<leaf>
    std::vector<std::string> controllers;  // of its hierarchy
  };
  std::string Find(const std::string& controller) const;  // the dir with it, or ""
  std::vector<Dir> dirs_;
  bool removed_ = false;
};

}  // namespace cordon
