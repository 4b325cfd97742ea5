#include "cli/commands.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>
#include <google/protobuf/util/time_util.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <sstream>

#include "abi/cordon_common.h"
#include "agent/config.h"
#include "agent/control.h"
#include "cli/agent_status.h"
#include "cli/args.h"
#include "cli/attach_report.h"
#include "cli/common.h"
#include "cli/notes.h"
#include "cli/sandboxes.h"
#include "cli/tail.h"
#include "util/text.h"
#include "events/json_line.h"
#include "events/reader.h"
#include "events/sink.h"
#include "loader/kernel_features.h"
#include "loader/sandbox.h"
#include "ops/ops.h"
#include "ops/resource_watch.h"
#include "policy/describe.h"
#include "policy/parser.h"
#include "sys/bpffs.h"
#include "sys/cgroup.h"
#include "util/clock.h"
#include "util/colour.h"
#include "util/fs.h"
#include "util/text.h"

namespace cordon::cli {

void PrintError(const std::string& message) { std::fprintf(stderr, "cordon: %s\n", message.c_str()); }
void PrintNote(const std::string& message) { std::fprintf(stderr, "cordon: note: %s\n", message.c_str()); }

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  return out + "\"";
}

bool Usage(const std::string& error, const char* help) {
  PrintError(error);
  std::fputs(help, stderr);
  return false;
}

bool WantsHelp(const Args& args) {
  for (const auto& a : args) {
    if (a == "--") return false;
    if (a == "-h" || a == "--help") return true;
  }
  return false;
}

std::string ModeName(uint32_t mode) { return mode == CORDON_MODE_AUDIT ? "audit" : "enforce"; }

namespace {

// The policy file (or the built-in one), compiled; its errors printed.
bool CompileBase(const std::string& path, const std::string& outcome, bool want_parsed, policy::ParsedPolicy* parsed,
                 policy::CompiledPolicy* compiled, std::string* text) {
  if (path.empty() && !want_parsed) {
    *compiled = policy::DefaultPolicy();
    if (text) *text = policy::DefaultPolicyYaml();
    return true;
  }
  policy::Diagnostics diags;
  const bool read = path.empty() ? policy::ParsePolicyText(policy::DefaultPolicyYaml(), "<builtin>", parsed, &diags)
                                 : policy::ParsePolicyFile(path, parsed, &diags, text);
  if (path.empty() && text) *text = policy::DefaultPolicyYaml();
  if (read && policy::Compile(*parsed, compiled, &diags)) return true;
  std::fputs(policy::FormatDiagnostics(diags).c_str(), stderr);
  if (!diags.empty() && policy::FormatDiagnostics(diags).back() != '\n') std::fputc('\n', stderr);
  PrintError("policy " + path + " rejected (" + std::to_string(diags.size()) + " error" +
             (diags.size() == 1 ? "" : "s") + ")" + (outcome.empty() ? "" : "; " + outcome));
  return false;
}

// Paths this host lacks: refused as the policy's own errors are, by the same
// check attach makes (its warnings are the caller's to show).
bool HostHasPaths(const policy::CompiledPolicy& compiled, const std::string& name, const std::string& outcome,
                  bool names_served = false) {
  policy::CompiledPolicy probe = compiled;
  const ops::HostPathCheck host = ops::CheckHostPaths(&probe, names_served);
  if (host.errors.empty()) return true;
  for (const auto& line : host.errors) std::fprintf(stderr, "%s\n", line.c_str());
  const size_t names = names_served ? 0 : policy::UnenforcedNameRules(compiled).size(),
               missing = host.errors.size() - names;
  std::string why;
  if (missing) why = std::to_string(missing) + " missing path" + (missing == 1 ? "" : "s");
  if (names) why += (why.empty() ? "" : ", ") + std::to_string(names) + " name rule" + (names == 1 ? "" : "s");
  PrintError(name + " cannot be used on this host (" + why + ")" + (outcome.empty() ? "" : "; " + outcome));
  return false;
}

}  // namespace

std::optional<policy::CompiledPolicy> LoadPolicy(const std::string& path, const std::string& mode_override,
                                                 const std::string& outcome, bool check_host,
                                                 policy::ParsedPolicy* parsed_out) {
  policy::CompiledPolicy compiled;
  policy::ParsedPolicy parsed;
  if (!CompileBase(path, outcome, parsed_out != nullptr, parsed_out ? parsed_out : &parsed, &compiled, nullptr))
    return std::nullopt;
  // Name rules are judged where the policy is put in force (the agent runs
  // their resolver; a direct attach refuses them: ops::AttachOrUpdate).
  if (check_host && !path.empty() && !HostHasPaths(compiled, "policy " + path, outcome, /*names_served=*/true))
    return std::nullopt;
  if (mode_override == "enforce") {
    compiled.mode = CORDON_MODE_ENFORCE;
  } else if (mode_override == "audit") {
    compiled.mode = CORDON_MODE_AUDIT;
  } else if (!mode_override.empty()) {
    PrintError("--mode must be enforce or audit, not '" + mode_override + "'");
    return std::nullopt;
  }
  return compiled;
}

std::vector<policy::InlineOption> InlineOptionsOf(const ParsedArgs& parsed) {
  std::vector<policy::InlineOption> inline_options;
  for (const std::string& option : policy::InlineOptionNames()) {
    auto values = parsed.options.find(option);
    if (values == parsed.options.end()) continue;
    const bool path = option == "--read" || option == "--write" || option == "--exec";
    for (const auto& v : values->second) {
      // A relative path is the caller's: made absolute here (the policy's are absolute).
      char buf[4096];
      if (path && !v.empty() && v[0] != '/' && ::getcwd(buf, sizeof buf))
        inline_options.push_back({option, std::string(buf) + (v == "." ? "" : "/" + v)});
      else
        inline_options.push_back({option, v});
    }
  }
  return inline_options;
}

std::optional<policy::CompiledPolicy> LoadRunPolicy(const std::string& path,
                                                    const std::vector<policy::InlineOption>& options,
                                                    const std::string& outcome, std::string* text, int* exit_status,
                                                    policy::ParsedPolicy* parsed_out) {
  *exit_status = 1;
  policy::CompiledPolicy compiled;
  policy::ParsedPolicy parsed;
  if (!CompileBase(path, outcome, !options.empty() || parsed_out, &parsed, &compiled, text)) return std::nullopt;
  if (!options.empty()) {
    policy::MergedPolicy merged;
    std::vector<std::string> errors;
    policy::CompiledPolicy effective;
    policy::Diagnostics diags;
    bool ok = false;
    if (!policy::MergeInlineOptions(parsed, options, &merged, &errors)) {
      for (const auto& e : errors) PrintError(e);
    } else if (!policy::CompileMerged(merged, compiled, &effective, &diags)) {
      std::fputs(policy::FormatDiagnostics(diags).c_str(), stderr);
      if (!diags.empty() && policy::FormatDiagnostics(diags).back() != '\n') std::fputc('\n', stderr);
    } else {
      compiled = std::move(effective);
      if (text) *text = std::move(merged.text);
      parsed = std::move(merged.parsed);
      ok = true;
    }
    if (!ok) {
      const size_t n = errors.size() + diags.size();
      PrintError("the command line's policy options rejected (" + std::to_string(n) + " error" + (n == 1 ? "" : "s") +
                 ")" + (outcome.empty() ? "" : "; " + outcome));
      *exit_status = 2;
      return std::nullopt;
    }
  }
  // cordon run serves name rules (its resolver); learn refuses them itself.
  if ((!path.empty() || !options.empty()) &&
      !HostHasPaths(compiled, path.empty() ? std::string("the policy") : "policy " + path, outcome,
                    /*names_served=*/true))
    return std::nullopt;
  if (parsed_out) *parsed_out = std::move(parsed);
  return compiled;
}

namespace {

const char* kPolicyHelp =
    "usage: cordon policy check [--quiet] FILE...\n"
    "       cordon policy check --default\n"
    "\n"
    "Parses and compiles each policy file (YAML or JSON; \"-\" reads standard input), prints what\n"
    "it allows and, run as root, which of its controls this kernel and build do not enforce.\n"
    "\n"
    "  -q, --quiet   print only errors\n"
    "  --default     check (and explain) the built-in default policy as well\n"
    "\n"
    "Exit status: 0 if every file is valid, 1 otherwise (errors name file:line:column and field).\n";

const char* kAttachHelp =
    "usage: cordon attach --cgroup PATH [--policy FILE] [--mode enforce|audit] [--name NAME]\n"
    "                     [--allow-degraded] [--quiet]\n"
    "\n"
    "Confines every process in an existing cgroup v2 directory, and any cgroup created below it,\n"
    "from this moment: processes already inside are confined too. PATH is absolute or relative to\n"
    "the cgroup2 mount. Enforcement is pinned under bpffs and persists after cordon exits.\n"
    "Attaching again to the same cgroup atomically replaces its policy (counters and pending\n"
    "events are kept). Without --policy the built-in default applies (no egress at all).\n"
    "Its events are read by the agent when one runs (it adopts the sandbox within 200 ms; see\n"
    "`cordon agent --help`), else they wait in the sandbox's 256 KiB ring buffer for `cordon tail`.\n"
    "\n"
    "  --cgroup PATH      the cgroup v2 directory to confine (required)\n"
    "  --policy FILE      policy (YAML or JSON; see `cordon policy check`); default: built-in\n"
    "  --mode MODE        enforce (deny and report) or audit (allow and report); overrides the policy\n"
    "  --name NAME        sandbox name in events and status (default: the cgroup's directory name);\n"
    "                     letters, digits and . _ - : @ + (or non-ASCII letters), at most 63 bytes\n"
    "  --allow-degraded   attach even if this kernel cannot enforce every control (see below)\n"
    "  -q, --quiet        no notes when it succeeds (errors and the retroactive events stay)\n"
    "\n"
    "If this kernel cannot enforce some control the policy asks for (see `cordon doctor`), attach\n"
    "refuses, naming them, unless --allow-degraded is given: then it attaches what the kernel can\n"
    "enforce and reports the rest as not enforced.\n"
    "\n"
    "Connections that processes already inside opened before the attach and that the policy denies\n"
    "are destroyed (sock_diag), allowed ones kept; files they hold open are listed (they cannot be\n"
    "revoked). Each is an event (kinds net.preexisting, file.preexisting), printed as JSON lines on\n"
    "stdout and, with an agent, delivered to its sinks and tailers.\n"
    "\n"
    "spec.credentials: each one must be a file with an owner (the user the attached processes run\n"
    "as); it is issued before the programs attach (a failed issue attaches nothing) and put at\n"
    "/run/cordon/credentials/SANDBOX/NAME, mode 0400, the owner's. Where BPF LSM enforces, only the\n"
    "sandbox's processes and root outside every sandbox may open it (others: EPERM, a credential.read\n"
    "event); elsewhere any process of that user on the host can read it (attach says which applies).\n"
    "With an agent, the agent refreshes it and ends it at its ttl\n"
    "or at detach; without one it is issued once, and removed and revoked at `cordon detach` or\n"
    "after its ttl by the next sweep. Its events (never its value) are printed as JSON lines on\n"
    "stdout (README \"Credentials\").\n"
    "\n"
    "Exit status: 0 attached, 1 failure (policy error, kernel refusal: nothing is left attached;\n"
    "or attached but a pre-existing denied connection could not be destroyed: it says which),\n"
    "2 usage errors.\n";

const char* kUpdateHelp =
    "usage: cordon update --cgroup PATH --policy FILE [--mode enforce|audit] [--allow-degraded]\n"
    "                     [--quiet]\n"
    "\n"
    "Atomically replaces the policy of the sandbox already attached to PATH:\n"
    "every operation is judged wholly by the old or wholly by the new policy, never by neither;\n"
    "counters and pending events carry over. update never creates a sandbox: with none attached to\n"
    "PATH it fails (exit 1) and says to use `cordon attach`. Goes through the agent when one runs. Connections opened earlier that the new policy\n"
    "denies are destroyed, as with attach (see `cordon attach --help`). The sandbox's\n"
    "spec.credentials are kept as issued: the new policy must carry the same section (else refused).\n"
    "\n"
    "  --cgroup PATH      the sandbox's cgroup (required)\n"
    "  --policy FILE      the new policy (required; to flip only the mode, give the same file\n"
    "                     with --mode)\n"
    "  --mode MODE        enforce or audit; overrides the policy's spec.mode\n"
    "  --allow-degraded   as for attach\n"
    "  -q, --quiet        as for attach\n"
    "\n"
    "Exit status: 0 replaced, 1 failure (the old policy stays in force), 2 usage errors.\n";

const char* kDetachHelp =
    "usage: cordon detach (--cgroup PATH | --id CGROUP_ID)\n"
    "\n"
    "Detaches every program of the sandbox and removes its pinned state: from then on its processes\n"
    "are no longer confined. --id serves when the cgroup itself was already removed (see `cordon\n"
    "status`). With an agent running, the agent first delivers the events still waiting in the\n"
    "sandbox's ring buffer, then detaches it; without one, they are discarded with it.\n"
    "An attached sandbox's spec.credentials are then removed and revoked (their events, never their\n"
    "values, printed as JSON lines on stdout).\n"
    "\n"
    "The sandbox of a `cordon run` that has ended without removing it (killed with -9; status says\n"
    "\"orphaned\") or whose run cannot be found: what is left in its cgroup is killed first\n"
    "(detaching would set it free), then the cgroup cordon made for the run is removed, then the\n"
    "sandbox detached. A running run's sandbox with processes in it is refused: end that run.\n"
    "\n"
    "Exit status: 0 detached, 1 no sandbox there or the kernel refused, 2 usage errors.\n";

const char* kTailHelp =
    "usage: cordon tail [-f] [--sandbox NAME] [--cgroup PATH]... [--kind PREFIX] [--verdict V]...\n"
    "                   [--pid PID] [--since TIME] [--until TIME] [-o json|compact]\n"
    "\n"
    "Prints violation events (json: one line per event, exactly as in the audit file; compact:\n"
    "one readable line per event).\n"
    "\n"
    "  -f, --follow       keep following new events until interrupted\n"
    "  --sandbox NAME     only the sandbox with this name\n"
    "  --cgroup PATH      only the sandbox attached to this cgroup (repeatable)\n"
    "  --kind PREFIX      only events whose kind starts with PREFIX (net., file.open, tamper.);\n"
    "                     loss and suppressed records are always shown\n"
    "  --verdict V        only events with verdict V: denied, audited, detected, killed or noted\n"
    "                     (repeatable; loss and suppressed records are always shown)\n"
    "  --pid PID          only the events of process PID (loss and suppressed records too)\n"
    "  --until TIME       only events that happened at or before TIME (without -f)\n"
    "  --since TIME       first replay the agent's audit file from TIME, then continue with live\n"
    "                     events; nothing is missed or repeated\n"
    "  TIME is a duration ago (90s, 10m, 2h, 1d) or a UTC time as events carry it\n"
    "  (2026-12-04T21:30:00Z, fractions of a second allowed).\n"
    "  -o, --output FMT   json (default) or compact; an event the policy's spec.quiet expects is\n"
    "                     \"quiet\": true in json, \"denied (quiet)\" in compact\n"
    "\n"
    "With an agent running, events stream from it over its socket (many tails at once; a tail that\n"
    "reads too slowly misses events, is told how many, and is disconnected with a reason if it falls\n"
    "too far behind; the agent's sinks are never held up). Without -f, tail prints what was waiting\n"
    "in the ring buffers (and the --since replay) and exits.\n"
    "\n"
    "Without an agent, tail reads the ring buffers itself and says so on stderr: reading consumes\n"
    "the events, so run one reader at a time, and --kind discards the events it does not show.\n"
    "The socket is $CORDON_AGENT_SOCKET, else the one in /etc/cordon/agent.yaml, else\n"
    "/run/cordon/agent.sock.\n"
    "\n"
    "Exit status: 0 (also after SIGINT/SIGTERM), 1 failure or disconnected by the agent, 2 usage.\n";


int PolicyCheck(const Args& args) {
  ParsedArgs parsed;
  std::string error;
  if (!ParseArgs(args, {{"--quiet", "-q"}, {"--default", ""}}, &parsed, &error)) {
    Usage(error, kPolicyHelp);
    return 2;
  }
  std::vector<std::string> files = parsed.positionals;
  if (files.empty() && !parsed.Has("--default")) {
    Usage("policy check needs at least one FILE (or --default)", kPolicyHelp);
    return 2;
  }
  if (parsed.Has("--default")) files.insert(files.begin(), "");
  int status = 0;
  for (const auto& file : files) {
    auto compiled = LoadPolicy(file, "", "", /*check_host=*/false);
    if (!compiled) {
      status = 1;
      continue;
    }
    // Name rules: valid, but refused by whatever would put them in force
    // (CheckHostPaths' first errors); here a warning.
    const std::vector<std::string> unenforced = policy::UnenforcedNameRules(*compiled);
    for (const auto& line : unenforced) std::fprintf(stderr, "cordon: warning: %s\n", line.c_str());
    ops::HostPathCheck host = ops::CheckHostPaths(&*compiled);
    host.errors.erase(host.errors.begin(), host.errors.begin() + static_cast<std::ptrdiff_t>(unenforced.size()));
    if (!file.empty() && !host.errors.empty()) {
      for (const auto& line : host.errors) std::fprintf(stderr, "%s\n", line.c_str());
      PrintError("policy " + file + " cannot be used on this host (" + std::to_string(host.errors.size()) +
                 " missing path" + (host.errors.size() == 1 ? "" : "s") + ")");
      status = 1;
      continue;
    }
    for (const auto& line : host.warnings) std::fprintf(stderr, "cordon: warning: %s\n", line.c_str());
    if (parsed.Has("--quiet")) continue;
    std::printf("%s: ok\n", file.empty() ? "<default>" : file.c_str());
    std::fputs(policy::Describe(*compiled).c_str(), stdout);
    if (IsRoot())
      for (const auto& line : UnenforcedControls(*compiled, ProbeLsm()))
        std::printf("  not enforced here: %s\n", line.c_str());
  }
  return status;
}

}  // namespace

int PolicyCommand(const Args& args) {
  if (args.empty() || WantsHelp(args)) {
    std::fputs(kPolicyHelp, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "check") return PolicyCheck(Args(args.begin() + 1, args.end()));
  Usage("unknown policy subcommand '" + args[0] + "'", kPolicyHelp);
  return 2;
}

namespace {

// attach and update: `update` only replaces the policy of an attached sandbox.
int AttachOrUpdate(const Args& args, bool update) {
  const char* help = update ? kUpdateHelp : kAttachHelp;
  if (WantsHelp(args)) return std::fputs(help, stdout), 0;
  ParsedArgs parsed;
  std::string error;
  std::vector<OptionSpec> specs = {{"--cgroup", "", true}, {"--policy", "", true}, ModeOption(),
                                {"--allow-degraded", ""}, QuietOption()};
  if (!update) specs.push_back(SandboxNameOption());
  if (!ParseArgs(args, specs, &parsed, &error)) {
    Usage(error, help);
    return 2;
  }
  if (!parsed.positionals.empty()) return Usage("unexpected argument '" + parsed.positionals[0] + "'", help), 2;
  auto cgroup_arg = parsed.Get("--cgroup");
  if (!cgroup_arg) return Usage("--cgroup PATH is required", help), 2;
  if (update && !parsed.Has("--policy")) return Usage("update needs --policy FILE", help), 2;
  AttachOptions options;
  options.name = parsed.Get("--name").value_or("");
  const std::string policy_path = parsed.Get("--policy").value_or("");
  const std::string mode = parsed.Get("--mode").value_or("");
  auto compiled = LoadPolicy(policy_path, mode,  // file:line errors here, before anything is sent
                             update ? "the sandbox keeps its current policy" : "nothing attached");
  if (!compiled) return 1;
  if (!IsRoot()) return PrintError(std::string(update ? "update" : "attach") + " needs root (CAP_SYS_ADMIN and CAP_BPF); nothing attached"), 1;
  auto cgroup = ResolveCgroup(*cgroup_arg);
  if (!cgroup) return PrintError(cgroup.error().ToString() + "; nothing attached"), 1;
  if (update && !GetSandbox(cgroup->id))
    return PrintError("no sandbox is attached to " + cgroup->path + " (use `cordon attach`)"), 1;

  // With an agent, it attaches: the retroactive check's events then reach the
  // audit sinks and tailers, and it reads the sandbox's events at once.
  bool agent_failed = false;
  auto sandboxes = PickSandboxes(&agent_failed);
  if (!sandboxes) return 1;
  ops::AttachRequest request;
  request.cgroup = cgroup->path;
  request.sandbox_id = cgroup->id;
  request.policy_file = policy_path;
  request.compiled = std::move(*compiled);  // directly: as checked above (the agent compiles the file's text)
  request.mode = mode;
  request.name = options.name;
  request.allow_degraded = parsed.Has("--allow-degraded");
  request.wording = ops::Wording::kCli;
  // Directly, the built-in issuer's settings come from the agent's
  // configuration (the agent uses its own).
  for (const auto& c : request.compiled->credentials) {
    if (c.oidc_audience.empty()) continue;
    agent::AgentConfig config;
    policy::Diagnostics diags;
    if (!agent::LoadAgentConfig("", false, &config, &diags)) {
      std::fputs(policy::FormatDiagnostics(diags).c_str(), stderr);
      return PrintError(std::string("agent configuration ") + agent::kDefaultConfigPath +
                        " rejected (the built-in issuer's settings are there); nothing attached"),
             1;
    }
    request.oidc.issuer = config.OidcIssuer();
    request.oidc.key_dir = config.oidc_key_dir;
    request.oidc.setting =
        config.file.empty() ? std::string(agent::kDefaultConfigPath) + " (absent: the defaults)" : config.file;
    break;
  }
  auto out = update ? sandboxes->Update(request) : sandboxes->Attach(request);
  out.notes = NotesToShow(out.notes, false);  // on a terminal: once per terminal session
  AttachReport report = RenderAttachOutcome(out);
  const bool quiet = parsed.Has("--quiet") && report.status == 0;  // a failure is always said
  if (!quiet) std::fputs(report.head.c_str(), stderr);
  std::fputs(report.events.c_str(), stdout);
  std::fflush(stdout);
  if (!quiet) std::fputs(report.tail.c_str(), stderr);
  return report.status;
}

}  // namespace

int AttachCommand(const Args& args) { return AttachOrUpdate(args, false); }
int UpdateCommand(const Args& args) { return AttachOrUpdate(args, true); }

int DetachCommand(const Args& args) {
  if (WantsHelp(args)) return std::fputs(kDetachHelp, stdout), 0;
  ParsedArgs parsed;
  std::string error;
  if (!ParseArgs(args, {{"--cgroup", "", true}, {"--id", "", true}}, &parsed, &error)) {
    Usage(error, kDetachHelp);
    return 2;
  }
  if (!parsed.positionals.empty()) return Usage("unexpected argument '" + parsed.positionals[0] + "'", kDetachHelp), 2;
  if (parsed.Has("--cgroup") == parsed.Has("--id")) return Usage("give exactly one of --cgroup or --id", kDetachHelp), 2;
  if (!IsRoot()) return PrintError("detach needs root"), 1;
  uint64_t id = 0;
  if (auto cg = parsed.Get("--cgroup")) {
    auto cgroup = ResolveCgroup(*cg);
    if (!cgroup) return PrintError(cgroup.error().ToString()), 1;
    id = cgroup->id;
  } else {
    std::string s = *parsed.Get("--id");
    char* end = nullptr;
    id = std::strtoull(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || id == 0) return PrintError("--id: not a cgroup id: " + s), 2;
  }
  // With an agent, it delivers what the ring buffer still holds, then detaches.
  bool agent_failed = false;
  auto sandboxes = PickSandboxes(&agent_failed);
  if (!sandboxes) return 1;
  auto out = sandboxes->Detach({id});
  // An attached sandbox's credentials, revoked: their events (never values).
  for (const auto& event : out.credential_events) std::printf("%s\n", ToJsonLine(event).c_str());
  std::fflush(stdout);
  if (!out.error.empty()) return PrintError(out.error), 1;
  for (const auto& note : out.limit_notes) std::fprintf(stderr, "cordon: %s\n", DisplayText(note).c_str());
  if (!out.credential_error.empty())
    PrintError("detached, but its credentials were not revoked: " + out.credential_error +
               " (a sweep revokes them after their ttl)");
  if (!out.removed_cgroup.empty())
    std::fprintf(stderr,
                 "cordon: the cordon run that made this sandbox has ended (or cannot be found): what was left in "
                 "it was killed and its cgroup %s removed\n",
                 DisplayText(EscapeWorkloadBytes(out.removed_cgroup)).c_str());
  if (out.drained)
    std::fprintf(stderr, "cordon: detached sandbox on cgroup id %llu (the agent delivered its last %llu events)\n",
                 static_cast<unsigned long long>(id), static_cast<unsigned long long>(*out.drained));
  else
    std::fprintf(stderr, "cordon: detached sandbox on cgroup id %llu\n", static_cast<unsigned long long>(id));
  return 0;
}

bool ParseTimeWindow(const ParsedArgs& parsed, int64_t* since_ns, int64_t* until_ns, const char* help) {
  // A duration ago, or a time as events carry it (RFC 3339, UTC).
  auto time_bound = [](const std::string& text, int64_t* ns) {
    int64_t ago = 0;
    if (ParseDuration(text, &ago) && ago > 0) {
      *ns = std::max<int64_t>(1, RealNs() - ago);
      return true;
    }
    google::protobuf::Timestamp t;
    if (text.size() < 20 || !google::protobuf::util::TimeUtil::FromString(text, &t)) return false;
    *ns = std::max<int64_t>(1, google::protobuf::util::TimeUtil::TimestampToNanoseconds(t));
    return true;
  };
  for (const char* option : {"--since", "--until"}) {
    auto value = parsed.Get(option);
    if (!value) continue;
    if (!time_bound(*value, std::string(option) == "--since" ? since_ns : until_ns))
      return Usage(std::string(option) + " takes a duration such as 90s, 10m, 2h or 1d, or a UTC time such as " +
                       "2026-12-04T21:30:00Z, not " + Quoted(*value),
                   help);
  }
  if (*until_ns && *since_ns > *until_ns) return Usage("--since is after --until: no event is between them", help);
  return true;
}

std::vector<std::string> AgentAuditFiles() {
  agent::AgentConfig config;
  policy::Diagnostics diags;
  std::string audit = agent::LoadAgentConfig("", false, &config, &diags) ? config.AuditPath() : "";
  std::vector<std::string> files;
  if (audit.empty()) return files;
  for (int k = 1000; k >= 1; --k)
    if (::access((audit + "." + std::to_string(k)).c_str(), R_OK) == 0)
      files.push_back(audit + "." + std::to_string(k));
  files.push_back(audit);
  return files;
}

namespace {
std::atomic<bool> g_tail_stop{false};
void OnTailSignal(int) { g_tail_stop = true; }
}  // namespace

int TailCommand(const Args& args) {
  if (WantsHelp(args)) return std::fputs(kTailHelp, stdout), 0;
  ParsedArgs parsed;
  std::string error;
  if (!ParseArgs(args,
                 {{"--follow", "-f"},
                  {"--cgroup", "", true, true},
                  {"--sandbox", "", true},
                  {"--kind", "", true},
                  {"--verdict", "", true, true, {"denied", "audited", "detected", "killed", "noted"}},
                  {"--pid", "", true},
                  {"--since", "", true},
                  {"--until", "", true},
                  {"--output", "-o", true}},
                 &parsed, &error) ||
      !parsed.positionals.empty()) {
    Usage(error.empty() ? "unexpected argument '" + parsed.positionals[0] + "'" : error, kTailHelp);
    return 2;
  }
  std::string format = parsed.Get("--output").value_or("json");
  if (format != "json" && format != "compact") return Usage("-o must be json or compact", kTailHelp), 2;
  TailOptions options;
  options.follow = parsed.Has("--follow");
  options.json = format == "json";
  options.colour = !options.json && ColourWanted(stdout);
  options.sandbox_name = parsed.Get("--sandbox").value_or("");
  options.kind_prefix = parsed.Get("--kind").value_or("");
  if (!ParseTimeWindow(parsed, &options.since_unix_ns, &options.until_unix_ns, kTailHelp)) return 2;
  if (options.until_unix_ns && options.follow)
    return Usage("--until ends the events shown, -f follows new ones: give one of them", kTailHelp), 2;
  if (parsed.options.count("--verdict")) options.verdicts = parsed.options.at("--verdict");
  if (auto pid = parsed.Get("--pid")) {
    char* end = nullptr;
    const unsigned long v = std::strtoul(pid->c_str(), &end, 10);
    if (pid->empty() || *end || (*pid)[0] == '-' || v == 0 || v > 4194304)
      return Usage("--pid takes a process id (1-4194304), not " + Quoted(*pid), kTailHelp), 2;
    options.pid = static_cast<uint32_t>(v);
  }
  if (!IsRoot()) return PrintError("tail needs root"), 1;
  // A name no sandbox has: said, since a typo would otherwise show nothing, silently.
  if (!options.sandbox_name.empty()) {
    auto attached = ListSandboxes();
    bool known = false;
    if (attached)
      for (const auto& s : *attached) known = known || s.name == options.sandbox_name;
    if (attached && !known)
      std::fprintf(stderr, "cordon: warning: no sandbox named %s is attached now%s\n",
                   Quoted(options.sandbox_name).c_str(),
                   options.follow ? " (its events are shown if one is attached while this tail runs)"
                                  : (options.since_unix_ns ? " (the replay may still have its events)" : ""));
  }
  if (parsed.Has("--cgroup")) {
    for (const auto& cg : parsed.options.at("--cgroup")) {
      auto cgroup = ResolveCgroup(cg);
      if (!cgroup) return PrintError(cgroup.error().ToString()), 1;
      options.sandbox_ids.push_back(cgroup->id);
    }
  }

  std::optional<agent::AgentClient> client;
  bool agent_failed = false;
  if (agent::ReachAgent(&client, &agent_failed)) return TailThroughAgent(*client, options);
  if (agent_failed) return 1;

  // No agent: read the ring buffers here (this consumes their events).
  PrintNote("no agent is running (" + agent::AgentSocketPath() +
            "): reading the ring buffers directly, which consumes their events");
  auto list = ListSandboxes();
  if (!list) return PrintError(list.error().ToString()), 1;
  std::vector<SandboxInfo*> chosen;
  for (auto& s : *list) {
    if (!options.sandbox_ids.empty() &&
        std::find(options.sandbox_ids.begin(), options.sandbox_ids.end(), s.id) == options.sandbox_ids.end())
      continue;
    if (!options.sandbox_name.empty() && s.name != options.sandbox_name) continue;
    chosen.push_back(&s);
  }
  if (!options.sandbox_ids.empty() && chosen.empty()) return PrintError("no sandbox is attached to that cgroup"), 1;
  if (options.since_unix_ns > 0) {
    // The agent's audit file (and its rotations), from its configuration.
    std::vector<std::string> files = AgentAuditFiles();
    if (files.empty()) {
      PrintNote("--since: no audit file is configured; nothing to replay");
    } else {
      for (const auto& file : files) {
        UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
        if (fd.valid() && !ReplayAuditFile(fd.get(), 0, options)) return 1;
      }
    }
  }
  auto mount = FindCgroup2Mount();
  if (!mount) return PrintError(mount.error().ToString()), 1;
  StreamSink sink(STDOUT_FILENO, options.json ? StreamSink::Format::kJson : StreamSink::Format::kCompact,
                  options.colour);
  bool write_failed = false;
  EventReader reader(*mount, [&](const cordon::v1::AuditEvent& event) {
    if (!agent::TailMatches(event, options)) return;
    if (!sink.Write(event).ok()) write_failed = true;
  });
  std::map<uint64_t, SandboxContext> contexts;  // as the reader has them
  for (SandboxInfo* s : chosen) {
    auto events = OpenSandboxMap(s->id, "events");
    auto counters = OpenSandboxMap(s->id, "counters");
    if (!events || !counters) continue;
    const SandboxContext& ctx = contexts[s->id] = DirectReaderContext(*s);
    Status st = reader.Add(ctx, std::move(*events), std::move(*counters));
    if (!st.ok()) return PrintError(st.error().ToString()), 1;
  }
  struct sigaction sa = {};
  sa.sa_handler = OnTailSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  reader.CheckLosses();
  auto drained = reader.Drain();
  if (!drained) return PrintError(drained.error().ToString()), 1;
  // Once: what is there now, the counts of repeats the kernel holds too.
  if (!options.follow) reader.CheckLosses(/*final=*/true);
  while (options.follow && !g_tail_stop && !write_failed) {
    struct pollfd ready = {reader.epoll_fd(), POLLIN, 0};
    if (::poll(&ready, 1, 200) < 0 && errno != EINTR) return PrintError(SysError("poll").ToString()), 1;
    // A policy replaced since the last look, before what is ready is read:
    // its names, and its spec.quiet patterns for what happened from its
    // replacement on (what happened before is judged by the old ones).
    for (SandboxInfo* s : chosen) {
      auto now = GetSandbox(s->id);
      if (!now || now->generation == s->generation) continue;
      *s = std::move(*now);
      SandboxContext& ctx = contexts[s->id];
      const SandboxContext next = DirectReaderContext(*s);
      ctx.name = next.name;
      ctx.policy = next.policy;
      ctx.Replaced(next.quiet, static_cast<int64_t>(s->updated_at_ns), next.policy_digest);
      reader.Update(ctx);
    }
    auto n = reader.Drain();
    if (!n) return PrintError(n.error().ToString()), 1;
    reader.CheckLosses();
  }
  std::fflush(stdout);
  return write_failed ? 1 : 0;
}

namespace {

const char* kMainHelp =
    "usage: cordon <command> [options]\n"
    "\n"
    "Confines untrusted code in the kernel with eBPF: default-deny network egress, files, exec and\n"
    "dangerous system calls per cgroup.\n"
    "\n"
    "commands:\n"
    "  run [--policy FILE] [--audit FILE] -- CMD ARGS...   run a command in a fresh sandbox\n"
    "  attach --cgroup PATH [--policy FILE]                 confine an existing cgroup v2\n"
    "  update --cgroup PATH --policy FILE                   replace a sandbox's policy atomically\n"
    "  detach --cgroup PATH                                 remove a sandbox\n"
    "  contain --cgroup PATH [--kill] [--reason TEXT]       deny everything, freeze, take evidence\n"
    "  release --cgroup PATH                                undo a containment: its policy again\n"
    "  status [--json] [--watch]                            the sandboxes' counters, the agent\n"
    "  ls [--json]                                          sandboxes: owner, age, policy digest, processes\n"
    "  tail [-f] [--sandbox NAME] [--since DUR] [-o FMT]    print violation events\n"
    "  agent [--config FILE]                                the event daemon (sinks, tail, metrics)\n"
    "  policy check FILE...                                 validate and explain policies\n"
    "  doctor [--json]                                      what this kernel lets cordon enforce\n"
    "  audit verify FILE...                                 check the audit files' hash chain\n"
    "  explain EVENT | --address A:P | --path P --access R  which rule allows it, or why none does\n"
    "  learn [--policy BASE] [--out FILE] -- CMD ARGS...   a least-privilege policy from a run or a cgroup\n"
    "  report [--sandbox NAME] [--audit FILE...] [-o FMT]   the impact of a sandbox, from its audit trail\n"
    "  regress capture|run                                  regression tests from violations (CI, JUnit)\n"
    "  oidc show|rotate|publish                             the built-in credential issuer's keys\n"
    "\n"
    "Enforcement is pinned in the kernel and never depends on a cordon process, the agent\n"
    "included. Exit status: 0 success, 1 failure (nothing half-done), 2 usage errors.\n"
    "`cordon <command> --help` (or `cordon help <command>`) explains each. `cordon --version`\n"
    "prints the version.\n";

}  // namespace

int Main(int argc, char** argv) {
  using Command = int (*)(const Args&);
  static const std::pair<const char*, Command> kCommands[] = {
      {"run", RunCommand},         {"attach", AttachCommand},   {"update", UpdateCommand},   {"detach", DetachCommand},
      {"status", StatusCommand},   {"ls", LsCommand},           {"tail", TailCommand},       {"agent", AgentCommand},
      {"policy", PolicyCommand},   {"doctor", DoctorCommand},   {"audit", AuditCommand},     {"oidc", OidcCommand},
      {"explain", ExplainCommand}, {"contain", ContainCommand}, {"release", ReleaseCommand}, {"learn", LearnCommand},
      {"report", ReportCommand},   {"regress", RegressCommand},
  };
  auto find = [](const std::string& name) -> Command {
    for (const auto& [n, fn] : kCommands)
      if (name == n) return fn;
    return nullptr;
  };
  Args args(argv + 1, argv + argc);
  if (args.empty()) {
    std::fputs(kMainHelp, stderr);
    return 2;
  }
  const std::string cmd = args[0];
  Args rest(args.begin() + 1, args.end());
  if (cmd == "-h" || cmd == "--help" || (cmd == "help" && rest.empty())) return std::fputs(kMainHelp, stdout), 0;
  if (cmd == "--version" || cmd == "version") return std::printf("cordon %s\n", CORDON_VERSION), 0;
  if (cmd == "help") {  // `cordon help run`: that command's help
    if (Command fn = find(rest[0]); fn && rest.size() == 1) return fn({"--help"});
    PrintError(rest.size() == 1 ? "no command '" + DisplayText(EscapeWorkloadBytes(rest[0])) + "' to explain"
                                : std::string("help takes one command name"));
    std::fputs(kMainHelp, stderr);
    return 2;
  }
  if (Command fn = find(cmd)) return fn(rest);
  PrintError("unknown command '" + DisplayText(EscapeWorkloadBytes(cmd)) + "'");
  std::fputs(kMainHelp, stderr);
  return 2;
}

}  // namespace cordon::cli
