#include "ops/ephemeral.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "ops/ops.h"
#include "util/fs.h"

namespace cordon::ops {
namespace {

constexpr const char* kScratchRoot = "/run/cordon/scratch";
constexpr const char* kScratchSize = "size=2g";
constexpr const char* kRunLocks = "/run/cordon/runs";

// The last component of a run's cgroup path when it is a run's
// (run-<pid>-<suffix>), else "".
std::string RunLeaf(const std::string& cgroup_path) {
  std::string leaf = cgroup_path.substr(cgroup_path.rfind('/') + 1);
  if (leaf.rfind("run-", 0) != 0 || leaf.size() < 5) return "";
  return leaf;
}

}  // namespace

// ---- RunOwner

std::string RunLockPath(const std::string& cgroup_path) {
  std::string leaf = RunLeaf(cgroup_path);
  return leaf.empty() ? "" : std::string(kRunLocks) + "/" + leaf;
}

RunOwner OwnerOfRun(const std::string& cgroup_path) {
  RunOwner owner;
  std::string leaf = RunLeaf(cgroup_path);
  if (leaf.empty()) return owner;
  owner.pid = std::atoi(leaf.c_str() + 4);
  if (owner.pid <= 0) return owner.pid = 0, owner;
  // O_NONBLOCK: nothing there (a FIFO) may hang the caller.
  UniqueFd lock(::open(RunLockPath(cgroup_path).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  struct stat st;
  if (!lock.valid() || ::fstat(lock.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != 0) return owner;
  // Taken (shared) only when the run no longer holds it; dropped at once.
  if (::flock(lock.get(), LOCK_SH | LOCK_NB) == 0)
    owner.state = RunOwner::State::kEnded;
  else if (errno == EWOULDBLOCK)
    owner.state = RunOwner::State::kRunning;
  return owner;
}

Result<std::string> RunLocksDir() {
  CORDON_TRY(MakeDirs(kRunLocks, 0700));
  return std::string(kRunLocks);
}

// ---- Scratch

Result<std::unique_ptr<Scratch>> Scratch::Create(const std::string& name, uid_t uid, gid_t gid, uint64_t size) {
  CORDON_TRY(MakeDirs(kScratchRoot, 0700));
  RemoveStale();
  std::unique_ptr<Scratch> s(new Scratch());
  s->path_ = std::string(kScratchRoot) + "/" + name;
  if (::mkdir(s->path_.c_str(), 0700) != 0) return SysError("create " + s->path_);
  s->made_ = true;
  std::string options = (size ? "size=" + std::to_string(size) : std::string(kScratchSize)) + ",mode=0700";
  if (::mount("cordon-scratch", s->path_.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, options.c_str()) != 0)
    return SysError("mount the scratch tmpfs on " + s->path_);
  s->mounted_ = true;
  for (const char* sub : {"tmp", "shm"}) {
    std::string dir = s->path_ + "/" + sub;
    if (::mkdir(dir.c_str(), 0700) != 0 || ::chown(dir.c_str(), uid, gid) != 0) return SysError("prepare " + dir);
  }
  return s;
}

Scratch::~Scratch() {
  if (mounted_) (void)::umount2(path_.c_str(), MNT_DETACH);
  if (made_) (void)::rmdir(path_.c_str());
}

// Scratch of runs whose cordon process is gone (killed with -9).
void Scratch::RemoveStale() {
  auto names = ListDir(kScratchRoot);
  if (!names) return;
  for (const auto& name : *names) {
    // run-<pid>-<suffix>
    if (name.rfind("run-", 0) != 0) continue;
    int pid = std::atoi(name.c_str() + 4);
    if (pid <= 0 || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    std::string dir = std::string(kScratchRoot) + "/" + name;
    (void)::umount2(dir.c_str(), MNT_DETACH);
    (void)::rmdir(dir.c_str());
  }
}

// ---- EphemeralSandbox

Result<std::unique_ptr<EphemeralSandbox>> Run(RunRequest request) {
  std::unique_ptr<EphemeralSandbox> sandbox(new EphemeralSandbox());
  sandbox->scratch_ = std::move(request.scratch);  // removed with the sandbox, also if the cgroup cannot be made
  if (std::string lock = RunLockPath(request.cgroup); !lock.empty()) {
    CORDON_TRY(RunLocksDir());
    sandbox->lock_ = UniqueFd(::open(lock.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!sandbox->lock_.valid()) return SysError("create the run's lock " + lock);
    sandbox->lock_path_ = lock;
    if (::flock(sandbox->lock_.get(), LOCK_EX | LOCK_NB) != 0) return SysError("lock " + lock);
  }
  auto cgroup = CreateCgroup(request.cgroup);
  if (!cgroup) return cgroup.error().Wrap("create sandbox cgroup");
  sandbox->cgroup_ = std::move(*cgroup);
  if (const policy::ResourceLimits& resources = request.policy->resources; resources.any()) {
    auto limits = ApplyCgroupLimits(sandbox->cgroup_, CgroupLimitsOf(resources, IoWriteDevices(*request.policy)),
                                    LimitMerge::kPolicy, true);
    if (!limits) return Error{"resource limits: " + limits.error().ToString() + "; command not started"};
    sandbox->limits_ = std::move(*limits);
    // A hybrid host: what cgroup2 lacks, in v1 cgroups of the run's own.
    auto v1 = CgroupV1Placement::Create(request.cgroup.substr(request.cgroup.rfind('/') + 1), &sandbox->limits_);
    if (!v1) return Error{"resource limits: " + v1.error().ToString() + "; command not started"};
    sandbox->v1_ = std::move(*v1);
  }
  request.options.ephemeral = true;
  auto attached = AttachSandbox(sandbox->cgroup_, *request.policy, request.options);
  if (!attached) {
    (void)sandbox->KillAndRemove();  // the attach left nothing attached
    return Error{attached.error().ToString() + "; command not started"};
  }
  sandbox->attached_ = true;
  return sandbox;
}

cordon::Status EphemeralSandbox::Place(pid_t pid) const {
  if (v1_) CORDON_TRY(v1_->Place(pid));
  return MoveToCgroup(cgroup_, pid);
}

cordon::Status EphemeralSandbox::KillAndRemove() {
  if (removed_) return {};
  removed_ = true;
  cordon::Status removed = KillAndRemoveCgroup(cgroup_);
  // The v1 cgroups after: the processes are gone from both by now.
  if (v1_)
    if (cordon::Status s = v1_->Remove(); !s.ok() && removed.ok()) return s;
  return removed;
}

cordon::Status EphemeralSandbox::Detach() {
  if (!attached_) return {};
  attached_ = false;
  return DetachSandbox(cgroup_.id);
}

void EphemeralSandbox::RemoveSharedParent() {
  // The shared parent of run cgroups goes when the last run ends (another
  // run still inside keeps it: ENOTEMPTY/EBUSY are expected then).
  ::rmdir((cgroup_.mount + "/cordon").c_str());
}

bool EphemeralSandbox::Cleanup(std::vector<std::string>* errors) {
  if (removed_ && !attached_) return true;
  bool ok = true;
  cordon::Status removed = KillAndRemove();  // leftovers killed before anything is detached
  if (!removed.ok()) errors->push_back(removed.error().ToString()), ok = false;
  cordon::Status detached = Detach();
  if (!detached.ok()) errors->push_back(detached.error().ToString()), ok = false;
  RemoveSharedParent();
  if (ok) ReleaseLock();  // else the sandbox stays, and status can tell that its run ended
  return ok;
}

void EphemeralSandbox::ReleaseLock() {
  if (!lock_path_.empty()) ::unlink(lock_path_.c_str());
  lock_path_.clear();
  lock_.Reset();
}

EphemeralSandbox::~EphemeralSandbox() {
  std::vector<std::string> ignored;
  if (!cgroup_.path.empty()) (void)Cleanup(&ignored);
  if (!attached_) ReleaseLock();
}

}  // namespace cordon::ops
