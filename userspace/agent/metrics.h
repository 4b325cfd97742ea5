// Prometheus metrics of the agent: the text exposition format (0.0.4) and a
// minimal, non-blocking HTTP server answering GET /metrics.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "abi/cordon_common.h"
#include "util/fd.h"
#include "util/result.h"
#include "ops/resource_watch.h"

namespace cordon::agent {

struct SandboxMetrics {
  uint64_t id = 0;    // cgroup id of the sandbox root
  std::string name;
  std::string level;  // enforcement level string
  std::array<uint64_t, CORDON_CNT_MAX> counters{};  // enum cordon_counter slots, summed over CPUs
  uint64_t events_delivered = 0;
  uint64_t events_quiet = 0;       // of the delivered: matched the policy's spec.quiet
  uint64_t events_suppressed = 0;  // rate-limited
  // Events lost as the agent learned from loss records. Counts the same
  // events as counters[CORDON_CNT_EVENTS_DROPPED]; the larger of the two is
  // rendered as cordon_ringbuf_lost_events_total.
  uint64_t ringbuf_lost = 0;
  ops::ResourceUsage resources;  // the sandbox cgroup's files, read at the scrape
};

struct AgentMetrics {
  uint64_t events_total = 0;
  double events_per_second = 0;
  uint64_t sink_write_failures = 0;  // summed over sinks
  std::map<std::string, uint64_t> sink_failures_by_sink;
  uint64_t tailer_drops = 0;
  uint64_t tailers_connected = 0;
  uint64_t tailers_disconnected_slow = 0;
  double ringbuf_fill_ratio_max = 0;  // 0..1
  uint64_t rss_bytes = 0;
  double uptime_seconds = 0;
  // Connections the agent closed to protect itself (README, "Control socket
  // protocol" and "Metrics"): no free slot, past a deadline, over the
  // partial-frame budget, replies never read.
  uint64_t control_refused_busy = 0;
  uint64_t control_refused_deadline = 0;
  uint64_t control_refused_budget = 0;
  uint64_t control_refused_unread = 0;
  uint64_t metrics_refused_busy = 0;
  uint64_t metrics_refused_deadline = 0;
  std::vector<SandboxMetrics> sandboxes;
};

// Text exposition format 0.0.4. Every family has HELP and TYPE lines, even
// without samples; per-sandbox families are labelled sandbox="name",
// cgroup_id="id". Counter slots map to:
//   cordon_denials_total{kind, verdict="denied"|"audited"}, kind: net.connect,
//     net.sendmsg, net.socket (inet socket kinds, cgroup hook), net.lsm (socket
//     families and unix sockets, BPF LSM), file, tamper;
//   cordon_net_allowed_total{kind="net.connect"|"net.sendmsg"};
//   cordon_ringbuf_lost_events_total (the events-dropped slot).
std::string RenderPrometheus(const AgentMetrics& metrics);

// Escapes a label value: backslash, double quote and newline.
std::string EscapeLabelValue(const std::string& value);

// A scrape endpoint. Single-threaded and never blocks: the listening socket
// and every connection are nonblocking, each connection has its own buffers.
//
// Driving it: call Service() when fd() is readable (epoll, level-triggered)
// AND on a periodic tick of at most 100 ms. Connection sockets are not
// exposed; the tick is what reads requests that arrive after the accept,
// continues responses larger than the socket buffer and closes stale
// connections, so a scrape takes at most about one tick longer than it must.
//
// Connections: at most limits.max_connections at a time, shared fairly
// between the uids that own the scrapers' sockets (sock_diag on the
// loopback peer): when all are taken, a scraper whose uid holds at least two
// fewer than the uid holding the most takes the slot of that uid's oldest
// connection. The others are refused promptly: "HTTP/1.1 503", then the write side is shut and what the
// client sent is drained for a moment (kLingerMs) before the close, so that it
// reads the 503 instead of a TCP reset. A request must arrive whole, within
// kMaxRequest bytes, within limits.request_timeout of the accept: a total
// deadline, which a client trickling its request byte by byte does not
// extend (it gets a 408 and is closed); the response then gets as long again
// in all, however slowly the client reads. GET (or HEAD) /metrics -> 200 with
// render(); other paths -> 404; other methods -> 405. One request per
// connection (Connection: close).
// A document the listener serves besides /metrics (the built-in OIDC
// issuer's discovery document and JWKS): looked up by path on each GET.
struct HttpDocument {
  std::string content_type, body;
  std::string status = "200 OK";
};
using HttpDocuments = std::function<std::optional<HttpDocument>(const std::string& path)>;

struct MetricsLimits {
  size_t max_connections = 16;                      // metrics.maxConnections
  std::chrono::milliseconds request_timeout{5000};  // metrics.requestTimeoutMs
};

class MetricsServer {
 public:
  static constexpr size_t kMaxRequest = 8192;
  static constexpr int kLingerMs = 500;         // a refused or finished connection is drained this long at most
  static constexpr size_t kMaxLingering = 256;  // beyond that, closed at once

  // listen_address: "127.0.0.1:9464", "[::1]:9464" or "localhost:9464"
  // (numeric addresses otherwise); port 0 = ephemeral. A non-loopback
  // address is refused unless allow_non_loopback.
  static Result<std::unique_ptr<MetricsServer>> Listen(const std::string& listen_address, bool allow_non_loopback,
                                                       MetricsLimits limits = {});

  int fd() const { return listen_fd_.get(); }  // listening socket, nonblocking
  uint16_t port() const { return port_; }
  size_t connections() const { return conns_.size(); }
  uint64_t refused() const { return refused_; }      // 503s: no free slot
  uint64_t timed_out() const { return timed_out_; }  // past a total deadline
  uint64_t evicted() const { return evicted_; }      // 503s to make room for a uid with fewer slots

  // `documents` (may be empty) answers the paths other than /metrics.
  void Service(const std::function<std::string()>& render, const HttpDocuments& documents = {});

 private:
  static constexpr uint32_t kUnknownUid = 0xffffffffu;
  struct Connection {
    UniqueFd fd;
    std::string in;
    std::string out;
    size_t sent = 0;
    bool responding = false;
    std::chrono::steady_clock::time_point deadline;  // of the whole request, then of the whole response
    uint32_t uid = kUnknownUid;                      // who holds the slot (LoopbackPeerUid)
  };
  std::string Busy() const;  // the 503
  struct Lingering {         // written and shut for writing; drained until EOF or the deadline
    UniqueFd fd;
    std::string out;  // what is still to be written first (a refusal that did not fit)
    std::chrono::steady_clock::time_point deadline;
  };
  MetricsServer(UniqueFd fd, uint16_t port, MetricsLimits limits)
      : listen_fd_(std::move(fd)), port_(port), limits_(limits) {}
  // false: done with the connection, close it.
  bool Step(Connection& conn, const std::function<std::string()>& render, const HttpDocuments& documents,
            std::chrono::steady_clock::time_point now);
  // Sends `out` (what fits), shuts the write side and keeps the socket to
  // drain: the client reads the answer instead of a reset.
  void Linger(UniqueFd fd, std::string out, std::chrono::steady_clock::time_point now);
  void ServiceLingering(std::chrono::steady_clock::time_point now);

  UniqueFd listen_fd_;
  uint16_t port_;
  MetricsLimits limits_;
  std::vector<Connection> conns_;
  std::vector<Lingering> lingering_;
  uint64_t refused_ = 0;
  uint64_t timed_out_ = 0;
  uint64_t evicted_ = 0;
};

// The uid owning the other end of a TCP connection from this host (the
// scraper's socket, found with sock_diag); nullopt if it cannot be told.
std::optional<uint32_t> LoopbackPeerUid(int fd);

}  // namespace cordon::agent
