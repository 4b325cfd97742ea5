// What `cordon run` takes away from its command before exec: the caller's
// identity, capabilities, environment, open files, terminal, keyrings and
// host-wide IPC/UTS objects. Everything fallible that can be done in the
// parent is (resolving the program, the identity, the environment);
// ChildPlan::Apply, in the child, only makes system calls on data prepared
// here (no allocation), in an order where each step still has the privilege
// it needs:
//
//   setsid (a session of its own: no controlling terminal of the caller's)
//   -> the pty slave as controlling terminal and stdio (when there is one)
//   -> unshare IPC and UTS namespaces (host System V IPC, POSIX message queues
//      and hostname stay the host's) and a mount namespace in which the
//      scratch directories are bind-mounted over /tmp and /dev/shm and the
//      kernel's control files (HostControlPaths) are read-only
//   -> a fresh anonymous session keyring (the caller's is not reachable)
//   -> cwd
//   -> groups, gid, uid; the capability bounding set, then permitted,
//      effective, inheritable and ambient sets emptied but for the policy's;
//      SECBIT_NOROOT so that uid 0 regains nothing at exec
//   -> no_new_privs, parent-death signal (setuid clears it)
//   -> every fd above 2 close-on-exec (but --keep-fd)
//
// The child runs all of this OUTSIDE the sandbox cgroup (the sandbox's BPF
// LSM programs refuse mounts, namespaces and capabilities to everything in
// it); the parent then moves it in, and only then does the child apply
// Landlock and seccomp and exec. The command's first instruction runs in the
// sandbox cgroup, confined.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "policy/compiler.h"
#include "util/result.h"

namespace cordon {

// Who the command runs as (cordon run --user / spec.runAs).
struct RunIdentity {
  uid_t uid = 0;
  gid_t gid = 0;
  bool dynamic = false;  // allocated for this run from kDynamicUidBase
  int lock_fd = -1;      // dynamic: held (flock) for the life of the run; owned by IdentityLease
};

constexpr uid_t kDynamicUidBase = 0x7E000000;  // 2113929216: above systemd's container ranges, below 2^31
constexpr uid_t kDynamicUidCount = 65536;

// Keeps a dynamic uid reserved while alive (a lock file per uid under
// /run/cordon/dynamic-uids, flock'ed); releases it when destroyed.
class IdentityLease {
 public:
  IdentityLease() = default;
  explicit IdentityLease(RunIdentity id) : id_(id) {}
  IdentityLease(IdentityLease&& o) noexcept : id_(o.id_) { o.id_.lock_fd = -1; }
  IdentityLease& operator=(IdentityLease&&) = delete;
  IdentityLease(const IdentityLease&) = delete;
  ~IdentityLease();
  const RunIdentity& id() const { return id_; }

 private:
  RunIdentity id_;
};

// "dynamic" (a fresh uid/gid pair no file and no passwd entry on the host
// belongs to, reserved for this run), "root", a user name from the passwd
// database (its primary group), or "UID[:GID]". Errors name what failed.
Result<IdentityLease> ResolveIdentity(const std::string& run_as);

// The command's environment: the caller's PATH (or a default), LANG, LC_*,
// TERM and TZ; HOME=home and SHELL=/bin/sh; then policy.environment, then
// `cli` entries ("NAME" passes the caller's value, "NAME=VALUE" sets one;
// later entries override earlier ones). Nothing starting with CORDON_ ever.
// Pure apart from reading `caller`.
Result<std::vector<std::string>> BuildEnvironment(char** caller, const policy::CompiledPolicy& policy,
                                                  const std::vector<std::string>& cli, const std::string& home);

// Resolves `command` as execvp would, against `path` (the command's own PATH,
// not cordon's), once, before anything is confined: the child execs exactly
// this file. A name with a slash is taken as it is. Error: not found / not
// executable, naming what was searched.
Result<std::string> ResolveCommand(const std::string& command, const std::string& path);

// A path the command sees read-only: in its mount namespace the mount at
// `path` (and every mount under it) is made read-only; a path that is not a
// mount root is first bind-mounted onto itself.
struct ReadOnlyPath {
  std::string path;
  bool bind_self = false;
  // An exception inside an earlier entry: made writable again (this mount
  // only). The cgroup2 mount where BPF LSM judges cgroupfs writes.
  bool writable = false;
};

// What cordon run makes read-only for every command, whatever its identity
// and mode: the kernel's control file systems a root command could otherwise
// write without any capability (file modes alone admit uid 0): /sys (cgroupfs
// with cgroup.procs and the resource limits, bpffs, debugfs, securityfs,
// sysfs attributes such as /sys/power/state), /proc's sysrq-trigger (any
// SysRq key, capability or not), irq, bus and fs, every other mount of such
// a file system type in `mounts` ({mount point, fstype}: binfmt_misc, whose
// register file has no capability check, cgroup, bpf ... mounted outside
// /sys), and cordon's own state (/run/cordon, /var/log/cordon, /etc/cordon).
// /proc/sys is judged by the cgroup sysctl program instead (with events).
// `lsm_cgroup2`, the cgroup2 mount where BPF LSM is usable ("" elsewhere),
// stays writable: BPF LSM's tamper rules let a sandbox manage the cgroups
// below its root and refuse the rest, with events. Only paths that exist
// here; whether each is a mount root is decided here, in the parent.
std::vector<ReadOnlyPath> HostControlPaths(const std::vector<std::pair<std::string, std::string>>& mounts,
                                           const std::string& lsm_cgroup2);

struct ChildPlan {
  // What to exec.
  std::string exe;
  std::vector<std::string> argv;
  std::vector<std::string> envp;
  std::string cwd;
  std::string fallback_cwd;  // where the command starts when its identity cannot enter cwd
  RunIdentity identity;
  uint64_t capabilities = 0;  // bits 1 << CAP_* kept
  // Namespaces and scratch: {source, target} bind mounts in a new mount namespace.
  std::vector<std::pair<std::string, std::string>> binds;
  // Made read-only (recursively) in that mount namespace, after the binds;
  // the mounts under each become private (the host's later mounts there do
  // not propagate in, read-write).
  std::vector<ReadOnlyPath> read_only;
  // The pty slave (-1: none) and which of stdin/stdout/stderr it replaces.
  int pty_slave = -1;
  bool pty_stdio[3] = {false, false, false};
  std::vector<int> keep_fds;  // --keep-fd: stay open across exec (as they are)
  pid_t parent = 0;

  // Pointers into the strings above, built by Finish() in the parent.
  std::vector<char*> argv_ptrs;
  std::vector<char*> envp_ptrs;
  void Finish();

  // In the child (async-signal-safe: system calls only). Returns 0, or an
  // errno with *step naming what failed. *fell_back: started in fallback_cwd.
  int Apply(const char** step, bool* fell_back) const;
};

// The steps' names, as Apply reports them.
std::string DescribeChildFailure(const char* step, int err);

}  // namespace cordon
