// dns.query records (ops/name_service.h QueryEvents): once per name, type and
// verdict a second, the repeats counted; at most N names a second, the rest
// in one counted record per verdict; every query accounted for.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ops/name_service.h"

namespace cordon::ops {
namespace {

constexpr int64_t kS = 1'000'000'000;

dns::QueryDecision D(const std::string& name, bool allowed, uint16_t qtype = 1) {
  dns::QueryDecision d;
  d.name = name;
  d.qtype = qtype;
  d.allowed = allowed;
  d.reason = allowed ? "allowed name" : "no rule allows the name";
  return d;
}

uint64_t Occurrences(const std::vector<cordon::v1::AuditEvent>& events) {
  uint64_t n = 0;
  for (const auto& e : events) n += e.has_repeats() ? e.repeats().count() : 1;
  return n;
}

TEST(QueryEvents, RepeatsOfANameInASecondAreOneCountedRecord) {
  QueryEvents q(3);
  const int64_t t0 = 1000 * kS;
  std::vector<cordon::v1::AuditEvent> out = q.Add(D("a.test", true), t0);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind(), "dns.query");
  EXPECT_EQ(out[0].verdict(), "noted");
  EXPECT_EQ(out[0].enforcement(), "cordon-dns");
  EXPECT_EQ(out[0].dns().name(), "a.test");
  EXPECT_EQ(out[0].dns().type(), "A");
  EXPECT_FALSE(out[0].has_repeats());
  for (int i = 1; i <= 4; ++i) EXPECT_TRUE(q.Add(D("a.test", true), t0 + i * 1000).empty());
  // The same name refused, or asked for AAAA: records of their own.
  EXPECT_EQ(q.Add(D("a.test", false), t0 + 5000).size(), 1u);
  EXPECT_EQ(q.Add(D("a.test", true, 28), t0 + 6000)[0].dns().type(), "AAAA");
  EXPECT_TRUE(q.Flush(t0 + kS / 2).empty());  // the second is not over
  out = q.Flush(t0 + kS);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].dns().name(), "a.test");
  EXPECT_EQ(out[0].repeats().count(), 4u);
  EXPECT_EQ(out[0].repeats().first().nanos(), 1000);
  EXPECT_EQ(out[0].repeats().last().nanos(), 4000);
  // A new second: recorded by name again.
  EXPECT_EQ(q.Add(D("a.test", true), t0 + 2 * kS).size(), 1u);
}

TEST(QueryEvents, NamesBeyondTheLimitAreCountedInOneRecordPerVerdict) {
  QueryEvents q(3);
  const int64_t t0 = 50 * kS;
  std::vector<cordon::v1::AuditEvent> all;
  for (int i = 0; i < 100; ++i) {
    auto out = q.Add(D("n" + std::to_string(i) + ".test", i % 10 == 0), t0 + i);
    all.insert(all.end(), out.begin(), out.end());
  }
  EXPECT_EQ(all.size(), 6u);  // the first three names of each verdict
  // The next second's first query ends this one.
  auto flushed = q.Add(D("later.test", false), t0 + kS + 1);
  ASSERT_EQ(flushed.size(), 3u);  // over-the-limit records (denied, noted), then later.test
  uint64_t denied_over = 0, noted_over = 0;
  for (const auto& e : flushed) {
    if (!e.has_repeats()) continue;
    EXPECT_EQ(e.dns().name(), "");
    EXPECT_NE(e.reason().find("more than 3 names"), std::string::npos) << e.reason();
    (e.verdict() == "denied" ? denied_over : noted_over) += e.repeats().count();
  }
  EXPECT_EQ(denied_over + noted_over, 94u);
  EXPECT_EQ(noted_over, 7u);  // n30 ... n90 (n0, n10, n20 recorded by name)
  all.insert(all.end(), flushed.begin(), flushed.end());
  auto rest = q.Flush(INT64_MAX);
  all.insert(all.end(), rest.begin(), rest.end());
  EXPECT_EQ(Occurrences(all), 101u);
}

TEST(QueryEvents, ANameIsEscapedAndTheTypeNamedByNumberWhenUnknown) {
  QueryEvents q;
  auto out = q.Add(D(std::string("bad\x1b[31m\xff.test"), false, 65280), 7 * kS);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].dns().name().find('\x1b'), std::string::npos) << out[0].dns().name();
  EXPECT_EQ(out[0].dns().type(), "TYPE65280");
}

}  // namespace
}  // namespace cordon::ops
