// The agent's log: one line on stderr (the journal under systemd).
#pragma once

#include <cstdio>
#include <string>

namespace cordon::agent {

inline void Log(const std::string& message) { std::fprintf(stderr, "cordon: agent: %s\n", message.c_str()); }

}  // namespace cordon::agent
