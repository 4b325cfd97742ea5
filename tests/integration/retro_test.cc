// Retroactive attach on the host kernel: connections opened before `cordon
// attach` are judged by the new policy; denied ones are destroyed through
// sock_diag (SOCK_DESTROY), allowed ones stay usable; files open before attach
// are listed. Each test asserts what the sandboxed process and its peer
// observe, and the events `cordon attach` prints.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>

#include "abi/cordon_event.h"
#include "inspect/retro.h"
#include "policy/compiler.h"
#include "policy/parser.h"
#include "tests/integration/harness.h"

namespace cordon::test {
namespace {

socklen_t Len(const sockaddr_storage& a) { return SockaddrLen(a); }

// A loopback TCP listener of the test process (outside every sandbox) that
// keeps the connections it accepts, so the test can watch the peer side.
class KeepingListener {
 public:
  explicit KeepingListener(bool v6 = false) {
    fd_ = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_storage a = v6 ? V6("::1", 0) : V4("127.0.0.1", 0);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), Len(a));
    ::listen(fd_, 16);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port);
  }
  ~KeepingListener() {
    if (accepted_ >= 0) ::close(accepted_);
    ::close(fd_);
  }
  int fd() const { return fd_; }
  uint16_t port() const { return port_; }
  // The next connection, waited for up to 5 s (-1 if none).
  int Accept() {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 5000) <= 0) return -1;
    if (accepted_ >= 0) ::close(accepted_);
    accepted_ = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    return accepted_;
  }

 private:
  int fd_ = -1;
  int accepted_ = -1;
  uint16_t port_ = 0;
};

// Connects a new socket of `type` to addr; -1 on failure.
int ConnectTo(const sockaddr_storage& addr, int type = SOCK_STREAM, int protocol = 0) {
  int fd = ::socket(addr.ss_family, type | SOCK_CLOEXEC, protocol);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), Len(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::string DenyAllButPort1(const std::string& name, const std::string& mode = "enforce") {
  return LoopbackPolicy(name, 1, mode);  // 127.0.0.1 and ::1 port 1 only: the address matches rule #1
}

class RetroAttach : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "integration tests need root";
  }

  // Attaches `yaml`; returns cordon's result (stdout: the retroactive events).
  CommandResult Attach(const TestCgroup& cg, const std::string& yaml, std::vector<std::string> extra = {}) {
    PolicyFile policy(yaml);
    std::vector<std::string> args = {"attach", "--cgroup", cg.path(), "--policy", policy.path(), "--allow-degraded"};
    args.insert(args.end(), extra.begin(), extra.end());
    return Cordon(args);
  }
};

std::vector<cordon::v1::AuditEvent> OfKind(const std::vector<cordon::v1::AuditEvent>& events, const std::string& kind) {
  std::vector<cordon::v1::AuditEvent> out;
  for (const auto& e : events)
    if (e.kind() == kind) out.push_back(e);
  return out;
}

TEST_F(RetroAttach, DeniedTcpConnectionIsDestroyedAndReported) {
  TestCgroup cg("retro-tcp");
  KeepingListener listener;
  int fd = -1;  // the child's connection (set in the child)
  WaitingChild child(cg.path(), [&] { return ReadOne(fd); },
                     [&] { fd = ConnectTo(V4("127.0.0.1", listener.port())); });
  int server = listener.Accept();
  ASSERT_GE(server, 0) << "the child did not connect before attach";

  CommandResult r = Attach(cg, DenyAllButPort1("retro-deny"));
  EXPECT_EQ(r.status, 0) << r.err;
  // The sandboxed process sees the abort, the peer a reset.
  EXPECT_EQ(child.Go(), ECONNABORTED);
  EXPECT_EQ(ReadOne(server), ECONNRESET);

  auto events = OfKind(ParseJsonLines(r.out), "net.preexisting");
  ASSERT_EQ(events.size(), 1u) << r.out << r.err;
  const auto& e = events[0];
  EXPECT_EQ(e.verdict(), "destroyed");
  EXPECT_EQ(e.enforcement(), "sock_diag");
  EXPECT_EQ(e.net().address(), "127.0.0.1");
  EXPECT_EQ(e.net().port(), listener.port());
  EXPECT_EQ(e.net().protocol(), "tcp");
  EXPECT_EQ(e.net().family(), "inet");
  EXPECT_EQ(e.net().rule(), 1u);  // 127.0.0.1 matched rule #1, the port did not
  EXPECT_NE(e.reason().find("connection opened before attach; policy denies it"), std::string::npos) << e.reason();
  EXPECT_EQ(e.policy(), "retro-deny");
  EXPECT_EQ(e.cgroup_path(), cg.relative());
  EXPECT_EQ(e.cgroup_id(), cg.id());
  EXPECT_EQ(e.sandbox_cgroup_id(), cg.id());
  EXPECT_EQ(e.ppid(), static_cast<uint32_t>(::getpid()));
  EXPECT_FALSE(e.comm().empty());
  EXPECT_TRUE(e.has_time());
  EXPECT_NE(r.err.find("1 destroyed"), std::string::npos) << r.err;
}

TEST_F(RetroAttach, AllowedTcpConnectionStaysUsableWithoutEvent) {
  TestCgroup cg("retro-allow");
  KeepingListener listener;
  int fd = -1;
  WaitingChild child(cg.path(),
                     [&] {
                       int got = ReadOne(fd);
                       const char reply = 'x';
                       if (::send(fd, &reply, 1, MSG_NOSIGNAL) != 1) return errno;
                       return got;
                     },
                     [&] { fd = ConnectTo(V4("127.0.0.1", listener.port())); });
  int server = listener.Accept();
  ASSERT_GE(server, 0);

  CommandResult r = Attach(cg, "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: retro-allow}\nspec:\n"
                               "  network:\n    egress:\n      - cidr: 127.0.0.1/32\n        ports: [" +
                                   std::to_string(listener.port()) + "]\n");
  ASSERT_EQ(r.status, 0) << r.err;
  const char ping = 'y';
  ASSERT_EQ(::send(server, &ping, 1, MSG_NOSIGNAL), 1);
  EXPECT_EQ(child.Go(), 1000 + 'y');
  EXPECT_EQ(ReadOne(server), 1000 + 'x');
  EXPECT_TRUE(OfKind(ParseJsonLines(r.out), "net.preexisting").empty()) << r.out;
  EXPECT_NE(r.err.find("1 judged, 1 allowed, 0 destroyed"), std::string::npos) << r.err;
}

TEST_F(RetroAttach, Ipv4MappedIpv6ConnectionIsJudgedAsIpv4AndDestroyed) {
  TestCgroup cg("retro-mapped");
  KeepingListener listener;  // IPv4 127.0.0.1, reached as ::ffff:127.0.0.1
  int fd = -1;
  WaitingChild child(cg.path(), [&] { return ReadOne(fd); },
                     [&] { fd = ConnectTo(V6("::ffff:127.0.0.1", listener.port())); });
  int server = listener.Accept();
  ASSERT_GE(server, 0);
  // Allows 127.0.0.2 and all of 2001:db8::/32: neither covers ::ffff:127.0.0.1.
  CommandResult r = Attach(cg, "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: retro-mapped}\nspec:\n"
                               "  network:\n    egress:\n      - cidr: 127.0.0.2/32\n      - cidr: 2001:db8::/32\n");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(child.Go(), ECONNABORTED);
  EXPECT_EQ(ReadOne(server), ECONNRESET);
  auto events = OfKind(ParseJsonLines(r.out), "net.preexisting");
  ASSERT_EQ(events.size(), 1u) << r.out << r.err;
  EXPECT_EQ(events[0].verdict(), "destroyed");
  EXPECT_EQ(events[0].net().address(), "127.0.0.1");
  EXPECT_EQ(events[0].net().family(), "inet6");
  EXPECT_EQ(events[0].net().port(), listener.port());
  EXPECT_EQ(events[0].net().rule(), 0u);
  EXPECT_NE(events[0].reason().find("no egress rule allows 127.0.0.1 port"), std::string::npos) << events[0].reason();
}

TEST_F(RetroAttach, AuditModeKeepsTheConnectionAndReportsIt) {
  TestCgroup cg("retro-audit");
  KeepingListener listener;
  int fd = -1;
  WaitingChild child(cg.path(), [&] { return ReadOne(fd); },
                     [&] { fd = ConnectTo(V4("127.0.0.1", listener.port())); });
  int server = listener.Accept();
  ASSERT_GE(server, 0);
  CommandResult r = Attach(cg, DenyAllButPort1("retro-audit", "audit"));
  ASSERT_EQ(r.status, 0) << r.err;
  const char ping = 'a';
  ASSERT_EQ(::send(server, &ping, 1, MSG_NOSIGNAL), 1);
  EXPECT_EQ(child.Go(), 1000 + 'a');
  auto events = OfKind(ParseJsonLines(r.out), "net.preexisting");
  ASSERT_EQ(events.size(), 1u) << r.out << r.err;
  EXPECT_EQ(events[0].verdict(), "audited");
  EXPECT_EQ(events[0].net().port(), listener.port());
  EXPECT_NE(events[0].reason().find("audit mode"), std::string::npos) << events[0].reason();
}

TEST_F(RetroAttach, ReplacingThePolicyRejudgesConnections) {
  TestCgroup cg("retro-replace");
  KeepingListener listener;
  int fd = -1;
  WaitingChild child(cg.path(), [&] { return ReadOne(fd); },
                     [&] { fd = ConnectTo(V4("127.0.0.1", listener.port())); });
  int server = listener.Accept();
  ASSERT_GE(server, 0);
  CommandResult first = Attach(cg, LoopbackPolicy("retro-first", listener.port()));
  ASSERT_EQ(first.status, 0) << first.err;
  EXPECT_TRUE(OfKind(ParseJsonLines(first.out), "net.preexisting").empty()) << first.out;
  // The same policy again, in audit mode: reported, kept.
  CommandResult audit = Attach(cg, DenyAllButPort1("retro-second"), {"--mode", "audit"});
  ASSERT_EQ(audit.status, 0) << audit.err;
  ASSERT_EQ(OfKind(ParseJsonLines(audit.out), "net.preexisting").size(), 1u) << audit.out;
  // Then enforced: destroyed.
  CommandResult second = Attach(cg, DenyAllButPort1("retro-second"));
  ASSERT_EQ(second.status, 0) << second.err;
  EXPECT_NE(second.err.find("replaced policy"), std::string::npos) << second.err;
  auto events = OfKind(ParseJsonLines(second.out), "net.preexisting");
  ASSERT_EQ(events.size(), 1u) << second.out << second.err;
  EXPECT_EQ(events[0].verdict(), "destroyed");
  EXPECT_EQ(events[0].policy(), "retro-second");
  EXPECT_EQ(child.Go(), ECONNABORTED);
  EXPECT_EQ(ReadOne(server), ECONNRESET);
}

TEST_F(RetroAttach, OpenFilesAreListed) {
  TestCgroup cg("retro-files");
  char tmpl[] = "/tmp/cordon-retro-XXXXXX";
  int tmp = ::mkstemp(tmpl);
  ASSERT_GE(tmp, 0);
  ::close(tmp);
  const std::string path = tmpl;
  int fd = -1;
  WaitingChild child(cg.path(), [&] { return fd >= 0 ? 0 : 1; },
                     [&] { fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC); });
  int child_pid = child.pid();
  CommandResult r = Attach(cg, DenyAllButPort1("retro-files"));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(child.Go(), 0);
  ::unlink(path.c_str());

  const cordon::v1::AuditEvent* found = nullptr;
  auto events = OfKind(ParseJsonLines(r.out), "file.preexisting");
  for (const auto& e : events)
    if (e.pid() == static_cast<uint32_t>(child_pid)) found = &e;
  ASSERT_NE(found, nullptr) << r.out;
  EXPECT_EQ(found->verdict(), "listed");
  EXPECT_FALSE(found->file().path().empty());
  EXPECT_EQ(found->file().path(), found->open_files(0));
  bool listed = false;
  for (const auto& f : found->open_files()) listed |= f == path;
  EXPECT_TRUE(listed) << r.out;
  EXPECT_NE(found->reason().find("cannot be revoked"), std::string::npos) << found->reason();
  EXPECT_EQ(found->cgroup_path(), cg.relative());
}

TEST_F(RetroAttach, DeniedConnectedUdpSocketIsDestroyed) {
  TestCgroup cg("retro-udp");
  UdpReceiver receiver;
  int fd = -1;
  WaitingChild child(cg.path(),
                     [&] {
                       // The abort is pending on the socket; the socket itself is
                       // disconnected: a send without address has nowhere to go.
                       int so_error = 0;
                       socklen_t len = sizeof so_error;
                       ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
                       const char c = 'u';
                       int send_errno = ::send(fd, &c, 1, 0) == 1 ? 0 : errno;
                       return so_error * 1000 + send_errno;
                     },
                     [&] { fd = ConnectTo(V4("127.0.0.1", receiver.port()), SOCK_DGRAM); });
  CommandResult r = Attach(cg, DenyAllButPort1("retro-udp"));
  EXPECT_EQ(r.status, 0) << r.err;
  int got = child.Go();
  EXPECT_EQ(got / 1000, ECONNABORTED) << "SO_ERROR after SOCK_DESTROY (udp_abort)";
  EXPECT_EQ(got % 1000, EDESTADDRREQ) << "send() on the disconnected socket";
  EXPECT_EQ(receiver.Received(), 0);
  auto events = OfKind(ParseJsonLines(r.out), "net.preexisting");
  ASSERT_EQ(events.size(), 1u) << r.out << r.err;
  EXPECT_EQ(events[0].verdict(), "destroyed");
  EXPECT_EQ(events[0].net().protocol(), "udp");
  EXPECT_EQ(events[0].net().port(), receiver.port());
}

// UDP-Lite is judged by udp rules, but the kernel may not implement
// SOCK_DESTROY for it (6.18: EOPNOTSUPP, udplite_prot has no diag_destroy).
// Then the connection survives, the event says so with the errno, and attach
// exits 1 (the policy stays attached).
TEST_F(RetroAttach, DeniedConnectedUdpLiteSocketIsDestroyedOrReportedAsNotDestroyable) {
  TestCgroup cg("retro-udplite");
  int probe = ::socket(AF_INET, SOCK_DGRAM, IPPROTO_UDPLITE);
  if (probe < 0) GTEST_SKIP() << "no UDP-Lite in this kernel";
  ::close(probe);
  int fd = -1;
  WaitingChild child(cg.path(),
                     [&] {
                       int so_error = 0;
                       socklen_t len = sizeof so_error;
                       ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
                       return so_error;
                     },
                     [&] { fd = ConnectTo(V4("127.0.0.1", 9), SOCK_DGRAM, IPPROTO_UDPLITE); });
  CommandResult r = Attach(cg, DenyAllButPort1("retro-udplite"));
  auto events = OfKind(ParseJsonLines(r.out), "net.preexisting");
  ASSERT_EQ(events.size(), 1u) << r.out << r.err;
  EXPECT_EQ(events[0].net().protocol(), "udplite");
  EXPECT_EQ(events[0].net().port(), 9u);
  if (events[0].verdict() == "destroy-failed") {
    EXPECT_NE(events[0].reason().find("SOCK_DESTROY failed: " + std::string(std::strerror(EOPNOTSUPP)) + " (errno " +
                                      std::to_string(EOPNOTSUPP) + ")"),
              std::string::npos)
        << events[0].reason();
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("attached, but 1 pre-existing connection(s) the policy denies could not be destroyed"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("attached sandbox"), std::string::npos) << r.err;
    EXPECT_EQ(child.Go(), 0);  // untouched
  } else {
    EXPECT_EQ(events[0].verdict(), "destroyed");
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(child.Go(), ECONNABORTED);
  }
}

TEST_F(RetroAttach, ListenersAndInboundConnectionsAreNotJudged) {
  TestCgroup cg("retro-inbound");
  // A listener the sandboxed child holds, and a connection into it from the
  // test process, accepted by the child before attach.
  KeepingListener listener;
  int client = ConnectTo(V4("127.0.0.1", listener.port()));
  ASSERT_GE(client, 0);
  int accepted = -1;
  WaitingChild child(cg.path(), [&] { return ReadOne(accepted); },
                     [&] {
                       ::close(client);  // inherited: not the child's
                       accepted = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC);
                     });
  CommandResult r = Attach(cg, DenyAllButPort1("retro-inbound"));
  ASSERT_EQ(r.status, 0) << r.err;
  const char c = 'i';
  ASSERT_EQ(::send(client, &c, 1, MSG_NOSIGNAL), 1);
  EXPECT_EQ(child.Go(), 1000 + 'i');
  EXPECT_TRUE(OfKind(ParseJsonLines(r.out), "net.preexisting").empty()) << r.out;
  EXPECT_NE(r.err.find("1 inbound not judged"), std::string::npos) << r.err;
  ::close(client);
}

TEST_F(RetroAttach, ConnectionsInDescendantCgroupsAndOtherNetworkNamespaces) {
  TestCgroup cg("retro-nested");
  KeepingListener listener;
  const std::string inner = cg.path() + "/inner";
  ASSERT_EQ(::mkdir(inner.c_str(), 0755), 0);
  // One in a network namespace of its own, connected to a listener of its own there
  // (forked first: it inherits none of the connections below).
  int ns_client = -1;
  uint16_t ns_port = 0;
  WaitingChild netns(cg.path(), [&] { return ReadOne(ns_client); },
                     [&] {
                       if (::unshare(CLONE_NEWNET) != 0) return;
                       int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
                       ifreq ifr{};
                       std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ);
                       ::ioctl(s, SIOCGIFFLAGS, &ifr);
                       ifr.ifr_flags |= IFF_UP;
                       ::ioctl(s, SIOCSIFFLAGS, &ifr);
                       ::close(s);
                       static KeepingListener* own = new KeepingListener();  // lives as long as the child
                       ns_port = own->port();
                       ns_client = ConnectTo(V4("127.0.0.1", ns_port));
                       own->Accept();
                     });
  // One child in a sub-cgroup, connected to the test's listener.
  int fd = -1;
  WaitingChild nested(cg.path(), [&] { return ReadOne(fd); },
                      [&] {
                        std::ofstream(inner + "/cgroup.procs") << ::getpid();
                        fd = ConnectTo(V4("127.0.0.1", listener.port()));
                      });
  int server = listener.Accept();
  ASSERT_GE(server, 0);
  CommandResult r = Attach(cg, DenyAllButPort1("retro-nested"));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(nested.Go(), ECONNABORTED);
  EXPECT_EQ(ReadOne(server), ECONNRESET);
  EXPECT_EQ(netns.Go(), ECONNABORTED);
  auto events = OfKind(ParseJsonLines(r.out), "net.preexisting");
  ASSERT_EQ(events.size(), 2u) << r.out << r.err;
  int in_inner = 0, other_ns = 0;
  for (const auto& e : events) {
    EXPECT_EQ(e.verdict(), "destroyed");
    if (e.cgroup_path() == cg.relative() + "/inner" && e.net().port() == listener.port()) ++in_inner;
    if (e.cgroup_path() == cg.relative() && e.net().port() != listener.port()) ++other_ns;
  }
  EXPECT_EQ(in_inner, 1) << r.out;
  EXPECT_EQ(other_ns, 1) << r.out;
  // The namespace's accepted side is inbound: not judged (it dies with its peer).
  EXPECT_NE(r.err.find("1 inbound not judged"), std::string::npos) << r.err;
}

// A process of the test exec'd into `cgroup` with exactly `env` (what
// /proc/<pid>/environ shows is what execve gave it). Killed and reaped by the
// destructor.
class ExecdSleeper {
 public:
  ExecdSleeper(const std::string& cgroup, const std::vector<std::string>& env) {
    std::vector<char*> envp;
    for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      std::ofstream(cgroup + "/cgroup.procs") << ::getpid();
      char* argv[] = {const_cast<char*>("sleep"), const_cast<char*>("300"), nullptr};
      ::execve("/bin/sleep", argv, envp.data());
      _exit(127);
    }
    const std::string comm = "/proc/" + std::to_string(pid_) + "/comm";
    EXPECT_TRUE(WaitFor([&] { return Slurp(comm) == "sleep\n"; }, 10000)) << "sleep did not start";
  }
  ~ExecdSleeper() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);  // our own child
      ::waitpid(pid_, nullptr, 0);
    }
  }
  int pid() const { return pid_; }

 private:
  int pid_ = -1;
};

TEST_F(RetroAttach, CredentialLikeEnvironmentVariablesAreReportedByNameOnly) {
  TestCgroup cg("retro-env");
  const std::string token_value = "s3cr3t-" + std::to_string(std::random_device{}());
  const std::string github_value = "ghp_" + std::string(30, 'Q') + std::to_string(std::random_device{}() % 1000000);
  ExecdSleeper exposed(cg.path(), {"HOME=/root", "GITHUB_TOKEN=" + token_value, "HARMLESS=x", "PLAIN=" + github_value});
  // The negative control: the same check over a harmless environment reports nothing.
  ExecdSleeper harmless(cg.path(), {"HOME=/root", "LANG=C.UTF-8", "HARMLESS=x"});
  CommandResult r = Attach(cg, DenyAllButPort1("retro-env"));
  EXPECT_EQ(r.status, 0) << r.err;
  auto events = OfKind(ParseJsonLines(r.out), "credential.exposed");
  ASSERT_EQ(events.size(), 1u) << r.out << r.err;
  const auto& e = events[0];
  EXPECT_EQ(e.pid(), static_cast<uint32_t>(exposed.pid()));
  EXPECT_EQ(e.verdict(), "detected");
  EXPECT_EQ(e.comm(), "sleep");
  EXPECT_EQ(e.cgroup_id(), cg.id());
  EXPECT_EQ(e.policy(), "retro-env");
  ASSERT_EQ(e.credential().variables_size(), 2) << r.out;
  EXPECT_EQ(e.credential().variables(0), "GITHUB_TOKEN");
  EXPECT_EQ(e.credential().variables(1), "PLAIN");
  EXPECT_NE(e.reason().find("PLAIN (value looks like a GitHub token)"), std::string::npos) << e.reason();
  EXPECT_NE(e.reason().find("cannot be taken back"), std::string::npos) << e.reason();
  EXPECT_NE(r.err.find("1 of 2 environments read hold credential-like variables"), std::string::npos) << r.err;
  // Values: nowhere.
  for (const std::string* v : {&token_value, &github_value}) {
    EXPECT_EQ(r.out.find(*v), std::string::npos);
    EXPECT_EQ(r.err.find(*v), std::string::npos);
  }
}

}  // namespace
}  // namespace cordon::test
