// Detach and status, directly.
#include <unistd.h>

#include "ops/ephemeral.h"
#include "ops/ops.h"

namespace cordon::ops {

DetachOutcome Detach(const DetachRequest& request) {
  DetachOutcome out;
  // The sandbox of a run that has ended (killed with -9): detaching alone
  // would set free what is left in its cgroup and leave the cgroup, which
  // cordon made, behind. What is left is killed first, the cgroup removed,
  // then the sandbox detached (as the run itself would have done).
  std::string orphan_lock;
  if (auto info = GetSandbox(request.sandbox_id); info && info->ephemeral) {
    RunOwner owner = OwnerOfRun(info->cgroup_path);
    if (owner.pid && !owner.alive) {
      orphan_lock = RunLockPath(info->cgroup_path);
      auto mount = FindCgroup2Mount();
      if (info->cgroup_alive && mount) {
        auto cgroup = ResolveCgroup(*mount + info->cgroup_path);
        if (!cgroup) return out.error = cgroup.error().ToString() + "; nothing detached", out;
        cordon::Status removed = KillAndRemoveCgroup(*cgroup);
        if (!removed.ok())
          return out.error = "the run that made this sandbox has ended: " + removed.error().ToString() +
                             "; nothing detached",
                 out;
        out.removed_cgroup = info->cgroup_path;
        (void)::rmdir((*mount + "/cordon").c_str());  // the runs' shared parent, when it is empty
      }
    }
  }
  cordon::Status detached = DetachSandbox(request.sandbox_id);
  if (detached.ok() && !orphan_lock.empty()) (void)::unlink(orphan_lock.c_str());
  if (!detached.ok())
    out.error = detached.error().ToString();
  else
    out.detached = true;
  return out;
}

StatusOutcome Status() {
  StatusOutcome out;
  auto list = ListSandboxes();
  if (!list)
    out.error = list.error().ToString();
  else
    out.sandboxes = std::move(*list);
  for (auto& s : out.sandboxes) {
    if (!s.ephemeral) continue;
    RunOwner owner = OwnerOfRun(s.cgroup_path);
    s.owner_pid = owner.pid;
    s.orphaned = owner.pid && !owner.alive;
  }
  return out;
}

}  // namespace cordon::ops
