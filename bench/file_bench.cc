// B2: the cost of cordon's file decision under BPF LSM (see bench/README.md).
//
// Needs a kernel where BPF LSM works (bench/run.sh runs it in the 6.12 VM of
// tests/vm). It times open()+close() of an allowed file at path depth 3 and
// 20 (components below /), in short bursts, in one worker process per
// configuration:
//   unconfined             nothing of anyone's attached to file_open/inode_permission
//   unconfined-aa          the A/A control (a second unconfined worker, in its own phase)
//   landlock-N             Landlock ruleset with the same N read rules (per process)
//   trivial-fo             a host-wide lsm/file_open program that returns 0
//   trivial-fo-ip          ... plus lsm/inode_permission returning 0 (cordon hooks both)
//   cordon-outside         cordon loaded, the worker in no sandbox (what every process pays)
//   cordon-N               the worker in a cordon sandbox whose policy has N read rules
// BPF LSM programs are global, so the configurations that differ only in what
// is attached host-wide are "phases": each round visits the phases in a
// shuffled order, attaching and detaching the programs between them (cordon's
// own file_open and inode_permission programs are taken over from their pins
// for this, and pinned back at the end), and in each phase its workers and the
// two depths in a shuffled order. Every burst is divided by the unconfined
// worker's burst of the same depth in the same round. The A/A control runs in
// a phase of its own, so it also checks that switching phases is fair.
//
// Afterwards BPF run-time statistics give each program's own cost per run and
// runs per open (the profile available in a TCG guest).
//
// Output: JSON (stdout, or --out FILE); bench/report.py renders it.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench_lsm.skel.h"
#include "bench_util.h"
#include "confine/landlock.h"
#include "loader/lsm.h"
#include "loader/sandbox.h"
#include "policy/compiler.h"
#include "policy/parser.h"
#include "sys/cgroup.h"

namespace {

using bench::Die;
using bench::Json;
using bench::JsonStr;
using bench::NowNs;
using bench::Summarize;
using bench::Summary;

constexpr int64_t kBurstTargetNs = 10'000'000;  // ~10 ms per burst
// read3: pread() of one byte through a descriptor opened once per burst (the
// depth-3 file): what file_permission costs on every read and write of an
// open file (its verdict is cached per struct file).
enum Op : int { kDepth3 = 0, kDepth20 = 1, kRead3 = 2, kNumOps = 3 };
const int kDepth[kNumOps] = {3, 20, 3};
const char* const kOpNames[kNumOps] = {"depth3", "depth20", "read3"};
enum Cmd : int { kCmdBurst = 1, kCmdCheck = 2 };
enum Phase : int { kN1 = 0, kN2, kT1, kT2, kC, kNumPhases };
const char* const kPhaseNames[kNumPhases] = {"none", "none-2", "trivial-fo", "trivial-fo-ip", "cordon"};

struct Request {
  int cmd;
  int op;
  int64_t count;
};
struct Reply {
  int64_t ns = 0;
  int err = 0;
  int check = 0;  // errno of opening the denied file (0: it opened)
};

using bench::CheckStop;
using bench::g_stop;
using bench::Log;
using bench::OnSignal;

// ---- worker -------------------------------------------------------------------

struct WorkerPaths {
  std::string file[kNumOps];
  std::string denied;
};

[[noreturn]] void WorkerMain(int ctl, const std::string& procs, int landlock_fd, const WorkerPaths& paths) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_DFL);
  if (getppid() == 1) _exit(1);
  Reply ready;
  int fd = open(procs.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write(fd, "0", 1) != 1) ready.err = errno ? errno : EIO;
  if (fd >= 0) close(fd);
  if (!ready.err && landlock_fd >= 0) ready.err = cordon::ApplyLandlockInChild(landlock_fd);
  if (write(ctl, &ready, sizeof ready) != sizeof ready || ready.err) _exit(1);
  const char* file[kNumOps] = {paths.file[0].c_str(), paths.file[1].c_str(), paths.file[2].c_str()};
  for (;;) {
    Request q;
    ssize_t n = read(ctl, &q, sizeof q);
    if (n != sizeof q) _exit(n == 0 ? 0 : 1);
    Reply r;
    if (q.cmd == kCmdBurst) {
      const char* p = file[q.op];
      int64_t t0 = NowNs();
      if (q.op == kRead3) {
        int f = open(p, O_RDONLY | O_CLOEXEC);
        char byte;
        if (f < 0) r.err = errno;
        for (int64_t i = 0; f >= 0 && i < q.count; ++i)
          if (pread(f, &byte, 1, 0) != 1) {
            r.err = errno ? errno : EIO;
            break;
          }
        if (f >= 0) close(f);
      }
      for (int64_t i = 0; q.op != kRead3 && i < q.count; ++i) {
        int f = open(p, O_RDONLY | O_CLOEXEC);
        if (f < 0) {
          r.err = errno;
          break;
        }
        close(f);
      }
      r.ns = NowNs() - t0;
    } else if (q.cmd == kCmdCheck) {
      for (int op = 0; op < kNumOps && !r.err; ++op) {
        int f = open(file[op], O_RDONLY | O_CLOEXEC);
        if (f < 0) r.err = errno;
        else close(f);
      }
      int f = open(paths.denied.c_str(), O_RDONLY | O_CLOEXEC);
      r.check = f < 0 ? errno : 0;
      if (f >= 0) close(f);
    }
    if (write(ctl, &r, sizeof r) != sizeof r) _exit(1);
  }
}

// ---- configurations -----------------------------------------------------------

struct Config {
  std::string name, kind;  // kind: unconfined, aa, landlock, trivial-fo, trivial-fo-ip, cordon-outside, cordon
  int rules = 0;
  Phase phase = kN1;
  cordon::CgroupRef cgroup;
  pid_t pid = -1;
  int ctl = -1;
  uint64_t sandbox_id = 0;
  std::optional<cordon::LandlockPlan> landlock;
};

// A program attached host-wide on demand (bench's trivial ones, cordon's taken over).
struct Toggle {
  std::string name;
  int prog_fd = -1;
  int link_fd = -1;
  std::string repin;  // cordon's: pin the link here again at the end
  bool owns_prog = false;
};

struct State {
  std::string mount, root_rel, tree;
  std::vector<std::unique_ptr<Config>> configs;
  bench_lsm* skel = nullptr;
  std::vector<Toggle> toggles;  // 0 bench fo, 1 bench ip, 2 cordon fo, 3 cordon ip
  int stats_fd = -1;
  bool root_created = false;
};
State g;

void Attach(Toggle& t) {
  if (t.link_fd >= 0) return;
  int l = bpf_link_create(t.prog_fd, 0, BPF_LSM_MAC, nullptr);
  if (l < 0) l = bpf_raw_tracepoint_open(nullptr, t.prog_fd);
  if (l < 0) Die("attach " + t.name + ": " + std::strerror(-l));
  t.link_fd = l;
}
void Detach(Toggle& t) {
  if (t.link_fd < 0) return;
  close(t.link_fd);  // the link's last reference: detached
  t.link_fd = -1;
}

void EnterPhase(Phase p) {
  bool want[4] = {p == kT1 || p == kT2, p == kT2, p == kC, p == kC};
  for (size_t i = 0; i < g.toggles.size(); ++i)
    if (!want[i]) Detach(g.toggles[i]);
  for (size_t i = 0; i < g.toggles.size(); ++i)
    if (want[i]) Attach(g.toggles[i]);
}

// cordon's programs for `names`, taken from their pinned links: the pins are
// removed (so the links detach) and the programs kept, to be attached per phase.
void TakeOverCordon(const std::vector<std::string>& names) {
  const std::string dir = "/sys/fs/bpf/cordon/v" + std::to_string(CORDON_LAYOUT_VERSION) + "/lsm";
  for (const auto& n : names) {
    std::string pin = dir + "/link_" + n;
    int lfd = bpf_obj_get(pin.c_str());
    if (lfd < 0) Die("open " + pin + ": " + std::strerror(errno));
    uint32_t id = bench::LinkProgId(lfd);
    int pfd = id ? bpf_prog_get_fd_by_id(id) : -1;
    if (pfd < 0) Die("program of " + pin);
    Toggle t;
    t.name = n;
    t.prog_fd = pfd;
    t.repin = pin;
    t.owns_prog = true;
    if (unlink(pin.c_str()) != 0) Die("unpin " + pin);
    close(lfd);
    g.toggles.push_back(t);
  }
}

// Puts cordon's taken-over programs back as the product left them (attached, pinned).
void RestoreCordon() {
  for (auto& t : g.toggles) {
    if (t.repin.empty()) continue;
    Detach(t);
    Attach(t);
    if (bpf_obj_pin(t.link_fd, t.repin.c_str()) != 0) Log("re-pin %s: %s", t.repin.c_str(), std::strerror(errno));
    Detach(t);  // pinned: stays attached
    t.repin.clear();
  }
}

// Every other program of cordon's LSM object (should not run on open/close).
std::vector<std::pair<std::string, int>> OtherCordonProgs() {
  std::vector<std::pair<std::string, int>> out;
  const std::string dir = "/sys/fs/bpf/cordon/v" + std::to_string(CORDON_LAYOUT_VERSION) + "/lsm";
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n.rfind("link_", 0) != 0) continue;
    int lfd = bpf_obj_get((dir + "/" + n).c_str());
    if (lfd < 0) continue;
    uint32_t id = bench::LinkProgId(lfd);
    close(lfd);
    int pfd = id ? bpf_prog_get_fd_by_id(id) : -1;
    if (pfd >= 0) out.push_back({n.substr(5), pfd});
  }
  closedir(d);
  return out;
}

Reply Ask(Config& c, const Request& q) {
  if (write(c.ctl, &q, sizeof q) != sizeof q) Die("write to worker " + c.name);
  Reply r;
  for (;;) {
    ssize_t n = read(c.ctl, &r, sizeof r);
    if (n == sizeof r) break;
    if (n < 0 && errno == EINTR) {
      CheckStop();
      continue;
    }
    Die("worker " + c.name + " died");
  }
  return r;
}

Reply Burst(Config& c, int op, int64_t count) {
  Reply r = Ask(c, Request{kCmdBurst, op, count});
  if (r.err) Die(std::string("open() at ") + kOpNames[op] + " failed in " + c.name + ": " + std::strerror(r.err));
  return r;
}

void StartWorker(Config& c, const WorkerPaths& paths) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) Die("socketpair");
  std::string procs = c.cgroup.path + "/cgroup.procs";
  int ll = c.landlock && c.landlock->ruleset.valid() ? c.landlock->ruleset.get() : -1;
  fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) Die("fork");
  if (pid == 0) {
    close(sv[0]);
    WorkerMain(sv[1], procs, ll, paths);
  }
  close(sv[1]);
  c.pid = pid;
  c.ctl = sv[0];
  Reply r;
  if (read(c.ctl, &r, sizeof r) != sizeof r || r.err) Die("worker " + c.name + " failed to start");
}

void Cleanup() {
  if (g.stats_fd >= 0) close(g.stats_fd), g.stats_fd = -1;
  for (auto& c : g.configs) {
    if (c->ctl >= 0) close(c->ctl), c->ctl = -1;
    if (c->pid > 0) {
      kill(c->pid, SIGKILL);
      while (waitpid(c->pid, nullptr, 0) < 0 && errno == EINTR) {
      }
      c->pid = -1;
    }
  }
  for (auto& t : g.toggles) Detach(t);
  RestoreCordon();
  for (auto& t : g.toggles)
    if (t.owns_prog && t.prog_fd >= 0) close(t.prog_fd);
  g.toggles.clear();
  if (g.skel) bench_lsm__destroy(g.skel), g.skel = nullptr;
  for (auto& c : g.configs) {
    if (c->sandbox_id) {
      cordon::Status s = cordon::DetachSandbox(c->sandbox_id);
      if (!s.ok()) Log("detach sandbox of %s: %s", c->name.c_str(), s.error().ToString().c_str());
      c->sandbox_id = 0;
    }
  }
  if (g.root_created) {
    auto root = cordon::ResolveCgroup(g.mount + g.root_rel);
    if (root) (void)cordon::KillAndRemoveCgroup(*root);
    g.root_created = false;
  }
  if (!g.tree.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(g.tree, ec);
    std::filesystem::remove_all(g.tree + "-denied", ec);
    g.tree.clear();
  }
}

// ---- policy -----------------------------------------------------------------------

std::string PolicyYaml(const std::string& tree, int n) {
  std::string y = "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata:\n  name: b2-" + std::to_string(n) +
                  "\nspec:\n  mode: enforce\n  files:\n    read:\n      - " + tree + "\n";
  for (int i = 1; i < n; ++i) {
    char b[32];
    std::snprintf(b, sizeof b, "/other/o%05d", i);
    y += "      - " + tree + b + "\n";
  }
  return y;
}

cordon::policy::CompiledPolicy CompileYaml(const std::string& yaml, const std::string& name) {
  cordon::policy::ParsedPolicy parsed;
  cordon::policy::Diagnostics diags;
  if (!cordon::policy::ParsePolicyText(yaml, name, &parsed, &diags))
    Die("parse " + name + ": " + cordon::policy::FormatDiagnostics(diags));
  cordon::policy::CompiledPolicy compiled;
  if (!cordon::policy::Compile(parsed, &compiled, &diags))
    Die("compile " + name + ": " + cordon::policy::FormatDiagnostics(diags));
  return compiled;
}

// ---- main -----------------------------------------------------------------------

struct Options {
  int rounds = 150;
  int stats_rounds = 30;
  std::vector<int> rules = {10, 1000};
  std::string out;
  uint64_t seed = 0;
  bool quick = false;
};

void Usage() {
  std::fputs(
      "usage: file_bench [--rounds N] [--quick] [--rules 10,1000] [--seed N] [--out FILE]\n"
      "  B2 file decision benchmark (root, a kernel with usable BPF LSM). JSON to FILE (default stdout).\n"
      "  --rounds N   timed rounds (default 150); --quick: 15 rounds, rules 10\n",
      stderr);
}

int Run(const Options& opt) {
  std::mt19937_64 rng(opt.seed ? opt.seed : uint64_t(NowNs()));
  const cordon::LsmAvailability& lsm = cordon::ProbeLsm();
  if (!lsm.usable()) Die("BPF LSM is not usable here (" + lsm.detail + "); run it in the VM: bench/run.sh --only b2");
  cordon::LandlockSupport ll_support = cordon::ProbeLandlock();
  if (ll_support.abi == 0) Die("Landlock unavailable: " + ll_support.detail);
  auto mount = cordon::FindCgroup2Mount();
  if (!mount) Die(mount.error().ToString());
  g.mount = *mount;

  // The tree: <tree>/f (depth 3) and <tree>/d01/.../d17/f (depth 20); the
  // rule names <tree>; the other rules name files under <tree>/other. The
  // denied file lies outside <tree>.
  char tmpl[] = "/tmp/cordon-b2-XXXXXX";
  if (!mkdtemp(tmpl)) Die("mkdtemp");
  g.tree = tmpl;
  WorkerPaths paths;
  {
    paths.file[kDepth3] = g.tree + "/f";
    std::string d = g.tree;
    for (int i = 1; i <= 17; ++i) {
      char b[8];
      std::snprintf(b, sizeof b, "/d%02d", i);
      d += b;
      if (mkdir(d.c_str(), 0755) != 0) Die("mkdir " + d);
    }
    paths.file[kDepth20] = d + "/f";
    paths.file[kRead3] = paths.file[kDepth3];
    for (int op = 0; op < kNumOps; ++op) {
      bench::WriteFileOrDie(paths.file[op], "cordon bench\n");
      int depth = int(std::count(paths.file[op].begin(), paths.file[op].end(), '/'));
      if (depth != kDepth[op]) Die("depth of " + paths.file[op] + " is " + std::to_string(depth));
    }
    if (mkdir((g.tree + "/other").c_str(), 0755) != 0) Die("mkdir other");
    int most = *std::max_element(opt.rules.begin(), opt.rules.end());
    for (int i = 1; i < most; ++i) {
      char b[32];
      std::snprintf(b, sizeof b, "/other/o%05d", i);
      bench::WriteFileOrDie(g.tree + b, "");
    }
    if (mkdir((g.tree + "-denied").c_str(), 0755) != 0) Die("mkdir denied");
    paths.denied = g.tree + "-denied/f";
    bench::WriteFileOrDie(paths.denied, "secret\n");
  }

  g.root_rel = "/cordon-b2-" + std::to_string(getpid());
  auto add = [&](const std::string& name, const std::string& kind, int rules, Phase phase) -> Config& {
    auto c = std::make_unique<Config>();
    c->name = name;
    c->kind = kind;
    c->rules = rules;
    c->phase = phase;
    auto cg = cordon::CreateCgroup(g.root_rel + "/" + name);
    g.root_created = true;
    if (!cg) Die(cg.error().ToString());
    c->cgroup = std::move(*cg);
    g.configs.push_back(std::move(c));
    return *g.configs.back();
  };
  add("unconfined", "unconfined", 0, kN1);
  add("unconfined-aa", "aa", 0, kN2);
  for (int n : opt.rules) add("landlock-" + std::to_string(n), "landlock", n, kN1);
  add("trivial-fo", "trivial-fo", 0, kT1);
  add("trivial-fo-ip", "trivial-fo-ip", 0, kT2);
  add("cordon-outside", "cordon-outside", 0, kC);
  for (int n : opt.rules) add("cordon-" + std::to_string(n), "cordon", n, kC);

  // Policies: Landlock plans and cordon sandboxes.
  std::map<int, double> attach_ms;
  for (auto& c : g.configs) {
    if (c->kind != "landlock" && c->kind != "cordon") continue;
    auto compiled = CompileYaml(PolicyYaml(g.tree, c->rules), c->name + ".yaml");
    if (compiled.file_rules.size() != size_t(c->rules)) Die("policy of " + c->name + " has the wrong rule count");
    if (c->kind == "landlock") {
      auto plan = cordon::PrepareLandlock(compiled, ll_support);
      if (!plan) Die("Landlock for " + c->name + ": " + plan.error().ToString());
      if (!plan->files) Die("Landlock plan for " + c->name + " enforces no file rules");
      c->landlock = std::move(*plan);
    } else {
      cordon::AttachOptions ao;
      ao.name = c->name;
      int64_t t0 = NowNs();
      auto res = cordon::AttachSandbox(c->cgroup, compiled, ao);
      if (!res) Die("attach " + c->name + ": " + res.error().ToString());
      attach_ms[c->rules] = double(NowNs() - t0) / 1e6;
      c->sandbox_id = res->info.id;
      if (!res->info.lsm) Die("sandbox " + c->name + " is not enforced by BPF LSM");
      Log("%s attached in %.0f ms", c->name.c_str(), attach_ms[c->rules]);
    }
  }

  // Host-wide programs switched per phase.
  g.skel = bench_lsm__open_and_load();
  if (!g.skel) Die(std::string("load bench_lsm: ") + std::strerror(errno));
  for (bpf_program* p : {g.skel->progs.bench_file_open, g.skel->progs.bench_inode_permission}) {
    Toggle t;
    t.name = bpf_program__name(p);
    t.prog_fd = bpf_program__fd(p);
    g.toggles.push_back(t);
  }
  TakeOverCordon({"cordon_file_open", "cordon_inode_permission"});

  for (auto& c : g.configs) StartWorker(*c, paths);
  Log("%zu workers started in %s%s", g.configs.size(), g.mount.c_str(), g.root_rel.c_str());

  // Enforcement check: each worker opens both files, then a file outside the tree.
  std::string checks_json;
  for (Phase p : {kN1, kN2, kT1, kT2, kC}) {
    EnterPhase(p);
    for (auto& c : g.configs) {
      if (c->phase != p) continue;
      Reply r = Ask(*c, Request{kCmdCheck, 0, 0});
      if (r.err) Die("allowed file refused in " + c->name + ": " + std::strerror(r.err));
      bool confined = c->kind == "landlock" || c->kind == "cordon";
      if (confined != (r.check != 0)) Die("denied file in " + c->name + ": " + (r.check ? strerrorname_np(r.check) : "opened"));
      if (!checks_json.empty()) checks_json += ", ";
      checks_json += "{\"config\": " + JsonStr(c->name) + ", \"denied_file\": " +
                     JsonStr(r.check ? strerrorname_np(r.check) : "opened") + "}";
    }
  }

  // Burst sizes: ~10 ms of the unconfined op.
  EnterPhase(kN1);
  Config& base = *g.configs[0];
  int64_t count[kNumOps];
  for (int op = 0; op < kNumOps; ++op) {
    Burst(base, op, 300);
    std::vector<double> per;
    for (int i = 0; i < 9; ++i) per.push_back(double(Burst(base, op, 300).ns) / 300.0);
    // The fastest of them: a slow moment of the host (or TCG re-translating
    // code right after a phase switch) must not make every burst short.
    double ns = *std::min_element(per.begin(), per.end());
    count[op] = std::max<int64_t>(20, int64_t(double(kBurstTargetNs) / ns));
    Log("%s: %.0f ns per open+close unconfined -> %" PRId64 " per burst", kOpNames[op], ns, count[op]);
  }

  // Main phase.
  const size_t nc = g.configs.size();
  std::vector<std::vector<double>> ratio(nc * kNumOps), nsop(nc * kNumOps);
  std::vector<double> switch_ms;
  int64_t t_main = NowNs();
  for (int r = -1; r < opt.rounds; ++r) {
    CheckStop();
    std::vector<int> phases = {kN1, kN2, kT1, kT2, kC};
    std::shuffle(phases.begin(), phases.end(), rng);
    std::vector<double> t(nc * kNumOps, 0);
    for (int p : phases) {
      int64_t s0 = NowNs();
      EnterPhase(Phase(p));
      switch_ms.push_back(double(NowNs() - s0) / 1e6);
      std::vector<size_t> members;
      for (size_t i = 0; i < nc; ++i)
        if (g.configs[i]->phase == p) members.push_back(i);
      Burst(*g.configs[members[0]], kDepth20, 20);  // warm-up after the switch (TCG retranslates patched code)
      int ops[kNumOps] = {0, 1, 2};
      std::shuffle(ops, ops + kNumOps, rng);
      for (int op : ops) {
        std::shuffle(members.begin(), members.end(), rng);
        for (size_t i : members) t[i * kNumOps + op] = double(Burst(*g.configs[i], op, count[op]).ns);
      }
    }
    if (r < 0) continue;
    for (size_t i = 0; i < nc; ++i)
      for (int op = 0; op < kNumOps; ++op) {
        ratio[i * kNumOps + op].push_back(t[i * kNumOps + op] / t[op]);
        nsop[i * kNumOps + op].push_back(t[i * kNumOps + op] / double(count[op]));
      }
    if ((r + 1) % 25 == 0) Log("round %d/%d", r + 1, opt.rounds);
  }
  double main_s = double(NowNs() - t_main) / 1e9;

  // Kernel accounting: per phase, bursts of each of its workers, each
  // program's run_time_ns / run_cnt over the burst.
  auto others = OtherCordonProgs();
  g.stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
  if (g.stats_fd < 0) Die(std::string("BPF_ENABLE_STATS: ") + std::strerror(-g.stats_fd));
  struct Acc {
    std::vector<double> ns_per_run, runs_per_op, ns_per_op;
  };
  std::map<std::tuple<std::string, int, std::string>, Acc> acc;  // (config, op, prog)
  std::map<std::pair<std::string, int>, uint64_t> other_runs;
  std::map<std::string, uint64_t> other_by_prog;
  for (int r = 0; r < opt.stats_rounds; ++r) {
    CheckStop();
    std::vector<int> phases = {kN1, kT1, kT2, kC};
    std::shuffle(phases.begin(), phases.end(), rng);
    for (int p : phases) {
      EnterPhase(Phase(p));
      std::vector<size_t> members;
      for (size_t i = 0; i < nc; ++i)
        if (g.configs[i]->phase == p) members.push_back(i);
      Burst(*g.configs[members[0]], kDepth20, 20);
      for (int op = 0; op < kNumOps; ++op) {
        std::shuffle(members.begin(), members.end(), rng);
        for (size_t i : members) {
          std::vector<std::pair<uint64_t, uint64_t>> before, obefore;
          for (auto& t : g.toggles) before.push_back(bench::ProgStats(t.prog_fd));
          for (auto& o : others) obefore.push_back(bench::ProgStats(o.second));
          Burst(*g.configs[i], op, count[op]);
          for (size_t k = 0; k < g.toggles.size(); ++k) {
            auto after = bench::ProgStats(g.toggles[k].prog_fd);
            uint64_t dt = after.first - before[k].first, dc = after.second - before[k].second;
            if (dc == 0) continue;
            Acc& a = acc[{g.configs[i]->name, op, g.toggles[k].name}];
            a.ns_per_run.push_back(double(dt) / double(dc));
            a.runs_per_op.push_back(double(dc) / double(count[op]));
            a.ns_per_op.push_back(double(dt) / double(count[op]));
          }
          for (size_t k = 0; k < others.size(); ++k) {
            auto after = bench::ProgStats(others[k].second);
            uint64_t dc = after.second - obefore[k].second;
            other_runs[{g.configs[i]->name, op}] += dc;
            if (dc) other_by_prog[others[k].first] += dc;
          }
        }
      }
    }
  }
  close(g.stats_fd);
  g.stats_fd = -1;
  for (auto& o : others) close(o.second);

  // JSON.
  std::ostringstream o;
  o << "{\n  \"benchmark\": \"B2 file decision\",\n";
  o << "  \"machine\": " << bench::MachineJson() << ",\n";
  const char* host_kernel = getenv("CORDON_BENCH_HOST_KERNEL");
  const char* host_cpu = getenv("CORDON_BENCH_HOST_CPU");
  o << "  \"host\": {\"kernel\": " << JsonStr(host_kernel ? host_kernel : "") << ", \"cpu\": "
    << JsonStr(host_cpu ? host_cpu : "") << ", \"vm\": " << JsonStr(getenv("CORDON_VM") ? "qemu TCG (tests/vm)" : "")
    << "},\n";
  o << "  \"params\": {\"rounds\": " << opt.rounds << ", \"stats_rounds\": " << opt.stats_rounds
    << ", \"burst_target_ms\": " << kBurstTargetNs / 1e6 << ", \"burst_ops\": {\"depth3\": " << count[0]
    << ", \"depth20\": " << count[1] << ", \"read3\": " << count[2] << "}, \"rules\": [";
  for (size_t i = 0; i < opt.rules.size(); ++i) o << (i ? ", " : "") << opt.rules[i];
  o << "], \"files\": {\"depth3\": " << JsonStr(paths.file[0]) << ", \"depth20\": " << JsonStr(paths.file[1])
    << "}, \"rule_path\": " << JsonStr(g.tree) << ", \"lsm_list\": " << JsonStr(lsm.lsm_list)
    << ", \"landlock_abi\": " << ll_support.abi << ", \"main_phase_s\": " << main_s
    << ", \"phase_switch_ms\": " << Json(Summarize(switch_ms), 3) << ", \"attach_ms\": {";
  bool first = true;
  for (auto& [n, ms] : attach_ms) o << (first ? "" : ", ") << "\"" << n << "\": " << ms, first = false;
  o << "}},\n  \"checks\": [" << checks_json << "],\n  \"results\": [\n    ";
  first = true;
  for (size_t i = 0; i < nc; ++i)
    for (int op = 0; op < kNumOps; ++op) {
      size_t k = i * kNumOps + op;
      o << (first ? "" : ",\n    ") << "{\"config\": " << JsonStr(g.configs[i]->name) << ", \"kind\": "
        << JsonStr(g.configs[i]->kind) << ", \"rules\": " << g.configs[i]->rules << ", \"phase\": \""
        << kPhaseNames[g.configs[i]->phase] << "\", \"op\": \"" << kOpNames[op] << "\", \"depth\": " << kDepth[op]
        << ", \"ratio\": " << Json(Summarize(ratio[k])) << ", \"ns_per_op\": " << Json(Summarize(nsop[k]), 1) << "}";
      first = false;
    }
  o << "\n  ],\n  \"kernel\": [\n    ";
  first = true;
  for (auto& [key, a] : acc) {
    auto& [config, op, prog] = key;
    o << (first ? "" : ",\n    ") << "{\"config\": " << JsonStr(config) << ", \"op\": \"" << kOpNames[op]
      << "\", \"prog\": " << JsonStr(prog) << ", \"ns_per_run\": " << Json(Summarize(a.ns_per_run), 1)
      << ", \"runs_per_op\": " << Json(Summarize(a.runs_per_op), 3) << ", \"ns_per_op\": "
      << Json(Summarize(a.ns_per_op), 1) << "}";
    first = false;
  }
  o << "\n  ],\n  \"other_cordon_programs\": {\"count\": " << others.size() << ", \"runs\": [";
  first = true;
  for (auto& [key, n] : other_runs) {
    o << (first ? "" : ", ") << "{\"config\": " << JsonStr(key.first) << ", \"op\": \"" << kOpNames[key.second]
      << "\", \"runs\": " << n << "}";
    first = false;
  }
  o << "], \"by_program\": {";
  first = true;
  for (auto& [n, c] : other_by_prog) o << (first ? "" : ", ") << JsonStr(n) << ": " << c, first = false;
  o << "}}\n}\n";

  Cleanup();
  if (bench::EmitJson(opt.out, o.str())) Log("wrote %s", opt.out.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  bench::g_log_name = "file_bench";
  Options opt;
  bool rounds_given = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return bench::OptionValue(argc, argv, &i, Usage); };
    if (a == "--rounds") opt.rounds = std::atoi(next().c_str()), rounds_given = true;
    else if (a == "--stats-rounds") opt.stats_rounds = std::atoi(next().c_str());
    else if (a == "--out") opt.out = next();
    else if (a == "--seed") opt.seed = std::strtoull(next().c_str(), nullptr, 10);
    else if (a == "--quick") opt.quick = true;
    else if (a == "--rules") {
      opt.rules.clear();
      std::stringstream ss(next());
      std::string t;
      while (std::getline(ss, t, ',')) opt.rules.push_back(std::atoi(t.c_str()));
    } else if (a == "-h" || a == "--help") {
      Usage();
      return 0;
    } else {
      Usage();
      return 2;
    }
  }
  if (opt.quick) {
    if (!rounds_given) opt.rounds = 15;
    opt.stats_rounds = 5;
    opt.rules = {10};
  }
  if (opt.rounds < 1 || opt.rules.empty()) return Usage(), 2;
  for (int n : opt.rules)
    if (n < 1 || n > 10000) return Log("rule counts must be 1..10000"), 2;
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
