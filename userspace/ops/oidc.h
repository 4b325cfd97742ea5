// The built-in issuer of task-scoped short-lived credentials: cordon signs a
// JWT (ES256) naming one sandbox, and an OIDC verifier (Vault JWT auth, AWS
// AssumeRoleWithWebIdentity, PyJWT) accepts it against the JWKS and
// discovery document published here. The private key never leaves its file
// and this process: no error message or log line carries it.
#pragma once

#include <openssl/evp.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "util/result.h"

namespace cordon::ops {

// What one token says. Times are unix seconds.
struct OidcClaims {
  std::string issuer;                      // iss: the URL the verifier fetches the discovery document under
  std::string subject;                     // sub: the sandbox name
  std::string audience;                    // aud: the one verifier the token is for
  std::string jti;                         // a fresh NewJti() per token
  int64_t issued_at = 0, expires_at = 0;   // iat (and nbf), exp
  uint64_t cgroup_id = 0;                  // cordon_cgroup_id
  std::string policy_name, policy_digest;  // cordon_policy, cordon_policy_digest
};

// 128 random bits as 32 lowercase hex digits.
std::string NewJti();

// The signing key (and the one before the last rotation) of a key directory:
//   <dir>/signing-key.pem   PKCS#8 PEM, P-256, 0600, owned by the euid
//   <dir>/previous-key.pem  the same, optional; only its public key is used
class OidcSigner {
 public:
  // Loads the keys, generating the signing key when the directory has none
  // (the directory is created 0700). Refuses a key file that is not a
  // regular file, is group/other-accessible, is owned by another user or is
  // not a P-256 EC key, and a directory that another user can write to.
  static Result<OidcSigner> LoadOrCreate(const std::string& dir);
  // The signing key becomes previous-key.pem (replacing an older one) and a
  // new signing key is generated; signers loaded before keep the old keys.
  static Status Rotate(const std::string& dir);

  OidcSigner(OidcSigner&&) noexcept = default;
  OidcSigner& operator=(OidcSigner&&) noexcept = default;
  OidcSigner(const OidcSigner&) = delete;
  OidcSigner& operator=(const OidcSigner&) = delete;
  ~OidcSigner();

  // header.payload.signature (base64url, unpadded), signed with the signing
  // key; an error for claims a verifier would misread (empty iss, sub, aud
  // or jti, exp not after iat, text that is not UTF-8).
  Result<std::string> Sign(const OidcClaims& claims) const;
  // The signing key's RFC 7638 JWK thumbprint (SHA-256, base64url).
  const std::string& kid() const { return current_.kid; }
  // {"keys":[signing key, previous key if any]}: public keys only.
  std::string Jwks() const;

 private:
  struct PkeyFree {
    void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  };
  using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;
  struct Key {
    PkeyPtr pkey;
    std::string kid, x, y;  // x, y: the public point's coordinates, base64url
  };
  static Result<Key> Describe(PkeyPtr pkey, const std::string& path);
  static Result<std::optional<Key>> LoadKey(const std::string& path);  // nullopt: no such file
  static Status CreateKey(const std::string& dir);
  OidcSigner() = default;

  Key current_;
  std::optional<Key> previous_;
};

// The OpenID provider metadata a verifier fetches at
// <issuer>/.well-known/openid-configuration.
std::string DiscoveryDocument(const std::string& issuer);

// The document a verifier fetches at `path` of the issuer's host: the
// discovery document at <issuer path>/.well-known/openid-configuration, the
// JWKS at <issuer path>/.well-known/jwks.json (both JSON); nullopt for any
// other path.
std::optional<std::string> OidcDocumentAt(const OidcSigner& signer, const std::string& issuer,
                                          const std::string& path);

// What the key files of `dir` are now (device, inode, size, mtime of each):
// a change means the keys were rotated or replaced and must be read again.
std::string OidcKeyStamp(const std::string& dir);

// Writes <out_dir>/openid-configuration and <out_dir>/jwks.json (0644,
// replaced atomically) for an operator who serves them from a static web
// server under <issuer>/.well-known/.
Status PublishFiles(const OidcSigner& signer, const std::string& issuer, const std::string& out_dir);

}  // namespace cordon::ops
