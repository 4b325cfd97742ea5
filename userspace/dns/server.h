// One sandbox's DNS listener: UDP and TCP on one address and port (loopback,
// where the kernel side redirects the sandbox's DNS), driving a Resolver.
// Grants are handed to `on_grants` before the reply is sent, so the first
// connect after the answer finds them in force. UDP queries are answered one
// at a time on the server's thread (a sandbox that floods or stalls its own
// resolver delays only its own answers); each TCP client gets a thread, at
// most kMaxTcpClients at once, and is dropped after kTcpIdle without a
// complete message, and after kTcpLifetime in any case.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "dns/resolver.h"
#include "util/fd.h"
#include "util/result.h"

namespace cordon::dns {

constexpr int kMaxTcpClients = 16;
constexpr std::chrono::seconds kTcpIdle{5};
constexpr std::chrono::seconds kTcpLifetime{60};

class Server {
 public:
  // false: the grants are not all in force; the client gets SERVFAIL instead
  // of addresses it could not connect to.
  using OnGrants = std::function<bool(const std::vector<Grant>&)>;
  using OnDecision = std::function<void(const QueryDecision&)>;
  // Whether to serve a query from `peer` (protocol IPPROTO_UDP or
  // IPPROTO_TCP) to `self`, the listener's address: false drops it unanswered
  // (a TCP connection is closed). Runs before anything is read from a TCP
  // client.
  using AcceptPeer = std::function<bool(const sockaddr_storage& peer, const sockaddr_storage& self, int protocol)>;

  // Binds UDP and TCP on `listen` (port 0: the kernel picks one port for
  // both) and starts serving. `resolver` outlives the server. The callbacks
  // run on the server's threads.
  //
  // `udp_mark` (non-zero): the mark the client's kernel side puts on its UDP
  // queries (read with SO_RCVMARK). A UDP query is served only when
  // accept_peer accepts its source and it carries the mark. One accept_peer
  // accepts without the mark is answered with an empty truncated reply (TC
  // set, the question echoed: a resolver library asks again over TCP, whose
  // peer accept_peer checks exactly), since a source address proves nothing
  // by itself: a local process may send from another socket's address and
  // port (IP_PKTINFO). Both are needed: the mark says the datagram left the
  // client's side, the source check that the reply goes back there (the
  // client, too, may choose its source address). A kernel without
  // SO_RCVMARK (before 5.19) reports no mark: every UDP query is answered
  // truncated (reads_marks() false).
  static Result<std::unique_ptr<Server>> Start(const policy::DnsUpstream& listen, const Resolver* resolver,
                                               OnGrants on_grants, OnDecision on_decision,
                                               AcceptPeer accept_peer = nullptr, uint32_t udp_mark = 0);
  ~Server();  // stops and joins every thread
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  uint16_t port() const { return port_; }
  // Queries answered or refused so far (for tests and status).
  uint64_t queries() const { return queries_.load(); }
  // Queries (TCP: connections) that accept_peer dropped.
  uint64_t dropped() const { return dropped_.load(); }
  // UDP queries without udp_mark answered truncated.
  uint64_t truncated() const { return truncated_.load(); }
  // Whether this kernel reports a UDP datagram's mark (SO_RCVMARK).
  bool reads_marks() const { return reads_marks_; }

 private:
  Server() = default;
  void Loop();
  void ServeTcp(UniqueFd conn);
  Answer Answer1(std::span<const uint8_t> message, Transport transport);

  const Resolver* resolver_ = nullptr;
  OnGrants on_grants_;
  OnDecision on_decision_;
  AcceptPeer accept_peer_;
  sockaddr_storage self_{};
  UniqueFd udp_, tcp_, stop_;
  uint16_t port_ = 0;
  uint32_t udp_mark_ = 0;
  bool reads_marks_ = false;
  std::atomic<uint64_t> queries_{0}, dropped_{0}, truncated_{0};
  std::thread loop_;
  std::mutex clients_mu_;
  struct Client {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::list<Client> clients_;
};

}  // namespace cordon::dns
