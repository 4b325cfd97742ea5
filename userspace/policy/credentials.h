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
//       owner: builder                # who reads the file: user or UID[:GID] (attach: required)
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
  std::string owner;          // "" or a user name / "UID[:GID]" (never "dynamic")
  // Where the entry and its deliver field are written (message empty): the
  // file:line:column of errors about it that only the use knows (attach
  // needs an owner, refuses env). Not part of what the credential is.
  Diagnostic at, deliver_at;
  // The same credential: what is issued, how, to whom (positions aside).
  bool SameAs(const CredentialSpec& o) const {
    return name == o.name && issue == o.issue && revoke == o.revoke && ttl_seconds == o.ttl_seconds &&
           refresh_before_seconds == o.refresh_before_seconds && deliver == o.deliver &&
           oidc_audience == o.oidc_audience && owner == o.owner;
  }
};

// `error` at the position of `at` ("file:line:column: field: error").
std::string CredentialError(const Diagnostic& at, const std::string& error);

constexpr uint64_t kMaxCredentialTtlSeconds = 24 * 3600;
constexpr size_t kMaxCredentials = 32;

// Validates spec.credentials of `parsed` into *out (file order); each error
// is appended to *diags at its field ("spec.credentials[1].ttl").
void CompileCredentials(const ParsedPolicy& parsed, std::vector<CredentialSpec>* out, Diagnostics* diags);

// "credentials: ..." lines for `cordon policy check`.
std::string DescribeCredentials(const std::vector<CredentialSpec>& credentials);

}  // namespace cordon::policy
