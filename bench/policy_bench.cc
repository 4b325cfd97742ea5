// B3: policy compile, load and atomic swap (see bench/README.md).
//
// A policy with 100k CIDR rules and 10k file paths (real files and
// directories created under a temporary directory: explicit paths must exist
// when a policy is attached). Per round: parse and compile two such policies
// (A and B, which share 9,500 of their paths), attach A to two fresh cgroups
// in a shuffled order (the second is the A/A control), replace A by B and B
// by A on the first (end to end, the loader's own swap_ns, and the phases of
// the replacement seen by a watcher thread), then detach everything. A small
// policy (10 CIDRs, 10 paths) is measured the same way as a reference for the
// fixed costs.
//
// The watcher polls, while AttachSandbox replaces a policy, (1) which program
// the sandbox's connect4 link runs and (2) the sandbox's entry in the
// host-wide lsm_sandboxes map (BPF LSM object, or the detect object where BPF
// LSM is unusable), so the replacement splits into: preparation (until the
// first layer switches), the window in which one layer already enforces the
// new policy and the other still the old one (until the second switches; the
// watcher stops sleeping once the first has switched), and the tail (deleting
// the old file rules).
//
// Output: JSON (stdout, or --out FILE); bench/report.py renders it.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cinttypes>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "abi/cordon_file.h"
#include "abi/cordon_pins.h"
#include "bench_util.h"
#include "loader/lsm.h"
#include "loader/sandbox.h"
#include "policy/compiler.h"
#include "policy/parser.h"
#include "policy/yaml_reader.h"
#include "sys/cgroup.h"

namespace {

using bench::Die;
using bench::Json;
using bench::JsonStr;
using bench::NowNs;
using bench::Summarize;

using bench::CheckStop;
using bench::g_stop;
using bench::Log;
using bench::OnSignal;

// ---- generated policies ---------------------------------------------------------

struct GenRule {
  uint32_t addr;
  int len;
  std::string ports, protocols;
};

std::string Ip(uint32_t a) {
  char b[32];
  std::snprintf(b, sizeof b, "%u.%u.%u.%u", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255);
  return b;
}

// n rules: 127.0.0.1/32 port 18080, then n-1 random pairwise disjoint prefixes
// of /12 to /32 (mostly /24 and /32) over the /8s 1 to 223 but 127, with
// varied port sets; the generator of B1 (egress_bench), seeded by `seed`.
std::vector<GenRule> GenerateRules(int n, uint64_t seed) {
  std::vector<GenRule> out;
  out.push_back({0x7f000001u, 32, "[18080]", "[tcp, udp]"});
  std::mt19937_64 rng(seed);
  std::map<uint32_t, uint32_t> used;
  auto overlaps = [&](uint32_t s, uint32_t e) {
    auto it = used.upper_bound(e);
    if (it == used.begin()) return false;
    --it;
    return it->second >= s;
  };
  struct Choice {
    int len, weight;
  };
  const Choice lens[] = {{12, 2}, {16, 30}, {20, 70}, {22, 50}, {24, 400}, {26, 60}, {28, 90}, {30, 30}, {32, 268}};
  int total = 0;
  for (auto& c : lens) total += c.weight;
  const char* port_sets[] = {"[443]", "[80, 443]", "[53]", "[\"8000-8100\"]", "[22, 443, 8443]", "", "[5432]"};
  const char* proto_sets[] = {"[tcp]", "[tcp]", "[udp, tcp]", "[tcp]", "[tcp]", "", "[tcp]"};
  while (int(out.size()) < n) {
    int pick = int(rng() % total), len = 24;
    for (auto& c : lens) {
      if (pick < c.weight) {
        len = c.len;
        break;
      }
      pick -= c.weight;
    }
    uint32_t first = 1 + rng() % 223;
    if (first == 127) continue;
    uint32_t a = (first << 24) | uint32_t(rng() & 0xffffff);
    uint32_t mask = len == 32 ? 0xffffffffu : ~((1u << (32 - len)) - 1);
    a &= mask;
    uint32_t e = a | ~mask;
    if (overlaps(a, e)) continue;
    used[a] = e;
    int ps = int(rng() % 7);
    out.push_back({a, len, port_sets[ps], proto_sets[ps]});
  }
  return out;
}

struct PathSet {
  std::vector<std::string> read;   // files
  std::vector<std::string> write;  // directories
};

std::string PolicyYaml(const std::string& name, const std::vector<GenRule>& rules, const PathSet& paths) {
  std::string y;
  y.reserve(rules.size() * 72 + (paths.read.size() + paths.write.size()) * 64 + 512);
  y += "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata:\n  name: " + name +
       "\nspec:\n  mode: enforce\n  network:\n    families: [unix, inet, inet6]\n    egress:\n";
  for (const auto& r : rules) {
    y += "      - {cidr: " + Ip(r.addr) + "/" + std::to_string(r.len);
    if (!r.ports.empty()) y += ", ports: " + r.ports;
    if (!r.protocols.empty()) y += ", protocols: " + r.protocols;
    y += "}\n";
  }
  y += "  files:\n";
  if (!paths.read.empty()) {
    y += "    read:\n";
    for (const auto& p : paths.read) y += "      - " + p + "\n";
  }
  if (!paths.write.empty()) {
    y += "    write:\n";
    for (const auto& p : paths.write) y += "      - " + p + "\n";
  }
  return y;
}

// ---- state and cleanup --------------------------------------------------------------

struct State {
  std::string mount, root_rel, tmpdir;
  bool root_created = false;
  std::set<uint64_t> sandboxes;  // attached by us
};
State g;

void Cleanup() {
  for (uint64_t id : g.sandboxes) {
    cordon::Status s = cordon::DetachSandbox(id);
    if (!s.ok()) Log("detach sandbox %" PRIu64 ": %s", id, s.error().ToString().c_str());
  }
  g.sandboxes.clear();
  if (g.root_created) {
    auto root = cordon::ResolveCgroup(g.mount + g.root_rel);
    if (root) (void)cordon::KillAndRemoveCgroup(*root);
    g.root_created = false;
  }
  if (!g.tmpdir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(g.tmpdir, ec);
    g.tmpdir.clear();
  }
}

// Sandboxes and cgroups of earlier runs that were killed.
void CleanStale() {
  auto list = cordon::ListSandboxes();
  if (list)
    for (const auto& sb : *list) {
      if (sb.cgroup_path.rfind("/cordon-b3-", 0) != 0) continue;
      int pid = std::atoi(sb.cgroup_path.c_str() + std::strlen("/cordon-b3-"));
      if (pid > 0 && kill(pid, 0) == 0) continue;
      Log("removing stale sandbox on %s", sb.cgroup_path.c_str());
      (void)cordon::DetachSandbox(sb.id);
    }
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(g.mount, ec)) {
    std::string name = e.path().filename();
    if (name.rfind("cordon-b3-", 0) != 0) continue;
    int pid = std::atoi(name.c_str() + std::strlen("cordon-b3-"));
    if (pid > 0 && kill(pid, 0) == 0) continue;
    if (auto cg = cordon::ResolveCgroup(e.path())) (void)cordon::KillAndRemoveCgroup(*cg);
  }
}

cordon::CgroupRef NewCgroup(const std::string& name) {
  auto cg = cordon::CreateCgroup(g.root_rel + "/" + name);
  g.root_created = true;
  if (!cg) Die(cg.error().ToString());
  return std::move(*cg);
}

// ---- timed operations --------------------------------------------------------------

struct Compiled {
  cordon::policy::CompiledPolicy policy;
  double parse_ms = 0, compile_ms = 0;
};

// What parsing consists of, timed separately (ParsePolicyFile does all of it
// at once): reading the file, and reading the YAML (libyaml's event parser
// and the reader's checks, ReadYamlEvents, here with a handler that does
// nothing); the rest of ParsePolicyFile is the conversion of the nodes into
// the policy message (protobuf, by reflection) as they are read.
struct ParseParts {
  double read_ms = 0, events_ms = 0;
};
ParseParts TimeParseParts(const std::string& path) {
  struct Ignore : cordon::policy::YamlHandler {
    void Scalar(const cordon::policy::YamlScalar&) override {}
    void Key(const cordon::policy::YamlScalar&) override {}
    void BeginMapping(int, int) override {}
    void BeginSequence(int, int) override {}
    void End() override {}
  };
  ParseParts p;
  int64_t t0 = NowNs();
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  int64_t t1 = NowNs();
  cordon::policy::Diagnostics diags;
  Ignore ignore;
  if (!cordon::policy::ReadYamlEvents(text, path, &ignore, &diags)) Die("ReadYamlEvents " + path);
  int64_t t2 = NowNs();
  p.read_ms = double(t1 - t0) / 1e6;
  p.events_ms = double(t2 - t1) / 1e6;
  return p;
}

Compiled ParseAndCompile(const std::string& path) {
  Compiled c;
  cordon::policy::ParsedPolicy parsed;
  cordon::policy::Diagnostics diags;
  int64_t t0 = NowNs();
  if (!cordon::policy::ParsePolicyFile(path, &parsed, &diags))
    Die("parse " + path + ": " + cordon::policy::FormatDiagnostics(diags));
  int64_t t1 = NowNs();
  if (!cordon::policy::Compile(parsed, &c.policy, &diags))
    Die("compile " + path + ": " + cordon::policy::FormatDiagnostics(diags));
  int64_t t2 = NowNs();
  c.parse_ms = double(t1 - t0) / 1e6;
  c.compile_ms = double(t2 - t1) / 1e6;
  return c;
}

std::string HostWideDir(bool lsm) {
  return "/sys/fs/bpf/cordon/v" + std::to_string(CORDON_LAYOUT_VERSION) + (lsm ? "/lsm" : "/detect");
}
std::string SandboxDir(uint64_t id) {
  return "/sys/fs/bpf/cordon/v" + std::to_string(CORDON_LAYOUT_VERSION) + "/sandboxes/" + std::to_string(id);
}

struct AttachSample {
  double ms = 0;
  bool replaced = false;
  double swap_us = 0;             // AttachResult::swap_ns
  double switch_us = 0;           // AttachResult::switch_ns
  double net_ms = -1, file_ms = -1;  // watcher: network / file layer switched (since the call)
  size_t file_rules = 0;          // entries resolved (ResolveFileRules, same as the loader's)
};

// AttachSandbox; for a replacement, a watcher thread timestamps the switches.
AttachSample TimedAttach(const cordon::CgroupRef& cg, const cordon::policy::CompiledPolicy& policy, bool lsm,
                         int poll_us) {
  AttachSample s;
  const bool replacing = g.sandboxes.count(cg.id) > 0;
  int link_fd = -1, sandboxes_fd = -1;
  uint32_t old_prog = 0, old_version = 0;
  if (replacing) {
    link_fd = bpf_obj_get((SandboxDir(cg.id) + "/link_connect4").c_str());
    sandboxes_fd = bpf_obj_get((HostWideDir(lsm) + "/lsm_sandboxes").c_str());
    if (link_fd < 0 || sandboxes_fd < 0) Die("open the sandbox's pins for watching");
    old_prog = bench::LinkProgId(link_fd);
    cordon_lsm_sandbox v{};
    if (bpf_map_lookup_elem(sandboxes_fd, &cg.id, &v) != 0) Die("sandbox not in lsm_sandboxes");
    old_version = v.version;
  }
  std::atomic<bool> done{false};
  std::atomic<int64_t> t_net{0}, t_file{0};
  int64_t t0 = NowNs();
  std::thread watcher;
  if (replacing) {
    watcher = std::thread([&] {
      while (!done.load(std::memory_order_relaxed)) {
        if (!t_net && bench::LinkProgId(link_fd) != old_prog) t_net = NowNs();
        if (!t_file) {
          cordon_lsm_sandbox v{};
          if (bpf_map_lookup_elem(sandboxes_fd, &cg.id, &v) == 0 && v.version != old_version) t_file = NowNs();
        }
        if (t_net && t_file) break;
        // Once one layer has switched, the other follows within microseconds: poll without sleeping.
        if (poll_us > 0 && !t_net && !t_file) usleep(poll_us);
      }
    });
  }
  cordon::AttachOptions ao;
  auto res = cordon::AttachSandbox(cg, policy, ao);
  int64_t t1 = NowNs();
  done = true;
  if (watcher.joinable()) watcher.join();
  if (!res) Die("attach to " + cg.relative + ": " + res.error().ToString());
  g.sandboxes.insert(cg.id);
  s.ms = double(t1 - t0) / 1e6;
  s.replaced = res->replaced;
  s.swap_us = double(res->swap_ns) / 1e3;
  s.switch_us = double(res->switch_ns) / 1e3;
  if (replacing) {
    if (t_net) s.net_ms = double(t_net - t0) / 1e6;
    if (t_file) s.file_ms = double(t_file - t0) / 1e6;
    close(link_fd);
    close(sandboxes_fd);
  }
  return s;
}

double TimedDetach(uint64_t id) {
  int64_t t0 = NowNs();
  cordon::Status st = cordon::DetachSandbox(id);
  double ms = double(NowNs() - t0) / 1e6;
  if (!st.ok()) Die("detach: " + st.error().ToString());
  g.sandboxes.erase(id);
  return ms;
}

// A full iteration of the host-wide file_rules map (what the loader's
// DeleteRules does before deleting): entries and time.
std::pair<size_t, double> ScanFileRules(bool lsm) {
  int fd = bpf_obj_get((HostWideDir(lsm) + "/file_rules").c_str());
  if (fd < 0) return {0, 0};
  cordon_inode_key key{}, next{};
  void* prev = nullptr;
  size_t n = 0;
  int64_t t0 = NowNs();
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    ++n;
    key = next;
    prev = &key;
  }
  double ms = double(NowNs() - t0) / 1e6;
  close(fd);
  return {n, ms};
}

// ---- main ---------------------------------------------------------------------------

struct Options {
  int rounds = 10;
  int parse_rounds = -1;  // -1: every round
  int cidrs = 100000;
  int paths = 10000;
  int poll_us = 20;
  std::string out;
  uint64_t seed = 0;
  bool quick = false;
};

void Usage() {
  std::fputs(
      "usage: policy_bench [--rounds N] [--parse-rounds N] [--cidrs N] [--paths N] [--poll-us N] [--quick]\n"
      "                    [--seed N] [--out FILE]\n"
      "  B3 policy parse/compile/attach/replace benchmark (root). JSON to FILE (default stdout).\n"
      "  --rounds N        rounds of attach/replace (default 10)\n"
      "  --parse-rounds N  rounds that parse and compile again (default: all; the rest reuse round 1's)\n"
      "  --quick           3 rounds, 10k CIDRs, 1k paths\n",
      stderr);
}

struct Series {
  std::vector<double> v;
  void add(double x) { v.push_back(x); }
};

int Run(const Options& opt) {
  std::mt19937_64 rng(opt.seed ? opt.seed : uint64_t(NowNs()));
  auto mount = cordon::FindCgroup2Mount();
  if (!mount) Die(mount.error().ToString());
  g.mount = *mount;
  CleanStale();
  g.root_rel = "/cordon-b3-" + std::to_string(getpid());

  const cordon::LsmAvailability& lsm_av = cordon::ProbeLsm();
  const bool lsm = lsm_av.usable();
  std::string detect_detail;
  if (!lsm && !cordon::DetectLoadable(&detect_detail))
    Die("neither BPF LSM nor the detect object is usable: " + detect_detail);
  Log("file rules go to the %s object (%s)", lsm ? "BPF LSM" : "detect", lsm ? "BPF LSM usable" : lsm_av.detail.c_str());

  // Files: 105 directories with 99 files each (10,500 objects); A names the
  // first `paths` of them, B the last `paths` (500 more, 500 fewer).
  char tmpl[] = "/tmp/cordon-b3-XXXXXX";
  if (!mkdtemp(tmpl)) Die("mkdtemp");
  g.tmpdir = tmpl;
  std::vector<std::pair<std::string, bool>> objects;  // path, is_dir
  const int shift = std::max(1, opt.paths / 20);
  const int want = opt.paths + shift;
  const int per_dir = 100;
  for (int d = 0; int(objects.size()) < want; ++d) {
    char b[32];
    std::snprintf(b, sizeof b, "/t/d%03d", d);
    std::string dir = g.tmpdir + b;
    std::filesystem::create_directories(dir);
    objects.push_back({dir, true});
    for (int f = 1; f < per_dir && int(objects.size()) < want; ++f) {
      std::snprintf(b, sizeof b, "/f%03d", f);
      bench::WriteFileOrDie(dir + b, "");
      objects.push_back({dir + b, false});
    }
  }
  auto pathset = [&](int from) {
    PathSet p;
    for (int i = from; i < from + opt.paths; ++i) (objects[i].second ? p.write : p.read).push_back(objects[i].first);
    return p;
  };
  PathSet paths_a = pathset(0), paths_b = pathset(shift);
  PathSet paths_small;
  for (int i = 0; i < 10; ++i) (objects[i].second ? paths_small.write : paths_small.read).push_back(objects[i].first);
  const std::string yaml_a = g.tmpdir + "/a.yaml", yaml_b = g.tmpdir + "/b.yaml", yaml_s = g.tmpdir + "/small.yaml";
  bench::WriteFileOrDie(yaml_a, PolicyYaml("b3-a", GenerateRules(opt.cidrs, 0xB3A), paths_a));
  bench::WriteFileOrDie(yaml_b, PolicyYaml("b3-b", GenerateRules(opt.cidrs, 0xB3B), paths_b));
  bench::WriteFileOrDie(yaml_s, PolicyYaml("b3-small", GenerateRules(10, 0xB35), paths_small));
  size_t yaml_bytes = std::filesystem::file_size(yaml_a);
  Log("policies written: %d CIDRs + %d paths (%zu KB of YAML)", opt.cidrs, opt.paths, yaml_bytes / 1024);

  // The host-wide object: loaded by the first sandbox with file rules (a
  // keeper, attached for the whole run, keeps it loaded).
  const bool preloaded = std::filesystem::exists(HostWideDir(lsm) + "/lsm_sandboxes");
  Compiled small = ParseAndCompile(yaml_s);
  auto keeper = NewCgroup("keeper");
  AttachSample keeper_attach = TimedAttach(keeper, small.policy, lsm, opt.poll_us);
  Log("keeper attached in %.0f ms (host-wide object %s)", keeper_attach.ms,
      preloaded ? "was already loaded" : "loaded by it");

  Series parse_a, compile_a, parse_b, compile_b, parse_s, compile_s, resolve_a;
  Series fresh, fresh_aa, aa_ratio, repl, repl_swap, repl_switch, repl_net, repl_window, repl_tail, e2e_fresh,
      e2e_repl;
  Series s_fresh, s_repl, s_swap, s_switch, s_net, s_window, s_tail, det, det_small, scan_ms, scan_n;
  Series read_a, events_a;
  // The phases of a replacement from the watcher's two switch times: until
  // the first layer switched, between the two, after the second.
  auto phases = [](const AttachSample& s, Series* until_first, Series* window, Series* tail) {
    if (s.net_ms < 0 || s.file_ms < 0) {  // only one layer (no file rules): no window
      if (s.net_ms >= 0) until_first->add(s.net_ms);
      return;
    }
    until_first->add(std::min(s.net_ms, s.file_ms));
    window->add(std::abs(s.file_ms - s.net_ms));
    tail->add(s.ms - std::max(s.net_ms, s.file_ms));
  };
  Compiled ca, cb;
  int64_t t_start = NowNs();
  for (int r = 0; r < opt.rounds; ++r) {
    CheckStop();
    bool parse = opt.parse_rounds < 0 || r < opt.parse_rounds;
    if (parse) {
      // A and B in a shuffled order.
      bool a_first = rng() & 1;
      for (int k = 0; k < 2; ++k) {
        if ((k == 0) == a_first) ca = ParseAndCompile(yaml_a);
        else cb = ParseAndCompile(yaml_b);
      }
      parse_a.add(ca.parse_ms), compile_a.add(ca.compile_ms), parse_b.add(cb.parse_ms), compile_b.add(cb.compile_ms);
      ParseParts pp = TimeParseParts(yaml_a);
      read_a.add(pp.read_ms), events_a.add(pp.events_ms);
      Compiled cs = ParseAndCompile(yaml_s);
      parse_s.add(cs.parse_ms), compile_s.add(cs.compile_ms);
      if (ca.policy.file_rules.size() != size_t(opt.paths) || ca.policy.rules.size() != size_t(opt.cidrs))
        Die("policy A compiled to an unexpected size");
    }
    {
      std::vector<std::string> skipped;
      int64_t t0 = NowNs();
      auto resolved = cordon::ResolveFileRules(ca.policy, &skipped);
      if (!resolved) Die(resolved.error().ToString());
      resolve_a.add(double(NowNs() - t0) / 1e6);
    }
    const std::string tag = "r" + std::to_string(r);
    auto cg_a = NewCgroup(tag + "-a");
    auto cg_aa = NewCgroup(tag + "-aa");
    auto cg_s = NewCgroup(tag + "-small");
    // Fresh attaches of A (shuffled with the A/A control) and of the small policy.
    std::vector<int> order = {0, 1, 2};
    std::shuffle(order.begin(), order.end(), rng);
    double t_a = 0, t_aa = 0;
    for (int k : order) {
      if (k == 0) t_a = TimedAttach(cg_a, ca.policy, lsm, opt.poll_us).ms;
      if (k == 1) t_aa = TimedAttach(cg_aa, ca.policy, lsm, opt.poll_us).ms;
      if (k == 2) s_fresh.add(TimedAttach(cg_s, small.policy, lsm, opt.poll_us).ms);
    }
    fresh.add(t_a), fresh_aa.add(t_aa), aa_ratio.add(t_aa / t_a);
    e2e_fresh.add(ca.parse_ms + ca.compile_ms + t_a);
    auto [n, ms] = ScanFileRules(lsm);
    scan_n.add(double(n)), scan_ms.add(ms);
    // Replacements A -> B -> A on the first cgroup; the small one B-less (same policy again).
    for (int k = 0; k < 2; ++k) {
      const Compiled& next = k == 0 ? cb : ca;
      AttachSample s = TimedAttach(cg_a, next.policy, lsm, opt.poll_us);
      if (!s.replaced) Die("replacement did not replace");
      repl.add(s.ms), repl_swap.add(s.swap_us), repl_switch.add(s.switch_us);
      e2e_repl.add(next.parse_ms + next.compile_ms + s.ms);
      phases(s, &repl_net, &repl_window, &repl_tail);
      AttachSample q = TimedAttach(cg_s, small.policy, lsm, opt.poll_us);
      s_repl.add(q.ms), s_swap.add(q.swap_us), s_switch.add(q.switch_us);
      phases(q, &s_net, &s_window, &s_tail);
    }
    // Detach (each one also scans file_rules for its entries).
    std::vector<uint64_t> ids = {cg_a.id, cg_aa.id};
    std::shuffle(ids.begin(), ids.end(), rng);
    for (uint64_t id : ids) det.add(TimedDetach(id));
    det_small.add(TimedDetach(cg_s.id));
    for (auto* cg : {&cg_a, &cg_aa, &cg_s}) (void)cordon::KillAndRemoveCgroup(*cg);
    Log("round %d/%d: fresh %.0f ms (A/A %.0f), replace %.0f ms (swap %.0f us)", r + 1, opt.rounds, t_a, t_aa,
        repl.v.back(), repl_swap.v.back());
  }
  double total_s = double(NowNs() - t_start) / 1e9;

  std::ostringstream o;
  auto S = [&](const char* name, const Series& s, int prec = 3) {
    o << "    " << JsonStr(name) << ": " << Json(Summarize(s.v), prec);
  };
  o << "{\n  \"benchmark\": \"B3 policy compile, load and swap\",\n";
  o << "  \"machine\": " << bench::MachineJson() << ",\n";
  const char* host_kernel = getenv("CORDON_BENCH_HOST_KERNEL");
  o << "  \"vm\": " << (getenv("CORDON_VM") ? "true" : "false") << ", \"host_kernel\": "
    << JsonStr(host_kernel ? host_kernel : "") << ",\n";
  o << "  \"params\": {\"rounds\": " << opt.rounds << ", \"parse_rounds\": "
    << (opt.parse_rounds < 0 ? opt.rounds : std::min(opt.parse_rounds, opt.rounds)) << ", \"cidrs\": " << opt.cidrs
    << ", \"paths\": " << opt.paths << ", \"paths_shared_by_a_and_b\": " << (opt.paths - shift)
    << ", \"read_paths\": " << paths_a.read.size() << ", \"write_paths\": " << paths_a.write.size()
    << ", \"addr_entries\": " << ca.policy.addr_entries.size() << ", \"port_entries\": "
    << ca.policy.port_entries.size() << ", \"yaml_bytes\": " << yaml_bytes << ", \"poll_us\": " << opt.poll_us
    << ", \"total_s\": " << total_s << "},\n";
  o << "  \"backend\": " << JsonStr(lsm ? "lsm" : "detect") << ", \"lsm_detail\": " << JsonStr(lsm_av.detail)
    << ", \"lsm_list\": " << JsonStr(lsm_av.lsm_list) << ",\n";
  o << "  \"keeper\": {\"preloaded\": " << (preloaded ? "true" : "false") << ", \"attach_ms\": " << keeper_attach.ms
    << "},\n";
  o << "  \"big\": {\n";
  S("parse_ms", parse_a); o << ",\n";
  S("compile_ms", compile_a); o << ",\n";
  S("parse_read_file_ms", read_a); o << ",\n";
  S("parse_yaml_events_ms", events_a); o << ",\n";
  S("parse_b_ms", parse_b); o << ",\n";
  S("compile_b_ms", compile_b); o << ",\n";
  S("resolve_ms", resolve_a); o << ",\n";
  S("attach_fresh_ms", fresh); o << ",\n";
  S("attach_fresh_aa_ms", fresh_aa); o << ",\n";
  S("aa_ratio", aa_ratio, 4); o << ",\n";
  S("e2e_fresh_ms", e2e_fresh); o << ",\n";
  S("replace_ms", repl); o << ",\n";
  S("swap_us", repl_swap); o << ",\n";
  S("switch_us", repl_switch); o << ",\n";
  S("replace_until_first_switch_ms", repl_net); o << ",\n";
  S("mixed_window_ms", repl_window); o << ",\n";
  S("after_last_switch_ms", repl_tail); o << ",\n";
  S("e2e_replace_ms", e2e_repl); o << ",\n";
  S("detach_ms", det); o << ",\n";
  S("file_rules_scan_ms", scan_ms); o << ",\n";
  S("file_rules_entries", scan_n, 0); o << "\n  },\n";
  o << "  \"small\": {\n";
  S("parse_ms", parse_s); o << ",\n";
  S("compile_ms", compile_s); o << ",\n";
  S("attach_fresh_ms", s_fresh); o << ",\n";
  S("replace_ms", s_repl); o << ",\n";
  S("swap_us", s_swap); o << ",\n";
  S("switch_us", s_switch); o << ",\n";
  S("replace_until_first_switch_ms", s_net); o << ",\n";
  S("mixed_window_ms", s_window); o << ",\n";
  S("after_last_switch_ms", s_tail); o << ",\n";
  S("detach_ms", det_small); o << "\n  }\n}\n";

  Cleanup();
  if (bench::EmitJson(opt.out, o.str())) Log("wrote %s", opt.out.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  bench::g_log_name = "policy_bench";
  Options opt;
  bool rounds_given = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return bench::OptionValue(argc, argv, &i, Usage); };
    if (a == "--rounds") opt.rounds = std::atoi(next().c_str()), rounds_given = true;
    else if (a == "--parse-rounds") opt.parse_rounds = std::atoi(next().c_str());
    else if (a == "--cidrs") opt.cidrs = std::atoi(next().c_str());
    else if (a == "--paths") opt.paths = std::atoi(next().c_str());
    else if (a == "--poll-us") opt.poll_us = std::atoi(next().c_str());
    else if (a == "--out") opt.out = next();
    else if (a == "--seed") opt.seed = std::strtoull(next().c_str(), nullptr, 10);
    else if (a == "--quick") opt.quick = true;
    else if (a == "-h" || a == "--help") return Usage(), 0;
    else return Usage(), 2;
  }
  if (opt.quick) {
    if (!rounds_given) opt.rounds = 3;
    opt.cidrs = 10000;
    opt.paths = 1000;
  }
  if (opt.rounds < 1 || opt.cidrs < 10 || opt.cidrs > 100000 || opt.paths < 10 ||
      opt.paths > int(cordon::policy::kMaxFileRules))
    return Usage(), 2;
  if (geteuid() != 0) return Log("run as root"), 1;
  struct sigaction sa{};
  sa.sa_handler = OnSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  libbpf_set_print([](enum libbpf_print_level level, const char* fmt, va_list ap) {
    return level == LIBBPF_WARN ? std::vfprintf(stderr, fmt, ap) : 0;
  });
  try {
    return Run(opt);
  } catch (const std::exception& e) {
    Log("error: %s; cleaning up", e.what());
    Cleanup();
    return 1;
  }
}
