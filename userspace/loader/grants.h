// Egress by name, the kernel side (bpf/abi/cordon_dns.h): the addresses
// cordon's resolver answered, granted to one sandbox for a name rule's ports
// and protocols until the answer's TTL runs out, and where a sandbox's DNS
// is redirected. The resolver calls these; the programs enforce them.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "abi/cordon_dns.h"
#include "policy/cidr.h"
#include "util/result.h"

namespace cordon {

// A grant allows for max(ttl, kGrantTtlFloorSeconds) + grace seconds: the
// floor keeps a TTL-0 answer usable for the connect that follows it, the
// grace covers a workload that connects (or retries) a little after the TTL.
constexpr uint32_t kGrantTtlFloorSeconds = 5;
constexpr uint32_t kGrantGraceSeconds = 5;
// Longest name the name table keeps (a DNS name is at most 253 characters).
constexpr size_t kGrantNameMax = 253;
// Names one sandbox's table holds.
constexpr uint32_t kGrantNamesMax = 4096;

struct NameGrant {
  int family = 0;                        // AF_INET (address[0..3]) or AF_INET6 (all 16 bytes)
  std::array<uint8_t, 16> address{};     // network order
  std::vector<policy::PortRange> ports;  // the rule's; empty: every port (at most CORDON_GRANT_PORT_RANGES)
  bool tcp = true;
  bool udp = true;
  uint32_t rule_index = 0;   // 1-based egress rule that names the host
  std::string name;          // the name answered (reported in events by its id)
  uint32_t ttl_seconds = 0;  // the record's TTL
  uint32_t grace_seconds = kGrantGraceSeconds;
  // The digest of the policy whose rules the answer was judged by (""
  // unchecked): a grant for a policy no longer in force (replaced since the
  // resolver started) is refused, so that no old rule allows anything.
  std::string policy_digest;
};

// Grants `grant` to the sandbox (cgroup id), until its TTL (above) runs out.
// The same address granted again for the same rule is renewed; for another
// rule it is granted beside it (at most CORDON_GRANT_SLOTS rules at once).
// A full map (CORDON_GRANTS_MAX addresses, after expired ones are removed)
// or name table (kGrantNamesMax names that live grants name, after the names
// none names are removed) is an error: the resolver must then not answer the
// address.
// Under the pin root's lock, so a grant lands in the map of the policy in
// force (a replacement starts with none).
Status GrantAddress(uint64_t sandbox_id, const NameGrant& grant);

// Removes the sandbox's grants that expired by `now_boot_ns` (CLOCK_BOOTTIME;
// the programs refuse expired ones anyway); how many were removed.
Result<size_t> ExpireGrants(uint64_t sandbox_id, uint64_t now_boot_ns);

// A live or expired grant, for `cordon status`.
struct GrantEntry {
  std::array<uint8_t, 16> address{};  // IPv6, or IPv4 as ::ffff:a.b.c.d
  std::string address_text;
  uint32_t rule_index = 0;
  uint32_t name_id = 0;
  std::string name;  // from the sandbox's name table ("" if unknown)
  uint64_t expires_boot_ns = 0;
  bool tcp = false, udp = false;
  std::vector<policy::PortRange> ports;  // empty: every port
};
Result<std::vector<GrantEntry>> ListGrants(uint64_t sandbox_id);

// The name behind a name id of the sandbox's events ("" if unknown).
Result<std::string> GrantName(uint64_t sandbox_id, uint32_t name_id);

// Where the sandbox's DNS goes: every TCP or UDP connect/sendmsg to port 53
// of that family is sent there instead (nullopt: that family's DNS is judged
// by the egress rules, as without a resolver). Addresses in network order.
// `mark` (non-zero): the sandbox's UDP datagrams to the resolver carry it
// (bpf/abi/cordon_dns.h CORDON_RESOLVER_MARK), for the resolver to check.
struct ResolverAddress {
  std::array<uint8_t, 16> ip{};  // IPv4: ip[0..3]
  uint16_t port = 0;             // host order
};
Status SetResolver(uint64_t sandbox_id, const std::optional<ResolverAddress>& v4,
                   const std::optional<ResolverAddress>& v6, uint32_t mark = 0);

}  // namespace cordon
