// The cordon subcommands. Each takes its arguments (after the subcommand
// name) and returns the process exit status: 0 success, 1 failure (policy
// errors, kernel refusals), 2 usage errors. Messages go to stderr, one clear
// line per problem, prefixed "cordon: ".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cordon::cli {

using Args = std::vector<std::string>;

int PolicyCommand(const Args& args);
int AttachCommand(const Args& args);
int UpdateCommand(const Args& args);
int DetachCommand(const Args& args);
int StatusCommand(const Args& args);  // status.cc
int LsCommand(const Args& args);      // status.cc
int TailCommand(const Args& args);
int RunCommand(const Args& args);
int DoctorCommand(const Args& args);
int AgentCommand(const Args& args);  // agent_command.cc
int AuditCommand(const Args& args);  // audit.cc
int OidcCommand(const Args& args);   // oidc.cc
int ExplainCommand(const Args& args);  // explain.cc
int LearnCommand(const Args& args);    // learn.cc
int ContainCommand(const Args& args);  // contain.cc
int ReleaseCommand(const Args& args);  // contain.cc
int ReportCommand(const Args& args);   // report.cc
int RegressCommand(const Args& args);  // regress.cc

int Main(int argc, char** argv);

// Shared by the subcommands: -h/--help before any "--"; a usage error
// ("cordon: <error>" and the command's help on stderr; returns false);
// "enforce" or "audit".
bool WantsHelp(const Args& args);
bool Usage(const std::string& error, const char* help);
std::string ModeName(uint32_t mode);

struct ParsedArgs;
// --since and --until (a duration ago, or an RFC 3339 UTC time) into unix ns
// (0 when not given); false after a usage error.
bool ParseTimeWindow(const ParsedArgs& parsed, int64_t* since_ns, int64_t* until_ns, const char* help);
// The agent's audit file (its configuration's jsonl sink) and its rotations
// that exist, oldest first; none when no audit file is configured.
std::vector<std::string> AgentAuditFiles();
// The audit files `cordon report` and `cordon regress capture` read when none
// is given: the agent's that exist, then cordon run's default logs
// (/var/log/cordon/run-*.jsonl), each oldest first (report.cc).
std::vector<std::string> DefaultAuditFiles();

}  // namespace cordon::cli
