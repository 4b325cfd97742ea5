#include "policy/quiet.h"

#include <algorithm>

#include "abi/cordon_event.h"
#include "policy/compiler.h"
#include "util/text.h"

namespace cordon::policy {
namespace {

struct KindEntry {
  uint32_t kind;
  const char* name;
};

constexpr KindEntry kKinds[] = {
    {CORDON_EV_NET_CONNECT, "net.connect"},
    {CORDON_EV_NET_SENDMSG, "net.sendmsg"},
    {CORDON_EV_NET_SOCKET, "net.socket"},
    {CORDON_EV_NET_UNIX, "net.unix"},
    {CORDON_EV_NET_BIND, "net.bind"},
    {CORDON_EV_NET_SOCKOPT, "net.sockopt"},
    {CORDON_EV_FILE_OPEN, "file.open"},
    {CORDON_EV_FILE_CREATE, "file.create"},
    {CORDON_EV_FILE_UNLINK, "file.unlink"},
    {CORDON_EV_FILE_RENAME, "file.rename"},
    {CORDON_EV_FILE_LINK, "file.link"},
    {CORDON_EV_FILE_EXEC, "file.exec"},
    {CORDON_EV_FILE_MMAP_EXEC, "file.mmap_exec"},
    {CORDON_EV_FILE_SETATTR, "file.setattr"},
    {CORDON_EV_FILE_IOCTL, "file.ioctl"},
    {CORDON_EV_FILE_MEMFD, "file.memfd"},
    {CORDON_EV_TAMPER_BPF, "tamper.bpf"},
    {CORDON_EV_TAMPER_SIGNAL, "tamper.signal"},
    {CORDON_EV_TAMPER_PTRACE, "tamper.ptrace"},
    {CORDON_EV_TAMPER_MOUNT, "tamper.mount"},
    {CORDON_EV_TAMPER_MODULE, "tamper.module"},
    {CORDON_EV_TAMPER_USERNS, "tamper.userns"},
    {CORDON_EV_TAMPER_CLOCK, "tamper.clock"},
    {CORDON_EV_TAMPER_REBOOT, "tamper.reboot"},
    {CORDON_EV_TAMPER_CGROUP, "tamper.cgroup"},
    {CORDON_EV_TAMPER_CAPABILITY, "tamper.capability"},
    {CORDON_EV_TAMPER_IO_URING, "tamper.io_uring"},
    {CORDON_EV_TAMPER_TERMINAL, "tamper.terminal"},
    {CORDON_EV_TAMPER_SCHED, "tamper.sched"},
    {CORDON_EV_TAMPER_RLIMIT, "tamper.rlimit"},
    {CORDON_EV_TAMPER_SYSLOG, "tamper.syslog"},
    {CORDON_EV_TAMPER_NOTIFY, "tamper.notify"},
    {CORDON_EV_TAMPER_KEYRING, "tamper.keyring"},
    {CORDON_EV_TAMPER_IPC, "tamper.ipc"},
    {CORDON_EV_TAMPER_ACCT, "tamper.acct"},
    {CORDON_EV_TAMPER_PERSONALITY, "tamper.personality"},
    {CORDON_EV_TAMPER_DEVICE, "tamper.device"},
    {CORDON_EV_TAMPER_SYSCTL, "tamper.sysctl"},
    {CORDON_EV_TAMPER_ABI, "tamper.abi"},
    {CORDON_EV_PROC_COREDUMP, "proc.coredump"},
    {CORDON_EV_CREDENTIAL_READ, "credential.read"},
    {CORDON_EV_RESOURCE_EGRESS, "resource.egress"},
};

constexpr const char* kFamilies[] = {"file", "net", "tamper", "proc"};

// Kinds whose events carry a destination address and port (the net layout).
bool HasIpAddress(std::string_view kind) {
  return kind == "net.connect" || kind == "net.sendmsg" || kind == "net.bind";
}
// Kinds whose events never carry a path.
bool NeverHasPath(std::string_view kind) {
  return kind == "net.connect" || kind == "net.sendmsg" || kind == "net.socket" || kind == "net.sockopt";
}

bool IsFamily(std::string_view kind) {
  return std::find(std::begin(kFamilies), std::end(kFamilies), kind) != std::end(kFamilies);
}

// "/a/b" -> {"", "a", "b"}; "/" -> {""}; "@x/y" -> {"@x", "y"}.
std::vector<std::string_view> Components(std::string_view s) {
  std::vector<std::string_view> out;
  if (s == "/") return {std::string_view()};
  size_t start = 0;
  for (;;) {
    const size_t slash = s.find('/', start);
    out.push_back(s.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return out;
}

// One component: '*' any run of characters, '?' one character.
bool MatchComponent(std::string_view glob, std::string_view text) {
  size_t g = 0, t = 0, star = std::string_view::npos, mark = 0;
  while (t < text.size()) {
    if (g < glob.size() && (glob[g] == '?' || glob[g] == text[t])) {
      ++g, ++t;
    } else if (g < glob.size() && glob[g] == '*') {
      star = g++;
      mark = t;
    } else if (star != std::string_view::npos) {
      g = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (g < glob.size() && glob[g] == '*') ++g;
  return g == glob.size();
}

// A component that names nothing: wildcards only ('*' and '?': "?*" is as
// good as "*" at matching every name).
bool OnlyStars(std::string_view component) {
  return !component.empty() && component.find_first_not_of("*?") == std::string_view::npos;
}

// The components of a glob before its first wildcard: "/usr/lib" for
// "/usr/lib/*/x", "/" for "/*".
std::string LiteralPrefix(const std::string& glob) {
  std::string out;
  for (std::string_view part : Components(glob)) {
    if (part.empty()) continue;  // the root's
    if (part.find_first_of("*?") != std::string_view::npos) break;
    out += "/" + std::string(part);
  }
  return out.empty() ? "/" : out;
}

// Whether `dir` is `path` or a directory above it.
bool Under(const std::string& path, const std::string& dir) {
  if (dir == "/") return true;
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/');
}

// Where the workload may make names: spec.files.write, and the private
// /tmp and /dev/shm of cordon run. A path there, as events carry it (as
// written, where Landlock or the unix hooks report it), may be a symlink
// the workload made to anything: a quiet pattern there would let it dress
// any refusal as an expected one. "" when `glob` matches nothing there.
std::string WritableOverlap(const ParsedPolicy& parsed, const std::string& glob) {
  const std::string literal = LiteralPrefix(glob);
  std::vector<std::string> writable = {"/tmp", "/dev/shm"};
  for (const auto& w : parsed.proto.spec().files().write()) {
    std::string normal, ignored;
    if (NormalizeFilePath(w, &normal, &ignored)) writable.push_back(normal);
  }
  for (const auto& w : writable)
    if (Under(literal, w) || Under(w, literal))
      return (w == "/tmp" || w == "/dev/shm" ? "cordon run's private " : "the write path ") + Quoted(w);
  return "";
}

std::string SpoofableWhy() {
  return ", where the workload may make names: a symlink it made there would match the pattern while pointing "
         "anywhere, so any refusal could pass as expected (quiet a path outside what it may write)";
}

// ::ffff:0:0/96, where IPv4 addresses live in the egress image.
const Prefix& MappedSpace() {
  static const Prefix mapped = [] {
    std::string ignored;
    auto p = ParsePrefix("::ffff:0:0/96", &ignored);
    return p ? *p : Prefix{};
  }();
  return mapped;
}


// Checks a glob's wildcards once its characters are known to be acceptable:
// "**" only as the whole last component, and some component naming something.
bool CheckWildcards(const std::string& glob, std::string* error) {
  const std::vector<std::string_view> parts = Components(glob);
  bool names_something = false;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string_view part = i == 0 && !glob.empty() && glob[0] == '@' ? parts[i].substr(1) : parts[i];
    if (part.find("**") != std::string_view::npos && (part != "**" || i + 1 != parts.size() || i == 0)) {
      *error = "'**' only as the whole last component (/usr/lib/**: everything below /usr/lib) in " + Quoted(glob);
      return false;
    }
    if (i > 0 || glob[0] == '@') names_something = names_something || !OnlyStars(part);
  }
  if (!names_something && glob != "/") {
    *error = Quoted(glob) +
             " names no file or directory, only wildcards: it would quiet every path (name the paths "
             "you expect, such as /usr/bin/rustc)";
    return false;
  }
  return true;
}

// An absolute path glob (spec.quiet[].path, or a unix socket path in
// address), normalized as spec.files paths are.
bool CheckPathGlob(const std::string& text, std::string* out, std::string* error) {
  if (!NormalizeFilePath(text, out, error)) return false;
  if (out->find('\\') != std::string::npos) {
    *error = "a backslash in " + Quoted(text) + " (globs have no escapes: '*', '?' and '**' are the only wildcards)";
    return false;
  }
  return CheckWildcards(*out, error);
}

bool CheckAbstractGlob(const std::string& text, std::string* error) {
  if (text.size() < 2) {
    *error = "'@' without a name (an abstract unix socket is @ and its name)";
    return false;
  }
  if (text.size() > kMaxQuietAbstractBytes) {
    *error = "abstract socket name is too long: " + std::to_string(text.size()) + " bytes (the limit is " +
             std::to_string(kMaxQuietAbstractBytes) + ")";
    return false;
  }
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      *error = "abstract socket name contains a control character (events write them \\xNN: not matchable)";
      return false;
    }
    if (c == '\\') {
      *error = "a backslash in " + Quoted(text) + " (globs have no escapes)";
      return false;
    }
  }
  return CheckWildcards(text, error);
}

// The event's path in normal form: absolute without empty, "." or ".."
// components, or an abstract name ("@...") without "." or ".." components.
bool NormalForm(const std::vector<std::string_view>& parts, bool absolute) {
  for (size_t i = 1; i < parts.size(); ++i) {
    if (parts[i] == "." || parts[i] == "..") return false;
    if (absolute && parts[i].empty()) return false;
  }
  return true;
}

}  // namespace

const char* EventKindName(uint32_t kind) {
  for (const KindEntry& entry : kKinds)
    if (entry.kind == kind) return entry.name;
  return "";
}

bool IsKernelEventKind(std::string_view kind) {
  return std::any_of(std::begin(kKinds), std::end(kKinds), [&](const KindEntry& e) { return kind == e.name; });
}

std::span<const char* const> QuietFamilies() { return kFamilies; }

bool MatchGlob(std::string_view glob, std::string_view path) {
  if (path.empty() || glob.empty() || (path[0] != '/' && path[0] != '@') || glob[0] != path[0]) return false;
  const std::vector<std::string_view> p = Components(path);
  if (!NormalForm(p, path[0] == '/')) return false;
  std::vector<std::string_view> g = Components(glob);
  const bool below = g.size() > 1 && g.back() == "**";
  if (below) {
    g.pop_back();
    if (p.size() <= g.size()) return false;
  } else if (p.size() != g.size()) {
    return false;
  }
  for (size_t i = 0; i < g.size(); ++i)
    if (!MatchComponent(g[i], p[i])) return false;
  return true;
}

void CompileQuiet(const ParsedPolicy& parsed, std::vector<QuietPattern>* out, Diagnostics* diags) {
  const auto& list = parsed.proto.spec().quiet();
  if (static_cast<size_t>(list.size()) > kMaxQuietPatterns) {
    diags->push_back(parsed.At("spec.quiet", "too many patterns: " + std::to_string(list.size()) + " (at most " +
                                                 std::to_string(kMaxQuietPatterns) + ")"));
    return;
  }
  auto present = [&](const std::string& field) { return parsed.positions.Find(field) != nullptr; };
  for (int i = 0; i < list.size(); ++i) {
    const cordon::v1::QuietPattern& q = list.Get(i);
    const std::string base = "spec.quiet[" + std::to_string(i) + "]";
    auto error = [&](const std::string& field, const std::string& message) {
      diags->push_back(parsed.At(field, message));
    };
    const size_t before = diags->size();
    QuietPattern p;
    p.source = q;
    p.origin = base;

    const std::string& kind = q.kind();
    std::string families;
    for (const char* f : kFamilies) families += std::string(families.empty() ? "" : ", ") + f;
    if (kind.empty()) {
      error(present(base + ".kind") ? base + ".kind" : base,
            "required: kind (an event kind such as file.exec or net.connect, or a family: " + families + ")");
    } else if (IsKernelEventKind(kind)) {
      p.kind = kind;
    } else if (IsFamily(kind)) {
      p.kind = kind;
      p.family = true;
    } else if (kind.size() > 2 && kind.compare(kind.size() - 2, 2, ".*") == 0 &&
               IsFamily(kind.substr(0, kind.size() - 2))) {
      error(base + ".kind", "write the family " + Quoted(kind.substr(0, kind.size() - 2)) + " for every " +
                                Quoted(kind) + " kind (kind takes no wildcards)");
    } else {
      error(base + ".kind", "unknown kind " + Quoted(kind) +
                                " (expected an event kind such as file.exec, file.open, net.connect, net.unix, "
                                "tamper.signal, or a family: " +
                                families + ")");
    }

    const bool has_path = !q.path().empty() || present(base + ".path");
    const bool has_address = !q.address().empty() || present(base + ".address");
    if (!has_path && !has_address) {
      error(base,
            "a pattern needs path or address: " + (kind.empty() ? std::string("a kind") : "kind " + Quoted(kind)) +
                " alone would quiet every such event, every attempt to get out included");
    }
    if (has_path) {
      std::string message;
      if (!CheckPathGlob(q.path(), &p.path, &message)) {
        error(base + ".path", message);
      } else if (NeverHasPath(kind)) {
        error(base + ".path", kind + " events carry no path (address names their destination)");
      } else if (std::string writable = WritableOverlap(parsed, p.path); !writable.empty()) {
        error(base + ".path", Quoted(p.path) + " lies in " + writable + SpoofableWhy());
      }
    }
    if (has_address) {
      const std::string& a = q.address();
      std::string message;
      if (a.empty()) {
        error(base + ".address", "empty address (an IP address or CIDR, a unix socket path, or @name)");
      } else if (a[0] == '/' || a[0] == '@') {
        const bool ok = a[0] == '/' ? CheckPathGlob(a, &p.unix_address, &message) : CheckAbstractGlob(a, &message);
        if (!ok) {
          error(base + ".address", message);
        } else if (std::string writable = a[0] == '/' ? WritableOverlap(parsed, p.unix_address) : "";
                   !writable.empty()) {
          error(base + ".address", Quoted(p.unix_address) + " lies in " + writable + SpoofableWhy());
        } else {
          if (a[0] == '@') p.unix_address = a;
          if (!p.kind.empty() && kind != "net.unix" && kind != "net")
            error(base + ".address",
                  "a unix socket address applies to net.unix events, not " + kind + " (kind: net.unix)");
        }
      } else if (auto prefix = ParsePrefix(a, &message); !prefix) {
        error(base + ".address", "address " + Quoted(a) + ": " + message +
                                     " (expected an IP address or CIDR, an absolute unix socket path, or @name)");
      } else if (prefix->length == 0 || (prefix->ipv4 && prefix->length == 96)) {
        error(base + ".address", Quoted(a) +
                                     " is every address: it would quiet every connection (name the "
                                     "addresses you expect)");
      } else if (prefix->ipv4 ? prefix->length < 96 + 8 : prefix->length < 16) {
        error(base + ".address", Quoted(a) + " is too wide to quiet (at most an IPv4 /8 or an IPv6 /16: name the "
                                             "addresses you expect)");
      } else if (!prefix->ipv4 && prefix->length <= 96 && MappedSpace().length == 96 &&
                 prefix->Contains(MappedSpace())) {
        error(base + ".address", Quoted(a) + " holds every IPv4 address (as ::ffff:a.b.c.d): it would quiet every "
                                             "IPv4 connection (name the addresses you expect)");
      } else {
        p.prefix = *prefix;
        if (!p.kind.empty() && !HasIpAddress(kind) && kind != "net")
          error(base + ".address",
                "an IP address applies to net.connect, net.sendmsg and net.bind events, not " + kind);
      }
    }
    if (q.ports_size() > 0 || present(base + ".ports")) {
      if (!has_address || (!q.address().empty() && (q.address()[0] == '/' || q.address()[0] == '@'))) {
        error(base + ".ports", "ports apply to an IP address or CIDR only (give address)");
      } else if (q.ports_size() == 0) {
        error(base + ".ports", "empty list (omit ports for every port)");
      } else if (static_cast<size_t>(q.ports_size()) > kMaxQuietPorts) {
        error(base + ".ports", "too many ports: " + std::to_string(q.ports_size()) + " (at most " +
                                   std::to_string(kMaxQuietPorts) + ")");
      } else {
        for (int j = 0; j < q.ports_size(); ++j) {
          std::string message;
          auto range = ParsePortRange(q.ports(j), &message);
          if (!range)
            error(base + ".ports[" + std::to_string(j) + "]", message);
          else
            p.ports.push_back(*range);
        }
      }
    }
    if (q.description().size() > kMaxQuietDescriptionBytes)
      error(base + ".description", "too long: " + std::to_string(q.description().size()) + " bytes (at most " +
                                       std::to_string(kMaxQuietDescriptionBytes) + ")");
    if (diags->size() == before) out->push_back(std::move(p));
  }
}

int MatchQuiet(std::span<const QuietPattern> patterns, const cordon::v1::AuditEvent& event) {
  // Only refusals: what happened (audited in audit mode, detected, killed)
  // is never expected away, or a quiet pattern would let an action through
  // unalarmed.
  if (patterns.empty() || !IsKernelEventKind(event.kind()) || event.verdict() != "denied") return -1;
  const std::string& kind = event.kind();
  std::optional<Prefix> address;  // the event's, parsed at most once
  bool address_parsed = false;
  for (size_t i = 0; i < patterns.size(); ++i) {
    const QuietPattern& p = patterns[i];
    if (p.family ? !(kind.size() > p.kind.size() && kind.compare(0, p.kind.size(), p.kind) == 0 &&
                     kind[p.kind.size()] == '.')
                 : kind != p.kind)
      continue;
    if (!p.path.empty() && (!event.has_file() || event.file().truncated() || !MatchGlob(p.path, event.file().path())))
      continue;
    if (!p.unix_address.empty() && (kind != "net.unix" || !event.has_file() || event.file().truncated() ||
                                    !MatchGlob(p.unix_address, event.file().path())))
      continue;
    if (p.prefix) {
      if (!HasIpAddress(kind) || !event.has_net() || event.net().address().empty()) continue;
      if (!address_parsed) {
        std::string ignored;
        address = ParsePrefix(event.net().address(), &ignored);
        address_parsed = true;
      }
      if (!address || !p.prefix->Contains(*address)) continue;
      if (!p.ports.empty() && std::none_of(p.ports.begin(), p.ports.end(), [&](const PortRange& r) {
            return event.net().port() >= r.lo && event.net().port() <= r.hi;
          }))
        continue;
    }
    return static_cast<int>(i);
  }
  return -1;
}

std::string SerializeQuiet(std::span<const QuietPattern> patterns) {
  cordon::v1::Spec spec;
  for (const QuietPattern& p : patterns) *spec.add_quiet() = p.source;
  return spec.SerializeAsString();
}

Result<std::vector<QuietPattern>> ParseQuiet(std::string_view bytes) {
  ParsedPolicy parsed;
  parsed.file = "<pinned spec.quiet>";
  if (!parsed.proto.mutable_spec()->ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return Error{"pinned spec.quiet patterns do not parse"};
  Diagnostics diags;
  std::vector<QuietPattern> out;
  CompileQuiet(parsed, &out, &diags);
  if (!diags.empty()) return Error{"pinned spec.quiet patterns: " + diags[0].ToString()};
  return out;
}

std::string DescribeQuiet(std::span<const QuietPattern> patterns) {
  if (patterns.empty()) return "";
  std::string out = "quiet (expected: still enforced, recorded and counted; not violations of cordon run):\n";
  for (const QuietPattern& p : patterns) {
    out += "  " + p.kind + (p.family ? ".*" : "");
    if (!p.path.empty()) out += " on " + DisplayText(p.path);
    if (!p.unix_address.empty()) out += " to " + DisplayText(p.unix_address);
    if (p.prefix) {
      out += " to " + p.prefix->ToString();
      if (!p.ports.empty()) {
        out += " port";
        for (size_t i = 0; i < p.ports.size(); ++i) {
          out += (i ? "," : " ") + std::to_string(p.ports[i].lo);
          if (p.ports[i].hi != p.ports[i].lo) out += "-" + std::to_string(p.ports[i].hi);
        }
      }
    }
    if (!p.source.description().empty()) out += " (" + DisplayText(p.source.description()) + ")";
    out += "\n";
  }
  return out;
}

}  // namespace cordon::policy
