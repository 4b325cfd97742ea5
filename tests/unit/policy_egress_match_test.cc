// The userspace egress matcher (policy/egress_match.h), without root.
#include <arpa/inet.h>
#include <netinet/in.h>

#include <iterator>
#include <random>

#include <gtest/gtest.h>

#include "abi/cordon_event.h"
#include "policy/cidr.h"
#include "policy/compiler.h"
#include "policy/egress_match.h"
#include "policy/parser.h"

namespace cordon::test {
namespace {

// The userspace matcher against the compiler's reference evaluation, over
// policies with nested prefixes, port ranges, protocol limits and IPv6.
TEST(EgressMatcher, AgreesWithTheReferenceEvaluation) {
  const char* yaml = R"(apiVersion: cordon/v1
kind: SandboxPolicy
metadata: {name: matcher}
spec:
  network:
    egress:
      - cidr: 10.0.0.0/8
        ports: [443, "8000-8100"]
      - cidr: 10.1.0.0/16
        ports: [22]
        protocols: [tcp]
      - cidr: 10.1.2.3
      - cidr: 192.168.0.0/24
        protocols: [udp]
      - cidr: 2001:db8::/32
        ports: ["1-1024"]
      - cidr: 2001:db8:1::/48
        ports: [53]
        protocols: [udp]
      - cidr: 127.0.0.1
        ports: [80]
)";
  policy::ParsedPolicy parsed;
  policy::Diagnostics diags;
  ASSERT_TRUE(policy::ParsePolicyText(yaml, "m.yaml", &parsed, &diags)) << policy::FormatDiagnostics(diags);
  policy::CompiledPolicy compiled;
  ASSERT_TRUE(policy::Compile(parsed, &compiled, &diags)) << policy::FormatDiagnostics(diags);
  EgressMatcher matcher(compiled);

  auto addr = [](const char* text) {
    std::array<uint8_t, 16> a{};
    in_addr v4;
    if (::inet_pton(AF_INET, text, &v4) == 1) return policy::ToMapped(reinterpret_cast<uint8_t*>(&v4), 4);
    ::inet_pton(AF_INET6, text, a.data());
    return a;
  };
  // Spot checks, with the reasons the kernel reports.
  EgressDecision d = matcher.Decide(addr("10.9.9.9"), 443, IPPROTO_TCP);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.rule, 1u);
  d = matcher.Decide(addr("10.1.5.5"), 22, IPPROTO_UDP);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.reason, CORDON_REASON_PORT);
  EXPECT_EQ(d.rule, 2u);
  d = matcher.Decide(addr("11.0.0.1"), 443, IPPROTO_TCP);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.reason, CORDON_REASON_NO_RULE);
  EXPECT_EQ(d.rule, 0u);
  EXPECT_TRUE(matcher.Decide(addr("::ffff:127.0.0.1"), 80, IPPROTO_TCP).allowed);
  EXPECT_TRUE(matcher.Decide(addr("10.1.2.3"), 9, 262 /* MPTCP: as tcp */).allowed);
  EXPECT_TRUE(matcher.Decide(addr("192.168.0.7"), 9, IPPROTO_UDPLITE).allowed);
  EXPECT_FALSE(matcher.Decide(addr("10.1.2.3"), 9, IPPROTO_SCTP).allowed);

  // Random destinations near the rules: same verdict and rule as EvaluateImage.
  std::mt19937 rng(42);
  const char* bases[] = {"10.0.0.0", "10.1.0.0", "10.1.2.3", "192.168.0.0", "2001:db8::", "2001:db8:1::", "127.0.0.1",
                         "8.8.8.8", "::1"};
  const uint8_t protos[] = {IPPROTO_TCP, IPPROTO_UDP, IPPROTO_ICMP};
  for (int i = 0; i < 20000; ++i) {
    auto a = addr(bases[rng() % std::size(bases)]);
    int flips = rng() % 3;
    for (int f = 0; f < flips; ++f) a[12 + rng() % 4] ^= static_cast<uint8_t>(1u << (rng() % 8));
    // Mostly near the listed ports (0-1100, 7990-9090), sometimes anywhere.
    uint16_t port = rng() % 4 == 0 ? static_cast<uint16_t>(rng())
                                   : static_cast<uint16_t>(rng() % 1100 + 7990 * (rng() % 2));
    uint8_t proto = protos[rng() % 3];
    uint32_t ref_rule = 0;
    bool ref = policy::EvaluateImage(compiled, a, port, proto, &ref_rule);
    EgressDecision got = matcher.Decide(a, port, proto);
    ASSERT_EQ(got.allowed, ref) << policy::AddressToString(a) << " port " << port << " proto " << int(proto);
    if (ref) {
      ASSERT_EQ(got.rule, ref_rule) << policy::AddressToString(a) << " port " << port;
    }
    ASSERT_EQ(got.allowed, policy::EvaluateRules(compiled, a, port, proto));
  }
}

}  // namespace
}  // namespace cordon::test
