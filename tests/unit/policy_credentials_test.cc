// spec.credentials: what is accepted, every error with its file:line and
// field, and what `cordon policy check` says of the section.
#include <gtest/gtest.h>

#include <string>

#include "policy/compiler.h"
#include "policy/credentials.h"
#include "policy/describe.h"
#include "policy/parser.h"
#include "tests/unit/policy_section.h"

namespace cordon::policy {
namespace {

using Outcome = SectionOutcome;

Outcome CompileCredentialsText(const std::string& body) { return CompileSection("credentials", body, "c.yaml"); }

void ExpectError(const std::string& body, const std::string& field, int line, const std::string& text) {
  ExpectSectionError(CompileCredentialsText(body), "c.yaml", field, line, text);
}

TEST(Credentials, TheIssuesExampleCompiles) {
  Outcome out = CompileCredentialsText(
      "    - name: GITHUB_TOKEN\n"
      "      issue: [/usr/local/bin/mint-token, --repo, acme/app]\n"
      "      revoke: [/usr/local/bin/revoke-token]\n"
      "      ttl: 15m\n"
      "      refreshBefore: 2m\n"
      "      deliver: file\n"
      "    - name: CORDON_ID_TOKEN\n"
      "      oidc: {audience: sts.amazonaws.com}\n"
      "      ttl: 10m\n"
      "    - name: NPM_TOKEN\n"
      "      issue: [/bin/echo, x]\n"
      "      ttl: 1h\n"
      "      deliver: env\n");
  ASSERT_TRUE(out.ok) << FormatDiagnostics(out.diags);
  ASSERT_EQ(out.compiled.credentials.size(), 3u);
  const CredentialSpec& gh = out.compiled.credentials[0];
  EXPECT_EQ(gh.name, "GITHUB_TOKEN");
  EXPECT_EQ(gh.issue, (std::vector<std::string>{"/usr/local/bin/mint-token", "--repo", "acme/app"}));
  EXPECT_EQ(gh.revoke, (std::vector<std::string>{"/usr/local/bin/revoke-token"}));
  EXPECT_EQ(gh.ttl_seconds, 900u);
  EXPECT_EQ(gh.refresh_before_seconds, 120u);
  EXPECT_EQ(gh.deliver, CredentialSpec::Deliver::kFile);
  const CredentialSpec& id = out.compiled.credentials[1];
  EXPECT_TRUE(id.issue.empty());
  EXPECT_EQ(id.oidc_audience, "sts.amazonaws.com");
  EXPECT_EQ(id.ttl_seconds, 600u);
  EXPECT_EQ(id.deliver, CredentialSpec::Deliver::kFile);
  EXPECT_EQ(out.compiled.credentials[2].deliver, CredentialSpec::Deliver::kEnv);

  const std::string shown = Describe(out.compiled);
  EXPECT_NE(shown.find("credentials (issued for each sandbox on the host"), std::string::npos) << shown;
  EXPECT_NE(shown.find("  GITHUB_TOKEN: issued by /usr/local/bin/mint-token (run as root outside the sandbox); "
                       "ttl 15m, refreshed 2m before expiry; revoked by /usr/local/bin/revoke-token; file "
                       "/run/cordon/credentials/<sandbox>/GITHUB_TOKEN, its path in $GITHUB_TOKEN_FILE\n"),
            std::string::npos)
      << shown;
  EXPECT_NE(shown.find("  CORDON_ID_TOKEN: a JWT signed by cordon's built-in issuer, aud sts.amazonaws.com; ttl "
                       "10m; revoked by removal only (no revoke command)"),
            std::string::npos)
      << shown;
  EXPECT_NE(shown.find("  NPM_TOKEN: issued by /bin/echo (run as root outside the sandbox); ttl 1h; revoked by "
                       "removal only (no revoke command); in $NPM_TOKEN (cordon run only; visible in "
                       "/proc/<pid>/environ to the same identity)"),
            std::string::npos)
      << shown;
}

TEST(Credentials, NoneIsSaid) {
  ParsedPolicy parsed;
  Diagnostics diags;
  ASSERT_TRUE(ParsePolicyText("apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata:\n  name: t\n", "c.yaml", &parsed,
                              &diags));
  CompiledPolicy compiled;
  ASSERT_TRUE(Compile(parsed, &compiled, &diags));
  EXPECT_NE(Describe(compiled).find("credentials: none (no spec.credentials)\n"), std::string::npos);
}

TEST(Credentials, EveryErrorNamesItsField) {
  const std::string ttl = "      ttl: 1m\n";
  ExpectError("    - issue: [/bin/true]\n" + ttl, "spec.credentials[0].name", 7, "needs a name");
  ExpectError("    - name: 9LIVES\n      issue: [/bin/true]\n" + ttl, "spec.credentials[0].name", 7,
              "invalid credential name '9LIVES'");
  ExpectError("    - name: A-B\n      issue: [/bin/true]\n" + ttl, "spec.credentials[0].name", 7,
              "invalid credential name");
  ExpectError("    - name: " + std::string(65, 'A') + "\n      issue: [/bin/true]\n" + ttl, "spec.credentials[0].name",
              7, "at most 64");
  ExpectError("    - name: A\n      issue: [/bin/true]\n" + ttl + "    - name: A\n      issue: [/bin/true]\n" + ttl,
              "spec.credentials[1].name", 10, "duplicate credential 'A' (first at spec.credentials[0])");
  ExpectError("    - name: A\n" + ttl, "spec.credentials[0]", 7, "needs issue (a command printing it) or oidc");
  ExpectError("    - name: A\n      issue: [/bin/true]\n      oidc: {audience: x}\n" + ttl, "spec.credentials[0].oidc",
              9, "not both");
  ExpectError("    - name: A\n      issue: []\n" + ttl, "spec.credentials[0].issue", 8, "empty command");
  ExpectError("    - name: A\n      issue: [mint-token]\n" + ttl, "spec.credentials[0].issue[0]", 8,
              "'mint-token' is not an absolute path");
  ExpectError("    - name: A\n      issue: [/bin/true]\n      revoke: [revoke]\n" + ttl,
              "spec.credentials[0].revoke[0]", 9, "not an absolute path");
  ExpectError("    - name: A\n      oidc: {}\n" + ttl, "spec.credentials[0].oidc.audience", 8, "needs an audience");
  ExpectError("    - name: A\n      issue: [/bin/true]\n", "spec.credentials[0].ttl", 7, "needs a ttl");
  ExpectError("    - name: A\n      issue: [/bin/true]\n      ttl: 10\n", "spec.credentials[0].ttl", 9, "invalid duration");
  ExpectError("    - name: A\n      issue: [/bin/true]\n      ttl: 25h\n", "spec.credentials[0].ttl", 9,
              "too long for a short-lived credential (at most 24h)");
  ExpectError("    - name: A\n      issue: [/bin/true]\n      ttl: 1m\n      refreshBefore: 1m\n",
              "spec.credentials[0].refreshBefore", 10, "refreshBefore 1m must be shorter than ttl 1m");
  ExpectError("    - name: A\n      issue: [/bin/true]\n      ttl: 1m\n      refreshBefore: soon\n",
              "spec.credentials[0].refreshBefore", 10, "invalid duration");
  ExpectError("    - name: A\n      issue: [/bin/true]\n      ttl: 1m\n      deliver: disk\n",
              "spec.credentials[0].deliver", 10, "unknown delivery 'disk' (expected file or env)");
  ExpectError("    - name: A\n      issue: [/bin/true]\n      ttl: 2m\n      refreshBefore: 1m\n      deliver: env\n",
              "spec.credentials[0].refreshBefore", 10, "needs deliver: file");
  ExpectError("    - name: A\n      issue: [/bin/true]\n" + ttl + "    - name: A_FILE\n      issue: [/bin/true]\n" + ttl,
              "spec.credentials[1].name", 10, "collides with the variable naming the file of 'A'");
  ExpectError("    - name: A\n      issue: [/bin/true]\n" + ttl + "      colour: red\n", "spec.credentials[0].colour", 10,
              "unknown field");
}

// owner (who reads the file; attach needs it): a user name or UID[:GID],
// never dynamic, only with deliver: file. The entry's and its deliver
// field's positions are kept for the errors only a use can make (attach
// refusing env, or missing an owner).
TEST(Credentials, OwnerAndPositions) {
  Outcome out = CompileCredentialsText(
      "    - name: A\n"
      "      issue: [/bin/true]\n"
      "      ttl: 1m\n"
      "      owner: \"1000:1001\"\n"
      "    - name: B\n"
      "      issue: [/bin/true]\n"
      "      ttl: 1m\n"
      "      deliver: env\n");
  ASSERT_TRUE(out.ok) << FormatDiagnostics(out.diags);
  ASSERT_EQ(out.compiled.credentials.size(), 2u);
  const CredentialSpec& a = out.compiled.credentials[0];
  EXPECT_EQ(a.owner, "1000:1001");
  EXPECT_EQ(CredentialError(a.at, "needs an owner"), "c.yaml:7:7: spec.credentials[0]: needs an owner");
  EXPECT_EQ(a.deliver_at.line, 7) << "no deliver field: the entry's position";
  EXPECT_EQ(CredentialError(out.compiled.credentials[1].deliver_at, "no env"),
            "c.yaml:14:16: spec.credentials[1].deliver: no env");
  EXPECT_NE(Describe(out.compiled).find("its path in $A_FILE, owned by 1000:1001\n"), std::string::npos);
  // The same credential written elsewhere in another file is the same; another owner is not.
  CredentialSpec moved = a;
  moved.at.line = 99;
  EXPECT_TRUE(a.SameAs(moved));
  moved.owner = "1000";
  EXPECT_FALSE(a.SameAs(moved));

  const std::string head = "    - name: A\n      issue: [/bin/true]\n      ttl: 1m\n";
  ExpectError(head + "      owner: dynamic\n", "spec.credentials[0].owner", 10, "invalid owner 'dynamic'");
  ExpectError(head + "      owner: \"1000:\"\n", "spec.credentials[0].owner", 10, "invalid owner");
  ExpectError(head + "      owner: Bad/User\n", "spec.credentials[0].owner", 10, "invalid owner");
  ExpectError(head + "      owner: builder\n      deliver: env\n", "spec.credentials[0].owner", 10,
              "it needs deliver: file");
}

TEST(Credentials, TooManyIsAnError) {
  std::string body;
  for (size_t i = 0; i <= kMaxCredentials; ++i)
    body += "    - name: C" + std::to_string(i) + "\n      issue: [/bin/true]\n      ttl: 1m\n";
  ExpectError(body, "spec.credentials", 7, "too many credentials: 33 (at most 32)");
}

}  // namespace
}  // namespace cordon::policy
