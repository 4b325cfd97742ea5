#include "dns/resolver.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>

#include "dns/ldns_include.h"

#include "util/fd.h"

namespace cordon::dns {
namespace {

struct PktFree {
  void operator()(ldns_pkt* p) const { ldns_pkt_free(p); }
};
struct RrFree {
  void operator()(ldns_rr* r) const { ldns_rr_free(r); }
};
struct MallocFree {
  void operator()(void* p) const { std::free(p); }
};
using Pkt = std::unique_ptr<ldns_pkt, PktFree>;
using Rr = std::unique_ptr<ldns_rr, RrFree>;

Pkt Parse(std::span<const uint8_t> wire) {
  ldns_pkt* pkt = nullptr;
  if (ldns_wire2pkt(&pkt, wire.data(), wire.size()) != LDNS_STATUS_OK) return nullptr;
  return Pkt(pkt);
}

std::vector<uint8_t> Wire(const ldns_pkt* pkt) {
  uint8_t* buf = nullptr;
  size_t size = 0;
  if (ldns_pkt2wire(&buf, pkt, &size) != LDNS_STATUS_OK || !buf) return {};
  std::unique_ptr<uint8_t, MallocFree> owned(buf);
  return std::vector<uint8_t>(buf, buf + size);
}

// Presentation form, lower case, without the root's dot ("" for the root).
std::string NameText(const ldns_rdf* name) {
  std::unique_ptr<char, MallocFree> text(ldns_rdf2str(name));
  if (!text) return "";
  std::string out(text.get());
  if (!out.empty() && out.back() == '.') out.pop_back();
  std::transform(out.begin(), out.end(), out.begin(),
                 [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; });
  return out;
}

uint16_t RandomId() {
  uint16_t id = 0;
  while (::getrandom(&id, sizeof id, 0) != sizeof id) {
  }
  return id;
}

const ldns_rr* Question(const ldns_pkt* pkt) {
  if (ldns_pkt_qdcount(pkt) != 1 || !ldns_pkt_question(pkt) || ldns_rr_list_rr_count(ldns_pkt_question(pkt)) != 1)
    return nullptr;
  return ldns_rr_list_rr(ldns_pkt_question(pkt), 0);
}

// The reply to `query`: its ID, question, RD; QR set; the client's EDNS
// echoed with our payload size.
Pkt ReplyTo(const ldns_pkt* query, uint8_t rcode) {
  Pkt reply(ldns_pkt_new());
  ldns_pkt_set_id(reply.get(), ldns_pkt_id(query));
  ldns_pkt_set_qr(reply.get(), true);
  ldns_pkt_set_opcode(reply.get(), ldns_pkt_get_opcode(query));
  ldns_pkt_set_rd(reply.get(), ldns_pkt_rd(query));
  ldns_pkt_set_ra(reply.get(), true);
  ldns_pkt_set_rcode(reply.get(), rcode);
  if (const ldns_rr* q = Question(query)) ldns_pkt_push_rr(reply.get(), LDNS_SECTION_QUESTION, ldns_rr_clone(q));
  if (ldns_pkt_edns(query)) ldns_pkt_set_edns_udp_size(reply.get(), kEdnsPayload);
  return reply;
}

bool SameQuestion(const ldns_pkt* a, const ldns_pkt* b) {
  const ldns_rr* qa = Question(a);
  const ldns_rr* qb = Question(b);
  return qa && qb && ldns_rr_get_type(qa) == ldns_rr_get_type(qb) && ldns_rr_get_class(qa) == ldns_rr_get_class(qb) &&
         ldns_dname_compare(ldns_rr_owner(qa), ldns_rr_owner(qb)) == 0;
}

// An upstream reply answers `query`: same ID, QR set, same question.
bool Answers(const ldns_pkt* query, const ldns_pkt* reply) {
  return ldns_pkt_qr(reply) && ldns_pkt_id(reply) == ldns_pkt_id(query) && SameQuestion(query, reply);
}

bool InV4(const uint8_t* a, uint32_t net, int bits) {
  const uint32_t v =
      static_cast<uint32_t>(a[0]) << 24 | static_cast<uint32_t>(a[1]) << 16 | static_cast<uint32_t>(a[2]) << 8 | a[3];
  const uint32_t mask = bits == 0 ? 0 : ~0u << (32 - bits);
  return (v & mask) == (net & mask);
}

AddressClass ClassifyV4(const uint8_t* a) {
  // Never: this network, multicast, reserved and broadcast.
  if (InV4(a, 0x00000000, 8) || InV4(a, 0xe0000000, 4) || InV4(a, 0xf0000000, 4)) return AddressClass::kNever;
  if (InV4(a, 0x0a000000, 8) || InV4(a, 0x7f000000, 8) || InV4(a, 0x64400000, 10) ||    // private, loopback, CGNAT
      InV4(a, 0xa9fe0000, 16) || InV4(a, 0xac100000, 12) || InV4(a, 0xc0000000, 24) ||  // link-local (metadata)
      InV4(a, 0xc0a80000, 16) || InV4(a, 0xc6120000, 15))                               // private, benchmarking
    return AddressClass::kPrivate;
  return AddressClass::kPublic;
}

// The answer's policy-relevant facts, computed once per query.
struct Matched {
  std::vector<const policy::CompiledRule*> rules;
  std::vector<uint32_t> indexes;  // 1-based
  bool any_private = false;
};

}  // namespace

AddressClass ClassifyAddress(std::span<const uint8_t> addr) {
  if (addr.size() == 4) return ClassifyV4(addr.data());
  if (addr.size() != 16) return AddressClass::kNever;
  const uint8_t* a = addr.data();
  static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  static constexpr uint8_t kNat64[12] = {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
  static constexpr uint8_t kSiit[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0};  // ::ffff:0:a.b.c.d
  if (std::equal(a, a + 12, kMapped) || std::equal(a, a + 12, kNat64) || std::equal(a, a + 12, kSiit))
    return ClassifyV4(a + 12);
  // Tunnels to IPv4 the resolver cannot see through: local-use NAT64
  // (64:ff9b:1::/48, any embedding), Teredo (2001::/32); 6to4 (2002::/16)
  // carries its IPv4 address in bits 16-47.
  if (a[0] == 0 && a[1] == 0x64 && a[2] == 0xff && a[3] == 0x9b && a[4] == 0 && a[5] == 1)
    return AddressClass::kPrivate;
  if (a[0] == 0x20 && a[1] == 0x01 && a[2] == 0 && a[3] == 0) return AddressClass::kPrivate;
  if (a[0] == 0x20 && a[1] == 0x02) {
    const AddressClass embedded = ClassifyV4(a + 2);
    return embedded == AddressClass::kPublic ? AddressClass::kPublic : AddressClass::kPrivate;
  }
  static constexpr uint8_t kZero[15] = {};
  if (std::equal(a, a + 15, kZero)) return a[15] == 1 ? AddressClass::kPrivate : AddressClass::kNever;  // ::1, ::
  if (std::equal(a, a + 12, kZero)) return AddressClass::kNever;             // IPv4-compatible (deprecated)
  if (a[0] == 0xff) return AddressClass::kNever;                             // multicast
  if ((a[0] & 0xfe) == 0xfc) return AddressClass::kPrivate;                  // unique local (fd00:ec2::254)
  if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80) return AddressClass::kPrivate;  // link-local
  if (a[0] == 0xfe && (a[1] & 0xc0) == 0xc0) return AddressClass::kPrivate;  // site-local (deprecated)
  return AddressClass::kPublic;
}

std::string Grant::AddressText() const {
  char text[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(family, addr.data(), text, sizeof text);
  return text;
}

Resolver::Resolver(std::vector<policy::CompiledRule> rules, std::vector<policy::DnsUpstream> upstreams,
                   UpstreamClient* client)
    : rules_(std::move(rules)), upstreams_(std::move(upstreams)), client_(client) {}

std::vector<uint8_t> Resolver::ServerFailure(std::span<const uint8_t> query) {
  Pkt parsed = Parse(query);
  if (!parsed) return {};
  Pkt reply = ReplyTo(parsed.get(), LDNS_RCODE_SERVFAIL);
  return Wire(reply.get());
}

std::vector<uint8_t> Resolver::Truncated(std::span<const uint8_t> query) {
  Pkt parsed = Parse(query);
  if (!parsed || ldns_pkt_qr(parsed.get()) || !Question(parsed.get())) return {};
  Pkt reply = ReplyTo(parsed.get(), LDNS_RCODE_NOERROR);
  ldns_pkt_set_tc(reply.get(), true);
  return Wire(reply.get());
}

std::string QueryTypeName(uint16_t qtype) {
  const ldns_rr_descriptor* d = ldns_rr_descript(qtype);
  if (d && d->_name && qtype != 0) return d->_name;
  return "TYPE" + std::to_string(qtype);
}

Answer Resolver::Handle(std::span<const uint8_t> wire, Transport transport) const {
  Answer out;
  // Shorter than a header: nothing to answer to. A response (QR): never
  // answered (no loops, no reflection).
  if (wire.size() < LDNS_HEADER_SIZE || (wire[2] & 0x80)) return out;
  Pkt query = Parse(wire);
  if (!query) {
    // Unparsable: FORMERR with the client's ID only.
    Pkt reply(ldns_pkt_new());
    ldns_pkt_set_id(reply.get(), static_cast<uint16_t>(wire[0] << 8 | wire[1]));
    ldns_pkt_set_qr(reply.get(), true);
    ldns_pkt_set_rcode(reply.get(), LDNS_RCODE_FORMERR);
    out.reply = Wire(reply.get());
    out.decision = QueryDecision{"", 0, false, "malformed message"};
    return out;
  }
  auto finish = [&](Pkt reply) {
    std::vector<uint8_t> bytes = Wire(reply.get());
    size_t limit = 65535;
    if (transport == Transport::kUdp)
      limit = ldns_pkt_edns(query.get()) ? std::max<size_t>(512, ldns_pkt_edns_udp_size(query.get())) : 512;
    if (bytes.size() > limit) {
      // Too big for the client's datagram: header and question, TC set; it
      // asks again over TCP. The grants stand (the TCP answer repeats them).
      Pkt truncated = ReplyTo(query.get(), ldns_pkt_get_rcode(reply.get()));
      ldns_pkt_set_tc(truncated.get(), true);
      bytes = Wire(truncated.get());
    }
    out.reply = std::move(bytes);
  };
  const ldns_rr* question = Question(query.get());
  if (ldns_pkt_get_opcode(query.get()) != LDNS_PACKET_QUERY) {
    out.decision = QueryDecision{"", 0, false, "opcode other than QUERY"};
    finish(ReplyTo(query.get(), LDNS_RCODE_NOTIMPL));
    return out;
  }
  if (!question || ldns_pkt_ancount(query.get()) != 0 || ldns_pkt_nscount(query.get()) != 0) {
    out.decision = QueryDecision{"", 0, false, "not exactly one question"};
    finish(ReplyTo(query.get(), LDNS_RCODE_FORMERR));
    return out;
  }
  const std::string name = NameText(ldns_rr_owner(question));
  const auto qtype = static_cast<uint16_t>(ldns_rr_get_type(question));
  out.decision = QueryDecision{name.substr(0, 300), qtype, false, ""};
  if (ldns_rr_get_class(question) != LDNS_RR_CLASS_IN) {
    out.decision->reason = "class other than IN";
    finish(ReplyTo(query.get(), LDNS_RCODE_REFUSED));
    return out;
  }
  // A host name's labels hold letters, digits, '-' and '_' only: a label
  // with a dot or any other byte in it (presentation "x\\.example.org", two
  // labels under org) would otherwise match "*.example.org" as text and be
  // forwarded (a name outside every rule leaving the host).
  if (name.empty() || name.front() == '.' || name.back() == '.' || name.find("..") != std::string::npos ||
      !std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
      })) {
    out.decision->reason = "a name with characters a host name cannot have";
    finish(ReplyTo(query.get(), LDNS_RCODE_REFUSED));
    return out;
  }
  Matched matched;
  for (size_t i = 0; i < rules_.size(); ++i) {
    const policy::CompiledRule& rule = rules_[i];
    if (rule.host.empty() || !policy::HostPatternMatches(rule.host, name)) continue;
    matched.rules.push_back(&rule);
    matched.indexes.push_back(static_cast<uint32_t>(i + 1));
    matched.any_private = matched.any_private || rule.allow_private;
  }
  if (matched.rules.empty()) {
    out.decision->reason = "no rule allows the name";
    finish(ReplyTo(query.get(), LDNS_RCODE_REFUSED));
    return out;
  }
  out.decision->allowed = true;
  if (qtype != LDNS_RR_TYPE_A && qtype != LDNS_RR_TYPE_AAAA) {
    out.decision->reason = "allowed name; only A and AAAA are resolved (empty answer)";
    finish(ReplyTo(query.get(), LDNS_RCODE_NOERROR));
    return out;
  }

  // Forward: a fresh question with a random ID, EDNS, no DO.
  // The name as it was matched (lower case): the letter case the workload
  // chose is not passed on (no channel in it).
  ldns_rdf* asked = ldns_dname_new_frm_str(name.c_str());
  if (!asked) {
    out.decision->allowed = false;
    out.decision->reason = "a name that cannot be asked";
    finish(ReplyTo(query.get(), LDNS_RCODE_REFUSED));
    return out;
  }
  Pkt forward(ldns_pkt_query_new(asked, static_cast<ldns_rr_type>(qtype), LDNS_RR_CLASS_IN, LDNS_RD));
  ldns_pkt_set_id(forward.get(), RandomId());
  ldns_pkt_set_edns_udp_size(forward.get(), kEdnsPayload);
  const std::vector<uint8_t> forward_wire = Wire(forward.get());
  Pkt upstream_reply;
  std::string failure = "no upstream";
  for (const policy::DnsUpstream& upstream : upstreams_) {
    Transport how = Transport::kUdp;
    for (int attempt = 0; attempt < 2 && !upstream_reply; ++attempt) {
      auto got = client_->Exchange(upstream, forward_wire, how);
      if (!got) {
        failure = upstream.ToString() + ": " + got.error().ToString();
        break;
      }
      Pkt parsed = Parse(*got);
      if (!parsed || !Answers(forward.get(), parsed.get())) {
        failure = upstream.ToString() + ": a reply that does not answer the query";
        break;
      }
      if (ldns_pkt_tc(parsed.get()) && how == Transport::kUdp) {
        how = Transport::kTcp;  // truncated: ask again over TCP
        continue;
      }
      upstream_reply = std::move(parsed);
    }
    if (upstream_reply) break;
  }
  if (!upstream_reply) {
    out.decision->reason = "allowed name; upstream failed (" + failure + ")";
    finish(ReplyTo(query.get(), LDNS_RCODE_SERVFAIL));
    return out;
  }
  const auto rcode = ldns_pkt_get_rcode(upstream_reply.get());
  if (rcode != LDNS_RCODE_NOERROR && rcode != LDNS_RCODE_NXDOMAIN) {
    out.decision->reason = "allowed name; upstream answered rcode " + std::to_string(rcode);
    finish(ReplyTo(query.get(), LDNS_RCODE_SERVFAIL));
    return out;
  }
  Pkt reply = ReplyTo(query.get(), rcode);
  ldns_pkt_set_ra(reply.get(), ldns_pkt_ra(upstream_reply.get()));
  const ldns_rr_list* answers = ldns_pkt_answer(upstream_reply.get());
  const size_t count = answers ? ldns_rr_list_rr_count(answers) : 0;
  auto push = [&](const ldns_rr* rr) {
    ldns_rr* copy = ldns_rr_clone(rr);
    ldns_rr_set_ttl(copy, std::min(ldns_rr_ttl(copy), kTtlCap));
    ldns_pkt_push_rr(reply.get(), LDNS_SECTION_ANSWER, copy);
  };
  // The CNAME chain from the queried name, in the answer.
  const ldns_rdf* current = ldns_rr_owner(question);
  for (int hop = 0; hop < kMaxCnameHops; ++hop) {
    const ldns_rr* next = nullptr;
    for (size_t i = 0; i < count && !next; ++i) {
      const ldns_rr* rr = ldns_rr_list_rr(answers, i);
      if (ldns_rr_get_type(rr) == LDNS_RR_TYPE_CNAME && ldns_rr_get_class(rr) == LDNS_RR_CLASS_IN &&
          ldns_rr_rd_count(rr) == 1 && ldns_dname_compare(ldns_rr_owner(rr), current) == 0)
        next = rr;
    }
    if (!next) break;
    push(next);
    current = ldns_rr_rdf(next, 0);
  }
  size_t kept = 0, dropped = 0;
  for (size_t i = 0; i < count; ++i) {
    const ldns_rr* rr = ldns_rr_list_rr(answers, i);
    if (ldns_rr_get_type(rr) != static_cast<ldns_rr_type>(qtype) || ldns_rr_get_class(rr) != LDNS_RR_CLASS_IN ||
        ldns_rr_rd_count(rr) != 1 || ldns_dname_compare(ldns_rr_owner(rr), current) != 0)
      continue;
    const ldns_rdf* data = ldns_rr_rdf(rr, 0);
    const size_t size = ldns_rdf_size(data);
    if (size != (qtype == LDNS_RR_TYPE_A ? 4u : 16u)) continue;
    const std::span<const uint8_t> addr(ldns_rdf_data(data), size);
    const AddressClass cls = ClassifyAddress(addr);
    if (cls == AddressClass::kNever || (cls == AddressClass::kPrivate && !matched.any_private) ||
        kept == kMaxAddressesPerName) {
      ++dropped;
      continue;
    }
    ++kept;
    push(rr);
    const uint32_t ttl = std::max(std::min(ldns_rr_ttl(rr), kTtlCap), kTtlFloor);
    for (size_t r = 0; r < matched.rules.size(); ++r) {
      const policy::CompiledRule& rule = *matched.rules[r];
      if (cls == AddressClass::kPrivate && !rule.allow_private) continue;
      Grant grant;
      grant.family = size == 4 ? AF_INET : AF_INET6;
      std::copy(addr.begin(), addr.end(), grant.addr.begin());
      grant.ports = rule.ports;
      grant.tcp = rule.tcp;
      grant.udp = rule.udp;
      grant.rule = matched.indexes[r];
      grant.name = out.decision->name;
      grant.ttl = ttl;
      out.grants.push_back(std::move(grant));
    }
  }
  out.decision->reason =
      "allowed name; " + std::to_string(kept) + " address" + (kept == 1 ? "" : "es") +
      (dropped ? ", " + std::to_string(dropped) + " dropped (private, reserved or over the cap)" : std::string());
  finish(std::move(reply));
  return out;
}

// ---- upstream sockets --------------------------------------------------------

namespace {

socklen_t SockaddrOf(const policy::DnsUpstream& upstream, sockaddr_storage* ss) {
  *ss = {};
  if (upstream.ipv4) {
    auto* sin = reinterpret_cast<sockaddr_in*>(ss);
    sin->sin_family = AF_INET;
    sin->sin_port = htons(upstream.port);
    std::memcpy(&sin->sin_addr, upstream.addr.data() + 12, 4);
    return sizeof *sin;
  }
  auto* sin6 = reinterpret_cast<sockaddr_in6*>(ss);
  sin6->sin6_family = AF_INET6;
  sin6->sin6_port = htons(upstream.port);
  std::memcpy(&sin6->sin6_addr, upstream.addr.data(), 16);
  return sizeof *sin6;
}

// poll() until `events` or the deadline; false on timeout.
bool WaitFor(int fd, short events, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

Status ReadAll(int fd, uint8_t* buf, size_t size, std::chrono::steady_clock::time_point deadline) {
  size_t got = 0;
  while (got < size) {
    if (!WaitFor(fd, POLLIN, deadline)) return Error{"timed out reading the TCP reply"};
    const ssize_t n = ::recv(fd, buf + got, size - got, MSG_DONTWAIT);
    if (n == 0) return Error{"connection closed mid-reply"};
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return SysError("recv");
    }
    got += static_cast<size_t>(n);
  }
  return {};
}

}  // namespace

Result<std::vector<uint8_t>> SocketUpstreamClient::Exchange(const policy::DnsUpstream& upstream,
                                                            std::span<const uint8_t> query, Transport transport) {
  sockaddr_storage ss;
  const socklen_t len = SockaddrOf(upstream, &ss);
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  Pkt sent = Parse(query);
  if (!sent) return Error{"the query to forward does not parse"};
  const int type = transport == Transport::kUdp ? SOCK_DGRAM : SOCK_STREAM;
  UniqueFd fd(::socket(ss.ss_family, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return SysError("socket");
  // Connected: the kernel drops datagrams from any other address or port,
  // and picks a random source port.
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0 && errno != EINPROGRESS)
    return SysError("connect");
  if (transport == Transport::kUdp) {
    if (::send(fd.get(), query.data(), query.size(), 0) != static_cast<ssize_t>(query.size())) return SysError("send");
    std::vector<uint8_t> buf(65535);
    for (;;) {
      if (!WaitFor(fd.get(), POLLIN, deadline)) return Error{"no reply in time"};
      const ssize_t n = ::recv(fd.get(), buf.data(), buf.size(), 0);
      if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) continue;
        return SysError("recv");
      }
      Pkt got = Parse(std::span<const uint8_t>(buf.data(), static_cast<size_t>(n)));
      if (!got || !Answers(sent.get(), got.get())) continue;  // not ours (spoofed or stale): keep waiting
      buf.resize(static_cast<size_t>(n));
      return buf;
    }
  }
  if (!WaitFor(fd.get(), POLLOUT, deadline)) return Error{"TCP connect timed out"};
  int so_error = 0;
  socklen_t so_len = sizeof so_error;
  ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &so_error, &so_len);
  if (so_error) return SysError("TCP connect", so_error);
  std::vector<uint8_t> framed;
  framed.push_back(static_cast<uint8_t>(query.size() >> 8));
  framed.push_back(static_cast<uint8_t>(query.size()));
  framed.insert(framed.end(), query.begin(), query.end());
  size_t sent_bytes = 0;
  while (sent_bytes < framed.size()) {
    if (!WaitFor(fd.get(), POLLOUT, deadline)) return Error{"timed out sending over TCP"};
    const ssize_t n = ::send(fd.get(), framed.data() + sent_bytes, framed.size() - sent_bytes, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return SysError("send");
    }
    sent_bytes += static_cast<size_t>(n);
  }
  uint8_t size_bytes[2];
  CORDON_TRY(ReadAll(fd.get(), size_bytes, 2, deadline));
  std::vector<uint8_t> reply(static_cast<size_t>(size_bytes[0] << 8 | size_bytes[1]));
  CORDON_TRY(ReadAll(fd.get(), reply.data(), reply.size(), deadline));
  Pkt got = Parse(reply);
  if (!got || !Answers(sent.get(), got.get())) return Error{"the TCP reply does not answer the query"};
  return reply;
}

std::vector<policy::DnsUpstream> ResolvConfUpstreams(const std::string& path) {
  std::vector<policy::DnsUpstream> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string keyword, address;
    if (!(words >> keyword >> address) || keyword != "nameserver") continue;
    std::string error;
    // resolv.conf spells IPv6 bare; a scope (%eth0) is not supported.
    auto upstream =
        policy::ParseDnsUpstream(address.find(':') != std::string::npos ? "[" + address + "]" : address, &error);
    if (upstream) out.push_back(*upstream);
  }
  return out;
}

}  // namespace cordon::dns
