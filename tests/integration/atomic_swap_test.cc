// Replacing the policy of an attached sandbox is atomic: at no moment is an
// operation allowed that both the old and the new policy deny, nor denied one
// that both allow. A real process in the sandbox sends a storm of datagrams
// while the policy is swapped 50 times by the real CLI (12 in the test VM,
// 6.1 without BPF LSM: under TCG each replacement loads and verifies the
// whole network object, a couple of seconds). Each swap is one more trial of
// the same replacement, and the storm probes each destination every few
// microseconds: a replacement that is not atomic (a gap between detach and
// attach, maps updated entry by entry) is open for the whole of a
// replacement step, far longer, and shows in any swap. 50 swaps and 20 mode
// flips (12 and 6 in the VM) keep that margin; 100 and 40 (25 and 10) doubled
// the time, with a core spinning in the storm for 2.5 minutes of the test
// command. (The test's name is older than the count.)
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <cerrno>

#include "tests/integration/harness.h"

namespace cordon::test {
namespace {

int Iterations(int host, int vm) { return std::getenv("CORDON_VM") ? vm : host; }

struct StormCounters {
  std::atomic<int> stop{0};
  std::atomic<long> sends{0};
  std::atomic<long> both_allow_denied{0};  // must stay 0
  std::atomic<long> both_deny_allowed{0};  // must stay 0
  std::atomic<long> changing_allowed{0};
  std::atomic<long> changing_denied{0};
};

std::string Policy(const std::string& name, const std::vector<uint16_t>& ports, const std::string& mode = "enforce") {
  std::string list;
  for (uint16_t p : ports) list += (list.empty() ? "" : ", ") + std::to_string(p);
  return "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: " + name + "}\nspec:\n  mode: " + mode +
         "\n  network:\n    egress:\n      - cidr: 127.0.0.1\n        ports: [" + list + "]\n        protocols: [udp]\n";
}

// Stops the storm child, joins the thread that released it and unmaps the
// shared counters, on every path out of a test.
struct StormGuard {
  StormCounters* counters;
  std::thread* go;
  void Stop() {
    if (counters) counters->stop = 1;
    if (go && go->joinable()) go->join();
  }
  ~StormGuard() {
    Stop();
    if (counters) ::munmap(counters, sizeof(StormCounters));
  }
};

TEST(AtomicSwap, HundredSwapsUnderAStormNeverViolateWhatBothPoliciesSay) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  TestCgroup cg("swap");
  UdpReceiver both_allow, both_deny, only_first, only_second;
  PolicyFile first(Policy("first", {both_allow.port(), only_first.port()}));
  PolicyFile second(Policy("second", {both_allow.port(), only_second.port()}));
  ASSERT_EQ(Cordon({"attach", "--cgroup", cg.path(), "--policy", first.path(), "--allow-degraded"}).status, 0);

  auto* counters = static_cast<StormCounters*>(
      ::mmap(nullptr, sizeof(StormCounters), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(counters, MAP_FAILED);
  new (counters) StormCounters();
  WaitingChild storm(cg.path(), [&] {
    int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    const sockaddr_storage targets[4] = {V4("127.0.0.1", both_allow.port()), V4("127.0.0.1", both_deny.port()),
                                         V4("127.0.0.1", only_first.port()), V4("127.0.0.1", only_second.port())};
    for (long i = 0; !counters->stop.load(std::memory_order_relaxed); ++i) {
      int which = static_cast<int>(i % 4);
      bool sent = ::sendto(fd, "x", 1, 0, reinterpret_cast<const sockaddr*>(&targets[which]), sizeof(sockaddr_in)) == 1;
      int err = sent ? 0 : errno;
      counters->sends.fetch_add(1, std::memory_order_relaxed);
      if (which == 0 && err == EPERM) counters->both_allow_denied.fetch_add(1);
      if (which == 1 && sent) counters->both_deny_allowed.fetch_add(1);
      if (which >= 2) (sent ? counters->changing_allowed : counters->changing_denied).fetch_add(1);
    }
    return 0;
  });
  std::thread go([&] { storm.Go(); });
  StormGuard guard{counters, &go};  // an ASSERT below still stops and joins the storm
  const int swaps = Iterations(50, 12);
  for (int swap = 0; swap < swaps; ++swap) {
    CommandResult r =
        Cordon({"attach", "--cgroup", cg.path(), "--policy", (swap % 2 ? first : second).path(), "--allow-degraded"});
    ASSERT_EQ(r.status, 0) << r.err;
    ASSERT_NE(r.err.find("replaced policy"), std::string::npos) << r.err;
  }
  guard.Stop();
  EXPECT_GT(counters->sends.load(), 10000) << "the storm must overlap the swaps";
  EXPECT_EQ(counters->both_allow_denied.load(), 0);
  EXPECT_EQ(counters->both_deny_allowed.load(), 0);
  EXPECT_GT(counters->changing_allowed.load(), 0);
  EXPECT_GT(counters->changing_denied.load(), 0);
}

TEST(AtomicSwap, ModeFlipsNeverDenyWhatIsAllowed) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  TestCgroup cg("modeflip");
  UdpReceiver allowed, denied;
  PolicyFile enforce(Policy("flip", {allowed.port()}, "enforce"));
  ASSERT_EQ(Cordon({"attach", "--cgroup", cg.path(), "--policy", enforce.path(), "--allow-degraded"}).status, 0);
  auto* counters = static_cast<StormCounters*>(
      ::mmap(nullptr, sizeof(StormCounters), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(counters, MAP_FAILED);
  new (counters) StormCounters();
  WaitingChild storm(cg.path(), [&] {
    int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_storage ok = V4("127.0.0.1", allowed.port()), no = V4("127.0.0.1", denied.port());
    for (long i = 0; !counters->stop.load(std::memory_order_relaxed); ++i) {
      const sockaddr_storage& t = i % 2 ? no : ok;
      bool sent = ::sendto(fd, "x", 1, 0, reinterpret_cast<const sockaddr*>(&t), sizeof(sockaddr_in)) == 1;
      counters->sends.fetch_add(1, std::memory_order_relaxed);
      if (i % 2 == 0 && !sent && errno == EPERM) counters->both_allow_denied.fetch_add(1);
      if (i % 2 == 1) (sent ? counters->changing_allowed : counters->changing_denied).fetch_add(1);
    }
    return 0;
  });
  std::thread go([&] { storm.Go(); });
  StormGuard guard{counters, &go};
  const int flips = Iterations(20, 6);
  for (int flip = 0; flip < flips; ++flip) {
    CommandResult r = Cordon({"attach", "--cgroup", cg.path(), "--policy", enforce.path(), "--mode",
                              flip % 2 ? "enforce" : "audit", "--allow-degraded"});
    ASSERT_EQ(r.status, 0) << r.err;
  }
  guard.Stop();
  EXPECT_EQ(counters->both_allow_denied.load(), 0);
  EXPECT_GT(counters->changing_allowed.load(), 0) << "audit mode let the denied destination through";
  EXPECT_GT(counters->changing_denied.load(), 0) << "enforce mode refused it";
}

}  // namespace
}  // namespace cordon::test
