// YAML/JSON -> nodes, driven by libyaml's event parser.
//
// Nodes are reported iteratively from events (never recursively), so hostile
// nesting cannot exhaust the stack; depth and node count are capped so hostile
// input cannot exhaust memory either. Field paths (for diagnostics) are built
// only when a diagnostic needs one.
#include "policy/yaml_reader.h"

#include <yaml.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace cordon::policy {
namespace {

constexpr size_t kMaxDepth = 64;
constexpr size_t kMaxNodes = 2'000'000;

// libyaml's tag for an explicit `!!str`; `!` (non-specific) also means string.
constexpr const char* kStrTag = "tag:yaml.org,2002:str";

// RAII for libyaml's C structs.
class ParserHandle {
 public:
  ParserHandle() { ok_ = yaml_parser_initialize(&parser_) != 0; }
  ~ParserHandle() {
    if (ok_) yaml_parser_delete(&parser_);
  }
  ParserHandle(const ParserHandle&) = delete;
  ParserHandle& operator=(const ParserHandle&) = delete;
  bool ok() const { return ok_; }
  yaml_parser_t* get() { return &parser_; }

 private:
  yaml_parser_t parser_;
  bool ok_ = false;
};

class EventHandle {
 public:
  EventHandle() = default;
  ~EventHandle() { Reset(); }
  EventHandle(const EventHandle&) = delete;
  EventHandle& operator=(const EventHandle&) = delete;
  yaml_event_t* get() { return &event_; }
  void Arm() { armed_ = true; }
  void Reset() {
    if (armed_) yaml_event_delete(&event_);
    armed_ = false;
  }

 private:
  yaml_event_t event_{};
  bool armed_ = false;
};

// The keys of one mapping, for duplicates: a short list scanned linearly
// (mappings are small: a 100k-rule policy has 100k of them), indexed once long.
class KeySet {
 public:
  void Clear() {
    keys_.clear();
    index_.clear();
  }
  // Records `key` (at `line`); if it was already there returns false and
  // sets *first_line to the line of its first occurrence.
  bool Insert(std::string_view key, int line, int* first_line) {
    if (index_.empty()) {
      for (const auto& [k, l] : keys_) {
        if (k == key) {
          *first_line = l;
          return false;
        }
      }
      keys_.emplace_back(std::string(key), line);
      if (keys_.size() > kLinear) {
        for (auto& [k, l] : keys_) index_.emplace(std::move(k), l);
        keys_.clear();
      }
      return true;
    }
    auto [it, inserted] = index_.emplace(std::string(key), line);
    if (!inserted) *first_line = it->second;
    return inserted;
  }

 private:
  static constexpr size_t kLinear = 16;
  std::vector<std::pair<std::string, int>> keys_;
  std::unordered_map<std::string, int> index_;  // instead of keys_ once there are more than kLinear
};

// One open collection.
struct Frame {
  bool sequence = false;
  size_t items = 0;      // sequences: items so far
  bool has_key = false;  // mappings: key read, value not yet
  std::string key;       // mappings: the last key (names the value's subtree while it is open)
  KeySet keys;           // mappings: every key so far
};

class EventReader {
 public:
  EventReader(std::string_view text, const std::string& file, YamlHandler* handler, Diagnostics* diags)
      : text_(text), file_(file), handler_(handler), diags_(diags) {}

  bool Read();

 private:
  enum class NodeKind { kScalar, kSequence, kMapping };

  void Fail(int line, int column, const std::string& field, std::string message) {
    diags_->push_back(Diagnostic{file_, line, column, field, std::move(message)});
  }
  void FailFromParser(yaml_parser_t* parser);
  // JSON is read as the YAML it is a subset of, but a trailing comma, which
  // YAML's flow collections allow, is a JSON error: reported here.
  bool CheckJsonCommas();
  // The field path of the node at `level` (0: the root) of the open branch:
  // "spec.network.egress[3]". For level == depth_, the node being added.
  std::string PathAt(size_t level) const;
  // Handles one node-starting event. Returns false after reporting an error.
  bool AddNode(NodeKind kind, int line, int column, const YamlScalar* scalar);
  bool HandleEvent(yaml_event_t* event);

  std::string_view text_;
  const std::string& file_;
  YamlHandler* handler_;
  Diagnostics* diags_;

  std::vector<Frame> frames_;  // frames_[0 .. depth_) are open; the rest are kept for reuse
  size_t depth_ = 0;
  size_t node_count_ = 0;
  int documents_ = 0;
  bool seen_root_ = false;
  bool done_ = false;
  bool json_ = false;  // the document starts with '{' or '[': errors say JSON
};

// Where libyaml's anchor or tag (if any) lives for this event.
struct EventProps {
  const yaml_char_t* anchor = nullptr;
  const yaml_char_t* tag = nullptr;
};

EventProps PropsOf(const yaml_event_t& event) {
  switch (event.type) {
    case YAML_SCALAR_EVENT:
      return {event.data.scalar.anchor, event.data.scalar.tag};
    case YAML_SEQUENCE_START_EVENT:
      return {event.data.sequence_start.anchor, event.data.sequence_start.tag};
    case YAML_MAPPING_START_EVENT:
      return {event.data.mapping_start.anchor, event.data.mapping_start.tag};
    default:
      return {};
  }
}

std::string ChildPath(const std::string& parent, std::string_view key) {
  return parent.empty() ? std::string(key) : parent + "." + std::string(key);
}

std::string EventReader::PathAt(size_t level) const {
  std::string path;
  for (size_t i = 1; i <= level; ++i) {
    const Frame& parent = frames_[i - 1];
    if (parent.sequence) {
      path += "[" + std::to_string(parent.items - 1) + "]";
    } else {
      path = ChildPath(path, parent.key);
    }
  }
  return path;
}

void EventReader::FailFromParser(yaml_parser_t* parser) {
  std::string problem = parser->problem ? parser->problem : "unknown error";
  if (parser->error == YAML_READER_ERROR) {
    // Reader errors (bad encoding, control characters) carry a byte offset, not a mark.
    size_t offset = std::min(parser->problem_offset, text_.size());
    int line = 1, column = 1;
    for (size_t i = 0; i < offset; ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    if (parser->problem_value != -1) {
      char value[16];
      std::snprintf(value, sizeof value, " (#x%02X)", static_cast<unsigned>(parser->problem_value));
      problem += value;
    }
    Fail(line, column, "", "invalid input: " + problem);
    return;
  }
  if (parser->error == YAML_MEMORY_ERROR) {
    Fail(0, 0, "", "out of memory while parsing");
    return;
  }
  std::string message = std::string(json_ ? "JSON" : "YAML") + " syntax error: " + problem;
  if (parser->context) {
    message += std::string(" (") + parser->context + " started at line " +
               std::to_string(parser->context_mark.line + 1) + ")";
  }
  Fail(static_cast<int>(parser->problem_mark.line) + 1, static_cast<int>(parser->problem_mark.column) + 1, "",
       std::move(message));
}

bool EventReader::AddNode(NodeKind kind, int line, int column, const YamlScalar* scalar) {
  if (++node_count_ > kMaxNodes) {
    Fail(line, column, "", "document too large: more than " + std::to_string(kMaxNodes) + " YAML nodes");
    return false;
  }
  if (depth_ == 0) {
    if (seen_root_) {  // cannot happen with libyaml (one root per document), kept as a guard
      Fail(line, column, "", "more than one root node");
      return false;
    }
    seen_root_ = true;
  } else {
    Frame& parent = frames_[depth_ - 1];
    if (parent.sequence) {
      ++parent.items;
    } else if (!parent.has_key) {
      // This node is a mapping key.
      if (kind != NodeKind::kScalar) {
        Fail(line, column, PathAt(depth_ - 1),
             std::string("mapping keys must be scalars, not a ") + (kind == NodeKind::kSequence ? "list" : "mapping"));
        return false;
      }
      int first_line = 0;
      if (!parent.keys.Insert(scalar->text, line, &first_line)) {
        Fail(line, column, ChildPath(PathAt(depth_ - 1), scalar->text),
             "duplicate key '" + std::string(scalar->text) + "' (first at line " + std::to_string(first_line) + ")");
        return false;
      }
      parent.has_key = true;
      parent.key.assign(scalar->text);
      handler_->Key(*scalar);
      return true;
    } else {
      parent.has_key = false;  // parent.key names this value until the next key
    }
  }
  if (kind == NodeKind::kScalar) {
    handler_->Scalar(*scalar);
    return true;
  }
  if (depth_ >= kMaxDepth) {
    Fail(line, column, PathAt(depth_), "nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    return false;
  }
  if (depth_ == frames_.size()) frames_.emplace_back();
  Frame& frame = frames_[depth_++];
  frame.sequence = kind == NodeKind::kSequence;
  frame.items = 0;
  frame.has_key = false;
  frame.keys.Clear();
  if (frame.sequence) {
    handler_->BeginSequence(line, column);
  } else {
    handler_->BeginMapping(line, column);
  }
  return true;
}

bool EventReader::HandleEvent(yaml_event_t* event) {
  const int line = static_cast<int>(event->start_mark.line) + 1;
  const int column = static_cast<int>(event->start_mark.column) + 1;

  EventProps props = PropsOf(*event);
  if (props.anchor) {
    Fail(line, column, depth_ ? PathAt(depth_ - 1) : "",
         "anchors are not supported (&" + std::string(reinterpret_cast<const char*>(props.anchor)) + ")");
    return false;
  }
  bool string_tag = false;
  if (props.tag) {
    std::string tag = reinterpret_cast<const char*>(props.tag);
    if (event->type == YAML_SCALAR_EVENT && (tag == kStrTag || tag == "!")) {
      string_tag = true;
    } else {
      Fail(line, column, depth_ ? PathAt(depth_ - 1) : "", "YAML tags are not supported (" + tag + ")");
      return false;
    }
  }

  switch (event->type) {
    case YAML_STREAM_START_EVENT:
      return true;
    case YAML_DOCUMENT_START_EVENT:
      if (++documents_ > 1) {
        Fail(line, column, "", "more than one YAML document (a policy file holds exactly one)");
        return false;
      }
      return true;
    case YAML_DOCUMENT_END_EVENT:
      return true;
    case YAML_STREAM_END_EVENT:
      done_ = true;
      return true;
    case YAML_ALIAS_EVENT:
      Fail(line, column, depth_ ? PathAt(depth_ - 1) : "",
           "aliases are not supported (*" +
               std::string(reinterpret_cast<const char*>(event->data.alias.anchor)) + ")");
      return false;
    case YAML_SCALAR_EVENT: {
      const auto style = event->data.scalar.style;
      YamlScalar scalar;
      scalar.text = std::string_view(reinterpret_cast<const char*>(event->data.scalar.value), event->data.scalar.length);
      scalar.quoted = string_tag || style == YAML_SINGLE_QUOTED_SCALAR_STYLE ||
                      style == YAML_DOUBLE_QUOTED_SCALAR_STYLE || style == YAML_LITERAL_SCALAR_STYLE ||
                      style == YAML_FOLDED_SCALAR_STYLE;
      scalar.line = line;
      scalar.column = column;
      return AddNode(NodeKind::kScalar, line, column, &scalar);
    }
    case YAML_SEQUENCE_START_EVENT:
      return AddNode(NodeKind::kSequence, line, column, nullptr);
    case YAML_MAPPING_START_EVENT:
      return AddNode(NodeKind::kMapping, line, column, nullptr);
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
      if (depth_ > 0) {
        --depth_;
        handler_->End();
      }
      return true;
    case YAML_NO_EVENT:
      return true;
  }
  return true;
}

bool EventReader::CheckJsonCommas() {
  ParserHandle parser;
  if (!parser.ok()) return true;  // Read() reports it
  yaml_parser_set_input_string(parser.get(), reinterpret_cast<const unsigned char*>(text_.data()), text_.size());
  bool after_comma = false;
  yaml_mark_t comma = {};
  for (;;) {
    yaml_token_t token;
    if (!yaml_parser_scan(parser.get(), &token)) return true;  // a syntax error: Read() reports it
    const yaml_token_type_t type = token.type;
    const yaml_mark_t start = token.start_mark;
    yaml_token_delete(&token);
    if (after_comma && (type == YAML_FLOW_SEQUENCE_END_TOKEN || type == YAML_FLOW_MAPPING_END_TOKEN)) {
      Fail(static_cast<int>(comma.line) + 1, static_cast<int>(comma.column) + 1, "",
           std::string("JSON syntax error: a trailing comma before '") +
               (type == YAML_FLOW_SEQUENCE_END_TOKEN ? "]" : "}") + "'");
      return false;
    }
    if (type == YAML_STREAM_END_TOKEN) return true;
    after_comma = type == YAML_FLOW_ENTRY_TOKEN;
    if (after_comma) comma = start;
  }
}

bool EventReader::Read() {
  const size_t diags_before = diags_->size();
  const size_t first = text_.find_first_not_of(" \t\r\n");
  json_ = first != std::string_view::npos && (text_[first] == '{' || text_[first] == '[');
  if (json_ && !CheckJsonCommas()) return false;
  ParserHandle parser;
  if (!parser.ok()) {
    Fail(0, 0, "", "cannot initialize the YAML parser");
    return false;
  }
  yaml_parser_set_input_string(parser.get(), reinterpret_cast<const unsigned char*>(text_.data()), text_.size());
  while (!done_) {
    EventHandle event;
    if (!yaml_parser_parse(parser.get(), event.get())) {
      FailFromParser(parser.get());
      return false;
    }
    event.Arm();
    if (!HandleEvent(event.get())) return false;
  }
  if (diags_->size() != diags_before) return false;
  if (!seen_root_) {
    Fail(0, 0, "", "document is empty (expected a SandboxPolicy mapping)");
    return false;
  }
  return true;
}

// Builds the YamlNode tree.
class TreeBuilder : public YamlHandler {
 public:
  std::unique_ptr<YamlNode> Take() { return std::move(root_); }

  void Scalar(const YamlScalar& scalar) override { Add(NewScalar(scalar), false); }
  void Key(const YamlScalar& key) override { pending_key_ = NewScalar(key); }
  void BeginMapping(int line, int column) override { Add(NewNode(YamlNode::Kind::kMapping, line, column), true); }
  void BeginSequence(int line, int column) override { Add(NewNode(YamlNode::Kind::kSequence, line, column), true); }
  void End() override { stack_.pop_back(); }

 private:
  static std::unique_ptr<YamlNode> NewNode(YamlNode::Kind kind, int line, int column) {
    auto node = std::make_unique<YamlNode>();
    node->kind = kind;
    node->line = line;
    node->column = column;
    return node;
  }
  static std::unique_ptr<YamlNode> NewScalar(const YamlScalar& scalar) {
    auto node = NewNode(YamlNode::Kind::kScalar, scalar.line, scalar.column);
    node->scalar.assign(scalar.text);
    node->quoted = scalar.quoted;
    return node;
  }
  void Add(std::unique_ptr<YamlNode> node, bool collection) {
    YamlNode* raw = node.get();
    if (stack_.empty()) {
      root_ = std::move(node);
    } else if (stack_.back()->kind == YamlNode::Kind::kSequence) {
      stack_.back()->items.push_back(std::move(node));
    } else {
      stack_.back()->entries.emplace_back(std::move(pending_key_), std::move(node));
    }
    if (collection) stack_.push_back(raw);
  }

  std::unique_ptr<YamlNode> root_;
  std::vector<YamlNode*> stack_;
  std::unique_ptr<YamlNode> pending_key_;  // a mapping key, until its value arrives
};

}  // namespace

bool ReadYamlEvents(std::string_view text, const std::string& file, YamlHandler* handler, Diagnostics* diags) {
  EventReader reader(text, file, handler, diags);
  return reader.Read();
}

std::unique_ptr<YamlNode> ReadYaml(std::string_view text, const std::string& file, Diagnostics* diags) {
  TreeBuilder builder;
  if (!ReadYamlEvents(text, file, &builder, diags)) return nullptr;
  return builder.Take();
}

}  // namespace cordon::policy
