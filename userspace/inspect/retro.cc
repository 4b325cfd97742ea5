// Retroactive attach: judge and destroy pre-existing connections, list
// pre-existing open files. See retro.h.
//
// Steps: (1) the processes of the cgroup subtree (cgroup.procs of every
// directory) and, from /proc/<pid>/fd, the socket inodes and regular files
// each holds; (2) a sock_diag dump (SOCK_DIAG_BY_FAMILY, all states) of TCP,
// UDP and UDP-Lite over IPv4 and IPv6 in every network namespace those
// processes are in, matched by inode; (3) each connected socket judged by
// EgressMatcher and, if denied in enforce mode, destroyed (SOCK_DESTROY with
// the exact socket id and cookie, acknowledged).
#include "inspect/retro.h"

#include <dirent.h>
#include <fcntl.h>
#include <google/protobuf/util/time_util.h>
#include <linux/inet_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <unordered_map>

#include "abi/cordon_event.h"
#include "abi/cordon_net.h"
#include "policy/cidr.h"
#include "policy/egress_match.h"
#include "sys/sock_diag.h"
#include "util/fd.h"
#include "util/fs.h"
#include "util/clock.h"
#include "util/text.h"

namespace cordon {

namespace {

constexpr uint8_t kTcp = 6;
constexpr uint8_t kUdp = 17;
constexpr uint8_t kUdpLite = 136;

}  // namespace

// ---- Processes ---------------------------------------------------------------

namespace {

struct Process {
  int pid = 0;
  std::string cgroup_relative;
  uint64_t cgroup_id = 0;
  uint64_t netns = 0;
  uint32_t ppid = 0, uid = 0, gid = 0;
  uint64_t start_time = 0;  // /proc/<pid>/stat field 22: tells this process from a later one with its pid
  std::string comm, exe;
  std::vector<std::string> files;  // regular files, first fd first, each path once
  // For a containment's evidence (ScanProcess fills them too): the
  // arguments, the working directory, every descriptor (escaped targets).
  std::vector<std::string> cmdline;
  std::string cwd;
  std::vector<std::pair<int, std::string>> fds;
};

constexpr size_t kMaxFdsListed = 4096;  // per process, in a containment's evidence

std::string ReadLinkAt(int dirfd, const char* name) {
  char buf[4096];
  ssize_t n = ::readlinkat(dirfd, name, buf, sizeof buf);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// The process's cgroup v2 path ("0::/..." of /proc/<pid>/cgroup) is
// `relative` or below it.
bool InSubtree(const std::string& proc, const std::string& relative) {
  auto text = ReadFile(proc + "/cgroup", 1 << 16);
  if (!text) return false;
  size_t at = text->rfind("0::", 0) == 0 ? 0 : text->find("\n0::");
  if (at == std::string::npos) return false;
  at += at == 0 ? 3 : 4;
  std::string path = text->substr(at, text->find('\n', at) - at);
  if (relative == "/") return true;
  return path == relative || path.rfind(relative + "/", 0) == 0;
}

// Field 22 of /proc/<pid>/stat (start time, in clock ticks since boot); 0 if
// unreadable. The fields are counted after the last ')' (comm may hold any).
uint64_t StartTime(const std::string& proc) {
  auto stat = ReadFile(proc + "/stat", 4096);
  if (!stat) return 0;
  size_t at = stat->rfind(')');
  if (at == std::string::npos) return 0;
  int field = 2;
  for (size_t i = at + 1; i < stat->size(); ++i) {
    if ((*stat)[i] != ' ') continue;
    if (++field == 22) return std::strtoull(stat->c_str() + i + 1, nullptr, 10);
  }
  return 0;
}

// Where to read a process in /proc: /proc/<pid>, or, when its main thread
// has exited (pthread_exit) and others run on, /proc/<pid>/task/<tid> of a
// live one: the leader, a zombie, shows no descriptors, namespaces, exe or
// working directory, yet the process still holds and uses them all.
std::string LiveThreadView(int pid) {
  const std::string proc = "/proc/" + std::to_string(pid);
  auto zombie = [](const std::string& dir) {
    auto status = ReadFile(dir + "/status", 1 << 16);
    return status && status->find("\nState:\tZ") != std::string::npos;
  };
  if (!zombie(proc)) return proc;
  auto tasks = ListDir(proc + "/task");
  if (!tasks) return proc;
  for (const auto& tid : *tasks)
    if (tid != std::to_string(pid) && !zombie(proc + "/task/" + tid)) return proc + "/task/" + tid;
  return proc;
}

// Fills p (and `sockets`: the inodes of the sockets it holds) from
// /proc/<pid>; false if the process is gone, or is not the process that was
// listed (the pid was reused by one outside the sandbox). A pidfd pins the
// identity: taken first, checked for membership, polled for exit at the end.
bool ScanProcess(Process* p, const std::string& sandbox_relative, std::vector<uint32_t>* sockets) {
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, p->pid, 0)));
  if (!pidfd.valid()) return false;
  const std::string leader = "/proc/" + std::to_string(p->pid), proc = LiveThreadView(p->pid);
  if (!InSubtree(proc, sandbox_relative)) return false;
  struct stat st;
  if (::stat((proc + "/ns/net").c_str(), &st) != 0) return false;
  p->netns = st.st_ino;
  p->start_time = StartTime(leader);
  if (auto comm = ReadFile(leader + "/comm", 4096)) {
    std::string c = *comm;
    while (!c.empty() && c.back() == '\n') c.pop_back();
    p->comm = EscapeWorkloadBytes(c);
  }
  if (auto status = ReadFile(leader + "/status", 1 << 16)) {
    auto field = [&](const char* name) -> uint32_t {
      std::string key = std::string("\n") + name + ":";
      size_t at = status->find(key);
      if (at == std::string::npos) return 0;
      return static_cast<uint32_t>(std::strtoul(status->c_str() + at + key.size(), nullptr, 10));
    };
    p->ppid = field("PPid");
    p->uid = field("Uid");  // the first number: real id
    p->gid = field("Gid");
  }
  UniqueFd dirfd(::open((proc + "/fd").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dirfd.valid()) return false;
  p->exe = EscapeWorkloadBytes(ReadLinkAt(AT_FDCWD, (proc + "/exe").c_str()));
  p->cwd = EscapeWorkloadBytes(ReadLinkAt(AT_FDCWD, (proc + "/cwd").c_str()));
  if (auto cmdline = ReadFile(proc + "/cmdline", 1 << 16)) {
    size_t start = 0;
    while (start < cmdline->size()) {
      size_t end = cmdline->find('\0', start);
      if (end == std::string::npos) end = cmdline->size();
      p->cmdline.push_back(EscapeWorkloadBytes(std::string_view(*cmdline).substr(start, end - start)));
      start = end + 1;
    }
  }
  DIR* dir = ::fdopendir(::dup(dirfd.get()));
  if (!dir) return false;
  std::vector<int> fds;
  while (auto* e = ::readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    fds.push_back(std::atoi(e->d_name));
  }
  ::closedir(dir);
  std::sort(fds.begin(), fds.end());
  std::set<std::string> seen;
  for (int fd : fds) {
    const std::string name = std::to_string(fd);
    std::string target = ReadLinkAt(dirfd.get(), name.c_str());
    if (p->fds.size() < kMaxFdsListed) p->fds.push_back({fd, EscapeWorkloadBytes(target)});
    if (target.rfind("socket:[", 0) == 0) {
      uint32_t inode = static_cast<uint32_t>(std::strtoul(target.c_str() + 8, nullptr, 10));
      if (inode) sockets->push_back(inode);
      continue;
    }
    if (target.empty() || target[0] != '/') continue;  // pipes, anon inodes, ...
    // The type from the cached inode: never ask a (possibly sandbox-run) FUSE
    // or network filesystem, which could stall the scan.
    struct statx stx;
    if (::statx(dirfd.get(), name.c_str(), AT_STATX_DONT_SYNC, STATX_TYPE, &stx) != 0 || !S_ISREG(stx.stx_mode))
      continue;
    if (seen.insert(target).second) p->files.push_back(EscapeWorkloadBytes(target));
  }
  pollfd exited{pidfd.get(), POLLIN, 0};
  return ::poll(&exited, 1, 0) == 0;  // still running: what was read is its
}

// Lists the processes of the cgroup at `path` and every cgroup below it.
Status CollectProcesses(const std::string& path, const std::string& relative, bool is_root,
                        std::vector<Process>* out, std::set<int>* pids) {
  auto procs = ReadFile(path + "/cgroup.procs");
  if (!procs) {
    if (!is_root && (procs.error().err == ENOENT || procs.error().err == ENODEV)) return {};  // removed meanwhile
    return procs.error().Wrap("list the processes of cgroup " + path);
  }
  struct stat st;
  uint64_t id = ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
  size_t start = 0;
  const std::string& text = *procs;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    int pid = std::atoi(text.substr(start, end - start).c_str());
    start = end + 1;
    if (pid <= 0 || !pids->insert(pid).second) continue;  // 0: not in our pid namespace
    Process p;
    p.pid = pid;
    p.cgroup_relative = relative;
    p.cgroup_id = id;
    out->push_back(std::move(p));
  }
  DIR* dir = ::opendir(path.c_str());
  if (!dir) {
    if (!is_root && errno == ENOENT) return {};
    return SysError("list the cgroups below " + path);
  }
  std::vector<std::string> children;
  while (auto* e = ::readdir(dir)) {
    if (e->d_type != DT_DIR || !std::strcmp(e->d_name, ".") || !std::strcmp(e->d_name, "..")) continue;
    children.push_back(e->d_name);
  }
  ::closedir(dir);
  std::sort(children.begin(), children.end());
  for (const auto& child : children) {
    std::string child_relative = relative == "/" ? "/" + child : relative + "/" + child;
    CORDON_TRY(CollectProcesses(path + "/" + child, child_relative, false, out, pids));
  }
  return {};
}

std::array<uint8_t, 16> Remote(const DiagSocket& s) {
  if (s.family == AF_INET) return policy::ToMapped(reinterpret_cast<const uint8_t*>(&s.id.idiag_dst[0]), 4);
  return policy::ToMapped(reinterpret_cast<const uint8_t*>(s.id.idiag_dst), 16);
}
std::array<uint8_t, 16> Local(const DiagSocket& s) {
  if (s.family == AF_INET) return policy::ToMapped(reinterpret_cast<const uint8_t*>(&s.id.idiag_src[0]), 4);
  return policy::ToMapped(reinterpret_cast<const uint8_t*>(s.id.idiag_src), 16);
}

struct Namespace {
  std::unique_ptr<DiagChannel> channel;
  std::vector<DiagSocket> sockets;
  std::set<std::pair<uint16_t, std::array<uint8_t, 16>>> listeners;  // TCP: (local port, bound address)
};

constexpr uint8_t kDiagProtocols[] = {kTcp, kUdp, kUdpLite};

Status DumpAll(Namespace* ns) {
  for (uint8_t protocol : kDiagProtocols) {
    for (uint8_t family : {static_cast<uint8_t>(AF_INET), static_cast<uint8_t>(AF_INET6)}) {
      CORDON_TRY(ns->channel->Dump(family, protocol, protocol == kUdpLite, &ns->sockets));
    }
  }
  return {};
}

// The inet sockets of every network namespace the processes are in, ours
// first (any member still alive leads to its namespace; one whose members all
// exited is skipped), each with its TCP listeners.
Result<std::vector<Namespace>> DumpNamespaces(const std::vector<Process>& processes) {
  struct stat st;
  const uint64_t own_netns = ::stat("/proc/self/ns/net", &st) == 0 ? st.st_ino : 0;
  std::vector<uint64_t> order{own_netns};
  std::map<uint64_t, std::vector<int>> members;  // netns -> pids in it
  for (const auto& p : processes) {
    if (!members.count(p.netns) && p.netns != own_netns) order.push_back(p.netns);
    members[p.netns].push_back(p.pid);
  }
  std::vector<Namespace> out;
  for (uint64_t netns : order) {
    Namespace ns;
    ns.channel = std::make_unique<DiagChannel>();
    Status opened = Error{""};
    if (netns == own_netns) {
      opened = ns.channel->Open("");
    } else {
      for (int pid : members[netns]) {
        opened = ns.channel->Open("/proc/" + std::to_string(pid) + "/ns/net");
        if (opened.ok() || (opened.error().err != ENOENT && opened.error().err != ESRCH)) break;
        ns.channel = std::make_unique<DiagChannel>();
      }
      if (!opened.ok() && (opened.error().err == ENOENT || opened.error().err == ESRCH)) continue;  // all exited
    }
    if (!opened.ok()) return opened.error();
    CORDON_TRY(DumpAll(&ns));
    for (const DiagSocket& l : ns.sockets)
      if (l.protocol == kTcp && l.state == TCP_LISTEN) ns.listeners.insert({l.id.idiag_sport, Local(l)});
    out.push_back(std::move(ns));
  }
  return out;
}

bool Connected(const DiagSocket& s) {
  if (s.id.idiag_dport == 0) return false;
  if (s.protocol == kTcp) return s.state != TCP_LISTEN && s.state != TCP_CLOSE;
  return s.state == TCP_ESTABLISHED;  // UDP: connect() sets it
}

// An accepted TCP connection: its local address and port are those of a
// listening socket (bound there or to the wildcard) in the same namespace.
bool Inbound(const DiagSocket& s, const Namespace& ns) {
  if (s.protocol != kTcp) return false;
  static const std::array<uint8_t, 16> kAny6{};
  static const std::array<uint8_t, 16> kAny4 = policy::ToMapped(kAny6.data(), 4);
  const uint16_t port = s.id.idiag_sport;
  return ns.listeners.count({port, Local(s)}) || ns.listeners.count({port, kAny6}) ||
         ns.listeners.count({port, kAny4});
}

google::protobuf::Timestamp Now() { return google::protobuf::util::TimeUtil::GetCurrentTime(); }

cordon::v1::AuditEvent BaseEvent(const Process& p, const SandboxContext& sandbox, const std::string& policy_name) {
  cordon::v1::AuditEvent e;
  *e.mutable_time() = Now();
  e.set_sandbox(sandbox.name);
  e.set_cgroup_path(EscapeWorkloadBytes(p.cgroup_relative));
  e.set_cgroup_id(p.cgroup_id);
  e.set_sandbox_cgroup_id(sandbox.id);
  e.set_pid(static_cast<uint32_t>(p.pid));
  e.set_tid(static_cast<uint32_t>(p.pid));
  e.set_ppid(p.ppid);
  e.set_uid(p.uid);
  e.set_gid(p.gid);
  e.set_comm(p.comm);
  e.set_exe(p.exe);
  e.set_policy(sandbox.policy.empty() ? policy_name : sandbox.policy);
  e.set_policy_digest(sandbox.policy_digest);
  return e;
}

// 5. Environments: one credential.exposed event per process whose environment
// holds variables that look like credentials (names only). Each is read by a
// child (ReadEnvironments) while a pidfd, taken after checking the start time
// and the cgroup, proves the pid is still the scanned process: a result that
// arrives after it exited is dropped (the pid may be another's by then).
void ExposedEnvironments(const std::vector<Process>& processes, const std::string& sandbox_relative,
                         const SandboxContext& sandbox, const std::string& policy_name, const RetroOptions& options,
                         RetroReport* report) {
  constexpr size_t kBatch = 8;  // environments held at a time (each up to max_bytes)
  const int64_t deadline_ms = MonoMs() + options.environ.budget_ms;
  auto unread = [&](const Process& p, const std::string& why) {
    report->environments_unread++;
    if (report->unread_reasons.size() < 10) report->unread_reasons.push_back("pid " + std::to_string(p.pid) + ": " + why);
  };
  for (size_t first = 0; first < processes.size(); first += kBatch) {
    std::vector<const Process*> batch;
    std::vector<UniqueFd> pidfds;
    std::vector<std::string> paths;
    for (size_t i = first; i < std::min(processes.size(), first + kBatch); ++i) {
      const Process& p = processes[i];
      const std::string proc = "/proc/" + std::to_string(p.pid);
      UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, p.pid, 0)));
      if (!pidfd.valid()) {
        if (errno != ESRCH) unread(p, std::string("pidfd_open: ") + std::strerror(errno));
        continue;  // ESRCH: exited, skipped
      }
      const std::string view = LiveThreadView(p.pid);
      if (StartTime(proc) != p.start_time || !InSubtree(view, sandbox_relative)) continue;  // another process now
      batch.push_back(&p);
      pidfds.push_back(std::move(pidfd));
      paths.push_back(view + "/environ");
    }
    std::vector<EnvironRead> reads = ReadEnvironments(paths, options.environ, deadline_ms);
    for (size_t i = 0; i < batch.size(); ++i) {
      const Process& p = *batch[i];
      pollfd exited{pidfds[i].get(), POLLIN, 0};
      if (::poll(&exited, 1, 0) != 0) continue;  // exited meanwhile: what was read may be another's
      if (!reads[i].read) {
        unread(p, reads[i].error);
        continue;
      }
      report->environments_read++;
      size_t not_listed = 0;
      std::vector<ExposedVariable> found =
          CredentialLikeVariables(reads[i].data, options.max_variables_per_event, &not_listed);
      reads[i].data.clear();
      reads[i].data.shrink_to_fit();
      if (found.empty()) continue;
      report->processes_exposed++;
      cordon::v1::AuditEvent e = BaseEvent(p, sandbox, policy_name);
      e.set_kind("credential.exposed");
      e.set_verdict("detected");
      e.set_enforcement("none");
      std::vector<std::string> described;
      for (const auto& v : found) {
        e.mutable_credential()->add_variables(v.name);
        described.push_back(v.name + " (" + v.why + ")");
      }
      const size_t total = found.size() + not_listed;
      std::string reason = std::to_string(total) + " environment variable" + (total == 1 ? "" : "s") +
                           " of a process running before attach look" + (total == 1 ? "s" : "") +
                           " like credentials: " + JoinStrings(described, ", ");
      if (not_listed) reason += "; " + std::to_string(not_listed) + " more not listed";
      if (reads[i].truncated)
        reason += "; only the first " + std::to_string(options.environ.max_bytes) + " bytes of the environment read";
      reason += "; values not recorded; a running process's environment cannot be taken back: rotate them";
      e.set_reason(reason);
      report->events.push_back(std::move(e));
    }
  }
}

}  // namespace

Result<RetroReport> ApplyRetroactively(const CgroupRef& cgroup, const policy::CompiledPolicy& policy,
                                       const SandboxContext& sandbox, const RetroOptions& options) {
  RetroReport report;

  // 1. Processes, their sockets and files.
  std::vector<Process> candidates;
  std::set<int> pids;
  CORDON_TRY(CollectProcesses(cgroup.path, cgroup.relative, true, &candidates, &pids));
  std::vector<Process> processes;
  std::unordered_map<uint32_t, size_t> held;  // socket inode -> first holder (index into processes)
  for (auto& p : candidates) {
    std::vector<uint32_t> sockets;
    if (!ScanProcess(&p, cgroup.relative, &sockets)) continue;  // exited: skipped
    for (uint32_t inode : sockets) held.emplace(inode, processes.size());
    processes.push_back(std::move(p));
  }
  report.processes = processes.size();

  // 2. The inet sockets of every network namespace they are in (ours first).
  std::vector<Namespace> namespaces;
  if (!held.empty()) {  // no process holds a socket: nothing to find
    auto dumped = DumpNamespaces(processes);
    if (!dumped) return dumped.error();
    namespaces = std::move(*dumped);
  }

  // 3. Judge; destroy what the policy denies.
  EgressMatcher matcher(policy);
  const bool audit = policy.mode == CORDON_MODE_AUDIT;
  std::set<uint32_t> judged;  // a socket seen in two namespaces' dumps (inode reuse) is judged once
  for (Namespace& ns : namespaces) {
    for (const DiagSocket& s : ns.sockets) {
      if (!s.inode) continue;
      auto h = held.find(s.inode);
      if (h == held.end() || !Connected(s) || judged.count(s.inode)) continue;
      if (Inbound(s, ns)) {
        report.inbound++;
        continue;
      }
      judged.insert(s.inode);
      report.connections++;
      const auto remote = Remote(s);
      const uint16_t port = ntohs(s.id.idiag_dport);
      EgressDecision d = matcher.Decide(remote, port, s.protocol);
      if (d.allowed) {
        report.allowed++;
        continue;
      }
      const Process& holder = processes[h->second];
      cordon::v1::AuditEvent e = BaseEvent(holder, sandbox, policy.name);
      e.set_kind("net.preexisting");
      e.set_enforcement("sock_diag");
      auto* net = e.mutable_net();
      net->set_address(policy::AddressToString(remote));
      net->set_port(port);
      net->set_protocol(ProtocolName(s.protocol));
      net->set_family(SocketFamilyName(s.family));
      net->set_sock_type(s.protocol == kTcp ? "stream" : "dgram");
      net->set_rule(d.rule);
      const std::string target = net->address() + " port " + std::to_string(port) + "/" + net->protocol();
      std::string why = d.reason == CORDON_REASON_PORT
                            ? "egress rule #" + std::to_string(d.rule) + " matches the address but not " +
                                  std::to_string(port) + "/" + net->protocol()
                            : "no egress rule allows " + target;
      std::string reason = "connection opened before attach; policy denies it (" + why + ")";
      if (audit) {
        e.set_verdict("audited");
        e.set_reason(reason + "; kept: audit mode");
        report.audited++;
        report.events.push_back(std::move(e));
        continue;
      }
      std::string local_error;
      int err = ns.channel->Destroy(s, &local_error);
      if (err == ENOENT) {
        // Gone, or no longer connected, since the dump? Then there is nothing to
        // destroy. Still there: SOCK_DESTROY could not find it, a failure.
        std::vector<DiagSocket> again;
        Status redump = ns.channel->Dump(s.family, s.protocol, false, &again);
        if (!redump.ok()) return redump.error();
        bool still = false;
        for (const DiagSocket& a : again) still |= a.inode == s.inode && Connected(a);
        if (!still) {
          report.connections--;
          continue;
        }
      }
      if (err == 0) {
        e.set_verdict("destroyed");
        e.set_reason(reason);
        report.destroyed++;
      } else {
        e.set_verdict("destroy-failed");
        e.set_reason(reason + "; SOCK_DESTROY failed: " +
                     (local_error.empty() ? std::string(std::strerror(err)) + " (errno " + std::to_string(err) + ")"
                                          : local_error));
        report.destroy_failed++;
      }
      report.events.push_back(std::move(e));
    }
  }

  // 4. Files open before attach.
  for (const Process& p : processes) {
    if (p.files.empty()) continue;
    report.processes_with_files++;
    cordon::v1::AuditEvent e = BaseEvent(p, sandbox, policy.name);
    e.set_kind("file.preexisting");
    e.set_verdict("listed");
    e.set_enforcement("none");
    e.mutable_file()->set_path(p.files.front());
    const size_t listed = std::min(p.files.size(), options.max_files_per_event);
    for (size_t i = 0; i < listed; ++i) e.add_open_files(p.files[i]);
    std::string reason = std::to_string(p.files.size()) + " regular file" + (p.files.size() == 1 ? "" : "s") +
                         " open before attach; open files cannot be revoked";
    if (listed < p.files.size()) reason += "; " + std::to_string(p.files.size() - listed) + " more not listed";
    e.set_reason(reason);
    report.events.push_back(std::move(e));
  }
  ExposedEnvironments(processes, cgroup.relative, sandbox, policy.name, options, &report);
  return report;
}

namespace {

std::string Endpoint(const std::array<uint8_t, 16>& addr, uint16_t port_be, uint8_t family) {
  std::string a = policy::AddressToString(addr);
  const std::string port = std::to_string(ntohs(port_be));
  return family == AF_INET6 && a.find(':') != std::string::npos ? "[" + a + "]:" + port : a + ":" + port;
}

const char* TcpStateName(uint8_t state) {
  static const char* const kNames[] = {"",          "established", "syn-sent",    "syn-recv",   "fin-wait1",
                                       "fin-wait2", "time-wait",   "close",       "close-wait", "last-ack",
                                       "listen",    "closing",     "new-syn-recv"};
  return state < sizeof kNames / sizeof kNames[0] ? kNames[state] : "unknown";
}

}  // namespace

Result<ContainmentSnapshot> SnapshotAndDisconnect(const CgroupRef& cgroup, const SandboxContext& sandbox,
                                                  const std::string& reason, const std::string& what) {
  ContainmentSnapshot snap;
  std::vector<Process> candidates;
  std::set<int> pids;
  CORDON_TRY(CollectProcesses(cgroup.path, cgroup.relative, true, &candidates, &pids));
  std::vector<Process> processes;
  std::unordered_map<uint32_t, size_t> held;
  for (auto& p : candidates) {
    std::vector<uint32_t> sockets;
    if (!ScanProcess(&p, cgroup.relative, &sockets)) continue;
    for (uint32_t inode : sockets) held.emplace(inode, processes.size());
    processes.push_back(std::move(p));
  }
  for (const Process& p : processes) {
    SnapshotProcess out;
    out.pid = p.pid;
    out.ppid = p.ppid;
    out.uid = p.uid;
    out.gid = p.gid;
    out.comm = p.comm;
    out.exe = p.exe;
    out.cwd = p.cwd;
    out.cmdline = p.cmdline;
    out.cgroup_path = EscapeWorkloadBytes(p.cgroup_relative);
    out.fds = p.fds;
    snap.processes.push_back(std::move(out));
  }
  if (held.empty()) return snap;

  auto namespaces = DumpNamespaces(processes);
  if (!namespaces) return namespaces.error();
  std::set<uint32_t> seen;
  for (Namespace& ns : *namespaces) {
    for (const DiagSocket& s : ns.sockets) {
      if (!s.inode || !held.count(s.inode) || !seen.insert(s.inode).second) continue;
      const Process& holder = processes[held[s.inode]];
      SnapshotSocket out;
      out.inode = s.inode;
      out.pid = static_cast<uint32_t>(holder.pid);
      out.protocol = ProtocolName(s.protocol);
      out.family = SocketFamilyName(s.family);
      out.state =
          s.protocol == kTcp ? TcpStateName(s.state) : (s.state == TCP_ESTABLISHED ? "established" : "unconnected");
      out.local = Endpoint(Local(s), s.id.idiag_sport, s.family);
      out.remote = Endpoint(Remote(s), s.id.idiag_dport, s.family);
      // Every connection goes, inbound ones too: a contained sandbox keeps no
      // channel to anyone. Listeners and unconnected sockets stay (nothing
      // reaches them: the ingress program drops it, the send hooks refuse).
      if (!Connected(s)) {
        out.action = s.protocol == kTcp && s.state == TCP_LISTEN
                         ? "kept (listening: the sandbox's ingress program drops what reaches it)"
                         : "kept (not connected)";
        snap.sockets.push_back(std::move(out));
        continue;
      }
      std::string local_error;
      int err = ns.channel->Destroy(s, &local_error);
      if (err == ENOENT) {  // closed since the dump: nothing to destroy
        out.action = "gone (closed before it could be destroyed)";
      } else if (err == 0) {
        out.action = "destroyed";
        snap.destroyed++;
      } else {
        out.action = "destroy-failed: " +
                     (local_error.empty() ? std::string(std::strerror(err)) + " (errno " + std::to_string(err) + ")"
                                          : local_error);
        snap.destroy_failed++;
      }
      if (err != ENOENT) {
        cordon::v1::AuditEvent e = BaseEvent(holder, sandbox, sandbox.policy);
        e.set_kind("net.preexisting");
        e.set_enforcement("sock_diag");
        e.set_verdict(err == 0 ? "destroyed" : "destroy-failed");
        auto* net = e.mutable_net();
        net->set_address(policy::AddressToString(Remote(s)));
        net->set_port(ntohs(s.id.idiag_dport));
        net->set_protocol(out.protocol);
        net->set_family(out.family);
        net->set_sock_type(s.protocol == kTcp ? "stream" : "dgram");
        e.set_reason(what + " (" + reason + ")" +
                     (err == 0 ? std::string() : "; SOCK_DESTROY failed: " + out.action.substr(16)));
        snap.events.push_back(std::move(e));
      }
      snap.sockets.push_back(std::move(out));
    }
  }
  return snap;
}

std::string RetroSummaryLine(const RetroReport& r) {
  return "pre-existing connections: " + std::to_string(r.connections) + " judged, " + std::to_string(r.allowed) +
         " allowed, " + std::to_string(r.destroyed) + " destroyed, " + std::to_string(r.audited) + " audited, " +
         std::to_string(r.destroy_failed) + " could not be destroyed (" + std::to_string(r.inbound) +
         " inbound not judged); " + std::to_string(r.processes_with_files) + " of " + std::to_string(r.processes) +
         " processes hold files opened before attach; " + std::to_string(r.processes_exposed) + " of " +
         std::to_string(r.environments_read) + " environments read hold credential-like variables" +
         (r.environments_unread ? " (" + std::to_string(r.environments_unread) + " not read: " +
                                      JoinStrings(r.unread_reasons, ", ") +
                                      (r.environments_unread > r.unread_reasons.size() ? ", ..." : "") + ")"
                                : "");
}

}  // namespace cordon
