#include "policy/egress_match.h"

#include <netinet/in.h>

#include <functional>
#include <map>
#include <string>
#include <unordered_map>

#include "abi/cordon_event.h"
#include "abi/cordon_net.h"

namespace cordon {

namespace {

#ifndef IPPROTO_MPTCP
#define IPPROTO_MPTCP 262
#endif

// cordon_rule_proto of bpf/lib/egress_match.bpf.h.
uint8_t RuleProto(uint32_t protocol) {
  if (protocol == IPPROTO_MPTCP) return IPPROTO_TCP;
  if (protocol == IPPROTO_UDPLITE) return IPPROTO_UDP;
  return protocol > 255 ? 255 : static_cast<uint8_t>(protocol);
}

// The first `bits` bits of data[0..n), the rest zeroed: an LPM trie key's
// significant part.
std::string Masked(const uint8_t* data, size_t n, uint32_t bits) {
  std::string out(reinterpret_cast<const char*>(data), n);
  for (size_t i = 0; i < n; ++i) {
    if (bits >= 8 * (i + 1)) continue;
    uint32_t keep = bits > 8 * i ? bits - 8 * i : 0;
    out[i] = static_cast<char>(static_cast<uint8_t>(out[i]) & static_cast<uint8_t>(0xff00 >> keep));
  }
  return out;
}

// An LPM trie as a hash table per prefix length, longest first.
template <typename V>
class Lpm {
 public:
  void Insert(uint32_t prefixlen, const uint8_t* data, size_t n, const V& value) {
    by_length_[prefixlen].emplace(Masked(data, n, prefixlen), value);  // first wins, as EvaluateImage
  }
  const V* Find(const uint8_t* data, size_t n) const {
    for (const auto& [length, table] : by_length_) {
      auto it = table.find(Masked(data, n, length));
      if (it != table.end()) return &it->second;
    }
    return nullptr;
  }

 private:
  std::map<uint32_t, std::unordered_map<std::string, V>, std::greater<>> by_length_;
};

}  // namespace

struct EgressMatcher::Tables {
  Lpm<cordon_addr_value> addr;
  Lpm<cordon_port_value> port;
};

EgressMatcher::EgressMatcher(const policy::CompiledPolicy& policy) : tables_(std::make_unique<Tables>()) {
  for (const auto& [key, value] : policy.addr_entries)
    if (key.prefixlen <= CORDON_ADDR_MAX_PREFIX) tables_->addr.Insert(key.prefixlen, key.addr, 16, value);
  for (const auto& [key, value] : policy.port_entries) {
    if (key.prefixlen > CORDON_PORT_KEY_BITS) continue;
    const uint8_t data[7] = {key.port_set[0], key.port_set[1], key.port_set[2], key.port_set[3],
                             key.proto,       key.port[0],     key.port[1]};
    tables_->port.Insert(key.prefixlen, data, sizeof data, value);
  }
}

EgressMatcher::~EgressMatcher() = default;

EgressDecision EgressMatcher::Decide(const std::array<uint8_t, 16>& addr, uint16_t port, uint32_t protocol) const {
  const uint8_t proto = RuleProto(protocol);
  EgressDecision d;
  const cordon_addr_value* av = tables_->addr.Find(addr.data(), addr.size());
  if (!av) {
    d.reason = CORDON_REASON_NO_RULE;
    return d;
  }
  d.rule = av->rule;
  if (av->port_set == CORDON_PORT_SET_ALL) {
    if (proto == IPPROTO_TCP || proto == IPPROTO_UDP) {
      d.allowed = true;
    } else {
      d.reason = CORDON_REASON_PORT;
    }
    return d;
  }
  const uint8_t probe[7] = {static_cast<uint8_t>(av->port_set >> 24), static_cast<uint8_t>(av->port_set >> 16),
                            static_cast<uint8_t>(av->port_set >> 8),  static_cast<uint8_t>(av->port_set),
                            proto, static_cast<uint8_t>(port >> 8), static_cast<uint8_t>(port & 0xff)};
  const cordon_port_value* pv = tables_->port.Find(probe, sizeof probe);
  if (!pv) {
    d.reason = CORDON_REASON_PORT;
    return d;
  }
  d.allowed = true;
  d.rule = pv->rule;
  return d;
}

}  // namespace cordon
