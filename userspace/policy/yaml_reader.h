// A small YAML/JSON document tree with source positions, built on libyaml.
// JSON policies are read by the same code (JSON is YAML flow syntax).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "policy/diagnostic.h"

namespace cordon::policy {

struct YamlNode {
  enum class Kind { kScalar, kSequence, kMapping };
  Kind kind = Kind::kScalar;
  int line = 0;    // 1-based
  int column = 0;  // 1-based
  // kScalar
  std::string scalar;
  bool quoted = false;  // quoted, block (| >) or !!str in the source: always a string, never null/int/bool
  // kSequence
  std::vector<std::unique_ptr<YamlNode>> items;
  // kMapping, in source order (duplicates are rejected by the reader)
  std::vector<std::pair<std::unique_ptr<YamlNode>, std::unique_ptr<YamlNode>>> entries;
};

// Parses exactly one document. Rejects: syntax errors, anchors/aliases,
// tags other than !!str, multiple documents, an empty stream, non-scalar
// mapping keys, duplicate keys, nesting deeper than 64, and more than 2,000,000
// nodes (keys count; a 100,000-rule policy needs about 1.4M). On failure,
// appends to *diags (each naming file:line:column) and returns null.
std::unique_ptr<YamlNode> ReadYaml(std::string_view text, const std::string& file, Diagnostics* diags);

}  // namespace cordon::policy
