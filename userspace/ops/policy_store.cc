#include "ops/policy_store.h"

#include <cerrno>
#include <cstdlib>

#include "policy/compiler.h"
#include "policy/parser.h"
#include "util/fs.h"
#include "util/text.h"

namespace cordon::ops {

std::string PolicyStoreDir() {
  const char* env = std::getenv("CORDON_POLICY_STORE");
  return env && *env ? env : kPolicyStoreDir;
}

std::string PolicyStoreName(const std::string& digest) {
  if (digest.rfind("sha256:", 0) != 0 || digest.size() != 7 + 64 ||
      digest.find_first_not_of("0123456789abcdef", 7) != std::string::npos)
    return "";
  return "sha256-" + digest.substr(7) + ".yaml";
}

cordon::Status KeepPolicyText(const std::string& text, const std::string& digest, const std::string& dir) {
  const std::string name = PolicyStoreName(digest);
  if (name.empty()) return {};  // builtin:default: cordon's own text
  if (policy::TextDigest(text) != digest) return Error{"the policy text given is not the policy " + digest};
  if (Status made = MakeDirs(dir, 0700); !made.ok()) return made;
  auto kept = ReadFile(JoinPath(dir, name), text.size() + 1);
  if (kept && *kept == text) return {};
  return WriteFileAtomic(dir, name, text, 0600);
}

Result<std::string> KeptPolicyText(const std::string& digest, const std::string& dir) {
  if (digest == "builtin:default") return std::string(policy::DefaultPolicyYaml());
  const std::string name = PolicyStoreName(digest);
  if (name.empty()) return Error{"not a policy digest: " + Quoted(DisplayText(EscapeWorkloadBytes(digest)))};
  const std::string path = JoinPath(dir, name);
  auto text = ReadFile(path, 16u << 20);
  if (!text) {
    if (text.error().err == ENOENT)
      return Error{"no policy text is kept for " + digest + " (" + path +
                   " does not exist: it was attached by a cordon that kept none, on another host, or the entry was "
                   "removed)"};
    return text.error();
  }
  if (policy::TextDigest(*text) != digest)
    return Error{path + " does not hold the policy " + digest + " (its text has digest " + policy::TextDigest(*text) +
                 "): it was changed after cordon kept it; not used"};
  return std::move(*text);
}

}  // namespace cordon::ops
