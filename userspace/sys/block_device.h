// The block devices a sandbox can write to (issue 17, ioWriteBytesPerSecond):
// io.max (cgroup v2) and blkio.throttle.write_bps_device (v1) take a whole
// disk's MAJOR:MINOR, so each write path is mapped to the device of its file
// system, a partition to its disk. File systems without a block device
// (tmpfs, 9p, overlay, proc: major 0) have nothing to throttle: such a path
// is "not applicable" (a tmpfs is bounded by its size and by memory).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sys/cgroup.h"

namespace cordon {

struct BlockDevice {
  uint32_t major = 0, minor = 0;   // the whole disk
  std::string name;                // its sysfs name: "vda", "loop3"
  std::vector<std::string> paths;  // the write paths (or mounts below them) on it
  std::string Id() const { return std::to_string(major) + ":" + std::to_string(minor); }
};

struct UnthrottledPath {
  std::string path;
  std::string reason;  // "tmpfs at /tmp has no block device"
};

struct WriteDevices {
  std::vector<BlockDevice> devices;             // each whole disk once
  std::vector<UnthrottledPath> not_applicable;  // write paths whose own file system has no block device
};

// The whole disk of the block device MAJOR:MINOR (itself unless it is a
// partition), from /sys/dev/block; nullopt with *reason when sysfs does not
// list it as a block device.
std::optional<BlockDevice> WholeDisk(uint32_t major, uint32_t minor, std::string* reason);

// The devices writes below `paths` reach: for each path, the file system of
// the path itself (of its nearest existing ancestor when it does not exist
// yet) and of every mount below it in `mounts` (ReadMountTable()). Mounts
// below a path that have no block device are left out silently (/ has /proc
// below it); only a path's own file system is reported as not applicable.
// A block device node is that device; a character device node (/dev/null)
// is no disk and is left out.
WriteDevices ResolveWriteDevices(const std::vector<std::string>& paths, const std::vector<MountEntry>& mounts);

}  // namespace cordon
