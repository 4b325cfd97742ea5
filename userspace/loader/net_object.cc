#include "loader/net_object.h"

#include <bpf/bpf.h>
#include <limits.h>
#include <stdlib.h>

#include <algorithm>
#include <cstring>

#include "loader/kernel_features.h"
#include "sys/libbpf_log.h"
#include "sys/map_batch.h"
#include "util/fs.h"

namespace cordon {

struct NetworkInstancePool::Instances {
  mutable std::mutex mu;
  std::vector<NetSkel> ready;
};

namespace {

const Hook kAllHooks[] = {
    {"link_sock_create", [](cordon_net* s) { return s->progs.cordon_sock_create; }},
    {"link_bind4", [](cordon_net* s) { return s->progs.cordon_bind4; }, false, true},
    {"link_bind6", [](cordon_net* s) { return s->progs.cordon_bind6; }, false, true},
    {"link_ingress", [](cordon_net* s) { return s->progs.cordon_ingress; }, false, true},
    {"link_egress", [](cordon_net* s) { return s->progs.cordon_egress; }, false, true},
    {"link_setsockopt", [](cordon_net* s) { return s->progs.cordon_setsockopt; }, false, true},
    {"link_dev", [](cordon_net* s) { return s->progs.cordon_dev; }, false, true},
    {"link_sysctl", [](cordon_net* s) { return s->progs.cordon_sysctl; }, false, true},
    {"link_connect4", [](cordon_net* s) { return s->progs.cordon_connect4; }},
    {"link_connect6", [](cordon_net* s) { return s->progs.cordon_connect6; }},
    {"link_sendmsg4", [](cordon_net* s) { return s->progs.cordon_sendmsg4; }},
    {"link_sendmsg6", [](cordon_net* s) { return s->progs.cordon_sendmsg6; }},
    // DNS redirection's way back (bpf/net/dns.bpf.c); they never refuse.
    {"link_recvmsg4", [](cordon_net* s) { return s->progs.cordon_recvmsg4; }, false, true},
    {"link_recvmsg6", [](cordon_net* s) { return s->progs.cordon_recvmsg6; }, false, true},
    {"link_getpeername4", [](cordon_net* s) { return s->progs.cordon_getpeername4; }, false, true},
    {"link_getpeername6", [](cordon_net* s) { return s->progs.cordon_getpeername6; }, false, true},
    {"link_connect_unix", [](cordon_net* s) { return s->progs.cordon_connect_unix; }, true},
    {"link_sendmsg_unix", [](cordon_net* s) { return s->progs.cordon_sendmsg_unix; }, true},
};

const PolicyMap kPolicyMapList[] = {
    {"sandbox_cfg", [](cordon_net* s) { return s->maps.sandbox_cfg; }},
    {"addr_rules", [](cordon_net* s) { return s->maps.addr_rules; }},
    {"port_rules", [](cordon_net* s) { return s->maps.port_rules; }},
    {"unix_rules", [](cordon_net* s) { return s->maps.unix_rules; }},
    {"listen_addr_rules", [](cordon_net* s) { return s->maps.listen_addr_rules; }},
    {"listen_port_rules", [](cordon_net* s) { return s->maps.listen_port_rules; }},
    {"dev_rules", [](cordon_net* s) { return s->maps.dev_rules; }},
    {"egress_budget", [](cordon_net* s) { return s->maps.egress_budget; }},
    // Name grants belong to the policy that had the rule: a replacement
    // starts with none (bpf/abi/cordon_dns.h).
    {"grants", [](cordon_net* s) { return s->maps.grants; }},
};

// Sysctls a sandbox may read (cgroup/sysctl; writes are always refused): what
// runtimes and shells read to size themselves, no host configuration.
constexpr const char* kSafeSysctls[] = {
    "kernel/ostype",         "kernel/osrelease",      "kernel/version",
    "kernel/hostname",       "kernel/domainname",     "kernel/ngroups_max",
    "kernel/pid_max",        "kernel/threads-max",    "kernel/cap_last_cap",
    "kernel/overflowuid",    "kernel/overflowgid",    "kernel/random/uuid",
    "kernel/random/boot_id", "kernel/random/entropy_avail", "kernel/random/poolsize",
    "vm/overcommit_memory",  "vm/max_map_count",      "net/core/somaxconn",
    "fs/file-max",           "fs/nr_open",            "fs/pipe-max-size",
    "net/ipv4/ip_local_port_range",
};
static_assert(sizeof kSafeSysctls / sizeof kSafeSysctls[0] <= CORDON_SYSCTL_SAFE_MAX);

}  // namespace

const std::vector<Hook>& Hooks() {
  static const std::vector<Hook> hooks = [] {
    std::vector<Hook> out;
    for (const auto& hook : kAllHooks)
      if (!hook.unix_hook || UnixHooks().available()) out.push_back(hook);
    return out;
  }();
  return hooks;
}

const std::vector<PolicyMap>& PolicyMaps() {
  static const std::vector<PolicyMap> maps(std::begin(kPolicyMapList), std::end(kPolicyMapList));
  return maps;
}

// Unix socket paths granted write: each FileRule with write right, as
// written and (if it differs) with its symlinks resolved, since the cgroup
// unix hooks compare the address string before the kernel resolves it.
std::vector<UnixRuleEntry> UnixRuleEntries(const policy::CompiledPolicy& policy) {
  std::vector<UnixRuleEntry> out;
  auto add = [&](const std::string& path, uint32_t rule) {
    // "P\0" (the path itself) and "P/" (below it); "/" covers everything.
    std::string base = path == "/" ? "" : path;
    for (const std::string& key_str : {base + std::string(1, '\0'), base + "/"}) {
      if (base.empty() && key_str[0] == '\0') continue;
      if (key_str.size() > CORDON_UNIX_PATH_MAX) continue;  // longer than any sun_path
      cordon_unix_key key = {};
      key.prefixlen = static_cast<uint32_t>(key_str.size() * 8);
      std::memcpy(key.path, key_str.data(), key_str.size());
      out.push_back({key, cordon_unix_value{rule}});
    }
  };
  for (const auto& rule : policy.file_rules) {
    if (!(rule.rights & CORDON_FILE_WRITE)) continue;
    add(rule.path, rule.rule);
    char resolved[PATH_MAX];
    if (::realpath(rule.path.c_str(), resolved) && rule.path != resolved) add(resolved, rule.rule);
  }
  return out;
}

Result<NetSkel> OpenSkeleton(size_t addr_entries, size_t port_entries, size_t unix_entries, size_t listen_entries,
                             uint32_t ringbuf_bytes, int counters_fd, int events_fd, int state_fd, int repeats_fd,
                             int seq_fd, const EgressMaps& egress, int resolver_fd) {
  LibbpfLogCapture log;
  NetSkel skel(cordon_net__open());
  if (!skel) return SysError("open BPF object" + log.Tail());
  CORDON_TRY(RandomBytes(skel->rodata->cordon_repeat_seed, sizeof skel->rodata->cordon_repeat_seed));
  auto entries = [](size_t n) { return static_cast<uint32_t>(std::max<size_t>(1, n)); };
  if (bpf_map__set_max_entries(skel->maps.addr_rules, entries(addr_entries)) ||
      bpf_map__set_max_entries(skel->maps.port_rules, entries(port_entries)) ||
      bpf_map__set_max_entries(skel->maps.unix_rules, entries(unix_entries)) ||
      bpf_map__set_max_entries(skel->maps.listen_addr_rules, entries(listen_entries)) ||
      bpf_map__set_max_entries(skel->maps.listen_port_rules, entries(listen_entries)) ||
      bpf_map__set_max_entries(skel->maps.events, ringbuf_bytes))
    return SysError("size BPF maps");
  const UnixHookTypes& unix_types = UnixHooks();
  if (unix_types.available()) {
    if (bpf_program__set_expected_attach_type(skel->progs.cordon_connect_unix,
                                              static_cast<bpf_attach_type>(unix_types.connect)) ||
        bpf_program__set_expected_attach_type(skel->progs.cordon_sendmsg_unix,
                                              static_cast<bpf_attach_type>(unix_types.sendmsg)))
      return SysError("set the unix hooks' attach types");
  } else if (bpf_program__set_autoload(skel->progs.cordon_connect_unix, false) ||
             bpf_program__set_autoload(skel->progs.cordon_sendmsg_unix, false)) {
    return SysError("leave out the unix hooks");
  }
  if (counters_fd >= 0 && bpf_map__reuse_fd(skel->maps.counters, counters_fd))
    return SysError("reuse the sandbox's counters map");
  if (events_fd >= 0 && bpf_map__reuse_fd(skel->maps.events, events_fd))
    return SysError("reuse the sandbox's event ring buffer");
  if (state_fd >= 0 && bpf_map__reuse_fd(skel->maps.sandbox_state, state_fd))
    return SysError("reuse the sandbox's containment state");
  if (repeats_fd >= 0 && bpf_map__reuse_fd(skel->maps.repeats, repeats_fd))
    return SysError("reuse the sandbox's repeats map");
  if (seq_fd >= 0 && bpf_map__reuse_fd(skel->maps.seq, seq_fd)) return SysError("reuse the sandbox's record sequence");
  if (egress.usage_fd >= 0 && bpf_map__reuse_fd(skel->maps.egress_usage, egress.usage_fd))
    return SysError("reuse the sandbox's egress bytes");
  if (egress.dests_fd >= 0 && bpf_map__reuse_fd(skel->maps.egress_dests, egress.dests_fd))
    return SysError("reuse the sandbox's egress destinations");
  if (resolver_fd >= 0 && bpf_map__reuse_fd(skel->maps.resolver, resolver_fd))
    return SysError("reuse the sandbox's resolver setting");
  if (int err = cordon_net__load(skel.get()))
    return Error{"load BPF programs into the kernel (is this a kernel with BTF and cgroup BPF?)" + log.Tail(), -err};
  // The readable sysctls are the same for every policy: written once here, so
  // prepared instances have them too.
  for (const char* name : kSafeSysctls) {
    cordon_sysctl_key key = {};
    std::strncpy(key.name, name, sizeof key.name - 1);
    uint32_t one = 1;
    if (bpf_map_update_elem(bpf_map__fd(skel->maps.sysctl_safe), &key, &one, BPF_ANY))
      return SysError("write sysctl_safe");
  }
  return skel;
}

size_t ListenEntries(const policy::CompiledPolicy& policy) {
  return std::max(policy.listen_addr_entries.size(), policy.listen_port_entries.size());
}

Result<NetSkel> FreshSkeleton(NetworkInstancePool* pool, const policy::CompiledPolicy& policy, size_t unix_entries,
                              bool* prepared) {
  *prepared = false;
  if (pool && policy.addr_entries.size() <= kPreparedRuleEntries && policy.port_entries.size() <= kPreparedRuleEntries &&
      unix_entries <= kPreparedUnixEntries && ListenEntries(policy) <= kPreparedListenEntries) {
    NetworkInstancePool::Instances& instances = pool->instances();
    std::lock_guard<std::mutex> lock(instances.mu);
    if (!instances.ready.empty()) {
      *prepared = true;
      NetSkel skel = std::move(instances.ready.back());
      instances.ready.pop_back();
      return skel;
    }
  }
  return OpenSkeleton(policy.addr_entries.size(), policy.port_entries.size(), unix_entries, ListenEntries(policy),
                      kRingbufBytes, -1, -1);
}

NetworkInstancePool::NetworkInstancePool() : instances_(std::make_unique<Instances>()) {}
NetworkInstancePool::~NetworkInstancePool() = default;

Result<size_t> NetworkInstancePool::Fill() {
  size_t loaded = 0;
  while (Ready() < kPreparedInstances) {
    // The rule maps are LPM tries without preallocation: capacity costs nothing until used.
    auto skel = OpenSkeleton(kPreparedRuleEntries, kPreparedRuleEntries, kPreparedUnixEntries,
                             kPreparedListenEntries, kRingbufBytes, -1, -1);
    if (!skel) return skel.error().Wrap("prepare a network instance");
    std::lock_guard<std::mutex> lock(instances_->mu);
    instances_->ready.push_back(std::move(*skel));
    loaded++;
  }
  return loaded;
}

size_t NetworkInstancePool::Ready() const {
  std::lock_guard<std::mutex> lock(instances_->mu);
  return instances_->ready.size();
}

Status FillPolicyMaps(cordon_net* skel, const policy::CompiledPolicy& policy, uint64_t sandbox_id,
                      const std::vector<UnixRuleEntry>& unix_entries, uint32_t unix_flags,
                      const std::vector<DeviceRule>& devices) {
  // spec.devices, then the loader's own (cordon run's pty); the same device
  // twice gets the union of the accesses.
  std::vector<DeviceRule> all;
  for (const auto& d : policy.devices) all.push_back({d.type, d.major, d.minor, d.access});
  all.insert(all.end(), devices.begin(), devices.end());
  if (all.size() > CORDON_DEV_RULES_MAX)
    return Error{"too many allowed devices: " + std::to_string(all.size()) + " (the limit is " +
                 std::to_string(CORDON_DEV_RULES_MAX) + ")"};
  struct cordon_sandbox_cfg cfg = {};
  cfg.sandbox_id = sandbox_id;
  cfg.mode = policy.mode;
  cfg.families = policy.families;
  cfg.sock_protos = policy.sock_protos;
  cfg.layout_version = CORDON_LAYOUT_VERSION;
  cfg.unix_flags = unix_flags;
  cfg.contain_after = policy.contain_after;
  cfg.contain_kinds = policy.contain_kinds;
  uint32_t zero = 0;
  if (bpf_map_update_elem(bpf_map__fd(skel->maps.sandbox_cfg), &zero, &cfg, BPF_ANY))
    return SysError("write sandbox_cfg");
  const cordon_egress_budget budget = EgressBudgetOf(policy.resources);
  if (bpf_map_update_elem(bpf_map__fd(skel->maps.egress_budget), &zero, &budget, BPF_ANY))
    return SysError("write egress_budget");
  // The compiler's images hold each key once; the maps are new and empty.
  CORDON_TRY(UpdateMapEntries(bpf_map__fd(skel->maps.addr_rules), policy.addr_entries, "addr_rules"));
  CORDON_TRY(UpdateMapEntries(bpf_map__fd(skel->maps.port_rules), policy.port_entries, "port_rules"));
  CORDON_TRY(UpdateMapEntries(bpf_map__fd(skel->maps.unix_rules), unix_entries, "unix_rules"));
  CORDON_TRY(UpdateMapEntries(bpf_map__fd(skel->maps.listen_addr_rules), policy.listen_addr_entries,
                              "listen_addr_rules"));
  CORDON_TRY(UpdateMapEntries(bpf_map__fd(skel->maps.listen_port_rules), policy.listen_port_entries,
                              "listen_port_rules"));
  for (const DeviceRule& device : all) {
    if (device.type != 'c' && device.type != 'b') return Error{"allowed device type must be 'c' or 'b'"};
    cordon_dev_key key = {};
    key.type = device.type == 'c' ? BPF_DEVCG_DEV_CHAR : BPF_DEVCG_DEV_BLOCK;
    key.major = device.major;
    key.minor = device.minor;
    uint32_t access = device.access & (DeviceRule::kMknod | DeviceRule::kRead | DeviceRule::kWrite);
    uint32_t merged = access;
    uint32_t existing = 0;
    if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.dev_rules), &key, &existing) == 0) merged |= existing;
    if (bpf_map_update_elem(bpf_map__fd(skel->maps.dev_rules), &key, &merged, BPF_ANY))
      return SysError("write dev_rules");
  }
  return {};
}

cordon_egress_budget EgressBudgetOf(const policy::ResourceLimits& limits) {
  cordon_egress_budget budget = {};
  if (!limits.egress_bytes) return budget;
  budget.limit = *limits.egress_bytes;
  // warnAt of the limit, at least one byte (0 means "no warn record").
  if (limits.warn_at_percent)
    budget.warn = std::max<uint64_t>(
        1, static_cast<uint64_t>(static_cast<unsigned __int128>(budget.limit) * *limits.warn_at_percent / 100));
  return budget;
}

Result<UniqueFd> ProgramOfLink(int link_fd) {
  struct bpf_link_info linfo = {};
  uint32_t len = sizeof(linfo);
  if (bpf_obj_get_info_by_fd(link_fd, &linfo, &len)) return SysError("inspect link");
  UniqueFd prog(bpf_prog_get_fd_by_id(linfo.prog_id));
  if (!prog.valid()) return SysError("open program of link");
  return prog;
}

}  // namespace cordon
