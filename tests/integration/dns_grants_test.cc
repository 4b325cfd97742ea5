// Egress by name, the kernel side (loader/grants.h, bpf/abi/cordon_dns.h): a
// real process in a real cgroup makes the real syscalls. DNS to port 53 is
// redirected to a resolver the test runs on loopback, and the reply shows the
// address the workload targeted; addresses granted to one sandbox for a
// rule's port and protocol are allowed until they expire, in that sandbox
// only, and not under a replacement policy.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "loader/grants.h"
#include "tests/integration/harness.h"

namespace cordon::test {
namespace {

// What a child reports besides 0 and an errno.
constexpr int kNoReply = 2000;      // nothing came back within 5 s
constexpr int kWrongReply = 2001;   // a reply, but not the resolver's answer to this query
constexpr int kWrongSource = 2002;  // the reply's source (or the peer) is not the address the workload named

std::array<uint8_t, 16> Ip(int family, const char* text) {
  std::array<uint8_t, 16> out{};
  ::inet_pton(family, text, out.data());
  return out;
}

uint64_t BootNs() {
  struct timespec ts = {};
  ::clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

bool SameAddress(const sockaddr_storage& a, const sockaddr_storage& b) {
  if (a.ss_family != b.ss_family) return false;
  if (a.ss_family == AF_INET) {
    const auto &x = reinterpret_cast<const sockaddr_in&>(a), &y = reinterpret_cast<const sockaddr_in&>(b);
    return x.sin_port == y.sin_port && x.sin_addr.s_addr == y.sin_addr.s_addr;
  }
  const auto &x = reinterpret_cast<const sockaddr_in6&>(a), &y = reinterpret_cast<const sockaddr_in6&>(b);
  return x.sin6_port == y.sin6_port && std::memcmp(&x.sin6_addr, &y.sin6_addr, 16) == 0;
}

// The test's resolver stand-in on loopback (outside every sandbox): answers
// each UDP datagram and each TCP connection's first read with "ans:" and
// what it got, and remembers every query.
class EchoResolver {
 public:
  EchoResolver() {
    // One port on 127.0.0.1 and ::1, UDP and TCP.
    for (int attempt = 0; attempt < 50 && tcp6_ < 0; ++attempt) {
      for (int* fd : {&udp4_, &tcp_, &udp6_, &tcp6_})
        if (*fd >= 0) ::close(*fd), *fd = -1;
      udp4_ = Bound(AF_INET, SOCK_DGRAM, "127.0.0.1", 0);
      port_ = PortOf(udp4_);
      tcp_ = Bound(AF_INET, SOCK_STREAM, "127.0.0.1", port_);
      udp6_ = tcp_ < 0 ? -1 : Bound(AF_INET6, SOCK_DGRAM, "::1", port_);
      tcp6_ = udp6_ < 0 ? -1 : Bound(AF_INET6, SOCK_STREAM, "::1", port_);
    }
    EXPECT_EQ(::listen(tcp_, 8), 0);
    EXPECT_EQ(::listen(tcp6_, 8), 0);
    thread_ = std::thread([this] { Serve(); });
  }
  ~EchoResolver() {
    stop_ = true;
    thread_.join();
    ::close(udp4_);
    ::close(udp6_);
    ::close(tcp_);
    ::close(tcp6_);
  }
  uint16_t port4() const { return port_; }
  uint16_t port6() const { return port_; }
  std::vector<std::string> queries() {
    std::lock_guard<std::mutex> lock(mu_);
    return queries_;
  }

 private:
  static int Bound(int family, int type, const char* ip, uint16_t port) {
    int fd = ::socket(family, type | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (family == AF_INET6) ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    sockaddr_storage a = family == AF_INET ? V4(ip, port) : V6(ip, port);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), SockaddrLen(a)) != 0) {
      ::close(fd);
      return -1;
    }
    return fd;
  }
  static uint16_t PortOf(int fd) {
    sockaddr_storage a = {};
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    return ntohs(a.ss_family == AF_INET ? reinterpret_cast<sockaddr_in&>(a).sin_port
                                        : reinterpret_cast<sockaddr_in6&>(a).sin6_port);
  }
  void Record(const std::string& q) {
    std::lock_guard<std::mutex> lock(mu_);
    queries_.push_back(q);
  }
  void Serve() {
    while (!stop_) {
      pollfd fds[4] = {{udp4_, POLLIN, 0}, {udp6_, POLLIN, 0}, {tcp_, POLLIN, 0}, {tcp6_, POLLIN, 0}};
      if (::poll(fds, 4, 50) <= 0) continue;
      for (int i = 0; i < 2; ++i) {
        if (!(fds[i].revents & POLLIN)) continue;
        char buf[512];
        sockaddr_storage from = {};
        socklen_t len = sizeof from;
        ssize_t n = ::recvfrom(fds[i].fd, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &len);
        if (n <= 0) continue;
        std::string q(buf, static_cast<size_t>(n));
        Record(q);
        std::string answer = "ans:" + q;
        ::sendto(fds[i].fd, answer.data(), answer.size(), 0, reinterpret_cast<sockaddr*>(&from), len);
      }
      for (int i = 2; i < 4; ++i) {
        if (!(fds[i].revents & POLLIN)) continue;
        int c = ::accept4(fds[i].fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) continue;
        pollfd p{c, POLLIN, 0};
        char buf[512];
        ssize_t n = ::poll(&p, 1, 5000) == 1 ? ::recv(c, buf, sizeof buf, 0) : -1;
        if (n > 0) {
          std::string q(buf, static_cast<size_t>(n));
          Record(q);
          std::string answer = "ans:" + q;
          (void)::send(c, answer.data(), answer.size(), MSG_NOSIGNAL);
        }
        ::close(c);
      }
    }
  }

  int udp4_ = -1, udp6_ = -1, tcp_ = -1, tcp6_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<std::string> queries_;
};

// Waits up to 5 s for a reply on fd; checks its text and (check_source) that
// it comes from `expect_from`.
int ReplyFrom(int fd, const std::string& query, const sockaddr_storage& expect_from, bool check_source = true) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 5000) != 1) return kNoReply;
  char buf[512];
  sockaddr_storage from = {};
  socklen_t len = sizeof from;
  ssize_t n = ::recvfrom(fd, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &len);
  if (n < 0) return errno;
  if (std::string(buf, static_cast<size_t>(n)) != "ans:" + query) return kWrongReply;
  return !check_source || SameAddress(from, expect_from) ? 0 : kWrongSource;
}

int PeerIs(int fd, const sockaddr_storage& expect) {
  sockaddr_storage peer = {};
  socklen_t len = sizeof peer;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len)) return errno;
  return SameAddress(peer, expect) ? 0 : kWrongSource;
}

// sendto() on an unconnected UDP socket, then the reply.
int DnsSendto(const sockaddr_storage& server, const std::string& query) {
  int fd = ::socket(server.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  int rc = ::sendto(fd, query.data(), query.size(), 0, reinterpret_cast<const sockaddr*>(&server),
                    SockaddrLen(server)) == static_cast<ssize_t>(query.size())
               ? ReplyFrom(fd, query, server)
               : errno;
  ::close(fd);
  return rc;
}

// connect() then send(), over UDP or TCP: the peer, then the reply (over
// UDP also its source; a TCP read has none).
int DnsConnected(int type, const sockaddr_storage& server, const std::string& query) {
  int fd = ::socket(server.ss_family, type | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&server), SockaddrLen(server)) ? errno : 0;
  if (!rc) rc = PeerIs(fd, server);
  if (!rc) rc = ::send(fd, query.data(), query.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(query.size()) ? 0 : errno;
  if (!rc) rc = ReplyFrom(fd, query, server, type == SOCK_DGRAM);
  ::close(fd);
  return rc;
}
int DnsConnectedUdp(const sockaddr_storage& server, const std::string& query) {
  return DnsConnected(SOCK_DGRAM, server, query);
}
int DnsTcp(const sockaddr_storage& server, const std::string& query) {
  return DnsConnected(SOCK_STREAM, server, query);
}

const cordon::v1::AuditEvent* FindNet(const std::vector<cordon::v1::AuditEvent>& events, const std::string& kind,
                                      const std::string& address, uint32_t port) {
  for (const auto& e : events)
    if (e.kind() == kind && e.net().address() == address && e.net().port() == port) return &e;
  return nullptr;
}

class DnsRedirect : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "integration tests need root";
  }
  void Attach(const TestCgroup& cg, const std::string& yaml, const char* verb = "attach") {
    PolicyFile policy(yaml);
    CommandResult r = Cordon({verb, "--cgroup", cg.path(), "--policy", policy.path(), "--allow-degraded"});
    ASSERT_EQ(r.status, 0) << r.err;
  }
  void SetLoopbackResolver(const TestCgroup& cg, const EchoResolver& resolver) {
    Status set = SetResolver(cg.id(), ResolverAddress{Ip(AF_INET, "127.0.0.1"), resolver.port4()},
                             ResolverAddress{Ip(AF_INET6, "::1"), resolver.port6()});
    ASSERT_TRUE(set.ok()) << set.error().ToString();
  }
};

// doctor says whether redirection works on this kernel: its probe sends a
// real UDP query to 192.0.2.1:53 from a scratch sandbox with a resolver on
// loopback, and reads the reply as from 192.0.2.1:53 (the same mechanism
// Port53GoesToTheResolver... shows working here).
TEST_F(DnsRedirect, DoctorSaysRedirectionWorksHere) {
  CommandResult doctor = Cordon({"doctor", "--json"});
  const size_t at = doctor.out.find("\"dns_redirect\":{");
  ASSERT_NE(at, std::string::npos) << doctor.out;
  const std::string probe = doctor.out.substr(at, doctor.out.find('}', at) - at);
  EXPECT_NE(probe.find("\"ok\":true"), std::string::npos) << probe;
  EXPECT_NE(probe.find("reply read as from 192.0.2.1:53"), std::string::npos) << probe;
}

TEST_F(DnsRedirect, Port53GoesToTheResolverAndTheReplyComesFromTheAddressTargeted) {
  TestCgroup cg("dns");
  EchoResolver resolver;
  // Neither 192.0.2.1 nor 2001:db8::1 nor the resolver's ports are allowed.
  Attach(cg, LoopbackPolicy("dns-redirect", 9));
  SetLoopbackResolver(cg, resolver);
  const sockaddr_storage v4 = V4("192.0.2.1", 53), v6 = V6("2001:db8::1", 53), mapped = V6("::ffff:192.0.2.1", 53);

  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return DnsSendto(v4, "q-sendto"); }), 0);
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return DnsConnectedUdp(v4, "q-connected"); }), 0);
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return DnsTcp(v4, "q-tcp"); }), 0);
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return DnsSendto(v6, "q-sendto6"); }), 0);
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return DnsTcp(v6, "q-tcp6"); }), 0);
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return DnsSendto(mapped, "q-mapped"); }), 0);
  auto queries = resolver.queries();
  for (const char* q : {"q-sendto", "q-connected", "q-tcp", "q-sendto6", "q-tcp6", "q-mapped"})
    EXPECT_NE(std::find(queries.begin(), queries.end(), q), queries.end()) << q << " never reached the resolver";
  // Redirection records nothing per query (the resolver reports them).
  auto events = TakeEvents(cg.path());
  EXPECT_EQ(OfKind(events, "net.connect").size() + OfKind(events, "net.sendmsg").size(), 0u);

  // Another port of the same address, denied by the rules: over UDP it goes
  // to the resolver instead, recorded as the denial it is. A datagram that is
  // not a DNS query is dropped on its way (EPERM); a DNS query gets through,
  // over IPv4 and IPv6, and its reply comes from the address targeted. TCP
  // is refused (EPERM) and not diverted.
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return UdpSendto(V4("192.0.2.1", 54)); }), EPERM);
  auto diverted = TakeEvents(cg.path());
  const auto* at54 = FindNet(diverted, "net.sendmsg", "192.0.2.1", 54);
  ASSERT_NE(at54, nullptr);
  EXPECT_EQ(at54->verdict(), "denied");
  EXPECT_NE(at54->reason().find("cordon's DNS resolver"), std::string::npos) << at54->reason();
  auto dns_query = [](char id) {  // header (one question) and the question "q" A IN
    return std::string("\x12") + id +
           std::string("\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x01q\x00\x00\x01\x00\x01", 17);
  };
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return DnsSendto(V4("192.0.2.1", 5353), dns_query('4')); }), 0);
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return DnsSendto(V6("2001:db8::1", 5353), dns_query('6')); }), 0);
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return DnsConnectedUdp(V4("192.0.2.1", 5353), dns_query('c')); }), 0);
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return DnsTcp(V4("192.0.2.1", 5353), "q-tcp-5353"); }), EPERM);
  queries = resolver.queries();
  for (char id : {'4', '6', 'c'})
    EXPECT_NE(std::find(queries.begin(), queries.end(), dns_query(id)), queries.end()) << id;
  EXPECT_EQ(std::find(queries.begin(), queries.end(), "q-tcp-5353"), queries.end());
  diverted = TakeEvents(cg.path());
  EXPECT_NE(FindNet(diverted, "net.sendmsg", "2001:db8::1", 5353), nullptr);
  EXPECT_NE(FindNet(diverted, "net.connect", "192.0.2.1", 5353), nullptr);

  // Negative control: without a resolver, port 53 is judged by the rules: denied, with the event.
  ASSERT_TRUE(SetResolver(cg.id(), std::nullopt, std::nullopt).ok());
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return DnsSendto(v4, "q-denied"); }), EPERM);
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return DnsTcp(v4, "q-denied-tcp"); }), EPERM);
  events = TakeEvents(cg.path());
  EXPECT_NE(FindNet(events, "net.sendmsg", "192.0.2.1", 53), nullptr);
  EXPECT_NE(FindNet(events, "net.connect", "192.0.2.1", 53), nullptr);
  // ... and unconfined, the datagram goes to 192.0.2.1, not to the resolver:
  // a query sent after it through a redirecting sandbox arrives, it never does.
  int unconfined = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  (void)::sendto(unconfined, "q-unconfined", 12, 0, reinterpret_cast<const sockaddr*>(&v4), sizeof(sockaddr_in));
  ::close(unconfined);
  SetLoopbackResolver(cg, resolver);
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return DnsSendto(v4, "q-after"); }), 0);
  queries = resolver.queries();
  EXPECT_EQ(std::find(queries.begin(), queries.end(), "q-unconfined"), queries.end());
  EXPECT_EQ(std::find(queries.begin(), queries.end(), "q-denied"), queries.end());
  EXPECT_NE(std::find(queries.begin(), queries.end(), "q-after"), queries.end());
}

TEST_F(DnsRedirect, TheResolverSettingSurvivesAPolicyReplacement) {
  TestCgroup cg("dns-swap");
  EchoResolver resolver;
  Attach(cg, LoopbackPolicy("dns-a", 9));
  SetLoopbackResolver(cg, resolver);
  Attach(cg, LoopbackPolicy("dns-b", 10), "update");
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return DnsSendto(V4("192.0.2.1", 53), "q-swapped"); }), 0);
}

// A sandbox whose rules allow loopback port 9 only; 127.0.0.2 is granted by name.
class NameGrants : public DnsRedirect {
 protected:
  NameGrant Grant(uint16_t port, bool tcp, bool udp, const char* name = "pypi.example") {
    NameGrant g;
    g.family = AF_INET;
    g.address = Ip(AF_INET, "127.0.0.2");
    g.ports = {{port, port}};
    g.tcp = tcp;
    g.udp = udp;
    g.rule_index = 3;
    g.name = name;
    g.ttl_seconds = 2;  // held kGrantTtlFloorSeconds: 5 s
    g.grace_seconds = 0;
    return g;
  }
};

// A TCP listener on 127.0.0.2 (outside every sandbox).
struct Listener2 {
  Listener2() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_storage a = V4("127.0.0.2", 0);
    socklen_t len = sizeof a;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(sockaddr_in)) == 0 && ::listen(fd, 16) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      port = ntohs(reinterpret_cast<sockaddr_in&>(a).sin_port);
  }
  ~Listener2() { ::close(fd); }
  int fd = -1;
  uint16_t port = 0;
};

TEST_F(NameGrants, AllowTheRulesPortAndProtocolUntilTheyExpire) {
  TestCgroup cg("grant");
  Listener2 granted, other;
  ASSERT_NE(granted.port, 0);
  ASSERT_NE(other.port, 0);
  Attach(cg, LoopbackPolicy("grants", 9));
  const auto addr = V4("127.0.0.2", granted.port);
  // Negative control: unconfined, both ports are reachable.
  EXPECT_EQ(TcpConnect(addr), 0);
  EXPECT_EQ(TcpConnect(V4("127.0.0.2", other.port)), 0);

  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return TcpConnect(addr); }), EPERM);
  const auto* before = FindNet(TakeEvents(cg.path()), "net.connect", "127.0.0.2", granted.port);
  ASSERT_NE(before, nullptr);
  EXPECT_EQ(before->net().name_id(), 0u);

  Status granted_status = GrantAddress(cg.id(), Grant(granted.port, true, false));
  ASSERT_TRUE(granted_status.ok()) << granted_status.error().ToString();
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return TcpConnect(addr); }), 0);
  // IPv4-mapped IPv6 is judged as the IPv4 address it denotes.
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return TcpConnect(V6("::ffff:127.0.0.2", granted.port)); }), 0);
  // Another port, another protocol: denied, reported with the rule and the name.
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return TcpConnect(V4("127.0.0.2", other.port)); }), EPERM);
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return UdpSendto(addr); }), EPERM);
  auto events = TakeEvents(cg.path());
  EXPECT_EQ(FindNet(events, "net.connect", "127.0.0.2", granted.port), nullptr);
  auto name = [&](const cordon::v1::AuditEvent* e) {
    auto n = GrantName(cg.id(), e->net().name_id());
    return n ? *n : std::string("?");
  };
  const auto* port_denied = FindNet(events, "net.connect", "127.0.0.2", other.port);
  ASSERT_NE(port_denied, nullptr);
  EXPECT_EQ(port_denied->net().rule(), 3u);
  EXPECT_EQ(name(port_denied), "pypi.example");
  EXPECT_NE(port_denied->reason().find("rule #3"), std::string::npos) << port_denied->reason();
  const auto* proto_denied = FindNet(events, "net.sendmsg", "127.0.0.2", granted.port);
  ASSERT_NE(proto_denied, nullptr);
  EXPECT_EQ(name(proto_denied), "pypi.example");

  auto list = ListGrants(cg.id());
  ASSERT_TRUE(list.ok()) << list.error().ToString();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].address_text, "127.0.0.2");
  EXPECT_EQ((*list)[0].name, "pypi.example");
  EXPECT_EQ((*list)[0].rule_index, 3u);
  EXPECT_TRUE((*list)[0].tcp);
  EXPECT_FALSE((*list)[0].udp);

  // Expired (the kernel's boot clock past it, not a guess): denied again,
  // still reported with the name that would have allowed it.
  const uint64_t expires = (*list)[0].expires_boot_ns;
  while (BootNs() <= expires) ::usleep(100 * 1000);
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return TcpConnect(addr); }), EPERM);
  const auto* expired = FindNet(TakeEvents(cg.path()), "net.connect", "127.0.0.2", granted.port);
  ASSERT_NE(expired, nullptr);
  EXPECT_EQ(name(expired), "pypi.example");
  auto removed = ExpireGrants(cg.id(), BootNs());
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(*removed, 1u);
  EXPECT_TRUE(ListGrants(cg.id())->empty());
}

TEST_F(NameGrants, AGrantInOneSandboxAllowsNothingInAnother) {
  TestCgroup a("grant-a"), b("grant-b");
  Listener2 server;
  Attach(a, LoopbackPolicy("grants-a", 9));
  Attach(b, LoopbackPolicy("grants-b", 9));
  NameGrant g = Grant(server.port, true, true);
  g.ttl_seconds = 600;
  ASSERT_TRUE(GrantAddress(a.id(), g).ok());
  const auto addr = V4("127.0.0.2", server.port);
  EXPECT_EQ(RunInCgroup(a.path(), [&] { return TcpConnect(addr); }), 0);
  EXPECT_EQ(RunInCgroup(b.path(), [&] { return TcpConnect(addr); }), EPERM);
  const auto* e = FindNet(TakeEvents(b.path()), "net.connect", "127.0.0.2", server.port);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->net().name_id(), 0u);
}

TEST_F(NameGrants, AReplacementPolicyStartsWithNone) {
  TestCgroup cg("grant-swap");
  Listener2 server;
  Attach(cg, LoopbackPolicy("grants-old", 9));
  NameGrant g = Grant(server.port, true, true);
  g.ttl_seconds = 600;
  ASSERT_TRUE(GrantAddress(cg.id(), g).ok());
  const auto addr = V4("127.0.0.2", server.port);
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return TcpConnect(addr); }), 0);
  Attach(cg, LoopbackPolicy("grants-new", 9), "update");
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return TcpConnect(addr); }), EPERM);
  EXPECT_NE(FindNet(TakeEvents(cg.path()), "net.connect", "127.0.0.2", server.port), nullptr);
  EXPECT_TRUE(ListGrants(cg.id())->empty());
}

TEST_F(NameGrants, BoundedAndCheckedNothingSilentlyAllowedOrLost) {
  TestCgroup cg("grant-full");
  Attach(cg, LoopbackPolicy("grants-full", 9));
  NameGrant g = Grant(443, true, false);
  g.ttl_seconds = 600;
  // Bad input: an error naming the field, nothing written.
  NameGrant bad = g;
  bad.rule_index = 0;
  EXPECT_NE(GrantAddress(cg.id(), bad).error().message.find("rule_index"), std::string::npos);
  bad = g;
  bad.name = "evil\n.example";
  EXPECT_NE(GrantAddress(cg.id(), bad).error().message.find("name"), std::string::npos);
  bad = g;
  bad.ports.assign(CORDON_GRANT_PORT_RANGES + 1, {1, 2});
  EXPECT_NE(GrantAddress(cg.id(), bad).error().message.find("port ranges"), std::string::npos);
  EXPECT_TRUE(ListGrants(cg.id())->empty());
  // One address for more rules than it has slots.
  for (uint32_t rule = 1; rule <= CORDON_GRANT_SLOTS; ++rule) {
    g.rule_index = rule;
    ASSERT_TRUE(GrantAddress(cg.id(), g).ok());
  }
  g.rule_index = CORDON_GRANT_SLOTS + 1;
  Status over = GrantAddress(cg.id(), g);
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.error().message.find("already granted"), std::string::npos) << over.error().ToString();
  // A full map: the address beyond it is refused with an error, and absent.
  for (uint32_t i = 1; i < CORDON_GRANTS_MAX; ++i) {
    g.rule_index = 1;
    g.address = Ip(AF_INET, "10.0.0.0");
    g.address[2] = static_cast<uint8_t>(i >> 8);
    g.address[3] = static_cast<uint8_t>(i);
    Status s = GrantAddress(cg.id(), g);
    ASSERT_TRUE(s.ok()) << i << ": " << s.error().ToString();
  }
  g.address = Ip(AF_INET, "10.1.0.1");
  Status full = GrantAddress(cg.id(), g);
  ASSERT_FALSE(full.ok());
  EXPECT_NE(full.error().message.find(std::to_string(CORDON_GRANTS_MAX)), std::string::npos) << full.error().ToString();
  auto list = ListGrants(cg.id());
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->size(), CORDON_GRANTS_MAX - 1 + CORDON_GRANT_SLOTS);
  for (const auto& e : *list) EXPECT_NE(e.address_text, "10.1.0.1");
}

// The name table holds kGrantNamesMax names: answers for ever new names (a
// wildcard rule over a zone with wildcard records) do not fill it for good,
// since names no grant names any more make room; names live grants name are
// kept, and a table full of those refuses the next name with an error.
TEST_F(NameGrants, NamesNoGrantNamesMakeRoomAndLiveOnesAreKept) {
  TestCgroup cg("grant-names");
  Attach(cg, LoopbackPolicy("grants-names", 9));
  NameGrant keep = Grant(443, true, false, "keep.example");
  keep.ttl_seconds = 600;
  keep.rule_index = 2;
  ASSERT_TRUE(GrantAddress(cg.id(), keep).ok());
  // Rule 1 of one address answered for ever new names: each renewal names the
  // latest, the earlier ones are named by nothing.
  NameGrant g = keep;
  g.rule_index = 1;
  for (uint32_t i = 0; i < kGrantNamesMax + 100; ++i) {
    g.name = "n" + std::to_string(i) + ".wild.example";
    Status s = GrantAddress(cg.id(), g);
    ASSERT_TRUE(s.ok()) << i << ": " << s.error().ToString();
  }
  auto list = ListGrants(cg.id());
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].name, "keep.example");
  EXPECT_EQ((*list)[1].name, "n" + std::to_string(kGrantNamesMax + 99) + ".wild.example");
  auto kept = GrantName(cg.id(), (*list)[0].name_id);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(*kept, "keep.example");

  // Control: a table full of names that live grants name (1,024 addresses,
  // 4 rules each) refuses the next name, naming the table, and grants nothing.
  TestCgroup full_cg("grant-names-full");
  Attach(full_cg, LoopbackPolicy("grants-names-full", 9));
  uint32_t names = 0;
  for (uint32_t a = 0; names < kGrantNamesMax; ++a) {
    g.address = Ip(AF_INET, "10.0.0.0");
    g.address[2] = static_cast<uint8_t>(a >> 8);
    g.address[3] = static_cast<uint8_t>(a);
    for (uint32_t rule = 1; rule <= CORDON_GRANT_SLOTS && names < kGrantNamesMax; ++rule, ++names) {
      g.rule_index = rule;
      g.name = "live" + std::to_string(names) + ".example";
      Status s = GrantAddress(full_cg.id(), g);
      ASSERT_TRUE(s.ok()) << names << ": " << s.error().ToString();
    }
  }
  g.address = Ip(AF_INET, "10.9.0.1");
  g.rule_index = 1;
  g.name = "one-more.example";
  Status over = GrantAddress(full_cg.id(), g);
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.error().message.find("name table is full"), std::string::npos) << over.error().ToString();
  auto full_list = ListGrants(full_cg.id());
  ASSERT_TRUE(full_list.ok());
  EXPECT_EQ(full_list->size(), kGrantNamesMax);
  for (const auto& e : *full_list) EXPECT_NE(e.address_text, "10.9.0.1");
}

}  // namespace
}  // namespace cordon::test
