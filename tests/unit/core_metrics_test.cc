// Prometheus rendering and the /metrics HTTP server, without a kernel.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>
#include <sstream>
#include <thread>

#include "agent/metrics.h"

namespace cordon::agent {
namespace {

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool HasLine(const std::string& text, const std::string& line) {
  for (const std::string& l : SplitLines(text))
    if (l == line) return true;
  return false;
}

SandboxMetrics Sandbox(uint64_t id, const std::string& name) {
  SandboxMetrics s;
  s.id = id;
  s.name = name;
  s.level = "full";
  for (size_t i = 0; i < s.counters.size(); ++i) s.counters[i] = 100 + i;  // slot i holds 100+i
  s.events_delivered = 7;
  s.events_quiet = 2;
  s.events_suppressed = 3;
  return s;
}

TEST(MetricsRender, AgentFamiliesGolden) {
  AgentMetrics m;
  m.events_total = 12;
  m.events_per_second = 0.5;
  m.sink_write_failures = 3;
  m.sink_failures_by_sink = {{"file", 1}, {"syslog", 2}};
  m.tailer_drops = 4;
  m.tailers_connected = 2;
  m.tailers_disconnected_slow = 1;
  m.ringbuf_fill_ratio_max = 0.25;
  m.rss_bytes = 1048576;
  m.uptime_seconds = 3600.125;
  m.control_refused_busy = 5;
  m.control_refused_deadline = 6;
  m.control_refused_budget = 7;
  m.control_refused_unread = 8;
  m.metrics_refused_busy = 9;
  m.metrics_refused_deadline = 10;
  EXPECT_EQ(RenderPrometheus(m),
            "# HELP cordon_events_total Audit events the agent consumed, all sandboxes.\n"
            "# TYPE cordon_events_total counter\n"
            "cordon_events_total 12\n"
            "# HELP cordon_events_per_second Recent rate of audit events, all sandboxes.\n"
            "# TYPE cordon_events_per_second gauge\n"
            "cordon_events_per_second 0.5\n"
            "# HELP cordon_sink_write_failures_total Failed audit sink writes, all sinks.\n"
            "# TYPE cordon_sink_write_failures_total counter\n"
            "cordon_sink_write_failures_total 3\n"
            "# HELP cordon_sink_write_failures_by_sink_total Failed audit sink writes, per sink.\n"
            "# TYPE cordon_sink_write_failures_by_sink_total counter\n"
            "cordon_sink_write_failures_by_sink_total{sink=\"file\"} 1\n"
            "cordon_sink_write_failures_by_sink_total{sink=\"syslog\"} 2\n"
            "# HELP cordon_tailer_drops_total Events not delivered to event-stream tailers that fell behind.\n"
            "# TYPE cordon_tailer_drops_total counter\n"
            "cordon_tailer_drops_total 4\n"
            "# HELP cordon_tailers_connected Event-stream tailers connected.\n"
            "# TYPE cordon_tailers_connected gauge\n"
            "cordon_tailers_connected 2\n"
            "# HELP cordon_tailers_disconnected_slow_total Event-stream tailers disconnected for being too slow.\n"
            "# TYPE cordon_tailers_disconnected_slow_total counter\n"
            "cordon_tailers_disconnected_slow_total 1\n"
            "# HELP cordon_ringbuf_fill_ratio_max Fullest sandbox ring buffer, as a fraction of its size (0..1).\n"
            "# TYPE cordon_ringbuf_fill_ratio_max gauge\n"
            "cordon_ringbuf_fill_ratio_max 0.25\n"
            "# HELP cordon_resident_memory_bytes Resident set size of the agent.\n"
            "# TYPE cordon_resident_memory_bytes gauge\n"
            "cordon_resident_memory_bytes 1048576\n"
            "# HELP cordon_uptime_seconds Seconds since the agent started.\n"
            "# TYPE cordon_uptime_seconds gauge\n"
            "cordon_uptime_seconds 3600.125\n"
            "# HELP cordon_sandboxes Sandboxes the agent watches.\n"
            "# TYPE cordon_sandboxes gauge\n"
            "cordon_sandboxes 0\n"
            "# HELP cordon_control_connections_refused_total Control connections refused or closed by the agent: "
            "busy (no free slot), deadline (idle or request timeout), budget (partial-frame memory), unread (replies "
            "never read).\n"
            "# TYPE cordon_control_connections_refused_total counter\n"
            "cordon_control_connections_refused_total{reason=\"busy\"} 5\n"
            "cordon_control_connections_refused_total{reason=\"deadline\"} 6\n"
            "cordon_control_connections_refused_total{reason=\"budget\"} 7\n"
            "cordon_control_connections_refused_total{reason=\"unread\"} 8\n"
            "# HELP cordon_metrics_connections_refused_total Metrics connections answered 503 (busy: no free slot "
            "for the uid) or 408 (deadline).\n"
            "# TYPE cordon_metrics_connections_refused_total counter\n"
            "cordon_metrics_connections_refused_total{reason=\"busy\"} 9\n"
            "cordon_metrics_connections_refused_total{reason=\"deadline\"} 10\n"
            "# HELP cordon_sandbox_info A sandbox and its enforcement level (always 1).\n"
            "# TYPE cordon_sandbox_info gauge\n"
            "# HELP cordon_denials_total Operations refused (verdict denied) or that audit mode would have refused "
            "(verdict audited), by kind: net.connect, net.sendmsg, net.socket (inet socket kinds), net.lsm (socket "
            "families and unix sockets), file, tamper.\n"
            "# TYPE cordon_denials_total counter\n"
            "# HELP cordon_violations_happened_total Violations that were not prevented: detected (seen after the "
            "fact, detect mode) and killed (detected, then the task was killed). Never counted in "
            "cordon_denials_total.\n"
            "# TYPE cordon_violations_happened_total counter\n"
            "# HELP cordon_net_allowed_total Network operations allowed by policy.\n"
            "# TYPE cordon_net_allowed_total counter\n"
            "# HELP cordon_ringbuf_lost_events_total Events lost because the sandbox's ring buffer was full.\n"
            "# TYPE cordon_ringbuf_lost_events_total counter\n"
            "# HELP cordon_events_delivered_total Audit events of the sandbox delivered to the sinks.\n"
            "# TYPE cordon_events_delivered_total counter\n"
            "# HELP cordon_events_quiet_total Audit events of the sandbox delivered marked quiet (expected: the "
            "policy's spec.quiet).\n"
            "# TYPE cordon_events_quiet_total counter\n"
            "# HELP cordon_events_suppressed_total Audit events of the sandbox suppressed by rate limiting.\n"
            "# TYPE cordon_events_suppressed_total counter\n"
            "# HELP cordon_sandbox_memory_bytes Memory the sandbox cgroup uses (memory.current).\n"
            "# TYPE cordon_sandbox_memory_bytes gauge\n"
            "# HELP cordon_sandbox_memory_peak_bytes Most memory the sandbox cgroup used (memory.peak).\n"
            "# TYPE cordon_sandbox_memory_peak_bytes gauge\n"
            "# HELP cordon_sandbox_memory_limit_bytes The sandbox's memory.max (absent when unlimited).\n"
            "# TYPE cordon_sandbox_memory_limit_bytes gauge\n"
            "# HELP cordon_sandbox_pids Tasks in the sandbox cgroup (pids.current).\n"
            "# TYPE cordon_sandbox_pids gauge\n"
            "# HELP cordon_sandbox_pids_limit The sandbox's pids.max (absent when unlimited).\n"
            "# TYPE cordon_sandbox_pids_limit gauge\n"
            "# HELP cordon_sandbox_cpu_seconds_total CPU time the sandbox cgroup used (cpu.stat usage_usec).\n"
            "# TYPE cordon_sandbox_cpu_seconds_total counter\n"
            "# HELP cordon_sandbox_cpu_throttled_seconds_total Time the sandbox cgroup was throttled at its cpu.max "
            "(cpu.stat throttled_usec).\n"
            "# TYPE cordon_sandbox_cpu_throttled_seconds_total counter\n"
            "# HELP cordon_sandbox_egress_bytes_total Bytes the sandbox sent (every packet's IP length; "
            "spec.resources.egressBytes counts these).\n"
            "# TYPE cordon_sandbox_egress_bytes_total counter\n"
            "# HELP cordon_sandbox_egress_dropped_bytes_total Bytes of the sandbox's packets dropped over its "
            "spec.resources.egressBytes.\n"
            "# TYPE cordon_sandbox_egress_dropped_bytes_total counter\n"
            "# HELP cordon_sandbox_egress_limit_bytes The sandbox's spec.resources.egressBytes (absent when "
            "unlimited).\n"
            "# TYPE cordon_sandbox_egress_limit_bytes gauge\n");
}

TEST(MetricsRender, SandboxCounterSlots) {
  AgentMetrics m;
  m.sandboxes.push_back(Sandbox(42, "web"));
  std::string text = RenderPrometheus(m);
  const std::string l = "{sandbox=\"web\",cgroup_id=\"42\"";
  struct {
    const char* kind;
    int denied, audited;
  } want[] = {{"net.connect", CORDON_CNT_DENIED_CONNECT, CORDON_CNT_AUDITED_CONNECT},
              {"net.sendmsg", CORDON_CNT_DENIED_SENDMSG, CORDON_CNT_AUDITED_SENDMSG},
              {"net.socket", CORDON_CNT_DENIED_SOCKET, CORDON_CNT_AUDITED_SOCKET},
              {"net.lsm", CORDON_CNT_DENIED_LSM_NET, CORDON_CNT_AUDITED_LSM_NET},
              {"file", CORDON_CNT_DENIED_FILE, CORDON_CNT_AUDITED_FILE},
              {"tamper", CORDON_CNT_DENIED_TAMPER, CORDON_CNT_AUDITED_TAMPER}};
  for (const auto& w : want) {
    EXPECT_TRUE(HasLine(text, "cordon_denials_total" + l + ",kind=\"" + w.kind + "\",verdict=\"denied\"} " +
                                  std::to_string(100 + w.denied)))
        << w.kind << "\n" << text;
    EXPECT_TRUE(HasLine(text, "cordon_denials_total" + l + ",kind=\"" + w.kind + "\",verdict=\"audited\"} " +
                                  std::to_string(100 + w.audited)))
        << w.kind;
  }
  EXPECT_TRUE(HasLine(text, "cordon_net_allowed_total" + l + ",kind=\"net.connect\"} " +
                                std::to_string(100 + CORDON_CNT_ALLOWED_CONNECT)));
  EXPECT_TRUE(HasLine(text, "cordon_net_allowed_total" + l + ",kind=\"net.sendmsg\"} " +
                                std::to_string(100 + CORDON_CNT_ALLOWED_SENDMSG)));
  EXPECT_TRUE(HasLine(text, "cordon_ringbuf_lost_events_total" + l + "} " +
                                std::to_string(100 + CORDON_CNT_EVENTS_DROPPED)));
  EXPECT_TRUE(HasLine(text, "cordon_violations_happened_total" + l + ",verdict=\"detected\"} " +
                                std::to_string(100 + CORDON_CNT_DETECTED)));
  EXPECT_TRUE(HasLine(text, "cordon_violations_happened_total" + l + ",verdict=\"killed\"} " +
                                std::to_string(100 + CORDON_CNT_KILLED)));
  EXPECT_TRUE(HasLine(text, "cordon_sandbox_info" + l + ",level=\"full\"} 1"));
  EXPECT_TRUE(HasLine(text, "cordon_events_delivered_total" + l + "} 7"));
  EXPECT_TRUE(HasLine(text, "cordon_events_quiet_total" + l + "} 2"));
  EXPECT_TRUE(HasLine(text, "cordon_events_suppressed_total" + l + "} 3"));
  EXPECT_TRUE(HasLine(text, "cordon_sandboxes 1"));
  size_t denials = 0;
  for (const std::string& line : SplitLines(text)) denials += line.rfind("cordon_denials_total{", 0) == 0;
  EXPECT_EQ(denials, 12u);

  // The agent's loss-record count shows when it is ahead of the kernel slot.
  m.sandboxes[0].ringbuf_lost = 1000;
  EXPECT_TRUE(HasLine(RenderPrometheus(m), "cordon_ringbuf_lost_events_total" + l + "} 1000"));

  // Resource use: a sample per file the sandbox has, none for the others.
  EXPECT_EQ(RenderPrometheus(m).find("cordon_sandbox_memory_bytes{"), std::string::npos);
  m.sandboxes[0].resources.memory_current = 12u << 20;
  m.sandboxes[0].resources.pids_max = 128;
  m.sandboxes[0].resources.cpu_usec = 2500000;
  text = RenderPrometheus(m);
  EXPECT_TRUE(HasLine(text, "cordon_sandbox_memory_bytes" + l + "} " + std::to_string(12u << 20))) << text;
  EXPECT_TRUE(HasLine(text, "cordon_sandbox_pids_limit" + l + "} 128"));
  EXPECT_TRUE(HasLine(text, "cordon_sandbox_cpu_seconds_total" + l + "} 2.5"));
  EXPECT_EQ(text.find("cordon_sandbox_memory_limit_bytes{"), std::string::npos) << "unlimited: no sample";
  // spec.resources.egressBytes: bytes sent and the limit, from the pinned map.
  EXPECT_EQ(text.find("cordon_sandbox_egress_bytes_total{"), std::string::npos);
  m.sandboxes[0].resources.egress_bytes = 1048000;
  m.sandboxes[0].resources.egress_dropped_bytes = 65483;
  m.sandboxes[0].resources.egress_limit = 1u << 20;
  text = RenderPrometheus(m);
  EXPECT_TRUE(HasLine(text, "# TYPE cordon_sandbox_egress_bytes_total counter")) << text;
  EXPECT_TRUE(HasLine(text, "cordon_sandbox_egress_bytes_total" + l + "} 1048000")) << text;
  EXPECT_TRUE(HasLine(text, "cordon_sandbox_egress_dropped_bytes_total" + l + "} 65483")) << text;
  EXPECT_TRUE(HasLine(text, "cordon_sandbox_egress_limit_bytes" + l + "} 1048576")) << text;
}

TEST(ResourceUsage, DescribedForTheSummaryStatusAndJson) {
  cordon::ops::ResourceUsage u;
  EXPECT_EQ(u.Describe(), "");
  EXPECT_EQ(u.DescribeCurrent(), "");
  EXPECT_EQ(u.Json(), "{}");
  u.memory_peak = 212u << 20;
  u.memory_max = 512u << 20;
  u.pids_peak = 14;
  u.pids_max = 128;
  u.cpu_usec = 3100000;
  EXPECT_EQ(u.Describe(), "peak 212 MiB of 512 MiB, 14 of 128 pids, 3.1 s CPU");
  u.memory_current = 12u << 20;
  u.pids_current = 3;
  u.cpu_throttled_usec = 300000;
  EXPECT_EQ(u.DescribeCurrent(), "memory 12 MiB (peak 212 MiB) of 512 MiB, pids 3 of 128, cpu 3.1 s (throttled 0.3 s)");
  EXPECT_EQ(u.Json(),
            "{\"memory\":{\"current\":12582912,\"peak\":222298112,\"limit\":536870912},\"pids\":{\"current\":3,"
            "\"peak\":14,\"limit\":128},\"cpu\":{\"usageUsec\":3100000,\"throttledUsec\":300000}}");
  cordon::ops::ResourceUsage small;
  small.memory_peak = 300u << 10;
  EXPECT_EQ(small.Describe(), "peak 300 KiB");
}

TEST(MetricsRender, EscapesLabelValues) {
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  AgentMetrics m;
  m.sandboxes.push_back(Sandbox(7, "a\"b\\c\nd"));
  m.sink_failures_by_sink = {{"file:/var/log/\"x\"", 1}};
  std::string text = RenderPrometheus(m);
  EXPECT_TRUE(HasLine(text, "cordon_events_delivered_total{sandbox=\"a\\\"b\\\\c\\nd\",cgroup_id=\"7\"} 7")) << text;
  EXPECT_TRUE(HasLine(text, "cordon_sink_write_failures_by_sink_total{sink=\"file:/var/log/\\\"x\\\"\"} 1"));
}

// Families are contiguous, each introduced by HELP then TYPE, counters end in
// _total, names are cordon_*, and label sets within a family are unique.
TEST(MetricsRender, ExpositionStructure) {
  AgentMetrics m;
  m.sandboxes.push_back(Sandbox(1, "one"));
  m.sandboxes.push_back(Sandbox(2, "two"));
  m.sink_failures_by_sink = {{"file", 1}};
  m.events_per_second = std::numeric_limits<double>::quiet_NaN();
  m.uptime_seconds = std::numeric_limits<double>::infinity();
  std::string text = RenderPrometheus(m);
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  std::set<std::string> seen_families, seen_samples;
  std::string family, type;
  for (const std::string& line : SplitLines(text)) {
    if (line.rfind("# HELP ", 0) == 0) {
      std::string name = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_TRUE(seen_families.insert(name).second) << "family twice: " << name;
      EXPECT_EQ(name.rfind("cordon_", 0), 0u) << name;
      family = name;
      type.clear();
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      EXPECT_EQ(line.substr(7, family.size() + 1), family + " ") << line;
      type = line.substr(7 + family.size() + 1);
      EXPECT_TRUE(type == "counter" || type == "gauge") << line;
      if (type == "counter") {
        EXPECT_TRUE(family.ends_with("_total")) << family;
      }
      continue;
    }
    ASSERT_FALSE(type.empty()) << "sample before HELP/TYPE: " << line;
    std::string name = line.substr(0, line.find_first_of("{ "));
    EXPECT_EQ(name, family) << line;
    std::string series = line.substr(0, line.rfind(' '));
    EXPECT_TRUE(seen_samples.insert(series).second) << "duplicate series: " << series;
  }
  EXPECT_TRUE(HasLine(text, "cordon_events_per_second NaN"));
  EXPECT_TRUE(HasLine(text, "cordon_uptime_seconds +Inf"));
}

// ---- server -----------------------------------------------------------------

// Drives Service() like the agent's loop: on readability of fd() and every 50 ms.
class ServeLoop {
 public:
  ServeLoop(MetricsServer& server, std::function<std::string()> render, HttpDocuments documents = {})
      : thread_([this, &server, render, documents] {
          while (!stop_) {
            pollfd p = {server.fd(), POLLIN, 0};
            ::poll(&p, 1, 50);
            server.Service(render, documents);
            connections_ = server.connections();
          }
        }) {}
  ~ServeLoop() {
    stop_ = true;
    thread_.join();
  }
  size_t connections() const { return connections_; }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<size_t> connections_{0};
  std::thread thread_;
};

int Connect(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT_GE(fd, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << std::strerror(errno);
  timeval tv = {10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

// Everything the server sends until it closes; "" on timeout.
std::string ReadAll(int fd) {
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0) return out;
    if (n < 0) return errno == ECONNRESET ? out : "";
    out.append(buf, n);
  }
}

std::string Request(uint16_t port, const std::string& request) {
  int fd = Connect(port);
  EXPECT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
  std::string response = ReadAll(fd);
  ::close(fd);
  return response;
}

std::string Body(const std::string& response) {
  size_t end = response.find("\r\n\r\n");
  return end == std::string::npos ? "" : response.substr(end + 4);
}

TEST(MetricsServer, ServesMetricsAnd404) {
  auto server = MetricsServer::Listen("127.0.0.1:0", false);
  ASSERT_TRUE(server.ok()) << server.error().ToString();
  ASSERT_NE((*server)->port(), 0);
  AgentMetrics m;
  m.events_total = 5;
  m.sandboxes.push_back(Sandbox(42, "web"));
  const std::string body = RenderPrometheus(m);
  ServeLoop loop(**server, [&] { return body; });

  std::string r = Request((*server)->port(), "GET /metrics HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << r;
  EXPECT_NE(r.find("\r\nContent-Type: text/plain; version=0.0.4"), std::string::npos) << r;
  EXPECT_NE(r.find("\r\nContent-Length: " + std::to_string(body.size()) + "\r\n"), std::string::npos) << r;
  EXPECT_EQ(Body(r), body);

  r = Request((*server)->port(), "GET /metrics?name[]=x HTTP/1.0\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << r;

  r = Request((*server)->port(), "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 404 Not Found\r\n", 0), 0u) << r;
  r = Request((*server)->port(), "GET /metricsx HTTP/1.1\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 404 Not Found\r\n", 0), 0u) << r;

  r = Request((*server)->port(), "HEAD /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << r;
  EXPECT_EQ(Body(r), "");
  r = Request((*server)->port(), "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 405 ", 0), 0u) << r;
  r = Request((*server)->port(), "garbage\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 400 ", 0), 0u) << r;
}

// Other paths are asked of the documents callback (the OIDC issuer's
// discovery document and JWKS): served with its type, HEAD too; what it does
// not know is a 404; /metrics stays the metrics.
TEST(MetricsServer, ServesTheDocumentsItIsGivenAnd404ForTheRest) {
  auto server = MetricsServer::Listen("127.0.0.1:0", false);
  ASSERT_TRUE(server.ok()) << server.error().ToString();
  std::vector<std::string> asked;
  std::mutex mu;
  ServeLoop loop(
      **server, [] { return std::string("metrics body\n"); },
      [&](const std::string& path) -> std::optional<HttpDocument> {
        std::lock_guard<std::mutex> lock(mu);
        asked.push_back(path);
        if (path == "/ci/.well-known/jwks.json") return HttpDocument{"application/json", "{\"keys\":[]}\n"};
        return std::nullopt;
      });
  std::string r = Request((*server)->port(), "GET /ci/.well-known/jwks.json HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << r;
  EXPECT_NE(r.find("\r\nContent-Type: application/json\r\n"), std::string::npos) << r;
  EXPECT_NE(r.find("\r\nContent-Length: 12\r\n"), std::string::npos) << r;
  EXPECT_EQ(Body(r), "{\"keys\":[]}\n");
  r = Request((*server)->port(), "HEAD /ci/.well-known/jwks.json HTTP/1.1\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << r;
  EXPECT_EQ(Body(r), "");
  r = Request((*server)->port(), "GET /.well-known/jwks.json HTTP/1.1\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 404 Not Found\r\n", 0), 0u) << r;
  r = Request((*server)->port(), "POST /ci/.well-known/jwks.json HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 405 ", 0), 0u) << r;
  r = Request((*server)->port(), "GET /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(Body(r), "metrics body\n");
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(asked, (std::vector<std::string>{"/ci/.well-known/jwks.json", "/ci/.well-known/jwks.json",
                                             "/.well-known/jwks.json"}))
      << "the callback is asked for GET and HEAD of other paths only";
}

TEST(MetricsServer, RefusesNonLoopbackWithoutTheFlag) {
  auto refused = MetricsServer::Listen("0.0.0.0:0", false);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().ToString().find("0.0.0.0:0"), std::string::npos) << refused.error().ToString();
  EXPECT_NE(refused.error().ToString().find("loopback"), std::string::npos) << refused.error().ToString();
  EXPECT_FALSE(MetricsServer::Listen("[::]:0", false).ok());
  EXPECT_FALSE(MetricsServer::Listen("[::ffff:10.0.0.1]:0", false).ok());
  auto allowed = MetricsServer::Listen("0.0.0.0:0", true);
  EXPECT_TRUE(allowed.ok()) << allowed.error().ToString();
  EXPECT_TRUE(MetricsServer::Listen("localhost:0", false).ok());
  EXPECT_TRUE(MetricsServer::Listen("127.0.0.2:0", false).ok());
}

TEST(MetricsServer, ParsesListenAddresses) {
  for (const char* bad : {"127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.1:80x", "::1:80",
                          "[::1]80", "example.com:80", "[127.0.0.1]:80", ""}) {
    auto r = MetricsServer::Listen(bad, true);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.error().ToString().find("metrics listen address"), std::string::npos);
    }
  }
  auto v6 = MetricsServer::Listen("[::1]:0", false);
  if (!v6.ok() && v6.error().err == EADDRNOTAVAIL) GTEST_SKIP() << "no IPv6 loopback";
  ASSERT_TRUE(v6.ok()) << v6.error().ToString();
  EXPECT_NE((*v6)->port(), 0);
}

TEST(MetricsServer, SilentClientDoesNotBlockOthersAndIsClosed) {
  auto server = MetricsServer::Listen("127.0.0.1:0", false);
  ASSERT_TRUE(server.ok()) << server.error().ToString();
  ServeLoop loop(**server, [] { return std::string("cordon_up 1\n"); });
  int silent = Connect((*server)->port());
  int partial = Connect((*server)->port());
  ASSERT_EQ(::send(partial, "GET /metr", 9, MSG_NOSIGNAL), 9);

  auto start = std::chrono::steady_clock::now();
  std::string r = Request((*server)->port(), "GET /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(Body(r), "cordon_up 1\n") << r;
  // Served while the other two were still open (not after their timeout
  // closed them): by order of events, not by a clock.
  char probe;
  EXPECT_EQ(::recv(silent, &probe, 1, MSG_DONTWAIT), -1) << "the silent client was closed before the request was served";
  EXPECT_EQ(errno, EAGAIN);
  EXPECT_EQ(::recv(partial, &probe, 1, MSG_DONTWAIT), -1) << "the partial client was closed before the request was served";
  EXPECT_EQ(errno, EAGAIN);

  // Both are closed after the timeout (5 s, a total deadline from the
  // accept): a 408, then EOF.
  EXPECT_EQ(ReadAll(silent).rfind("HTTP/1.1 408 Request Timeout\r\n", 0), 0u);
  EXPECT_EQ(ReadAll(partial).rfind("HTTP/1.1 408 Request Timeout\r\n", 0), 0u);
  auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, std::chrono::milliseconds(4500)) << "closed before the 5 s timeout";
  ::close(silent);
  ::close(partial);
}

TEST(MetricsServer, OversizedRequestIsClosed) {
  auto server = MetricsServer::Listen("127.0.0.1:0", false);
  ASSERT_TRUE(server.ok()) << server.error().ToString();
  ServeLoop loop(**server, [] { return std::string("x\n"); });
  std::string request = "GET /metrics HTTP/1.1\r\nX-Junk: " + std::string(9000, 'a') + "\r\n\r\n";
  int fd = Connect((*server)->port());
  (void)::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  auto start = std::chrono::steady_clock::now();
  char buf[256];
  ssize_t n = ::recv(fd, buf, sizeof buf, 0);
  ASSERT_GT(n, 0);  // a 431, then the close
  EXPECT_EQ(std::string(buf, static_cast<size_t>(n)).rfind("HTTP/1.1 431 ", 0), 0u);
  // Closed for its size, not by the 5 s idle timeout: a generous bound
  // below that timeout (the close itself takes microseconds).
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(4500));
  ::close(fd);
}

TEST(MetricsServer, LargeResponseToASlowReader) {
  auto server = MetricsServer::Listen("127.0.0.1:0", false);
  ASSERT_TRUE(server.ok()) << server.error().ToString();
  std::string body;
  for (int i = 0; body.size() < (16 << 20); ++i) body += "cordon_x{i=\"" + std::to_string(i) + "\"} 1\n";
  ServeLoop loop(**server, [&] { return body; });
  int fd = Connect((*server)->port());
  const std::string req = "GET /metrics HTTP/1.1\r\n\r\n";
  ASSERT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  // 16 MiB cannot fit in the socket buffers of a reader that reads nothing:
  // once accepted, the response stays pending until we read.
  for (int i = 0; i < 500 && loop.connections() != 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(loop.connections(), 1u) << "the response should still be pending (EAGAIN)";
  // Another client is served while the big response is still pending.
  std::string r = Request((*server)->port(), "GET /nothing HTTP/1.1\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 404 ", 0), 0u);
  EXPECT_EQ(Body(ReadAll(fd)), body);
  ::close(fd);
}

TEST(MetricsServer, AtMost16Connections) {
  auto server = MetricsServer::Listen("127.0.0.1:0", false);
  ASSERT_TRUE(server.ok()) << server.error().ToString();
  ServeLoop loop(**server, [] { return std::string("x\n"); });
  std::vector<int> idle;
  for (size_t i = 0; i < MetricsLimits{}.max_connections; ++i) idle.push_back(Connect((*server)->port()));
  for (int i = 0; i < 100 && loop.connections() < MetricsLimits{}.max_connections; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(loop.connections(), MetricsLimits{}.max_connections);
  std::string r = Request((*server)->port(), "GET /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 503 ", 0), 0u) << r;
  ::close(idle.back());
  idle.pop_back();
  for (int i = 0; i < 100 && loop.connections() >= MetricsLimits{}.max_connections; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  r = Request((*server)->port(), "GET /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(Body(r), "x\n") << r;
  for (int fd : idle) ::close(fd);
}

}  // namespace
}  // namespace cordon::agent
