// Owners of what `cordon run` creates for one command: the private scratch
// (/tmp and /dev/shm), the ephemeral sandbox (cgroup + attached policy), the
// forwarded-signal mask, and the confined child (clone3, pidfd, the pipes of
// its start-up handshake). Each destructor undoes what is left, so that every
// early return of `cordon run` leaves nothing behind.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <memory>
#include <string>

#include "confine/child.h"
#include "loader/sandbox.h"
#include "sys/cgroup.h"
#include "util/fd.h"
#include "util/result.h"

namespace cordon {

struct LandlockPlan;
struct SeccompPlan;
class PtyRelay;

namespace cli {

// The private /tmp and /dev/shm of one run: a size-limited tmpfs mounted by
// cordon under /run/cordon/scratch/<run> (root-only), with tmp/ and shm/
// owned by the command's identity, bind-mounted over /tmp and /dev/shm in
// the command's own mount namespace. Unmounted and removed when destroyed;
// a run killed before that leaves it for the next run to remove.
class Scratch {
 public:
  static Result<std::unique_ptr<Scratch>> Create(const std::string& name, uid_t uid, gid_t gid);
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

// The ephemeral sandbox of one run: a cgroup cordon created (only that one is
// ever killed and removed), the policy attached to it, and the run's scratch.
// Destroyed without Cleanup(): kills what is left in the cgroup, detaches the
// sandbox (if attached), removes the cgroup and the scratch.
class RunSandbox {
 public:
  // Creates <cgroup2>/<relative>. Error: CreateCgroup's.
  static Result<std::unique_ptr<RunSandbox>> Create(const std::string& relative, std::unique_ptr<Scratch> scratch);
  ~RunSandbox();
  RunSandbox(const RunSandbox&) = delete;
  RunSandbox& operator=(const RunSandbox&) = delete;

  // AttachSandbox; on failure the cgroup is killed and removed at once (the
  // attach left nothing attached). Error: AttachSandbox's.
  Status Attach(const policy::CompiledPolicy& policy, const AttachOptions& options);

  const CgroupRef& cgroup() const { return cgroup_; }
  uint64_t id() const { return cgroup_.id; }

  // Kills leftovers, then detaches, then removes the shared parent of run
  // cgroups if it is empty; prints "cleanup: ..." for what failed. True when
  // all of it succeeded. Once only (later calls: true).
  bool Cleanup();
  // The same in steps, for a run whose agent detaches the sandbox: the
  // cgroup killed and removed first, then (if the agent did not) detached.
  Status KillAndRemove();
  Status Detach();
  void RemoveSharedParent();
  // The agent detached it (what Detach() would have done).
  void DetachedElsewhere() { attached_ = false; }

 private:
  RunSandbox() = default;
  CgroupRef cgroup_;
  std::unique_ptr<Scratch> scratch_;
  bool removed_ = false;   // cgroup killed and removed (or tried)
  bool attached_ = false;  // policy attached, not yet detached
};

// The forwarded signals blocked (and read from a signalfd) from construction
// until Restore(): one arriving while the sandbox is being built must not
// kill cordon half-way; it reaches the command once started. Destruction
// does not unblock them: a signal still pending would end cordon before it
// returns its exit status.
class HeldSignals {
 public:
  HeldSignals(const int* signals, size_t count);
  ~HeldSignals() = default;
  HeldSignals(const HeldSignals&) = delete;
  HeldSignals& operator=(const HeldSignals&) = delete;
  void Restore();
  int fd() const { return fd_.get(); }
  const sigset_t& previous() const { return previous_; }

 private:
  sigset_t held_, previous_;
  UniqueFd fd_;
  bool restored_ = false;
};

// What the child applies to itself once inside the sandbox cgroup, just
// before exec (either may be null / empty).
struct ChildConfinement {
  const LandlockPlan* landlock = nullptr;  // applied when its ruleset is valid
  bool landlock_proc_self = false;
  const SeccompPlan* seccomp = nullptr;  // applied when its program is not empty
};

// The confined child of `cordon run`: created by clone3 OUTSIDE the sandbox
// cgroup (it first drops what the sandbox would refuse it, see
// confine/child.h), moved in by Enter(), and only then confined and exec'ed.
// Owns the pidfd and the handshake pipes; destroyed while the child was never
// reaped, kills it (SIGKILL through the pidfd) and reaps it.
class ConfinedChild {
 public:
  // The child reports a failure before exec as {stage, errno}; {kStageReady,
  // fallback} when it is ready to be moved into the sandbox cgroup.
  enum Stage : int { kStageLandlock = 1, kStageSeccomp = 2, kStageExec = 3, kStagePrepare = 4, kStageReady = 5 };

  // Creates the pipes and the child. `plan` and `confinement` must outlive
  // the child's exec (the child uses the parent's copy of them); the child
  // restores `child_mask` as its signal mask. Errors: "pipe: ..." or
  // "clone3: ..." (as the messages cordon prints).
  static Result<std::unique_ptr<ConfinedChild>> Start(const ChildPlan& plan, const ChildConfinement& confinement,
                                                      const sigset_t& child_mask);
  ~ConfinedChild();
  ConfinedChild(const ConfinedChild&) = delete;
  ConfinedChild& operator=(const ConfinedChild&) = delete;

  // Waits for the child to be ready, moves it into `cgroup` and lets it go
  // on (or, if it cannot be moved, prints why and lets it exit 127); then
  // hands the pty to it; then waits for its exec (or its failure report).
  // A note when it started in plan.fallback_cwd, unless quiet.
  void Enter(const CgroupRef& cgroup, PtyRelay* pty, bool quiet);

  int pidfd() const { return pidfd_.get(); }
  // Reaps the child once the pidfd is readable; true with its status
  // (exit code, 128+N for signal N) once it ended.
  bool Reap(int* exit_status);
  // The child's failure before exec, printed as cordon prints it; false when
  // it exec'ed (or ended without a report).
  bool ReportFailure() const;

 private:
  ConfinedChild() = default;
  const ChildPlan* plan_ = nullptr;
  pid_t pid_ = -1;
  UniqueFd pidfd_;
  UniqueFd report_;  // read end: {stage, errno}
  UniqueFd go_;      // write end: 'g' once in the cgroup
  bool reaped_ = false;
  ssize_t got_ = 0;
  int report_data_[2] = {0, 0};
  const char* failed_step_ = nullptr;
};

}  // namespace cli
}  // namespace cordon
