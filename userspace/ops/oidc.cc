#include "ops/oidc.h"

#include <fcntl.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <utility>
#include <vector>

#include "util/fd.h"
#include "util/fs.h"

namespace cordon::ops {
namespace {

constexpr char kSigningKey[] = "signing-key.pem";
constexpr char kPreviousKey[] = "previous-key.pem";
constexpr size_t kMaxKeyFile = 64 << 10;  // a P-256 PKCS#8 PEM is ~250 bytes

struct BioFree {
  void operator()(BIO* p) const { BIO_free(p); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* p) const { EVP_MD_CTX_free(p); }
};
struct BnFree {
  void operator()(BIGNUM* p) const { BN_free(p); }
};
struct EcdsaSigFree {
  void operator()(ECDSA_SIG* p) const { ECDSA_SIG_free(p); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, MdCtxFree>;
using BnPtr = std::unique_ptr<BIGNUM, BnFree>;
using EcdsaSigPtr = std::unique_ptr<ECDSA_SIG, EcdsaSigFree>;

// Private key bytes on their way to or from a file: wiped when done so no
// copy lingers in freed memory. Sized once, so the buffer never moves.
class SecretBuffer {
 public:
  explicit SecretBuffer(size_t size) : bytes_(size) {}
  ~SecretBuffer() { OPENSSL_cleanse(bytes_.data(), bytes_.size()); }
  SecretBuffer(const SecretBuffer&) = delete;
  SecretBuffer& operator=(const SecretBuffer&) = delete;
  unsigned char* data() { return bytes_.data(); }
  size_t capacity() const { return bytes_.size(); }

 private:
  std::vector<unsigned char> bytes_;
};

std::string Base64Url(const unsigned char* data, size_t size) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  out.reserve((size * 4 + 2) / 3);
  size_t i = 0;
  for (; i + 3 <= size; i += 3) {
    uint32_t v = (uint32_t{data[i]} << 16) | (uint32_t{data[i + 1]} << 8) | data[i + 2];
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (size - i == 1) {
    uint32_t v = uint32_t{data[i]} << 16;
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
  } else if (size - i == 2) {
    uint32_t v = (uint32_t{data[i]} << 16) | (uint32_t{data[i + 1]} << 8);
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
  }
  return out;
}

std::string Base64Url(std::string_view s) {
  return Base64Url(reinterpret_cast<const unsigned char*>(s.data()), s.size());
}

// The code point of the well-formed UTF-8 sequence at s[*i] (advancing *i),
// or -1 for a byte that starts none: overlong forms, surrogates and values
// past U+10FFFF are not well-formed, and a verifier's decoder would reject
// or replace them.
int32_t NextCodePoint(std::string_view s, size_t* i) {
  const auto b0 = static_cast<unsigned char>(s[*i]);
  if (b0 < 0x80) {
    ++*i;
    return b0;
  }
  int len;
  int32_t cp, min;
  if ((b0 & 0xe0) == 0xc0) {
    len = 2, cp = b0 & 0x1f, min = 0x80;
  } else if ((b0 & 0xf0) == 0xe0) {
    len = 3, cp = b0 & 0x0f, min = 0x800;
  } else if ((b0 & 0xf8) == 0xf0) {
    len = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    return -1;
  }
  if (*i + len > s.size()) return -1;
  for (int k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[*i + k]);
    if ((b & 0xc0) != 0x80) return -1;
    cp = (cp << 6) | (b & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return -1;
  *i += len;
  return cp;
}

bool IsUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();)
    if (NextCodePoint(s, &i) < 0) return false;
  return true;
}

// A JSON string literal. Control characters become \u00XX; bytes that are
// not UTF-8 become U+FFFD (Sign refuses such text before it gets here).
std::string JsonString(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    const size_t start = i;
    const int32_t cp = NextCodePoint(s, &i);
    if (cp < 0) {
      out += "\xef\xbf\xbd";
      ++i;
    } else if (cp == '"' || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp < 0x20 || cp == 0x7f) {
      out += "\\u00";
      out += kHex[cp >> 4];
      out += kHex[cp & 15];
    } else {
      out.append(s.substr(start, i - start));
    }
  }
  out += '"';
  return out;
}

std::string Sha256(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha256(), nullptr) != 1)
    std::abort();  // SHA-256 in OpenSSL does not fail short of memory exhaustion
  return std::string(reinterpret_cast<char*>(digest), len);
}

// Random lowercase hex, for names nobody can guess or collide with.
std::string RandomHex(size_t bytes) {
  unsigned char buf[32];
  if (bytes > sizeof buf || RAND_bytes(buf, static_cast<int>(bytes)) != 1)
    std::abort();  // a seeded OpenSSL DRBG does not fail; a guessable jti would be worse than stopping
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < bytes; ++i) {
    out += kHex[buf[i] >> 4];
    out += kHex[buf[i] & 15];
  }
  return out;
}

// A fresh P-256 key as PKCS#8 PEM in a temporary file of `dir` (0600).
Result<std::string> WriteNewKeyTemp(const std::string& dir) {
  struct PkeyFree {
    void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  };
  std::unique_ptr<EVP_PKEY, PkeyFree> pkey(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  BioPtr bio(BIO_new(BIO_s_mem()));  // freed with OPENSSL_clear_free: the PEM does not linger
  if (!pkey || !bio || PEM_write_bio_PrivateKey(bio.get(), pkey.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    ERR_clear_error();
    return Error{"generate a P-256 signing key"};
  }
  char* pem = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &pem);
  if (size <= 0 || !pem) return Error{"generate a P-256 signing key"};
  return WriteTemp(dir, kSigningKey, reinterpret_cast<const unsigned char*>(pem), static_cast<size_t>(size), 0600);
}

int NoPassphrase(char*, int, int, void*) { return 0; }  // an encrypted key fails to load, never prompts

// The key directory: a directory that no other user can write to (one who
// could would be able to remove keys or leave files for cordon to rename).
// Created 0700 when `create` and missing.
Status CheckDir(const std::string& dir, bool create) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT || !create) return SysError("key directory " + dir);
    const size_t slash = dir.find_last_of('/');
    if (slash != std::string::npos && slash > 0) CORDON_TRY(MakeDirs(dir.substr(0, slash), 0755));
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return SysError("mkdir " + dir);
    if (::stat(dir.c_str(), &st) != 0) return SysError("key directory " + dir);
  }
  if (!S_ISDIR(st.st_mode)) return Error{"key directory " + dir + " is not a directory"};
  if (st.st_uid != ::geteuid() && st.st_uid != 0)
    return Error{"key directory " + dir + " is owned by uid " + std::to_string(st.st_uid) + ", not by uid " +
                 std::to_string(::geteuid()) + " that cordon runs as (or root)"};
  if (st.st_mode & 022)
    return Error{"key directory " + dir + " is writable by group or others: chmod go-w it (0700 is expected)"};
  return {};
}

std::string OctalMode(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

}  // namespace

std::string NewJti() { return RandomHex(16); }

OidcSigner::~OidcSigner() = default;

Result<OidcSigner::Key> OidcSigner::Describe(PkeyPtr pkey, const std::string& path) {
  if (EVP_PKEY_get_base_id(pkey.get()) != EVP_PKEY_EC) {
    const char* type = EVP_PKEY_get0_type_name(pkey.get());
    return Error{path + " holds " + (type ? std::string("a ") + type : std::string("a non-EC")) +
                 " key, not a P-256 EC key (ES256 needs P-256)"};
  }
  char group[64] = "";
  size_t group_len = 0;
  int nid = NID_undef;
  if (EVP_PKEY_get_group_name(pkey.get(), group, sizeof group, &group_len) == 1) {
    nid = OBJ_sn2nid(group);
    if (nid == NID_undef) nid = EC_curve_nist2nid(group);
  }
  if (nid != NID_X9_62_prime256v1) {
    ERR_clear_error();
    return Error{path + " holds an EC key on curve " + (group[0] ? std::string(group) : std::string("(unknown)")) +
                 ", not P-256 (ES256 needs P-256)"};
  }
  BIGNUM* x_raw = nullptr;
  BIGNUM* y_raw = nullptr;
  EVP_PKEY_get_bn_param(pkey.get(), OSSL_PKEY_PARAM_EC_PUB_X, &x_raw);
  EVP_PKEY_get_bn_param(pkey.get(), OSSL_PKEY_PARAM_EC_PUB_Y, &y_raw);
  BnPtr x_bn(x_raw), y_bn(y_raw);
  unsigned char x[32], y[32];
  if (!x_bn || !y_bn || BN_bn2binpad(x_bn.get(), x, 32) != 32 || BN_bn2binpad(y_bn.get(), y, 32) != 32) {
    ERR_clear_error();
    return Error{path + ": cannot read the public key of the EC key"};
  }
  Key key;
  key.pkey = std::move(pkey);
  key.x = Base64Url(x, 32);
  key.y = Base64Url(y, 32);
  // RFC 7638: the required members in lexicographic order, no whitespace.
  key.kid = Base64Url(Sha256("{\"crv\":\"P-256\",\"kty\":\"EC\",\"x\":\"" + key.x + "\",\"y\":\"" + key.y + "\"}"));
  return key;
}

Result<std::optional<OidcSigner::Key>> OidcSigner::LoadKey(const std::string& path) {
  // O_NOFOLLOW: a symlink could point anywhere; O_NONBLOCK: a FIFO does not
  // hang the open (fstat refuses it below). The checks use this fd, so they
  // are about the file that is read.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY));
  if (!fd.valid()) {
    if (errno == ENOENT) return std::optional<Key>();
    if (errno == ELOOP) return Error{path + " is a symbolic link, not a regular file"};
    return SysError("open " + path);
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return SysError("stat " + path);
  if (!S_ISREG(st.st_mode)) return Error{path + " is not a regular file"};
  if (st.st_uid != ::geteuid())
    return Error{path + " is owned by uid " + std::to_string(st.st_uid) + ", not by uid " +
                 std::to_string(::geteuid()) + " that cordon runs as"};
  if (st.st_mode & 077)
    return Error{path + " is accessible to group or others (mode " + OctalMode(st.st_mode) +
                 "): a signing key must be 0600"};
  if (static_cast<size_t>(st.st_size) > kMaxKeyFile) return Error{path + " is too large to be a P-256 key"};

  SecretBuffer buf(kMaxKeyFile + 1);
  size_t size = 0;
  for (;;) {
    ssize_t n = ::read(fd.get(), buf.data() + size, buf.capacity() - size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return SysError("read " + path);
    }
    if (n == 0) break;
    size += static_cast<size_t>(n);
    if (size > kMaxKeyFile) return Error{path + " is too large to be a P-256 key"};
  }
  BioPtr bio(BIO_new_mem_buf(buf.data(), static_cast<int>(size)));
  PkeyPtr pkey(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr) : nullptr);
  ERR_clear_error();  // OpenSSL's reasons say nothing the message below does not
  if (!pkey) return Error{path + " is not an unencrypted PEM private key (PKCS#8, P-256 expected)"};
  auto key = Describe(std::move(pkey), path);
  if (!key.ok()) return key.error();
  return std::optional<Key>(std::move(key).value());
}

Result<OidcSigner> OidcSigner::LoadOrCreate(const std::string& dir) {
  CORDON_TRY(CheckDir(dir, /*create=*/true));
  const std::string signing = JoinPath(dir, kSigningKey);
  auto current = LoadKey(signing);
  if (!current.ok()) return current.error();
  if (!current.value()) {
    auto tmp = WriteNewKeyTemp(dir);
    if (!tmp.ok()) return tmp.error();
    // link, not rename: when two processes create the key at once, the
    // second keeps the first one's key instead of replacing it under it.
    const bool linked = ::link(tmp->c_str(), signing.c_str()) == 0;
    const int link_errno = errno;
    ::unlink(tmp->c_str());
    if (!linked && link_errno != EEXIST) return SysError("link " + *tmp + " to " + signing, link_errno);
    CORDON_TRY(SyncDir(dir));
    current = LoadKey(signing);
    if (!current.ok()) return current.error();
    if (!current.value()) return Error{signing + " disappeared while it was created"};
  }
  auto previous = LoadKey(JoinPath(dir, kPreviousKey));
  if (!previous.ok()) return previous.error();

  OidcSigner signer;
  signer.current_ = std::move(*current.value());
  if (previous.value() && previous.value()->kid != signer.current_.kid) {
    signer.previous_ = std::move(previous.value());
    signer.previous_->pkey.reset();  // only its public key is published; it signs nothing any more
  }
  return signer;
}

Status OidcSigner::Rotate(const std::string& dir) {
  CORDON_TRY(CheckDir(dir, /*create=*/false));
  const std::string signing = JoinPath(dir, kSigningKey);
  const std::string previous = JoinPath(dir, kPreviousKey);
  // The key retired must pass the same checks it will meet as previous-key.pem.
  auto current = LoadKey(signing);
  if (!current.ok()) return current.error();
  if (!current.value()) return Error{signing + " does not exist: there is no key to rotate"};

  auto fresh = WriteNewKeyTemp(dir);
  if (!fresh.ok()) return fresh.error();
  // The current key is hard-linked under a temporary name and renamed over
  // previous-key.pem, then the new key is renamed over signing-key.pem:
  // each step is atomic, and at every point both names hold a valid key (a
  // crash in between leaves previous == current, which loads as no previous).
  const std::string retired = JoinPath(dir, std::string(".") + kPreviousKey + ".tmp-" + RandomHex(8));
  if (::link(signing.c_str(), retired.c_str()) != 0) {
    Error e = SysError("link " + signing + " to " + retired);
    ::unlink(fresh->c_str());
    return e;
  }
  if (::rename(retired.c_str(), previous.c_str()) != 0) {
    Error e = SysError("rename " + retired + " to " + previous);
    ::unlink(retired.c_str());
    ::unlink(fresh->c_str());
    return e;
  }
  if (::rename(fresh->c_str(), signing.c_str()) != 0) {
    Error e = SysError("rename " + *fresh + " to " + signing);
    ::unlink(fresh->c_str());
    return e;
  }
  return SyncDir(dir);
}

Result<std::string> OidcSigner::Sign(const OidcClaims& c) const {
  for (const auto& [name, value] : {std::pair<const char*, const std::string*>{"issuer", &c.issuer},
                                    {"subject", &c.subject},
                                    {"audience", &c.audience},
                                    {"jti", &c.jti}})
    if (value->empty()) return Error{std::string("token ") + name + " is empty"};
  for (const auto& [name, value] : {std::pair<const char*, const std::string*>{"issuer", &c.issuer},
                                    {"subject", &c.subject},
                                    {"audience", &c.audience},
                                    {"jti", &c.jti},
                                    {"policy name", &c.policy_name},
                                    {"policy digest", &c.policy_digest}})
    if (!IsUtf8(*value)) return Error{std::string("token ") + name + " is not valid UTF-8"};
  if (c.issued_at < 0) return Error{"token issued_at is before 1970"};
  if (c.expires_at <= c.issued_at)
    return Error{"token expires_at (" + std::to_string(c.expires_at) + ") is not after issued_at (" +
                 std::to_string(c.issued_at) + ")"};
  if (!current_.pkey) return Error{"the signer has no key"};  // a moved-from signer

  const std::string header = "{\"alg\":\"ES256\",\"typ\":\"JWT\",\"kid\":" + JsonString(current_.kid) + "}";
  // cordon_cgroup_id is a JSON number as the claim is specified; cgroup ids
  // are inode numbers, far below 2^53 where a double-based parser would
  // round them.
  const std::string payload = "{\"iss\":" + JsonString(c.issuer) + ",\"sub\":" + JsonString(c.subject) +
                              ",\"aud\":" + JsonString(c.audience) + ",\"iat\":" + std::to_string(c.issued_at) +
                              ",\"nbf\":" + std::to_string(c.issued_at) + ",\"exp\":" + std::to_string(c.expires_at) +
                              ",\"jti\":" + JsonString(c.jti) + ",\"cordon_cgroup_id\":" + std::to_string(c.cgroup_id) +
                              ",\"cordon_policy\":" + JsonString(c.policy_name) +
                              ",\"cordon_policy_digest\":" + JsonString(c.policy_digest) + "}";
  std::string token = Base64Url(header) + "." + Base64Url(payload);

  MdCtxPtr ctx(EVP_MD_CTX_new());
  size_t der_len = 0;
  const auto* tbs = reinterpret_cast<const unsigned char*>(token.data());
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, current_.pkey.get()) != 1 ||
      EVP_DigestSign(ctx.get(), nullptr, &der_len, tbs, token.size()) != 1) {
    ERR_clear_error();
    return Error{"sign the token: ECDSA P-256 signing failed to start"};
  }
  std::vector<unsigned char> der(der_len);
  if (EVP_DigestSign(ctx.get(), der.data(), &der_len, tbs, token.size()) != 1) {
    ERR_clear_error();
    return Error{"sign the token: ECDSA P-256 signing failed"};
  }
  // OpenSSL gives the DER SEQUENCE{r, s}; JWS (RFC 7518 3.4) wants r and s
  // as two 32-byte big-endian integers.
  const unsigned char* p = der.data();
  EcdsaSigPtr sig(d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(der_len)));
  unsigned char raw[64];
  const BIGNUM* r = nullptr;
  const BIGNUM* s = nullptr;
  if (sig) ECDSA_SIG_get0(sig.get(), &r, &s);
  if (!r || !s || BN_bn2binpad(r, raw, 32) != 32 || BN_bn2binpad(s, raw + 32, 32) != 32) {
    ERR_clear_error();
    return Error{"sign the token: cannot convert the ECDSA signature"};
  }
  token += '.';
  token += Base64Url(raw, sizeof raw);
  return token;
}

std::string OidcSigner::Jwks() const {
  auto jwk = [](const Key& k) {
    return "{\"kty\":\"EC\",\"crv\":\"P-256\",\"use\":\"sig\",\"alg\":\"ES256\",\"kid\":" + JsonString(k.kid) +
           ",\"x\":" + JsonString(k.x) + ",\"y\":" + JsonString(k.y) + "}";
  };
  std::string out = "{\"keys\":[" + jwk(current_);
  if (previous_) out += "," + jwk(*previous_);
  return out + "]}";
}

std::string DiscoveryDocument(const std::string& issuer) {
  std::string base = issuer;
  while (!base.empty() && base.back() == '/') base.pop_back();
  // "issuer" is the iss claim exactly (verifiers compare them as strings).
  return "{\"issuer\":" + JsonString(issuer) + ",\"jwks_uri\":" + JsonString(base + "/.well-known/jwks.json") +
         ",\"response_types_supported\":[\"id_token\"],\"subject_types_supported\":[\"public\"]"
         ",\"id_token_signing_alg_values_supported\":[\"ES256\"]"
         ",\"claims_supported\":[\"iss\",\"sub\",\"aud\",\"iat\",\"nbf\",\"exp\",\"jti\",\"cordon_cgroup_id\","
         "\"cordon_policy\",\"cordon_policy_digest\"]}";
}

std::optional<std::string> OidcDocumentAt(const OidcSigner& signer, const std::string& issuer,
                                          const std::string& path) {
  // The issuer's path: what follows scheme://host[:port].
  std::string prefix;
  const size_t scheme = issuer.find("://");
  if (scheme != std::string::npos) {
    const size_t slash = issuer.find('/', scheme + 3);
    if (slash != std::string::npos) prefix = issuer.substr(slash);
  }
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (path == prefix + "/.well-known/openid-configuration") return DiscoveryDocument(issuer) + "\n";
  if (path == prefix + "/.well-known/jwks.json") return signer.Jwks() + "\n";
  return std::nullopt;
}

std::string OidcKeyStamp(const std::string& dir) {
  std::string stamp;
  for (const char* name : {kSigningKey, kPreviousKey}) {
    struct stat st;
    if (::stat((dir + "/" + name).c_str(), &st) != 0) {
      stamp += "-;";
      continue;
    }
    stamp += std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
             std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + ";";
  }
  return stamp;
}

Status PublishFiles(const OidcSigner& signer, const std::string& issuer, const std::string& out_dir) {
  CORDON_TRY(MakeDirs(out_dir, 0755));
  CORDON_TRY(WriteFileAtomic(out_dir, "openid-configuration", DiscoveryDocument(issuer) + "\n", 0644));
  CORDON_TRY(WriteFileAtomic(out_dir, "jwks.json", signer.Jwks() + "\n", 0644));
  return {};
}

}  // namespace cordon::ops
