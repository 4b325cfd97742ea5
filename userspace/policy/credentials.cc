#include "policy/credentials.h"

#include <cctype>
#include <map>

#include "policy/compiler.h"
#include "policy/resources.h"
#include "util/text.h"

namespace cordon::policy {
namespace {

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  if (!(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_')) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

// An argv the host runs as root: a non-empty list, an absolute program path,
// no NUL byte (it could not be passed to execve).
void CheckArgv(const ParsedPolicy& parsed, const std::string& field,
               const google::protobuf::RepeatedPtrField<std::string>& argv, std::vector<std::string>* out,
               Diagnostics* diags) {
  for (int i = 0; i < argv.size(); ++i) {
    if (argv.Get(i).find('\0') != std::string::npos) {
      diags->push_back(parsed.At(field + "[" + std::to_string(i) + "]", "contains a NUL byte"));
      return;
    }
  }
  if (argv.empty()) {
    diags->push_back(parsed.At(field, "empty command (expected [/absolute/program, args...])"));
    return;
  }
  if (argv.Get(0).empty() || argv.Get(0)[0] != '/') {
    diags->push_back(parsed.At(field + "[0]", "program " + Quoted(argv.Get(0)) +
                                                  " is not an absolute path (it runs as root on the host: "
                                                  "no PATH lookup)"));
    return;
  }
  out->assign(argv.begin(), argv.end());
}

}  // namespace

void CompileCredentials(const ParsedPolicy& parsed, std::vector<CredentialSpec>* out, Diagnostics* diags) {
  const auto& list = parsed.proto.spec().credentials();
  if (static_cast<size_t>(list.size()) > kMaxCredentials) {
    diags->push_back(parsed.At("spec.credentials", "too many credentials: " + std::to_string(list.size()) +
                                                       " (at most " + std::to_string(kMaxCredentials) + ")"));
    return;
  }
  std::map<std::string, int> names;
  for (int i = 0; i < list.size(); ++i) {
    const cordon::v1::Credential& c = list.Get(i);
    const std::string base = "spec.credentials[" + std::to_string(i) + "]";
    const size_t before = diags->size();
    CredentialSpec spec;
    spec.name = c.name();
    spec.at = parsed.At(base, "");
    spec.deliver_at = parsed.positions.Find(base + ".deliver") ? parsed.At(base + ".deliver", "") : spec.at;
    if (c.name().empty()) {
      diags->push_back(parsed.At(base + ".name", "a credential needs a name (the variable the workload reads)"));
    } else if (!ValidName(c.name())) {
      diags->push_back(parsed.At(base + ".name", "invalid credential name " + Quoted(c.name()) +
                                                     " (expected [A-Za-z_][A-Za-z0-9_]*, at most 64 characters)"));
    } else if (auto [it, inserted] = names.emplace(c.name(), i); !inserted) {
      diags->push_back(parsed.At(base + ".name", "duplicate credential " + Quoted(c.name()) + " (first at " +
                                                     "spec.credentials[" + std::to_string(it->second) + "])"));
    }

    const bool has_issue = c.issue_size() > 0 || parsed.positions.Find(base + ".issue");
    const bool has_oidc = c.has_oidc() || parsed.positions.Find(base + ".oidc");
    if (has_issue && has_oidc) {
      diags->push_back(parsed.At(base + ".oidc", "give either issue (a command) or oidc (the built-in issuer), not both"));
    } else if (!has_issue && !has_oidc) {
      diags->push_back(parsed.At(base, "credential " + Quoted(c.name()) +
                                           " needs issue (a command printing it) or oidc (the built-in issuer)"));
    } else if (has_issue) {
      CheckArgv(parsed, base + ".issue", c.issue(), &spec.issue, diags);
    } else if (c.oidc().audience().empty()) {
      diags->push_back(parsed.At(base + ".oidc.audience", "the built-in issuer needs an audience (the token's aud)"));
    } else if (c.oidc().audience().find_first_of(std::string("\0", 1) + "\n\r\t") != std::string::npos) {
      diags->push_back(parsed.At(base + ".oidc.audience", "audience contains a control character"));
    } else {
      spec.oidc_audience = c.oidc().audience();
    }
    if (c.revoke_size() > 0 || parsed.positions.Find(base + ".revoke"))
      CheckArgv(parsed, base + ".revoke", c.revoke(), &spec.revoke, diags);

    std::string error;
    if (c.ttl().empty()) {
      diags->push_back(parsed.At(base + ".ttl", "a credential needs a ttl (how long it lives: 15m)"));
    } else if (!ParseDuration(c.ttl(), &spec.ttl_seconds, &error)) {
      diags->push_back(parsed.At(base + ".ttl", error));
    } else if (spec.ttl_seconds > kMaxCredentialTtlSeconds) {
      diags->push_back(parsed.At(base + ".ttl", "ttl " + DurationText(spec.ttl_seconds) +
                                                    " is too long for a short-lived credential (at most 24h)"));
    }
    if (!c.refresh_before().empty()) {
      if (!ParseDuration(c.refresh_before(), &spec.refresh_before_seconds, &error)) {
        diags->push_back(parsed.At(base + ".refreshBefore", error));
      } else if (spec.ttl_seconds && spec.refresh_before_seconds >= spec.ttl_seconds) {
        diags->push_back(parsed.At(base + ".refreshBefore", "refreshBefore " + DurationText(spec.refresh_before_seconds) +
                                                                " must be shorter than ttl " +
                                                                DurationText(spec.ttl_seconds)));
      }
    }
    if (c.deliver() == "env") {
      spec.deliver = CredentialSpec::Deliver::kEnv;
    } else if (!c.deliver().empty() && c.deliver() != "file") {
      diags->push_back(parsed.At(base + ".deliver", "unknown delivery " + Quoted(c.deliver()) + " (expected file or env)"));
    }
    if (!c.owner().empty()) {
      if (c.owner() == "dynamic" || !ValidRunAs(c.owner()))
        diags->push_back(parsed.At(
            base + ".owner",
            "invalid owner " + Quoted(c.owner()) + " (expected a user name, or UID[:GID] with numbers below 2^31)"));
      else if (spec.deliver == CredentialSpec::Deliver::kEnv)
        diags->push_back(parsed.At(base + ".owner", "owner names who reads the file: it needs deliver: file"));
      else
        spec.owner = c.owner();
    }
    if (spec.deliver == CredentialSpec::Deliver::kEnv && spec.refresh_before_seconds)
      diags->push_back(parsed.At(base + ".refreshBefore",
                                 "an environment variable cannot be replaced in a running process: refreshBefore "
                                 "needs deliver: file"));
    if (diags->size() == before) out->push_back(std::move(spec));
  }
  // NAME_FILE names the file of NAME: it must not be another credential.
  for (size_t i = 0; i < out->size(); ++i) {
    if ((*out)[i].deliver != CredentialSpec::Deliver::kFile) continue;
    auto it = names.find((*out)[i].name + "_FILE");
    if (it != names.end())
      diags->push_back(parsed.At("spec.credentials[" + std::to_string(it->second) + "].name",
                                 "credential " + Quoted(it->first) + " collides with the variable naming the file of " +
                                     Quoted((*out)[i].name)));
  }
}

std::string CredentialError(const Diagnostic& at, const std::string& error) {
  Diagnostic d = at;
  d.message = error;
  return d.ToString();
}

std::string DescribeCredentials(const std::vector<CredentialSpec>& credentials) {
  if (credentials.empty()) return "credentials: none (no spec.credentials)\n";
  std::string out = "credentials (issued for each sandbox on the host; never in events, logs or status):\n";
  for (const CredentialSpec& c : credentials) {
    out += "  " + c.name + ": ";
    if (c.oidc_audience.empty()) {
      out += "issued by " + DisplayText(c.issue[0]) + " (run as root outside the sandbox)";
    } else {
      out += "a JWT signed by cordon's built-in issuer, aud " + DisplayText(c.oidc_audience);
    }
    out += "; ttl " + DurationText(c.ttl_seconds);
    if (c.refresh_before_seconds) out += ", refreshed " + DurationText(c.refresh_before_seconds) + " before expiry";
    out += "; revoked by ";
    out += c.revoke.empty() ? "removal only (no revoke command)" : DisplayText(c.revoke[0]);
    if (c.deliver == CredentialSpec::Deliver::kFile)
      out += "; file /run/cordon/credentials/<sandbox>/" + c.name + ", its path in $" + c.name + "_FILE" +
             (c.owner.empty() ? std::string() : ", owned by " + DisplayText(c.owner)) + "\n";
    else
      out += "; in $" + c.name + " (cordon run only; visible in /proc/<pid>/environ to the same identity)\n";
  }
  return out;
}

}  // namespace cordon::policy
