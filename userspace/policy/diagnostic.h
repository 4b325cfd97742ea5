// A problem found in a policy file, located precisely enough to act on.
#pragma once

#include <string>
#include <vector>

namespace cordon::policy {

struct Diagnostic {
  std::string file;     // as given by the user ("<builtin>" for the default policy)
  int line = 0;         // 1-based; 0 when unknown
  int column = 0;       // 1-based; 0 when unknown
  std::string field;    // dotted path: "spec.network.egress[2].ports[0]"; empty for the document
  std::string message;  // what is wrong and, where possible, what is expected

  // "file:line:column: field: message" (parts omitted when unknown).
  std::string ToString() const;
};

using Diagnostics = std::vector<Diagnostic>;

std::string FormatDiagnostics(const Diagnostics& diags);  // one per line

}  // namespace cordon::policy
