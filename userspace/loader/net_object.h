// The per-sandbox network object (bpf/net/): its skeleton, its hooks and
// policy maps, loading an instance sized for a policy and filling its maps.
// Internal to the loader: sandbox.cc attaches, pins and replaces instances.
#pragma once

#include <bpf/libbpf.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cordon_net.skel.h"
#include "loader/sandbox.h"
#include "policy/compiler.h"
#include "util/fd.h"
#include "util/result.h"

namespace cordon {

// (Each skeleton has its own deleter: its __destroy is static inline, so a
// template over it would give every signature using it internal linkage.)
struct NetSkelDeleter {
  void operator()(cordon_net* skel) const { cordon_net__destroy(skel); }
};
using NetSkel = std::unique_ptr<cordon_net, NetSkelDeleter>;

struct LinkDeleter {
  void operator()(bpf_link* link) const { bpf_link__destroy(link); }
};
using Link = std::unique_ptr<bpf_link, LinkDeleter>;

// The hooks of a sandbox, in attach order. Socket creation first, so that
// while attaching no socket exists that was created under fewer rules than
// its connect will be judged by.
// The unix hooks exist from kernel 6.7 on and are attached where they exist
// (their programs decide only where BPF LSM does not: cfg.unix_flags).
// Hooks marked `late` were added within a layout, after its first release: a
// sandbox attached by a cordon without them gets them added on replacement.
struct Hook {
  const char* pin;
  bpf_program* (*program)(cordon_net*);
  bool unix_hook = false;
  bool late = false;
};
const std::vector<Hook>& Hooks();  // the hooks this kernel has

// Maps replaced with every policy; counters and events live as long as the
// sandbox so that nothing is lost across a replacement.
struct PolicyMap {
  const char* pin;
  bpf_map* (*map)(cordon_net*);
};
const std::vector<PolicyMap>& PolicyMaps();

using UnixRuleEntry = std::pair<cordon_unix_key, cordon_unix_value>;
// Unix socket paths granted write (see net_object.cc).
std::vector<UnixRuleEntry> UnixRuleEntries(const policy::CompiledPolicy& policy);

// The sandbox's egress accounting (bpf/abi/cordon_net.h), pinned beside its
// counters and shared by its instances; -1: this instance's own.
struct EgressMaps {
  int usage_fd = -1;
  int dests_fd = -1;
};

// Opens the object and sizes its maps; reuses counters/events/state/repeats/seq/egress/resolver when given (fd >= 0).
Result<NetSkel> OpenSkeleton(size_t addr_entries, size_t port_entries, size_t unix_entries, size_t listen_entries,
                             uint32_t ringbuf_bytes, int counters_fd, int events_fd, int state_fd = -1,
                             int repeats_fd = -1, int seq_fd = -1, const EgressMaps& egress = {}, int resolver_fd = -1);

// spec.resources.egressBytes and warnAt as the egress_budget map holds them.
cordon_egress_budget EgressBudgetOf(const policy::ResourceLimits& limits);
// An instance for `policy`: one of `pool`'s if it can hold the policy
// (*prepared = true), else a new one sized for it.
Result<NetSkel> FreshSkeleton(NetworkInstancePool* pool, const policy::CompiledPolicy& policy, size_t unix_entries,
                              bool* prepared);
// The larger of the listen images (both tries get that capacity).
size_t ListenEntries(const policy::CompiledPolicy& policy);

// Writes the policy into a new instance's (empty) maps.
Status FillPolicyMaps(cordon_net* skel, const policy::CompiledPolicy& policy, uint64_t sandbox_id,
                      const std::vector<UnixRuleEntry>& unix_entries, uint32_t unix_flags,
                      const std::vector<DeviceRule>& devices);

// The program a cgroup link runs now.
Result<UniqueFd> ProgramOfLink(int link_fd);

}  // namespace cordon
