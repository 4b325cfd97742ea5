#include "policy/inline.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/reflection.h>

#include <algorithm>
#include <cstdio>
#include <unordered_map>

#include "policy/compiler.h"
#include "util/text.h"

namespace cordon::policy {
namespace {

namespace pb = google::protobuf;

// --allow-net's value as an egress rule; "" or why it cannot be one.
std::string EgressFromOption(const std::string& value, cordon::v1::EgressRule* rule) {
  std::string v = value;
  for (const char* protocol : {"tcp", "udp"}) {
    const std::string suffix = std::string("/") + protocol;
    if (v.size() > suffix.size() && v.compare(v.size() - suffix.size(), suffix.size(), suffix) == 0) {
      rule->add_protocols(protocol);
      v.resize(v.size() - suffix.size());
      break;
    }
  }
  std::string address, ports;
  if (!v.empty() && v[0] == '[') {
    const size_t close = v.find(']');
    if (close == std::string::npos) return "an IPv6 address opened with '[' needs its ']' ([::1]:443)";
    address = v.substr(1, close - 1);
    const std::string rest = v.substr(close + 1);
    if (!rest.empty() && rest[0] != ':') return "after ']' comes ':' and the ports ([::1]:443), not " + Quoted(rest);
    if (!rest.empty()) {
      ports = rest.substr(1);
      if (ports.empty()) return "no ports after ':' (omit the ':' for every port)";
    }
  } else if (std::count(v.begin(), v.end(), ':') >= 2) {
    address = v;  // a bare IPv6 address or prefix: every port
  } else if (const size_t colon = v.find(':'); colon != std::string::npos) {
    address = v.substr(0, colon);
    ports = v.substr(colon + 1);
    if (ports.empty()) return "no ports after ':' (omit the ':' for every port)";
  } else {
    address = v;
  }
  if (address.empty()) return "no address (expected ADDR[:PORTS], e.g. 10.0.0.0/8:443 or [::1]:8080)";
  rule->set_cidr(address);
  size_t start = 0;
  while (!ports.empty()) {
    const size_t comma = ports.find(',', start);
    const std::string port = ports.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (port.empty()) return "an empty port in " + Quoted(ports) + " (ports are separated by single commas)";
    rule->add_ports(port);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  rule->set_description("cordon run --allow-net " + value);
  return "";
}

// ---- the policy as JSON, presence kept

// The code point of the UTF-8 sequence at s[*i] (advancing *i), or -1 for
// bytes that are not one.
long DecodeUtf8(const std::string& s, size_t* i) {
  const unsigned char c = static_cast<unsigned char>(s[*i]);
  const int n = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : -1;
  if (n < 0 || *i + static_cast<size_t>(n) >= s.size() + (n == 0 ? 1 : 0)) return ++*i, -1;
  long cp = n == 0 ? c : c & (0x3f >> n);
  for (int k = 1; k <= n; ++k) {
    const unsigned char cc = static_cast<unsigned char>(s[*i + static_cast<size_t>(k)]);
    if ((cc & 0xc0) != 0x80) return ++*i, -1;
    cp = (cp << 6) | (cc & 0x3f);
  }
  static const long kMin[] = {0, 0x80, 0x800, 0x10000};
  *i += static_cast<size_t>(n) + 1;
  if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return -1;
  return cp;
}

bool ValidUtf8(const std::string& s) {
  for (size_t i = 0; i < s.size();)
    if (DecodeUtf8(s, &i) < 0) return false;
  return true;
}

// A JSON string the policy reader (libyaml) reads back to the same text:
// every character of the BMP outside printable ASCII is written \uXXXX (a raw NEL,
// U+2028 or U+2029 would be read as a line break and folded; C1 controls
// and U+FFFE/U+FFFF refused).
void AppendJsonString(const std::string& s, std::string* out) {
  out->push_back('"');
  auto escape = [out](long unit) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\u%04lx", unit);
    out->append(buf);
  };
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
      ++i;
    } else if (c >= 0x20 && c < 0x7f) {
      out->push_back(static_cast<char>(c));
      ++i;
    } else {
      const size_t start = i;
      long cp = DecodeUtf8(s, &i);
      if (cp < 0) cp = 0xfffd;  // not UTF-8: never in a parsed policy (protobuf strings are UTF-8)
      if (cp >= 0x10000)
        out->append(s, start, i - start);  // as it is: printable to both readers (JSON has no \U)
      else
        escape(cp);
    }
  }
  out->push_back('"');
}

class JsonWriter {
 public:
  JsonWriter(const FieldPositions& positions, std::string* out) : positions_(positions), out_(out) {}

  void Message(const pb::Message& msg, const std::string& path, int depth) {
    const pb::Reflection* r = msg.GetReflection();
    const pb::Descriptor* d = msg.GetDescriptor();
    out_->append("{");
    bool first = true;
    for (int i = 0; i < d->field_count(); ++i) {
      const pb::FieldDescriptor* f = d->field(i);
      const std::string field_path = (path.empty() ? "" : path + ".") + f->json_name();
      const bool written = positions_.Find(field_path) != nullptr;
      if (f->is_repeated() ? r->FieldSize(msg, f) == 0 && !written : !r->HasField(msg, f) && !written) continue;
      out_->append(first ? "\n" : ",\n");
      first = false;
      Indent(depth + 1);
      AppendJsonString(f->json_name(), out_);
      out_->append(": ");
      if (f->is_map()) {
        Map(msg, f, depth + 1);
      } else if (f->is_repeated()) {
        out_->append("[");
        const int n = r->FieldSize(msg, f);
        for (int j = 0; j < n; ++j) {
          if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
            out_->append(j ? ",\n" : "\n");
            Indent(depth + 2);
            Message(r->GetRepeatedMessage(msg, f, j), field_path + "[" + std::to_string(j) + "]", depth + 2);
          } else {
            out_->append(j ? ", " : "");
            Scalar(msg, f, j);
          }
        }
        if (n && f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
          out_->append("\n");
          Indent(depth + 1);
        }
        out_->append("]");
      } else if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
        Message(r->GetMessage(msg, f), field_path, depth + 1);
      } else {
        Scalar(msg, f, -1);
      }
    }
    if (!first) {
      out_->append("\n");
      Indent(depth);
    }
    out_->append("}");
  }

 private:
  void Indent(int depth) { out_->append(static_cast<size_t>(depth) * 2, ' '); }

  // A map<string, string> (metadata.labels), sorted by key: the same text each time.
  void Map(const pb::Message& msg, const pb::FieldDescriptor* f, int depth) {
    const pb::Reflection* r = msg.GetReflection();
    std::vector<std::pair<std::string, std::string>> entries;
    for (int j = 0; j < r->FieldSize(msg, f); ++j) {
      const pb::Message& entry = r->GetRepeatedMessage(msg, f, j);
      const pb::Reflection* er = entry.GetReflection();
      entries.emplace_back(er->GetString(entry, f->message_type()->map_key()),
                           er->GetString(entry, f->message_type()->map_value()));
    }
    std::sort(entries.begin(), entries.end());
    out_->append("{");
    for (size_t j = 0; j < entries.size(); ++j) {
      out_->append(j ? ",\n" : "\n");
      Indent(depth + 1);
      AppendJsonString(entries[j].first, out_);
      out_->append(": ");
      AppendJsonString(entries[j].second, out_);
    }
    if (!entries.empty()) {
      out_->append("\n");
      Indent(depth);
    }
    out_->append("}");
  }

  void Scalar(const pb::Message& msg, const pb::FieldDescriptor* f, int index) {
    const pb::Reflection* r = msg.GetReflection();
    const bool rep = index >= 0;
    switch (f->cpp_type()) {
      case pb::FieldDescriptor::CPPTYPE_STRING:
        AppendJsonString(rep ? r->GetRepeatedString(msg, f, index) : r->GetString(msg, f), out_);
        return;
      case pb::FieldDescriptor::CPPTYPE_BOOL:
        out_->append((rep ? r->GetRepeatedBool(msg, f, index) : r->GetBool(msg, f)) ? "true" : "false");
        return;
      case pb::FieldDescriptor::CPPTYPE_INT32:
        out_->append(std::to_string(rep ? r->GetRepeatedInt32(msg, f, index) : r->GetInt32(msg, f)));
        return;
      case pb::FieldDescriptor::CPPTYPE_INT64:
        out_->append(std::to_string(rep ? r->GetRepeatedInt64(msg, f, index) : r->GetInt64(msg, f)));
        return;
      case pb::FieldDescriptor::CPPTYPE_UINT32:
        out_->append(std::to_string(rep ? r->GetRepeatedUInt32(msg, f, index) : r->GetUInt32(msg, f)));
        return;
      case pb::FieldDescriptor::CPPTYPE_UINT64:
        out_->append(std::to_string(rep ? r->GetRepeatedUInt64(msg, f, index) : r->GetUInt64(msg, f)));
        return;
      case pb::FieldDescriptor::CPPTYPE_DOUBLE:
      case pb::FieldDescriptor::CPPTYPE_FLOAT: {
        const double v = f->cpp_type() == pb::FieldDescriptor::CPPTYPE_DOUBLE
                             ? (rep ? r->GetRepeatedDouble(msg, f, index) : r->GetDouble(msg, f))
                             : (rep ? r->GetRepeatedFloat(msg, f, index) : r->GetFloat(msg, f));
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.17g", v);
        out_->append(buf);
        return;
      }
      case pb::FieldDescriptor::CPPTYPE_ENUM:
        AppendJsonString(rep ? r->GetRepeatedEnum(msg, f, index)->name() : r->GetEnum(msg, f)->name(), out_);
        return;
      case pb::FieldDescriptor::CPPTYPE_MESSAGE:
        return;  // not a scalar
    }
  }

  const FieldPositions& positions_;
  std::string* out_;
};

}  // namespace

const std::vector<std::string>& InlineOptionNames() {
  static const std::vector<std::string> names = {"--allow-net", "--read",  "--write", "--exec",
                                                 "--timeout",   "--mode",  "--user"};
  return names;
}

std::string MergedPolicy::SourceOf(const std::string& field) const {
  for (const auto& [path, option] : sources) {
    if (field.compare(0, path.size(), path) != 0) continue;
    if (field.size() == path.size() || field[path.size()] == '.' || field[path.size()] == '[') return option;
  }
  return "";
}

bool MergeInlineOptions(const ParsedPolicy& base, const std::vector<InlineOption>& options, MergedPolicy* out,
                        std::vector<std::string>* errors) {
  cordon::v1::SandboxPolicy proto = base.proto;
  cordon::v1::Spec* spec = proto.mutable_spec();
  const bool has_files = base.proto.spec().has_files() || base.positions.Find("spec.files");
  const size_t errors_before = errors->size();
  out->sources.clear();
  for (const InlineOption& o : options) {
    const std::string named = o.option + " " + Quoted(o.value);
    if (!ValidUtf8(o.value)) {
      errors->push_back(named + ": not valid UTF-8 (policies hold UTF-8 text)");
      continue;
    }
    if (o.option == "--allow-net") {
      cordon::v1::EgressRule rule;
      if (std::string why = EgressFromOption(o.value, &rule); !why.empty()) {
        errors->push_back(named + ": " + why);
        continue;
      }
      out->sources.emplace_back("spec.network.egress[" + std::to_string(spec->network().egress_size()) + "]", named);
      *spec->mutable_network()->add_egress() = std::move(rule);
    } else if (o.option == "--read" || o.option == "--write" || o.option == "--exec") {
      if (!has_files) {
        errors->push_back(named + ": the policy " + base.file +
                          " has no spec.files (files are not restricted), so there is no list to add the path to: "
                          "give the policy spec.files, or use the default policy (no --policy), which has them");
        continue;
      }
      cordon::v1::Files* files = spec->mutable_files();
      auto* list = o.option == "--read"    ? files->mutable_read()
                   : o.option == "--write" ? files->mutable_write()
                                           : files->mutable_exec();
      if (std::find(list->begin(), list->end(), o.value) != list->end()) continue;  // the list has it already
      out->sources.emplace_back("spec.files." + o.option.substr(2) + "[" + std::to_string(list->size()) + "]", named);
      list->Add(std::string(o.value));
    } else if (o.option == "--timeout") {
      out->sources.emplace_back("spec.resources.wallTime", named);
      spec->mutable_resources()->set_wall_time(o.value);
    } else if (o.option == "--mode") {
      out->sources.emplace_back("spec.mode", named);
      spec->set_mode(o.value);
    } else if (o.option == "--user") {
      out->sources.emplace_back("spec.runAs", named);
      spec->set_run_as(o.value);
    } else {
      errors->push_back(o.option + ": not an option cordon run merges into its policy");
    }
  }
  if (errors->size() != errors_before) return false;
  // Presence comes from the base's positions (what the options add is never
  // empty, so written either way).
  ParsedPolicy merged;
  merged.proto = std::move(proto);
  merged.positions = base.positions;
  out->text = PolicyJson(merged);
  Diagnostics diags;
  if (!ParsePolicyText(out->text, base.file + " with the command line's options", &out->parsed, &diags)) {
    for (const auto& d : diags) errors->push_back("the merged policy does not read back: " + d.ToString());
    return false;
  }
  return true;
}

bool CompileMerged(const MergedPolicy& merged, const CompiledPolicy& base, CompiledPolicy* out, Diagnostics* diags) {
  Diagnostics found;
  const bool ok = Compile(merged.parsed, out, &found);
  for (Diagnostic& d : found) {
    if (std::string source = merged.SourceOf(d.field); !source.empty()) {
      d.file = std::move(source);
      d.line = d.column = 0;
    }
    diags->push_back(std::move(d));
  }
  if (!ok) return false;
  std::unordered_map<std::string, std::string> base_where;
  for (const FileRule& rule : base.file_rules) base_where.emplace(rule.origin, rule.where);
  for (FileRule& rule : out->file_rules) {
    if (std::string source = merged.SourceOf(rule.origin); !source.empty()) {
      rule.where = std::move(source);
    } else if (auto it = base_where.find(rule.origin); it != base_where.end()) {
      rule.where = it->second;
    }
  }
  return true;
}

std::string PolicyJson(const ParsedPolicy& parsed) {
  std::string out;
  JsonWriter(parsed.positions, &out).Message(parsed.proto, "", 0);
  out.push_back('\n');
  return out;
}

}  // namespace cordon::policy
