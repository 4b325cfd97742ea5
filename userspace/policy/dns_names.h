// Spellings of spec.network.egress[].host and spec.network.dns.upstream, and
// the name matching the resolver applies (userspace/dns/). Pure: no kernel, no
// network.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cordon::policy {

constexpr size_t kMaxDnsNameBytes = 253;  // without the trailing dot (RFC 1035 2.3.4)
constexpr size_t kMaxDnsLabelBytes = 63;

// A host rule's name as written -> its stored form: lower case, A-labels
// (U-labels converted by libidn2, IDNA2008 non-transitional), no trailing dot,
// "*." kept in front of a wildcard. Refused, with a reason in *error: empty
// names or labels, labels over 63 bytes, names over 253, '*' anywhere but as
// the whole first label, invalid UTF-8, control characters, characters other
// than letters, digits, '-' and '_', a label starting or ending with '-', an
// IP address (that is what cidr is for), a name IDNA refuses.
std::optional<std::string> NormalizeHostName(std::string_view written, std::string* error);

// Does `name` (a queried name: lower case, no trailing dot) match a stored
// host pattern? "*.example.org" matches one or more labels before
// example.org, never example.org itself; anything else matches exactly.
bool HostPatternMatches(std::string_view pattern, std::string_view name);

struct DnsUpstream {
  std::array<uint8_t, 16> addr{};  // IPv4 as ::ffff:a.b.c.d
  bool ipv4 = false;
  uint16_t port = 53;
  std::string ToString() const;  // "10.0.0.2:53", "[2001:db8::1]:53"
  bool operator==(const DnsUpstream&) const = default;
};

// "10.0.0.2", "10.0.0.2:5353", "[2001:db8::1]", "[2001:db8::1]:53"
// (port 1-65535, 53 when omitted). A bare IPv6 address is refused (is the
// last group a port?).
std::optional<DnsUpstream> ParseDnsUpstream(std::string_view text, std::string* error);

}  // namespace cordon::policy
