#include "util/text.h"

#include <cstdint>
#include <cstdio>

namespace cordon {
namespace {

// The length of the well-formed UTF-8 sequence at s[i] (Unicode 15, table
// 3-7: no overlong forms, no surrogates, nothing above U+10FFFF) and its code
// point; 0 if the bytes there are not one.
size_t Sequence(std::string_view s, size_t i, char32_t* cp) {
  auto at = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char b = at(0);
  if (b < 0x80) {
    *cp = b;
    return 1;
  }
  size_t n;
  unsigned char lo = 0x80, hi = 0xbf;  // the allowed range of the second byte
  if (b >= 0xc2 && b <= 0xdf) n = 2;
  else if (b == 0xe0) n = 3, lo = 0xa0;
  else if (b >= 0xe1 && b <= 0xef) n = 3, hi = b == 0xed ? 0x9f : 0xbf;
  else if (b == 0xf0) n = 4, lo = 0x90;
  else if (b >= 0xf1 && b <= 0xf3) n = 4;
  else if (b == 0xf4) n = 4, hi = 0x8f;
  else return 0;
  if (i + n > s.size()) return 0;
  if (at(1) < lo || at(1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (at(k) < 0x80 || at(k) > 0xbf) return 0;
  char32_t v = b & (n == 2 ? 0x1f : n == 3 ? 0x0f : 0x07);
  for (size_t k = 1; k < n; ++k) v = (v << 6) | (at(k) & 0x3f);
  *cp = v;
  return n;
}

void Hex(unsigned char b, std::string* out) {
  static const char kDigits[] = "0123456789abcdef";
  out->push_back('\\');
  out->push_back('x');
  out->push_back(kDigits[b >> 4]);
  out->push_back(kDigits[b & 15]);
}

bool IsControl(char32_t cp) { return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f); }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Both forms: controls and bytes outside well-formed sequences as \xNN;
// `backslashes` doubles '\'; `hidden` writes hidden formatting characters as
// \u{XXXX}.
std::string Escape(std::string_view s, bool backslashes, bool hidden) {
  bool plain = true;  // the common case: printable ASCII without '\'
  for (unsigned char c : s) plain &= c >= 0x20 && c < 0x7f && c != '\\';
  if (plain) return std::string(s);
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    char32_t cp = 0;
    size_t n = Sequence(s, i, &cp);
    if (n == 0) {
      Hex(static_cast<unsigned char>(s[i]), &out);
      ++i;
      continue;
    }
    if (IsControl(cp)) {
      for (size_t k = 0; k < n; ++k) Hex(static_cast<unsigned char>(s[i + k]), &out);
    } else if (cp == '\\' && backslashes) {
      out += "\\\\";
    } else if (hidden && IsHiddenFormatCharacter(cp)) {
      char buf[16];
      std::snprintf(buf, sizeof buf, "\\u{%04X}", static_cast<unsigned>(cp));
      out += buf;
    } else {
      out.append(s.data() + i, n);
    }
    i += n;
  }
  return out;
}

}  // namespace

bool IsHiddenFormatCharacter(char32_t cp) {
  return cp == 0x00ad || cp == 0x034f || cp == 0x061c || cp == 0x115f || cp == 0x1160 || cp == 0x17b4 ||
         cp == 0x17b5 || (cp >= 0x180b && cp <= 0x180f) || (cp >= 0x200b && cp <= 0x200f) ||
         (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2060 && cp <= 0x206f) || cp == 0x3164 ||
         (cp >= 0xfe00 && cp <= 0xfe0f) || cp == 0xfeff || cp == 0xffa0 || (cp >= 0xfff0 && cp <= 0xfffb) ||
         (cp >= 0x1d173 && cp <= 0x1d17a) || (cp >= 0xe0000 && cp <= 0xe0fff);
}

std::string EscapeWorkloadBytes(std::string_view raw) { return Escape(raw, true, false); }

std::optional<std::string> UnescapeWorkloadBytes(std::string_view escaped) {
  std::string out;
  out.reserve(escaped.size());
  for (size_t i = 0; i < escaped.size(); ++i) {
    if (escaped[i] != '\\') {
      out.push_back(escaped[i]);
      continue;
    }
    if (i + 1 < escaped.size() && escaped[i + 1] == '\\') {
      out.push_back('\\');
      i += 1;
      continue;
    }
    if (i + 3 < escaped.size() && escaped[i + 1] == 'x' && HexValue(escaped[i + 2]) >= 0 &&
        HexValue(escaped[i + 3]) >= 0) {
      out.push_back(static_cast<char>(HexValue(escaped[i + 2]) * 16 + HexValue(escaped[i + 3])));
      i += 3;
      continue;
    }
    return std::nullopt;
  }
  return out;
}

std::string DisplayText(std::string_view text) { return Escape(text, false, true); }

std::string_view TruncateEscaped(std::string_view escaped, size_t max) {
  size_t end = 0;
  while (end < escaped.size()) {
    size_t n = 1;
    char32_t cp;
    if (escaped[end] == '\\') n = end + 1 < escaped.size() && escaped[end + 1] == 'x' ? 4 : 2;
    else if (size_t k = Sequence(escaped, end, &cp); k > 0) n = k;
    if (end + n > max || end + n > escaped.size()) break;
    end += n;
  }
  return escaped.substr(0, end);
}

bool IsCleanName(std::string_view name) {
  return EscapeWorkloadBytes(name) == name && DisplayText(name) == name;
}

std::string Quoted(std::string_view text) { return "'" + DisplayText(text) + "'"; }

std::string JoinStrings(const std::vector<std::string>& parts, std::string_view separator) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += separator;
    out += parts[i];
  }
  return out;
}

}  // namespace cordon
