#include "agent/control.h"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "agent/config.h"
#include "events/decoder.h"
#include "events/json_line.h"
#include "events/sink.h"

namespace cordon::agent {

std::string EncodeFrame(const google::protobuf::MessageLite& message) {
  std::string body = message.SerializeAsString();
  uint32_t n = static_cast<uint32_t>(body.size());
  std::string out(4, '\0');
  out[0] = static_cast<char>(n >> 24);
  out[1] = static_cast<char>(n >> 16);
  out[2] = static_cast<char>(n >> 8);
  out[3] = static_cast<char>(n);
  return out + body;
}

int TakeFrame(std::string* buffer, std::string* payload) {
  if (buffer->size() < 4) return 0;
  const auto* p = reinterpret_cast<const unsigned char*>(buffer->data());
  uint32_t n = (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
  if (n > kMaxFrameBytes) return -1;
  if (buffer->size() < 4 + static_cast<size_t>(n)) return 0;
  payload->assign(*buffer, 4, n);
  buffer->erase(0, 4 + static_cast<size_t>(n));
  return 1;
}

std::string AgentSocketPath() {
  if (const char* env = std::getenv("CORDON_AGENT_SOCKET"); env && *env) return env;
  AgentConfig config;
  policy::Diagnostics diags;
  if (LoadAgentConfig("", false, &config, &diags)) return config.socket;
  return kDefaultSocketPath;
}

Result<AgentClient> AgentClient::Connect(const std::string& socket_path) {
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof addr.sun_path) return Error{"agent socket path too long: " + socket_path};
  std::memcpy(addr.sun_path, socket_path.data(), socket_path.size());
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return SysError("socket");
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    return SysError("connect to the agent at " + socket_path);
  return AgentClient(std::move(fd), socket_path);
}

bool NoAgent(const Error& error) { return error.err == ENOENT || error.err == ECONNREFUSED; }

bool AgentClient::Buffered() const { return in_.size() > in_off_; }

bool AgentClient::FrameReady() const {
  if (in_.size() - in_off_ < 4) return false;
  const auto* p = reinterpret_cast<const unsigned char*>(in_.data() + in_off_);
  uint32_t n = (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
  return n > kMaxFrameBytes || in_.size() - in_off_ >= 4 + static_cast<size_t>(n);
}

// TakeFrame on in_ from in_off_, without moving the rest of the buffer for
// every frame (a tail reads many frames per read()).
int AgentClient::TakeBuffered(std::string* payload) {
  if (in_.size() - in_off_ < 4) return 0;
  const auto* p = reinterpret_cast<const unsigned char*>(in_.data() + in_off_);
  uint32_t n = (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
  if (n > kMaxFrameBytes) return -1;
  if (in_.size() - in_off_ < 4 + static_cast<size_t>(n)) return 0;
  payload->assign(in_, in_off_ + 4, n);
  in_off_ += 4 + static_cast<size_t>(n);
  if (in_off_ == in_.size()) {
    in_.clear();
    in_off_ = 0;
  }
  return 1;
}

Status AgentClient::Send(const cordon::v1::Request& request) {
  std::string frame = EncodeFrame(request);
  size_t off = 0;
  while (off < frame.size()) {
    ssize_t n = ::send(fd_.get(), frame.data() + off, frame.size() - off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return SysError("send to the agent at " + path_);
    }
    off += static_cast<size_t>(n);
  }
  return {};
}

Result<std::string> AgentClient::ReadFrame(int timeout_ms) {
  struct timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    std::string payload;
    int got = TakeBuffered(&payload);
    if (got < 0) return Error{"the agent sent an oversized frame"};
    if (got > 0) return payload;
    int wait = -1;
    if (timeout_ms >= 0) {
      struct timespec now;
      clock_gettime(CLOCK_MONOTONIC, &now);
      int64_t elapsed = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
      wait = static_cast<int>(std::max<int64_t>(0, timeout_ms - elapsed));
    }
    struct pollfd pfd = {fd_.get(), POLLIN, 0};
    int r = ::poll(&pfd, 1, wait);
    if (r < 0) {
      if (errno == EINTR) return Error{"interrupted", EINTR};
      return SysError("poll the agent connection");
    }
    if (r == 0) {
      if (timeout_ms == 0) return Error{"no frame waiting", EAGAIN};
      return Error{"the agent at " + path_ + " did not answer within " + std::to_string(timeout_ms / 1000) + " s",
                   ETIMEDOUT};
    }
    char buf[65536];
    alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int) * 32)];
    struct iovec iov = {buf, sizeof buf};
    struct msghdr msg = {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n = ::recvmsg(fd_.get(), &msg, MSG_CMSG_CLOEXEC);
    if (n < 0) {
      if (errno == EINTR) return Error{"interrupted", EINTR};
      return SysError("read from the agent at " + path_);
    }
    for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      const int* fds = reinterpret_cast<const int*>(CMSG_DATA(c));
      for (size_t i = 0; i < count; ++i) fds_.emplace_back(fds[i]);
    }
    if (n == 0) return Error{"the agent closed the connection"};
    if (in_off_ > 0) {
      in_.erase(0, in_off_);
      in_off_ = 0;
    }
    in_.append(buf, static_cast<size_t>(n));
  }
}

Result<cordon::v1::Response> AgentClient::Call(const cordon::v1::Request& request, int timeout_ms) {
  CORDON_TRY(Send(request));
  auto frame = ReadFrame(timeout_ms);
  if (!frame) return frame.error();
  cordon::v1::Response response;
  if (!response.ParseFromString(*frame)) return Error{"the agent sent a malformed response"};
  return response;
}

bool ReachAgent(std::optional<AgentClient>* client, bool* failed) {
  *failed = false;
  std::string path = AgentSocketPath();
  auto connected = AgentClient::Connect(path);
  if (connected) {
    client->emplace(std::move(*connected));
    return true;
  }
  if (NoAgent(connected.error())) return false;
  std::fprintf(stderr, "cordon: %s\n", connected.error().ToString().c_str());
  *failed = true;
  return false;
}

bool TailMatches(const cordon::v1::AuditEvent& event, const TailOptions& options) {
  if (!options.sandbox_ids.empty()) {
    bool found = false;
    for (uint64_t id : options.sandbox_ids) found = found || id == event.sandbox_cgroup_id();
    if (!found) return false;
  }
  if (!options.sandbox_name.empty() && event.sandbox() != options.sandbox_name) return false;
  if (!options.kind_prefix.empty() && event.kind() != "loss" && event.kind() != "suppressed" &&
      event.kind().compare(0, options.kind_prefix.size(), options.kind_prefix) != 0)
    return false;
  return true;
}

bool ReplayAuditFile(int fd, uint64_t end_offset, const TailOptions& options) {
  std::string pending, out;
  uint64_t offset = 0;
  char buf[65536];
  size_t unparseable = 0;
  google::protobuf::util::JsonParseOptions parse;
  parse.ignore_unknown_fields = true;
  auto line_done = [&](const std::string& line) {
    if (line.empty()) return;
    cordon::v1::AuditEvent event;
    if (!google::protobuf::util::JsonStringToMessage(line, &event, parse).ok()) {
      unparseable++;
      return;
    }
    int64_t ns = google::protobuf::util::TimeUtil::TimestampToNanoseconds(event.time());
    if (options.since_unix_ns > 0 && ns < options.since_unix_ns) return;
    if (!TailMatches(event, options)) return;
    out += options.json ? line : ToCompactLine(event);
    out += '\n';
  };
  for (;;) {
    size_t want = sizeof buf;
    if (end_offset > 0) {
      if (offset >= end_offset) break;
      want = static_cast<size_t>(std::min<uint64_t>(want, end_offset - offset));
    }
    ssize_t n = ::pread(fd, buf, want, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    offset += static_cast<uint64_t>(n);
    pending.append(buf, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1)
      line_done(pending.substr(start, nl - start));
    pending.erase(0, start);
    if (out.size() > (1u << 16)) {
      if (!WriteAll(STDOUT_FILENO, out).ok()) return false;
      out.clear();
    }
  }
  line_done(pending);  // a last line without newline
  if (unparseable)
    std::fprintf(stderr, "cordon: replay: %zu unparseable audit-file line%s skipped\n", unparseable,
                 unparseable == 1 ? "" : "s");
  return out.empty() || WriteAll(STDOUT_FILENO, out).ok();
}

namespace {
std::atomic<bool> g_stop{false};
void OnStop(int) { g_stop = true; }
}  // namespace

int TailThroughAgent(AgentClient& client, const TailOptions& options) {
  cordon::v1::Request request;
  auto* tail = request.mutable_tail();
  tail->set_follow(options.follow);
  for (uint64_t id : options.sandbox_ids) tail->add_sandbox_ids(id);
  tail->set_sandbox_name(options.sandbox_name);
  tail->set_kind_prefix(options.kind_prefix);
  tail->set_since_unix_ns(options.since_unix_ns);
  auto response = client.Call(request, 30000);
  if (!response) {
    std::fprintf(stderr, "cordon: %s\n", response.error().ToString().c_str());
    return 1;
  }
  if (!response->error().empty()) {
    std::fprintf(stderr, "cordon: agent: %s\n", response->error().c_str());
    return 1;
  }
  for (const auto& note : response->notes()) std::fprintf(stderr, "cordon: note: %s\n", note.c_str());
  // Replay first: the files end where the live stream begins.
  const auto& replay = response->tail().replay();
  for (int i = 0; i < replay.size(); ++i) {
    if (client.received_fds().empty()) {
      std::fprintf(stderr, "cordon: the agent named %s for replay but passed no file\n", replay[i].path().c_str());
      return 1;
    }
    UniqueFd fd = std::move(client.received_fds().front());
    client.received_fds().pop_front();
    if (!ReplayAuditFile(fd.get(), replay[i].end_offset(), options)) return 1;
  }

  struct sigaction sa = {};
  sa.sa_handler = OnStop;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  // Lines are gathered while frames are already here, and written before
  // waiting for more (or at 64 KiB): one write() per bunch, whole lines only.
  std::string out;
  auto flush = [&] {
    bool ok = out.empty() || WriteAll(STDOUT_FILENO, out).ok();
    out.clear();
    return ok;
  };
  cordon::v1::TailFrame tf;
  for (;;) {
    if (g_stop) return flush() ? 0 : 1;
    if ((!client.FrameReady() || out.size() >= (1u << 16)) && !flush()) return 1;
    auto frame = client.ReadFrame(-1);
    if (!frame) {
      if (frame.error().err == EINTR) continue;
      flush();
      std::fprintf(stderr, "cordon: %s\n", frame.error().ToString().c_str());
      return 1;
    }
    if (!tf.ParseFromString(*frame)) {
      flush();
      std::fprintf(stderr, "cordon: the agent sent a malformed frame\n");
      return 1;
    }
    if (tf.has_event()) {
      if (options.json) AppendJsonLine(tf.event(), &out);
      else out += ToCompactLine(tf.event());
      out += '\n';
      continue;
    }
    if (!flush()) return 1;
    if (tf.has_notice()) {
      const auto& n = tf.notice();
      if (n.dropped())
        std::fprintf(stderr,
                     "cordon: %llu events not shown: this tail fell behind (%llu in all; the agent's sinks have "
                     "them)\n",
                     static_cast<unsigned long long>(n.dropped()), static_cast<unsigned long long>(n.dropped_total()));
      if (!n.disconnect_reason().empty()) {
        std::fprintf(stderr, "cordon: the agent ended this tail: %s\n", n.disconnect_reason().c_str());
        return 1;
      }
      if (n.end()) return 0;
    }
  }
}

bool ParseDuration(const std::string& text, int64_t* ns) {
  size_t i = 0;
  uint64_t value = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    if (value > 1000000000ull) return false;
    value = value * 10 + static_cast<uint64_t>(text[i++] - '0');
  }
  if (i == 0) return false;
  std::string unit = text.substr(i);
  int64_t mult;
  if (unit.empty() || unit == "s") mult = 1000000000ll;
  else if (unit == "ms") mult = 1000000ll;
  else if (unit == "m") mult = 60ll * 1000000000ll;
  else if (unit == "h") mult = 3600ll * 1000000000ll;
  else if (unit == "d") mult = 86400ll * 1000000000ll;
  else return false;
  if (value > static_cast<uint64_t>(INT64_MAX / mult)) return false;
  *ns = static_cast<int64_t>(value) * mult;
  return true;
}

namespace {
std::string U(uint64_t v) { return std::to_string(v); }
std::string Uptime(int64_t started_ns) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  int64_t s = (now.tv_sec * 1000000000ll + now.tv_nsec - started_ns) / 1000000000ll;
  if (s < 0) s = 0;
  char buf[64];
  if (s >= 86400) std::snprintf(buf, sizeof buf, "%lldd%02lldh", (long long)(s / 86400), (long long)(s % 86400 / 3600));
  else if (s >= 3600) std::snprintf(buf, sizeof buf, "%lldh%02lldm", (long long)(s / 3600), (long long)(s % 3600 / 60));
  else std::snprintf(buf, sizeof buf, "%lldm%02llds", (long long)(s / 60), (long long)(s % 60));
  return buf;
}
}  // namespace

std::string AgentStatusText(const cordon::v1::StatusReply& s) {
  std::string out = "agent: pid " + std::to_string(s.pid()) + ", cordon " + s.version() + ", up " +
                    Uptime(s.started_unix_ns()) + ", socket " + s.socket() + ", config " +
                    (s.config_file().empty() ? std::string("(defaults)") : s.config_file()) + "\n";
  out += "agent events: " + U(s.delivered()) + " delivered, " + U(s.suppressed()) + " suppressed by the rate limit (";
  if (s.rate_limit_per_second() > 0) {
    char rate[64];
    std::snprintf(rate, sizeof rate, "%.0f/s, burst %llu", s.rate_limit_per_second(),
                  static_cast<unsigned long long>(s.rate_limit_burst()));
    out += std::string(rate) + " per sandbox";
  } else {
    out += "none";
  }
  out += "), " + U(s.lost()) + " lost (ring buffer full), " + U(s.malformed()) + " malformed\n";
  out += "agent sinks:";
  if (s.sinks().empty()) out += " none";
  for (int i = 0; i < s.sinks_size(); ++i) {
    const auto& k = s.sinks(i);
    out += std::string(i ? ";" : "") + " " + k.name() + " " + U(k.written()) + " written, " + U(k.failed()) + " failed";
    if (!k.last_error().empty()) out += " (last error: " + k.last_error() + ")";
  }
  out += "\nagent tailers: " + std::to_string(s.tailers_size()) + " connected, " + U(s.tailer_drops()) +
         " events dropped for slow tailers, " + U(s.tailers_disconnected()) + " disconnected for falling behind\n";
  out += "agent metrics: " + (s.metrics_listen().empty() ? std::string("off") : "http://" + s.metrics_listen() + "/metrics") + "\n";
  if (!s.sandboxes().empty()) {
    char line[512];
    std::snprintf(line, sizeof line, "%-20s %-12s %10s %10s %10s %10s %10s %s\n", "AGENT SANDBOX", "CGROUP-ID",
                  "CONSUMED", "DELIVERED", "SUPPRESSED", "LOST", "BACKLOG", "STATE");
    out += line;
    for (const auto& b : s.sandboxes()) {
      std::string state = !b.problem().empty() ? "problem: " + b.problem() : b.suppressing() ? "rate-limited" : "ok";
      std::snprintf(line, sizeof line, "%-20s %-12llu %10llu %10llu %10llu %10llu %10llu %s\n", b.name().c_str(),
                    static_cast<unsigned long long>(b.id()), static_cast<unsigned long long>(b.consumed()),
                    static_cast<unsigned long long>(b.delivered()), static_cast<unsigned long long>(b.suppressed()),
                    static_cast<unsigned long long>(b.lost()), static_cast<unsigned long long>(b.backlog()),
                    state.c_str());
      out += line;
    }
  }
  return out;
}

std::string AgentStatusJson(const cordon::v1::StatusReply& status) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  (void)google::protobuf::util::MessageToJsonString(status, &json, options);
  return json;
}

}  // namespace cordon::agent
