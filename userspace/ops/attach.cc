// Attach and update, directly: compile, check what this kernel can enforce,
// attach, collect the notes, apply the policy retroactively.
#include <chrono>

#include "abi/cordon_common.h"
#include "inspect/retro.h"
#include "loader/kernel_features.h"
#include "ops/ops.h"
#include "util/clock.h"

namespace cordon::ops {

namespace {

AttachOutcome Failed(std::string error) {
  AttachOutcome out;
  out.error = std::move(error);
  return out;
}

AttachOutcome AttachOrUpdate(const AttachRequest& req, bool must_exist) {
  policy::CompiledPolicy compiled;
  if (req.compiled) {
    compiled = *req.compiled;
  } else {
    std::string error;
    if (!CompilePolicyText(req.policy_text, req.policy_file, req.mode, &compiled, &error)) return Failed(error);
  }
  if (!compiled.credentials.empty()) return Failed(CredentialsNotIssued() + "; nothing attached");
  auto cgroup = ResolveCgroup(req.cgroup);
  if (!cgroup) return Failed(cgroup.error().ToString() + "; nothing attached");
  if (must_exist && !GetSandbox(cgroup->id)) return Failed("no sandbox is attached to " + cgroup->path);
  std::vector<std::string> missing = UndeliverableInAttach(compiled, ProbeLsm());
  std::vector<CgroupLimitOutcome> limits;
  if (compiled.resources.any()) {
    // A replacement's limits are the new policy's; a first attach keeps a stricter one the platform set.
    auto applied = ApplyCgroupLimits(*cgroup, CgroupLimitsOf(compiled.resources),
                                     must_exist ? LimitMerge::kPolicy : LimitMerge::kStricter, false);
    if (!applied) return Failed("resource limits: " + applied.error().ToString() + "; nothing attached");
    limits = std::move(*applied);
    for (auto& line : UnenforcedLimits(compiled.resources, limits)) missing.push_back(std::move(line));
  }
  auto restore = [&](std::string error) {
    if (cordon::Status s = RestoreCgroupLimits(*cgroup, limits); !s.ok())
      error += " (restoring the resource limits failed: " + s.error().ToString() + ")";
    return Failed(std::move(error));
  };
  if (!missing.empty() && !req.allow_degraded) return restore(DegradedError(missing, ProbeLsm().detail, req.wording));
  AttachOptions options;
  options.name = req.name;
  options.pool = req.pool;
  const int64_t t_attach = MonoNs();
  auto result = AttachSandbox(*cgroup, compiled, options);
  const int64_t t_attached = MonoNs();
  if (!result) return restore(result.error().ToString() + "; nothing attached");
  const SandboxInfo& info = result->info;
  AttachOutcome out;
  out.sandbox_id = info.id;
  out.name = info.name;
  out.cgroup = cgroup->path;
  out.policy = compiled.name;
  out.mode = compiled.mode == CORDON_MODE_AUDIT ? "audit" : "enforce";
  out.replaced = result->replaced;
  out.swap_ns = result->swap_ns;
  out.prepared_instance = result->prepared_instance;
  out.attach_ns = t_attached - t_attach;
  if (req.after_attach) out.notes = req.after_attach(*result, *cgroup);
  for (const auto& line : LimitNotes(compiled.resources, limits)) out.notes.push_back(line);
  for (const auto& line : UnenforcedControls(compiled, ProbeLsm())) out.notes.push_back(line);
  if (ProbeLsm().usable())
    if (std::string note = ForeignSocketsNote(); !note.empty()) out.notes.push_back(note);
  for (const auto& path : result->skipped_paths)
    out.notes.push_back("profile path absent on this host, skipped: " + path);
  // Retroactive attach: pre-existing connections the policy denies are
  // destroyed, open files listed.
  SandboxContext retro_ctx{info.id, info.name, info.policy.empty() ? compiled.name : info.policy, info.cgroup_path};
  if (auto retro = ApplyRetroactively(*cgroup, compiled, retro_ctx)) {
    out.retro_summary = RetroSummaryLine(*retro);
    out.retro_destroy_failed = retro->destroy_failed;
    out.retro_events = std::move(retro->events);
  } else {
    out.retro_error = retro.error().ToString();
  }
  out.after_ns = MonoNs() - t_attached;
  return out;
}

}  // namespace

std::string CredentialsNotIssued() {
  return "spec.credentials: cordon attach and the agent do not issue credentials yet (cordon run does); "
         "remove the section to attach without them";
}

AttachOutcome Attach(const AttachRequest& request) { return AttachOrUpdate(request, false); }
AttachOutcome Update(const AttachRequest& request) { return AttachOrUpdate(request, true); }

}  // namespace cordon::ops
