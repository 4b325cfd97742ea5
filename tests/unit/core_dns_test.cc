// cordon's DNS resolver without a network: the upstream is a fake that
// answers what a test says, to check what the resolver makes of replies a
// real server would not send (spoofed IDs, another question) and the
// address classes. The real-server tests are DnsResolver.* (integration).
#include <gtest/gtest.h>

#include <arpa/inet.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <set>

#include "dns/ldns_include.h"
#include "dns/resolver.h"
#include "policy/compiler.h"
#include "tests/common/dns_message.h"
#include "tests/unit/temp_dir.h"

namespace cordon::dns {
namespace {

using test::DnsWire;

std::vector<uint8_t> Query(const char* name, uint16_t id) { return test::DnsQuery(name, LDNS_RR_TYPE_A, id); }

// An A answer for the forwarded query, then altered by `tamper`.
class FakeUpstream : public UpstreamClient {
 public:
  std::function<void(ldns_pkt*)> tamper = [](ldns_pkt*) {};
  std::vector<uint16_t> ids;
  Result<std::vector<uint8_t>> Exchange(const policy::DnsUpstream&, std::span<const uint8_t> query,
                                        Transport) override {
    ldns_pkt* q = nullptr;
    EXPECT_EQ(ldns_wire2pkt(&q, query.data(), query.size()), LDNS_STATUS_OK);
    ids.push_back(ldns_pkt_id(q));
    ldns_pkt* r = ldns_pkt_clone(q);
    ldns_pkt_set_qr(r, true);
    ldns_rr* a = nullptr;
    EXPECT_EQ(ldns_rr_new_frm_str(&a, "a.test. 300 IN A 93.184.216.34", 0, nullptr, nullptr), LDNS_STATUS_OK);
    ldns_pkt_push_rr(r, LDNS_SECTION_ANSWER, a);
    tamper(r);
    ldns_pkt_free(q);
    return DnsWire(r);
  }
};

struct Fixture {
  FakeUpstream upstream;
  Resolver resolver;
  static std::vector<policy::CompiledRule> Rules() {
    policy::CompiledRule rule;
    rule.host = "a.test";
    return {rule};
  }
  Fixture() : resolver(Rules(), {*policy::ParseDnsUpstream("127.0.0.1", &error)}, &upstream) {}
  std::string error;
};

int Rcode(const std::vector<uint8_t>& wire) { return wire.size() >= 4 ? wire[3] & 0x0f : -1; }

TEST(DnsResolverCore, AnswersOnlyAReplyToItsOwnQuery) {
  Fixture f;
  Answer ok = f.resolver.Handle(Query("a.test", 7), Transport::kUdp);
  EXPECT_EQ(Rcode(ok.reply), LDNS_RCODE_NOERROR);
  ASSERT_EQ(ok.grants.size(), 1u);
  EXPECT_EQ(ok.grants[0].AddressText(), "93.184.216.34");
  // A reply with another ID (a spoofer's guess): not taken.
  f.upstream.tamper = [](ldns_pkt* r) { ldns_pkt_set_id(r, static_cast<uint16_t>(ldns_pkt_id(r) + 1)); };
  Answer spoofed = f.resolver.Handle(Query("a.test", 8), Transport::kUdp);
  EXPECT_EQ(Rcode(spoofed.reply), LDNS_RCODE_SERVFAIL);
  EXPECT_TRUE(spoofed.grants.empty());
  // Another question with the right ID: not taken either.
  f.upstream.tamper = [](ldns_pkt* r) {
    ldns_rr* question = ldns_rr_list_rr(ldns_pkt_question(r), 0);
    ldns_rdf* was = ldns_rr_owner(question);
    ldns_rr_set_owner(question, ldns_dname_new_frm_str("b.test"));
    ldns_rdf_deep_free(was);  // set_owner does not free it
  };
  Answer other = f.resolver.Handle(Query("a.test", 9), Transport::kUdp);
  EXPECT_EQ(Rcode(other.reply), LDNS_RCODE_SERVFAIL);
  EXPECT_TRUE(other.grants.empty());
  // Not a response at all.
  f.upstream.tamper = [](ldns_pkt* r) { ldns_pkt_set_qr(r, false); };
  EXPECT_EQ(Rcode(f.resolver.Handle(Query("a.test", 10), Transport::kUdp).reply), LDNS_RCODE_SERVFAIL);
  // Records for another owner than the question's chain are dropped.
  f.upstream.tamper = [](ldns_pkt* r) {
    ldns_rr* a = nullptr;
    ldns_rr_new_frm_str(&a, "evil.test. 300 IN A 203.0.113.9", 0, nullptr, nullptr);
    ldns_pkt_push_rr(r, LDNS_SECTION_ANSWER, a);
  };
  Answer extra = f.resolver.Handle(Query("a.test", 11), Transport::kUdp);
  ASSERT_EQ(extra.grants.size(), 1u);
  EXPECT_EQ(extra.grants[0].AddressText(), "93.184.216.34");
}

TEST(DnsResolverCore, ForwardedQueriesCarryRandomIds) {
  Fixture f;
  for (int i = 0; i < 16; ++i) (void)f.resolver.Handle(Query("a.test", 42), Transport::kUdp);
  const std::set<uint16_t> distinct(f.upstream.ids.begin(), f.upstream.ids.end());
  // Not the client's, and not one fixed value (16 equal draws: p = 2^-240).
  EXPECT_GT(distinct.size(), 1u);
  EXPECT_EQ(f.upstream.ids.size(), 16u);
}

TEST(DnsResolverCore, ClassifiesAddresses) {
  auto v4 = [](const char* text) {
    std::array<uint8_t, 4> a{};
    EXPECT_EQ(::inet_pton(AF_INET, text, a.data()), 1);
    return ClassifyAddress(a);
  };
  auto v6 = [](const char* text) {
    std::array<uint8_t, 16> a{};
    EXPECT_EQ(::inet_pton(AF_INET6, text, a.data()), 1);
    return ClassifyAddress(a);
  };
  EXPECT_EQ(v4("93.184.216.34"), AddressClass::kPublic);
  for (const char* p : {"10.1.2.3", "127.0.0.1", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1"})
    EXPECT_EQ(v4(p), AddressClass::kPrivate) << p;
  for (const char* n : {"0.0.0.0", "224.0.0.1", "255.255.255.255", "240.0.0.1"})
    EXPECT_EQ(v4(n), AddressClass::kNever) << n;
  EXPECT_EQ(v6("2606:2800:220:1::1"), AddressClass::kPublic);
  EXPECT_EQ(v6("2002:5db8:d822::1"), AddressClass::kPublic) << "6to4 of a public address";
  for (const char* p : {"::1", "fd00:ec2::254", "fe80::1", "::ffff:10.0.0.1", "64:ff9b::a9fe:a9fe",
                        "::ffff:0:a9fe:a9fe", "64:ff9b:1::5db8:d822", "2001:0:4136:e378::1", "2002:a9fe:a9fe::1"})
    EXPECT_EQ(v6(p), AddressClass::kPrivate) << p;
  for (const char* n : {"::", "ff02::1", "::ffff:0.0.0.0"}) EXPECT_EQ(v6(n), AddressClass::kNever) << n;
}

TEST(DnsResolverCore, ReadsResolvConfNameservers) {
  test::TempDir dir;
  const std::string path = dir.path() + "/resolv.conf";
  std::ofstream(path) << "# comment\nsearch example.org\nnameserver 10.0.0.2\nnameserver 2001:db8::53\n"
                         "nameserver not-an-address\noptions ndots:2\n";
  const auto upstreams = ResolvConfUpstreams(path);
  ASSERT_EQ(upstreams.size(), 2u);
  EXPECT_EQ(upstreams[0].ToString(), "10.0.0.2:53");
  EXPECT_EQ(upstreams[1].ToString(), "[2001:db8::53]:53");
  EXPECT_TRUE(ResolvConfUpstreams(dir.path() + "/absent").empty());
}

}  // namespace
}  // namespace cordon::dns

namespace cordon::dns {
namespace {

// A label with a dot in it ("x.example" under "org": presentation
// "x\.example.org") is not a name under example.org: refused, never asked
// upstream. The control: a name of the rule is asked, in lower case whatever
// case the workload chose (no channel in the letter case).
TEST(DnsResolverCore, ALabelWithADotIsRefusedAndTheNameAskedIsLowerCase) {
  FakeUpstream upstream;
  std::vector<std::string> asked;
  upstream.tamper = [&](ldns_pkt* r) {
    std::unique_ptr<char, decltype(&std::free)> text(
        ldns_rdf2str(ldns_rr_owner(ldns_rr_list_rr(ldns_pkt_question(r), 0))), &std::free);
    asked.emplace_back(text.get());
  };
  policy::CompiledRule rule;
  rule.host = "*.example.org";
  std::string error;
  Resolver resolver({rule}, {*policy::ParseDnsUpstream("127.0.0.1", &error)}, &upstream);
  Answer dotted = resolver.Handle(test::DnsQuery("x\\.example.org", LDNS_RR_TYPE_A, 1), Transport::kUdp);
  EXPECT_EQ(Rcode(dotted.reply), LDNS_RCODE_REFUSED);
  ASSERT_TRUE(dotted.decision.has_value());
  EXPECT_FALSE(dotted.decision->allowed);
  EXPECT_TRUE(upstream.ids.empty()) << "asked upstream";
  Answer odd = resolver.Handle(test::DnsQuery("a\\000b.example.org", LDNS_RR_TYPE_A, 2), Transport::kUdp);
  EXPECT_EQ(Rcode(odd.reply), LDNS_RCODE_REFUSED);
  EXPECT_TRUE(upstream.ids.empty()) << "asked upstream";
  (void)resolver.Handle(test::DnsQuery("WwW.ExAmPlE.org", LDNS_RR_TYPE_A, 3), Transport::kUdp);
  ASSERT_EQ(upstream.ids.size(), 1u) << "control: a name of the rule is asked";
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0], "www.example.org.");
}

}  // namespace
}  // namespace cordon::dns
