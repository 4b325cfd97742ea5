// spec.credentials (issue 15): task-scoped, short-lived credentials, parsed
// and validated. Pure: nothing is issued here (see ops/credentials.h).
//
//   credentials:
//     - name: GITHUB_TOKEN            # [A-Za-z_][A-Za-z0-9_]{0,63}, unique
//       issue: [/usr/local/bin/mint-token, --repo, acme/app]
//       revoke: [/usr/local/bin/revoke-token]   # optional; gets it on stdin
//       ttl: 15m                      # required, at most 24h
//       refreshBefore: 2m             # optional, below ttl
//       deliver: file                 # file (default) | env
//     - name: CORDON_ID_TOKEN
//       oidc: {audience: sts.amazonaws.com}    # the built-in issuer
//       ttl: 10m
//
// Exactly one of issue and oidc. issue[0] and revoke[0] are absolute paths
// (they run as root on the host: no PATH lookup). NAME_FILE must not be the
// name of another credential (it is the variable naming a file's path).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "policy/diagnostic.h"
#include "policy/parser.h"

namespace cordon::policy {

struct CredentialSpec {
  enum class Deliver { kFile, kEnv };
  std::string name;
  std::vector<std::string> issue;   // empty for the built-in issuer
  std::vector<std::string> revoke;  // empty: nothing to run at revocation
  uint64_t ttl_seconds = 0;
  uint64_t refresh_before_seconds = 0;  // 0: never refreshed
  Deliver deliver = Deliver::kFile;
  std::string oidc_audience;  // non-empty: the built-in issuer signs a JWT
  bool operator==(const CredentialSpec&) const = default;
};

constexpr uint64_t kMaxCredentialTtlSeconds = 24 * 3600;
constexpr size_t kMaxCredentials = 32;

// Validates spec.credentials of `parsed` into *out (file order); each error
// is appended to *diags at its field ("spec.credentials[1].ttl").
void CompileCredentials(const ParsedPolicy& parsed, std::vector<CredentialSpec>* out, Diagnostics* diags);

// "credentials: ..." lines for `cordon policy check`.
std::string DescribeCredentials(const std::vector<CredentialSpec>& credentials);

}  // namespace cordon::policy
