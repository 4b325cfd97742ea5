#include "sys/block_device.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cerrno>
#include <cstdio>

#include "util/fs.h"

namespace cordon {
namespace {

bool ParseDevId(const std::string& text, uint32_t* major, uint32_t* minor) {
  unsigned a = 0, b = 0;
  char end = 0;
  if (std::sscanf(text.c_str(), "%u:%u%c", &a, &b, &end) < 2) return false;
  if (end != 0 && end != '\n') return false;
  *major = a;
  *minor = b;
  return true;
}

// `path` or, when it does not exist yet (a create rule), its nearest existing ancestor.
std::string Existing(std::string path) {
  struct stat st;
  while (path.size() > 1 && ::stat(path.c_str(), &st) != 0) {
    const size_t slash = path.rfind('/');
    path = slash == 0 ? "/" : path.substr(0, slash);
  }
  return path;
}

bool Below(const std::string& path, const std::string& dir) {
  if (dir == "/") return path != "/";
  return path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/';
}

}  // namespace

std::optional<BlockDevice> WholeDisk(uint32_t major, uint32_t minor, std::string* reason) {
  const std::string id = std::to_string(major) + ":" + std::to_string(minor);
  const std::string sys = "/sys/dev/block/" + id;
  char real[PATH_MAX];
  if (major == 0 || !::realpath(sys.c_str(), real)) {
    *reason = "device " + id + " is not a block device (not in /sys/dev/block)";
    return std::nullopt;
  }
  std::string dir = real;
  struct stat st;
  // A partition's disk is its parent directory in sysfs (io.max refuses partitions).
  if (::stat(JoinPath(dir, "partition").c_str(), &st) == 0) {
    dir = dir.substr(0, dir.rfind('/'));
    auto text = ReadFile(JoinPath(dir, "dev"), 64);
    if (!text || !ParseDevId(*text, &major, &minor)) {
      *reason = "the disk of partition " + id + " (" + dir + "/dev) cannot be read";
      return std::nullopt;
    }
  }
  BlockDevice device;
  device.major = major;
  device.minor = minor;
  device.name = dir.substr(dir.rfind('/') + 1);
  return device;
}

WriteDevices ResolveWriteDevices(const std::vector<std::string>& paths, const std::vector<MountEntry>& mounts) {
  WriteDevices out;
  auto add = [&out](const BlockDevice& disk, const std::string& path) {
    for (BlockDevice& d : out.devices)
      if (d.major == disk.major && d.minor == disk.minor) {
        for (const auto& p : d.paths)
          if (p == path) return;
        d.paths.push_back(path);
        return;
      }
    out.devices.push_back(disk);
    out.devices.back().paths = {path};
  };
  for (const std::string& path : paths) {
    const std::string existing = Existing(path);
    struct stat st;
    if (::stat(existing.c_str(), &st) != 0) {
      out.not_applicable.push_back({path, SysError("stat " + existing).ToString()});
      continue;
    }
    if (S_ISCHR(st.st_mode)) continue;  // /dev/null, a tty: no disk behind it
    // A block device node: writes to it go to that device.
    const dev_t dev = S_ISBLK(st.st_mode) ? st.st_rdev : st.st_dev;
    const uint32_t major = ::major(dev), minor = ::minor(dev);
    const std::string id = std::to_string(major) + ":" + std::to_string(minor);
    std::string reason;
    if (auto disk = WholeDisk(major, minor, &reason)) {
      add(*disk, path);
    } else {
      // The mount it is on names the file system (the last one mounted wins).
      std::string fs = "the file system";
      for (const MountEntry& m : mounts)
        if (m.dev == id && (existing == m.mountpoint || Below(existing, m.mountpoint)))
          fs = m.fstype + " at " + m.mountpoint;
      out.not_applicable.push_back({path, fs + " has no block device" + (major ? " (" + reason + ")" : "")});
    }
    for (const MountEntry& m : mounts) {
      uint32_t mount_major = 0, mount_minor = 0;
      if (!Below(m.mountpoint, existing) || !ParseDevId(m.dev, &mount_major, &mount_minor) || mount_major == 0)
        continue;
      std::string ignored;
      if (auto disk = WholeDisk(mount_major, mount_minor, &ignored)) add(*disk, m.mountpoint);
    }
  }
  return out;
}

}  // namespace cordon
