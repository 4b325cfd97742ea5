// The policy compiler: pure. A parsed policy in, an image of the BPF map
// contents out (bpf/abi/cordon_net.h). No kernel access; tested without
// privileges. The same image can be evaluated in userspace (Evaluate*), which
// is the reference the kernel's decisions are checked against.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "abi/cordon_net.h"
#include "policy/cidr.h"
#include "policy/diagnostic.h"
#include "policy/parser.h"

namespace cordon::policy {

constexpr uint8_t kProtoTcp = 6;
constexpr uint8_t kProtoUdp = 17;

struct CompiledRule {           // one egress rule after validation (for display, evaluation)
  std::string name;             // may be empty
  Prefix prefix;
  std::vector<PortRange> ports; // empty = every port
  bool tcp = true;
  bool udp = true;
};

struct CompiledPolicy {
  std::string name;                 // metadata.name
  uint32_t mode = CORDON_MODE_ENFORCE;
  uint32_t families = 0;            // bits of enum cordon_family
  uint32_t sock_protos = 0;         // bits of enum cordon_sock_proto
  std::vector<CompiledRule> rules;  // in file order; rule index i+1 in events
  // Map images. addr_entries: at most one per distinct prefix. port_entries:
  // port sets deduplicated (identical port/protocol sets share an id).
  std::vector<std::pair<cordon_addr_key, cordon_addr_value>> addr_entries;
  std::vector<std::pair<cordon_port_key, cordon_port_value>> port_entries;
};

// Validates and compiles. Errors (each naming file, line and field, all of
// them reported, in file order): wrong apiVersion or kind, missing/invalid
// metadata.name, unknown mode, unknown or duplicate family / protocol / extra
// protocol, missing or bad CIDR, bad port or range, duplicate or overlapping
// ports within a rule, explicit empty `ports: []` / `protocols: []` (proto3
// cannot tell them from omitted, and "no ports" would allow nothing), duplicate
// rule names, more than 100,000 rules. On error returns false with *diags
// non-empty and *out untouched.
//
// The image: one addr entry per distinct prefix; its port set folds in every
// rule whose prefix contains it, and is CORDON_PORT_SET_ALL when that covers
// every port (0-65535) of both tcp and udp; its rule is the first rule with
// exactly that prefix. Port sets are numbered from 1 in order of first use,
// deduplicated by their (protocol, port) content. Port entries are grouped by
// set, tcp then udp, ascending; each entry's rule allows every port of its
// block (for the prefix that first produced the set: with sharing, not
// necessarily for every address using it).
bool Compile(const ParsedPolicy& parsed, CompiledPolicy* out, Diagnostics* diags);

// The built-in default: unix, inet and inet6 sockets may be created, no
// egress at all (loopback included), enforce mode, name "default".
CompiledPolicy DefaultPolicy();
// Its YAML text (shown by `cordon policy check --default`).
const char* DefaultPolicyYaml();

// Reference decision from the map image, emulating LPM semantics exactly
// as the BPF programs use it. addr is 16 bytes (IPv4 as ::ffff:a.b.c.d).
// *rule receives the deciding rule (1-based) when allowed: the port entry's
// rule, or the addr entry's for CORDON_PORT_SET_ALL. A linear scan: meant
// for tests and one-off queries, not bulk use.
// Agrees with EvaluateRules for every protocol: only tcp and udp are ever
// allowed (the kernel maps MPTCP to tcp and UDP-Lite to udp before asking).
bool EvaluateImage(const CompiledPolicy& policy, const std::array<uint8_t, 16>& addr, uint16_t port,
                   uint8_t proto, uint32_t* rule = nullptr);

// Reference decision from the rules directly: allowed iff some rule's prefix
// contains addr, lists the protocol, and lists the port (or all ports).
bool EvaluateRules(const CompiledPolicy& policy, const std::array<uint8_t, 16>& addr, uint16_t port,
                   uint8_t proto);

}  // namespace cordon::policy
