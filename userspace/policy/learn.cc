#include "policy/learn.h"

#include <algorithm>
#include <map>
#include <set>

#include "abi/cordon_file.h"
#include "policy/inline.h"
#include "util/text.h"

namespace cordon::policy {
namespace {

// ---- paths

std::vector<std::string> Components(const std::string& path) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < path.size()) {
    while (i < path.size() && path[i] == '/') ++i;
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    if (j > i) out.push_back(path.substr(i, j - i));
    i = j;
  }
  return out;
}

// "/a/b" -> "/a", "/a" -> "/", "/" -> "/".
std::string Parent(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos || slash == 0) return "/";
  return path.substr(0, slash);
}

// `path` is `dir` or lies below it.
bool Below(const std::string& path, const std::string& dir) {
  if (dir == "/") return true;
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/');
}

bool ComponentMatches(const std::string& pattern, const std::string& name) { return pattern == "*" || pattern == name; }

// The first `n` components of `dir` match those of `pattern`.
bool PrefixMatches(const std::vector<std::string>& pattern, const std::vector<std::string>& dir, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!ComponentMatches(pattern[i], dir[i])) return false;
  return true;
}

// /proc/<digits>..., /proc/self..., /proc/thread-self...: one process's
// entries (a rule would resolve them to one process when the run starts).
bool ProcessEntry(const std::string& path) {
  const auto c = Components(path);
  return c.size() >= 2 && c[0] == "proc" && !c[1].empty() &&
         (c[1] == "self" || c[1] == "thread-self" ||
          std::all_of(c[1].begin(), c[1].end(), [](char ch) { return ch >= '0' && ch <= '9'; }));
}

std::string Plural(size_t n, const std::string& one, const std::string& many = "") {
  return std::to_string(n) + " " + (n == 1 ? one : (many.empty() ? one + "s" : many));
}

// At most `max` names, then "and N more".
std::string NameList(const std::vector<std::string>& names, size_t max = 8) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < max; ++i)
    out += (i ? ", " : "") + DisplayText(EscapeWorkloadBytes(names[i]));
  if (names.size() > max) out += " and " + std::to_string(names.size() - max) + " more";
  return out;
}

std::string Shown(const std::string& path) { return DisplayText(EscapeWorkloadBytes(path)); }

// ---- file grants

enum class Why { kCollapsed, kExact, kListed, kExec };

struct FileGrant {
  uint32_t rights = 0;  // kFileRightsRead / Write / Exec, unioned
  Why why = Why::kExact;
  std::string boundary;            // kExact: the boundary that kept it exact ("" = none)
  std::set<std::string> observed;  // the observed paths it was made for
};

class Synthesizer {
 public:
  Synthesizer(const CompiledPolicy& compiled, const LearnFacts& facts) : facts_(facts) {
    for (const FileRule& rule : compiled.file_rules) base_rules_.emplace_back(facts.canonical(rule.path), rule.rights);
    has_files_ = compiled.has_files;
  }

  // File observations are taken in three passes (Files()): programs, then
  // writes, then reads, each skipped when what is learned so far covers it:
  // reading a program its exec rule allows, or a file below a written
  // directory, adds nothing.
  void File(const Observation& o) {
    if (!has_files_) return;  // files are not restricted: nothing to learn
    if (o.path.empty()) return NotLearned(o, "no path was reported");
    if (o.path_truncated) return NotLearned(o, "the path was longer than events carry");
    std::string path, why;
    if (o.path[0] != '/')
      return NotLearned(o, "the path is relative, as the caller wrote it: a rule needs an absolute one");
    if (!NormalizeFilePath(o.path, &path, &why)) return NotLearned(o, why);
    const std::string per_process =
        "an entry of one process's /proc/<pid> (or /proc/self): no rule can name a process to come (the "
        "runtime-minimal profile gives the command its own)";
    if (ProcessEntry(path)) return NotLearned(o, per_process);
    // A path as the caller wrote it (Landlock's refusals) may go through a
    // link (/bin is /usr/bin): the object it reached names the rule.
    if (o.path_as_written) {
      std::string real;
      if (NormalizeFilePath(facts_.canonical(path), &real, &why)) path = real;
      if (ProcessEntry(path)) return NotLearned(o, per_process);
    }
    // Metadata changes whose kernel hooks carry no mount (BPF LSM's
    // inode_setattr, extended attributes) are reported from the root of the
    // file's file system: on a file system mounted elsewhere than / the path
    // is not where the file is (measured in the test VMs: /run's tmpfs).
    if (o.kind == "file.setattr" && !o.path_as_written) {
      const std::string top = "/" + Components(path)[0];
      if (!facts_.existed_before(top) && !facts_.is_directory(top)) {
        unplaced_.push_back(o.kind + " " + Shown(path));
        return;
      }
    }
    const bool exec = o.kind == "file.exec" || o.kind == "file.mmap_exec";
    const bool dir_op =
        o.kind == "file.create" || o.kind == "file.unlink" || o.kind == "file.rename" || o.kind == "file.link";
    const bool write = dir_op || o.kind == "file.setattr" || o.kind == "file.ioctl" ||
                       (o.access & (CORDON_FILE_WRITE | CORDON_FILE_CREATE));
    pending_[exec ? 0 : write ? 1 : 2].push_back({o, path, dir_op});
  }

  void Files() {
    for (const auto& p : pending_[0]) Exec(p);
    for (const auto& p : pending_[1]) Write(p);
    for (const auto& p : pending_[2]) Read(p);
  }

  struct Pending {
    Observation o;
    std::string path;  // normalized
    bool dir_op;       // create, unlink, rename, link: the directory changes
  };

  void Exec(const Pending& p) {
    if (Grants(p.path, CORDON_FILE_EXEC)) return;
    if (!facts_.existed_before(p.path))
      return NotLearned(p.o,
                        "the program was made during the run; an exec rule names a file that exists when the "
                        "run starts (keep it out of the workload's outputs, or add it with --exec)");
    Grant(p.path, kFileRightsExec, Why::kExec, "", p.path);
  }

  void Write(const Pending& p) {
    const std::string& path = p.path;
    if (Grants(path, CORDON_FILE_WRITE | (p.dir_op ? CORDON_FILE_CREATE : 0)) &&
        (!p.dir_op || Grants(Parent(path), CORDON_FILE_CREATE)))
      return;
    std::string host = HostWriteRefusal(path);
    if (host.empty()) host = HostWriteRefusal(facts_.canonical(path));
    if (!host.empty())
      return NotLearned(p.o, "a learned policy never writes below " + host +
                                 ": not granted (add --write " + Shown(path) + " if the workload must)");
    const bool made = p.dir_op || !facts_.existed_before(path);
    std::string boundary;
    const std::string dir = Climb(Parent(path), &boundary);
    if (boundary.empty()) return Grant(dir, kFileRightsWrite, Why::kCollapsed, "", path);
    // On a boundary: a file that was there is written in place, exactly.
    if (!made && !facts_.is_directory(path)) return Grant(path, kFileRightsWrite, Why::kExact, boundary, path);
    NotLearned(p.o, std::string(made ? "creating or removing it" : "writing it") + " needs write on " + Shown(dir) +
                        ", " + boundary + ": not granted (add --write " + Shown(dir) + " if the workload should)");
  }

  void Read(const Pending& p) {
    const std::string& path = p.path;
    if (Grants(path, CORDON_FILE_READ)) return;
    if (facts_.is_directory(path) && facts_.existed_before(path)) {
      std::string boundary = BoundaryOf(path, facts_.extra_boundaries);
      if (boundary.empty()) boundary = BoundaryOf(facts_.canonical(path), facts_.extra_boundaries);
      if (!boundary.empty())
        return NotLearned(p.o, "listing it needs read on the directory, " + boundary +
                                   ", which would grant every file below it: not granted (add --read " + Shown(path) +
                                   " if the workload should)");
      return Grant(path, kFileRightsRead, Why::kListed, "", path);
    }
    std::string boundary;
    const std::string dir = Climb(Parent(path), &boundary);
    if (boundary.empty()) return Grant(dir, kFileRightsRead, Why::kCollapsed, "", path);
    if (facts_.existed_before(path)) return Grant(path, kFileRightsRead, Why::kExact, boundary, path);
    NotLearned(p.o, "the file was made during the run in " + Shown(dir) + ", " + boundary + ": not granted");
  }

  // The base or what is learned so far grants `want` on `path`; the path
  // then counts as observed for the learned grants that cover it (the report).
  bool Grants(const std::string& path, uint32_t want) {
    uint32_t rights = BaseRights(path);
    for (const auto& [rule, g] : grants_)
      if (Below(path, rule)) rights |= g.rights;
    if ((rights & want) != want) return false;
    for (auto& [rule, g] : grants_)
      if (Below(path, rule)) g.observed.insert(path);
    return true;
  }

  // The nearest directory at or above `dir` that existed before the run, not
  // crossing a boundary: *boundary says which stopped it ("" = none).
  // A directory reached through a symlink is judged where it leads too
  // (/var/run is /run).
  std::string Climb(std::string dir, std::string* boundary) {
    for (;;) {
      *boundary = BoundaryOf(dir, facts_.extra_boundaries);
      if (boundary->empty())
        if (const std::string real = facts_.canonical(dir); real != dir)
          *boundary = BoundaryOf(real, facts_.extra_boundaries);
      if (!boundary->empty() || facts_.existed_before(dir)) return dir;
      dir = Parent(dir);
    }
  }

  void Grant(const std::string& path, uint32_t rights, Why why, const std::string& boundary,
             const std::string& observed) {
    FileGrant& g = grants_[path];
    if (g.rights == 0 || why == Why::kListed || why == Why::kCollapsed) g.why = why;
    if (!boundary.empty()) g.boundary = boundary;
    g.rights |= rights;
    g.observed.insert(observed);
  }

  bool BaseGrants(const std::string& path, uint32_t want) const { return (BaseRights(path) & want) == want; }
  uint32_t BaseRights(const std::string& path) const {
    uint32_t rights = 0;
    for (const auto& [rule, r] : base_rules_)
      if (Below(path, rule)) rights |= r;
    return rights;
  }

  void NotLearned(const Observation& o, const std::string& why) {
    std::string what = o.kind;
    if (!o.path.empty()) what += " " + Shown(o.path);
    if (!o.address.empty()) what += " " + o.address + " port " + std::to_string(o.port) + "/" + o.protocol;
    not_learned_.push_back(what + ": " + why);
  }

  // Learned grants a broader one (base or learned) already gives.
  void Minimize() {
    for (auto it = grants_.begin(); it != grants_.end();) {
      uint32_t others = BaseRights(it->first);
      for (const auto& [path, g] : grants_)
        if (path != it->first && Below(it->first, path)) others |= g.rights;
      if ((others & it->second.rights) == it->second.rights) {
        // Its observations are the broader grant's now (for the report).
        for (auto& [path, g] : grants_)
          if (path != it->first && Below(it->first, path) && (g.rights & it->second.rights) == it->second.rights)
            g.observed.insert(it->second.observed.begin(), it->second.observed.end());
        it = grants_.erase(it);
      } else {
        ++it;
      }
    }
  }

  const LearnFacts& facts_;
  std::vector<Pending> pending_[3];
  std::vector<std::pair<std::string, uint32_t>> base_rules_;
  bool has_files_ = false;
  std::map<std::string, FileGrant> grants_;
  std::vector<std::string> not_learned_;
  std::vector<std::string> unplaced_;
};

// The extraProtocols name of a socket kind, "" for plain TCP and UDP.
std::string ExtraProtocol(const Observation& o) {
  if (o.sock_type == "raw") return "raw";
  for (const char* p : {"icmp", "icmpv6", "sctp", "mptcp", "udplite"})
    if (o.protocol == p) return p;
  return "";
}

// tcp or udp for an egress or listen rule ("" when neither fits).
std::string RuleProtocol(const std::string& protocol) {
  if (protocol == "tcp" || protocol == "mptcp") return "tcp";
  if (protocol == "udp" || protocol == "udplite") return "udp";
  return "";
}

std::string Rights(uint32_t rights) {
  if (rights & CORDON_FILE_EXEC) return "exec";
  if (rights & CORDON_FILE_WRITE) return "write";
  return "read";
}

}  // namespace

const std::vector<LearnBoundary>& LearnBoundaries() {
  static const std::vector<LearnBoundary> boundaries = {
      {"/", false, "the root"},
      {"/*", false, "a top-level directory (/usr, /home, /var, /run, /tmp, ...)"},
      {"/etc", true, "the host's configuration (and keys: /etc/ssh, /etc/ssl/private)"},
      {"/root", true, "root's home"},
      {"/home/*", false, "a home directory"},
      {"/home/*/.ssh", true, "SSH keys"},
      {"/home/*/.aws", true, "AWS credentials"},
      {"/home/*/.config", true, "settings and tokens (gh, gcloud, ...)"},
      {"/home/*/.gnupg", true, "GnuPG keys"},
      {"/home/*/.kube", true, "Kubernetes credentials"},
      {"/home/*/.docker", true, "registry credentials"},
      {"/home/*/.local/share/keyrings", true, "keyrings"},
      {"/home/*/.password-store", true, "pass's store"},
      {"/var/lib", false, "services' state"},
      {"/var/lib/cordon", true, "cordon's signing keys"},
      {"/var/log", false, "the host's logs"},
      {"/run/secrets", true, "mounted secrets"},
      {"/run/cordon", true, "cordon's credential stores and state"},
      {"/run/user/*", true, "a user's runtime directory (agent sockets, keyrings)"},
      {"/proc", true, "kernel and process state"},
      {"/sys", true, "kernel state"},
      {"/dev", true, "devices"},
      {"/boot", true, "kernels and boot loader"},
  };
  return boundaries;
}

std::string HostWriteRefusal(const std::string& path) {
  static const char* const kHost[] = {"/usr",   "/bin",  "/sbin", "/lib",     "/lib32", "/lib64",
                                      "/libx32", "/opt", "/etc",  "/var/lib", "/var/spool", "/srv"};
  for (const char* dir : kHost)
    if (Below(path, dir)) return Shown(dir) + " (the host's programs, libraries, configuration or services' state)";
  const std::vector<std::string> c = Components(path);
  for (const auto& b : LearnBoundaries()) {
    if (!b.whole_tree) continue;
    const std::vector<std::string> p = Components(b.pattern);
    if (c.size() >= p.size() && PrefixMatches(p, c, p.size())) return std::string(b.pattern) + " (" + b.why + ")";
  }
  return "";
}

std::string HostSocketRefusal(const std::string& path) {
  for (const char* dir : {"/run", "/var/run"})
    if (Below(path, dir))
      return std::string(dir) + " holds host daemons' sockets (container engines, systemd, D-Bus, the cordon agent)";
  return HostWriteRefusal(path);
}

std::string BoundaryOf(const std::string& dir, const std::vector<std::string>& extra) {
  const std::vector<std::string> d = Components(dir);
  auto check = [&d](const std::vector<std::string>& p, bool whole_tree) -> int {
    // 1: dir is it, 2: dir holds it below, 3: dir is inside it (whole tree)
    if (d.size() == p.size() && PrefixMatches(p, d, d.size())) return 1;
    if (d.size() < p.size() && PrefixMatches(p, d, d.size())) return 2;
    if (whole_tree && d.size() > p.size() && PrefixMatches(p, d, p.size())) return 3;
    return 0;
  };
  auto describe = [&dir](int how, const std::string& pattern, const std::string& why) {
    if (how == 1) return Shown(dir) + " is a sensitive boundary (" + why + ")";
    if (how == 2) return Shown(dir) + " holds the sensitive boundary " + pattern + " (" + why + ")";
    return Shown(dir) + " is inside the sensitive boundary " + pattern + " (" + why + ")";
  };
  // The specific ones first: /proc is named as /proc, not as a top-level directory.
  for (int pass = 0; pass < 2; ++pass)
    for (const auto& b : LearnBoundaries()) {
      const std::string pattern = b.pattern;
      if ((pass == 0) == (pattern == "/" || pattern == "/*")) continue;
      if (int how = check(Components(pattern), b.whole_tree)) return describe(how, pattern, b.why);
    }
  for (const auto& e : extra)
    if (int how = check(Components(e), true)) return describe(how, Shown(e), "the caller's home");
  return "";
}

void DedupeObservations(std::vector<Observation>* observations) {
  std::vector<Observation> out;
  out.reserve(observations->size());
  for (auto& o : *observations)
    if (std::find(out.begin(), out.end(), o) == out.end()) out.push_back(std::move(o));
  *observations = std::move(out);
}

LearnResult Learn(const ParsedPolicy& base, const CompiledPolicy& compiled,
                  const std::vector<Observation>& observations, const std::vector<LearnRound>& rounds,
                  const LearnFacts& facts, const std::string& name) {
  LearnResult result;
  result.candidate.proto = base.proto;
  result.candidate.positions = base.positions;
  result.candidate.file = base.file;
  if (!name.empty()) result.candidate.proto.mutable_metadata()->set_name(name);
  result.candidate.proto.mutable_metadata()->set_description("Learned by cordon learn from the policy " +
                                                             base.proto.metadata().name());
  cordon::v1::Spec* spec = result.candidate.proto.mutable_spec();
  std::vector<std::string>& report = result.report;

  Synthesizer files(compiled, facts);
  // Egress and listen rules: {address, protocol} -> ports.
  std::map<std::pair<std::string, std::string>, std::set<uint32_t>> egress, listen;
  std::vector<std::string> families, extras, switches;
  std::set<std::string> unix_paths;
  auto has = [](const auto& list, const std::string& v) {
    return std::find(list.begin(), list.end(), v) != list.end();
  };

  for (const Observation& o : observations) {
    const std::string& k = o.kind;
    if (k.rfind("file.", 0) == 0 && k != "file.memfd") {
      files.File(o);
    } else if (k == "net.connect" || k == "net.sendmsg") {
      const std::string protocol = RuleProtocol(o.protocol);
      if (o.address.empty() || protocol.empty() || o.port == 0)
        files.NotLearned(o, "an egress rule needs an address, a port and tcp or udp");
      else
        egress[{o.address, protocol}].insert(o.port);
    } else if (k == "net.bind" && !o.address.empty()) {
      const std::string protocol = RuleProtocol(o.protocol);
      if (protocol.empty())
        files.NotLearned(o, "a listen rule needs tcp or udp");
      else
        listen[{o.address, protocol}].insert(o.port);
    } else if ((k == "net.bind" || k == "net.unix") && !o.path.empty() && o.path[0] == '@') {
      if (!spec->network().abstract_unix()) {
        spec->mutable_network()->set_abstract_unix(true);
        switches.push_back("spec.network.abstractUnix: true: connects to and binds of every abstract unix name");
      }
    } else if (k == "net.unix") {
      std::string path, why;
      if (o.path.empty() || o.path[0] != '/' || !NormalizeFilePath(o.path, &path, &why))
        files.NotLearned(o, "a unix socket rule needs the socket's absolute path");
      else if (!facts.existed_before(path))
        files.NotLearned(o, "no socket was there when the run started (a rule names an existing object)");
      else if (std::string host = HostSocketRefusal(path), real = HostSocketRefusal(facts.canonical(path));
               !host.empty() || !real.empty())
        files.NotLearned(o, "a learned policy never connects to a socket below " + (host.empty() ? real : host) +
                                ": not granted (add --write " + Shown(path) + " to the base if the workload must)");
      else if (compiled.has_files && !files.BaseGrants(path, CORDON_FILE_WRITE))
        unix_paths.insert(path);
    } else if (k == "net.socket") {
      std::vector<std::string> current(spec->network().families().begin(), spec->network().families().end());
      const bool written = !current.empty() || base.positions.Find("spec.network.families");
      if (!written) current = {"unix", "inet", "inet6"};
      const std::string extra = ExtraProtocol(o);
      if (!o.family.empty() && !has(current, o.family)) {
        if (!written)
          for (const auto& f : current) spec->mutable_network()->add_families(f);
        spec->mutable_network()->add_families(o.family);
        families.push_back(o.family);
      } else if (!extra.empty() && !has(spec->network().extra_protocols(), extra)) {
        spec->mutable_network()->add_extra_protocols(extra);
        extras.push_back(extra);
      } else if (extra.empty() || !has(spec->network().extra_protocols(), extra)) {
        files.NotLearned(o, "no family or socket kind of the policy language covers it (" + o.family + " " +
                                o.sock_type + " " + o.protocol + ")");
      }
    } else if (k == "file.memfd") {
      if (!spec->files().allow_memfd_exec() && compiled.has_files) {
        spec->mutable_files()->set_allow_memfd_exec(true);
        switches.push_back("spec.files.allowMemfdExec: true: executing any anonymous memory file (memfd_create)");
      }
    } else if (k == "tamper.keyring") {
      if (!spec->allow_keyrings()) {
        spec->set_allow_keyrings(true);
        switches.push_back("spec.allowKeyrings: true: add_key, request_key and keyctl on the session keyring");
      }
    } else if (k == "tamper.userns" && o.arg == 435) {
      files.NotLearned(o,
                       "cordon run's seccomp filter refuses every clone3 (ENOSYS: its flags cannot be inspected), "
                       "whatever the policy; callers fall back to clone");
    } else if (k == "tamper.userns") {
      // Never learned: one attempt would open the kernel surface that most
      // local privilege escalations go through, for every later run.
      files.NotLearned(o,
                       "user namespaces are a large kernel surface (most local privilege escalations start with "
                       "one): never learned; add spec.allowUserNamespaces: true to the base if the workload must");
    } else {
      files.NotLearned(o, "no policy allows it" + (o.reason.empty() ? std::string() : " (" + o.reason + ")"));
    }
  }
  files.Files();
  files.Minimize();

  // ---- the candidate
  if (spec->mode() == "audit") {
    spec->set_mode("enforce");
    report.push_back("note: the base policy's spec.mode audit is enforce in the candidate");
  }
  std::vector<std::string> lines;
  for (const auto& [path, g] : files.grants_) {
    cordon::v1::Files* out_files = spec->mutable_files();  // only with spec.files: nothing is learned without
    if (g.rights & CORDON_FILE_EXEC) out_files->add_exec(path);
    if (g.rights & CORDON_FILE_WRITE) out_files->add_write(path);
    if (!(g.rights & (CORDON_FILE_EXEC | CORDON_FILE_WRITE))) out_files->add_read(path);
    ++result.learned_rules;
    std::string line = Rights(g.rights) + " " + Shown(path) + ": ";
    // What it grants beyond the observed paths.
    std::set<std::string> seen_names;  // entries of `path` the observations went through
    for (const auto& p : g.observed)
      if (p != path && Below(p, path)) seen_names.insert(Components(p.substr(path == "/" ? 0 : path.size()))[0]);
    std::vector<std::string> unseen;
    if (g.why != Why::kExact && g.why != Why::kExec)
      for (const auto& name : facts.entries(path))
        if (!seen_names.count(name)) unseen.push_back(facts.is_directory(path + "/" + name) ? name + "/" : name);
    switch (g.why) {
      case Why::kExec: line += "exactly this program (exec list)"; break;
      case Why::kExact: line += "exactly this file (" + g.boundary + ")"; break;
      case Why::kListed:
      case Why::kCollapsed: {
        const std::string what = (g.rights & CORDON_FILE_WRITE)
                                     ? "read, write, create, delete and rename anywhere below it"
                                     : "read every file below it";
        line += what + "; observed " + Plural(g.observed.size(), "path") +
                (g.why == Why::kListed ? " (the directory itself was listed)" : "");
        if (!unseen.empty())
          line += "; never observed: " + Plural(unseen.size(), "entry", "entries") + " (" + NameList(unseen) +
                  "), and everything below them";
        break;
      }
    }
    lines.push_back(line);
  }
  for (const auto& path : unix_paths) {
    spec->mutable_files()->add_write(path);
    ++result.learned_rules;
    lines.push_back("write " + Shown(path) + ": exactly this unix socket (connect)");
  }
  for (const auto& [key, ports] : egress) {
    auto* rule = spec->mutable_network()->add_egress();
    rule->set_cidr(key.first);
    for (uint32_t p : ports) rule->add_ports(std::to_string(p));
    rule->add_protocols(key.second);
    rule->set_description("learned by cordon learn");
    ++result.learned_rules;
    std::string ports_text;
    for (uint32_t p : ports) ports_text += (ports_text.empty() ? "" : ",") + std::to_string(p);
    lines.push_back("egress " + key.first + " port" + (ports.size() == 1 ? " " : "s ") + ports_text + "/" + key.second +
                    ": exactly the observed address and ports (by address: rules by host name do not exist yet, so "
                    "a name that resolves elsewhere next time is refused)");
  }
  for (const auto& [key, ports] : listen) {
    auto* rule = spec->mutable_network()->add_listen();
    rule->set_address(key.first);
    for (uint32_t p : ports) rule->add_ports(std::to_string(p));
    rule->add_protocols(key.second);
    rule->set_description("learned by cordon learn");
    ++result.learned_rules;
    std::string ports_text;
    for (uint32_t p : ports) ports_text += (ports_text.empty() ? "" : ",") + std::to_string(p);
    lines.push_back("listen " + key.first + " port" + (ports.size() == 1 ? " " : "s ") + ports_text + "/" + key.second +
                    (ports.count(0) ? ": port 0 is every port the kernel chooses" : ": exactly the observed ports"));
  }
  for (const auto& f : families) {
    ++result.learned_rules;
    lines.push_back("spec.network.families: " + f + ": every socket of that family");
  }
  for (const auto& e : extras) {
    ++result.learned_rules;
    lines.push_back("spec.network.extraProtocols: " + e +
                    (e == "icmp" || e == "icmpv6" || e == "raw"
                         ? ": not address-filtered (pings and raw packets anywhere)"
                         : ": that socket kind"));
  }
  for (const auto& s : switches) {
    ++result.learned_rules;
    lines.push_back(s);
  }
  result.text = PolicyJson(result.candidate);
  result.not_learned = files.not_learned_;
  result.unplaced = files.unplaced_;

  // ---- the report
  report.insert(report.begin(), "cordon learn: candidate policy " + result.candidate.proto.metadata().name() + ": " +
                                    Plural(result.learned_rules, "rule") + " learned from " +
                                    Plural(observations.size(), "distinct access", "distinct accesses") +
                                    " the base did not allow");
  for (size_t i = 0; i < rounds.size(); ++i) {
    const LearnRound& r = rounds[i];
    std::string line = (r.label.empty() ? "round " + std::to_string(i + 1) + (r.enforce ? " (enforce)" : " (audit)") +
                                              ": the command exited " + std::to_string(r.exit_status)
                                        : r.label) +
                       "; " + Plural(r.events, "event") + ", " +
                       Plural(r.new_observations, "new access", "new accesses");
    if (r.lost) line += "; " + std::to_string(r.lost) + " events LOST (ring buffer full)";
    if (r.suppressed) line += "; " + std::to_string(r.suppressed) + " events SUPPRESSED (the agent's rate limit)";
    if (r.not_received) line += "; " + std::to_string(r.not_received) + " events NOT RECEIVED from the agent";
    if (r.unreadable) line += "; " + std::to_string(r.unreadable) + " unreadable lines";
    if (!r.Incomplete()) line += "; trail complete";
    report.push_back(line);
  }
  if (!lines.empty()) {
    report.push_back("learned; what each rule allows beyond what was observed:");
    for (auto& l : lines) report.push_back("  " + l);
  }
  if (!result.unplaced.empty()) {
    report.push_back(
        "not placed (metadata changes reported from the root of their file system, which is not mounted "
        "at /: no rule can be made from the path; a rule learned for their directory covers them):");
    for (const auto& l : result.unplaced) report.push_back("  " + l);
  }
  if (!result.not_learned.empty()) {
    report.push_back("not learned (observed, but the candidate does not allow it: an enforce run refuses it):");
    for (const auto& l : result.not_learned) report.push_back("  " + l);
  }
  return result;
}

}  // namespace cordon::policy
