// The use case of `cordon run` below its terminal and its child: a fresh
// cgroup with the policy attached (EphemeralSandbox) and the run's private
// scratch, each removed on every way out. The CLI adds the confined child,
// the pty and the events (cli/run.cc); nothing here prints.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "loader/sandbox.h"
#include "policy/compiler.h"
#include "sys/cgroup.h"
#include "sys/cgroup_limits.h"
#include "sys/cgroup_v1.h"
#include "util/fd.h"
#include "util/result.h"

namespace cordon::ops {

// The private /tmp and /dev/shm of one run: a size-limited tmpfs (2 GiB, or
// spec.resources.disk: writes beyond it fail with ENOSPC) mounted by
// cordon under /run/cordon/scratch/<run> (root-only), with tmp/ and shm/
// owned by the command's identity, bind-mounted over /tmp and /dev/shm in
// the command's own mount namespace. Unmounted and removed when destroyed;
// a run killed before that leaves it for the next run to remove.
class Scratch {
 public:
  static Result<std::unique_ptr<Scratch>> Create(const std::string& name, uid_t uid, gid_t gid, uint64_t size = 0);
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  std::string tmp() const { return path_ + "/tmp"; }
  std::string shm() const { return path_ + "/shm"; }

 private:
  Scratch() = default;
  static void RemoveStale();
  std::string path_;
  bool made_ = false, mounted_ = false;
};

// The cordon run that made an ephemeral sandbox, and whether it still runs.
// A run holds an exclusive lock on /run/cordon/runs/<its cgroup's name> for
// its whole life; the kernel drops it when the run dies (kill -9 included),
// so neither a reused pid nor another pid namespace fools this, and the
// directory is hidden from every run's command (an empty directory over it),
// so a command cannot hold the lock for its dead run. Without a lock file of
// root's (a sandbox of another version, /run/cordon removed) it is unknown:
// a run is never called ended without proof.
struct RunOwner {
  enum class State { kUnknown, kRunning, kEnded };
  int pid = 0;  // from the cgroup's name (run-<pid>-<suffix>), as the run saw it; 0: not a run's
  State state = State::kUnknown;
};
RunOwner OwnerOfRun(const std::string& cgroup_path);
// The lock file of the run whose cgroup is `cgroup_path`.
std::string RunLockPath(const std::string& cgroup_path);
// The directory of the runs' locks, made if missing (for the command's
// mount namespace to cover).
Result<std::string> RunLocksDir();

struct RunRequest;
class EphemeralSandbox;
Result<std::unique_ptr<EphemeralSandbox>> Run(RunRequest request);

// The ephemeral sandbox of one run: a cgroup cordon created (only that one is
// ever killed and removed), the policy attached to it, and the run's scratch.
// Destroyed without Cleanup(): kills what is left in the cgroup, detaches the
// sandbox (if attached), removes the cgroup and the scratch.
class EphemeralSandbox {
 public:
  ~EphemeralSandbox();
  EphemeralSandbox(const EphemeralSandbox&) = delete;
  EphemeralSandbox& operator=(const EphemeralSandbox&) = delete;

  const CgroupRef& cgroup() const { return cgroup_; }
  uint64_t id() const { return cgroup_.id; }
  // spec.resources as applied to the cgroup (empty: the policy sets none).
  const std::vector<CgroupLimitOutcome>& limits() const { return limits_; }
  // Moves the command (not yet exec'ed) into the run's cgroup v1 cgroups
  // (hybrid hosts: the limits cgroup2 cannot have), then into the sandbox
  // cgroup.
  cordon::Status Place(pid_t pid) const;
  // What the run's v1 cgroups used (empty without any); read before Cleanup.
  CgroupV1Usage V1Usage() const { return v1_ ? v1_->ReadUsage() : CgroupV1Usage{}; }
  // The run's v1 cgroup directories (none: no limit needed v1).
  std::vector<std::string> V1Paths() const { return v1_ ? v1_->paths() : std::vector<std::string>{}; }

  // Kills leftovers, then detaches, then removes the shared parent of run
  // cgroups if it is empty. True when all of it succeeded; else *errors has
  // what failed. Once only (later calls: true).
  bool Cleanup(std::vector<std::string>* errors);
  // The same in steps, for a run whose agent detaches the sandbox: the
  // cgroup killed and removed first, then (if the agent did not) detached.
  cordon::Status KillAndRemove();
  cordon::Status Detach();
  void RemoveSharedParent();
  // The agent detached it (what Detach() would have done).
  void DetachedElsewhere() { attached_ = false; }
  // Drops and removes the run's lock (RunOwner): done by Cleanup() when it
  // succeeded and when destroyed with nothing attached.
  void ReleaseLock();

 private:
  friend Result<std::unique_ptr<EphemeralSandbox>> Run(RunRequest request);
  EphemeralSandbox() = default;
  CgroupRef cgroup_;
  std::unique_ptr<Scratch> scratch_;
  std::vector<CgroupLimitOutcome> limits_;
  std::unique_ptr<CgroupV1Placement> v1_;  // removed with the sandbox cgroup (KillAndRemove)
  bool removed_ = false;   // cgroup killed and removed (or tried)
  bool attached_ = false;  // policy attached, not yet detached
  std::string lock_path_;  // RunLockPath(): held while this run lives
  UniqueFd lock_;
};

struct RunRequest {
  std::string cgroup;  // relative to the cgroup2 mount, created here: /cordon/run-<pid>-<suffix>
  std::unique_ptr<Scratch> scratch;  // owned by the sandbox from here on (may be null)
  const policy::CompiledPolicy* policy = nullptr;
  AttachOptions options;  // ephemeral is set here
};

// Creates the cgroup, sets the policy's spec.resources on it (on a hybrid
// host the limits cgroup2 cannot have in v1 cgroups of the run's own; a
// limit this host cannot enforce is an outcome, not an error: limits()), and attaches
// the policy. On failure nothing is left: the cgroup is killed and removed,
// the scratch too. Errors: "create sandbox cgroup: ...", "resource limits:
// ...; command not started" or the attach's error then "; command not started".
Result<std::unique_ptr<EphemeralSandbox>> Run(RunRequest request);

}  // namespace cordon::ops
