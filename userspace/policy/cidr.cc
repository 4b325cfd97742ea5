#include "policy/cidr.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

namespace cordon::policy {
namespace {

// The ::ffff:0:0/96 block that holds IPv4 addresses in their IPv6 form.
constexpr std::array<uint8_t, 12> kMappedPrefix = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

bool IsMapped(const std::array<uint8_t, 16>& addr) {
  return std::memcmp(addr.data(), kMappedPrefix.data(), kMappedPrefix.size()) == 0;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Parses a decimal number of at most `max_digits` digits without sign,
// spaces or leading zeros. Returns false (with *why) on anything else.
bool ParseDecimal(std::string_view text, size_t max_digits, uint32_t* value, std::string* why) {
  if (text.empty()) {
    *why = "empty number";
    return false;
  }
  for (char c : text) {
    if (!IsDigit(c)) {
      *why = "'" + std::string(text) + "' is not a decimal number";
      return false;
    }
  }
  if (text.size() > 1 && text[0] == '0') {
    *why = "'" + std::string(text) + "' has a leading zero";
    return false;
  }
  if (text.size() > max_digits) {
    *why = "'" + std::string(text) + "' is too large";
    return false;
  }
  uint32_t v = 0;
  for (char c : text) v = v * 10 + static_cast<uint32_t>(c - '0');
  *value = v;
  return true;
}

// Strict dotted quad: exactly four decimal octets 0..255, no leading zeros
// (inet_aton would read "010" as octal 8, a classic source of surprises).
bool ParseIpv4(std::string_view text, std::array<uint8_t, 4>* out, std::string* error) {
  size_t start = 0;
  for (int i = 0; i < 4; ++i) {
    size_t dot = text.find('.', start);
    if ((i < 3) != (dot != std::string_view::npos)) {
      *error = "invalid IPv4 address '" + std::string(text) + "': expected four dot-separated octets";
      return false;
    }
    std::string_view octet = text.substr(start, i < 3 ? dot - start : std::string_view::npos);
    uint32_t value = 0;
    std::string why;
    if (!ParseDecimal(octet, 3, &value, &why) || value > 255) {
      if (why.empty()) why = "'" + std::string(octet) + "' is larger than 255";
      *error = "invalid IPv4 address '" + std::string(text) + "': octet " + why;
      return false;
    }
    (*out)[i] = static_cast<uint8_t>(value);
    start = dot + 1;
  }
  return true;
}

// Clears the bits after the first `length` bits.
std::array<uint8_t, 16> Masked(const std::array<uint8_t, 16>& addr, int length) {
  std::array<uint8_t, 16> out = addr;
  for (int i = 0; i < 16; ++i) {
    int bits = length - i * 8;
    if (bits >= 8) continue;
    out[i] = bits <= 0 ? 0 : static_cast<uint8_t>(out[i] & (0xff << (8 - bits)));
  }
  return out;
}

bool SameLeadingBits(const std::array<uint8_t, 16>& a, const std::array<uint8_t, 16>& b, int length) {
  int full = length / 8;
  if (std::memcmp(a.data(), b.data(), static_cast<size_t>(full)) != 0) return false;
  int rest = length % 8;
  if (rest == 0) return true;
  uint8_t mask = static_cast<uint8_t>(0xff << (8 - rest));
  return (a[full] & mask) == (b[full] & mask);
}

}  // namespace

bool Prefix::Contains(const Prefix& other) const {
  return other.length >= length && SameLeadingBits(addr, other.addr, length);
}

bool Prefix::Contains(const std::array<uint8_t, 16>& address) const {
  return SameLeadingBits(addr, address, length);
}

std::string Prefix::ToString() const {
  if (length >= 96 && IsMapped(addr)) return AddressToString(addr) + "/" + std::to_string(length - 96);
  char text[INET6_ADDRSTRLEN];
  if (!inet_ntop(AF_INET6, addr.data(), text, sizeof text)) return "?";
  return std::string(text) + "/" + std::to_string(length);
}

std::optional<Prefix> ParsePrefix(std::string_view text, std::string* error) {
  if (text.empty()) {
    *error = "empty CIDR";
    return std::nullopt;
  }
  size_t slash = text.find('/');
  std::string_view address = text.substr(0, slash);
  const bool ipv6 = address.find(':') != std::string_view::npos;
  // A host name where an address belongs ("pypi.org"): say so rather than
  // complain about its first "octet".
  if (!ipv6 && address.find_first_of("ghijklmnopqrstuvwxyzGHIJKLMNOPQRSTUVWXYZ") != std::string_view::npos) {
    *error = "'" + std::string(address) +
             "' looks like a host name: cidr takes an IP address or a CIDR block such as 203.0.113.0/24 "
             "(a name goes in host: instead of cidr:)";
    return std::nullopt;
  }
  const int max_length = ipv6 ? 128 : 32;

  Prefix prefix;
  if (ipv6) {
    // inet_pton is strict (no zone ids, no spaces, embedded IPv4 without
    // leading zeros) but stops at a NUL, which JSON can smuggle in ("\u0000").
    std::string copy(address);
    const bool plain = std::all_of(copy.begin(), copy.end(), [](char c) {
      return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == ':' || c == '.';
    });
    if (!plain || inet_pton(AF_INET6, copy.c_str(), prefix.addr.data()) != 1) {
      *error = "invalid IPv6 address '" + copy + "'";
      return std::nullopt;
    }
  } else {
    std::array<uint8_t, 4> v4;
    if (!ParseIpv4(address, &v4, error)) return std::nullopt;
    prefix.addr = ToMapped(v4.data(), 4);
  }

  int length = max_length;
  if (slash != std::string_view::npos) {
    std::string_view length_text = text.substr(slash + 1);
    uint32_t value = 0;
    std::string why;
    if (!ParseDecimal(length_text, 3, &value, &why)) {
      *error = "invalid prefix length in '" + std::string(text) + "': " + why;
      return std::nullopt;
    }
    if (value > static_cast<uint32_t>(max_length)) {
      *error = "prefix length /" + std::to_string(value) + " is out of range for " + (ipv6 ? "IPv6" : "IPv4") +
               " (0-" + std::to_string(max_length) + ")";
      return std::nullopt;
    }
    length = static_cast<int>(value);
  }
  prefix.length = ipv6 ? length : 96 + length;
  // An IPv6 prefix inside ::ffff:0:0/96 denotes IPv4 addresses: show it as IPv4.
  prefix.ipv4 = !ipv6 || (prefix.length >= 96 && IsMapped(prefix.addr));

  std::array<uint8_t, 16> network = Masked(prefix.addr, prefix.length);
  if (network != prefix.addr) {
    Prefix suggestion = prefix;
    suggestion.addr = network;
    *error = "host bits set: " + std::string(text) + " (did you mean " + suggestion.ToString() + "?)";
    return std::nullopt;
  }
  return prefix;
}

std::array<uint8_t, 16> ToMapped(const uint8_t* addr, int len) {
  std::array<uint8_t, 16> out{};
  if (len == 4) {
    std::memcpy(out.data(), kMappedPrefix.data(), kMappedPrefix.size());
    std::memcpy(out.data() + 12, addr, 4);
  } else if (len == 16) {
    std::memcpy(out.data(), addr, 16);
  }
  return out;
}

std::string AddressToString(const std::array<uint8_t, 16>& addr) {
  char text[INET6_ADDRSTRLEN];
  const char* ok = IsMapped(addr) ? inet_ntop(AF_INET, addr.data() + 12, text, sizeof text)
                                  : inet_ntop(AF_INET6, addr.data(), text, sizeof text);
  return ok ? std::string(text) : std::string("?");
}

std::optional<PortRange> ParsePortRange(std::string_view text, std::string* error) {
  auto parse_port = [&](std::string_view part, uint16_t* port) {
    uint32_t value = 0;
    std::string why;
    if (!ParseDecimal(part, 5, &value, &why)) {
      if (part.size() > 5 && std::all_of(part.begin(), part.end(), IsDigit) && part[0] != '0') {
        *error = "port " + std::string(part) + " is out of range (1-65535)";
      } else {
        *error = "invalid port '" + std::string(text) + "': " + why + " (expected 443 or 8000-8100)";
      }
      return false;
    }
    if (value == 0 || value > 65535) {
      *error = "port " + std::to_string(value) + " is out of range (1-65535)";
      return false;
    }
    *port = static_cast<uint16_t>(value);
    return true;
  };

  PortRange range;
  size_t dash = text.find('-');
  if (dash == std::string_view::npos) {
    if (!parse_port(text, &range.lo)) return std::nullopt;
    range.hi = range.lo;
    return range;
  }
  if (!parse_port(text.substr(0, dash), &range.lo) || !parse_port(text.substr(dash + 1), &range.hi)) {
    return std::nullopt;
  }
  if (range.lo > range.hi) {
    *error = "inverted port range " + std::string(text) + " (did you mean " + std::to_string(range.hi) + "-" +
             std::to_string(range.lo) + "?)";
    return std::nullopt;
  }
  return range;
}

}  // namespace cordon::policy
