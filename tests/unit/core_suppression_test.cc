// The agent's rate limiting without a kernel or a clock: the token bucket,
// a sandbox's suppression and when its "suppressed" records are due (times
// are injected), and the pending counts that outlive an agent.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "agent/suppression.h"

namespace cordon::agent {
namespace {

constexpr int64_t kMs = 1000000;
constexpr int64_t kT0 = 1000 * kMs;  // any start: the clock is ours

TEST(TokenBucket, BurstThenRefillAtTheRate) {
  TokenBucket bucket;
  bucket.Configure(10, 5, kT0);  // 10/s: one token every 100 ms
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(bucket.Take(kT0)) << "burst token " << i;
  EXPECT_FALSE(bucket.Take(kT0)) << "the burst is spent";
  EXPECT_FALSE(bucket.Take(kT0 + 50 * kMs)) << "half a token";
  EXPECT_TRUE(bucket.Take(kT0 + 100 * kMs)) << "one token after 100 ms";
  EXPECT_FALSE(bucket.Take(kT0 + 100 * kMs));
  // A long quiet refills to the burst, not beyond.
  const int64_t later = kT0 + 60000 * kMs;
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(bucket.Take(later)) << "refilled token " << i;
  EXPECT_FALSE(bucket.Take(later));
  // A clock that goes back takes nothing and gives nothing.
  EXPECT_FALSE(bucket.Take(kT0));
}

TEST(TokenBucket, RateZeroAdmitsEverything) {
  TokenBucket bucket;
  bucket.Configure(0, 0, kT0);
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(bucket.Take(kT0));
}

TEST(Suppression, CountsWhatTheBucketRefusesAndRecordsItOnSchedule) {
  Suppression s;
  s.Configure(10, 2, kT0);
  bool final = false;
  EXPECT_TRUE(s.Admit(kT0));
  EXPECT_TRUE(s.Admit(kT0));
  EXPECT_FALSE(s.Due(kT0, &final)) << "nothing suppressed yet";
  EXPECT_FALSE(s.Admit(kT0));
  EXPECT_TRUE(s.suppressing());
  EXPECT_EQ(s.suppressed(), 1u);
  EXPECT_EQ(s.pending(), 1u);
  // A flood: ten events every 100 ms. The bucket lets one of them through.
  uint64_t admitted = 0;
  for (int64_t t = kT0 + 100 * kMs; t < kT0 + 1000 * kMs; t += 100 * kMs) {
    for (int i = 0; i < 10; ++i) admitted += s.Admit(t);
    ASSERT_FALSE(s.Due(t, &final)) << "the first record comes a second into suppression, at " << (t - kT0) / kMs;
  }
  EXPECT_EQ(admitted, 9u);
  EXPECT_EQ(s.suppressed(), 1u + 81u);
  for (int i = 0; i < 10; ++i) admitted += s.Admit(kT0 + 1000 * kMs);
  EXPECT_EQ(admitted, 10u);
  ASSERT_TRUE(s.Due(kT0 + 1000 * kMs, &final));
  EXPECT_FALSE(final) << "still suppressing";
  EXPECT_EQ(s.pending(), s.suppressed());
  s.Recorded(false, kT0 + 1000 * kMs);
  EXPECT_EQ(s.pending(), 0u);
  EXPECT_TRUE(s.suppressing());
  // The flood stops: 500 ms later suppression has ended; the final record
  // is due even with nothing pending.
  EXPECT_FALSE(s.Due(kT0 + 1499 * kMs, &final));
  ASSERT_TRUE(s.Due(kT0 + 1500 * kMs, &final));
  EXPECT_TRUE(final);
  s.Recorded(true, kT0 + 1500 * kMs);
  EXPECT_FALSE(s.suppressing());
  EXPECT_FALSE(s.Due(kT0 + 5000 * kMs, &final));
  EXPECT_EQ(s.suppressed(), 91u) << "the total since adoption stays";
}

// Quiet events take tokens from a bucket of their own: a flood of them
// leaves the violations' burst whole, and both are counted alike.
TEST(Suppression, QuietEventsHaveABudgetOfTheirOwn) {
  Suppression s;
  s.Configure(1, 3, kT0);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(s.Admit(kT0, /*quiet=*/true));
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(s.Admit(kT0, /*quiet=*/true));
  EXPECT_EQ(s.suppressed(), 100u);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(s.Admit(kT0)) << "the violations' burst is untouched";
  EXPECT_FALSE(s.Admit(kT0)) << "control: their own bucket is limited too";
  EXPECT_EQ(s.suppressed(), 101u);
  EXPECT_EQ(s.pending(), 101u);
}

TEST(Suppression, PeriodicRecordsAtMostOnceASecond) {
  Suppression s;
  s.Configure(1, 1, kT0);
  bool final = false;
  EXPECT_TRUE(s.Admit(kT0));
  int64_t t = kT0;
  int records = 0;
  for (; t <= kT0 + 3500 * kMs; t += 100 * kMs) {
    (void)s.Admit(t);
    (void)s.Admit(t);  // two an interval: always over 1/s
    if (s.Due(t, &final)) {
      EXPECT_FALSE(final);
      s.Recorded(final, t);
      records++;
    }
  }
  EXPECT_EQ(records, 3) << "at 1 s, 2 s and 3 s into suppression";
}

TEST(Suppression, UnlimitedNeverSuppresses) {
  Suppression s;
  s.Configure(0, 0, kT0);
  for (int i = 0; i < 100000; ++i) ASSERT_TRUE(s.Admit(kT0));
  bool final = false;
  EXPECT_FALSE(s.Due(kT0 + 10000 * kMs, &final));
  EXPECT_EQ(s.suppressed(), 0u);
}

TEST(Suppression, CountsLeftByAPreviousAgentAreRecordedAtOnce) {
  uint64_t slot = 42;  // as a dead agent left it in agent.state
  Suppression s;
  s.Configure(10, 10, kT0);
  EXPECT_EQ(s.Resume(&slot, kT0), 42u);
  EXPECT_TRUE(s.suppressing());
  bool final = false;
  ASSERT_TRUE(s.Due(kT0, &final));
  EXPECT_TRUE(final) << "nothing is being suppressed now: one final record";
  EXPECT_EQ(s.pending(), 42u);
  s.Recorded(final, kT0);
  EXPECT_EQ(slot, 0u) << "the slot is cleared once the record is out";
  uint64_t empty = 0;
  Suppression fresh;
  fresh.Configure(10, 10, kT0);
  EXPECT_EQ(fresh.Resume(&empty, kT0), 0u);
  EXPECT_FALSE(fresh.suppressing());
}

TEST(Suppression, SuppressedRecordCarriesTheCount) {
  SandboxContext sandbox{7, "build", "build-policy", "/agents/7"};
  auto e = SuppressedRecord(sandbox, 90, 2000, 10000, true, 1700000000LL * 1000000000LL);
  EXPECT_EQ(e.kind(), "suppressed");
  EXPECT_EQ(e.sandbox(), "build");
  EXPECT_EQ(e.policy(), "build-policy");
  EXPECT_EQ(e.cgroup_path(), "/agents/7");
  EXPECT_EQ(e.cgroup_id(), 7u);
  EXPECT_EQ(e.sandbox_cgroup_id(), 7u);
  EXPECT_EQ(e.suppressed().count(), 90u);
  EXPECT_TRUE(e.suppressed().final());
  EXPECT_EQ(e.time().seconds(), 1700000000);
  EXPECT_EQ(e.reason(),
            "90 events not delivered: over the agent's rate limit of 2000/s (burst 10000) for this sandbox; "
            "suppression ended");
}

TEST(PendingState, CountsSurviveTheProcessThatMappedThem) {
  char tmpl[] = "/tmp/cordon-pending-test.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl, path = dir + "/agent.state";
  {
    PendingState state;
    ASSERT_TRUE(state.Open(path).ok());
    uint64_t* a = state.Claim(11);
    uint64_t* b = state.Claim(12);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(state.Claim(11), a) << "a sandbox keeps its slot";
    *a = 5;
    *b = 0;
  }
  {
    PendingState next;  // the next agent
    ASSERT_TRUE(next.Open(path).ok());
    auto used = next.Used();
    ASSERT_EQ(used.size(), 2u);
    EXPECT_EQ(used[0].sandbox_id, 11u);
    EXPECT_EQ(used[0].pending, 5u);
    EXPECT_EQ(*next.Claim(11), 5u);
    next.Release(11);
    ASSERT_EQ(next.Used().size(), 1u);
    EXPECT_EQ(next.Used()[0].sandbox_id, 12u);
  }
  PendingState unopened;  // no state file: nothing claimed, counts kept in memory
  EXPECT_EQ(unopened.Claim(1), nullptr);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cordon::agent
