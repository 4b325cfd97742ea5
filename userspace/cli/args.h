// Strict option parsing for the subcommands: unknown options, missing values
// and repeated single-valued options are errors.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cordon::cli {

struct OptionSpec {
  std::string name;        // "--policy"
  std::string short_name;  // "-f" or ""
  bool takes_value = false;
  bool repeatable = false;
};

struct ParsedArgs {
  std::map<std::string, std::vector<std::string>> options;  // by long name
  std::vector<std::string> positionals;
  std::vector<std::string> after_dashdash;  // arguments after "--"
  bool saw_dashdash = false;

  bool Has(const std::string& name) const { return options.count(name) > 0; }
  std::optional<std::string> Get(const std::string& name) const;
};

// On error returns false and sets *error to one sentence.
bool ParseArgs(const std::vector<std::string>& args, const std::vector<OptionSpec>& specs, ParsedArgs* out,
               std::string* error, bool stop_at_first_positional = false);

// Parses "90s", "5m", "2h", "1d", "1500ms" (a bare number is seconds).
bool ParseDuration(const std::string& text, int64_t* ns);

}  // namespace cordon::cli
