// B8: cordon's filtering DNS resolver (userspace/dns/), as NameService runs
// it for `cordon run` minus the BPF map writes: the added latency per lookup
// and the CPU per 1,000 queries, side by side with the same lookups sent to
// the upstream directly. See bench/README.md.
//
// A network namespace of its own (cordon-bench-dns-<pid>, loopback only) holds
// Debian's dnsmasq on 127.0.0.1:53 (host records, no query log) and cordon's
// resolver (dns::Server on 127.0.0.1, port 0, dns::Resolver with a small
// policy's rules, dns::SocketUpstreamClient to dnsmasq, and the check of who
// asks: a sock_diag lookup of each query's socket, its cgroup compared with
// the benchmark's own); the grants callback only counts them. A client on the main thread sends A queries one at a
// time (send, wait for the reply) in interleaved rounds: each round visits two
// placements (all on one CPU; client and servers on different CPUs) in a
// shuffled order and, in each, the direct batch (to dnsmasq), the resolver
// batch (an allowed name, forwarded) and the refused batch (an unlisted name,
// answered REFUSED locally) in a shuffled order. CPU: the scheduler's run time
// of the resolver's thread and of dnsmasq (schedstat, ns) and the client
// thread's CPU clock, over each batch. Never asserts a timing.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "abi/cordon_dns.h"
#include "bench_util.h"
#include "dns/ldns_include.h"
#include "dns/resolver.h"
#include "dns/server.h"
#include "policy/compiler.h"
#include "policy/parser.h"
#include "sys/cgroup.h"
#include "sys/sock_diag.h"

namespace {

using bench::CheckStop;
using bench::Die;
using bench::Json;
using bench::JsonStr;
using bench::Log;
using bench::NowNs;
using bench::OnSignal;
using bench::Summarize;
using namespace cordon;

constexpr const char* kNetnsPrefix = "cordon-bench-dns-";
constexpr const char* kAllowed = "allowed.test";
constexpr const char* kRefused = "unlisted.test";

struct Options {
  int queries = 5000;  // per side
  int rounds = 20;
  int warmup = 200;  // per side, untimed
  int cpu = 0;       // the client's CPU (and the servers' in one_cpu)
  uint64_t seed = 0;
  bool quick = false;
  std::string out;
};

void Usage() {
  std::fprintf(stderr,
               "usage: dns_bench [--queries N] [--rounds N] [--cpu N] [--quick] [--seed N] [--out FILE]\n"
               "  --queries N  lookups per side (direct, via the resolver, refused) and placement, default 5000\n"
               "  --rounds N   interleaved rounds the lookups are split into, default 20\n"
               "  --cpu N      the client's CPU (and the servers' in the one-CPU placement), default 0\n"
               "  --quick      300 lookups per side, 3 rounds (a smoke test)\n");
}

// Starts argv (PATH lookup) with stdout and stderr to /dev/null; its pid.
pid_t Spawn(const std::vector<std::string>& argv) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  const int null = open("/dev/null", O_WRONLY);
  if (null >= 0) dup2(null, 1), dup2(null, 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execvp(args[0], args.data());
  _exit(127);
}

// Runs argv (see Spawn); its exit status.
int Run(const std::vector<std::string>& argv) {
  const pid_t pid = Spawn(argv);
  if (pid < 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

// The scheduler's run time of a task in ns (first field of schedstat), -1
// if unreadable.
int64_t RunTimeNs(const std::string& schedstat) {
  std::ifstream f(schedstat);
  long long ns = -1;
  if (!(f >> ns)) return -1;
  return ns;
}

std::set<pid_t> Tasks() {
  std::set<pid_t> out;
  DIR* d = opendir("/proc/self/task");
  if (!d) Die("list /proc/self/task");
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') out.insert(pid_t(std::atoi(e->d_name)));
  closedir(d);
  return out;
}

int64_t ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// An A query for `name` with RD set, built with ldns; the ID is patched per
// lookup.
std::vector<uint8_t> AQuery(const std::string& name) {
  ldns_pkt* q = ldns_pkt_query_new(ldns_dname_new_frm_str(name.c_str()), LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN, LDNS_RD);
  uint8_t* buf = nullptr;
  size_t size = 0;
  const bool ok = ldns_pkt2wire(&buf, q, &size) == LDNS_STATUS_OK;
  ldns_pkt_free(q);
  if (!ok) Die("build a query for " + name);
  std::vector<uint8_t> out(buf, buf + size);
  std::free(buf);
  return out;
}

// What is created, removed in reverse on exit, error or signal.
struct State {
  std::string netns;
  int original_ns = -1;
  bool entered = false;
  pid_t dnsmasq = -1;
  std::unique_ptr<dns::Resolver> resolver;
  std::unique_ptr<dns::Server> server;
};
State g;

void Cleanup() {
  g.server.reset();  // joins its threads
  g.resolver.reset();
  if (g.dnsmasq > 0) {
    kill(g.dnsmasq, SIGTERM);
    int status = 0;
    while (waitpid(g.dnsmasq, &status, 0) < 0 && errno == EINTR) {
    }
    g.dnsmasq = -1;
  }
  if (g.entered) {
    if (setns(g.original_ns, CLONE_NEWNET) != 0) Log("warning: cannot return to the original network namespace");
    g.entered = false;
  }
  if (g.original_ns >= 0) close(g.original_ns), g.original_ns = -1;
  if (!g.netns.empty()) {
    if (Run({"ip", "netns", "del", g.netns}) != 0) Log("warning: ip netns del %s failed", g.netns.c_str());
    g.netns.clear();
  }
}

// Namespaces of earlier runs killed with SIGKILL (their pid is gone).
void RemoveStale() {
  DIR* d = opendir("/run/netns");
  if (!d) return;
  std::vector<std::string> stale;
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n.rfind(kNetnsPrefix, 0) != 0) continue;
    const pid_t pid = pid_t(std::atoi(n.c_str() + std::strlen(kNetnsPrefix)));
    if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) stale.push_back(n);
  }
  closedir(d);
  for (const auto& n : stale) {
    Log("removing stale network namespace %s", n.c_str());
    Run({"ip", "netns", "del", n});
  }
}

sockaddr_in Loopback(uint16_t port) {
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(port);
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return sin;
}

// A client UDP socket connected to 127.0.0.1:port; its datagrams carry
// `mark` if non-zero (SO_MARK: what the sandbox's egress program sets on its
// queries to its resolver).
class Client {
 public:
  explicit Client(uint16_t port, uint32_t mark = 0) : fd_(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) {
    if (fd_ < 0) Die("socket");
    if (mark && setsockopt(fd_, SOL_SOCKET, SO_MARK, &mark, sizeof mark) != 0) Die("SO_MARK");
    const sockaddr_in to = Loopback(port);
    if (connect(fd_, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0)
      Die("connect to port " + std::to_string(port));
  }
  ~Client() { close(fd_); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // One lookup: sends `query` with a fresh ID and waits for its reply
  // (timeout_ms). Returns the reply's rcode and answer count, or rcode -1 on
  // timeout.
  struct Reply {
    int rcode = -1;
    int answers = 0;
  };
  Reply Ask(std::vector<uint8_t>& query, int timeout_ms) {
    const uint16_t id = ++id_;
    query[0] = uint8_t(id >> 8), query[1] = uint8_t(id);
    if (send(fd_, query.data(), query.size(), 0) != ssize_t(query.size())) Die(std::string("send: ") + strerror(errno));
    const int64_t deadline = NowNs() + int64_t(timeout_ms) * 1'000'000;
    for (;;) {
      CheckStop();
      const int64_t left = deadline - NowNs();
      if (left <= 0) return {};
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, int(left / 1'000'000) + 1) <= 0) continue;
      uint8_t buf[1500];
      const ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n < 12) continue;
      if ((uint16_t(buf[0]) << 8 | buf[1]) != id || !(buf[2] & 0x80)) continue;  // stale or not a response
      return {buf[3] & 0x0f, int(uint16_t(buf[6]) << 8 | buf[7])};
    }
  }

 private:
  int fd_;
  uint16_t id_ = 0;
};

std::string PolicyText() {
  return R"(apiVersion: cordon/v1
kind: SandboxPolicy
metadata:
  name: b8
spec:
  network:
    egress:
      - host: allowed.test
        ports: [443]
        protocols: [tcp]
      - host: "*.cdn.test"
        ports: [443]
      - host: api.test
      - cidr: 10.0.0.0/8
)";
}

// Starts dnsmasq in the namespace (this thread is in it) and waits until it
// answers.
void StartDnsmasq() {
  if (access("/usr/sbin/dnsmasq", X_OK) != 0) Die("/usr/sbin/dnsmasq is missing (apt-get install dnsmasq-base)");
  const std::vector<std::string> argv = {"/usr/sbin/dnsmasq",
                                         "--keep-in-foreground",
                                         "--no-resolv",
                                         "--no-hosts",
                                         "--port=53",
                                         "--listen-address=127.0.0.1",
                                         "--bind-interfaces",
                                         "--log-facility=-",
                                         "--user=root",
                                         "--group=root",
                                         "--pid-file=",
                                         "--local-ttl=120",
                                         "--host-record=allowed.test,93.184.216.34,2606:2800:220:1::1",
                                         "--host-record=a.cdn.test,93.184.216.35",
                                         "--host-record=api.test,93.184.216.36",
                                         "--host-record=unlisted.test,93.184.216.40"};
  g.dnsmasq = Spawn(argv);  // its start-up lines to /dev/null (no query log)
  if (g.dnsmasq < 0) Die("fork");
  Client c(53);
  auto q = AQuery(kAllowed);
  for (int i = 0; i < 100; ++i) {
    if (c.Ask(q, 100).rcode == LDNS_RCODE_NOERROR) return;
    int status = 0;
    if (waitpid(g.dnsmasq, &status, WNOHANG) == g.dnsmasq) {
      g.dnsmasq = -1;
      Die("dnsmasq exited at start (status " + std::to_string(status) + ")");
    }
  }
  Die("dnsmasq does not answer on 127.0.0.1:53 after 10 s");
}

struct Side {
  const char* name = "";
  std::unique_ptr<Client> client;
  std::vector<uint8_t> query;
  int expect_rcode = 0;
  std::vector<double> latency_us;  // every lookup
  std::vector<double> batch_median_us;
  int64_t resolver_ns = 0, dnsmasq_ns = 0, client_ns = 0, wall_ns = 0;
  int64_t lookups = 0;
  void Set(const char* n, uint16_t port, const char* qname, int rcode, uint32_t mark = 0) {
    name = n, client = std::make_unique<Client>(port, mark), query = AQuery(qname), expect_rcode = rcode;
  }
};

struct Placement {
  const char* name = "";
  bool one_cpu = true;
  Side sides[3];  // direct, resolver, refused
  std::vector<double> ratio_per_round, refused_ratio_per_round;
};

int RunBench(const Options& opt) {
  const int64_t t_start = NowNs();
  RemoveStale();
  g.netns = kNetnsPrefix + std::to_string(getpid());
  if (Run({"ip", "netns", "add", g.netns}) != 0) {
    g.netns.clear();
    Die("ip netns add failed");
  }
  if (Run({"ip", "-n", g.netns, "link", "set", "lo", "up"}) != 0) Die("ip link set lo up failed");
  g.original_ns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  const int ns = open(("/run/netns/" + g.netns).c_str(), O_RDONLY | O_CLOEXEC);
  if (g.original_ns < 0 || ns < 0) Die("open the network namespaces");
  if (setns(ns, CLONE_NEWNET) != 0) Die("setns");  // this thread, and what it starts, in the namespace
  close(ns);
  g.entered = true;

  StartDnsmasq();
  const std::string dnsmasq_stat = "/proc/" + std::to_string(g.dnsmasq) + "/schedstat";
  if (RunTimeNs(dnsmasq_stat) < 0) Die("cannot read " + dnsmasq_stat);

  policy::ParsedPolicy parsed;
  policy::Diagnostics diags;
  policy::CompiledPolicy compiled;
  if (!policy::ParsePolicyText(PolicyText(), "b8.yaml", &parsed, &diags) || !policy::Compile(parsed, &compiled, &diags))
    Die("policy: " + policy::FormatDiagnostics(diags));
  std::string error;
  auto upstream = policy::ParseDnsUpstream("127.0.0.1:53", &error);
  if (!upstream) Die("upstream: " + error);
  dns::SocketUpstreamClient upstream_client;
  g.resolver =
      std::make_unique<dns::Resolver>(compiled.rules, std::vector<policy::DnsUpstream>{*upstream}, &upstream_client);
  std::atomic<uint64_t> grants{0}, decisions{0};
  policy::DnsUpstream listen = *upstream;
  listen.port = 0;
  const std::set<pid_t> before = Tasks();
  // Who asks is checked as cordon's NameService checks it: a UDP query must
  // carry the sandbox's mark (CORDON_RESOLVER_MARK, set by its egress
  // program; here by the client's SO_MARK) and come from a socket of the
  // sandbox's cgroup (a sock_diag lookup per query: here the benchmark's own
  // cgroup stands for the sandbox's). The benchmark's queries are marked, as
  // the sandbox's are; a truncated answer (an unmarked query's) stops it.
  auto mount = FindCgroup2Mount();
  if (!mount) Die("cgroup2: " + mount.error().ToString());
  std::string own_path;
  {
    std::ifstream in("/proc/self/cgroup");
    std::stringstream text;
    text << in.rdbuf();
    own_path = text.str();
  }
  own_path = own_path.substr(own_path.find("0::") + 3);
  own_path = own_path.substr(0, own_path.find('\n'));
  struct stat own_st {};
  if (::stat((*mount + own_path).c_str(), &own_st) != 0) Die("stat of the benchmark's cgroup " + *mount + own_path);
  const uint64_t own_cgroup = own_st.st_ino;
  std::atomic<uint64_t> peers_refused{0};
  auto server = dns::Server::Start(
      listen, g.resolver.get(),
      [&](const std::vector<dns::Grant>& gs) {
        grants += gs.size();
        return true;
      },
      [&](const dns::QueryDecision&) { ++decisions; },
      [&](const sockaddr_storage& peer, const sockaddr_storage& self, int protocol) {
        auto found = FindLoopbackPeer(peer, self, static_cast<uint8_t>(protocol));
        const bool ok = found && (found->cgroup_id == 0 || found->cgroup_id == own_cgroup);
        if (!ok) ++peers_refused;
        return ok;
      },
      CORDON_RESOLVER_MARK);
  if (!server.ok()) Die("dns::Server::Start: " + server.error().ToString());
  g.server = std::move(*server);
  std::vector<pid_t> server_tids;  // the server's threads (UDP is served on one)
  std::vector<std::string> server_stats;
  for (pid_t t : Tasks())
    if (!before.count(t))
      server_tids.push_back(t), server_stats.push_back("/proc/self/task/" + std::to_string(t) + "/schedstat");
  if (server_tids.size() != 1) Die("expected one server thread, found " + std::to_string(server_tids.size()));
  auto resolver_ns = [&] {
    int64_t sum = 0;
    for (const auto& s : server_stats) sum += std::max<int64_t>(0, RunTimeNs(s));
    return sum;
  };
  const uint16_t port = g.server->port();
  Log("dnsmasq pid %d on 127.0.0.1:53, resolver on 127.0.0.1:%u (%zu thread(s)), namespace %s", int(g.dnsmasq),
      unsigned(port), server_stats.size(), g.netns.c_str());

  // Where the three tasks run: all on one CPU ("one_cpu"), or the client on
  // one CPU and both servers (the resolver's thread, dnsmasq) on the other
  // ("split": every lookup then crosses CPUs twice on either side). Left to
  // the scheduler, the placement changes from round to round and this VM's
  // cross-CPU wake-ups are slow, so the figures jump (see bench/README.md).
  const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  const int other_cpu = int((opt.cpu + 1) % ncpu);
  auto pin = [&](pid_t t, int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(t, sizeof set, &set) != 0) Die("sched_setaffinity " + std::to_string(t));
  };
  auto place = [&](bool one_cpu) {
    pin(pid_t(gettid()), opt.cpu);
    pin(server_tids.front(), one_cpu ? opt.cpu : other_cpu);
    pin(g.dnsmasq, one_cpu ? opt.cpu : other_cpu);
  };
  Placement placements[2];
  placements[0].name = "one_cpu", placements[0].one_cpu = true;
  placements[1].name = "split", placements[1].one_cpu = false;
  const int nplacements = ncpu >= 2 ? 2 : 1;  // one CPU: no split
  for (Placement& pl : placements) {
    pl.sides[0].Set("direct", 53, kAllowed, LDNS_RCODE_NOERROR);
    pl.sides[1].Set("resolver", port, kAllowed, LDNS_RCODE_NOERROR, CORDON_RESOLVER_MARK);
    pl.sides[2].Set("refused", port, kRefused, LDNS_RCODE_REFUSED, CORDON_RESOLVER_MARK);
  }
  // Warm-up, and the answers' check: the allowed name has its one A record
  // on both paths; the unlisted one is refused.
  auto ask_untimed = [&](Side& s, int n) {
    for (int i = 0; i < n; ++i) {
      const auto r = s.client->Ask(s.query, 2000);
      if (r.rcode != s.expect_rcode)
        Die(std::string(s.name) + ": unexpected reply (rcode " + std::to_string(r.rcode) + ")");
      if (s.expect_rcode == LDNS_RCODE_NOERROR && r.answers != 1)
        Die(std::string(s.name) + ": expected 1 answer, got " + std::to_string(r.answers));
    }
  };
  for (int p = 0; p < nplacements; ++p) {
    place(placements[p].one_cpu);
    for (Side& s : placements[p].sides) ask_untimed(s, opt.warmup);
  }
  const uint64_t served_before = g.server->queries();

  std::mt19937_64 rng(opt.seed ? opt.seed : uint64_t(NowNs()));
  int failures = 0;
  for (int round = 0; round < opt.rounds; ++round) {
    const int n = opt.queries / opt.rounds + (round < opt.queries % opt.rounds ? 1 : 0);
    int porder[2] = {0, 1};
    std::shuffle(porder, porder + nplacements, rng);
    for (int j = 0; j < nplacements; ++j) {
      Placement& pl = placements[porder[j]];
      place(pl.one_cpu);
      for (Side& s : pl.sides) ask_untimed(s, 10);  // settle after the switch
      int order[3] = {0, 1, 2};
      std::shuffle(order, order + 3, rng);
      for (int k : order) {
        Side& s = pl.sides[k];
        std::vector<double> lat;
        lat.reserve(size_t(n));
        const int64_t r0 = resolver_ns(), d0 = RunTimeNs(dnsmasq_stat), c0 = ThreadCpuNs(), w0 = NowNs();
        for (int i = 0; i < n; ++i) {
          const int64_t t0 = NowNs();
          const auto r = s.client->Ask(s.query, 2000);
          const int64_t t1 = NowNs();
          if (r.rcode != s.expect_rcode) {
            ++failures;
            continue;
          }
          lat.push_back(double(t1 - t0) / 1e3);
        }
        const int64_t w1 = NowNs(), c1 = ThreadCpuNs(), d1 = RunTimeNs(dnsmasq_stat), r1 = resolver_ns();
        s.wall_ns += w1 - w0;
        s.client_ns += c1 - c0;
        s.dnsmasq_ns += d1 - d0;
        s.resolver_ns += r1 - r0;
        s.lookups += int64_t(lat.size());
        s.batch_median_us.push_back(lat.empty() ? NAN : bench::Quantile(lat, 0.5));
        s.latency_us.insert(s.latency_us.end(), lat.begin(), lat.end());
      }
      const double direct = pl.sides[0].batch_median_us.back();
      pl.ratio_per_round.push_back(pl.sides[1].batch_median_us.back() / direct);
      pl.refused_ratio_per_round.push_back(pl.sides[2].batch_median_us.back() / direct);
      Log("round %d/%d, %s: median direct %.1f us, via resolver %.1f us, refused %.1f us", round + 1, opt.rounds,
          pl.name, direct, pl.sides[1].batch_median_us.back(), pl.sides[2].batch_median_us.back());
    }
  }
  if (peers_refused) Die(std::to_string(peers_refused.load()) + " queries refused by the peer check");
  if (g.server->truncated())
    Die(std::to_string(g.server->truncated()) + " queries answered truncated (their mark did not arrive)");
  if (!g.server->reads_marks()) Die("this kernel does not report marks (SO_RCVMARK)");
  if (failures > opt.queries / 100) Die(std::to_string(failures) + " lookups failed (timeout or unexpected rcode)");
  const uint64_t served = g.server->queries() - served_before;

  std::ostringstream o;
  o << "{\n  \"benchmark\": \"B8 DNS resolver\",\n";
  o << "  \"machine\": " << bench::MachineJson() << ",\n";
  o << "  \"params\": {\"queries\": " << opt.queries << ", \"rounds\": " << opt.rounds << ", \"warmup\": " << opt.warmup
    << ", \"client_cpu\": " << opt.cpu << ", \"servers_cpu_split\": " << other_cpu
    << ", \"quick\": " << (opt.quick ? "true" : "false") << ", \"allowed_name\": " << JsonStr(kAllowed)
    << ", \"refused_name\": " << JsonStr(kRefused) << ", \"qtype\": \"A\", \"transport\": \"udp\""
    << ", \"upstream\": \"dnsmasq on 127.0.0.1:53 (host records, no query log, default cache)\""
    << ", \"grants\": \"recorded by the callback, not written to BPF maps\", \"total_s\": "
    << double(NowNs() - t_start) / 1e9 << "},\n";
  o << "  \"results\": {\n";
  for (int p = 0; p < nplacements; ++p) {
    const Placement& pl = placements[p];
    o << "    " << JsonStr(pl.name) << ": {\n";
    for (const Side& s : pl.sides) {
      auto per1k = [&](int64_t ns) { return s.lookups ? double(ns) / 1e6 * 1000.0 / double(s.lookups) : NAN; };
      const bool any = !s.latency_us.empty();
      char b[1024];
      std::snprintf(b, sizeof b,
                    "      %s: {\"lookups\": %lld, \"latency_us\": {\"median\": %.2f, \"p90\": %.2f, \"p99\": %.2f, "
                    "\"min\": %.2f, \"max\": %.2f}, \"batch_median_us\": %s, \"wall_ms\": %.1f, "
                    "\"cpu_ms_per_1000\": {\"resolver\": %.3f, \"dnsmasq\": %.3f, \"client\": %.3f}},\n",
                    JsonStr(s.name).c_str(), (long long)s.lookups, any ? bench::Quantile(s.latency_us, 0.5) : NAN,
                    any ? bench::Quantile(s.latency_us, 0.9) : NAN, any ? bench::Quantile(s.latency_us, 0.99) : NAN,
                    any ? *std::min_element(s.latency_us.begin(), s.latency_us.end()) : NAN,
                    any ? *std::max_element(s.latency_us.begin(), s.latency_us.end()) : NAN,
                    Json(Summarize(s.batch_median_us), 2).c_str(), double(s.wall_ns) / 1e6, per1k(s.resolver_ns),
                    per1k(s.dnsmasq_ns), per1k(s.client_ns));
      o << b;
    }
    const double direct = bench::Quantile(pl.sides[0].latency_us, 0.5),
                 via = bench::Quantile(pl.sides[1].latency_us, 0.5);
    o << "      \"ratio_of_medians\": " << via / direct << ", \"added_us\": " << via - direct << ",\n";
    o << "      \"ratio_per_round\": " << Json(Summarize(pl.ratio_per_round), 4) << ",\n";
    o << "      \"refused_ratio_per_round\": " << Json(Summarize(pl.refused_ratio_per_round), 4) << "\n    },\n";
  }
  o << "    \"failures\": " << failures << ", \"server_queries\": " << served << ", \"grants\": " << grants.load()
    << ", \"decisions\": " << decisions.load() << "\n  }\n}\n";
  Cleanup();
  if (bench::EmitJson(opt.out, o.str())) Log("wrote %s", opt.out.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  bench::g_log_name = "dns_bench";
  Options opt;
  bool queries_given = false, rounds_given = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return bench::OptionValue(argc, argv, &i, Usage); };
    if (a == "--queries")
      opt.queries = std::atoi(next().c_str()), queries_given = true;
    else if (a == "--rounds")
      opt.rounds = std::atoi(next().c_str()), rounds_given = true;
    else if (a == "--cpu")
      opt.cpu = std::atoi(next().c_str());
    else if (a == "--out")
      opt.out = next();
    else if (a == "--seed")
      opt.seed = std::strtoull(next().c_str(), nullptr, 10);
    else if (a == "--quick")
      opt.quick = true;
    else if (a == "-h" || a == "--help")
      return Usage(), 0;
    else
      return Usage(), 2;
  }
  if (opt.quick) {
    if (!queries_given) opt.queries = 300;
    if (!rounds_given) opt.rounds = 3;
    opt.warmup = 20;
  }
  if (opt.rounds < 1 || opt.queries < opt.rounds || opt.cpu < 0 || opt.cpu >= sysconf(_SC_NPROCESSORS_ONLN))
    return Usage(), 2;
  if (geteuid() != 0) return Log("run as root"), 1;
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  try {
    return RunBench(opt);
  } catch (const std::exception& e) {
    Log("error: %s; cleaning up", e.what());
    Cleanup();
    return 1;
  }
}
