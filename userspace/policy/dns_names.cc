#include "policy/dns_names.h"

#include <arpa/inet.h>
#include <idn2.h>

#include <algorithm>
#include <cstring>
#include <memory>

namespace cordon::policy {
namespace {

// The LDH(+underscore) checks of an ASCII, lower-case name without wildcard.
bool CheckAsciiName(std::string_view name, std::string* error) {
  if (name.empty()) {
    *error = "empty name";
    return false;
  }
  if (name.size() > kMaxDnsNameBytes) {
    *error = "name longer than " + std::to_string(kMaxDnsNameBytes) + " bytes (" + std::to_string(name.size()) + ")";
    return false;
  }
  size_t start = 0;
  std::string_view last;
  while (true) {
    const size_t dot = name.find('.', start);
    const std::string_view label = name.substr(start, dot == std::string_view::npos ? name.npos : dot - start);
    if (label.empty()) {
      *error = "empty label (two dots in a row, or a leading dot)";
      return false;
    }
    if (label.size() > kMaxDnsLabelBytes) {
      *error = "label longer than " + std::to_string(kMaxDnsLabelBytes) + " bytes: '" +
               std::string(label.substr(0, 20)) + "...'";
      return false;
    }
    for (char c : label) {
      if (c == '*') {
        *error = "'*' is allowed only as the whole first label (\"*.example.org\")";
        return false;
      }
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_')) {
        *error = "character '" + std::string(1, c) + "' is not allowed in a name (letters, digits, '-', '_')";
        return false;
      }
    }
    if (label.front() == '-' || label.back() == '-') {
      *error = "label '" + std::string(label) + "' starts or ends with '-'";
      return false;
    }
    last = label;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  if (std::all_of(last.begin(), last.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    *error = "an IP address, not a name (use cidr for addresses)";
    return false;
  }
  return true;
}

}  // namespace

std::optional<std::string> NormalizeHostName(std::string_view written, std::string* error) {
  if (written.empty()) {
    *error = "empty name (expected e.g. pypi.org or \"*.pythonhosted.org\")";
    return std::nullopt;
  }
  for (char c : written) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      *error = "control character in a name";
      return std::nullopt;
    }
  }
  std::string_view name = written;
  if (name.size() > 1 && name.back() == '.') name.remove_suffix(1);  // the root's dot: normalised away
  bool wildcard = false;
  if (name.size() >= 2 && name.substr(0, 2) == "*.") {
    wildcard = true;
    name.remove_prefix(2);
  } else if (name == "*") {
    *error = "'*' alone matches every name: list the names (a wildcard is \"*.\" and a name)";
    return std::nullopt;
  }
  std::string ascii;
  const bool is_ascii = std::all_of(name.begin(), name.end(), [](char c) { return (c & 0x80) == 0; });
  if (is_ascii) {
    ascii.assign(name);
    std::transform(ascii.begin(), ascii.end(), ascii.begin(),
                   [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; });
  } else {
    char* converted = nullptr;
    const std::string input(name);
    const int rc = idn2_to_ascii_8z(input.c_str(), &converted, IDN2_NFC_INPUT | IDN2_NONTRANSITIONAL);
    std::unique_ptr<char, decltype(&idn2_free)> owned(converted, &idn2_free);
    if (rc == IDN2_ENCODING_ERROR) {
      *error = "not valid UTF-8";  // libidn2 checks the encoding (overlong forms, surrogates) first
      return std::nullopt;
    }
    if (rc != IDN2_OK || !converted) {
      *error = std::string("not a valid internationalized name (IDNA2008: ") + idn2_strerror(rc) + ")";
      return std::nullopt;
    }
    ascii = converted;
    std::transform(ascii.begin(), ascii.end(), ascii.begin(),
                   [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; });
  }
  if (!CheckAsciiName(ascii, error)) return std::nullopt;
  if (wildcard && ascii.size() + 2 > kMaxDnsNameBytes) {
    *error = "name longer than " + std::to_string(kMaxDnsNameBytes) + " bytes with its wildcard label";
    return std::nullopt;
  }
  return wildcard ? "*." + ascii : ascii;
}

bool HostPatternMatches(std::string_view pattern, std::string_view name) {
  if (pattern.size() >= 2 && pattern.substr(0, 2) == "*.") {
    const std::string_view suffix = pattern.substr(1);  // ".example.org"
    return name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix;
  }
  return pattern == name;
}

std::string DnsUpstream::ToString() const {
  char text[INET6_ADDRSTRLEN] = {};
  if (ipv4) {
    ::inet_ntop(AF_INET, addr.data() + 12, text, sizeof text);
    return std::string(text) + ":" + std::to_string(port);
  }
  ::inet_ntop(AF_INET6, addr.data(), text, sizeof text);
  return "[" + std::string(text) + "]:" + std::to_string(port);
}

std::optional<DnsUpstream> ParseDnsUpstream(std::string_view text, std::string* error) {
  DnsUpstream out;
  std::string host;
  std::string_view port_text;
  const std::string shown = "'" + std::string(text.substr(0, 64)) + "'";
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) {
      *error = "unclosed '[' in " + shown + " (expected [IPv6]:PORT)";
      return std::nullopt;
    }
    host.assign(text.substr(1, close - 1));
    const std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') {
        *error = "expected ':' and a port after ']' in " + shown;
        return std::nullopt;
      }
      port_text = rest.substr(1);
      if (port_text.empty()) {
        *error = "empty port in " + shown;
        return std::nullopt;
      }
    }
    if (::inet_pton(AF_INET6, host.c_str(), out.addr.data()) != 1) {
      *error = "not an IPv6 address in " + shown;
      return std::nullopt;
    }
  } else {
    const size_t colon = text.find(':');
    if (colon != std::string_view::npos && text.find(':', colon + 1) != std::string_view::npos) {
      *error = "write an IPv6 upstream as [ADDRESS]:PORT, not " + shown;
      return std::nullopt;
    }
    host.assign(text.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = text.substr(colon + 1);
      if (port_text.empty()) {
        *error = "empty port in " + shown;
        return std::nullopt;
      }
    }
    if (::inet_pton(AF_INET, host.c_str(), out.addr.data() + 12) != 1) {
      *error = "not an IPv4 address in " + shown + " (expected IP:PORT, or [IPv6]:PORT)";
      return std::nullopt;
    }
    out.addr[10] = out.addr[11] = 0xff;
    out.ipv4 = true;
  }
  if (!port_text.empty()) {
    unsigned value = 0;
    if (port_text.size() > 5 || port_text.find_first_not_of("0123456789") != std::string_view::npos ||
        (value = static_cast<unsigned>(std::stoul(std::string(port_text)))) == 0 || value > 65535) {
      *error = "port must be 1-65535 in " + shown;
      return std::nullopt;
    }
    out.port = static_cast<uint16_t>(value);
  }
  return out;
}

}  // namespace cordon::policy
