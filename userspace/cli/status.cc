// `cordon status` (the sandboxes, their counters and the agent; --watch to
// follow) and `cordon ls` (one line per sandbox: owner, age, policy digest,
// processes). Both read the pinned state directly; status adds the agent's
// accounting when one runs.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "abi/cordon_common.h"
#include "agent/control.h"
#include "cli/agent_status.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/sandboxes.h"
#include "cli/table.h"
#include "loader/grants.h"
#include "loader/kernel_features.h"
#include "loader/lsm.h"
#include "loader/sandbox.h"
#include "ops/resource_watch.h"
#include "sys/cgroup.h"
#include "util/clock.h"
#include "util/fd.h"
#include "util/fs.h"
#include "util/text.h"

namespace cordon::cli {
namespace {

const char* kStatusHelp =
    "usage: cordon status [--json] [--watch [--interval DURATION]]\n"
    "\n"
    "What this kernel enforces (one line; `cordon doctor` says more), then one row per attached\n"
    "sandbox: its name, mode, the layers enforcing it (cgroup hooks, BPF LSM, Landlock, seccomp,\n"
    "detect), events by verdict (DENIED refused, AUDITED would have been refused in audit mode,\n"
    "DETECTED happened and was seen afterwards, KILLED happened and the task was killed), events\n"
    "the kernel DROPPED because a ring buffer was full, its OWNER (the cordon run that made it,\n"
    "\"orphaned\" when that run was killed with -9 and left it pinned, \"-\" for a cgroup attached with\n"
    "cordon attach) and AGE. Under each row: its cgroup and id, policy name and digest, the\n"
    "denials and audits by kind, resource use, and the names cordon's resolver answered it\n"
    "(name rules: each address allowed, its ports and the time left; `names` in --json). These\n"
    "live in the kernel and survive every cordon process.\n"
    "\n"
    "When an agent runs (see `cordon agent --help`), its accounting follows: events delivered,\n"
    "suppressed by the rate limit and lost, per sandbox; sink writes and failures; tailers and\n"
    "their drops; the metrics address. Without one it says so. An agent that has no free control\n"
    "connection (\"agent busy: all N control connections in use\") makes status exit 1.\n"
    "\n"
    "  --json               one JSON object: enforcement (per control: enforced or not-enforced,\n"
    "                       with the cause), bpfLsm, sandboxes[] and agent (null without one; else\n"
    "                       the agent's StatusReply, userspace/proto/control.proto, in protobuf JSON)\n"
    "  --watch              say it again every interval until interrupted (Ctrl-C): on a terminal\n"
    "                       the screen is redrawn; otherwise each snapshot follows the last (with\n"
    "                       --json, one object per line)\n"
    "  --interval DURATION  between snapshots of --watch (default 2s, at least 100ms)\n"
    "\n"
    "Colour on a terminal (verdict counters, orphans); none with NO_COLOR set or on a pipe.\n"
    "Exit status: 0 (also when --watch is interrupted), 1 failure, 2 usage errors.\n";

const char* kLsHelp =
    "usage: cordon ls [--json]\n"
    "\n"
    "One line per attached sandbox: NAME, OWNER (run PID: the cordon run that made it; orphaned:\n"
    "that run was killed and left it pinned; -: attached with cordon attach), AGE, POLICY and the\n"
    "first 12 hex digits of its DIGEST (the SHA-256 of the policy text in force, what sha256sum of\n"
    "the file prints; builtin for the default policy; ? when an older cordon attached it), PROCS\n"
    "(processes in its cgroup and the cgroups below) and CGROUP. `cordon status` has the counters.\n"
    "\n"
    "  --json   an array of objects: name, id, cgroup, cgroupAlive, owner {pid, orphaned},\n"
    "           attachedAtNs, ageSeconds, policy, policyDigest, mode, processes\n"
    "\n"
    "Exit status: 0, 1 failure, 2 usage errors.\n";

// Whole seconds since a CLOCK_REALTIME time in ns (0 if in the future).
uint64_t AgeSeconds(uint64_t realtime_ns) {
  const int64_t now = RealNs();
  return now > 0 && static_cast<uint64_t>(now) > realtime_ns ? (static_cast<uint64_t>(now) - realtime_ns) / 1000000000ull
                                                              : 0;
}

// "42s", "3m12s", "5h3m", "2d4h"
std::string Age(uint64_t s) {
  auto two = [](uint64_t big, const char* a, uint64_t small, const char* b) {
    return std::to_string(big) + a + std::to_string(small) + b;
  };
  if (s < 60) return std::to_string(s) + "s";
  if (s < 3600) return two(s / 60, "m", s % 60, "s");
  if (s < 86400) return two(s / 3600, "h", s % 3600 / 60, "m");
  return two(s / 86400, "d", s % 86400 / 3600, "h");
}

std::string Shown(const std::string& workload_text) { return DisplayText(EscapeWorkloadBytes(workload_text)); }

// The layers a sandbox is enforced by, for a person: "lsm", "cgroup+landlock+seccomp".
std::string Layers(const SandboxInfo& s) {
  std::string level = s.Level();
  return level.rfind("kernel-", 0) == 0 ? level.substr(7) : level;
}

// "sha256:0123456789ab" (12 hex digits), "builtin", or "?" (unknown).
std::string ShortDigest(const std::string& digest) {
  if (digest.rfind("sha256:", 0) == 0) return Shown(digest.substr(0, 7 + 12));
  if (digest == "builtin:default") return "builtin";
  return digest.empty() ? "?" : Shown(digest);  // kernel state: any root process may have written it
}

std::string Owner(const SandboxInfo& s) {
  if (s.orphaned) return "orphaned";
  if (s.owner_pid) return "run " + std::to_string(s.owner_pid);
  return "-";
}

struct Kinds {
  uint64_t connect, sendmsg, socket, file, tamper;
  uint64_t Total() const { return connect + sendmsg + socket + file + tamper; }
  // "2 connect, 1 file" (the kinds with a count).
  std::string Text() const {
    std::string out;
    for (const auto& [n, what] : std::initializer_list<std::pair<uint64_t, const char*>>{
             {connect, "connect"}, {sendmsg, "sendmsg"}, {socket, "socket"}, {file, "file"}, {tamper, "tamper"}})
      if (n) out += (out.empty() ? "" : ", ") + std::to_string(n) + " " + what;
    return out;
  }
  std::string Json() const {
    return "{\"connect\":" + std::to_string(connect) + ",\"sendmsg\":" + std::to_string(sendmsg) +
           ",\"socket\":" + std::to_string(socket) + ",\"file\":" + std::to_string(file) +
           ",\"tamper\":" + std::to_string(tamper) + "}";
  }
};

Kinds Denied(const SandboxInfo& s) {
  const auto& c = s.counters;
  return {c[CORDON_CNT_DENIED_CONNECT], c[CORDON_CNT_DENIED_SENDMSG],
          c[CORDON_CNT_DENIED_SOCKET] + c[CORDON_CNT_DENIED_LSM_NET], c[CORDON_CNT_DENIED_FILE],
          c[CORDON_CNT_DENIED_TAMPER]};
}

Kinds Audited(const SandboxInfo& s) {
  const auto& c = s.counters;
  return {c[CORDON_CNT_AUDITED_CONNECT], c[CORDON_CNT_AUDITED_SENDMSG],
          c[CORDON_CNT_AUDITED_SOCKET] + c[CORDON_CNT_AUDITED_LSM_NET], c[CORDON_CNT_AUDITED_FILE],
          c[CORDON_CNT_AUDITED_TAMPER]};
}

// What the kernel enforces for processes cordon attaches to, per control:
// the cgroup hooks everywhere, the rest only with BPF LSM.
struct KernelControls {
  std::string cause;  // why the BPF LSM ones are not enforced ("" when they are)
  std::vector<std::pair<std::string, bool>> controls;
};

KernelControls Controls(const LsmAvailability& lsm) {
  KernelControls k;
  if (!lsm.usable())
    k.cause = !lsm.listed ? "'bpf' is not in the kernel's LSM list"
                          : (lsm.detail.empty() ? std::string("BPF LSM programs do not load") : lsm.detail);
  for (const char* cgroup_hook : {"network.egress", "network.extraProtocols", "network.listen", "network.sockopt",
                                  "devices", "sysctl"})
    k.controls.emplace_back(cgroup_hook, true);
  for (const char* lsm_hook : {"network.families", "files", "exec", "tamper", "identity", "terminal", "inherited",
                               "hostObjects"})
    k.controls.emplace_back(lsm_hook, lsm.usable());
  // Credential files of attached sandboxes: only their own tasks open them.
  k.controls.emplace_back("credentials", lsm.usable() && LsmGuardsCredentials());
  return k;
}

// One line, for a person: what is enforced and, if not everything, why.
std::string KernelLine(const LsmAvailability& lsm) {
  if (lsm.usable()) return "kernel: every control enforced (cgroup hooks, BPF LSM)";
  return "kernel: network enforced (cgroup hooks); files, exec, socket families, tamper NOT enforced for attached "
         "sandboxes (no BPF LSM: " +
         std::string(!lsm.listed ? "'bpf' is not in the kernel's LSM list" : "the kernel refuses its programs") +
         "); see `cordon doctor`";
}

std::string EnforcementJson(const LsmAvailability& lsm) {
  KernelControls k = Controls(lsm);
  std::string out = "{\"controls\":{";
  for (size_t i = 0; i < k.controls.size(); ++i)
    out += (i ? "," : "") + JsonString(k.controls[i].first) + ":" +
           (k.controls[i].second ? "\"enforced\"" : "\"not-enforced\"");
  return out + "},\"cause\":" + JsonString(k.cause) + ",\"summary\":" + JsonString(EnforcementSummary(lsm)) + "}";
}

// Processes in a cgroup and below it, walked through descriptors (no path
// grows with the depth). Returns "" when every cgroup was read, else why not
// (more than 4096 cgroups, one that could not be opened or read): the count
// is then a lower bound. Every directory counts, dot names included: a
// workload that manages its subtree may name a cgroup ".h".
std::string CountProcesses(int dir_fd, size_t* cgroups_left, uint64_t* count, int depth = 0) {
  if (*cgroups_left == 0 || depth > 64) return "more cgroups than counted";
  --*cgroups_left;
  std::string problem;
  {
    UniqueFd procs(::openat(dir_fd, "cgroup.procs", O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!procs.valid()) return "cgroup.procs unreadable";
    char buf[4096];
    for (ssize_t n; (n = ::read(procs.get(), buf, sizeof buf)) != 0;) {
      if (n < 0) {
        if (errno == EINTR) continue;
        return "cgroup.procs unreadable";
      }
      for (ssize_t i = 0; i < n; ++i) *count += buf[i] == '\n';
    }
  }
  int dup = ::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
  DIR* d = dup >= 0 ? ::fdopendir(dup) : nullptr;
  if (!d) {
    if (dup >= 0) ::close(dup);
    return "cgroup unreadable";
  }
  while (dirent* e = ::readdir(d)) {
    if (e->d_type != DT_DIR || std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    UniqueFd child(::openat(dir_fd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    std::string below = child.valid() ? CountProcesses(child.get(), cgroups_left, count, depth + 1) : "cgroup unreadable";
    if (problem.empty()) problem = below;
    if (*cgroups_left == 0) break;
  }
  ::closedir(d);
  return problem;
}

// "2s", "500ms", "1.5s"
std::string IntervalText(int64_t ns) {
  if (ns % 1000000000 == 0) return std::to_string(ns / 1000000000) + "s";
  if (ns < 1000000000) return std::to_string(ns / 1000000) + "ms";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fs", static_cast<double>(ns) / 1e9);
  return buf;
}

// "2026-12-05T03:42:14Z"
std::string UtcNow() {
  time_t now = ::time(nullptr);
  struct tm tm = {};
  char buf[32] = "-";
  if (::gmtime_r(&now, &tm)) std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::atomic<bool> g_stop{false};
void OnStop(int) { g_stop = true; }

// The status snapshot, as text or JSON; *failure says why status fails (the
// pinned state cannot be read, the agent is busy), "" when it does not.
// spec.credentials of a sandbox: names, fingerprints and times, never values.
std::string CredentialsJson(const std::vector<ops::CredentialStatus>& creds) {
  std::string out = "[";
  for (const auto& c : creds)
    out += std::string(out.size() > 1 ? "," : "") + "{\"name\":" + JsonString(c.name) +
           ",\"fingerprint\":" + JsonString(c.fingerprint) + ",\"deliver\":" + JsonString(c.deliver) +
           ",\"path\":" + JsonString(c.path) + ",\"issuedAt\":" + std::to_string(c.issued_at) +
           ",\"expiresAt\":" + std::to_string(c.expires_at) + ",\"revokePending\":" + (c.pending ? "true" : "false") +
           ",\"guard\":" +
           (c.guarded             ? "\"bpf-lsm\""
            : c.deliver == "file" ? "\"file-ownership\""
                                  : "\"none\"") +
           "}";
  return out + "]";
}

std::string CredentialsText(const std::vector<ops::CredentialStatus>& creds) {
  const int64_t now = static_cast<int64_t>(::time(nullptr));
  std::string out;
  for (const auto& c : creds) {
    out += (out.empty() ? "" : ", ") + c.name + " " + c.fingerprint;
    // Read back from the kernel's mark on the file, not assumed.
    if (c.guarded) out += " (guarded by BPF LSM: only this sandbox opens it)";
    if (c.pending)
      out += " (revoke pending)";
    else if (c.expires_at > now)
      out += " (expires in " + Age(static_cast<uint64_t>(c.expires_at - now)) + ")";
    else
      out += " (expired)";
  }
  return out;
}

// The live name grants of a sandbox (README "Egress by name"): the addresses
// cordon's resolver answered it, in force now; the expired ones left out.
struct LiveGrant {
  GrantEntry entry;
  uint64_t expires_in_s = 0;
};
std::vector<LiveGrant> LiveGrants(uint64_t sandbox_id) {
  std::vector<LiveGrant> out;
  auto grants = ListGrants(sandbox_id);
  if (!grants) return out;
  const uint64_t now = static_cast<uint64_t>(NowNs(CLOCK_BOOTTIME));
  for (auto& g : *grants) {
    if (g.expires_boot_ns <= now) continue;
    const uint64_t left_s = (g.expires_boot_ns - now + 999999999) / 1000000000;
    out.push_back({std::move(g), left_s});
  }
  std::sort(out.begin(), out.end(), [](const LiveGrant& a, const LiveGrant& b) {
    return std::tie(a.entry.name, a.entry.address_text) < std::tie(b.entry.name, b.entry.address_text);
  });
  return out;
}

std::string GrantPorts(const GrantEntry& g) {
  std::string ports;
  for (const auto& p : g.ports)
    ports += (ports.empty() ? "" : ",") + std::to_string(p.lo) + (p.hi != p.lo ? "-" + std::to_string(p.hi) : "");
  return ports;
}

std::string GrantsJson(const std::vector<LiveGrant>& grants) {
  std::string out = "[";
  for (const auto& [g, in] : grants)
    out += std::string(out.size() > 1 ? "," : "") + "{\"name\":" + JsonString(g.name) +
           ",\"address\":" + JsonString(g.address_text) + ",\"rule\":" + std::to_string(g.rule_index) +
           ",\"protocols\":" +
           JsonString(std::string(g.tcp ? "tcp" : "") + (g.tcp && g.udp ? "," : "") + (g.udp ? "udp" : "")) +
           ",\"ports\":" + JsonString(g.ports.empty() ? "all" : GrantPorts(g)) +
           ",\"expiresInSeconds\":" + std::to_string(in) + "}";
  return out + "]";
}

std::string GrantsText(const std::vector<LiveGrant>& grants) {
  constexpr size_t kShown = 8;
  std::string out;
  for (size_t i = 0; i < grants.size() && i < kShown; ++i) {
    const auto& [g, in] = grants[i];
    out += (out.empty() ? "" : ", ") + g.name + " " + g.address_text + " (" +
           (g.ports.empty() ? "every port" : "port " + GrantPorts(g)) + ", " + Age(in) + " left)";
  }
  if (grants.size() > kShown) out += ", and " + std::to_string(grants.size() - kShown) + " more (--json lists all)";
  return out;
}

std::string StatusSnapshot(bool json, bool colour, std::string* failure) {
  bool agent_failed = false;
  auto sandboxes = PickSandboxes(&agent_failed);
  StatusOutcome status = (sandboxes ? *sandboxes : *DirectSandboxes()).Status();
  if (!status.error.empty()) {
    *failure = status.error;
    return "";
  }
  if (agent_failed) status.agent_problem = "cannot reach the agent at " + agent::AgentSocketPath();
  const std::optional<cordon::v1::StatusReply>& agent_status = status.agent;
  const std::string& agent_problem = status.agent_problem;
  // An agent with no room for us is running but cannot say anything: that
  // fails, with its reason ("agent busy: all N control connections in use").
  *failure = agent::AgentBusy(agent_problem) ? agent_problem : "";
  auto cgroup2 = FindCgroup2Mount();
  const LsmAvailability& lsm = ProbeLsm();
  std::ostringstream out;
  if (json) {
    out << "{\"enforcement\":" << EnforcementJson(lsm) << ",\"bpfLsm\":{\"listed\":" << (lsm.listed ? "true" : "false")
        << ",\"loadable\":" << (lsm.loadable ? "true" : "false") << ",\"usable\":" << (lsm.usable() ? "true" : "false")
        << ",\"detail\":" << JsonString(lsm.detail) << "},\"sandboxes\":[";
    bool first = true;
    for (const auto& s : status.sandboxes) {
      if (!first) out << ",";
      first = false;
      const auto& c = s.counters;
      out << "{\"id\":" << s.id << ",\"name\":" << JsonString(EscapeWorkloadBytes(s.name))
          << ",\"cgroup\":" << JsonString(EscapeWorkloadBytes(s.cgroup_path))
          << ",\"cgroupAlive\":" << (s.cgroup_alive ? "true" : "false") << ",\"policy\":" << JsonString(s.policy)
          << ",\"policyDigest\":" << JsonString(EscapeWorkloadBytes(s.policy_digest))
          << ",\"mode\":" << JsonString(ModeName(s.mode)) << ",\"generation\":" << s.generation
          << ",\"ephemeral\":" << (s.ephemeral ? "true" : "false") << ",\"ownerPid\":" << s.owner_pid
          << ",\"orphaned\":" << (s.orphaned ? "true" : "false") << ",\"attachedAtNs\":" << s.attached_at_ns
          << ",\"ageSeconds\":" << AgeSeconds(s.attached_at_ns) << ",\"enforcementLevel\":" << JsonString(s.Level())
          << ",\"denied\":" << Denied(s).Json() << ",\"audited\":" << Audited(s).Json()
          << ",\"detected\":" << c[CORDON_CNT_DETECTED] << ",\"killed\":" << c[CORDON_CNT_KILLED]
          << ",\"allowed\":{\"connect\":" << c[CORDON_CNT_ALLOWED_CONNECT]
          << ",\"sendmsg\":" << c[CORDON_CNT_ALLOWED_SENDMSG] << "},\"eventsDropped\":" << c[CORDON_CNT_EVENTS_DROPPED]
          << ",\"repeats\":" << c[CORDON_CNT_REPEATS] << ",\"contained\":" << (s.contained() ? "true" : "false")
          << ",\"containedByKernel\":" << ((s.state.flags & CORDON_STATE_F_AUTO) ? "true" : "false")
          << ",\"killedAtContainment\":" << ((s.state.flags & CORDON_STATE_F_KILLED) ? "true" : "false")
          << ",\"problem\":" << JsonString(s.problem) << ",\"resources\":"
          << (s.cgroup_alive && cgroup2 ? ops::ReadResourceUsage(*cgroup2 + s.cgroup_path).Json() : "{}")
          << ",\"egress\":" << ops::EgressJson(s, 10) << ",\"names\":" << GrantsJson(LiveGrants(s.id))
          << ",\"credentials\":"
          << (status.credentials.count(s.id) ? CredentialsJson(status.credentials.at(s.id)) : std::string("[]")) << "}";
    }
    out << "],\"agent\":" << (agent_status ? AgentStatusJson(*agent_status) : "null");
    if (!agent_problem.empty()) out << ",\"agentProblem\":" << JsonString(agent_problem);
    out << "}\n";
    return out.str();
  }
  out << KernelLine(lsm) << "\n";
  if (status.sandboxes.empty()) {
    out << "no sandboxes attached\n";
  } else {
    Table table({"SANDBOX", "MODE", "LAYERS", "DENIED", "AUDITED", "DETECTED", "KILLED", "DROPPED", "OWNER", "AGE"});
    for (const auto& s : status.sandboxes) {
      const auto& c = s.counters;
      const Kinds denied = Denied(s), audited = Audited(s);
      auto count = [](uint64_t n, Colour colour) { return Table::Cell(std::to_string(n), n ? colour : Colour::kNone); };
      std::vector<std::string> details;
      std::string where = "cgroup " + Shown(s.cgroup_path) + (s.cgroup_alive ? "" : " (removed)") + " (id " +
                          std::to_string(s.id) + "), policy " + Shown(s.policy) + " " + ShortDigest(s.policy_digest);
      if (s.owner_pid && !s.orphaned)
        where += ", attached " + Age(AgeSeconds(s.attached_at_ns)) + " ago by cordon run (pid " +
                 std::to_string(s.owner_pid) + ")";
      details.push_back(where);
      if (!s.problem.empty()) details.push_back(Paint("problem: " + s.problem, Colour::kRed, colour));
      if (s.orphaned)
        details.push_back(Paint("orphaned: its cordon run (pid " + std::to_string(s.owner_pid) +
                                    ") has ended; the policy still holds what is left in the cgroup; `cordon detach "
                                    "--id " + std::to_string(s.id) + "` kills that and removes the sandbox",
                                Colour::kYellow, colour));
      if (s.contained())
        details.push_back(
            Paint(std::string("CONTAINED") +
                      ((s.state.flags & CORDON_STATE_F_AUTO) ? " by the kernel (onViolation: contain)" : "") +
                      ((s.state.flags & CORDON_STATE_F_KILLED)
                           ? ": its processes were killed; `cordon detach --id " + std::to_string(s.id) + "` removes it"
                           : ": every operation is refused; `cordon release --id " + std::to_string(s.id) +
                                 "` puts its policy back in force"),
                  Colour::kRed, colour));
      if (denied.Total()) details.push_back("denied: " + denied.Text());
      if (audited.Total()) details.push_back("audited: " + audited.Text());
      if (status.credentials.count(s.id))
        details.push_back("credentials: " + CredentialsText(status.credentials.at(s.id)));
      if (auto grants = LiveGrants(s.id); !grants.empty()) details.push_back("names: " + GrantsText(grants));
      if (s.cgroup_alive && cgroup2)
        if (std::string use = ops::ReadResourceUsage(*cgroup2 + s.cgroup_path).DescribeCurrent(); !use.empty())
          details.push_back("resources: " + use);
      if (std::string egress = ops::EgressText(s); !egress.empty() && (s.egress.bytes || s.egress_limit))
        details.push_back("egress: " + egress);
      table.Add({Shown(s.name), ModeName(s.mode), Layers(s), count(denied.Total(), Colour::kRed),
                 count(audited.Total(), Colour::kYellow), count(c[CORDON_CNT_DETECTED], Colour::kYellow),
                 count(c[CORDON_CNT_KILLED], Colour::kRed), count(c[CORDON_CNT_EVENTS_DROPPED], Colour::kRed),
                 Table::Cell(Owner(s), s.orphaned ? Colour::kYellow : Colour::kNone), Age(AgeSeconds(s.attached_at_ns))},
                std::move(details));
    }
    out << table.Render(colour);
  }
  if (agent_status) out << AgentStatusText(*agent_status);
  else if (!agent_problem.empty()) out << "agent: " << agent_problem << "\n";
  else
    out << "agent: not running (" << agent::AgentSocketPath()
        << "): events wait in each sandbox's ring buffer until one runs or `cordon tail` reads them\n";
  return out.str();
}

}  // namespace

int StatusCommand(const Args& args) {
  if (WantsHelp(args)) return std::fputs(kStatusHelp, stdout), 0;
  ParsedArgs parsed;
  std::string error;
  if (!ParseArgs(args, {{"--json", ""}, {"--watch", ""}, {"--interval", "", true}}, &parsed, &error) ||
      !parsed.positionals.empty()) {
    Usage(error.empty() ? "unexpected argument '" + parsed.positionals[0] + "'" : error, kStatusHelp);
    return 2;
  }
  int64_t interval_ns = 2000000000;
  if (auto interval = parsed.Get("--interval")) {
    if (!parsed.Has("--watch")) return Usage("--interval goes with --watch", kStatusHelp), 2;
    if (!ParseDuration(*interval, &interval_ns) || interval_ns < 100000000)
      return Usage("--interval " + Quoted(*interval) + ": expected a duration of at least 100ms (2s, 500ms)",
                   kStatusHelp),
             2;
  }
  if (!IsRoot()) return PrintError("status needs root (it reads pinned BPF state)"), 1;
  const bool json = parsed.Has("--json");
  const bool colour = !json && ColourWanted(stdout);
  if (!parsed.Has("--watch")) {
    std::string failure;
    std::string text = StatusSnapshot(json, colour, &failure);
    if (!failure.empty()) PrintError(failure);
    std::fputs(text.c_str(), stdout);
    return failure.empty() ? 0 : 1;
  }
  // --watch: until SIGINT or SIGTERM (or a closed stdout), exit 0.
  struct sigaction sa = {};
  sa.sa_handler = OnStop;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  const bool redraw = !json && ::isatty(STDOUT_FILENO) == 1;
  bool first = true;
  while (!g_stop) {
    std::string failure;
    std::string text = StatusSnapshot(json, colour, &failure);
    std::string frame;
    if (redraw) frame = "\033[H\033[2J";
    else if (!first && !json) frame = "\n";
    if (!json) frame += Paint("every " + IntervalText(interval_ns) + ", " + UtcNow() + " (Ctrl-C ends)",
                              Colour::kDim, colour) + "\n";
    frame += text.empty() ? "cordon: " + failure + "\n" : text;
    if (std::fputs(frame.c_str(), stdout) < 0 || std::fflush(stdout) != 0) break;  // the reader went away
    first = false;
    // Sleep the interval in short steps, so that a signal ends it promptly.
    for (int64_t slept = 0; slept < interval_ns && !g_stop; slept += 50000000) {
      struct timespec step = {0, static_cast<long>(std::min<int64_t>(50000000, interval_ns - slept))};
      ::nanosleep(&step, nullptr);
    }
  }
  return 0;
}

int LsCommand(const Args& args) {
  if (WantsHelp(args)) return std::fputs(kLsHelp, stdout), 0;
  ParsedArgs parsed;
  std::string error;
  if (!ParseArgs(args, {{"--json", ""}}, &parsed, &error) || !parsed.positionals.empty()) {
    Usage(error.empty() ? "unexpected argument '" + parsed.positionals[0] + "'" : error, kLsHelp);
    return 2;
  }
  if (!IsRoot()) return PrintError("ls needs root (it reads pinned BPF state)"), 1;
  ops::StatusOutcome status = ops::Status();
  if (!status.error.empty()) return PrintError(status.error), 1;
  auto cgroup2 = FindCgroup2Mount();
  const bool json = parsed.Has("--json");
  const bool colour = !json && ColourWanted(stdout);
  std::string json_out = "[";
  Table table({"NAME", "OWNER", "AGE", "POLICY", "DIGEST", "PROCS", "CGROUP"});
  for (const auto& s : status.sandboxes) {
    uint64_t procs = 0;
    size_t budget = 4096;
    std::string problem;
    if (s.cgroup_alive && cgroup2) {
      UniqueFd top(::open((*cgroup2 + s.cgroup_path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      problem = top.valid() ? CountProcesses(top.get(), &budget, &procs) : "cgroup unreadable";
    }
    std::string procs_text = !s.cgroup_alive ? "-" : std::to_string(procs) + (problem.empty() ? "" : "+");
    if (json) {
      json_out += std::string(json_out.size() > 1 ? "," : "") + "{\"name\":" + JsonString(EscapeWorkloadBytes(s.name)) +
                  ",\"id\":" + std::to_string(s.id) + ",\"cgroup\":" + JsonString(EscapeWorkloadBytes(s.cgroup_path)) +
                  ",\"cgroupAlive\":" + (s.cgroup_alive ? "true" : "false") + ",\"owner\":{\"pid\":" +
                  std::to_string(s.owner_pid) + ",\"orphaned\":" + (s.orphaned ? "true" : "false") +
                  "},\"attachedAtNs\":" + std::to_string(s.attached_at_ns) + ",\"ageSeconds\":" +
                  std::to_string(AgeSeconds(s.attached_at_ns)) + ",\"policy\":" + JsonString(s.policy) +
                  ",\"policyDigest\":" + JsonString(EscapeWorkloadBytes(s.policy_digest)) + ",\"mode\":" + JsonString(ModeName(s.mode)) +
                  ",\"processes\":" + (s.cgroup_alive ? std::to_string(procs) : "null") +
                  (problem.empty() ? "" : ",\"processesAtLeast\":true") + "}";
      continue;
    }
    table.Add({Shown(s.name), Table::Cell(Owner(s), s.orphaned ? Colour::kYellow : Colour::kNone),
               Age(AgeSeconds(s.attached_at_ns)), Shown(s.policy), ShortDigest(s.policy_digest), procs_text,
               Shown(s.cgroup_path) + (s.cgroup_alive ? "" : " (removed)")});
  }
  if (json) return std::printf("%s]\n", json_out.c_str()), 0;
  if (status.sandboxes.empty()) return std::printf("no sandboxes attached\n"), 0;
  std::fputs(table.Render(colour).c_str(), stdout);
  return 0;
}

}  // namespace cordon::cli
