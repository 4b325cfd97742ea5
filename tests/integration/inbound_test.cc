// Per-sandbox cgroup programs that work without BPF LSM: inbound (bind4/6 and
// cgroup_skb/ingress), setsockopt, device nodes, sysctl. A real process in a
// real cgroup makes the real syscall; each test asserts the errno AND the
// event, and has a negative control (the same probe unconfined succeeds, and
// an allowed one works inside).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "loader/sandbox.h"
#include "policy/compiler.h"
#include "policy/parser.h"
#include "sys/cgroup.h"
#include "tests/integration/harness.h"

namespace cordon::test {
namespace {

class Inbound : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "integration tests need root";
    // The device tests need a block device: the test VMs (tests/vm) have
    // no disk and load modules only on request.
    struct stat st;
    if (::stat("/dev/loop0", &st) != 0 && std::getenv("CORDON_VM"))
      (void)cordon::test::Run({"chroot", "/proc/1/root", "modprobe", "loop"});
  }
  void Attach(const TestCgroup& cg, const std::string& yaml) {
    PolicyFile policy(yaml);
    CommandResult r = Cordon({"attach", "--cgroup", cg.path(), "--policy", policy.path(), "--allow-degraded"});
    ASSERT_EQ(r.status, 0) << r.err;
  }
};

std::string Policy(const std::string& name, const std::string& network_extra, const std::string& mode = "enforce") {
  return "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: " + name + "}\nspec:\n  mode: " + mode +
         "\n  network:\n" + network_extra;
}

// A port free on loopback right now (for both tcp and udp, as far as we can tell).
uint16_t FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_storage a = V4("127.0.0.1", 0);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(sockaddr_in));
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port);
}

socklen_t Len(const sockaddr_storage& a) {
  return a.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
}

// bind() only; 0 or errno.
int Bind(const sockaddr_storage& addr, int type) {
  int fd = ::socket(addr.ss_family, type, 0);
  if (fd < 0) return 1000 + errno;
  int r = ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), Len(addr)) == 0 ? 0 : errno;
  ::close(fd);
  return r;
}

// Connects from the calling process; true if the handshake completed within timeout_ms.
bool ConnectsWithin(const sockaddr_storage& addr, int timeout_ms) {
  int fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (fd < 0) return false;
  bool ok = false;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), Len(addr)) == 0) {
    ok = true;
  } else if (errno == EINPROGRESS) {
    pollfd p = {fd, POLLOUT, 0};
    if (::poll(&p, 1, timeout_ms) == 1) {
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      ok = err == 0;
    }
  }
  ::close(fd);
  return ok;
}

// Accepts on `fd` for up to timeout_ms: 1 if a connection arrived, else 0.
int AcceptWithin(int fd, int timeout_ms) {
  pollfd p = {fd, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) != 1) return 0;
  int c = ::accept(fd, nullptr, nullptr);
  if (c < 0) return 0;
  ::close(c);
  return 1;
}

// A listener run inside the cgroup: `setup` makes a listening socket (or
// returns -errno); its port goes to the test over a pipe, then it accepts for
// accept_ms. Returns what the child saw (1 accepted, 0 not, or the setup's
// negative errno) and the port.
struct ListenOutcome {
  int child = -1;
  uint16_t port = 0;
  bool connected = false;  // the test's connect from outside completed
};
ListenOutcome ListenInside(const std::string& cgroup_path, const std::function<int()>& setup, int connect_ms,
                           int accept_ms) {
  int pipefd[2];
  if (::pipe(pipefd)) return {};
  std::future<int> child = std::async(std::launch::async, [&] {
    return RunInCgroup(cgroup_path, [&] {
      int fd = setup();
      uint16_t port = 0;
      if (fd >= 0) {
        sockaddr_storage a{};
        socklen_t len = sizeof a;
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
        port = ntohs(a.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&a)->sin_port
                                            : reinterpret_cast<sockaddr_in6*>(&a)->sin6_port);
      }
      (void)!::write(pipefd[1], &port, sizeof port);
      if (fd < 0) return fd;
      int r = AcceptWithin(fd, accept_ms);
      ::close(fd);
      return r;
    });
  });
  ListenOutcome out;
  if (::read(pipefd[0], &out.port, sizeof out.port) != sizeof out.port) out.port = 0;
  if (out.port) out.connected = ConnectsWithin(V4("127.0.0.1", out.port), connect_ms);
  out.child = child.get();
  ::close(pipefd[0]);
  ::close(pipefd[1]);
  return out;
}

// socket() + optional bind + listen(); returns the fd or -errno.
int MakeListener(const char* ip, uint16_t port, bool bind_first) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -errno;
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind_first) {
    sockaddr_storage a = V4(ip, port);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(sockaddr_in))) {
      int e = errno;
      ::close(fd);
      return -e;
    }
  }
  if (::listen(fd, 8)) {
    int e = errno;
    ::close(fd);
    return -e;
  }
  return fd;
}

const cordon::v1::AuditEvent* FindBind(const std::vector<cordon::v1::AuditEvent>& events, const std::string& address,
                                       uint32_t port) {
  for (const auto& e : events)
    if (e.kind() == "net.bind" && e.net().address() == address && e.net().port() == port) return &e;
  return nullptr;
}

TEST_F(Inbound, BindToUnlistedPortDeniedWithEventListedPortAccepts) {
  TestCgroup cg("bind");
  const uint16_t allowed = FreePort(), denied = FreePort();
  ASSERT_NE(allowed, denied);
  Attach(cg, Policy("bind-test", "    listen:\n      - address: 127.0.0.1\n        ports: [" +
                                     std::to_string(allowed) + "]\n        protocols: [tcp]\n"));
  // Negative control: unconfined, the same binds succeed.
  EXPECT_EQ(Bind(V4("0.0.0.0", denied), SOCK_STREAM), 0);
  EXPECT_EQ(Bind(V4("127.0.0.1", denied), SOCK_DGRAM), 0);
  EXPECT_EQ(Bind(V6("::ffff:127.0.0.1", denied), SOCK_STREAM), 0);

  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return Bind(V4("0.0.0.0", denied), SOCK_STREAM); }), EPERM);
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return Bind(V4("127.0.0.1", denied), SOCK_DGRAM); }), EPERM);
  // The rule names 127.0.0.1: the wildcard is not inside it; udp is not listed.
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return Bind(V4("0.0.0.0", allowed), SOCK_STREAM); }), EPERM);
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return Bind(V4("127.0.0.1", allowed), SOCK_DGRAM); }), EPERM);
  // IPv4-mapped IPv6 is judged as IPv4.
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return Bind(V6("::ffff:127.0.0.1", denied), SOCK_STREAM); }), EPERM);
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return Bind(V6("::ffff:127.0.0.1", allowed), SOCK_STREAM); }), 0);
  // Port 0 (the kernel chooses) stays allowed: UDP clients need it.
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return Bind(V4("0.0.0.0", 0), SOCK_DGRAM); }), 0);

  auto events = TakeEvents(cg.path());
  const auto* e = FindBind(events, "0.0.0.0", denied);
  ASSERT_NE(e, nullptr) << "no net.bind event for 0.0.0.0:" << denied;
  EXPECT_EQ(e->verdict(), "denied");
  EXPECT_EQ(e->net().protocol(), "tcp");
  EXPECT_EQ(e->net().family(), "inet");
  EXPECT_EQ(e->enforcement(), "kernel-cgroup");
  EXPECT_EQ(e->policy(), "bind-test");
  EXPECT_GT(e->pid(), 0u);
  const auto* udp = FindBind(events, "127.0.0.1", denied);
  ASSERT_NE(udp, nullptr);
  bool udp_seen = false, mapped_seen = false;
  for (const auto& ev : events) {
    if (ev.kind() != "net.bind") continue;
    udp_seen |= ev.net().port() == denied && ev.net().protocol() == "udp";
    mapped_seen |= ev.net().port() == denied && ev.net().family() == "inet6" && ev.net().address() == "127.0.0.1";
  }
  EXPECT_TRUE(udp_seen);
  EXPECT_TRUE(mapped_seen) << "a mapped bind is reported as its IPv4 address";
  EXPECT_NE(FindBind(events, "0.0.0.0", allowed), nullptr);
  EXPECT_EQ(FindBind(events, "0.0.0.0", 0), nullptr);

  // The listed port works end to end: a connection from outside is accepted.
  ListenOutcome ok = ListenInside(cg.path(), [&] { return MakeListener("127.0.0.1", allowed, true); }, 2000, 3000);
  EXPECT_EQ(ok.port, allowed);
  EXPECT_TRUE(ok.connected);
  EXPECT_EQ(ok.child, 1) << "the sandboxed listener accepted the connection";
}

TEST_F(Inbound, ListenerWithKernelChosenPortUnreachableFromOutside) {
  TestCgroup cg("ephemeral");
  const uint16_t allowed = FreePort();
  Attach(cg, Policy("ephemeral-test", "    listen:\n      - address: 127.0.0.1\n        ports: [" +
                                          std::to_string(allowed) + "]\n"));
  // Negative control: the same listener outside the sandbox accepts.
  int outside = MakeListener(nullptr, 0, false);
  ASSERT_GE(outside, 0);
  {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    ::getsockname(outside, reinterpret_cast<sockaddr*>(&a), &len);
    EXPECT_TRUE(ConnectsWithin(V4("127.0.0.1", ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port)), 1000));
    EXPECT_EQ(AcceptWithin(outside, 1000), 1);
    ::close(outside);
  }

  // listen() on an unbound socket: the kernel picks the port without asking
  // the bind hook. The SYN is dropped: the connect times out (1.5 s bound),
  // nothing is accepted.
  auto t0 = std::chrono::steady_clock::now();
  ListenOutcome auto_bound = ListenInside(cg.path(), [] { return MakeListener(nullptr, 0, false); }, 1500, 2000);
  ASSERT_NE(auto_bound.port, 0);
  EXPECT_FALSE(auto_bound.connected);
  EXPECT_EQ(auto_bound.child, 0) << "nothing accepted";
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(1400)) << "a timeout, not a refusal";
  // bind(port 0) then listen(): the same.
  ListenOutcome zero = ListenInside(cg.path(), [] { return MakeListener("0.0.0.0", 0, true); }, 1500, 2000);
  ASSERT_NE(zero.port, 0);
  EXPECT_FALSE(zero.connected);
  EXPECT_EQ(zero.child, 0);

  // A dual-stack IPv6 listener on :: (auto-bound) reached over IPv4: the same.
  ListenOutcome v6 = ListenInside(
      cg.path(),
      [] {
        int fd = ::socket(AF_INET6, SOCK_STREAM, 0);
        if (fd < 0) return -errno;
        int zero = 0;
        ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
        if (::listen(fd, 8)) {
          int e = errno;
          ::close(fd);
          return -e;
        }
        return fd;
      },
      1500, 2000);
  ASSERT_NE(v6.port, 0);
  EXPECT_FALSE(v6.connected);
  EXPECT_EQ(v6.child, 0);

  auto events = TakeEvents(cg.path());
  const auto* e6 = FindBind(events, "::", v6.port);
  ASSERT_NE(e6, nullptr) << "no net.bind event for the IPv6 listener";
  EXPECT_EQ(e6->net().family(), "inet6");
  const auto* e = FindBind(events, "0.0.0.0", auto_bound.port);
  ASSERT_NE(e, nullptr) << "no net.bind event for the auto-bound listener";
  EXPECT_EQ(e->verdict(), "denied");
  EXPECT_EQ(e->net().protocol(), "tcp");
  EXPECT_EQ(e->sandbox_cgroup_id(), cg.id());
  EXPECT_NE(FindBind(events, "0.0.0.0", zero.port), nullptr);
  // One event per port per second, however many SYNs (the client retransmitted).
  int reports = 0;
  for (const auto& ev : events) reports += ev.kind() == "net.bind" && ev.net().port() == auto_bound.port;
  EXPECT_LE(reports, 2);

  // Listing port "0" allows listeners on kernel-chosen ports (for this address).
  Attach(cg, Policy("ephemeral-ok", "    listen:\n      - address: 0.0.0.0\n        ports: [\"0\"]\n"));
  ListenOutcome ok = ListenInside(cg.path(), [] { return MakeListener(nullptr, 0, false); }, 2000, 3000);
  EXPECT_TRUE(ok.connected);
  EXPECT_EQ(ok.child, 1);
  // ... but not bind() to a port of its choosing.
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return Bind(V4("0.0.0.0", allowed), SOCK_STREAM); }), EPERM);
}

TEST_F(Inbound, AuditModeAllowsBindAndListenAndReports) {
  TestCgroup cg("audit");
  const uint16_t port = FreePort();
  Attach(cg, Policy("inbound-audit", "    egress: []\n", "audit"));
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return Bind(V4("0.0.0.0", port), SOCK_STREAM); }), 0);
  ListenOutcome l = ListenInside(cg.path(), [] { return MakeListener(nullptr, 0, false); }, 2000, 3000);
  EXPECT_TRUE(l.connected);
  EXPECT_EQ(l.child, 1);
  auto events = TakeEvents(cg.path());
  const auto* b = FindBind(events, "0.0.0.0", port);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->verdict(), "audited");
  const auto* s = FindBind(events, "0.0.0.0", l.port);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->verdict(), "audited");
}

int SetOpt(int family, int type, int level, int name, const void* value, socklen_t len) {
  int fd = ::socket(family, type, 0);
  if (fd < 0) return 1000 + errno;
  int r = ::setsockopt(fd, level, name, value, len) == 0 ? 0 : errno;
  ::close(fd);
  return r;
}
int SetInt(int family, int type, int level, int name, int value) {
  return SetOpt(family, type, level, name, &value, sizeof value);
}

TEST_F(Inbound, HostTrafficSocketOptionsRefusedOrdinaryOnesWork) {
  TestCgroup cg("sockopt");
  Attach(cg, Policy("sockopt-test", "    egress: []\n"));
  struct Probe {
    int family, type, level, name, value;
  };
  const Probe refused[] = {
      {AF_INET, SOCK_STREAM, SOL_SOCKET, SO_REUSEPORT, 1}, {AF_INET, SOCK_STREAM, SOL_SOCKET, SO_MARK, 7},
      {AF_INET, SOCK_STREAM, SOL_IP, IP_TRANSPARENT, 1},   {AF_INET6, SOCK_STREAM, SOL_IPV6, IPV6_TRANSPARENT, 1},
      {AF_INET, SOCK_DGRAM, SOL_IP, IP_FREEBIND, 1},       {AF_INET, SOCK_STREAM, SOL_SOCKET, SO_PRIORITY, 7},
      {AF_INET, SOCK_STREAM, SOL_SOCKET, SO_RCVBUFFORCE, 1 << 20},
      {AF_INET, SOCK_STREAM, SOL_SOCKET, SO_BINDTOIFINDEX, 1},
  };
  const Probe allowed[] = {
      {AF_INET, SOCK_STREAM, SOL_SOCKET, SO_REUSEADDR, 1}, {AF_INET, SOCK_STREAM, SOL_SOCKET, SO_KEEPALIVE, 1},
      {AF_INET, SOCK_STREAM, IPPROTO_TCP, TCP_NODELAY, 1}, {AF_INET, SOCK_STREAM, SOL_SOCKET, SO_PRIORITY, 6},
      {AF_INET, SOCK_STREAM, SOL_SOCKET, SO_REUSEPORT, 0},
  };
  for (const Probe& p : refused) {
    // Negative control: root outside the sandbox may.
    EXPECT_EQ(SetInt(p.family, p.type, p.level, p.name, p.value), 0) << p.level << "/" << p.name;
    EXPECT_EQ(RunInCgroup(cg.path(), [&] { return SetInt(p.family, p.type, p.level, p.name, p.value); }), EPERM)
        << p.level << "/" << p.name;
  }
  EXPECT_EQ(SetOpt(AF_INET, SOCK_STREAM, SOL_SOCKET, SO_BINDTODEVICE, "lo", 3), 0);
  EXPECT_EQ(RunInCgroup(cg.path(), [] { return SetOpt(AF_INET, SOCK_STREAM, SOL_SOCKET, SO_BINDTODEVICE, "lo", 3); }),
            EPERM);
  for (const Probe& p : allowed)
    EXPECT_EQ(RunInCgroup(cg.path(), [&] { return SetInt(p.family, p.type, p.level, p.name, p.value); }), 0)
        << p.level << "/" << p.name;

  auto events = TakeEvents(cg.path());
  auto count = [&](int level, int name) {
    int n = 0;
    for (const auto& e : events)
      if (e.kind() == "net.sockopt" && e.target().arg() == static_cast<uint32_t>(level) &&
          e.target().arg2() == static_cast<uint32_t>(name)) {
        EXPECT_EQ(e.verdict(), "denied");
        EXPECT_EQ(e.enforcement(), "kernel-cgroup");
        ++n;
      }
    return n;
  };
  for (const Probe& p : refused) EXPECT_EQ(count(p.level, p.name), p.name == SO_PRIORITY ? 1 : 1) << p.name;
  EXPECT_EQ(count(SOL_SOCKET, SO_BINDTODEVICE), 1);
  EXPECT_EQ(count(SOL_SOCKET, SO_REUSEADDR), 0);
  EXPECT_EQ(count(IPPROTO_TCP, TCP_NODELAY), 0);
}

// A source route sends a packet to its first hop, not to the destination
// the egress rules judged: the socket options that set one (IP_OPTIONS,
// IPV6_RTHDR and the other IPv6 option headers) are refused with an event,
// and a datagram given a loose source route per message (an IP_RETOPTS
// control message, which no hook sees) is dropped by the egress program, its
// send failing with EPERM, also to a destination the rules allow. Controls:
// the same datagram without the route is sent from the sandbox, and root
// outside it sets the options and sends the routed datagram.
TEST_F(Inbound, SourceRoutesAreRefusedAsOptionsAndDroppedPerMessage) {
  TestCgroup cg("srcroute");
  const uint16_t port = FreePort();
  Attach(cg, Policy("srcroute-test", "    egress:\n      - cidr: 127.0.0.1/32\n        ports: [" +
                                         std::to_string(port) + "]\n        protocols: [udp]\n"));
  // LSRR via 127.0.0.2 (type 0x83, length 7, pointer 4, the hop), then a NOP.
  const uint8_t lsrr[8] = {0x83, 7, 4, 127, 0, 0, 2, 1};
  // An IPv6 segment routing header (type 4) with one segment, ::1.
  uint8_t srh[24] = {IPPROTO_UDP, 2, 4, 0, 0, 0, 0, 0};
  srh[23] = 1;
  EXPECT_EQ(SetOpt(AF_INET, SOCK_DGRAM, SOL_IP, IP_OPTIONS, lsrr, sizeof lsrr), 0);
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return SetOpt(AF_INET, SOCK_DGRAM, SOL_IP, IP_OPTIONS, lsrr, sizeof lsrr); }),
            EPERM);
  EXPECT_EQ(SetOpt(AF_INET6, SOCK_DGRAM, SOL_IPV6, IPV6_RTHDR, srh, sizeof srh), 0);
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return SetOpt(AF_INET6, SOCK_DGRAM, SOL_IPV6, IPV6_RTHDR, srh, sizeof srh); }),
            EPERM);

  // Options that route nothing (no-ops, as a host's CIPSO label would be
  // another kind): they pass.
  const uint8_t nops[8] = {1, 1, 1, 1, 1, 1, 1, 0};
  auto send_routed = [&](const uint8_t* options) {  // 8 bytes of IP options, or none
    int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 1000 + errno;
    sockaddr_storage to = V4("127.0.0.1", port);
    char payload[] = "routed";
    iovec iov{payload, sizeof payload};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof lsrr)] = {};
    msghdr msg{};
    msg.msg_name = &to;
    msg.msg_namelen = sizeof(sockaddr_in);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (options) {
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_IP;
      c->cmsg_type = IP_RETOPTS;
      c->cmsg_len = CMSG_LEN(sizeof lsrr);
      std::memcpy(CMSG_DATA(c), options, sizeof lsrr);
    }
    int r = ::sendmsg(fd, &msg, 0) >= 0 ? 0 : errno;
    ::close(fd);
    return r;
  };
  EXPECT_EQ(send_routed(lsrr), 0) << "root outside the sandbox sends the routed datagram";
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return send_routed(nullptr); }), 0) << "the destination is allowed";
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return send_routed(lsrr); }), EPERM);
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return send_routed(nops); }), 0) << "options that route nothing";

  auto events = TakeEvents(cg.path());
  auto refused = [&](int level, int name) {
    for (const auto& e : events)
      if (e.kind() == "net.sockopt" && e.target().arg() == static_cast<uint32_t>(level) &&
          e.target().arg2() == static_cast<uint32_t>(name) && e.verdict() == "denied")
        return true;
    return false;
  };
  EXPECT_TRUE(refused(SOL_IP, IP_OPTIONS));
  EXPECT_TRUE(refused(SOL_IPV6, IPV6_RTHDR));
}

int OpenDev(const char* path, int flags) {
  int fd = ::open(path, flags | O_CLOEXEC);
  if (fd < 0) return errno;
  ::close(fd);
  return 0;
}

TEST_F(Inbound, DeviceNodesOutsideTheSafeSetRefused) {
  TestCgroup cg("dev");
  // Opened before the policy applies: keeps working (the kernel asks at open()).
  int early_fd = -1;
  WaitingChild early(
      cg.path(),
      [&] {
        char buf[512];
        ssize_t n = ::read(early_fd, buf, sizeof buf);
        int fresh = OpenDev("/dev/kmsg", O_RDONLY | O_NONBLOCK);
        return n > 0 && fresh == EPERM ? 0 : 100 + fresh;
      },
      [&] { early_fd = ::open("/dev/kmsg", O_RDONLY | O_NONBLOCK); });
  Attach(cg, Policy("dev-test", "    egress: []\n"));
  // Negative control: unconfined, root opens them.
  EXPECT_EQ(OpenDev("/dev/kmsg", O_RDONLY | O_NONBLOCK), 0);
  EXPECT_EQ(OpenDev("/dev/loop0", O_RDONLY), 0);

  EXPECT_EQ(RunInCgroup(cg.path(), [] { return OpenDev("/dev/kmsg", O_RDONLY | O_NONBLOCK); }), EPERM);
  EXPECT_EQ(RunInCgroup(cg.path(), [] { return OpenDev("/dev/loop0", O_RDONLY); }), EPERM);
  const std::string node = "/tmp/cordon-test-kmsg-" + std::to_string(::getpid());
  ::unlink(node.c_str());
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return ::mknod(node.c_str(), S_IFCHR | 0600, makedev(1, 11)) ? errno : 0; }),
            EPERM);
  ::unlink(node.c_str());
  for (const char* ok : {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/ptmx"})
    EXPECT_EQ(RunInCgroup(cg.path(), [&] { return OpenDev(ok, O_RDWR); }), 0) << ok;
  EXPECT_EQ(early.Go(), 0) << "an fd opened before attach keeps working; a new open is refused";

  auto events = TakeEvents(cg.path());
  int kmsg = 0, mem = 0, mknod_seen = 0;
  for (const auto& e : events) {
    // With BPF LSM, CAP_MKNOD (27) is refused before the device program runs.
    if (e.kind() == "tamper.capability" && e.target().arg() == 27) ++mknod_seen;
    if (e.kind() != "tamper.device") continue;
    EXPECT_EQ(e.verdict(), "denied");
    EXPECT_EQ(e.enforcement(), "kernel-cgroup");
    if (e.target().arg() == (1u << 20 | 11)) {
      if (e.target().arg2() & 1) ++mknod_seen;
      else ++kmsg;
    }
    if (e.target().arg() == (7u << 20 | 0)) ++mem;
  }
  EXPECT_EQ(kmsg, 2) << "the probe and the early child's fresh open";
  EXPECT_EQ(mem, 1);
  EXPECT_EQ(mknod_seen, 1);
  for (const auto& e : events) EXPECT_NE(e.target().arg() >> 20, 5u) << "no event for the safe set";
}

// AttachOptions::allowed_devices (what `cordon run` uses for its pty) opens a
// device beyond the safe set for one sandbox.
TEST_F(Inbound, LoaderAllowedDevicesExtendTheSafeSet) {
  TestCgroup cg("dev-allowed");
  auto ref = ResolveCgroup(cg.path());
  ASSERT_TRUE(ref) << ref.error().ToString();
  policy::CompiledPolicy compiled = policy::DefaultPolicy();
  compiled.has_files = false;
  compiled.file_rules.clear();
  AttachOptions options;
  // /dev/vcs (c 7:0): opening it needs nothing but the device rule (unlike
  // /dev/kmsg, which BPF LSM also refuses without the syslog capability).
  options.allowed_devices.push_back({'c', 7, 0, DeviceRule::kRead});
  auto attached = AttachSandbox(*ref, compiled, options);
  ASSERT_TRUE(attached) << attached.error().ToString();
  ASSERT_EQ(OpenDev("/dev/vcs", O_RDONLY), 0) << "negative control: root opens it unconfined";
  EXPECT_EQ(RunInCgroup(cg.path(), [] { return OpenDev("/dev/vcs", O_RDONLY); }), 0);
  EXPECT_EQ(RunInCgroup(cg.path(), [] { return OpenDev("/dev/vcs", O_WRONLY); }), EPERM) << "read only";
  EXPECT_EQ(RunInCgroup(cg.path(), [] { return OpenDev("/dev/loop0", O_RDONLY); }), EPERM);
  auto events = TakeEvents(cg.path());
  bool write_refused = false;
  for (const auto& e : events)
    write_refused |= e.kind() == "tamper.device" && e.target().arg() == (7u << 20 | 0) && (e.target().arg2() & 4);
  EXPECT_TRUE(write_refused);
}

// spec.devices: the policy's own additions to the safe set.
TEST_F(Inbound, PolicyDevicesExtendTheSafeSet) {
  TestCgroup cg("dev-policy");
  PolicyFile policy("apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: dev-policy}\nspec:\n"
                    "  devices: [\"c 7:0 r\", \"b 7:* r\"]\n");
  CommandResult r = Cordon({"attach", "--cgroup", cg.path(), "--policy", policy.path(), "--allow-degraded"});
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(OpenDev("/dev/loop0", O_RDONLY), 0) << "negative control: root opens it unconfined";
  EXPECT_EQ(RunInCgroup(cg.path(), [] { return OpenDev("/dev/vcs", O_RDONLY); }), 0);
  EXPECT_EQ(RunInCgroup(cg.path(), [] { return OpenDev("/dev/loop0", O_RDONLY); }), 0) << "minor *";
  EXPECT_EQ(RunInCgroup(cg.path(), [] { return OpenDev("/dev/vcs", O_WRONLY); }), EPERM);
  EXPECT_EQ(RunInCgroup(cg.path(), [] { return OpenDev("/dev/loop-control", O_RDWR); }), EPERM);
  auto events = TakeEvents(cg.path());
  int refused = 0;
  for (const auto& e : events) refused += e.kind() == "tamper.device";
  EXPECT_EQ(refused, 2);
}

std::string ReadAll(const char* path, int* err) {
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *err = errno;
    return "";
  }
  char buf[4096];
  ssize_t n = ::read(fd, buf, sizeof buf);
  *err = n < 0 ? errno : 0;
  ::close(fd);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

TEST_F(Inbound, SysctlWritesRefusedReadsOnlyOfTheSafeSet) {
  TestCgroup cg("sysctl");
  Attach(cg, Policy("sysctl-test", "    egress: []\n"));
  int err = 0;
  const std::string core_pattern = ReadAll("/proc/sys/kernel/core_pattern", &err);
  ASSERT_EQ(err, 0) << "negative control: unconfined read";
  auto read_in = [&](const char* path) {
    return RunInCgroup(cg.path(), [&] {
      int e = 0;
      ReadAll(path, &e);
      return e;
    });
  };
  EXPECT_EQ(read_in("/proc/sys/kernel/ostype"), 0);
  EXPECT_EQ(read_in("/proc/sys/kernel/osrelease"), 0);
  EXPECT_EQ(read_in("/proc/sys/net/ipv4/ip_local_port_range"), 0);
  EXPECT_EQ(read_in("/proc/sys/kernel/core_pattern"), EPERM);
  // A write of the value it already has: harmless even if it got through.
  int w = RunInCgroup(cg.path(), [&] {
    int fd = ::open("/proc/sys/kernel/core_pattern", O_WRONLY | O_CLOEXEC);
    if (fd < 0) return 1000 + errno;
    int r = ::write(fd, core_pattern.data(), core_pattern.size()) < 0 ? errno : 0;
    ::close(fd);
    return r;
  });
  EXPECT_EQ(w, EPERM);
  int hw = RunInCgroup(cg.path(), [&] {
    int e = 0;
    std::string host = ReadAll("/proc/sys/kernel/hostname", &e);
    if (e) return 2000 + e;
    int fd = ::open("/proc/sys/kernel/hostname", O_WRONLY | O_CLOEXEC);
    if (fd < 0) return 1000 + errno;
    int r = ::write(fd, host.data(), host.size()) < 0 ? errno : 0;
    ::close(fd);
    return r;
  });
  EXPECT_EQ(hw, EPERM) << "a readable sysctl is still not writable";

  auto events = TakeEvents(cg.path());
  int reads = 0, writes = 0, hostname_writes = 0;
  for (const auto& e : events) {
    if (e.kind() != "tamper.sysctl") continue;
    EXPECT_EQ(e.verdict(), "denied");
    EXPECT_EQ(e.enforcement(), "kernel-cgroup");
    if (e.file().path() == "kernel/core_pattern") (e.target().arg() == 1 ? writes : reads)++;
    if (e.file().path() == "kernel/hostname" && e.target().arg() == 1) ++hostname_writes;
    EXPECT_NE(e.file().path(), "kernel/ostype");
  }
  EXPECT_EQ(reads, 1);
  EXPECT_EQ(writes, 1);
  EXPECT_EQ(hostname_writes, 1);
}

// Ordinary programs are not broken by the safe sets: python3, bash and git
// run inside a sandbox without a single device or sysctl refusal.
TEST_F(Inbound, OrdinaryProgramsRunWithoutDeviceOrSysctlRefusals) {
  TestCgroup cg("programs");
  Attach(cg, Policy("programs-test", "    egress: []\n"));
  auto run = [&](std::vector<std::string> argv) {
    return RunInCgroup(cg.path(), [argv] {
      pid_t pid = ::fork();
      if (pid == 0) {
        int null = ::open("/dev/null", O_RDWR);
        ::dup2(null, 1);
        std::vector<char*> args;
        for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        ::execvp(args[0], args.data());
        _exit(127);
      }
      int status = 0;
      ::waitpid(pid, &status, 0);
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    });
  };
  EXPECT_EQ(run({"python3", "-c",
                 "import socket, os, subprocess, tempfile, random, multiprocessing\n"
                 "s = socket.socket(); s.close(); print(os.cpu_count(), random.random())\n"
                 "subprocess.run(['true'], check=True)\n"}),
            0);
  EXPECT_EQ(run({"bash", "-c", "x=$(echo hi); [ \"$x\" = hi ] && cat /dev/null && ls / >/dev/null && ulimit -a"}), 0);
  EXPECT_EQ(run({"git", "--version"}), 0);
  EXPECT_EQ(run({"git", "-C", "/tmp", "init", "-q", "/tmp/cordon-inbound-git-" + std::to_string(::getpid())}), 0);
  cordon::test::Run({"rm", "-rf", "/tmp/cordon-inbound-git-" + std::to_string(::getpid())});
  auto events = TakeEvents(cg.path());
  for (const auto& e : events)
    ADD_FAILURE() << "unexpected event " << e.kind() << " " << e.file().path() << " " << e.target().arg() << " "
                  << e.comm();
}

TEST_F(Inbound, ProgramsAttachedReplacedAndDetachedWithTheSandbox) {
  TestCgroup cg("lifecycle");
  const uint16_t a = FreePort(), b = FreePort();
  Attach(cg, Policy("life-a", "    listen:\n      - ports: [" + std::to_string(a) + "]\n"));
  CommandResult s = Cordon({"status"});
  EXPECT_EQ(s.status, 0) << s.err;
  EXPECT_EQ(s.out.find("incomplete"), std::string::npos) << s.out;
  auto info = GetSandbox(cg.id());
  ASSERT_TRUE(info) << info.error().ToString();
  EXPECT_TRUE(info->problem.empty()) << info->problem;
  const std::string pins = info->pin_dir;
  for (const char* link :
       {"link_bind4", "link_bind6", "link_ingress", "link_egress", "link_setsockopt", "link_dev", "link_sysctl"}) {
    struct stat sb;
    EXPECT_EQ(::stat((pins + "/" + link).c_str(), &sb), 0) << link;
  }
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return Bind(V4("0.0.0.0", a), SOCK_STREAM); }), 0);
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return Bind(V4("0.0.0.0", b), SOCK_STREAM); }), EPERM);
  // Replacement (BPF_LINK_UPDATE): the new listen rules apply.
  Attach(cg, Policy("life-b", "    listen:\n      - ports: [" + std::to_string(b) + "]\n"));
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return Bind(V4("0.0.0.0", a), SOCK_STREAM); }), EPERM);
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return Bind(V4("0.0.0.0", b), SOCK_STREAM); }), 0);
  EXPECT_EQ(RunInCgroup(cg.path(), [] { return OpenDev("/dev/kmsg", O_RDONLY | O_NONBLOCK); }), EPERM);
  // Detach removes every program.
  CommandResult d = Cordon({"detach", "--cgroup", cg.path()});
  ASSERT_EQ(d.status, 0) << d.err;
  struct stat sb;
  EXPECT_NE(::stat(pins.c_str(), &sb), 0);
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return Bind(V4("0.0.0.0", a), SOCK_STREAM); }), 0);
  EXPECT_EQ(RunInCgroup(cg.path(), [] { return OpenDev("/dev/kmsg", O_RDONLY | O_NONBLOCK); }), 0);
  EXPECT_EQ(RunInCgroup(cg.path(), [] { return SetInt(AF_INET, SOCK_STREAM, SOL_SOCKET, SO_MARK, 1); }), 0);
  int e = 0;
  EXPECT_EQ(RunInCgroup(cg.path(), [&] {
              ReadAll("/proc/sys/kernel/core_pattern", &e);
              return e;
            }),
            0);
}

}  // namespace
}  // namespace cordon::test
