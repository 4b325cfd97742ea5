// cordon contain and cordon release (issue 18): ops/contain.h does the work,
// here or in the agent (cli/sandboxes.h picks); this renders the outcome.
#include <unistd.h>

#include <cstdio>

#include "agent/config.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/sandboxes.h"
#include "events/json_line.h"
#include "events/sink.h"
#include "loader/sandbox.h"
#include "ops/contain.h"
#include "sys/cgroup.h"
#include "util/fs.h"
#include "util/text.h"

namespace cordon::cli {

namespace {

const char* kContainHelp =
    "usage: cordon contain (--cgroup PATH | --id CGROUP_ID | --name NAME) [--kill] [--reason TEXT]\n"
    "                      [--config FILE] [--quiet]\n"
    "\n"
    "Contains a sandbox at once, for an incident: from the first step every program of the sandbox\n"
    "refuses every operation it sees (connect, send, socket, bind, unix sockets, socket options,\n"
    "devices, sysctls; inbound packets are dropped), whatever its policy allows: one write of the\n"
    "sandbox's pinned state, so it holds without cordon and without the agent. Then its processes are\n"
    "frozen (cgroup.freeze; cgroup.events says frozen 1), every connection they hold is destroyed\n"
    "(sock_diag: outbound and inbound; listeners are kept, nothing reaches them), and the evidence is\n"
    "written as one JSON document next to the audit file (0600, root's): the processes (pid, ppid,\n"
    "uid, exe, cmdline, cwd, descriptors), their inet sockets and what was done to each, the policy\n"
    "in force and its digest, the kernel's counters, resource use and the sandbox's last 100 events\n"
    "in the audit file. Never a credential's value. A sandbox.contained event records who and why.\n"
    "\n"
    "  --cgroup PATH     the sandbox's cgroup (absolute, or relative to the cgroup2 mount)\n"
    "  --id CGROUP_ID    the sandbox's cgroup id (see `cordon status`)\n"
    "  --name NAME       the sandbox's name\n"
    "  --kill            after the evidence is taken, kill every process (cgroup.kill); such a\n"
    "                    sandbox cannot be released (detach it)\n"
    "  --reason TEXT     why, in the sandbox.contained event and the evidence\n"
    "  --config FILE     the agent configuration whose audit file (jsonl sink) the evidence goes next\n"
    "                    to, without an agent (default /etc/cordon/agent.yaml; with an agent, its own)\n"
    "  -q, --quiet       no notes when it succeeds\n"
    "\n"
    "The policy in force stays loaded underneath: `cordon release` puts it back in force, exactly and\n"
    "at once. File and exec operations are not refused by containment where BPF LSM is not usable;\n"
    "the frozen processes cannot make them (contain says so). Goes through the agent when one runs:\n"
    "it delivers the sandbox's waiting events first, and the containment's events to its sinks.\n"
    "Without one, the events are appended to the audit file and printed on stdout as JSON lines.\n"
    "\n"
    "Exit status: 0 contained, 1 not contained (no such sandbox, already contained, killed) or\n"
    "contained but a step failed (it says which), 2 usage errors.\n";

const char* kReleaseHelp =
    "usage: cordon release (--cgroup PATH | --id CGROUP_ID | --name NAME) [--reason TEXT]\n"
    "                      [--config FILE] [--quiet]\n"
    "\n"
    "Undoes `cordon contain` (one that did not kill): the policy that was in force before is in force\n"
    "again, for every program at once (it never left; the containment state is cleared in one\n"
    "write), then the processes are thawed. Connections destroyed at containment stay destroyed.\n"
    "Works without the agent and after any restart: the state is pinned with the sandbox.\n"
    "A sandbox.released event records who and why.\n"
    "\n"
    "  --cgroup PATH     the sandbox's cgroup\n"
    "  --id CGROUP_ID    the sandbox's cgroup id\n"
    "  --name NAME       the sandbox's name\n"
    "  --reason TEXT     why, in the sandbox.released event\n"
    "  --config FILE     the agent configuration whose audit file gets the event, without an agent\n"
    "  -q, --quiet       no notes when it succeeds\n"
    "\n"
    "Exit status: 0 released, 1 not released (no such sandbox, not contained, killed) or released but\n"
    "its processes could not be thawed, 2 usage errors.\n";

// The sandbox named by exactly one of --cgroup, --id, --name: its id, or 0
// with the error printed (*status 1 or 2).
uint64_t ChosenSandbox(const ParsedArgs& parsed, const char* help, int* status) {
  const int given = parsed.Has("--cgroup") + parsed.Has("--id") + parsed.Has("--name");
  if (given != 1) return Usage("give exactly one of --cgroup, --id or --name", help), *status = 2, 0;
  *status = 1;
  if (auto cg = parsed.Get("--cgroup")) {
    auto cgroup = ResolveCgroup(*cg);
    if (!cgroup) return PrintError(cgroup.error().ToString()), 0;
    return cgroup->id;
  }
  if (auto s = parsed.Get("--id")) {
    char* end = nullptr;
    const uint64_t id = std::strtoull(s->c_str(), &end, 10);
    if (s->empty() || *end != '\0' || id == 0)
      return Usage("--id: not a cgroup id: " + Quoted(*s), help), *status = 2, 0;
    return id;
  }
  const std::string name = *parsed.Get("--name");
  auto list = ListSandboxes();
  if (!list) return PrintError(list.error().ToString()), 0;
  uint64_t found = 0;
  int matches = 0;
  for (const auto& s : *list)
    if (s.name == name) found = s.id, ++matches;
  if (matches == 0) return PrintError("no sandbox is named " + Quoted(name)), 0;
  if (matches > 1)
    return PrintError(std::to_string(matches) + " sandboxes are named " + Quoted(name) +
                      ": give --id (see `cordon status`)"),
           0;
  return found;
}

// Without an agent: the events go to the configured audit file too.
void AppendToAuditFile(const std::string& path, const std::vector<cordon::v1::AuditEvent>& events) {
  if (path.empty() || events.empty()) return;
  auto sink = JsonlFileSink::Open(path);
  Status written = sink ? Status() : Status(sink.error());
  for (const auto& e : events)
    if (written.ok()) written = (*sink)->Write(e);
  if (written.ok()) written = (*sink)->Sync();
  if (!written.ok())
    PrintError("warning: the events could not be written to the audit file: " + written.error().ToString());
}

struct Common {
  ParsedArgs parsed;
  uint64_t id = 0;
  std::string audit_path;
  std::unique_ptr<Sandboxes> sandboxes;
};

// Parses, checks root, finds the sandbox and picks agent or direct; an exit status when it cannot go on.
std::optional<int> Prepare(const Args& args, bool contain, Common* c) {
  const char* help = contain ? kContainHelp : kReleaseHelp;
  std::vector<OptionSpec> specs = {{"--cgroup", "", true}, {"--id", "", true},     {"--name", "", true},
                                   {"--reason", "", true}, {"--config", "", true}, QuietOption()};
  if (contain) specs.push_back({"--kill", ""});
  std::string error;
  if (!ParseArgs(args, specs, &c->parsed, &error)) return Usage(error, help), 2;
  if (!c->parsed.positionals.empty()) return Usage("unexpected argument " + Quoted(c->parsed.positionals[0]), help), 2;
  if (!IsRoot()) return PrintError(std::string(contain ? "contain" : "release") + " needs root"), 1;
  int status = 0;
  c->id = ChosenSandbox(c->parsed, help, &status);
  if (!c->id) return status;
  agent::AgentConfig config;
  policy::Diagnostics diags;
  const std::string config_path = c->parsed.Get("--config").value_or("");
  if (!agent::LoadAgentConfig(config_path, !config_path.empty(), &config, &diags)) {
    std::fputs(policy::FormatDiagnostics(diags).c_str(), stderr);
    return PrintError("the agent configuration was refused; nothing done"), 1;
  }
  c->audit_path = config.AuditPath();
  bool agent_failed = false;
  c->sandboxes = PickSandboxes(&agent_failed);
  if (!c->sandboxes) return 1;
  return std::nullopt;
}

void Print(const std::vector<cordon::v1::AuditEvent>& events, const std::vector<std::string>& notes, bool quiet) {
  for (const auto& e : events) std::printf("%s\n", ToJsonLine(e).c_str());
  std::fflush(stdout);
  if (!quiet)
    for (const auto& note : notes) PrintNote(note);
}

}  // namespace

int ContainCommand(const Args& args) {
  if (WantsHelp(args)) return std::fputs(kContainHelp, stdout), 0;
  Common c;
  if (auto status = Prepare(args, true, &c)) return *status;
  ops::ContainRequest request;
  request.sandbox_id = c.id;
  request.kill = c.parsed.Has("--kill");
  request.reason = c.parsed.Get("--reason").value_or("");
  request.by = ops::Requester(::getpid(), ::getuid());
  request.via = "cli";
  request.audit_path = c.audit_path;
  ops::ContainOutcome out = c.sandboxes->Contain(request);
  if (!out.error.empty()) return PrintError(out.error), 1;
  if (!c.sandboxes->through_agent()) AppendToAuditFile(c.audit_path, out.events);
  const bool quiet = c.parsed.Has("--quiet") && !out.partial;
  std::vector<std::string> notes = out.notes;
  const bool kill_only = !out.events.empty() && out.events.back().containment().killed() && out.evidence_path.empty() &&
                         out.events.back().containment().processes() == 0;
  if (kill_only) {
    std::fprintf(stderr,
                 "cordon: killed the processes of contained sandbox %s (cgroup id %llu); the evidence taken at its "
                 "containment stands\n",
                 Quoted(out.name).c_str(), static_cast<unsigned long long>(out.sandbox_id));
  } else if (!out.events.empty() && out.events.back().has_containment()) {
    const auto& k = out.events.back().containment();
    for (const auto& line : k.not_stopped()) notes.push_back("not stopped by containment here: " + line);
    if (!k.credentials().empty()) notes.push_back("credentials: " + k.credentials());
    std::fprintf(
        stderr, "cordon: contained sandbox %s (cgroup id %llu): %s, %u process%s, %u connection%s destroyed%s%s\n",
        Quoted(out.name).c_str(), static_cast<unsigned long long>(out.sandbox_id), k.frozen() ? "frozen" : "NOT frozen",
        k.processes(), k.processes() == 1 ? "" : "es", k.connections_destroyed(),
        k.connections_destroyed() == 1 ? "" : "s", k.killed() ? ", every process killed" : "",
        out.evidence_path.empty() ? "; no evidence written" : ("; evidence: " + out.evidence_path).c_str());
  }
  Print(out.events, notes, quiet);
  return out.partial ? 1 : 0;
}

int ReleaseCommand(const Args& args) {
  if (WantsHelp(args)) return std::fputs(kReleaseHelp, stdout), 0;
  Common c;
  if (auto status = Prepare(args, false, &c)) return *status;
  ops::ReleaseContainmentRequest request;
  request.sandbox_id = c.id;
  request.reason = c.parsed.Get("--reason").value_or("");
  request.by = ops::Requester(::getpid(), ::getuid());
  request.via = "cli";
  ops::ReleaseContainmentOutcome out = c.sandboxes->ReleaseContainment(request);
  if (!out.error.empty()) return PrintError(out.error), 1;
  if (!c.sandboxes->through_agent()) AppendToAuditFile(c.audit_path, out.events);
  std::fprintf(stderr, "cordon: released sandbox %s (cgroup id %llu): its policy is in force again%s\n",
               Quoted(out.name).c_str(), static_cast<unsigned long long>(out.sandbox_id),
               out.partial ? "" : " and its processes run");
  Print(out.events, out.notes, c.parsed.Has("--quiet") && !out.partial);
  return out.partial ? 1 : 0;
}

}  // namespace cordon::cli
