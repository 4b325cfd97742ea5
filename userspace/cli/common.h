// Helpers shared by the subcommands.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/args.h"
#include "policy/compiler.h"
#include "policy/inline.h"

namespace cordon::cli {

// Prints "cordon: <message>" on stderr.
void PrintError(const std::string& message);
void PrintNote(const std::string& message);

// Loads and compiles a policy file, or the built-in default when path is
// empty; applies a --mode override ("enforce"|"audit"). Prints diagnostics
// and returns nullopt on any error.
// `check_host`: refuse paths this host lacks (ops::CheckHostPaths); explain,
// which may judge another host's events, does not. `parsed`: the parsed
// policy too, with its positions (the built-in one's text when path is empty).
std::optional<policy::CompiledPolicy> LoadPolicy(const std::string& path, const std::string& mode_override,
                                                 const std::string& outcome = "nothing attached",
                                                 bool check_host = true, policy::ParsedPolicy* parsed = nullptr);

// The inline policy options given (policy::InlineOptionNames(), in that
// order), a relative --read/--write/--exec path made the caller's absolute one.
std::vector<policy::InlineOption> InlineOptionsOf(const ParsedArgs& parsed);

// cordon run's policy: the file's (or the default), then its inline options
// merged (policy/inline.h; their errors name the option). *text: the
// effective policy's text, what --print-policy prints and the digest is of
// (the file's own text when no option is merged). On an error, nullopt and
// *exit_status: 2 for an option's value, 1 for the policy or the host.
// `parsed_out`: the effective policy as parsed too (cordon learn's base).
std::optional<policy::CompiledPolicy> LoadRunPolicy(const std::string& path,
                                                    const std::vector<policy::InlineOption>& options,
                                                    const std::string& outcome, std::string* text, int* exit_status,
                                                    policy::ParsedPolicy* parsed_out = nullptr);

// JSON string literal with escaping.
std::string JsonString(const std::string& s);

}  // namespace cordon::cli
