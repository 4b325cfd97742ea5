#include "ops/regress.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <set>

#include "confine/seccomp.h"
#include "events/decoder.h"
#include "policy/diagnostic.h"
#include "policy/yaml_reader.h"
#include "util/text.h"

namespace cordon::ops {
namespace {

namespace v1 = cordon::v1;
using policy::YamlNode;

// The probes that take family, protocol, address and port.
bool IsNetProbe(const std::string& kind) {
  return kind == "net.connect" || kind == "net.sendmsg" || kind == "net.bind";
}
bool IsSeccompProbe(const RegressProbe& p) { return p.syscall != 0; }
// The probes that act on a fresh name beside the recorded path (ProbeScratch).
bool IsBesideProbe(const std::string& kind) {
  return kind == "file.unlink" || kind == "file.rename" || kind == "file.link";
}
// The probes that take a path only (file.open takes an access too; rename
// and link say which side refused).
bool IsPathProbe(const std::string& kind) {
  return kind == "net.unix" || kind == "file.exec" || kind == "file.create" || kind == "file.setattr" ||
         kind == "file.mmap_exec" || IsBesideProbe(kind);
}
// The probes only BPF LSM judges: Landlock mediates neither chmod nor
// executable mappings.
bool OnlyBpfLsmJudges(const std::string& kind) { return kind == "file.setattr" || kind == "file.mmap_exec"; }
// The kinds a refusal of cordon run's seccomp filter is reported as, besides
// net.socket (its own probe) and file.open (the path is not in the event).
bool SeccompKind(const std::string& kind) {
  return kind.rfind("tamper.", 0) == 0 || kind == "file.memfd" || kind == "file.ioctl" || kind == "file.open";
}

// A YAML double-quoted scalar (JSON's escapes are YAML's).
std::string Q(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// One line of a comment: no newline can end it early.
std::string CommentText(const std::string& s) {
  std::string out;
  for (char c : s) out += (c == '\n' || c == '\r') ? ' ' : c;
  return DisplayText(out);
}

const struct {
  int number;
  const char* name;
} kErrnos[] = {
    {EPERM, "EPERM"},
    {EACCES, "EACCES"},
    {EROFS, "EROFS"},
    {ENOENT, "ENOENT"},
    {ECONNREFUSED, "ECONNREFUSED"},
    {ETIMEDOUT, "ETIMEDOUT"},
    {EINVAL, "EINVAL"},
    {EAFNOSUPPORT, "EAFNOSUPPORT"},
    {ENETUNREACH, "ENETUNREACH"},
    {EHOSTUNREACH, "EHOSTUNREACH"},
    {EADDRNOTAVAIL, "EADDRNOTAVAIL"},
    {ENOTDIR, "ENOTDIR"},
    {EISDIR, "EISDIR"},
    {EEXIST, "EEXIST"},
    {ENOEXEC, "ENOEXEC"},
    {EPROTOTYPE, "EPROTOTYPE"},
    {ENOSYS, "ENOSYS"},
    {EFAULT, "EFAULT"},
    {EBADF, "EBADF"},
    {E2BIG, "E2BIG"},
    {ENOMEM, "ENOMEM"},
    {ESRCH, "ESRCH"},
    {ENXIO, "ENXIO"},
};

// Why a case file is refused: "FILE:LINE:COL: FIELD: what".
struct CaseReader {
  std::string file;
  std::string error;
  bool Fail(const YamlNode* at, const std::string& field, const std::string& what) {
    if (error.empty()) {
      policy::Diagnostic d{file, at ? at->line : 0, at ? at->column : 0, field, what};
      error = d.ToString();
    }
    return false;
  }
  // The mapping's entries by key; unknown keys and a missing required one are errors.
  bool Fields(const YamlNode* node, const std::string& field, const std::set<std::string>& known,
              const std::set<std::string>& required, std::map<std::string, const YamlNode*>* out) {
    if (!node || node->kind != YamlNode::Kind::kMapping) return Fail(node, field, "expected a mapping");
    for (const auto& [k, v] : node->entries) {
      const std::string name = (field.empty() ? "" : field + ".") + k->scalar;
      if (!known.count(k->scalar)) {
        std::string list;
        for (const auto& n : known) list += (list.empty() ? "" : ", ") + n;
        return Fail(k.get(), name, "unknown field (expected one of: " + list + ")");
      }
      (*out)[k->scalar] = v.get();
    }
    for (const auto& r : required)
      if (!out->count(r)) return Fail(node, (field.empty() ? "" : field + ".") + r, "missing (required)");
    return true;
  }
  bool String(const std::map<std::string, const YamlNode*>& m, const std::string& parent, const std::string& key,
              std::string* out) {
    auto it = m.find(key);
    if (it == m.end()) return true;
    const YamlNode* n = it->second;
    if (n->kind != YamlNode::Kind::kScalar) return Fail(n, parent + "." + key, "expected a string");
    if (n->scalar.size() > 8192) return Fail(n, parent + "." + key, "longer than 8192 bytes");
    *out = n->scalar;
    return true;
  }
  bool Number(const std::map<std::string, const YamlNode*>& m, const std::string& parent, const std::string& key,
              uint64_t max, uint64_t* out) {
    auto it = m.find(key);
    if (it == m.end()) return true;
    const YamlNode* n = it->second;
    const std::string& s = n->scalar;
    if (n->kind != YamlNode::Kind::kScalar || n->quoted || s.empty() || s.size() > 20 ||
        s.find_first_not_of("0123456789") != std::string::npos)
      return Fail(n, parent + "." + key, "expected a number");
    errno = 0;
    unsigned long long v = std::strtoull(s.c_str(), nullptr, 10);
    if (errno || v > max) return Fail(n, parent + "." + key, "out of range (at most " + std::to_string(max) + ")");
    *out = v;
    return true;
  }
  bool OneOf(const YamlNode* at, const std::string& field, const std::string& value,
             const std::vector<std::string>& allowed) {
    for (const auto& a : allowed)
      if (value == a) return true;
    return Fail(at, field, "unknown value " + Quoted(value) + " (expected one of: " + JoinStrings(allowed, ", ") + ")");
  }
};

const std::vector<std::string> kProbeKinds = {
    "net.connect", "net.sendmsg",   "net.bind",       "net.socket",    "net.unix",      "file.open",    "file.exec",
    "file.create", "file.setattr",  "file.mmap_exec", "file.unlink",   "file.rename",   "file.link",    "tamper.bpf",
    "net.sockopt", "tamper.signal", "tamper.ptrace",  "tamper.cgroup", "tamper.device", "tamper.sysctl"};

// Why a kind has no probe: each would act outside the probe's sandbox where
// the policy now allows it, or its event does not say what to repeat.
const struct {
  const char* kind;
  const char* why;
} kNoProbe[] = {
    {"file.ioctl",
     "an ioctl's effect is its command's and its driver's (a command without a pointer argument, such as "
     "FIFREEZE, acts at once): no call both reaches the check and is harmless where the policy allows it"},
    {"file.memfd", "recorded by a layer other than cordon run's seccomp filter: the event does not say what to repeat"},
    {"tamper.capability",
     "a capability is asked for by many calls, each with its own effect where the policy grants it: the event "
     "names the capability, not a call that is harmless to repeat"},
};

// The tamper kinds BPF LSM refuses whose operation is one system call that
// cordon run's seccomp filter refuses as the same kind whatever the policy
// (or, for user namespaces, as the policy says): a case recorded in an
// attached sandbox (enforcement kernel-lsm, no system call in the event) is
// probed with that call, as the filter's own refusals are (SeccompCallFor).
const struct {
  const char* kind;
  uint32_t nr, argument;
} kLsmTamperCalls[] = {
    {"tamper.mount", 165, 0},    {"tamper.module", 175, 0},
    {"tamper.clock", 227, 0},    {"tamper.reboot", 169, 0},
    {"tamper.io_uring", 425, 0}, {"tamper.syslog", 103, 0},
    {"tamper.acct", 163, 0},     {"tamper.userns", 272, 0x10000000 /* CLONE_NEWUSER */},
};

// The options the sandbox's setsockopt program refuses (bpf/net/host.bpf.c),
// each with a value it refuses: for those refused only for some values
// (SO_REUSEPORT, SO_PRIORITY, the *_TRANSPARENT and *_FREEBIND, TCP_REPAIR) the
// recorded refusal had one of them, and the probe sets one of them too. A
// filter or policy the kernel would have to parse is given as bytes it
// rejects (EINVAL: the call reached the kernel).
struct SockoptEntry {
  int level, option;
  SockoptCall call;
};
constexpr SockoptEntry kSockopts[] = {
    {SOL_SOCKET, SO_REUSEPORT, {AF_INET, SOCK_STREAM, SockoptCall::kInt1}},
    {SOL_SOCKET, SO_PRIORITY, {AF_INET, SOCK_DGRAM, SockoptCall::kInt7}},
    {SOL_SOCKET, SO_MARK, {AF_INET, SOCK_DGRAM, SockoptCall::kInt1}},
    {SOL_SOCKET, SO_BINDTODEVICE, {AF_INET, SOCK_DGRAM, SockoptCall::kDevice}},
    {SOL_SOCKET, SO_BINDTOIFINDEX, {AF_INET, SOCK_DGRAM, SockoptCall::kInt1}},
    {SOL_SOCKET, SO_SNDBUFFORCE, {AF_INET, SOCK_DGRAM, SockoptCall::kInt65536}},
    {SOL_SOCKET, SO_RCVBUFFORCE, {AF_INET, SOCK_DGRAM, SockoptCall::kInt65536}},
    {SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, {AF_INET, SOCK_DGRAM, SockoptCall::kGarbage}},
    {SOL_SOCKET, SO_ATTACH_REUSEPORT_EBPF, {AF_INET, SOCK_DGRAM, SockoptCall::kGarbage}},
    {IPPROTO_IP, IP_TRANSPARENT, {AF_INET, SOCK_DGRAM, SockoptCall::kInt1}},
    {IPPROTO_IP, IP_FREEBIND, {AF_INET, SOCK_DGRAM, SockoptCall::kInt1}},
    {IPPROTO_IP, IP_IPSEC_POLICY, {AF_INET, SOCK_DGRAM, SockoptCall::kGarbage}},
    {IPPROTO_IP, IP_XFRM_POLICY, {AF_INET, SOCK_DGRAM, SockoptCall::kGarbage}},
    {IPPROTO_IP, IP_OPTIONS, {AF_INET, SOCK_DGRAM, SockoptCall::kGarbage}},
    {IPPROTO_IPV6, IPV6_TRANSPARENT, {AF_INET6, SOCK_DGRAM, SockoptCall::kInt1}},
    {IPPROTO_IPV6, IPV6_FREEBIND, {AF_INET6, SOCK_DGRAM, SockoptCall::kInt1}},
    {IPPROTO_IPV6, IPV6_IPSEC_POLICY, {AF_INET6, SOCK_DGRAM, SockoptCall::kGarbage}},
    {IPPROTO_IPV6, IPV6_XFRM_POLICY, {AF_INET6, SOCK_DGRAM, SockoptCall::kGarbage}},
    {IPPROTO_IPV6, IPV6_2292HOPOPTS, {AF_INET6, SOCK_DGRAM, SockoptCall::kGarbage}},
    {IPPROTO_IPV6, IPV6_2292DSTOPTS, {AF_INET6, SOCK_DGRAM, SockoptCall::kGarbage}},
    {IPPROTO_IPV6, IPV6_2292RTHDR, {AF_INET6, SOCK_DGRAM, SockoptCall::kGarbage}},
    {IPPROTO_IPV6, IPV6_2292PKTOPTIONS, {AF_INET6, SOCK_DGRAM, SockoptCall::kGarbage}},
    {IPPROTO_IPV6, IPV6_HOPOPTS, {AF_INET6, SOCK_DGRAM, SockoptCall::kGarbage}},
    {IPPROTO_IPV6, IPV6_RTHDRDSTOPTS, {AF_INET6, SOCK_DGRAM, SockoptCall::kGarbage}},
    {IPPROTO_IPV6, IPV6_RTHDR, {AF_INET6, SOCK_DGRAM, SockoptCall::kGarbage}},
    {IPPROTO_IPV6, IPV6_DSTOPTS, {AF_INET6, SOCK_DGRAM, SockoptCall::kGarbage}},
    {IPPROTO_TCP, TCP_REPAIR, {AF_INET, SOCK_STREAM, SockoptCall::kInt1}},
};

bool SameTarget(const RegressCase& c, const v1::AuditEvent& e) {
  RegressProbe seen;
  if (!RegressProbeOf(e, &seen)) return false;
  if (seen.kind != c.probe.kind) return false;
  if (IsNetProbe(c.probe.kind))
    return seen.address == c.probe.address && seen.port == c.probe.port && seen.protocol == c.probe.protocol;
  if (c.probe.kind == "net.socket")
    return seen.family == c.probe.family && seen.type == c.probe.type && seen.protocol == c.probe.protocol;
  if (c.probe.kind == "net.sockopt") return seen.level == c.probe.level && seen.option == c.probe.option;
  if (IsSeccompProbe(c.probe)) {
    // The call as the probe made it: where the filter judged an argument the
    // probe passed the recorded one; a pid was 1, not the recorded pid.
    std::string why;
    auto call = SeccompCallFor(c.probe.syscall, c.probe.argument, &why);
    return seen.syscall == c.probe.syscall && (!call || !call->judged_argument || seen.argument == c.probe.argument);
  }
  if (c.probe.kind == "tamper.bpf") return seen.path == c.probe.path;  // the bpf() call, or a file's protection
  // The probes that act on a stand-in (ProbeScratch): the event names it.
  if (IsBesideProbe(c.probe.kind))  // a rename or link is named by either of its two names
    return !c.probe.scratch.empty() &&
           (seen.path == c.probe.scratch || seen.path == ScratchSecondName(c.probe.scratch));
  if (c.probe.kind == "tamper.signal" || c.probe.kind == "tamper.ptrace")
    return c.probe.target_pid && e.target().pid() == c.probe.target_pid &&
           (c.probe.kind == "tamper.ptrace" || seen.arg == c.probe.arg);
  if (c.probe.kind == "tamper.cgroup") return !c.probe.scratch.empty() && seen.arg == c.probe.arg;
  if (c.probe.kind == "tamper.device") return seen.arg == c.probe.arg && seen.type == c.probe.type;
  if (c.probe.kind == "tamper.sysctl") return seen.path == c.probe.path && seen.arg == c.probe.arg;
  return seen.path == c.probe.path;
}

}  // namespace

std::string RegressProbe::Target() const {
  if (IsNetProbe(kind)) {
    const std::string addr = family == "inet6" ? "[" + address + "]" : address;
    return protocol + " " + addr + ":" + std::to_string(port);
  }
  if (kind == "net.socket") return family + " " + type + " " + protocol;
  if (kind == "net.sockopt") return "level " + std::to_string(level) + " option " + std::to_string(option);
  if (kind == "file.open") return access + " " + path;
  if (IsSeccompProbe(*this)) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%x", argument);
    return "syscall " + std::to_string(syscall) + (argument ? std::string(" argument ") + hex : "");
  }
  if (kind == "tamper.device")
    return (type.empty() ? "" : type + " ") + "device " + std::to_string(arg >> 20) + ":" +
           std::to_string(arg & 0xfffff) + (access.empty() ? "" : " " + access);
  if (kind == "tamper.sysctl") return (arg ? "write " : "read ") + path;
  if (kind.rfind("tamper.", 0) == 0) return kind.substr(7) + (arg ? " " + std::to_string(arg) : "");
  return path;
}

bool RegressProbe::operator==(const RegressProbe& o) const {
  return kind == o.kind && family == o.family && protocol == o.protocol && address == o.address && port == o.port &&
         type == o.type && path == o.path && access == o.access && arg == o.arg && syscall == o.syscall &&
         argument == o.argument && level == o.level && option == o.option;
}

bool RegressProbeOf(const v1::AuditEvent& e, RegressProbe* probe) {
  if (e.verdict() != "denied" || e.quiet()) return false;
  RegressProbe p;
  p.kind = e.kind();
  if (e.enforcement() == "seccomp" && SeccompKind(e.kind())) {
    p.syscall = e.target().arg();
    p.argument = e.target().arg2();
    if (!p.syscall) return false;
  } else if (e.kind() == "net.socket") {
    p.family = e.net().family();
    p.type = e.net().sock_type();
    p.protocol = e.net().protocol();
    if (p.family.empty()) return false;
  } else if (e.kind() == "net.sockopt") {
    p.level = e.target().arg();
    p.option = e.target().arg2();
  } else if (IsNetProbe(e.kind())) {
    p.family = e.net().family();
    p.protocol = e.net().protocol();
    p.address = e.net().address();
    p.port = e.net().port();
    if (p.address.empty()) return false;
  } else if (IsPathProbe(e.kind())) {
    p.path = e.file().path();
    if (p.path.empty() || e.file().truncated()) return false;
    // Which rule refused a rename or link: the directory's (a name made or
    // removed there), or that the name would gain rights where it goes.
    if (e.kind() == "file.rename" || e.kind() == "file.link")
      p.access = e.reason().rfind(kLinkGainReason, 0) == 0 ? "gain" : "directory";
  } else if (e.kind() == "file.open") {
    p.path = e.file().path();
    p.access = e.file().access();
    if (p.path.empty() || e.file().truncated()) return false;
    if (p.access.empty()) p.access = "read";
  } else if (e.kind().rfind("tamper.", 0) == 0) {
    p.arg = e.target().arg();
    if (e.kind() == "tamper.device") {
      const uint32_t a = e.target().arg2();  // 1 mknod, 2 read, 4 write; the type above (1 block, 2 char)
      p.type = (a >> 16) == 1 ? "block" : (a >> 16) == 2 ? "char" : "";
      std::vector<std::string> words;
      if (a & 2) words.push_back("read");
      if (a & 4) words.push_back("write");
      if (a & 1) words.push_back("mknod");
      p.access = JoinStrings(words, ",");
    }
    // A tamper refusal on a file (BPF LSM's protection of cordon's state
    // directory, the sandbox's cgroup files): a write of that path, not the
    // call the kind otherwise names (no probe makes it: NoProbeReason).
    p.path = e.file().path();
  } else if (e.kind().rfind("net.", 0) != 0 && e.kind().rfind("file.", 0) != 0) {
    return false;  // loss, suppressed, resource.*, credential.*, sandbox.*: not violations of a rule
  }
  *probe = std::move(p);
  return true;
}

std::vector<RegressCase> DistinctCases(const std::vector<std::pair<v1::AuditEvent, CaptureSource>>& events) {
  std::vector<RegressCase> out;
  for (const auto& [e, source] : events) {
    RegressProbe p;
    if (!RegressProbeOf(e, &p)) continue;
    RegressCase* found = nullptr;
    for (auto& c : out)
      if (c.probe == p) found = &c;
    const uint64_t n = Occurrences(e);
    if (found) {
      found->occurrences += n;
      continue;
    }
    RegressCase c;
    c.probe = std::move(p);
    c.enforcement = e.enforcement();
    c.errno_name = ExpectedErrno(e.enforcement(), e.kind());
    c.policy_name = e.policy();
    c.policy_in_force = e.policy_digest();
    c.audit = source.audit;
    c.event_id = e.id();
    c.chain = e.chain();
    c.time = google::protobuf::util::TimeUtil::ToString(e.time());
    c.sandbox = e.sandbox();
    c.occurrences = n;
    out.push_back(std::move(c));
  }
  return out;
}

std::string ExpectedErrno(const std::string& enforcement, const std::string& kind) {
  if (enforcement == "landlock" && (kind == "tamper.signal" || kind == "net.unix")) return "EPERM";
  if (enforcement == "kernel-cgroup" || enforcement == "kernel-lsm" || enforcement == "seccomp") return "EPERM";
  if (enforcement == "landlock") return "EACCES";
  if (enforcement == "mount") return "EROFS";
  return "";
}

std::string NeedsBpfLsm(const RegressCase& c) {
  // Probed with a call cordon run's seccomp filter refuses (SeccompFormOf):
  // shown refused in regress's sandbox with or without BPF LSM.
  if (c.enforcement == "kernel-lsm" && !c.probe.syscall && SeccompFormOf(c.probe).syscall) return "";
  if (c.enforcement == "kernel-lsm") return "recorded at kernel-lsm";
  if (OnlyBpfLsmJudges(c.probe.kind))
    return std::string("Landlock does not judge ") + (c.probe.kind == "file.setattr" ? "chmod" : "executable mappings");
  return "";
}

std::optional<SockoptCall> SockoptOf(uint32_t level, uint32_t option) {
  for (const auto& e : kSockopts)
    if (static_cast<uint32_t>(e.level) == level && static_cast<uint32_t>(e.option) == option) return e.call;
  return std::nullopt;
}

std::string NoProbeReason(const RegressProbe& probe) {
  const std::string& kind = probe.kind;
  if (IsSeccompProbe(probe)) {
    std::string why;
    if (SeccompCallFor(probe.syscall, probe.argument, &why)) return "";
    return "no probe for " + kind + " (syscall " + std::to_string(probe.syscall) + "): " + why;
  }
  if (kind == "net.socket") {
    // socket() of a family or protocol the kernel has not registered makes it
    // load a module on the host (net-pf-N, net-pf-N-proto-P): only those
    // built into every kernel cordon runs on are made.
    const std::string& f = probe.family;
    const std::string proto = probe.protocol == "0" ? "ip" : probe.protocol;  // named, or its number
    const bool inet = f == "inet" || f == "inet6";
    const bool built_in = f == "unix" || (f == "netlink" && proto == "ip") ||
                          (inet && (proto == "ip" || proto == "icmp" || proto == "tcp" || proto == "udp" ||
                                    proto == "icmpv6" || proto == "raw" || proto == "udplite"));
    if (!built_in)
      return "no probe for net.socket of family " + f + ", protocol " + proto +
             ": socket() could make the kernel load a module on this host";
  }
  if (kind == "net.sockopt" && !SockoptOf(probe.level, probe.option))
    return "no probe for net.sockopt of level " + std::to_string(probe.level) + " option " +
           std::to_string(probe.option) + ": not an option the sandbox's setsockopt program refuses";
  if (kind == "tamper.sysctl" && probe.path.empty())
    return "no probe for tamper.sysctl of a case that names no sysctl: capture it again";
  if (kind == "tamper.device" && (probe.access.empty() || probe.type.empty()))
    return "no probe for tamper.device of a case that names no access or type (captured before cordon had this "
           "probe): "
           "capture it again";
  if (kind == "tamper.device" && probe.access.find("mknod") != std::string::npos)
    return "no probe for tamper.device of a mknod: a device node made in the sandbox is refused by cordon's file "
           "rules before the device check; reads and writes are probed";
  if (kind == "tamper.ptrace" && probe.arg == 0)
    return "no probe for tamper.ptrace by PTRACE_TRACEME: the probe's parent is cordon's runner";
  if ((kind == "file.rename" || kind == "file.link") && probe.access.empty())
    return "no probe for " + kind +
           " of a case that does not say which rule refused it (captured before cordon had this probe): capture "
           "it again";
  if ((kind == "file.rename" || kind == "file.link") && probe.access == "gain")
    return "no probe for " + kind +
           " refused because the name would gain rights where it went: the event names the object, not the "
           "directory it was going to";
  if (kind.rfind("tamper.", 0) == 0 && kind != "tamper.sysctl" && !probe.path.empty())
    return "no probe for " + kind + " on a file (" + probe.path +
           "): writing cordon's own state or the sandbox's cgroup files is not probed";
  if ((kind == "file.create" || OnlyBpfLsmJudges(kind) || IsBesideProbe(kind)) && probe.path.empty())
    return "no probe for " + kind +
           " of a case that names no path (captured before cordon had this probe): "
           "capture it again";
  // A path as the workload wrote it (Landlock's refusals) may be relative:
  // the probe's working directory is not the workload's.
  if ((kind == "file.create" || OnlyBpfLsmJudges(kind) || IsBesideProbe(kind)) && !probe.path.empty() &&
      probe.path[0] != '/')
    return "no probe for " + kind + " of a relative path (" + probe.path +
           ", as the workload wrote it): the probe's working directory is not the workload's";
  for (const auto& k : kProbeKinds)
    if (k == kind) return "";
  for (const auto& n : kNoProbe)
    if (kind == n.kind) return "no probe for " + kind + ": " + n.why;
  for (const auto& t : kLsmTamperCalls)
    if (kind == t.kind) return "";
  if (kind.rfind("tamper.", 0) == 0)
    return "no probe for " + kind + " where cordon run's seccomp filter did not refuse it (recorded at another layer)";
  return "no probe for " + kind;
}

std::string ScratchSecondName(const std::string& scratch) { return scratch + ".2"; }

RegressProbe SeccompFormOf(const RegressProbe& probe) {
  RegressProbe p = probe;
  if (!p.syscall && p.path.empty())
    for (const auto& t : kLsmTamperCalls)
      if (p.kind == t.kind) p.syscall = t.nr, p.argument = t.argument;
  return p;
}

std::string CaseFileStem(const RegressCase& c) {
  std::string stem = c.probe.kind + "-" + c.probe.Target();
  std::string out;
  for (char ch : stem) {
    const bool keep = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
                      ch == '-' || ch == '_';
    if (keep) {
      out += ch;
    } else if (!out.empty() && out.back() != '_') {
      out += '_';
    }
  }
  while (!out.empty() && (out.back() == '_' || out.back() == '.')) out.pop_back();
  if (out.size() > 100) out.resize(100);
  return out;
}

std::string CaseYaml(const RegressCase& c) {
  std::string y;
  y += "# cordon regression case (cordon regress capture): this violation must stay denied.\n";
  y += "# From " + CommentText(c.audit.empty() ? "an audit trail" : c.audit) + ": event " +
       CommentText(c.event_id.empty() ? "(no id) chain " + c.chain.substr(0, 16) : c.event_id) + " at " +
       CommentText(c.time) + ", sandbox " + CommentText(c.sandbox) + ".\n";
  y += "# Seen " + std::to_string(c.occurrences) + " time(s) (information only). Run with: cordon regress run DIR\n";
  y += "# Review it, then commit it with the policy file it names.\n";
  y += "version: 1\n";
  y += "source:\n";
  y += "  audit: " + Q(c.audit) + "\n";
  y += "  event: " + Q(c.event_id) + "\n";
  y += "  chain: " + Q(c.chain) + "\n";
  y += "  time: " + Q(c.time) + "\n";
  y += "  sandbox: " + Q(c.sandbox) + "\n";
  y += "  occurrences: " + std::to_string(c.occurrences) + "\n";
  y += "probe:\n";
  y += "  kind: " + c.probe.kind + "\n";
  if (IsNetProbe(c.probe.kind)) {
    y += "  family: " + Q(c.probe.family) + "\n";
    y += "  protocol: " + Q(c.probe.protocol) + "\n";
    y += "  address: " + Q(c.probe.address) + "\n";
    y += "  port: " + std::to_string(c.probe.port) + "\n";
  }
  if (c.probe.kind == "net.socket") {
    y += "  family: " + Q(c.probe.family) + "\n";
    y += "  type: " + Q(c.probe.type) + "\n";
    y += "  protocol: " + Q(c.probe.protocol) + "\n";
  }
  if (c.probe.kind == "tamper.device" && !c.probe.type.empty()) y += "  type: " + Q(c.probe.type) + "\n";
  if (c.probe.kind == "net.sockopt") {
    y += "  level: " + std::to_string(c.probe.level) + "\n";
    y += "  option: " + std::to_string(c.probe.option) + "\n";
  }
  if (!c.probe.path.empty()) y += "  path: " + Q(c.probe.path) + "\n";
  if (!c.probe.access.empty()) y += "  access: " + Q(c.probe.access) + "\n";
  if (IsSeccompProbe(c.probe)) {
    y += "  syscall: " + std::to_string(c.probe.syscall) + "\n";
    y += "  argument: " + std::to_string(c.probe.argument) + "\n";
  } else if (c.probe.kind.rfind("tamper.", 0) == 0) {
    y += "  arg: " + std::to_string(c.probe.arg) + "\n";
  }
  y += "expect:\n";
  y += "  verdict: " + c.verdict + "\n";
  y += "  kind: " + c.probe.kind + "\n";
  y += "  enforcement: " + Q(c.enforcement) + "\n";
  y += "  errno: " + Q(c.errno_name) + "\n";
  y += "policy:\n";
  y += "  file: " + Q(c.policy_file) + "\n";
  y += "  name: " + Q(c.policy_name) + "\n";
  y += "  digest: " + Q(c.policy_digest) + "\n";
  if (!c.policy_in_force.empty()) y += "  inForce: " + Q(c.policy_in_force) + "\n";
  return y;
}

std::optional<RegressCase> ParseCaseYaml(const std::string& text, const std::string& file, std::string* error) {
  CaseReader r{file, ""};
  auto fail = [&]() -> std::optional<RegressCase> {
    *error = r.error;
    return std::nullopt;
  };
  if (text.size() > (1u << 20)) return r.Fail(nullptr, "", "larger than 1 MiB: not a case file"), fail();
  policy::Diagnostics diags;
  auto root = policy::ReadYaml(text, file, &diags);
  if (!root) {
    *error = diags.empty() ? file + ": not YAML" : diags.front().ToString();
    return std::nullopt;
  }
  RegressCase c;
  c.file = file;
  std::map<std::string, const YamlNode*> top, source, probe, expect, pol;
  if (!r.Fields(root.get(), "", {"version", "source", "probe", "expect", "policy"},
                {"version", "probe", "expect", "policy"}, &top))
    return fail();
  uint64_t version = 0;
  if (!r.Number(top, "", "version", 1000, &version)) return fail();
  if (version != 1) return r.Fail(top["version"], "version", "unsupported version (this cordon reads 1)"), fail();
  if (top.count("source")) {
    if (!r.Fields(top["source"], "source", {"audit", "event", "chain", "time", "sandbox", "occurrences"}, {},
                  &source) ||
        !r.String(source, "source", "audit", &c.audit) || !r.String(source, "source", "event", &c.event_id) ||
        !r.String(source, "source", "chain", &c.chain) || !r.String(source, "source", "time", &c.time) ||
        !r.String(source, "source", "sandbox", &c.sandbox) ||
        !r.Number(source, "source", "occurrences", UINT64_MAX, &c.occurrences))
      return fail();
  }
  if (!r.Fields(top["probe"], "probe",
                {"kind", "family", "protocol", "address", "port", "type", "path", "access", "arg", "syscall",
                 "argument", "level", "option"},
                {"kind"}, &probe) ||
      !r.String(probe, "probe", "kind", &c.probe.kind))
    return fail();
  const std::string& kind = c.probe.kind;
  const bool known_family = kind.rfind("net.", 0) == 0 || kind.rfind("file.", 0) == 0 || kind.rfind("tamper.", 0) == 0;
  if (!known_family || kind.size() > 64)
    return r.Fail(probe["kind"], "probe.kind", "not an event kind a case is made of (net.*, file.*, tamper.*)"), fail();
  uint64_t port = 0, arg = 0, syscall = 0, argument = 0, level = 0, option = 0;
  if (!r.String(probe, "probe", "type", &c.probe.type) || !r.Number(probe, "probe", "syscall", UINT32_MAX, &syscall) ||
      !r.Number(probe, "probe", "argument", UINT32_MAX, &argument) ||
      !r.String(probe, "probe", "family", &c.probe.family) ||
      !r.String(probe, "probe", "protocol", &c.probe.protocol) ||
      !r.String(probe, "probe", "address", &c.probe.address) || !r.Number(probe, "probe", "port", 65535, &port) ||
      !r.String(probe, "probe", "path", &c.probe.path) || !r.String(probe, "probe", "access", &c.probe.access) ||
      !r.Number(probe, "probe", "arg", UINT32_MAX, &arg) || !r.Number(probe, "probe", "level", UINT32_MAX, &level) ||
      !r.Number(probe, "probe", "option", UINT32_MAX, &option))
    return fail();
  c.probe.level = static_cast<uint32_t>(level);
  c.probe.option = static_cast<uint32_t>(option);
  c.probe.port = static_cast<uint32_t>(port);
  c.probe.arg = static_cast<uint32_t>(arg);
  c.probe.syscall = static_cast<uint32_t>(syscall);
  c.probe.argument = static_cast<uint32_t>(argument);
  // What each probe needs, and nothing another probe takes.
  auto need = [&](const char* key) {
    return probe.count(key) ? true
                            : r.Fail(top["probe"], std::string("probe.") + key, "missing (required for " + kind + ")");
  };
  if (IsNetProbe(kind)) {
    if (!need("family") || !need("protocol") || !need("address") || !need("port")) return fail();
    if (!r.OneOf(probe["family"], "probe.family", c.probe.family, {"inet", "inet6"}) ||
        !r.OneOf(probe["protocol"], "probe.protocol", c.probe.protocol, {"tcp", "udp"}))
      return fail();
    if (c.probe.address.empty() || c.probe.address.size() > 64)
      return r.Fail(probe["address"], "probe.address", "expected an IP address"), fail();
  } else if (kind == "net.sockopt") {
    if (!need("level") || !need("option")) return fail();
  } else if (kind == "net.socket") {
    if (!need("family") || !need("type") || !need("protocol")) return fail();
    for (const char* key : {"family", "type", "protocol"}) {
      const std::string& v = key[0] == 'f' ? c.probe.family : key[0] == 't' ? c.probe.type : c.probe.protocol;
      if (v.empty() || v.size() > 16 ||
          v.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789") != std::string::npos)
        return r.Fail(probe[key], std::string("probe.") + key, "expected a name as events write it (or a number)"),
               fail();
    }
  } else if (probe.count("syscall")) {
    if (c.probe.syscall == 0) return r.Fail(probe["syscall"], "probe.syscall", "expected a system call number"), fail();
    if (probe.count("arg")) return r.Fail(probe["arg"], "probe.arg", "not a field of a probe with a syscall"), fail();
  } else if (IsPathProbe(kind) || kind == "file.open") {
    // file.create, setattr, mmap_exec, unlink, rename and link cases captured
    // before they had a probe name no path: read (and skipped, NoProbeReason), not refused.
    const bool path_optional = kind == "file.create" || OnlyBpfLsmJudges(kind) || IsBesideProbe(kind);
    if (!path_optional && !need("path")) return fail();
    if (probe.count("path") && (c.probe.path.empty() || !UnescapeWorkloadBytes(c.probe.path)))
      return r.Fail(probe["path"], "probe.path", "expected a path (in the escaped form of events)"), fail();
    if (probe.count("path") && UnescapeWorkloadBytes(c.probe.path)->find('\0') != std::string::npos)
      return r.Fail(probe["path"], "probe.path", "a path cannot hold a NUL byte"), fail();
    if (kind == "file.open") {
      if (!need("access")) return fail();
      for (const auto& a : [&] {
             std::vector<std::string> parts;
             size_t start = 0;
             for (size_t comma; (comma = c.probe.access.find(',', start)) != std::string::npos; start = comma + 1)
               parts.push_back(c.probe.access.substr(start, comma - start));
             parts.push_back(c.probe.access.substr(start));
             return parts;
           }())
        if (!r.OneOf(probe["access"], "probe.access", a, {"read", "write", "create"})) return fail();
    }
    if ((kind == "file.rename" || kind == "file.link") && probe.count("access") &&
        !r.OneOf(probe["access"], "probe.access", c.probe.access, {"directory", "gain"}))
      return fail();
  } else if (kind == "tamper.sysctl" && probe.count("path") &&
             (c.probe.path.empty() || c.probe.path.size() > 256 ||
              c.probe.path.find_first_of(std::string("\0\n", 2) + "\\") != std::string::npos ||
              c.probe.path.find("..") != std::string::npos || c.probe.path[0] == '/')) {
    return r.Fail(probe["path"], "probe.path", "expected a sysctl name as events write it (kernel/hostname)"), fail();
  }
  if (kind == "tamper.device" && probe.count("type") &&
      !r.OneOf(probe["type"], "probe.type", c.probe.type, {"char", "block"}))
    return fail();
  if (kind == "tamper.device" && probe.count("access")) {
    size_t start = 0;
    for (;;) {
      const size_t comma = c.probe.access.find(',', start);
      const std::string word = c.probe.access.substr(start, comma == std::string::npos ? comma : comma - start);
      if (!r.OneOf(probe["access"], "probe.access", word, {"read", "write", "mknod"})) return fail();
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  const bool socket = kind == "net.socket";
  for (const char* key :
       {"family", "protocol", "address", "port", "type", "path", "syscall", "argument", "arg", "level", "option"}) {
    const std::string k = key;
    const bool takes = k == "level" || k == "option"      ? kind == "net.sockopt"
                       : k == "path"                      ? !IsNetProbe(kind) && !socket && kind != "net.sockopt"
                       : k == "arg"                       ? kind.rfind("tamper.", 0) == 0 && !probe.count("syscall")
                       : k == "type"                      ? socket || kind == "tamper.device"
                       : k == "syscall"                   ? SeccompKind(kind)
                       : k == "argument"                  ? probe.count("syscall") > 0
                       : k == "family" || k == "protocol" ? IsNetProbe(kind) || socket
                                                          : IsNetProbe(kind);
    if (!takes && probe.count(key))
      return r.Fail(probe[key], "probe." + k, "not a field of a " + kind + " probe"), fail();
  }

  std::string expect_kind;
  if (!r.Fields(top["expect"], "expect", {"verdict", "kind", "enforcement", "errno"}, {"verdict", "kind"}, &expect) ||
      !r.String(expect, "expect", "verdict", &c.verdict) || !r.String(expect, "expect", "kind", &expect_kind) ||
      !r.String(expect, "expect", "enforcement", &c.enforcement) || !r.String(expect, "expect", "errno", &c.errno_name))
    return fail();
  if (c.verdict != "denied")
    return r.Fail(expect["verdict"], "expect.verdict", "only denied is checked (a case says a violation stays denied)"),
           fail();
  if (expect_kind != kind)
    return r.Fail(expect["kind"], "expect.kind", "differs from probe.kind " + Quoted(kind)), fail();
  if (!c.errno_name.empty()) {
    bool known = false;
    for (const auto& e : kErrnos) known = known || c.errno_name == e.name;
    if (!known) return r.Fail(expect["errno"], "expect.errno", "not an errno name cordon's layers return"), fail();
  }
  if (!r.Fields(top["policy"], "policy", {"file", "name", "digest", "inForce"}, {"file", "digest"}, &pol) ||
      !r.String(pol, "policy", "file", &c.policy_file) || !r.String(pol, "policy", "name", &c.policy_name) ||
      !r.String(pol, "policy", "digest", &c.policy_digest) || !r.String(pol, "policy", "inForce", &c.policy_in_force))
    return fail();
  if (c.policy_file.empty() || c.policy_file.find('/') != std::string::npos || c.policy_file[0] == '.')
    return r.Fail(pol["file"], "policy.file", "expected a file name next to the case (no directory)"), fail();
  if (c.policy_digest.rfind("sha256:", 0) != 0 || c.policy_digest.size() != 7 + 64 ||
      c.policy_digest.find_first_not_of("0123456789abcdef", 7) != std::string::npos)
    return r.Fail(pol["digest"], "policy.digest", "expected sha256:<64 hex digits>"), fail();
  return c;
}

std::string ErrnoName(int error) {
  for (const auto& e : kErrnos)
    if (e.number == error) return e.name;
  return std::to_string(error);
}

std::string ProbeResultJson(const ProbeResult& r) {
  auto str = [](const std::string& s) {
    std::string out = "\"";
    for (unsigned char c : EscapeWorkloadBytes(s)) {
      if (c == '"' || c == '\\') out += '\\';
      out += static_cast<char>(c);
    }
    return out + "\"";
  };
  if (r.ok) return "{\"result\":\"ok\",\"detail\":" + str(r.detail) + "}";
  return "{\"result\":\"error\",\"step\":" + str(r.step) + ",\"errno\":" + std::to_string(r.error) +
         ",\"errnoName\":" + str(ErrnoName(r.error)) + ",\"detail\":" + str(r.detail) +
         (r.refused_as.empty() ? "" : ",\"refusedAs\":" + str(r.refused_as)) + "}";
}

std::optional<ProbeResult> ParseProbeResult(const std::string& line) {
  google::protobuf::Struct s;
  if (!google::protobuf::util::JsonStringToMessage(line, &s).ok()) return std::nullopt;
  const auto& f = s.fields();
  auto str = [&](const char* k) { return f.count(k) ? f.at(k).string_value() : std::string(); };
  ProbeResult r;
  const std::string result = str("result");
  if (result == "ok") {
    r.ok = true;
  } else if (result == "error" && f.count("errno")) {
    r.error = static_cast<int>(f.at("errno").number_value());
    r.errno_name = str("errnoName");
    r.step = str("step");
    r.refused_as = str("refusedAs");
  } else {
    return std::nullopt;
  }
  r.detail = str("detail");
  return r;
}

CaseOutcome JudgeCase(const RegressCase& c, const std::optional<ProbeResult>& result,
                      const std::vector<v1::AuditEvent>& events) {
  CaseOutcome out;
  out.kind = CaseOutcome::Kind::kFailed;
  const v1::AuditEvent* match = nullptr;
  for (const auto& e : events)
    if (SameTarget(c, e)) {
      match = &e;
      break;
    }
  if (!result) {
    out.message = "the probe gave no result" + std::string(match ? "" : ", and no " + c.probe.kind + " event");
    return out;
  }
  if (result->ok) {
    out.message = "not denied: " + c.probe.kind + " " + c.probe.Target() + " succeeded" +
                  (result->detail.empty() ? "" : " (" + result->detail + ")");
    return out;
  }
  const std::string got = ErrnoName(result->error);
  if (!match) {
    out.message = "no denied " + c.probe.kind + " event on " + c.probe.Target() + " (the probe's " + result->step +
                  " failed with " + got + (result->detail.empty() ? "" : ", " + result->detail) + ")";
    return out;
  }
  // The layer that refused it now says which errno it returns (a kernel with
  // BPF LSM refuses a file with EPERM where Landlock says EACCES), unless the
  // call says another for any refusal (/proc's ptrace checks: EACCES).
  std::string want =
      result->refused_as.empty() ? ExpectedErrno(match->enforcement(), match->kind()) : result->refused_as;
  if (want.empty()) want = c.errno_name;
  if (!want.empty() && got != want) {
    out.message = "the " + result->step + " failed with " + got + ", but the " + match->enforcement() +
                  " refusal the event names returns " + want;
    return out;
  }
  out.kind = CaseOutcome::Kind::kPassed;
  out.message = "denied: " + result->step + " " + got + ", event " + match->kind() + " (" + match->enforcement() + ")";
  if (!c.enforcement.empty() && match->enforcement() != c.enforcement)
    out.message += "; recorded at " + c.enforcement + ", refused here by " + match->enforcement();
  return out;
}

std::string JunitXml(const std::vector<JunitCase>& cases) {
  auto esc = [](const std::string& s) {
    std::string out;
    for (unsigned char ch : DisplayText(s)) {
      switch (ch) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&quot;"; break;
        case '\'': out += "&apos;"; break;
        default: out += static_cast<char>(ch);
      }
    }
    return out;
  };
  int failures = 0, skipped = 0;
  double total = 0;
  for (const auto& c : cases) {
    failures += c.outcome.kind == CaseOutcome::Kind::kFailed;
    skipped += c.outcome.kind == CaseOutcome::Kind::kSkipped;
    total += c.seconds;
  }
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.3f", total);
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  const std::string counts = " tests=\"" + std::to_string(cases.size()) + "\" failures=\"" + std::to_string(failures) +
                             "\" errors=\"0\" skipped=\"" + std::to_string(skipped) + "\" time=\"" + seconds + "\"";
  x += "<testsuites name=\"cordon-regress\"" + counts + ">\n";
  x += "  <testsuite name=\"cordon-regress\"" + counts + ">\n";
  for (const auto& c : cases) {
    std::snprintf(seconds, sizeof seconds, "%.3f", c.seconds);
    x += "    <testcase name=\"" + esc(c.name) + "\" classname=\"" + esc(c.classname) + "\" time=\"" + seconds + "\"";
    switch (c.outcome.kind) {
      case CaseOutcome::Kind::kPassed: x += "/>\n"; break;
      case CaseOutcome::Kind::kSkipped:
        x += ">\n      <skipped message=\"" + esc(c.outcome.message) + "\"/>\n    </testcase>\n";
        break;
      case CaseOutcome::Kind::kFailed:
        x += ">\n      <failure message=\"" + esc(c.outcome.message) + "\" type=\"not-denied\">" +
             esc(c.outcome.message) + "</failure>\n    </testcase>\n";
        break;
    }
  }
  x += "  </testsuite>\n</testsuites>\n";
  return x;
}

std::vector<std::string> ProbeArgs(const RegressProbe& p) {
  std::vector<std::string> a = {p.kind};
  if (IsNetProbe(p.kind))
    for (const auto& s :
         {"--family", p.family.c_str(), "--protocol", p.protocol.c_str(), "--address", p.address.c_str()})
      a.push_back(s);
  if (IsNetProbe(p.kind)) a.insert(a.end(), {"--port", std::to_string(p.port)});
  if (!p.path.empty()) a.insert(a.end(), {"--path", p.path});
  if (!p.access.empty()) a.insert(a.end(), {"--access", p.access});
  if (p.kind == "net.socket") a.insert(a.end(), {"--family", p.family, "--type", p.type, "--protocol", p.protocol});
  if (p.kind == "tamper.device") a.insert(a.end(), {"--type", p.type});
  if (p.kind == "net.sockopt")
    a.insert(a.end(), {"--level", std::to_string(p.level), "--option", std::to_string(p.option)});
  if (IsSeccompProbe(p)) {
    a.insert(a.end(), {"--syscall", std::to_string(p.syscall), "--argument", std::to_string(p.argument)});
  } else if (p.kind.rfind("tamper.", 0) == 0) {
    a.insert(a.end(), {"--arg", std::to_string(p.arg)});
  }
  if (!p.scratch.empty()) a.insert(a.end(), {"--scratch", p.scratch});
  if (p.target_pid) a.insert(a.end(), {"--target-pid", std::to_string(p.target_pid)});
  return a;
}

}  // namespace cordon::ops
