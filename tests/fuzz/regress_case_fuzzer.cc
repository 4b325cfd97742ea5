// libFuzzer target: any bytes as a `cordon regress` case file (untrusted
// input: a case directory comes from a repository). Must never crash, hang
// or leak; a refusal always says file:line and field; an accepted case
// written back as YAML reads back to the same probe and policy.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "ops/regress.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::string error;
  auto c = cordon::ops::ParseCaseYaml(text, "f.case.yaml", &error);
  if (!c) {
    if (error.rfind("f.case.yaml", 0) != 0) std::abort();  // every refusal names the file
    return 0;
  }
  std::string again;
  auto back = cordon::ops::ParseCaseYaml(cordon::ops::CaseYaml(*c), "g.case.yaml", &again);
  if (!back || !(back->probe == c->probe) || back->policy_digest != c->policy_digest ||
      back->policy_file != c->policy_file)
    std::abort();
  (void)cordon::ops::ProbeArgs(c->probe);
  (void)cordon::ops::CaseFileStem(*c);
  return 0;
}
