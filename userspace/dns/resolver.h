// cordon's filtering DNS resolver, the core: one sandbox's name rules
// (spec.network.egress[].host) and upstreams in, a client's DNS message in,
// the reply and the addresses it allows out. No listening sockets here (see
// dns/server.h); the upstream exchange is the only I/O.
//
// What it answers (decided here, documented in README "Egress by name"):
// - Only opcode QUERY, exactly one question, class IN; a message that does not
//   parse but has a 12-byte header gets FORMERR, shorter ones and responses
//   (QR set) are dropped; another opcode gets NOTIMP.
// - A name no host rule allows gets REFUSED and is never forwarded: no query
//   for an unlisted name leaves the host.
// - An allowed name is forwarded for A and AAAA only; any other type (HTTPS,
//   SVCB, TXT, MX, ...) is answered here with no records (NOERROR, empty:
//   clients fall back to A/AAAA), since such records carry addresses or data
//   no rule vetted (HTTPS ipv4hint).
// - CNAME: only the queried name must be allowed. The chain in the upstream's
//   answer is followed from the queried name (at most kMaxCnameHops); its
//   CNAME records are passed, and the addresses of its last name are
//   filtered and granted under the queried name's rules. Records off the
//   chain, authority and additional records, and DNSSEC records are dropped.
// - Addresses: unspecified, multicast, broadcast and reserved ones are never
//   kept; loopback, private, CGNAT, link-local (with the metadata address
//   169.254.169.254), unique-local (fd00:ec2::254) ones only for a rule with
//   allowPrivate. At most kMaxAddressesPerName per name, in the upstream's
//   order. TTLs are capped at kTtlCap in the reply.
// - Grants: each kept address under each rule that matches the name, for
//   max(TTL, kTtlFloor) seconds; whoever writes them into the kernel adds
//   kGrantGraceSeconds (a client may connect a moment after the TTL ran out).
// - EDNS: the upstream is asked with EDNS (payload kEdnsPayload, no DO); the
//   client's reply carries an OPT record if its query did. A UDP reply larger
//   than the client's payload (512 without EDNS) is truncated: TC set, no
//   answer records. The upstream's TC answer is asked again over TCP.
// - Anti-spoofing: each upstream query has a random ID (getrandom) from a
//   fresh connected socket (the kernel picks a random source port); a reply
//   whose ID, QR bit or question differ is ignored.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "policy/compiler.h"
#include "util/result.h"

namespace cordon::dns {

constexpr size_t kMaxAddressesPerName = 16;
constexpr uint32_t kTtlFloor = 30;           // seconds a grant lasts at least
constexpr uint32_t kTtlCap = 3600;           // longest TTL told and granted
constexpr uint32_t kGrantGraceSeconds = 30;  // added by the writer of grants
constexpr int kMaxCnameHops = 8;
constexpr uint16_t kEdnsPayload = 1232;  // DNS flag day 2020

// One address an answer allows, under one rule.
struct Grant {
  int family = 0;                        // AF_INET or AF_INET6
  std::array<uint8_t, 16> addr{};        // IPv4 in the first 4 bytes
  std::vector<policy::PortRange> ports;  // empty: every port
  bool tcp = true, udp = true;
  uint32_t rule = 0;  // 1-based spec.network.egress index
  std::string name;   // the queried name (presentation form)
  uint32_t ttl = 0;   // seconds, >= kTtlFloor, <= kTtlCap
  std::string AddressText() const;
};

// What a dns.query event says about one query.
struct QueryDecision {
  std::string name;  // presentation form, lower case, no trailing dot; "" if unparsable
  uint16_t qtype = 0;
  bool allowed = false;
  std::string reason;      // why (refused: "no rule allows the name", ...)
  uint32_t addresses = 0;  // distinct addresses answered (set by the server)
};

// "A", "AAAA", "TXT", ... or "TYPE<n>" (RFC 3597).
std::string QueryTypeName(uint16_t qtype);

struct Answer {
  std::vector<uint8_t> reply;  // empty: send nothing (dropped)
  std::vector<Grant> grants;   // to be in force before the reply is sent
  std::optional<QueryDecision> decision;
};

enum class Transport { kUdp, kTcp };

// How the resolver reaches its upstreams; replaceable in tests.
class UpstreamClient {
 public:
  virtual ~UpstreamClient() = default;
  // Sends `query` (wire form) to `upstream` over UDP or TCP and returns the
  // first reply whose ID and question match `query` (the caller checks them
  // again), or an error (timeout, refused connection, ...).
  virtual Result<std::vector<uint8_t>> Exchange(const policy::DnsUpstream& upstream, std::span<const uint8_t> query,
                                                Transport transport) = 0;
};

// Real sockets: a fresh connected socket per query, poll() with `timeout`.
class SocketUpstreamClient : public UpstreamClient {
 public:
  explicit SocketUpstreamClient(std::chrono::milliseconds timeout = std::chrono::milliseconds(2000))
      : timeout_(timeout) {}
  Result<std::vector<uint8_t>> Exchange(const policy::DnsUpstream& upstream, std::span<const uint8_t> query,
                                        Transport transport) override;

 private:
  std::chrono::milliseconds timeout_;
};

// The nameservers of a resolv.conf (for a policy without dns.upstream);
// loopback ones included (the caller decides).
std::vector<policy::DnsUpstream> ResolvConfUpstreams(const std::string& path = "/etc/resolv.conf");

class Resolver {
 public:
  // `rules`: the policy's egress rules (only host rules are used; indexes are
  // kept). `upstreams`: tried in order. `client` outlives the resolver.
  Resolver(std::vector<policy::CompiledRule> rules, std::vector<policy::DnsUpstream> upstreams, UpstreamClient* client);

  // One client message (for TCP without the 2-byte length). Thread-safe.
  Answer Handle(std::span<const uint8_t> query, Transport transport) const;
  // SERVFAIL to `query` (empty if it does not parse): what a client gets
  // when the addresses of its answer could not be granted.
  static std::vector<uint8_t> ServerFailure(std::span<const uint8_t> query);
  // An empty truncated reply to `query` (NOERROR, TC set, the question and
  // an OPT record if it had one; empty if it does not parse as a query): a
  // client asks again over TCP.
  static std::vector<uint8_t> Truncated(std::span<const uint8_t> query);

 private:
  std::vector<policy::CompiledRule> rules_;
  std::vector<policy::DnsUpstream> upstreams_;
  UpstreamClient* client_;
};

// Address classes for the answer filter (addr: 4 or 16 bytes).
enum class AddressClass { kPublic, kPrivate, kNever };
AddressClass ClassifyAddress(std::span<const uint8_t> addr);

}  // namespace cordon::dns
