// Request validation shared by the use cases: policy text, mode, the
// degraded-enforcement refusal.
#include <sys/stat.h>

#include <cerrno>

#include "abi/cordon_common.h"
#include "abi/cordon_file.h"
#include "ops/ops.h"
#include "policy/parser.h"

namespace cordon::ops {

bool ParseMode(const std::string& mode, uint32_t* out) {
  if (mode == "enforce")
    *out = CORDON_MODE_ENFORCE;
  else if (mode == "audit")
    *out = CORDON_MODE_AUDIT;
  else if (!mode.empty())
    return false;
  return true;
}

std::string BadModeError(const std::string& mode) { return "mode must be enforce or audit, not '" + mode + "'"; }

HostPathCheck CheckHostPaths(policy::CompiledPolicy* policy, bool names_served) {
  HostPathCheck out;
  if (!names_served) out.errors = policy::UnenforcedNameRules(*policy);
  for (auto& rule : policy->file_rules) {
    if (!rule.required) continue;
    struct stat st;
    if (::stat(rule.path.c_str(), &st) == 0 || (errno != ENOENT && errno != ENOTDIR)) continue;
    const std::string where = (rule.where.empty() ? rule.origin : rule.where) + ": " + rule.path;
    if (rule.rights & (CORDON_FILE_WRITE | CORDON_FILE_CREATE)) {
      out.errors.push_back(where +
                           " does not exist on this host: a path the task may write must exist before the sandbox "
                           "starts (cordon does not create it)");
    } else {
      rule.required = false;
      out.warnings.push_back(where +
                             " does not exist on this host: skipped (it grants nothing; a file made there after the "
                             "sandbox starts is not granted either)");
    }
  }
  return out;
}

std::string HostPathErrors(const HostPathCheck& check) {
  std::string out;
  for (const auto& e : check.errors) out += (out.empty() ? "" : "\n  ") + e;
  return out;
}

bool CompilePolicyText(const std::string& text, const std::string& file, const std::string& mode,
                       policy::CompiledPolicy* out, std::string* error) {
  policy::CompiledPolicy compiled;
  if (text.empty()) {
    compiled = policy::DefaultPolicy();
  } else {
    policy::ParsedPolicy parsed;
    policy::Diagnostics diags;
    const std::string display = file.empty() ? "<policy>" : file;
    if (!policy::ParsePolicyText(text, display, &parsed, &diags) || !policy::Compile(parsed, &compiled, &diags)) {
      *error = policy::FormatDiagnostics(diags) + "policy " + display + " rejected (" + std::to_string(diags.size()) +
               " error" + (diags.size() == 1 ? "" : "s") + "); nothing attached";
      return false;
    }
  }
  if (!ParseMode(mode, &compiled.mode)) {
    *error = BadModeError(mode);
    return false;
  }
  *out = std::move(compiled);
  return true;
}

std::string DegradedError(const std::vector<std::string>& missing, const std::string& detail, Wording wording,
                          bool update) {
  std::string list;
  for (const auto& m : missing) list += (list.empty() ? "" : "; ") + m;
  std::string msg = "this kernel cannot enforce, for processes cordon attaches to: " + list;
  const char* outcome = update ? "The sandbox keeps its current policy" : "Nothing attached";
  if (wording == Wording::kCli)
    return msg + " (" + detail + "). " + outcome +
           "; pass --allow-degraded to enforce only the rest, or see `cordon doctor`";
  return msg + ". " + outcome + "; allow degraded enforcement to enforce only the rest";
}

}  // namespace cordon::ops
