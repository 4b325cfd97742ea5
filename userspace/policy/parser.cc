// YAML/JSON -> cordon.v1.SandboxPolicy by protobuf reflection, so the
// schema in policy.proto is the only list of fields; nothing here names one.
// The message is filled as libyaml reports the document's nodes (no
// intermediate tree: a 100,000-rule policy is about 1.4 million nodes).
//
// Conventions:
//  - Keys are the fields' JSON names (lowerCamelCase).
//  - string fields take any scalar as written (`443` and "443" are both "443").
//  - bool and integer fields take only unquoted scalars of the right form.
//  - A YAML null value (`key:`, `key: ~`, `key: null`, unquoted) leaves the
//    field unset, exactly as if the key were absent; its position is not
//    recorded. So `families:` with nothing after it means "omitted" (the
//    default), while `families: []` is an explicit empty list.
//  - A null list item is an error; a null map value is the empty string.
#include "policy/parser.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "policy/yaml_reader.h"

namespace cordon::policy {

namespace pb = google::protobuf;

constexpr size_t kMaxInputBytes = 16u << 20;

std::string Diagnostic::ToString() const {
  std::string out;
  if (!file.empty()) out += file + ":";
  if (line > 0) {
    out += std::to_string(line) + ":";
    if (column > 0) out += std::to_string(column) + ":";
  }
  if (!out.empty()) out += " ";
  if (!field.empty()) out += field + ": ";
  out += message;
  // Field paths and messages quote the policy file: keep them on one
  // printable line (no terminal escapes from a hostile file).
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return out;
}

std::string FormatDiagnostics(const Diagnostics& diags) {
  std::string out;
  for (const auto& diag : diags) out += diag.ToString() + "\n";
  return out;
}

namespace {

// The field path one level up: "a.b[2].c" -> "a.b[2]" -> "a.b" -> "a" -> "".
std::string ParentPath(const std::string& path) {
  size_t cut = path.find_last_of(".[");
  return cut == std::string::npos ? std::string() : path.substr(0, cut);
}

std::string ChildPath(const std::string& parent, std::string_view key) {
  return parent.empty() ? std::string(key) : parent + "." + std::string(key);
}

}  // namespace

// ---- FieldPositions ---------------------------------------------------------------

void FieldPositions::clear() {
  nodes_.clear();
  children_.clear();
  pending_.clear();
  open_.clear();
  keys_.clear();
  key_ids_.clear();
  odd_keys_ = false;
}

void FieldPositions::reserve(size_t nodes) {
  nodes_.reserve(nodes);
  children_.reserve(nodes);
}

uint32_t FieldPositions::Add(uint32_t parent, uint32_t segment, SourcePos pos) {
  const auto id = static_cast<uint32_t>(nodes_.size());
  nodes_.push_back(Node{parent, segment, pos});
  if (!open_.empty()) pending_.push_back(id);
  return id;
}

uint32_t FieldPositions::AddRoot(SourcePos pos) { return Add(kNone, 0, pos); }

uint32_t FieldPositions::AddKey(uint32_t parent, uint32_t key_id, SourcePos pos) {
  return Add(parent, kKeyBit | key_id, pos);
}

uint32_t FieldPositions::AddItem(uint32_t parent, uint32_t index, SourcePos pos) { return Add(parent, index, pos); }

uint32_t FieldPositions::InternKey(std::string_view key) {
  auto [it, inserted] = key_ids_.try_emplace(std::string(key), static_cast<uint32_t>(keys_.size()));
  if (inserted) {
    keys_.emplace_back(key);
    odd_keys_ = odd_keys_ || key.find_first_of(".[") != std::string_view::npos;
  }
  return it->second;
}

void FieldPositions::Open(uint32_t node) { open_.push_back(static_cast<uint32_t>(pending_.size())); }

void FieldPositions::Close(uint32_t node) {
  const uint32_t start = open_.back();
  open_.pop_back();
  nodes_[node].first_child = static_cast<uint32_t>(children_.size());
  nodes_[node].child_count = static_cast<uint32_t>(pending_.size() - start);
  children_.insert(children_.end(), pending_.begin() + start, pending_.end());
  pending_.resize(start);
}

std::string FieldPositions::PathOf(uint32_t node) const {
  std::vector<uint32_t> segments;
  for (uint32_t n = node; n != kNone && nodes_[n].parent != kNone; n = nodes_[n].parent) {
    segments.push_back(nodes_[n].segment);
  }
  std::string path;
  for (auto it = segments.rbegin(); it != segments.rend(); ++it) {
    if (*it & kKeyBit) {
      path = ChildPath(path, keys_[*it & ~kKeyBit]);
    } else {
      path += "[" + std::to_string(*it) + "]";
    }
  }
  return path;
}

uint32_t FieldPositions::Child(uint32_t node, uint32_t segment) const {
  const Node& n = nodes_[node];
  if (!(segment & kKeyBit)) {  // list items are the children in order
    if (segment >= n.child_count) return kNone;
    const uint32_t child = children_[n.first_child + segment];
    return nodes_[child].segment == segment ? child : kNone;
  }
  for (uint32_t i = 0; i < n.child_count; ++i) {
    const uint32_t child = children_[n.first_child + i];
    if (nodes_[child].segment == segment) return child;
  }
  return kNone;
}

// `path` up to `at` is the path of `node`. Map keys may contain '.' and '[',
// so every way of reading the rest is tried.
const SourcePos* FieldPositions::Search(uint32_t node, std::string_view path, size_t at) const {
  if (at == path.size()) return &nodes_[node].pos;
  if (path[at] == '[') {
    const size_t close = path.find(']', at);
    const std::string_view digits =
        close == std::string_view::npos ? std::string_view() : path.substr(at + 1, close - at - 1);
    const bool canonical = !digits.empty() && digits.size() <= 9 && (digits[0] != '0' || digits.size() == 1) &&
                           digits.find_first_not_of("0123456789") == std::string_view::npos;
    if (canonical) {
      const uint32_t child = Child(node, static_cast<uint32_t>(std::stoul(std::string(digits))));
      if (child != kNone) {
        if (const SourcePos* found = Search(child, path, close + 1)) return found;
      }
    }
  }
  if (at == 0 || path[at] == '.') {  // a key: "key" below a node whose path is "", else ".key"
    const size_t start = at == 0 ? 0 : at + 1;
    for (size_t end = start; end <= path.size(); ++end) {
      if (end < path.size() && path[end] != '.' && path[end] != '[') continue;
      auto key = key_ids_.find(path.substr(start, end - start));
      if (key != key_ids_.end()) {
        const uint32_t child = Child(node, kKeyBit | key->second);
        if (child != kNone) {
          if (const SourcePos* found = Search(child, path, end)) return found;
        }
      }
      if (!odd_keys_) break;  // no key holds a separator: the shortest reading is the only one
    }
  }
  return nullptr;
}

const SourcePos* FieldPositions::Find(std::string_view path) const {
  if (nodes_.empty()) return nullptr;
  return Search(0, path, 0);
}

const SourcePos& FieldPositions::at(std::string_view path) const {
  const SourcePos* pos = Find(path);
  if (!pos) throw std::out_of_range("no position recorded for '" + std::string(path) + "'");
  return *pos;
}

Diagnostic ParsedPolicy::At(const std::string& field, std::string message) const {
  Diagnostic diag{file, 0, 0, field, std::move(message)};
  std::string path = field;
  for (;;) {
    if (const SourcePos* pos = positions.Find(path)) {
      diag.line = pos->line;
      diag.column = pos->column;
      break;
    }
    if (path.empty()) break;
    path = ParentPath(path);
  }
  return diag;
}

namespace {

// One node as the reader reports it: a scalar (with its text) or the start of a collection.
struct In {
  enum class Kind { kScalar, kSequence, kMapping };
  Kind kind;
  const YamlScalar* scalar;  // kScalar
  int line;
  int column;
};

bool IsNull(const In& node) {
  if (node.kind != In::Kind::kScalar || node.scalar->quoted) return false;
  const std::string_view s = node.scalar->text;
  return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL";
}

// What a node is, for "expected X, got Y" messages.
std::string WhatIs(const In& node) {
  switch (node.kind) {
    case In::Kind::kMapping:
      return "a mapping";
    case In::Kind::kSequence:
      return "a list";
    case In::Kind::kScalar:
      break;
  }
  if (IsNull(node)) return "null";
  const std::string_view scalar = node.scalar->text;
  std::string text = scalar.size() > 40 ? std::string(scalar.substr(0, 40)) + "..." : std::string(scalar);
  return node.scalar->quoted ? "the string \"" + text + "\"" : "'" + text + "'";
}

// Strict integer text: optional '-', decimal digits, no leading zeros.
bool ParseInteger(std::string_view text, bool is_signed, long long min, unsigned long long max, long long* svalue,
                  unsigned long long* uvalue) {
  size_t i = 0;
  bool negative = false;
  if (is_signed && !text.empty() && text[0] == '-') {
    negative = true;
    i = 1;
  }
  if (i >= text.size()) return false;
  if (text[i] == '0' && text.size() > i + 1) return false;
  unsigned long long magnitude = 0;
  for (; i < text.size(); ++i) {
    char c = text[i];
    if (c < '0' || c > '9') return false;
    unsigned digit = static_cast<unsigned>(c - '0');
    if (magnitude > (std::numeric_limits<unsigned long long>::max() - digit) / 10) return false;
    magnitude = magnitude * 10 + digit;
  }
  if (!is_signed) {
    if (magnitude > max) return false;
    *uvalue = magnitude;
    return true;
  }
  if (negative) {
    if (magnitude > static_cast<unsigned long long>(-(min + 1)) + 1) return false;
    *svalue = magnitude == 0 ? 0 : -static_cast<long long>(magnitude - 1) - 1;
  } else {
    if (magnitude > max) return false;
    *svalue = static_cast<long long>(magnitude);
  }
  return true;
}

// Fills the message as the reader reports nodes. Its diagnostics are kept
// apart: they count only if the whole document reads (a YAML error anywhere
// is the only error reported, as if nothing had been converted).
class Converter : public YamlHandler {
 public:
  explicit Converter(ParsedPolicy* out) : out_(out), positions_(&out->positions) {}

  Diagnostics& diags() { return diags_; }

  void Scalar(const YamlScalar& scalar) override { Node(In{In::Kind::kScalar, &scalar, scalar.line, scalar.column}); }
  void BeginMapping(int line, int column) override { Node(In{In::Kind::kMapping, nullptr, line, column}); }
  void BeginSequence(int line, int column) override { Node(In{In::Kind::kSequence, nullptr, line, column}); }
  void Key(const YamlScalar& key) override;
  void End() override;

 private:
  // What the innermost open collection is read into.
  enum class Into { kMessage, kList, kMap, kNothing };
  struct Context {
    Into into = Into::kNothing;
    pb::Message* msg = nullptr;                  // kMessage: the message; kList, kMap: the field's owner
    const pb::FieldDescriptor* field = nullptr;  // kList, kMap: the field
    uint32_t node = 0;                           // position node (not for kNothing)
    uint32_t items = 0;                          // kList: items so far
    // The pending key (kMessage, kMap).
    const pb::FieldDescriptor* key_field = nullptr;  // kMessage: its field; null: unknown, the value is skipped
    uint32_t key_id = 0;
    std::string key;  // kMap: the key as read
    bool key_quoted = false;
    int key_line = 0, key_column = 0;
  };

  void Error(const In& node, uint32_t position, std::string message) {
    Error(node.line, node.column, positions_->PathOf(position), std::move(message));
  }
  void Error(int line, int column, std::string field, std::string message) {
    diags_.push_back(Diagnostic{out_->file, line, column, std::move(field), std::move(message)});
  }
  SourcePos Pos(const In& node) const { return SourcePos{node.line, node.column}; }
  void Open(Context context) {
    if (context.into != Into::kNothing) positions_->Open(context.node);
    stack_.push_back(std::move(context));
  }
  // A collection whose content is not read (it was reported as wrong).
  void Skip(const In& node) {
    if (node.kind != In::Kind::kScalar) Open(Context{});
  }
  uint32_t KeyId(const pb::FieldDescriptor* field) {
    auto [it, inserted] = field_key_ids_.try_emplace(field, 0);
    if (inserted) it->second = positions_->InternKey(field->json_name());
    return it->second;
  }

  void Node(const In& node);
  void Message(const In& node, pb::Message* msg, uint32_t position);
  void Field(const In& value, pb::Message* msg, const pb::FieldDescriptor* field, uint32_t position);
  // Sets (or adds, for repeated fields) one scalar value. Message fields are handled by the caller.
  void Scalar(const In& value, pb::Message* msg, const pb::FieldDescriptor* field, uint32_t position);

  ParsedPolicy* out_;
  FieldPositions* positions_;
  Diagnostics diags_;
  std::vector<Context> stack_;
  std::unordered_map<const pb::FieldDescriptor*, uint32_t> field_key_ids_;
};

void Converter::Node(const In& node) {
  if (stack_.empty()) {  // the document
    if (IsNull(node)) {
      Error(node.line, node.column, "", "document is empty (expected a SandboxPolicy mapping)");
      return;
    }
    Message(node, &out_->proto, positions_->AddRoot(Pos(node)));
    return;
  }
  Context& parent = stack_.back();
  switch (parent.into) {
    case Into::kNothing:
      Skip(node);
      return;
    case Into::kMessage: {
      if (!parent.key_field) {  // an unknown field, reported at its key
        Skip(node);
        return;
      }
      if (IsNull(node)) return;  // null: as if absent (see the top of this file)
      Field(node, parent.msg, parent.key_field, positions_->AddKey(parent.node, parent.key_id, Pos(node)));
      return;
    }
    case Into::kList: {
      pb::Message* msg = parent.msg;
      const pb::FieldDescriptor* field = parent.field;
      const uint32_t item = positions_->AddItem(parent.node, parent.items++, Pos(node));
      if (IsNull(node)) {
        Error(node, item, "list item is null");
        return;
      }
      if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
        Message(node, msg->GetReflection()->AddMessage(msg, field), item);
      } else {
        Scalar(node, msg, field, item);
      }
      return;
    }
    case Into::kMap: {
      const uint32_t item = positions_->AddKey(parent.node, parent.key_id, Pos(node));
      pb::Message* entry = parent.msg->GetReflection()->AddMessage(parent.msg, parent.field);
      const pb::Descriptor* entry_type = parent.field->message_type();
      const YamlScalar key{parent.key, parent.key_quoted, parent.key_line, parent.key_column};
      Scalar(In{In::Kind::kScalar, &key, key.line, key.column}, entry, entry_type->map_key(), item);
      if (IsNull(node)) return;  // an empty value, e.g. `team:`
      const pb::FieldDescriptor* value_field = entry_type->map_value();
      if (value_field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
        Message(node, entry->GetReflection()->MutableMessage(entry, value_field), item);
      } else {
        Scalar(node, entry, value_field, item);
      }
      return;
    }
  }
}

void Converter::Key(const YamlScalar& key) {
  Context& context = stack_.back();
  if (context.into == Into::kMap) {
    context.key.assign(key.text);
    context.key_quoted = key.quoted;
    context.key_line = key.line;
    context.key_column = key.column;
    context.key_id = positions_->InternKey(key.text);
    return;
  }
  if (context.into != Into::kMessage) return;
  const pb::Descriptor* descriptor = context.msg->GetDescriptor();
  context.key_field = nullptr;
  for (int i = 0; i < descriptor->field_count(); ++i) {
    if (descriptor->field(i)->json_name() == key.text) {
      context.key_field = descriptor->field(i);
      break;
    }
  }
  if (!context.key_field) {
    std::string expected;
    for (int i = 0; i < descriptor->field_count(); ++i) {
      if (i) expected += ", ";
      expected += descriptor->field(i)->json_name();
    }
    Error(key.line, key.column, ChildPath(positions_->PathOf(context.node), key.text),
          "unknown field '" + std::string(key.text) + "' (expected one of: " + expected + ")");
    return;
  }
  context.key_id = KeyId(context.key_field);
}

void Converter::End() {
  if (stack_.back().into != Into::kNothing) positions_->Close(stack_.back().node);
  stack_.pop_back();
}

void Converter::Message(const In& node, pb::Message* msg, uint32_t position) {
  if (node.kind != In::Kind::kMapping) {
    Error(node, position,
          std::string("expected a mapping of ") + msg->GetDescriptor()->name() + " fields, got " + WhatIs(node));
    Skip(node);
    return;
  }
  Context context;
  context.into = Into::kMessage;
  context.msg = msg;
  context.node = position;
  Open(std::move(context));
}

void Converter::Field(const In& value, pb::Message* msg, const pb::FieldDescriptor* field, uint32_t position) {
  if (field->is_map() || field->is_repeated()) {
    const bool map = field->is_map();
    if (value.kind != (map ? In::Kind::kMapping : In::Kind::kSequence)) {
      Error(value, position, std::string(map ? "expected a mapping, got " : "expected a list, got ") + WhatIs(value));
      Skip(value);
      return;
    }
    Context context;
    context.into = map ? Into::kMap : Into::kList;
    context.msg = msg;
    context.field = field;
    context.node = position;
    Open(std::move(context));
    return;
  }
  if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
    Message(value, msg->GetReflection()->MutableMessage(msg, field), position);
  } else {
    Scalar(value, msg, field, position);
  }
}

void Converter::Scalar(const In& value, pb::Message* msg, const pb::FieldDescriptor* field, uint32_t position) {
  const pb::Reflection* r = msg->GetReflection();
  const bool repeated = field->is_repeated();
  if (value.kind != In::Kind::kScalar) {
    const char* expected = field->cpp_type() == pb::FieldDescriptor::CPPTYPE_STRING ? "a string" : "a scalar";
    Error(value, position, std::string("expected ") + expected + ", got " + WhatIs(value));
    Skip(value);
    return;
  }
  const std::string_view text = value.scalar->text;
  const bool quoted = value.scalar->quoted;
  auto bad = [&](const char* expected) {
    Error(value, position, std::string("expected ") + expected + ", got " + WhatIs(value));
  };
  long long s = 0;
  unsigned long long u = 0;
  switch (field->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_STRING:
      repeated ? r->AddString(msg, field, std::string(text)) : r->SetString(msg, field, std::string(text));
      return;
    case pb::FieldDescriptor::CPPTYPE_BOOL: {
      bool is_true = text == "true" || text == "True" || text == "TRUE";
      bool is_false = text == "false" || text == "False" || text == "FALSE";
      if (quoted || (!is_true && !is_false)) return bad("true or false");
      repeated ? r->AddBool(msg, field, is_true) : r->SetBool(msg, field, is_true);
      return;
    }
    case pb::FieldDescriptor::CPPTYPE_INT32:
      if (quoted || !ParseInteger(text, true, std::numeric_limits<int32_t>::min(),
                                  std::numeric_limits<int32_t>::max(), &s, &u)) {
        return bad("a 32-bit integer");
      }
      repeated ? r->AddInt32(msg, field, static_cast<int32_t>(s)) : r->SetInt32(msg, field, static_cast<int32_t>(s));
      return;
    case pb::FieldDescriptor::CPPTYPE_INT64:
      if (quoted || !ParseInteger(text, true, std::numeric_limits<int64_t>::min(),
                                  std::numeric_limits<int64_t>::max(), &s, &u)) {
        return bad("a 64-bit integer");
      }
      repeated ? r->AddInt64(msg, field, s) : r->SetInt64(msg, field, s);
      return;
    case pb::FieldDescriptor::CPPTYPE_UINT32:
      if (quoted || !ParseInteger(text, false, 0, std::numeric_limits<uint32_t>::max(), &s, &u)) {
        return bad("a non-negative 32-bit integer");
      }
      repeated ? r->AddUInt32(msg, field, static_cast<uint32_t>(u))
               : r->SetUInt32(msg, field, static_cast<uint32_t>(u));
      return;
    case pb::FieldDescriptor::CPPTYPE_UINT64:
      if (quoted || !ParseInteger(text, false, 0, std::numeric_limits<uint64_t>::max(), &s, &u)) {
        return bad("a non-negative 64-bit integer");
      }
      repeated ? r->AddUInt64(msg, field, u) : r->SetUInt64(msg, field, u);
      return;
    case pb::FieldDescriptor::CPPTYPE_DOUBLE:
    case pb::FieldDescriptor::CPPTYPE_FLOAT: {
      const std::string copy(text);  // strtod stops at a NUL, as it always has here
      char* end = nullptr;
      errno = 0;
      double d = copy.empty() || quoted ? 0 : std::strtod(copy.c_str(), &end);
      if (quoted || copy.empty() || *end != '\0' || errno != 0 || !std::isfinite(d)) return bad("a number");
      if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_DOUBLE) {
        repeated ? r->AddDouble(msg, field, d) : r->SetDouble(msg, field, d);
      } else {
        repeated ? r->AddFloat(msg, field, static_cast<float>(d)) : r->SetFloat(msg, field, static_cast<float>(d));
      }
      return;
    }
    case pb::FieldDescriptor::CPPTYPE_ENUM: {
      const pb::EnumValueDescriptor* enum_value = field->enum_type()->FindValueByName(std::string(text));
      if (!enum_value) {
        std::string expected;
        for (int i = 0; i < field->enum_type()->value_count(); ++i) {
          if (i) expected += ", ";
          expected += field->enum_type()->value(i)->name();
        }
        Error(value, position, "unknown value '" + std::string(text) + "' (expected one of: " + expected + ")");
        return;
      }
      repeated ? r->AddEnum(msg, field, enum_value) : r->SetEnum(msg, field, enum_value);
      return;
    }
    case pb::FieldDescriptor::CPPTYPE_MESSAGE:
      Error(value, position, std::string("expected a mapping, got ") + WhatIs(value));
      return;
  }
}

}  // namespace

bool ParsePolicyText(std::string_view text, const std::string& file, ParsedPolicy* out, Diagnostics* diags) {
  out->proto.Clear();
  out->positions.clear();
  out->file = file;
  out->digest.clear();
  const size_t diags_before = diags->size();
  if (text.size() > kMaxInputBytes) {
    diags->push_back(Diagnostic{file, 0, 0, "",
                                "policy is too large: " + std::to_string(text.size()) +
                                    " bytes (the limit is 16 MiB)"});
    return false;
  }
  // About one recorded node per 9 bytes of a policy of many short rules
  // (reserving saves copying a growing array; pages never written cost nothing).
  out->positions.reserve(text.size() / 8);
  Converter converter(out);
  if (!ReadYamlEvents(text, file, &converter, diags)) {
    out->proto.Clear();  // nothing of a document that does not read
    out->positions.clear();
    if (diags->size() == diags_before) diags->push_back(Diagnostic{file, 0, 0, "", "cannot parse the policy"});
    return false;
  }
  Diagnostics& found = converter.diags();
  diags->insert(diags->end(), std::make_move_iterator(found.begin()), std::make_move_iterator(found.end()));
  out->digest = TextDigest(text);
  return diags->size() == diags_before;
}

std::string TextDigest(std::string_view text) {
  unsigned char sha[EVP_MAX_MD_SIZE];
  unsigned int sha_len = 0;
  if (EVP_Digest(text.data(), text.size(), sha, &sha_len, EVP_sha256(), nullptr) != 1) return "";
  static const char* const kHex = "0123456789abcdef";
  std::string digest = "sha256:";
  for (unsigned int i = 0; i < sha_len; ++i) {
    digest += kHex[sha[i] >> 4];
    digest += kHex[sha[i] & 15];
  }
  return digest;
}

bool ParsePolicyFile(const std::string& path, ParsedPolicy* out, Diagnostics* diags, std::string* text_out) {
  const bool is_stdin = path == "-";
  const std::string display = is_stdin ? "<stdin>" : path;
  int fd = is_stdin ? STDIN_FILENO : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    diags->push_back(Diagnostic{display, 0, 0, "", std::string("cannot open: ") + std::strerror(errno)});
    return false;
  }
  std::string text;
  char buffer[65536];
  bool failed = false;
  int read_errno = 0;
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      failed = true;
      read_errno = errno;
      break;
    }
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
    if (text.size() > kMaxInputBytes) break;  // ParsePolicyText reports it; no need to read further
  }
  if (!is_stdin) ::close(fd);
  if (failed) {
    diags->push_back(Diagnostic{display, 0, 0, "", std::string("cannot read: ") + std::strerror(read_errno)});
    return false;
  }
  if (text.size() > kMaxInputBytes) {
    diags->push_back(Diagnostic{display, 0, 0, "", "policy is too large: more than 16 MiB"});
    return false;
  }
  const bool ok = ParsePolicyText(text, display, out, diags);
  if (text_out) *text_out = std::move(text);
  return ok;
}

}  // namespace cordon::policy
