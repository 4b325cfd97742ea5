#include "agent/metrics.h"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <map>

#include "agent/config.h"
#include "sys/sock_diag.h"

namespace cordon::agent {
namespace {

std::string FormatDouble(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : "NaN";
}

class Writer {
 public:
  void Family(const char* name, const char* type, const char* help) {
    out_ += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  }
  void Sample(const char* name, const std::string& labels, const std::string& value) {
    out_ += name;
    if (!labels.empty()) out_ += "{" + labels + "}";
    out_ += " " + value + "\n";
  }
  void Sample(const char* name, const std::string& labels, uint64_t value) { Sample(name, labels, std::to_string(value)); }
  void Sample(const char* name, const std::string& labels, double value) { Sample(name, labels, FormatDouble(value)); }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

std::string Label(const char* name, const std::string& value) {
  return std::string(name) + "=\"" + EscapeLabelValue(value) + "\"";
}

std::string SandboxLabels(const SandboxMetrics& s) {
  return Label("sandbox", s.name) + "," + Label("cgroup_id", std::to_string(s.id));
}

struct Slot {
  int index;
  const char* kind;
  const char* verdict;
};
constexpr Slot kDenialSlots[] = {
    {CORDON_CNT_DENIED_CONNECT, "net.connect", "denied"}, {CORDON_CNT_AUDITED_CONNECT, "net.connect", "audited"},
    {CORDON_CNT_DENIED_SENDMSG, "net.sendmsg", "denied"}, {CORDON_CNT_AUDITED_SENDMSG, "net.sendmsg", "audited"},
    {CORDON_CNT_DENIED_SOCKET, "net.socket", "denied"},   {CORDON_CNT_AUDITED_SOCKET, "net.socket", "audited"},
    {CORDON_CNT_DENIED_LSM_NET, "net.lsm", "denied"},     {CORDON_CNT_AUDITED_LSM_NET, "net.lsm", "audited"},
    {CORDON_CNT_DENIED_FILE, "file", "denied"},           {CORDON_CNT_AUDITED_FILE, "file", "audited"},
    {CORDON_CNT_DENIED_TAMPER, "tamper", "denied"},       {CORDON_CNT_AUDITED_TAMPER, "tamper", "audited"},
};
// What happened (detect mode): by verdict, whatever the kind.
constexpr Slot kHappenedSlots[] = {
    {CORDON_CNT_DETECTED, nullptr, "detected"},
    {CORDON_CNT_KILLED, nullptr, "killed"},
};
constexpr Slot kAllowedSlots[] = {
    {CORDON_CNT_ALLOWED_CONNECT, "net.connect", nullptr},
    {CORDON_CNT_ALLOWED_SENDMSG, "net.sendmsg", nullptr},
};
static_assert(CORDON_CNT_KILLED < CORDON_CNT_MAX);

// ---- listen address ---------------------------------------------------------

// The socket address of a listen address as the configuration takes it
// (ParseListenAddress, config.h: one parser for both).
struct SocketAddress {
  sockaddr_storage addr = {};
  socklen_t len = 0;
  bool loopback = false;
};

Result<SocketAddress> ResolveListenAddress(const std::string& text) {
  ListenAddress parsed;
  std::string error;
  if (!ParseListenAddress(text, &parsed, &error)) return Error{"metrics listen address: " + error};
  SocketAddress out;
  out.loopback = parsed.loopback;
  if (!parsed.v6) {
    auto* sin = reinterpret_cast<sockaddr_in*>(&out.addr);
    (void)::inet_pton(AF_INET, parsed.host.c_str(), &sin->sin_addr);  // numeric: checked by the parser
    sin->sin_family = AF_INET;
    sin->sin_port = htons(parsed.port);
    out.len = sizeof *sin;
  } else {
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&out.addr);
    (void)::inet_pton(AF_INET6, parsed.host.c_str(), &sin6->sin6_addr);
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(parsed.port);
    out.len = sizeof *sin6;
  }
  return out;
}

// ---- HTTP ---------------------------------------------------------------------

std::string HttpResponse(const char* status, const char* content_type, const std::string& body, bool head,
                         const char* extra_header = "") {
  std::string out = std::string("HTTP/1.1 ") + status + "\r\nContent-Type: " + content_type +
                    "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + extra_header +
                    "Connection: close\r\n\r\n";
  if (!head) out += body;
  return out;
}

std::string Respond(const std::string& request, const std::function<std::string()>& render,
                    const HttpDocuments& documents) {
  const char* kText = "text/plain; charset=utf-8";
  std::string line = request.substr(0, request.find_first_of("\r\n"));
  size_t sp1 = line.find(' ');
  size_t sp2 = sp1 == std::string::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string::npos || line.compare(sp2 + 1, 7, "HTTP/1.") != 0)
    return HttpResponse("400 Bad Request", kText, "bad request\n", false);
  std::string method = line.substr(0, sp1);
  std::string path = line.substr(sp1 + 1, sp2 - sp1 - 1);
  path = path.substr(0, path.find('?'));
  bool head = method == "HEAD";
  if (method != "GET" && !head)
    return HttpResponse("405 Method Not Allowed", kText, "method not allowed\n", false, "Allow: GET, HEAD\r\n");
  if (path != "/metrics") {
    if (documents)
      if (auto doc = documents(path)) return HttpResponse(doc->status.c_str(), doc->content_type.c_str(), doc->body, head);
    return HttpResponse("404 Not Found", kText, "not found: metrics are at /metrics, health at /healthz\n", head);
  }
  return HttpResponse("200 OK", "text/plain; version=0.0.4; charset=utf-8", render(), head);
}

}  // namespace

std::optional<uint32_t> LoopbackPeerUid(int fd) {
  sockaddr_storage peer = {}, self = {};
  socklen_t plen = sizeof peer, slen = sizeof self;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &plen) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &slen) != 0)
    return std::nullopt;
  auto found = FindLoopbackPeer(peer, self, IPPROTO_TCP);
  if (!found) return std::nullopt;
  return found->uid;
}

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string RenderPrometheus(const AgentMetrics& m) {
  Writer w;
  w.Family("cordon_events_total", "counter", "Audit events the agent consumed, all sandboxes.");
  w.Sample("cordon_events_total", "", m.events_total);
  w.Family("cordon_events_per_second", "gauge", "Recent rate of audit events, all sandboxes.");
  w.Sample("cordon_events_per_second", "", m.events_per_second);
  w.Family("cordon_sink_write_failures_total", "counter", "Failed audit sink writes, all sinks.");
  w.Sample("cordon_sink_write_failures_total", "", m.sink_write_failures);
  w.Family("cordon_sink_write_failures_by_sink_total", "counter", "Failed audit sink writes, per sink.");
  for (const auto& [sink, n] : m.sink_failures_by_sink)
    w.Sample("cordon_sink_write_failures_by_sink_total", Label("sink", sink), n);
  w.Family("cordon_tailer_drops_total", "counter", "Events not delivered to event-stream tailers that fell behind.");
  w.Sample("cordon_tailer_drops_total", "", m.tailer_drops);
  w.Family("cordon_tailers_connected", "gauge", "Event-stream tailers connected.");
  w.Sample("cordon_tailers_connected", "", m.tailers_connected);
  w.Family("cordon_tailers_disconnected_slow_total", "counter", "Event-stream tailers disconnected for being too slow.");
  w.Sample("cordon_tailers_disconnected_slow_total", "", m.tailers_disconnected_slow);
  w.Family("cordon_ringbuf_fill_ratio_max", "gauge", "Fullest sandbox ring buffer, as a fraction of its size (0..1).");
  w.Sample("cordon_ringbuf_fill_ratio_max", "", m.ringbuf_fill_ratio_max);
  w.Family("cordon_resident_memory_bytes", "gauge", "Resident set size of the agent.");
  w.Sample("cordon_resident_memory_bytes", "", m.rss_bytes);
  w.Family("cordon_uptime_seconds", "gauge", "Seconds since the agent started.");
  w.Sample("cordon_uptime_seconds", "", m.uptime_seconds);
  w.Family("cordon_sandboxes", "gauge", "Sandboxes the agent watches.");
  w.Sample("cordon_sandboxes", "", static_cast<uint64_t>(m.sandboxes.size()));
  w.Family("cordon_control_connections_refused_total", "counter",
           "Control connections refused or closed by the agent: busy (no free slot), deadline (idle or request "
           "timeout), budget (partial-frame memory), unread (replies never read).");
  w.Sample("cordon_control_connections_refused_total", Label("reason", "busy"), m.control_refused_busy);
  w.Sample("cordon_control_connections_refused_total", Label("reason", "deadline"), m.control_refused_deadline);
  w.Sample("cordon_control_connections_refused_total", Label("reason", "budget"), m.control_refused_budget);
  w.Sample("cordon_control_connections_refused_total", Label("reason", "unread"), m.control_refused_unread);
  w.Family("cordon_metrics_connections_refused_total", "counter",
           "Metrics connections answered 503 (busy: no free slot for the uid) or 408 (deadline).");
  w.Sample("cordon_metrics_connections_refused_total", Label("reason", "busy"), m.metrics_refused_busy);
  w.Sample("cordon_metrics_connections_refused_total", Label("reason", "deadline"), m.metrics_refused_deadline);

  w.Family("cordon_sandbox_info", "gauge", "A sandbox and its enforcement level (always 1).");
  for (const SandboxMetrics& s : m.sandboxes)
    w.Sample("cordon_sandbox_info", SandboxLabels(s) + "," + Label("level", s.level), uint64_t{1});
  w.Family("cordon_denials_total", "counter",
           "Operations refused (verdict denied) or that audit mode would have refused (verdict audited), by kind: "
           "net.connect, net.sendmsg, net.socket (inet socket kinds), net.lsm (socket families and unix sockets), "
           "file, tamper.");
  for (const SandboxMetrics& s : m.sandboxes)
    for (const Slot& slot : kDenialSlots)
      w.Sample("cordon_denials_total",
               SandboxLabels(s) + "," + Label("kind", slot.kind) + "," + Label("verdict", slot.verdict),
               s.counters[slot.index]);
  w.Family("cordon_violations_happened_total", "counter",
           "Violations that were not prevented: detected (seen after the fact, detect mode) and killed (detected, "
           "then the task was killed). Never counted in cordon_denials_total.");
  for (const SandboxMetrics& s : m.sandboxes)
    for (const Slot& slot : kHappenedSlots)
      w.Sample("cordon_violations_happened_total", SandboxLabels(s) + "," + Label("verdict", slot.verdict),
               s.counters[slot.index]);
  w.Family("cordon_net_allowed_total", "counter", "Network operations allowed by policy.");
  for (const SandboxMetrics& s : m.sandboxes)
    for (const Slot& slot : kAllowedSlots)
      w.Sample("cordon_net_allowed_total", SandboxLabels(s) + "," + Label("kind", slot.kind), s.counters[slot.index]);
  w.Family("cordon_ringbuf_lost_events_total", "counter", "Events lost because the sandbox's ring buffer was full.");
  for (const SandboxMetrics& s : m.sandboxes)
    w.Sample("cordon_ringbuf_lost_events_total", SandboxLabels(s),
             std::max(s.counters[CORDON_CNT_EVENTS_DROPPED], s.ringbuf_lost));
  w.Family("cordon_events_delivered_total", "counter", "Audit events of the sandbox delivered to the sinks.");
  for (const SandboxMetrics& s : m.sandboxes) w.Sample("cordon_events_delivered_total", SandboxLabels(s), s.events_delivered);
  w.Family("cordon_events_quiet_total", "counter",
           "Audit events of the sandbox delivered marked quiet (expected: the policy's spec.quiet).");
  for (const SandboxMetrics& s : m.sandboxes) w.Sample("cordon_events_quiet_total", SandboxLabels(s), s.events_quiet);
  w.Family("cordon_events_suppressed_total", "counter", "Audit events of the sandbox suppressed by rate limiting.");
  for (const SandboxMetrics& s : m.sandboxes)
    w.Sample("cordon_events_suppressed_total", SandboxLabels(s), s.events_suppressed);
  // Resource use (cgroup v2 files of each sandbox; a family is empty where
  // no sandbox has the file).
  auto resource = [&](const char* name, const char* type, const char* help,
                      std::optional<uint64_t> ops::ResourceUsage::*field, double scale) {
    w.Family(name, type, help);
    for (const SandboxMetrics& s : m.sandboxes)
      if (const auto& v = s.resources.*field) {
        if (scale == 1) w.Sample(name, SandboxLabels(s), *v);
        else w.Sample(name, SandboxLabels(s), static_cast<double>(*v) * scale);
      }
  };
  resource("cordon_sandbox_memory_bytes", "gauge", "Memory the sandbox cgroup uses (memory.current).",
           &ops::ResourceUsage::memory_current, 1);
  resource("cordon_sandbox_memory_peak_bytes", "gauge", "Most memory the sandbox cgroup used (memory.peak).",
           &ops::ResourceUsage::memory_peak, 1);
  resource("cordon_sandbox_memory_limit_bytes", "gauge", "The sandbox's memory.max (absent when unlimited).",
           &ops::ResourceUsage::memory_max, 1);
  resource("cordon_sandbox_pids", "gauge", "Tasks in the sandbox cgroup (pids.current).",
           &ops::ResourceUsage::pids_current, 1);
  resource("cordon_sandbox_pids_limit", "gauge", "The sandbox's pids.max (absent when unlimited).",
           &ops::ResourceUsage::pids_max, 1);
  resource("cordon_sandbox_cpu_seconds_total", "counter", "CPU time the sandbox cgroup used (cpu.stat usage_usec).",
           &ops::ResourceUsage::cpu_usec, 1e-6);
  resource("cordon_sandbox_cpu_throttled_seconds_total", "counter",
           "Time the sandbox cgroup was throttled at its cpu.max (cpu.stat throttled_usec).",
           &ops::ResourceUsage::cpu_throttled_usec, 1e-6);
  resource("cordon_sandbox_egress_bytes_total", "counter",
           "Bytes the sandbox sent (every packet's IP length; spec.resources.egressBytes counts these).",
           &ops::ResourceUsage::egress_bytes, 1);
  resource("cordon_sandbox_egress_dropped_bytes_total", "counter",
           "Bytes of the sandbox's packets dropped over its spec.resources.egressBytes.",
           &ops::ResourceUsage::egress_dropped_bytes, 1);
  resource("cordon_sandbox_egress_limit_bytes", "gauge",
           "The sandbox's spec.resources.egressBytes (absent when unlimited).", &ops::ResourceUsage::egress_limit, 1);
  return w.Take();
}

// ---- MetricsServer ----------------------------------------------------------

Result<std::unique_ptr<MetricsServer>> MetricsServer::Listen(const std::string& listen_address, bool allow_non_loopback,
                                                             MetricsLimits limits) {
  auto addr = ResolveListenAddress(listen_address);
  if (!addr.ok()) return addr.error();
  if (!addr->loopback && !allow_non_loopback)
    return Error{"metrics listen address " + listen_address +
                 " is not a loopback address: refusing to expose metrics beyond this host without "
                 "allow_non_loopback"};
  int family = addr->addr.ss_family;
  UniqueFd fd(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return SysError("metrics listener: socket");
  int one = 1;
  (void)::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (family == AF_INET6) (void)::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr->addr), addr->len) != 0)
    return SysError("bind metrics listener to " + listen_address);
  if (::listen(fd.get(), 64) != 0) return SysError("listen on metrics address " + listen_address);
  sockaddr_storage bound = {};
  socklen_t len = sizeof bound;
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &len) != 0)
    return SysError("metrics listener: getsockname");
  uint16_t port = family == AF_INET ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port
                                    : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port;
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(fd), ntohs(port), limits));
}

void MetricsServer::Service(const std::function<std::string()>& render, const HttpDocuments& documents) {
  auto now = std::chrono::steady_clock::now();
  for (;;) {
    int c = ::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      break;  // EAGAIN; EMFILE and the like: try again on the next call
    }
    UniqueFd fd(c);
    // Unknown owners (the lookup failed) share one account.
    const uint32_t uid = LoopbackPeerUid(fd.get()).value_or(kUnknownUid);
    if (conns_.size() >= limits_.max_connections) {
      // Full. A fair share per uid: when another uid holds at least two
      // more slots than this one, its oldest connection makes room (it gets
      // the 503); otherwise this one is refused.
      std::map<uint32_t, size_t> held;
      for (const Connection& conn : conns_) held[conn.uid]++;
      auto hog =
          std::max_element(held.begin(), held.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
      const size_t mine = held.count(uid) ? held[uid] : 0;
      if (hog == held.end() || hog->first == uid || hog->second < mine + 2) {
        refused_++;
        Linger(std::move(fd), Busy(), now);
        continue;
      }
      auto oldest =
          std::find_if(conns_.begin(), conns_.end(), [&](const Connection& conn) { return conn.uid == hog->first; });
      refused_++;
      evicted_++;
      Linger(std::move(oldest->fd), Busy(), now);
      conns_.erase(oldest);
    }
    conns_.push_back(Connection{std::move(fd), {}, {}, 0, false, now + limits_.request_timeout, uid});
  }
  std::erase_if(conns_, [&](Connection& conn) { return !Step(conn, render, documents, now); });
  ServiceLingering(now);
}

std::string MetricsServer::Busy() const {
  return HttpResponse(
      "503 Service Unavailable", "text/plain; charset=utf-8",
      "too many connections (metrics.maxConnections = " + std::to_string(limits_.max_connections) + ")\n", false,
      "Retry-After: 1\r\n");
}

void MetricsServer::Linger(UniqueFd fd, std::string out, std::chrono::steady_clock::time_point now) {
  if (lingering_.size() >= kMaxLingering) {
    // Too many at once to be polite to: the answer, if it fits, and the close.
    (void)::send(fd.get(), out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    return;
  }
  if (out.empty()) ::shutdown(fd.get(), SHUT_WR);
  lingering_.push_back(Lingering{std::move(fd), std::move(out), now + std::chrono::milliseconds(kLingerMs)});
  ServiceLingering(now);
}

void MetricsServer::ServiceLingering(std::chrono::steady_clock::time_point now) {
  std::erase_if(lingering_, [&](Lingering& l) {
    while (!l.out.empty()) {
      ssize_t n = ::send(l.fd.get(), l.out.data(), l.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        l.out.erase(0, static_cast<size_t>(n));
        if (l.out.empty()) ::shutdown(l.fd.get(), SHUT_WR);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return now >= l.deadline;
      return true;  // the peer is gone
    }
    char buf[4096];
    for (int reads = 0; reads < 16; ++reads) {  // what it sent is discarded; its EOF ends the linger
      ssize_t n = ::recv(l.fd.get(), buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) continue;
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      return true;  // EOF or error
    }
    return now >= l.deadline;
  });
}

bool MetricsServer::Step(Connection& conn, const std::function<std::string()>& render, const HttpDocuments& documents,
                         std::chrono::steady_clock::time_point now) {
  if (!conn.responding) {
    bool eof = false;
    char buf[4096];
    while (conn.in.size() <= kMaxRequest) {
      ssize_t n = ::recv(conn.fd.get(), buf, sizeof buf, 0);
      if (n > 0) {
        conn.in.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      eof = true;  // closed or failed
      break;
    }
    size_t end = conn.in.find("\r\n\r\n");
    if (end == std::string::npos) end = conn.in.find("\n\n");
    if (end == std::string::npos || end > kMaxRequest) {
      if (eof) return false;
      const char* kText = "text/plain; charset=utf-8";
      if (conn.in.size() > kMaxRequest) {
        Linger(std::move(conn.fd),
               HttpResponse("431 Request Header Fields Too Large", kText, "request too large\n", false), now);
        return false;
      }
      if (now >= conn.deadline) {
        // A total deadline from the accept: trickled bytes do not extend it.
        timed_out_++;
        Linger(std::move(conn.fd),
               HttpResponse("408 Request Timeout", kText,
                            "the request did not arrive whole within " +
                                std::to_string(limits_.request_timeout.count()) + " ms (metrics.requestTimeoutMs)\n",
                            false),
               now);
        return false;
      }
      return true;
    }
    conn.out = Respond(conn.in.substr(0, end), render, documents);
    conn.in.clear();
    conn.responding = true;
    conn.deadline = now + limits_.request_timeout;  // for the whole response, however slowly it is read
  }
  while (conn.sent < conn.out.size()) {
    ssize_t n = ::send(conn.fd.get(), conn.out.data() + conn.sent, conn.out.size() - conn.sent, MSG_NOSIGNAL);
    if (n > 0) {
      conn.sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (now < conn.deadline) return true;
      timed_out_++;
      return false;
    }
    return false;
  }
  // Done: shut the write side, drain what else the client sent, then close.
  Linger(std::move(conn.fd), "", now);
  return false;
}

}  // namespace cordon::agent
