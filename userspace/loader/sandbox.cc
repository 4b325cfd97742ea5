#include "loader/sandbox.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cstdarg>
#include <cstring>
#include <memory>
#include <mutex>

#include "abi/cordon_pins.h"
#include "cordon_net.skel.h"
#include "loader/kernel_features.h"
#include "loader/lsm.h"
#include "sys/bpffs.h"
#include "sys/counters.h"
#include "sys/libbpf_log.h"
#include "sys/map_batch.h"
#include "util/fs.h"
#include "util/text.h"

namespace cordon {
namespace {

struct SkelDeleter {
  void operator()(cordon_net* skel) const { cordon_net__destroy(skel); }
};
using NetSkel = std::unique_ptr<cordon_net, SkelDeleter>;

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
const Hook kAllHooks[] = {
    {"link_sock_create", [](cordon_net* s) { return s->progs.cordon_sock_create; }},
    {"link_bind4", [](cordon_net* s) { return s->progs.cordon_bind4; }, false, true},
    {"link_bind6", [](cordon_net* s) { return s->progs.cordon_bind6; }, false, true},
    {"link_ingress", [](cordon_net* s) { return s->progs.cordon_ingress; }, false, true},
    {"link_setsockopt", [](cordon_net* s) { return s->progs.cordon_setsockopt; }, false, true},
    {"link_dev", [](cordon_net* s) { return s->progs.cordon_dev; }, false, true},
    {"link_sysctl", [](cordon_net* s) { return s->progs.cordon_sysctl; }, false, true},
    {"link_connect4", [](cordon_net* s) { return s->progs.cordon_connect4; }},
    {"link_connect6", [](cordon_net* s) { return s->progs.cordon_connect6; }},
    {"link_sendmsg4", [](cordon_net* s) { return s->progs.cordon_sendmsg4; }},
    {"link_sendmsg6", [](cordon_net* s) { return s->progs.cordon_sendmsg6; }},
    {"link_connect_unix", [](cordon_net* s) { return s->progs.cordon_connect_unix; }, true},
    {"link_sendmsg_unix", [](cordon_net* s) { return s->progs.cordon_sendmsg_unix; }, true},
};

// The hooks this kernel has.
const std::vector<Hook>& Hooks() {
  static const std::vector<Hook> hooks = [] {
    std::vector<Hook> out;
    for (const auto& hook : kAllHooks)
      if (!hook.unix_hook || UnixHooks().available()) out.push_back(hook);
    return out;
  }();
  return hooks;
}

// Maps replaced with every policy; counters and events live as long as the
// sandbox so that nothing is lost across a replacement.
struct PolicyMap {
  const char* pin;
  bpf_map* (*map)(cordon_net*);
};
const PolicyMap kPolicyMaps[] = {
    {"sandbox_cfg", [](cordon_net* s) { return s->maps.sandbox_cfg; }},
    {"addr_rules", [](cordon_net* s) { return s->maps.addr_rules; }},
    {"port_rules", [](cordon_net* s) { return s->maps.port_rules; }},
    {"unix_rules", [](cordon_net* s) { return s->maps.unix_rules; }},
    {"listen_addr_rules", [](cordon_net* s) { return s->maps.listen_addr_rules; }},
    {"listen_port_rules", [](cordon_net* s) { return s->maps.listen_port_rules; }},
    {"dev_rules", [](cordon_net* s) { return s->maps.dev_rules; }},
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
constexpr const char* kCountersPin = "counters";
constexpr const char* kEventsPin = "events";
constexpr const char* kInfoPin = "info";

uint64_t RealtimeNs() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

// An explicit sandbox name goes into every event and the operator's
// terminal as it is: printable UTF-8 only.
Status CheckSandboxName(const std::string& name) {
  if (name.size() >= sizeof(cordon_sandbox_info::name))
    return Error{"sandbox name is longer than " + std::to_string(sizeof(cordon_sandbox_info::name) - 1) + " bytes"};
  if (!IsCleanName(name))
    return Error{"sandbox name \"" + DisplayText(EscapeWorkloadBytes(name)) +
                 "\" holds control, invisible or bidi characters or invalid UTF-8"};
  return {};
}

void CopyName(char* dst, size_t cap, const std::string& src) {
  std::memset(dst, 0, cap);
  std::memcpy(dst, src.data(), std::min(cap - 1, src.size()));
}

// Unix socket paths granted write: each FileRule with write right, as
// written and (if it differs) with its symlinks resolved, since the cgroup
// unix hooks compare the address string before the kernel resolves it.
std::vector<std::pair<cordon_unix_key, cordon_unix_value>> UnixRuleEntries(const policy::CompiledPolicy& policy) {
  std::vector<std::pair<cordon_unix_key, cordon_unix_value>> out;
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

// Opens the object and sizes its maps; reuses counters/events when given.
Result<NetSkel> OpenSkeleton(size_t addr_entries, size_t port_entries, size_t unix_entries, size_t listen_entries,
                             uint32_t ringbuf_bytes, int counters_fd, int events_fd) {
  LibbpfLogCapture log;
  NetSkel skel(cordon_net__open());
  if (!skel) return SysError("open BPF object" + log.Tail());
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

// The larger of the listen images (both tries get that capacity).
size_t ListenEntries(const policy::CompiledPolicy& policy) {
  return std::max(policy.listen_addr_entries.size(), policy.listen_port_entries.size());
}

// The instances PrepareNetworkInstances() loaded (it may run on another
// thread than AttachSandbox).
std::mutex g_prepared_mu;
std::vector<NetSkel> g_prepared;

// The prepared instance if it can hold `policy`, else a new one sized for it.
Result<NetSkel> FreshSkeleton(const policy::CompiledPolicy& policy, size_t unix_entries, bool* prepared) {
  *prepared = false;
  {
    std::lock_guard<std::mutex> lock(g_prepared_mu);
    if (!g_prepared.empty() && policy.addr_entries.size() <= kPreparedRuleEntries &&
        policy.port_entries.size() <= kPreparedRuleEntries && unix_entries <= kPreparedUnixEntries &&
        ListenEntries(policy) <= kPreparedListenEntries) {
      *prepared = true;
      NetSkel skel = std::move(g_prepared.back());
      g_prepared.pop_back();
      return skel;
    }
  }
  return OpenSkeleton(policy.addr_entries.size(), policy.port_entries.size(), unix_entries, ListenEntries(policy),
                      kRingbufBytes, -1, -1);
}

Status FillPolicyMaps(cordon_net* skel, const policy::CompiledPolicy& policy, uint64_t sandbox_id,
                      const std::vector<std::pair<cordon_unix_key, cordon_unix_value>>& unix_entries,
                      uint32_t unix_flags, const std::vector<DeviceRule>& devices) {
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
  uint32_t zero = 0;
  if (bpf_map_update_elem(bpf_map__fd(skel->maps.sandbox_cfg), &zero, &cfg, BPF_ANY))
    return SysError("write sandbox_cfg");
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

Result<UniqueFd> CreateInfoMap(const cordon_sandbox_info& info) {
  UniqueFd fd(bpf_map_create(BPF_MAP_TYPE_ARRAY, "cordon_info", sizeof(uint32_t), sizeof(info), 1, nullptr));
  if (!fd.valid()) return SysError("create info map");
  uint32_t zero = 0;
  if (bpf_map_update_elem(fd.get(), &zero, &info, BPF_ANY)) return SysError("write info map");
  return fd;
}

Result<cordon_sandbox_info> ReadInfo(const std::string& dir) {
  UniqueFd fd(bpf_obj_get((dir + "/" + kInfoPin).c_str()));
  if (!fd.valid()) return SysError("open " + dir + "/" + kInfoPin);
  struct bpf_map_info minfo = {};
  uint32_t len = sizeof(minfo);
  if (bpf_obj_get_info_by_fd(fd.get(), &minfo, &len)) return SysError("inspect " + dir + "/" + kInfoPin);
  if (minfo.value_size != sizeof(cordon_sandbox_info))
    return Error{dir + " was written by a cordon with another state layout (info size " +
                 std::to_string(minfo.value_size) + "); refusing to touch it"};
  cordon_sandbox_info info = {};
  uint32_t zero = 0;
  if (bpf_map_lookup_elem(fd.get(), &zero, &info)) return SysError("read " + dir + "/" + kInfoPin);
  if (info.layout_version != CORDON_LAYOUT_VERSION)
    return Error{dir + " has state layout version " + std::to_string(info.layout_version) + ", this cordon knows " +
                 std::to_string(CORDON_LAYOUT_VERSION) + "; refusing to touch it"};
  return info;
}

Status WriteInfo(const std::string& dir, const cordon_sandbox_info& info) {
  UniqueFd fd(bpf_obj_get((dir + "/" + kInfoPin).c_str()));
  if (!fd.valid()) return SysError("open " + dir + "/" + kInfoPin);
  uint32_t zero = 0;
  if (bpf_map_update_elem(fd.get(), &zero, &info, BPF_ANY)) return SysError("write " + dir + "/" + kInfoPin);
  return {};
}

// Detaches every link pinned in `dir` and removes the directory.
Status DestroyPinDir(const std::string& dir) {
  auto names = ListDir(dir);
  if (!names) return names.error();
  Status first_error;
  for (const auto& name : *names) {
    std::string path = dir + "/" + name;
    if (name.rfind("link_", 0) == 0) {
      UniqueFd link(bpf_obj_get(path.c_str()));
      // Explicit detach: a link fd leaked elsewhere must not keep enforcing
      // a sandbox the operator removed (and must not keep it half-attached).
      if (link.valid() && bpf_link_detach(link.get()) && errno != EINVAL && first_error.ok())
        first_error = SysError("detach " + path);
    }
    if (::unlink(path.c_str()) != 0 && errno != ENOENT && first_error.ok()) first_error = SysError("unpin " + path);
  }
  if (::rmdir(dir.c_str()) != 0 && errno != ENOENT && first_error.ok()) first_error = SysError("remove " + dir);
  return first_error;
}

// Staging directories left by a cordon that died mid-attach hold links that
// may be attached: detach them so nothing stays half-attached.
void CleanStaleStaging(const std::string& root) {
  auto names = ListDir(root);
  if (!names) return;
  for (const auto& name : *names) {
    if (name.rfind("staging-", 0) != 0) continue;
    size_t dash = name.rfind('-');
    int pid = std::atoi(name.c_str() + dash + 1);
    if (pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM)) continue;  // still running
    (void)DestroyPinDir(root + "/" + name);
  }
}

Status PinAll(cordon_net* skel, int info_fd, const std::vector<Link>& links, const std::string& dir) {
  for (const auto& m : kPolicyMaps)
    if (bpf_map__pin(m.map(skel), (dir + "/" + m.pin).c_str())) return SysError("pin " + dir + "/" + m.pin);
  if (bpf_map__pin(skel->maps.counters, (dir + "/" + kCountersPin).c_str())) return SysError("pin counters");
  if (bpf_map__pin(skel->maps.events, (dir + "/" + kEventsPin).c_str())) return SysError("pin events");
  if (bpf_obj_pin(info_fd, (dir + "/" + kInfoPin).c_str())) return SysError("pin info");
  for (size_t i = 0; i < links.size(); ++i)
    if (bpf_link__pin(links[i].get(), (dir + "/" + Hooks()[i].pin).c_str()))
      return SysError(std::string("pin ") + Hooks()[i].pin);
  return {};
}

Result<AttachResult> AttachFresh(const std::string& root, const CgroupRef& cgroup,
                                 const policy::CompiledPolicy& policy, const AttachOptions& options,
                                 uint32_t unix_flags) {
  auto unix_entries = UnixRuleEntries(policy);
  bool prepared = false;
  auto skel = FreshSkeleton(policy, unix_entries.size(), &prepared);
  if (!skel) return skel.error();
  CORDON_TRY(FillPolicyMaps(skel->get(), policy, cgroup.id, unix_entries, unix_flags, options.allowed_devices));

  cordon_sandbox_info info = {};
  info.layout_version = CORDON_LAYOUT_VERSION;
  info.mode = policy.mode;
  info.sandbox_id = cgroup.id;
  info.attached_at_ns = info.updated_at_ns = RealtimeNs();
  info.flags = options.ephemeral ? CORDON_INFO_F_EPHEMERAL : 0;
  // By default the cgroup directory's name, which the platform chose: in the
  // data form of workload text, as events carry it.
  std::string name = options.name.empty() ? std::string(TruncateEscaped(
                                                EscapeWorkloadBytes(cgroup.relative.substr(cgroup.relative.rfind('/') + 1)),
                                                sizeof info.name - 1))
                                          : options.name;
  CopyName(info.name, sizeof info.name, name);
  CopyName(info.policy, sizeof info.policy, policy.name);
  if (cgroup.relative.size() >= sizeof info.cgroup_path)
    return Error{"cgroup path longer than " + std::to_string(sizeof info.cgroup_path - 1) + " bytes"};
  CopyName(info.cgroup_path, sizeof info.cgroup_path, cgroup.relative);
  auto info_fd = CreateInfoMap(info);
  if (!info_fd) return info_fd.error();

  std::string staging = root + "/staging-" + std::to_string(cgroup.id) + "-" + std::to_string(::getpid());
  if (::mkdir(staging.c_str(), 0700) != 0) return SysError("create " + staging);

  // From here a failure must leave nothing attached: links not yet pinned
  // detach when their owners are destroyed; pinned ones via DestroyPinDir.
  std::vector<Link> links;
  auto fail = [&](const Error& error) -> Error {
    (void)DestroyPinDir(staging);
    links.clear();
    return error;
  };
  for (const auto& hook : Hooks()) {
    Link link(bpf_program__attach_cgroup(hook.program(skel->get()), cgroup.fd.get()));
    if (!link) return fail(SysError(std::string("attach ") + hook.pin + " to " + cgroup.path));
    links.push_back(std::move(link));
  }
  if (Status pinned = PinAll(skel->get(), info_fd->get(), links, staging); !pinned.ok()) return fail(pinned.error());
  std::string dir = SandboxPinDir(root, cgroup.id);
  if (::rename(staging.c_str(), dir.c_str()) != 0) return fail(SysError("publish " + dir));

  AttachResult result;
  result.replaced = false;
  result.prepared_instance = prepared;
  auto got = GetSandbox(cgroup.id);
  if (!got) return got.error();
  result.info = std::move(*got);
  return result;
}

Result<UniqueFd> ProgramOfLink(int link_fd) {
  struct bpf_link_info linfo = {};
  uint32_t len = sizeof(linfo);
  if (bpf_obj_get_info_by_fd(link_fd, &linfo, &len)) return SysError("inspect link");
  UniqueFd prog(bpf_prog_get_fd_by_id(linfo.prog_id));
  if (!prog.valid()) return SysError("open program of link");
  return prog;
}

uint64_t MonotonicNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// A replacement of the network policy, prepared (a new instance of the
// object loaded, its maps filled) but not yet in force.
struct PreparedReplace {
  std::string dir;
  NetSkel skel;
  std::vector<UniqueFd> link_fds;   // the sandbox's links...
  std::vector<const Hook*> swapped;  // ... and their hooks
  std::vector<const Hook*> added;    // hooks the sandbox lacks (attached by a cordon without them)
  std::vector<UniqueFd> old_progs;   // what each link runs now
  uint64_t switch_start_ns = 0, switch_end_ns = 0;  // the bpf_link_update loop
};

// Everything slow of a replacement happens here, before anything switches.
Result<PreparedReplace> PrepareReplace(const std::string& dir, const CgroupRef& cgroup,
                                       const policy::CompiledPolicy& policy, uint32_t unix_flags,
                                       const AttachOptions& options) {
  PreparedReplace p;
  p.dir = dir;
  CORDON_TRY(ReadInfo(dir));  // a layout this cordon knows
  // Sandboxes attached by a cordon without the unix hooks (or the late
  // ones) get them added (after the swap) rather than swapped.
  for (const auto& hook : Hooks()) {
    UniqueFd fd(bpf_obj_get((dir + "/" + hook.pin).c_str()));
    if (!fd.valid() && (hook.unix_hook || hook.late) && errno == ENOENT) {
      p.added.push_back(&hook);
      continue;
    }
    if (!fd.valid())
      return SysError("sandbox state in " + dir + " is incomplete (" + hook.pin + "); run `cordon detach` first");
    p.link_fds.push_back(std::move(fd));
    p.swapped.push_back(&hook);
  }
  UniqueFd counters(bpf_obj_get((dir + "/" + kCountersPin).c_str()));
  UniqueFd events(bpf_obj_get((dir + "/" + kEventsPin).c_str()));
  if (!counters.valid() || !events.valid())
    return SysError("sandbox state in " + dir + " is incomplete (counters/events); run `cordon detach` first");
  struct bpf_map_info einfo = {};
  uint32_t len = sizeof einfo;
  if (bpf_obj_get_info_by_fd(events.get(), &einfo, &len)) return SysError("inspect events map");

  auto unix_entries = UnixRuleEntries(policy);
  auto skel = OpenSkeleton(policy.addr_entries.size(), policy.port_entries.size(), unix_entries.size(),
                           ListenEntries(policy), einfo.max_entries, counters.get(), events.get());
  if (!skel) return skel.error();
  p.skel = std::move(*skel);
  CORDON_TRY(FillPolicyMaps(p.skel.get(), policy, cgroup.id, unix_entries, unix_flags, options.allowed_devices));
  for (const auto& link : p.link_fds) {
    auto old_prog = ProgramOfLink(link.get());
    if (!old_prog) return old_prog.error();
    p.old_progs.push_back(std::move(*old_prog));
  }
  return p;
}

// Puts the old programs back on the first `count` links.
void UndoSwitchNetwork(PreparedReplace* p, size_t count) {
  for (size_t i = 0; i < count && i < p->link_fds.size(); ++i)
    (void)bpf_link_update(p->link_fds[i].get(), p->old_progs[i].get(), nullptr);
}

// Each hook switches program atomically (the kernel swaps one pointer), so
// every operation is judged wholly by the old or wholly by the new policy.
// On failure every link runs its old program again.
Status SwitchNetwork(PreparedReplace* p) {
  p->switch_start_ns = MonotonicNs();
  for (size_t i = 0; i < p->link_fds.size(); ++i) {
    if (bpf_link_update(p->link_fds[i].get(), bpf_program__fd(p->swapped[i]->program(p->skel.get())), nullptr)) {
      Error error = SysError(std::string("swap program of ") + p->swapped[i]->pin);
      UndoSwitchNetwork(p, i);
      return error;
    }
  }
  p->switch_end_ns = MonotonicNs();
  return {};
}

// After the switch: missing hooks, the pinned maps and the sandbox's info.
Result<AttachResult> FinishReplace(PreparedReplace* p, const CgroupRef& cgroup, const policy::CompiledPolicy& policy,
                                   const AttachOptions& options) {
  const std::string& dir = p->dir;
  for (const Hook* hook : p->added) {
    Link link(bpf_program__attach_cgroup(hook->program(p->skel.get()), cgroup.fd.get()));
    if (!link || bpf_link__pin(link.get(), (dir + "/" + hook->pin).c_str()))
      return SysError(std::string("add ") + hook->pin + " to " + cgroup.path +
                      " (the new policy is in force for every other hook)");
  }
  // Re-pin the new policy maps over the old ones (rename is atomic in bpffs).
  for (const auto& m : kPolicyMaps) {
    std::string final_path = dir + "/" + m.pin;
    std::string tmp = dir + "/new_" + m.pin;  // bpffs forbids "." in names
    ::unlink(tmp.c_str());
    if (bpf_obj_pin(bpf_map__fd(m.map(p->skel.get())), tmp.c_str()) || ::rename(tmp.c_str(), final_path.c_str()))
      return SysError("re-pin " + final_path + " (enforcement already uses the new policy)");
  }
  auto info = ReadInfo(dir);  // as the host-wide registration left it
  if (!info) return info.error();
  info->mode = policy.mode;
  info->updated_at_ns = RealtimeNs();
  info->generation += 1;
  if (!options.name.empty()) CopyName(info->name, sizeof info->name, options.name);
  CopyName(info->policy, sizeof info->policy, policy.name);
  CORDON_TRY(WriteInfo(dir, *info));

  AttachResult result;
  result.replaced = true;
  result.swap_ns = p->switch_end_ns - p->switch_start_ns;
  auto got = GetSandbox(cgroup.id);
  if (!got) return got.error();
  result.info = std::move(*got);
  return result;
}

uint32_t CgroupLevel(const std::string& relative) {
  uint32_t level = 0;
  for (char c : relative) level += c == '/';
  return relative == "/" ? 0 : level;
}

// Which host-wide object a sandbox is registered with, and for what.
enum class HostWide {
  kLsm,         // BPF LSM enforces its file, exec, family and tamper rules
  kDetect,      // no usable BPF LSM: file/exec rules checked after the fact
  kReportOnly,  // next to BPF LSM: the detect object only reports cordon run's layers' refusals
};

// Records which host-wide object enforces the sandbox's file rules.
Status SetHostWideInfo(const std::string& dir, uint32_t flags) {
  auto info = ReadInfo(dir);
  if (!info) return info.error();
  info->flags &= ~(CORDON_INFO_F_LSM | CORDON_INFO_F_DETECT | CORDON_INFO_F_DETECT_KILL);
  info->flags |= flags;
  return WriteInfo(dir, *info);
}

// Registers the sandbox with the LSM (or detect) object, sharing its events
// and counters. `with`: the network switch of a replacement (see LayerSwitch).
Status RegisterHostWide(const std::string& dir, const CgroupRef& cgroup, const policy::CompiledPolicy& policy,
                        const std::vector<ResolvedFileRule>& rules, HostWide role, uint32_t extra_flags = 0,
                        LayerSwitch* with = nullptr, const EgressTries& egress = {}) {
  UniqueFd events(bpf_obj_get((dir + "/" + kEventsPin).c_str()));
  UniqueFd counters(bpf_obj_get((dir + "/" + kCountersPin).c_str()));
  if (!events.valid() || !counters.valid()) return SysError("open the sandbox's events/counters");
  const uint32_t level = CgroupLevel(cgroup.relative);
  switch (role) {
    case HostWide::kLsm:
      CORDON_TRY(LsmAddSandbox(cgroup.id, level, policy, rules, events.get(), counters.get(), egress, with));
      return SetHostWideInfo(dir, CORDON_INFO_F_LSM);
    case HostWide::kReportOnly:  // the info keeps saying BPF LSM enforces
      return DetectAddSandbox(cgroup.id, level, policy, {}, events.get(), counters.get(),
                              extra_flags | CORDON_LSM_F_REPORT_ONLY);
    case HostWide::kDetect:
      break;
  }
  CORDON_TRY(DetectAddSandbox(cgroup.id, level, policy, rules, events.get(), counters.get(), extra_flags, with));
  return SetHostWideInfo(dir, CORDON_INFO_F_DETECT |
                                  ((policy.lsm_flags & CORDON_LSM_F_KILL) ? CORDON_INFO_F_DETECT_KILL : 0));
}

uint32_t LayerReportFlags(const AttachOptions& options) {
  return (options.seccomp_events ? CORDON_LSM_F_SECCOMP : 0) | (options.landlock_events ? CORDON_LSM_F_LANDLOCK : 0) |
         (options.landlock_scope_events ? CORDON_LSM_F_LANDLOCK_SCOPE : 0);
}

}  // namespace

Result<size_t> PrepareNetworkInstances() {
  size_t loaded = 0;
  while (PreparedNetworkInstances() < kPreparedInstances) {
    // The rule maps are LPM tries without preallocation: capacity costs nothing until used.
    auto skel = OpenSkeleton(kPreparedRuleEntries, kPreparedRuleEntries, kPreparedUnixEntries,
                             kPreparedListenEntries, kRingbufBytes, -1, -1);
    if (!skel) return skel.error().Wrap("prepare a network instance");
    std::lock_guard<std::mutex> lock(g_prepared_mu);
    g_prepared.push_back(std::move(*skel));
    loaded++;
  }
  return loaded;
}

size_t PreparedNetworkInstances() {
  std::lock_guard<std::mutex> lock(g_prepared_mu);
  return g_prepared.size();
}

Result<AttachResult> AttachSandbox(const CgroupRef& cgroup, const policy::CompiledPolicy& policy,
                                   const AttachOptions& options) {
  // Everything that can fail on bad input is decided before anything attaches.
  CORDON_TRY(CheckSandboxName(options.name));
  const LsmAvailability& lsm = ProbeLsm();
  std::vector<ResolvedFileRule> rules;
  std::vector<std::string> skipped;
  const bool report_layers = options.seccomp_events || options.landlock_events || options.landlock_scope_events;
  const bool detect = !lsm.usable() && (policy.has_files || report_layers);
  if (lsm.usable() || detect) {
    auto resolved = ResolveFileRules(policy, &skipped);
    if (!resolved) return resolved.error().Wrap("resolve file rules");
    rules = std::move(*resolved);
  }
  CORDON_TRY(CheckNoForeignLayoutState());
  auto root = SandboxPinRoot();
  if (!root) return root.error();
  auto lock = LockPinRoot(*root);
  if (!lock) return lock.error();
  CleanStaleStaging(*root);
  std::string dir = SandboxPinDir(*root, cgroup.id);
  bool existed = Exists(dir);
  // The unix hooks decide where BPF LSM cannot (it resolves the socket's
  // inode, they see only the address string).
  uint32_t unix_flags = lsm.usable() ? 0 : CORDON_UNIX_F_ENFORCE;
  if (policy.has_files) unix_flags |= CORDON_UNIX_F_PATHS;
  if (policy.lsm_flags & CORDON_LSM_F_ABSTRACT_UNIX) unix_flags |= CORDON_UNIX_F_ABSTRACT;

  // A replacement is prepared completely (a new instance of the network object
  // loaded and filled here, the new file rules written by the registration)
  // before anything switches; then the network programs and the file layer's
  // entry switch back to back, and the old file rules are deleted after.
  Result<AttachResult> fresh = Error{"not attached"};
  Result<PreparedReplace> replacement = Error{"not a replacement"};
  bool unfinished = false;  // the network programs switched, FinishReplace is yet to run
  LayerSwitch together;
  if (existed) {
    replacement = PrepareReplace(dir, cgroup, policy, unix_flags, options);
    if (!replacement) return replacement.error();
    together.commit = [&]() -> Status {
      CORDON_TRY(SwitchNetwork(&*replacement));
      unfinished = true;
      return {};
    };
    together.rollback = [&] {
      UndoSwitchNetwork(&*replacement, replacement->link_fds.size());
      unfinished = false;
    };
  } else {
    fresh = AttachFresh(*root, cgroup, policy, options, unix_flags);
    if (!fresh) return fresh;
  }
  LayerSwitch* with = existed ? &together : nullptr;
  // Completes a replacement whose network programs switched.
  auto finish = [&]() -> Result<AttachResult> {
    unfinished = false;
    auto done = FinishReplace(&*replacement, cgroup, policy, options);
    if (done) {
      const uint64_t last = together.file_switched_ns ? together.file_switched_ns : replacement->switch_end_ns;
      done->switch_ns = last - replacement->switch_start_ns;
    }
    return done;
  };
  // A failed registration leaves nothing of a new sandbox behind; a
  // replacement stays wholly old, or (switched before the failure) is completed.
  auto undo = [&](const Error& error, const char* what) -> Error {
    if (!existed) {
      (void)LsmRemoveSandbox(cgroup.id);
      (void)DestroyPinDir(dir);
    } else if (unfinished) {
      (void)finish();
    }
    return error.Wrap(what);
  };
  if (lsm.usable()) {
    // The egress tries BPF LSM judges sockets from outside the sandbox by:
    // the new instance's (a replacement), or those a fresh attach pinned.
    UniqueFd pinned_addr, pinned_port;
    EgressTries egress;
    if (existed) {
      egress.addr_fd = bpf_map__fd(replacement->skel->maps.addr_rules);
      egress.port_fd = bpf_map__fd(replacement->skel->maps.port_rules);
    } else {
      pinned_addr = UniqueFd(bpf_obj_get((dir + "/addr_rules").c_str()));
      pinned_port = UniqueFd(bpf_obj_get((dir + "/port_rules").c_str()));
      if (!pinned_addr.valid() || !pinned_port.valid())
        return undo(SysError("open the sandbox's egress rules in " + dir), "register with BPF LSM");
      egress.addr_fd = pinned_addr.get();
      egress.port_fd = pinned_port.get();
    }
    Status added = RegisterHostWide(dir, cgroup, policy, rules, HostWide::kLsm, 0, with, egress);
    if (!added.ok()) return undo(added.error(), "register with BPF LSM");
  } else if (detect) {
    Status added = RegisterHostWide(dir, cgroup, policy, rules, HostWide::kDetect, LayerReportFlags(options), with);
    if (!added.ok()) return undo(added.error(), "register for detect mode");
  } else if (existed) {
    // No file layer to switch with: the network alone. A detect registration
    // of the policy before (one with files) would go on checking its rules.
    auto info = ReadInfo(dir);
    if (!info) return info.error();
    CORDON_TRY(together.commit());
    if (info->flags & CORDON_INFO_F_DETECT) {
      if (Status removed = LsmRemoveSandbox(cgroup.id); !removed.ok()) return undo(removed.error(), "leave detect mode");
      if (Status cleared = SetHostWideInfo(dir, 0); !cleared.ok()) return undo(cleared.error(), "leave detect mode");
    }
  }
  auto result = existed ? finish() : std::move(fresh);
  if (!result) return result;
  if (lsm.usable()) {
    result->info.lsm = true;
    // cordon run's second layers refuse before BPF LSM sees the operation:
    // the detect object reports their refusals (and checks nothing else).
    if (report_layers) {
      Status reported =
          RegisterHostWide(dir, cgroup, policy, {}, HostWide::kReportOnly, LayerReportFlags(options));
      if (!reported.ok()) return undo(reported.error(), "register the run layers' refusals for reporting");
    }
  } else if (detect) {
    result->info.detect = policy.has_files;
    result->info.detect_kill = policy.lsm_flags & CORDON_LSM_F_KILL;
  }
  result->skipped_paths = std::move(skipped);
  return result;
}

Status DetachSandbox(uint64_t sandbox_id) {
  auto root = SandboxPinRoot();
  if (!root) return root.error();
  auto lock = LockPinRoot(*root);
  if (!lock) return lock.error();
  std::string dir = SandboxPinDir(*root, sandbox_id);
  if (!Exists(dir)) return Error{"no sandbox is attached to cgroup id " + std::to_string(sandbox_id)};
  Status lsm_removed = LsmRemoveSandbox(sandbox_id);
  Status removed = DestroyPinDir(dir);
  if (!lsm_removed.ok()) return lsm_removed.error().Wrap("remove from BPF LSM");
  return removed;
}

Result<SandboxInfo> GetSandbox(uint64_t sandbox_id) {
  auto root = SandboxPinRoot();
  if (!root) return root.error();
  std::string dir = SandboxPinDir(*root, sandbox_id);
  if (!Exists(dir)) return Error{"no sandbox is attached to cgroup id " + std::to_string(sandbox_id)};
  SandboxInfo out;
  out.id = sandbox_id;
  out.pin_dir = dir;
  auto info = ReadInfo(dir);
  if (!info) {
    out.problem = info.error().ToString();
    return out;
  }
  out.name = info->name;
  out.policy = info->policy;
  out.cgroup_path = info->cgroup_path;
  out.mode = info->mode;
  out.generation = info->generation;
  out.ephemeral = info->flags & CORDON_INFO_F_EPHEMERAL;
  out.lsm = info->flags & CORDON_INFO_F_LSM;
  out.landlock = info->flags & CORDON_INFO_F_LANDLOCK;
  out.seccomp = info->flags & CORDON_INFO_F_SECCOMP;
  out.detect = info->flags & CORDON_INFO_F_DETECT;
  out.detect_kill = info->flags & CORDON_INFO_F_DETECT_KILL;
  out.attached_at_ns = info->attached_at_ns;
  out.updated_at_ns = info->updated_at_ns;
  auto mount = FindCgroup2Mount();
  out.cgroup_alive = mount && !CgroupPathFromId(*mount, sandbox_id).empty();
  for (const auto& hook : Hooks())
    if (!Exists(dir + "/" + hook.pin)) out.problem = std::string("missing ") + hook.pin + "; enforcement incomplete";
  UniqueFd counters(bpf_obj_get((dir + "/" + kCountersPin).c_str()));
  if (counters.valid()) {
    auto sums = ReadCounters(counters.get());
    if (sums) out.counters = *sums;
  }
  return out;
}

Result<std::vector<SandboxInfo>> ListSandboxes() {
  auto root = SandboxPinRoot();
  if (!root) return root.error();
  auto names = ListDir(*root);
  if (!names) return names.error();
  std::vector<SandboxInfo> out;
  for (const auto& name : *names) {
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;  // staging-*
    uint64_t id = std::strtoull(name.c_str(), nullptr, 10);
    auto info = GetSandbox(id);
    if (info) out.push_back(std::move(*info));
  }
  return out;
}

std::string SandboxInfo::Level() const {
  std::string level = lsm ? "kernel-lsm" : "kernel-cgroup";
  if (landlock) level += "+landlock";
  if (seccomp) level += "+seccomp";
  if (detect) level += detect_kill ? "+detect+kill" : "+detect";
  return level;
}

Status AddSandboxFlags(uint64_t sandbox_id, uint32_t flags) {
  auto root = SandboxPinRoot();
  if (!root) return root.error();
  auto lock = LockPinRoot(*root);
  if (!lock) return lock.error();
  std::string dir = SandboxPinDir(*root, sandbox_id);
  auto info = ReadInfo(dir);
  if (!info) return info.error();
  info->flags |= flags;
  return WriteInfo(dir, *info);
}

}  // namespace cordon
