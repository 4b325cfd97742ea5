// Owners of what `cordon run` holds for one command beyond its sandbox
// (ops/ephemeral.h): the forwarded-signal mask and the confined child
// (clone3, pidfd, the pipes of its start-up handshake). Each destructor
// undoes what is left, so that every early return of `cordon run` leaves
// nothing behind.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>

#include "confine/child.h"
#include "sys/cgroup.h"
#include "util/fd.h"
#include "util/result.h"

namespace cordon {

struct LandlockPlan;
struct SeccompPlan;
class PtyRelay;

namespace cli {

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

  // Waits for the child to be ready, moves it into its sandbox with
  // `move_in` (the sandbox cgroup, and on hybrid hosts the run's v1 cgroups)
  // and lets it go on (or, if it cannot be moved, prints why and lets it
  // exit 127); then hands the pty to it; then waits for its exec (or its
  // failure report). A note when it started in plan.fallback_cwd, unless quiet.
  void Enter(const std::function<Status(pid_t)>& move_in, PtyRelay* pty, bool quiet);

  int pidfd() const { return pidfd_.get(); }
  pid_t pid() const { return pid_; }
  // Reaps the child once the pidfd is readable; true with its status
  // (exit code, 128+N for signal N) once it ended.
  bool Reap(int* exit_status);
  // The child's failure before exec, printed as cordon prints it, and the
  // exit status for it: 126 when exec was refused (EACCES, EPERM; saying so
  // when the policy grants no exec of the program: `policy_execs` false),
  // 127 for any other failure; 0 when it exec'ed (or ended without a report).
  int ReportFailure(bool policy_execs) const;

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
