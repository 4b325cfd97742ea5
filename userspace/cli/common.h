// Helpers shared by the subcommands.
#pragma once

#include <optional>
#include <string>

#include "policy/compiler.h"

namespace cordon::cli {

// Prints "cordon: <message>" on stderr.
void PrintError(const std::string& message);
void PrintNote(const std::string& message);

// Loads and compiles a policy file, or the built-in default when path is
// empty; applies a --mode override ("enforce"|"audit"). Prints diagnostics
// and returns nullopt on any error.
std::optional<policy::CompiledPolicy> LoadPolicy(const std::string& path, const std::string& mode_override,
                                                 const std::string& outcome = "nothing attached");

// JSON string literal with escaping.
std::string JsonString(const std::string& s);

}  // namespace cordon::cli
