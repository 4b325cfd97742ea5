// The agent's own surfaces under hostile local clients (issue #16, finding
// 9), with the real binary: slow and trickling metrics scrapers, a trickling
// and an idle control client, every control slot held, partial 32 MiB
// frames, requests with strings that are not UTF-8. Each test ends with its
// negative control: once the hostile clients are gone, the ordinary request
// works.
//
// Times are bounds with generous margins, never exact expectations; what was
// measured is recorded as a test property (and printed).
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/control.h"
#include "tests/integration/harness.h"

namespace cordon::test {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// An fd closed at the end of the test, whatever path it takes out.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { Close(); }
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      Close();
      fd_ = o.fd_;
      o.fd_ = -1;
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

// One agent for one test: socket, lock, audit file and log in a scratch
// directory; its adopt scope is nothing of anyone else's.
class HostileTestAgent {
 public:
  HostileTestAgent(const std::string& metrics_yaml, const std::string& extra_yaml) {
    char tmpl[] = "/tmp/cordon-hostile-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    config_ = dir_ + "/agent.yaml";
    socket_ = dir_ + "/agent.sock";
    log_ = dir_ + "/agent.log";
    std::ofstream(config_) << "socket: " << socket_ << "\nsinks:\n  - kind: jsonl\n    path: " << dir_
                           << "/audit.jsonl\n    fsync: never\nmetrics:\n  listen: \"127.0.0.1:0\"\n"
                           << metrics_yaml << "adopt:\n  cgroupPrefixes: [/cordon-test-" << ::getpid()
                           << "-hostile-]\n  namePrefixes: [hostiletest-" << ::getpid() << "-]\n"
                           << "oidc:\n  keyDir: " << dir_ << "/oidc\n  publishDir: \"\"\n"  // not the host's
                           << extra_yaml;
    const char* old = std::getenv("CORDON_AGENT_SOCKET");
    if (old) old_env_ = old, had_env_ = true;
    ::setenv("CORDON_AGENT_SOCKET", socket_.c_str(), 1);
  }
  ~HostileTestAgent() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);  // our own child
      ::waitpid(pid_, nullptr, 0);
    }
    if (had_env_)
      ::setenv("CORDON_AGENT_SOCKET", old_env_.c_str(), 1);
    else
      ::unsetenv("CORDON_AGENT_SOCKET");
    cordon::test::Run({"rm", "-rf", dir_});
  }
  HostileTestAgent(const HostileTestAgent&) = delete;
  HostileTestAgent& operator=(const HostileTestAgent&) = delete;

  bool Start() {
    pid_ = ::fork();
    if (pid_ == 0) {
      int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::execl(CORDON_BINARY, CORDON_BINARY, "agent", "--config", config_.c_str(), nullptr);
      _exit(127);
    }
    return WaitFor(
               [&] {
                 if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
                   pid_ = -1;
                   return true;
                 }
                 return Status().has_value();
               },
               10000) &&
           pid_ > 0;
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
  uint16_t MetricsPort() {
    auto s = Status();
    if (!s || s->metrics_listen().empty()) return 0;
    const std::string& l = s->metrics_listen();
    return static_cast<uint16_t>(std::stoi(l.substr(l.rfind(':') + 1)));
  }
  // VmRSS of the agent, in KiB (0 if unknown).
  uint64_t RssKib() const {
    std::istringstream in(Slurp("/proc/" + std::to_string(pid_) + "/status"));
    for (std::string line; std::getline(in, line);)
      if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6));
    return 0;
  }
  bool Alive() const { return pid_ > 0 && ::kill(pid_, 0) == 0; }
  std::string Log() const { return Slurp(log_); }
  const std::string& socket() const { return socket_; }
  int pid() const { return pid_; }

 private:
  std::string dir_, config_, socket_, log_;
  pid_t pid_ = -1;
  std::string old_env_;
  bool had_env_ = false;
};

Fd ConnectTcp(uint16_t port) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_storage addr = V4("127.0.0.1", port);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(sockaddr_in)) != 0) return Fd();
  return fd;
}

Fd ConnectUnix(const std::string& path) {
  Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return Fd();
  return fd;
}

// A loopback TCP connection whose socket belongs to `uid`: made in a child
// that takes that uid, and handed back (SCM_RIGHTS). The socket keeps the
// uid it was created with, which is what the agent sees of its owner.
Fd ConnectTcpAs(uid_t uid, uint16_t port) {
  int sp[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0) return Fd();
  pid_t pid = ::fork();
  if (pid == 0) {
    if (::setresgid(uid, uid, uid) != 0 || ::setresuid(uid, uid, uid) != 0) _exit(1);
    Fd fd = ConnectTcp(port);
    if (fd.get() < 0) _exit(2);
    int raw = fd.get();
    char byte = 'f';
    struct iovec iov = {&byte, 1};
    alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    struct msghdr msg = {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    struct cmsghdr* cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(cm), &raw, sizeof raw);
    _exit(::sendmsg(sp[1], &msg, 0) == 1 ? 0 : 3);
  }
  ::close(sp[1]);
  char byte;
  struct iovec iov = {&byte, 1};
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  struct msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  int fd = -1;
  if (::recvmsg(sp[0], &msg, MSG_CMSG_CLOEXEC) == 1)
    if (struct cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm && cm->cmsg_type == SCM_RIGHTS)
      std::memcpy(&fd, CMSG_DATA(cm), sizeof fd);
  ::close(sp[0]);
  ::waitpid(pid, nullptr, 0);  // our own child
  return Fd(fd);
}

struct ReadResult {
  std::string data;
  int err = 0;       // errno of the read that ended it (ECONNRESET: a reset), 0 for EOF
  bool eof = false;  // ended (EOF or error) within the time
};

// Reads until EOF or error, at most timeout_ms.
ReadResult ReadToEnd(int fd, int timeout_ms) {
  ReadResult r;
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[65536];
  for (;;) {
    int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    if (left <= 0) return r;
    struct pollfd pfd = {fd, POLLIN, 0};
    if (::poll(&pfd, 1, left) <= 0) continue;
    ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      r.data.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    r.err = n < 0 ? errno : 0;
    r.eof = true;
    return r;
  }
}

// The error of the first Response frame in `data` ("" if there is none).
std::string FirstResponseError(const std::string& data) {
  std::string buffer = data, payload;
  if (agent::TakeFrame(&buffer, &payload) != 1) return "";
  cordon::v1::Response response;
  if (!response.ParseFromString(payload)) return "";
  return response.error();
}

std::string Scrape(uint16_t port, int* read_errno = nullptr, std::optional<uid_t> as = std::nullopt) {
  Fd fd = as ? ConnectTcpAs(*as, port) : ConnectTcp(port);
  if (fd.get() < 0) return "";
  const std::string get = "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n";
  (void)!::send(fd.get(), get.data(), get.size(), MSG_NOSIGNAL);
  ReadResult r = ReadToEnd(fd.get(), 10000);
  if (read_errno) *read_errno = r.err;
  return r.data;
}

class AgentHostileClients : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "integration tests need root";
  }
  void Record(const std::string& key, double value) {
    RecordProperty(key, std::to_string(value));
    std::printf("[ measured ] %s = %.3f\n", key.c_str(), value);
  }
};

// 20 slow scrapers of one local user (uid 65534; 16 slots) trickle their
// requests a byte at a time. Another user's scraper (root) still gets its 200:
// slots are shared fairly per uid, so it takes the slot of the hog's oldest
// connection. A scraper of the hog's own uid gets a prompt "HTTP/1.1 503" it
// can read (not a reset). Every slow one is cut off (a 408) by the total
// request deadline, which its trickled bytes do not extend, or refused (503).
TEST_F(AgentHostileClients, SlowMetricsClientsAreCutOffAndScrapersGetA200OrA503NotAReset) {
  constexpr uid_t kHog = 65534;
  // A deadline long enough that root's scrape is taken before the hog's
  // oldest connection would be cut off anyway (1.5 s was not, under load:
  // then 4 are refused and 16 time out), short against the 30 s of trickling.
  HostileTestAgent agent("  requestTimeoutMs: 4000\n", "");
  ASSERT_TRUE(agent.Start()) << agent.Log();
  const uint16_t port = agent.MetricsPort();
  ASSERT_NE(port, 0) << agent.Log();
  ASSERT_EQ(Scrape(port).rfind("HTTP/1.1 200 ", 0), 0u) << "a scrape works before";

  constexpr int kSlow = 20;
  std::vector<Fd> slow;
  for (int i = 0; i < kSlow; ++i) {
    slow.push_back(ConnectTcpAs(kHog, port));
    ASSERT_GE(slow.back().get(), 0);
  }
  const auto t0 = Clock::now();
  // The scrapers come after them (the accept queue is in order). The hog's
  // own: no slot for it.
  int scrape_errno = -1;
  std::string busy = Scrape(port, &scrape_errno, kHog);
  EXPECT_EQ(busy.rfind("HTTP/1.1 503 ", 0), 0u) << "errno " << scrape_errno << ": " << busy;
  EXPECT_EQ(scrape_errno, 0) << "the 503 is followed by a clean close, not a reset";
  Record("hog_uid_scraper_503_seconds", SecondsSince(t0));
  // Root's: its fair share.
  const auto t1 = Clock::now();
  std::string fair = Scrape(port, &scrape_errno);
  EXPECT_EQ(fair.rfind("HTTP/1.1 200 ", 0), 0u) << "errno " << scrape_errno << ": " << fair.substr(0, 200);
  EXPECT_NE(fair.find("cordon_events_total"), std::string::npos);
  Record("other_uid_scraper_200_seconds", SecondsSince(t1));

  // Each slow client sends one byte of a request every 100 ms until the agent
  // closes it.
  const std::string request = "GET /metrics HTTP/1.1\r\nHost: localhost\r\nX-Padding: ";
  std::vector<std::string> got(kSlow);
  std::vector<bool> closed(kSlow, false);
  std::vector<double> closed_at(kSlow, 0);
  size_t sent = 0;
  while (SecondsSince(t0) < 30) {
    bool all = true;
    for (int i = 0; i < kSlow; ++i) {
      if (closed[i]) continue;
      all = false;
      char byte = sent < request.size() ? request[sent] : 'x';
      (void)!::send(slow[i].get(), &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      char buf[4096];
      for (;;) {
        ssize_t n = ::recv(slow[i].get(), buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) {
          got[i].append(buf, static_cast<size_t>(n));
          continue;
        }
        if (n < 0 && errno == EAGAIN) break;
        closed[i] = true;
        closed_at[i] = SecondsSince(t0);
        break;
      }
    }
    if (all) break;
    ++sent;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  double last = 0;
  int timed_out = 0, refused = 0;
  for (int i = 0; i < kSlow; ++i) {
    EXPECT_TRUE(closed[i]) << "slow client " << i << " still connected after " << SecondsSince(t0) << " s";
    last = std::max(last, closed_at[i]);
    if (got[i].rfind("HTTP/1.1 408 ", 0) == 0)
      timed_out++;
    else if (got[i].rfind("HTTP/1.1 503 ", 0) == 0)
      refused++;
    else
      ADD_FAILURE() << "slow client " << i << " got neither 408 nor 503: " << got[i];
  }
  // 16 took the slots; the 4 beyond were refused at once, and one more made
  // room for root's scrape. The others held theirs until the deadline.
  EXPECT_EQ(refused, kSlow - 16 + 1);
  EXPECT_EQ(timed_out, 16 - 1);
  // The deadline is 4 s from the accept; trickling for the 30 s the loop
  // allows would have kept them all.
  EXPECT_LT(last, 15.0) << "cut off by the total deadline, not kept alive by each byte";
  Record("slow_clients_cut_off_after_seconds", last);
  Record("slow_clients_bytes_trickled_each", static_cast<double>(sent));
  slow.clear();

  // Negative control: with the hostile clients gone, the hog's uid scrapes
  // again too.
  std::string ok;
  EXPECT_TRUE(WaitFor([&] { return (ok = Scrape(port, nullptr, kHog)).rfind("HTTP/1.1 200 ", 0) == 0; }, 5000)) << ok;
  // And the metrics count what happened: 15 timed out; 503s for the 4 beyond
  // the slots, the hog's scraper and the slot that made room.
  EXPECT_NE(ok.find("cordon_metrics_connections_refused_total{reason=\"deadline\"} 15\n"), std::string::npos) << ok;
  EXPECT_NE(ok.find("cordon_metrics_connections_refused_total{reason=\"busy\"} 6\n"), std::string::npos) << ok;
  EXPECT_TRUE(agent.Alive());
}

// A control client trickling a frame a byte at a time is cut off by the
// request deadline (control.requestTimeoutMs, from the frame's first byte),
// one that sends nothing by the idle deadline; both are told why. A tail is
// not idle: it stays.
TEST_F(AgentHostileClients, TricklingAndIdleControlClientsAreCutOffByTheirDeadlines) {
  HostileTestAgent agent("", "control:\n  idleTimeoutMs: 2000\n  requestTimeoutMs: 1500\n");
  ASSERT_TRUE(agent.Start()) << agent.Log();

  // The tail, opened first: it must outlive both deadlines.
  auto tail = agent::AgentClient::Connect(agent.socket());
  ASSERT_TRUE(tail.ok());
  cordon::v1::Request tail_request;
  tail_request.mutable_tail()->set_follow(true);
  auto tail_reply = tail->Call(tail_request, 5000);
  ASSERT_TRUE(tail_reply.ok()) << tail_reply.error().ToString();
  ASSERT_EQ(tail_reply->error(), "");

  Fd idle = ConnectUnix(agent.socket());
  Fd trickle = ConnectUnix(agent.socket());
  ASSERT_GE(idle.get(), 0);
  ASSERT_GE(trickle.get(), 0);
  // A frame announcing 200 bytes, sent a byte per 100 ms: 20 s if let be.
  std::string frame(4, '\0');
  frame[3] = static_cast<char>(200);
  frame += std::string(200, 'x');
  const auto t0 = Clock::now();
  std::string trickle_got;
  bool trickle_closed = false;
  double trickle_closed_at = 0;
  size_t trickled = 0;
  while (!trickle_closed && SecondsSince(t0) < 30 && trickled < frame.size()) {
    (void)!::send(trickle.get(), &frame[trickled], 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    ++trickled;
    char buf[4096];
    for (;;) {
      ssize_t n = ::recv(trickle.get(), buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) {
        trickle_got.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EAGAIN) break;
      trickle_closed = true;
      trickle_closed_at = SecondsSince(t0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(trickle_closed) << "the trickling client is still connected after " << trickled << " bytes";
  EXPECT_LT(trickled, frame.size()) << "cut off before it could finish its frame";
  EXPECT_NE(FirstResponseError(trickle_got).find("control.requestTimeoutMs"), std::string::npos)
      << FirstResponseError(trickle_got);
  Record("trickling_control_client_cut_off_after_seconds", trickle_closed_at);
  Record("trickling_control_client_bytes_sent", static_cast<double>(trickled));

  ReadResult idle_read = ReadToEnd(idle.get(), 20000);
  EXPECT_TRUE(idle_read.eof) << "the idle client is still connected";
  EXPECT_NE(FirstResponseError(idle_read.data).find("control.idleTimeoutMs"), std::string::npos)
      << FirstResponseError(idle_read.data);
  Record("idle_control_client_cut_off_after_seconds", SecondsSince(t0));

  // Negative controls: the tail is still there (past both deadlines), and a
  // status request on a new connection is answered.
  auto status = agent.Status();
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->tailers_size(), 1) << "a tail is not idle";
  struct pollfd pfd = {tail->fd(), POLLIN, 0};
  EXPECT_EQ(::poll(&pfd, 1, 0), 0) << "nothing (no refusal, no EOF) on the tail";
  EXPECT_TRUE(agent.Alive());
}

// Every control slot (tail.maxClients, 64) held: `cordon status` says the
// agent is busy and fails, never a bare "Broken pipe".
TEST_F(AgentHostileClients, SixtyFourHeldControlConnectionsMakeStatusSayAgentBusy) {
  HostileTestAgent agent("", "");
  ASSERT_TRUE(agent.Start()) << agent.Log();
  std::vector<Fd> held;
  for (int i = 0; i < 64; ++i) {
    held.push_back(ConnectUnix(agent.socket()));
    ASSERT_GE(held.back().get(), 0);
  }
  for (int attempt = 0; attempt < 3; ++attempt) {
    CommandResult r = Cordon({"status"});
    EXPECT_EQ(r.status, 1) << r.out << r.err;
    EXPECT_NE(r.err.find("agent busy: all 64 control connections in use"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("Broken pipe"), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("Broken pipe"), std::string::npos) << r.out;
  }
  CommandResult json = Cordon({"status", "--json"});
  EXPECT_EQ(json.status, 1);
  EXPECT_NE(json.out.find("\"agentProblem\":\"agent busy: all 64"), std::string::npos) << json.out;
  // The held ones were not disturbed (the default idle timeout is minutes).
  for (const Fd& fd : held) {
    struct pollfd pfd = {fd.get(), POLLIN, 0};
    EXPECT_EQ(::poll(&pfd, 1, 0), 0);
  }

  // Negative control: the slots free again, status works.
  held.clear();
  CommandResult r;
  EXPECT_TRUE(WaitFor([&] { return (r = Cordon({"status"})).status == 0; }, 10000)) << r.out << r.err;
  EXPECT_NE(r.out.find("agent: pid " + std::to_string(agent.pid())), std::string::npos) << r.out;
  // The 4 refusals are counted.
  std::string metrics = Scrape(agent.MetricsPort());
  EXPECT_NE(metrics.find("cordon_control_connections_refused_total{reason=\"busy\"} 4\n"), std::string::npos)
      << metrics;
}

// 16 clients each send all but the last byte of a 32 MiB request frame:
// the frames still arriving may announce 64 MiB in all; the others are
// refused with an error and closed, and the agent's RSS stays bounded.
TEST_F(AgentHostileClients, PartialThirtyTwoMibFramesStayWithinTheMemoryBudget) {
  HostileTestAgent agent("", "");
  ASSERT_TRUE(agent.Start()) << agent.Log();
  ASSERT_TRUE(agent.Status().has_value());
  // The baseline once the agent has loaded its network instances ahead (or
  // failed to): that parse is most of its memory.
  WaitFor([&] { return agent.Log().find("network instance") != std::string::npos; }, 20000);
  const uint64_t baseline_kib = agent.RssKib();
  ASSERT_GT(baseline_kib, 0u);

  constexpr int kClients = 16;
  constexpr uint32_t kFrame = agent::kMaxFrameBytes;  // 32 MiB
  std::string frame(4, '\0');
  frame[0] = static_cast<char>(kFrame >> 24);
  frame[1] = static_cast<char>(kFrame >> 16);
  frame[2] = static_cast<char>(kFrame >> 8);
  frame[3] = static_cast<char>(kFrame);
  frame.resize(4 + kFrame - 1, 'p');  // never complete
  std::vector<Fd> fds;
  for (int i = 0; i < kClients; ++i) {
    fds.push_back(ConnectUnix(agent.socket()));
    ASSERT_GE(fds.back().get(), 0);
  }
  std::vector<size_t> sent(kClients, 0);
  std::vector<int> send_errno(kClients, 0);
  std::vector<std::thread> senders;
  for (int i = 0; i < kClients; ++i)
    senders.emplace_back([&, i] {
      while (sent[i] < frame.size()) {
        ssize_t n = ::send(fds[i].get(), frame.data() + sent[i], frame.size() - sent[i], MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          send_errno[i] = errno;
          return;
        }
        sent[i] += static_cast<size_t>(n);
      }
    });
  for (auto& t : senders) t.join();
  int complete = 0, refused = 0;
  for (int i = 0; i < kClients; ++i) {
    if (sent[i] == frame.size()) {
      complete++;
      continue;
    }
    ReadResult r = ReadToEnd(fds[i].get(), 5000);
    EXPECT_TRUE(r.eof);
    if (FirstResponseError(r.data).find("control.partialFramesMaxBytes") != std::string::npos)
      refused++;
    else
      ADD_FAILURE() << "client " << i << " cut off without the budget's error: errno " << send_errno[i] << ", "
                    << FirstResponseError(r.data);
  }
  // The frames that got through are held by the agent (all but a byte):
  // that is the budget's worth at most.
  const uint64_t held_kib = agent.RssKib();
  EXPECT_GE(refused, kClients - 2);
  EXPECT_LE(complete, 2);
  EXPECT_LT(held_kib, baseline_kib + (64 + 48) * 1024) << "baseline " << baseline_kib << " KiB";
  Record("rss_baseline_kib", static_cast<double>(baseline_kib));
  Record("rss_with_partial_frames_kib", static_cast<double>(held_kib));
  Record("partial_frames_admitted", complete);
  Record("partial_frames_refused", refused);

  // Negative control: once they are gone, a request gets its answer, and the
  // budget is free again (a large frame is taken whole).
  fds.clear();
  EXPECT_TRUE(WaitFor([&] { return agent.Status().has_value(); }, 5000));
  Record("rss_after_the_partial_frames_closed_kib", static_cast<double>(agent.RssKib()));
  auto client = agent::AgentClient::Connect(agent.socket());
  ASSERT_TRUE(client.ok());
  cordon::v1::Request big;
  big.mutable_attach()->set_cgroup("/nonexistent-cordon-hostile-test");
  big.mutable_attach()->set_policy_text(std::string(8 << 20, '#'));
  auto response = client->Call(big, 30000);
  ASSERT_TRUE(response.ok()) << response.error().ToString();
  EXPECT_EQ(response->error().find("control.partialFramesMaxBytes"), std::string::npos) << response->error();
  EXPECT_FALSE(response->error().empty()) << "the cgroup does not exist";
  EXPECT_TRUE(WaitFor([&] { return agent.RssKib() < baseline_kib + 64 * 1024; }, 10000)) << agent.RssKib() << " KiB";
  Record("rss_after_kib", static_cast<double>(agent.RssKib()));
  EXPECT_TRUE(agent.Alive());
}

// A client that pipelines requests and never reads the replies: they do not
// pile up in the agent without bound (it is closed past 256 unread), and the
// agent's memory stays put.
TEST_F(AgentHostileClients, PipelinedRequestsWhoseRepliesAreNeverReadAreBounded) {
  HostileTestAgent agent("", "");
  ASSERT_TRUE(agent.Start()) << agent.Log();
  // The baseline once the network instances are loaded (their BTF parse is
  // most of the agent's memory, and it may peak between two readings).
  WaitFor([&] { return agent.Log().find("network instance") != std::string::npos; }, 20000);
  const uint64_t baseline_kib = agent.RssKib();
  cordon::v1::Request status;
  status.mutable_status();
  const std::string one = agent::EncodeFrame(status);
  std::string many;
  for (int i = 0; i < 1000; ++i) many += one;
  Fd fd = ConnectUnix(agent.socket());
  ASSERT_GE(fd.get(), 0);
  // 100,000 requests (a status reply is a few hundred bytes: tens of MB
  // if they were all kept); the sends fail once the agent closes it.
  int rounds = 0;
  for (; rounds < 100; ++rounds) {
    size_t off = 0;
    while (off < many.size()) {
      ssize_t n = ::send(fd.get(), many.data() + off, many.size() - off, MSG_NOSIGNAL);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    if (off < many.size()) break;
  }
  EXPECT_LT(rounds, 100) << "the agent kept taking requests whose replies nobody reads";
  Record("pipelined_requests_sent_before_the_close", rounds * 1000.0);
  const uint64_t rss_kib = agent.RssKib();
  EXPECT_LT(rss_kib, baseline_kib + 32 * 1024) << "baseline " << baseline_kib << " KiB";
  Record("rss_after_pipelined_requests_kib", static_cast<double>(rss_kib));
  // Negative control: an ordinary request is answered.
  fd.Close();
  EXPECT_TRUE(agent.Status().has_value());
  EXPECT_TRUE(agent.Alive());
}

// 200 requests whose string is not UTF-8: each is refused, the agent's
// stderr gets no raw libprotobuf line (its log handler routes them through
// the agent's rate-limited log) and at most a few lines in all; the payload
// is never logged.
TEST_F(AgentHostileClients, NonUtf8RequestsLeaveNoLibprotobufLinesOnTheAgentsStderr) {
  HostileTestAgent agent("", "");
  ASSERT_TRUE(agent.Start()) << agent.Log();
  const size_t log_before = agent.Log().size();
  // Request.attach (3) { policy_text (2): "SECRET-PAYLOAD-MARKER" + 0xff 0xfe }
  const std::string inner = "SECRET-PAYLOAD-MARKER\xff\xfe";
  std::string attach = std::string("\x12", 1) + static_cast<char>(inner.size()) + inner;
  std::string payload = std::string("\x1a", 1) + static_cast<char>(attach.size()) + attach;
  std::string frame(4, '\0');
  frame[3] = static_cast<char>(payload.size());
  frame += payload;
  constexpr int kRepeats = 200;
  Fd fd = ConnectUnix(agent.socket());
  ASSERT_GE(fd.get(), 0);
  int answered = 0;
  std::string in, reply;
  for (int i = 0; i < kRepeats; ++i) {
    ASSERT_EQ(::send(fd.get(), frame.data(), frame.size(), MSG_NOSIGNAL), static_cast<ssize_t>(frame.size()));
    while (agent::TakeFrame(&in, &reply) != 1) {
      struct pollfd pfd = {fd.get(), POLLIN, 0};
      ASSERT_EQ(::poll(&pfd, 1, 5000), 1) << "no answer to request " << i;
      char buf[4096];
      ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
      ASSERT_GT(n, 0);
      in.append(buf, static_cast<size_t>(n));
    }
    cordon::v1::Response response;
    ASSERT_TRUE(response.ParseFromString(reply));
    if (response.error() == "malformed request") answered++;
  }
  EXPECT_EQ(answered, kRepeats);
  // Negative control: a well-formed request is answered.
  auto status = agent.Status();
  ASSERT_TRUE(status.has_value());

  const std::string log = agent.Log().substr(log_before);
  size_t raw = 0, lines = 0, protobuf = 0, malformed = 0;
  std::istringstream in_log(log);
  for (std::string line; std::getline(in_log, line);) {
    lines++;
    if (line.rfind("[libprotobuf", 0) == 0) raw++;
    if (line.find("libprotobuf") != std::string::npos) protobuf++;
    if (line.find("malformed control request") != std::string::npos) malformed++;
  }
  EXPECT_EQ(raw, 0u) << log;
  EXPECT_EQ(log.find("SECRET-PAYLOAD-MARKER"), std::string::npos) << "the payload is never logged";
  // The first is reported (logging works), the other 199 only counted.
  EXPECT_GE(malformed, 1u) << log;
  EXPECT_GE(protobuf, 1u) << "libprotobuf did complain (through the agent's log): " << log;
  EXPECT_LE(protobuf, 2u) << log;
  EXPECT_LE(malformed, 2u) << log;
  EXPECT_LE(lines, 6u) << log;
  Record("agent_log_lines_for_200_non_utf8_requests", static_cast<double>(lines));
  EXPECT_TRUE(agent.Alive());
}

// One Response frame from fd, within timeout_ms (nullopt: none whole).
std::optional<cordon::v1::Response> ReadResponse(int fd, int timeout_ms) {
  std::string buffer, payload;
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[65536];
  while (agent::TakeFrame(&buffer, &payload) != 1) {
    int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    if (left <= 0) return std::nullopt;
    struct pollfd pfd = {fd, POLLIN, 0};
    if (::poll(&pfd, 1, left) <= 0) continue;
    ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0) return std::nullopt;
    if (n > 0) buffer.append(buf, static_cast<size_t>(n));
  }
  cordon::v1::Response r;
  if (!r.ParseFromString(payload)) return std::nullopt;
  return r;
}

// Issue 16 finding 9: one 7 MB policy stalled the agent's single event loop
// for ~2.2 s: no event drained, no other client answered meanwhile. The
// policy is now parsed and compiled off the loop, on the agent's thread named
// cordon-compile. The test holds that thread (ptrace stops one thread, not
// its process), sends an attach of a ~7 MB policy (9,990 long read paths: the
// limit is 10,000) on one connection, waits until the agent has read all of
// it (nothing left in the connection's queue), then sends a status on
// another: the status is answered while the attach is not. (With the
// compilation in the loop the loop itself would compile before it reads the
// status, and the attach's reply would come first: checked by running the
// compilation in the loop. An earlier version paused 100 ms instead of
// holding the thread, and failed on a quiet machine where the compilation
// was over by then.) The thread let go, the attach completes and its
// sandbox is attached.
// An attach of a ~7 MB policy (9,990 long read paths: the limit is 10,000)
// to `cgroup`: seconds of compiling.
std::string LargePolicyAttachFrame(const std::string& cgroup) {
  std::string policy =
      "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: large}\nspec:\n  files:\n    read:\n";
  for (int i = 0; i < 9990; ++i) {
    policy += "      - /srv";
    for (int j = 0; j < 10; ++j) policy += "/d" + std::to_string(i) + "x" + std::to_string(j) + std::string(60, 'y');
    policy += "/f" + std::to_string(i) + "\n";
  }
  cordon::v1::Request attach;
  attach.mutable_attach()->set_cgroup(cgroup);
  attach.mutable_attach()->set_policy_text(policy);
  attach.mutable_attach()->set_policy_file("large.yaml");
  attach.mutable_attach()->set_allow_degraded(true);
  return agent::EncodeFrame(attach);
}

// Sends all of `frame` (false: the connection was cut off first).
bool SendAll(int fd, const std::string& frame) {
  size_t off = 0;
  while (off < frame.size()) {
    ssize_t n = ::send(fd, frame.data() + off, frame.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// The thread of process `pid` whose name is `comm` (0: none).
pid_t ThreadNamed(pid_t pid, const std::string& comm) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  pid_t found = 0;
  while (struct dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream in(dir + "/" + e->d_name + "/comm");
    std::string name;
    if (std::getline(in, name) && name == comm) found = static_cast<pid_t>(std::atoi(e->d_name));
  }
  ::closedir(d);
  return found;
}

// One thread of another process held stopped (PTRACE_SEIZE and
// PTRACE_INTERRUPT stop that thread only), let go when this goes.
class HeldThread {
 public:
  explicit HeldThread(pid_t tid) {
    if (::ptrace(PTRACE_SEIZE, tid, nullptr, nullptr) != 0) {
      error_ = std::string("PTRACE_SEIZE: ") + std::strerror(errno);
      return;
    }
    tid_ = tid;
    int st = 0;
    if (::ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr) != 0 || ::waitpid(tid, &st, __WALL) != tid || !WIFSTOPPED(st))
      error_ = "the thread did not stop";
  }
  ~HeldThread() {
    if (tid_ > 0) ::ptrace(PTRACE_DETACH, tid_, nullptr, nullptr);
  }
  HeldThread(const HeldThread&) = delete;
  HeldThread& operator=(const HeldThread&) = delete;
  const std::string& error() const { return error_; }
  void Release() {
    if (tid_ > 0) ::ptrace(PTRACE_DETACH, tid_, nullptr, nullptr);
    tid_ = 0;
  }

 private:
  pid_t tid_ = 0;
  std::string error_;
};

TEST_F(AgentHostileClients, ALargePolicyIsCompiledOffTheEventLoop) {
  HostileTestAgent agent("", "");
  ASSERT_TRUE(agent.Start()) << agent.Log();
  const pid_t compiler = ThreadNamed(agent.pid(), "cordon-compile");
  ASSERT_GT(compiler, 0) << "the agent has no thread named cordon-compile";
  HeldThread held(compiler);
  ASSERT_EQ(held.error(), "");
  TestCgroup cg("hostile-large");
  const std::string frame = LargePolicyAttachFrame(cg.path());
  ASSERT_GT(frame.size(), 6u << 20);
  Fd big = ConnectUnix(agent.socket());
  ASSERT_GE(big.get(), 0);
  ASSERT_TRUE(SendAll(big.get(), frame)) << std::strerror(errno);
  // Read by the agent: nothing of it is left queued on the connection.
  ASSERT_TRUE(WaitFor(
      [&] {
        int queued = -1;
        return ::ioctl(big.get(), SIOCOUTQ, &queued) == 0 && queued == 0;
      },
      30000))
      << "the agent did not read the attach";
  cordon::v1::Request status;
  status.mutable_status();
  Fd other = ConnectUnix(agent.socket());
  ASSERT_GE(other.get(), 0);
  const std::string status_frame = agent::EncodeFrame(status);
  ASSERT_EQ(::send(other.get(), status_frame.data(), status_frame.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(status_frame.size()));
  auto answered = ReadResponse(other.get(), 30000);
  ASSERT_TRUE(answered.has_value()) << agent.Log();
  EXPECT_EQ(answered->error(), "");
  struct pollfd pfd = {big.get(), POLLIN, 0};
  EXPECT_EQ(::poll(&pfd, 1, 0), 0) << "the attach was answered before another client's status, sent after it";
  held.Release();
  auto attached = ReadResponse(big.get(), 60000);
  ASSERT_TRUE(attached.has_value()) << agent.Log();
  EXPECT_EQ(attached->error(), "") << agent.Log();
  EXPECT_EQ(attached->attach().sandbox_id(), cg.id());
  EXPECT_EQ(attached->attach().policy(), "large");
  // The next request on the attach's connection is answered too (it was
  // held while the policy compiled).
  ASSERT_EQ(::send(big.get(), status_frame.data(), status_frame.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(status_frame.size()));
  EXPECT_TRUE(ReadResponse(big.get(), 10000).has_value());
  EXPECT_EQ(Cordon({"detach", "--cgroup", cg.path()}).status, 0);
  EXPECT_TRUE(agent.Alive());
}

// Issue 16 (attacker review): a root client that sent a whole attach frame
// and hung up freed its slot and its partial-frame budget while its request
// waited for the policy compiler: clients sending 32 MiB attaches one after
// another and hanging up piled them up in the agent's memory. Requests
// waiting for the compiler now count against control.partialFramesMaxBytes
// until compiled, and those whose client is gone before their compilation
// starts are dropped. The compiler is kept busy by a large policy, whose
// client hangs up once its compilation started: that request is carried out
// all the same (the sandbox is attached). Meanwhile 12 clients each send a
// ~30 MiB attach and hang up. The agent's memory stays within the budget's
// reach (measured: about 155 MiB over the baseline, most of it the large
// policy's compilation), a queued request whose client is gone is dropped
// when the hang-up is seen before its compilation starts (timing: measured,
// not asserted; before, each was compiled for nobody while the budget let
// the next frames in), and afterwards the budget is free again: a 30 MiB
// request and a status are answered.
TEST_F(AgentHostileClients, QueuedAttachesOfClientsThatHangUpStayWithinTheMemoryBudget) {
  HostileTestAgent agent("", "");
  ASSERT_TRUE(agent.Start()) << agent.Log();
  WaitFor([&] { return agent.Log().find("network instance") != std::string::npos; }, 20000);
  const uint64_t baseline_kib = agent.RssKib();
  ASSERT_GT(baseline_kib, 0u);
  TestCgroup cg("hostile-queue");
  Fd slow = ConnectUnix(agent.socket());
  ASSERT_GE(slow.get(), 0);
  ASSERT_TRUE(SendAll(slow.get(), LargePolicyAttachFrame(cg.path())));
  // Hung up once its compilation started: seen from outside as the agent's
  // memory growing well past the frame's (the compilation takes ~150 MiB;
  // the frame and its copy ~15 MiB). A status answered was not enough: on a
  // loaded machine the compiler took the job up after the hang-up.
  ASSERT_TRUE(agent.Status().has_value());
  WaitFor([&] { return agent.RssKib() > baseline_kib + 48 * 1024; }, 30000);
  slow.Close();
  auto attached = [&] {
    auto st = agent.Status();
    if (st)
      for (const auto& sb : st->sandboxes())
        if (sb.id() == cg.id()) return true;
    return false;
  };

  cordon::v1::Request junk;
  junk.mutable_attach()->set_cgroup("/nonexistent-cordon-hostile-test");
  junk.mutable_attach()->set_policy_text(std::string(30 << 20, '#'));
  const std::string junk_frame = agent::EncodeFrame(junk);
  std::atomic<bool> done{false};
  std::atomic<uint64_t> peak_kib{0};
  std::thread sampler([&] {
    while (!done) {
      peak_kib = std::max<uint64_t>(peak_kib, agent.RssKib());
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  constexpr int kClients = 12;
  std::atomic<int> whole{0};  // sent whole (a refused frame is read and discarded too)
  std::vector<std::thread> senders;
  for (int i = 0; i < kClients; ++i)
    senders.emplace_back([&] {
      Fd fd = ConnectUnix(agent.socket());
      if (fd.get() >= 0 && SendAll(fd.get(), junk_frame)) whole++;
    });  // each hangs up at once
  for (auto& t : senders) t.join();
  const bool large_attached = WaitFor(attached, 120000);
  done = true;
  sampler.join();
  EXPECT_TRUE(large_attached) << "a client that hung up once its compilation started is served\n" << agent.Log();
  Record("rss_baseline_kib", static_cast<double>(baseline_kib));
  Record("rss_peak_kib", static_cast<double>(peak_kib));
  Record("hung_up_attaches_sent_whole", whole.load());
  EXPECT_LT(peak_kib.load(), baseline_kib + 256 * 1024) << "baseline " << baseline_kib << " KiB";
  // Refused frames are still read (and discarded) until the connection
  // closes, so the senders cannot tell: the agent counts them.
  const std::string metrics = Scrape(agent.MetricsPort());
  const std::string budget_line = "cordon_control_connections_refused_total{reason=\"budget\"} ";
  const size_t at = metrics.find(budget_line);
  ASSERT_NE(at, std::string::npos) << metrics;
  Record("hung_up_attaches_refused_for_the_budget", std::stod(metrics.substr(at + budget_line.size())));
  // Whether a request was dropped depends on timing (its client's hang-up
  // seen before the compiler took it up): measured, not asserted; what is
  // asserted is the memory bound above and the free budget below.
  Record("hung_up_attaches_dropped",
         agent.Log().find("client hung up before its policy was compiled") != std::string::npos ? 1 : 0);

  // Negative control: the budget is free again once the queue is done.
  auto client = agent::AgentClient::Connect(agent.socket());
  ASSERT_TRUE(client.ok());
  auto response = client->Call(junk, 60000);
  ASSERT_TRUE(response.ok()) << response.error().ToString();
  EXPECT_EQ(response->error().find("partialFramesMaxBytes"), std::string::npos) << response->error();
  EXPECT_FALSE(response->error().empty()) << "the cgroup does not exist";
  EXPECT_TRUE(agent.Status().has_value());
  EXPECT_EQ(Cordon({"detach", "--cgroup", cg.path()}).status, 0);
  EXPECT_TRUE(agent.Alive());
}

}  // namespace
}  // namespace cordon::test
