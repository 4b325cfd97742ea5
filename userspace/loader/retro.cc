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
#include "loader/retro.h"

#include <dirent.h>
#include <fcntl.h>
#include <google/protobuf/util/time_util.h>
#include <linux/inet_diag.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>
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
#include <thread>
#include <unordered_map>

#include "abi/cordon_event.h"
#include "abi/cordon_net.h"
#include "policy/cidr.h"
#include "util/fd.h"
#include "util/fs.h"
#include "util/text.h"

namespace cordon {

// ---- The egress matcher ------------------------------------------------------

namespace {

constexpr uint8_t kTcp = 6;
constexpr uint8_t kUdp = 17;
constexpr uint8_t kUdpLite = 136;
constexpr uint32_t kMptcp = 262;

// cordon_rule_proto of bpf/lib/egress_match.bpf.h.
uint8_t RuleProto(uint32_t protocol) {
  if (protocol == kMptcp) return kTcp;
  if (protocol == kUdpLite) return kUdp;
  return protocol > 255 ? 255 : static_cast<uint8_t>(protocol);
}

// The first `bits` bits of data[0..n), the rest zeroed: an LPM trie key's
// significant part.
std::string Masked(const uint8_t* data, size_t n, uint32_t bits) {
  std::string out(reinterpret_cast<const char*>(data), n);
  for (size_t i = 0; i < n; ++i) {
    if (bits >= 8 * (i + 1)) continue;
    uint32_t keep = bits > 8 * i ? bits - 8 * i : 0;
    out[i] = static_cast<char>(static_cast<uint8_t>(out[i]) & static_cast<uint8_t>(0xff00 >> keep));
  }
  return out;
}

// An LPM trie as a hash table per prefix length, longest first.
template <typename V>
class Lpm {
 public:
  void Insert(uint32_t prefixlen, const uint8_t* data, size_t n, const V& value) {
    by_length_[prefixlen].emplace(Masked(data, n, prefixlen), value);  // first wins, as EvaluateImage
  }
  const V* Find(const uint8_t* data, size_t n) const {
    for (const auto& [length, table] : by_length_) {
      auto it = table.find(Masked(data, n, length));
      if (it != table.end()) return &it->second;
    }
    return nullptr;
  }

 private:
  std::map<uint32_t, std::unordered_map<std::string, V>, std::greater<>> by_length_;
};

}  // namespace

struct EgressMatcher::Tables {
  Lpm<cordon_addr_value> addr;
  Lpm<cordon_port_value> port;
};

EgressMatcher::EgressMatcher(const policy::CompiledPolicy& policy) : tables_(std::make_unique<Tables>()) {
  for (const auto& [key, value] : policy.addr_entries)
    if (key.prefixlen <= CORDON_ADDR_MAX_PREFIX) tables_->addr.Insert(key.prefixlen, key.addr, 16, value);
  for (const auto& [key, value] : policy.port_entries) {
    if (key.prefixlen > CORDON_PORT_KEY_BITS) continue;
    const uint8_t data[7] = {key.port_set[0], key.port_set[1], key.port_set[2], key.port_set[3],
                             key.proto,       key.port[0],     key.port[1]};
    tables_->port.Insert(key.prefixlen, data, sizeof data, value);
  }
}

EgressMatcher::~EgressMatcher() = default;

EgressDecision EgressMatcher::Decide(const std::array<uint8_t, 16>& addr, uint16_t port, uint32_t protocol) const {
  const uint8_t proto = RuleProto(protocol);
  EgressDecision d;
  const cordon_addr_value* av = tables_->addr.Find(addr.data(), addr.size());
  if (!av) {
    d.reason = CORDON_REASON_NO_RULE;
    return d;
  }
  d.rule = av->rule;
  if (av->port_set == CORDON_PORT_SET_ALL) {
    if (proto == kTcp || proto == kUdp) {
      d.allowed = true;
    } else {
      d.reason = CORDON_REASON_PORT;
    }
    return d;
  }
  const uint8_t probe[7] = {static_cast<uint8_t>(av->port_set >> 24), static_cast<uint8_t>(av->port_set >> 16),
                            static_cast<uint8_t>(av->port_set >> 8),  static_cast<uint8_t>(av->port_set),
                            proto, static_cast<uint8_t>(port >> 8), static_cast<uint8_t>(port & 0xff)};
  const cordon_port_value* pv = tables_->port.Find(probe, sizeof probe);
  if (!pv) {
    d.reason = CORDON_REASON_PORT;
    return d;
  }
  d.allowed = true;
  d.rule = pv->rule;
  return d;
}

// ---- Processes ---------------------------------------------------------------

namespace {

struct Process {
  int pid = 0;
  std::string cgroup_relative;
  uint64_t cgroup_id = 0;
  uint64_t netns = 0;
  uint32_t ppid = 0, uid = 0, gid = 0;
  std::string comm, exe;
  std::vector<std::string> files;  // regular files, first fd first, each path once
};

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

// Fills p (and `sockets`: the inodes of the sockets it holds) from
// /proc/<pid>; false if the process is gone, or is not the process that was
// listed (the pid was reused by one outside the sandbox). A pidfd pins the
// identity: taken first, checked for membership, polled for exit at the end.
bool ScanProcess(Process* p, const std::string& sandbox_relative, std::vector<uint32_t>* sockets) {
  const std::string proc = "/proc/" + std::to_string(p->pid);
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, p->pid, 0)));
  if (!pidfd.valid() || !InSubtree(proc, sandbox_relative)) return false;
  struct stat st;
  if (::stat((proc + "/ns/net").c_str(), &st) != 0) return false;
  p->netns = st.st_ino;
  if (auto comm = ReadFile(proc + "/comm", 4096)) {
    std::string c = *comm;
    while (!c.empty() && c.back() == '\n') c.pop_back();
    p->comm = EscapeWorkloadBytes(c);
  }
  if (auto status = ReadFile(proc + "/status", 1 << 16)) {
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

// ---- sock_diag over libnl ------------------------------------------------------

struct DiagSocket {
  uint8_t family = 0;
  uint8_t protocol = 0;
  uint8_t state = 0;
  inet_diag_sockid id{};  // as dumped: ports in network order, cookie included
  uint32_t inode = 0;
};

std::string ProtoText(uint8_t protocol) {
  if (protocol == kTcp) return "tcp";
  if (protocol == kUdp) return "udp";
  return protocol == kUdpLite ? "udplite" : std::to_string(protocol);
}
std::string FamilyText(uint8_t family) { return family == AF_INET ? "inet" : "inet6"; }

std::array<uint8_t, 16> Remote(const DiagSocket& s) {
  if (s.family == AF_INET) return policy::ToMapped(reinterpret_cast<const uint8_t*>(&s.id.idiag_dst[0]), 4);
  return policy::ToMapped(reinterpret_cast<const uint8_t*>(s.id.idiag_dst), 16);
}
std::array<uint8_t, 16> Local(const DiagSocket& s) {
  if (s.family == AF_INET) return policy::ToMapped(reinterpret_cast<const uint8_t*>(&s.id.idiag_src[0]), 4);
  return policy::ToMapped(reinterpret_cast<const uint8_t*>(s.id.idiag_src), 16);
}

// One NETLINK_SOCK_DIAG socket, in one network namespace.
class DiagChannel {
 public:
  DiagChannel() = default;
  ~DiagChannel() {
    if (sk_) nl_socket_free(sk_);
  }
  DiagChannel(const DiagChannel&) = delete;
  DiagChannel& operator=(const DiagChannel&) = delete;

  // Connects in the network namespace of `ns_path` (empty: ours). The socket
  // belongs to the namespace it was created in, so only creation happens on a
  // helper thread that joined that namespace.
  Status Open(const std::string& ns_path) {
    sk_ = nl_socket_alloc();
    if (!sk_) return Error{"sock_diag: allocate a netlink socket"};
    int rc = 0;
    if (ns_path.empty()) {
      rc = nl_connect(sk_, NETLINK_SOCK_DIAG);
    } else {
      UniqueFd ns(::open(ns_path.c_str(), O_RDONLY | O_CLOEXEC));
      if (!ns.valid()) return SysError("sock_diag: open " + ns_path);
      int setns_errno = 0;
      std::thread t([&] {
        if (::setns(ns.get(), CLONE_NEWNET) != 0) {
          setns_errno = errno;
          return;
        }
        rc = nl_connect(sk_, NETLINK_SOCK_DIAG);
      });
      t.join();
      if (setns_errno) return SysError("sock_diag: enter the network namespace " + ns_path, setns_errno);
    }
    if (rc < 0) return Error{std::string("sock_diag: connect a NETLINK_SOCK_DIAG socket: ") + nl_geterror(rc)};
    nl_socket_enable_msg_peek(sk_);  // dump messages may exceed a page
    nl_socket_disable_auto_ack(sk_);
    nl_socket_modify_err_cb(sk_, NL_CB_CUSTOM, &DiagChannel::OnError, this);
    return {};
  }

  // Every socket of (family, protocol) in every state. An unsupported
  // protocol (no diag handler: ENOENT) yields no sockets when `optional`.
  Status Dump(uint8_t family, uint8_t protocol, bool optional, std::vector<DiagSocket>* out) {
    const std::string what = "sock_diag: dump " + ProtoText(protocol) + " sockets (" + FamilyText(family) + ")";
    for (int attempt = 0;; ++attempt) {
      std::vector<DiagSocket> got;
      nl_msg* msg = nlmsg_alloc_simple(SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP);
      if (!msg) return Error{what + ": allocate a message"};
      inet_diag_req_v2 req{};
      req.sdiag_family = family;
      req.sdiag_protocol = protocol;
      req.idiag_states = ~0u;
      int rc = nlmsg_append(msg, &req, sizeof req, NLMSG_ALIGNTO);
      if (rc >= 0) rc = nl_send_auto(sk_, msg);
      nlmsg_free(msg);
      if (rc < 0) return Error{what + ": send: " + nl_geterror(rc)};
      dump_ = &got;
      dump_protocol_ = protocol;
      kernel_errno_ = 0;
      nl_socket_modify_cb(sk_, NL_CB_VALID, NL_CB_CUSTOM, &DiagChannel::OnDiag, this);
      rc = nl_recvmsgs_default(sk_);
      dump_ = nullptr;
      if (rc == -NLE_DUMP_INTR && attempt < 4) continue;  // the tables changed under the dump: again
      if (rc < 0) {
        int e = kernel_errno_;
        if (optional && (e == ENOENT || e == EINVAL || e == EOPNOTSUPP || e == EPROTONOSUPPORT)) return {};
        if (e) return SysError(what, e);
        return Error{what + ": " + nl_geterror(rc)};
      }
      out->insert(out->end(), got.begin(), got.end());
      return {};
    }
  }

  // SOCK_DESTROY of exactly this socket (id and cookie). Returns 0 or the
  // kernel's errno (ENOENT: no such socket any more).
  int Destroy(const DiagSocket& s, std::string* local_error) {
    nl_msg* msg = nlmsg_alloc_simple(SOCK_DESTROY, NLM_F_REQUEST | NLM_F_ACK);
    if (!msg) {
      *local_error = "allocate a message";
      return ENOMEM;
    }
    inet_diag_req_v2 req{};
    req.sdiag_family = s.family;
    req.sdiag_protocol = s.protocol;
    req.idiag_states = ~0u;
    req.id = s.id;
    int rc = nlmsg_append(msg, &req, sizeof req, NLMSG_ALIGNTO);
    if (rc >= 0) rc = nl_send_auto(sk_, msg);
    nlmsg_free(msg);
    if (rc < 0) {
      *local_error = std::string("send: ") + nl_geterror(rc);
      return EIO;
    }
    kernel_errno_ = 0;
    nl_socket_modify_cb(sk_, NL_CB_VALID, NL_CB_CUSTOM, &DiagChannel::Ignore, this);
    rc = nl_recvmsgs_default(sk_);  // up to the acknowledgement
    if (kernel_errno_) return kernel_errno_;
    if (rc < 0) {
      *local_error = std::string("receive the acknowledgement: ") + nl_geterror(rc);
      return EIO;
    }
    return 0;
  }

 private:
  static int OnDiag(nl_msg* msg, void* arg) {
    auto* self = static_cast<DiagChannel*>(arg);
    nlmsghdr* h = nlmsg_hdr(msg);
    if (!self->dump_ || h->nlmsg_type != SOCK_DIAG_BY_FAMILY || h->nlmsg_len < NLMSG_LENGTH(sizeof(inet_diag_msg)))
      return NL_SKIP;
    const auto* m = static_cast<const inet_diag_msg*>(nlmsg_data(h));
    DiagSocket s;
    s.family = m->idiag_family;
    s.state = m->idiag_state;
    s.id = m->id;
    s.inode = m->idiag_inode;
    s.protocol = self->dump_protocol_;
    self->dump_->push_back(s);
    return NL_OK;
  }
  static int Ignore(nl_msg*, void*) { return NL_OK; }
  static int OnError(sockaddr_nl*, nlmsgerr* e, void* arg) {
    static_cast<DiagChannel*>(arg)->kernel_errno_ = -e->error;
    return NL_STOP;
  }

  nl_sock* sk_ = nullptr;
  std::vector<DiagSocket>* dump_ = nullptr;
  uint8_t dump_protocol_ = 0;  // inet_diag_msg does not carry it
  int kernel_errno_ = 0;
};

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
  return e;
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
  std::map<uint64_t, Namespace> namespaces;
  struct stat st;
  uint64_t own_netns = ::stat("/proc/self/ns/net", &st) == 0 ? st.st_ino : 0;
  std::vector<uint64_t> order;
  std::map<uint64_t, std::vector<int>> members;  // netns -> pids in it
  order.push_back(own_netns);
  for (const auto& p : processes) {
    if (!members.count(p.netns) && p.netns != own_netns) order.push_back(p.netns);
    members[p.netns].push_back(p.pid);
  }
  for (uint64_t netns : order) {
    if (held.empty()) break;  // no process holds a socket: nothing to find
    Namespace ns;
    ns.channel = std::make_unique<DiagChannel>();
    Status opened = Error{""};
    if (netns == own_netns) {
      opened = ns.channel->Open("");
    } else {
      for (int pid : members[netns]) {  // any member still alive leads there
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
    namespaces.emplace(netns, std::move(ns));
  }

  // 3. Judge; destroy what the policy denies.
  EgressMatcher matcher(policy);
  const bool audit = policy.mode == CORDON_MODE_AUDIT;
  std::set<uint32_t> judged;  // a socket seen in two namespaces' dumps (inode reuse) is judged once
  for (uint64_t netns : order) {
    auto it = namespaces.find(netns);
    if (it == namespaces.end()) continue;
    Namespace& ns = it->second;
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
  return report;
}

std::string RetroSummaryLine(const RetroReport& r) {
  return "pre-existing connections: " + std::to_string(r.connections) + " judged, " + std::to_string(r.allowed) +
         " allowed, " + std::to_string(r.destroyed) + " destroyed, " + std::to_string(r.audited) + " audited, " +
         std::to_string(r.destroy_failed) + " could not be destroyed (" + std::to_string(r.inbound) +
         " inbound not judged); " + std::to_string(r.processes_with_files) + " of " + std::to_string(r.processes) +
         " processes hold files opened before attach";
}

}  // namespace cordon
