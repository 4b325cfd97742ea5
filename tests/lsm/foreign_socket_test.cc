// Inet sockets created outside a sandbox (inherited before attach, or passed
// in over SCM_RIGHTS by a host process): the cgroup connect/sendmsg programs
// judge a socket by the cgroup that created it, so only BPF LSM
// (lsm/socket_connect, lsm/socket_sendmsg) judges these, by the calling
// task's sandbox's egress rules. Every probe has its control: the same
// socket, passed the same way to a process in a cgroup without a sandbox,
// reaches the same destination.
//
// Runs for real in the BPF LSM test VMs (CORDON_EXPECT_LSM=1); where BPF LSM
// is not usable (the host, the VM booted without bpf in lsm=),
// ForeignSocketHonesty checks that cordon says these sockets are not judged.
#include <bpf/bpf.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "abi/cordon_common.h"
#include "abi/cordon_file.h"
#include "events/decoder.h"
#include "tests/integration/harness.h"
#include "tests/lsm/probes.h"

namespace cordon::test {
namespace {

int ExpectLsm() {
  const char* v = std::getenv("CORDON_EXPECT_LSM");
  return v ? std::atoi(v) : -1;  // -1: not said (host)
}

// An fd this test owns, closed at the end of the scope.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

socklen_t Len(const sockaddr_storage& a) {
  return a.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

int SendFd(int via, int fd) {
  char byte = 'f';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  *reinterpret_cast<int*>(CMSG_DATA(c)) = fd;
  return ::sendmsg(via, &msg, 0) == 1 ? 0 : errno;
}

int RecvFd(int via) {
  char byte = 0;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  if (::recvmsg(via, &msg, MSG_CMSG_CLOEXEC) != 1) return -1;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) return -1;
  return *reinterpret_cast<int*>(CMSG_DATA(c));
}

// The test process (outside every sandbox) passes `sock` over SCM_RIGHTS to a
// process in `cgroup_path` (it is in flight when the process starts), which
// runs `op` on the descriptor it received. Returns op's result (0 or errno),
// or 1000+ when the descriptor did not arrive.
int UseInCgroup(const std::string& cgroup_path, int sock, const std::function<int(int)>& op) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return 1000 + errno;
  Fd host_end(sv[0]), child_end(sv[1]);
  if (int err = SendFd(host_end.get(), sock)) return 2000 + err;
  return RunInCgroup(cgroup_path, [&] {
    int got = RecvFd(child_end.get());
    if (got < 0) return 3000;
    int r = op(got);
    ::close(got);
    return r;
  });
}

int ConnectOp(int fd, const sockaddr_storage& to) {
  return ::connect(fd, reinterpret_cast<const sockaddr*>(&to), Len(to)) == 0 ? 0 : errno;
}

int SendOp(int fd) { return ::send(fd, "x", 1, MSG_NOSIGNAL) == 1 ? 0 : errno; }

int SendtoOp(int fd, const sockaddr_storage& to) {
  return ::sendto(fd, "x", 1, MSG_NOSIGNAL, reinterpret_cast<const sockaddr*>(&to), Len(to)) == 1 ? 0 : errno;
}

// A socket made here, outside every sandbox (connected to `peer` if given).
int HostSocket(int family, int type, const sockaddr_storage* peer = nullptr) {
  int fd = ::socket(family, type | SOCK_CLOEXEC, 0);
  if (fd >= 0 && peer && ::connect(fd, reinterpret_cast<const sockaddr*>(peer), Len(*peer)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Egress to loopback (IPv4 and IPv6) on the given ports only, tcp and udp.
std::string PortsPolicy(const std::set<uint16_t>& ports, const std::string& mode = "enforce") {
  std::string list;
  for (uint16_t p : ports) list += (list.empty() ? "" : ", ") + std::to_string(p);
  return "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata:\n  name: foreign-socket\nspec:\n  mode: " + mode +
         "\n  network:\n    egress:\n      - cidr: 127.0.0.1\n        ports: [" + list +
         "]\n      - cidr: ::1\n        ports: [" + list + "]\n";
}

// The events of kind `kind` for destination port `port`.
std::vector<cordon::v1::AuditEvent> For(const std::vector<cordon::v1::AuditEvent>& events, const std::string& kind,
                                        uint16_t port) {
  std::vector<cordon::v1::AuditEvent> out;
  for (const auto& e : events)
    if (e.kind() == kind && e.net().port() == port) out.push_back(e);
  return out;
}

// One refusal of a foreign socket, as BPF LSM reports it.
void ExpectForeignEvent(const std::vector<cordon::v1::AuditEvent>& events, const std::string& kind, uint16_t port,
                        const std::string& protocol, const std::string& verdict = "denied") {
  auto matching = For(events, kind, port);
  ASSERT_EQ(matching.size(), 1u) << kind << " port " << port << "\n" << Dump(events);
  const auto& e = matching[0];
  EXPECT_EQ(e.verdict(), verdict);
  EXPECT_EQ(e.enforcement(), "kernel-lsm");
  EXPECT_EQ(e.net().protocol(), protocol);
  EXPECT_NE(e.reason().find("created outside the sandbox"), std::string::npos) << e.reason();
  // The loopback rules match the address, not the port.
  EXPECT_NE(e.reason().find("matches the address but not " + std::to_string(port) + "/" + protocol),
            std::string::npos)
      << e.reason();
}

// Distinct loopback ports: the policy allows `allowed_*`, none of `forbidden_*`.
struct Endpoints {
  TcpListener tcp_allowed;
  UdpReceiver udp_allowed;
  std::unique_ptr<TcpListener> tcp_forbidden;
  std::unique_ptr<UdpReceiver> udp_forbidden;
  std::unique_ptr<TcpListener> tcp6_forbidden;
  std::unique_ptr<UdpReceiver> udp6_forbidden;
  Endpoints() {
    // tcp and udp ports are separate spaces, the policy's ports cover both:
    // a forbidden endpoint must not land on an allowed number.
    auto clash = [&](uint16_t p) { return p == tcp_allowed.port() || p == udp_allowed.port(); };
    do tcp_forbidden = std::make_unique<TcpListener>(); while (clash(tcp_forbidden->port()));
    do udp_forbidden = std::make_unique<UdpReceiver>(); while (clash(udp_forbidden->port()));
    do tcp6_forbidden = std::make_unique<TcpListener>(true); while (clash(tcp6_forbidden->port()));
    do udp6_forbidden = std::make_unique<UdpReceiver>(true); while (clash(udp6_forbidden->port()));
  }
  std::set<uint16_t> allowed() const { return {tcp_allowed.port(), udp_allowed.port()}; }
};

class ForeignSocket : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root";
    bool usable = LsmUsableHere();
    if (ExpectLsm() == 1) {
      ASSERT_TRUE(usable) << "this VM boots with bpf in lsm=: cordon must be able to enforce";
    }
    if (!usable) GTEST_SKIP() << "BPF LSM not usable on this kernel (ForeignSocketHonesty covers it)";
  }
  void Attach(const TestCgroup& cg, const std::string& yaml) {
    PolicyFile policy(yaml);
    CommandResult r = Cordon({"attach", "--cgroup", cg.path(), "--policy", policy.path()});
    ASSERT_EQ(r.status, 0) << r.err;
    ASSERT_EQ(r.err.find("NOT"), std::string::npos) << r.err;
  }
  Endpoints ep_;
  TestCgroup plain_{"foreign-plain"};  // the controls: no sandbox
};

// (1) connect() on a TCP and a UDP socket created outside: judged by the
// sandbox's egress rules, like one created inside.
TEST_F(ForeignSocket, ConnectIsJudgedByTheSandboxsEgressRules) {
  TestCgroup cg("foreign-connect");
  Attach(cg, PortsPolicy(ep_.allowed()));
  const auto tcp_no = V4("127.0.0.1", ep_.tcp_forbidden->port());
  const auto tcp_yes = V4("127.0.0.1", ep_.tcp_allowed.port());
  const auto udp_no = V4("127.0.0.1", ep_.udp_forbidden->port());
  const auto udp_yes = V4("127.0.0.1", ep_.udp_allowed.port());
  const auto tcp6_no = V6("::1", ep_.tcp6_forbidden->port());
  auto connect_to = [](const sockaddr_storage& to) { return [to](int fd) { return ConnectOp(fd, to); }; };

  {
    Fd s(HostSocket(AF_INET, SOCK_STREAM));
    ASSERT_GE(s.get(), 0);
    EXPECT_EQ(UseInCgroup(cg.path(), s.get(), connect_to(tcp_no)), EPERM);
  }
  {
    Fd s(HostSocket(AF_INET, SOCK_STREAM));
    EXPECT_EQ(UseInCgroup(cg.path(), s.get(), connect_to(tcp_yes)), 0);
  }
  {
    Fd s(HostSocket(AF_INET, SOCK_DGRAM));
    EXPECT_EQ(UseInCgroup(cg.path(), s.get(), connect_to(udp_no)), EPERM);
  }
  {
    Fd s(HostSocket(AF_INET, SOCK_DGRAM));
    EXPECT_EQ(UseInCgroup(cg.path(), s.get(), connect_to(udp_yes)), 0);
  }
  {
    Fd s(HostSocket(AF_INET6, SOCK_STREAM));
    EXPECT_EQ(UseInCgroup(cg.path(), s.get(), connect_to(tcp6_no)), EPERM);
  }
  // A socket made inside is the cgroup programs' (refused there, one event).
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return TcpConnect(tcp6_no); }), EPERM);

  auto events = TakeEvents(cg.path());
  ExpectForeignEvent(events, "net.connect", ep_.tcp_forbidden->port(), "tcp");
  ExpectForeignEvent(events, "net.connect", ep_.udp_forbidden->port(), "udp");
  auto v6 = For(events, "net.connect", ep_.tcp6_forbidden->port());
  ASSERT_EQ(v6.size(), 2u) << Dump(events);
  int lsm = 0, cgroup = 0;
  for (const auto& e : v6) {
    lsm += e.enforcement() == "kernel-lsm" && e.net().address() == "::1" && e.net().family() == "inet6";
    cgroup += e.enforcement() == "kernel-cgroup" && e.reason().find("outside") == std::string::npos;
  }
  EXPECT_EQ(lsm, 1) << Dump(events);
  EXPECT_EQ(cgroup, 1) << Dump(events);
  EXPECT_TRUE(For(events, "net.connect", ep_.tcp_allowed.port()).empty()) << Dump(events);
  EXPECT_TRUE(For(events, "net.connect", ep_.udp_allowed.port()).empty()) << Dump(events);

  // Controls: the same sockets, passed the same way, unconfined.
  for (const auto& [family, type, to] : {std::tuple{AF_INET, SOCK_STREAM, tcp_no}, std::tuple{AF_INET, SOCK_DGRAM, udp_no},
                                         std::tuple{AF_INET6, SOCK_STREAM, tcp6_no}}) {
    Fd s(HostSocket(family, type));
    EXPECT_EQ(UseInCgroup(plain_.path(), s.get(), connect_to(to)), 0) << "port " << ntohs(
        reinterpret_cast<const sockaddr_in*>(&to)->sin_port);
  }
}

// (2) sends on sockets connected outside to a forbidden destination, and
// (3) sendto() a forbidden address on an unconnected UDP socket from outside.
TEST_F(ForeignSocket, SendIsJudgedByTheSandboxsEgressRules) {
  TestCgroup cg("foreign-send");
  Attach(cg, PortsPolicy(ep_.allowed()));
  const auto tcp_no = V4("127.0.0.1", ep_.tcp_forbidden->port());
  const auto tcp_yes = V4("127.0.0.1", ep_.tcp_allowed.port());
  const auto udp_no = V4("127.0.0.1", ep_.udp_forbidden->port());
  const auto udp_yes = V4("127.0.0.1", ep_.udp_allowed.port());
  const auto udp6_no = V6("::1", ep_.udp6_forbidden->port());
  auto sendto = [](const sockaddr_storage& to) { return [to](int fd) { return SendtoOp(fd, to); }; };

  // Connected outside, used inside: send() goes to the peer.
  Fd tcp_out(HostSocket(AF_INET, SOCK_STREAM, &tcp_no));
  ASSERT_GE(tcp_out.get(), 0);
  EXPECT_EQ(UseInCgroup(cg.path(), tcp_out.get(), SendOp), EPERM);
  Fd tcp_ok(HostSocket(AF_INET, SOCK_STREAM, &tcp_yes));
  ASSERT_GE(tcp_ok.get(), 0);
  EXPECT_EQ(UseInCgroup(cg.path(), tcp_ok.get(), SendOp), 0);
  Fd udp_out(HostSocket(AF_INET, SOCK_DGRAM, &udp_no));
  ASSERT_GE(udp_out.get(), 0);
  EXPECT_EQ(UseInCgroup(cg.path(), udp_out.get(), SendOp), EPERM);
  // Unconnected UDP from outside: each datagram's address.
  Fd udp(HostSocket(AF_INET, SOCK_DGRAM));
  EXPECT_EQ(UseInCgroup(cg.path(), udp.get(), sendto(udp_no)), EPERM);
  EXPECT_EQ(UseInCgroup(cg.path(), udp.get(), sendto(udp_yes)), 0);
  Fd udp6(HostSocket(AF_INET6, SOCK_DGRAM));
  EXPECT_EQ(UseInCgroup(cg.path(), udp6.get(), sendto(udp6_no)), EPERM);

  auto events = TakeEvents(cg.path());
  ExpectForeignEvent(events, "net.sendmsg", ep_.tcp_forbidden->port(), "tcp");
  auto udp_events = For(events, "net.sendmsg", ep_.udp_forbidden->port());
  ASSERT_EQ(udp_events.size(), 2u) << Dump(events);  // send() on the connected one, sendto() on the other
  for (const auto& e : udp_events) {
    EXPECT_EQ(e.verdict(), "denied");
    EXPECT_EQ(e.enforcement(), "kernel-lsm");
    EXPECT_EQ(e.net().address(), "127.0.0.1");
    EXPECT_NE(e.reason().find("created outside the sandbox"), std::string::npos) << e.reason();
  }
  ExpectForeignEvent(events, "net.sendmsg", ep_.udp6_forbidden->port(), "udp");
  EXPECT_TRUE(For(events, "net.sendmsg", ep_.tcp_allowed.port()).empty()) << Dump(events);
  EXPECT_TRUE(For(events, "net.sendmsg", ep_.udp_allowed.port()).empty()) << Dump(events);

  // Controls: the same sockets, unconfined.
  EXPECT_EQ(UseInCgroup(plain_.path(), tcp_out.get(), SendOp), 0);
  EXPECT_EQ(UseInCgroup(plain_.path(), udp_out.get(), SendOp), 0);
  EXPECT_EQ(UseInCgroup(plain_.path(), udp.get(), sendto(udp_no)), 0);
  EXPECT_EQ(UseInCgroup(plain_.path(), udp6.get(), sendto(udp6_no)), 0);
}

// splice() from a pipe into a socket (sendfile() from a file), on the
// socket of test (2). Before 6.5 these go through sendpage, not sendmsg
// (judged at file_permission); later, through sendmsg.
int SpliceOp(int fd) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return 1000 + errno;
  int r = ::write(p[1], "x", 1) == 1 ? 0 : 2000 + errno;
  if (r == 0) r = ::splice(p[0], nullptr, fd, nullptr, 1, 0) == 1 ? 0 : errno;
  ::close(p[0]);
  ::close(p[1]);
  return r;
}

TEST_F(ForeignSocket, SpliceAndSendfileAreJudgedToo) {
  TestCgroup cg("foreign-splice");
  Attach(cg, PortsPolicy(ep_.allowed()));
  const auto tcp_no = V4("127.0.0.1", ep_.tcp_forbidden->port());
  const auto tcp_yes = V4("127.0.0.1", ep_.tcp_allowed.port());
  char path[] = "/tmp/cordon-foreign-sendfile-XXXXXX";
  Fd file(::mkstemp(path));
  ASSERT_GE(file.get(), 0);
  std::unique_ptr<char, void (*)(char*)> unlink_file(path, [](char* p) { ::unlink(p); });
  ASSERT_EQ(::write(file.get(), "x", 1), 1);
  auto sendfile_op = [&](int fd) {
    int in = ::open(path, O_RDONLY | O_CLOEXEC);
    if (in < 0) return 1000 + errno;
    int r = ::sendfile(fd, in, nullptr, 1) == 1 ? 0 : errno;
    ::close(in);
    return r;
  };
  Fd bad(HostSocket(AF_INET, SOCK_STREAM, &tcp_no));
  Fd good(HostSocket(AF_INET, SOCK_STREAM, &tcp_yes));
  ASSERT_GE(bad.get(), 0);
  ASSERT_GE(good.get(), 0);
  EXPECT_EQ(UseInCgroup(cg.path(), bad.get(), SpliceOp), EPERM);
  EXPECT_EQ(UseInCgroup(cg.path(), bad.get(), sendfile_op), EPERM);
  EXPECT_EQ(UseInCgroup(cg.path(), good.get(), SpliceOp), 0);
  EXPECT_EQ(UseInCgroup(cg.path(), good.get(), sendfile_op), 0);
  auto events = TakeEvents(cg.path());
  auto refused = For(events, "net.sendmsg", ep_.tcp_forbidden->port());
  ASSERT_EQ(refused.size(), 2u) << Dump(events);
  for (const auto& e : refused) {
    EXPECT_EQ(e.enforcement(), "kernel-lsm");
    EXPECT_NE(e.reason().find("created outside the sandbox"), std::string::npos) << e.reason();
  }
  // Controls: unconfined, the same socket.
  EXPECT_EQ(UseInCgroup(plain_.path(), bad.get(), SpliceOp), 0);
  EXPECT_EQ(UseInCgroup(plain_.path(), bad.get(), sendfile_op), 0);
}

// Audit mode: reported, not refused.
TEST_F(ForeignSocket, AuditModeReportsButAllows) {
  TestCgroup cg("foreign-audit");
  Attach(cg, PortsPolicy(ep_.allowed(), "audit"));
  const auto tcp_no = V4("127.0.0.1", ep_.tcp_forbidden->port());
  const auto udp_no = V4("127.0.0.1", ep_.udp_forbidden->port());
  Fd tcp(HostSocket(AF_INET, SOCK_STREAM));
  EXPECT_EQ(UseInCgroup(cg.path(), tcp.get(), [&](int fd) { return ConnectOp(fd, tcp_no); }), 0);
  Fd udp(HostSocket(AF_INET, SOCK_DGRAM));
  EXPECT_EQ(UseInCgroup(cg.path(), udp.get(), [&](int fd) { return SendtoOp(fd, udp_no); }), 0);
  auto events = TakeEvents(cg.path());
  ExpectForeignEvent(events, "net.connect", ep_.tcp_forbidden->port(), "tcp", "audited");
  ExpectForeignEvent(events, "net.sendmsg", ep_.udp_forbidden->port(), "udp", "audited");
}

// The sandbox's egress pairs registered with the BPF LSM object, by policy
// version (-1: the pinned map cannot be read).
int EgressEntries(uint64_t sandbox_id, std::set<uint32_t>* versions = nullptr) {
  int total = 0;
  for (const char* name : {"sandbox_egress_addr", "sandbox_egress_port"}) {
    std::string pin = "/sys/fs/bpf/cordon/v" + std::to_string(CORDON_LAYOUT_VERSION) + "/lsm/" + name;
    int fd = bpf_obj_get(pin.c_str());
    if (fd < 0) return -1;
    cordon_lsm_net_key key = {}, next = {};
    void* prev = nullptr;
    while (bpf_map_get_next_key(fd, prev, &next) == 0) {
      if (next.sandbox_id == sandbox_id) {
        ++total;
        if (versions) versions->insert(next.version);
      }
      key = next;
      prev = &key;
    }
    ::close(fd);
  }
  return total;
}

// A policy replacement switches the rules foreign sockets are judged by with
// the rest, leaves one version's pair, and detach removes it.
TEST_F(ForeignSocket, ReplacementSwitchesTheRulesAndDetachRemovesThem) {
  TestCgroup cg("foreign-replace");
  Attach(cg, PortsPolicy({ep_.tcp_allowed.port()}));
  const auto tcp_a = V4("127.0.0.1", ep_.tcp_allowed.port());
  const auto tcp_b = V4("127.0.0.1", ep_.tcp_forbidden->port());
  auto connect_to = [](const sockaddr_storage& to) { return [to](int fd) { return ConnectOp(fd, to); }; };
  std::set<uint32_t> before;
  EXPECT_EQ(EgressEntries(cg.id(), &before), 2);
  {
    Fd s(HostSocket(AF_INET, SOCK_STREAM));
    EXPECT_EQ(UseInCgroup(cg.path(), s.get(), connect_to(tcp_b)), EPERM);
  }
  Attach(cg, PortsPolicy({ep_.tcp_forbidden->port()}));  // now B, not A
  std::set<uint32_t> after;
  EXPECT_EQ(EgressEntries(cg.id(), &after), 2) << "only the new version's pair is left";
  ASSERT_EQ(before.size(), 1u);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_NE(*before.begin(), *after.begin());
  {
    Fd s(HostSocket(AF_INET, SOCK_STREAM));
    EXPECT_EQ(UseInCgroup(cg.path(), s.get(), connect_to(tcp_b)), 0);
  }
  {
    Fd s(HostSocket(AF_INET, SOCK_STREAM));
    EXPECT_EQ(UseInCgroup(cg.path(), s.get(), connect_to(tcp_a)), EPERM);
  }
  auto events = TakeEvents(cg.path());
  EXPECT_EQ(For(events, "net.connect", ep_.tcp_forbidden->port()).size(), 1u) << Dump(events);
  ExpectForeignEvent(events, "net.connect", ep_.tcp_allowed.port(), "tcp");
  ASSERT_EQ(Cordon({"detach", "--cgroup", cg.path()}).status, 0);
  // The object stays loaded (the test run holds a sandbox): its map is readable.
  EXPECT_EQ(EgressEntries(cg.id()), 0);
}

// Without usable BPF LSM nothing judges these sockets: cordon says so (attach
// notes, doctor), and it is so.
TEST(ForeignSocketHonesty, WithoutBpfLsmCordonSaysForeignSocketsAreNotJudged) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  if (ExpectLsm() == 1 || LsmUsableHere()) GTEST_SKIP() << "BPF LSM is usable here (ForeignSocket covers it)";
  Endpoints ep;
  TestCgroup cg("foreign-honest");
  PolicyFile policy(PortsPolicy(ep.allowed()));
  CommandResult r = Cordon({"attach", "--cgroup", cg.path(), "--policy", policy.path()});
  EXPECT_NE(r.status, 0) << "attach without --allow-degraded must refuse";
  EXPECT_NE(r.err.find("inherited (descriptors opened outside the sandbox, inet sockets included)"),
            std::string::npos)
      << r.err;
  r = Cordon({"attach", "--allow-degraded", "--cgroup", cg.path(), "--policy", policy.path()});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("inet sockets created outside the sandbox (inherited before attach, or passed in over "
                       "SCM_RIGHTS) are NOT judged by the egress rules"),
            std::string::npos)
      << r.err;
  CommandResult doctor = Cordon({"doctor", "--json"});
  EXPECT_NE(doctor.out.find("inet sockets created outside reach any destination"), std::string::npos) << doctor.out;

  // And so it is: the statement is not a hedge. A socket from outside
  // reaches the forbidden listener; one made inside does not.
  const auto tcp_no = V4("127.0.0.1", ep.tcp_forbidden->port());
  Fd s(HostSocket(AF_INET, SOCK_STREAM));
  EXPECT_EQ(UseInCgroup(cg.path(), s.get(), [&](int fd) { return ConnectOp(fd, tcp_no); }), 0);
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return TcpConnect(tcp_no); }), EPERM);
}

}  // namespace
}  // namespace cordon::test
