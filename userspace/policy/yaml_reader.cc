// YAML/JSON -> YamlNode tree, driven by libyaml's event parser.
//
// The tree is built iteratively from events (never recursively), so hostile
// nesting cannot exhaust the stack; depth and node count are capped so hostile
// input cannot exhaust memory either.
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

// One open collection while building.
struct Frame {
  YamlNode* node = nullptr;
  std::string path;                         // dotted path of this node ("" for the root)
  std::unique_ptr<YamlNode> pending_key;    // mappings: key read, value not yet
  std::unordered_map<std::string, int> key_lines;  // mappings: key -> line, for duplicates
};

class TreeBuilder {
 public:
  TreeBuilder(std::string_view text, const std::string& file, Diagnostics* diags)
      : text_(text), file_(file), diags_(diags) {}

  std::unique_ptr<YamlNode> Build();

 private:
  void Fail(int line, int column, const std::string& field, std::string message) {
    diags_->push_back(Diagnostic{file_, line, column, field, std::move(message)});
  }
  void FailFromParser(yaml_parser_t* parser);
  // Handles one node-starting event. Returns false after reporting an error.
  bool AddNode(std::unique_ptr<YamlNode> node, bool is_collection);
  bool HandleEvent(yaml_event_t* event);
  std::string ChildPath(const Frame& parent, const std::string& key) const {
    return parent.path.empty() ? key : parent.path + "." + key;
  }

  std::string_view text_;
  const std::string& file_;
  Diagnostics* diags_;

  std::unique_ptr<YamlNode> root_;
  std::vector<Frame> stack_;
  size_t node_count_ = 0;
  int documents_ = 0;
  bool done_ = false;
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

const char* KindName(YamlNode::Kind kind) {
  switch (kind) {
    case YamlNode::Kind::kScalar:
      return "scalar";
    case YamlNode::Kind::kSequence:
      return "list";
    case YamlNode::Kind::kMapping:
      return "mapping";
  }
  return "node";
}

void TreeBuilder::FailFromParser(yaml_parser_t* parser) {
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
  std::string message = "YAML syntax error: " + problem;
  if (parser->context) {
    message += std::string(" (") + parser->context + " started at line " +
               std::to_string(parser->context_mark.line + 1) + ")";
  }
  Fail(static_cast<int>(parser->problem_mark.line) + 1, static_cast<int>(parser->problem_mark.column) + 1, "",
       std::move(message));
}

bool TreeBuilder::AddNode(std::unique_ptr<YamlNode> node, bool is_collection) {
  if (++node_count_ > kMaxNodes) {
    Fail(node->line, node->column, "",
         "document too large: more than " + std::to_string(kMaxNodes) + " YAML nodes");
    return false;
  }
  YamlNode* raw = node.get();
  std::string path;
  if (stack_.empty()) {
    if (root_) {  // cannot happen with libyaml (one root per document), kept as a guard
      Fail(node->line, node->column, "", "more than one root node");
      return false;
    }
    root_ = std::move(node);
  } else {
    Frame& parent = stack_.back();
    if (parent.node->kind == YamlNode::Kind::kSequence) {
      path = parent.path + "[" + std::to_string(parent.node->items.size()) + "]";
      parent.node->items.push_back(std::move(node));
    } else if (!parent.pending_key) {
      // This node is a mapping key.
      if (is_collection) {
        Fail(node->line, node->column, parent.path, "mapping keys must be scalars, not a " +
                                                        std::string(KindName(node->kind)));
        return false;
      }
      auto [it, inserted] = parent.key_lines.emplace(node->scalar, node->line);
      if (!inserted) {
        Fail(node->line, node->column, ChildPath(parent, node->scalar),
             "duplicate key '" + node->scalar + "' (first at line " + std::to_string(it->second) + ")");
        return false;
      }
      parent.pending_key = std::move(node);
      return true;
    } else {
      path = ChildPath(parent, parent.pending_key->scalar);
      parent.node->entries.emplace_back(std::move(parent.pending_key), std::move(node));
    }
  }
  if (is_collection) {
    if (stack_.size() >= kMaxDepth) {
      Fail(raw->line, raw->column, path, "nesting deeper than " + std::to_string(kMaxDepth) + " levels");
      return false;
    }
    stack_.push_back(Frame{raw, std::move(path), nullptr, {}});
  }
  return true;
}

bool TreeBuilder::HandleEvent(yaml_event_t* event) {
  const int line = static_cast<int>(event->start_mark.line) + 1;
  const int column = static_cast<int>(event->start_mark.column) + 1;
  const std::string here = stack_.empty() ? "" : stack_.back().path;

  EventProps props = PropsOf(*event);
  if (props.anchor) {
    Fail(line, column, here,
         "anchors are not supported (&" + std::string(reinterpret_cast<const char*>(props.anchor)) + ")");
    return false;
  }
  bool string_tag = false;
  if (props.tag) {
    std::string tag = reinterpret_cast<const char*>(props.tag);
    if (event->type == YAML_SCALAR_EVENT && (tag == kStrTag || tag == "!")) {
      string_tag = true;
    } else {
      Fail(line, column, here, "YAML tags are not supported (" + tag + ")");
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
      Fail(line, column, here,
           "aliases are not supported (*" +
               std::string(reinterpret_cast<const char*>(event->data.alias.anchor)) + ")");
      return false;
    case YAML_SCALAR_EVENT: {
      auto node = std::make_unique<YamlNode>();
      node->kind = YamlNode::Kind::kScalar;
      node->line = line;
      node->column = column;
      node->scalar.assign(reinterpret_cast<const char*>(event->data.scalar.value), event->data.scalar.length);
      node->quoted = string_tag || event->data.scalar.style == YAML_SINGLE_QUOTED_SCALAR_STYLE ||
                     event->data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE ||
                     event->data.scalar.style == YAML_LITERAL_SCALAR_STYLE ||
                     event->data.scalar.style == YAML_FOLDED_SCALAR_STYLE;
      return AddNode(std::move(node), false);
    }
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT: {
      auto node = std::make_unique<YamlNode>();
      node->kind = event->type == YAML_SEQUENCE_START_EVENT ? YamlNode::Kind::kSequence : YamlNode::Kind::kMapping;
      node->line = line;
      node->column = column;
      return AddNode(std::move(node), true);
    }
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
      if (!stack_.empty()) stack_.pop_back();
      return true;
    case YAML_NO_EVENT:
      return true;
  }
  return true;
}

std::unique_ptr<YamlNode> TreeBuilder::Build() {
  const size_t diags_before = diags_->size();
  ParserHandle parser;
  if (!parser.ok()) {
    Fail(0, 0, "", "cannot initialize the YAML parser");
    return nullptr;
  }
  yaml_parser_set_input_string(parser.get(), reinterpret_cast<const unsigned char*>(text_.data()), text_.size());
  while (!done_) {
    EventHandle event;
    if (!yaml_parser_parse(parser.get(), event.get())) {
      FailFromParser(parser.get());
      return nullptr;
    }
    event.Arm();
    if (!HandleEvent(event.get())) return nullptr;
  }
  if (diags_->size() != diags_before) return nullptr;
  if (!root_) {
    Fail(0, 0, "", "document is empty (expected a SandboxPolicy mapping)");
    return nullptr;
  }
  return std::move(root_);
}

}  // namespace

std::unique_ptr<YamlNode> ReadYaml(std::string_view text, const std::string& file, Diagnostics* diags) {
  TreeBuilder builder(text, file, diags);
  return builder.Build();
}

}  // namespace cordon::policy
