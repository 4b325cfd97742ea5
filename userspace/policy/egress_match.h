// The egress matcher of the BPF programs (bpf/lib/egress_match.bpf.h) over a
// compiled policy's map image, in userspace: for the retroactive check, which
// judges connections that predate an attach, and for tests without root.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "policy/compiler.h"

namespace cordon {

// The decision of bpf/lib/egress_match.bpf.h for one destination.
struct EgressDecision {
  bool allowed = false;
  uint32_t rule = 0;    // allowed: the deciding rule; denied: the rule whose prefix matched the address (0: none)
  uint8_t reason = 0;   // denied: CORDON_REASON_NO_RULE or CORDON_REASON_PORT
};

// The egress matcher of the BPF programs over a compiled policy's map image:
// longest-prefix match of the 16-byte address (IPv4 as ::ffff:a.b.c.d) in
// addr_entries, then of (port set, protocol, port) in port_entries. `protocol`
// is the socket's IPPROTO_*: MPTCP is judged as tcp and UDP-Lite as udp, as
// cordon_rule_proto does; every other protocol is denied. Built once, each
// decision costs at most 129 + 57 hash lookups.
class EgressMatcher {
 public:
  explicit EgressMatcher(const policy::CompiledPolicy& policy);
  ~EgressMatcher();
  EgressMatcher(const EgressMatcher&) = delete;
  EgressMatcher& operator=(const EgressMatcher&) = delete;

  EgressDecision Decide(const std::array<uint8_t, 16>& addr, uint16_t port, uint32_t protocol) const;

 private:
  struct Tables;
  std::unique_ptr<Tables> tables_;
};

}  // namespace cordon
