// B1: the cost of cordon's egress decision (see bench/README.md).
//
// One process, run as root, does everything: it creates cgroups under the
// cgroup2 mount (cordon-bench-<pid>/...), forks one worker per configuration
// and moves it into that configuration's cgroup, attaches cordon sandboxes
// with 10 .. 100k CIDR rules (the real loader: policy YAML -> parse ->
// compile -> AttachSandbox), a trivial "return 1" program, and nftables
// tables, then times ~10 ms bursts of UDP connect(), UDP sendto() and TCP
// connect+accept+close in a shuffled order, round after round. Each burst is
// compared with the unconfined burst of the same op in the same round; the
// median and quartiles of those per-round ratios are reported, with an A/A
// control (a second unconfined worker). The kernel's own per-program
// accounting (BPF_ENABLE_STATS) gives each program's ns per decision.
//
// Every worker lives in its own network namespace with its own loopback, and
// creates its receiving UDP socket and TCP listener before joining its cgroup:
// only the client side is confined, and the nftables rules (loaded into the
// nftables workers' namespaces only) cost nothing to the other workers.
//
// Output: JSON (stdout, or --out FILE); bench/report.py renders it.
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "abi/cordon_common.h"
#include "loader/sandbox.h"
#include "policy/compiler.h"
#include "policy/parser.h"
#include "sys/cgroup.h"

#include "bench_util.h"

namespace {

using cordon::CgroupRef;

constexpr uint16_t kPort = 18080;          // the allowed loopback destination, 127.0.0.1:kPort
constexpr const char* kAllowedAddr = "127.0.0.1";
constexpr const char* kDeniedAddr = "127.0.0.2";  // in no policy and no nftables set
constexpr int64_t kBurstTargetNs = 10'000'000;    // ~10 ms per burst

// udp_sendto_rotating: sendto() cycling through kRotatingDestinations
// addresses of kRotatingNet (allowed by the policies' second rule, bound by no
// socket), more than the allow cache's slots: the decision is the trie's, not
// the cache's, which a single repeated destination would measure instead.
enum Op : int { kUdpConnect = 0, kUdpSendto = 1, kTcpConnect = 2, kUdpSendtoRotating = 3, kNumOps = 4 };
const char* const kOpNames[kNumOps] = {"udp_connect", "udp_sendto", "tcp_connect", "udp_sendto_rotating"};
constexpr uint32_t kRotatingNet = 0x7f400000u;  // 127.64.0.0/16
constexpr int kRotatingDestinations = 4096;     // 16 x the allow cache (CORDON_ALLOW_CACHE_SLOTS)
enum Cmd : int { kCmdBurst = 1, kCmdCheck = 2, kCmdExit = 3 };

struct Request {
  int cmd;
  int op;
  int64_t count;
};
struct Reply {
  int64_t ns = 0;       // burst duration, CLOCK_MONOTONIC
  int err = 0;          // errno of the first failing call (0: all succeeded)
  int64_t dropped = 0;  // sendto: datagrams that did not arrive
  int check[3] = {0, 0, 0};  // denied check: connect errno, send-after-connect errno, sendto errno
};

using bench::Die;
using bench::CheckStop;
using bench::g_stop;
using bench::Log;
using bench::OnSignal;

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

sockaddr_in Addr(const char* ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip, &a.sin_addr);
  return a;
}

// ---- worker (child process) -------------------------------------------------

struct WorkerSockets {
  int udp_rx = -1;    // bound to 127.0.0.1:kPort, created outside the cgroup
  int listener = -1;  // TCP, 127.0.0.1:kPort, created outside the cgroup
  int udp_conn = -1;  // client sockets, created inside the cgroup
  int udp_send = -1;
};

void WorkerFail(int ctl, const char* what) {
  Reply r;
  r.err = errno ? errno : EIO;
  (void)!write(ctl, &r, sizeof r);
  std::fprintf(stderr, "egress_bench worker: %s: %s\n", what, std::strerror(r.err));
  _exit(1);
}

void DrainUdp(int fd, int64_t* received) {
  static char bufs[64][64];
  mmsghdr msgs[64];
  iovec iov[64];
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      iov[i] = {bufs[i], sizeof bufs[i]};
      msgs[i] = {};
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
    }
    int n = recvmmsg(fd, msgs, 64, MSG_DONTWAIT, nullptr);
    if (n <= 0) return;
    *received += n;
  }
}

Reply RunBurst(const WorkerSockets& s, int op, int64_t count) {
  Reply r;
  const sockaddr_in dst = Addr(kAllowedAddr, kPort);
  const sockaddr* sa = reinterpret_cast<const sockaddr*>(&dst);
  char payload[16] = "cordon-bench";
  int64_t t0 = NowNs();
  switch (op) {
    case kUdpConnect:
      for (int64_t i = 0; i < count; ++i)
        if (connect(s.udp_conn, sa, sizeof dst) != 0) return r.err = errno, r;
      break;
    case kUdpSendto:
      for (int64_t i = 0; i < count; ++i)
        if (sendto(s.udp_send, payload, sizeof payload, 0, sa, sizeof dst) != sizeof payload) return r.err = errno, r;
      break;
    case kUdpSendtoRotating: {
      sockaddr_in rot = dst;
      for (int64_t i = 0; i < count; ++i) {
        rot.sin_addr.s_addr = htonl(kRotatingNet | uint32_t(1 + i % kRotatingDestinations));
        if (sendto(s.udp_send, payload, sizeof payload, 0, reinterpret_cast<const sockaddr*>(&rot), sizeof rot) !=
            sizeof payload)
          return r.err = errno, r;
      }
      break;
    }
    case kTcpConnect:
      for (int64_t i = 0; i < count; ++i) {
        int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (c < 0) return r.err = errno, r;
        linger lg{1, 0};  // close with RST: no TIME_WAIT, no port exhaustion
        setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        if (connect(c, sa, sizeof dst) != 0) {
          r.err = errno;
          close(c);
          return r;
        }
        int a = accept4(s.listener, nullptr, nullptr, SOCK_CLOEXEC);
        if (a < 0) {
          r.err = errno;
          close(c);
          return r;
        }
        close(c);
        close(a);
      }
      break;
  }
  r.ns = NowNs() - t0;
  if (op == kUdpSendto) {
    int64_t received = 0;
    DrainUdp(s.udp_rx, &received);
    r.dropped = count - received;
  }
  return r;
}

Reply RunCheck() {
  Reply r;
  const sockaddr_in denied = Addr(kDeniedAddr, kPort);
  const sockaddr* sa = reinterpret_cast<const sockaddr*>(&denied);
  char payload[16] = "cordon-bench";
  int u = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  r.check[0] = connect(u, sa, sizeof denied) == 0 ? 0 : errno;
  r.check[1] = r.check[0] != 0 ? -1 : (send(u, payload, sizeof payload, 0) == sizeof payload ? 0 : errno);
  close(u);
  u = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  r.check[2] = sendto(u, payload, sizeof payload, 0, sa, sizeof denied) == sizeof payload ? 0 : errno;
  close(u);
  return r;
}

[[noreturn]] void WorkerMain(int ctl, const std::string& cgroup_procs) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  signal(SIGINT, SIG_IGN);  // the parent handles ^C and kills us
  signal(SIGTERM, SIG_DFL);
  if (getppid() == 1) _exit(1);
  // Own network namespace, loopback up.
  if (unshare(CLONE_NEWNET) != 0) WorkerFail(ctl, "unshare(CLONE_NEWNET)");
  {
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
    if (ioctl(fd, SIOCGIFFLAGS, &ifr) != 0) WorkerFail(ctl, "SIOCGIFFLAGS lo");
    ifr.ifr_flags |= IFF_UP;
    if (ioctl(fd, SIOCSIFFLAGS, &ifr) != 0) WorkerFail(ctl, "SIOCSIFFLAGS lo");
    close(fd);
  }
  WorkerSockets s;
  const sockaddr_in me = Addr(kAllowedAddr, kPort);
  int one = 1;
  s.udp_rx = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  int rcvbuf = 256 << 20;
  if (setsockopt(s.udp_rx, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf) != 0) WorkerFail(ctl, "SO_RCVBUFFORCE");
  if (bind(s.udp_rx, reinterpret_cast<const sockaddr*>(&me), sizeof me) != 0) WorkerFail(ctl, "bind udp");
  s.listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  setsockopt(s.listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(s.listener, reinterpret_cast<const sockaddr*>(&me), sizeof me) != 0) WorkerFail(ctl, "bind tcp");
  if (listen(s.listener, 4096) != 0) WorkerFail(ctl, "listen");
  // Join the configuration's cgroup; sockets created from here on belong to it.
  {
    int fd = open(cgroup_procs.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, "0", 1) != 1) WorkerFail(ctl, "join cgroup");
    close(fd);
  }
  s.udp_conn = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  s.udp_send = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s.udp_conn < 0 || s.udp_send < 0) WorkerFail(ctl, "socket");
  Reply ready;
  if (write(ctl, &ready, sizeof ready) != sizeof ready) _exit(1);
  for (;;) {
    Request q;
    ssize_t n = read(ctl, &q, sizeof q);
    if (n != sizeof q) _exit(n == 0 ? 0 : 1);
    Reply r;
    if (q.cmd == kCmdExit) _exit(0);
    if (q.cmd == kCmdBurst) r = RunBurst(s, q.op, q.count);
    if (q.cmd == kCmdCheck) r = RunCheck();
    if (write(ctl, &r, sizeof r) != sizeof r) _exit(1);
  }
}

// ---- configurations -----------------------------------------------------------

struct Config {
  std::string name;  // "unconfined", "unconfined-aa", "trivial", "cordon-1000", "nftables-1000"
  std::string kind;  // unconfined, aa, trivial, cordon, nftables
  int rules = 0;
  CgroupRef cgroup;
  pid_t pid = -1;
  int ctl = -1;
  uint64_t sandbox_id = 0;  // cordon: attached sandbox
  bool nft_loaded = false;
  std::string nft_file;
};

struct State {
  std::string mount;
  std::string root_rel;  // "/cordon-bench-<pid>"
  std::string tmpdir;
  std::vector<std::unique_ptr<Config>> configs;
  std::vector<int> trivial_links;
  std::vector<int> trivial_progs;  // connect4, sendmsg4, sock_create
  int stats_fd = -1;
  bool root_created = false;
};

State g;

Reply Ask(Config& c, const Request& q) {
  if (write(c.ctl, &q, sizeof q) != sizeof q) Die("write to worker " + c.name + ": " + std::strerror(errno));
  Reply r;
  for (;;) {
    ssize_t n = read(c.ctl, &r, sizeof r);
    if (n == sizeof r) break;
    if (n < 0 && errno == EINTR) {
      if (g_stop) Die("interrupted");
      continue;
    }
    Die("worker " + c.name + " died");
  }
  return r;
}

Reply Burst(Config& c, int op, int64_t count) {
  Reply r = Ask(c, Request{kCmdBurst, op, count});
  if (r.err) Die(std::string(kOpNames[op]) + " failed in " + c.name + ": " + std::strerror(r.err));
  return r;
}

void StartWorker(Config& c) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) Die("socketpair");
  std::string procs = c.cgroup.path + "/cgroup.procs";
  fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) Die("fork");
  if (pid == 0) {
    close(sv[0]);
    WorkerMain(sv[1], procs);
  }
  close(sv[1]);
  c.pid = pid;
  c.ctl = sv[0];
  Reply r;
  ssize_t n = read(c.ctl, &r, sizeof r);
  if (n != sizeof r || r.err) Die("worker " + c.name + " failed to start");
}

// ---- rules ----------------------------------------------------------------------

struct GenRule {
  uint32_t addr;  // host order
  int len;
  std::string ports;      // YAML flow list or "" (all ports)
  std::string protocols;  // YAML flow list or "" (tcp and udp)
};

std::string Ip(uint32_t a) {
  char b[32];
  std::snprintf(b, sizeof b, "%u.%u.%u.%u", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255);
  return b;
}

// n rules: 127.0.0.1/32 port kPort (tcp, udp), 127.64.0.0/16 port kPort (udp:
// the rotating destinations), then n-2 random, pairwise
// disjoint prefixes of lengths /12 to /32 spread over the /8s 1 to 223 but
// 127, with varied port sets. Deterministic (seeded by n).
std::vector<GenRule> GenerateRules(int n) {
  std::vector<GenRule> out;
  out.push_back({0x7f000001u, 32, "[" + std::to_string(kPort) + "]", "[tcp, udp]"});
  if (n >= 2) out.push_back({kRotatingNet, 16, "[" + std::to_string(kPort) + "]", "[udp]"});
  std::mt19937_64 rng(0xC0D0 + n);
  std::map<uint32_t, uint32_t> used;  // start -> end (inclusive), disjoint
  auto overlaps = [&](uint32_t s, uint32_t e) {
    auto it = used.upper_bound(e);
    if (it == used.begin()) return false;
    --it;
    return it->second >= s;
  };
  struct Choice {
    int len;
    int weight;
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
    uint32_t first = 1 + rng() % 223;  // 1..223
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

std::string PolicyYaml(const std::vector<GenRule>& rules, int n) {
  std::string y;
  y.reserve(rules.size() * 72 + 256);
  y += "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata:\n  name: bench-" + std::to_string(n) +
       "\nspec:\n  mode: enforce\n  network:\n    families: [unix, inet, inet6]\n    egress:\n";
  for (const auto& r : rules) {
    y += "      - {cidr: " + Ip(r.addr) + "/" + std::to_string(r.len);
    if (!r.ports.empty()) y += ", ports: " + r.ports;
    if (!r.protocols.empty()) y += ", protocols: " + r.protocols;
    y += "}\n";
  }
  return y;
}

// nftables: packets of sockets in the cgroup whose destination is not in the
// interval set of the same prefixes are dropped (ports are not matched: this
// favours nftables). The path is resolved by nft against /sys/fs/cgroup, so on
// a hybrid host it gets the "unified/" prefix and one more level.
std::string NftRuleset(const std::vector<GenRule>& rules, const std::string& nft_path, int level) {
  std::string s;
  s.reserve(rules.size() * 24 + 512);
  s += "table ip cordon_bench {\n  set allowed {\n    type ipv4_addr\n    flags interval\n    elements = {\n";
  for (size_t i = 0; i < rules.size(); ++i) {
    s += "      " + Ip(rules[i].addr) + "/" + std::to_string(rules[i].len);
    s += i + 1 < rules.size() ? ",\n" : "\n";
  }
  s += "    }\n  }\n  chain output {\n    type filter hook output priority 0; policy accept;\n";
  s += "    socket cgroupv2 level " + std::to_string(level) + " \"" + nft_path + "\" ip daddr != @allowed drop\n";
  s += "  }\n}\n";
  return s;
}

// Runs `nft args...` in the network namespace of `pid`.
int RunNftIn(pid_t pid, const std::vector<std::string>& args, bool quiet = false) {
  fflush(nullptr);
  pid_t child = fork();
  if (child < 0) Die("fork");
  if (child == 0) {
    std::string ns = "/proc/" + std::to_string(pid) + "/ns/net";
    int fd = open(ns.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) _exit(126);
    if (quiet) {
      int devnull = open("/dev/null", O_WRONLY);
      dup2(devnull, 2);
    }
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>("nft"));
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp("nft", argv.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

// ---- trivial program ------------------------------------------------------------

int LoadTrivial(bpf_prog_type type, bpf_attach_type attach, const char* name) {
  const bpf_insn insns[] = {
      {BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 1},  // r0 = 1
      {BPF_JMP | BPF_EXIT, 0, 0, 0, 0},                   // exit
  };
  LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = attach);
  int fd = bpf_prog_load(type, name, "GPL", insns, 2, &opts);
  if (fd < 0) Die(std::string("load trivial program ") + name + ": " + std::strerror(-fd));
  return fd;
}

void AttachTrivial(Config& c) {
  const bpf_attach_type types[] = {BPF_CGROUP_INET4_CONNECT, BPF_CGROUP_UDP4_SENDMSG, BPF_CGROUP_INET_SOCK_CREATE};
  for (size_t i = 0; i < 3; ++i) {
    int l = bpf_link_create(g.trivial_progs[i], c.cgroup.fd.get(), types[i], nullptr);
    if (l < 0) Die(std::string("attach trivial program: ") + std::strerror(-l));
    g.trivial_links.push_back(l);
  }
}

void DetachTrivial() {
  for (int l : g.trivial_links) close(l);  // the links' last fd: detached
  g.trivial_links.clear();
}

// ---- kernel accounting ------------------------------------------------------------

struct ProgRef {
  std::string config;
  int rules = 0;
  std::string hook;  // connect4, sendmsg4, sock_create
  int fd = -1;
  uint32_t id = 0;
};

std::pair<uint64_t, uint64_t> ProgStats(int fd) {
  bpf_prog_info info{};
  uint32_t len = sizeof info;
  if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0) Die("inspect program (bpf_obj_get_info_by_fd)");
  return {info.run_time_ns, info.run_cnt};
}

int ProgOfPinnedLink(const std::string& path, uint32_t* id) {
  int lfd = bpf_obj_get(path.c_str());
  if (lfd < 0) Die("open " + path + ": " + std::strerror(errno));
  bpf_link_info li{};
  uint32_t len = sizeof li;
  if (bpf_obj_get_info_by_fd(lfd, &li, &len) != 0) Die("inspect " + path);
  close(lfd);
  *id = li.prog_id;
  int pfd = bpf_prog_get_fd_by_id(li.prog_id);
  if (pfd < 0) Die("open program " + std::to_string(li.prog_id));
  return pfd;
}

// ---- statistics ---------------------------------------------------------------------

struct Summary {
  double median = NAN, q1 = NAN, q3 = NAN;
  size_t n = 0;
};

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  double pos = q * double(v.size() - 1);
  size_t lo = size_t(std::floor(pos)), hi = size_t(std::ceil(pos));
  return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
}

Summary Summarize(const std::vector<double>& v) {
  Summary s;
  s.n = v.size();
  if (v.empty()) return s;
  s.median = Quantile(v, 0.5);
  s.q1 = Quantile(v, 0.25);
  s.q3 = Quantile(v, 0.75);
  return s;
}

std::string Json(const Summary& s, int prec = 4) {
  char b[256];
  if (s.n == 0) return "null";
  std::snprintf(b, sizeof b, "{\"median\": %.*f, \"q1\": %.*f, \"q3\": %.*f, \"n\": %zu}", prec, s.median, prec, s.q1,
                prec, s.q3, s.n);
  return b;
}

std::string JsonStr(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += c;
    else if (c == '\n') o += "\\n";
    else if (static_cast<unsigned char>(c) < 0x20) o += ' ';
    else o += c;
  }
  return o + "\"";
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string ReadFirstLine(const std::string& path, const std::string& key) {
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) {
      auto p = line.find(':');
      return p == std::string::npos ? line : Trim(line.substr(p + 2));
    }
  return "";
}

// ---- cleanup ------------------------------------------------------------------------

void Cleanup() {
  if (g.stats_fd >= 0) close(g.stats_fd), g.stats_fd = -1;  // statistics off again
  for (auto& c : g.configs) {
    if (c->nft_loaded && c->pid > 0) {
      RunNftIn(c->pid, {"delete", "table", "ip", "cordon_bench"}, true);
      c->nft_loaded = false;
    }
  }
  for (auto& c : g.configs) {
    if (c->ctl >= 0) close(c->ctl), c->ctl = -1;
    if (c->pid > 0) {
      kill(c->pid, SIGKILL);
      while (waitpid(c->pid, nullptr, 0) < 0 && errno == EINTR) {
      }
      c->pid = -1;
    }
  }
  DetachTrivial();
  for (int p : g.trivial_progs) close(p);
  g.trivial_progs.clear();
  for (auto& c : g.configs) {
    if (c->sandbox_id) {
      cordon::Status s = cordon::DetachSandbox(c->sandbox_id);
      if (!s.ok()) Log("detach sandbox of %s: %s", c->name.c_str(), s.error().ToString().c_str());
      c->sandbox_id = 0;
    }
  }
  if (g.root_created) {
    auto root = cordon::ResolveCgroup(g.mount + g.root_rel);
    if (root) {
      cordon::Status s = cordon::KillAndRemoveCgroup(*root);
      if (!s.ok()) Log("remove cgroup %s: %s", g.root_rel.c_str(), s.error().ToString().c_str());
    }
    g.root_created = false;
  }
  if (!g.tmpdir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(g.tmpdir, ec);
    g.tmpdir.clear();
  }
}

// Sandboxes and cgroups left by an earlier run that was killed (SIGKILL).
void CleanStale() {
  auto list = cordon::ListSandboxes();
  if (list) {
    for (const auto& sb : *list) {
      if (sb.cgroup_path.rfind("/cordon-bench-", 0) != 0) continue;
      int pid = std::atoi(sb.cgroup_path.c_str() + std::strlen("/cordon-bench-"));
      if (pid > 0 && kill(pid, 0) == 0) continue;
      Log("removing stale sandbox on %s", sb.cgroup_path.c_str());
      (void)cordon::DetachSandbox(sb.id);
    }
  }
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(g.mount, ec)) {
    std::string name = e.path().filename();
    if (name.rfind("cordon-bench-", 0) != 0) continue;
    int pid = std::atoi(name.c_str() + std::strlen("cordon-bench-"));
    if (pid > 0 && kill(pid, 0) == 0) continue;
    auto cg = cordon::ResolveCgroup(e.path());
    if (cg) {
      Log("removing stale cgroup %s", e.path().c_str());
      (void)cordon::KillAndRemoveCgroup(*cg);
    }
  }
}

// ---- main ---------------------------------------------------------------------------

struct Options {
  int rounds = 200;
  int floor_rounds = 100;
  int stats_rounds = 50;
  std::vector<int> sizes = {10, 1000, 10000, 100000};
  std::string out;
  uint64_t seed = 0;
  bool quick = false;
};

void Usage() {
  std::fputs(
      "usage: egress_bench [--rounds N] [--quick] [--sizes 10,1000,...] [--seed N] [--out FILE]\n"
      "  B1 egress decision benchmark (root). Writes JSON to FILE (default stdout).\n"
      "  --rounds N   timed rounds (default 200); --quick: 20 rounds, sizes 10,1000\n",
      stderr);
}

int Run(const Options& opt) {
  std::mt19937_64 rng(opt.seed ? opt.seed : uint64_t(NowNs()));
  auto mount = cordon::FindCgroup2Mount();
  if (!mount) Die(mount.error().ToString());
  g.mount = *mount;
  CleanStale();

  // cgroup2 mount relative to /sys/fs/cgroup, for nft's path resolution.
  std::string nft_prefix;
  if (g.mount.rfind("/sys/fs/cgroup/", 0) == 0) nft_prefix = g.mount.substr(std::strlen("/sys/fs/cgroup/")) + "/";
  else if (g.mount != "/sys/fs/cgroup") Die("cgroup2 is mounted at " + g.mount + ", not under /sys/fs/cgroup");
  int nft_extra_level = nft_prefix.empty() ? 0 : int(std::count(nft_prefix.begin(), nft_prefix.end(), '/'));

  char tmpl[] = "/tmp/cordon-bench-XXXXXX";
  if (!mkdtemp(tmpl)) Die("mkdtemp");
  g.tmpdir = tmpl;
  g.root_rel = "/cordon-bench-" + std::to_string(getpid());

  auto add = [&](const std::string& name, const std::string& kind, int rules) {
    auto c = std::make_unique<Config>();
    c->name = name;
    c->kind = kind;
    c->rules = rules;
    auto cg = cordon::CreateCgroup(g.root_rel + "/" + name);
    g.root_created = true;
    if (!cg) Die(cg.error().ToString());
    c->cgroup = std::move(*cg);
    g.configs.push_back(std::move(c));
  };
  add("unconfined", "unconfined", 0);
  add("unconfined-aa", "aa", 0);
  add("trivial", "trivial", 0);
  for (int n : opt.sizes) add("cordon-" + std::to_string(n), "cordon", n);
  for (int n : opt.sizes) add("nftables-" + std::to_string(n), "nftables", n);
  Config& base = *g.configs[0];
  Config& triv = *g.configs[2];

  for (auto& c : g.configs) StartWorker(*c);
  Log("%zu workers started in %s%s", g.configs.size(), g.mount.c_str(), g.root_rel.c_str());

  // Burst sizes: ~10 ms of the unconfined op.
  int64_t count[kNumOps];
  for (int op = 0; op < kNumOps; ++op) {
    Burst(base, op, 200);  // warm up
    std::vector<double> per;
    for (int i = 0; i < 5; ++i) per.push_back(double(Burst(base, op, 500).ns) / 500.0);
    double ns = Quantile(per, 0.5);
    count[op] = std::max<int64_t>(50, int64_t(double(kBurstTargetNs) / ns));
    Log("%s: %.0f ns/op unconfined -> %" PRId64 " ops per burst", kOpNames[op], ns, count[op]);
  }

  // The trivial programs (loaded once; attached and detached below).
  g.trivial_progs.push_back(LoadTrivial(BPF_PROG_TYPE_CGROUP_SOCK_ADDR, BPF_CGROUP_INET4_CONNECT, "bench_triv_c4"));
  g.trivial_progs.push_back(LoadTrivial(BPF_PROG_TYPE_CGROUP_SOCK_ADDR, BPF_CGROUP_UDP4_SENDMSG, "bench_triv_s4"));
  g.trivial_progs.push_back(LoadTrivial(BPF_PROG_TYPE_CGROUP_SOCK, BPF_CGROUP_INET_SOCK_CREATE, "bench_triv_sc"));

  // Phase 0, host hook floor: nothing of ours attached vs the trivial program
  // attached to another cgroup (the unconfined worker's cost only). Valid only
  // if nothing else on the host has cgroup sock/sock_addr programs attached.
  std::vector<double> floor_ratio[kNumOps];
  for (int r = 0; r < opt.floor_rounds; ++r) {
    CheckStop();
    bool attached_first = rng() & 1;
    double clean[kNumOps], hooked[kNumOps];
    for (int phase = 0; phase < 2; ++phase) {
      bool attach = (phase == 0) == attached_first;
      if (attach) AttachTrivial(triv);
      int ops[kNumOps] = {0, 1, 2, 3};
      std::shuffle(ops, ops + kNumOps, rng);
      for (int op : ops) (attach ? hooked : clean)[op] = double(Burst(base, op, count[op]).ns);
      if (attach) DetachTrivial();
    }
    for (int op = 0; op < kNumOps; ++op) floor_ratio[op].push_back(hooked[op] / clean[op]);
  }
  Log("host hook floor measured (%d rounds)", opt.floor_rounds);

  // Attach everything for the main phase.
  AttachTrivial(triv);
  std::map<int, double> attach_ms, compile_ms, nft_ms;
  std::map<int, size_t> nft_elements;
  int nft_level = -1;
  for (int n : opt.sizes) {
    std::vector<GenRule> rules = GenerateRules(n);
    std::string yaml_path = g.tmpdir + "/policy-" + std::to_string(n) + ".yaml";
    {
      std::ofstream f(yaml_path);
      f << PolicyYaml(rules, n);
      if (!f) Die("write " + yaml_path);
    }
    Config* cc = nullptr;
    Config* nc = nullptr;
    for (auto& c : g.configs) {
      if (c->rules == n && c->kind == "cordon") cc = c.get();
      if (c->rules == n && c->kind == "nftables") nc = c.get();
    }
    int64_t t0 = NowNs();
    cordon::policy::ParsedPolicy parsed;
    cordon::policy::Diagnostics diags;
    if (!cordon::policy::ParsePolicyFile(yaml_path, &parsed, &diags))
      Die("parse " + yaml_path + ": " + cordon::policy::FormatDiagnostics(diags));
    cordon::policy::CompiledPolicy compiled;
    if (!cordon::policy::Compile(parsed, &compiled, &diags))
      Die("compile " + yaml_path + ": " + cordon::policy::FormatDiagnostics(diags));
    int64_t t1 = NowNs();
    cordon::AttachOptions ao;
    ao.name = cc->name;
    auto res = cordon::AttachSandbox(cc->cgroup, compiled, ao);
    if (!res) Die("attach " + cc->name + ": " + res.error().ToString());
    cc->sandbox_id = res->info.id;
    int64_t t2 = NowNs();
    compile_ms[n] = double(t1 - t0) / 1e6;
    attach_ms[n] = double(t2 - t1) / 1e6;
    Log("cordon-%d: parse+compile %.0f ms, attach %.0f ms (%zu trie entries)", n, compile_ms[n], attach_ms[n],
        compiled.addr_entries.size());

    // nftables, in the nftables worker's namespace.
    std::string nft_path = nft_prefix + nc->cgroup.relative.substr(1);
    int real_level = int(std::count(nc->cgroup.relative.begin(), nc->cgroup.relative.end(), '/'));
    nc->nft_file = g.tmpdir + "/nft-" + std::to_string(n) + ".nft";
    int64_t t3 = NowNs();
    bool ok = false;
    // platform.md: on a hybrid host nft wants "unified/<path>" and one more
    // level; the denied check below proves the rule matches.
    for (int level : {real_level + nft_extra_level, real_level}) {
      if (nft_level >= 0 && level != nft_level) continue;
      {
        std::ofstream f(nc->nft_file);
        f << NftRuleset(rules, nft_path, level);
      }
      if (RunNftIn(nc->pid, {"-f", nc->nft_file}) != 0) Die("nft -f " + nc->nft_file + " failed");
      nc->nft_loaded = true;
      Reply chk = Ask(*nc, Request{kCmdCheck, 0, 0});
      if (chk.check[2] == EPERM) {
        nft_level = level;
        ok = true;
        break;
      }
      RunNftIn(nc->pid, {"delete", "table", "ip", "cordon_bench"});
      nc->nft_loaded = false;
    }
    if (!ok) Die("the nftables rule for " + nc->name + " does not match its cgroup");
    nft_ms[n] = double(NowNs() - t3) / 1e6;
    nft_elements[n] = rules.size();
    Log("nftables-%d: loaded in %.0f ms (level %d, \"%s\")", n, nft_ms[n], nft_level, nft_path.c_str());
  }

  // One-off: a UDP connect() to a destination no rule allows.
  std::string checks_json;
  for (auto& c : g.configs) {
    Reply r = Ask(*c, Request{kCmdCheck, 0, 0});
    auto e = [](int v) { return v < 0 ? std::string("null") : JsonStr(v == 0 ? "ok" : strerrorname_np(v)); };
    if (!checks_json.empty()) checks_json += ",\n    ";
    checks_json += "{\"config\": " + JsonStr(c->name) + ", \"kind\": " + JsonStr(c->kind) +
                   ", \"rules\": " + std::to_string(c->rules) + ", \"udp_connect\": " + e(r.check[0]) +
                   ", \"send_after_connect\": " + e(r.check[1]) + ", \"udp_sendto\": " + e(r.check[2]) + "}";
  }

  // Main phase: rounds of shuffled configurations; one warm-up round first.
  const size_t nc = g.configs.size();
  std::vector<std::vector<double>> ratio(nc * kNumOps), nsop(nc * kNumOps), over_triv(nc * kNumOps);
  int64_t dropped = 0;
  int64_t t_main = NowNs();
  for (int r = -1; r < opt.rounds; ++r) {
    CheckStop();
    int ops[kNumOps] = {0, 1, 2, 3};
    std::shuffle(ops, ops + kNumOps, rng);
    for (int op : ops) {
      std::vector<size_t> order(nc);
      for (size_t i = 0; i < nc; ++i) order[i] = i;
      std::shuffle(order.begin(), order.end(), rng);
      std::vector<double> t(nc);
      for (size_t i : order) {
        Reply rep = Burst(*g.configs[i], op, count[op]);
        t[i] = double(rep.ns);
        dropped += rep.dropped;
      }
      if (r < 0) continue;
      for (size_t i = 0; i < nc; ++i) {
        ratio[i * kNumOps + op].push_back(t[i] / t[0]);
        nsop[i * kNumOps + op].push_back(t[i] / double(count[op]));
        over_triv[i * kNumOps + op].push_back((t[i] - t[2]) / double(count[op]));
      }
    }
    if (r >= 0 && (r + 1) % 25 == 0) Log("round %d/%d", r + 1, opt.rounds);
  }
  double main_s = double(NowNs() - t_main) / 1e9;

  // Kernel accounting: statistics on (BPF_ENABLE_STATS: what the sysctl
  // kernel.bpf_stats_enabled sets, and off again when the fd closes, even if
  // this process dies), per op a few bursts of each program's configuration.
  std::vector<ProgRef> progs;
  const char* hooks[] = {"connect4", "sendmsg4", "sock_create"};
  for (int i = 0; i < 3; ++i) {
    ProgRef p{"trivial", 0, hooks[i], g.trivial_progs[i], 0};
    bpf_prog_info info{};
    uint32_t len = sizeof info;
    bpf_obj_get_info_by_fd(p.fd, &info, &len);
    p.id = info.id;
    progs.push_back(p);
  }
  for (auto& c : g.configs) {
    if (c->kind != "cordon") continue;
    std::string dir = "/sys/fs/bpf/cordon/v" + std::to_string(CORDON_LAYOUT_VERSION) + "/sandboxes/" + std::to_string(c->sandbox_id);
    for (const char* h : hooks) {
      ProgRef p{c->name, c->rules, h, -1, 0};
      p.fd = ProgOfPinnedLink(dir + "/link_" + h, &p.id);
      progs.push_back(p);
    }
    // cordon's cgroup_skb/egress program (containment, egressBytes, the
    // resolver's mark): not a decision, but run for every packet sent.
    ProgRef p{c->name, c->rules, "egress", -1, 0};
    p.fd = ProgOfPinnedLink(dir + "/link_egress", &p.id);
    progs.push_back(p);
  }
  g.stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
  if (g.stats_fd < 0) Die(std::string("BPF_ENABLE_STATS: ") + std::strerror(-g.stats_fd));
  // Per burst: each program's run_time_ns and run_cnt before and after; the
  // median over bursts of ns per run (configurations in a shuffled order).
  std::string kernel_json;
  for (int op = 0; op < kNumOps; ++op) {
    std::vector<std::vector<double>> per(progs.size());
    std::vector<uint64_t> runs(progs.size(), 0), time_ns(progs.size(), 0);
    std::vector<Config*> order;
    for (auto& c : g.configs)
      if (c->kind == "trivial" || c->kind == "cordon") order.push_back(c.get());
    for (int r = 0; r < opt.stats_rounds; ++r) {
      CheckStop();
      std::shuffle(order.begin(), order.end(), rng);
      for (Config* c : order) {
        std::vector<size_t> mine;
        for (size_t i = 0; i < progs.size(); ++i)
          if (progs[i].config == c->name) mine.push_back(i);
        std::vector<std::pair<uint64_t, uint64_t>> before;
        for (size_t i : mine) before.push_back(ProgStats(progs[i].fd));
        Burst(*c, op, count[op]);
        for (size_t j = 0; j < mine.size(); ++j) {
          auto after = ProgStats(progs[mine[j]].fd);
          uint64_t dt = after.first - before[j].first, dc = after.second - before[j].second;
          if (dc == 0) continue;
          per[mine[j]].push_back(double(dt) / double(dc));
          runs[mine[j]] += dc;
          time_ns[mine[j]] += dt;
        }
      }
    }
    for (size_t i = 0; i < progs.size(); ++i) {
      if (runs[i] == 0) continue;
      if (!kernel_json.empty()) kernel_json += ",\n    ";
      Summary k = Summarize(per[i]);
      char b[640];
      std::snprintf(b, sizeof b,
                    "{\"op\": \"%s\", \"config\": %s, \"rules\": %d, \"hook\": \"%s\", \"prog_id\": %u, "
                    "\"run_cnt\": %" PRIu64 ", \"run_time_ns\": %" PRIu64 ", \"ns_per_run\": %.2f, "
                    "\"ns_per_run_bursts\": %s, \"runs_per_op\": %.3f}",
                    kOpNames[op], JsonStr(progs[i].config).c_str(), progs[i].rules, progs[i].hook.c_str(),
                    progs[i].id, runs[i], time_ns[i], k.median, Json(k, 2).c_str(),
                    double(runs[i]) / double(opt.stats_rounds * count[op]));
      kernel_json += b;
    }
  }
  close(g.stats_fd);
  g.stats_fd = -1;
  for (auto& p : progs)
    if (p.config != "trivial") close(p.fd);

  // JSON.
  utsname u{};
  uname(&u);
  char date[64];
  time_t now = time(nullptr);
  strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
  std::ostringstream o;
  o << "{\n  \"benchmark\": \"B1 egress decision\",\n";
  o << "  \"machine\": {\"nproc\": " << sysconf(_SC_NPROCESSORS_ONLN)
    << ", \"cpu\": " << JsonStr(ReadFirstLine("/proc/cpuinfo", "model name")) << ", \"kernel\": " << JsonStr(u.release)
    << ", \"date\": " << JsonStr(date) << ", \"cgroup2\": " << JsonStr(g.mount) << "},\n";
  o << "  \"params\": {\"rounds\": " << opt.rounds << ", \"floor_rounds\": " << opt.floor_rounds
    << ", \"stats_rounds\": " << opt.stats_rounds << ", \"burst_target_ms\": " << kBurstTargetNs / 1e6
    << ", \"burst_ops\": {";
  for (int op = 0; op < kNumOps; ++op) o << (op ? ", " : "") << "\"" << kOpNames[op] << "\": " << count[op];
  o << "}, \"sizes\": [";
  for (size_t i = 0; i < opt.sizes.size(); ++i) o << (i ? ", " : "") << opt.sizes[i];
  o << "], \"quick\": " << (opt.quick ? "true" : "false") << ", \"main_phase_s\": " << main_s
    << ", \"nft_level\": " << nft_level << ", \"sendto_dropped\": " << dropped << "},\n";
  o << "  \"setup\": [";
  bool first = true;
  for (int n : opt.sizes) {
    o << (first ? "" : ", ") << "{\"rules\": " << n << ", \"cordon_parse_compile_ms\": " << compile_ms[n]
      << ", \"cordon_attach_ms\": " << attach_ms[n] << ", \"nft_load_ms\": " << nft_ms[n]
      << ", \"nft_set_elements\": " << nft_elements[n] << "}";
    first = false;
  }
  o << "],\n  \"hook_floor\": {";
  for (int op = 0; op < kNumOps; ++op)
    o << (op ? ", " : "") << "\"" << kOpNames[op] << "\": " << Json(Summarize(floor_ratio[op]));
  o << "},\n  \"results\": [\n    ";
  first = true;
  for (size_t i = 0; i < nc; ++i) {
    for (int op = 0; op < kNumOps; ++op) {
      size_t k = i * kNumOps + op;
      o << (first ? "" : ",\n    ") << "{\"config\": " << JsonStr(g.configs[i]->name)
        << ", \"kind\": " << JsonStr(g.configs[i]->kind) << ", \"rules\": " << g.configs[i]->rules << ", \"op\": \""
        << kOpNames[op] << "\", \"ratio\": " << Json(Summarize(ratio[k])) << ", \"ns_per_op\": "
        << Json(Summarize(nsop[k]), 1) << ", \"ns_over_trivial\": " << Json(Summarize(over_triv[k]), 1) << "}";
      first = false;
    }
  }
  o << "\n  ],\n  \"kernel\": [\n    " << kernel_json << "\n  ],\n";
  o << "  \"denied_check\": {\"destination\": \"" << kDeniedAddr << ":" << kPort << "\", \"results\": [\n    "
    << checks_json << "\n  ]}\n}\n";

  Cleanup();
  if (bench::EmitJson(opt.out, o.str())) Log("wrote %s", opt.out.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  bench::g_log_name = "egress_bench";
  Options opt;
  bool rounds_given = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return bench::OptionValue(argc, argv, &i, Usage); };
    if (a == "--rounds") opt.rounds = std::atoi(next().c_str()), rounds_given = true;
    else if (a == "--out") opt.out = next();
    else if (a == "--seed") opt.seed = std::strtoull(next().c_str(), nullptr, 10);
    else if (a == "--quick") opt.quick = true;
    else if (a == "--sizes") {
      opt.sizes.clear();
      std::stringstream ss(next());
      std::string t;
      while (std::getline(ss, t, ',')) opt.sizes.push_back(std::atoi(t.c_str()));
    } else if (a == "-h" || a == "--help") {
      Usage();
      return 0;
    } else {
      Usage();
      return 2;
    }
  }
  if (opt.quick) {
    if (!rounds_given) opt.rounds = 20;
    opt.floor_rounds = 10;
    opt.stats_rounds = 5;
    opt.sizes = {10, 1000};
  }
  if (opt.rounds < 1 || opt.sizes.empty()) return Usage(), 2;
  for (int n : opt.sizes)
    if (n < 1 || n > 100000) return Log("rule counts must be 1..100000"), 2;
  if (geteuid() != 0) return Log("run as root"), 1;
  struct sigaction sa{};
  sa.sa_handler = OnSignal;  // no SA_RESTART: blocking reads return EINTR
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
