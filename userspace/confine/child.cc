#include "confine/child.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <random>

#include "util/fs.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_RAISE 2
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

namespace cordon {
namespace {

constexpr const char* kDynamicUidDir = "/run/cordon/dynamic-uids";
constexpr const char* kDefaultPath = "/usr/local/bin:/usr/bin:/bin";
constexpr int kKeyctlJoinSessionKeyring = 1;
constexpr int kCapLastCapMax = 63;

bool ParseNumber(const std::string& s, uint32_t* out) {
  if (s.empty() || s.size() > 10) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v >= (1ull << 31)) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

}  // namespace

IdentityLease::~IdentityLease() {
  if (id_.lock_fd >= 0) {
    // The lock file stays (an empty file per uid ever used): removing it
    // would race with the next run locking it.
    ::close(id_.lock_fd);
  }
}

Result<IdentityLease> ResolveIdentity(const std::string& run_as) {
  RunIdentity id;
  if (run_as.empty() || run_as == "dynamic") {
    if (Status made = MakeDirs(kDynamicUidDir, 0700); !made.ok()) return made.error();
    std::random_device rd;
    const uint32_t start = rd() % kDynamicUidCount;
    for (uint32_t i = 0; i < kDynamicUidCount; ++i) {
      uid_t uid = kDynamicUidBase + (start + i) % kDynamicUidCount;
      // Not a user of the host's databases (a uid someone configured).
      if (::getpwuid(uid) != nullptr || ::getgrgid(uid) != nullptr) continue;
      std::string lock = std::string(kDynamicUidDir) + "/" + std::to_string(uid);
      int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
      if (fd < 0) return SysError("open " + lock);
      if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        ::close(fd);
        continue;
      }
      id.uid = uid;
      id.gid = uid;
      id.dynamic = true;
      id.lock_fd = fd;
      return IdentityLease(id);
    }
    return Error{"no free dynamic uid in " + std::to_string(kDynamicUidBase) + ".." +
                 std::to_string(kDynamicUidBase + kDynamicUidCount - 1)};
  }
  if (run_as == "root") return IdentityLease(id);
  size_t colon = run_as.find(':');
  uint32_t uid = 0, gid = 0;
  if (colon != std::string::npos) {
    if (!ParseNumber(run_as.substr(0, colon), &uid) || !ParseNumber(run_as.substr(colon + 1), &gid))
      return Error{"invalid identity '" + run_as + "' (expected dynamic, root, a user name or UID[:GID])"};
  } else if (ParseNumber(run_as, &uid)) {
    const struct passwd* pw = ::getpwuid(uid);
    gid = pw ? pw->pw_gid : uid;
  } else {
    const struct passwd* pw = ::getpwnam(run_as.c_str());
    if (!pw) return Error{"unknown user '" + run_as + "' (spec.runAs / --user)"};
    uid = pw->pw_uid;
    gid = pw->pw_gid;
  }
  id.uid = uid;
  id.gid = gid;
  return IdentityLease(id);
}

Result<std::vector<std::string>> BuildEnvironment(char** caller, const policy::CompiledPolicy& policy,
                                                  const std::vector<std::string>& cli, const std::string& home) {
  std::map<std::string, std::string> caller_env;
  for (char** e = caller; e && *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq) caller_env.emplace(std::string(*e, static_cast<size_t>(eq - *e)), eq + 1);
  }
  std::vector<std::pair<std::string, std::string>> out;  // in order, names unique
  auto set = [&](const std::string& name, const std::string& value) {
    for (auto& [n, v] : out)
      if (n == name) return void(v = value);
    out.emplace_back(name, value);
  };
  auto pass = [&](const std::string& name) {
    auto it = caller_env.find(name);
    if (it != caller_env.end()) set(name, it->second);
  };
  auto path = caller_env.find("PATH");
  set("PATH", path != caller_env.end() && !path->second.empty() ? path->second : kDefaultPath);
  pass("LANG");
  for (const auto& [name, value] : caller_env)
    if (name.rfind("LC_", 0) == 0) set(name, value);
  pass("TERM");
  pass("TZ");
  set("HOME", home);
  set("SHELL", "/bin/sh");
  for (const auto& e : policy.environment) {
    if (e.pass_through) pass(e.name);
    else set(e.name, e.value);
  }
  for (const auto& entry : cli) {
    size_t eq = entry.find('=');
    std::string name = entry.substr(0, eq);
    bool valid = !name.empty();
    for (size_t i = 0; i < name.size() && valid; ++i) {
      char c = name[i];
      valid = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' || (i > 0 && c >= '0' && c <= '9');
    }
    if (!valid) return Error{"--env " + entry + ": expected NAME or NAME=VALUE, NAME from A-Z a-z 0-9 _"};
    if (name.rfind("CORDON_", 0) == 0) return Error{"--env " + name + ": CORDON_* variables never reach the workload"};
    if (eq == std::string::npos) pass(name);
    else set(name, entry.substr(eq + 1));
  }
  std::vector<std::string> env;
  env.reserve(out.size());
  for (auto& [n, v] : out) env.push_back(n + "=" + v);
  return env;
}

Result<std::string> ResolveCommand(const std::string& command, const std::string& path) {
  auto executable = [](const std::string& file) {
    struct stat st;
    return ::stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111);
  };
  if (command.empty()) return Error{"empty command"};
  if (command.find('/') != std::string::npos) {
    if (!executable(command)) {
      struct stat st;
      if (::stat(command.c_str(), &st) != 0) return SysError("cannot execute " + command);
      return Error{"cannot execute " + command + ": not an executable regular file"};
    }
    return command;
  }
  size_t begin = 0;
  for (;;) {
    size_t end = path.find(':', begin);
    std::string dir = path.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + command;
    if (executable(candidate)) return candidate;
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  return Error{"cannot execute " + command + ": not found in the command's PATH (" + path + ")"};
}

void ChildPlan::Finish() {
  argv_ptrs.clear();
  for (auto& a : argv) argv_ptrs.push_back(a.data());
  argv_ptrs.push_back(nullptr);
  envp_ptrs.clear();
  for (auto& e : envp) envp_ptrs.push_back(e.data());
  envp_ptrs.push_back(nullptr);
}

std::vector<ReadOnlyPath> HostControlPaths(const std::vector<std::pair<std::string, std::string>>& mounts,
                                           const std::string& lsm_cgroup2) {
  std::vector<ReadOnlyPath> out;
  auto is_mount_root = [](const std::string& path, bool* root) {
    struct statx st = {};
    if (::statx(AT_FDCWD, path.c_str(), AT_SYMLINK_NOFOLLOW, STATX_TYPE, &st) != 0) return false;
    *root = (st.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) && (st.stx_attributes & STATX_ATTR_MOUNT_ROOT);
    return true;
  };
  auto covered = [&out](const std::string& path) {
    for (const ReadOnlyPath& ro : out)
      if (path == ro.path || (path.rfind(ro.path, 0) == 0 && path[ro.path.size()] == '/')) return true;
    return false;
  };
  for (const char* path : {"/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs",
                           // cordon's own state: other runs' identity locks and scratch, audit logs, config.
                           "/run/cordon", "/var/log/cordon", "/etc/cordon"}) {
    bool root = false;
    if (is_mount_root(path, &root)) out.push_back({path, !root, false});
  }
  // Kernel control file systems mounted anywhere else (binfmt_misc under
  // /proc/sys/fs, a cgroup or bpf mount outside /sys ...).
  static const char* const kControlTypes[] = {"binfmt_misc", "cgroup", "cgroup2", "sysfs", "bpf", "debugfs",
                                              "tracefs", "securityfs", "configfs", "efivarfs", "pstore", "fusectl"};
  for (const auto& [mountpoint, fstype] : mounts) {
    bool control = false;
    for (const char* t : kControlTypes) control = control || fstype == t;
    bool root = false;
    if (control && !covered(mountpoint) && is_mount_root(mountpoint, &root) && root)
      out.push_back({mountpoint, false, false});
  }
  bool root = false;
  if (!lsm_cgroup2.empty() && covered(lsm_cgroup2) && is_mount_root(lsm_cgroup2, &root) && root)
    out.push_back({lsm_cgroup2, false, true});
  return out;
}

int ChildPlan::Apply(const char** step, bool* fell_back) const {
  *fell_back = false;
#define CORDON_STEP(name, call)   \
  do {                            \
    if ((call) < 0) {             \
      *step = name;               \
      return errno ? errno : EIO; \
    }                             \
  } while (0)
  CORDON_STEP("setsid", ::setsid());
  if (pty_slave >= 0) {
    CORDON_STEP("make the pty the controlling terminal", ::ioctl(pty_slave, TIOCSCTTY, 0));
    for (int i = 0; i < 3; ++i)
      if (pty_stdio[i]) CORDON_STEP("dup2 the pty", ::dup2(pty_slave, i));
    if (pty_slave > 2) ::close(pty_slave);
  }
  const bool mounts = !binds.empty() || !read_only.empty();
  CORDON_STEP("unshare IPC and UTS namespaces", ::unshare(CLONE_NEWIPC | CLONE_NEWUTS | (mounts ? CLONE_NEWNS : 0)));
  if (mounts) {
    CORDON_STEP("make the mount namespace a slave", ::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr));
    for (const auto& [source, target] : binds) {
      CORDON_STEP("bind the scratch directory", ::mount(source.c_str(), target.c_str(), nullptr, MS_BIND, nullptr));
      CORDON_STEP("remount the scratch directory nosuid,nodev",
                  ::mount(nullptr, target.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV, nullptr));
    }
    for (const ReadOnlyPath& ro : read_only) {
      const char* path = ro.path.c_str();
      if (ro.writable) {
        struct mount_attr attr = {};
        attr.attr_clr = MOUNT_ATTR_RDONLY;
        CORDON_STEP("leave the cgroup2 mount writable (BPF LSM judges it)",
                    ::syscall(SYS_mount_setattr, AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, &attr, sizeof attr));
        continue;
      }
      if (ro.bind_self) CORDON_STEP("bind a kernel control file onto itself", ::mount(path, path, nullptr, MS_BIND | MS_REC, nullptr));
      CORDON_STEP("make the mounts under a kernel control path private",
                  ::mount(nullptr, path, nullptr, MS_REC | MS_PRIVATE, nullptr));
      struct mount_attr attr = {};
      attr.attr_set = MOUNT_ATTR_RDONLY;
      CORDON_STEP("make the kernel's control files read-only (/sys, /proc/sysrq-trigger ...)",
                  ::syscall(SYS_mount_setattr, AT_FDCWD, path, AT_RECURSIVE | AT_SYMLINK_NOFOLLOW, &attr, sizeof attr));
    }
  }
  // uid 0 is nobody special from here on: exec grants it no capability.
  CORDON_STEP("set securebits",
              ::prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED |
                                             (capabilities ? SECBIT_KEEP_CAPS : 0),
                      0, 0, 0));
  // The kernel's last capability, without reading /proc: probe the bounding set.
  int last = 0;
  while (last < kCapLastCapMax && ::prctl(PR_CAPBSET_READ, last + 1, 0, 0, 0) >= 0) ++last;
  for (int cap = 0; cap <= last; ++cap)
    if (!(capabilities & (1ull << cap))) CORDON_STEP("drop from the capability bounding set", ::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0));
  CORDON_STEP("setgroups", ::syscall(SYS_setgroups, 0, nullptr));
  CORDON_STEP("setresgid", ::syscall(SYS_setresgid, identity.gid, identity.gid, identity.gid));
  CORDON_STEP("setresuid", ::syscall(SYS_setresuid, identity.uid, identity.uid, identity.uid));
  {
    struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2] = {};
    data[0].permitted = data[0].effective = data[0].inheritable = static_cast<uint32_t>(capabilities);
    data[1].permitted = data[1].effective = data[1].inheritable = static_cast<uint32_t>(capabilities >> 32);
    CORDON_STEP("set the capability sets", ::syscall(SYS_capset, &header, data));
  }
  CORDON_STEP("clear the ambient capabilities", ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0));
  for (int cap = 0; cap <= last; ++cap)
    if (capabilities & (1ull << cap))
      CORDON_STEP("raise an ambient capability", ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0));
  CORDON_STEP("join a fresh session keyring", ::syscall(SYS_keyctl, kKeyctlJoinSessionKeyring, nullptr));
  if (::chdir(cwd.c_str()) != 0) {
    if (fallback_cwd.empty() || (errno != EACCES && errno != ENOENT && errno != ENOTDIR)) {
      *step = "chdir to the working directory";
      return errno;
    }
    CORDON_STEP("chdir to the fallback working directory", ::chdir(fallback_cwd.c_str()));
    *fell_back = true;
  }
  CORDON_STEP("set the parent-death signal", ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0));
  if (::getppid() != parent) {
    *step = "wait for cordon (it exited)";
    return ESRCH;
  }
  CORDON_STEP("set no_new_privs", ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0));
  CORDON_STEP("mark inherited descriptors close-on-exec", ::syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC));
  for (int fd : keep_fds) CORDON_STEP("keep a descriptor (--keep-fd)", ::fcntl(fd, F_SETFD, 0));
#undef CORDON_STEP
  return 0;
}

std::string DescribeChildFailure(const char* step, int err) {
  return std::string(step ? step : "prepare the command") + ": " + std::strerror(err);
}

}  // namespace cordon
