// spec.network.egress[].host and spec.network.dns: validation with
// file:line:column diagnostics, the stored (A-label) form, name matching, and
// that name rules never reach the address image.
#include <gtest/gtest.h>

#include <string>

#include "policy/compiler.h"
#include "policy/dns_names.h"
#include "policy/parser.h"
#include "tests/unit/policy_addr.h"
#include "tests/unit/policy_section.h"

namespace cordon::policy {
namespace {

using Outcome = SectionOutcome;

// "spec:\n  network:\n" then `network`, as p.yaml.
Outcome CompileNetwork(const std::string& network) { return CompileSection("network", network, "p.yaml"); }

constexpr int kHeaderLines = 6;
void ExpectDiag(const Diagnostics& diags, const std::string& field, int line, const std::string& text) {
  for (const auto& d : diags) {
    if (d.field != field) continue;
    EXPECT_EQ(d.file, "p.yaml");
    EXPECT_EQ(d.line, line + kHeaderLines) << d.ToString();
    EXPECT_NE(d.message.find(text), std::string::npos) << d.ToString();
    return;
  }
  ADD_FAILURE() << "no diagnostic for " << field << " in:\n" << FormatDiagnostics(diags);
}

std::string Normal(const std::string& name) {
  std::string error;
  auto out = NormalizeHostName(name, &error);
  return out ? *out : "ERROR: " + error;
}

TEST(PolicyNames, NormalizesNames) {
  EXPECT_EQ(Normal("pypi.org"), "pypi.org");
  EXPECT_EQ(Normal("PyPI.Org."), "pypi.org");  // case and the root's dot
  EXPECT_EQ(Normal("*.pythonhosted.org"), "*.pythonhosted.org");
  EXPECT_EQ(Normal("_acme-challenge.example.org"), "_acme-challenge.example.org");
  // U-labels become A-labels (IDNA2008, libidn2).
  EXPECT_EQ(Normal("bücher.example"), "xn--bcher-kva.example");
  EXPECT_EQ(Normal("*.Bücher.example"), "*.xn--bcher-kva.example");
  EXPECT_EQ(Normal("xn--bcher-kva.example"), "xn--bcher-kva.example");
}

TEST(PolicyNames, RefusesBadNames) {
  auto refused = [](const std::string& name, const std::string& why) {
    std::string error;
    EXPECT_FALSE(NormalizeHostName(name, &error)) << name;
    EXPECT_NE(error.find(why), std::string::npos) << name << ": " << error;
  };
  refused("", "empty name");
  refused("*", "matches every name");
  refused("a.*.org", "only as the whole first label");
  refused("*a.org", "only as the whole first label");
  refused("**.org", "only as the whole first label");
  refused("*.*.org", "only as the whole first label");
  refused("a..org", "empty label");
  refused(".org", "empty label");
  refused("..", "empty label");
  refused(std::string(64, 'a') + ".org", "label longer than 63");
  std::string long_name;
  for (int i = 0; i < 4; ++i) long_name += std::string(63, 'a') + ".";
  refused(long_name + "org", "longer than 253");
  refused("*." + std::string(63, 'a') + "." + std::string(63, 'a') + "." + std::string(63, 'a') + "." +
              std::string(60, 'a'),  // 252 bytes after "*.": no name it matches fits in 253
          "with its wildcard label");
  refused(std::string("a\xff.org"), "not valid UTF-8");
  refused(std::string("a\xc0\xaf.org"), "not valid UTF-8");  // overlong '/'
  refused(std::string("a\n.org"), "control character");
  refused(std::string("a\x7f.org"), "control character");
  refused("a b.org", "not allowed in a name");
  refused("a/b.org", "not allowed in a name");
  refused("-a.org", "starts or ends with '-'");
  refused("10.0.0.1", "use cidr");
  refused("2001:db8::1", "not allowed in a name");
  refused("a\u00df\u0301\u200d.org", "IDNA2008");  // a joiner where IDNA2008 forbids it
}

TEST(PolicyNames, WildcardMatchesOneOrMoreLabelsNotTheApex) {
  EXPECT_TRUE(HostPatternMatches("pypi.org", "pypi.org"));
  EXPECT_FALSE(HostPatternMatches("pypi.org", "x.pypi.org"));
  EXPECT_FALSE(HostPatternMatches("pypi.org", "pypi.org.evil"));
  EXPECT_TRUE(HostPatternMatches("*.example.org", "a.example.org"));
  EXPECT_TRUE(HostPatternMatches("*.example.org", "a.b.example.org"));
  EXPECT_FALSE(HostPatternMatches("*.example.org", "example.org"));
  EXPECT_FALSE(HostPatternMatches("*.example.org", "badexample.org"));
  EXPECT_FALSE(HostPatternMatches("*.example.org", ".example.org"));
}

TEST(PolicyNames, CompilesHostRulesOutsideTheAddressImage) {
  const Outcome out = CompileNetwork(
      "    egress:\n"
      "      - host: PyPI.org\n"
      "        ports: [443]\n"
      "      - host: \"*.pythonhosted.org\"\n"
      "        ports: [443]\n"
      "        protocols: [tcp]\n"
      "      - host: internal.example\n"
      "        allowPrivate: true\n"
      "      - cidr: 10.1.2.0/24\n"
      "    dns:\n"
      "      upstream: [\"10.0.0.2:53\", \"10.0.0.3\", \"[2001:db8::53]:5353\", \"[2001:db8::54]\"]\n");
  ASSERT_TRUE(out.ok) << FormatDiagnostics(out.diags);
  ASSERT_EQ(out.compiled.rules.size(), 4u);
  EXPECT_EQ(out.compiled.rules[0].host, "pypi.org");
  EXPECT_EQ(out.compiled.rules[0].ports.size(), 1u);
  EXPECT_EQ(out.compiled.rules[1].host, "*.pythonhosted.org");
  EXPECT_TRUE(out.compiled.rules[1].tcp);
  EXPECT_FALSE(out.compiled.rules[1].udp);
  EXPECT_FALSE(out.compiled.rules[0].allow_private);
  EXPECT_TRUE(out.compiled.rules[2].allow_private);
  EXPECT_EQ(out.compiled.rules[0].where, "p.yaml:8:15: spec.network.egress[0].host");
  // Only the CIDR rule is in the image; a name rule's (empty) prefix would be ::/0.
  ASSERT_EQ(out.compiled.addr_entries.size(), 1u);
  EXPECT_EQ(out.compiled.addr_entries[0].second.rule, 4u);
  EXPECT_FALSE(EvaluateRules(out.compiled, test::V4("93.184.216.34"), 443, kProtoTcp));
  EXPECT_FALSE(EvaluateImage(out.compiled, test::V4("93.184.216.34"), 443, kProtoTcp));
  EXPECT_TRUE(EvaluateImage(out.compiled, test::V4("10.1.2.3"), 443, kProtoTcp));
  ASSERT_EQ(out.compiled.dns_upstreams.size(), 4u);
  EXPECT_EQ(out.compiled.dns_upstreams[0].ToString(), "10.0.0.2:53");
  EXPECT_EQ(out.compiled.dns_upstreams[1].ToString(), "10.0.0.3:53");
  EXPECT_EQ(out.compiled.dns_upstreams[2].ToString(), "[2001:db8::53]:5353");
  EXPECT_EQ(out.compiled.dns_upstreams[3].ToString(), "[2001:db8::54]:53");
  // Refused by what does not run cordon's resolver: one line per name rule, naming the field.
  const auto unenforced = UnenforcedNameRules(out.compiled);
  ASSERT_EQ(unenforced.size(), 3u);
  EXPECT_EQ(unenforced[0].rfind("p.yaml:8:15: spec.network.egress[0].host: name rules need cordon's DNS resolver", 0),
            0u)
      << unenforced[0];
}

TEST(PolicyNames, ReportsBadRulesWithFileLineField) {
  const Outcome out = CompileNetwork(
      "    egress:\n"
      "      - host: a.*.org\n"   // 2
      "      - host: pypi.org\n"  // 3
      "        cidr: 10.0.0.0/8\n"
      "      - cidr: 10.0.0.0/8\n"    // 5
      "        allowPrivate: true\n"  // 6
      "      - host: \"\"\n"          // 7
      "      - host: x.org\n"         // 8
      "        ports: [0x1]\n"        // 9
      "      - host: y.org\n"         // 10
      "        protocols: [icmp]\n"   // 11
      "    dns:\n"
      "      upstream: [\"2001:db8::1\", \"10.0.0.1:0\", \"10.0.0.1:53\", \"10.0.0.1\", \"[::1\", \"host:53\"]\n");
  ASSERT_FALSE(out.ok);
  ExpectDiag(out.diags, "spec.network.egress[0].host", 2, "only as the whole first label");
  ExpectDiag(out.diags, "spec.network.egress[1].host", 3, "host or cidr, not both");
  ExpectDiag(out.diags, "spec.network.egress[2].allowPrivate", 6, "only for host rules");
  ExpectDiag(out.diags, "spec.network.egress[3].host", 7, "empty name");
  ExpectDiag(out.diags, "spec.network.egress[4].ports[0]", 9, "");
  ExpectDiag(out.diags, "spec.network.egress[5].protocols[0]", 11, "unknown protocol");
  ExpectDiag(out.diags, "spec.network.dns.upstream[0]", 13, "[ADDRESS]:PORT");
  ExpectDiag(out.diags, "spec.network.dns.upstream[1]", 13, "1-65535");
  ExpectDiag(out.diags, "spec.network.dns.upstream[3]", 13, "duplicate upstream 10.0.0.1:53");
  ExpectDiag(out.diags, "spec.network.dns.upstream[4]", 13, "unclosed");
  ExpectDiag(out.diags, "spec.network.dns.upstream[5]", 13, "not an IPv4 address");
}

TEST(PolicyNames, EmptyUpstreamListIsAnError) {
  const Outcome out = CompileNetwork("    dns:\n      upstream: []\n");
  ASSERT_FALSE(out.ok);
  ExpectDiag(out.diags, "spec.network.dns.upstream", 2, "empty list");
  // Without host rules nothing is unenforced.
  const Outcome plain = CompileNetwork("    egress:\n      - cidr: 10.0.0.0/8\n");
  ASSERT_TRUE(plain.ok);
  EXPECT_TRUE(UnenforcedNameRules(plain.compiled).empty());
}

}  // namespace
}  // namespace cordon::policy
