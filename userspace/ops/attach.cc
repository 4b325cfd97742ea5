// Attach and update, directly: compile, check what this kernel can enforce,
// attach, collect the notes, apply the policy retroactively.
#include <chrono>
#include <optional>

#include "abi/cordon_common.h"
#include "abi/cordon_pins.h"
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
  // An update that fails leaves the policy in force as it was (the swap is atomic).
  const std::string unchanged = must_exist ? "; the sandbox keeps its current policy" : "; nothing attached";
  if (!compiled.credentials.empty()) return Failed(CredentialsNotIssued() + unchanged);
  const HostPathCheck host_paths = CheckHostPaths(&compiled);
  if (!host_paths.errors.empty()) return Failed(HostPathErrors(host_paths) + unchanged);
  auto cgroup = ResolveCgroup(req.cgroup);
  if (!cgroup) return Failed(cgroup.error().ToString() + "; nothing attached");
  std::optional<SandboxInfo> existing;
  if (auto found = GetSandbox(cgroup->id)) existing = std::move(*found);
  if (must_exist && !existing) return Failed("no sandbox is attached to " + cgroup->path);
  std::vector<std::string> missing = UndeliverableInAttach(compiled, ProbeLsm());
  std::vector<CgroupLimitOutcome> limits;
  if (compiled.resources.any()) {
    // A replacement's limits are the new policy's; a first attach keeps a stricter one the platform set.
    auto applied = ApplyCgroupLimits(*cgroup, CgroupLimitsOf(compiled.resources),
                                     must_exist ? LimitMerge::kPolicy : LimitMerge::kStricter, false);
    if (!applied) return Failed("resource limits: " + applied.error().ToString() + unchanged);
    limits = std::move(*applied);
    for (auto& line : UnenforcedLimits(compiled.resources, limits)) missing.push_back(std::move(line));
  }
  auto restore = [&](std::string error) {
    if (cordon::Status s = RestoreCgroupLimits(*cgroup, limits); !s.ok())
      error += " (restoring the resource limits failed: " + s.error().ToString() + ")";
    return Failed(std::move(error));
  };
  // Degraded enforcement, once accepted for a sandbox, holds for its
  // replacements (the kernel is the same); a sandbox attached in full must
  // be allowed it again.
  const bool accepted_before = existing && existing->degraded && !req.allow_degraded && !missing.empty();
  if (!missing.empty() && !req.allow_degraded && !accepted_before)
    return restore(DegradedError(missing, ProbeLsm().detail, req.wording, must_exist));
  AttachOptions options;
  options.name = req.name;
  options.pool = req.pool;
  const int64_t t_attach = MonoNs();
  auto result = AttachSandbox(*cgroup, compiled, options);
  const int64_t t_attached = MonoNs();
  if (!result) return restore(result.error().ToString() + unchanged);
  // Bookkeeping only (the policy is in force either way): a failure is a note.
  cordon::Status flagged = AddSandboxFlags(result->info.id, missing.empty() ? 0 : CORDON_INFO_F_DEGRADED,
                                           missing.empty() ? CORDON_INFO_F_DEGRADED : 0);
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
  for (const auto& line : host_paths.warnings) out.notes.push_back(line);
  if (!flagged.ok())
    out.notes.push_back("could not record whether enforcement is degraded (a later update may ask for "
                        "--allow-degraded again): " + flagged.error().ToString());
  if (accepted_before)
    out.notes.push_back("degraded enforcement was accepted when this sandbox was attached: the new policy too is "
                        "enforced only as far as this kernel can (listed below)");
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
