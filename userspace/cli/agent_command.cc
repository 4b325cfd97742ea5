// `cordon agent`: its options and --check; the agent itself is
// userspace/agent (RunAgent).
#include <cstdio>

#include "agent/agent.h"
#include "agent/config.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "policy/diagnostic.h"
#include "util/fs.h"

namespace cordon::cli {

namespace {
const char* kAgentHelp =
    "usage: cordon agent [--config FILE] [--check]\n"
    "\n"
    "Runs the cordon agent in the foreground: the single consumer of every sandbox's event ring\n"
    "buffer. It writes events to the configured sinks (JSONL audit file with rotation and an fsync\n"
    "policy, stdout, syslog), streams them to `cordon tail` clients, rate-limits each sandbox's\n"
    "events, accounts for every loss, and serves `cordon status`, attach, update and detach requests\n"
    "on a unix socket (root only, mode 0600) and Prometheus metrics on a loopback address.\n"
    "Logs go to stderr (journald under systemd).\n"
    "\n"
    "options:\n"
    "  --config FILE   configuration (default /etc/cordon/agent.yaml; a missing default file\n"
    "                  means the defaults: one audit file /var/log/cordon/audit.jsonl, socket\n"
    "                  /run/cordon/agent.sock, metrics on 127.0.0.1:9464, 2000 events/s per\n"
    "                  sandbox with bursts of 10000). Errors name file:line:column and field.\n"
    "  --check         validate the configuration and the pinned state, print the result, exit.\n"
    "\n"
    "On start the agent adopts every sandbox pinned under /sys/fs/bpf/cordon/v6 (nothing is\n"
    "re-attached: enforcement never paused), drains what the ring buffers held while no agent ran,\n"
    "and reports what they could not hold as `loss` records. It refuses to start, touching nothing,\n"
    "when pinned state has another layout version (written by another cordon release). Sandboxes\n"
    "attached later without the agent (`cordon attach`, `cordon run`) are adopted within 200 ms.\n"
    "\n"
    "Enforcement never depends on the agent: killing it (even with SIGKILL) leaves every sandbox\n"
    "exactly as confined; events wait in each 256 KiB ring buffer, and what overflows is counted.\n"
    "SIGTERM or SIGINT: drain every ring buffer, flush the sinks, exit 0. A second agent (same\n"
    "socket directory) refuses to start.\n"
    "\n"
    "Rate limit: beyond rateLimit.eventsPerSecond (token bucket of rateLimit.burst) a sandbox's\n"
    "events are counted, not delivered, and a `suppressed` record carrying the count is written at\n"
    "most once a second while it lasts, and once more when it ends. For every sandbox:\n"
    "delivered + suppressed + lost = generated.\n"
    "\n"
    "Exit status: 0 after SIGTERM/SIGINT (or --check passed), 1 if it cannot start (configuration\n"
    "error, another agent, foreign pinned state), 2 usage errors.\n";
}  // namespace

int AgentCommand(const Args& args) {
  for (const auto& a : args)
    if (a == "-h" || a == "--help") return std::fputs(kAgentHelp, stdout), 0;
  ParsedArgs parsed;
  std::string error;
  if (!ParseArgs(args, {{"--config", "-c", true}, {"--check", ""}}, &parsed, &error) || !parsed.positionals.empty()) {
    PrintError(error.empty() ? "unexpected argument '" + parsed.positionals[0] + "'" : error);
    std::fputs(kAgentHelp, stderr);
    return 2;
  }
  agent::AgentConfig config;
  policy::Diagnostics diags;
  const std::string path = parsed.Get("--config").value_or("");
  if (!agent::LoadAgentConfig(path, !path.empty(), &config, &diags)) {
    std::fputs(policy::FormatDiagnostics(diags).c_str(), stderr);
    PrintError("agent configuration " + (path.empty() ? std::string(agent::kDefaultConfigPath) : path) +
               " rejected (" + std::to_string(diags.size()) + " error" + (diags.size() == 1 ? "" : "s") + ")");
    return 1;
  }
  if (!IsRoot()) return PrintError("the agent needs root (it reads pinned BPF state)"), 1;
  if (parsed.Has("--check")) {
    Status layout = agent::CheckPinnedLayout();
    if (!layout.ok()) return PrintError("agent: " + layout.error().ToString()), 1;
    std::printf("%s: ok (socket %s; %zu sink%s; rate limit %s)\n",
                config.file.empty() ? "built-in defaults" : config.file.c_str(), config.socket.c_str(),
                config.sinks.size(), config.sinks.size() == 1 ? "" : "s",
                config.rate_per_second ? (std::to_string(config.rate_per_second) + "/s, burst " +
                                          std::to_string(config.rate_burst))
                                             .c_str()
                                       : "none");
    return 0;
  }
  return agent::RunAgent(config);
}

}  // namespace cordon::cli
