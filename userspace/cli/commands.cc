#include "cli/commands.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <sstream>

#include "abi/cordon_common.h"
#include "cli/args.h"
#include "cli/common.h"
#include "events/reader.h"
#include "events/sink.h"
#include "loader/cgroup.h"
#include "loader/kernel_features.h"
#include "loader/sandbox.h"
#include "policy/describe.h"
#include "policy/parser.h"
#include "util/fs.h"

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

std::optional<policy::CompiledPolicy> LoadPolicy(const std::string& path, const std::string& mode_override) {
  policy::CompiledPolicy compiled;
  if (path.empty()) {
    compiled = policy::DefaultPolicy();
  } else {
    policy::ParsedPolicy parsed;
    policy::Diagnostics diags;
    if (!policy::ParsePolicyFile(path, &parsed, &diags) || !policy::Compile(parsed, &compiled, &diags)) {
      std::fputs(policy::FormatDiagnostics(diags).c_str(), stderr);
      if (!diags.empty() && policy::FormatDiagnostics(diags).back() != '\n') std::fputc('\n', stderr);
      PrintError("policy " + path + " rejected (" + std::to_string(diags.size()) + " error" +
                 (diags.size() == 1 ? "" : "s") + "); nothing attached");
      return std::nullopt;
    }
  }
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

namespace {

const char* kPolicyHelp =
    "usage: cordon policy check [--quiet] FILE...\n"
    "       cordon policy check --default\n"
    "\n"
    "Parses and compiles each policy file (YAML or JSON), prints what it allows\n"
    "and which of its controls this kernel and build do not enforce.\n"
    "Exit status: 0 if every file is valid, 1 otherwise (errors name file:line:column and field).\n";

const char* kAttachHelp =
    "usage: cordon attach --cgroup PATH [--policy FILE] [--mode enforce|audit] [--name NAME]\n"
    "                     [--allow-degraded]\n"
    "\n"
    "Confines every process in an existing cgroup v2 directory, and any cgroup created below it,\n"
    "from this moment: processes already inside are confined too. PATH is absolute or relative to\n"
    "the cgroup2 mount. Enforcement is pinned under bpffs and persists after cordon exits.\n"
    "Attaching again to the same cgroup atomically replaces its policy (counters and pending\n"
    "events are kept). Without --policy the built-in default applies (no egress at all).\n"
    "Events stay in the sandbox's ring buffer until `cordon tail` reads them.\n"
    "\n"
    "If this kernel cannot enforce some control the policy asks for (see `cordon doctor`), attach\n"
    "refuses, naming them, unless --allow-degraded is given: then it attaches what the kernel can\n"
    "enforce and reports the rest as not enforced.\n";

const char* kDetachHelp =
    "usage: cordon detach (--cgroup PATH | --id CGROUP_ID)\n"
    "\n"
    "Detaches every program of the sandbox and removes its pinned state. --id serves when the\n"
    "cgroup itself was already removed (see `cordon status`).\n";

const char* kStatusHelp =
    "usage: cordon status [--json]\n"
    "\n"
    "Lists attached sandboxes: name, cgroup, policy, mode, denial counters, lost events, and\n"
    "what the kernel enforces. --json prints one JSON object (fields documented in README).\n";

const char* kTailHelp =
    "usage: cordon tail [-f] [--cgroup PATH] [-o json|compact]\n"
    "\n"
    "Reads the violation events waiting in attached sandboxes' ring buffers and prints them\n"
    "(json: the audit-file format; compact: one line for people). -f keeps following. Reading\n"
    "consumes the events: run one reader at a time.\n";

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
    auto compiled = LoadPolicy(file, "");
    if (!compiled) {
      status = 1;
      continue;
    }
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

int AttachCommand(const Args& args) {
  if (WantsHelp(args)) return std::fputs(kAttachHelp, stdout), 0;
  ParsedArgs parsed;
  std::string error;
  if (!ParseArgs(args,
                 {{"--cgroup", "", true}, {"--policy", "", true}, {"--mode", "", true}, {"--name", "", true},
                  {"--allow-degraded", ""}},
                 &parsed, &error)) {
    Usage(error, kAttachHelp);
    return 2;
  }
  if (!parsed.positionals.empty()) return Usage("unexpected argument '" + parsed.positionals[0] + "'", kAttachHelp), 2;
  auto cgroup_arg = parsed.Get("--cgroup");
  if (!cgroup_arg) return Usage("--cgroup PATH is required", kAttachHelp), 2;
  AttachOptions options;
  options.name = parsed.Get("--name").value_or("");
  if (options.name.size() >= 64) return PrintError("--name is longer than 63 bytes"), 2;
  auto compiled = LoadPolicy(parsed.Get("--policy").value_or(""), parsed.Get("--mode").value_or(""));
  if (!compiled) return 1;
  if (!IsRoot()) return PrintError("attach needs root (CAP_SYS_ADMIN and CAP_BPF); nothing attached"), 1;
  auto cgroup = ResolveCgroup(*cgroup_arg);
  if (!cgroup) return PrintError(cgroup.error().ToString() + "; nothing attached"), 1;
  std::vector<std::string> missing = UndeliverableInAttach(*compiled, ProbeLsm());
  if (!missing.empty() && !parsed.Has("--allow-degraded")) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : "; ") + m;
    PrintError("this kernel cannot enforce, for processes cordon attaches to: " + list + " (" + ProbeLsm().detail +
               "). Nothing attached; pass --allow-degraded to enforce only the rest, or see `cordon doctor`");
    return 1;
  }
  auto result = AttachSandbox(*cgroup, *compiled, options);
  if (!result) return PrintError(result.error().ToString() + "; nothing attached"), 1;
  const SandboxInfo& info = result->info;
  std::fprintf(stderr, "cordon: %s sandbox '%s' on %s (cgroup id %llu): policy '%s', mode %s\n",
               result->replaced ? "replaced policy of" : "attached", info.name.c_str(), cgroup->path.c_str(),
               static_cast<unsigned long long>(info.id), compiled->name.c_str(), ModeName(compiled->mode).c_str());
  if (result->replaced)
    std::fprintf(stderr, "cordon: the network programs were swapped in %.1f us (each hook atomically)\n",
                 static_cast<double>(result->swap_ns) / 1000.0);
  for (const auto& line : UnenforcedControls(*compiled, ProbeLsm())) PrintNote(line);
  for (const auto& path : result->skipped_paths) PrintNote("profile path absent on this host, skipped: " + path);
  return 0;
}

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
  Status detached = DetachSandbox(id);
  if (!detached.ok()) return PrintError(detached.error().ToString()), 1;
  std::fprintf(stderr, "cordon: detached sandbox on cgroup id %llu\n", static_cast<unsigned long long>(id));
  return 0;
}

int StatusCommand(const Args& args) {
  if (WantsHelp(args)) return std::fputs(kStatusHelp, stdout), 0;
  ParsedArgs parsed;
  std::string error;
  if (!ParseArgs(args, {{"--json", ""}}, &parsed, &error) || !parsed.positionals.empty()) {
    Usage(error.empty() ? "unexpected argument" : error, kStatusHelp);
    return 2;
  }
  if (!IsRoot()) return PrintError("status needs root (it reads pinned BPF state)"), 1;
  auto list = ListSandboxes();
  if (!list) return PrintError(list.error().ToString()), 1;
  if (parsed.Has("--json")) {
    std::ostringstream out;
    const LsmAvailability& lsm = ProbeLsm();
    out << "{\"enforcement\":" << JsonString(EnforcementSummary(lsm)) << ",\"bpfLsm\":{\"listed\":"
        << (lsm.listed ? "true" : "false") << ",\"loadable\":" << (lsm.loadable ? "true" : "false")
        << ",\"usable\":" << (lsm.usable() ? "true" : "false") << ",\"detail\":" << JsonString(lsm.detail)
        << "},\"sandboxes\":[";
    bool first = true;
    for (const auto& s : *list) {
      if (!first) out << ",";
      first = false;
      const auto& c = s.counters;
      out << "{\"id\":" << s.id << ",\"name\":" << JsonString(s.name) << ",\"cgroup\":" << JsonString(s.cgroup_path)
          << ",\"cgroupAlive\":" << (s.cgroup_alive ? "true" : "false") << ",\"policy\":" << JsonString(s.policy)
          << ",\"mode\":" << JsonString(ModeName(s.mode)) << ",\"generation\":" << s.generation
          << ",\"ephemeral\":" << (s.ephemeral ? "true" : "false") << ",\"enforcementLevel\":"
          << JsonString(s.Level())
          << ",\"denied\":{\"connect\":" << c[CORDON_CNT_DENIED_CONNECT]
          << ",\"sendmsg\":" << c[CORDON_CNT_DENIED_SENDMSG]
          << ",\"socket\":" << c[CORDON_CNT_DENIED_SOCKET] + c[CORDON_CNT_DENIED_LSM_NET]
          << ",\"file\":" << c[CORDON_CNT_DENIED_FILE] << ",\"tamper\":" << c[CORDON_CNT_DENIED_TAMPER] << "}"
          << ",\"audited\":{\"connect\":" << c[CORDON_CNT_AUDITED_CONNECT]
          << ",\"sendmsg\":" << c[CORDON_CNT_AUDITED_SENDMSG]
          << ",\"socket\":" << c[CORDON_CNT_AUDITED_SOCKET] + c[CORDON_CNT_AUDITED_LSM_NET]
          << ",\"file\":" << c[CORDON_CNT_AUDITED_FILE] << ",\"tamper\":" << c[CORDON_CNT_AUDITED_TAMPER]
          << "},\"allowed\":{\"connect\":" << c[CORDON_CNT_ALLOWED_CONNECT]
          << ",\"sendmsg\":" << c[CORDON_CNT_ALLOWED_SENDMSG] << "},\"eventsDropped\":" << c[CORDON_CNT_EVENTS_DROPPED]
          << ",\"problem\":" << JsonString(s.problem) << "}";
    }
    out << "]}\n";
    std::fputs(out.str().c_str(), stdout);
    return 0;
  }
  std::printf("%s\n", EnforcementSummary(ProbeLsm()).c_str());
  if (list->empty()) {
    std::printf("no sandboxes attached\n");
    return 0;
  }
  std::printf("%-20s %-12s %-32s %-16s %-7s %-29s %-30s %-8s %s\n", "SANDBOX", "CGROUP-ID", "CGROUP", "POLICY",
              "MODE", "LEVEL", "DENIED conn/send/sock/file/tamp", "AUDITED", "DROPPED");
  for (const auto& s : *list) {
    const auto& c = s.counters;
    std::string denied = std::to_string(c[CORDON_CNT_DENIED_CONNECT]) + "/" +
                         std::to_string(c[CORDON_CNT_DENIED_SENDMSG]) + "/" +
                         std::to_string(c[CORDON_CNT_DENIED_SOCKET] + c[CORDON_CNT_DENIED_LSM_NET]) + "/" +
                         std::to_string(c[CORDON_CNT_DENIED_FILE]) + "/" + std::to_string(c[CORDON_CNT_DENIED_TAMPER]);
    uint64_t audited = c[CORDON_CNT_AUDITED_CONNECT] + c[CORDON_CNT_AUDITED_SENDMSG] + c[CORDON_CNT_AUDITED_SOCKET] +
                       c[CORDON_CNT_AUDITED_LSM_NET] + c[CORDON_CNT_AUDITED_FILE] + c[CORDON_CNT_AUDITED_TAMPER];
    std::string cgroup = s.cgroup_path + (s.cgroup_alive ? "" : " (removed)");
    std::printf("%-20s %-12llu %-32s %-16s %-7s %-29s %-30s %-8llu %llu\n", s.name.c_str(),
                static_cast<unsigned long long>(s.id), cgroup.c_str(), s.policy.c_str(), ModeName(s.mode).c_str(),
                s.Level().c_str(), denied.c_str(), static_cast<unsigned long long>(audited),
                static_cast<unsigned long long>(c[CORDON_CNT_EVENTS_DROPPED]));
    if (!s.problem.empty()) std::printf("  problem: %s\n", s.problem.c_str());
  }
  return 0;
}

namespace {
std::atomic<bool> g_tail_stop{false};
void OnTailSignal(int) { g_tail_stop = true; }
}  // namespace

int TailCommand(const Args& args) {
  if (WantsHelp(args)) return std::fputs(kTailHelp, stdout), 0;
  ParsedArgs parsed;
  std::string error;
  if (!ParseArgs(args, {{"--follow", "-f"}, {"--cgroup", "", true}, {"--output", "-o", true}}, &parsed, &error) ||
      !parsed.positionals.empty()) {
    Usage(error.empty() ? "unexpected argument" : error, kTailHelp);
    return 2;
  }
  std::string format = parsed.Get("--output").value_or("json");
  if (format != "json" && format != "compact") return Usage("-o must be json or compact", kTailHelp), 2;
  if (!IsRoot()) return PrintError("tail needs root"), 1;
  uint64_t only_id = 0;
  if (auto cg = parsed.Get("--cgroup")) {
    auto cgroup = ResolveCgroup(*cg);
    if (!cgroup) return PrintError(cgroup.error().ToString()), 1;
    only_id = cgroup->id;
  }
  auto mount = FindCgroup2Mount();
  if (!mount) return PrintError(mount.error().ToString()), 1;
  StreamSink sink(STDOUT_FILENO, format == "json" ? StreamSink::Format::kJson : StreamSink::Format::kCompact);
  bool write_failed = false;
  EventReader reader(*mount, [&](const cordon::v1::AuditEvent& event) {
    if (!sink.Write(event).ok()) write_failed = true;
  });
  auto list = ListSandboxes();
  if (!list) return PrintError(list.error().ToString()), 1;
  int added = 0;
  for (const auto& s : *list) {
    if (only_id && s.id != only_id) continue;
    auto events = OpenSandboxMap(s.id, "events");
    auto counters = OpenSandboxMap(s.id, "counters");
    if (!events || !counters) continue;
    SandboxContext ctx{s.id, s.name, s.policy, s.cgroup_path};
    Status st = reader.Add(ctx, std::move(*events), std::move(*counters));
    if (!st.ok()) return PrintError(st.error().ToString()), 1;
    added++;
  }
  if (only_id && added == 0) return PrintError("no sandbox is attached to that cgroup"), 1;
  struct sigaction sa = {};
  sa.sa_handler = OnTailSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  reader.CheckLosses();
  auto drained = reader.Drain();
  if (!drained) return PrintError(drained.error().ToString()), 1;
  while (parsed.Has("--follow") && !g_tail_stop && !write_failed) {
    auto n = reader.Poll(200);
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
    "Confines untrusted code in the kernel with eBPF: default-deny network egress per cgroup.\n"
    "\n"
    "commands:\n"
    "  run [--policy FILE] [--audit FILE] -- CMD ARGS...   run a command in a fresh sandbox\n"
    "  attach --cgroup PATH [--policy FILE]                 confine an existing cgroup v2\n"
    "  detach --cgroup PATH                                 remove a sandbox\n"
    "  status [--json]                                      list sandboxes and counters\n"
    "  tail [-f] [--cgroup PATH] [-o json|compact]          print violation events\n"
    "  policy check FILE...                                 validate and explain policies\n"
    "  doctor [--json]                                      what this kernel lets cordon enforce\n"
    "\n"
    "`cordon <command> --help` explains each. `cordon --version` prints the version.\n";

}  // namespace

int Main(int argc, char** argv) {
  Args args(argv + 1, argv + argc);
  if (args.empty()) {
    std::fputs(kMainHelp, stderr);
    return 2;
  }
  const std::string cmd = args[0];
  Args rest(args.begin() + 1, args.end());
  if (cmd == "-h" || cmd == "--help" || cmd == "help") return std::fputs(kMainHelp, stdout), 0;
  if (cmd == "--version" || cmd == "version") return std::printf("cordon %s\n", CORDON_VERSION), 0;
  if (cmd == "policy") return PolicyCommand(rest);
  if (cmd == "attach") return AttachCommand(rest);
  if (cmd == "detach") return DetachCommand(rest);
  if (cmd == "status") return StatusCommand(rest);
  if (cmd == "tail") return TailCommand(rest);
  if (cmd == "run") return RunCommand(rest);
  if (cmd == "doctor") return DoctorCommand(rest);
  PrintError("unknown command '" + cmd + "'");
  std::fputs(kMainHelp, stderr);
  return 2;
}

}  // namespace cordon::cli
