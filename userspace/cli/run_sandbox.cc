#include "cli/run_sandbox.h"

#include <fcntl.h>
#include <linux/sched.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "cli/common.h"
#include "confine/landlock.h"
#include "confine/pty.h"
#include "confine/seccomp.h"
#include "util/fs.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

namespace cordon::cli {
namespace {

// clone3 with a pidfd, into cgroup_fd's cgroup (-1: the caller's).
pid_t Clone3IntoCgroup(int cgroup_fd, int* pidfd) {
  struct clone_args ca;
  std::memset(&ca, 0, sizeof ca);
  ca.flags = (cgroup_fd >= 0 ? CLONE_INTO_CGROUP : 0) | CLONE_PIDFD;
  ca.pidfd = reinterpret_cast<uintptr_t>(pidfd);
  ca.exit_signal = SIGCHLD;
  ca.cgroup = cgroup_fd >= 0 ? static_cast<uint64_t>(cgroup_fd) : 0;
  return static_cast<pid_t>(::syscall(SYS_clone3, &ca, sizeof ca));
}

}  // namespace

// ---- HeldSignals

HeldSignals::HeldSignals(const int* signals, size_t count) {
  sigemptyset(&held_);
  for (size_t i = 0; i < count; ++i) sigaddset(&held_, signals[i]);
  sigprocmask(SIG_BLOCK, &held_, &previous_);
  fd_ = UniqueFd(::signalfd(-1, &held_, SFD_CLOEXEC | SFD_NONBLOCK));
}

void HeldSignals::Restore() {
  if (restored_) return;
  restored_ = true;
  sigprocmask(SIG_SETMASK, &previous_, nullptr);
}

// ---- ConfinedChild

Result<std::unique_ptr<ConfinedChild>> ConfinedChild::Start(const ChildPlan& plan, const ChildConfinement& confinement,
                                                            const sigset_t& child_mask) {
  std::unique_ptr<ConfinedChild> self(new ConfinedChild());
  self->plan_ = &plan;
  int report_pipe[2], go_pipe[2];
  if (::pipe2(report_pipe, O_CLOEXEC) != 0) return Error{std::string("pipe: ") + std::strerror(errno)};
  UniqueFd report_write(report_pipe[1]);
  self->report_ = UniqueFd(report_pipe[0]);
  if (::pipe2(go_pipe, O_CLOEXEC) != 0) return Error{std::string("pipe: ") + std::strerror(errno)};
  UniqueFd go_read(go_pipe[0]);
  self->go_ = UniqueFd(go_pipe[1]);

  int pidfd_raw = -1;
  pid_t parent = ::getpid();
  // Not into the sandbox cgroup yet: the child first drops what the sandbox
  // would refuse it (namespaces, mounts, identity; see confine/child.h), then
  // the parent moves it in, and only then does it confine itself and exec.
  pid_t child = Clone3IntoCgroup(-1, &pidfd_raw);
  if (child == 0) {
    ::close(report_pipe[0]);
    ::close(go_pipe[1]);
    sigprocmask(SIG_SETMASK, &child_mask, nullptr);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) _exit(127);
    int report[2] = {0, 0};
    bool fell_back = false;
    const char* failed_step = nullptr;
    if ((report[1] = plan.Apply(&failed_step, &fell_back)) != 0) {
      report[0] = kStagePrepare;
      // The step's name: a pointer into this binary's read-only data, the
      // same address in the parent (no exec happened).
      (void)!::write(report_pipe[1], report, sizeof report);
      (void)!::write(report_pipe[1], &failed_step, sizeof failed_step);
      _exit(127);
    }
    report[0] = kStageReady;
    report[1] = fell_back;
    (void)!::write(report_pipe[1], report, sizeof report);
    char go = 0;
    if (::read(go_pipe[0], &go, 1) != 1 || go != 'g') _exit(127);  // the parent could not move it
    if (::getppid() != parent) _exit(127);
    const LandlockPlan* landlock = confinement.landlock;
    const SeccompPlan* seccomp = confinement.seccomp;
    if (landlock && landlock->ruleset.valid() &&
        (report[1] = ApplyLandlockInChild(landlock->ruleset.get(), confinement.landlock_proc_self)) != 0) {
      report[0] = kStageLandlock;
    } else if (seccomp && !seccomp->program.empty() && (report[1] = ApplySeccompInChild(*seccomp)) != 0) {
      report[0] = kStageSeccomp;
    } else {
      ::execve(plan.exe.c_str(), plan.argv_ptrs.data(), plan.envp_ptrs.data());
      report[0] = kStageExec;
      report[1] = errno;
    }
    (void)!::write(report_pipe[1], report, sizeof report);
    _exit(127);
  }
  if (child < 0) return Error{std::string("clone3: ") + std::strerror(errno)};
  self->pid_ = child;
  self->pidfd_ = UniqueFd(pidfd_raw);
  return self;
}

void ConfinedChild::Enter(const std::function<Status(pid_t)>& move_in, PtyRelay* pty, bool quiet) {
  got_ = ::read(report_.get(), report_data_, sizeof report_data_);
  if (got_ == sizeof report_data_ && report_data_[0] == kStageReady) {
    if (report_data_[1] && !quiet)
      PrintNote("the command starts in " + plan_->fallback_cwd + ": uid " + std::to_string(plan_->identity.uid) +
                " cannot enter the working directory " + plan_->cwd);
    Status moved = move_in(pid_);
    if (moved.ok()) {
      char go = 'g';
      (void)!::write(go_.get(), &go, 1);
    } else {
      PrintError("move the command into its sandbox: " + moved.error().ToString() + "; command not started");
    }
    go_.Reset();
    if (pty) {
      pty->CloseSlave();  // the command holds it now
      if (Status raw = pty->Start(); !raw.ok() && !quiet) PrintNote(raw.error().ToString());
    }
    got_ = ::read(report_.get(), report_data_, sizeof report_data_);
  } else if (got_ == sizeof report_data_ && report_data_[0] == kStagePrepare) {
    (void)!::read(report_.get(), &failed_step_, sizeof failed_step_);
  }
  go_.Reset();
  report_.Reset();
}

bool ConfinedChild::Reap(int* exit_status) {
  siginfo_t info = {};
  if (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd_.get()), &info, WEXITED) != 0) return false;
  reaped_ = true;
  *exit_status = info.si_code == CLD_EXITED ? info.si_status : 128 + info.si_status;
  return true;
}

int ConfinedChild::ReportFailure(bool policy_execs) const {
  if (got_ != sizeof report_data_) return 0;
  const std::string uid = std::to_string(plan_->identity.uid);
  const char* what = report_data_[0] == kStageLandlock  ? "cannot apply Landlock"
                     : report_data_[0] == kStageSeccomp ? "cannot install the seccomp filter"
                                                        : nullptr;
  if (what)
    PrintError(std::string(what) + ": " + std::strerror(report_data_[1]) + "; command not started");
  else if (report_data_[0] == kStagePrepare)
    PrintError("cannot prepare the command (as uid " + uid +
               "): " + DescribeChildFailure(failed_step_, report_data_[1]) + "; command not started");
  else if (report_data_[0] == kStageExec) {
    const int err = report_data_[1];
    const bool refused = err == EACCES || err == EPERM;
    PrintError("cannot execute " + plan_->exe + " (as uid " + uid + "): " + std::strerror(err) +
               (refused && !policy_execs
                    ? ": the policy does not let the command execute it (spec.files.exec, or a profile of "
                      "spec.files.include)"
                    : ""));
    return refused ? 126 : 127;
  }
  return 127;
}

ConfinedChild::~ConfinedChild() {
  if (!pidfd_.valid() || reaped_) return;
  // Never reaped: the run ends before the command did (e.g. its event loop
  // failed). Killed and reaped here, before its sandbox goes.
  (void)::syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGKILL, nullptr, 0);
  siginfo_t info = {};
  (void)::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd_.get()), &info, WEXITED);
}

}  // namespace cordon::cli
