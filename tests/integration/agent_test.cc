// `cordon agent`: the event daemon, with the real binary on the host kernel.
//
// Each test runs its own agent (socket, lock and audit file in a scratch
// directory; CORDON_AGENT_SOCKET points the CLI at it) whose adopt scope is
// this test process's cgroups and sandbox names only, so agents of
// concurrent test runs, and the sandboxes of other suites, are left alone.
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "abi/cordon_common.h"
#include "abi/cordon_pins.h"
#include "agent/control.h"
#include "events/decoder.h"
#include "events/json_line.h"
#include "loader/sandbox.h"
#include "tests/common/dns_message.h"
#include "tests/common/jwt_verify.h"
#include "tests/integration/dnsmasq_netns.h"
#include "tests/integration/harness.h"
#include "tests/integration/learn_window.h"
#include "tests/integration/oom_victim.h"
#include "tests/integration/rsyslog_collector.h"
#include "util/text.h"

namespace cordon::test {
namespace {

using cordon::v1::AuditEvent;

// Whether this binary (and so the agent, built with the same flags) runs
// under AddressSanitizer.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

int64_t RealNs() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

std::string NamePrefix() { return "agenttest-" + std::to_string(::getpid()) + "-"; }

// A child process whose stdout lines are collected, each with the
// CLOCK_REALTIME at which it arrived.
class LineReader {
 public:
  explicit LineReader(const std::vector<std::string>& argv) {
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      int devnull = ::open("/dev/null", O_WRONLY);
      ::dup2(devnull, 2);
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execvp(args[0], args.data());
      _exit(127);
    }
    ::close(out[1]);
    fd_ = out[0];
    thread_ = std::thread([this] {
      std::string pending;
      char buf[65536];
      for (;;) {
        ssize_t n = ::read(fd_, buf, sizeof buf);
        if (n <= 0) break;
        int64_t now = RealNs();
        pending.append(buf, static_cast<size_t>(n));
        size_t start = 0;
        std::lock_guard<std::mutex> lock(mu_);
        for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1)
          lines_.push_back({pending.substr(start, nl - start), now});
        pending.erase(0, start);
      }
    });
  }
  ~LineReader() { Stop(); }
  int Stop() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);  // our own child
      ::waitpid(pid_, &status_, 0);
      pid_ = -1;
    }
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    return status_;
  }
  std::vector<std::pair<std::string, int64_t>> Lines() {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }
  size_t Count() {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_.size();
  }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  int status_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::pair<std::string, int64_t>> lines_;
};

// One agent for one test.
class TestAgent {
 public:
  explicit TestAgent(const std::string& extra_yaml = "", bool metrics = false) {
    char tmpl[] = "/tmp/cordon-agent-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    config_ = dir_ + "/agent.yaml";
    socket_ = dir_ + "/agent.sock";
    audit_ = dir_ + "/audit.jsonl";
    // extra_yaml may give the sinks itself.
    std::ofstream(config_) << "socket: " << socket_ << "\n"
                           << (extra_yaml.find("sinks:") == std::string::npos
                                   ? "sinks:\n  - kind: jsonl\n    path: " + audit_ + "\n    fsync: never\n"
                                   : std::string())
                           << "metrics:\n  listen: \"" << (metrics ? "127.0.0.1:0" : "")
                           << "\"\nadopt:\n  cgroupPrefixes: [/cordon-test-" << ::getpid()
                           << "-]\n  namePrefixes: [" << NamePrefix() << "]\n"
                           << (extra_yaml.find("oidc:") == std::string::npos  // not the host's keys
                                   ? "oidc:\n  keyDir: " + dir_ + "/oidc\n  publishDir: \"\"\n"
                                   : std::string())
                           << extra_yaml;
    const char* old = std::getenv("CORDON_AGENT_SOCKET");
    if (old) old_env_ = old, had_env_ = true;
    ::setenv("CORDON_AGENT_SOCKET", socket_.c_str(), 1);
  }
  ~TestAgent() {
    if (pid_ > 0) Stop();
    if (had_env_) ::setenv("CORDON_AGENT_SOCKET", old_env_.c_str(), 1);
    else ::unsetenv("CORDON_AGENT_SOCKET");
    cordon::test::Run({"rm", "-rf", dir_});
  }

  // Starts `cordon agent` and waits until it answers.
  bool Start() {
    std::string log = dir_ + "/agent.log." + std::to_string(starts_++);
    logs_.push_back(log);
    pid_ = ::fork();
    if (pid_ == 0) {
      if (files_soft_limit_) {  // as a service manager's default would set it
        rlimit files = {};
        ::getrlimit(RLIMIT_NOFILE, &files);
        files.rlim_cur = files_soft_limit_;
        ::setrlimit(RLIMIT_NOFILE, &files);
      }
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::execl(CORDON_BINARY, CORDON_BINARY, "agent", "--config", config_.c_str(), nullptr);
      _exit(127);
    }
    return WaitFor(
        [&] {
          int status;
          if (::waitpid(pid_, &status, WNOHANG) == pid_) {
            pid_ = -1;
            exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            return true;
          }
          return Status().has_value();
        },
        10000) &&
           pid_ > 0;
  }
  // The soft RLIMIT_NOFILE the agent starts with (0: the test's own).
  void set_files_soft_limit(rlim_t n) { files_soft_limit_ = n; }
  // Runs the agent to completion (it is expected to refuse to start).
  CommandResult StartExpectingFailure() {
    return cordon::test::Run({CORDON_BINARY, "agent", "--config", config_});
  }
  void Kill9() {
    ::kill(pid_, SIGKILL);  // our own child
    int status;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  int Stop() {
    ::kill(pid_, SIGTERM);  // our own child
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  std::optional<cordon::v1::StatusReply> Status() {
    auto client = agent::AgentClient::Connect(socket_);
    if (!client) return std::nullopt;
    cordon::v1::Request request;
    request.mutable_status();
    auto response = client->Call(request, 5000);
    if (!response || !response->error().empty()) return std::nullopt;
    return response->status();
  }
  std::optional<cordon::v1::SandboxAccounting> Sandbox(uint64_t id) {
    auto s = Status();
    if (!s) return std::nullopt;
    for (const auto& sb : s->sandboxes())
      if (sb.id() == id) return sb;
    return std::nullopt;
  }
  // The audit file's events of one sandbox.
  std::vector<AuditEvent> Audit(uint64_t sandbox_id) {
    std::vector<AuditEvent> out;
    for (auto& e : ParseJsonLines(Slurp(audit_), /*growing=*/true))
      if (e.sandbox_cgroup_id() == sandbox_id) out.push_back(std::move(e));
    return out;
  }
  std::string Log(size_t i) const { return i < logs_.size() ? Slurp(logs_[i]) : ""; }

  const std::string& socket() const { return socket_; }
  const std::string& dir() const { return dir_; }
  const std::string& audit() const { return audit_; }
  const std::string& config() const { return config_; }
  int pid() const { return pid_; }

 private:
  std::string dir_, config_, socket_, audit_;
  std::vector<std::string> logs_;
  int starts_ = 0;
  pid_t pid_ = -1;
  int exit_status_ = -1;
  rlim_t files_soft_limit_ = 0;
  std::string old_env_;
  bool had_env_ = false;
};

struct Accounting {
  uint64_t delivered = 0;   // occurrences of `kind` the records stand for (their kernel repeats too)
  uint64_t records = 0;     // records of `kind`
  uint64_t repeats = 0;     // of delivered: counted by the kernel (Repeats.count)
  uint64_t suppressed = 0;  // sum of suppressed records
  uint64_t lost = 0;        // sum of loss records
  uint64_t suppressed_records = 0;
  bool final_suppressed = false;
};

Accounting Account(const std::vector<AuditEvent>& events, const std::string& kind) {
  Accounting a;
  for (const auto& e : events) {
    if (e.kind() == kind) {
      a.delivered += Occurrences(e);
      a.records++;
      a.repeats += e.repeats().count();
    }
    if (e.kind() == "loss") a.lost += e.loss().dropped();
    if (e.kind() == "suppressed") {
      a.suppressed += e.suppressed().count();
      a.suppressed_records++;
      a.final_suppressed = e.suppressed().final();
    }
  }
  return a;
}

uint64_t KernelCounter(uint64_t sandbox_id, int counter) {
  auto info = GetSandbox(sandbox_id);
  return info ? info->counters[counter] : 0;
}

// n sendto() of one byte to `addr` from one UDP socket, as fast as a loop
// goes; after a tenth of them, one byte on `midway_fd`. Returns how many
// were refused with EPERM.
int SendtoFlood(const sockaddr_storage& addr, int n, int midway_fd) {
  int fd = ::socket(addr.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const socklen_t len = addr.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  int refused = 0;
  for (int i = 0; i < n; ++i) {
    refused += ::sendto(fd, "x", 1, 0, reinterpret_cast<const sockaddr*>(&addr), len) < 0 && errno == EPERM;
    if (i == n / 10) (void)!::write(midway_fd, "x", 1);
  }
  ::close(fd);
  return refused;
}

// The whole response of the agent's HTTP listener at 127.0.0.1:port to a GET.
std::string HttpGet(uint16_t port, const std::string& path) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_storage addr = V4("127.0.0.1", port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(sockaddr_in)) != 0) {
    ::close(fd);
    return "connect failed";
  }
  timeval tv = {10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  const std::string get = "GET " + path + " HTTP/1.1\r\nHost: localhost\r\n\r\n";
  std::string response;
  if (::write(fd, get.data(), get.size()) == static_cast<ssize_t>(get.size())) {
    char buf[65536];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) response.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return response;
}

std::string HttpBody(const std::string& response) {
  size_t end = response.find("\r\n\r\n");
  return end == std::string::npos ? "" : response.substr(end + 4);
}

uint16_t MetricsPort(TestAgent& agent) {
  auto status = agent.Status();
  if (!status || status->metrics_listen().empty()) return 0;
  const std::string listen = status->metrics_listen();
  return static_cast<uint16_t>(std::stoi(listen.substr(listen.rfind(':') + 1)));
}

class Agent : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "integration tests need root";
  }
};

// A sandboxed root is still root: the agent refuses every peer inside a
// sandbox, whatever its uid and whatever path it connects through (here a
// symlink in its writable directory, the way the control socket was once
// reached to replace the sandbox's own policy with allow-all).
// Outside any sandbox, only root reaches the agent: its socket is 0600 root,
// so another uid is refused by the kernel (EACCES), and the CLI says so.
TEST_F(Agent, NonRootPeersAreRefused) {
  TestAgent agent;
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  struct stat st;
  ASSERT_EQ(::stat(agent.socket().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_uid, 0u);
  const std::string probe =
      "import socket,sys\ns=socket.socket(socket.AF_UNIX)\n"
      "try:\n  s.connect(sys.argv[1]); print('CONNECTED')\nexcept OSError as e:\n  print('ERRNO', e.errno)\n";
  // Control: root connects.
  CommandResult root = cordon::test::Run({"/usr/bin/python3", "-c", probe, agent.socket()});
  ASSERT_NE(root.out.find("CONNECTED"), std::string::npos) << root.out << root.err;
  // The directory lets nobody reach the socket file (search permission only),
  // so that what refuses is the socket's own mode.
  ASSERT_EQ(::chmod(agent.dir().c_str(), 0711), 0);
  CommandResult nobody = cordon::test::Run({"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                            "/usr/bin/python3", "-c", probe, agent.socket()});
  EXPECT_NE(nobody.out.find("ERRNO " + std::to_string(EACCES)), std::string::npos) << nobody.out << nobody.err;
  CommandResult cli = cordon::test::Run({"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", CORDON_BINARY,
                                         "status"});  // CORDON_AGENT_SOCKET: set by TestAgent
  ::chmod(agent.dir().c_str(), 0700);
  EXPECT_NE(cli.status, 0) << cli.out;
  EXPECT_FALSE(cli.err.empty()) << "a clear refusal, not silence";
  RecordProperty("cli_refusal", cli.err);
}

TEST_F(Agent, PeersInsideASandboxAreRefusedWhateverTheirUidAndPath) {
  TestAgent agent;
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  // The workload's writable directory, outside /tmp (cordon run gives the
  // command a private /tmp): a hard link to the socket and a symlink to it.
  char tmpl[] = "/var/tmp/cordon-peer-XXXXXX";
  std::string work = ::mkdtemp(tmpl);
  struct Cleanup {
    std::string dir;
    ~Cleanup() { cordon::test::Run({"rm", "-rf", dir}); }
  } cleanup{work};
  ::chmod(work.c_str(), 0755);
  ASSERT_EQ(::link(agent.socket().c_str(), (work + "/agent.sock").c_str()), 0) << std::strerror(errno);
  std::string alias = work + "/s";
  ASSERT_EQ(::symlink((work + "/agent.sock").c_str(), alias.c_str()), 0);
  const std::string probe =
      "import socket,sys\ns=socket.socket(socket.AF_UNIX)\n"
      "try:\n  s.connect(sys.argv[1])\nexcept OSError as e:\n  print('CONNECT-REFUSED', e.errno); sys.exit(0)\n"
      "s.settimeout(3)\ntry:\n  d=s.recv(4096)\n  print('AGENT-REFUSED' if b'inside a sandbox' in d else 'OTHER', d[4:])\n"
      "except socket.timeout:\n  print('ACCEPTED')\n";
  // Negative control: the same probe outside any sandbox is served.
  CommandResult control = cordon::test::Run({"/usr/bin/python3", "-c", probe, alias});
  ASSERT_NE(control.out.find("ACCEPTED"), std::string::npos) << control.out << control.err;

  std::string audit = agent.dir() + "/run.jsonl";
  // No file rules: the kernel lets the connect through; the agent refuses.
  PolicyFile open_files("apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: peer}\nspec: {}\n");
  CommandResult plain = Cordon({"run", "--user", "root", "--policy", open_files.path(), "--name", NamePrefix() + "peer",
                                "--audit", audit, "--", "/usr/bin/python3", "-c", probe, alias});
  EXPECT_NE(plain.out.find("AGENT-REFUSED"), std::string::npos) << plain.out << plain.err;
  EXPECT_NE(agent.Log(0).find("refused a control connection"), std::string::npos) << agent.Log(0);
  // File rules with a writable directory: the alias is refused by the kernel
  // (BPF LSM) or only detected there (cgroup unix hooks judge the address as
  // written) and then refused by the agent; either way an event says so.
  PolicyFile policy("apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: peer}\nspec:\n  files:\n"
                    "    include: [runtime-minimal, python3]\n    write: [" + work + "]\n");
  ::unlink(audit.c_str());
  CommandResult files = Cordon({"run", "--user", "root", "--policy", policy.path(), "--name", NamePrefix() + "peer2",
                                "--audit", audit, "--", "/usr/bin/python3", "-c", probe, alias});
  bool refused = files.out.find("AGENT-REFUSED") != std::string::npos ||
                 files.out.find("CONNECT-REFUSED") != std::string::npos;
  EXPECT_TRUE(refused) << files.out << files.err;
  EXPECT_EQ(files.out.find("ACCEPTED"), std::string::npos) << files.out;
  bool unix_event = false;
  for (const auto& e : AuditFileEvents(audit))
    unix_event |= e.kind() == "net.unix" && e.file().path().find("agent.sock") != std::string::npos;
  EXPECT_TRUE(unix_event) << Slurp(audit);
}

// The done criterion: `cordon agent &`, then `cordon run -- <denied connect>`
// shows up in `cordon tail -f -o compact` within a second of the attempt.
TEST_F(Agent, DeniedConnectOfCordonRunReachesCompactTailWithinOneSecond) {
  TestAgent agent;
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  const std::string name = NamePrefix() + "done";
  // Only net.connect: what else bash does depends on the caller's environment
  // (without SHELL or HOME it asks glibc for the passwd entry, whose nscd
  // probes are refused net.unix events where the unix cgroup hooks judge).
  LineReader tail({CORDON_BINARY, "tail", "-f", "-o", "compact", "--sandbox", name, "--kind", "net.connect"});
  ASSERT_TRUE(WaitFor([&] { auto s = agent.Status(); return s && s->tailers_size() == 1; }, 10000))
      << "the tail connects to the agent";

  std::string run_audit = agent.dir() + "/run.jsonl";
  CommandResult r = Cordon({"run", "--name", name, "--audit", run_audit, "--", "bash", "-c",
                            "exec 3<>/dev/tcp/127.0.0.1/9"});
  EXPECT_NE(r.status, 0) << "the connect is refused";
  EXPECT_NE(r.err.find("net.connect x1"), std::string::npos) << r.err;
  ASSERT_TRUE(WaitFor([&] { return tail.Count() >= 1; }, 10000)) << "the tail shows the event";
  auto lines = tail.Lines();
  ASSERT_EQ(lines.size(), 1u);
  const std::string& line = lines[0].first;
  EXPECT_NE(line.find(name + " denied net.connect bash["), std::string::npos) << line;
  EXPECT_NE(line.find("-> 127.0.0.1:9/tcp"), std::string::npos) << line;
  // The event's time is the kernel's at the connect attempt.
  google::protobuf::Timestamp at;
  ASSERT_TRUE(google::protobuf::util::TimeUtil::FromString(line.substr(0, line.find(' ')), &at)) << line;
  int64_t latency = lines[0].second - google::protobuf::util::TimeUtil::TimestampToNanoseconds(at);
  EXPECT_GE(latency, 0);
  // The latency is a benchmark figure (bench/agent_bench.py); here only a
  // bound far above any noise, so that a line stuck in a buffer until some
  // later flush fails.
  RecordProperty("tail_latency_ns", std::to_string(latency));
  EXPECT_LT(latency, 30'000'000'000LL) << "from the connect attempt to the line at the tailer: " << latency << " ns";

  // One consumer, every copy: the agent's audit file, and the run's own.
  auto run_events = AuditFileEvents(run_audit);
  auto audited = agent.Audit(run_events.empty() ? 0 : run_events[0].sandbox_cgroup_id());
  ASSERT_FALSE(run_events.empty());
  const uint64_t id = run_events[0].sandbox_cgroup_id();
  ASSERT_EQ(audited.size(), run_events.size());
  for (size_t i = 0; i < audited.size(); ++i) EXPECT_EQ(ToJsonLine(audited[i]), ToJsonLine(run_events[i]));
  int connects = 0;
  for (const auto& e : run_events) connects += e.kind() == "net.connect";
  EXPECT_EQ(connects, 1);
  // The run's sandbox is gone, detached by the agent after its last drain.
  EXPECT_FALSE(GetSandbox(id).ok());
  EXPECT_EQ(tail.Stop(), 0);
}

// Issue #16, findings 1 and 2: names the workload chooses (its comm, a child
// cgroup's name, a file path) with invalid UTF-8, terminal escape sequences
// (ESC [ and the C1 CSI byte) and a bidi override reach every consumer intact
// (escaped reversibly: the original bytes come back) and harmless (the
// compact tail shows no control or bidi character). The tails keep showing
// what follows: an invalid string once ended `cordon tail` ("malformed
// frame"), hiding every later event.
TEST_F(Agent, HostileNamesReachEveryConsumerIntactAndCannotSteerTheTerminal) {
  TestAgent agent;
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  TestCgroup cg("hostile");
  char tmpl[] = "/tmp/cordon-hostile-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  const std::string hostile = "\xff\x1b[2J\xe2\x80\xae\xc2\x9bx";  // 11 bytes: fits a comm
  const std::string secret = dir + "/" + hostile + ".txt";
  { std::ofstream(secret) << "s"; }
  PolicyFile policy("apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: hostile}\nspec:\n  network:\n"
                    "    egress: []\n  files:\n    include: [runtime-minimal]\n");
  CommandResult r = Cordon({"attach", "--cgroup", cg.path(), "--policy", policy.path(), "--name",
                            NamePrefix() + "hostile", "--allow-degraded"});
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_TRUE(WaitFor([&] { return agent.Sandbox(cg.id()).has_value(); }, 10000));
  LineReader json({CORDON_BINARY, "tail", "-f", "-o", "json", "--cgroup", cg.path()});
  LineReader compact({CORDON_BINARY, "tail", "-f", "-o", "compact", "--cgroup", cg.path()});
  ASSERT_TRUE(WaitFor([&] { auto s = agent.Status(); return s && s->tailers_size() == 2; }, 10000));

  // The hostile process: in a child cgroup with a hostile name, under a
  // hostile comm, it opens a file with a hostile name (detected where BPF LSM
  // is not there, refused where it is) and connects (refused).
  const std::string child = cg.path() + "/" + hostile;
  ASSERT_EQ(::mkdir(child.c_str(), 0755), 0) << std::strerror(errno);
  EXPECT_EQ(RunInCgroup(child, [&] {
              ::prctl(PR_SET_NAME, hostile.c_str());
              int fd = ::open(secret.c_str(), O_RDONLY | O_CLOEXEC);
              if (fd >= 0) ::close(fd);
              return TcpConnect(V4("127.0.0.1", 9));
            }),
            EPERM);
  // A plain violation after it, from a plain process: the sentinel.
  EXPECT_EQ(RunInCgroup(cg.path(), [] { return TcpConnect(V4("127.0.0.1", 10)); }), EPERM);
  auto has_sentinel = [](LineReader& reader) {
    for (const auto& [line, at] : reader.Lines())
      if (line.find(":10/tcp") != std::string::npos || line.find("\"port\":10,") != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(WaitFor([&] { return has_sentinel(json) && has_sentinel(compact); }, 10000))
      << "both tails still show what follows the hostile events";
  // SIGTERM right after a line: the tail ends (it once could miss it
  // between checking its stop flag and waiting for the next frame).
  EXPECT_EQ(json.Stop(), 0);
  EXPECT_EQ(compact.Stop(), 0);
  ::rmdir(child.c_str());
  cordon::test::Run({"rm", "-rf", dir});

  // The JSON tail and the audit file: the same lines, every string valid
  // (they parse), the original bytes recovered from the escaped form.
  std::vector<std::string> json_lines;
  for (const auto& [line, at] : json.Lines()) json_lines.push_back(line);
  auto tailed = ParseJsonLines([&] {
    std::string all;
    for (const auto& l : json_lines) all += l + "\n";
    return all;
  }());
  auto audited = agent.Audit(cg.id());
  ASSERT_EQ(tailed.size(), audited.size());
  for (size_t i = 0; i < tailed.size(); ++i) EXPECT_EQ(ToJsonLine(tailed[i]), ToJsonLine(audited[i]));
  const AuditEvent* connect = nullptr;
  const AuditEvent* open = nullptr;
  for (const auto& e : audited) {
    if (e.kind() == "net.connect" && e.net().port() == 9) connect = &e;
    if (e.kind() == "file.open" && e.file().path().find(".txt") != std::string::npos) open = &e;
  }
  ASSERT_NE(connect, nullptr);
  EXPECT_EQ(UnescapeWorkloadBytes(connect->comm()), hostile);
  EXPECT_EQ(UnescapeWorkloadBytes(connect->cgroup_path()), cg.relative() + "/" + hostile);
  EXPECT_EQ(connect->comm(), "\\xff\\x1b[2J\xe2\x80\xae\\xc2\\x9bx") << "the escapes an operator reads";
  ASSERT_NE(open, nullptr);
  EXPECT_EQ(UnescapeWorkloadBytes(open->file().path()), secret);
  EXPECT_EQ(UnescapeWorkloadBytes(open->comm()), hostile);

  // The compact tail: no raw control character (C0, DEL, C1), no bidi
  // override, and the hostile event's line is there, escaped.
  bool hostile_line = false;
  for (const auto& [line, at] : compact.Lines()) {
    for (size_t i = 0; i < line.size(); ++i) {
      auto c = static_cast<unsigned char>(line[i]);
      EXPECT_FALSE(c < 0x20 || c == 0x7f) << "control " << int(c) << " in: " << line;
      EXPECT_FALSE(c == 0xc2 && i + 1 < line.size() && static_cast<unsigned char>(line[i + 1]) <= 0x9f) << line;
    }
    EXPECT_EQ(line.find("\xe2\x80\xae"), std::string::npos) << line;
    hostile_line |= line.find("\\xff\\x1b[2J\\u{202E}\\xc2\\x9bx[") != std::string::npos;
  }
  EXPECT_TRUE(hostile_line) << "the hostile comm, shown escaped";
}

// Issue #16, finding 7: one reader per ring buffer is enforced, not a
// convention. With the agent reading a sandbox, a CLI pointed at another
// socket cannot read its ring buffer too (it once could, taking events the
// agent's sinks then never had); it is told who holds it. Likewise a second
// direct tail next to a first. The control: once the holder is gone, the
// same command reads, and nothing was lost or split on the way.
TEST_F(Agent, OneReaderPerRingBufferIsEnforcedAndTheHolderNamed) {
  TestAgent agent;
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  TestCgroup cg("onereader");
  PolicyFile policy(LoopbackPolicy("onereader", 1));
  CommandResult r = Cordon({"attach", "--cgroup", cg.path(), "--policy", policy.path(), "--name",
                            NamePrefix() + "onereader", "--allow-degraded"});
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_TRUE(WaitFor([&] { return agent.Sandbox(cg.id()).has_value(); }, 10000));
  const std::string elsewhere = "CORDON_AGENT_SOCKET=" + agent.dir() + "/no-agent-here.sock";
  EXPECT_EQ(RunInCgroup(cg.path(), [] { return TcpConnect(V4("127.0.0.1", 9)); }), EPERM);
  r = cordon::test::Run({"env", elsewhere, CORDON_BINARY, "tail", "--cgroup", cg.path(), "-o", "json"});
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_EQ(r.out, "") << "not one event taken from the agent";
  EXPECT_NE(r.err.find("are already read by pid " + std::to_string(agent.pid()) + " (cordon)"), std::string::npos)
      << r.err;
  ASSERT_TRUE(WaitFor([&] { return Account(agent.Audit(cg.id()), "net.connect").delivered == 1; }, 10000))
      << "the agent has the event";
  EXPECT_EQ(agent.Stop(), 0);

  // Without the agent: a direct follower holds it; a second reader is refused.
  LineReader first({"env", elsewhere, CORDON_BINARY, "tail", "-f", "-o", "json", "--cgroup", cg.path()});
  // The follower holds the lock once it printed the event that waits for it.
  EXPECT_EQ(RunInCgroup(cg.path(), [] { return TcpConnect(V4("127.0.0.1", 10)); }), EPERM);
  ASSERT_TRUE(WaitFor([&] { return first.Count() >= 1; }, 10000));
  r = cordon::test::Run({"env", elsewhere, CORDON_BINARY, "tail", "--cgroup", cg.path(), "-o", "json"});
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("are already read by pid "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(cordon)"), std::string::npos) << r.err;
  EXPECT_EQ(RunInCgroup(cg.path(), [] { return TcpConnect(V4("127.0.0.1", 11)); }), EPERM);
  EXPECT_TRUE(WaitFor([&] { return first.Count() >= 2; }, 10000)) << "the follower gets what follows, all of it";
  EXPECT_EQ(first.Stop(), 0);
  {
    auto lines = first.Lines();
    ASSERT_EQ(lines.size(), 2u);
    EXPECT_NE(lines[0].first.find("\"port\":10,"), std::string::npos) << lines[0].first;
    EXPECT_NE(lines[1].first.find("\"port\":11,"), std::string::npos) << lines[1].first;
  }
  // The control: the holder gone, the same reader is let in.
  EXPECT_EQ(RunInCgroup(cg.path(), [] { return TcpConnect(V4("127.0.0.1", 12)); }), EPERM);
  r = cordon::test::Run({"env", elsewhere, CORDON_BINARY, "tail", "--cgroup", cg.path(), "-o", "json"});
  EXPECT_EQ(r.status, 0) << r.err;
  auto events = ParseJsonLines(r.out);
  ASSERT_EQ(events.size(), 1u) << r.out;
  EXPECT_EQ(events[0].net().port(), 12u);
  EXPECT_EQ(Cordon({"detach", "--cgroup", cg.path()}).status, 0);
}

// The agent holds descriptors for each sandbox it watches; started with the
// soft RLIMIT_NOFILE of a service manager's default (1,024), it ran out at
// about 130 sandboxes (EMFILE on the next attach). Here it starts with a soft
// limit of 64 and still attaches and watches 24 sandboxes, more than 64
// descriptors: the last one's refusal reaches its audit file. The control:
// it does hold more descriptors than the limit it was started with (without
// the raise, an attach fails with "Too many open files").
TEST_F(Agent, RaisesItsOpenFilesLimitAndAttachesMoreSandboxesThanItAllowed) {
  constexpr rlim_t kSoft = 64;
  rlimit mine = {};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &mine), 0);
  if (mine.rlim_max <= 4 * kSoft) GTEST_SKIP() << "the hard open files limit is " << mine.rlim_max;
  TestAgent agent;
  agent.set_files_soft_limit(kSoft);
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  PolicyFile policy(LoopbackPolicy("manyfds", 1));
  std::vector<std::unique_ptr<TestCgroup>> cgs;
  for (int i = 0; i < 24; ++i) {
    cgs.push_back(std::make_unique<TestCgroup>("manyfds" + std::to_string(i)));
    CommandResult r = Cordon({"attach", "--cgroup", cgs.back()->path(), "--policy", policy.path(), "--name",
                              NamePrefix() + "manyfds" + std::to_string(i), "--allow-degraded", "-q"});
    ASSERT_EQ(r.status, 0) << "sandbox " << i << ": " << r.err << agent.Log(0);
  }
  auto descriptors = [&] {
    size_t n = 0;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/" + std::to_string(agent.pid()) + "/fd")) {
      (void)entry;
      ++n;
    }
    return n;
  };
  EXPECT_GT(descriptors(), kSoft) << "the agent holds more descriptors than it was started with";
  EXPECT_EQ(Slurp("/proc/" + std::to_string(agent.pid()) + "/limits").find("Max open files            64 "),
            std::string::npos)
      << Slurp("/proc/" + std::to_string(agent.pid()) + "/limits");
  const TestCgroup& last = *cgs.back();
  EXPECT_EQ(RunInCgroup(last.path(), [] { return TcpConnect(V4("127.0.0.1", 9)); }), EPERM);
  EXPECT_TRUE(WaitFor([&] { return Account(agent.Audit(last.id()), "net.connect").delivered == 1; }, 10000))
      << agent.Log(0);
  auto status = agent.Status();
  ASSERT_TRUE(status.has_value());
  size_t listed = 0;
  for (const auto& cg : cgs)
    for (const auto& sb : status->sandboxes()) listed += sb.id() == cg->id();
  EXPECT_EQ(listed, cgs.size());
  for (const auto& cg : cgs) EXPECT_EQ(Cordon({"detach", "--cgroup", cg->path()}).status, 0);
  EXPECT_EQ(agent.Log(0).find("Too many open files"), std::string::npos) << agent.Log(0);
  EXPECT_EQ(agent.Stop(), 0);
}

// kill -9 of the agent during a connect storm: nothing denied ever gets
// through, counters continue, and the next agent drains what waited.
TEST_F(Agent, KillNineDuringConnectStormKeepsEnforcementAndDrainsTheBacklog) {
  TestAgent agent("rateLimit: {eventsPerSecond: 0}\n");
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  TestCgroup cg("storm");
  TcpListener allowed, forbidden;
  PolicyFile policy(LoopbackPolicy("storm", allowed.port()));
  ASSERT_EQ(Cordon({"attach", "--cgroup", cg.path(), "--policy", policy.path(), "--allow-degraded"}).status, 0);
  ASSERT_TRUE(WaitFor([&] { return agent.Sandbox(cg.id()).has_value(); }, 5000)) << "adopted by the rescan";

  std::atomic<int> storm_result{-1};
  std::atomic<bool> storm_done{false};
  const uint16_t port = forbidden.port(), allowed_port = allowed.port();
  std::thread storm([&] {
    // Returns how many connects were NOT refused with EPERM. Each to another
    // port (the forbidden listener's first): the same denial again within a
    // second would be counted by the kernel, not recorded (issue 16), and
    // this test needs records waiting in the ring buffer.
    storm_result = RunInCgroup(cg.path(), [port, allowed_port] {
      int not_refused = 0;
      auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(2500);
      for (uint32_t i = 0; std::chrono::steady_clock::now() < end; ++i) {
        const uint16_t to = static_cast<uint16_t>(i == 0 ? port : 2 + i % 60000);
        if (to == allowed_port) continue;
        not_refused += TcpConnect(V4("127.0.0.1", to)) != EPERM;
        ::usleep(100);
      }
      return not_refused;
    });
    storm_done = true;
  });
  ASSERT_TRUE(WaitFor([&] { return KernelCounter(cg.id(), CORDON_CNT_DENIED_CONNECT) > 0; }, 2000))
      << "the storm is running";
  agent.Kill9();
  const uint64_t denied_at_kill = KernelCounter(cg.id(), CORDON_CNT_DENIED_CONNECT);
  EXPECT_TRUE(WaitFor([&] { return KernelCounter(cg.id(), CORDON_CNT_DENIED_CONNECT) > denied_at_kill; }, 2000) ||
              storm_done)
      << "enforcement and counting went on without the agent";
  EXPECT_GT(KernelCounter(cg.id(), CORDON_CNT_DENIED_CONNECT), denied_at_kill)
      << "enforcement and counting went on without the agent";
  EXPECT_EQ(forbidden.AcceptPending(), 0);
  ASSERT_TRUE(agent.Start()) << agent.Log(1);
  auto adopted = agent.Sandbox(cg.id());
  ASSERT_TRUE(adopted.has_value());
  EXPECT_GT(adopted->backlog(), 0u) << "the restarted agent drained what waited in the ring buffer";
  EXPECT_NE(agent.Log(1).find("adopted "), std::string::npos) << agent.Log(1);
  storm.join();
  EXPECT_EQ(storm_result, 0) << "every forbidden connect was refused, during and after the kill";
  EXPECT_EQ(forbidden.AcceptPending(), 0) << "no forbidden connection was ever accepted";
  const uint64_t generated = KernelCounter(cg.id(), CORDON_CNT_DENIED_CONNECT);
  EXPECT_GT(generated, denied_at_kill);

  // Every denial is in the audit file or counted lost. The record being
  // written when SIGKILL hit may be written again by the next agent (the
  // ring's consumer position advances after each batch is written): at most
  // one read batch (4,096 records) extra.
  Accounting a;
  bool balanced = WaitFor(
      [&] {
        a = Account(agent.Audit(cg.id()), "net.connect");
        return a.delivered + a.lost >= generated;
      },
      20000);
  EXPECT_TRUE(balanced) << a.delivered << " delivered + " << a.lost << " lost < " << generated << " denied";
  EXPECT_LE(a.delivered + a.lost, generated + 4096) << a.delivered << " delivered + " << a.lost << " lost";
  auto after = agent.Sandbox(cg.id());
  ASSERT_TRUE(after.has_value());
  std::fprintf(stderr, "storm: %llu denied, %llu delivered, %llu lost, %llu drained by the restarted agent\n",
               static_cast<unsigned long long>(generated), static_cast<unsigned long long>(a.delivered),
               static_cast<unsigned long long>(a.lost), static_cast<unsigned long long>(after->backlog()));
  // Enforcement after the restart, too.
  EXPECT_EQ(RunInCgroup(cg.path(), [port] { return TcpConnect(V4("127.0.0.1", port)); }), EPERM);
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return TcpConnect(V4("127.0.0.1", allowed.port())); }), 0);
  EXPECT_EQ(agent.Stop(), 0);
}

// Issue 16, finding 6: kill -9 storms. The agent is killed with -9 several
// times while the sandbox makes N distinct denied connects (each to another
// port, so the kernel's repeats fold none of them), and restarted each time.
// Afterwards every denial is in the audit file once by id, or again as an
// identical record (same id, time, every field: a kill between writing and
// committing), every sequence number is either read or inside a loss
// record's range, and the kernel's denial count is what was delivered plus
// what was lost. Before identity, the same denial was written again with
// another time (6 connects counted as 9, ids empty).
TEST_F(Agent, KillNineStormsDeliverEachDenialOnceByIdWithOneTime) {
  TestAgent agent("rateLimit: {eventsPerSecond: 0}\n");
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  TestCgroup cg("idstorm");
  TcpListener allowed;
  PolicyFile policy(LoopbackPolicy("idstorm", allowed.port()));
  ASSERT_EQ(Cordon({"attach", "--cgroup", cg.path(), "--policy", policy.path(), "--allow-degraded"}).status, 0);
  ASSERT_TRUE(WaitFor([&] { return agent.Sandbox(cg.id()).has_value(); }, 5000)) << "adopted by the rescan";

  constexpr int kConnects = 3000;
  std::atomic<int> refused{-1};
  const uint16_t allowed_port = allowed.port();
  std::thread storm([&] {
    refused = RunInCgroup(cg.path(), [allowed_port] {
      int n = 0;
      for (int i = 0; i < kConnects; ++i) {
        uint16_t to = static_cast<uint16_t>(20000 + i);
        if (to == allowed_port) to = 19999;
        n += TcpConnect(V4("127.0.0.1", to)) == EPERM;
        ::usleep(300);
      }
      return n == kConnects ? 0 : 1;
    });
  });
  int kills = 0;
  for (int round = 0; round < 5; ++round) {
    ::usleep(static_cast<useconds_t>(150000 + 70000 * round));
    agent.Kill9();  // only the agent this test started
    kills++;
    ::usleep(30000);
    ASSERT_TRUE(agent.Start()) << agent.Log(static_cast<size_t>(kills));
  }
  storm.join();
  ASSERT_EQ(refused, 0) << "every connect was refused";
  const uint64_t denied = KernelCounter(cg.id(), CORDON_CNT_DENIED_CONNECT);
  EXPECT_EQ(denied, static_cast<uint64_t>(kConnects));

  std::map<std::string, AuditEvent> by_id;
  std::set<uint64_t> seqs;
  std::vector<std::pair<uint64_t, uint64_t>> lost_ranges;
  uint64_t delivered = 0, lost = 0, copies = 0;
  bool settled = WaitFor(
      [&] {
        by_id.clear();
        seqs.clear();
        lost_ranges.clear();
        delivered = lost = copies = 0;
        for (const auto& e : agent.Audit(cg.id())) {
          if (e.kind() == "loss") {
            lost += e.loss().dropped();
            if (e.loss().first_seq()) lost_ranges.emplace_back(e.loss().first_seq(), e.loss().last_seq());
            continue;
          }
          if (e.kind() != "net.connect") continue;
          if (e.id().empty()) {
            // The kernel's count of records that did not fit in a full ring
            // (README "Repeats"): never in the ring, no number, read once.
            EXPECT_TRUE(e.repeats().pending()) << e.DebugString();
            delivered += Occurrences(e);
            continue;
          }
          copies++;
          auto [it, fresh] = by_id.emplace(e.id(), e);
          if (!fresh) {
            EXPECT_EQ(it->second.SerializeAsString(), e.SerializeAsString())
                << "a record written twice is the same record:\n"
                << it->second.DebugString() << e.DebugString();
            continue;
          }
          delivered += Occurrences(e);
          seqs.insert(e.seq());
        }
        return delivered + lost >= denied;
      },
      20000);
  EXPECT_TRUE(settled) << delivered << " delivered + " << lost << " lost < " << denied << " denied";
  EXPECT_EQ(delivered + lost, denied) << delivered << " delivered (by id) + " << lost << " lost";
  ASSERT_FALSE(by_id.empty());
  for (const auto& [id, e] : by_id) {
    ASSERT_FALSE(id.empty()) << "every record has an id: " << e.DebugString();
    EXPECT_EQ(id, std::to_string(cg.id()) + "-" + std::to_string(e.seq()));
  }
  // No number unaccounted for: read, or inside a loss record's range.
  uint64_t in_ranges = 0;
  for (const auto& [first, last] : lost_ranges) {
    in_ranges += last - first + 1;
    for (uint64_t n = first; n <= last; ++n) EXPECT_EQ(seqs.count(n), 0u) << n << " both lost and delivered";
  }
  const uint64_t highest = *seqs.rbegin();
  for (uint64_t n = 1; n <= highest; ++n) {
    bool in_range = false;
    for (const auto& [first, last] : lost_ranges) in_range |= n >= first && n <= last;
    if (!seqs.count(n) && !in_range) {
      ADD_FAILURE() << "sequence number " << n << " neither delivered nor reported lost";
      break;
    }
  }
  EXPECT_EQ(in_ranges, lost) << "every loss here is a gap in the sequence (the ring never filled)";
  std::fprintf(stderr, "id storm: %d kills, %llu denied, %llu delivered, %llu lost, %llu identical copies\n", kills,
               static_cast<unsigned long long>(denied), static_cast<unsigned long long>(delivered),
               static_cast<unsigned long long>(lost), static_cast<unsigned long long>(copies - by_id.size()));
  EXPECT_EQ(agent.Stop(), 0);
}

// Issue 16, finding 6: the same record carries the same id and time in the
// agent's audit file and in a `cordon tail` through the agent; and a record
// read by a direct tail (no agent) continues the sequence where the agent
// left it, with a time from the same boot offset.
TEST_F(Agent, TheSameRecordHasTheSameIdAndTimeInTheAuditFileAndATail) {
  TestAgent agent;
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  TestCgroup cg("idtail");
  PolicyFile policy(LoopbackPolicy("idtail", 1));
  ASSERT_EQ(Cordon({"attach", "--cgroup", cg.path(), "--policy", policy.path(), "--name", NamePrefix() + "idtail",
                    "--allow-degraded"})
                .status,
            0);
  ASSERT_TRUE(WaitFor([&] { return agent.Sandbox(cg.id()).has_value(); }, 10000));
  LineReader tail({CORDON_BINARY, "tail", "-f", "-o", "json", "--cgroup", cg.path()});
  // Subscribed (a tail gets what comes after it; a fixed wait was too short
  // in a loaded full run).
  ASSERT_TRUE(WaitFor(
      [&] {
        auto st = agent.Status();
        return st && st->tailers_size() == 1;
      },
      10000))
      << "the tail connects to the agent";
  EXPECT_EQ(RunInCgroup(cg.path(), [] { return TcpConnect(V4("127.0.0.1", 21)); }), EPERM);
  ASSERT_TRUE(WaitFor([&] { return tail.Count() >= 1; }, 10000));
  ASSERT_TRUE(WaitFor([&] { return Account(agent.Audit(cg.id()), "net.connect").records == 1; }, 10000));
  EXPECT_EQ(tail.Stop(), 0);
  auto tailed = ParseJsonLines(tail.Lines()[0].first);
  ASSERT_EQ(tailed.size(), 1u);
  AuditEvent written;
  for (const auto& e : agent.Audit(cg.id()))
    if (e.kind() == "net.connect") written = e;
  ASSERT_FALSE(written.id().empty());
  EXPECT_EQ(tailed[0].id(), written.id());
  EXPECT_EQ(tailed[0].seq(), written.seq());
  EXPECT_EQ(tailed[0].time().seconds(), written.time().seconds());
  EXPECT_EQ(tailed[0].time().nanos(), written.time().nanos());
  EXPECT_EQ(agent.Stop(), 0);

  // Without the agent: a direct tail reads the next record, numbered next.
  EXPECT_EQ(RunInCgroup(cg.path(), [] { return TcpConnect(V4("127.0.0.1", 22)); }), EPERM);
  CommandResult r = Cordon({"tail", "--cgroup", cg.path(), "-o", "json"});
  ASSERT_EQ(r.status, 0) << r.err;
  auto direct = ParseJsonLines(r.out);
  ASSERT_EQ(direct.size(), 1u) << r.out << "no loss record: nothing was skipped";
  EXPECT_EQ(direct[0].seq(), written.seq() + 1);
  EXPECT_EQ(direct[0].id(), std::to_string(cg.id()) + "-" + std::to_string(written.seq() + 1));
  EXPECT_GE(direct[0].time().seconds(), written.time().seconds());
  EXPECT_EQ(Cordon({"detach", "--cgroup", cg.path()}).status, 0);
}

// Two tailers, one stalled: the other and the audit file get every event,
// the stalled one is cut off with a reason and its drop count.
TEST_F(Agent, StalledTailerIsCutOffWhileTheOtherTailerAndTheAuditFileGetEverything) {
  TestAgent agent("rateLimit: {eventsPerSecond: 0}\ntail: {queueEvents: 50, disconnectAfterDropped: 200}\n");
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  TestCgroup cg("tailers");
  PolicyFile policy(LoopbackPolicy("tailers", 1));
  ASSERT_EQ(Cordon({"attach", "--cgroup", cg.path(), "--policy", policy.path(), "--name", NamePrefix() + "tailers",
                    "--allow-degraded"})
                .status,
            0);
  ASSERT_TRUE(WaitFor([&] { return agent.Sandbox(cg.id()).has_value(); }, 5000));

  LineReader good({CORDON_BINARY, "tail", "-f", "-o", "json", "--cgroup", cg.path()});
  // The stalled tailer: subscribes, then never reads.
  auto stalled = agent::AgentClient::Connect(agent.socket());
  ASSERT_TRUE(stalled.ok());
  {
    cordon::v1::Request request;
    request.mutable_tail()->set_follow(true);
    request.mutable_tail()->add_sandbox_ids(cg.id());
    auto response = stalled->Call(request, 5000);
    ASSERT_TRUE(response.ok() && response->error().empty());
  }
  ASSERT_TRUE(WaitFor([&] { auto s = agent.Status(); return s && s->tailers_size() == 2; }, 10000));

  // Paced by the reading tailer: a batch of half its queue, then the next
  // once it has shown that one (a fixed pace cut it off too on a loaded
  // machine: it fell behind as the stalled one did). The stalled tailer's
  // queue fills in the second batch, and it drops the rest.
  const int kEvents = 3000, kBatch = 25;
  int refused = 0;
  for (int sent = 0; sent < kEvents; sent += kBatch) {
    refused += RunInCgroup(cg.path(), [sent] {
      int n = 0;
      // Each to a port of its own: the same denial again would be counted
      // in the kernel (repeats), not written as a line of its own.
      for (int i = 0; i < kBatch; ++i) n += UdpSendto(V4("127.0.0.1", static_cast<uint16_t>(2 + sent + i))) == EPERM;
      return n;
    });
    ASSERT_TRUE(WaitFor([&] { return good.Count() >= static_cast<size_t>(sent + kBatch); }, 20000))
        << good.Count() << " of " << sent + kBatch << " events at the reading tailer";
  }
  ASSERT_EQ(refused, kEvents);
  EXPECT_EQ(good.Count(), static_cast<size_t>(kEvents));
  auto audited = Account(agent.Audit(cg.id()), "net.sendmsg");
  EXPECT_EQ(audited.delivered, static_cast<uint64_t>(kEvents));
  EXPECT_EQ(audited.lost, 0u) << "paced: nothing lost";

  auto status = agent.Status();
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->tailers_disconnected(), 1u);
  EXPECT_EQ(status->tailers_size(), 1) << "only the reading tailer is left";
  EXPECT_GE(status->tailer_drops(), 200u);

  // The stalled tailer, reading at last: the events that fit, then why it
  // was cut off and how much it missed, then the end of the stream.
  uint64_t events = 0, dropped_total = 0;
  std::string reason;
  for (;;) {
    auto frame = stalled->ReadFrame(5000);
    if (!frame) break;
    cordon::v1::TailFrame tf;
    ASSERT_TRUE(tf.ParseFromString(*frame));
    if (tf.has_event()) events++;
    if (tf.has_notice()) {
      dropped_total = tf.notice().dropped_total();
      if (!tf.notice().disconnect_reason().empty()) reason = tf.notice().disconnect_reason();
    }
  }
  EXPECT_NE(reason.find("fell too far behind"), std::string::npos) << reason;
  EXPECT_GE(dropped_total, 200u);
  EXPECT_GT(events, 0u);
  EXPECT_LT(events + dropped_total, static_cast<uint64_t>(kEvents)) << "cut off before the end";
  EXPECT_EQ(good.Stop(), 0);
}

// A hostile flood: 200,000 denied sendto, to ever other ports (identical
// ones are counted in the kernel, not written one by one: see
// ADistinctViolationSurvivesAFloodOfIdenticalDenials). Enforcement holds, the
// agent's rate limit keeps delivery bounded, and every denial is accounted
// for: delivered (with the kernel's repeats) + suppressed + lost ==
// generated, exactly. A quiet sandbox next to it loses nothing.
TEST_F(Agent, FloodIsRateLimitedAndEveryDenialIsAccountedExactly) {
  TestAgent agent("rateLimit: {eventsPerSecond: 1000, burst: 2000}\n");
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  TestCgroup flood("flood"), quiet("quiet");
  PolicyFile policy(LoopbackPolicy("flood", 1));
  ASSERT_EQ(Cordon({"attach", "--cgroup", flood.path(), "--policy", policy.path(), "--allow-degraded"}).status, 0);
  ASSERT_EQ(Cordon({"attach", "--cgroup", quiet.path(), "--policy", policy.path(), "--allow-degraded"}).status, 0);
  ASSERT_TRUE(WaitFor([&] { return agent.Sandbox(flood.id()) && agent.Sandbox(quiet.id()); }, 5000));

  const int kFlood = 200000, kQuiet = 20;
  std::atomic<int> quiet_refused{0};
  std::thread quiet_thread([&] {
    quiet_refused = RunInCgroup(quiet.path(), [] {
      int n = 0;
      for (int i = 0; i < kQuiet; ++i) {
        n += TcpConnect(V4("127.0.0.1", 9)) == EPERM;
        ::usleep(20000);
      }
      return n;
    });
  });
  auto start = std::chrono::steady_clock::now();
  int refused = RunInCgroup(flood.path(), [] {
    int n = 0;
    for (int i = 0; i < kFlood; ++i) n += UdpSendto(V4("127.0.0.1", static_cast<uint16_t>(2 + i % 60000))) == EPERM;
    return n;
  });
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  quiet_thread.join();
  ASSERT_EQ(refused, kFlood) << "enforcement held throughout the flood";
  ASSERT_EQ(quiet_refused, kQuiet);
  const uint64_t generated = KernelCounter(flood.id(), CORDON_CNT_DENIED_SENDMSG);
  ASSERT_EQ(generated, static_cast<uint64_t>(kFlood));

  // The final suppressed record comes once the sandbox is under its limit.
  Accounting a;
  EXPECT_TRUE(WaitFor(
      [&] {
        a = Account(agent.Audit(flood.id()), "net.sendmsg");
        return a.final_suppressed && a.delivered + a.suppressed + a.lost == generated;
      },
      30000))
      << a.delivered << " delivered + " << a.suppressed << " suppressed + " << a.lost << " lost != " << generated;
  EXPECT_EQ(a.delivered + a.suppressed + a.lost, generated);
  EXPECT_GT(a.suppressed, 0u);
  EXPECT_LE(a.records, 2000 + static_cast<uint64_t>((seconds + 2) * 1000)) << "the rate limit bounds delivery";
  EXPECT_LE(a.suppressed_records, static_cast<uint64_t>(seconds) + 3) << "at most one record a second, plus the last";
  auto sb = agent.Sandbox(flood.id());
  ASSERT_TRUE(sb.has_value());
  EXPECT_EQ(sb->delivered(), a.delivered);
  EXPECT_EQ(sb->suppressed(), a.suppressed);
  EXPECT_EQ(sb->lost(), a.lost);
  std::fprintf(stderr, "flood: %llu denied in %.2f s = %llu delivered + %llu suppressed (%llu records) + %llu lost\n",
               static_cast<unsigned long long>(generated), seconds, static_cast<unsigned long long>(a.delivered),
               static_cast<unsigned long long>(a.suppressed), static_cast<unsigned long long>(a.suppressed_records),
               static_cast<unsigned long long>(a.lost));

  // The quiet sandbox: all of its events, none suppressed.
  auto q = Account(agent.Audit(quiet.id()), "net.connect");
  EXPECT_EQ(q.delivered + q.lost, static_cast<uint64_t>(kQuiet));
  EXPECT_EQ(q.suppressed, 0u);

  // Bounded memory: the agent's resident set stays small. Not under
  // AddressSanitizer (tests/run.sh's sanitized build): its quarantine holds
  // freed memory (207 MB measured there); the plain build checks the bound.
  std::string status = Slurp("/proc/" + std::to_string(agent.pid()) + "/status");
  size_t at = status.find("VmRSS:");
  ASSERT_NE(at, std::string::npos);
  if (!kAddressSanitizer && !CordonIsSanitized()) {
    EXPECT_LT(std::stoull(status.substr(at + 6)), 200ull * 1024) << "kB";
  }
  // The same accounting through the CLI.
  CommandResult r = Cordon({"status"});
  EXPECT_NE(r.out.find("agent events: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(std::to_string(a.suppressed)), std::string::npos) << r.out;
  EXPECT_EQ(agent.Stop(), 0);
}

// Suppressed counts not yet written when the agent is killed are not lost:
// they live in a shared mapping the next agent writes out.
TEST_F(Agent, SuppressedCountsSurviveKillNine) {
  TestAgent agent("rateLimit: {eventsPerSecond: 10, burst: 10}\n");
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  TestCgroup cg("suppress-kill");
  PolicyFile policy(LoopbackPolicy("suppress-kill", 1));
  ASSERT_EQ(Cordon({"attach", "--cgroup", cg.path(), "--policy", policy.path(), "--allow-degraded"}).status, 0);
  ASSERT_TRUE(WaitFor([&] { return agent.Sandbox(cg.id()).has_value(); }, 5000));
  // Denials keep coming until the next agent runs, so that the agent is
  // killed in the middle of a suppression, with counts it has not written
  // (a burst that ended could have its final record written first: 500 ms
  // after the last event, a window a loaded machine missed).
  auto* stop = static_cast<std::atomic<int>*>(
      ::mmap(nullptr, sizeof(std::atomic<int>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(stop, MAP_FAILED);
  stop->store(0);
  int sent = 0;
  std::thread sender([&] {
    sent = RunInCgroup(cg.path(), [stop] {
      int n = 0;
      // Each to another port: the same denial again within a second would be
      // counted by the kernel, not recorded (issue 16), and this test needs
      // records for the rate limit to suppress.
      for (uint32_t i = 0; !stop->load(); ++i) {
        n += UdpSendto(V4("127.0.0.1", static_cast<uint16_t>(2 + i % 60000))) == EPERM;
        ::usleep(500);
      }
      return n;
    });
  });
  struct Join {
    std::atomic<int>* stop;
    std::thread* t;
    ~Join() {
      stop->store(1);
      if (t->joinable()) t->join();
      ::munmap(stop, sizeof(std::atomic<int>));
    }
  } join{stop, &sender};
  ASSERT_TRUE(WaitFor([&] { auto sb = agent.Sandbox(cg.id()); return sb && sb->consumed() >= 300; }, 10000));
  agent.Kill9();
  ASSERT_TRUE(agent.Start()) << agent.Log(1);
  ASSERT_TRUE(WaitFor([&] { auto sb = agent.Sandbox(cg.id()); return sb && sb->consumed() >= 100; }, 10000));
  stop->store(1);
  sender.join();
  ASSERT_GT(sent, 300);
  Accounting a;
  EXPECT_TRUE(WaitFor(
      [&] {
        a = Account(agent.Audit(cg.id()), "net.sendmsg");
        return a.final_suppressed;
      },
      10000));
  EXPECT_EQ(a.delivered + a.suppressed + a.lost, static_cast<uint64_t>(sent))
      << a.delivered << " delivered + " << a.suppressed << " suppressed + " << a.lost << " lost";
  EXPECT_NE(agent.Log(1).find("suppressed events left by the previous agent"), std::string::npos) << agent.Log(1);
  EXPECT_EQ(agent.Stop(), 0);
}

// A cordon run killed with -9 leaves its credential behind (its sandbox
// stays pinned); the agent removes the file and runs revoke once the ttl
// passed, and records credential.expired without the value.
TEST_F(Agent, SweepsTheCredentialOfAKilledRunAfterItsTtl) {
  TestAgent agent;
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  const std::string dir = agent.dir(), revoked = agent.dir() + "/revoked";
  const std::string secret = "agent-sweep-secret-" + std::to_string(::getpid()) + "-" + std::to_string(::time(nullptr));
  std::ofstream(dir + "/mint") << "#!/bin/sh\necho " << secret << "\n";
  std::ofstream(dir + "/revoke") << "#!/bin/sh\ncat >> " << revoked << "\n";
  ::chmod((dir + "/mint").c_str(), 0700);
  ::chmod((dir + "/revoke").c_str(), 0700);
  PolicyFile policy("apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: sweep}\nspec:\n  mode: enforce\n"
                    "  credentials:\n    - {name: TOKEN, issue: [" + dir + "/mint], revoke: [" + dir +
                    "/revoke], ttl: 2s}\n");
  const auto started = std::chrono::steady_clock::now();
  CommandResult killed = cordon::test::Run(
      {"/bin/sh", "-c",
       "\"$0\" run -q --policy \"$1\" --audit \"$2\" -- /bin/sleep 300 & p=$!;"
       " for i in $(seq 400); do ls /run/cordon/credential-store/run-$p-*.state >/dev/null 2>&1 && break; sleep 0.05;"
       " done; kill -9 $p; wait $p; echo $p",
       CORDON_BINARY, policy.path(), dir + "/run-audit.jsonl"});
  const std::string prefix = "run-" + std::to_string(std::atoi(killed.out.c_str())) + "-";
  std::string name;
  if (auto* d = ::opendir((Cgroup2Mount() + "/cordon").c_str())) {
    while (auto* e = ::readdir(d))
      if (std::string(e->d_name).rfind(prefix, 0) == 0) name = e->d_name;
    ::closedir(d);
  }
  ASSERT_FALSE(name.empty()) << killed.out << killed.err;
  const std::string cgroup = Cgroup2Mount() + "/cordon/" + name;
  struct stat st;
  ASSERT_EQ(::stat(cgroup.c_str(), &st), 0);
  const PinnedRunCleanup cleanup{st.st_ino, cgroup};
  const std::string file = "/run/cordon/credential-store/" + name + "/TOKEN";
  // The ttl counts whole seconds from the issue (issued_at is time(), rounded
  // down): the file is there for at least ttl - 1 s after `started`.
  if (std::chrono::steady_clock::now() - started < std::chrono::milliseconds(1000)) {
    EXPECT_EQ(Slurp(file), secret) << "left by the killed run, until its ttl";
  }
  const std::string state = "/run/cordon/credential-store/" + name + ".state";
  int expired = 0;
  auto count_expired = [&] {
    expired = 0;
    for (const auto& e : agent.Audit(st.st_ino)) {
      if (e.kind() != "credential.expired" || e.sandbox() != name) continue;
      expired++;
      EXPECT_EQ(e.credential().revoke(), "ran");
    }
    return expired;
  };
  // The sweep runs revoke, then removes the state; the event reaches the
  // audit file at the agent's next flush.
  EXPECT_TRUE(WaitFor([&] { return ::access(state.c_str(), F_OK) != 0 && count_expired() > 0; }, 15000));
  EXPECT_EQ(Slurp(revoked), secret) << "revoke got the value on stdin";
  EXPECT_NE(::access(file.c_str(), F_OK), 0);
  EXPECT_EQ(count_expired(), 1);
  EXPECT_EQ(Slurp(agent.audit()).find(secret), std::string::npos) << "the value is in the agent's audit log";
  // The worker's log lines reach the agent's log at a later turn of its loop
  // than the event reaches the audit file (CI, loaded, once had the event only).
  EXPECT_TRUE(
      WaitFor([&] { return agent.Log(0).find("removed and revoked 1 credential") != std::string::npos; }, 10000))
      << agent.Log(0);
  EXPECT_EQ(agent.Log(0).find(secret), std::string::npos);
  EXPECT_EQ(agent.Stop(), 0);
}

// ---- spec.credentials of attached sandboxes, through the agent (issue 15)

// A mint script handing out numbered values (v1-SECRET, v2-SECRET, ...), a
// revoke script recording what it got, a policy whose file credential is
// owned by kCredOwner, and the checks every test makes.
constexpr uid_t kCredOwner = 4242;
class AgentCredentials {
 public:
  explicit AgentCredentials(const std::string& dir, const std::string& timing) : dir_(dir) {
    secret_ = "agent-attach-secret-" + std::to_string(::getpid()) + "-" + std::to_string(::time(nullptr));
    std::ofstream(dir + "/mint") << "#!/bin/sh\nn=$(cat " << dir
                                 << "/count 2>/dev/null || echo 0); n=$((n+1)); echo $n > " << dir
                                 << "/count\nprintf 'v%s-" << secret_ << "\\n' $n\n";
    std::ofstream(dir + "/revoke") << "#!/bin/sh\ncat >> " << dir << "/revoked\necho >> " << dir << "/revoked\n";
    std::ofstream(dir + "/fail") << "#!/bin/sh\nexit 3\n";
    for (const char* s : {"/mint", "/revoke", "/fail"}) ::chmod((dir + s).c_str(), 0700);
    policy_ = dir + "/creds.yaml";
    std::ofstream(policy_) << "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: agentcreds}\nspec:\n"
                           << "  mode: enforce\n  credentials:\n    - {name: TOKEN, issue: [" << dir
                           << "/mint], revoke: [" << dir << "/revoke], " << timing << ", owner: \"" << kCredOwner
                           << "\"}\n";
  }
  const std::string& policy() const { return policy_; }
  std::string Value(int n) const { return "v" + std::to_string(n) + "-" + secret_; }
  int Issued() const { return std::atoi(Slurp(dir_ + "/count").c_str()); }
  std::string Revoked() const { return Slurp(dir_ + "/revoked"); }
  // Every value issued was revoked, each exactly once.
  void ExpectEachRevokedOnce() const {
    const std::string revoked = Revoked();
    ASSERT_GE(Issued(), 1);
    for (int n = 1; n <= Issued(); ++n) {
      const std::string line = Value(n) + "\n";
      const size_t first = revoked.find(line);
      EXPECT_NE(first, std::string::npos) << "v" << n << " never revoked: " << revoked;
      if (first != std::string::npos) {
        EXPECT_EQ(revoked.find(line, first + 1), std::string::npos) << "v" << n << " revoked twice";
      }
    }
  }
  void ExpectNoValue(const std::string& where, const std::string& text) const {
    EXPECT_EQ(text.find(secret_), std::string::npos) << "a credential's value appears in " << where;
  }
  CommandResult Attach(const TestCgroup& cg, const std::string& name) const {
    return Cordon({"attach", "--cgroup", cg.path(), "--policy", policy_, "--name", name, "--allow-degraded"});
  }
  static std::map<std::string, int> Kinds(const std::vector<AuditEvent>& events) {
    std::map<std::string, int> kinds;
    for (const auto& e : events)
      if (e.kind().rfind("credential.", 0) == 0) kinds[e.kind()]++;
    return kinds;
  }

 private:
  std::string dir_, secret_, policy_;
};

bool Exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

// Containing a sandbox through the agent ends the credentials it holds for
// it: the agent lets go of them, the containment removes and revokes them,
// and the agent neither takes them over again nor refreshes them (ttl 4 s,
// refresh at 2 s: the control of the agent test below shows it refreshing).
TEST_F(Agent, ContainmentEndsTheCredentialsItHolds) {
  TestAgent agent;
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  AgentCredentials creds(agent.dir(), "ttl: 4s, refreshBefore: 2s");
  TestCgroup cg("cred-contain");
  const std::string name = NamePrefix() + "cred-contain";
  WaitingChild holder(
      cg.path(), [] { return 0; },
      [] {
        (void)!::setgroups(0, nullptr);
        (void)!::setresgid(kCredOwner, kCredOwner, kCredOwner);
        (void)!::setresuid(kCredOwner, kCredOwner, kCredOwner);
      });
  CommandResult a = creds.Attach(cg, name);
  ASSERT_EQ(a.status, 0) << a.err;
  const std::string path = "/run/cordon/credentials/" + name + "/TOKEN";
  ASSERT_TRUE(Exists(path)) << "control: issued";
  CommandResult c = Cordon({"contain", "--cgroup", cg.path(), "--reason", "suspected"});
  ASSERT_EQ(c.status, 0) << c.err;
  EXPECT_FALSE(Exists(path));
  creds.ExpectEachRevokedOnce();
  const int issued = creds.Issued();
  ::sleep(5);  // past the ttl and two of the agent's checks
  EXPECT_EQ(creds.Issued(), issued) << "refreshed or issued again while contained";
  EXPECT_FALSE(Exists(path));
  creds.ExpectEachRevokedOnce();
  CommandResult status = Cordon({"status", "--json"});
  EXPECT_EQ(status.out.find("\"credentials\":[{\"name\":\"TOKEN\""), std::string::npos) << status.out;
  bool said = false;
  for (const auto& e : agent.Audit(cg.id()))
    said |= e.kind() == "credential.revoked" && e.reason() == "the sandbox was contained";
  EXPECT_TRUE(said) << agent.Log(0);
  creds.ExpectNoValue("contain's output", c.out + c.err);
  EXPECT_EQ(Cordon({"release", "--cgroup", cg.path()}).status, 0);
  EXPECT_EQ(holder.Go(), 0);
  EXPECT_EQ(agent.Stop(), 0);
}

// Through the agent: it issues at attach, holds the credential, refreshes it
// (the file replaced atomically: the owner's process in the sandbox, reading
// it in a loop, sees one whole value, then another, never a mix or no file)
// and at detach removes it and revokes every value. No output holds a value.
// Refreshed 2 s after issue with 6 s to spare before it would expire: the
// agent's loop also finishes the attach (its retroactive check), which took
// over 2 s in a loaded CI run (ttl 4 s, refresh at 2 s: it expired first).
TEST_F(Agent, HoldsAnAttachedSandboxsCredentialRefreshesItAndRevokesItAtDetach) {
  TestAgent agent;
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  AgentCredentials creds(agent.dir(), "ttl: 8s, refreshBefore: 6s");
  TestCgroup cg("cred");
  const std::string name = NamePrefix() + "cred";
  const std::string path = "/run/cordon/credentials/" + name + "/TOKEN";
  const std::string v1 = creds.Value(1), v2 = creds.Value(2);
  WaitingChild reader(
      cg.path(),
      [&] {
        // Until it saw the refresh (or 20 s passed: then 2).
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (std::chrono::steady_clock::now() < until) {
          int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
          if (fd < 0) return 100 + errno;
          char buf[256];
          ssize_t n = ::read(fd, buf, sizeof buf);
          ::close(fd);
          const std::string got(buf, n > 0 ? static_cast<size_t>(n) : 0);
          if (got == v2) return 0;
          if (got != v1) return 1;  // a partial or mixed value
        }
        return 2;
      },
      [] {
        (void)!::setgroups(0, nullptr);
        (void)!::setresgid(kCredOwner, kCredOwner, kCredOwner);
        (void)!::setresuid(kCredOwner, kCredOwner, kCredOwner);
      });
  CommandResult a = creds.Attach(cg, name);
  ASSERT_EQ(a.status, 0) << a.out << a.err;
  EXPECT_NE(a.err.find("the agent refreshes them"), std::string::npos) << a.err;
  auto printed = OfKind(ParseJsonLines(a.out), "credential.issued");
  ASSERT_EQ(printed.size(), 1u) << a.out;
  EXPECT_EQ(printed[0].kind(), "credential.issued");
  EXPECT_EQ(printed[0].enforcement(), "cordon-agent");
  EXPECT_EQ(printed[0].sandbox(), name);
  EXPECT_EQ(reader.Go(), 0) << "the owner's process read v1, then v2, each whole";
  CommandResult status = Cordon({"status", "--json"});
  EXPECT_NE(status.out.find("\"credentials\":[{\"name\":\"TOKEN\""), std::string::npos) << status.out;
  CommandResult d = Cordon({"detach", "--cgroup", cg.path()});
  EXPECT_EQ(d.status, 0) << d.err;
  EXPECT_FALSE(Exists(path)) << "the file outlived the detach";
  EXPECT_FALSE(Exists("/run/cordon/credential-store/" + name + ".state"));
  EXPECT_FALSE(Exists("/run/cordon/credentials/" + name));
  bool detached = false;
  for (const auto& e : ParseJsonLines(d.out))
    detached |= e.kind() == "credential.revoked" && e.reason() == "the sandbox was detached";
  EXPECT_TRUE(detached) << d.out;
  creds.ExpectEachRevokedOnce();
  ASSERT_TRUE(WaitFor(
      [&] {
        auto k = AgentCredentials::Kinds(agent.Audit(cg.id()));
        return k["credential.issued"] == 1 && k["credential.refreshed"] >= 1 && k["credential.revoked"] >= 1;
      },
      5000))
      << Slurp(agent.audit());
  EXPECT_EQ(agent.Stop(), 0);
  creds.ExpectNoValue("the agent's audit file", Slurp(agent.audit()));
  creds.ExpectNoValue("the agent's log", agent.Log(0));
  creds.ExpectNoValue("status --json", status.out);
  creds.ExpectNoValue("attach's and detach's output", a.out + a.err + d.out + d.err);
}

// kill -9 of the agent: the credential stays with its sandbox (file and
// state), and the next agent takes it over and refreshes it; every value
// ends revoked once at detach.
TEST_F(Agent, KilledAgentsCredentialIsTakenOverAndStillRefreshed) {
  TestAgent agent;
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  AgentCredentials creds(agent.dir(), "ttl: 6s, refreshBefore: 3s");
  TestCgroup cg("credkill");
  const std::string name = NamePrefix() + "credkill";
  const std::string path = "/run/cordon/credentials/" + name + "/TOKEN";
  CommandResult a = creds.Attach(cg, name);
  ASSERT_EQ(a.status, 0) << a.err;
  agent.Kill9();
  EXPECT_TRUE(Exists("/run/cordon/credential-store/" + name + ".state")) << "the state went with the agent";
  ASSERT_TRUE(agent.Start()) << agent.Log(1);
  EXPECT_TRUE(WaitFor(
      [&] { return agent.Log(1).find("took over the credentials of sandbox " + name) != std::string::npos; }, 5000))
      << agent.Log(1);
  EXPECT_TRUE(WaitFor([&] { return Slurp(path) == creds.Value(2); }, 15000)) << "not refreshed after the restart";
  CommandResult d = Cordon({"detach", "--cgroup", cg.path()});
  EXPECT_EQ(d.status, 0) << d.err;
  EXPECT_FALSE(Exists(path)) << d.err << agent.Log(1);  // (failed once in a loaded CI run: what the detach said)
  creds.ExpectEachRevokedOnce();
  EXPECT_EQ(agent.Stop(), 0);
  creds.ExpectNoValue("the agent's audit file", Slurp(agent.audit()));
  creds.ExpectNoValue("the agents' logs", agent.Log(0) + agent.Log(1));
}

// kill -9 of the agent and no agent until after the ttl: the credential is
// there until its ttl (never revoked early), and the agent that starts
// after it removes and revokes it at once (never left behind).
TEST_F(Agent, KilledAgentsCredentialEndsAtItsTtl) {
  TestAgent agent;
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  AgentCredentials creds(agent.dir(), "ttl: 3s");
  TestCgroup cg("credttl");
  const std::string name = NamePrefix() + "credttl";
  const std::string path = "/run/cordon/credentials/" + name + "/TOKEN";
  const auto before_issue = std::chrono::steady_clock::now();
  CommandResult a = creds.Attach(cg, name);
  ASSERT_EQ(a.status, 0) << a.err;
  agent.Kill9();
  if (std::chrono::steady_clock::now() - before_issue < std::chrono::seconds(2)) {
    EXPECT_EQ(Slurp(path), creds.Value(1)) << "gone before its ttl";
    EXPECT_EQ(creds.Revoked(), "");
  }
  std::this_thread::sleep_until(before_issue + std::chrono::seconds(4));
  ASSERT_TRUE(agent.Start()) << agent.Log(1);
  EXPECT_TRUE(WaitFor([&] { return !Exists(path) && creds.Revoked() == creds.Value(1) + "\n"; }, 10000))
      << "lingered past its ttl: " << creds.Revoked();
  EXPECT_TRUE(WaitFor([&] { return AgentCredentials::Kinds(agent.Audit(cg.id()))["credential.expired"] == 1; }, 5000))
      << Slurp(agent.audit());
  CommandResult d = Cordon({"detach", "--cgroup", cg.path()});
  EXPECT_EQ(d.status, 0) << d.err;
  creds.ExpectEachRevokedOnce();
  EXPECT_FALSE(Exists("/run/cordon/credential-store/" + name + ".state"));
  EXPECT_EQ(agent.Stop(), 0);
  creds.ExpectNoValue("the agent's audit file", Slurp(agent.audit()));
}

// The agent notices the sandbox's cgroup is gone (removed without a detach)
// and removes and revokes its credential; an attach whose issue fails
// attaches nothing and leaves nothing (the events say why).
TEST_F(Agent, EndsTheCredentialOfARemovedCgroupAndAFailedIssueAttachesNothing) {
  TestAgent agent;
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  AgentCredentials creds(agent.dir(), "ttl: 10m");
  {
    TestCgroup cg("credgone");
    const std::string name = NamePrefix() + "credgone";
    CommandResult a = creds.Attach(cg, name);
    ASSERT_EQ(a.status, 0) << a.err;
    const uint64_t id = cg.id();
    ASSERT_EQ(::rmdir(cg.path().c_str()), 0) << std::strerror(errno);
    EXPECT_TRUE(WaitFor([&] { return creds.Revoked() == creds.Value(1) + "\n"; }, 10000)) << "not revoked";
    // Revoked, then the file, tmpfs and view removed.
    EXPECT_TRUE(WaitFor([&] { return !Exists("/run/cordon/credentials/" + name); }, 5000));
    EXPECT_TRUE(WaitFor(
        [&] {
          for (const auto& e : agent.Audit(id))
            if (e.kind() == "credential.revoked" && e.reason() == "its sandbox's cgroup is gone") return true;
          return false;
        },
        5000))
        << Slurp(agent.audit());
    EXPECT_EQ(Cordon({"detach", "--id", std::to_string(id)}).status, 0);
  }
  TestCgroup cg("credfail");
  const std::string failing = agent.dir() + "/failing.yaml";
  std::ofstream(failing) << "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: f}\nspec:\n  credentials:\n"
                         << "    - {name: TOKEN, issue: [" << agent.dir() << "/fail], ttl: 1m, owner: \"4242\"}\n";
  CommandResult f = Cordon(
      {"attach", "--cgroup", cg.path(), "--policy", failing, "--name", NamePrefix() + "credfail", "--allow-degraded"});
  EXPECT_EQ(f.status, 1) << f.err;
  EXPECT_NE(f.err.find("issue: exit status 3; nothing attached"), std::string::npos) << f.err;
  EXPECT_EQ(Cordon({"status"}).out.find(cg.relative()), std::string::npos) << "half-attached";
  EXPECT_FALSE(Exists("/run/cordon/credential-store/" + NamePrefix() + "credfail.state"));
  EXPECT_FALSE(Exists("/run/cordon/credentials/" + NamePrefix() + "credfail"));
  EXPECT_TRUE(
      WaitFor([&] { return AgentCredentials::Kinds(agent.Audit(cg.id()))["credential.issue_failed"] == 1; }, 5000))
      << Slurp(agent.audit());
  EXPECT_EQ(agent.Stop(), 0);
}

// Foreign pinned state: the agent refuses to start, says why, and touches
// nothing.
// Key and publish directories of the test's own for the agent's built-in
// OIDC issuer (never the host's keys), removed at the end.
struct OidcKeyDir {
  std::string dir;
  OidcKeyDir() {
    char tmpl[] = "/tmp/cordon-agent-oidc-XXXXXX";
    dir = ::mkdtemp(tmpl);
  }
  ~OidcKeyDir() { cordon::test::Run({"rm", "-rf", "--", dir}); }
  std::string Config(const std::string& issuer) const {
    return "oidc:\n  issuer: " + issuer + "\n  keyDir: " + dir + "/k\n  publishDir: " + dir + "/pub\n";
  }
};

// The built-in OIDC issuer on the agent's metrics listener: the discovery
// document and the JWKS under the issuer's path (what a verifier fetches),
// a 404 elsewhere, the same files published; a token of `cordon run`
// verifies with the JWKS the agent serves (control: not for another
// audience). After `cordon oidc rotate` the agent serves the new key without
// a restart, and the token signed before still verifies with it.
TEST_F(Agent, ServesTheOidcIssuersDocumentsAndFollowsARotation) {
  const std::string python = cordon::test::PythonWithJwt();
  ASSERT_FALSE(python.empty()) << "python3-jwt is needed to verify tokens independently (setup.sh installs it)";
  const OidcKeyDir key_dir;
  const std::string& keys = key_dir.dir;
  const std::string issuer = "http://cordon.test/ci";
  TestAgent agent(key_dir.Config(issuer), /*metrics=*/true);
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  const uint16_t port = MetricsPort(agent);
  ASSERT_NE(port, 0);
  std::string r = HttpGet(port, "/ci/.well-known/openid-configuration");
  EXPECT_EQ(r.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << r;
  EXPECT_NE(r.find("Content-Type: application/json"), std::string::npos) << r;
  EXPECT_NE(r.find("\"issuer\":\"" + issuer + "\""), std::string::npos) << r;
  EXPECT_NE(r.find("\"jwks_uri\":\"" + issuer + "/.well-known/jwks.json\""), std::string::npos) << r;
  EXPECT_EQ(HttpBody(r), Slurp(keys + "/pub/openid-configuration")) << "the published file is what is served";
  const std::string jwks = HttpBody(HttpGet(port, "/ci/.well-known/jwks.json"));
  EXPECT_EQ(jwks, Slurp(keys + "/pub/jwks.json"));
  EXPECT_NE(jwks.find("\"kty\":\"EC\""), std::string::npos) << jwks;
  EXPECT_EQ(HttpGet(port, "/.well-known/jwks.json").rfind("HTTP/1.1 404 ", 0), 0u) << "only under the issuer's path";
  EXPECT_NE(agent.Log(0).find("the built-in OIDC issuer (iss " + issuer + ", key "), std::string::npos) << agent.Log(0);

  // A run's token, checked with what the agent serves.
  const std::string dir = agent.dir();
  std::ofstream(dir + "/policy.yaml") << "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: oidc}\nspec:\n"
                                         "  credentials:\n    - {name: ID_TOKEN, oidc: {audience: vault}, ttl: 5m}\n";
  CommandResult run = Cordon({"run", "--config", agent.config(), "--policy", dir + "/policy.yaml", "--name",
                              NamePrefix() + "oidc", "--audit", dir + "/run.jsonl",  // not /var/log/cordon
                              "--", "/bin/sh", "-c", "cat \"$ID_TOKEN_FILE\""});
  ASSERT_EQ(run.status, 0) << run.err;
  std::ofstream(dir + "/token") << run.out;
  std::ofstream(dir + "/verify.py") << cordon::test::kVerifyJwtPy;
  auto verify = [&](const std::string& jwks_text, const std::string& audience) {
    std::ofstream(dir + "/jwks.json", std::ios::trunc) << jwks_text;
    return cordon::test::Shell(python + " " + dir + "/verify.py " + dir + "/token " + dir + "/jwks.json " + audience +
                               " " + issuer)
        .second;
  };
  const std::string ok = verify(jwks, "vault");
  ASSERT_EQ(ok.rfind("OK ", 0), 0u) << ok;
  EXPECT_NE(ok.find("\"sub\": \"" + NamePrefix() + "oidc\""), std::string::npos) << ok;
  EXPECT_EQ(verify(jwks, "sts.amazonaws.com").rfind("InvalidAudienceError", 0), 0u) << "control";
  EXPECT_EQ(Slurp(agent.audit()).find(run.out), std::string::npos) << "the token is in the agent's audit file";

  // Rotation: served without a restart; the earlier token still verifies.
  CommandResult rotated = Cordon({"oidc", "rotate", "--config", agent.config()});
  ASSERT_EQ(rotated.status, 0) << rotated.err;
  std::string served;
  EXPECT_TRUE(WaitFor(
      [&] {
        served = HttpBody(HttpGet(port, "/ci/.well-known/jwks.json"));
        return served != jwks;
      },
      10000))
      << served;
  EXPECT_NE(served.find("},{"), std::string::npos) << "two keys: the new and the previous one: " << served;
  EXPECT_EQ(verify(served, "vault").rfind("OK ", 0), 0u) << verify(served, "vault");
  EXPECT_NE(agent.Log(0).find("the built-in OIDC issuer read its keys again"), std::string::npos) << agent.Log(0);
  EXPECT_EQ(agent.Stop(), 0);
  for (const std::string& out : {agent.Log(0), Slurp(agent.audit()), served})
    EXPECT_EQ(out.find("PRIVATE"), std::string::npos) << out;
}

// The built-in issuer for an attached sandbox (issue 15: "works for cordon
// run and for cordon attach / the agent"): attach through the agent puts a
// token signed with the agent's key at the sandbox's credential path; it
// verifies with the JWKS the agent serves, with the sandbox as subject (control:
// not for another audience), and detach removes it. Never in the agent's
// log or audit file, nor in what attach prints.
TEST_F(Agent, AnAttachedSandboxsOidcTokenVerifiesWithTheKeysTheAgentServes) {
  const std::string python = cordon::test::PythonWithJwt();
  ASSERT_FALSE(python.empty()) << "python3-jwt is needed to verify tokens independently (setup.sh installs it)";
  const OidcKeyDir key_dir;
  const std::string issuer = "http://cordon.test/attach";
  TestAgent agent(key_dir.Config(issuer), /*metrics=*/true);
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  const uint16_t port = MetricsPort(agent);
  ASSERT_NE(port, 0);
  const std::string dir = agent.dir();
  std::ofstream(dir + "/policy.yaml") << "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: oidc-attach}\n"
                                         "spec:\n  credentials:\n"
                                         "    - {name: ID_TOKEN, oidc: {audience: vault}, ttl: 5m, owner: \"0\"}\n";
  TestCgroup cg("oidc-attach");
  const std::string name = NamePrefix() + "oidc-attach";
  CommandResult attached =
      Cordon({"attach", "--cgroup", cg.path(), "--policy", dir + "/policy.yaml", "--name", name, "--allow-degraded"});
  ASSERT_EQ(attached.status, 0) << attached.err;
  const std::string path = "/run/cordon/credentials/" + name + "/ID_TOKEN";
  const std::string token = Slurp(path);
  ASSERT_EQ(token.rfind("eyJ", 0), 0u) << "no token at " << path;
  std::ofstream(dir + "/token") << token;
  std::ofstream(dir + "/verify.py") << cordon::test::kVerifyJwtPy;
  std::ofstream(dir + "/jwks.json") << HttpBody(HttpGet(port, "/attach/.well-known/jwks.json"));
  auto verify = [&](const std::string& audience) {
    return cordon::test::Shell(python + " " + dir + "/verify.py " + dir + "/token " + dir + "/jwks.json " + audience +
                               " " + issuer)
        .second;
  };
  const std::string ok = verify("vault");
  ASSERT_EQ(ok.rfind("OK ", 0), 0u) << ok;
  EXPECT_NE(ok.find("\"sub\": \"" + name + "\""), std::string::npos) << ok;
  EXPECT_EQ(verify("sts.amazonaws.com").rfind("InvalidAudienceError", 0), 0u) << "control";

  ASSERT_EQ(Cordon({"detach", "--cgroup", cg.path()}).status, 0);
  EXPECT_TRUE(WaitFor([&] { return !Exists(path); }, 10000)) << "the token outlived its sandbox";
  for (const std::string& out : {attached.out, attached.err, agent.Log(0), Slurp(agent.audit())})
    EXPECT_EQ(out.find(token), std::string::npos) << out;
}

TEST_F(Agent, RefusesPinnedStateOfAnotherLayoutVersionAndTouchesNothing) {
  TestAgent agent;
  ASSERT_EQ(Cordon({"status"}).status, 0);  // bpffs and the v1 tree exist
  const std::string base = "/sys/fs/bpf/cordon";

  // A newer cordon's tree next to ours.
  const std::string v2 = base + "/v" + std::to_string(CORDON_LAYOUT_VERSION + 1);
  ASSERT_EQ(::mkdir(v2.c_str(), 0700), 0) << std::strerror(errno);
  CommandResult r = agent.StartExpectingFailure();
  ::rmdir(v2.c_str());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find(v2 + " holds state of layout version " + std::to_string(CORDON_LAYOUT_VERSION + 1)),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("nothing was touched"), std::string::npos) << r.err;
  struct stat st;
  EXPECT_NE(::stat(agent.socket().c_str(), &st), 0) << "no socket was created";

  // A sandbox whose info says another layout version.
  const uint64_t fake_id = 900000000000000ull + static_cast<uint64_t>(::getpid());
  const std::string dir = base + "/v" + std::to_string(CORDON_LAYOUT_VERSION) + "/sandboxes/" + std::to_string(fake_id);
  cordon_sandbox_info info = {};
  info.layout_version = CORDON_LAYOUT_VERSION + 1;
  info.sandbox_id = fake_id;
  std::strcpy(info.name, "from-the-future");
  int map = bpf_map_create(BPF_MAP_TYPE_ARRAY, "cordon_info", 4, sizeof info, 1, nullptr);
  ASSERT_GE(map, 0);
  uint32_t zero = 0;
  ASSERT_EQ(bpf_map_update_elem(map, &zero, &info, BPF_ANY), 0);
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(bpf_obj_pin(map, (dir + "/info").c_str()), 0);
  ::close(map);
  r = agent.StartExpectingFailure();
  CommandResult check = Cordon({"agent", "--config", agent.config(), "--check"});
  // Untouched: still there, still saying version 2.
  int again = bpf_obj_get((dir + "/info").c_str());
  cordon_sandbox_info read_back = {};
  bool intact = again >= 0 && bpf_map_lookup_elem(again, &zero, &read_back) == 0 &&
                read_back.layout_version == CORDON_LAYOUT_VERSION + 1;
  if (again >= 0) ::close(again);
  ::unlink((dir + "/info").c_str());
  ::rmdir(dir.c_str());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find(dir + " has state layout version " + std::to_string(CORDON_LAYOUT_VERSION + 1)),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("refusing to start"), std::string::npos) << r.err;
  EXPECT_TRUE(intact);
  EXPECT_EQ(check.status, 1);
  EXPECT_NE(check.err.find("has state layout version"), std::string::npos) << check.err;

  // An info of another size (another struct layout) is refused as well.
  map = bpf_map_create(BPF_MAP_TYPE_ARRAY, "cordon_info", 4, 100, 1, nullptr);
  ASSERT_GE(map, 0);
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(bpf_obj_pin(map, (dir + "/info").c_str()), 0);
  ::close(map);
  r = agent.StartExpectingFailure();
  ::unlink((dir + "/info").c_str());
  ::rmdir(dir.c_str());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("another state layout (info of 100 bytes"), std::string::npos) << r.err;

  // And with nothing foreign left, it starts.
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  EXPECT_EQ(agent.Stop(), 0);
}

TEST_F(Agent, OneAgentAtATimeAndSigtermDrainsFlushesAndExitsZero) {
  TestAgent agent;
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  CommandResult second = agent.StartExpectingFailure();
  EXPECT_EQ(second.status, 1);
  EXPECT_NE(second.err.find("another cordon agent is running (pid " + std::to_string(agent.pid())), std::string::npos)
      << second.err;
  struct stat st;
  ASSERT_EQ(::stat(agent.socket().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "root only";
  EXPECT_TRUE(S_ISSOCK(st.st_mode));

  TestCgroup cg("sigterm");
  PolicyFile policy(LoopbackPolicy("sigterm", 1));
  ASSERT_EQ(Cordon({"attach", "--cgroup", cg.path(), "--policy", policy.path(), "--allow-degraded"}).status, 0);
  ASSERT_TRUE(WaitFor([&] { return agent.Sandbox(cg.id()).has_value(); }, 5000));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(RunInCgroup(cg.path(), [] { return TcpConnect(V4("127.0.0.1", 9)); }), EPERM);
  EXPECT_EQ(agent.Stop(), 0);
  EXPECT_EQ(Account(agent.Audit(cg.id()), "net.connect").delivered, 5u) << "drained before exiting";
  EXPECT_NE(::stat(agent.socket().c_str(), &st), 0) << "socket removed";
  EXPECT_NE(agent.Log(0).find("stopping on SIGTERM"), std::string::npos) << agent.Log(0);
  // Enforcement without any agent.
  EXPECT_EQ(RunInCgroup(cg.path(), [] { return TcpConnect(V4("127.0.0.1", 9)); }), EPERM);

  // Without the agent: tail says it reads directly; status says no agent.
  CommandResult r = Cordon({"tail", "--cgroup", cg.path(), "-o", "compact"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("no agent is running"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  r = Cordon({"status", "--json"});
  EXPECT_NE(r.out.find("\"agent\":null"), std::string::npos) << r.out;
}

// The remote syslog sink through agent.yaml (issue 21): the denials of an
// attached sandbox wait in the spool while the collector is down, the spool
// survives the agent's stop, and the next agent sends them to a real rsyslog
// over TLS (client certificate required) once it is up: each once, in order.
TEST_F(Agent, RemoteSyslogSinkSpoolSurvivesAnAgentRestartAndArrivesOverTls) {
  if (::access(kRsyslogd, X_OK) != 0) GTEST_SKIP() << "rsyslog is not installed (setup.sh installs it)";
  Collector collector;
  ASSERT_TRUE(collector.MakeCertificates());
  const std::string d = collector.dir(), audit = d + "/audit.jsonl";
  TestAgent agent("sinks:\n  - {kind: jsonl, path: " + audit +
                  ", fsync: never}\n  - kind: syslog\n    address: tls://127.0.0.1:" +
                  std::to_string(collector.port()) + "\n    tls: {ca: " + d + "/ca.pem, cert: " + d +
                  "/client.pem, key: " + d + "/client.key}\n    spool: {path: " + d + "/spool, maxBytes: 64Mi}\n");
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  TestCgroup cg("remote-syslog");
  PolicyFile policy(LoopbackPolicy("remote-syslog", 1));
  ASSERT_EQ(Cordon({"attach", "--cgroup", cg.path(), "--policy", policy.path(), "--allow-degraded"}).status, 0);
  ASSERT_TRUE(WaitFor([&] { return agent.Sandbox(cg.id()).has_value(); }, 5000));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(RunInCgroup(cg.path(), [] { return TcpConnect(V4("127.0.0.1", 9)); }), EPERM);
  std::vector<std::string> ids;
  ASSERT_TRUE(WaitFor(
      [&] {
        ids.clear();
        for (const auto& e : ParseJsonLines(Slurp(audit), true))
          if (e.sandbox_cgroup_id() == cg.id() && e.kind() == "net.connect") ids.push_back(e.id());
        return ids.size() == 5;
      },
      10000));
  EXPECT_EQ(agent.Stop(), 0);
  EXPECT_NE(agent.Log(0).find("Connection refused"), std::string::npos) << agent.Log(0);
  EXPECT_TRUE(collector.Ids().empty());

  ASSERT_TRUE(collector.Start(Collector::Mode::kTls, /*client_certs=*/true)) << collector.Log();
  ASSERT_TRUE(agent.Start()) << agent.Log(1);
  auto arrived = [&] {
    std::vector<std::string> mine;
    for (const auto& id : collector.Ids())
      if (std::find(ids.begin(), ids.end(), id) != ids.end()) mine.push_back(id);
    return mine;
  };
  ASSERT_TRUE(WaitFor([&] { return arrived().size() >= 5; }, 30000)) << agent.Log(1) << collector.Log();
  const std::string connected = "sink syslog:tls://127.0.0.1:" + std::to_string(collector.port()) + " connected";
  EXPECT_TRUE(WaitFor([&] { return agent.Log(1).find(connected) != std::string::npos; }, 10000)) << agent.Log(1);
  EXPECT_EQ(agent.Stop(), 0);
  collector.Stop();
  EXPECT_EQ(arrived(), ids) << "each once, in the audit file's order";
  // The key is named by path at most, never shown.
  std::string key = Slurp(d + "/client.key");
  ASSERT_GT(key.size(), 100u);
  std::string body = key.substr(key.find('\n') + 1, 40);
  EXPECT_EQ(agent.Log(0).find(body), std::string::npos);
  EXPECT_EQ(agent.Log(1).find(body), std::string::npos);
}

// format: ocsf through agent.yaml (issue 21): the denials of an attached
// sandbox reach a real rsyslog (TCP) as OCSF objects: Network Activity,
// Refuse, blocked, the destination and the process that asked, each the
// audit file's event by metadata.uid, in order.
TEST_F(Agent, OcsfSinkSendsASandboxsDenialsAsOcsfObjects) {
  if (::access(kRsyslogd, X_OK) != 0) GTEST_SKIP() << "rsyslog is not installed (setup.sh installs it)";
  Collector collector;
  ASSERT_TRUE(collector.Start(Collector::Mode::kTcp)) << collector.Log();
  const std::string d = collector.dir(), audit = d + "/audit.jsonl";
  TestAgent agent(
      "sinks:\n  - {kind: jsonl, path: " + audit + ", fsync: never}\n  - kind: syslog\n    address: tcp://127.0.0.1:" +
      std::to_string(collector.port()) + "\n    format: ocsf\n    spool: {path: " + d + "/spool, maxBytes: 64Mi}\n");
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  TestCgroup cg("ocsf-sink");
  PolicyFile policy(LoopbackPolicy("ocsf-sink", 1));
  ASSERT_EQ(Cordon({"attach", "--cgroup", cg.path(), "--policy", policy.path(), "--allow-degraded"}).status, 0);
  ASSERT_TRUE(WaitFor([&] { return agent.Sandbox(cg.id()).has_value(); }, 5000));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(RunInCgroup(cg.path(), [] { return TcpConnect(V4("127.0.0.1", 9)); }), EPERM);
  std::vector<cordon::v1::AuditEvent> denied;
  ASSERT_TRUE(WaitFor(
      [&] {
        denied.clear();
        for (const auto& e : ParseJsonLines(Slurp(audit), true))
          if (e.sandbox_cgroup_id() == cg.id() && e.kind() == "net.connect") denied.push_back(e);
        return denied.size() == 3;
      },
      10000));
  std::vector<google::protobuf::Struct> mine;
  ASSERT_TRUE(WaitFor(
      [&] {
        mine.clear();
        for (const auto& line : collector.Lines()) {
          google::protobuf::Struct o;
          if (!google::protobuf::util::JsonStringToMessage(line, &o).ok()) continue;
          const auto& meta = o.fields().find("metadata");
          if (meta == o.fields().end()) continue;
          const auto& uid = meta->second.struct_value().fields().find("uid");
          if (uid == meta->second.struct_value().fields().end()) continue;
          for (const auto& e : denied)
            if (e.id() == uid->second.string_value()) mine.push_back(o);
        }
        return mine.size() >= 3;
      },
      30000))
      << agent.Log(0) << collector.Log();
  EXPECT_EQ(agent.Stop(), 0);
  collector.Stop();
  ASSERT_EQ(mine.size(), 3u) << "each once";
  for (size_t i = 0; i < 3; ++i) {
    const auto& f = mine[i].fields();
    EXPECT_EQ(f.at("metadata").struct_value().fields().at("uid").string_value(), denied[i].id()) << "in order";
    EXPECT_EQ(f.at("class_uid").number_value(), 4001);
    EXPECT_EQ(f.at("activity_id").number_value(), 5);
    EXPECT_EQ(f.at("action_id").number_value(), 2);
    EXPECT_EQ(f.at("disposition_id").number_value(), 2);
    const auto& dst = f.at("dst_endpoint").struct_value().fields();
    EXPECT_EQ(dst.at("ip").string_value(), "127.0.0.1");
    EXPECT_EQ(dst.at("port").number_value(), 9);
    const auto& process = f.at("actor").struct_value().fields().at("process").struct_value().fields();
    EXPECT_EQ(process.at("pid").number_value(), denied[i].pid());
    EXPECT_GT(denied[i].pid(), 0u);
    EXPECT_EQ(f.at("policy").struct_value().fields().at("name").string_value(), "ocsf-sink");
  }
}

// The CLI through the agent: status, tail --since replay, metrics, attach,
// update and detach requests.
// /healthz (issue 19 item 12): 200 "ok" while every sink writes, 503
// "degraded" naming the sink once one loses events: here a jsonl sink on a
// 16 KiB tmpfs the test mounts, filled by real denials.
TEST_F(Agent, HealthzSaysWhetherEverySinkWrites) {
  char tmpl[] = "/tmp/cordon-healthz-XXXXXX";
  const std::string mnt = ::mkdtemp(tmpl);
  ASSERT_EQ(::mount("tmpfs", mnt.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=16k,mode=0700"), 0) << strerror(errno);
  struct Unmount {
    std::string dir;
    ~Unmount() {
      ::umount2(dir.c_str(), MNT_DETACH);
      ::rmdir(dir.c_str());
    }
  } unmount{mnt};
  const std::string audit = mnt + "/audit.jsonl";
  TestAgent agent("sinks:\n  - kind: jsonl\n    path: " + audit + "\n    fsync: never\n", /*metrics=*/true);
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  const uint16_t port = MetricsPort(agent);
  ASSERT_NE(port, 0);
  // The number of sandboxes adopted (others than the test's may be there).
  auto adopted = [](const std::string& response) {
    const size_t at = response.find("\nsandboxes: ");
    return at == std::string::npos ? -1 : std::atoi(response.c_str() + at + 12);
  };
  std::string health = HttpGet(port, "/healthz");
  EXPECT_EQ(health.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << health;
  EXPECT_NE(health.find("\r\n\r\nok\nsandboxes: "), std::string::npos) << health;
  EXPECT_NE(health.find(" adopted\nsink jsonl:" + audit + ": writing (0 written, 0 not written)\n"), std::string::npos)
      << health;
  const int before = adopted(health);
  EXPECT_GE(before, 0) << health;
  TestCgroup cg("healthz");
  CommandResult r = Cordon({"attach", "--cgroup", cg.path(), "--name", NamePrefix() + "healthz", "--allow-degraded"});
  ASSERT_EQ(r.status, 0) << r.err;
  // Each denial is a line of some 700 bytes: the file system is full after a few dozen.
  bool degraded = WaitFor(
      [&] {
        EXPECT_EQ(RunInCgroup(cg.path(), [] { return TcpConnect(V4("127.0.0.1", 9)); }), EPERM);
        health = HttpGet(port, "/healthz");
        return health.rfind("HTTP/1.1 503", 0) == 0;
      },
      20000);
  ASSERT_TRUE(degraded) << health;
  EXPECT_NE(health.find("\r\n\r\ndegraded\nsandboxes: "), std::string::npos) << health;
  EXPECT_EQ(adopted(health), before + 1) << health;
  EXPECT_NE(health.find(" adopted\nsink jsonl:" + audit + ": failing: "), std::string::npos) << health;
  EXPECT_NE(health.find("No space left on device"), std::string::npos) << health;
  EXPECT_NE(HttpGet(port, "/nothing").find("health at /healthz"), std::string::npos);
  EXPECT_EQ(Cordon({"detach", "--cgroup", cg.path()}).status, 0);
}

TEST_F(Agent, CliAndControlRequestsGoThroughTheAgent) {
  TestAgent agent("", /*metrics=*/true);
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  TestCgroup cg("control");
  TcpListener listener;
  // Attach through the control socket.
  auto client = agent::AgentClient::Connect(agent.socket());
  ASSERT_TRUE(client.ok());
  cordon::v1::Request request;
  auto* attach = request.mutable_attach();
  attach->set_cgroup(cg.path());
  attach->set_policy_text(LoopbackPolicy("ctl-one", listener.port()));
  attach->set_policy_file("one.yaml");
  attach->set_name(NamePrefix() + "control");
  attach->set_allow_degraded(true);
  auto response = client->Call(request);
  ASSERT_TRUE(response.ok());
  ASSERT_EQ(response->error(), "");
  EXPECT_EQ(response->attach().sandbox_id(), cg.id());
  EXPECT_FALSE(response->attach().replaced());
  EXPECT_TRUE(agent.Sandbox(cg.id()).has_value()) << "adopted at once";
  EXPECT_EQ(RunInCgroup(cg.path(), [] { return TcpConnect(V4("127.0.0.1", 9)); }), EPERM);
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return TcpConnect(V4("127.0.0.1", listener.port())); }), 0);

  // A bad policy names file:line.
  request.mutable_attach()->set_policy_text("apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: x}\nspec:\n  bogus: 1\n");
  response = client->Call(request);
  ASSERT_TRUE(response.ok());
  EXPECT_NE(response->error().find("one.yaml:5:3: spec.bogus: unknown field"), std::string::npos) << response->error();

  // Update: the policy of the attached sandbox is replaced.
  cordon::v1::Request update;
  update.mutable_update()->set_sandbox_id(cg.id());
  update.mutable_update()->set_policy_text(LoopbackPolicy("ctl-two", 1));
  update.mutable_update()->set_allow_degraded(true);
  response = client->Call(update);
  ASSERT_TRUE(response.ok());
  ASSERT_EQ(response->error(), "");
  EXPECT_TRUE(response->attach().replaced());
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return TcpConnect(V4("127.0.0.1", listener.port())); }), EPERM);
  listener.AcceptPending();
  ASSERT_TRUE(WaitFor([&] { return Account(agent.Audit(cg.id()), "net.connect").delivered == 2; }, 5000));
  auto events = agent.Audit(cg.id());
  EXPECT_EQ(events[0].policy(), "ctl-one");
  EXPECT_EQ(events[1].policy(), "ctl-two") << "events carry the policy in force";

  // status shows the agent's accounting.
  CommandResult r = Cordon({"status"});
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("agent: pid " + std::to_string(agent.pid())), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(NamePrefix() + "control"), std::string::npos) << r.out;
  r = Cordon({"status", "--json"});
  EXPECT_NE(r.out.find("\"agent\":{\"pid\":" + std::to_string(agent.pid())), std::string::npos) << r.out;

  // tail --since replays the audit file; without -f it ends there.
  r = Cordon({"tail", "--since", "10m", "--cgroup", cg.path(), "-o", "json"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(ParseJsonLines(r.out).size(), 2u) << r.out;
  r = Cordon({"tail", "--since", "10m", "--sandbox", NamePrefix() + "control", "--kind", "file.", "-o", "compact"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "") << "no file events";
  r = Cordon({"tail", "--since", "soon"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--since takes a duration"), std::string::npos) << r.err;
  // The filters a responder scopes with (issue 19 item 12): each selects part
  // of the same two events, and the unfiltered replay above, their control,
  // has both.
  ASSERT_NE(events[0].pid(), events[1].pid());
  auto replayed = [&](std::vector<std::string> filters, const std::string& since = "10m") {
    std::vector<std::string> args = {"tail", "--since", since, "--cgroup", cg.path(), "-o", "json"};
    args.insert(args.end(), filters.begin(), filters.end());
    CommandResult t = Cordon(args);
    EXPECT_EQ(t.status, 0) << t.err;
    std::vector<uint32_t> pids;
    for (const auto& e : ParseJsonLines(t.out)) pids.push_back(e.pid());
    return pids;
  };
  EXPECT_EQ(replayed({"--pid", std::to_string(events[1].pid())}), std::vector<uint32_t>{events[1].pid()});
  EXPECT_EQ(replayed({"--verdict", "denied"}).size(), 2u);
  EXPECT_EQ(replayed({"--verdict", "audited", "--verdict", "detected"}).size(), 0u);
  const std::string first = google::protobuf::util::TimeUtil::ToString(events[0].time());
  const std::string second = google::protobuf::util::TimeUtil::ToString(events[1].time());
  EXPECT_EQ(replayed({"--until", first}), std::vector<uint32_t>{events[0].pid()}) << first;
  EXPECT_EQ(replayed({}, second), std::vector<uint32_t>{events[1].pid()}) << second;
  r = Cordon({"tail", "--sandbox", NamePrefix() + "no-such-sandbox"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("warning: no sandbox named '" + NamePrefix() + "no-such-sandbox' is attached now"),
            std::string::npos)
      << r.err;
  r = Cordon({"tail", "--sandbox", NamePrefix() + "control"});
  EXPECT_EQ(r.err.find("warning: no sandbox named"), std::string::npos) << "control: the attached one: " << r.err;
  for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
           {"tail", "-f", "--until", "1m"},
           {"tail", "--pid", "0"},
           {"tail", "--pid", "12x"},
           {"tail", "--verdict", "bogus"},
           {"tail", "--until", "2026-13-01T00:00:00Z"},
           {"tail", "--since", "1m", "--until", "1h"},
       }) {
    r = Cordon(bad);
    EXPECT_EQ(r.status, 2) << bad[1] << " " << bad[2] << ": " << r.err;
  }

  // --since then -f: the replay, then live events, nothing twice.
  LineReader follow({CORDON_BINARY, "tail", "-f", "--since", "1h", "--cgroup", cg.path()});
  ASSERT_TRUE(WaitFor([&] { return follow.Count() == 2; }, 10000));
  EXPECT_EQ(RunInCgroup(cg.path(), [] { return TcpConnect(V4("127.0.0.1", 9)); }), EPERM);
  EXPECT_TRUE(WaitFor([&] { return follow.Count() == 3; }, 10000));
  // Nothing twice: a sentinel event after it must be the very next line.
  EXPECT_EQ(RunInCgroup(cg.path(), [] { return TcpConnect(V4("127.0.0.1", 10)); }), EPERM);
  EXPECT_TRUE(WaitFor([&] { return follow.Count() >= 4; }, 10000));
  {
    auto lines = follow.Lines();
    ASSERT_GE(lines.size(), 4u);
    EXPECT_NE(lines[3].first.find("\"port\":10"), std::string::npos) << "the sentinel comes right after:\n"
                                                                     << lines[3].first;
  }
  follow.Stop();

  // Prometheus metrics on the loopback address the agent reports.
  const uint16_t port = MetricsPort(agent);
  ASSERT_NE(port, 0);
  const std::string body = HttpGet(port, "/metrics");
  EXPECT_NE(body.find("200"), std::string::npos) << body.substr(0, 200);
  EXPECT_NE(body.find("sandbox=\"" + NamePrefix() + "control\""), std::string::npos) << body;
  EXPECT_NE(body.find("cordon_"), std::string::npos);
  // Resource use of each sandbox (its cgroup's cpu.stat, a core cgroup2 file):
  // the probes above ran there.
  {
    const std::string cpu = "cordon_sandbox_cpu_seconds_total{sandbox=\"" + NamePrefix() + "control\"";
    size_t at = body.find(cpu);
    ASSERT_NE(at, std::string::npos) << body;
    at = body.find("} ", at);
    ASSERT_NE(at, std::string::npos);
    EXPECT_GT(std::stod(body.substr(at + 2)), 0.0) << body.substr(at, 40);
  }

  // detach through the CLI: the agent drains, then detaches.
  EXPECT_EQ(RunInCgroup(cg.path(), [] { return TcpConnect(V4("127.0.0.1", 9)); }), EPERM);
  r = Cordon({"detach", "--cgroup", cg.path()});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("the agent delivered its last"), std::string::npos) << r.err;
  EXPECT_EQ(Account(agent.Audit(cg.id()), "net.connect").delivered, 5u) << "nothing lost at detach (four probes and the sentinel)";
  EXPECT_FALSE(GetSandbox(cg.id()).ok());
  EXPECT_FALSE(agent.Sandbox(cg.id()).has_value());
  EXPECT_EQ(agent.Stop(), 0);
}

// `cordon attach` and `cordon update` go through the agent when it runs: the
// retroactive check's events (a pre-existing connection the policy denies,
// destroyed) reach the agent's audit file, not only the command's stdout.
int g_held_fd = -1;

TEST_F(Agent, CliAttachAndUpdateGoThroughTheAgentWithRetroactiveEvents) {
  TestAgent agent;
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  TestCgroup cg("retro");
  TcpListener listener;
  const uint16_t port = listener.port();
  WaitingChild child(
      cg.path(),
      [] {
        char c;
        return ::read(g_held_fd, &c, 1) < 0 ? errno : 0;  // 0: EOF (kept or closed), else the abort
      },
      [port] {
        g_held_fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_storage a = V4("127.0.0.1", port);
        (void)!::connect(g_held_fd, reinterpret_cast<sockaddr*>(&a), sizeof(sockaddr_in));
      });
  PolicyFile deny(LoopbackPolicy("retro-deny", 1));  // the connection waits in the listener's backlog
  CommandResult r = Cordon({"attach", "--cgroup", cg.path(), "--policy", deny.path(), "--name", NamePrefix() + "retro",
                            "--allow-degraded"});
  ASSERT_EQ(r.status, 0) << r.err;
  // (file.preexisting lines too: the child inherited whatever files the test runner holds open)
  std::vector<AuditEvent> printed;
  for (auto& e : ParseJsonLines(r.out))
    if (e.kind() == "net.preexisting") printed.push_back(std::move(e));
  ASSERT_EQ(printed.size(), 1u) << r.out;
  EXPECT_EQ(printed[0].verdict(), "destroyed");
  EXPECT_NE(r.err.find("1 destroyed"), std::string::npos) << r.err;
  EXPECT_EQ(child.Go(), ECONNABORTED) << "the pre-existing connection was torn down";
  ASSERT_TRUE(WaitFor([&] { return Account(agent.Audit(cg.id()), "net.preexisting").delivered == 1; }, 5000))
      << "the agent delivered the retroactive event to its audit file";
  auto audit = agent.Audit(cg.id());
  EXPECT_EQ(audit[0].net().port(), port);
  EXPECT_EQ(audit[0].sandbox(), NamePrefix() + "retro");

  // update replaces the policy of an attached sandbox, through the agent too.
  PolicyFile allow(LoopbackPolicy("retro-allow", port));
  r = Cordon({"update", "--cgroup", cg.path(), "--policy", allow.path(), "--allow-degraded"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("replaced policy of"), std::string::npos) << r.err;
  EXPECT_EQ(RunInCgroup(cg.path(), [port] { return TcpConnect(V4("127.0.0.1", port)); }), 0);
  // ... and refuses to create one.
  TestCgroup empty("noattach");
  r = Cordon({"update", "--cgroup", empty.path(), "--policy", allow.path()});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("no sandbox is attached"), std::string::npos) << r.err;
  r = Cordon({"update", "--cgroup", cg.path()});
  EXPECT_EQ(r.status, 2) << "update needs --policy";
  EXPECT_EQ(agent.Stop(), 0);
}

// spec.quiet with the agent: it reads the patterns pinned with the sandbox
// when it adopts it and again after a policy replacement, marks the events
// they match quiet in its audit file, and counts them apart (status,
// metrics). Control: the connect no pattern names is not quiet.
TEST_F(Agent, QuietEventsAreMarkedAndAReplacementsPatternsApply) {
  TestAgent agent(/*extra_yaml=*/"", /*metrics=*/true);
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  TcpListener first, second;
  const uint16_t p1 = first.port(), p2 = second.port();
  TestCgroup cg("quiet");
  PolicyFile a(QuietConnectPolicy("quiet-a", p1)), b(QuietConnectPolicy("quiet-b", p2));
  CommandResult r = Cordon(
      {"attach", "--cgroup", cg.path(), "--policy", a.path(), "--name", NamePrefix() + "quiet", "--allow-degraded"});
  ASSERT_EQ(r.status, 0) << r.err;
  auto connect_both = [&] {
    EXPECT_EQ(RunInCgroup(cg.path(), [&] { return TcpConnect(V4("127.0.0.1", p1)); }), EPERM);
    EXPECT_EQ(RunInCgroup(cg.path(), [&] { return TcpConnect(V4("127.0.0.1", p2)); }), EPERM);
  };
  auto connects = [&] {
    std::vector<AuditEvent> out;
    for (auto& e : agent.Audit(cg.id()))
      if (e.kind() == "net.connect") out.push_back(std::move(e));
    return out;
  };
  connect_both();
  ASSERT_TRUE(WaitFor([&] { return connects().size() == 2; }, 10000)) << agent.Log(0);
  auto events = connects();
  ASSERT_EQ(events[0].net().port(), p1);
  EXPECT_TRUE(events[0].quiet());
  EXPECT_EQ(events[0].verdict(), "denied");
  EXPECT_FALSE(events[1].quiet()) << "control";
  auto accounting = agent.Sandbox(cg.id());
  ASSERT_TRUE(accounting.has_value());
  EXPECT_EQ(accounting->delivered(), 2u);
  EXPECT_EQ(accounting->quiet(), 1u);

  r = Cordon({"update", "--cgroup", cg.path(), "--policy", b.path(), "--allow-degraded"});
  ASSERT_EQ(r.status, 0) << r.err;
  connect_both();
  ASSERT_TRUE(WaitFor([&] { return connects().size() == 4; }, 10000)) << agent.Log(0);
  events = connects();
  ASSERT_EQ(events[2].net().port(), p1);
  EXPECT_FALSE(events[2].quiet()) << "the replaced policy's pattern no longer applies";
  EXPECT_TRUE(events[3].quiet()) << "the new policy's does";
  EXPECT_EQ(events[3].policy(), "quiet-b");
  EXPECT_EQ(agent.Sandbox(cg.id())->quiet(), 2u);
  EXPECT_EQ(first.AcceptPending() + second.AcceptPending(), 0);
  // The kernel counts every denial, quiet or not; the agent's metrics the quiet ones apart.
  EXPECT_EQ(KernelCounter(cg.id(), CORDON_CNT_DENIED_CONNECT), 4u);
  const std::string metrics = HttpBody(HttpGet(MetricsPort(agent), "/metrics"));
  EXPECT_NE(metrics.find("cordon_events_quiet_total{sandbox=\"" + NamePrefix() + "quiet\",cgroup_id=\"" +
                         std::to_string(cg.id()) + "\"} 2"),
            std::string::npos)
      << metrics;
  EXPECT_EQ(agent.Stop(), 0);
}

// Issue 16, finding 3: a flood of identical denials filled the sandbox's
// ring buffer and hid the one violation that mattered (only a loss count was
// left). The kernel now writes the first of each (kind, target, process) in a
// window and counts the rest. During a flood of 1,000,000 identical denied
// sendto() from one process, one connect() to another port by another
// process of the same sandbox is in the audit file, in each of 20 runs; and
// the flood adds up exactly: what its records stand for (1 + the kernel's
// repeats, or a pending count) + what was lost = the kernel's counter. The
// control of each run: the same violation's connect, before the flood's
// records are counted, is refused (EPERM) like the flood; the control
// without aggregation (the violation lost) is measured in the commit that
// added this (README "Repeats").
TEST_F(Agent, ADistinctViolationSurvivesAFloodOfIdenticalDenials) {
  TestAgent agent;
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  TestCgroup cg("flood-one");
  PolicyFile policy(LoopbackPolicy("flood-one", 1));
  ASSERT_EQ(Cordon({"attach", "--cgroup", cg.path(), "--policy", policy.path(), "--allow-degraded"}).status, 0);
  ASSERT_TRUE(WaitFor([&] { return agent.Sandbox(cg.id()).has_value(); }, 5000));
  constexpr int kRuns = 20, kFlood = 1000000;
  for (int run = 0; run < kRuns; ++run) {
    const uint16_t violation_port = static_cast<uint16_t>(20000 + run);
    int midway[2];
    ASSERT_EQ(::pipe2(midway, O_CLOEXEC), 0);
    std::atomic<int> flood_refused{-1};
    std::thread flood([&] {
      flood_refused = RunInCgroup(cg.path(), [&] { return SendtoFlood(V4("127.0.0.1", 9), kFlood, midway[1]); });
    });
    char c;
    const bool began = ::read(midway[0], &c, 1) == 1;  // a tenth of the flood is done
    int violation_pid = 0;
    const int violation = began ? RunInCgroup(cg.path(),
                                              [&] {
                                                int refused = TcpConnect(V4("127.0.0.1", violation_port)) == EPERM;
                                                return refused ? static_cast<int>(::getpid()) : 0;
                                              })
                                : -1;
    flood.join();
    ::close(midway[0]);
    ::close(midway[1]);
    ASSERT_TRUE(began);
    ASSERT_GT(violation, 0) << "run " << run << ": the violation's connect was refused";
    violation_pid = violation;
    ASSERT_EQ(flood_refused, kFlood) << "run " << run << ": enforcement held throughout the flood";
    ASSERT_TRUE(WaitFor(
        [&] {
          for (const auto& e : agent.Audit(cg.id()))
            if (e.kind() == "net.connect" && e.net().port() == violation_port &&
                e.pid() == static_cast<uint32_t>(violation_pid) && e.verdict() == "denied")
              return true;
          return false;
        },
        20000))
        << "run " << run << ": the violation is not in the audit file";
  }
  const uint64_t generated = KernelCounter(cg.id(), CORDON_CNT_DENIED_SENDMSG);
  ASSERT_EQ(generated, static_cast<uint64_t>(kRuns) * kFlood);
  Accounting a;
  EXPECT_TRUE(WaitFor(
      [&] {
        a = Account(agent.Audit(cg.id()), "net.sendmsg");
        return a.delivered + a.lost == generated;
      },
      30000))
      << a.delivered << " delivered (" << a.records << " records, " << a.repeats << " repeats) + " << a.lost
      << " lost != " << generated;
  EXPECT_EQ(a.repeats, KernelCounter(cg.id(), CORDON_CNT_REPEATS)) << "every count the kernel kept was delivered";
  EXPECT_LT(a.records, static_cast<uint64_t>(kFlood) / 100) << "the flood is counted, not written record by record";
  EXPECT_EQ(a.suppressed, 0u);
  // The agent's accounting agrees (delivered counts what records stand for).
  auto sb = agent.Sandbox(cg.id());
  ASSERT_TRUE(sb.has_value());
  EXPECT_EQ(sb->delivered(), a.delivered + static_cast<uint64_t>(kRuns)) << "the flood and the violations";
  std::fprintf(stderr, "flood: %llu denied = %llu delivered in %llu records (%llu repeats) + %llu lost\n",
               static_cast<unsigned long long>(generated), static_cast<unsigned long long>(a.delivered),
               static_cast<unsigned long long>(a.records), static_cast<unsigned long long>(a.repeats),
               static_cast<unsigned long long>(a.lost));
  EXPECT_EQ(agent.Stop(), 0);
}

// n open(O_RDONLY) of `path`, as fast as a loop goes; after a tenth of
// them, one byte on `midway_fd`. Returns how many were refused with EPERM.
int OpenFlood(const std::string& path, int n, int midway_fd) {
  int refused = 0;
  for (int i = 0; i < n; ++i) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0)
      ::close(fd);
    else
      refused += errno == EPERM;
    if (i == n / 10) (void)!::write(midway_fd, "x", 1);
  }
  return refused;
}

// A policy that lets the sandbox read one file (and nothing else).
std::string ReadOnePolicy(const std::string& name, const std::string& readable, const std::string& mode) {
  return LoopbackPolicy(name, 1, mode) + "  files:\n    read: [" + readable + "]\n";
}

// Issue 16, finding 3, where BPF LSM enforces: the BPF LSM programs' records
// are counted in the kernel like the network programs' (bpf/lib/repeats.bpf.h).
// During a flood of identical denied opens of one file from one process, one
// denied open of another file and one denied exec by another process of the
// same sandbox are in the audit file, in each run; and the flood adds up
// exactly (what its records stand for + what was lost = the kernel's count
// of its refusals). 5 runs of 200,000 opens: 1,000,000 denials, about three
// minutes in the 6.12 VM under TCG. The control of each run: the file the
// policy allows opens in the same process. Without the LSM aggregation
// (cordon_lsm_emit writing every record) this test fails (see the commit).
TEST(AgentLsm, ADistinctFileViolationSurvivesAFloodOfIdenticalDenials) {
  if (!LsmUsableHere()) GTEST_SKIP() << "BPF LSM does not enforce here: file opens are not refused";
  TestAgent agent;
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  const std::string readable = agent.dir() + "/readable", flooded = agent.dir() + "/flooded",
                    distinct = agent.dir() + "/distinct";
  for (const auto& f : {readable, flooded, distinct}) std::ofstream(f) << "data";
  TestCgroup cg("lsm-flood");
  PolicyFile policy(ReadOnePolicy("lsm-flood", readable, "enforce"));
  CommandResult attached = Cordon({"attach", "--cgroup", cg.path(), "--policy", policy.path()});
  ASSERT_EQ(attached.status, 0) << attached.err;
  ASSERT_TRUE(WaitFor([&] { return agent.Sandbox(cg.id()).has_value(); }, 5000));
  constexpr int kRuns = 5, kFlood = 200000;
  std::set<uint32_t> violation_pids;
  for (int run = 0; run < kRuns; ++run) {
    int midway[2];
    ASSERT_EQ(::pipe2(midway, O_CLOEXEC), 0);
    std::atomic<int> flood_refused{-1};
    std::thread flood(
        [&] { flood_refused = RunInCgroup(cg.path(), [&] { return OpenFlood(flooded, kFlood, midway[1]); }); });
    char c;
    const bool began = ::read(midway[0], &c, 1) == 1;  // a tenth of the flood is done
    const int violation = began
                              ? RunInCgroup(cg.path(),
                                            [&] {
                                              int fd = ::open(readable.c_str(), O_RDONLY | O_CLOEXEC);
                                              if (fd < 0) return -1;  // the control: allowed
                                              ::close(fd);
                                              if (::open(distinct.c_str(), O_RDONLY | O_CLOEXEC) >= 0 || errno != EPERM)
                                                return -2;
                                              const char* argv[] = {"/bin/true", nullptr};
                                              ::execv("/bin/true", const_cast<char* const*>(argv));
                                              if (errno != EPERM) return -3;
                                              return static_cast<int>(::getpid());
                                            })
                              : -1;
    flood.join();
    ::close(midway[0]);
    ::close(midway[1]);
    ASSERT_TRUE(began);
    ASSERT_GT(violation, 0) << "run " << run << ": the allowed open succeeded, the distinct open and exec were refused";
    ASSERT_EQ(flood_refused, kFlood) << "run " << run << ": enforcement held throughout the flood";
    violation_pids.insert(static_cast<uint32_t>(violation));
    ASSERT_TRUE(WaitFor(
        [&] {
          bool opened = false, executed = false;
          for (const auto& e : agent.Audit(cg.id())) {
            if (e.pid() != static_cast<uint32_t>(violation) || e.verdict() != "denied") continue;
            opened |= e.kind() == "file.open" && e.file().path() == distinct;
            executed |= e.kind() == "file.exec" && e.file().path() == "/usr/bin/true";
            executed |= e.kind() == "file.exec" && e.file().path() == "/bin/true";
          }
          return opened && executed;
        },
        20000))
        << "run " << run << ": the distinct open or exec is not in the audit file";
  }
  // The flood's refusals: the kernel's count, less the violations' own.
  auto flood_account = [&] {
    Accounting a;
    for (const auto& e : agent.Audit(cg.id())) {
      if (e.kind() == "loss") a.lost += e.loss().dropped();
      if (e.kind() != "file.open" || e.file().path() != flooded) continue;
      a.delivered += Occurrences(e);
      a.records++;
      a.repeats += e.repeats().count();
    }
    return a;
  };
  uint64_t violations_counted = 0;
  for (const auto& e : agent.Audit(cg.id()))
    if (violation_pids.count(e.pid()) && e.verdict() == "denied") violations_counted += Occurrences(e);
  const uint64_t generated = KernelCounter(cg.id(), CORDON_CNT_DENIED_FILE);
  ASSERT_GE(generated, static_cast<uint64_t>(kRuns) * (kFlood + 2));
  Accounting a;
  EXPECT_TRUE(WaitFor(
      [&] {
        a = flood_account();
        return a.delivered + a.lost == static_cast<uint64_t>(kRuns) * kFlood;
      },
      30000))
      << a.delivered << " delivered (" << a.records << " records, " << a.repeats << " repeats) + " << a.lost
      << " lost != " << kRuns * kFlood;
  EXPECT_EQ(a.delivered + a.lost + violations_counted, generated) << "the kernel counted nothing else";
  EXPECT_EQ(a.repeats, KernelCounter(cg.id(), CORDON_CNT_REPEATS)) << "every count the kernel kept was delivered";
  EXPECT_LT(a.records, static_cast<uint64_t>(kFlood) / 100) << "the flood is counted, not written record by record";
  std::fprintf(stderr, "lsm flood: %d x %d denied opens = %llu delivered in %llu records (%llu repeats) + %llu lost\n",
               kRuns, kFlood, static_cast<unsigned long long>(a.delivered), static_cast<unsigned long long>(a.records),
               static_cast<unsigned long long>(a.repeats), static_cast<unsigned long long>(a.lost));
  EXPECT_EQ(Cordon({"detach", "--cgroup", cg.path()}).status, 0);
  EXPECT_EQ(agent.Stop(), 0);
}

// Issue 16: one refusal, one event. In audit mode BPF LSM let an open of a
// file the policy does not allow go ahead and reported it, and then reported
// each read of that file again (lsm/file_permission judges reads through an
// fd): `cat` of one file made three audited events. Now the reads of a file
// whose open was audited are that refusal's (struct cordon_audited_open): one
// open and its reads make exactly one event, audited, by id; in enforce mode
// the same open is refused (EPERM) with exactly one event, denied. The
// control: the file the policy allows opens and reads with no event.
TEST(AgentLsm, AnOpenAndItsReadsAreOneEventInAuditAndInEnforceMode) {
  if (!LsmUsableHere()) GTEST_SKIP() << "BPF LSM does not enforce here: opens are not judged when they happen";
  TestAgent agent;
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  const std::string readable = agent.dir() + "/readable", secret = agent.dir() + "/secret";
  for (const auto& f : {readable, secret}) std::ofstream(f) << "data";
  for (const std::string mode : {"audit", "enforce"}) {
    TestCgroup cg("lsm-one-" + mode);
    PolicyFile policy(ReadOnePolicy("lsm-one-" + mode, readable, mode));
    CommandResult attached = Cordon({"attach", "--cgroup", cg.path(), "--policy", policy.path()});
    ASSERT_EQ(attached.status, 0) << attached.err;
    ASSERT_TRUE(WaitFor([&] { return agent.Sandbox(cg.id()).has_value(); }, 5000));
    // Opens and reads to the end (two reads: the data, then end of file).
    auto cat = [&](const std::string& path) {
      return RunInCgroup(cg.path(), [&] {
        int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) return errno;
        char buf[64];
        ssize_t n, total = 0;
        while ((n = ::read(fd, buf, sizeof buf)) > 0) total += n;
        ::close(fd);
        return n == 0 && total == 4 ? 0 : 1000;
      });
    };
    EXPECT_EQ(cat(readable), 0) << mode;  // the control
    EXPECT_EQ(cat(secret), mode == "audit" ? 0 : EPERM) << mode;
    const std::string verdict = mode == "audit" ? "audited" : "denied";
    std::set<std::string> ids;
    uint64_t others = 0;
    ASSERT_TRUE(WaitFor(
        [&] {
          ids.clear();
          others = 0;
          for (const auto& e : agent.Audit(cg.id())) {
            if (e.kind().rfind("file.", 0) != 0) continue;
            if (e.kind() == "file.open" && e.file().path() == secret && e.verdict() == verdict && !e.id().empty())
              ids.insert(e.id());
            else
              others++;
          }
          return !ids.empty();
        },
        10000))
        << mode << ": no " << verdict << " event of the open";
    // Every occurrence the kernel counted for the sandbox is delivered
    // (written to the audit file) before the events are counted.
    ASSERT_TRUE(WaitFor(
        [&] {
          auto sb = agent.Sandbox(cg.id());
          return sb && sb->delivered() >= KernelCounter(cg.id(), CORDON_CNT_AUDITED_FILE) +
                                              KernelCounter(cg.id(), CORDON_CNT_DENIED_FILE);
        },
        10000));
    ids.clear();
    others = 0;
    uint64_t occurrences = 0;
    for (const auto& e : agent.Audit(cg.id())) {
      if (e.kind().rfind("file.", 0) != 0) continue;
      if (e.kind() == "file.open" && e.file().path() == secret && e.verdict() == verdict) {
        ids.insert(e.id());
        occurrences += Occurrences(e);
      } else {
        others++;
      }
    }
    EXPECT_EQ(ids.size(), 1u) << mode << ": one " << verdict << " event";
    EXPECT_EQ(occurrences, 1u) << mode << ": standing for one occurrence";
    EXPECT_EQ(others, 0u) << mode << ": no other file event (the allowed file's open and reads included)";
    EXPECT_EQ(KernelCounter(cg.id(), mode == "audit" ? CORDON_CNT_AUDITED_FILE : CORDON_CNT_DENIED_FILE), 1u) << mode;
    EXPECT_EQ(Cordon({"detach", "--cgroup", cg.path()}).status, 0);
  }
  EXPECT_EQ(agent.Stop(), 0);
}

// Expected denials (spec.quiet) have a rate-limit budget of their own: a
// workload flooding denials its policy marks quiet cannot use up the budget
// that its next violation needs (found by an attacker's review: the flood
// hid the violation in a suppressed count). The control: the same flood of
// denials that are not quiet does use it up, and the violation is then only
// counted as suppressed.
TEST_F(Agent, QuietFloodsDoNotUseUpTheBudgetOfViolations) {
  TestAgent agent("rateLimit: {eventsPerSecond: 1, burst: 5}\n");
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  TcpListener expected, violation;
  const uint16_t quiet_port = expected.port(), other_port = static_cast<uint16_t>(quiet_port == 9 ? 13 : 9);
  PolicyFile policy(QuietConnectPolicy("quiet-budget", quiet_port, "net.sendmsg"));
  TestCgroup quiet_cg("quiet-flood"), noisy_cg("noisy-flood");
  for (const auto* cg : {&quiet_cg, &noisy_cg})
    ASSERT_EQ(Cordon({"attach", "--cgroup", cg->path(), "--policy", policy.path(), "--allow-degraded"}).status, 0);
  ASSERT_TRUE(WaitFor([&] { return agent.Sandbox(quiet_cg.id()) && agent.Sandbox(noisy_cg.id()); }, 5000));
  constexpr int kFlood = 300;
  // Each denial of the flood from a process of its own: the same one again
  // from one process would be counted in the kernel (one record a window),
  // and this flood is to reach the agent's rate limit.
  auto flood_then_violate = [&](const TestCgroup& cg, uint16_t flood_port) {
    return RunInCgroup(cg.path(), [&] {
      int refused = 0;
      for (int i = 0; i < kFlood; ++i) {
        pid_t pid = ::fork();
        if (pid == 0) _exit(UdpSendto(V4("127.0.0.1", flood_port)) == EPERM ? 0 : 1);
        int status = 0;
        refused += pid > 0 && ::waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
      }
      return refused == kFlood && TcpConnect(V4("127.0.0.1", violation.port())) == EPERM ? 0 : 1;
    });
  };
  ASSERT_EQ(flood_then_violate(quiet_cg, quiet_port), 0) << "every probe refused (quiet: still enforced)";
  ASSERT_EQ(flood_then_violate(noisy_cg, other_port), 0);
  auto settled = [&](const TestCgroup& cg, Accounting* a) {
    return WaitFor(
        [&] {
          auto events = agent.Audit(cg.id());
          *a = Account(events, "net.sendmsg");
          Accounting c = Account(events, "net.connect");
          return a->final_suppressed && a->delivered + c.delivered + a->suppressed + a->lost == kFlood + 1u;
        },
        15000);
  };
  auto connects = [&](const TestCgroup& cg) {
    int n = 0;
    for (const auto& e : agent.Audit(cg.id()))
      n += e.kind() == "net.connect" && e.net().port() == violation.port() && !e.quiet();
    return n;
  };
  Accounting q, n;
  ASSERT_TRUE(settled(quiet_cg, &q)) << q.delivered << " delivered, " << q.suppressed << " suppressed";
  ASSERT_TRUE(settled(noisy_cg, &n)) << n.delivered << " delivered, " << n.suppressed << " suppressed";
  EXPECT_GT(q.suppressed, 0u) << "the quiet flood itself is rate-limited";
  EXPECT_EQ(connects(quiet_cg), 1) << "the violation after a quiet flood is delivered";
  EXPECT_GT(n.suppressed, 0u);
  EXPECT_EQ(connects(noisy_cg), 0) << "control: after a flood of violations the next one is suppressed";
  EXPECT_EQ(expected.AcceptPending() + violation.AcceptPending(), 0);
  EXPECT_EQ(agent.Stop(), 0);
}

// Attaches through the agent take the network instance it loaded ahead of
// time, and it loads the next one right after: each such sandbox enforces its
// own policy, exactly, and two of them share nothing.
TEST_F(Agent, AttachesTakeThePreparedNetworkInstanceAndEachEnforcesItsOwnPolicy) {
  TestAgent agent;
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  TcpListener port_a, port_b;
  TestCgroup a("prep-a"), b("prep-b");
  PolicyFile policy_a(LoopbackPolicy("prep-a", port_a.port())), policy_b(LoopbackPolicy("prep-b", port_b.port()));
  auto count = [&](const std::string& what) {
    const std::string log = agent.Log(0);
    size_t n = 0;
    for (size_t pos = 0; (pos = log.find(what, pos)) != std::string::npos; ++pos) ++n;
    return n;
  };
  const std::string loaded = "prepared network instances for the next attaches";
  size_t attaches = 0;
  for (auto [cg, policy, name] : {std::tuple{&a, &policy_a, "prep-a"}, std::tuple{&b, &policy_b, "prep-b"}}) {
    // Two are loaded at start, and another right after an attach took one (on the agent's thread).
    ASSERT_TRUE(WaitFor([&] { return count(loaded) == attaches + 1; }, 30000)) << agent.Log(0);
    CommandResult r = Cordon({"attach", "--cgroup", cg->path(), "--policy", policy->path(), "--name",
                              NamePrefix() + name, "--allow-degraded"});
    ASSERT_EQ(r.status, 0) << r.err;
    attaches++;
  }
  EXPECT_EQ(count("ms (prepared instance)"), 2u) << "both attaches took an instance loaded ahead:\n" << agent.Log(0);
  EXPECT_TRUE(WaitFor([&] { return count(loaded) == 3; }, 30000)) << agent.Log(0);

  auto connect = [](const TestCgroup& cg, uint16_t port) {
    return RunInCgroup(cg.path(), [port] { return TcpConnect(V4("127.0.0.1", port)); });
  };
  EXPECT_EQ(connect(a, port_a.port()), 0);
  EXPECT_EQ(connect(a, port_b.port()), EPERM);
  EXPECT_EQ(connect(b, port_b.port()), 0);
  EXPECT_EQ(connect(b, port_a.port()), EPERM);
  for (auto [cg, denied] : {std::pair{&a, port_b.port()}, std::pair{&b, port_a.port()}}) {
    ASSERT_TRUE(WaitFor([&] { return Account(agent.Audit(cg->id()), "net.connect").delivered == 1; }, 5000))
        << "one denied connect reported for " << cg->path();
    auto events = agent.Audit(cg->id());
    auto it = std::find_if(events.begin(), events.end(), [](const AuditEvent& e) { return e.kind() == "net.connect"; });
    ASSERT_NE(it, events.end());
    EXPECT_EQ(it->verdict(), "denied");
    EXPECT_EQ(it->net().port(), denied);
  }
  for (const TestCgroup* cg : {&a, &b}) EXPECT_EQ(Cordon({"detach", "--cgroup", cg->path()}).status, 0);
  EXPECT_EQ(agent.Stop(), 0);
}

// cordon learn --cgroup with an agent running: the agent attaches, reads
// and detaches the sandbox (its sinks get the window's events too) and
// streams the events to learn; the learned policy enforces as without one
// (learn_window.h). Here only: Agent.* tests run on the host.
TEST_F(Agent, LearnFromACgroupGoesThroughTheAgent) {
  TestAgent agent;
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  RunTestDir dir("cordon-learn-agent");
  ASSERT_NE(dir.path(), "");
  LearnFromCgroupCase c{dir.path(), "through the agent", 0, "", agent.audit(), nullptr};
  // The agent consumes the enforce phase's events: they are in its audit file.
  c.enforce_events = [&agent](uint64_t id, int64_t since_ns, uint16_t other_port, const std::string& key) {
    std::vector<AuditEvent> out;
    const bool both = WaitFor(
        [&] {
          out.clear();
          bool connect = false, open = false;
          for (auto& e : agent.Audit(id)) {
            if (EventNs(e) < since_ns) continue;
            connect = connect || (e.kind() == "net.connect" && e.net().port() == other_port);
            open = open || (e.kind() == "file.open" && e.file().path() == key);
            out.push_back(std::move(e));
          }
          return connect && open;
        },
        10000);
    EXPECT_TRUE(both) << "the agent's audit file has both refusals";
    return out;
  };
  LearnFromCgroupAndEnforce(c);
}

// The agent's rate limit held some of the window's events back: learn says
// how many (the agent's suppressed records), and an incomplete trail is exit
// status 3; nothing is left attached.
TEST_F(Agent, LearnSaysWhatTheAgentsRateLimitHeldBack) {
  TestAgent agent("rateLimit:\n  eventsPerSecond: 1\n  burst: 1\n");
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  RunTestDir dir("cordon-learn-agent");
  ASSERT_NE(dir.path(), "");
  TestCgroup cg("learn-limited");
  TcpListener listener;
  // Twenty connects in audit mode (all succeed): one token, then the limit.
  WaitingChild workload(cg.path(), [&] {
    int failed = 0;
    for (int i = 0; i < 20; ++i) failed += TcpConnect(V4("127.0.0.1", listener.port())) != 0;
    return failed;
  });
  const std::string policy = dir.path() + "/learned.json", report = dir.path() + "/report.txt";
  LearnInBackground learn(
      {"learn", "--cgroup", cg.path(), "--duration", "10m", "--allow-degraded", "--out", policy, "--report", report});
  ASSERT_TRUE(learn.WaitForWindow()) << learn.Finish().err;
  EXPECT_EQ(workload.Go(), 0);
  learn.Signal(SIGTERM);
  const CommandResult learned = learn.Finish();
  const std::string text = Slurp(report);
  EXPECT_EQ(learned.status, 3) << learned.err << text;
  EXPECT_FALSE(Exists(SandboxPinDir(cg.id()))) << learned.err;
  EXPECT_NE(text.find("events SUPPRESSED (the agent's rate limit)"), std::string::npos) << text;
  EXPECT_NE(text.find("cut short by SIGTERM"), std::string::npos) << text;
  EXPECT_NE(text.find("event(s) of the trail were lost, suppressed or unreadable"), std::string::npos) << text;
  // What got through is learned: the first connect.
  EXPECT_NE(text.find("egress 127.0.0.1 port " + std::to_string(listener.port()) + "/tcp"), std::string::npos) << text;
  EXPECT_EQ(listener.AcceptCount(20), 20);
}

// The agent's resource detection (README "Resource limits"): the counters of
// every sandbox it reads, watched in its loop. AgentResources runs in the test
// VMs (cgroup2 with every controller); what needs a controller skips on a
// hybrid host, wallTime (a clock) runs there too.
namespace {

bool Cgroup2Has(const std::string& controller) {
  std::istringstream in(Slurp(Cgroup2Mount() + "/cgroup.controllers"));
  std::string word;
  while (in >> word)
    if (word == controller) return true;
  return false;
}

std::string ResourcePolicy(const std::string& name, const std::string& resources, const std::string& spec = "") {
  return "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: " + name + "}\nspec:\n" + spec +
         (resources.empty() ? "" : "  resources:\n" + resources);
}

std::vector<AuditEvent> OfKind(const std::vector<AuditEvent>& events, const std::string& kind,
                               const std::string& counter = "") {
  std::vector<AuditEvent> out;
  for (const auto& e : events)
    if (e.kind() == kind && (counter.empty() || e.resource().event() == counter)) out.push_back(e);
  return out;
}

// Forks `n` children that wait on a pipe; returns 0, or the errno of the
// first fork refused. `hold` runs while they live; then they are reaped.
int ForkAndHold(int n, const std::function<void()>& hold) {
  int fds[2];
  if (::pipe(fds) != 0) return errno;
  std::vector<pid_t> kids;
  int err = 0;
  for (int i = 0; i < n; ++i) {
    pid_t pid = ::fork();
    if (pid < 0) {
      err = errno;
      break;
    }
    if (pid == 0) {
      ::close(fds[1]);
      char c;
      (void)!::read(fds[0], &c, 1);
      _exit(0);
    }
    kids.push_back(pid);
  }
  if (hold) hold();
  ::close(fds[1]);
  for (pid_t k : kids) ::waitpid(k, nullptr, 0);
  ::close(fds[0]);
  return err;
}

}  // namespace

class AgentResources : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "integration tests need root";
  }
  // "" when cgroup2 offers pids, memory and cpu; else why the test skips.
  static std::string MissingController() {
    for (const char* c : {"pids", "memory", "cpu"})
      if (!Cgroup2Has(c))
        return std::string("no ") + c + " controller in cgroup2 at " + Cgroup2Mount() + " (hybrid host)";
    return "";
  }
  // `cordon attach` through the agent (CORDON_AGENT_SOCKET is the test agent's).
  void Attach(const TestCgroup& cg, const PolicyFile& policy, const std::string& name) {
    CommandResult a = Cordon({"attach", "--cgroup", cg.path(), "--policy", policy.path(), "--name", NamePrefix() + name,
                              "--allow-degraded"});
    ASSERT_EQ(a.status, 0) << a.out << a.err;
    ASSERT_NE(a.err.find("attached"), std::string::npos) << a.err;
  }
  void Detach(const TestCgroup& cg) {
    CommandResult d = Cordon({"detach", "--cgroup", cg.path()});
    EXPECT_EQ(d.status, 0) << d.out << d.err;
  }
};

// A fork bomb in a sandbox attached through the agent: exactly one
// resource.pids event in the agent's audit file (the refused forks of one
// burst are one rise, reported once). Control: the same forks without the
// limit all succeed and give none.
TEST_F(AgentResources, AForkBombAtPidsMaxIsOneEventInTheAgentsAuditFile) {
  if (std::string why = MissingController(); !why.empty()) GTEST_SKIP() << why;
  TestAgent agent;
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  TestCgroup limited("agres-pids");
  PolicyFile pids10(ResourcePolicy("pids10", "    pids: 10\n"));
  Attach(limited, pids10, "pids");
  EXPECT_EQ(RunInCgroup(limited.path(), [] { return ForkAndHold(40, nullptr); }), EAGAIN);
  ASSERT_TRUE(WaitFor([&] { return !OfKind(agent.Audit(limited.id()), "resource.pids").empty(); }, 10000))
      << Slurp(agent.audit()) << agent.Log(0);
  Detach(limited);  // the agent's last poll: nothing more
  auto events = OfKind(agent.Audit(limited.id()), "resource.pids");
  ASSERT_EQ(events.size(), 1u) << Slurp(agent.audit());
  EXPECT_EQ(events[0].verdict(), "denied");
  EXPECT_EQ(events[0].resource().event(), "max");
  EXPECT_GE(events[0].resource().count(), 1u);
  EXPECT_EQ(events[0].resource().limit(), 10u);
  EXPECT_EQ(events[0].sandbox(), NamePrefix() + "pids");
  EXPECT_EQ(events[0].enforcement(), "kernel-cgroup");

  TestCgroup unlimited("agres-nopids");
  PolicyFile none(ResourcePolicy("nolimit", ""));
  Attach(unlimited, none, "nopids");
  EXPECT_EQ(RunInCgroup(unlimited.path(), [] { return ForkAndHold(40, nullptr); }), 0) << "control: no limit";
  Detach(unlimited);
  EXPECT_TRUE(OfKind(agent.Audit(unlimited.id()), "resource.pids").empty()) << Slurp(agent.audit());
  EXPECT_EQ(agent.Stop(), 0);
}

// A storm of refused forks for three seconds: at most one event a second
// (the rises in between are counted into the next), and their counts add up
// to the kernel's own count of refused forks (pids.events max): none lost
// while events were held back, none counted twice.
TEST_F(AgentResources, AStormOfRefusedForksIsReportedOnceASecondWithEveryForkCounted) {
  if (std::string why = MissingController(); !why.empty()) GTEST_SKIP() << why;
  TestAgent agent;
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  TestCgroup limited("agres-storm");
  PolicyFile pids8(ResourcePolicy("pids8", "    pids: 8\n"));
  Attach(limited, pids8, "storm");
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(RunInCgroup(limited.path(),
                        [] {
                          int refused = 0;
                          const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(3000);
                          while (std::chrono::steady_clock::now() < end) refused += ForkAndHold(16, nullptr) == EAGAIN;
                          return refused > 0 ? 0 : 1;
                        }),
            0)
      << "control: the forks were refused";
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  auto kernel_count = [&] {
    std::istringstream in(Slurp(limited.path() + "/pids.events"));
    std::string key;
    uint64_t value = 0;
    while (in >> key >> value)
      if (key == "max") return value;
    return uint64_t{0};
  };
  const uint64_t refused = kernel_count();
  ASSERT_GT(refused, 3u);
  uint64_t counted = 0;
  std::vector<AuditEvent> events;
  EXPECT_TRUE(WaitFor(
      [&] {
        events = OfKind(agent.Audit(limited.id()), "resource.pids");
        counted = 0;
        for (const auto& e : events) counted += e.resource().count();
        return counted == refused;
      },
      10000))
      << counted << " of " << refused << " refused forks reported\n"
      << Slurp(agent.audit()) << agent.Log(0);
  EXPECT_LE(events.size(), static_cast<size_t>(seconds) + 3) << "at most one a second, over " << seconds << " s";
  EXPECT_GE(events.size(), 2u) << "the rises after the first event are reported too";
  Detach(limited);
  EXPECT_EQ(agent.Stop(), 0);
}

// A `cordon run` that reads through the agent leaves its counters to the
// agent: the fork bomb's rise is one resource.pids event in the agent's audit
// file and one in the run's (received through the tail), never two.
TEST_F(AgentResources, ARunReadThroughTheAgentReportsEachRiseOnce) {
  if (std::string why = MissingController(); !why.empty()) GTEST_SKIP() << why;
  TestAgent agent;
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  PolicyFile pids10(ResourcePolicy("runpids10", "    pids: 10\n"));
  const std::string run_audit = agent.dir() + "/run.jsonl";
  const std::string forks =
      "import os\nr, w = os.pipe()\nkids = []\nfor i in range(40):\n  try:\n    pid = os.fork()\n"
      "  except OSError:\n    break\n  if pid == 0:\n    os.close(w); os.read(r, 1); os._exit(0)\n  kids.append(pid)\n"
      "os.close(w)\nfor k in kids: os.waitpid(k, 0)\nprint('forks', len(kids))\n";
  CommandResult r =
      Cordon({"run", "--policy", pids10.path(), "--audit", run_audit, "--", "/usr/bin/python3", "-c", forks});
  ASSERT_EQ(r.status, 0) << r.err;
  auto in_run = OfKind(AuditFileEvents(run_audit), "resource.pids");
  ASSERT_EQ(in_run.size(), 1u) << Slurp(run_audit) << r.err;
  auto in_agent = OfKind(agent.Audit(in_run[0].sandbox_cgroup_id()), "resource.pids");
  EXPECT_EQ(in_agent.size(), 1u) << Slurp(agent.audit()) << agent.Log(0);
  EXPECT_EQ(agent.Stop(), 0);
}

// A spinner under cpu: "0.1" is throttled: resource.cpu (cpu.stat
// nr_throttled, woken by the PSI trigger or read at the end) with the quota
// as the limit. Control: the same spinner without a cpu limit: none.
TEST_F(AgentResources, ASpinnerUnderACpuLimitGivesResourceCpu) {
  if (std::string why = MissingController(); !why.empty()) GTEST_SKIP() << why;
  TestAgent agent;
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  auto spin = [] {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
    volatile uint64_t n = 0;
    while (std::chrono::steady_clock::now() < end) n = n + 1;
    return 0;
  };
  TestCgroup limited("agres-cpu");
  PolicyFile cpu(ResourcePolicy("cpu01", "    cpu: \"0.1\"\n"));
  Attach(limited, cpu, "cpu");
  EXPECT_EQ(RunInCgroup(limited.path(), spin), 0);
  Detach(limited);
  auto events = OfKind(agent.Audit(limited.id()), "resource.cpu");
  ASSERT_GE(events.size(), 1u) << Slurp(agent.audit()) << agent.Log(0);
  EXPECT_EQ(events[0].resource().event(), "nr_throttled");
  EXPECT_EQ(events[0].resource().limit(), 10000u) << "cpu.max quota in us";
  EXPECT_GE(events[0].resource().count(), 1u);
  EXPECT_GT(events[0].resource().value(), 0u) << "throttled_usec";

  TestCgroup unlimited("agres-nocpu");
  PolicyFile none(ResourcePolicy("nolimit", ""));
  Attach(unlimited, none, "nocpu");
  EXPECT_EQ(RunInCgroup(unlimited.path(), spin), 0);
  Detach(unlimited);
  EXPECT_TRUE(OfKind(agent.Audit(unlimited.id()), "resource.cpu").empty()) << Slurp(agent.audit());
  EXPECT_EQ(agent.Stop(), 0);
}

// An allocation beyond memory.max in a sandbox attached through the agent:
// the agent's resource.memory oom_kill event names the process killed
// (bpf/oom), not the idle process beside it (tests/integration/oom_victim.h).
TEST_F(AgentResources, AnOomKillNamesTheKilledProcess) {
  if (std::string why = MissingController(); !why.empty()) GTEST_SKIP() << why;
  TestAgent agent;
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  TestCgroup limited("agres-oom");
  PolicyFile mem32(ResourcePolicy("mem32", "    memory: 32Mi\n    swap: 0\n"));
  Attach(limited, mem32, "oom");
  const std::string out_path = agent.dir() + "/oom.out";
  ChildOutcome ran = RunInCgroupStatus(limited.path(), [&] {
    int fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || ::dup2(fd, 1) < 0) return errno;
    ::execl("/usr/bin/python3", "python3", "-c", kAllocateBesideIdle, static_cast<char*>(nullptr));
    return errno;
  });
  EXPECT_TRUE(ran.KilledBy(SIGKILL)) << "result " << ran.result << " status " << ran.wait_status;
  ASSERT_TRUE(WaitFor([&] { return !OfKind(agent.Audit(limited.id()), "resource.memory", "oom_kill").empty(); }, 10000))
      << Slurp(agent.audit()) << agent.Log(0);
  Detach(limited);  // the agent's last poll
  ExpectOnlyTheAllocatorNamed(agent.Audit(limited.id()), Slurp(out_path), Slurp(agent.audit()));
  EXPECT_EQ(agent.Stop(), 0);
}

// warnAt 50% of pids 10: a tree of 6 processes gives one warn event
// (pids.current read every second by the agent); a tree of 4 none.
TEST_F(AgentResources, WarnAtGivesOneEventWhenPidsCrossItsShare) {
  if (std::string why = MissingController(); !why.empty()) GTEST_SKIP() << why;
  TestAgent agent;
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  PolicyFile warn(ResourcePolicy("warn50", "    pids: 10\n    warnAt: 50%\n"));
  TestCgroup six("agres-warn6");
  Attach(six, warn, "warn6");
  const std::string audit = agent.audit();
  const uint64_t six_id = six.id();
  // The body (1) and 5 children: 6 of 10. It holds them until the event is
  // in the audit file (at most 10 s).
  EXPECT_EQ(RunInCgroup(six.path(),
                        [&] {
                          return ForkAndHold(5, [&] {
                            WaitFor(
                                [&] {
                                  for (const auto& e : ParseJsonLines(Slurp(audit), true))
                                    if (e.sandbox_cgroup_id() == six_id && e.resource().event() == "warn") return true;
                                  return false;
                                },
                                10000);
                          });
                        }),
            0);
  Detach(six);
  auto events = OfKind(agent.Audit(six_id), "resource.pids", "warn");
  ASSERT_EQ(events.size(), 1u) << Slurp(audit) << agent.Log(0);
  EXPECT_EQ(events[0].verdict(), "detected");
  EXPECT_EQ(events[0].resource().limit(), 10u);
  EXPECT_GE(events[0].resource().value(), 5u);

  // Control: 4 of 10, held for three of the agent's checks.
  TestCgroup four("agres-warn4");
  Attach(four, warn, "warn4");
  EXPECT_EQ(RunInCgroup(four.path(), [] { return ForkAndHold(3, [] { ::usleep(3 * 1000 * 1000); }); }), 0);
  Detach(four);
  EXPECT_TRUE(OfKind(agent.Audit(four.id()), "resource.pids", "warn").empty()) << Slurp(audit);
  EXPECT_EQ(agent.Stop(), 0);
}

// wallTime of a sandbox attached through the agent: one resource.walltime
// event at wallTime after the policy was put in force, and with
// onViolation: contain the sandbox contained (sandbox.contained). Control:
// no wallTime, no event. A clock, no controller: runs on the hybrid host too.
TEST_F(AgentResources, WallTimeOfAnAttachedSandboxIsAnEventAndContainsWhenConfigured) {
  TestAgent agent;
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  TestCgroup timed("agres-wall");
  PolicyFile wall(ResourcePolicy("wall2", "    wallTime: 2s\n", "  onViolation: contain\n"));
  Attach(timed, wall, "wall");
  ASSERT_TRUE(WaitFor([&] { return !OfKind(agent.Audit(timed.id()), "sandbox.contained").empty(); }, 15000))
      << Slurp(agent.audit()) << agent.Log(0);
  auto events = OfKind(agent.Audit(timed.id()), "resource.walltime");
  ASSERT_EQ(events.size(), 1u) << Slurp(agent.audit());
  EXPECT_EQ(events[0].resource().limit(), 2u);
  EXPECT_EQ(events[0].enforcement(), "agent");
  EXPECT_EQ(Cordon({"release", "--cgroup", timed.path()}).status, 0);
  Detach(timed);

  TestCgroup untimed("agres-nowall");
  PolicyFile none(ResourcePolicy("nowall", "", "  onViolation: contain\n"));
  Attach(untimed, none, "nowall");
  ::usleep(3 * 1000 * 1000);  // past the other's wallTime
  Detach(untimed);
  EXPECT_TRUE(OfKind(agent.Audit(untimed.id()), "resource.walltime").empty()) << Slurp(agent.audit());
  EXPECT_EQ(agent.Stop(), 0);
}

// spec.resources.egressBytes of a sandbox attached through the agent: at the
// kernel's max record the agent destroys the sandbox's connections
// (sock_diag, on its containment worker, as cordon run does): the workload's
// send, which would stall for 30 s, fails at once (ECONNABORTED), the server
// sees the reset, and the agent's audit file has the net.preexisting record.
// Then the agent restarts: the count (pinned) is what it was, and the budget
// still holds (a datagram EPERM). Negative control: the same flood attached
// without an agent stalls (EgressBudget.FloodStopsAtTheBudget...: EAGAIN).
// The agent's rate limit is 1 event a second, and the workload first floods
// it with 200 distinct denied sends: the max record is never held back by
// the rate limit (nor, so, the cut).
TEST_F(AgentResources, EgressBudgetReachedCutsTheConnectionsAndSurvivesARestart) {
  TestAgent agent("rateLimit: {eventsPerSecond: 1, burst: 1}\n");
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  TestCgroup cg("agres-egress");
  PolicyFile budget(
      ResourcePolicy("egress1m", "    egressBytes: 1Mi\n", "  network:\n    egress:\n      - cidr: 127.0.0.1\n"));
  Attach(cg, budget, "egress");
  EXPECT_EQ(RunInCgroup(cg.path(),
                        [] {
                          int refused = 0;
                          for (int i = 0; i < 200; ++i)
                            refused += UdpSendto(V4("127.0.0.2", static_cast<uint16_t>(20000 + i))) == EPERM;
                          return refused == 200 ? 0 : 1;
                        }),
            0);
  TcpSink sink;
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return TcpFlood(sink.port(), 8u << 20, /*stall_s=*/30); }), ECONNABORTED)
      << agent.Log(0);
  const uint64_t received = sink.Stop();
  EXPECT_LE(received, 1u << 20);
  EXPECT_TRUE(sink.reset()) << "the server saw no reset";
  ASSERT_TRUE(WaitFor([&] { return !OfKind(agent.Audit(cg.id()), "net.preexisting").empty(); }, 10000))
      << Slurp(agent.audit()) << agent.Log(0);
  auto cut = OfKind(agent.Audit(cg.id()), "net.preexisting");
  ASSERT_EQ(cut.size(), 1u) << Slurp(agent.audit());
  EXPECT_EQ(cut[0].verdict(), "destroyed");
  EXPECT_EQ(cut[0].net().port(), sink.port());
  EXPECT_NE(cut[0].reason().find("egress budget"), std::string::npos) << cut[0].reason();
  EXPECT_EQ(OfKind(agent.Audit(cg.id()), "resource.egress", "max").size(), 1u) << Slurp(agent.audit());
  auto accounting = agent.Sandbox(cg.id());
  ASSERT_TRUE(accounting.has_value());
  EXPECT_GT(accounting->suppressed(), 0u) << "the flood was not held back: no test";

  const uint64_t counted = EgressStatusNumber(Cordon({"status", "--json"}).out, cg.id(), "bytes");
  EXPECT_GE(counted, received);
  EXPECT_EQ(agent.Stop(), 0);
  ASSERT_TRUE(agent.Start()) << agent.Log(1);
  CommandResult status = Cordon({"status", "--json"});
  EXPECT_EQ(EgressStatusNumber(status.out, cg.id(), "bytes"), counted) << "the count was reset\n" << status.out;
  EXPECT_EQ(EgressStatusNumber(status.out, cg.id(), "limit"), 1u << 20) << status.out;
  UdpReceiver udp;
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return UdpSendto(V4("127.0.0.1", udp.port())); }), EPERM)
      << "over the budget after the restart";
  Detach(cg);
  EXPECT_EQ(agent.Stop(), 0);
}

// inotify instances of uid 0 in use now (fds to anon_inode:inotify; an
// instance with several fds counts more than once: an upper bound).
int RootInotifyInstances() {
  int n = 0;
  DIR* proc = ::opendir("/proc");
  if (!proc) return 0;
  while (dirent* p = ::readdir(proc)) {
    if (!std::isdigit(static_cast<unsigned char>(p->d_name[0]))) continue;
    const std::string fds = std::string("/proc/") + p->d_name + "/fd";
    struct stat st;
    if (::stat(fds.c_str(), &st) != 0 || st.st_uid != 0) continue;
    DIR* d = ::opendir(fds.c_str());
    if (!d) continue;
    while (dirent* f = ::readdir(d)) {
      char target[64] = {};
      if (::readlink((fds + "/" + f->d_name).c_str(), target, sizeof target - 1) > 0 &&
          std::string(target) == "anon_inode:inotify")
        ++n;
    }
    ::closedir(d);
  }
  ::closedir(proc);
  return n;
}

// The agent watches every sandbox's memory.events and pids.events with one
// inotify instance: with fs.inotify.max_user_instances 3 above what uid 0
// uses now (the default 128 was exhausted at about a hundred sandboxes when
// each had its own), the fork bomb in the fifth sandbox is still one
// resource.pids event, and the agent's log names no unwatched sandbox.
// Control: the same fork bomb's event in the first. Only in the test VMs:
// the limit is host-wide (restored at the end).
TEST_F(AgentResources, FiveSandboxesNeedOneInotifyInstance) {
  if (!std::getenv("CORDON_VM")) GTEST_SKIP() << "lowers fs.inotify.max_user_instances, host-wide: the test VMs only";
  if (std::string why = MissingController(); !why.empty()) GTEST_SKIP() << why;
  const std::string sysctl = "/proc/sys/fs/inotify/max_user_instances";
  std::string old = Slurp(sysctl);
  old.erase(old.find_last_not_of(" \n") + 1);
  struct Restore {
    std::string path, value;
    ~Restore() { std::ofstream(path) << value; }
  } restore{sysctl, old};
  std::ofstream(sysctl) << RootInotifyInstances() + 3;
  TestAgent agent;
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  PolicyFile pids10(ResourcePolicy("pids10", "    pids: 10\n"));
  std::vector<std::unique_ptr<TestCgroup>> cgs;
  for (int i = 0; i < 5; ++i) {
    cgs.push_back(std::make_unique<TestCgroup>("agres-many" + std::to_string(i)));
    Attach(*cgs.back(), pids10, "many" + std::to_string(i));
  }
  for (int i : {4, 0}) {
    EXPECT_EQ(RunInCgroup(cgs[i]->path(), [] { return ForkAndHold(40, nullptr); }), EAGAIN);
    EXPECT_TRUE(WaitFor([&] { return !OfKind(agent.Audit(cgs[i]->id()), "resource.pids").empty(); }, 10000))
        << "sandbox " << i << "\n"
        << Slurp(agent.audit()) << agent.Log(0);
  }
  for (const auto& cg : cgs) Detach(*cg);
  EXPECT_EQ(agent.Log(0).find("resource events are read only"), std::string::npos) << agent.Log(0);
  EXPECT_EQ(agent.Stop(), 0);
}

// Asks 192.0.2.53:53 (nothing answers there: only a redirection to cordon's
// resolver does) for NAME's A record over UDP, then connects to the first
// address on TCP port 8443. 0: connected; an errno; kNoAnswer: no reply in
// 5 s; kRcode + rcode: an error reply (5: REFUSED); kNoAddress: none.
constexpr int kNoAnswer = 3000, kNoAddress = 3001, kRcode = 4000;
int AskAndConnect(const std::string& name) {
  const std::vector<uint8_t> query = DnsQuery(name, LDNS_RR_TYPE_A, 0x4242);
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  const timeval timeout = {5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  const sockaddr_storage server = V4("192.0.2.53", 53);
  if (::sendto(fd, query.data(), query.size(), 0, reinterpret_cast<const sockaddr*>(&server), SockaddrLen(server)) < 0)
    return errno;
  uint8_t reply[4096];
  const ssize_t n = ::recv(fd, reply, sizeof reply, 0);
  ::close(fd);
  if (n <= 0) return kNoAnswer;
  ldns_pkt* pkt = nullptr;
  if (ldns_wire2pkt(&pkt, reply, static_cast<size_t>(n)) != LDNS_STATUS_OK) return kNoAnswer;
  const int rcode = ldns_pkt_get_rcode(pkt);
  std::string address;
  for (size_t i = 0; i < ldns_rr_list_rr_count(ldns_pkt_answer(pkt)); ++i) {
    const ldns_rr* rr = ldns_rr_list_rr(ldns_pkt_answer(pkt), i);
    if (ldns_rr_get_type(rr) != LDNS_RR_TYPE_A || address.size()) continue;
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, ldns_rdf_data(ldns_rr_rdf(rr, 0)), text, sizeof text);
    address = text;
  }
  ldns_pkt_free(pkt);
  if (rcode != 0) return kRcode + rcode;
  if (address.empty()) return kNoAddress;
  return TcpConnect(V4(address.c_str(), 8443));
}

// Issue 20: a sandbox the agent attaches gets cordon's resolver from the
// agent (a `cordon run` runs its own: NameEgress.*). In a network namespace
// the test creates (the agent and the workloads run there), with a real
// dnsmasq as the upstream and listeners on the answered addresses: the
// allowed name is answered and its address connects, the unlisted one is
// REFUSED and never reaches dnsmasq, its address is denied; dns.query
// records reach the agent's audit file. An agent killed with -9 and started
// again serves the sandbox again. Controls: before the attach, nothing
// answers 192.0.2.53 and the unlisted address takes a connection. (Without a
// running agent, cordon attach refuses name rules: NameRules.*.)
TEST_F(Agent, ServesTheNameRulesOfASandboxItAttachesAlsoAfterARestart) {
  DnsmasqNetns dns;  // this thread, and the agent and workloads it starts, in a namespace of the test's own
  dns.Start("agentnames", {"--host-record=allowed.test,93.184.216.34", "--host-record=unlisted.test,93.184.216.40"},
            {"93.184.216.34/32", "93.184.216.40/32"});
  if (HasFatalFailure()) return;
  std::vector<UniqueFd> listeners;
  for (const char* a : {"93.184.216.34", "93.184.216.40"}) {
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    const sockaddr_storage at = V4(a, 8443);
    ASSERT_EQ(::bind(fd.get(), reinterpret_cast<const sockaddr*>(&at), SockaddrLen(at)), 0) << a;
    ASSERT_EQ(::listen(fd.get(), 16), 0);
    listeners.push_back(std::move(fd));
  }
  TestAgent agent;
  ASSERT_TRUE(agent.Start()) << agent.Log(0);
  TestCgroup cg("names");
  const int unredirected = RunInCgroup(cg.path(), [] { return AskAndConnect("allowed.test"); });
  EXPECT_TRUE(unredirected == ENETUNREACH || unredirected == kNoAnswer) << unredirected;  // no route, or no answer
  EXPECT_EQ(RunInCgroup(cg.path(), [] { return TcpConnect(V4("93.184.216.40", 8443)); }), 0);

  PolicyFile names(
      "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: names}\nspec:\n  network:\n"
      "    dns: {upstream: [\"127.0.0.1:53\"]}\n    egress:\n"
      "      - host: allowed.test\n        ports: [8443]\n        protocols: [tcp]\n");
  CommandResult r = Cordon({"attach", "--cgroup", cg.path(), "--policy", names.path(), "--name", NamePrefix() + "names",
                            "--allow-degraded"});
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_TRUE(
      WaitFor([&] { return agent.Log(0).find("name rules served by cordon's resolver") != std::string::npos; }, 10000))
      << agent.Log(0);
  EXPECT_EQ(RunInCgroup(cg.path(), [] { return AskAndConnect("allowed.test"); }), 0);
  EXPECT_EQ(RunInCgroup(cg.path(), [] { return AskAndConnect("unlisted.test"); }), kRcode + 5);
  EXPECT_EQ(RunInCgroup(cg.path(), [] { return TcpConnect(V4("93.184.216.40", 8443)); }), EPERM);
  EXPECT_TRUE(dns.Saw("allowed.test")) << dns.Log();
  EXPECT_FALSE(dns.Saw("unlisted.test")) << dns.Log();
  auto query = [&](const std::string& name, const std::string& verdict) {
    for (const auto& e : agent.Audit(cg.id()))
      if (e.kind() == "dns.query" && e.dns().name() == name && e.verdict() == verdict) return true;
    return false;
  };
  EXPECT_TRUE(WaitFor([&] { return query("allowed.test", "noted") && query("unlisted.test", "denied"); }, 10000))
      << Slurp(agent.audit());

  agent.Kill9();
  ASSERT_TRUE(agent.Start()) << agent.Log(1);
  ASSERT_TRUE(
      WaitFor([&] { return agent.Log(1).find("name rules served by cordon's resolver") != std::string::npos; }, 10000))
      << agent.Log(1);
  EXPECT_EQ(RunInCgroup(cg.path(), [] { return AskAndConnect("allowed.test"); }), 0);
  EXPECT_EQ(Cordon({"detach", "--cgroup", cg.path()}).status, 0);
}

}  // namespace
}  // namespace cordon::test
