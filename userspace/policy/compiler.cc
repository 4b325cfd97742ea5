// Policy validation and the map images of bpf/abi/cordon_net.h.
//
// Folding: the kernel consults only the longest matching address prefix, so
// each distinct rule prefix P carries the union of the allowances of every
// rule whose prefix contains P. Prefixes sorted by (address, length) visit
// every ancestor before its descendants, and the ancestors of the current
// prefix are exactly a stack (at most 129 deep), so each prefix is folded once
// against its nearest ancestor's already-folded set: O(n log n) overall.
//
// Files: paths are checked and normalized lexically (the compiler never
// touches the filesystem; the loader resolves them), profiles expanded from
// the tables below, and repeated paths merged into their first entry.
#include "policy/compiler.h"

#include "abi/cordon_event.h"
#include "util/fs.h"
#include "util/text.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <sstream>
#include <tuple>
#include <unordered_map>

namespace cordon::policy {
namespace {

constexpr size_t kMaxEgressRules = 100'000;
// Fold work (port segments processed) above which a policy is refused rather
// than compiled into an enormous image; no sensible policy comes near it.
constexpr size_t kMaxFoldWork = 64'000'000;
constexpr uint32_t kAllPorts = 0xffff;

constexpr const char* kApiVersion = "cordon/v1";
constexpr const char* kKind = "SandboxPolicy";

struct NamedBit {
  const char* name;
  int bit;
};

constexpr NamedBit kFamilies[] = {
    {"unix", CORDON_FAM_UNIX},       {"inet", CORDON_FAM_INET},     {"inet6", CORDON_FAM_INET6},
    {"netlink", CORDON_FAM_NETLINK}, {"packet", CORDON_FAM_PACKET}, {"vsock", CORDON_FAM_VSOCK},
};
constexpr NamedBit kSockProtos[] = {
    {"raw", CORDON_SP_RAW},   {"icmp", CORDON_SP_ICMP},   {"icmpv6", CORDON_SP_ICMPV6},
    {"sctp", CORDON_SP_SCTP}, {"mptcp", CORDON_SP_MPTCP}, {"udplite", CORDON_SP_UDPLITE},
};
constexpr uint32_t kDefaultFamilies = (1u << CORDON_FAM_UNIX) | (1u << CORDON_FAM_INET) | (1u << CORDON_FAM_INET6);

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 63) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
  });
}

// Keeps error sentences short and terminal-safe when they quote user input.
std::string Quote(const std::string& text) {
  std::string shown = text.size() > 64 ? text.substr(0, 64) + "..." : text;
  for (char& c : shown) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return "'" + shown + "'";
}

// ---- File profiles ------------------------------------------------------------
//
// For Debian 12 (bookworm) x86_64 with merged /usr: /bin, /sbin, /lib and
// /lib64 are symlinks into /usr, so both spellings are listed (the loader
// follows symlinks; on other layouts whichever exists applies). Entries absent
// on the host are skipped at attach time. Never list a path whose target
// depends on who resolves it (/dev/stdin, /dev/fd, /proc/self): the loader,
// not the sandbox, would resolve it.

constexpr uint32_t kR = kFileRightsRead;
constexpr uint32_t kRW = CORDON_FILE_READ | CORDON_FILE_WRITE;  // devices: no create/delete
constexpr uint32_t kX = kFileRightsExec;
constexpr uint32_t kLib = kFileRightsLibrary;

constexpr FileProfileEntry kRuntimeMinimal[] = {
    // Shared libraries and the dynamic loader (ld.so maps them executable).
    {"/lib", kLib},
    {"/lib64", kLib},
    {"/usr/lib", kLib},
    {"/usr/lib64", kLib},
    {"/usr/lib/x86_64-linux-gnu", kLib},
    {"/lib/x86_64-linux-gnu", kLib},
    {"/usr/local/lib", kLib},  // in the loader's search path (/etc/ld.so.conf.d/libc.conf)
    // Loader configuration.
    {"/etc/ld.so.cache", kR},
    {"/etc/ld.so.conf", kR},
    {"/etc/ld.so.conf.d", kR},
    // Time zone and locale data.
    {"/etc/localtime", kR},
    {"/etc/timezone", kR},
    {"/usr/share/zoneinfo", kR},
    {"/usr/lib/locale", kR},
    {"/usr/share/locale", kR},
    {"/etc/locale.alias", kR},
    // Name service switch: users, groups, hosts, services (getpwuid, getaddrinfo).
    {"/etc/nsswitch.conf", kR},
    {"/etc/passwd", kR},
    {"/etc/group", kR},
    {"/etc/host.conf", kR},
    {"/etc/resolv.conf", kR},
    {"/etc/hosts", kR},
    {"/etc/gai.conf", kR},
    {"/etc/services", kR},
    {"/etc/protocols", kR},
    // OpenSSL's configuration, read when libcrypto initializes (Python's hashlib and ssl).
    {"/etc/ssl/openssl.cnf", kR},
    // CPU count (sysconf(_SC_NPROCESSORS_ONLN) reads /sys/devices/system/cpu/online).
    {"/sys/devices/system/cpu", kR},
    // Devices every program may use.
    {"/dev/null", kRW},
    {"/dev/tty", kRW},
    {"/dev/full", kRW},
    {"/dev/zero", kR},
    {"/dev/urandom", kR},
    {"/dev/random", kR},
};

constexpr FileProfileEntry kPython3[] = {
    {"/usr/bin/python3", kX},
    {"/usr/bin/python3.11", kX},
    {"/usr/lib/python3.11", kR},
    {"/usr/lib/python3.11/lib-dynload", kLib},  // C extension modules of the standard library
    {"/usr/lib/python3", kR},
    {"/usr/lib/python3/dist-packages", kLib},  // Debian packages, with their C extensions
    {"/usr/local/lib/python3.11", kR},
    {"/usr/local/lib/python3.11/dist-packages", kLib},  // pip-installed, with their C extensions
    {"/etc/python3.11", kR},  // sitecustomize.py
    {"/etc/python3", kR},
};

constexpr FileProfileEntry kShell[] = {
    // The shells (/bin/sh is dash on Debian).
    {"/bin/sh", kX}, {"/usr/bin/sh", kX},
    {"/bin/dash", kX}, {"/usr/bin/dash", kX},
    {"/bin/bash", kX}, {"/usr/bin/bash", kX},
    // Commands shell scripts commonly run.
    {"/usr/bin/env", kX},
    {"/bin/cat", kX}, {"/usr/bin/cat", kX},
    {"/bin/ls", kX}, {"/usr/bin/ls", kX},
    {"/bin/echo", kX}, {"/usr/bin/echo", kX},
    {"/usr/bin/test", kX}, {"/usr/bin/[", kX},
    {"/bin/true", kX}, {"/usr/bin/true", kX},
    {"/bin/false", kX}, {"/usr/bin/false", kX},
    {"/usr/bin/head", kX}, {"/usr/bin/tail", kX},
    {"/usr/bin/wc", kX}, {"/usr/bin/sort", kX}, {"/usr/bin/tr", kX},
    {"/usr/bin/mkdir", kX}, {"/bin/mkdir", kX},
    {"/usr/bin/rm", kX}, {"/bin/rm", kX},
    {"/usr/bin/cp", kX}, {"/bin/cp", kX},
    {"/usr/bin/mv", kX}, {"/bin/mv", kX},
    {"/usr/bin/touch", kX}, {"/bin/touch", kX},
    {"/usr/bin/id", kX}, {"/usr/bin/dirname", kX}, {"/usr/bin/basename", kX},
    {"/usr/bin/grep", kX}, {"/bin/grep", kX},
    {"/usr/bin/sed", kX}, {"/bin/sed", kX},
    {"/usr/bin/sleep", kX}, {"/bin/sleep", kX}, {"/usr/bin/printf", kX}, {"/bin/printf", kX}, {"/usr/bin/expr", kX}, {"/bin/expr", kX}, {"/usr/bin/xargs", kX}, {"/bin/xargs", kX}, {"/usr/bin/find", kX}, {"/bin/find", kX}, {"/usr/bin/uname", kX}, {"/bin/uname", kX}, {"/usr/bin/date", kX}, {"/bin/date", kX}, {"/usr/bin/seq", kX}, {"/bin/seq", kX}, {"/usr/bin/stat", kX}, {"/bin/stat", kX}, {"/usr/bin/chmod", kX}, {"/bin/chmod", kX}, {"/usr/bin/ln", kX}, {"/bin/ln", kX}, {"/usr/bin/readlink", kX}, {"/bin/readlink", kX}, {"/usr/bin/realpath", kX}, {"/bin/realpath", kX}, {"/usr/bin/cut", kX}, {"/bin/cut", kX}, {"/usr/bin/uniq", kX}, {"/bin/uniq", kX}, {"/usr/bin/tee", kX}, {"/bin/tee", kX}, {"/usr/bin/sha256sum", kX}, {"/bin/sha256sum", kX}, {"/usr/bin/pwd", kX}, {"/bin/pwd", kX}, {"/usr/bin/timeout", kX}, {"/bin/timeout", kX}, {"/usr/bin/hostname", kX}, {"/bin/hostname", kX}, {"/usr/bin/whoami", kX}, {"/bin/whoami", kX},
};

constexpr FileProfileEntry kGit[] = {
    {"/usr/bin/git", kX},
    {"/usr/lib/git-core", kX},  // git's helpers (git-remote-https, ...) are executed from here
    {"/usr/share/git-core", kR},  // templates for git init
    {"/etc/gitconfig", kR},
};

constexpr FileProfile kFileProfiles[] = {
    {"runtime-minimal", kRuntimeMinimal, CORDON_LSM_F_PROC_SELF},
    {"python3", kPython3, 0},
    {"shell", kShell, 0},
    {"git", kGit, 0},
};

const FileProfile* FindProfile(std::string_view name) {
  for (const FileProfile& profile : kFileProfiles) {
    if (name == profile.name) return &profile;
  }
  return nullptr;
}

// file_rules under construction: a path mentioned again merges into its first entry.
class FileRuleSet {
 public:
  void Add(const std::string& path, uint32_t rights, bool required, const std::string& origin,
           const std::string& where = "") {
    auto [it, inserted] = index_.emplace(path, rules_.size());
    if (!inserted) {
      FileRule& first = rules_[it->second];
      first.rights |= rights;
      first.required = first.required || required;
      return;
    }
    rules_.push_back(FileRule{path, rights, static_cast<uint32_t>(rules_.size() + 1), required, origin, where});
  }
  void AddProfile(const FileProfile& profile, uint32_t* lsm_flags) {
    const std::string origin = std::string("profile:") + profile.name;
    for (const FileProfileEntry& entry : profile.entries) Add(entry.path, entry.rights, false, origin);
    *lsm_flags |= profile.lsm_flags;
  }
  std::vector<FileRule> Take() { return std::move(rules_); }

 private:
  std::vector<FileRule> rules_;
  std::unordered_map<std::string, size_t> index_;
};

class Validator {
 public:
  Validator(const ParsedPolicy& parsed, Diagnostics* diags) : parsed_(parsed), diags_(diags) {}

  // Fills everything but the map images. Returns false if anything was wrong.
  bool Run(CompiledPolicy* out);

 private:
  void Error(const std::string& field, std::string message) {
    diags_->push_back(parsed_.At(field, std::move(message)));
  }
  bool Present(const std::string& field) const { return parsed_.positions.Find(field) != nullptr; }
  int LineOf(const std::string& field) const {
    const SourcePos* pos = parsed_.positions.Find(field);
    return pos ? pos->line : 0;
  }
  // " (first at line N)" for duplicate reports.
  std::string FirstAt(const std::string& field) const {
    const int line = LineOf(field);
    return line > 0 ? " (first at line " + std::to_string(line) + ")" : "";
  }
  // Names from `table` in a repeated field -> bits. Unknown and repeated names are errors.
  template <size_t N>
  uint32_t NamedBits(const google::protobuf::RepeatedPtrField<std::string>& names, const std::string& field,
                     const char* what, const NamedBit (&table)[N]);
  // A field path, spelled out only when a check needs it (100,000 rules are checked).
  using FieldName = std::function<std::string()>;
  void Rule(const cordon::v1::EgressRule& rule, const FieldName& field, CompiledRule* out);
  template <typename R>
  void Ports(const R& rule, const FieldName& field, CompiledRule* out, bool listen = false);
  template <typename R>
  void Protocols(const R& rule, const FieldName& field, CompiledRule* out);
  void Listen(const cordon::v1::Network& network, CompiledPolicy* out);
  void Dns(const cordon::v1::Dns& dns, CompiledPolicy* out);
  void Devices(const cordon::v1::Spec& spec, CompiledPolicy* out);
  void ContainOn(const cordon::v1::ContainOn& contain, CompiledPolicy* out);
  void Files(const cordon::v1::Files& files, CompiledPolicy* out);
  void Identity(const cordon::v1::Spec& spec, CompiledPolicy* out);

  const ParsedPolicy& parsed_;
  Diagnostics* diags_;
};

template <size_t N>
uint32_t Validator::NamedBits(const google::protobuf::RepeatedPtrField<std::string>& names, const std::string& field,
                              const char* what, const NamedBit (&table)[N]) {
  uint32_t bits = 0;
  std::map<std::string, int> first;  // name -> index of its first mention
  for (int i = 0; i < names.size(); ++i) {
    const std::string item = field + "[" + std::to_string(i) + "]";
    const NamedBit* found = nullptr;
    for (const auto& entry : table) {
      if (names[i] == entry.name) found = &entry;
    }
    if (!found) {
      std::string expected;
      for (const auto& entry : table) expected += std::string(expected.empty() ? "" : ", ") + entry.name;
      Error(item, "unknown " + std::string(what) + " " + Quote(names[i]) + " (expected one of: " + expected + ")");
      continue;
    }
    auto [it, inserted] = first.emplace(names[i], i);
    if (!inserted) {
      Error(item, "duplicate " + std::string(what) + " " + Quote(names[i]) +
                      FirstAt(field + "[" + std::to_string(it->second) + "]"));
      continue;
    }
    bits |= 1u << found->bit;
  }
  return bits;
}

template <typename R>
void Validator::Ports(const R& rule, const FieldName& field, CompiledRule* out, bool listen) {
  auto ports_field = [&] { return field() + ".ports"; };
  if (listen && rule.ports_size() == 0) {
    Error(Present(ports_field()) ? ports_field() : field(),
          Present(ports_field()) ? "empty list (a listen rule needs ports; \"1-65535\" for every port)"
                                 : "required: ports (e.g. [8080, \"9000-9100\"]; \"0\" for a port the kernel "
                                   "chooses; \"1-65535\" for every port)");
    return;
  }
  if (rule.ports_size() == 0) {
    // proto3 cannot tell `ports: []` from an omitted key, and "no ports" would
    // be a rule that allows nothing: refuse the ambiguity.
    if (Present(ports_field())) Error(ports_field(), "empty list (omit 'ports' to allow every port)");
    return;
  }
  struct Indexed {
    PortRange range;
    int index;
  };
  const bool several = rule.ports_size() > 1;  // else nothing can repeat or overlap
  std::vector<Indexed> ranges;
  out->ports.reserve(static_cast<size_t>(rule.ports_size()));
  for (int i = 0; i < rule.ports_size(); ++i) {
    std::string error;
    auto range = listen && rule.ports(i) == "0" ? std::optional<PortRange>(PortRange{0, 0})
                                                : ParsePortRange(rule.ports(i), &error);
    if (!range) {
      Error(ports_field() + "[" + std::to_string(i) + "]", error);
      continue;
    }
    out->ports.push_back(*range);
    if (several) ranges.push_back({*range, i});
  }
  if (ranges.size() < 2) return;
  // Duplicates and overlaps: sweep in (lo, hi, file) order, remembering the
  // first of a run of equal ranges and the range reaching furthest so far.
  std::sort(ranges.begin(), ranges.end(), [](const Indexed& a, const Indexed& b) {
    if (a.range.lo != b.range.lo) return a.range.lo < b.range.lo;
    return a.range.hi != b.range.hi ? a.range.hi < b.range.hi : a.index < b.index;
  });
  auto text = [](const PortRange& r) {
    return r.lo == r.hi ? std::to_string(r.lo) : std::to_string(r.lo) + "-" + std::to_string(r.hi);
  };
  auto where = [&](const Indexed& other) {
    const int line = LineOf(ports_field() + "[" + std::to_string(other.index) + "]");
    return " (ports[" + std::to_string(other.index) + "]" + (line > 0 ? ", line " + std::to_string(line) : "") + ")";
  };
  const Indexed* furthest = nullptr;
  const Indexed* run_start = nullptr;
  for (const Indexed& current : ranges) {
    if (run_start && run_start->range == current.range) {
      Error(ports_field() + "[" + std::to_string(current.index) + "]",
            "duplicate port " + text(current.range) + where(*run_start));
    } else {
      run_start = &current;
      if (furthest && current.range.lo <= furthest->range.hi) {
        // Reported at whichever comes later in the file, naming the other.
        const bool current_later = current.index > furthest->index;
        const Indexed& later = current_later ? current : *furthest;
        const Indexed& earlier = current_later ? *furthest : current;
        Error(ports_field() + "[" + std::to_string(later.index) + "]",
              "port " + text(later.range) + " overlaps " + text(earlier.range) + where(earlier));
      }
    }
    if (!furthest || current.range.hi > furthest->range.hi) furthest = &current;
  }
}

template <typename R>
void Validator::Protocols(const R& rule, const FieldName& field, CompiledRule* out) {
  auto protocols_field = [&] { return field() + ".protocols"; };
  if (rule.protocols_size() == 0) {
    if (Present(protocols_field())) Error(protocols_field(), "empty list (omit 'protocols' to allow both tcp and udp)");
    return;  // omitted: both
  }
  out->tcp = out->udp = false;
  for (int i = 0; i < rule.protocols_size(); ++i) {
    auto item = [&] { return protocols_field() + "[" + std::to_string(i) + "]"; };
    const std::string& name = rule.protocols(i);
    bool* flag = name == "tcp" ? &out->tcp : name == "udp" ? &out->udp : nullptr;
    if (!flag) {
      const bool extra = name == "icmp" || name == "icmpv6" || name == "raw" || name == "sctp" || name == "mptcp" ||
                         name == "udplite";
      Error(item(), "unknown protocol " + Quote(name) + " (expected tcp or udp" +
                        (extra ? "; " + Quote(name) + " sockets are allowed by spec.network.extraProtocols, not per rule"
                               : std::string()) +
                        ")");
      continue;
    }
    if (*flag) {
      int first = 0;
      while (rule.protocols(first) != name) ++first;
      Error(item(),
            "duplicate protocol " + Quote(name) + FirstAt(protocols_field() + "[" + std::to_string(first) + "]"));
    }
    *flag = true;
  }
}

void Validator::Rule(const cordon::v1::EgressRule& rule, const FieldName& field, CompiledRule* out) {
  out->name = rule.name();
  if (!rule.host().empty() || Present(field() + ".host")) {
    const std::string host_field = field() + ".host";
    if (!rule.cidr().empty() || Present(field() + ".cidr"))
      Error(host_field, "a rule has host or cidr, not both (write two rules)");
    std::string error;
    if (auto host = NormalizeHostName(rule.host(), &error)) {
      out->host = *host;
    } else {
      Error(host_field, error + " in " + Quoted(rule.host()));  // display-safe: the name may be invalid UTF-8
      out->host = "invalid";  // never in the image either way
    }
    out->allow_private = rule.allow_private();
    const Diagnostic at = parsed_.At(host_field, "");
    out->where = at.file + (at.line > 0 ? ":" + std::to_string(at.line) + ":" + std::to_string(at.column) : "") + ": " +
                 host_field;
    Ports(rule, field, out);
    Protocols(rule, field, out);
    return;
  }
  if (Present(field() + ".allowPrivate"))
    Error(field() + ".allowPrivate", "only for host rules (a cidr rule allows exactly its addresses)");
  if (rule.cidr().empty()) {
    Error(field() + ".cidr", "required: the destination address or CIDR (e.g. 10.0.0.0/8, 2001:db8::/32)");
  } else {
    std::string error;
    auto prefix = ParsePrefix(rule.cidr(), &error);
    if (prefix) {
      out->prefix = *prefix;
    } else {
      Error(field() + ".cidr", error);
    }
  }
  Ports(rule, field, out);
  Protocols(rule, field, out);
}

constexpr int kMaxDnsUpstreams = 8;

void Validator::Dns(const cordon::v1::Dns& dns, CompiledPolicy* out) {
  if (dns.upstream_size() == 0) {
    if (Present("spec.network.dns.upstream"))
      Error("spec.network.dns.upstream", "empty list (omit it to use the host's resolv.conf nameservers)");
    return;
  }
  if (dns.upstream_size() > kMaxDnsUpstreams) {
    Error("spec.network.dns.upstream", "too many upstreams: " + std::to_string(dns.upstream_size()) +
                                           " (the limit is " + std::to_string(kMaxDnsUpstreams) + ")");
    return;
  }
  for (int i = 0; i < dns.upstream_size(); ++i) {
    const std::string field = "spec.network.dns.upstream[" + std::to_string(i) + "]";
    std::string error;
    auto upstream = ParseDnsUpstream(dns.upstream(i), &error);
    if (!upstream) {
      Error(field, error);
      continue;
    }
    if (std::find(out->dns_upstreams.begin(), out->dns_upstreams.end(), *upstream) != out->dns_upstreams.end()) {
      Error(field, "duplicate upstream " + upstream->ToString());
      continue;
    }
    out->dns_upstreams.push_back(*upstream);
  }
}

// "c 10:200 rw", "b 7:* r", "c 1:11" (access rw).
// The kinds whose refusals onViolation: contain can count: those of the
// sandbox's own programs (bpf/net/), then those BPF LSM or cordon run's
// Landlock and seccomp filter refuse (counted by the program that refuses or,
// for cordon run's layers, by the detect object that reports the refusal:
// bpf/lib/lsm_common.bpf.h cordon_lsm_violation). Not counted: detected
// violations, credential.read (an outsider's read, reported to the owner).
constexpr size_t kContainKindsOfCgroupPrograms = 8;
constexpr std::pair<const char*, uint32_t> kContainKinds[] = {
    {"net.connect", CORDON_EV_NET_CONNECT},
    {"net.sendmsg", CORDON_EV_NET_SENDMSG},
    {"net.socket", CORDON_EV_NET_SOCKET},
    {"net.unix", CORDON_EV_NET_UNIX},
    {"net.bind", CORDON_EV_NET_BIND},
    {"net.sockopt", CORDON_EV_NET_SOCKOPT},
    {"tamper.device", CORDON_EV_TAMPER_DEVICE},
    {"tamper.sysctl", CORDON_EV_TAMPER_SYSCTL},
    {"file.open", CORDON_EV_FILE_OPEN},
    {"file.create", CORDON_EV_FILE_CREATE},
    {"file.unlink", CORDON_EV_FILE_UNLINK},
    {"file.rename", CORDON_EV_FILE_RENAME},
    {"file.link", CORDON_EV_FILE_LINK},
    {"file.exec", CORDON_EV_FILE_EXEC},
    {"file.mmap_exec", CORDON_EV_FILE_MMAP_EXEC},
    {"file.setattr", CORDON_EV_FILE_SETATTR},
    {"file.ioctl", CORDON_EV_FILE_IOCTL},
    {"tamper.bpf", CORDON_EV_TAMPER_BPF},
    {"tamper.signal", CORDON_EV_TAMPER_SIGNAL},
    {"tamper.ptrace", CORDON_EV_TAMPER_PTRACE},
    {"tamper.mount", CORDON_EV_TAMPER_MOUNT},
    {"tamper.module", CORDON_EV_TAMPER_MODULE},
    {"tamper.userns", CORDON_EV_TAMPER_USERNS},
    {"tamper.clock", CORDON_EV_TAMPER_CLOCK},
    {"tamper.reboot", CORDON_EV_TAMPER_REBOOT},
    {"tamper.cgroup", CORDON_EV_TAMPER_CGROUP},
    {"tamper.capability", CORDON_EV_TAMPER_CAPABILITY},
    {"tamper.io_uring", CORDON_EV_TAMPER_IO_URING},
    {"tamper.terminal", CORDON_EV_TAMPER_TERMINAL},
    {"tamper.sched", CORDON_EV_TAMPER_SCHED},
    {"tamper.rlimit", CORDON_EV_TAMPER_RLIMIT},
    {"tamper.syslog", CORDON_EV_TAMPER_SYSLOG},
    {"tamper.notify", CORDON_EV_TAMPER_NOTIFY},
    {"tamper.keyring", CORDON_EV_TAMPER_KEYRING},
    {"tamper.ipc", CORDON_EV_TAMPER_IPC},
    {"tamper.acct", CORDON_EV_TAMPER_ACCT},
    // Refused by cordon run's seccomp filter only.
    {"file.memfd", CORDON_EV_FILE_MEMFD},
    {"tamper.personality", CORDON_EV_TAMPER_PERSONALITY},
    {"tamper.abi", CORDON_EV_TAMPER_ABI},
};
static_assert(kContainKinds[kContainKindsOfCgroupPrograms - 1].second == CORDON_EV_TAMPER_SYSCTL,
              "the cgroup programs' kinds come first");

void Validator::ContainOn(const cordon::v1::ContainOn& contain, CompiledPolicy* out) {
  constexpr uint32_t kMaxAfter = 1000000;
  if (Present("spec.contain.after") && (contain.after() == 0 || contain.after() > kMaxAfter))
    Error("spec.contain.after",
          "must be 1.." + std::to_string(kMaxAfter) + " refusals, not " + std::to_string(contain.after()));
  out->contain_after = contain.after() ? std::min(contain.after(), kMaxAfter) : 1;
  if (contain.kinds().empty()) {
    for (const auto& [name, kind] : kContainKinds) out->contain_kinds |= 1ULL << kind;
    return;
  }
  std::vector<std::string> known;
  for (const auto& [name, kind] : kContainKinds) known.push_back(name);
  for (int i = 0; i < contain.kinds_size(); ++i) {
    const std::string& want = contain.kinds(i);
    const std::string field = "spec.contain.kinds[" + std::to_string(i) + "]";
    uint64_t bits = 0;
    for (const auto& [name, kind] : kContainKinds)
      if (want == name || (!want.empty() && want.back() == '.' && std::string(name).rfind(want, 0) == 0))
        bits |= 1ULL << kind;
    if (!bits) {
      std::string list;
      for (const auto& name : known) list += (list.empty() ? "" : ", ") + name;
      Error(field, "no refusal of kind " + Quote(want) + " can contain the sandbox (kinds: " + list +
                       ", or a family such as \"net.\")");
    } else if ((out->contain_kinds & bits) == bits) {
      Error(field, "repeats " + Quote(want));
    }
    out->contain_kinds |= bits;
  }
}

void Validator::Devices(const cordon::v1::Spec& spec, CompiledPolicy* out) {
  if (spec.devices_size() == 0) return;  // omitted or []: the safe set only
  if (static_cast<size_t>(spec.devices_size()) > kMaxPolicyDevices) {
    Error("spec.devices", "too many devices: " + std::to_string(spec.devices_size()) + " (the limit is " +
                              std::to_string(kMaxPolicyDevices) + ")");
    return;
  }
  std::map<std::pair<char, std::pair<uint32_t, uint32_t>>, int> seen;
  for (int i = 0; i < spec.devices_size(); ++i) {
    const std::string field = "spec.devices[" + std::to_string(i) + "]";
    const std::string& text = spec.devices(i);
    const std::string usage = " (expected TYPE MAJOR:MINOR [ACCESS], e.g. \"c 10:200 rw\": TYPE c or b, MINOR a "
                              "number or *, ACCESS from r, w, m)";
    std::istringstream in(text);
    std::string type, numbers, access, extra;
    in >> type >> numbers >> access >> extra;
    CompiledPolicy::DeviceAllow d;
    auto number = [](const std::string& t, uint32_t max, uint32_t* v) {
      if (t.empty() || t.size() > 7 || t.find_first_not_of("0123456789") != std::string::npos) return false;
      *v = static_cast<uint32_t>(std::stoul(t));
      return *v <= max;
    };
    const size_t colon = numbers.find(':');
    if ((type != "c" && type != "b") || colon == std::string::npos || !extra.empty()) {
      Error(field, "invalid device " + Quote(text) + usage);
      continue;
    }
    d.type = type[0];
    const std::string major = numbers.substr(0, colon), minor = numbers.substr(colon + 1);
    if (!number(major, 4095, &d.major)) {
      Error(field, "invalid major number " + Quote(major) + " in " + Quote(text) + " (0-4095)");
      continue;
    }
    if (minor == "*") {
      d.minor = CompiledPolicy::DeviceAllow::kAnyMinor;
    } else if (!number(minor, 1048575, &d.minor)) {
      Error(field, "invalid minor number " + Quote(minor) + " in " + Quote(text) + " (0-1048575 or *)");
      continue;
    }
    if (access.empty()) access = "rw";
    bool ok = true;
    for (char c : access) {
      const uint32_t bit = c == 'r' ? 2 : c == 'w' ? 4 : c == 'm' ? 1 : 0;
      if (!bit || (d.access & bit)) {
        Error(field, "invalid access " + Quote(access) + " in " + Quote(text) + " (letters from r, w, m, each once)");
        ok = false;
        break;
      }
      d.access |= bit;
    }
    if (!ok) continue;
    auto [it, inserted] = seen.emplace(std::make_pair(d.type, std::make_pair(d.major, d.minor)), i);
    if (!inserted) {
      Error(field, "duplicate device " + Quote(text) + FirstAt("spec.devices[" + std::to_string(it->second) + "]"));
      continue;
    }
    out->devices.push_back(d);
  }
}

void Validator::Listen(const cordon::v1::Network& network, CompiledPolicy* out) {
  constexpr int kMaxListenRules = 1000;
  if (network.listen_size() > kMaxListenRules) {
    Error("spec.network.listen", "too many listen rules: " + std::to_string(network.listen_size()) +
                                     " (the limit is " + std::to_string(kMaxListenRules) + ")");
    return;
  }
  out->listen_rules.resize(static_cast<size_t>(network.listen_size()));
  // A rule equal to an earlier one (address, ports, protocols) is a mistake.
  std::map<std::tuple<std::string, std::vector<uint32_t>, bool, bool>, int> seen;
  for (int i = 0; i < network.listen_size(); ++i) {
    const FieldName field = [i] { return "spec.network.listen[" + std::to_string(i) + "]"; };
    const cordon::v1::ListenRule& rule = network.listen(i);
    CompiledRule& compiled = out->listen_rules[static_cast<size_t>(i)];
    bool ok = true;
    if (rule.address().empty()) {
      if (Present(field() + ".address")) {
        Error(field() + ".address", "empty address (omit 'address' to allow any address)");
        ok = false;
      }
      compiled.prefix = Prefix{};  // ::/0
    } else {
      std::string error;
      auto prefix = ParsePrefix(rule.address(), &error);
      if (prefix) {
        compiled.prefix = *prefix;
      } else {
        Error(field() + ".address", error);
        ok = false;
      }
    }
    const size_t before = diags_->size();
    Ports(rule, field, &compiled, /*listen=*/true);
    Protocols(rule, field, &compiled);
    if (!ok || diags_->size() != before) continue;
    std::vector<uint32_t> ports;
    for (const PortRange& r : compiled.ports) ports.push_back(uint32_t{r.lo} << 16 | r.hi);
    std::sort(ports.begin(), ports.end());
    std::string addr(reinterpret_cast<const char*>(compiled.prefix.addr.data()), compiled.prefix.addr.size());
    addr += std::to_string(compiled.prefix.length);
    auto [it, inserted] = seen.emplace(std::make_tuple(addr, ports, compiled.tcp, compiled.udp), i);
    if (!inserted)
      Error(field(), "duplicate listen rule (same address, ports and protocols as spec.network.listen[" +
                         std::to_string(it->second) + "]" + FirstAt("spec.network.listen[" +
                                                                    std::to_string(it->second) + "]") + ")");
  }
}

constexpr const char* kCapabilityNames[] = {
    "chown",          "dac_override",   "dac_read_search", "fowner",          "fsetid",        "kill",
    "setgid",         "setuid",         "setpcap",         "linux_immutable", "net_bind_service",
    "net_broadcast",  "net_admin",      "net_raw",         "ipc_lock",        "ipc_owner",     "sys_module",
    "sys_rawio",      "sys_chroot",     "sys_ptrace",      "sys_pacct",       "sys_admin",     "sys_boot",
    "sys_nice",       "sys_resource",   "sys_time",        "sys_tty_config",  "mknod",         "lease",
    "audit_write",    "audit_control",  "setfcap",         "mac_override",    "mac_admin",     "syslog",
    "wake_alarm",     "block_suspend",  "audit_read",      "perfmon",         "bpf",           "checkpoint_restore",
};
static_assert(sizeof kCapabilityNames / sizeof kCapabilityNames[0] == 41);

bool ValidEnvName(const std::string& name) {
  if (name.empty() || name.size() > 255) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

// "dynamic", "root", a POSIX-ish user name, or UID[:GID] (decimal, below 2^31).
bool ValidRunAsSpelling(const std::string& v) {
  if (v == "dynamic" || v == "root") return true;
  auto is_number = [](std::string_view s) {
    if (s.empty() || s.size() > 10) return false;
    for (char c : s)
      if (c < '0' || c > '9') return false;
    return std::stoull(std::string(s)) < (1ull << 31);
  };
  size_t colon = v.find(':');
  if (colon != std::string::npos) return is_number(std::string_view(v).substr(0, colon)) &&
                                         is_number(std::string_view(v).substr(colon + 1));
  if (is_number(v)) return true;
  if (v.empty() || v.size() > 32) return false;
  for (size_t i = 0; i < v.size(); ++i) {
    char c = v[i];
    bool ok = (c >= 'a' && c <= 'z') || c == '_' || (i > 0 && ((c >= '0' && c <= '9') || c == '-' || c == '.'));
    if (!ok) return false;
  }
  return true;
}

void Validator::Identity(const cordon::v1::Spec& spec, CompiledPolicy* out) {
  if (!spec.run_as().empty()) {
    if (!ValidRunAsSpelling(spec.run_as()))
      Error("spec.runAs", "invalid identity " + Quote(spec.run_as()) +
                              " (expected dynamic, root, a user name, or UID[:GID] with numbers below 2^31)");
    else
      out->run_as = spec.run_as();
  }
  std::map<int, int> first;
  for (int i = 0; i < spec.capabilities_size(); ++i) {
    const std::string item = "spec.capabilities[" + std::to_string(i) + "]";
    int n = CapabilityNumber(spec.capabilities(i));
    if (n < 0) {
      Error(item, "unknown capability " + Quote(spec.capabilities(i)) +
                      " (use a name from capabilities(7), e.g. net_bind_service)");
      continue;
    }
    auto [it, inserted] = first.emplace(n, i);
    if (!inserted) {
      Error(item, "duplicate capability " + Quote(spec.capabilities(i)) +
                      FirstAt("spec.capabilities[" + std::to_string(it->second) + "]"));
      continue;
    }
    out->capabilities |= 1ull << n;
  }
  std::map<std::string, int> names;
  for (int i = 0; i < spec.environment_size(); ++i) {
    const std::string item = "spec.environment[" + std::to_string(i) + "]";
    const std::string& entry = spec.environment(i);
    size_t eq = entry.find('=');
    CompiledPolicy::EnvEntry env;
    env.name = entry.substr(0, eq);
    env.pass_through = eq == std::string::npos;
    if (!env.pass_through) env.value = entry.substr(eq + 1);
    if (!ValidEnvName(env.name)) {
      Error(item, "invalid variable name " + Quote(env.name) + " (expected NAME or NAME=VALUE, NAME from A-Z a-z 0-9 _)");
      continue;
    }
    if (env.name.rfind("CORDON_", 0) == 0) {
      Error(item, "variable " + Quote(env.name) + ": CORDON_* variables never reach the workload");
      continue;
    }
    if (env.value.find('\0') != std::string::npos) {
      Error(item, "value of " + Quote(env.name) + " contains a NUL byte");
      continue;
    }
    auto [it, inserted] = names.emplace(env.name, i);
    if (!inserted) {
      Error(item, "duplicate variable " + Quote(env.name) +
                      FirstAt("spec.environment[" + std::to_string(it->second) + "]"));
      continue;
    }
    out->environment.push_back(std::move(env));
  }
}

void Validator::Files(const cordon::v1::Files& files, CompiledPolicy* out) {
  FileRuleSet rules;
  const size_t explicit_count =
      static_cast<size_t>(files.read_size()) + static_cast<size_t>(files.write_size()) +
      static_cast<size_t>(files.exec_size());
  if (explicit_count > kMaxFileRules) {
    Error("spec.files", "too many paths: " + std::to_string(explicit_count) + " in read, write and exec (the limit is " +
                            std::to_string(kMaxFileRules) + ")");
    return;
  }
  struct List {
    const char* field;
    const google::protobuf::RepeatedPtrField<std::string>* paths;
    uint32_t rights;
  };
  const List lists[] = {
      {"spec.files.read", &files.read(), kFileRightsRead},
      {"spec.files.write", &files.write(), kFileRightsWrite},
      {"spec.files.exec", &files.exec(), kFileRightsExec},
  };
  for (const List& list : lists) {
    std::unordered_map<std::string, int> first;  // normalized path -> index of its first mention in this list
    for (int i = 0; i < list.paths->size(); ++i) {
      const std::string item = std::string(list.field) + "[" + std::to_string(i) + "]";
      std::string path, error;
      if (!NormalizeFilePath((*list.paths)[i], &path, &error)) {
        Error(item, error);
        continue;
      }
      if (path == kVarStateDir || path.rfind(std::string(kVarStateDir) + "/", 0) == 0) {
        Error(item, Quote(path) + " is cordon's own state (" + kVarStateDir +
                        ": signing keys, kept policy texts): no sandbox is granted it, whatever its policy");
        continue;
      }
      auto [it, inserted] = first.emplace(path, i);
      if (!inserted) {
        // Name the first mention: "/a/" and "//a" are "/a" too.
        const std::string short_name = std::string(list.field).substr(std::string("spec.files.").size());
        const int line = LineOf(std::string(list.field) + "[" + std::to_string(it->second) + "]");
        Error(item, "duplicate path " + Quote(path) + " (first as " + short_name + "[" + std::to_string(it->second) +
                        "]" + (line > 0 ? ", line " + std::to_string(line) : "") + ")");
        continue;
      }
      std::string where = parsed_.At(item, "").ToString();
      while (!where.empty() && (where.back() == ' ' || where.back() == ':')) where.pop_back();
      rules.Add(path, list.rights, true, item, where);
    }
  }
  std::map<std::string, int> included;  // profile name -> index of its first mention
  for (int i = 0; i < files.include_size(); ++i) {
    const std::string item = "spec.files.include[" + std::to_string(i) + "]";
    const std::string& name = files.include(i);
    const FileProfile* profile = FindProfile(name);
    if (!profile) {
      std::string known;
      for (const FileProfile& p : kFileProfiles) known += std::string(known.empty() ? "" : ", ") + p.name;
      Error(item, "unknown profile " + Quote(name) + " (expected one of: " + known + ")");
      continue;
    }
    auto [it, inserted] = included.emplace(name, i);
    if (!inserted) {
      Error(item, "duplicate profile " + Quote(name) +
                      FirstAt("spec.files.include[" + std::to_string(it->second) + "]"));
      continue;
    }
    rules.AddProfile(*profile, &out->lsm_flags);
  }
  if (files.allow_memfd_exec()) out->lsm_flags |= CORDON_LSM_F_MEMFD_EXEC;
  out->file_rules = rules.Take();
}

bool Validator::Run(CompiledPolicy* out) {
  const size_t diags_before = diags_->size();
  const cordon::v1::SandboxPolicy& policy = parsed_.proto;

  if (policy.api_version().empty()) {
    Error("apiVersion", std::string("required: apiVersion: ") + kApiVersion);
  } else if (policy.api_version() != kApiVersion) {
    Error("apiVersion",
          "unsupported apiVersion " + Quote(policy.api_version()) + " (expected '" + kApiVersion + "')");
  }
  if (policy.kind().empty()) {
    Error("kind", std::string("required: kind: ") + kKind);
  } else if (policy.kind() != kKind) {
    Error("kind", "unsupported kind " + Quote(policy.kind()) + " (expected '" + kKind + "')");
  }

  const std::string& name = policy.metadata().name();
  if (name.empty()) {
    Error("metadata.name", "required: a policy name of 1-63 characters from A-Z a-z 0-9 . _ -");
  } else if (!ValidName(name)) {
    Error("metadata.name", "invalid name " + Quote(name) + " (use 1-63 characters from A-Z a-z 0-9 . _ -)");
  }
  out->name = name;

  const std::string& mode = policy.spec().mode();
  if (mode.empty() || mode == "enforce") {
    out->mode = CORDON_MODE_ENFORCE;
  } else if (mode == "audit") {
    out->mode = CORDON_MODE_AUDIT;
  } else {
    Error("spec.mode", "unknown mode " + Quote(mode) + " (expected enforce or audit)");
  }

  const cordon::v1::Network& network = policy.spec().network();
  // Presence matters here: an omitted list means the default, `families: []` means none.
  out->families = Present("spec.network.families")
                      ? NamedBits(network.families(), "spec.network.families", "family", kFamilies)
                      : kDefaultFamilies;
  out->sock_protos =
      NamedBits(network.extra_protocols(), "spec.network.extraProtocols", "extra protocol", kSockProtos);
  if (network.abstract_unix()) out->lsm_flags |= CORDON_LSM_F_ABSTRACT_UNIX;
  if (policy.spec().allow_user_namespaces()) out->lsm_flags |= CORDON_LSM_F_USERNS;
  const std::string& on_violation = policy.spec().on_violation();
  if (on_violation == "kill") {
    out->lsm_flags |= CORDON_LSM_F_KILL;
  } else if (on_violation == "contain") {
    ContainOn(policy.spec().contain(), out);
  } else if (!on_violation.empty() && on_violation != "report") {
    Error("spec.onViolation", "unknown action " + Quote(on_violation) + " (expected report, kill or contain)");
  }
  if (on_violation != "contain" && Present("spec.contain"))
    Error("spec.contain", "takes effect only with onViolation: contain");

  if (policy.spec().allow_keyrings()) out->lsm_flags |= CORDON_LSM_F_KEYRINGS;
  Identity(policy.spec(), out);
  Devices(policy.spec(), out);
  CompileResources(parsed_, &out->resources, diags_);
  CompileCredentials(parsed_, &out->credentials, diags_);
  CompileQuiet(parsed_, &out->quiet, diags_);

  // `files: {}` is present (deny every file access); `files:` (null) and no key are absent.
  out->has_files = policy.spec().has_files() || Present("spec.files");
  if (out->has_files) Files(policy.spec().files(), out);

  if (static_cast<size_t>(network.egress_size()) > kMaxEgressRules) {
    Error("spec.network.egress", "too many egress rules: " + std::to_string(network.egress_size()) +
                                     " (the limit is " + std::to_string(kMaxEgressRules) + ")");
    return false;
  }
  out->rules.resize(static_cast<size_t>(network.egress_size()));
  std::unordered_map<std::string, int> names;  // rule name -> index of first use
  for (int i = 0; i < network.egress_size(); ++i) {
    const FieldName field = [i] { return "spec.network.egress[" + std::to_string(i) + "]"; };
    const cordon::v1::EgressRule& rule = network.egress(i);
    Rule(rule, field, &out->rules[static_cast<size_t>(i)]);
    if (!rule.name().empty()) {
      auto [it, inserted] = names.emplace(rule.name(), i);
      if (!inserted) {
        Error(field() + ".name", "duplicate rule name " + Quote(rule.name()) +
                                   FirstAt("spec.network.egress[" + std::to_string(it->second) + "].name"));
      }
    }
  }
  Listen(network, out);
  Dns(network.dns(), out);
  // Checks run field by field; present the findings in file order.
  std::stable_sort(diags_->begin() + static_cast<std::ptrdiff_t>(diags_before), diags_->end(),
                   [](const Diagnostic& a, const Diagnostic& b) {
                     return a.line != b.line ? a.line < b.line : a.column < b.column;
                   });
  return diags_->size() == diags_before;
}

// ---- Map images -------------------------------------------------------------

// A port range with the rule it is attributed to (1-based).
struct Segment {
  uint32_t lo;
  uint32_t hi;  // inclusive
  uint32_t rule;
};
using Segments = std::vector<Segment>;  // sorted, disjoint

// One protocol's share of a prefix's folded allowance.
struct ProtoPorts {
  Segments segments;              // with attribution, for port_entries' rule
  std::vector<uint32_t> content;  // merged ranges as (lo << 16 | hi), the identity of the set
};

struct Allowance {
  ProtoPorts tcp, udp;
  bool IsAll() const {
    return tcp.content.size() == 1 && tcp.content[0] == kAllPorts && udp.content.size() == 1 &&
           udp.content[0] == kAllPorts;
  }
};

struct Candidate {
  uint32_t lo, hi, rule;
  uint64_t priority;  // lower wins where candidates overlap
};

// Resolves overlapping candidates into disjoint segments, each attributed to
// its highest-priority candidate. Sweep with a heap: O(m log m).
Segments Flatten(std::vector<Candidate> candidates) {
  Segments out;
  if (candidates.empty()) return out;
  std::vector<uint32_t> points;
  points.reserve(candidates.size() * 2);
  for (const auto& c : candidates) {
    points.push_back(c.lo);
    points.push_back(c.hi + 1);
  }
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end()), points.end());
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) { return a.lo < b.lo; });
  auto worse = [](const Candidate* a, const Candidate* b) { return a->priority > b->priority; };
  std::priority_queue<const Candidate*, std::vector<const Candidate*>, decltype(worse)> active(worse);
  size_t next = 0;
  for (size_t p = 0; p + 1 < points.size(); ++p) {
    const uint32_t x = points[p];
    while (next < candidates.size() && candidates[next].lo <= x) active.push(&candidates[next++]);
    while (!active.empty() && active.top()->hi < x) active.pop();
    if (active.empty()) continue;
    const uint32_t end = points[p + 1] - 1;
    const uint32_t rule = active.top()->rule;
    if (!out.empty() && out.back().hi + 1 == x && out.back().rule == rule) {
      out.back().hi = end;
    } else {
      out.push_back({x, end, rule});
    }
  }
  return out;
}

std::vector<uint32_t> Merge(const Segments& segments) {
  std::vector<uint32_t> out;
  uint32_t lo = 0, hi = 0;
  bool open = false;
  for (const auto& s : segments) {
    if (open && s.lo == hi + 1) {
      hi = s.hi;
      continue;
    }
    if (open) out.push_back(lo << 16 | hi);
    lo = s.lo;
    hi = s.hi;
    open = true;
  }
  if (open) out.push_back(lo << 16 | hi);
  return out;
}

bool Covers(const std::vector<uint32_t>& content, uint32_t lo, uint32_t hi) {
  // The last merged range starting at or before lo must reach hi.
  auto it = std::upper_bound(content.begin(), content.end(), lo, [](uint32_t v, uint32_t packed) {
    return v < (packed >> 16);
  });
  if (it == content.begin()) return false;
  --it;
  return (*it & 0xffff) >= hi;
}

// Emits each attributed segment as the minimal list of aligned port blocks
// (at most 30 for a 16-bit range), so every entry's rule allows every port
// of its block. Segments are split only where attribution changes.
void AppendPortEntries(uint32_t set_id, uint8_t proto, const ProtoPorts& ports, CompiledPolicy* out) {
  for (const Segment& segment : ports.segments) {
    uint32_t lo = segment.lo;
    // At each step the largest block that starts at lo (aligned) and does not pass hi.
    while (lo <= segment.hi) {
      uint32_t size = lo == 0 ? 0x10000 : (lo & (~lo + 1));
      while (lo + size - 1 > segment.hi) size >>= 1;
      uint32_t block_bits = 0;
      while ((1u << block_bits) < size) ++block_bits;
      cordon_port_key key{};
      key.prefixlen = 32 + 8 + (16 - block_bits);
      key.port_set[0] = static_cast<__u8>(set_id >> 24);
      key.port_set[1] = static_cast<__u8>(set_id >> 16);
      key.port_set[2] = static_cast<__u8>(set_id >> 8);
      key.port_set[3] = static_cast<__u8>(set_id);
      key.proto = proto;
      key.port[0] = static_cast<__u8>(lo >> 8);
      key.port[1] = static_cast<__u8>(lo);
      cordon_port_value value{};
      value.rule = segment.rule;
      out->port_entries.emplace_back(key, value);
      lo += size;
    }
  }
}

// A rule as the image builder reads it: its prefix as two big-endian words
// (cheap to sort and compare) and its ports. Built in rule order, then sorted
// by prefix, so the walk in prefix order reads memory in order.
struct SortedRule {
  uint64_t high, low;
  int length;
  uint32_t index;         // the rule (0-based)
  uint32_t first, count;  // its ports in ImageBuilder::ports_; count 0: every port
  bool tcp, udp;
  bool SamePrefix(const SortedRule& other) const {
    return high == other.high && low == other.low && length == other.length;
  }
  // As Prefix::Contains: other's prefix is equal or more specific.
  bool Contains(const SortedRule& other) const {
    if (other.length < length) return false;
    auto top_bits_equal = [](uint64_t a, uint64_t b, int bits) {
      return bits <= 0 || ((a ^ b) >> (64 - std::min(bits, 64))) == 0;
    };
    return top_bits_equal(high, other.high, length) && (length <= 64 || top_bits_equal(low, other.low, length - 64));
  }
};

class ImageBuilder {
 public:
  explicit ImageBuilder(CompiledPolicy* out) : out_(out) {}
  bool Build(std::string* error);

 private:
  struct Node {
    SortedRule prefix;
    uint32_t set_id;
    std::shared_ptr<const Allowance> allowance;
  };
  // Folds the rules with exactly this prefix (group) into the parent's allowance.
  Node Fold(std::span<const SortedRule> group, const Node* parent);
  uint32_t SetId(const Allowance& allowance);

  CompiledPolicy* out_;
  std::vector<PortRange> ports_;  // every rule's ports, in rule order
  // Port set ids by (tcp, udp) content; looked up by reference (SetContent).
  using SetKey = std::pair<std::vector<uint32_t>, std::vector<uint32_t>>;
  struct SetContent {
    const std::vector<uint32_t>& tcp;
    const std::vector<uint32_t>& udp;
  };
  struct SetLess {
    using is_transparent = void;
    static std::pair<const std::vector<uint32_t>&, const std::vector<uint32_t>&> Tie(const SetKey& k) {
      return {k.first, k.second};
    }
    static std::pair<const std::vector<uint32_t>&, const std::vector<uint32_t>&> Tie(const SetContent& c) {
      return {c.tcp, c.udp};
    }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return Tie(a) < Tie(b);
    }
  };
  std::map<SetKey, uint32_t, SetLess> set_ids_;
  size_t work_ = 0;
};

uint32_t ImageBuilder::SetId(const Allowance& allowance) {
  if (allowance.IsAll()) return CORDON_PORT_SET_ALL;
  // Most prefixes share a few sets: look up first, copy the content only for a new one.
  const SetContent content{allowance.tcp.content, allowance.udp.content};
  if (auto it = set_ids_.find(content); it != set_ids_.end()) return it->second;
  const auto id = static_cast<uint32_t>(set_ids_.size() + 1);
  set_ids_.emplace(std::make_pair(allowance.tcp.content, allowance.udp.content), id);
  AppendPortEntries(id, kProtoTcp, allowance.tcp, out_);
  AppendPortEntries(id, kProtoUdp, allowance.udp, out_);
  return id;
}

ImageBuilder::Node ImageBuilder::Fold(std::span<const SortedRule> group, const Node* parent) {
  const SortedRule& prefix = group.front();
  if (parent && parent->set_id == CORDON_PORT_SET_ALL) return Node{prefix, parent->set_id, parent->allowance};

  // Own rules outrank inherited ones (they are more specific); among own
  // rules the first in the file wins.
  std::vector<Candidate> tcp, udp;
  for (const SortedRule& rule : group) {
    const uint32_t index = rule.index;
    auto add = [&](uint32_t lo, uint32_t hi) {
      if (rule.tcp) tcp.push_back({lo, hi, index + 1, index});
      if (rule.udp) udp.push_back({lo, hi, index + 1, index});
    };
    if (rule.count == 0) add(0, kAllPorts);
    for (uint32_t i = rule.first; i < rule.first + rule.count; ++i) add(ports_[i].lo, ports_[i].hi);
  }
  if (parent) {
    // Nothing new: share the parent's set (keeps nested rules cheap).
    bool subset = std::all_of(tcp.begin(), tcp.end(),
                              [&](const Candidate& c) { return Covers(parent->allowance->tcp.content, c.lo, c.hi); }) &&
                  std::all_of(udp.begin(), udp.end(),
                              [&](const Candidate& c) { return Covers(parent->allowance->udp.content, c.lo, c.hi); });
    if (subset) return Node{prefix, parent->set_id, parent->allowance};
    constexpr uint64_t kInherited = ~uint64_t{0};
    for (const Segment& s : parent->allowance->tcp.segments) tcp.push_back({s.lo, s.hi, s.rule, kInherited});
    for (const Segment& s : parent->allowance->udp.segments) udp.push_back({s.lo, s.hi, s.rule, kInherited});
  }
  work_ += tcp.size() + udp.size();
  auto allowance = std::make_shared<Allowance>();
  allowance->tcp.segments = Flatten(std::move(tcp));
  allowance->udp.segments = Flatten(std::move(udp));
  allowance->tcp.content = Merge(allowance->tcp.segments);
  allowance->udp.content = Merge(allowance->udp.segments);
  uint32_t set_id = SetId(*allowance);
  return Node{prefix, set_id, std::move(allowance)};
}

bool ImageBuilder::Build(std::string* error) {
  // Rules sorted by prefix (address, then length), then file order.
  const auto& rules = out_->rules;
  std::vector<SortedRule> order;
  order.reserve(rules.size());
  for (uint32_t i = 0; i < rules.size(); ++i) {
    const CompiledRule& rule = rules[i];
    if (!rule.host.empty()) continue;  // a name rule: only the resolver's grants allow anything for it
    uint64_t high = 0, low = 0;
    for (int b = 0; b < 8; ++b) {
      high = high << 8 | rule.prefix.addr[b];
      low = low << 8 | rule.prefix.addr[8 + b];
    }
    order.push_back(SortedRule{high, low, rule.prefix.length, i, static_cast<uint32_t>(ports_.size()),
                               static_cast<uint32_t>(rule.ports.size()), rule.tcp, rule.udp});
    ports_.insert(ports_.end(), rule.ports.begin(), rule.ports.end());
  }
  std::sort(order.begin(), order.end(), [](const SortedRule& a, const SortedRule& b) {
    if (a.high != b.high) return a.high < b.high;
    if (a.low != b.low) return a.low < b.low;
    if (a.length != b.length) return a.length < b.length;
    return a.index < b.index;
  });

  std::vector<Node> ancestors;
  for (size_t start = 0; start < order.size();) {
    size_t end = start;
    while (end < order.size() && order[end].SamePrefix(order[start])) ++end;
    const std::span<const SortedRule> group(order.data() + start, end - start);
    while (!ancestors.empty() && !ancestors.back().prefix.Contains(group.front())) ancestors.pop_back();
    Node node = Fold(group, ancestors.empty() ? nullptr : &ancestors.back());
    if (work_ > kMaxFoldWork) {
      *error = "policy too complex to compile: nested rules with many port ranges multiply (simplify the ports "
               "of rules that contain other rules)";
      return false;
    }
    cordon_addr_key key{};
    key.prefixlen = static_cast<__u32>(group.front().length);
    for (int b = 0; b < 8; ++b) {
      key.addr[b] = static_cast<__u8>(group.front().high >> (56 - 8 * b));
      key.addr[8 + b] = static_cast<__u8>(group.front().low >> (56 - 8 * b));
    }
    cordon_addr_value value{};
    value.port_set = node.set_id;
    value.rule = group.front().index + 1;  // the first rule with exactly this prefix
    out_->addr_entries.emplace_back(key, value);
    ancestors.push_back(std::move(node));
    start = end;
  }
  return true;
}

// Compares the first `bits` bits of a and b.
bool LeadingBitsEqual(const uint8_t* a, const uint8_t* b, uint32_t bits) {
  const uint32_t full = bits / 8;
  if (std::memcmp(a, b, full) != 0) return false;
  const uint32_t rest = bits % 8;
  if (rest == 0) return true;
  const uint8_t mask = static_cast<uint8_t>(0xff << (8 - rest));
  return (a[full] & mask) == (b[full] & mask);
}

}  // namespace

std::string ContainKindsText(uint64_t kinds) {
  std::string out;
  for (const auto& [name, kind] : kContainKinds)
    if (kinds & (1ULL << kind)) out += (out.empty() ? "" : ", ") + std::string(name);
  return out.empty() ? "none" : out;
}

bool ContainKindsNeedBpfLsm(uint64_t kinds) {
  for (size_t i = kContainKindsOfCgroupPrograms; i < std::size(kContainKinds); ++i)
    if (kinds & (1ULL << kContainKinds[i].second)) return true;
  return false;
}

bool Compile(const ParsedPolicy& parsed, CompiledPolicy* out, Diagnostics* diags) {
  CompiledPolicy compiled;
  Validator validator(parsed, diags);
  if (!validator.Run(&compiled)) return false;
  compiled.digest = parsed.digest;
  ImageBuilder builder(&compiled);
  std::string error;
  if (!builder.Build(&error)) {
    diags->push_back(parsed.At("spec.network.egress", error));
    return false;
  }
  if (!compiled.listen_rules.empty()) {
    // The same image form as egress: a bind address is judged like a destination.
    CompiledPolicy listen;
    listen.rules = compiled.listen_rules;
    ImageBuilder listen_builder(&listen);
    if (!listen_builder.Build(&error)) {
      diags->push_back(parsed.At("spec.network.listen", error));
      return false;
    }
    compiled.listen_addr_entries = std::move(listen.addr_entries);
    compiled.listen_port_entries = std::move(listen.port_entries);
  }
  *out = std::move(compiled);
  return true;
}

std::vector<std::string> UnenforcedNameRules(const CompiledPolicy& policy) {
  std::vector<std::string> out;
  for (const CompiledRule& rule : policy.rules)
    if (!rule.host.empty())
      out.push_back(rule.where +
                    ": name rules need cordon's DNS resolver, which cordon run runs for its sandbox and the "
                    "agent for the sandboxes it attaches; without a running agent, cordon attach and update "
                    "cannot enforce them, nor can learn: use cidr rules there, or start the agent");
  return out;
}

std::span<const FileProfile> FileProfiles() { return kFileProfiles; }

bool NormalizeFilePath(std::string_view path, std::string* out, std::string* error) {
  const std::string text(path);
  if (path.empty()) {
    *error = "empty path (expected an absolute path such as /work/out)";
    return false;
  }
  for (size_t i = 0; i < path.size(); ++i) {
    const auto c = static_cast<unsigned char>(path[i]);
    if (c == 0) {
      *error = "path contains a NUL byte (at byte " + std::to_string(i) + ")";
      return false;
    }
    if (c < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", c);
      *error = "path contains a control character (" + std::string(hex) + " at byte " + std::to_string(i) + ")";
      return false;
    }
  }
  if (path.size() > kMaxFilePathBytes) {
    *error = "path is too long: " + std::to_string(path.size()) + " bytes (the limit is " +
             std::to_string(kMaxFilePathBytes) + ")";
    return false;
  }
  if (path[0] != '/') {
    *error = "relative path " + Quote(text) + " (paths must be absolute, starting with /" +
             (path[0] == '~' ? "; '~' is not expanded" : "") + ")";
    return false;
  }
  std::string normalized;
  normalized.reserve(path.size());
  size_t start = 0;
  while (start < path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view component = path.substr(start, end - start);
    start = end + 1;
    if (component.empty() || component == ".") continue;
    if (component == "..") {
      *error = "'..' in path " + Quote(text) +
               " (write the path without '..': the loader follows symlinks, so '..' is ambiguous)";
      return false;
    }
    normalized += '/';
    normalized += component;
  }
  if (normalized.empty()) normalized = "/";
  *out = std::move(normalized);
  return true;
}

CompiledPolicy DefaultPolicy() {
  CompiledPolicy policy;
  policy.name = "default";
  policy.digest = "builtin:default";
  policy.mode = CORDON_MODE_ENFORCE;
  policy.families = kDefaultFamilies;
  policy.sock_protos = 0;
  policy.has_files = true;
  FileRuleSet rules;
  for (const char* name : {"runtime-minimal", "shell", "python3"}) {
    rules.AddProfile(*FindProfile(name), &policy.lsm_flags);
  }
  policy.file_rules = rules.Take();
  return policy;
}

const char* DefaultPolicyYaml() {
  return R"(# cordon's built-in default policy: sockets of the common families may be
# created, but no connection or datagram may leave the sandbox (loopback
# included). Files: the sandbox may run shell scripts and python3 and read
# what they need to start (shared libraries, locale, time zone and name
# service configuration); it may write nothing but /dev/null, /dev/tty and
# /dev/full. Copy it as a starting point and add egress rules and paths.
apiVersion: cordon/v1
kind: SandboxPolicy
metadata:
  name: default
  description: No network egress; runs shell and python3; reads their runtime files; writes nothing.
spec:
  mode: enforce
  allowUserNamespaces: false
  network:
    families: [unix, inet, inet6]
    egress: []
    abstractUnix: false
  files:
    include: [runtime-minimal, shell, python3]
    read: []
    write: []
    exec: []
    allowMemfdExec: false
)";
}

bool EvaluateImage(const CompiledPolicy& policy, const std::array<uint8_t, 16>& addr, uint16_t port, uint8_t proto,
                   uint32_t* rule) {
  const cordon_addr_value* best = nullptr;
  uint32_t best_length = 0;
  for (const auto& [key, value] : policy.addr_entries) {
    if (key.prefixlen > CORDON_ADDR_MAX_PREFIX || (best && key.prefixlen <= best_length)) continue;
    if (LeadingBitsEqual(key.addr, addr.data(), key.prefixlen)) {
      best = &value;
      best_length = key.prefixlen;
    }
  }
  if (!best) return false;
  if (best->port_set == CORDON_PORT_SET_ALL) {
    // Every port of tcp and udp, as the BPF matcher decides it.
    if (proto != kProtoTcp && proto != kProtoUdp) return false;
    if (rule) *rule = best->rule;
    return true;
  }
  // The key's data as the BPF program builds it: port_set, proto, port (big endian).
  const uint8_t probe[7] = {static_cast<uint8_t>(best->port_set >> 24), static_cast<uint8_t>(best->port_set >> 16),
                            static_cast<uint8_t>(best->port_set >> 8),  static_cast<uint8_t>(best->port_set),
                            proto, static_cast<uint8_t>(port >> 8), static_cast<uint8_t>(port)};
  const cordon_port_value* match = nullptr;
  uint32_t match_length = 0;
  for (const auto& [key, value] : policy.port_entries) {
    if (key.prefixlen > CORDON_PORT_KEY_BITS || (match && key.prefixlen <= match_length)) continue;
    const uint8_t data[7] = {key.port_set[0], key.port_set[1], key.port_set[2], key.port_set[3],
                             key.proto,       key.port[0],     key.port[1]};
    if (LeadingBitsEqual(data, probe, key.prefixlen)) {
      match = &value;
      match_length = key.prefixlen;
    }
  }
  if (!match) return false;
  if (rule) *rule = match->rule;
  return true;
}

bool EvaluateRules(const CompiledPolicy& policy, const std::array<uint8_t, 16>& addr, uint16_t port, uint8_t proto) {
  for (const CompiledRule& rule : policy.rules) {
    if (!rule.host.empty() || !rule.prefix.Contains(addr)) continue;
    if (!(proto == kProtoTcp && rule.tcp) && !(proto == kProtoUdp && rule.udp)) continue;
    if (rule.ports.empty()) return true;
    for (const PortRange& range : rule.ports) {
      if (port >= range.lo && port <= range.hi) return true;
    }
  }
  return false;
}

bool ValidRunAs(const std::string& run_as) { return ValidRunAsSpelling(run_as); }

std::span<const char* const> CapabilityNames() { return kCapabilityNames; }

int CapabilityNumber(std::string_view name) {
  std::string lower;
  for (char c : name) lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  if (lower.rfind("cap_", 0) == 0) lower.erase(0, 4);
  for (size_t i = 0; i < std::size(kCapabilityNames); ++i)
    if (lower == kCapabilityNames[i]) return static_cast<int>(i);
  return -1;
}

std::string CapabilitiesString(uint64_t caps) {
  std::string out;
  for (size_t i = 0; i < std::size(kCapabilityNames); ++i)
    if (caps & (1ull << i)) out += (out.empty() ? "" : ", ") + std::string(kCapabilityNames[i]);
  return out.empty() ? "none" : out;
}

}  // namespace cordon::policy
