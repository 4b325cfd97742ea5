// Policy file -> cordon.v1.SandboxPolicy, with every field's source position.
// Schema-driven by protobuf reflection: keys are the fields' JSON names;
// unknown fields and wrong types are errors naming file, line and field.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cordon/v1/policy.pb.h"
#include "policy/diagnostic.h"
#include "util/result.h"

namespace cordon::policy {

struct SourcePos {
  int line = 0;
  int column = 0;
};

// Where each field of a parsed policy was written, by field path (the same
// spelling as Diagnostic::field: "spec.network.egress[3].ports[0]",
// "metadata.labels.team"; "" is the document). Held as a tree of the
// document's nodes, so a 100,000-rule policy does not pay for a million path
// strings; lookups parse the path.
class FieldPositions {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  // Lookups, as on a std::map<std::string, SourcePos> of every recorded path.
  const SourcePos* Find(std::string_view path) const;
  size_t count(std::string_view path) const { return Find(path) ? 1 : 0; }
  const SourcePos& at(std::string_view path) const;  // throws std::out_of_range
  bool empty() const { return nodes_.empty(); }
  size_t size() const { return nodes_.size(); }
  void clear();
  void reserve(size_t nodes);

  // Building (the parser). Nodes are added in document order; a node's
  // children are added between Open(node) and Close(node), and nodes are
  // closed in the reverse order of opening. Node 0 is the document.
  uint32_t AddRoot(SourcePos pos);
  uint32_t AddKey(uint32_t parent, uint32_t key_id, SourcePos pos);  // parent.key (key_id from InternKey)
  uint32_t AddItem(uint32_t parent, uint32_t index, SourcePos pos);  // parent[index], index = 0, 1, ...
  uint32_t InternKey(std::string_view key);
  void Open(uint32_t node);
  void Close(uint32_t node);
  std::string PathOf(uint32_t node) const;

 private:
  static constexpr uint32_t kKeyBit = 0x80000000u;
  struct Node {
    uint32_t parent;
    uint32_t segment;  // list index, or kKeyBit | key id
    SourcePos pos;
    uint32_t first_child = 0;  // into children_, once closed
    uint32_t child_count = 0;
  };
  uint32_t Add(uint32_t parent, uint32_t segment, SourcePos pos);
  uint32_t Child(uint32_t node, uint32_t segment) const;
  const SourcePos* Search(uint32_t node, std::string_view path, size_t at) const;

  std::vector<Node> nodes_;
  std::vector<uint32_t> children_;  // each closed node's children, contiguous
  std::vector<uint32_t> pending_;   // children of the open nodes, innermost last
  std::vector<uint32_t> open_;      // open nodes: their first index in pending_
  struct KeyHash {
    using is_transparent = void;
    size_t operator()(std::string_view key) const { return std::hash<std::string_view>()(key); }
  };
  std::vector<std::string> keys_;
  std::unordered_map<std::string, uint32_t, KeyHash, std::equal_to<>> key_ids_;
  bool odd_keys_ = false;  // a key holds '.' or '[': a path can be read more than one way
};

struct ParsedPolicy {
  cordon::v1::SandboxPolicy proto;
  std::string file;
  // "sha256:" and the SHA-256 of the text as read, in hex: what `sha256sum`
  // of the policy file prints (the OIDC token's cordon_policy_digest).
  std::string digest;
  // Field path -> position of its value, for every field written with a
  // non-null value, every list item ("spec.network.egress[3]") and map entry
  // ("metadata.labels.team"); "" is the document. Presence here is how the
  // compiler tells `x: []` from an omitted x (proto3 cannot).
  FieldPositions positions;

  // A diagnostic for `field`, positioned at the field if known, else at its
  // nearest known ancestor.
  Diagnostic At(const std::string& field, std::string message) const;
};

// Parses YAML or JSON text. Maximum accepted input: 16 MiB.
// Returns false and fills *diags (never empty on failure) on any error; every
// error is reported, not just the first.
//
// Value rules: string fields take any scalar as written (`443` -> "443");
// bool/integer fields only unquoted literals; messages need mappings, repeated
// fields sequences, map fields mappings. A YAML null value (`key:`, `~`,
// `null`, unquoted) leaves the field unset exactly as if the key were absent,
// and its position is not recorded; so `families:` alone means "omitted"
// while `families: []` is present and empty (see `positions`). A null list
// item is an error; a null map value is "".
bool ParsePolicyText(std::string_view text, const std::string& file, ParsedPolicy* out, Diagnostics* diags);

// "sha256:" and the SHA-256 of `text` in hex (ParsedPolicy::digest); "" if
// OpenSSL fails.
std::string TextDigest(std::string_view text);

// Reads and parses a file ("-" is standard input). I/O errors become
// diagnostics too. `text`: the file's text as read (what the digest is of).
bool ParsePolicyFile(const std::string& path, ParsedPolicy* out, Diagnostics* diags, std::string* text = nullptr);

}  // namespace cordon::policy
