// `cordon run`: a command in a fresh, ephemeral sandbox.
//
// Order matters for "no unconfined window": the cgroup is created and the
// policy attached before the command exists; clone3(CLONE_INTO_CGROUP) then
// creates the child directly inside the sandbox cgroup, so its first
// instruction already runs confined. On the way out, every process left in
// the cgroup is killed before anything is detached.
#include <bpf/bpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/magic.h>
#include <linux/sched.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <cstring>
#include <optional>
#include <random>
#include <vector>

#include "abi/cordon_common.h"
#include "abi/cordon_file.h"
#include "abi/cordon_pins.h"
#include "agent/config.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/notes.h"
#include "cli/run_events.h"
#include "cli/run_sandbox.h"
#include "confine/acl.h"
#include "confine/child.h"
#include "confine/landlock.h"
#include "confine/pty.h"
#include "confine/seccomp.h"
#include "events/decoder.h"
#include "events/sink.h"
#include "loader/kernel_features.h"
#include "loader/sandbox.h"
#include "ops/credentials.h"
#include "ops/ephemeral.h"
#include "ops/name_service.h"
#include "ops/oom_victims.h"
#include "ops/ops.h"
#include "ops/policy_store.h"
#include "ops/resource_watch.h"
#include "sys/bpffs.h"
#include "sys/cgroup.h"
#include "util/clock.h"
#include "util/colour.h"
#include "util/fs.h"
#include "util/text.h"

extern char** environ;

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

namespace cordon::cli {
namespace {

const char* kRunHelp =
    "usage: cordon run [--policy FILE] [--mode enforce|audit] [--audit FILE] [--name NAME]\n"
    "                  [--user dynamic|root|USER|UID[:GID]] [--env NAME[=VALUE]]... [--keep-fd N]...\n"
    "                  [--allow-net ADDR[:PORTS]]... [--read PATH]... [--write PATH]... [--exec PATH]...\n"
    "                  [--timeout DURATION] [--cwd DIR] [--fail-on-violation] [--config FILE]\n"
    "                  [--quiet] [--verbose] -- CMD [ARGS...]\n"
    "       cordon run [options] --print-policy [-- CMD [ARGS...]]\n"
    "\n"
    "Creates a fresh cgroup, attaches the policy (default: the built-in no-egress policy),\n"
    "starts CMD directly inside it (clone3 CLONE_INTO_CGROUP: no unconfined window), forwards\n"
    "SIGTERM/SIGINT/SIGHUP/SIGQUIT/SIGUSR1/SIGUSR2 to it, waits, kills whatever it left behind,\n"
    "removes the cgroup and all its state, and exits with CMD's status (128+N for signal N).\n"
    "Violation events go to --audit FILE (default /var/log/cordon/run-<time>-<pid>.jsonl, removed\n"
    "at the end when no event was written: the summary then says \"audit log: none\"; those of\n"
    "earlier runs older than runLogs.keepDays of the agent configuration, default 30, are removed);\n"
    "a one-line summary is printed to stderr at the end (--quiet too).\n"
    "\n"
    "  --policy FILE   policy (YAML or JSON); default: the built-in one (`cordon policy check --default`)\n"
    "  --mode MODE     enforce (deny and report) or audit (allow and report); overrides the policy\n"
    "  --audit FILE    where this run writes its events, one JSON object per line (0600)\n"
    "  --name NAME     sandbox name in events, status and tokens (default run-<pid>); letters,\n"
    "                  digits and . _ - : @ + (or non-ASCII letters), at most 63 bytes\n"
    "  --user WHO      who CMD runs as (overrides spec.runAs): dynamic (default: a uid and gid of its\n"
    "                  own, reserved for this run), root, a user name, or UID[:GID]; in every case with\n"
    "                  no capabilities but spec.capabilities, and no_new_privs\n"
    "  --env NAME[=VALUE]  pass the caller's NAME, or set it (repeatable; after spec.environment). The\n"
    "                  environment is otherwise PATH, LANG, LC_*, TERM, TZ, HOME and SHELL only\n"
    "  --keep-fd N     keep descriptor N open in CMD (repeatable); every other one above 2 is closed\n"
    "  --cwd DIR       CMD starts in DIR (the policy must let it read DIR; no fallback), not in the\n"
    "                  caller's working directory\n"
    "  --fail-on-violation  exit 123 when CMD succeeded but something was denied, audited, detected\n"
    "                  or killed, or events were lost (for CI); CMD's own failure keeps its status;\n"
    "                  events the policy's spec.quiet expects are counted apart and do not count\n"
    "\n"
    "Inline policy options, merged into the policy (the file's or the default), each repeatable:\n"
    "  --allow-net ADDR[:PORTS][/tcp|/udp]  an egress rule: ADDR an address or CIDR (IPv6 in\n"
    "                  brackets before ports: [::1]:8080), PORTS a comma list of ports and ranges\n"
    "                  (443,8000-8100; omitted: every port), tcp and udp unless one is named\n"
    "  --read PATH / --write PATH / --exec PATH   a spec.files entry (a relative PATH is the\n"
    "                  caller's); the policy must have spec.files (the default policy has)\n"
    "  --timeout DURATION  spec.resources.wallTime (90s, 10m, 1h): replaces the policy's\n"
    "  --mode and --user are merged too (spec.mode, spec.runAs)\n"
    "  --print-policy  print the merged policy (JSON that --policy takes) and run nothing; a\n"
    "                  value an option cannot have is a usage error naming it (exit 2). With an\n"
    "                  option merged, the policy digest (tokens, events) is that text's SHA-256\n"
    "  --config FILE   the agent configuration whose oidc: section the built-in issuer uses\n"
    "                  (default /etc/cordon/agent.yaml; its defaults when that does not exist)\n"
    "  -q, --quiet     no notes (the summary is still printed)\n"
    "  -v, --verbose   every rule the fallback layers below cannot cover, and every note again:\n"
    "                  on a terminal, the notes on what the layers cover are said once per\n"
    "                  terminal session\n"
    "\n"
    "CMD never gets the caller's terminal: it runs in a session of its own and, when stdin, stdout\n"
    "or stderr is a terminal, on a pty that cordon relays. It gets private IPC and UTS namespaces,\n"
    "a fresh session keyring, and a private /tmp and /dev/shm (one tmpfs, removed at the end) unless\n"
    "the policy names paths there. Its working directory is the caller's when the policy lets it\n"
    "read it, else /tmp (said in a note).\n"
    "\n"
    "Where BPF LSM is unusable, the command is also confined before exec by Landlock (file\n"
    "rules; signal and abstract-socket scoping from ABI 6; not its TCP port rules, which name\n"
    "ports, not addresses) and a seccomp filter (socket families, bpf, mounts, modules,\n"
    "namespaces, clock, ptrace, io_uring); their refusals (EACCES, EPERM) are reported as events\n"
    "like the others. cordon prints what these layers cannot cover (--verbose: in detail).\n"
    "\n"
    "spec.credentials: each credential's issue program runs (as root, on the host) before CMD\n"
    "starts; a failure starts nothing. CMD finds it in $NAME_FILE (a file of its own sandbox) or\n"
    "$NAME (deliver: env). At its ttl or when CMD ends it is removed and its revoke program\n"
    "runs; events name it by fingerprint, never by value (README \"Credentials\"). A credential\n"
    "with oidc: is a JWT that cordon signs for this sandbox (the key and the issuer URL come from\n"
    "the agent configuration's oidc: section; `cordon oidc --help`).\n"
    "\n"
    "Name rules (spec.network.egress[].host): cordon runs a DNS resolver for this sandbox, and\n"
    "CMD's DNS to port 53 (any address, UDP or TCP) is answered by it: names no rule allows are\n"
    "refused and never sent upstream (spec.network.dns.upstream, else resolv.conf's servers), and\n"
    "the addresses answered for an allowed name are allowed to this sandbox alone, on the rule's\n"
    "ports, for the answer's TTL (README \"Egress by name\"); dns.query events record the queries.\n"
    "\n"
    "With an agent running (`cordon agent --help`), the agent is the sandbox's only event reader:\n"
    "it adopts the sandbox before CMD starts, writes the events to its own sinks and streams them\n"
    "to this run (for --audit and the summary), and when CMD has ended delivers the rest and\n"
    "detaches. Without one, this run reads the sandbox's events itself.\n"
    "\n"
    "Exit status: CMD's (128+N if killed by signal N), 124 when wallTime (--timeout) ended it, 125\n"
    "when the memory limit's OOM killer killed it, 123 with --fail-on-violation (above), 126 if\n"
    "executing it was refused (the policy or the file's permissions: cordon says which), 127 if it\n"
    "could not be started otherwise, 1 when cordon itself fails and 2 when it is misused before CMD\n"
    "starts.\n";

const int kForwardedSignals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH, SIGCONT};

std::string DefaultAuditPath() {
  char stamp[32];
  time_t now = time(nullptr);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
  return std::string("/var/log/cordon/run-") + stamp + "-" + std::to_string(::getpid()) + ".jsonl";
}

// The default logs of earlier runs (run-*.jsonl in /var/log/cordon) last
// modified longer ago than runLogs.keepDays of the agent configuration
// (default 30; 0 keeps them) are removed: one file per run otherwise piles up
// forever. Only regular files of root's with one link, through a directory
// that is root's and writable by nobody else, never following a link; the
// run's own file is never touched. Best effort: what cannot be removed stays.
void PruneRunLogs(const std::string& config_path, const std::string& own) {
  agent::AgentConfig config;
  policy::Diagnostics diags;
  if (!agent::LoadAgentConfig(config_path, !config_path.empty(), &config, &diags) || config.run_log_keep_days == 0)
    return;
  UniqueFd dir(::open(agent::kDefaultRunLogDir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  struct stat st;
  if (!dir.valid() || ::fstat(dir.get(), &st) != 0 || st.st_uid != 0 || (st.st_mode & 022)) return;
  const time_t oldest = ::time(nullptr) - static_cast<time_t>(config.run_log_keep_days) * 86400;
  const std::string own_name = own.substr(own.rfind('/') + 1);
  DIR* d = ::fdopendir(::dup(dir.get()));
  if (!d) return;
  std::vector<std::string> old;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind("run-", 0) != 0 || name.size() < 10 || name.compare(name.size() - 6, 6, ".jsonl") != 0 ||
        name == own_name)
      continue;
    struct stat f;
    if (::fstatat(dir.get(), name.c_str(), &f, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(f.st_mode) && f.st_uid == 0 &&
        f.st_nlink == 1 && f.st_mtime < oldest)
      old.push_back(name);
  }
  ::closedir(d);
  for (const auto& name : old) (void)::unlinkat(dir.get(), name.c_str(), 0);
}

// A file rule cordon run adds for its own command (required: the path exists).
void AddRunFileRule(policy::CompiledPolicy* policy, const std::string& path, uint32_t rights, const char* origin) {
  policy::FileRule rule;
  rule.path = path;
  rule.rights = rights;
  rule.rule = static_cast<uint32_t>(policy->file_rules.size() + 1);
  rule.required = true;
  rule.origin = origin;
  policy->file_rules.push_back(std::move(rule));
}

// Whether a policy rule names `dir` or something below it, or an ancestor
// of it (then the host's `dir` stays visible to the command).
bool PolicyNames(const policy::CompiledPolicy& policy, const std::string& dir) {
  for (const auto& rule : policy.file_rules) {
    const std::string& p = rule.path;
    if (p == dir || p == "/" || (p.size() > dir.size() && p.compare(0, dir.size(), dir) == 0 && p[dir.size()] == '/') ||
        (dir.size() > p.size() && dir.compare(0, p.size(), p) == 0 && dir[p.size()] == '/'))
      return true;
  }
  return false;
}

// Whether the policy grants `right` (CORDON_FILE_READ, _EXEC) on `path` (some
// rule with it on the path or an ancestor; everything when files are not
// restricted).
bool PolicyGrants(const policy::CompiledPolicy& policy, const std::string& path, uint32_t right) {
  if (!policy.has_files) return true;
  for (const auto& rule : policy.file_rules) {
    const std::string& p = rule.path;
    if (!(rule.rights & right)) continue;
    if (p == "/" || p == path || (path.size() > p.size() && path.compare(0, p.size(), p) == 0 && path[p.size()] == '/'))
      return true;
  }
  return false;
}
bool PolicyReads(const policy::CompiledPolicy& policy, const std::string& dir) {
  return PolicyGrants(policy, dir, CORDON_FILE_READ);
}

// Returned by a step of RunCommand that lets the run go on.
constexpr int kGoOn = -1;

// What `cordon run` prepares before the sandbox exists (in this order).
struct RunPlan {
  ParsedArgs parsed;
  std::vector<std::string> command;
  std::optional<policy::CompiledPolicy> compiled;
  bool quiet = false, verbose = false, fail_on_violation = false;
  std::vector<int> keep_fds;
  std::vector<std::string> cli_env;
  std::optional<IdentityLease> lease;
  RunIdentity identity;
  std::string run_name;      // of its cgroup and its files: run-<pid>-<random>
  std::string sandbox_name;  // in events, status and tokens: --name, else run-<pid>
  std::unique_ptr<ops::Scratch> scratch;  // until the sandbox owns it
  bool has_scratch = false;               // a scratch was made (sized by spec.resources.disk)
  std::vector<std::pair<std::string, std::string>> binds;
  std::vector<ReadOnlyPath> read_only;
  AclGrants grants;
  std::vector<std::string> early_notes;
  std::string home = "/tmp";
  std::vector<std::string> env;
  std::string exe;
  std::string cwd;
  bool exact_cwd = false;  // --cwd: no fallback
  std::unique_ptr<PtyRelay> pty;
  std::unique_ptr<HeldSignals> signals;
  std::optional<LandlockPlan> landlock;
  SeccompPlan seccomp;
  std::vector<std::string> notes;
  bool landlock_applied = false;
  std::string audit_path;
  std::unique_ptr<JsonlFileSink> sink;
  std::unique_ptr<ops::SandboxCredentials> credentials;  // spec.credentials: prepared here, issued once the sandbox exists
  std::unique_ptr<ops::NameService> names;               // name rules: cordon's resolver for the sandbox, while it runs
};

std::string NonEmpty(const std::string& v) { return v.empty() ? "needs a value, not ''" : ""; }

// The command line, the policy and who the command runs as.
int ParseRun(const Args& args, RunPlan* run) {
  if (!args.empty() && (args[0] == "-h" || args[0] == "--help")) return std::fputs(kRunHelp, stdout), 0;
  ParsedArgs& parsed = run->parsed;
  std::string error;
  if (!ParseArgs(args,
                 {{"--policy", "", true},
                  {"--audit", "", true, false, {},
                   [](const std::string& v) {
                     return v == "-" ? std::string("the audit log is a file, not '-' (stdout is the command's)")
                            : v.empty() ? std::string("the audit log needs a file name")
                                        : std::string();
                   }},
                  ModeOption(),
                  SandboxNameOption(),
                  {"--user", "", true},
                  {"--env", "", true, true},
                  {"--keep-fd", "", true, true},
                  {"--config", "", true},
                  QuietOption(),
                  {"--verbose", "-v"},
                  {"--allow-net", "", true, true, {}, NonEmpty},
                  {"--read", "", true, true, {}, NonEmpty},
                  {"--write", "", true, true, {}, NonEmpty},
                  {"--exec", "", true, true, {}, NonEmpty},
                  {"--timeout", "", true, false, {}, NonEmpty},
                  {"--cwd", "", true, false, {},
                   [](const std::string& v) { return v.empty() ? std::string("needs a directory") : std::string(); }},
                  {"--fail-on-violation"},
                  {"--print-policy"},
                  {"--help", "-h"}},
                 &parsed, &error, /*stop_at_first_positional=*/true)) {
    PrintError(error);
    std::fputs(kRunHelp, stderr);
    return 2;
  }
  if (parsed.Has("--help")) return std::fputs(kRunHelp, stdout), 0;
  run->command = parsed.positionals;
  run->command.insert(run->command.end(), parsed.after_dashdash.begin(), parsed.after_dashdash.end());
  const bool print_policy = parsed.Has("--print-policy");
  if (run->command.empty() && !print_policy) {
    PrintError("run needs a command: cordon run [options] -- CMD [ARGS...]");
    return 2;
  }
  if (parsed.Has("--user") && !policy::ValidRunAs(*parsed.Get("--user")))
    return PrintError("--user " + *parsed.Get("--user") + ": expected dynamic, root, a user name, or UID[:GID]"), 2;
  // The inline options, merged into the policy in this order (policy/inline.h).
  const std::vector<policy::InlineOption> inline_options = InlineOptionsOf(parsed);
  int load_status = 1;
  std::string policy_text;
  run->compiled = LoadRunPolicy(parsed.Get("--policy").value_or(""), inline_options,
                                print_policy ? "" : "command not started", &policy_text, &load_status);
  if (!run->compiled) return load_status;
  const auto host = ops::CheckHostPaths(&*run->compiled, /*names_served=*/true);
  if (print_policy) {
    // The effective policy, as `--policy` takes it again; nothing is run.
    for (const auto& line : host.warnings) std::fprintf(stderr, "cordon: warning: %s\n", line.c_str());
    std::fputs(policy_text.c_str(), stdout);
    return std::fflush(stdout) == 0 ? 0 : 1;
  }
  for (auto& line : host.warnings) run->early_notes.push_back(line);
  if (!IsRoot()) return PrintError("run needs root (it creates a cgroup and loads BPF programs)"), 1;
  // The text by its digest, which every event of the run carries.
  if (cordon::Status kept = ops::KeepPolicyText(policy_text, run->compiled->digest); !kept.ok())
    run->early_notes.push_back("the policy's text is not kept by its digest (" + PolicyStoreDir() +
                               "): " + kept.error().ToString());
  run->quiet = parsed.Has("--quiet");
  run->verbose = parsed.Has("--verbose");
  run->fail_on_violation = parsed.Has("--fail-on-violation");

  // ---- what the command gets: identity, environment, descriptors, scratch
  if (auto values = parsed.options.find("--keep-fd"); values != parsed.options.end()) {
    for (const auto& v : values->second) {
      char* end = nullptr;
      long fd = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end || fd < 3 || fd > 1 << 20)
        return PrintError("--keep-fd " + v + ": expected a descriptor number of 3 or more"), 2;
      if (::fcntl(static_cast<int>(fd), F_GETFD) < 0)
        return PrintError("--keep-fd " + v + ": descriptor " + v + " is not open"), 2;
      run->keep_fds.push_back(static_cast<int>(fd));
    }
  }
  if (auto values = parsed.options.find("--env"); values != parsed.options.end()) run->cli_env = values->second;
  const std::string run_as = run->compiled->run_as;  // --user merged into it
  // Capabilities the command keeps must be cordon's own to give.
  {
    struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2] = {};
    if (::syscall(SYS_capget, &header, data) == 0) {
      uint64_t own = data[0].permitted | (static_cast<uint64_t>(data[1].permitted) << 32);
      if (uint64_t missing = run->compiled->capabilities & ~own)
        return PrintError("spec.capabilities: cordon itself does not hold " + policy::CapabilitiesString(missing) +
                          ", so it cannot give it to the command"),
               1;
    }
  }
  auto lease = ResolveIdentity(run_as);
  if (!lease) return PrintError("run as " + run_as + ": " + lease.error().ToString()), 1;
  run->lease.emplace(std::move(*lease));
  run->identity = run->lease->id();
  return kGoOn;
}

// The command's private /tmp and /dev/shm, the ACL grants of its write
// paths, and the file rules for its own stdio.
int PrepareFiles(RunPlan* run) {
  policy::CompiledPolicy* compiled = &*run->compiled;
  const RunIdentity& identity = run->identity;
  std::random_device rd;
  char suffix[16];
  std::snprintf(suffix, sizeof suffix, "%08x", rd());
  run->run_name = "run-" + std::to_string(::getpid()) + "-" + suffix;
  run->sandbox_name = run->parsed.Get("--name").value_or("run-" + std::to_string(::getpid()));
  // A private /tmp and /dev/shm unless the policy names paths there.
  {
    bool tmp = !PolicyNames(*compiled, "/tmp"), shm = !PolicyNames(*compiled, "/dev/shm");
    if (tmp || shm) {
      auto made = ops::Scratch::Create(run->run_name, identity.uid, identity.gid, compiled->resources.disk.value_or(0));
      if (!made) return PrintError("private /tmp for the command: " + made.error().ToString()), 1;
      run->scratch = std::move(*made);
      run->has_scratch = true;
      if (tmp) run->binds.emplace_back(run->scratch->tmp(), "/tmp");
      if (shm) run->binds.emplace_back(run->scratch->shm(), "/dev/shm");
      if (compiled->has_files) {
        if (tmp) AddRunFileRule(compiled, run->scratch->tmp(), policy::kFileRightsWrite, "scratch:/tmp");
        if (shm) AddRunFileRule(compiled, run->scratch->shm(), policy::kFileRightsWrite, "scratch:/dev/shm");
      }
    }
  }
  // spec.credentials: the lock and, for files, the sandbox's own tmpfs,
  // owned by the command's identity, bound where the command reads it (and
  // the store of the other sandboxes hidden). Issued once the sandbox exists.
  if (!compiled->credentials.empty()) {
    ops::OidcContext oidc;
    for (const auto& c : compiled->credentials) {
      if (c.oidc_audience.empty()) continue;
      const std::string path = run->parsed.Get("--config").value_or("");
      agent::AgentConfig config;
      policy::Diagnostics diags;
      if (!agent::LoadAgentConfig(path, !path.empty(), &config, &diags)) {
        std::fputs(policy::FormatDiagnostics(diags).c_str(), stderr);
        return PrintError("agent configuration " + (path.empty() ? std::string(agent::kDefaultConfigPath) : path) +
                          " rejected (the built-in issuer's settings are there); command not started"),
               1;
      }
      oidc.issuer = config.OidcIssuer();
      oidc.key_dir = config.oidc_key_dir;
      oidc.setting = config.file.empty() ? std::string(agent::kDefaultConfigPath) + " (absent: the defaults)" : config.file;
      oidc.subject = run->sandbox_name;
      oidc.policy_name = compiled->name;
      oidc.policy_digest = compiled->digest;
      break;
    }
    // owner (what cordon attach needs) names who reads the file: here the
    // command does, whoever it runs as; an owner that is someone else is refused.
    for (const auto& c : compiled->credentials) {
      if (c.owner.empty()) continue;
      auto owner = ops::ResolveCredentialOwner(c.owner);
      if (!owner || owner->first != identity.uid || owner->second != identity.gid)
        return PrintError(
                   policy::CredentialError(
                       c.at,
                       "credential " + c.name + ": owner " + c.owner +
                           (owner ? " (uid " + std::to_string(owner->first) + " gid " + std::to_string(owner->second) +
                                        ")"
                                  : " (" + owner.error().ToString() + ")") +
                           " is not who the command runs as (uid " + std::to_string(identity.uid) + " gid " +
                           std::to_string(identity.gid) +
                           "): cordon run gives the file to its command (spec.runAs, --user); drop owner or make it "
                           "match") +
                   "; command not started"),
               1;
    }
    auto prepared = ops::SandboxCredentials::Prepare(compiled->credentials, run->run_name, identity.uid, identity.gid,
                                                     "cordon-run", std::move(oidc));
    if (!prepared) return PrintError("credentials: " + prepared.error().ToString() + "; command not started"), 1;
    run->credentials = std::move(*prepared);
    for (auto& bind : run->credentials->RunBinds()) run->binds.push_back(std::move(bind));
    // Landlock and BPF LSM rules name inodes: the tmpfs's, the same through the bind.
    if (run->credentials->has_files() && compiled->has_files)
      AddRunFileRule(compiled, run->credentials->store_dir(), policy::kFileRightsRead, "credentials");
  }
  // Every run: the store (state files hold values, and root owns them) hidden.
  {
    // ... and the attached sandboxes' credentials (bound on the host) too.
    if (!run->credentials || !run->credentials->has_files()) {
      auto views = ops::CredentialViewCover();
      if (!views)
        return PrintError("hide the credential views: " + views.error().ToString() + "; command not started"), 1;
      run->binds.push_back(std::move(*views));
    }
    auto cover = ops::CredentialStoreCover();
    if (!cover) return PrintError("hide the credential store: " + cover.error().ToString() + "; command not started"), 1;
    const std::string empty = cover->first;
    // ... and the runs' locks (ops::RunOwner), under the same empty directory:
    // a root command that could take its run's lock would keep its sandbox
    // from ever being called orphaned.
    auto locks = ops::RunLocksDir();
    if (!locks) return PrintError("hide the runs' locks: " + locks.error().ToString() + "; command not started"), 1;
    run->binds.emplace_back(cover->first, *locks);
    run->binds.push_back(std::move(*cover));
    // ... and cordon's own state (/var/lib/cordon: the agent's signing keys,
    // the kept policy texts): Landlock cannot refuse below a path the policy
    // grants, and a root command owns those files (BPF LSM refuses it too
    // where it is usable). One under a private /tmp is hidden already.
    for (const std::string& own : CordonOwnStateDirs()) {
      bool hidden = false;
      for (const auto& bind : run->binds) hidden = hidden || (bind.second != own && PathAtOrBelow(own, bind.second));
      if (!hidden) run->binds.emplace_back(empty, own);
    }
  }
  // A non-root identity gets write access to the policy's write paths (an
  // ACL entry for the time of the run; see confine/acl.h).
  if (identity.uid != 0 && compiled->has_files) {
    std::vector<std::string> writable;
    for (const auto& rule : compiled->file_rules)
      if ((rule.rights & CORDON_FILE_WRITE) && rule.origin.rfind("spec.files.", 0) == 0) writable.push_back(rule.path);
    auto granted = AclGrants::Grant(identity.uid, writable);
    if (!granted) return PrintError(granted.error().ToString() + "; command not started"), 1;
    run->grants = std::move(*granted);
    for (const auto& path : UnreachableFor(identity.uid, identity.gid, writable))
      run->early_notes.push_back("uid " + std::to_string(identity.uid) + " cannot reach the write path " + path +
                                 ": make it searchable (o+x) or run with --user root");
  }
  // The caller's stdin, stdout and stderr are the command's explicit input
  // and outputs: where they are regular files or named pipes, the policy grants them (read
  // for stdin, write for stdout/stderr), so that BPF LSM, which judges reads
  // and writes through descriptors opened outside the sandbox, lets them
  // through. Pipes, sockets and terminals are not path objects.
  if (compiled->has_files) {
    for (int fd = 0; fd < 3; ++fd) {
      struct stat st;
      if (::fstat(fd, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode))) continue;
      struct statfs fs;  // a pipe() is a FIFO too, on pipefs: not a path object
      if (S_ISFIFO(st.st_mode) && (::fstatfs(fd, &fs) != 0 || fs.f_type == PIPEFS_MAGIC)) continue;
      // Resolved by the loader and by Landlock to the file itself.
      AddRunFileRule(compiled, "/proc/self/fd/" + std::to_string(fd),
                     fd == 0 ? policy::kFileRightsRead : (CORDON_FILE_READ | CORDON_FILE_WRITE),
                     fd == 0   ? "stdin"
                     : fd == 1 ? "stdout"
                               : "stderr");
    }
  }
  return kGoOn;
}

// Whether the command gets a directory of its own at `target` (its private
// /tmp or /dev/shm), hiding the host's.
bool BindsOver(const RunPlan& run, const std::string& target) {
  for (const auto& bind : run.binds)
    if (bind.second == target) return true;
  return false;
}

// The pty, then the forwarded signals are held.
int StartRelay(RunPlan* run) {
  auto pty = PtyRelay::OpenIfTerminal();
  if (!pty) return PrintError(pty.error().ToString()), 1;
  run->pty = std::move(*pty);

  // Signals are held from here on: one arriving while the sandbox is being
  // built must not kill cordon half-way; it reaches the command once started.
  run->signals = std::make_unique<HeldSignals>(kForwardedSignals, std::size(kForwardedSignals));
  return kGoOn;
}

// The environment, the program and the working directory; then StartRelay.
int PrepareExec(RunPlan* run) {
  auto env = BuildEnvironment(environ, *run->compiled, run->cli_env, run->home);
  if (!env) return PrintError(env.error().ToString()), 2;
  run->env = std::move(*env);
  std::string command_path_env;
  for (const auto& e : run->env)
    if (e.rfind("PATH=", 0) == 0) command_path_env = e.substr(5);
  auto exe = ResolveCommand(run->command[0], command_path_env);
  if (!exe) {
    // Found but not executable is 126 (as a shell says), not found 127.
    struct stat st;
    const std::string& c = run->command[0];
    return PrintError(exe.error().ToString()), c.find('/') != std::string::npos && ::stat(c.c_str(), &st) == 0 ? 126 : 127;
  }
  run->exe = std::move(*exe);
  std::string& cwd = run->cwd;
  if (auto wanted = run->parsed.Get("--cwd")) {
    // Where the command starts, exactly: never a fallback. Seen as the
    // command sees it (its /tmp and /dev/shm are its own).
    std::string dir = *wanted;
    if (dir[0] != '/') {
      char buf[4096];
      if (!::getcwd(buf, sizeof buf)) return PrintError("--cwd " + Quoted(dir) + ": " + std::strerror(errno)), 2;
      dir = std::string(buf) + "/" + dir;
    }
    std::string normal, why;
    if (!policy::NormalizeFilePath(dir, &normal, &why)) return PrintError("--cwd " + Quoted(*wanted) + ": " + why), 2;
    const bool private_dir = (normal == "/tmp" || normal == "/dev/shm") && BindsOver(*run, normal);
    struct stat st;
    if (!private_dir && (::stat(normal.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)))
      return PrintError("--cwd " + Quoted(*wanted) + ": no such directory"), 2;
    if (!private_dir && !PolicyReads(*run->compiled, normal))
      return PrintError("--cwd " + Quoted(*wanted) + ": the policy does not let the command read it (add --read " +
                        normal + ")"),
             2;
    cwd = normal;
    run->exact_cwd = true;
    return StartRelay(run);
  }
  {
    char buf[4096];
    if (::getcwd(buf, sizeof buf)) cwd = buf;
  }
  bool cwd_hidden = ((cwd == "/tmp" || cwd.rfind("/tmp/", 0) == 0) && BindsOver(*run, "/tmp")) ||
                    ((cwd == "/dev/shm" || cwd.rfind("/dev/shm/", 0) == 0) && BindsOver(*run, "/dev/shm"));
  if (cwd.empty() || cwd_hidden || !PolicyReads(*run->compiled, cwd)) {
    if (!cwd.empty())
      run->early_notes.push_back("the command starts in " + run->home +
                                 ": the policy does not let it read the working directory " + cwd +
                                 (cwd_hidden ? " (hidden by its private /tmp)" : ""));
    cwd = run->home;
  }
  return StartRelay(run);
}

// The command's own layers before exec and the notes on what they cover.
int PrepareConfinement(RunPlan* run) {
  const policy::CompiledPolicy* compiled = &*run->compiled;
  const bool verbose = run->verbose;
  std::optional<LandlockPlan>& landlock = run->landlock;
  SeccompPlan& seccomp = run->seccomp;
  std::vector<std::string>& notes = run->notes;
  // The command itself is confined before exec by Landlock (files, signal and
  // abstract-socket scoping) and a seccomp filter (socket families, bpf,
  // mounts, modules, namespaces, clock, ptrace, io_uring): without usable BPF
  // LSM as the file and tamper layer, with it as a second, independent layer.
  // They refuse before BPF LSM (Landlock precedes bpf in the LSM order,
  // seccomp precedes every LSM) and silently, so a tracepoint at system call
  // exit reports their refusals (enforcement "landlock" / "seccomp").
  const LsmAvailability& lsm = ProbeLsm();
  // Without a capability, uid 0 still writes what file modes give root:
  // cgroup.procs and the limits in cgroupfs, bpffs, sysfs attributes,
  // /proc/sysrq-trigger, binfmt_misc, cordon's own state. Read-only mounts
  // refuse them (EROFS, reported), in audit mode too: they protect the host,
  // and audit mode rehearses enforce mode.
  {
    std::string lsm_cgroup2;
    if (lsm.usable())
      if (auto mount = FindCgroup2Mount()) lsm_cgroup2 = *mount;
    std::vector<std::pair<std::string, std::string>> mounts;
    if (auto table = ReadMountTable())
      for (const MountEntry& m : *table) mounts.emplace_back(m.mountpoint, m.fstype);
    run->read_only = HostControlPaths(mounts, lsm_cgroup2);
    if (verbose && !run->read_only.empty()) {
      std::string paths, writable;
      for (const auto& ro : run->read_only) {
        std::string& list = ro.writable ? writable : paths;
        list += (list.empty() ? "" : ", ") + ro.path;
      }
      notes.push_back("read-only in this command: " + paths + " (writes fail with EROFS, reported with enforcement mount)" +
                      (writable.empty() ? "" : "; " + writable + " stays writable, judged by BPF LSM"));
    }
  }
  // Root with no file rules: nothing but file modes decides, and uid 0 owns
  // the host's files. Said even with --quiet.
  if (run->identity.uid == 0 && !compiled->has_files)
    std::fprintf(stderr,
                 "cordon: warning: the command runs as root without spec.files: no file is protected from it; it can "
                 "write every root-owned file on the host (e.g. /etc/ld.so.preload, /etc/cron.d), which runs code as "
                 "root outside the sandbox. Give the policy spec.files, or run the command as a non-root user\n");
  if (compiled->mode == CORDON_MODE_ENFORCE) {
    LandlockSupport support = ProbeLandlock();
    if (support.abi > 0) {
      auto plan = PrepareLandlock(*compiled, support);
      if (!plan) return PrintError(plan.error().ToString() + "; command not started"), 1;
      landlock = std::move(*plan);
    }
    seccomp = PrepareSeccomp(*compiled);
    if (lsm.usable()) {
      if (verbose)
        notes.push_back(std::string("second layer under BPF LSM: ") +
                        (landlock && landlock->files ? "Landlock ABI " + std::to_string(landlock->abi) + " (file rules)"
                                                     : std::string("no Landlock")) +
                        " and seccomp; what they refuse first fails with EACCES (Landlock) or EPERM (seccomp) and "
                        "is reported with enforcement landlock or seccomp");
    } else {
      if (landlock && landlock->files) {
        notes.push_back("file rules enforced by Landlock ABI " + std::to_string(landlock->abi) +
                        " in this command (BPF LSM unusable here): denials are EACCES, reported as events with the "
                        "path as written; executable mappings and metadata changes are not covered, and only the "
                        "command's own /proc/<pid> (not its children's) is readable" +
                        (verbose ? "" : " (--verbose for details)"));
        if (verbose)
          for (const auto& n : landlock->notes) notes.push_back("Landlock: " + n);
      } else if (compiled->has_files) {
        notes.push_back("file and exec rules are NOT enforced: neither BPF LSM (" + lsm.detail + ") nor Landlock (" +
                        support.detail + ") is available");
      }
      std::string refused;
      for (const auto& r : seccomp.refused) refused += (refused.empty() ? "" : "; ") + r;
      notes.push_back(verbose
                          ? "seccomp refuses in this command (EPERM; each refusal is reported as an event): " + refused
                          : "seccomp refuses disallowed socket families, bpf, mounts, modules, kexec, ptrace, "
                            "namespaces, clock changes, reboot, io_uring, terminal injection, keyrings and "
                            "host-wide calls in this command (EPERM, reported as events)");
      if (compiled->has_files)
        notes.push_back(
            UnixHooks().available()
                ? std::string("unix-socket connects are refused by address as written (cgroup unix "
                              "hooks); a symlink in a writable directory aliasing a forbidden socket is "
                              "only detected") +
                      ((compiled->lsm_flags & CORDON_LSM_F_KILL) ? " (and killed)" : "")
                : std::string("connections to pathname unix sockets outside the policy (e.g. "
                              "/run/docker.sock) are only detected, not prevented") +
                      ((compiled->lsm_flags & CORDON_LSM_F_KILL) ? " (onViolation: kill kills the process)" : "") +
                      ": prevention needs BPF LSM or kernel 6.7+");
      if (!landlock || !landlock->scoped)
        notes.push_back(
            "signals to processes outside the sandbox are NOT restricted: that needs BPF LSM or "
            "Landlock ABI 6 (ptrace is refused by seccomp)");
      if ((!landlock || !landlock->scoped) && !UnixHooks().available() &&
          (compiled->families & (1u << CORDON_FAM_UNIX)) && !(compiled->lsm_flags & CORDON_LSM_F_ABSTRACT_UNIX))
        notes.push_back(
            "connections to abstract unix sockets outside the sandbox are NOT refused: that needs BPF "
            "LSM, Landlock ABI 6 or the cgroup unix-socket hooks (kernel 6.7+)");
      if ((compiled->families & (1u << CORDON_FAM_UNIX)) && !(compiled->lsm_flags & CORDON_LSM_F_ABSTRACT_UNIX))
        notes.push_back(
            "binding an abstract unix name is NOT refused without BPF LSM: a host client expecting "
            "that name could reach the command");
    }
  } else if (!lsm.usable()) {
    notes = UnenforcedControls(*compiled, lsm);
    notes.push_back("audit mode: Landlock and seccomp, which can only refuse, are not applied");
  }
  run->landlock_applied = landlock && landlock->ruleset.valid();
  return kGoOn;
}

// The audit log, then the sandbox: its cgroup, with the policy attached.
int CreateRunSandbox(RunPlan* run, std::unique_ptr<ops::EphemeralSandbox>* out) {
  run->audit_path = run->parsed.Get("--audit").value_or(DefaultAuditPath());
  auto sink = JsonlFileSink::Open(run->audit_path);
  if (!sink) return PrintError(sink.error().ToString()), 1;
  run->sink = std::move(*sink);

  ops::RunRequest request;
  request.cgroup = "/cordon/" + run->run_name;
  request.scratch = std::move(run->scratch);
  request.policy = &*run->compiled;
  AttachOptions& options = request.options;
  options.name = run->sandbox_name;
  options.seccomp_events = !run->seccomp.program.empty();
  options.landlock_events = run->landlock_applied && run->landlock->files;
  options.landlock_scope_events = run->landlock_applied && run->landlock->scoped;
  options.read_only_events = !run->read_only.empty();
  if (run->pty) {
    // The command's own pty is the one device node of a terminal it may
    // open again (other ptys, the caller's included, stay refused).
    struct stat st;
    if (::fstat(run->pty->slave(), &st) == 0) {
      DeviceRule rule;
      rule.type = 'c';
      rule.major = major(st.st_rdev);
      rule.minor = minor(st.st_rdev);
      rule.access = DeviceRule::kRead | DeviceRule::kWrite;
      options.allowed_devices.push_back(rule);
    }
  }
  auto sandbox = ops::Run(std::move(request));
  if (!sandbox) return PrintError(sandbox.error().ToString()), 1;
  // spec.resources, set before the command is in the cgroup. A limit this
  // host cannot enforce is a warning printed even with --quiet: run never
  // claims what it does not do (as for the other controls, it does not refuse).
  if (const policy::ResourceLimits& resources = run->compiled->resources; resources.any()) {
    for (const auto& line : ops::UnenforcedLimits(resources, (*sandbox)->limits(), /*for_run=*/true))
      std::fprintf(stderr, "cordon: warning: NOT enforced: %s\n", line.c_str());
    for (const CgroupLimitOutcome& outcome : (*sandbox)->limits())
      if (outcome.enforced) run->notes.push_back("resources: " + outcome.Describe());
    for (const auto& line : ops::IoWriteNotes(resources, ops::IoWriteDevices(*run->compiled)))
      run->notes.push_back(line);
    if (resources.disk)
      std::fprintf(stderr, "cordon: warning: %s\n",
                   run->has_scratch
                       ? ("disk " + policy::ByteSizeText(*resources.disk) +
                          ": enforced for the scratch (tmpfs size of /tmp and /dev/shm) only; NOT enforced "
                          "for spec.files write paths (that needs file-system quotas)")
                             .c_str()
                       : "NOT enforced: disk: the command has no scratch (the policy names /tmp and "
                         "/dev/shm), and spec.files write paths would need file-system quotas");
    if (resources.wall_time_seconds)
      run->notes.push_back("resources: wallTime " + std::to_string(*resources.wall_time_seconds) +
                           " s enforced by cordon run (SIGTERM, then SIGKILL " + std::to_string(kWallTimeGraceSeconds) +
                           " s later; exit status " + std::to_string(kExitWallTime) + ")");
  }
  *out = std::move(*sandbox);
  // What the layers cover on this host: once per terminal session (cli/notes.h);
  // what is particular to this run (missing paths, the working directory): each time.
  if (!run->quiet) {
    for (const auto& line : NotesToShow(run->notes, run->verbose)) PrintNote(line);
    for (const auto& line : run->early_notes) PrintNote(line);
  }
  uint32_t layers =
      (run->landlock_applied ? CORDON_INFO_F_LANDLOCK : 0) | (run->seccomp.program.empty() ? 0 : CORDON_INFO_F_SECCOMP);
  if (layers) (void)AddSandboxFlags((*out)->id(), layers);  // shown by `cordon status`
  return kGoOn;
}

// The confined child, started and moved into the sandbox.
int StartChild(RunPlan* run, ops::EphemeralSandbox* sandbox, ChildPlan* plan, std::unique_ptr<ConfinedChild>* out) {
  plan->exe = run->exe;
  plan->argv = run->command;
  plan->envp = std::move(run->env);
  plan->cwd = run->cwd;
  plan->fallback_cwd = run->exact_cwd ? "" : run->cwd == run->home ? "/" : run->home;
  plan->identity = run->identity;
  plan->capabilities = run->compiled->capabilities;
  plan->binds = run->binds;
  plan->read_only = run->read_only;
  plan->keep_fds = run->keep_fds;
  plan->parent = ::getpid();
  if (run->pty) {
    plan->pty_slave = run->pty->slave();
    for (int i = 0; i < 3; ++i) plan->pty_stdio[i] = run->pty->replaces(i);
  }
  plan->Finish();
  ChildConfinement confinement;
  confinement.landlock = run->landlock ? &*run->landlock : nullptr;
  confinement.landlock_proc_self = run->compiled->lsm_flags & CORDON_LSM_F_PROC_SELF;
  confinement.seccomp = &run->seccomp;
  auto child = ConfinedChild::Start(*plan, confinement, run->signals->previous());
  if (!child) {
    CleanupSandbox(sandbox);
    run->signals->Restore();
    return PrintError(child.error().ToString()), 1;
  }
  (*child)->Enter([sandbox](pid_t pid) { return sandbox->Place(pid); }, run->pty.get(), run->quiet);
  *out = std::move(*child);
  return kGoOn;
}

// spec.resources while the command runs: the cgroup's counters watched
// (resource.* events) and wallTime (SIGTERM, then SIGKILL after a grace).
class RunLimits {
 public:
  RunLimits(const policy::ResourceLimits& resources, const std::string& cgroup_dir, bool quiet)
      : quiet_(quiet), wall_(resources.wall_time_seconds.value_or(0)) {
    ops::ResourceWatchOptions options;
    options.warn_at_percent = resources.warn_at_percent;
    watch = ops::ResourceWatch::Open(cgroup_dir, options);
    if (wall_) {
      timer = UniqueFd(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
      Arm(static_cast<int64_t>(wall_) * 1000000000);
      started_ = MonoNs();
    }
  }
  // The timer went off: at wallTime SIGTERM (and one resource.walltime
  // event), kWallTimeGraceSeconds later SIGKILL.
  void Expired(ConfinedChild* child, RunEvents* events) {
    uint64_t ticks = 0;
    (void)!::read(timer.get(), &ticks, sizeof ticks);
    const int signal = expired_ ? SIGKILL : SIGTERM;
    ::syscall(SYS_pidfd_send_signal, child->pidfd(), signal, nullptr, 0);
    if (expired_) return;
    expired_ = true;
    Arm(static_cast<int64_t>(kWallTimeGraceSeconds) * 1000000000);
    cordon::v1::AuditEvent e;
    SetTimestamp(RealNs(), e.mutable_time());
    e.set_kind("resource.walltime");
    e.set_verdict("killed");
    e.set_enforcement("cordon-run");
    e.set_pid(static_cast<uint32_t>(child->pid()));
    e.set_reason("wallTime " + std::to_string(wall_) + " s reached: SIGTERM sent, SIGKILL " +
                 std::to_string(kWallTimeGraceSeconds) + " s later if it has not exited");
    auto* r = e.mutable_resource();
    r->set_name("walltime");
    r->set_event("expired");
    r->set_count(1);
    r->set_limit(wall_);
    r->set_value(static_cast<uint64_t>((MonoNs() - started_) / 1000000000));
    events->OnOwnEvent(std::move(e));
    if (!quiet_) PrintNote("wallTime " + std::to_string(wall_) + " s reached: the command is ended");
  }
  // The run's exit status: kExitWallTime when wallTime ended the command,
  // kExitMemoryLimit when the OOM killer killed it, else the command's own.
  // `v1_oom_kills`: memory.oom_control's oom_kill of the run's v1 memory cgroup.
  int ExitStatus(int command_status, uint64_t v1_oom_kills) const {
    if (expired_) return kExitWallTime;
    if (command_status == 128 + SIGKILL && ((watch && watch->oom_kills() > 0) || v1_oom_kills > 0))
      return kExitMemoryLimit;
    return command_status;
  }

  std::unique_ptr<ops::ResourceWatch> watch;
  UniqueFd timer;

 private:
  void Arm(int64_t ns) {
    struct itimerspec its = {};
    its.it_value.tv_sec = ns / 1000000000;
    its.it_value.tv_nsec = ns % 1000000000;
    ::timerfd_settime(timer.get(), 0, &its, nullptr);
  }
  bool quiet_;
  uint64_t wall_;
  int64_t started_ = 0;
  bool expired_ = false;
};

// Until the command ended: signals forwarded, the pty relayed, events read.
// Returns the command's exit status.
// Whether `cordon contain` (or the kernel, onViolation: contain) contained
// this run's sandbox: read from its pinned state (no state map: never).
class ContainmentWatch {
 public:
  explicit ContainmentWatch(uint64_t sandbox_id) {
    if (auto fd = OpenSandboxMap(sandbox_id, "state")) state_ = std::move(*fd);
  }
  bool Contained() const {
    uint32_t zero = 0;
    cordon_sandbox_state st = {};
    return state_.valid() && bpf_map_lookup_elem(state_.get(), &zero, &st) == 0 &&
           (st.flags & CORDON_STATE_F_CONTAINED);
  }

 private:
  UniqueFd state_;
};

int EventLoop(RunPlan* run, RunEvents* events, ConfinedChild* child, RunLimits* limits, uint64_t sandbox_id) {
  int exit_status = 0;
  const int sigfd = run->signals->fd();
  UniqueFd epfd(::epoll_create1(EPOLL_CLOEXEC));
  auto add = [&](int fd) {
    struct epoll_event ev = {};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    ::epoll_ctl(epfd.get(), EPOLL_CTL_ADD, fd, &ev);
  };
  add(child->pidfd());
  // The cgroup's counters: watched here, or, while the agent reads this
  // sandbox, by the agent (its events come back through the tail and are
  // taken as covered; what it did not report is reported at the end).
  ops::ResourceWatch* watch = limits->watch.get();
  auto watch_resources = [&] {
    if (watch->fd() >= 0) add(watch->fd());
    if (watch->pressure_fd() >= 0) {
      struct epoll_event ev = {};
      ev.events = EPOLLPRI;
      ev.data.fd = watch->pressure_fd();
      ::epoll_ctl(epfd.get(), EPOLL_CTL_ADD, watch->pressure_fd(), &ev);
    }
  };
  if (watch && events->agent_link)
    events->covered = watch;
  else if (watch)
    watch_resources();
  int64_t last_warn_check = MonoNs();
  if (limits->timer.valid()) add(limits->timer.get());
  add(sigfd);
  add(events->agent_link ? events->agent_link->fd() : events->reader_fd());
  // spec.credentials: refreshed and expired on time (wall-clock deadlines).
  // A refresh runs its issue program here, synchronously (at most
  // kCredentialProgramTimeoutSeconds), as the pty waits.
  UniqueFd credential_timer;
  auto emit = [events](cordon::v1::AuditEvent e) { events->OnOwnEvent(std::move(e)); };
  auto arm_credentials = [&] {
    struct itimerspec its = {};
    its.it_value.tv_sec = run->credentials->NextDeadline();  // 0: disarmed
    ::timerfd_settime(credential_timer.get(), TFD_TIMER_ABSTIME, &its, nullptr);
  };
  if (run->credentials) {
    credential_timer = UniqueFd(::timerfd_create(CLOCK_REALTIME, TFD_CLOEXEC | TFD_NONBLOCK));
    add(credential_timer.get());
    arm_credentials();
  }
  auto lose_agent = [&] {
    if (!run->quiet) PrintNote("the agent went away; reading this sandbox's events directly");
    ::epoll_ctl(epfd.get(), EPOLL_CTL_DEL, events->agent_link->fd(), nullptr);
    events->agent_link.reset();
    events->covered = nullptr;
    if (watch) watch_resources();
    Status added = events->ReadDirectly();
    if (!added.ok())
      PrintError("cannot read this sandbox's events: " + added.error().ToString());
    else
      add(events->reader_fd());
  };
  PtyRelay* relay = run->pty.get();
  bool master_open = relay != nullptr, master_out = false;
  if (relay) {
    add(relay->master());
    if (relay->input() >= 0) add(relay->input());
  }
  // Caller input waiting for the pty: watch the master for room too.
  auto watch_master = [&] {
    bool want = relay->WantsMasterWritable();
    if (want == master_out || !master_open) return;
    struct epoll_event ev = {};
    ev.events = EPOLLIN | (want ? static_cast<uint32_t>(EPOLLOUT) : 0u);
    ev.data.fd = relay->master();
    ::epoll_ctl(epfd.get(), EPOLL_CTL_MOD, relay->master(), &ev);
    master_out = want;
  };
  if (run->names) add(run->names->fd());
  std::optional<ContainmentWatch> containment;
  if (run->credentials) containment.emplace(sandbox_id);
  bool revoked_at_containment = false;
  bool exited = false;
  while (!exited) {
    struct epoll_event evs[8];
    int n = ::epoll_wait(epfd.get(), evs, 8, 500);
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < n; ++i) {
      int fd = evs[i].data.fd;
      if (fd == sigfd) {
        struct signalfd_siginfo si;
        while (::read(sigfd, &si, sizeof si) == sizeof si) {
          // The command runs in a session of its own: the caller's terminal
          // signals reach only cordon, which forwards them. With a pty, a
          // window change is copied to it instead (the kernel then signals
          // the command's foreground process group).
          if (si.ssi_signo == SIGWINCH && relay)
            relay->Resize();
          else
            ::syscall(SYS_pidfd_send_signal, child->pidfd(), si.ssi_signo, nullptr, 0);
        }
      } else if (fd == child->pidfd()) {
        exited = child->Reap(&exit_status);
      } else if (watch && fd == watch->pressure_fd()) {
        watch->OnPressure();
      } else if (fd == limits->timer.get()) {
        limits->Expired(child, events);
      } else if (credential_timer.valid() && fd == credential_timer.get()) {
        uint64_t ticks = 0;
        (void)!::read(fd, &ticks, sizeof ticks);
        run->credentials->Tick(std::time(nullptr), emit);
        arm_credentials();
      } else if (relay && master_open && fd == relay->master()) {
        if (evs[i].events & EPOLLOUT) relay->FlushToCommand();
        if ((evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !relay->FromCommand()) {
          master_open = false;
          ::epoll_ctl(epfd.get(), EPOLL_CTL_DEL, relay->master(), nullptr);
        }
        watch_master();
      } else if (run->names && fd == run->names->fd()) {
        for (auto& e : run->names->TakeEvents()) events->OnOwnEvent(std::move(e));
      } else if (relay && fd == relay->input()) {
        relay->FromCaller();
        if (evs[i].events & (EPOLLHUP | EPOLLERR)) ::epoll_ctl(epfd.get(), EPOLL_CTL_DEL, fd, nullptr);
        watch_master();
      }
    }
    if (events->agent_link) {
      if (!events->ReadAgent(0)) lose_agent();
    } else {
      events->Drain();
    }
    if (watch && events->agent_link) {
      if (exited) watch->Refresh();  // the agent's last events arrive at the release (FinishSandbox)
    } else if (watch) {
      const int64_t now = MonoNs();
      for (auto& e : watch->Poll(now, /*final=*/exited)) events->OnOwnEvent(std::move(e));
      if (watch->watches_warn_at() && now - last_warn_check >= 1000000000) {  // warnAt: every second
        last_warn_check = now;
        for (auto& e : watch->CheckWarnAt()) events->OnOwnEvent(std::move(e));
      }
    }
    // Contained: the credentials this run issued are revoked now (looked at
    // every turn of this loop, at least every 500 ms), not at the end.
    if (containment && !revoked_at_containment && containment->Contained()) {
      revoked_at_containment = true;
      run->credentials->RevokeAll("the sandbox was contained", emit);
      arm_credentials();
      if (!run->quiet) PrintNote("the sandbox was contained: its credentials are revoked");
    }
  }
  // What the command wrote last, then the caller's terminal as it was.
  if (relay) {
    if (master_open) (void)relay->FromCommand();
    relay->Restore();
  }
  return exit_status;
}

}  // namespace

int RunCommand(const Args& args) { return RunCommandWith(args, {}); }

int RunCommandWith(const Args& args, const RunHooks& hooks) {
  RunPlan run;
  if (int rc = ParseRun(args, &run); rc != kGoOn) return rc;
  if (hooks.without_credentials) run.compiled->credentials.clear();
  if (int rc = PrepareFiles(&run); rc != kGoOn) return rc;
  if (int rc = PrepareExec(&run); rc != kGoOn) return rc;
  if (int rc = PrepareConfinement(&run); rc != kGoOn) return rc;
  std::unique_ptr<ops::EphemeralSandbox> sandbox;  // from here on, removed on every way out
  if (int rc = CreateRunSandbox(&run, &sandbox); rc != kGoOn) return rc;
  RunEvents events(*sandbox, run.sandbox_name, run.compiled->name, run.compiled->digest, run.sink.get(), run.quiet);
  if (Status connected = events.Connect(!hooks.events_directly); !connected.ok()) {
    CleanupSandbox(sandbox.get());
    return PrintError(connected.error().ToString()), 1;
  }
  // Credentials an ended cordon run left (killed with -9) are removed and
  // revoked once expired or once their sandbox is gone (every run looks);
  // then this run's own are issued. Their events are another sandbox's: they
  // go to the host's credential log, never into this run's audit log.
  std::vector<cordon::v1::AuditEvent> swept_events;
  const int swept = ops::SweepCredentials(std::time(nullptr), [&](cordon::v1::AuditEvent e) {
    swept_events.push_back(std::move(e));
  });
  if (!swept_events.empty()) {
    // Runs starting together append to the same chained file: one at a time
    // (a lock on the file itself), each continuing the chain where the last
    // one left it (the sink reads the tail when it opens).
    std::string failure;
    UniqueFd lock(::open(ops::kCredentialSweepLog, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!lock.valid() || ::flock(lock.get(), LOCK_EX) != 0) {
      failure = SysError(std::string("open ") + ops::kCredentialSweepLog).ToString();
    } else if (auto log = JsonlFileSink::Open(ops::kCredentialSweepLog); !log) {
      failure = log.error().ToString();
    } else {
      for (const auto& e : swept_events)
        if (Status written = (*log)->Write(e); !written.ok() && failure.empty()) failure = written.error().ToString();
      if (Status flushed = (*log)->Flush(); !flushed.ok() && failure.empty()) failure = flushed.error().ToString();
    }
    if (!failure.empty())
      PrintError("the events of credentials this run swept could not all be written: " + failure);
  }
  if (swept && !run.quiet)
    PrintNote("removed and revoked " + std::to_string(swept) + " credential(s) left by cordon runs that ended (events in " +
              ops::kCredentialSweepLog + ")");
  if (run.credentials) {
    Status issued = run.credentials->Issue(sandbox->id(), sandbox->cgroup().path,
                                           [&events](cordon::v1::AuditEvent e) { events.OnOwnEvent(std::move(e)); });
    if (!issued.ok()) {
      CleanupSandbox(sandbox.get());
      (void)run.sink->Flush();
      return PrintError(issued.error().ToString() + "; command not started"), 1;
    }
    std::vector<std::string> added = run.credentials->Environment();
    std::erase_if(run.env, [&added](const std::string& entry) {
      for (const auto& a : added)
        if (entry.compare(0, a.find('=') + 1, a, 0, a.find('=') + 1) == 0) return true;
      return false;
    });
    run.env.insert(run.env.end(), added.begin(), added.end());
    if (!run.quiet)
      for (const auto& c : run.compiled->credentials)
        PrintNote("credential " + c.name + " issued (" +
                  (c.deliver == policy::CredentialSpec::Deliver::kEnv ? "$" + c.name
                                                                       : "$" + c.name + "_FILE") +
                  ", ttl " + std::to_string(c.ttl_seconds) + " s)");
  }
  // A memory limit: the OOM victim recorder is loaded before the command
  // starts (an allocation right away is named too; on a hybrid host the
  // watch has no memory.events and would not load it).
  if (run.compiled->resources.memory) (void)ops::OomVictimRecorder();
  // Name rules: cordon's resolver answers the sandbox's DNS from now until
  // the command ended (README "Egress by name").
  if (ops::HasNameRules(*run.compiled)) {
    auto names = ops::NameService::Start(sandbox->id(), *run.compiled);
    if (!names) {
      CleanupSandbox(sandbox.get());
      (void)run.sink->Flush();
      return PrintError(names.error().ToString() + "; command not started"), 1;
    }
    run.names = std::move(*names);
    if (!run.quiet) {
      std::vector<std::string> upstreams;
      for (const auto& u : run.names->upstreams()) upstreams.push_back(u.ToString());
      PrintNote("name rules: the sandbox's DNS is answered by cordon's resolver on " + run.names->listen4() +
                " (names the policy allows only; upstream " + JoinStrings(upstreams, ", ") + ")");
      for (const auto& note : run.names->notes()) PrintNote(note);
    }
  }
  ChildPlan plan;
  std::unique_ptr<ConfinedChild> child;
  if (int rc = StartChild(&run, sandbox.get(), &plan, &child); rc != kGoOn) return rc;

  RunLimits limits(run.compiled->resources, sandbox->cgroup().path, run.quiet);
  int exit_status = EventLoop(&run, &events, child.get(), &limits, sandbox->id());
  if (run.names) {
    run.names->Stop();
    for (auto& e : run.names->TakeEvents()) events.OnOwnEvent(std::move(e));
  }
  // Read before the cgroup goes: the summary's peak use (on a hybrid host
  // memory and pids from the run's v1 cgroups).
  ops::ResourceUsage used = ops::ReadResourceUsage(sandbox->cgroup().path);
  const CgroupV1Usage v1_used = sandbox->V1Usage();
  for (auto [v2, v1] : {std::pair{&used.memory_current, &v1_used.memory_current},
                        {&used.memory_peak, &v1_used.memory_peak},
                        {&used.memory_max, &v1_used.memory_max},
                        {&used.pids_current, &v1_used.pids_current},
                        {&used.pids_peak, &v1_used.pids_peak},
                        {&used.pids_max, &v1_used.pids_max}})
    if (!*v2) *v2 = *v1;
  const std::string usage = used.Describe();
  exit_status = limits.ExitStatus(exit_status, v1_used.oom_kills);
  // A hybrid host: the OOM kills of the run's v1 memory cgroup (read here,
  // at the end: memory.oom_control is not notified), each naming its victim
  // (in the run's cgroup on the unified hierarchy, where the watch is).
  if (limits.watch && v1_used.oom_kills > 0)
    for (auto& e : limits.watch->OomKillEvents(
             v1_used.oom_kills,
             "memory.limit_in_bytes " + (v1_used.memory_max ? std::to_string(*v1_used.memory_max) : std::string("max")),
             v1_used.memory_max, v1_used.memory_peak))
      events.OnOwnEvent(std::move(e));
  bool cleaned = FinishSandbox(sandbox.get(), &events);
  // Read through the agent: the rises it did not report (it read the cgroup
  // last before the run removed it), from what this run read at the end.
  if (limits.watch) {
    events.covered = nullptr;
    for (auto& e : limits.watch->Poll(MonoNs(), /*final=*/true)) events.OnOwnEvent(std::move(e));
  }
  // Revoked once the leftovers are dead: nothing of the workload's can
  // then make revoke fail (a fork bomb, memory) or kill it.
  if (run.credentials)
    run.credentials->RevokeAll("the command ended",
                               [&events](cordon::v1::AuditEvent e) { events.OnOwnEvent(std::move(e)); });
  run.signals->Restore();
  (void)run.sink->Flush();

  if (int failed = child->ReportFailure(PolicyGrants(*run.compiled, run.exe, CORDON_FILE_EXEC))) exit_status = failed;
  if (!events.sink_status.ok()) PrintError("audit log incomplete: " + events.sink_status.error().ToString());
  // The default log of a run that had nothing to say is not kept: one empty
  // file per run otherwise piles up in /var/log/cordon. A file asked for
  // with --audit stays, empty or not.
  std::string audit_log = run.audit_path;
  if (!run.parsed.Has("--audit") && events.sink_status.ok()) {
    struct stat st;
    if (::stat(run.audit_path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0 &&
        ::unlink(run.audit_path.c_str()) == 0)
      audit_log = "none (no events)";
  }
  if (!run.parsed.Has("--audit")) PruneRunLogs(run.parsed.Get("--config").value_or(""), run.audit_path);
  if (hooks.summary) *hooks.summary = events.summary;
  if (hooks.ran) *hooks.ran = true;
  // Always, --quiet included: what happened is not a note.
  std::fprintf(stderr, "cordon: %s%s; audit log: %s\n", SummaryLine(events.summary, ColourWanted(stderr)).c_str(),
               usage.empty() ? "" : ("; " + usage).c_str(), audit_log.c_str());
  if (!cleaned && exit_status == 0) exit_status = 1;
  if (run.fail_on_violation && exit_status == 0) {
    const RunSummary& s = events.summary;
    if (const uint64_t unknown = s.lost + s.suppressed + s.not_received; s.Violations() || unknown) {
      exit_status = kExitViolations;
      PrintError("--fail-on-violation: " +
                 (s.Violations() ? std::to_string(s.Violations()) + " violation" + (s.Violations() == 1 ? "" : "s")
                                 : std::string("no violation seen")) +
                 (unknown ? ", " + std::to_string(unknown) + " event(s) lost, suppressed or not received" : "") +
                 ": exit status " + std::to_string(kExitViolations));
    }
  }
  return exit_status;
}

}  // namespace cordon::cli
