#include "sys/cgroup.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "sys/bpffs.h"
#include "util/fs.h"

namespace cordon {
namespace {

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string UnescapeMountField(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      int v = 0;
      bool ok = true;
      for (int k = 1; k <= 3; ++k) {
        char c = s[i + k];
        if (c < '0' || c > '7') ok = false;
        v = v * 8 + (c - '0');
      }
      if (ok) {
        out.push_back(static_cast<char>(v));
        i += 3;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

std::string Normalize(const std::string& path) {
  // Collapse "//" and "/./"; reject ".." by the caller via realpath.
  std::string out;
  for (char c : path) {
    if (c == '/' && !out.empty() && out.back() == '/') continue;
    out.push_back(c);
  }
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

}  // namespace

Result<std::vector<MountEntry>> ReadMountTable() {
  std::ifstream in("/proc/self/mountinfo");
  if (!in) return SysError("open /proc/self/mountinfo");
  std::vector<MountEntry> out;
  std::string line;
  while (std::getline(in, line)) {
    // id parent major:minor root mountpoint options [optional...] - fstype source superopts
    size_t sep = line.find(" - ");
    if (sep == std::string::npos) continue;
    std::istringstream tail(line.substr(sep + 3));
    MountEntry m;
    std::string source;
    tail >> m.fstype >> source >> m.superopts;
    std::istringstream head(line.substr(0, sep));
    std::string id, parent;
    head >> id >> parent >> m.dev >> m.root >> m.mountpoint;
    m.root = UnescapeMountField(m.root);
    m.mountpoint = UnescapeMountField(m.mountpoint);
    out.push_back(std::move(m));
  }
  return out;
}

Result<std::string> FindCgroup2Mount() {
  auto mounts = ReadMountTable();
  if (!mounts) return mounts.error();
  for (const MountEntry& m : *mounts)
    if (m.fstype == "cgroup2" && m.root == "/") return m.mountpoint;  // not a bind mount of a sub-cgroup
  return Error{"no cgroup2 filesystem is mounted (cordon needs cgroup v2; see /proc/self/mountinfo)"};
}

Result<CgroupRef> ResolveCgroup(const std::string& user_path) {
  if (user_path.empty()) return Error{"empty cgroup path"};
  auto mount = FindCgroup2Mount();
  if (!mount) return mount.error();
  std::string candidate = user_path[0] == '/' ? user_path : JoinPath(*mount, user_path);
  // A path given relative to the mount may also be absolute-looking, e.g.
  // "/sandboxes/a": prefer the literal path if it exists, else try below the mount.
  struct stat st;
  if (user_path[0] == '/' && ::stat(candidate.c_str(), &st) != 0 && errno == ENOENT) {
    std::string below = JoinPath(*mount, user_path);
    if (::stat(below.c_str(), &st) == 0) candidate = below;
  }
  char real[PATH_MAX];
  if (!::realpath(candidate.c_str(), real)) {
    if (errno == ENOENT) return Error{"cgroup " + user_path + " does not exist (looked at " + candidate + ")"};
    return SysError("resolve cgroup path " + candidate);
  }
  std::string path = Normalize(real);
  if (::stat(path.c_str(), &st) != 0) return SysError("stat " + path);
  if (!S_ISDIR(st.st_mode)) return Error{path + " is not a cgroup directory"};
  struct statfs sfs;
  if (::statfs(path.c_str(), &sfs) != 0) return SysError("statfs " + path);
  if (sfs.f_type == CGROUP_SUPER_MAGIC)
    return Error{path + " is on a cgroup v1 hierarchy; cordon needs a cgroup v2 directory (cgroup2 is mounted at " +
                 *mount + ")"};
  if (sfs.f_type != CGROUP2_SUPER_MAGIC)
    return Error{path + " is not on a cgroup filesystem (cgroup2 is mounted at " + *mount + ")"};
  std::string mnt = Normalize(*mount);
  std::string rel;
  if (path == mnt) {
    rel = "/";
  } else if (path.compare(0, mnt.size() + 1, mnt + "/") == 0) {
    rel = path.substr(mnt.size());
  } else {
    return Error{path + " is outside the cgroup2 mount " + mnt};
  }
  if (rel == "/") return Error{"refusing to confine the root cgroup (every process on the host); give a sandbox cgroup"};
  CgroupRef ref;
  ref.mount = mnt;
  ref.path = path;
  ref.relative = rel;
  ref.id = st.st_ino;
  ref.fd = UniqueFd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!ref.fd.valid()) return SysError("open cgroup " + path);
  return ref;
}

Result<CgroupRef> CreateCgroup(const std::string& relative) {
  auto mount = FindCgroup2Mount();
  if (!mount) return mount.error();
  std::string path = JoinPath(*mount, relative);
  CORDON_TRY(MakeDirs(path));
  return ResolveCgroup(path);
}

Status MoveToCgroup(const CgroupRef& cgroup, int pid) {
  return WriteFile(JoinPath(cgroup.path, "cgroup.procs"), std::to_string(pid));
}

namespace {

bool Populated(const std::string& path) {
  auto events = ReadFile(JoinPath(path, "cgroup.events"));
  if (!events) return false;  // gone
  return events->find("populated 1") != std::string::npos;
}

// Children first, so rmdir succeeds.
Status RemoveTree(const std::string& path) {
  auto names = ListDir(path);
  if (names) {
    for (const auto& name : *names) {
      std::string child = JoinPath(path, name);
      struct stat st;
      if (::lstat(child.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) CORDON_TRY(RemoveTree(child));
    }
  }
  if (::rmdir(path.c_str()) != 0 && errno != ENOENT) return SysError("rmdir " + path);
  return {};
}

}  // namespace

namespace {

// Polls cgroup.events until `key` has `value` (every 5 ms, up to timeout_ms).
bool AwaitCgroupEvent(const std::string& path, const std::string& key, char value, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    auto events = ReadFile(JoinPath(path, "cgroup.events"));
    if (events) {
      size_t at = events->find(key + " ");
      if (at != std::string::npos && at + key.size() + 1 < events->size() && (*events)[at + key.size() + 1] == value)
        return true;
    } else if (key == "populated") {
      return value == '0';  // the cgroup is gone: nothing is in it
    }
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

Status KillCgroupProcesses(const std::string& path, int timeout_ms) {
  if (!Populated(path)) return {};
  // cgroup.kill (5.14+) kills the whole subtree atomically, forks included,
  // frozen processes too.
  Status killed = WriteFile(JoinPath(path, "cgroup.kill"), "1");
  if (!killed.ok()) return killed.error().Wrap("kill processes of " + path);
  if (!AwaitCgroupEvent(path, "populated", '0', timeout_ms))
    return Error{"processes of " + path + " did not exit within " + std::to_string(timeout_ms) + " ms"};
  return {};
}

Status SetCgroupFrozen(const std::string& path, bool frozen, int timeout_ms) {
  Status written = WriteFile(JoinPath(path, "cgroup.freeze"), frozen ? "1" : "0");
  if (!written.ok()) return written.error().Wrap(std::string(frozen ? "freeze " : "thaw ") + path);
  if (!AwaitCgroupEvent(path, "frozen", frozen ? '1' : '0', timeout_ms))
    return Error{std::string("cgroup.events of ") + path + " did not say frozen " + (frozen ? "1" : "0") + " within " +
                 std::to_string(timeout_ms) + " ms"};
  return {};
}

Status KillAndRemoveCgroup(const CgroupRef& cgroup, int timeout_ms) {
  CORDON_TRY(KillCgroupProcesses(cgroup.path, timeout_ms));
  return RemoveTree(cgroup.path);
}

std::string CgroupPathFromId(const std::string& mount, uint64_t id) {
  // cgroup2 (kernfs) file handles are the 64-bit cgroup id (FILEID_KERNFS).
  struct {
    struct file_handle fh;
    uint64_t id;
  } handle;
  handle.fh.handle_bytes = sizeof(uint64_t);
  handle.fh.handle_type = 0xfe;  // FILEID_KERNFS
  std::memcpy(handle.fh.f_handle, &id, sizeof id);
  UniqueFd mfd(::open(mount.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!mfd.valid()) return "";
  UniqueFd fd(::open_by_handle_at(mfd.get(), &handle.fh, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return "";
  char buf[PATH_MAX];
  std::string link = "/proc/self/fd/" + std::to_string(fd.get());
  ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string path(buf, static_cast<size_t>(n));
  // The link is relative to this process's cgroup namespace root: "/a/b".
  if (path.compare(0, mount.size(), mount) == 0) path = path.substr(mount.size());
  return path.empty() ? "/" : path;
}

namespace {

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

// The pid a pidfd refers to (its fdinfo "Pid:" line; -1 if it exited).
Result<int> PidOfPidfd(int pidfd) {
  std::ifstream in("/proc/self/fdinfo/" + std::to_string(pidfd));
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("Pid:", 0) == 0) return std::atoi(line.c_str() + 4);
  return Error{"read the peer's pidfd information"};
}

}  // namespace

Result<uint64_t> SandboxOfPeer(int socket_fd, const std::string& cgroup_mount, const std::string& sandbox_pin_root) {
  int pid = -1;
  UniqueFd pidfd;
  {
    int raw = -1;
    socklen_t len = sizeof raw;
    if (::getsockopt(socket_fd, SOL_SOCKET, SO_PEERPIDFD, &raw, &len) == 0 && raw >= 0) {
      pidfd.Reset(raw);
      auto got = PidOfPidfd(pidfd.get());
      if (!got) return got.error();
      pid = *got;
    } else {
      struct ucred cred = {};
      len = sizeof cred;
      if (::getsockopt(socket_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return SysError("SO_PEERCRED");
      pid = cred.pid;
    }
  }
  if (pid <= 0) return Error{"the peer has exited"};
  std::ifstream in("/proc/" + std::to_string(pid) + "/cgroup");
  if (!in) return SysError("read the peer's cgroup");
  std::string line, path;
  while (std::getline(in, line))
    if (line.rfind("0::", 0) == 0) path = line.substr(3);
  if (path.empty() || path[0] != '/') return Error{"the peer's cgroup v2 membership is unknown"};
  // The pidfd still names a live process, so the pid above was not reused.
  if (pidfd.valid() && ::syscall(SYS_pidfd_send_signal, pidfd.get(), 0, nullptr, 0) != 0)
    return SysError("the peer exited while its cgroup was read");
  // Its cgroup and every ancestor: is one an attached sandbox?
  for (;;) {
    struct stat st;
    std::string dir = cgroup_mount + (path == "/" ? "" : path);
    if (::stat(dir.c_str(), &st) == 0) {
      struct stat pin;
      if (::stat(SandboxPinDir(sandbox_pin_root, st.st_ino).c_str(), &pin) == 0) return static_cast<uint64_t>(st.st_ino);
    } else if (errno != ENOENT) {
      return SysError("stat " + dir);
    }
    if (path == "/") return uint64_t{0};
    size_t slash = path.rfind('/');
    path = slash == 0 ? "/" : path.substr(0, slash);
  }
}

}  // namespace cordon
