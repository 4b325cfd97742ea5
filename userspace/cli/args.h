// Strict option parsing for the subcommands: unknown options, missing values
// and repeated single-valued options are errors.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cordon::cli {

struct OptionSpec {
  OptionSpec(std::string name_, std::string short_name_ = "", bool takes_value_ = false, bool repeatable_ = false,
             std::vector<std::string> choices_ = {}, std::function<std::string(const std::string&)> check_ = {})
      : name(std::move(name_)),
        short_name(std::move(short_name_)),
        takes_value(takes_value_),
        repeatable(repeatable_),
        choices(std::move(choices_)),
        check(std::move(check_)) {}
  std::string name;        // "--policy"
  std::string short_name;  // "-f" or ""
  bool takes_value = false;
  bool repeatable = false;
  std::vector<std::string> choices;  // non-empty: the only values accepted
  // Why a value is refused ("" = accepted); a usage error naming the option.
  std::function<std::string(const std::string&)> check;
};

struct ParsedArgs {
  std::map<std::string, std::vector<std::string>> options;  // by long name
  std::vector<std::string> positionals;
  std::vector<std::string> after_dashdash;  // arguments after "--"
  bool saw_dashdash = false;

  bool Has(const std::string& name) const { return options.count(name) > 0; }
  std::optional<std::string> Get(const std::string& name) const;
};

// On error returns false and sets *error to one sentence: an unknown
// option, a missing value (a separate "--" is never taken as a value: `--policy
// -- CMD` lacks the file), a value not among `choices` or refused by `check`,
// a repeated single-valued option.
bool ParseArgs(const std::vector<std::string>& args, const std::vector<OptionSpec>& specs, ParsedArgs* out,
               std::string* error, bool stop_at_first_positional = false);

// Why `name` cannot be a sandbox name given on the command line ("" when
// it can): 1..63 bytes; ASCII letters, digits and . _ - : @ + (no spaces:
// it is a column of `cordon status` and the sub of tokens), or printable
// non-ASCII UTF-8.
std::string SandboxNameProblem(const std::string& name);

// Options of more than one command, spelled and checked once.
OptionSpec ModeOption();         // --mode enforce|audit
OptionSpec SandboxNameOption();  // --name NAME (SandboxNameProblem)
OptionSpec QuietOption();        // -q, --quiet

// Parses "90s", "5m", "2h", "1d", "1500ms" (a bare number is seconds).
bool ParseDuration(const std::string& text, int64_t* ns);

}  // namespace cordon::cli
