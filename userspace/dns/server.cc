#include "dns/server.h"

#include <algorithm>

#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <cstring>

namespace cordon::dns {
namespace {

socklen_t ListenAddr(const policy::DnsUpstream& listen, uint16_t port, sockaddr_storage* ss) {
  *ss = {};
  if (listen.ipv4) {
    auto* sin = reinterpret_cast<sockaddr_in*>(ss);
    sin->sin_family = AF_INET;
    sin->sin_port = htons(port);
    std::memcpy(&sin->sin_addr, listen.addr.data() + 12, 4);
    return sizeof *sin;
  }
  auto* sin6 = reinterpret_cast<sockaddr_in6*>(ss);
  sin6->sin6_family = AF_INET6;
  sin6->sin6_port = htons(port);
  std::memcpy(&sin6->sin6_addr, listen.addr.data(), 16);
  return sizeof *sin6;
}

// Waits for `fd` or the stop eventfd; false on stop or timeout.
bool Ready(int fd, short events, int stop_fd, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p[2] = {{fd, events, 0}, {stop_fd, POLLIN, 0}};
    const int n = ::poll(p, 2, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || (p[1].revents & POLLIN)) return false;
    if (p[0].revents) return true;
  }
}

}  // namespace

Result<std::unique_ptr<Server>> Server::Start(const policy::DnsUpstream& listen, const Resolver* resolver,
                                              OnGrants on_grants, OnDecision on_decision, AcceptPeer accept_peer,
                                              uint32_t udp_mark) {
  std::unique_ptr<Server> server(new Server());
  server->udp_mark_ = udp_mark;
  server->accept_peer_ = std::move(accept_peer);
  server->resolver_ = resolver;
  server->on_grants_ = std::move(on_grants);
  server->on_decision_ = std::move(on_decision);
  sockaddr_storage ss;
  socklen_t len = ListenAddr(listen, listen.port, &ss);
  server->udp_ = UniqueFd(::socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!server->udp_.valid()) return SysError("DNS listener: socket");
  if (udp_mark) {
    const int on = 1;
    server->reads_marks_ = ::setsockopt(server->udp_.get(), SOL_SOCKET, SO_RCVMARK, &on, sizeof on) == 0;
  }
  if (::bind(server->udp_.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0)
    return SysError("DNS listener: bind UDP " + listen.ToString());
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof bound;
  ::getsockname(server->udp_.get(), reinterpret_cast<sockaddr*>(&bound), &bound_len);
  server->port_ = ntohs(ss.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port
                                                : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  len = ListenAddr(listen, server->port_, &ss);
  server->self_ = ss;  // the address of both listeners, port included
  server->tcp_ = UniqueFd(::socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!server->tcp_.valid()) return SysError("DNS listener: socket");
  const int one = 1;
  ::setsockopt(server->tcp_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(server->tcp_.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0)
    return SysError("DNS listener: bind TCP port " + std::to_string(server->port_));
  if (::listen(server->tcp_.get(), 64) != 0) return SysError("DNS listener: listen");
  server->stop_ = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!server->stop_.valid()) return SysError("DNS listener: eventfd");
  server->loop_ = std::thread([s = server.get()] { s->Loop(); });
  return server;
}

Server::~Server() {
  const uint64_t one = 1;
  if (stop_.valid()) (void)!::write(stop_.get(), &one, sizeof one);
  if (loop_.joinable()) loop_.join();
  std::lock_guard<std::mutex> lock(clients_mu_);
  for (Client& client : clients_) client.thread.join();
}

Answer Server::Answer1(std::span<const uint8_t> message, Transport transport) {
  Answer answer = resolver_->Handle(message, transport);
  queries_.fetch_add(1);
  if (!answer.grants.empty() && on_grants_ && !on_grants_(answer.grants)) {  // in force before the reply leaves
    answer.reply = Resolver::ServerFailure(message);
    if (answer.decision) {
      answer.decision->allowed = false;
      answer.decision->reason = "its addresses could not be granted (SERVFAIL)";
    }
    answer.grants.clear();
  }
  if (answer.decision) {
    std::vector<std::array<uint8_t, 16>> seen;
    for (const Grant& g : answer.grants)
      if (std::find(seen.begin(), seen.end(), g.addr) == seen.end()) seen.push_back(g.addr);
    answer.decision->addresses = static_cast<uint32_t>(seen.size());
    if (on_decision_) on_decision_(*answer.decision);
  }
  return answer;
}

void Server::Loop() {
  std::vector<uint8_t> buf(65535);
  for (;;) {
    pollfd p[3] = {{udp_.get(), POLLIN, 0}, {tcp_.get(), POLLIN, 0}, {stop_.get(), POLLIN, 0}};
    if (::poll(p, 3, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (p[2].revents & POLLIN) return;
    if (p[0].revents & POLLIN) {
      sockaddr_storage from{};
      iovec iov{buf.data(), buf.size()};
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(uint32_t))];
      msghdr msg{};
      msg.msg_name = &from;
      msg.msg_namelen = sizeof from;
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      const ssize_t n = ::recvmsg(udp_.get(), &msg, 0);
      if (n < 0) continue;
      const socklen_t from_len = msg.msg_namelen;
      bool marked = false;
      for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        uint32_t mark = 0;
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_MARK && c->cmsg_len >= CMSG_LEN(sizeof mark)) {
          std::memcpy(&mark, CMSG_DATA(c), sizeof mark);
          marked = udp_mark_ != 0 && mark == udp_mark_;
        }
      }
      const std::span<const uint8_t> message(buf.data(), static_cast<size_t>(n));
      std::vector<uint8_t> reply;
      if (accept_peer_ && !accept_peer_(from, self_, IPPROTO_UDP)) {
        dropped_.fetch_add(1);
      } else if (udp_mark_ != 0 && !marked) {
        truncated_.fetch_add(1);
        reply = Resolver::Truncated(message);
      } else {
        reply = Answer1(message, Transport::kUdp).reply;
      }
      if (!reply.empty())
        (void)::sendto(udp_.get(), reply.data(), reply.size(), MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from),
                       from_len);
    }
    if (p[1].revents & POLLIN) {
      UniqueFd conn(::accept4(tcp_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
      if (!conn.valid()) continue;
      std::lock_guard<std::mutex> lock(clients_mu_);
      for (auto it = clients_.begin(); it != clients_.end();) {
        if (it->done->load()) {
          it->thread.join();
          it = clients_.erase(it);
        } else {
          ++it;
        }
      }
      if (clients_.size() >= static_cast<size_t>(kMaxTcpClients)) continue;  // closed: too many at once
      auto done = std::make_shared<std::atomic<bool>>(false);
      clients_.push_back(Client{std::thread([this, done, fd = conn.release()] {
                                  ServeTcp(UniqueFd(fd));
                                  done->store(true);
                                }),
                                done});
    }
  }
}

void Server::ServeTcp(UniqueFd conn) {
  if (accept_peer_) {
    sockaddr_storage peer{};
    socklen_t peer_len = sizeof peer;
    if (::getpeername(conn.get(), reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0 ||
        !accept_peer_(peer, self_, IPPROTO_TCP)) {
      dropped_.fetch_add(1);
      return;
    }
  }
  auto read_exactly = [&](uint8_t* out, size_t size, std::chrono::steady_clock::time_point deadline) {
    size_t got = 0;
    while (got < size) {
      if (!Ready(conn.get(), POLLIN, stop_.get(), deadline)) return false;
      const ssize_t n = ::recv(conn.get(), out + got, size - got, 0);
      if (n == 0) return false;
      if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) continue;
        return false;
      }
      got += static_cast<size_t>(n);
    }
    return true;
  };
  std::vector<uint8_t> message;
  // A client is served for kTcpLifetime at most, however it paces its
  // queries (a slot is not held forever by one query every few seconds).
  const auto end_of_life = std::chrono::steady_clock::now() + kTcpLifetime;
  for (;;) {
    const auto deadline = std::min(std::chrono::steady_clock::now() + kTcpIdle, end_of_life);
    uint8_t size_bytes[2];
    if (!read_exactly(size_bytes, 2, deadline)) return;
    message.resize(static_cast<size_t>(size_bytes[0] << 8 | size_bytes[1]));
    if (!read_exactly(message.data(), message.size(), deadline)) return;
    const Answer answer = Answer1(message, Transport::kTcp);
    if (answer.reply.empty()) return;  // dropped: so is the connection
    std::vector<uint8_t> framed{static_cast<uint8_t>(answer.reply.size() >> 8),
                                static_cast<uint8_t>(answer.reply.size())};
    framed.insert(framed.end(), answer.reply.begin(), answer.reply.end());
    size_t sent = 0;
    // The reply's own time (the upstream may have taken most of the read's).
    const auto send_deadline = std::chrono::steady_clock::now() + kTcpIdle;
    while (sent < framed.size()) {
      if (!Ready(conn.get(), POLLOUT, stop_.get(), send_deadline)) return;
      const ssize_t n = ::send(conn.get(), framed.data() + sent, framed.size() - sent, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) continue;
        return;
      }
      sent += static_cast<size_t>(n);
    }
  }
}

}  // namespace cordon::dns
