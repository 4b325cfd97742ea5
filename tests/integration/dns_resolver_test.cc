// cordon's filtering DNS resolver (userspace/dns/) against a real dnsmasq:
// both run in a network namespace the test creates (loopback only), a real
// client sends UDP and TCP queries to the resolver's listener, and dnsmasq's
// query log shows what reached the upstream. Kernel enforcement of the
// grants is not built yet: the grants are asserted as the callback gets them.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "dns/ldns_include.h"
#include "dns/resolver.h"
#include "dns/server.h"
#include "policy/compiler.h"
#include "policy/parser.h"
#include "tests/common/dns_message.h"
#include "tests/integration/dnsmasq_netns.h"
#include "tests/integration/harness.h"

namespace cordon::test {
namespace {

const std::string kLongLabel(60, 'l');
const std::string kMany = "many." + kLongLabel + "." + kLongLabel + "." + kLongLabel + ".test";

std::vector<uint8_t> Query(const std::string& name, ldns_rr_type type, uint16_t id, bool edns,
                           ldns_rr_class klass = LDNS_RR_CLASS_IN) {
  return DnsQuery(name, type, id, edns, klass);
}

struct Reply {
  bool got = false;
  uint16_t id = 0;
  int rcode = -1;
  bool tc = false;
  std::string question;  // owner of the question, as sent back
  std::vector<std::string> addresses;
  std::vector<std::string> cnames;  // "owner->target"
  std::vector<uint32_t> ttls;
};

Reply Decode(const std::vector<uint8_t>& wire) {
  Reply r;
  ldns_pkt* p = nullptr;
  if (ldns_wire2pkt(&p, wire.data(), wire.size()) != LDNS_STATUS_OK) return r;
  r.got = true;
  r.id = ldns_pkt_id(p);
  r.rcode = ldns_pkt_get_rcode(p);
  r.tc = ldns_pkt_tc(p);
  if (ldns_pkt_qdcount(p) == 1) {
    char* text = ldns_rdf2str(ldns_rr_owner(ldns_rr_list_rr(ldns_pkt_question(p), 0)));
    r.question = text;
    std::free(text);
  }
  const ldns_rr_list* answers = ldns_pkt_answer(p);
  for (size_t i = 0; answers && i < ldns_rr_list_rr_count(answers); ++i) {
    const ldns_rr* rr = ldns_rr_list_rr(answers, i);
    char* data = ldns_rdf2str(ldns_rr_rdf(rr, 0));
    if (ldns_rr_get_type(rr) == LDNS_RR_TYPE_CNAME) {
      char* owner = ldns_rdf2str(ldns_rr_owner(rr));
      r.cnames.push_back(std::string(owner) + "->" + data);
      std::free(owner);
    } else {
      r.addresses.push_back(data);
      r.ttls.push_back(ldns_rr_ttl(rr));
    }
    std::free(data);
  }
  ldns_pkt_free(p);
  return r;
}

sockaddr_in Loopback(uint16_t port) {
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(port);
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return sin;
}

// Sends each message in order on one UDP socket (with SO_MARK `mark` if
// non-zero); returns the first reply within `timeout_ms`.
std::vector<uint8_t> Udp(uint16_t port, const std::vector<std::vector<uint8_t>>& messages, uint32_t mark = 0,
                         int timeout_ms = 10000) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (mark) {
    EXPECT_EQ(::setsockopt(fd, SOL_SOCKET, SO_MARK, &mark, sizeof mark), 0) << std::strerror(errno);
  }
  const sockaddr_in to = Loopback(port);
  EXPECT_EQ(::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to), 0);
  for (const auto& m : messages) EXPECT_EQ(::send(fd, m.data(), m.size(), 0), static_cast<ssize_t>(m.size()));
  std::vector<uint8_t> buf(65535);
  pollfd p{fd, POLLIN, 0};
  ssize_t n = -1;
  if (::poll(&p, 1, timeout_ms) == 1) n = ::recv(fd, buf.data(), buf.size(), 0);
  ::close(fd);
  buf.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return buf;
}

std::vector<uint8_t> Tcp(uint16_t port, const std::vector<uint8_t>& message) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const sockaddr_in to = Loopback(port);
  EXPECT_EQ(::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to), 0);
  std::vector<uint8_t> framed{static_cast<uint8_t>(message.size() >> 8), static_cast<uint8_t>(message.size())};
  framed.insert(framed.end(), message.begin(), message.end());
  EXPECT_EQ(::send(fd, framed.data(), framed.size(), MSG_NOSIGNAL), static_cast<ssize_t>(framed.size()));
  std::vector<uint8_t> out;
  uint8_t buf[4096];
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.insert(out.end(), buf, buf + n);
    if (out.size() >= 2 && out.size() >= 2u + (static_cast<size_t>(out[0]) << 8 | out[1])) break;
  }
  ::close(fd);
  if (out.size() < 2) return {};
  return std::vector<uint8_t>(out.begin() + 2, out.end());
}

std::string PolicyText() {
  return R"(apiVersion: cordon/v1
kind: SandboxPolicy
metadata:
  name: dns
spec:
  network:
    egress:
      - host: allowed.test
        ports: [443]
        protocols: [tcp]
      - host: "*.wild.test"
        ports: [80]
      - host: private.test
      - host: metadata.test
      - host: private-ok.test
        allowPrivate: true
      - host: alias.test
        ports: [8443]
      - host: chain.test
      - host: shortttl.test
      - host: )" +
         kMany + R"(
      - cidr: 10.0.0.0/8
)";
}

class DnsResolver : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (network namespace)";
    // The hosts file dnsmasq reads: in a directory of the test's own (the
    // one DnsmasqNetns makes is known only once it started).
    hosts_ = "/tmp/cordon-dnsres-hosts-" + std::to_string(::getpid());
    {
      std::ofstream hosts(hosts_);
      for (int i = 1; i <= 40; ++i) hosts << "2001:db8::" << std::hex << i << std::dec << " " << kMany << "\n";
    }
    dnsmasq_.Start("dnsres", {"--addn-hosts=" + hosts_, "--host-record=allowed.test,93.184.216.34,2606:2800:220:1::1",
                              "--host-record=unlisted.test,93.184.216.40", "--host-record=a.wild.test,93.184.216.35",
                              "--host-record=b.a.wild.test,93.184.216.36", "--host-record=wild.test,93.184.216.37",
                              "--host-record=private.test,10.9.8.7", "--host-record=metadata.test,169.254.169.254",
                              "--host-record=private-ok.test,10.9.8.8", "--host-record=target.test,93.184.216.50",
                              "--cname=alias.test,target.test", "--cname=chain.test,alias.test",
                              "--host-record=shortttl.test,93.184.216.60,5"});
    if (HasFatalFailure()) return;
    // Ready when it answers (bounded: a dnsmasq that never answers fails here).
    ASSERT_TRUE(WaitFor([] { return Decode(Udp(53, {Query("allowed.test", LDNS_RR_TYPE_A, 1, false)})).got; }, 10000))
        << dnsmasq_.Log();

    policy::ParsedPolicy parsed;
    policy::Diagnostics diags;
    ASSERT_TRUE(policy::ParsePolicyText(PolicyText(), "dns.yaml", &parsed, &diags)) << policy::FormatDiagnostics(diags);
    ASSERT_TRUE(policy::Compile(parsed, &compiled_, &diags)) << policy::FormatDiagnostics(diags);
    std::string error;
    auto upstream = policy::ParseDnsUpstream("127.0.0.1:53", &error);
    ASSERT_TRUE(upstream) << error;
    resolver_ = std::make_unique<dns::Resolver>(compiled_.rules, std::vector<policy::DnsUpstream>{*upstream}, &client_);
    upstream_ = *upstream;
    auto server = StartServer();
    ASSERT_TRUE(server.ok()) << server.error().ToString();
    server_ = std::move(*server);
    port_ = server_->port();
  }

  // A server of resolver_ on a loopback port the kernel picks; its grants
  // and decisions are collected.
  Result<std::unique_ptr<dns::Server>> StartServer(dns::Server::AcceptPeer accept_peer = nullptr,
                                                   uint32_t udp_mark = 0) {
    policy::DnsUpstream listen = upstream_;
    listen.port = 0;
    return dns::Server::Start(
        listen, resolver_.get(),
        [this](const std::vector<dns::Grant>& grants) {
          std::lock_guard<std::mutex> lock(mu_);
          grants_.insert(grants_.end(), grants.begin(), grants.end());
          return true;
        },
        [this](const dns::QueryDecision& d) {
          std::lock_guard<std::mutex> lock(mu_);
          decisions_.push_back(d);
        },
        std::move(accept_peer), udp_mark);
  }

  void TearDown() override {
    server_.reset();
    dnsmasq_.Stop();
    if (!hosts_.empty()) ::unlink(hosts_.c_str());
  }

  std::vector<dns::Grant> TakeGrants() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(grants_, {});
  }
  std::vector<dns::QueryDecision> TakeDecisions() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(decisions_, {});
  }
  bool UpstreamSaw(const std::string& name, const std::string& type = "A") { return dnsmasq_.Saw(name, type); }
  size_t UpstreamCount(const std::string& name, const std::string& type) { return dnsmasq_.Count(name, type); }
  Reply Ask(const std::string& name, ldns_rr_type type = LDNS_RR_TYPE_A, bool edns = false) {
    return Decode(Udp(port_, {Query(name, type, 0x1234, edns)}));
  }

  DnsmasqNetns dnsmasq_;
  std::string hosts_;
  policy::CompiledPolicy compiled_;
  policy::DnsUpstream upstream_;
  dns::SocketUpstreamClient client_;
  std::unique_ptr<dns::Resolver> resolver_;
  std::unique_ptr<dns::Server> server_;
  uint16_t port_ = 0;
  std::mutex mu_;
  std::vector<dns::Grant> grants_;
  std::vector<dns::QueryDecision> decisions_;
};

TEST_F(DnsResolver, AllowedNameIsAnsweredWithGrantsInForceBeforeTheReply) {
  const Reply r = Ask("allowed.test");
  ASSERT_TRUE(r.got);
  EXPECT_EQ(r.id, 0x1234);
  EXPECT_EQ(r.question, "allowed.test.");
  EXPECT_EQ(r.rcode, LDNS_RCODE_NOERROR);
  EXPECT_EQ(r.addresses, std::vector<std::string>{"93.184.216.34"});
  EXPECT_EQ(r.ttls, std::vector<uint32_t>{120});
  // Taken right after the reply: the callback ran before it was sent.
  const auto grants = TakeGrants();
  ASSERT_EQ(grants.size(), 1u);
  EXPECT_EQ(grants[0].AddressText(), "93.184.216.34");
  EXPECT_EQ(grants[0].family, AF_INET);
  EXPECT_EQ(grants[0].rule, 1u);
  EXPECT_EQ(grants[0].name, "allowed.test");
  EXPECT_EQ(grants[0].ttl, 120u);
  ASSERT_EQ(grants[0].ports.size(), 1u);
  EXPECT_EQ(grants[0].ports[0].lo, 443);
  EXPECT_TRUE(grants[0].tcp);
  EXPECT_FALSE(grants[0].udp);
  const auto decisions = TakeDecisions();
  ASSERT_EQ(decisions.size(), 1u);
  EXPECT_EQ(decisions[0].name, "allowed.test");
  EXPECT_EQ(decisions[0].qtype, LDNS_RR_TYPE_A);
  EXPECT_TRUE(decisions[0].allowed);
  // AAAA too; an allowed name's other types get an empty answer, not forwarded.
  const Reply aaaa = Ask("ALLOWED.test", LDNS_RR_TYPE_AAAA);
  EXPECT_EQ(aaaa.question, "ALLOWED.test.");  // the client's spelling back
  EXPECT_EQ(aaaa.addresses, std::vector<std::string>{"2606:2800:220:1::1"});
  ASSERT_EQ(TakeGrants().size(), 1u);
  const Reply txt = Ask("allowed.test", LDNS_RR_TYPE_TXT);
  EXPECT_EQ(txt.rcode, LDNS_RCODE_NOERROR);
  EXPECT_TRUE(txt.addresses.empty());
  // The TTL floor: 5 s in the answer, 30 s granted.
  const Reply shortttl = Ask("shortttl.test");
  EXPECT_EQ(shortttl.ttls, std::vector<uint32_t>{5});
  const auto short_grants = TakeGrants();
  ASSERT_EQ(short_grants.size(), 1u);
  EXPECT_EQ(short_grants[0].ttl, dns::kTtlFloor);
  // dnsmasq logs in order: the later query is there, the TXT one never was.
  ASSERT_TRUE(WaitFor([&] { return UpstreamSaw("shortttl.test"); }, 10000)) << dnsmasq_.Log();
  EXPECT_FALSE(UpstreamSaw("allowed.test", "TXT")) << dnsmasq_.Log();
}

TEST_F(DnsResolver, UnlistedNameIsRefusedAndNeverLeavesTheHost) {
  const Reply r = Ask("unlisted.test");
  ASSERT_TRUE(r.got);
  EXPECT_EQ(r.rcode, LDNS_RCODE_REFUSED);
  EXPECT_EQ(r.id, 0x1234);
  EXPECT_TRUE(r.addresses.empty());
  EXPECT_TRUE(TakeGrants().empty());
  const auto decisions = TakeDecisions();
  ASSERT_EQ(decisions.size(), 1u);
  EXPECT_FALSE(decisions[0].allowed);
  EXPECT_EQ(decisions[0].reason, "no rule allows the name");
  // A later allowed query reached dnsmasq (which logs in order); the refused one never did.
  ASSERT_EQ(Ask("allowed.test").rcode, LDNS_RCODE_NOERROR);
  ASSERT_TRUE(WaitFor([&] { return UpstreamCount("allowed.test", "A") >= 2; }, 10000)) << dnsmasq_.Log();
  EXPECT_FALSE(UpstreamSaw("unlisted.test")) << dnsmasq_.Log();
  // Control: the name exists, and dnsmasq logs a query for it when asked directly.
  const Reply direct = Decode(Udp(53, {Query("unlisted.test", LDNS_RR_TYPE_A, 7, false)}));
  EXPECT_EQ(direct.addresses, std::vector<std::string>{"93.184.216.40"});
  EXPECT_TRUE(WaitFor([&] { return UpstreamSaw("unlisted.test"); }, 10000)) << dnsmasq_.Log();
}

TEST_F(DnsResolver, WildcardMatchesOneOrMoreLabelsButNotTheApex) {
  EXPECT_EQ(Ask("a.wild.test").addresses, std::vector<std::string>{"93.184.216.35"});
  EXPECT_EQ(Ask("b.a.wild.test").addresses, std::vector<std::string>{"93.184.216.36"});
  const auto grants = TakeGrants();
  ASSERT_EQ(grants.size(), 2u);
  EXPECT_EQ(grants[0].rule, 2u);
  EXPECT_EQ(grants[1].name, "b.a.wild.test");
  const Reply apex = Ask("wild.test");
  EXPECT_EQ(apex.rcode, LDNS_RCODE_REFUSED);
  EXPECT_TRUE(TakeGrants().empty());
  // Control: dnsmasq has the apex.
  EXPECT_EQ(Decode(Udp(53, {Query("wild.test", LDNS_RR_TYPE_A, 7, false)})).addresses,
            std::vector<std::string>{"93.184.216.37"});
}

TEST_F(DnsResolver, CnameChainIsFollowedUnderTheQueriedNamesRule) {
  // chain.test -> alias.test -> target.test: target.test has no rule of its
  // own; the address is granted under chain.test's rule (only the queried
  // name must be allowed).
  const Reply r = Ask("chain.test");
  EXPECT_EQ(r.rcode, LDNS_RCODE_NOERROR);
  EXPECT_EQ(r.cnames, (std::vector<std::string>{"chain.test.->alias.test.", "alias.test.->target.test."}));
  EXPECT_EQ(r.addresses, std::vector<std::string>{"93.184.216.50"});
  auto grants = TakeGrants();
  ASSERT_EQ(grants.size(), 1u);
  EXPECT_EQ(grants[0].rule, 7u);
  EXPECT_EQ(grants[0].name, "chain.test");
  EXPECT_TRUE(grants[0].ports.empty());
  // alias.test's own rule gives its port.
  EXPECT_EQ(Ask("alias.test").addresses, std::vector<std::string>{"93.184.216.50"});
  grants = TakeGrants();
  ASSERT_EQ(grants.size(), 1u);
  ASSERT_EQ(grants[0].ports.size(), 1u);
  EXPECT_EQ(grants[0].ports[0].lo, 8443);
  // The chain's end asked for itself: no rule, refused.
  EXPECT_EQ(Ask("target.test").rcode, LDNS_RCODE_REFUSED);
  EXPECT_FALSE(UpstreamSaw("target.test"));
}

TEST_F(DnsResolver, PrivateAnswersNeedAllowPrivate) {
  const Reply r = Ask("private.test");
  EXPECT_EQ(r.rcode, LDNS_RCODE_NOERROR);
  EXPECT_TRUE(r.addresses.empty());
  EXPECT_TRUE(Ask("metadata.test").addresses.empty());
  EXPECT_TRUE(TakeGrants().empty());
  // Control: dnsmasq answers both.
  EXPECT_EQ(Decode(Udp(53, {Query("private.test", LDNS_RR_TYPE_A, 7, false)})).addresses,
            std::vector<std::string>{"10.9.8.7"});
  EXPECT_EQ(Decode(Udp(53, {Query("metadata.test", LDNS_RR_TYPE_A, 8, false)})).addresses,
            std::vector<std::string>{"169.254.169.254"});
  // With allowPrivate: kept and granted.
  EXPECT_EQ(Ask("private-ok.test").addresses, std::vector<std::string>{"10.9.8.8"});
  const auto grants = TakeGrants();
  ASSERT_EQ(grants.size(), 1u);
  EXPECT_EQ(grants[0].AddressText(), "10.9.8.8");
  EXPECT_EQ(grants[0].rule, 5u);
}

TEST_F(DnsResolver, TcpQueriesAreAnswered) {
  const Reply r = Decode(Tcp(port_, Query("allowed.test", LDNS_RR_TYPE_A, 0x4321, false)));
  ASSERT_TRUE(r.got);
  EXPECT_EQ(r.id, 0x4321);
  EXPECT_EQ(r.addresses, std::vector<std::string>{"93.184.216.34"});
  EXPECT_EQ(TakeGrants().size(), 1u);
  EXPECT_EQ(Decode(Tcp(port_, Query("unlisted.test", LDNS_RR_TYPE_A, 5, false))).rcode, LDNS_RCODE_REFUSED);
}

TEST_F(DnsResolver, AddressCapTruncationAndTheUpstreamsTcpRetry) {
  // 40 AAAA records: too big for the upstream's 1232-byte UDP answer, so the
  // resolver asks again over TCP (dnsmasq logs the question twice); the
  // client gets the first 16.
  const Reply edns = Ask(kMany, LDNS_RR_TYPE_AAAA, /*edns=*/true);
  EXPECT_FALSE(edns.tc);
  EXPECT_EQ(edns.addresses.size(), dns::kMaxAddressesPerName);
  EXPECT_EQ(TakeGrants().size(), dns::kMaxAddressesPerName);
  EXPECT_TRUE(WaitFor([&] { return UpstreamCount(kMany, "AAAA") >= 2; }, 10000)) << dnsmasq_.Log();
  EXPECT_EQ(UpstreamCount(kMany, "AAAA"), 2u) << dnsmasq_.Log();
  // Control: dnsmasq really has 40 (over TCP, directly).
  EXPECT_EQ(Decode(Tcp(53, Query(kMany, LDNS_RR_TYPE_AAAA, 9, false))).addresses.size(), 40u);
  // Without EDNS the client's limit is 512 bytes: truncated, TC set, no records.
  const Reply small = Ask(kMany, LDNS_RR_TYPE_AAAA, /*edns=*/false);
  EXPECT_TRUE(small.tc);
  EXPECT_TRUE(small.addresses.empty());
  EXPECT_EQ(small.question, kMany + ".");
  // The same over TCP: whole.
  EXPECT_EQ(Decode(Tcp(port_, Query(kMany, LDNS_RR_TYPE_AAAA, 3, false))).addresses.size(), dns::kMaxAddressesPerName);
}

TEST_F(DnsResolver, MalformedAndOddMessagesAreAnsweredOrDroppedNeverCrash) {
  // Too short for a header, then a response (QR set): both dropped; the
  // first reply on the socket is the valid query's.
  std::vector<uint8_t> response = Query("allowed.test", LDNS_RR_TYPE_A, 0x1111, false);
  response[2] |= 0x80;
  Reply r = Decode(Udp(port_, {{1, 2, 3, 4, 5}, response, Query("allowed.test", LDNS_RR_TYPE_A, 0x2222, false)}));
  EXPECT_EQ(r.id, 0x2222);
  EXPECT_EQ(r.rcode, LDNS_RCODE_NOERROR);
  // A header and garbage: FORMERR with the client's ID.
  std::vector<uint8_t> garbage(40, 0xff);
  garbage[0] = 0xab, garbage[1] = 0xcd, garbage[2] = 0x01;
  r = Decode(Udp(port_, {garbage}));
  EXPECT_EQ(r.id, 0xabcd);
  EXPECT_EQ(r.rcode, LDNS_RCODE_FORMERR);
  // Two questions: FORMERR.
  ldns_pkt* two = ldns_pkt_query_new(ldns_dname_new_frm_str("allowed.test"), LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN, 0);
  ldns_rr* second = ldns_rr_new_frm_type(LDNS_RR_TYPE_A);
  ldns_rr_set_owner(second, ldns_dname_new_frm_str("unlisted.test"));
  ldns_rr_set_question(second, true);
  ldns_pkt_push_rr(two, LDNS_SECTION_QUESTION, second);
  r = Decode(Udp(port_, {DnsWire(two)}));
  EXPECT_EQ(r.rcode, LDNS_RCODE_FORMERR);
  // Another opcode (STATUS): NOTIMP. Class CHAOS: REFUSED.
  std::vector<uint8_t> status = Query("allowed.test", LDNS_RR_TYPE_A, 0x3333, false);
  status[2] = static_cast<uint8_t>((status[2] & 0x87) | (2 << 3));
  EXPECT_EQ(Decode(Udp(port_, {status})).rcode, LDNS_RCODE_NOTIMPL);
  EXPECT_EQ(Decode(Udp(port_, {Query("allowed.test", LDNS_RR_TYPE_A, 4, false, LDNS_RR_CLASS_CH)})).rcode,
            LDNS_RCODE_REFUSED);
  // A TCP message cut short, then the connection closed: the server lives on.
  {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const sockaddr_in to = Loopback(port_);
    ASSERT_EQ(::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to), 0);
    const uint8_t partial[] = {0x01, 0x00, 0xab};
    ASSERT_EQ(::send(fd, partial, sizeof partial, MSG_NOSIGNAL), 3);
    ::close(fd);
  }
  EXPECT_EQ(Decode(Tcp(port_, Query("allowed.test", LDNS_RR_TYPE_A, 6, false))).addresses,
            std::vector<std::string>{"93.184.216.34"});
  EXPECT_FALSE(UpstreamSaw("unlisted.test"));
}

// A server told the mark its clients' kernel side puts on their UDP queries
// (NameService: the sandbox's egress program) serves a query with that mark
// that accept_peer accepts; one without it (or with another) that
// accept_peer accepts gets an empty truncated answer with its ID and question
// (the client asks again over TCP), is not forwarded and grants nothing; one
// accept_peer refuses gets nothing, marked or not. TCP is served after
// accept_peer, as before. The test sets SO_MARK itself (root).
TEST_F(DnsResolver, AMarkedQueryIsServedAndAnUnmarkedOneAnsweredTruncated) {
  constexpr uint32_t kMark = 0x0c0d0000;
  std::atomic<int> asked{0};
  std::atomic<bool> accept{true};
  auto server = StartServer(
      [&](const sockaddr_storage&, const sockaddr_storage&, int) {
        asked.fetch_add(1);
        return accept.load();
      },
      kMark);
  ASSERT_TRUE(server.ok()) << server.error().ToString();
  const uint16_t port = (*server)->port();
  ASSERT_TRUE((*server)->reads_marks()) << "this kernel has SO_RCVMARK (5.19+)";

  const Reply unmarked = Decode(Udp(port, {Query("a.wild.test", LDNS_RR_TYPE_A, 0x5151, false)}));
  ASSERT_TRUE(unmarked.got);
  EXPECT_EQ(unmarked.id, 0x5151);
  EXPECT_TRUE(unmarked.tc);
  EXPECT_EQ(unmarked.rcode, LDNS_RCODE_NOERROR);
  EXPECT_EQ(unmarked.question, "a.wild.test.");
  EXPECT_TRUE(unmarked.addresses.empty());
  const Reply other = Decode(Udp(port, {Query("a.wild.test", LDNS_RR_TYPE_A, 0x5252, false)}, 0x1));
  EXPECT_TRUE(other.tc);
  EXPECT_TRUE(other.addresses.empty());
  EXPECT_EQ(asked.load(), 2);
  EXPECT_EQ((*server)->truncated(), 2u);
  EXPECT_TRUE(TakeGrants().empty());
  EXPECT_FALSE(UpstreamSaw("a.wild.test")) << dnsmasq_.Log();

  // Marked and accepted: served in full.
  const Reply marked = Decode(Udp(port, {Query("a.wild.test", LDNS_RR_TYPE_A, 0x5353, false)}, kMark));
  EXPECT_FALSE(marked.tc);
  EXPECT_EQ(marked.addresses, std::vector<std::string>{"93.184.216.35"});
  EXPECT_EQ(asked.load(), 3);
  EXPECT_EQ(TakeGrants().size(), 1u);
  EXPECT_TRUE(UpstreamSaw("a.wild.test")) << dnsmasq_.Log();

  // Refused by accept_peer, unmarked or marked: no answer at all.
  accept = false;
  EXPECT_TRUE(Udp(port, {Query("b.a.wild.test", LDNS_RR_TYPE_A, 0x5454, false)}, 0, 500).empty());
  EXPECT_TRUE(Udp(port, {Query("b.a.wild.test", LDNS_RR_TYPE_A, 0x5455, false)}, kMark, 500).empty());
  EXPECT_EQ((*server)->dropped(), 2u);
  EXPECT_FALSE(UpstreamSaw("b.a.wild.test")) << dnsmasq_.Log();
  // TCP: judged by accept_peer alone.
  EXPECT_TRUE(Decode(Tcp(port, Query("b.a.wild.test", LDNS_RR_TYPE_A, 0x5555, false))).addresses.empty());
  accept = true;
  EXPECT_EQ(Decode(Tcp(port, Query("b.a.wild.test", LDNS_RR_TYPE_A, 0x5656, false))).addresses,
            std::vector<std::string>{"93.184.216.36"});
}

// Name rules are put in force by cordon run (it runs cordon's resolver for
// its sandbox; NameEgress.* shows them enforced). What does not run one
// (attach and update without an agent, learn; the agent runs one:
// Agent.ServesTheNameRulesOfASandboxItAttachesAlsoAfterARestart)
// refuses such a policy naming the field; policy check warns. Control: the
// same policy with a cidr rule in its place is taken.
TEST(NameRules, AreTakenByRunAndRefusedByAttachUpdateAndLearn) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (cordon run, attach)";
  const std::string head =
      "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: names}\nspec:\n  network:\n"
      "    egress:\n";
  PolicyFile names(head + "      - host: pypi.org\n        ports: [443]\n    dns: {upstream: [\"127.0.0.1:53\"]}\n");
  PolicyFile cidr(head + "      - cidr: 10.0.0.0/8\n        ports: [443]\n");
  const std::string message = "spec.network.egress[0].host: name rules need cordon's DNS resolver";

  CommandResult check = Cordon({"policy", "check", names.path()});
  EXPECT_EQ(check.status, 0) << check.err;
  EXPECT_NE(check.err.find("warning: " + names.path() + ":7:15: " + message), std::string::npos) << check.err;
  EXPECT_NE(check.out.find("the addresses cordon's resolver answers for pypi.org"), std::string::npos) << check.out;

  // The runs' audit file: the test's own (not /var/log/cordon, read-only in the VMs).
  const std::string audit = "/tmp/cordon-names-audit-" + std::to_string(::getpid()) + ".jsonl";
  struct Remove {
    std::string path;
    ~Remove() { ::unlink(path.c_str()); }
  } remove_audit{audit};
  CommandResult run = Cordon({"run", "--policy", names.path(), "--audit", audit, "--", "/bin/true"});
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.err.find("name rules: the sandbox's DNS is answered by cordon's resolver"), std::string::npos)
      << run.err;
  CommandResult learn = Cordon({"learn", "--policy", names.path(), "--out", "/dev/null", "--", "/bin/true"});
  EXPECT_NE(learn.status, 0);
  EXPECT_NE(learn.err.find(message), std::string::npos) << learn.err;
  CommandResult run_cidr = Cordon({"run", "--policy", cidr.path(), "--audit", audit, "--", "/bin/true"});
  EXPECT_EQ(run_cidr.status, 0) << run_cidr.err;

  TestCgroup cg("names");
  CommandResult attach = Cordon({"attach", "--cgroup", cg.path(), "--policy", names.path(), "--allow-degraded"});
  EXPECT_NE(attach.status, 0);
  EXPECT_NE(attach.err.find(message), std::string::npos) << attach.err;
  CommandResult attach_cidr = Cordon({"attach", "--cgroup", cg.path(), "--policy", cidr.path(), "--allow-degraded"});
  EXPECT_EQ(attach_cidr.status, 0) << attach_cidr.err;
  // Nor may an update swap name rules in.
  CommandResult update = Cordon({"update", "--cgroup", cg.path(), "--policy", names.path(), "--allow-degraded"});
  EXPECT_NE(update.status, 0);
  EXPECT_NE(update.err.find(message), std::string::npos) << update.err;
  EXPECT_EQ(Cordon({"detach", "--cgroup", cg.path()}).status, 0);
}

}  // namespace
}  // namespace cordon::test
