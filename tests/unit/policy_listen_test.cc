// spec.network.listen: validation (file:line:column diagnostics) and its
// image, which uses the egress image's form and is judged the same way.
#include <gtest/gtest.h>

#include <arpa/inet.h>

#include <string>

#include "policy/compiler.h"
#include "policy/parser.h"
#include "tests/unit/policy_addr.h"

namespace cordon::policy {
namespace {

using test::Addr;
using test::V4;
using test::V6;

struct Outcome {
  bool ok = false;
  CompiledPolicy compiled;
  Diagnostics diags;
};

Outcome CompileNetwork(const std::string& network) {
  Outcome out;
  ParsedPolicy parsed;
  const std::string text =
      "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata:\n  name: t\nspec:\n  network:\n" + network;
  if (!ParsePolicyText(text, "p.yaml", &parsed, &out.diags)) {
    ADD_FAILURE() << "parse failed:\n" << FormatDiagnostics(out.diags);
    return out;
  }
  out.ok = Compile(parsed, &out.compiled, &out.diags);
  return out;
}

// `line` counts from the first line of the network block (the header is 6 lines).
constexpr int kHeaderLines = 6;
void ExpectDiag(const Diagnostics& diags, const std::string& field, int line, int column, const std::string& text) {
  for (const auto& d : diags) {
    if (d.field != field) continue;
    EXPECT_EQ(d.file, "p.yaml");
    EXPECT_EQ(d.line, line + kHeaderLines) << d.ToString();
    if (column) {
      EXPECT_EQ(d.column, column) << d.ToString();
    }
    EXPECT_NE(d.message.find(text), std::string::npos) << d.ToString();
    return;
  }
  ADD_FAILURE() << "no diagnostic for " << field << " in:\n" << FormatDiagnostics(diags);
}

// The listen image decides as the BPF programs do (EvaluateImage over the listen entries).
bool Allows(const CompiledPolicy& p, const Addr& addr, uint16_t port, uint8_t proto) {
  CompiledPolicy image;
  image.rules = p.listen_rules;
  image.addr_entries = p.listen_addr_entries;
  image.port_entries = p.listen_port_entries;
  const bool by_image = EvaluateImage(image, addr, port, proto);
  EXPECT_EQ(by_image, EvaluateRules(image, addr, port, proto)) << "image and rules disagree at port " << port;
  return by_image;
}

TEST(PolicyListen, ErrorsNameFileLineAndColumn) {
  Outcome out = CompileNetwork(R"(    listen:
      - address: 10.0.0.1/8
        ports: [8080]
      - address: not-an-address
        ports: [80]
      - ports: [0-10, 70000, x, 443, 443]
      - address: 127.0.0.1
      - address: 127.0.0.1
        ports: []
        protocols: [tcp, icmp]
      - address: ::1
        ports: [9000-9100]
        protocols: [tcp]
      - address: ::1
        ports: [9000-9100]
        protocols: [tcp]
)");
  ASSERT_FALSE(out.ok);
  const Diagnostics& d = out.diags;
  ExpectDiag(d, "spec.network.listen[0].address", 2, 18, "host bits set: 10.0.0.1/8");
  ExpectDiag(d, "spec.network.listen[1].address", 4, 18, "not-an-address");
  ExpectDiag(d, "spec.network.listen[2].ports[0]", 6, 17, "port 0 is out of range");  // "0" alone is the ephemeral port
  ExpectDiag(d, "spec.network.listen[2].ports[1]", 6, 0, "port 70000 is out of range");
  ExpectDiag(d, "spec.network.listen[2].ports[2]", 6, 0, "invalid port 'x'");
  ExpectDiag(d, "spec.network.listen[2].ports[4]", 6, 0, "duplicate port 443");
  ExpectDiag(d, "spec.network.listen[3]", 7, 0, "required: ports");
  ExpectDiag(d, "spec.network.listen[4].ports", 9, 16, "empty list");
  ExpectDiag(d, "spec.network.listen[4].protocols[1]", 10, 0, "unknown protocol 'icmp'");
  ExpectDiag(d, "spec.network.listen[6]", 14, 0, "duplicate listen rule");
  EXPECT_EQ(d.size(), 10u) << FormatDiagnostics(d);
  EXPECT_EQ(d[0].ToString(), "p.yaml:8:18: spec.network.listen[0].address: " + d[0].message);
}

TEST(PolicyListen, NoRulesNoImage) {
  Outcome out = CompileNetwork("    egress: []\n");
  ASSERT_TRUE(out.ok) << FormatDiagnostics(out.diags);
  EXPECT_TRUE(out.compiled.listen_rules.empty());
  EXPECT_TRUE(out.compiled.listen_addr_entries.empty());
  EXPECT_TRUE(out.compiled.listen_port_entries.empty());
  EXPECT_FALSE(Allows(out.compiled, V4("0.0.0.0"), 8080, kProtoTcp));
}

TEST(PolicyListen, AddressPortsProtocols) {
  Outcome out = CompileNetwork(R"(    listen:
      - address: 127.0.0.1
        ports: [8080, "9000-9100"]
        protocols: [tcp]
      - address: 0.0.0.0
        ports: ["0"]
      - ports: [53]
        protocols: [udp]
)");
  ASSERT_TRUE(out.ok) << FormatDiagnostics(out.diags);
  const CompiledPolicy& p = out.compiled;
  ASSERT_EQ(p.listen_rules.size(), 3u);
  EXPECT_EQ(p.listen_rules[2].prefix.length, 0) << "omitted address: any (::/0)";
  EXPECT_TRUE(p.rules.empty()) << "listen rules are not egress rules";
  EXPECT_TRUE(p.addr_entries.empty());

  EXPECT_TRUE(Allows(p, V4("127.0.0.1"), 8080, kProtoTcp));
  EXPECT_TRUE(Allows(p, V4("127.0.0.1"), 9050, kProtoTcp));
  EXPECT_FALSE(Allows(p, V4("127.0.0.1"), 8080, kProtoUdp));
  EXPECT_FALSE(Allows(p, V4("127.0.0.1"), 8081, kProtoTcp));
  EXPECT_FALSE(Allows(p, V4("0.0.0.0"), 8080, kProtoTcp)) << "the wildcard is not inside 127.0.0.1/32";
  EXPECT_FALSE(Allows(p, V4("127.0.0.2"), 8080, kProtoTcp));
  // Port 0: listeners on a kernel-chosen port, for 0.0.0.0 only.
  EXPECT_TRUE(Allows(p, V4("0.0.0.0"), 0, kProtoTcp));
  EXPECT_FALSE(Allows(p, V4("127.0.0.1"), 0, kProtoTcp));
  EXPECT_FALSE(Allows(p, V6("::"), 0, kProtoTcp)) << "0.0.0.0 and :: are different wildcards";
  // Any address, udp 53: IPv4, IPv6 and mapped.
  EXPECT_TRUE(Allows(p, V4("10.1.2.3"), 53, kProtoUdp));
  EXPECT_TRUE(Allows(p, V6("::"), 53, kProtoUdp));
  EXPECT_TRUE(Allows(p, V6("2001:db8::1"), 53, kProtoUdp));
  EXPECT_FALSE(Allows(p, V6("2001:db8::1"), 53, kProtoTcp));
  // ::ffff:127.0.0.1 is 127.0.0.1.
  EXPECT_TRUE(Allows(p, V6("::ffff:127.0.0.1"), 8080, kProtoTcp));
}

TEST(PolicyListen, Ipv6CidrRule) {
  Outcome out = CompileNetwork("    listen:\n      - {address: 'fd00::/8', ports: [443]}\n");
  ASSERT_TRUE(out.ok) << FormatDiagnostics(out.diags);
  EXPECT_TRUE(Allows(out.compiled, V6("fd12::1"), 443, kProtoTcp));
  EXPECT_TRUE(Allows(out.compiled, V6("fd12::1"), 443, kProtoUdp));
  EXPECT_FALSE(Allows(out.compiled, V6("fe80::1"), 443, kProtoTcp));
  EXPECT_FALSE(Allows(out.compiled, V4("127.0.0.1"), 443, kProtoTcp));
}

}  // namespace
}  // namespace cordon::policy

namespace cordon::policy {
namespace {

Outcome CompileSpec(const std::string& spec) {
  Outcome out;
  ParsedPolicy parsed;
  const std::string text = "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata:\n  name: t\nspec:\n" + spec;
  if (!ParsePolicyText(text, "p.yaml", &parsed, &out.diags)) {
    ADD_FAILURE() << "parse failed:\n" << FormatDiagnostics(out.diags);
    return out;
  }
  out.ok = Compile(parsed, &out.compiled, &out.diags);
  return out;
}

TEST(PolicyDevices, ParsedWithDefaultsAndWildcards) {
  Outcome out = CompileSpec("  devices: [\"c 10:200 rw\", \"b 7:* r\", \"c 1:11\", \"c 4:1 m\"]\n");
  ASSERT_TRUE(out.ok) << FormatDiagnostics(out.diags);
  using D = CompiledPolicy::DeviceAllow;
  ASSERT_EQ(out.compiled.devices.size(), 4u);
  EXPECT_EQ(out.compiled.devices[0], (D{'c', 10, 200, 6}));
  EXPECT_EQ(out.compiled.devices[1], (D{'b', 7, D::kAnyMinor, 2}));
  EXPECT_EQ(out.compiled.devices[2], (D{'c', 1, 11, 6}));
  EXPECT_EQ(out.compiled.devices[3], (D{'c', 4, 1, 1}));
  EXPECT_TRUE(CompileSpec("  mode: enforce\n").compiled.devices.empty());
}

TEST(PolicyDevices, ErrorsNameTheEntryWithLineAndColumn) {
  Outcome out = CompileSpec(R"(  devices:
    - "x 1:2"
    - "c 1"
    - "c 5000:1"
    - "c 1:x"
    - "c 1:3 rx"
    - "c 1:3 rr"
    - "c 10:200"
    - "c 10:200 r"
    - "c 1:2 r w"
)");
  ASSERT_FALSE(out.ok);
  const Diagnostics& d = out.diags;
  auto at = [&](int i, int line, const std::string& text) {
    for (const auto& diag : d)
      if (diag.field == "spec.devices[" + std::to_string(i) + "]") {
        EXPECT_EQ(diag.line, line) << diag.ToString();
        EXPECT_EQ(diag.column, 7) << diag.ToString();
        EXPECT_NE(diag.message.find(text), std::string::npos) << diag.ToString();
        return;
      }
    ADD_FAILURE() << "no diagnostic for devices[" << i << "] in\n" << FormatDiagnostics(d);
  };
  at(0, 7, "invalid device 'x 1:2'");
  at(1, 8, "invalid device 'c 1'");
  at(2, 9, "invalid major number '5000'");
  at(3, 10, "invalid minor number 'x'");
  at(4, 11, "invalid access 'rx'");
  at(5, 12, "invalid access 'rr'");
  at(7, 14, "duplicate device 'c 10:200 r' (first at line 13)");
  at(8, 15, "invalid device 'c 1:2 r w'");
  EXPECT_EQ(d.size(), 8u) << FormatDiagnostics(d);
}

}  // namespace
}  // namespace cordon::policy
