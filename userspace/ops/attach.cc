// Attach and update, directly: compile, check what this kernel can enforce,
// attach, collect the notes, apply the policy retroactively.
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <sstream>

#include "abi/cordon_common.h"
#include "abi/cordon_pins.h"
#include "inspect/retro.h"
#include "loader/kernel_features.h"
#include "ops/ops.h"
#include "ops/policy_store.h"
#include "util/clock.h"
#include "util/fs.h"

namespace cordon::ops {

namespace {

// The platform's limits of each cgroup given to attach, as they were before
// cordon first wrote them (sys/cgroup_limits.h PlatformLimits), one file per
// cgroup id: "LABEL\tVALUE" lines. /run/cordon is refused to every sandbox
// (BPF LSM; read-only in cordon run's mount namespace); ids are not reused
// before a reboot, which empties /run.
constexpr const char* kPlatformLimitsDir = "/run/cordon/limits";

std::optional<PlatformLimits> LoadPlatformLimits(uint64_t cgroup_id) {
  auto text = ReadFile(JoinPath(kPlatformLimitsDir, std::to_string(cgroup_id)), 1 << 16);
  if (!text) return std::nullopt;
  PlatformLimits limits;
  std::istringstream lines(*text);
  for (std::string line; std::getline(lines, line);) {
    const size_t tab = line.find('\t');
    if (tab == std::string::npos) continue;
    std::string label = line.substr(0, tab), value = line.substr(tab + 1);
    const bool printable = std::all_of(value.begin(), value.end(), [](char c) { return c >= ' ' && c < 0x7f; });
    if (CgroupLimitOfLabel(label) && printable && !value.empty()) limits[label] = value;
  }
  return limits;
}

cordon::Status SavePlatformLimits(uint64_t cgroup_id, const PlatformLimits& limits) {
  if (cordon::Status made = MakeDirs(kPlatformLimitsDir, 0700); !made.ok()) return made;
  std::string text;
  for (const auto& [label, value] : limits) text += label + "\t" + value + "\n";
  return WriteFileAtomic(kPlatformLimitsDir, std::to_string(cgroup_id), text, 0600);
}

AttachOutcome Failed(std::string error) {
  AttachOutcome out;
  out.error = std::move(error);
  return out;
}

std::string Names(const std::vector<policy::CredentialSpec>& specs) {
  if (specs.empty()) return "none";
  std::string out;
  for (const auto& c : specs) out += (out.empty() ? "" : ", ") + c.name;
  return out;
}

// A replacement (update, or attach again) keeps the sandbox's credentials
// as they are: it neither issues, revokes nor changes them. "" when the new
// policy's section is the one issued (or both have none).
std::string ReplacementCredentialsError(uint64_t cgroup_id, const std::vector<policy::CredentialSpec>& wanted) {
  auto current = CredentialStateOf(cgroup_id);
  const std::vector<policy::CredentialSpec> had = current ? current->specs : std::vector<policy::CredentialSpec>{};
  bool same = had.size() == wanted.size();
  for (size_t i = 0; same && i < had.size(); ++i) same = had[i].SameAs(wanted[i]);
  if (same) return "";
  if (!current)
    return "spec.credentials: this sandbox holds no credentials (attached without them, or they ended), and a "
           "replacement does not issue any (" +
           Names(wanted) + "): detach it and attach again to issue them, or remove the section";
  return "spec.credentials: a replacement cannot change the credentials the sandbox holds (" + Names(had) +
         " as issued; the new policy has " + Names(wanted) +
         "): detach it (which revokes them) and attach again, or keep the section as it was";
}

// A fresh attach's credentials: each one a file (a running process's
// environment cannot be given one) with an owner (the attached processes
// already run as someone: the file is theirs alone, mode 0400).
std::string AttachCredentialsError(const std::vector<policy::CredentialSpec>& specs, const std::string& name) {
  for (const auto& c : specs) {
    if (c.deliver == policy::CredentialSpec::Deliver::kEnv)
      return policy::CredentialError(
          c.deliver_at, "credential " + c.name +
                            ": deliver: env is for cordon run only: cordon attach cannot change the environment "
                            "of processes already running; use deliver: file with an owner");
    if (c.owner.empty())
      return policy::CredentialError(
          c.at, "credential " + c.name +
                    ": cordon attach needs owner: the user name or UID[:GID] the attached processes run as, who "
                    "alone (with root) may read the file (mode 0400)");
    if (auto owner = ResolveCredentialOwner(c.owner); !owner)
      return policy::CredentialError(c.at, "credential " + c.name + ": " + owner.error().ToString());
  }
  if (!SafeCredentialDir(name))
    return "spec.credentials: the sandbox name '" + name + "' cannot name its credentials' directory (" +
           kCredentialView + "/<sandbox>): give --name with letters, digits, _ and - only (not starting with run-)";
  return "";
}

std::string Seconds(int64_t s) { return std::to_string(s) + " s"; }

// What the attach says of each credential it issued, and how far the file
// is guarded.
// guard: GuardFiles()'s outcome (true: every file is marked for BPF LSM).
std::vector<std::string> CredentialNotes(const SandboxCredentials& creds,
                                         const std::vector<policy::CredentialSpec>& specs, bool held,
                                         const Result<bool>& guard) {
  std::vector<std::string> notes;
  const int64_t now = static_cast<int64_t>(::time(nullptr));
  std::string owners;
  bool refresh = false;
  for (const auto& c : creds.Summary()) {
    std::string owner;
    for (const auto& s : specs)
      if (s.name == c.name) owner = s.owner, refresh = refresh || s.refresh_before_seconds;
    notes.push_back("credential " + c.name + " issued: " + c.path + " (mode 0400, owner " + owner + ", fingerprint " +
                    c.fingerprint + ", expires in " + Seconds(c.expires_at - now) + ")");
    if (owners.find("'" + owner + "'") == std::string::npos) owners += (owners.empty() ? "'" : ", '") + owner + "'";
  }
  if (guard && guard.value())
    notes.push_back(
        "credentials: guarded by BPF LSM: only this sandbox's processes (and root outside every "
        "sandbox) can open them; any other process, root in another sandbox or a process running as " +
        owners + " outside it, is refused (EPERM) and reported as credential.read");
  else
    notes.push_back("credentials: only file ownership guards them on the host: any process running as " + owners +
                    " can read them there, inside the sandbox or not, and so can a root workload of another "
                    "sandbox (an attached sandbox has no mount namespace of its own; " +
                    (guard ? std::string("BPF LSM is not in use on this kernel, or the BPF LSM object in force was "
                                         "loaded by an earlier cordon without the credential guard")
                           : "marking them for BPF LSM failed: " + guard.error().ToString()) +
                    ")");
  if (held)
    notes.push_back(
        "credentials: the agent refreshes them (refreshBefore), and removes and revokes them at their "
        "ttl, at detach and when the sandbox's cgroup is gone");
  else
    notes.push_back(
        std::string("credentials: issued once: refresh needs the agent (none runs") +
        (refresh ? "; refreshBefore does not apply" : "") +
        "); each is removed and revoked at cordon detach, or after its ttl by the next sweep (an agent's, "
        "at its start and every 2 s, or the next cordon run's start); an agent started later takes them over");
  return notes;
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
  const HostPathCheck host_paths = CheckHostPaths(&compiled, req.names_served);
  if (!host_paths.errors.empty()) return Failed(HostPathErrors(host_paths) + unchanged);
  auto cgroup = ResolveCgroup(req.cgroup);
  if (!cgroup) return Failed(cgroup.error().ToString() + "; nothing attached");
  std::optional<SandboxInfo> existing;
  if (auto found = GetSandbox(cgroup->id)) existing = std::move(*found);
  if (must_exist && !existing) return Failed("no sandbox is attached to " + cgroup->path);
  const std::string name = !req.name.empty() ? req.name : cgroup->relative.substr(cgroup->relative.rfind('/') + 1);
  const bool issue = !existing && !compiled.credentials.empty();
  if (existing) {
    if (std::string error = ReplacementCredentialsError(cgroup->id, compiled.credentials); !error.empty())
      return Failed(error + unchanged);
  } else if (issue) {
    if (std::string error = AttachCredentialsError(compiled.credentials, name); !error.empty())
      return Failed(error + unchanged);
  }
  std::vector<std::string> missing = UndeliverableInAttach(compiled, ProbeLsm());
  std::vector<CgroupLimitOutcome> limits;
  // The platform's limits as they were before cordon wrote any (recorded at
  // the first attach; none for a cordon run's cgroup, which cordon made, nor
  // for a sandbox attached by a cordon that did not record them).
  const std::optional<PlatformLimits> platform =
      existing && existing->ephemeral ? std::nullopt : LoadPlatformLimits(cgroup->id);
  const std::vector<CgroupLimitValue> wanted = compiled.resources.any()
                                                   ? CgroupLimitsOf(compiled.resources, IoWriteDevices(compiled))
                                                   : std::vector<CgroupLimitValue>{};
  if (!wanted.empty()) {
    // The stricter of the platform's and the policy's, for a first attach
    // and for every replacement (an earlier policy's value in the file is
    // not the platform's: the recorded one is); a replacement of a sandbox
    // without a record writes the new policy's.
    const LimitMerge merge = existing && !platform && must_exist ? LimitMerge::kPolicy : LimitMerge::kStricter;
    auto applied = ApplyCgroupLimits(*cgroup, wanted, merge, false, platform ? &*platform : nullptr);
    if (!applied) return Failed("resource limits: " + applied.error().ToString() + unchanged);
    limits = std::move(*applied);
    for (auto& line : UnenforcedLimits(compiled.resources, limits, false, req.agent_watches))
      missing.push_back(std::move(line));
  }
  // The limits an earlier policy set that this one does not: the platform's
  // values are back ("the new policy's limits apply", none included).
  PlatformLimits dropped;
  if (platform)
    for (const auto& [label, value] : *platform) {
      bool kept = false;
      for (const auto& w : wanted) kept = kept || CgroupLimitLabel(w) == label;
      if (!kept) dropped[label] = value;
    }
  if (!dropped.empty()) {
    auto back = RestorePlatformLimits(*cgroup, dropped);
    if (!back) {
      std::string error = "resource limits: " + back.error().ToString();
      if (cordon::Status s = RestoreCgroupLimits(*cgroup, limits); !s.ok())
        error += " (restoring the resource limits failed: " + s.error().ToString() + ")";
      return Failed(error + unchanged);
    }
    for (auto& o : *back) limits.push_back(std::move(o));
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
  // spec.credentials: issued before the programs attach, so that a failed
  // issue leaves nothing (no sandbox, file or state); revoked if the attach
  // then fails.
  std::shared_ptr<SandboxCredentials> creds;
  std::vector<cordon::v1::AuditEvent> cred_events;
  auto emit = [&](cordon::v1::AuditEvent e) {
    e.set_sandbox(name);
    e.set_policy(compiled.name);
    e.set_policy_digest(compiled.digest);
    e.set_cgroup_path(cgroup->relative);
    e.set_cgroup_id(cgroup->id);
    e.set_sandbox_cgroup_id(cgroup->id);
    cred_events.push_back(std::move(e));
  };
  auto failed_with_events = [&](AttachOutcome out) {
    out.credential_events = std::move(cred_events);
    return out;
  };
  if (issue) {
    OidcContext oidc = req.oidc;
    oidc.subject = name;
    oidc.policy_name = compiled.name;
    oidc.policy_digest = compiled.digest;
    auto prepared = SandboxCredentials::PrepareForAttach(
        compiled.credentials, name, req.hold_credentials ? "cordon-agent" : "cordon-attach", std::move(oidc));
    if (!prepared) return restore("credentials: " + prepared.error().ToString() + unchanged);
    creds = std::move(*prepared);
    if (cordon::Status issued = creds->Issue(cgroup->id, cgroup->path, emit); !issued.ok()) {
      creds.reset();  // the ones issued before were revoked: the tmpfs, its view, the state and the lock go
      return failed_with_events(restore(issued.error().ToString() + unchanged));
    }
  }
  AttachOptions options;
  options.name = req.name;
  options.pool = req.pool;
  const int64_t t_attach = MonoNs();
  auto result = AttachSandbox(*cgroup, compiled, options);
  const int64_t t_attached = MonoNs();
  if (!result) {
    if (creds) creds->RevokeAll("the attach failed", emit);
    creds.reset();
    return failed_with_events(restore(result.error().ToString() + unchanged));
  }
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
  out.notes = req.notes;
  if (req.after_attach)
    for (auto& note : req.after_attach(*result, *cgroup)) out.notes.push_back(std::move(note));
  if (!req.policy_text.empty())
    if (cordon::Status kept = KeepPolicyText(req.policy_text, compiled.digest); !kept.ok())
      out.notes.push_back("the policy's text is not kept by its digest (" + PolicyStoreDir() +
                          "): " + kept.error().ToString());
  if (creds) {
    // Written before the attach (for the host's first sandbox, before the
    // BPF LSM object existed): marked for its guard now.
    const Result<bool> guard = creds->GuardFiles();
    for (auto& note : CredentialNotes(*creds, compiled.credentials, req.hold_credentials, guard))
      out.notes.push_back(std::move(note));
    if (req.hold_credentials)
      out.credentials = std::move(creds);
    else
      creds->Release();  // files, tmpfs and state outlive this process
  }
  out.credential_events = std::move(cred_events);
  for (const auto& line : host_paths.warnings) out.notes.push_back(line);
  if (!flagged.ok())
    out.notes.push_back("could not record whether enforcement is degraded (a later update may ask for "
                        "--allow-degraded again): " + flagged.error().ToString());
  if (accepted_before)
    out.notes.push_back("degraded enforcement was accepted when this sandbox was attached: the new policy too is "
                        "enforced only as far as this kernel can (listed below)");
  for (const auto& line : LimitNotes(compiled.resources, limits, req.agent_watches)) out.notes.push_back(line);
  for (const auto& o : limits)
    if (o.restored) out.notes.push_back(o.Describe());
  // What the platform had before cordon wrote each limit: kept for the
  // next replacement, and for a later attach of the same cgroup.
  // (Not for a sandbox attached by a cordon that kept none: the files hold
  // its values, not the platform's.)
  if (!(existing && existing->ephemeral) && (!existing || platform)) {
    PlatformLimits record = platform ? *platform : PlatformLimits{};
    for (const auto& [label, value] : dropped) record.erase(label);
    for (const auto& o : limits) {
      const std::string label = CgroupLimitLabel(o.requested);
      if (o.restored || o.previous.empty() || record.count(label)) continue;
      record[label] = o.previous;  // never written by cordon before: the platform's
    }
    if (cordon::Status saved = SavePlatformLimits(cgroup->id, record); !saved.ok()) {
      out.notes.push_back("the platform's resource limits are not recorded (a later update cannot put them back): " +
                          saved.error().ToString());
    }
  }
  for (const auto& line : IoWriteNotes(compiled.resources, IoWriteDevices(compiled))) out.notes.push_back(line);
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

std::vector<std::string> PutBackPlatformLimits(uint64_t cgroup_id, const std::string& cgroup_path) {
  std::vector<std::string> notes;
  const std::optional<PlatformLimits> platform = LoadPlatformLimits(cgroup_id);
  if (!platform || platform->empty()) return notes;
  auto mount = FindCgroup2Mount();
  auto cgroup = mount ? ResolveCgroup(*mount + cgroup_path) : Result<CgroupRef>(mount.error());
  if (!cgroup || cgroup->id != cgroup_id) return notes;  // gone, or another cgroup now: nothing of ours there
  auto back = RestorePlatformLimits(*cgroup, *platform);
  if (!back) return {"the resource limits were not put back as the platform had them: " + back.error().ToString()};
  for (const auto& o : *back)
    if (o.written)
      notes.push_back(std::string(CgroupLimitFile(o.requested.limit)) + ": the platform's '" + o.platform +
                      "' is back");
  return notes;
}

void ForgetPlatformLimits(uint64_t cgroup_id) {
  (void)::unlink(JoinPath(kPlatformLimitsDir, std::to_string(cgroup_id)).c_str());
}

AttachOutcome Attach(const AttachRequest& request) { return AttachOrUpdate(request, false); }
AttachOutcome Update(const AttachRequest& request) { return AttachOrUpdate(request, true); }

}  // namespace cordon::ops
