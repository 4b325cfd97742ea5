#include "cli/args.h"

#include <climits>
#include <cstdint>

namespace cordon::cli {

std::optional<std::string> ParsedArgs::Get(const std::string& name) const {
  auto it = options.find(name);
  if (it == options.end() || it->second.empty()) return std::nullopt;
  return it->second.back();
}

bool ParseArgs(const std::vector<std::string>& args, const std::vector<OptionSpec>& specs, ParsedArgs* out,
               std::string* error, bool stop_at_first_positional) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      out->saw_dashdash = true;
      out->after_dashdash.assign(args.begin() + static_cast<long>(i) + 1, args.end());
      return true;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      out->positionals.push_back(arg);
      if (stop_at_first_positional) {
        out->after_dashdash.assign(args.begin() + static_cast<long>(i) + 1, args.end());
        return true;
      }
      continue;
    }
    std::string name = arg, value;
    bool inline_value = false;
    if (arg.rfind("--", 0) == 0) {
      size_t eq = arg.find('=');
      if (eq != std::string::npos) {
        name = arg.substr(0, eq);
        value = arg.substr(eq + 1);
        inline_value = true;
      }
    }
    const OptionSpec* spec = nullptr;
    for (const auto& s : specs)
      if (s.name == name || (!s.short_name.empty() && s.short_name == name)) spec = &s;
    if (!spec) {
      *error = "unknown option " + name;
      return false;
    }
    if (spec->takes_value && !inline_value) {
      if (i + 1 >= args.size()) {
        *error = "option " + name + " needs a value";
        return false;
      }
      value = args[++i];
    } else if (!spec->takes_value && inline_value) {
      *error = "option " + name + " takes no value";
      return false;
    }
    auto& values = out->options[spec->name];
    if (!values.empty() && !spec->repeatable) {
      *error = "option " + spec->name + " given more than once";
      return false;
    }
    values.push_back(value);
  }
  return true;
}

bool ParseDuration(const std::string& text, int64_t* ns) {
  size_t i = 0;
  uint64_t value = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    if (value > 1000000000ull) return false;
    value = value * 10 + static_cast<uint64_t>(text[i++] - '0');
  }
  if (i == 0) return false;
  std::string unit = text.substr(i);
  int64_t mult;
  if (unit.empty() || unit == "s") mult = 1000000000ll;
  else if (unit == "ms") mult = 1000000ll;
  else if (unit == "m") mult = 60ll * 1000000000ll;
  else if (unit == "h") mult = 3600ll * 1000000000ll;
  else if (unit == "d") mult = 86400ll * 1000000000ll;
  else return false;
  if (value > static_cast<uint64_t>(INT64_MAX / mult)) return false;
  *ns = static_cast<int64_t>(value) * mult;
  return true;
}

}  // namespace cordon::cli
