// `cordon learn`: runs a command as `cordon run` does, in audit mode, and
// writes a least-privilege policy from what it reported. The synthesis is
// pure (policy/learn.h); the trail is read by events/learn_trail.h; the run
// is cordon run's own (RunCommandWith). What is here: the rounds, the host's
// answers about paths, and the output files.
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/learn.h"
#include "cli/run_events.h"
#include "events/learn_trail.h"
#include "ops/ops.h"
#include "policy/inline.h"
#include "policy/learn.h"
#include "util/fd.h"
#include "util/fs.h"
#include "util/text.h"

namespace cordon::cli {
namespace {

constexpr int64_t kMaxWindowNs = int64_t{30} * 86400 * 1000000000;

const char* kLearnHelp =
    "usage: cordon learn [--policy BASE] [--out FILE] [--report FILE] [--audit FILE] [--rounds N]\n"
    "                    [--name NAME] [--user dynamic|root|USER|UID[:GID]] [--env NAME[=VALUE]]... [--cwd DIR]\n"
    "                    [--allow-net ADDR[:PORTS]]... [--read PATH]... [--write PATH]... [--exec PATH]...\n"
    "                    [--timeout DURATION] [--config FILE] [--quiet] [--verbose] -- CMD [ARGS...]\n"
    "       cordon learn --cgroup PATH --duration DURATION [--policy BASE] [--out FILE] [--report FILE]\n"
    "                    [--audit FILE] [--name NAME] [--allow-degraded] [--allow-net ADDR[:PORTS]]...\n"
    "                    [--read PATH]... [--write PATH]... [--exec PATH]... [--quiet] [--verbose]\n"
    "\n"
    "Runs CMD as `cordon run` does, under the base policy in audit mode (nothing is refused, what\n"
    "the policy would refuse is reported), then writes a least-privilege policy: the base policy\n"
    "with rules for what CMD did beyond it. It passes `cordon policy check`, and an enforce run of\n"
    "the same work under it is meant to see no violation. The policy goes to --out FILE (written\n"
    "whole or not at all) or to stdout; CMD's own stdout then goes to stderr, so that stdout holds\n"
    "only the policy. A report goes to stderr (or --report FILE): each learned rule with what it\n"
    "allows that was never observed, what was observed but not learned, and each round's trail.\n"
    "\n"
    "With --cgroup, it learns from the processes of an existing cgroup v2 directory (and of the\n"
    "cgroups below it) instead: the base policy is attached to it in audit mode, as `cordon attach\n"
    "--mode audit` would, its events are collected for --duration, then it is detached, leaving\n"
    "nothing attached, and the policy and report are written as above. A cgroup that has a sandbox\n"
    "already is refused: learning would replace its policy, which cordon cannot put back afterwards\n"
    "(detach it, or learn in a cgroup of its own). SIGINT, SIGTERM or SIGHUP end the window early:\n"
    "the sandbox is detached and the policy learned so far is written (exit 3; the report says the\n"
    "window was cut short). Only SIGKILL leaves the sandbox attached (in audit mode: nothing is\n"
    "refused); `cordon detach --cgroup PATH` removes it.\n"
    "\n"
    "  --policy BASE   the policy to start from (YAML or JSON, \"-\" standard input); default: the\n"
    "                  built-in one (`cordon policy check --default`); its rules are kept\n"
    "  --out FILE      where the learned policy goes (JSON); default: stdout\n"
    "  --report FILE   where the report goes; default: stderr\n"
    "  --audit FILE    keep the trail: every round's events appended to FILE (cordon run --audit;\n"
    "                  --cgroup: the window's events and the retroactive check's); default: a file\n"
    "                  of this command's own, removed at the end (--cgroup: none)\n"
    "  --rounds N      run CMD up to N times (1-20, default 1): each round after the first runs it\n"
    "                  in enforce mode under the policy learned so far, and what that refuses is\n"
    "                  learned too, until a round refuses nothing new with a complete trail (the\n"
    "                  policy is then tried). Only for work that does the same when run again (a\n"
    "                  second round of an installer may find its work done)\n"
    "  --name NAME, --user WHO, --env NAME[=VALUE], --cwd DIR, --config FILE\n"
    "                  as for `cordon run` (--user is the learned policy's spec.runAs); with\n"
    "                  --cgroup only --name, as for `cordon attach`\n"
    "  --allow-net, --read, --write, --exec, --timeout\n"
    "                  merged into the base policy as `cordon run` merges them, and so kept in\n"
    "                  the learned policy (--timeout not with --cgroup)\n"
    "  --cgroup PATH   learn from this cgroup (absolute, or relative to the cgroup2 mount) instead\n"
    "                  of running a command; needs --duration\n"
    "  --duration D    how long --cgroup is watched: 90s, 10m, 2h, 1d (at most 30d)\n"
    "  --allow-degraded  with --cgroup on a kernel without usable BPF LSM (see `cordon doctor`):\n"
    "                  learn from what attached processes show there (see below); refused without\n"
    "  -q, --quiet     no notes from the runs (their summary lines and the report stay)\n"
    "  -v, --verbose   cordon run's notes in detail (--cgroup: the attach's notes)\n"
    "\n"
    "How accesses become rules: a connection or datagram is an egress rule for the exact address\n"
    "and its observed ports and protocol (rules by host name do not exist yet); a bind a listen\n"
    "rule; a program executed or mapped executable an exec rule for exactly that file; a file read\n"
    "or written a read or write rule for its directory (a listed directory: itself), climbing to\n"
    "the nearest directory that existed before learning started when CMD made the directory\n"
    "itself; a unix socket a write rule for exactly its path; other socket families and kinds,\n"
    "memfd execution and keyrings their spec switches (user namespaces never). A rule never names or\n"
    "holds a sensitive boundary, and nothing inside a whole-tree one is collapsed (the rule names\n"
    "the file itself); what only such a rule could allow is reported, not learned:\n"
    "    /, every top-level directory, /home/*, /var/lib, /var/log;\n"
    "    whole trees: /etc, /root, /home/*/.ssh, .aws, .config, .gnupg, .kube, .docker,\n"
    "    .local/share/keyrings, .password-store, /var/lib/cordon, /run/secrets, /run/cordon,\n"
    "    /run/user/*, /proc, /sys, /dev, /boot, and the caller's $HOME.\n"
    "Writes are never learned below /usr, /bin, /sbin, /lib*, /opt, /etc, /var/lib, /var/spool,\n"
    "/srv or a whole-tree boundary (also through a symlink), nor connects to unix sockets below\n"
    "/run or /var/run (host daemons: container engines, systemd, D-Bus, the cordon agent): the\n"
    "next run could change or command the host; the report lists them (add --write if it must).\n"
    "Tamper attempts (bpf, mount, ptrace, signals outside, ...) are never allowed by a policy:\n"
    "reported, not learned. With --cgroup, connections the processes had open before the window\n"
    "that the base policy denies (the retroactive check of an attach) are learned as egress rules\n"
    "too (an enforce attach without them would destroy those connections); files they held open are\n"
    "counted, not learned (reads and writes through them are reported where BPF LSM works).\n"
    "\n"
    "The trail of a run is read by this command itself, never through the agent (whose rate limit\n"
    "would hold events back). With --cgroup and an agent running, the agent attaches, detaches and\n"
    "reads the sandbox (its sinks get the events too) and streams them to learn: what its rate\n"
    "limit held back (suppressed) or this command fell behind on is counted; without an agent, learn\n"
    "reads the ring buffer itself. Events the kernel could not buffer are counted too: a trail with\n"
    "losses is said, and the exit status is 3. Without BPF LSM (see `cordon doctor`) audit mode\n"
    "reports files through the detect object: successful opens and executions only, so a directory\n"
    "made, a file removed or renamed without being opened for writing, and the script of a #!\n"
    "program are not seen there; the enforce run refuses those (Landlock). Where BPF LSM works every\n"
    "file operation is reported. Attached processes show even less without it: socket families\n"
    "other than inet and inet6, tamper attempts, capabilities and the use of descriptors opened\n"
    "before the window are not seen (an attach of the learned policy on such a kernel does not\n"
    "refuse them either; `cordon run` and kernels with BPF LSM do).\n"
    "\n"
    "Exit status: 0 the policy was written from a complete trail, CMD succeeded (--cgroup: the\n"
    "window ran to its end) and everything observed is allowed by it; 3 it was written, but the\n"
    "report says why an enforce run may still see violations (events lost or suppressed, accesses\n"
    "not learned, CMD failed, rounds ran out while still finding new accesses, the window was cut\n"
    "short); 1 cordon failed (nothing written; --cgroup: nothing left attached); 2 usage errors.\n";

// Whether `path` existed before learning started (nanoseconds since the
// epoch): it exists and its birth time is earlier. On a file system without
// birth times, its status change time stands in: a directory that only got
// new entries then counts as made too, and the rule climbs one directory
// higher than it needed to (broader, never missing when the next run starts).
bool ExistedBefore(const std::string& path, int64_t start_ns) {
  struct statx stx;
  if (::statx(AT_FDCWD, path.c_str(), AT_SYMLINK_NOFOLLOW, STATX_BTIME | STATX_CTIME, &stx) != 0) return false;
  const struct statx_timestamp& t = (stx.stx_mask & STATX_BTIME) ? stx.stx_btime : stx.stx_ctime;
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec < start_ns;
}

// The run's working directory for its files (policies, audit trails), root's
// alone, removed at the end.
class WorkDir {
 public:
  static Result<WorkDir> Make() {
    CORDON_TRY(MakeDirs("/run/cordon/learn", 0700));
    char tmpl[] = "/run/cordon/learn/XXXXXX";
    if (!::mkdtemp(tmpl)) return SysError("create a directory under /run/cordon/learn");
    WorkDir d;
    d.path_ = tmpl;
    return d;
  }
  WorkDir() = default;
  WorkDir(WorkDir&& o) noexcept : path_(std::move(o.path_)) { o.path_.clear(); }
  WorkDir& operator=(WorkDir&&) = delete;
  ~WorkDir() {
    if (path_.empty()) return;
    if (auto names = ListDir(path_))
      for (const auto& n : *names) ::unlink((path_ + "/" + n).c_str());
    ::rmdir(path_.c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Standard output sent to standard error while CMD runs (when the policy
// goes to stdout), and back.
class StdoutAside {
 public:
  explicit StdoutAside(bool active) {
    if (!active) return;
    std::fflush(stdout);
    saved_ = UniqueFd(::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3));
    if (saved_.valid()) ::dup2(STDERR_FILENO, STDOUT_FILENO);
  }
  ~StdoutAside() {
    if (!saved_.valid()) return;
    std::fflush(stdout);
    ::dup2(saved_.get(), STDOUT_FILENO);
  }
  StdoutAside(const StdoutAside&) = delete;
  StdoutAside& operator=(const StdoutAside&) = delete;

 private:
  UniqueFd saved_;
};

}  // namespace

int LearnUsage(const std::string& message) {
  PrintError(message);
  std::fputs(kLearnHelp, stderr);
  return 2;
}

policy::LearnFacts HostFacts(int64_t start_ns) {
  policy::LearnFacts facts;
  facts.is_directory = [](const std::string& path) {
    struct stat st;
    return ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  };
  facts.existed_before = [start_ns](const std::string& path) { return ExistedBefore(path, start_ns); };
  facts.entries = [](const std::string& dir) {
    auto names = ListDir(dir);
    std::vector<std::string> out = names ? *names : std::vector<std::string>{};
    std::sort(out.begin(), out.end());
    return out;
  };
  facts.canonical = [](const std::string& path) {
    char buf[PATH_MAX];
    return ::realpath(path.c_str(), buf) ? std::string(buf) : path;
  };
  if (const char* home = std::getenv("HOME"); home && home[0] == '/' && std::string(home) != "/") {
    std::string normal, why;
    if (policy::NormalizeFilePath(home, &normal, &why)) facts.extra_boundaries.push_back(normal);
  }
  return facts;
}

Status WriteOutput(const std::string& path, const std::string& data) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.empty()) return Error{path + " names a directory, not a file"};
  return WriteFileAtomic(dir, name, data, 0644);
}

int64_t RealNowNs() {
  struct timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int WriteLearned(const policy::LearnResult& learned, const std::vector<policy::LearnRound>& rounds,
                 const LearnEnding& ending, const std::string& out_path, const std::string& report_path) {
  // The candidate must be a policy this host takes: compiled again, its
  // paths checked as `policy check` and `run` check them.
  policy::CompiledPolicy check;
  policy::Diagnostics diags;
  policy::ParsedPolicy reread;
  if (!policy::ParsePolicyText(learned.text, "<learned>", &reread, &diags) ||
      !policy::Compile(reread, &check, &diags)) {
    std::fputs(policy::FormatDiagnostics(diags).c_str(), stderr);
    return PrintError("the learned policy does not compile (a bug in cordon learn); nothing written"), 1;
  }
  const ops::HostPathCheck host = ops::CheckHostPaths(&check);
  if (!host.errors.empty()) {
    for (const auto& line : host.errors) std::fprintf(stderr, "%s\n", line.c_str());
    return PrintError(
               "the learned policy names write paths this host lacks (the workload removed them?); "
               "nothing written"),
           1;
  }

  // Why an enforce run may still see violations.
  std::vector<std::string> warnings;
  uint64_t lost = 0;
  for (const auto& r : rounds) lost += r.lost + r.suppressed + r.not_received + r.unreadable;
  if (lost)
    warnings.push_back(std::to_string(lost) +
                       " event(s) of the trail were lost, suppressed or unreadable: the policy may miss what they "
                       "reported" +
                       ending.lost_hint);
  if (!learned.not_learned.empty())
    warnings.push_back(std::to_string(learned.not_learned.size()) +
                       " observed access(es) not learned (the report lists them): an enforce run refuses them");
  if (!learned.unplaced.empty() && !ending.tried_clean)
    warnings.push_back(std::to_string(learned.unplaced.size()) +
                       " metadata change(s) could not be placed (the report lists them): an enforce run refuses those "
                       "no learned rule covers" +
                       ending.unplaced_hint);
  warnings.insert(warnings.end(), ending.warnings.begin(), ending.warnings.end());

  std::string report;
  for (const auto& line : learned.report) report += line + "\n";
  for (const auto& w : warnings) report += "warning: " + w + "\n";
  if (warnings.empty()) report += "cordon learn: the trail was complete and everything observed is allowed\n";
  for (const auto& line : ending.closing) report += line + "\n";

  if (out_path.empty()) {
    std::fputs(learned.text.c_str(), stdout);
    if (std::fflush(stdout) != 0)
      return PrintError("write the policy to stdout: " + std::string(std::strerror(errno))), 1;
  } else if (Status st = WriteOutput(out_path, learned.text); !st.ok()) {
    return PrintError(st.error().ToString() + "; nothing written"), 1;
  }
  if (report_path.empty()) {
    std::fputs(report.c_str(), stderr);
  } else if (Status st = WriteOutput(report_path, report); !st.ok()) {
    return PrintError(st.error().ToString() + " (the policy was written)"), 1;
  }
  return warnings.empty() ? 0 : kExitWrittenWithWarnings;
}

int LearnCommand(const Args& args) {
  if (!args.empty() && (args[0] == "-h" || args[0] == "--help")) return std::fputs(kLearnHelp, stdout), 0;
  auto non_empty = [](const std::string& v) {
    return v.empty() ? std::string("needs a value, not ''") : std::string();
  };
  auto usage = [](const std::string& message) { return LearnUsage(message); };
  ParsedArgs parsed;
  std::string error;
  if (!ParseArgs(args,
                 {{"--policy", "", true},
                  {"--out", "", true, false, {}, non_empty},
                  {"--report", "", true, false, {}, non_empty},
                  {"--audit",
                   "",
                   true,
                   false,
                   {},
                   [](const std::string& v) {
                     return v == "-"    ? std::string("the audit log is a file, not '-'")
                            : v.empty() ? std::string("the audit log needs a file name")
                                        : std::string();
                   }},
                  {"--rounds",
                   "",
                   true,
                   false,
                   {},
                   [](const std::string& v) {
                     char* end = nullptr;
                     const long n = std::strtol(v.c_str(), &end, 10);
                     return v.empty() || *end || n < 1 || n > 20
                                ? "takes a number of rounds from 1 to 20, not " + Quoted(v)
                                : std::string();
                   }},
                  SandboxNameOption(),
                  {"--user", "", true},
                  {"--env", "", true, true},
                  {"--cwd", "", true, false, {}, non_empty},
                  {"--config", "", true},
                  {"--allow-net", "", true, true, {}, non_empty},
                  {"--read", "", true, true, {}, non_empty},
                  {"--write", "", true, true, {}, non_empty},
                  {"--exec", "", true, true, {}, non_empty},
                  {"--timeout", "", true, false, {}, non_empty},
                  {"--cgroup", "", true, false, {}, non_empty},
                  {"--duration",
                   "",
                   true,
                   false,
                   {},
                   [](const std::string& v) {
                     int64_t ns = 0;
                     return !ParseDuration(v, &ns) || ns < 1000000000 || ns > kMaxWindowNs
                                ? "takes a duration from 1s to 30d such as 90s, 10m, 2h or 1d, not " + Quoted(v)
                                : std::string();
                   }},
                  {"--allow-degraded", ""},
                  QuietOption(),
                  {"--verbose", "-v"},
                  {"--help", "-h"}},
                 &parsed, &error, /*stop_at_first_positional=*/true))
    return usage(error);
  if (parsed.Has("--help")) return std::fputs(kLearnHelp, stdout), 0;
  std::vector<std::string> command = parsed.positionals;
  command.insert(command.end(), parsed.after_dashdash.begin(), parsed.after_dashdash.end());
  const bool from_cgroup = parsed.Has("--cgroup");
  if (from_cgroup) {
    if (!command.empty())
      return usage("--cgroup learns from the processes already in a cgroup: give no command (" + Quoted(command[0]) +
                   "), or learn from a command without --cgroup");
    if (!parsed.Has("--duration")) return usage("--cgroup needs --duration: how long to watch it (e.g. 10m)");
    for (const char* option : {"--rounds", "--user", "--env", "--cwd", "--config", "--timeout"})
      if (parsed.Has(option)) return usage(std::string(option) + " is for learning from a command, not with --cgroup");
  } else {
    for (const char* option : {"--duration", "--allow-degraded"})
      if (parsed.Has(option)) return usage(std::string(option) + " goes with --cgroup PATH");
    if (command.empty())
      return usage("learn needs a command (cordon learn [options] -- CMD [ARGS...]) or --cgroup PATH --duration D");
  }
  if (parsed.Has("--user") && !policy::ValidRunAs(*parsed.Get("--user")))
    return usage("--user " + *parsed.Get("--user") + ": expected dynamic, root, a user name, or UID[:GID]");
  const int max_rounds = parsed.Has("--rounds") ? std::atoi(parsed.Get("--rounds")->c_str()) : 1;
  const std::string out_path = parsed.Get("--out").value_or("");
  const std::string report_path = parsed.Get("--report").value_or("");
  if (!out_path.empty() && out_path == report_path) return usage("--out and --report name the same file");

  // The base: the file's (or the built-in one) with the inline options merged.
  const std::string base_path = parsed.Get("--policy").value_or("");
  int load_status = 1;
  policy::ParsedPolicy base;
  auto compiled = LoadRunPolicy(base_path, InlineOptionsOf(parsed), "nothing learned", nullptr, &load_status, &base);
  if (!compiled) return load_status;
  if (const auto names = policy::UnenforcedNameRules(*compiled); !names.empty()) {
    for (const auto& line : names) std::fprintf(stderr, "%s\n", line.c_str());
    return PrintError("cordon learn does not take name rules (spec.network.egress[].host) yet; nothing learned"), 1;
  }
  // The built-in default's name would say it is the default.
  const std::string name = base_path.empty() ? "learned" : "";
  if (from_cgroup) {
    if (!IsRoot()) return PrintError("learn needs root (it attaches to the cgroup as cordon attach does)"), 1;
    return LearnFromCgroup(parsed, base, *compiled, name);
  }
  if (!IsRoot()) return PrintError("learn needs root (it runs the command as cordon run does)"), 1;
  auto work = WorkDir::Make();
  if (!work) return PrintError(work.error().ToString() + "; nothing learned"), 1;

  const int64_t start_ns = RealNowNs();
  const policy::LearnFacts facts = HostFacts(start_ns);
  std::vector<policy::Observation> seen;
  std::vector<policy::LearnRound> rounds;
  policy::LearnResult learned = policy::Learn(base, *compiled, seen, rounds, facts, name);
  for (int round = 1; round <= max_rounds; ++round) {
    // This round's policy: the base, then what was learned so far.
    const std::string policy_file = work->path() + "/round-" + std::to_string(round) + ".json";
    // The trail: --audit FILE (every round appended to it), else a file of the work directory.
    const std::string audit_file =
        parsed.Get("--audit").value_or(work->path() + "/round-" + std::to_string(round) + ".jsonl");
    struct stat before;
    const off_t offset = ::stat(audit_file.c_str(), &before) == 0 ? before.st_size : 0;
    if (Status st = WriteOutput(policy_file, round == 1 ? policy::PolicyJson(base) : learned.text); !st.ok())
      return PrintError(st.error().ToString() + "; nothing learned"), 1;
    // The first round reports what the base would refuse; the later ones run
    // as the learned policy will, enforced: without BPF LSM, audit mode does
    // not see all that Landlock refuses (the script of a #! program, a
    // directory made), so only an enforce run can tell.
    const bool enforce = round > 1;
    Args run_args = {"--policy", policy_file, "--mode", enforce ? "enforce" : "audit", "--audit", audit_file};
    for (const char* option : {"--name", "--cwd", "--config"})
      if (auto v = parsed.Get(option)) run_args.insert(run_args.end(), {option, *v});
    if (auto values = parsed.options.find("--env"); values != parsed.options.end())
      for (const auto& v : values->second) run_args.insert(run_args.end(), {"--env", v});
    if (parsed.Has("--quiet") || (!parsed.Has("--verbose") && round > 1)) run_args.push_back("--quiet");
    if (parsed.Has("--verbose")) run_args.push_back("--verbose");
    run_args.push_back("--");
    run_args.insert(run_args.end(), command.begin(), command.end());
    if (!parsed.Has("--quiet"))
      PrintNote(
          "round " + std::to_string(round) + " of at most " + std::to_string(max_rounds) + ": " +
          DisplayText(EscapeWorkloadBytes(command[0])) +
          (enforce ? " in enforce mode under the policy learned so far" : " in audit mode under the base policy"));
    RunSummary summary;
    RunHooks hooks;
    hooks.events_directly = true;
    hooks.summary = &summary;
    bool ran = false;
    hooks.ran = &ran;
    int status;
    {
      StdoutAside aside(out_path.empty());
      status = RunCommandWith(run_args, hooks);
    }
    if (!ran) return PrintError("round " + std::to_string(round) + ": the command did not run; nothing learned"), 1;
    auto text = ReadFile(audit_file, size_t{1} << 30);
    if (!text)
      return PrintError("round " + std::to_string(round) + ": " + text.error().ToString() + "; nothing learned"), 1;
    LearnTrail trail = ReadLearnTrail(text->substr(std::min<size_t>(static_cast<size_t>(offset), text->size())));
    policy::LearnRound r;
    r.enforce = enforce;
    r.exit_status = status;
    r.events = trail.events;
    r.lost = std::max(trail.lost, summary.lost);
    r.suppressed = std::max(trail.suppressed, summary.suppressed);
    r.not_received = summary.not_received;
    r.unreadable = trail.unreadable;
    for (auto& o : trail.observations) {  // distinct already
      if (std::find(seen.begin(), seen.end(), o) != seen.end()) continue;
      seen.push_back(std::move(o));
      ++r.new_observations;
    }
    rounds.push_back(r);
    learned = policy::Learn(base, *compiled, seen, rounds, facts, name);
    if (r.new_observations == 0 && !r.Incomplete()) break;
  }

  // Why an enforce run may still see violations, beyond the common reasons.
  LearnEnding ending;
  ending.lost_hint = " (--rounds 2 runs the command again under it)";
  ending.unplaced_hint = " (--rounds 2 tries the policy)";
  const policy::LearnRound& last = rounds.back();
  ending.tried_clean = last.enforce && last.events == 0;
  if (last.exit_status != 0)
    ending.warnings.push_back("the command exited " + std::to_string(last.exit_status) +
                              ": the policy covers what that run did, which may not be all the work");
  if (max_rounds > 1 && static_cast<int>(rounds.size()) == max_rounds && last.new_observations > 0)
    ending.warnings.push_back("round " + std::to_string(max_rounds) + " still observed " +
                              std::to_string(last.new_observations) + " new access(es): more rounds may find more");
  if (ending.tried_clean)
    ending.closing.push_back("cordon learn: round " + std::to_string(rounds.size()) +
                             " ran the command in enforce mode under the learned policy: nothing was refused");
  else if (!last.enforce)
    ending.closing.push_back(
        "note: the policy was not tried in enforce mode (--rounds 2 or more runs the command under it)");
  return WriteLearned(learned, rounds, ending, out_path, report_path);
}

}  // namespace cordon::cli
