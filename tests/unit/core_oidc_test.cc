// The built-in OIDC issuer (ops/oidc.h): the tokens it signs are checked by
// an independent implementation, PyJWT (Debian's python3-jwt on
// python3-cryptography), the way a verifier such as Vault or AWS STS checks
// them: key picked from the JWKS by kid, ES256, audience, issuer, expiry.
// The key files are refused when they are unsafe. No root needed.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/common/jwt_verify.h"
#include "tests/unit/temp_dir.h"
#include "ops/oidc.h"

namespace cordon::ops {
namespace {

class Dir : public cordon::test::TempDir {
 public:
  Dir() : TempDir("oidc") {}
};

void Write(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << data;
}

std::string Read(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

mode_t ModeOf(const std::string& path) {
  struct stat st = {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

using cordon::test::PythonWithJwt;
using cordon::test::Shell;
constexpr const char* kVerify = cordon::test::kVerifyJwtPy;

constexpr char kIssuer[] = "https://cordon.example/oidc";
constexpr char kAudience[] = "sts.amazonaws.com";

OidcClaims Claims(const std::string& subject = "build-42") {
  OidcClaims c;
  c.issuer = kIssuer;
  c.subject = subject;
  c.audience = kAudience;
  c.jti = NewJti();
  c.issued_at = ::time(nullptr);
  c.expires_at = c.issued_at + 300;
  c.cgroup_id = 123456789;
  c.policy_name = "ci-build";
  c.policy_digest = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
  return c;
}

std::string B64UrlDecode(const std::string& s) {
  static const std::string kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    acc = (acc << 6) | static_cast<uint32_t>(kAlphabet.find(c));
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return out;
}

std::string B64UrlEncode(const std::string& s) {
  static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : s) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += kAlphabet[(acc >> bits) & 63];
    }
  }
  if (bits > 0) out += kAlphabet[(acc << (6 - bits)) & 63];
  return out;
}

// A key of another type or curve, as PKCS#8 PEM in a 0600 file.
void WriteForeignKey(const std::string& path, EVP_PKEY* pkey) {
  ASSERT_NE(pkey, nullptr);
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(PEM_write_PrivateKey(f, pkey, nullptr, nullptr, 0, nullptr, nullptr), 1);
  std::fclose(f);
  EVP_PKEY_free(pkey);
  ::chmod(path.c_str(), 0600);
}

class Oidc : public ::testing::Test {
 protected:
  void SetUp() override {
    python_ = PythonWithJwt();
    ASSERT_FALSE(python_.empty())
        << "python3-jwt is needed to verify tokens independently (apt-get install python3-jwt "
           "python3-cryptography): neither /usr/bin/python3 nor python3 on PATH can import jwt";
    Write(tmp_ / "verify.py", kVerify);
  }

  // PyJWT's verdict on `token` with `jwks`: "OK {...}" or the exception.
  std::string Verify(const std::string& token, const std::string& jwks, const std::string& audience = kAudience,
                     const std::string& issuer = kIssuer) {
    Write(tmp_ / "token", token);
    Write(tmp_ / "jwks.json", jwks);
    return Shell(python_ + " " + (tmp_ / "verify.py") + " " + (tmp_ / "token") + " " + (tmp_ / "jwks.json") + " '" +
                 audience + "' '" + issuer + "'")
        .second;
  }

  // Runs a Python snippet that reads the JSON document `doc` as `d`.
  std::string Py(const std::string& doc, const std::string& code) {
    Write(tmp_ / "doc.json", doc);
    Write(tmp_ / "snippet.py", "import json, sys, hashlib, base64\nd = json.load(open(sys.argv[1]))\n" + code);
    return Shell(python_ + " " + (tmp_ / "snippet.py") + " " + (tmp_ / "doc.json")).second;
  }

  std::string python_;
  Dir tmp_;   // scratch for the verifier
  Dir keys_;  // the key directory
};

TEST_F(Oidc, ValidTokenVerifiesAndClaimsRoundTrip) {
  auto signer = OidcSigner::LoadOrCreate(keys_.path());
  ASSERT_TRUE(signer.ok()) << signer.error().ToString();
  OidcClaims c = Claims();
  auto token = signer->Sign(c);
  ASSERT_TRUE(token.ok()) << token.error().ToString();
  const std::string out = Verify(*token, signer->Jwks());
  ASSERT_EQ(out.rfind("OK ", 0), 0u) << out;
  EXPECT_NE(out.find("\"sub\": \"build-42\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"cordon_cgroup_id\": 123456789"), std::string::npos) << out;
  EXPECT_NE(out.find("\"cordon_policy_digest\": \"" + c.policy_digest + "\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"cordon_policy\": \"ci-build\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"jti\": \"" + c.jti + "\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"nbf\": " + std::to_string(c.issued_at)), std::string::npos) << out;
  EXPECT_NE(out.find("\"alg\": \"ES256\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"kid\": \"" + signer->kid() + "\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"typ\": \"JWT\""), std::string::npos) << out;
  // The signature is raw R||S (64 bytes), not DER.
  EXPECT_EQ(B64UrlDecode(token->substr(token->rfind('.') + 1)).size(), 64u);
  EXPECT_EQ(token->find('='), std::string::npos);
}

TEST_F(Oidc, ExpiredTokenIsRejected) {
  auto signer = OidcSigner::LoadOrCreate(keys_.path());
  ASSERT_TRUE(signer.ok()) << signer.error().ToString();
  OidcClaims c = Claims();
  c.issued_at -= 7200;
  c.expires_at = c.issued_at + 3600;  // an hour ago
  auto expired = signer->Sign(c);
  ASSERT_TRUE(expired.ok()) << expired.error().ToString();
  EXPECT_EQ(Verify(*expired, signer->Jwks()).rfind("ExpiredSignatureError", 0), 0u) << Verify(*expired, signer->Jwks());
  auto valid = signer->Sign(Claims());  // the same script accepts a current one
  ASSERT_TRUE(valid.ok());
  EXPECT_EQ(Verify(*valid, signer->Jwks()).rfind("OK ", 0), 0u) << Verify(*valid, signer->Jwks());
}

TEST_F(Oidc, WrongAudienceAndIssuerAreRejected) {
  auto signer = OidcSigner::LoadOrCreate(keys_.path());
  ASSERT_TRUE(signer.ok()) << signer.error().ToString();
  auto token = signer->Sign(Claims());
  ASSERT_TRUE(token.ok());
  std::string out = Verify(*token, signer->Jwks(), "vault.example");
  EXPECT_EQ(out.rfind("InvalidAudienceError", 0), 0u) << out;
  out = Verify(*token, signer->Jwks(), kAudience, "https://other.example");
  EXPECT_EQ(out.rfind("InvalidIssuerError", 0), 0u) << out;
}

TEST_F(Oidc, FlippedSignatureByteIsRejected) {
  auto signer = OidcSigner::LoadOrCreate(keys_.path());
  ASSERT_TRUE(signer.ok()) << signer.error().ToString();
  auto token = signer->Sign(Claims());
  ASSERT_TRUE(token.ok());
  const size_t dot = token->rfind('.');
  for (size_t byte : {0u, 20u, 63u}) {
    std::string sig = B64UrlDecode(token->substr(dot + 1));
    ASSERT_EQ(sig.size(), 64u);
    sig[byte] = static_cast<char>(sig[byte] ^ 0x01);
    const std::string forged = token->substr(0, dot + 1) + B64UrlEncode(sig);
    const std::string out = Verify(forged, signer->Jwks());
    EXPECT_EQ(out.rfind("InvalidSignatureError", 0), 0u) << "byte " << byte << ": " << out;
  }
  EXPECT_EQ(Verify(*token, signer->Jwks()).rfind("OK ", 0), 0u);
}

TEST_F(Oidc, EscapedClaimsRoundTrip) {
  auto signer = OidcSigner::LoadOrCreate(keys_.path());
  ASSERT_TRUE(signer.ok()) << signer.error().ToString();
  const std::string subject = "a\"b\\c\nd\x01\x1f\x7f e\xc3\xa9 \xf0\x9f\x94\x92";
  auto token = signer->Sign(Claims(subject));
  ASSERT_TRUE(token.ok()) << token.error().ToString();
  const std::string payload =
      B64UrlDecode(token->substr(token->find('.') + 1, token->rfind('.') - token->find('.') - 1));
  EXPECT_NE(payload.find(R"("sub":"a\"b\\c\u000ad\u0001\u001f\u007f e)"), std::string::npos) << payload;
  Write(tmp_ / "want", subject);
  Write(tmp_ / "token", *token);
  Write(tmp_ / "jwks.json", signer->Jwks());
  Write(
      tmp_ / "sub.py",
      "import jwt, sys\n"
      "key = jwt.PyJWKSet.from_json(open(sys.argv[2]).read()).keys[0].key\n"
      "c = jwt.decode(open(sys.argv[1]).read(), key, algorithms=['ES256'], audience='" +
          std::string(kAudience) +
          "')\n"
          "print('SAME' if c['sub'].encode() == open(sys.argv[3], 'rb').read() else 'DIFFERENT ' + repr(c['sub']))\n");
  const auto [ok, out] = Shell(python_ + " " + (tmp_ / "sub.py") + " " + (tmp_ / "token") + " " + (tmp_ / "jwks.json") +
                               " " + (tmp_ / "want"));
  EXPECT_TRUE(ok) << out;
  EXPECT_EQ(out, "SAME\n");
}

TEST_F(Oidc, RotationKeepsOldTokensVerifying) {
  auto before = OidcSigner::LoadOrCreate(keys_.path());
  ASSERT_TRUE(before.ok()) << before.error().ToString();
  auto old_token = before->Sign(Claims());
  ASSERT_TRUE(old_token.ok());

  Status rotated = OidcSigner::Rotate(keys_.path());
  ASSERT_TRUE(rotated.ok()) << rotated.error().ToString();
  EXPECT_EQ(ModeOf(keys_ / "previous-key.pem"), 0600u);
  EXPECT_EQ(ModeOf(keys_ / "signing-key.pem"), 0600u);
  auto after = OidcSigner::LoadOrCreate(keys_.path());
  ASSERT_TRUE(after.ok()) << after.error().ToString();
  EXPECT_NE(after->kid(), before->kid());
  EXPECT_EQ(Py(after->Jwks(), "print(sorted(k['kid'] for k in d['keys']))"),
            "[" +
                std::string(after->kid() < before->kid() ? "'" + after->kid() + "', '" + before->kid() + "'"
                                                         : "'" + before->kid() + "', '" + after->kid() + "'") +
                "]\n");

  std::string out = Verify(*old_token, after->Jwks());
  EXPECT_EQ(out.rfind("OK ", 0), 0u) << out;
  EXPECT_NE(out.find("\"kid\": \"" + before->kid() + "\""), std::string::npos) << out;
  auto new_token = after->Sign(Claims());
  ASSERT_TRUE(new_token.ok());
  out = Verify(*new_token, after->Jwks());
  EXPECT_EQ(out.rfind("OK ", 0), 0u) << out;
  EXPECT_NE(out.find("\"kid\": \"" + after->kid() + "\""), std::string::npos) << out;
  // The signer loaded before rotating still signs with the key it has.
  auto stale = before->Sign(Claims());
  ASSERT_TRUE(stale.ok());
  EXPECT_EQ(Verify(*stale, after->Jwks()).rfind("OK ", 0), 0u);

  // A second rotation retires the first key: its tokens stop verifying.
  ASSERT_TRUE(OidcSigner::Rotate(keys_.path()).ok());
  auto third = OidcSigner::LoadOrCreate(keys_.path());
  ASSERT_TRUE(third.ok()) << third.error().ToString();
  EXPECT_EQ(Verify(*old_token, third->Jwks()).rfind("NoMatchingKey", 0), 0u);
  EXPECT_EQ(Verify(*new_token, third->Jwks()).rfind("OK ", 0), 0u);
  EXPECT_EQ(Py(third->Jwks(), "print(len(d['keys']))"), "2\n");
  // No temporary file is left behind.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(keys_.path())) {
    ++files;
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  }
  EXPECT_EQ(files, 2);
}

TEST_F(Oidc, RotateNeedsAKey) {
  Status st = OidcSigner::Rotate(keys_.path());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find(keys_ / "signing-key.pem"), std::string::npos) << st.error().message;
}

TEST_F(Oidc, CreatesKeyFile0600InNewDir0700) {
  const std::string dir = keys_ / "state/oidc";
  auto signer = OidcSigner::LoadOrCreate(dir);
  ASSERT_TRUE(signer.ok()) << signer.error().ToString();
  EXPECT_EQ(ModeOf(dir), 0700u);
  EXPECT_EQ(ModeOf(dir + "/signing-key.pem"), 0600u);
  const std::string pem = Read(dir + "/signing-key.pem");
  EXPECT_EQ(pem.rfind("-----BEGIN PRIVATE KEY-----", 0), 0u);  // PKCS#8
  EXPECT_FALSE(std::filesystem::exists(dir + "/previous-key.pem"));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()), 1);
}

TEST_F(Oidc, SameDirGivesSameKid) {
  auto first = OidcSigner::LoadOrCreate(keys_.path());
  ASSERT_TRUE(first.ok()) << first.error().ToString();
  const std::string pem = Read(keys_ / "signing-key.pem");
  auto second = OidcSigner::LoadOrCreate(keys_.path());
  ASSERT_TRUE(second.ok()) << second.error().ToString();
  EXPECT_EQ(first->kid(), second->kid());
  EXPECT_EQ(first->Jwks(), second->Jwks());
  EXPECT_EQ(Read(keys_ / "signing-key.pem"), pem);
  // A token of one verifies with the other's JWKS.
  auto token = first->Sign(Claims());
  ASSERT_TRUE(token.ok());
  EXPECT_EQ(Verify(*token, second->Jwks()).rfind("OK ", 0), 0u);
}

TEST_F(Oidc, JwksIsPublicAndKidIsTheRfc7638Thumbprint) {
  auto signer = OidcSigner::LoadOrCreate(keys_.path());
  ASSERT_TRUE(signer.ok()) << signer.error().ToString();
  const std::string out = Py(signer->Jwks(),
                             "k = d['keys'][0]\n"
                             "canon = json.dumps({'crv': k['crv'], 'kty': k['kty'], 'x': k['x'], 'y': k['y']},"
                             " sort_keys=True, separators=(',', ':'))\n"
                             "t = base64.urlsafe_b64encode(hashlib.sha256(canon.encode()).digest()).rstrip(b'=')\n"
                             "print(len(d['keys']), k['kty'], k['crv'], k['use'], k['alg'], 'd' in k,"
                             " t.decode() == k['kid'])\n");
  EXPECT_EQ(out, "1 EC P-256 sig ES256 False True\n");
  EXPECT_EQ(signer->kid().size(), 43u);  // 32 bytes, base64url unpadded
}

TEST_F(Oidc, RefusesGroupOrOtherReadableKey) {
  ASSERT_TRUE(OidcSigner::LoadOrCreate(keys_.path()).ok());
  const std::string key = keys_ / "signing-key.pem";
  ASSERT_EQ(::chmod(key.c_str(), 0644), 0);
  auto signer = OidcSigner::LoadOrCreate(keys_.path());
  ASSERT_FALSE(signer.ok());
  EXPECT_NE(signer.error().message.find(key), std::string::npos) << signer.error().message;
  EXPECT_NE(signer.error().message.find("0644"), std::string::npos) << signer.error().message;
  EXPECT_EQ(signer.error().message.find("PRIVATE"), std::string::npos);
  EXPECT_FALSE(OidcSigner::Rotate(keys_.path()).ok());
  EXPECT_EQ(ModeOf(key), 0644u);  // refused, not silently fixed or replaced

  // The previous key gets the same checks.
  ASSERT_EQ(::chmod(key.c_str(), 0600), 0);
  ASSERT_TRUE(OidcSigner::Rotate(keys_.path()).ok());
  const std::string previous = keys_ / "previous-key.pem";
  ASSERT_EQ(::chmod(previous.c_str(), 0640), 0);
  signer = OidcSigner::LoadOrCreate(keys_.path());
  ASSERT_FALSE(signer.ok());
  EXPECT_NE(signer.error().message.find(previous), std::string::npos) << signer.error().message;
}

TEST_F(Oidc, RefusesKeyThatIsNotP256) {
  const std::string key = keys_ / "signing-key.pem";
  WriteForeignKey(key, EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", size_t{2048}));
  const std::string rsa_pem = Read(key);
  auto signer = OidcSigner::LoadOrCreate(keys_.path());
  ASSERT_FALSE(signer.ok());
  EXPECT_NE(signer.error().message.find(key), std::string::npos) << signer.error().message;
  EXPECT_NE(signer.error().message.find("not a P-256 EC key"), std::string::npos) << signer.error().message;
  EXPECT_EQ(Read(key), rsa_pem);  // left as it was

  WriteForeignKey(key, EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-384"));
  signer = OidcSigner::LoadOrCreate(keys_.path());
  ASSERT_FALSE(signer.ok());
  EXPECT_NE(signer.error().message.find(key), std::string::npos) << signer.error().message;
  EXPECT_NE(signer.error().message.find("secp384r1"), std::string::npos) << signer.error().message;

  Write(key, "not a key\n");
  signer = OidcSigner::LoadOrCreate(keys_.path());
  ASSERT_FALSE(signer.ok());
  EXPECT_NE(signer.error().message.find(key), std::string::npos) << signer.error().message;
}

TEST_F(Oidc, RefusesSymlinkDirectoryAndForeignOwner) {
  Dir elsewhere;
  ASSERT_TRUE(OidcSigner::LoadOrCreate(elsewhere.path()).ok());
  const std::string key = keys_ / "signing-key.pem";
  ASSERT_EQ(::symlink((elsewhere / "signing-key.pem").c_str(), key.c_str()), 0);
  auto signer = OidcSigner::LoadOrCreate(keys_.path());
  ASSERT_FALSE(signer.ok());
  EXPECT_NE(signer.error().message.find(key + " is a symbolic link"), std::string::npos) << signer.error().message;
  ASSERT_EQ(::unlink(key.c_str()), 0);

  ASSERT_EQ(::mkdir(key.c_str(), 0700), 0);
  signer = OidcSigner::LoadOrCreate(keys_.path());
  ASSERT_FALSE(signer.ok());
  EXPECT_NE(signer.error().message.find(key + " is not a regular file"), std::string::npos) << signer.error().message;
  ASSERT_EQ(::rmdir(key.c_str()), 0);

  ASSERT_EQ(::chmod(keys_.path().c_str(), 0777), 0);
  signer = OidcSigner::LoadOrCreate(keys_.path());
  ASSERT_FALSE(signer.ok());
  EXPECT_NE(signer.error().message.find("writable by group or others"), std::string::npos) << signer.error().message;
  ASSERT_EQ(::chmod(keys_.path().c_str(), 0700), 0);

  if (::geteuid() == 0) {  // only root can give a file away
    ASSERT_TRUE(OidcSigner::LoadOrCreate(keys_.path()).ok());
    ASSERT_EQ(::chown(key.c_str(), 65534, 65534), 0);
    signer = OidcSigner::LoadOrCreate(keys_.path());
    ASSERT_FALSE(signer.ok());
    EXPECT_NE(signer.error().message.find(key + " is owned by uid 65534"), std::string::npos) << signer.error().message;
  }
}

TEST_F(Oidc, SignRejectsBadClaims) {
  auto signer = OidcSigner::LoadOrCreate(keys_.path());
  ASSERT_TRUE(signer.ok()) << signer.error().ToString();
  auto expect_refused = [&](OidcClaims c, const std::string& why) {
    auto token = signer->Sign(c);
    ASSERT_FALSE(token.ok()) << why;
    EXPECT_NE(token.error().message.find(why), std::string::npos) << token.error().message;
  };
  OidcClaims c = Claims();
  c.audience = "";
  expect_refused(c, "audience is empty");
  c = Claims(), c.issuer = "";
  expect_refused(c, "issuer is empty");
  c = Claims(), c.jti = "";
  expect_refused(c, "jti is empty");
  expect_refused(Claims(""), "subject is empty");
  expect_refused(Claims("build\xff"), "subject is not valid UTF-8");
  expect_refused(Claims("\xc0\xaf"), "subject is not valid UTF-8");       // overlong '/'
  expect_refused(Claims("\xed\xa0\x80"), "subject is not valid UTF-8");   // a surrogate
  expect_refused(Claims("build\xe2\x82"), "subject is not valid UTF-8");  // truncated
  c = Claims(), c.policy_digest = "\x80";
  expect_refused(c, "policy digest is not valid UTF-8");
  c = Claims(), c.expires_at = c.issued_at;
  expect_refused(c, "is not after issued_at");

  OidcSigner moved = std::move(signer.value());
  EXPECT_FALSE(signer->Sign(Claims()).ok());  // NOLINT(bugprone-use-after-move): refused, not a crash
  EXPECT_TRUE(moved.Sign(Claims()).ok());
}

TEST_F(Oidc, DiscoveryDocumentIsValidJson) {
  for (const std::string& issuer : {std::string(kIssuer), std::string(kIssuer) + "/"}) {
    const std::string out = Py(
        DiscoveryDocument(issuer),
        "print(d['issuer']); print(d['jwks_uri']); print(d['id_token_signing_alg_values_supported'],"
        " d['response_types_supported'], d['subject_types_supported'], 'cordon_cgroup_id' in d['claims_supported'])");
    EXPECT_EQ(out, issuer + "\n" + kIssuer + "/.well-known/jwks.json\n['ES256'] ['id_token'] ['public'] True\n");
  }
}

TEST_F(Oidc, PublishFilesWritesWhatAVerifierFetches) {
  auto signer = OidcSigner::LoadOrCreate(keys_.path());
  ASSERT_TRUE(signer.ok()) << signer.error().ToString();
  const std::string out_dir = tmp_ / "www/.well-known";
  Status st = PublishFiles(*signer, kIssuer, out_dir);
  ASSERT_TRUE(st.ok()) << st.error().ToString();
  EXPECT_EQ(ModeOf(out_dir + "/jwks.json"), 0644u);
  EXPECT_EQ(ModeOf(out_dir + "/openid-configuration"), 0644u);
  EXPECT_EQ(Read(out_dir + "/openid-configuration"), DiscoveryDocument(kIssuer) + "\n");
  const std::string jwks = Read(out_dir + "/jwks.json");
  EXPECT_EQ(jwks, signer->Jwks() + "\n");
  auto token = signer->Sign(Claims());
  ASSERT_TRUE(token.ok());
  EXPECT_EQ(Verify(*token, jwks).rfind("OK ", 0), 0u) << Verify(*token, jwks);
  // Publishing again replaces the files (after a rotation, say).
  ASSERT_TRUE(OidcSigner::Rotate(keys_.path()).ok());
  auto rotated = OidcSigner::LoadOrCreate(keys_.path());
  ASSERT_TRUE(rotated.ok());
  ASSERT_TRUE(PublishFiles(*rotated, kIssuer, out_dir).ok());
  EXPECT_EQ(Read(out_dir + "/jwks.json"), rotated->Jwks() + "\n");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(out_dir), std::filesystem::directory_iterator()), 2);
}

// What the agent's HTTP listener serves: the two documents under the
// issuer's own path (a verifier fetches <iss>/.well-known/...), nothing else.
TEST_F(Oidc, DocumentsAreServedUnderTheIssuersPath) {
  auto signer = OidcSigner::LoadOrCreate(keys_.path());
  ASSERT_TRUE(signer.ok()) << signer.error().ToString();
  auto at = [&](const std::string& issuer, const std::string& path) { return OidcDocumentAt(*signer, issuer, path); };
  auto discovery = at(kIssuer, "/oidc/.well-known/openid-configuration");
  ASSERT_TRUE(discovery.has_value());
  EXPECT_EQ(*discovery, DiscoveryDocument(kIssuer) + "\n");
  auto jwks = at(kIssuer, "/oidc/.well-known/jwks.json");
  ASSERT_TRUE(jwks.has_value());
  EXPECT_EQ(*jwks, signer->Jwks() + "\n");
  // The jwks_uri the discovery document names is the path served.
  EXPECT_EQ(Py(*discovery, "print(d['jwks_uri'])"), "https://cordon.example/oidc/.well-known/jwks.json\n");
  for (const char* path : {"/.well-known/jwks.json", "/.well-known/openid-configuration", "/oidc/.well-known/jwks",
                           "/oidc/.well-known/jwks.json/", "/oidc/.well-known/jwks.json?x=1", "/oidc//.well-known/jwks.json",
                           "/oidcx/.well-known/jwks.json", "/oidc/../.well-known/jwks.json", "/metrics", "", "/"})
    EXPECT_FALSE(at(kIssuer, path).has_value()) << path;
  // An issuer at the root of its host.
  EXPECT_TRUE(at("http://127.0.0.1:9464", "/.well-known/jwks.json").has_value());
  EXPECT_TRUE(at("http://127.0.0.1:9464", "/.well-known/openid-configuration").has_value());
  EXPECT_FALSE(at("http://127.0.0.1:9464", "/oidc/.well-known/jwks.json").has_value());
}

// The agent reads the keys again when this changes: after the key is made
// and after each rotation; not while nothing happens.
TEST_F(Oidc, KeyStampChangesWithTheKeyFilesOnly) {
  const std::string none = OidcKeyStamp(keys_.path());
  EXPECT_EQ(none, "-;-;");
  ASSERT_TRUE(OidcSigner::LoadOrCreate(keys_.path()).ok());
  const std::string made = OidcKeyStamp(keys_.path());
  EXPECT_NE(made, none);
  ASSERT_TRUE(OidcSigner::LoadOrCreate(keys_.path()).ok());
  EXPECT_EQ(OidcKeyStamp(keys_.path()), made) << "loading again changes nothing";
  ASSERT_TRUE(OidcSigner::Rotate(keys_.path()).ok());
  const std::string rotated = OidcKeyStamp(keys_.path());
  EXPECT_NE(rotated, made);
  EXPECT_EQ(rotated.find("-;"), std::string::npos) << "both files now: " << rotated;
  ASSERT_TRUE(OidcSigner::Rotate(keys_.path()).ok());
  EXPECT_NE(OidcKeyStamp(keys_.path()), rotated);
}

TEST_F(Oidc, NewJtiIs128RandomBitsInHex) {
  const std::string a = NewJti(), b = NewJti();
  EXPECT_EQ(a.size(), 32u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos) << a;
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace cordon::ops
