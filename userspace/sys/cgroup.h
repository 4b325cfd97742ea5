// cgroup v2: finding the mount, resolving user-given paths, creating and
// removing the ephemeral cgroups of `cordon run`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/fd.h"
#include "util/result.h"

namespace cordon {

// The cgroup2 mount point, from /proc/self/mountinfo (never assumed).
Result<std::string> FindCgroup2Mount();

// One line of /proc/self/mountinfo (fields unescaped).
struct MountEntry {
  std::string root;        // the mounted subtree of the file system
  std::string mountpoint;
  std::string fstype;
  std::string superopts;  // the file system's options ("rw,cpu,cpuacct" for a cgroup v1 hierarchy)
  std::string dev;        // st_dev of its files, "MAJOR:MINOR" ("254:0"; major 0: no block device)
};
// This process's mount table, in mountinfo order.
Result<std::vector<MountEntry>> ReadMountTable();

struct CgroupRef {
  std::string mount;     // cgroup2 mount point
  std::string path;      // absolute path of the cgroup directory
  std::string relative;  // path below the mount, starting with "/" ("/" for the root)
  uint64_t id = 0;       // cgroup id (inode number), what bpf_get_current_cgroup_id() returns
  UniqueFd fd;           // O_DIRECTORY fd, for attaching and CLONE_INTO_CGROUP
};

// Resolves an absolute path or one relative to the cgroup2 mount. Errors name
// the problem: missing, not a directory, on a cgroup v1 hierarchy, outside the
// cgroup2 mount, the root cgroup.
Result<CgroupRef> ResolveCgroup(const std::string& user_path);

// Creates <mount>/<relative> (parents too) and returns it resolved.
Result<CgroupRef> CreateCgroup(const std::string& relative);

// Kills every process in the cgroup subtree (cgroup.kill), waits until it is
// empty, then removes it and its child cgroups. Only for cgroups cordon created.
Status KillAndRemoveCgroup(const CgroupRef& cgroup, int timeout_ms = 5000);

// Kills every process in the cgroup subtree (cgroup.kill: frozen ones too)
// and waits until cgroup.events says populated 0; the cgroup stays.
Status KillCgroupProcesses(const std::string& cgroup_dir, int timeout_ms = 5000);

// Writes cgroup.freeze (1 freezes every process of the subtree, 0 thaws) and
// waits until cgroup.events says frozen 1 (0).
Status SetCgroupFrozen(const std::string& cgroup_dir, bool frozen, int timeout_ms = 5000);

// Path of a cgroup id relative to the cgroup2 mount ("" if it no longer exists).
std::string CgroupPathFromId(const std::string& mount, uint64_t id);

// Moves process `pid` into cgroup.
Status MoveToCgroup(const CgroupRef& cgroup, int pid);

// The sandbox (cgroup id of an attached sandbox root, as pinned under
// `sandbox_pin_root`) that the peer of a connected unix socket runs in, or 0
// when it runs in none. The peer is identified by SO_PEERPIDFD where the
// kernel has it (6.5+; no pid reuse possible: the pidfd is checked to be
// alive after its cgroup was read), else by SO_PEERCRED's pid. Errors (the
// peer's cgroup cannot be read, it exited) mean: treat the peer as sandboxed.
Result<uint64_t> SandboxOfPeer(int socket_fd, const std::string& cgroup_mount, const std::string& sandbox_pin_root);

}  // namespace cordon
