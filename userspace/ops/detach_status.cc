// Detach and status, directly.
#include <unistd.h>

#include <fstream>

#include "ops/ephemeral.h"
#include "ops/ops.h"
#include "util/fs.h"

namespace cordon::ops {

DetachOutcome Detach(const DetachRequest& request) {
  DetachOutcome out;
  // A cordon run's sandbox with processes in it: detaching alone would set
  // them free. While the run is running it ends its sandbox itself (detach
  // is refused: end the run). Once it has ended (killed with -9), or when
  // that cannot be told, what is left is killed first, then the cgroup,
  // which cordon made, removed, then the sandbox detached.
  std::string orphan_lock;
  // A contained sandbox whose processes live (frozen, or having entered its
  // cgroup after a kill): detaching would set them free, unconfined.
  auto found = GetSandbox(request.sandbox_id);
  if (const auto& info = found; info && info->contained() && info->cgroup_alive) {
    auto mount = FindCgroup2Mount();
    auto events = mount ? ReadFile(*mount + info->cgroup_path + "/cgroup.events") : Result<std::string>(mount.error());
    if (!events || events->find("populated 0") == std::string::npos)
      return out.error = "sandbox " + std::to_string(request.sandbox_id) +
                         " is contained and its processes are alive (frozen): detaching would set them free; "
                         "`cordon contain --id " +
                         std::to_string(request.sandbox_id) +
                         " --kill` kills them, `cordon release` puts its policy back in force; nothing detached",
             out;
  }
  if (auto& info = found; info && info->ephemeral) {
    const RunOwner owner = OwnerOfRun(info->cgroup_path);
    auto mount = FindCgroup2Mount();
    if (owner.pid && info->cgroup_alive) {
      if (!mount) return out.error = mount.error().ToString() + "; nothing detached", out;
      auto cgroup = ResolveCgroup(*mount + info->cgroup_path);
      if (!cgroup) return out.error = cgroup.error().ToString() + "; nothing detached", out;
      if (cgroup->id != request.sandbox_id)
        return out.error = cgroup->path + " is no longer this sandbox's cgroup (its id is " +
                           std::to_string(cgroup->id) + ", not " + std::to_string(request.sandbox_id) +
                           "); nothing detached",
               out;
      const bool populated = [&] {
        std::ifstream in(cgroup->path + "/cgroup.events");
        std::string key, value;
        while (in >> key >> value)
          if (key == "populated") return value != "0";
        return true;  // cannot tell: as if it were
      }();
      if (owner.state == RunOwner::State::kRunning && populated)
        return out.error = "sandbox " + std::to_string(request.sandbox_id) + " is the running cordon run's (pid " +
                           std::to_string(owner.pid) +
                           "): end that run and its sandbox goes with it (detaching would set its command free); "
                           "nothing detached",
               out;
      if (owner.state != RunOwner::State::kRunning) {
        cordon::Status removed = KillAndRemoveCgroup(*cgroup);
        if (!removed.ok()) return out.error = removed.error().ToString() + "; nothing detached", out;
        out.removed_cgroup = info->cgroup_path;
        (void)::rmdir((*mount + "/cordon").c_str());  // the runs' shared parent, when it is empty
      }
    }
    if (owner.state == RunOwner::State::kEnded) orphan_lock = RunLockPath(info->cgroup_path);
  }
  cordon::Status detached = DetachSandbox(request.sandbox_id);
  if (detached.ok() && !orphan_lock.empty()) (void)::unlink(orphan_lock.c_str());
  if (!detached.ok()) {
    out.error = detached.error().ToString();
    return out;
  }
  out.detached = true;
  // The limits cordon wrote go back to the platform's (a cordon run's
  // cgroup is cordon's own: none recorded).
  if (found && found->cgroup_alive) out.limit_notes = PutBackPlatformLimits(request.sandbox_id, found->cgroup_path);
  ForgetPlatformLimits(request.sandbox_id);
  // An attached sandbox's credentials end with it: removed, then revoked
  // (after the detach: a detach the kernel refuses revokes nothing).
  cordon::Status ended =
      EndAttachedCredentials(request.sandbox_id, "the sandbox was detached", [&](cordon::v1::AuditEvent e) {
        if (found) {
          e.set_sandbox(found->name);
          e.set_policy(found->policy);
          e.set_policy_digest(found->policy_digest);
          e.set_cgroup_path(found->cgroup_path);
        }
        e.set_cgroup_id(request.sandbox_id);
        e.set_sandbox_cgroup_id(request.sandbox_id);
        out.credential_events.push_back(std::move(e));
      });
  if (!ended.ok()) out.credential_error = ended.error().ToString();
  return out;
}

StatusOutcome Status() {
  StatusOutcome out;
  auto list = ListSandboxes();
  if (!list)
    out.error = list.error().ToString();
  else
    out.sandboxes = std::move(*list);
  for (auto& state : ListCredentialStates())
    if (!state.credentials.empty()) out.credentials[state.cgroup_id] = std::move(state.credentials);
  for (auto& s : out.sandboxes) {
    if (!s.ephemeral) continue;
    RunOwner owner = OwnerOfRun(s.cgroup_path);
    s.owner_pid = owner.pid;
    s.orphaned = owner.state == RunOwner::State::kEnded;
  }
  return out;
}

}  // namespace cordon::ops
