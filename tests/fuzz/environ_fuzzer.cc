// libFuzzer target: any bytes as a process's environment (workload memory)
// through CredentialLikeVariables and CredentialValueKind. Must never crash,
// hang or leak, and must never return anything of a value: every name it
// returns is a shell identifier that occurs as a name in the input, or one
// of the fixed placeholders; at most `max` are returned.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "inspect/environ.h"

namespace {

bool Identifier(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (unsigned char c : s)
    if (!std::isalnum(c) && c != '_') return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  (void)cordon::CredentialValueKind(input);
  size_t more = 0;
  constexpr size_t kMax = 5;
  auto vars = cordon::CredentialLikeVariables(input, kMax, &more);
  if (vars.size() > kMax) std::abort();
  if (more && vars.size() != kMax) std::abort();
  for (const auto& v : vars) {
    if (v.why.empty()) std::abort();
    if (v.name.front() == '(') {
      const bool placeholder = v.name == "(a name that is not an identifier)" ||
                               v.name.rfind("(a name that looks like a", 0) == 0 ||
                               v.name.rfind("(an entry without '=' that looks like a", 0) == 0;
      if (!placeholder || v.name.back() != ')') std::abort();
      continue;
    }
    if (!Identifier(v.name) || v.name.size() > 128) std::abort();
    // It is (the start of) a name: it begins an entry and is followed by '='
    // or was cut at 128 bytes.
    bool found = false;
    for (size_t at = input.find(v.name); at != std::string_view::npos && !found; at = input.find(v.name, at + 1)) {
      bool starts = at == 0 || input[at - 1] == '\0';
      size_t end = at + v.name.size();
      found = starts && ((end < input.size() && input[end] == '=') || v.name.size() == 128);
    }
    if (!found) std::abort();
  }
  return 0;
}
