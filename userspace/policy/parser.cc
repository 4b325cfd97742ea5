// YamlNode tree -> cordon.v1.SandboxPolicy by protobuf reflection, so the
// schema in policy.proto is the only list of fields; nothing here names one.
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
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>

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

}  // namespace

Diagnostic ParsedPolicy::At(const std::string& field, std::string message) const {
  Diagnostic diag{file, 0, 0, field, std::move(message)};
  std::string path = field;
  for (;;) {
    auto it = positions.find(path);
    if (it != positions.end()) {
      diag.line = it->second.line;
      diag.column = it->second.column;
      break;
    }
    if (path.empty()) break;
    path = ParentPath(path);
  }
  return diag;
}

namespace {

bool IsNull(const YamlNode& node) {
  if (node.kind != YamlNode::Kind::kScalar || node.quoted) return false;
  const std::string& s = node.scalar;
  return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL";
}

// What a node is, for "expected X, got Y" messages.
std::string WhatIs(const YamlNode& node) {
  switch (node.kind) {
    case YamlNode::Kind::kMapping:
      return "a mapping";
    case YamlNode::Kind::kSequence:
      return "a list";
    case YamlNode::Kind::kScalar:
      break;
  }
  if (IsNull(node)) return "null";
  std::string text = node.scalar.size() > 40 ? node.scalar.substr(0, 40) + "..." : node.scalar;
  return node.quoted ? "the string \"" + text + "\"" : "'" + text + "'";
}

// Strict integer text: optional '-', decimal digits, no leading zeros.
bool ParseInteger(const std::string& text, bool is_signed, long long min, unsigned long long max, long long* svalue,
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

class Converter {
 public:
  Converter(ParsedPolicy* out, Diagnostics* diags) : out_(out), diags_(diags) {}

  void Message(const YamlNode& node, pb::Message* msg, const std::string& path);

 private:
  void Error(const YamlNode& node, const std::string& path, std::string message) {
    diags_->push_back(Diagnostic{out_->file, node.line, node.column, path, std::move(message)});
  }
  void Record(const YamlNode& node, const std::string& path) {
    out_->positions[path] = SourcePos{node.line, node.column};
  }
  void Field(const YamlNode& value, pb::Message* msg, const pb::FieldDescriptor* field, const std::string& path);
  void MapField(const YamlNode& value, pb::Message* msg, const pb::FieldDescriptor* field, const std::string& path);
  // Sets (or adds, for repeated fields) one scalar value. Message fields are handled by the caller.
  void Scalar(const YamlNode& value, pb::Message* msg, const pb::FieldDescriptor* field, const std::string& path);

  ParsedPolicy* out_;
  Diagnostics* diags_;
};

std::string ChildPath(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

void Converter::Message(const YamlNode& node, pb::Message* msg, const std::string& path) {
  const pb::Descriptor* descriptor = msg->GetDescriptor();
  if (node.kind != YamlNode::Kind::kMapping) {
    Error(node, path, std::string("expected a mapping of ") + descriptor->name() + " fields, got " + WhatIs(node));
    return;
  }
  for (const auto& [key, value] : node.entries) {
    const pb::FieldDescriptor* field = nullptr;
    for (int i = 0; i < descriptor->field_count(); ++i) {
      if (descriptor->field(i)->json_name() == key->scalar) {
        field = descriptor->field(i);
        break;
      }
    }
    const std::string field_path = ChildPath(path, key->scalar);
    if (!field) {
      std::string expected;
      for (int i = 0; i < descriptor->field_count(); ++i) {
        if (i) expected += ", ";
        expected += descriptor->field(i)->json_name();
      }
      Error(*key, field_path, "unknown field '" + key->scalar + "' (expected one of: " + expected + ")");
      continue;
    }
    if (IsNull(*value)) continue;  // null: as if absent (see the top of this file)
    Record(*value, field_path);
    Field(*value, msg, field, field_path);
  }
}

void Converter::Field(const YamlNode& value, pb::Message* msg, const pb::FieldDescriptor* field,
                      const std::string& path) {
  if (field->is_map()) {
    MapField(value, msg, field, path);
    return;
  }
  const pb::Reflection* reflection = msg->GetReflection();
  if (!field->is_repeated()) {
    if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      Message(value, reflection->MutableMessage(msg, field), path);
    } else {
      Scalar(value, msg, field, path);
    }
    return;
  }
  if (value.kind != YamlNode::Kind::kSequence) {
    Error(value, path, std::string("expected a list, got ") + WhatIs(value));
    return;
  }
  for (size_t i = 0; i < value.items.size(); ++i) {
    const YamlNode& item = *value.items[i];
    const std::string item_path = path + "[" + std::to_string(i) + "]";
    Record(item, item_path);
    if (IsNull(item)) {
      Error(item, item_path, "list item is null");
      continue;
    }
    if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      Message(item, reflection->AddMessage(msg, field), item_path);
    } else {
      Scalar(item, msg, field, item_path);
    }
  }
}

void Converter::MapField(const YamlNode& value, pb::Message* msg, const pb::FieldDescriptor* field,
                         const std::string& path) {
  if (value.kind != YamlNode::Kind::kMapping) {
    Error(value, path, std::string("expected a mapping, got ") + WhatIs(value));
    return;
  }
  const pb::Descriptor* entry_type = field->message_type();
  const pb::FieldDescriptor* key_field = entry_type->map_key();
  const pb::FieldDescriptor* value_field = entry_type->map_value();
  for (const auto& [key, item] : value.entries) {
    const std::string item_path = ChildPath(path, key->scalar);
    Record(*item, item_path);
    pb::Message* entry = msg->GetReflection()->AddMessage(msg, field);
    Scalar(*key, entry, key_field, item_path);
    if (IsNull(*item)) continue;  // an empty value, e.g. `team:`
    if (value_field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      Message(*item, entry->GetReflection()->MutableMessage(entry, value_field), item_path);
    } else {
      Scalar(*item, entry, value_field, item_path);
    }
  }
}

void Converter::Scalar(const YamlNode& value, pb::Message* msg, const pb::FieldDescriptor* field,
                       const std::string& path) {
  const pb::Reflection* r = msg->GetReflection();
  const bool repeated = field->is_repeated();
  if (value.kind != YamlNode::Kind::kScalar) {
    const char* expected = field->cpp_type() == pb::FieldDescriptor::CPPTYPE_STRING ? "a string" : "a scalar";
    Error(value, path, std::string("expected ") + expected + ", got " + WhatIs(value));
    return;
  }
  const std::string& text = value.scalar;
  auto bad = [&](const char* expected) {
    Error(value, path, std::string("expected ") + expected + ", got " + WhatIs(value));
  };
  long long s = 0;
  unsigned long long u = 0;
  switch (field->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_STRING:
      repeated ? r->AddString(msg, field, text) : r->SetString(msg, field, text);
      return;
    case pb::FieldDescriptor::CPPTYPE_BOOL: {
      bool is_true = text == "true" || text == "True" || text == "TRUE";
      bool is_false = text == "false" || text == "False" || text == "FALSE";
      if (value.quoted || (!is_true && !is_false)) return bad("true or false");
      repeated ? r->AddBool(msg, field, is_true) : r->SetBool(msg, field, is_true);
      return;
    }
    case pb::FieldDescriptor::CPPTYPE_INT32:
      if (value.quoted || !ParseInteger(text, true, std::numeric_limits<int32_t>::min(),
                                        std::numeric_limits<int32_t>::max(), &s, &u)) {
        return bad("a 32-bit integer");
      }
      repeated ? r->AddInt32(msg, field, static_cast<int32_t>(s)) : r->SetInt32(msg, field, static_cast<int32_t>(s));
      return;
    case pb::FieldDescriptor::CPPTYPE_INT64:
      if (value.quoted || !ParseInteger(text, true, std::numeric_limits<int64_t>::min(),
                                        std::numeric_limits<int64_t>::max(), &s, &u)) {
        return bad("a 64-bit integer");
      }
      repeated ? r->AddInt64(msg, field, s) : r->SetInt64(msg, field, s);
      return;
    case pb::FieldDescriptor::CPPTYPE_UINT32:
      if (value.quoted || !ParseInteger(text, false, 0, std::numeric_limits<uint32_t>::max(), &s, &u)) {
        return bad("a non-negative 32-bit integer");
      }
      repeated ? r->AddUInt32(msg, field, static_cast<uint32_t>(u))
               : r->SetUInt32(msg, field, static_cast<uint32_t>(u));
      return;
    case pb::FieldDescriptor::CPPTYPE_UINT64:
      if (value.quoted || !ParseInteger(text, false, 0, std::numeric_limits<uint64_t>::max(), &s, &u)) {
        return bad("a non-negative 64-bit integer");
      }
      repeated ? r->AddUInt64(msg, field, u) : r->SetUInt64(msg, field, u);
      return;
    case pb::FieldDescriptor::CPPTYPE_DOUBLE:
    case pb::FieldDescriptor::CPPTYPE_FLOAT: {
      char* end = nullptr;
      errno = 0;
      double d = text.empty() || value.quoted ? 0 : std::strtod(text.c_str(), &end);
      if (value.quoted || text.empty() || *end != '\0' || errno != 0 || !std::isfinite(d)) return bad("a number");
      if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_DOUBLE) {
        repeated ? r->AddDouble(msg, field, d) : r->SetDouble(msg, field, d);
      } else {
        repeated ? r->AddFloat(msg, field, static_cast<float>(d)) : r->SetFloat(msg, field, static_cast<float>(d));
      }
      return;
    }
    case pb::FieldDescriptor::CPPTYPE_ENUM: {
      const pb::EnumValueDescriptor* enum_value = field->enum_type()->FindValueByName(text);
      if (!enum_value) {
        std::string expected;
        for (int i = 0; i < field->enum_type()->value_count(); ++i) {
          if (i) expected += ", ";
          expected += field->enum_type()->value(i)->name();
        }
        Error(value, path, "unknown value '" + text + "' (expected one of: " + expected + ")");
        return;
      }
      repeated ? r->AddEnum(msg, field, enum_value) : r->SetEnum(msg, field, enum_value);
      return;
    }
    case pb::FieldDescriptor::CPPTYPE_MESSAGE:
      Error(value, path, std::string("expected a mapping, got ") + WhatIs(value));
      return;
  }
}

}  // namespace

bool ParsePolicyText(std::string_view text, const std::string& file, ParsedPolicy* out, Diagnostics* diags) {
  out->proto.Clear();
  out->positions.clear();
  out->file = file;
  const size_t diags_before = diags->size();
  if (text.size() > kMaxInputBytes) {
    diags->push_back(Diagnostic{file, 0, 0, "",
                                "policy is too large: " + std::to_string(text.size()) +
                                    " bytes (the limit is 16 MiB)"});
    return false;
  }
  std::unique_ptr<YamlNode> root = ReadYaml(text, file, diags);
  if (!root) {
    if (diags->size() == diags_before) diags->push_back(Diagnostic{file, 0, 0, "", "cannot parse the policy"});
    return false;
  }
  if (IsNull(*root)) {
    diags->push_back(Diagnostic{file, root->line, root->column, "",
                                "document is empty (expected a SandboxPolicy mapping)"});
    return false;
  }
  out->positions[""] = SourcePos{root->line, root->column};
  Converter converter(out, diags);
  converter.Message(*root, &out->proto, "");
  return diags->size() == diags_before;
}

bool ParsePolicyFile(const std::string& path, ParsedPolicy* out, Diagnostics* diags) {
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
  return ParsePolicyText(text, display, out, diags);
}

}  // namespace cordon::policy
