#include "agent/control.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "agent/config.h"
#include "util/clock.h"

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
    // The agent may refuse the connection (busy, over its budget, timed
    // out) with a frame and close it: that frame is read before and while
    // writing, so that the caller gets the agent's reason, not EPIPE.
    // (Only on a connection that has received nothing yet: on a tail,
    // events may be waiting while a later request goes out.)
    struct pollfd pfd = {fd_.get(), static_cast<short>(received_any_ ? POLLOUT : POLLIN | POLLOUT), 0};
    int r = ::poll(&pfd, 1, 30000);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      return r == 0 ? Error{"the agent at " + path_ + " took no request for 30 s", ETIMEDOUT}
                    : SysError("poll the agent connection");
    if (!received_any_ && (pfd.revents & (POLLIN | POLLHUP | POLLERR)))
      return Error{pfd.revents & POLLIN
                       ? "the agent answered before the request was sent"
                       : "the agent at " + path_ + " closed the connection before the request was sent",
                   EAGAIN};
    ssize_t n = ::send(fd_.get(), frame.data() + off, frame.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return SysError("send to the agent at " + path_);
    }
    off += static_cast<size_t>(n);
  }
  return {};
}

Result<std::string> AgentClient::ReadFrame(int timeout_ms, const sigset_t* wait_mask) {
  const int64_t start = MonoNs();
  for (;;) {
    std::string payload;
    int got = TakeBuffered(&payload);
    if (got < 0) return Error{"the agent sent an oversized frame"};
    if (got > 0) return payload;
    int wait = -1;
    if (timeout_ms >= 0) {
      int64_t elapsed = (MonoNs() - start) / 1000000;
      wait = static_cast<int>(std::max<int64_t>(0, timeout_ms - elapsed));
    }
    struct pollfd pfd = {fd_.get(), POLLIN, 0};
    struct timespec ts = {wait / 1000, (wait % 1000) * 1000000L};
    int r = ::ppoll(&pfd, 1, wait < 0 ? nullptr : &ts, wait_mask);
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
    received_any_ = true;
    if (in_off_ > 0) {
      in_.erase(0, in_off_);
      in_off_ = 0;
    }
    in_.append(buf, static_cast<size_t>(n));
  }
}

Result<cordon::v1::Response> AgentClient::Call(const cordon::v1::Request& request, int timeout_ms) {
  Status sent = Send(request);
  if (!sent.ok()) {
    // The agent refused the connection before it took the request: its
    // reason (e.g. "agent busy: ...") is waiting to be read.
    auto refusal = ReadFrame(1000);
    cordon::v1::Response response;
    if (refusal && response.ParseFromString(*refusal) && !response.error().empty()) return response;
    return sent.error();
  }
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

bool TailMatches(const cordon::v1::AuditEvent& event, const TailFilter& filter) {
  if (!filter.sandbox_ids.empty()) {
    bool found = false;
    for (uint64_t id : filter.sandbox_ids) found = found || id == event.sandbox_cgroup_id();
    if (!found) return false;
  }
  if (!filter.sandbox_name.empty() && event.sandbox() != filter.sandbox_name) return false;
  if (filter.until_unix_ns > 0 &&
      static_cast<int64_t>(event.time().seconds()) * 1000000000 + event.time().nanos() > filter.until_unix_ns)
    return false;
  if (event.kind() == "loss" || event.kind() == "suppressed") return true;
  if (!filter.kind_prefix.empty() && event.kind().compare(0, filter.kind_prefix.size(), filter.kind_prefix) != 0)
    return false;
  if (!filter.verdicts.empty() &&
      std::find(filter.verdicts.begin(), filter.verdicts.end(), event.verdict()) == filter.verdicts.end())
    return false;
  if (filter.pid && event.pid() != filter.pid) return false;
  return true;
}

}  // namespace cordon::agent
