// YAML/JSON reading with source positions, built on libyaml's event parser.
// JSON policies are read by the same code (JSON is YAML flow syntax).
//
// Two ways to consume a document: as a YamlNode tree (ReadYaml: small files
// such as the agent's configuration), or node by node as libyaml reports
// them (ReadYamlEvents: the policy parser converts a 100,000-rule policy
// without building a tree). Both accept and reject exactly the same input.
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

// A scalar as read; `text` is valid only during the call that reports it.
struct YamlScalar {
  std::string_view text;
  bool quoted = false;  // as YamlNode::quoted
  int line = 0;         // 1-based
  int column = 0;       // 1-based
};

// Receives a document's nodes in source order. A collection's children come
// between its Begin... and its End; a mapping's children alternate between
// Key (always a scalar: the reader rejects others) and the value node.
class YamlHandler {
 public:
  virtual ~YamlHandler() = default;
  virtual void Scalar(const YamlScalar& scalar) = 0;
  virtual void Key(const YamlScalar& key) = 0;
  virtual void BeginMapping(int line, int column) = 0;
  virtual void BeginSequence(int line, int column) = 0;
  virtual void End() = 0;
};

// Reads one document as ReadYaml does, reporting its nodes to *handler as
// they are read. Returns false, with the same diagnostics as ReadYaml, on any
// input ReadYaml rejects; the handler may then have seen part of the document
// and must discard what it made of it.
bool ReadYamlEvents(std::string_view text, const std::string& file, YamlHandler* handler, Diagnostics* diags);

}  // namespace cordon::policy
