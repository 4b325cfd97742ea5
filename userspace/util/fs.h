// Small filesystem helpers returning Result values with context.
#pragma once

#include <string>
#include <vector>

#include "util/result.h"

namespace cordon {

Result<std::string> ReadFile(const std::string& path, size_t max_bytes = 16 << 20);
Status WriteFile(const std::string& path, const std::string& data);  // existing file, no create
Status MakeDirs(const std::string& path, unsigned mode = 0755);       // mkdir -p
Result<std::vector<std::string>> ListDir(const std::string& path);    // names, without . and ..
std::string JoinPath(const std::string& a, const std::string& b);
bool IsRoot();

}  // namespace cordon
