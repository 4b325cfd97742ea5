// libFuzzer target: any bytes through parse -> compile -> describe -> evaluate.
// Must never crash, hang or leak; a failure must always explain itself.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "policy/compiler.h"
#include "policy/describe.h"
#include "policy/parser.h"

namespace policy = cordon::policy;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  policy::ParsedPolicy parsed;
  policy::Diagnostics diags;
  if (!policy::ParsePolicyText(text, "fuzz.yaml", &parsed, &diags)) {
    if (diags.empty()) std::abort();  // a rejection without a reason
    (void)policy::FormatDiagnostics(diags);
    return 0;
  }
  if (!diags.empty()) std::abort();  // success must not carry errors
  policy::CompiledPolicy compiled;
  if (!policy::Compile(parsed, &compiled, &diags)) {
    if (diags.empty()) std::abort();
    (void)policy::FormatDiagnostics(diags);
    return 0;
  }
  (void)policy::Describe(compiled);

  // The image must decide as the rules do, at a few addresses derived from
  // the policy itself (each rule's first address) and from the input.
  const uint8_t protos[] = {policy::kProtoTcp, policy::kProtoUdp, 1 /* icmp */, 132 /* sctp */};
  size_t probes = 0;
  for (const auto& rule : compiled.rules) {
    if (++probes > 16) break;
    const uint16_t port = rule.ports.empty() ? static_cast<uint16_t>(size) : rule.ports.front().lo;
    for (uint8_t proto : protos) {
      for (uint16_t p : {port, static_cast<uint16_t>(port + 1), static_cast<uint16_t>(port - 1)}) {
        if (policy::EvaluateImage(compiled, rule.prefix.addr, p, proto) !=
            policy::EvaluateRules(compiled, rule.prefix.addr, p, proto)) {
          std::abort();
        }
      }
    }
  }
  return 0;
}
