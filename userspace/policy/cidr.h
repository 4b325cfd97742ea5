// CIDR and port-range parsing, strict: no leading zeros in IPv4 octets, no
// host bits set beyond the prefix, ports 1..65535, ranges lo <= hi.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cordon::policy {

// An IPv4 or IPv6 prefix, held as IPv6: IPv4 a.b.c.d/n is ::ffff:a.b.c.d/(96+n).
struct Prefix {
  std::array<uint8_t, 16> addr{};
  int length = 0;      // 0..128 over addr
  bool ipv4 = false;   // written as IPv4 (for display)

  bool Contains(const Prefix& other) const;  // other is equal or more specific
  bool Contains(const std::array<uint8_t, 16>& address) const;
  std::string ToString() const;              // canonical: "10.0.0.0/8", "2001:db8::/32"
  bool operator==(const Prefix&) const = default;
};

// "10.0.0.0/8", "10.1.2.3" (= /32), "2001:db8::/32", "::1" (= /128),
// "::ffff:10.0.0.0/104" (normalized to IPv4 10.0.0.0/8).
// On error returns nullopt and sets *error to a sentence naming the problem
// (e.g. "host bits set: 10.0.0.1/8 (did you mean 10.0.0.0/8?)").
std::optional<Prefix> ParsePrefix(std::string_view text, std::string* error);

// Converts an address (4 bytes IPv4 or 16 bytes IPv6, network order) to the
// 16-byte form used by the maps (IPv4 -> ::ffff:a.b.c.d).
std::array<uint8_t, 16> ToMapped(const uint8_t* addr, int len);

// "::ffff:a.b.c.d" and plain IPv6 to text; mapped addresses print as IPv4.
std::string AddressToString(const std::array<uint8_t, 16>& addr);

struct PortRange {
  uint16_t lo = 0;
  uint16_t hi = 0;
  bool operator==(const PortRange&) const = default;
};

// "443" or "8000-8100". Rejects 0, > 65535, lo > hi, signs, spaces, junk.
std::optional<PortRange> ParsePortRange(std::string_view text, std::string* error);

}  // namespace cordon::policy
