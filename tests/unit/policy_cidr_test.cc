// Strict CIDR and port-range parsing.
#include <gtest/gtest.h>

#include <arpa/inet.h>

#include <string>

#include "policy/cidr.h"

namespace cordon::policy {
namespace {

std::array<uint8_t, 16> V6(const char* text) {
  std::array<uint8_t, 16> out{};
  EXPECT_EQ(inet_pton(AF_INET6, text, out.data()), 1) << text;
  return out;
}

std::array<uint8_t, 16> V4(const char* text) {
  uint8_t raw[4];
  EXPECT_EQ(inet_pton(AF_INET, text, raw), 1) << text;
  return ToMapped(raw, 4);
}

Prefix MustParse(const char* text) {
  std::string error;
  auto prefix = ParsePrefix(text, &error);
  EXPECT_TRUE(prefix.has_value()) << text << ": " << error;
  return prefix.value_or(Prefix{});
}

std::string ErrorOf(const std::string& text) {
  std::string error;
  auto prefix = ParsePrefix(text, &error);
  EXPECT_FALSE(prefix.has_value()) << text << " parsed as " << prefix->ToString();
  EXPECT_FALSE(error.empty()) << text;
  return error;
}

TEST(PolicyCidr, Ipv4) {
  Prefix p = MustParse("10.0.0.0/8");
  EXPECT_TRUE(p.ipv4);
  EXPECT_EQ(p.length, 104);
  EXPECT_EQ(p.addr, V4("10.0.0.0"));
  EXPECT_EQ(p.ToString(), "10.0.0.0/8");

  Prefix host = MustParse("10.1.2.3");
  EXPECT_EQ(host.length, 128);
  EXPECT_EQ(host.ToString(), "10.1.2.3/32");

  Prefix all = MustParse("0.0.0.0/0");
  EXPECT_EQ(all.length, 96);
  EXPECT_EQ(all.ToString(), "0.0.0.0/0");
  EXPECT_EQ(MustParse("255.255.255.255/32").ToString(), "255.255.255.255/32");
  EXPECT_EQ(MustParse("192.168.0.0/16").length, 112);
}

TEST(PolicyCidr, Ipv4Rejections) {
  EXPECT_EQ(ErrorOf("10.0.0.01"), "invalid IPv4 address '10.0.0.01': octet '01' has a leading zero");
  EXPECT_EQ(ErrorOf("010.0.0.0/8"), "invalid IPv4 address '010.0.0.0': octet '010' has a leading zero");
  EXPECT_EQ(ErrorOf("10.0.0.256"), "invalid IPv4 address '10.0.0.256': octet '256' is larger than 255");
  EXPECT_EQ(ErrorOf("10.0.0.0/33"), "prefix length /33 is out of range for IPv4 (0-32)");
  // A host name is named as one (not "octet 'pypi'").
  for (const char* name : {"pypi.org", "example.com/32", "localhost", "Github.COM"})
    EXPECT_NE(ErrorOf(name).find("looks like a host name: cidr takes an IP address or a CIDR block"),
              std::string::npos)
        << name << ": " << ErrorOf(name);
  EXPECT_EQ(ErrorOf("10.0.0.1/8"), "host bits set: 10.0.0.1/8 (did you mean 10.0.0.0/8?)");
  EXPECT_EQ(ErrorOf("10.0.0.0/08"), "invalid prefix length in '10.0.0.0/08': '08' has a leading zero");
  for (const char* bad : {"10.0.0", "10.0.0.0.0", "10..0.0", "10.0.0.0/", "10.0.0.0/-1", "10.0.0.0/+8", " 10.0.0.0",
                          "10.0.0.0 /8", "10.0.0.0/8 ", "0x0a.0.0.0", "10.0.0.1000", "1e1.0.0.0", "", "/8", "a.b.c.d",
                          "10.0.0.0/8/8", "10.0.0.0\n"}) {
    ErrorOf(bad);
  }
}

TEST(PolicyCidr, Ipv6) {
  Prefix p = MustParse("2001:db8::/32");
  EXPECT_FALSE(p.ipv4);
  EXPECT_EQ(p.length, 32);
  EXPECT_EQ(p.ToString(), "2001:db8::/32");
  EXPECT_EQ(MustParse("::1").length, 128);
  EXPECT_EQ(MustParse("::1").ToString(), "::1/128");
  EXPECT_EQ(MustParse("::/0").ToString(), "::/0");
  EXPECT_EQ(MustParse("2001:DB8::/32").ToString(), "2001:db8::/32");
  EXPECT_EQ(ErrorOf("2001:db8::/129"), "prefix length /129 is out of range for IPv6 (0-128)");
  EXPECT_EQ(ErrorOf("2001:db8::1/32"), "host bits set: 2001:db8::1/32 (did you mean 2001:db8::/32?)");
  EXPECT_EQ(ErrorOf(std::string("::1\0junk", 8)).rfind("invalid IPv6 address", 0), 0u);  // NUL from JSON
  for (const char* bad : {"2001:db8:::/32", "fe80::1%eth0", "2001:db8::g", "::ffff:010.0.0.0", "1:2:3:4:5:6:7:8:9",
                          "2001:db8::/1000", "[::1]"}) {
    ErrorOf(bad);
  }
}

TEST(PolicyCidr, MappedIpv6NormalizesToIpv4) {
  Prefix p = MustParse("::ffff:10.0.0.0/104");
  EXPECT_TRUE(p.ipv4);
  EXPECT_EQ(p, MustParse("10.0.0.0/8"));
  EXPECT_EQ(p.ToString(), "10.0.0.0/8");
  EXPECT_EQ(MustParse("::ffff:0:0/96"), MustParse("0.0.0.0/0"));
  EXPECT_EQ(MustParse("::ffff:1.2.3.4").ToString(), "1.2.3.4/32");
  // Shorter than /96 covers more than IPv4: stays IPv6.
  Prefix wide = MustParse("::fffe:0:0/95");
  EXPECT_FALSE(wide.ipv4);
  EXPECT_EQ(wide.ToString(), "::fffe:0:0/95");
  EXPECT_TRUE(wide.Contains(MustParse("0.0.0.0/0")));
  EXPECT_EQ(ErrorOf("::ffff:0:0/95"), "host bits set: ::ffff:0:0/95 (did you mean ::fffe:0:0/95?)");
  EXPECT_EQ(ErrorOf("::ffff:10.0.0.1/104"), "host bits set: ::ffff:10.0.0.1/104 (did you mean 10.0.0.0/8?)");
}

TEST(PolicyCidr, Containment) {
  Prefix v4all = MustParse("0.0.0.0/0");
  Prefix v6all = MustParse("::/0");
  Prefix ten = MustParse("10.0.0.0/8");
  EXPECT_TRUE(v6all.Contains(v4all));
  EXPECT_TRUE(v4all.Contains(ten));
  EXPECT_FALSE(ten.Contains(v4all));
  EXPECT_TRUE(ten.Contains(ten));
  EXPECT_TRUE(ten.Contains(V4("10.255.0.1")));
  EXPECT_FALSE(ten.Contains(V4("11.0.0.0")));
  EXPECT_TRUE(v4all.Contains(V6("::ffff:192.0.2.1")));
  EXPECT_FALSE(v4all.Contains(V6("2001:db8::1")));
  EXPECT_FALSE(v4all.Contains(V6("::1")));
  EXPECT_TRUE(v6all.Contains(V6("2001:db8::1")));
  EXPECT_TRUE(MustParse("2001:db8::/32").Contains(V6("2001:db8:ffff::1")));
  EXPECT_FALSE(MustParse("2001:db8::/33").Contains(V6("2001:db8:ffff::1")));
}

TEST(PolicyCidr, AddressText) {
  EXPECT_EQ(AddressToString(V4("192.0.2.1")), "192.0.2.1");
  EXPECT_EQ(AddressToString(V6("2001:db8::1")), "2001:db8::1");
  EXPECT_EQ(AddressToString(V6("::1")), "::1");
  uint8_t v6[16] = {0x20, 0x01, 0x0d, 0xb8};
  EXPECT_EQ(AddressToString(ToMapped(v6, 16)), "2001:db8::");
}

std::string PortError(const char* text) {
  std::string error;
  auto range = ParsePortRange(text, &error);
  EXPECT_FALSE(range.has_value()) << text;
  EXPECT_FALSE(error.empty()) << text;
  return error;
}

TEST(PolicyCidr, Ports) {
  std::string error;
  EXPECT_EQ(ParsePortRange("443", &error), (PortRange{443, 443}));
  EXPECT_EQ(ParsePortRange("1", &error), (PortRange{1, 1}));
  EXPECT_EQ(ParsePortRange("65535", &error), (PortRange{65535, 65535}));
  EXPECT_EQ(ParsePortRange("1-65535", &error), (PortRange{1, 65535}));
  EXPECT_EQ(ParsePortRange("8000-8100", &error), (PortRange{8000, 8100}));
  EXPECT_EQ(ParsePortRange("5-5", &error), (PortRange{5, 5}));

  EXPECT_EQ(PortError("0"), "port 0 is out of range (1-65535)");
  EXPECT_EQ(PortError("65536"), "port 65536 is out of range (1-65535)");
  EXPECT_EQ(PortError("99999999999"), "port 99999999999 is out of range (1-65535)");
  EXPECT_EQ(PortError("0-10"), "port 0 is out of range (1-65535)");
  EXPECT_EQ(PortError("8100-8000"), "inverted port range 8100-8000 (did you mean 8000-8100?)");
  for (const char* bad : {"", "-443", "+443", " 443", "443 ", "0443", "44 3", "443-", "-", "1--2", "1-2-3", "http",
                          "443/tcp", "0x1bb", "1e3", "8000 - 8100"}) {
    PortError(bad);
  }
}

}  // namespace
}  // namespace cordon::policy
