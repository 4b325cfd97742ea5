#include "cli/args.h"

#include <climits>
#include <cstdint>

#include "util/text.h"

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
      if (args[i + 1] == "--") {
        *error = "option " + name + " needs a value (the '--' after it ends the options)";
        return false;
      }
      value = args[++i];
    } else if (!spec->takes_value && inline_value) {
      *error = "option " + name + " takes no value";
      return false;
    }
    if (!spec->choices.empty()) {
      bool known = false;
      std::string list;
      for (const auto& c : spec->choices) {
        known |= c == value;
        list += (list.empty() ? "" : ", ") + c;
      }
      if (!known) {
        *error = "option " + spec->name + " must be one of " + list + ", not '" +
                 DisplayText(EscapeWorkloadBytes(value)) + "'";
        return false;
      }
    }
    if (spec->check) {
      if (std::string why = spec->check(value); !why.empty()) {
        *error = "option " + spec->name + ": " + why;
        return false;
      }
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

std::string SandboxNameProblem(const std::string& name) {
  if (name.empty()) return "the sandbox name is empty";
  if (name.size() > 63) return "the sandbox name is longer than 63 bytes";
  if (!IsCleanName(name))
    return "the sandbox name '" + DisplayText(EscapeWorkloadBytes(name)) +
           "' holds control, invisible or bidi characters or invalid UTF-8";
  for (unsigned char c : name) {
    if (c >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) continue;
    if (c == '.' || c == '_' || c == '-' || c == ':' || c == '@' || c == '+') continue;
    return "the sandbox name '" + DisplayText(EscapeWorkloadBytes(name)) + "' has '" +
           std::string(1, static_cast<char>(c)) + "': use letters, digits and . _ - : @ + only";
  }
  return "";
}

OptionSpec ModeOption() { return {"--mode", "", true, false, {"enforce", "audit"}}; }
OptionSpec SandboxNameOption() { return {"--name", "", true, false, {}, SandboxNameProblem}; }
OptionSpec QuietOption() { return {"--quiet", "-q"}; }

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
