// spec.resources.egressBytes (issue 17): the sandbox's cgroup_skb/egress
// program counts the bytes it sends and drops every packet once a packet
// would take the total over the budget, with one resource.egress record at
// warnAt and one at the budget. The subject is the cgroup programs, the same
// with or without BPF LSM: the host and 6.1 without BPF LSM run it
// (tests/CMakeLists.txt, vm_not_with_lsm).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/harness.h"

namespace cordon::test {
namespace {

constexpr uint64_t kBudget = 1u << 20;  // egressBytes: 1Mi
constexpr uint64_t kFlood = 8u << 20;   // what the workload tries to send
constexpr size_t kDatagram = 1400;

std::string BudgetPolicy(const std::string& name, const std::string& resources) {
  return "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: " + name +
         "}\nspec:\n  network:\n    egress:\n      - cidr: 127.0.0.1\n" +
         (resources.empty() ? "" : "  resources:\n" + resources);
}

// Sends `count` datagrams of kDatagram bytes to 127.0.0.1:port: 0, or the
// errno of the first that failed.
int UdpFlood(uint16_t port, int count) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  sockaddr_storage to = V4("127.0.0.1", port);
  static char datagram[kDatagram];
  int err = 0;
  for (int i = 0; i < count && !err; ++i)
    if (::sendto(fd, datagram, sizeof datagram, 0, reinterpret_cast<sockaddr*>(&to), SockaddrLen(to)) < 0) err = errno;
  ::close(fd);
  return err;
}

class EgressBudget : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "integration tests need root";
  }
};

// egressBytes: 1Mi, warnAt: 50%. UDP datagrams under the warn share pass;
// the TCP flood stalls once the total reaches the budget, having delivered
// no more than it (every packet that would go over is dropped, so there is
// no slack: the budget counts IP headers, the server counts payload); the
// next datagram then fails with EPERM. One warn record and one max record.
// Then a replacement with a 4Mi budget: the count is kept (not reset) and
// traffic flows again. Negative control: the same flood without egressBytes
// delivers all 8 MiB.
TEST_F(EgressBudget, FloodStopsAtTheBudgetWithOneWarnAndOneMaxEvent) {
  TestCgroup cg("egress");
  PolicyFile policy(BudgetPolicy("egress-budget", "    egressBytes: 1Mi\n    warnAt: 50%\n"));
  CommandResult a = Cordon({"attach", "--cgroup", cg.path(), "--policy", policy.path(), "--allow-degraded"});
  ASSERT_EQ(a.status, 0) << a.err;
  UdpReceiver udp;
  const int datagrams = 256 * 1024 / kDatagram;  // about 256 KiB: under the warn share
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return UdpFlood(udp.port(), datagrams); }), 0);

  TcpSink sink;
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return TcpFlood(sink.port(), kFlood); }), EAGAIN) << "the flood stalls";
  const uint64_t received = sink.Stop();
  const uint64_t udp_bytes = static_cast<uint64_t>(datagrams) * kDatagram;
  EXPECT_LE(received + udp_bytes, kBudget) << "payload delivered past the budget";
  EXPECT_GT(received + udp_bytes, kBudget / 2) << "stopped before the warn share";
  // Over the budget, a datagram is dropped in the kernel: its send fails.
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return UdpFlood(udp.port(), 1); }), EPERM);

  auto events = OfKind(TakeEvents(cg.path()), "resource.egress");
  ASSERT_EQ(events.size(), 2u);
  const auto& warn = events[0].resource().event() == "warn" ? events[0] : events[1];
  const auto& max = events[0].resource().event() == "max" ? events[0] : events[1];
  EXPECT_EQ(warn.resource().event(), "warn");
  EXPECT_EQ(warn.verdict(), "detected");
  EXPECT_EQ(warn.enforcement(), "kernel-cgroup");
  EXPECT_EQ(warn.resource().name(), "egress");
  EXPECT_EQ(warn.resource().limit(), kBudget);
  EXPECT_GE(warn.resource().value(), kBudget / 2);
  EXPECT_LE(warn.resource().value(), kBudget);
  EXPECT_EQ(max.resource().event(), "max");
  EXPECT_EQ(max.verdict(), "denied");
  EXPECT_EQ(max.enforcement(), "kernel-cgroup");
  EXPECT_EQ(max.resource().limit(), kBudget);
  EXPECT_LE(max.resource().value(), kBudget);
  EXPECT_GE(max.resource().value(), received + udp_bytes);
  EXPECT_EQ(max.net().address(), "127.0.0.1");

  // cordon status: bytes sent (headers too), the limit, the drops, the destinations.
  CommandResult status = Cordon({"status", "--json"});
  const uint64_t counted = EgressStatusNumber(status.out, cg.id(), "bytes");
  EXPECT_GE(counted, received + udp_bytes) << status.out;
  EXPECT_LE(counted, kBudget) << status.out;
  EXPECT_EQ(EgressStatusNumber(status.out, cg.id(), "limit"), kBudget) << status.out;
  EXPECT_GT(EgressStatusNumber(status.out, cg.id(), "droppedPackets"), 0u) << status.out;
  EXPECT_NE(status.out.find("\"destination\":\"127.0.0.1:" + std::to_string(sink.port()) + "/tcp\""), std::string::npos)
      << status.out;
  EXPECT_NE(status.out.find("\"destination\":\"127.0.0.1:" + std::to_string(udp.port()) + "/udp\""), std::string::npos)
      << status.out;

  // A replacement with a larger budget applies it to the running total.
  PolicyFile larger(BudgetPolicy("egress-budget", "    egressBytes: 4Mi\n"));
  CommandResult u = Cordon({"update", "--cgroup", cg.path(), "--policy", larger.path(), "--allow-degraded"});
  ASSERT_EQ(u.status, 0) << u.err;
  TcpSink again;
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return TcpFlood(again.port(), 1u << 20); }), 0);
  EXPECT_EQ(again.Stop(/*until_eof=*/true), 1u << 20);
  status = Cordon({"status", "--json"});
  EXPECT_GE(EgressStatusNumber(status.out, cg.id(), "bytes"), counted + (1u << 20))
      << "the count was reset: " << status.out;
  EXPECT_EQ(EgressStatusNumber(status.out, cg.id(), "limit"), 4u << 20) << status.out;
  EXPECT_TRUE(OfKind(TakeEvents(cg.path()), "resource.egress").empty()) << "under the new budget: no record";

  // Negative control: without egressBytes the same flood delivers everything.
  TestCgroup free("egress-free");
  PolicyFile unlimited(BudgetPolicy("egress-free", ""));
  ASSERT_EQ(Cordon({"attach", "--cgroup", free.path(), "--policy", unlimited.path(), "--allow-degraded"}).status, 0);
  TcpSink all;
  EXPECT_EQ(RunInCgroup(free.path(), [&] { return TcpFlood(all.port(), kFlood); }), 0);
  EXPECT_EQ(all.Stop(/*until_eof=*/true), kFlood);
  EXPECT_TRUE(OfKind(TakeEvents(free.path()), "resource.egress").empty());
}

// The workload of cordon run: sends 8 MiB to 127.0.0.1:argv[1] over TCP and
// prints "sent" or the errno of the send that failed ("timeout" after 20 s
// without progress).
const char* kPythonFlood =
    "import socket, sys\n"
    "s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n"
    "s.settimeout(20)\n"
    "try:\n"
    "  s.sendall(bytes(8 << 20))\n"
    "  print('sent')\n"
    "except socket.timeout:\n"
    "  print('timeout')\n"
    "except OSError as e:\n"
    "  print('errno', e.errno)\n";

// cordon run reads the max record and destroys the sandbox's connections
// (sock_diag, as containment does): the command's blocked send fails at once
// (ECONNABORTED) instead of stalling, the server sees the reset, and the
// audit file has the net.preexisting record of it. Negative control: the
// budget's drop alone (an attached sandbox, no reader) stalls the flood
// (FloodStopsAtTheBudgetWithOneWarnAndOneMaxEvent).
TEST_F(EgressBudget, CordonRunCutsTheConnectionsAtTheBudget) {
  char tmpl[] = "/tmp/cordon-egress-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  const std::string audit = dir + "/audit.jsonl";
  PolicyFile policy(BudgetPolicy("egress-run", "    egressBytes: 1Mi\n"));
  TcpSink sink;
  CommandResult r = Cordon({"run", "--policy", policy.path(), "--audit", audit, "--", "/usr/bin/python3", "-c",
                            kPythonFlood, std::to_string(sink.port())});
  const uint64_t received = sink.Stop();
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "errno " + std::to_string(ECONNABORTED) + "\n") << r.err;
  EXPECT_LE(received, kBudget);
  EXPECT_TRUE(sink.reset()) << "the server saw no reset";
  auto events = AuditFileEvents(audit);
  auto max = OfKind(events, "resource.egress");
  ASSERT_EQ(max.size(), 1u) << r.err;
  EXPECT_EQ(max[0].resource().event(), "max");
  auto cut = OfKind(events, "net.preexisting");
  ASSERT_EQ(cut.size(), 1u) << r.err;
  EXPECT_EQ(cut[0].verdict(), "destroyed");
  EXPECT_EQ(cut[0].net().port(), sink.port());
  EXPECT_NE(cut[0].reason().find("egress budget"), std::string::npos) << cut[0].reason();
  ::unlink(audit.c_str());
  ::rmdir(dir.c_str());
}

}  // namespace
}  // namespace cordon::test
