// Who the OOM killer killed (issue 17): bpf/oom/oom.bpf.c records each
// victim (bpf/abi/cordon_oom.h); a resource watcher takes the victims of its
// sandbox's cgroup subtree when the cgroup's oom_kill counter rises.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cordon::ops {

struct OomVictim {
  uint64_t cgroup_id = 0;  // the victim's cgroup on the unified hierarchy
  uint32_t pid = 0;        // the process (tgid)
  uint32_t tid = 0;        // the thread the kernel marked
  uint32_t uid = 0;
  std::string comm;     // raw, as the kernel had it (escape before output)
  int64_t boot_ns = 0;  // CLOCK_BOOTTIME when it was marked
};

// The process's recorder: loaded and attached by the first call (one per
// process, shared by every watch; not pinned, gone with the process).
// Returns "" when it records, else why it does not (the kernel refused
// the program: the events then give counts only).
const std::string& OomVictimRecorder();

// Takes (removes from the map) the victims recorded in the cgroups `ids`,
// oldest first. Empty when the recorder is not loaded.
std::vector<OomVictim> TakeOomVictims(const std::vector<uint64_t>& ids);

// The cgroup ids of a cgroup2 directory and every cgroup below it (the
// inode numbers of the directories); empty when it is gone.
std::vector<uint64_t> CgroupSubtreeIds(const std::string& cgroup2_dir);

}  // namespace cordon::ops
