#include "loader/sandbox.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstring>
#include <memory>

#include "abi/cordon_dns.h"
#include "abi/cordon_pins.h"
#include "loader/kernel_features.h"
#include "loader/lsm.h"
#include "loader/net_object.h"
#include "sys/bpffs.h"
#include "sys/counters.h"
#include "util/clock.h"
#include "util/fs.h"
#include "util/text.h"

namespace cordon {
namespace {

constexpr const char* kCountersPin = "counters";
constexpr const char* kEventsPin = "events";
constexpr const char* kInfoPin = "info";
constexpr const char* kQuietPin = CORDON_QUIET_PIN;
// The containment state (struct cordon_sandbox_state): the sandbox's, shared
// by its instances. A sandbox attached by a cordon without it gets one at its
// next replacement (its absence reads as "not contained").
constexpr const char* kStatePin = "state";
// The repeats map (bpf/abi/cordon_event.h): counts the sandbox's reader
// delivers, shared by its instances like the counters.
constexpr const char* kRepeatsPin = CORDON_REPEATS_PIN;
// The sequence counter of the sandbox's records (bpf/abi/cordon_event.h):
// one __u64, shared by its instances and registered with the host-wide objects.
constexpr const char* kSeqPin = CORDON_SEQ_PIN;
constexpr const char* kEgressPin = CORDON_EGRESS_PIN;
constexpr const char* kEgressDestsPin = CORDON_EGRESS_DESTS_PIN;
// Where the sandbox's DNS goes (bpf/abi/cordon_dns.h), shared by its
// instances; a sandbox attached by a cordon without it gets one at its next
// replacement (its absence reads as "no redirection").
constexpr const char* kResolverPin = CORDON_RESOLVER_PIN;

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

Result<UniqueFd> CreateInfoMap(const cordon_sandbox_info& info) {
  UniqueFd fd(bpf_map_create(BPF_MAP_TYPE_ARRAY, "cordon_info", sizeof(uint32_t), sizeof(info), 1, nullptr));
  if (!fd.valid()) return SysError("create info map");
  uint32_t zero = 0;
  if (bpf_map_update_elem(fd.get(), &zero, &info, BPF_ANY)) return SysError("write info map");
  return fd;
}

Result<cordon_sandbox_info> ReadInfo(const std::string& dir) {
  bool foreign = false;
  auto pinned = ReadSandboxInfo(dir, &foreign);
  if (!pinned) return foreign ? pinned.error().Wrap("refusing to touch it") : pinned.error();
  return pinned->info;
}

Status WriteInfo(const std::string& dir, const cordon_sandbox_info& info) {
  UniqueFd fd(bpf_obj_get((dir + "/" + kInfoPin).c_str()));
  if (!fd.valid()) return SysError("open " + dir + "/" + kInfoPin);
  uint32_t zero = 0;
  if (bpf_map_update_elem(fd.get(), &zero, &info, BPF_ANY)) return SysError("write " + dir + "/" + kInfoPin);
  return {};
}

// Pins the policy's spec.quiet patterns for `generation` as dir/quiet
// (bpf/abi/cordon_pins.h): a new map, pinned beside and renamed over the old
// one, so a reader sees the old patterns or the new ones, never a mix.
Status PinQuiet(const std::string& dir, const policy::CompiledPolicy& policy, uint32_t generation) {
  const std::string bytes = policy::SerializeQuiet(policy.quiet);
  if (bytes.size() > CORDON_QUIET_MAX_BYTES)
    return Error{"spec.quiet is too large to pin: " + std::to_string(bytes.size()) + " bytes"};
  std::string value(sizeof(cordon_quiet_header) + bytes.size(), '\0');
  const cordon_quiet_header header = {generation, static_cast<uint32_t>(bytes.size())};
  std::memcpy(value.data(), &header, sizeof header);
  std::memcpy(value.data() + sizeof header, bytes.data(), bytes.size());
  UniqueFd fd(bpf_map_create(BPF_MAP_TYPE_ARRAY, "cordon_quiet", sizeof(uint32_t), static_cast<uint32_t>(value.size()),
                             1, nullptr));
  if (!fd.valid()) return SysError("create quiet map");
  uint32_t zero = 0;
  if (bpf_map_update_elem(fd.get(), &zero, value.data(), BPF_ANY)) return SysError("write quiet map");
  const std::string final_path = dir + "/" + kQuietPin;
  const std::string tmp = dir + "/new_" + kQuietPin;  // bpffs forbids "." in names
  ::unlink(tmp.c_str());
  if (bpf_obj_pin(fd.get(), tmp.c_str()) || ::rename(tmp.c_str(), final_path.c_str()))
    return SysError("pin " + final_path);
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
  for (const auto& m : PolicyMaps())
    if (bpf_map__pin(m.map(skel), (dir + "/" + m.pin).c_str())) return SysError("pin " + dir + "/" + m.pin);
  if (bpf_map__pin(skel->maps.counters, (dir + "/" + kCountersPin).c_str())) return SysError("pin counters");
  if (bpf_map__pin(skel->maps.events, (dir + "/" + kEventsPin).c_str())) return SysError("pin events");
  if (bpf_map__pin(skel->maps.sandbox_state, (dir + "/" + kStatePin).c_str())) return SysError("pin state");
  if (bpf_map__pin(skel->maps.repeats, (dir + "/" + kRepeatsPin).c_str())) return SysError("pin repeats");
  if (bpf_map__pin(skel->maps.seq, (dir + "/" + kSeqPin).c_str())) return SysError("pin seq");
  if (bpf_map__pin(skel->maps.egress_usage, (dir + "/" + kEgressPin).c_str())) return SysError("pin egress");
  if (bpf_map__pin(skel->maps.egress_dests, (dir + "/" + kEgressDestsPin).c_str())) return SysError("pin egress_dests");
  if (bpf_map__pin(skel->maps.resolver, (dir + "/" + kResolverPin).c_str())) return SysError("pin resolver");
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
  auto skel = FreshSkeleton(options.pool, policy, unix_entries.size(), &prepared);
  if (!skel) return skel.error();
  CORDON_TRY(FillPolicyMaps(skel->get(), policy, cgroup.id, unix_entries, unix_flags, options.allowed_devices));

  cordon_sandbox_info info = {};
  info.layout_version = CORDON_LAYOUT_VERSION;
  info.mode = policy.mode;
  info.sandbox_id = cgroup.id;
  info.attached_at_ns = info.updated_at_ns = static_cast<uint64_t>(RealNs());
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
  CopyName(info.policy_digest, sizeof info.policy_digest, policy.digest);
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
  if (Status pinned = PinQuiet(staging, policy, info.generation); !pinned.ok()) return fail(pinned.error());
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


// The network layer of a policy replacement. Prepare() does everything slow
// (a new instance of the object loaded, its maps filled) before anything
// switches; Commit() switches each hook's program; Finish() adds missing
// hooks, re-pins the policy maps and updates the sandbox's info.
class NetworkReplacement final : public SwitchedLayer {
 public:
  static Result<std::unique_ptr<NetworkReplacement>> Prepare(const std::string& dir, const CgroupRef& cgroup,
                                                             const policy::CompiledPolicy& policy,
                                                             uint32_t unix_flags, const AttachOptions& options);

  // Each hook switches program atomically (the kernel swaps one pointer), so
  // every operation is judged wholly by the old or wholly by the new policy.
  // On failure every link runs its old program again.
  Status Commit() override {
    switch_start_ns_ = static_cast<uint64_t>(MonoNs());
    for (size_t i = 0; i < link_fds_.size(); ++i) {
      if (bpf_link_update(link_fds_[i].get(), bpf_program__fd(swapped_[i]->program(skel_.get())), nullptr)) {
        Error error = SysError(std::string("swap program of ") + swapped_[i]->pin);
        Undo(i);
        return error;
      }
    }
    switch_end_ns_ = static_cast<uint64_t>(MonoNs());
    switched_ = true;
    return {};
  }
  void Rollback() override {
    Undo(link_fds_.size());
    switched_ = false;
  }
  void FileLayerSwitched(uint64_t monotonic_ns) override { file_switched_ns_ = monotonic_ns; }

  // Whether the programs switched and Finish() is yet to run.
  bool unfinished() const { return switched_ && !finished_; }
  // After Commit(): completes the replacement.
  Result<AttachResult> Finish(const CgroupRef& cgroup, const policy::CompiledPolicy& policy,
                              const AttachOptions& options);

  // The new instance's egress tries (BPF LSM judges foreign sockets by them).
  EgressTries egress() const {
    return {bpf_map__fd(skel_->maps.addr_rules), bpf_map__fd(skel_->maps.port_rules),
            bpf_map__fd(skel_->maps.sandbox_cfg)};
  }

 private:
  NetworkReplacement() = default;
  // Puts the old programs back on the first `count` links.
  void Undo(size_t count) {
    for (size_t i = 0; i < count && i < link_fds_.size(); ++i)
      (void)bpf_link_update(link_fds_[i].get(), old_progs_[i].get(), nullptr);
  }

  std::string dir_;
  NetSkel skel_;
  std::vector<UniqueFd> link_fds_;   // the sandbox's links...
  std::vector<const Hook*> swapped_;  // ... and their hooks
  std::vector<const Hook*> added_;    // hooks the sandbox lacks (attached by a cordon without them)
  std::vector<UniqueFd> old_progs_;   // what each link ran before
  uint64_t switch_start_ns_ = 0, switch_end_ns_ = 0;  // Commit()'s bpf_link_update loop
  uint64_t file_switched_ns_ = 0;                     // 0: no file layer switched with it
  bool switched_ = false, finished_ = false;
  bool add_state_ = false;  // the sandbox has no pinned state map yet
  bool add_egress_ = false;  // ... no pinned egress maps yet
  bool add_resolver_ = false;  // ... no pinned resolver setting yet
};

Result<std::unique_ptr<NetworkReplacement>> NetworkReplacement::Prepare(const std::string& dir,
                                                                        const CgroupRef& cgroup,
                                                                        const policy::CompiledPolicy& policy,
                                                                        uint32_t unix_flags,
                                                                        const AttachOptions& options) {
  std::unique_ptr<NetworkReplacement> p(new NetworkReplacement);
  p->dir_ = dir;
  CORDON_TRY(ReadInfo(dir));  // a layout this cordon knows
  // Sandboxes attached by a cordon without the unix hooks (or the late
  // ones) get them added (after the swap) rather than swapped.
  for (const auto& hook : Hooks()) {
    UniqueFd fd(bpf_obj_get((dir + "/" + hook.pin).c_str()));
    if (!fd.valid() && (hook.unix_hook || hook.late) && errno == ENOENT) {
      p->added_.push_back(&hook);
      continue;
    }
    if (!fd.valid())
      return SysError("sandbox state in " + dir + " is incomplete (" + hook.pin + "); run `cordon detach` first");
    p->link_fds_.push_back(std::move(fd));
    p->swapped_.push_back(&hook);
  }
  UniqueFd counters(bpf_obj_get((dir + "/" + kCountersPin).c_str()));
  UniqueFd events(bpf_obj_get((dir + "/" + kEventsPin).c_str()));
  if (!counters.valid() || !events.valid())
    return SysError("sandbox state in " + dir + " is incomplete (counters/events); run `cordon detach` first");
  struct bpf_map_info einfo = {};
  uint32_t len = sizeof einfo;
  if (bpf_obj_get_info_by_fd(events.get(), &einfo, &len)) return SysError("inspect events map");

  UniqueFd state(bpf_obj_get((dir + "/" + kStatePin).c_str()));
  if (!state.valid() && errno != ENOENT) return SysError("open " + dir + "/" + kStatePin);
  p->add_state_ = !state.valid();  // attached by a cordon without it: this instance's is pinned by Finish()
  UniqueFd repeats(bpf_obj_get((dir + "/" + kRepeatsPin).c_str()));
  if (!repeats.valid()) return SysError("open " + dir + "/" + kRepeatsPin);
  UniqueFd seq(bpf_obj_get((dir + "/" + kSeqPin).c_str()));
  if (!seq.valid()) return SysError("open " + dir + "/" + kSeqPin);
  // The egress accounting: absent in a sandbox attached by a cordon without
  // it (this instance's is pinned by Finish(), counting from then).
  UniqueFd egress_usage(bpf_obj_get((dir + "/" + kEgressPin).c_str()));
  if (!egress_usage.valid() && errno != ENOENT) return SysError("open " + dir + "/" + kEgressPin);
  UniqueFd egress_dests(bpf_obj_get((dir + "/" + kEgressDestsPin).c_str()));
  if (!egress_dests.valid() && errno != ENOENT) return SysError("open " + dir + "/" + kEgressDestsPin);
  p->add_egress_ = !egress_usage.valid() || !egress_dests.valid();
  UniqueFd resolver(bpf_obj_get((dir + "/" + kResolverPin).c_str()));
  if (!resolver.valid() && errno != ENOENT) return SysError("open " + dir + "/" + kResolverPin);
  p->add_resolver_ = !resolver.valid();
  EgressMaps egress;
  if (!p->add_egress_) egress = {egress_usage.get(), egress_dests.get()};
  auto unix_entries = UnixRuleEntries(policy);
  auto skel =
      OpenSkeleton(policy.addr_entries.size(), policy.port_entries.size(), unix_entries.size(), ListenEntries(policy),
                   einfo.max_entries, counters.get(), events.get(), state.valid() ? state.get() : -1, repeats.get(),
                   seq.get(), egress, resolver.valid() ? resolver.get() : -1);
  if (!skel) return skel.error();
  p->skel_ = std::move(*skel);
  CORDON_TRY(FillPolicyMaps(p->skel_.get(), policy, cgroup.id, unix_entries, unix_flags, options.allowed_devices));
  for (const auto& link : p->link_fds_) {
    auto old_prog = ProgramOfLink(link.get());
    if (!old_prog) return old_prog.error();
    p->old_progs_.push_back(std::move(*old_prog));
  }
  return p;
}

Result<AttachResult> NetworkReplacement::Finish(const CgroupRef& cgroup, const policy::CompiledPolicy& policy,
                                                const AttachOptions& options) {
  finished_ = true;
  const std::string& dir = dir_;
  for (const Hook* hook : added_) {
    Link link(bpf_program__attach_cgroup(hook->program(skel_.get()), cgroup.fd.get()));
    if (!link || bpf_link__pin(link.get(), (dir + "/" + hook->pin).c_str()))
      return SysError(std::string("add ") + hook->pin + " to " + cgroup.path +
                      " (the new policy is in force for every other hook)");
  }
  if (add_state_ && bpf_map__pin(skel_->maps.sandbox_state, (dir + "/" + kStatePin).c_str()) && errno != EEXIST)
    return SysError("pin " + dir + "/" + kStatePin + " (the new policy is in force)");
  if (add_resolver_ && bpf_map__pin(skel_->maps.resolver, (dir + "/" + kResolverPin).c_str()) && errno != EEXIST)
    return SysError("pin " + dir + "/" + kResolverPin + " (the new policy is in force)");
  if (add_egress_) {
    // Both anew (an earlier cordon had neither): replaced over whatever half is there.
    for (const auto& [pin, map] :
         {std::pair{kEgressPin, skel_->maps.egress_usage}, std::pair{kEgressDestsPin, skel_->maps.egress_dests}}) {
      const std::string final_path = dir + "/" + pin, tmp = dir + "/new_" + pin;
      ::unlink(tmp.c_str());
      if (bpf_obj_pin(bpf_map__fd(map), tmp.c_str()) || ::rename(tmp.c_str(), final_path.c_str()))
        return SysError("pin " + final_path + " (the new policy is in force)");
    }
  }
  // Re-pin the new policy maps over the old ones (rename is atomic in bpffs).
  for (const auto& m : PolicyMaps()) {
    std::string final_path = dir + "/" + m.pin;
    std::string tmp = dir + "/new_" + m.pin;  // bpffs forbids "." in names
    ::unlink(tmp.c_str());
    if (bpf_obj_pin(bpf_map__fd(m.map(skel_.get())), tmp.c_str()) || ::rename(tmp.c_str(), final_path.c_str()))
      return SysError("re-pin " + final_path + " (enforcement already uses the new policy)");
  }
  auto info = ReadInfo(dir);  // as the host-wide registration left it
  if (!info) return info.error();
  info->mode = policy.mode;
  info->updated_at_ns = static_cast<uint64_t>(RealNs());
  info->generation += 1;
  // The new patterns before the new generation: a reader that sees the
  // generation change reads them (events of the new policy are then judged
  // by its patterns; until then, a pin of a generation not yet in the info
  // is not used at all).
  if (Status pinned = PinQuiet(dir, policy, info->generation); !pinned.ok())
    return Error{pinned.error().ToString() + " (enforcement already uses the new policy)"};
  if (!options.name.empty()) CopyName(info->name, sizeof info->name, options.name);
  CopyName(info->policy, sizeof info->policy, policy.name);
  CopyName(info->policy_digest, sizeof info->policy_digest, policy.digest);
  CORDON_TRY(WriteInfo(dir, *info));

  AttachResult result;
  result.replaced = true;
  result.swap_ns = switch_end_ns_ - switch_start_ns_;
  result.switch_ns = (file_switched_ns_ ? file_switched_ns_ : switch_end_ns_) - switch_start_ns_;
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
// and counters. `with`: the network layer of a replacement (see SwitchedLayer).
Status RegisterHostWide(const std::string& dir, const CgroupRef& cgroup, const policy::CompiledPolicy& policy,
                        const std::vector<ResolvedFileRule>& rules, HostWide role, uint32_t extra_flags = 0,
                        SwitchedLayer* with = nullptr, const EgressTries& egress = {}) {
  UniqueFd events(bpf_obj_get((dir + "/" + kEventsPin).c_str()));
  UniqueFd counters(bpf_obj_get((dir + "/" + kCountersPin).c_str()));
  UniqueFd seq(bpf_obj_get((dir + "/" + kSeqPin).c_str()));
  if (!events.valid() || !counters.valid() || !seq.valid()) return SysError("open the sandbox's events/counters/seq");
  const uint32_t level = CgroupLevel(cgroup.relative);
  // Its containment state: absent in a sandbox attached by a cordon without
  // one (it gets one at this replacement's network step). With egress.cfg_fd,
  // either object's refusals count towards its onViolation: contain.
  UniqueFd state(bpf_obj_get((dir + "/" + kStatePin).c_str()));
  switch (role) {
    case HostWide::kLsm:
      CORDON_TRY(LsmAddSandbox(cgroup.id, level, policy, rules, events.get(), counters.get(), seq.get(), state.get(),
                               egress, with));
      return SetHostWideInfo(dir, CORDON_INFO_F_LSM);
    case HostWide::kReportOnly:  // the info keeps saying BPF LSM enforces
      return DetectAddSandbox(cgroup.id, level, policy, {}, events.get(), counters.get(), seq.get(), state.get(),
                              egress.cfg_fd, extra_flags | CORDON_LSM_F_REPORT_ONLY);
    case HostWide::kDetect:
      break;
  }
  CORDON_TRY(DetectAddSandbox(cgroup.id, level, policy, rules, events.get(), counters.get(), seq.get(), state.get(),
                              egress.cfg_fd, extra_flags, with));
  return SetHostWideInfo(dir, CORDON_INFO_F_DETECT |
                                  ((policy.lsm_flags & CORDON_LSM_F_KILL) ? CORDON_INFO_F_DETECT_KILL : 0));
}

uint32_t LayerReportFlags(const AttachOptions& options) {
  return (options.seccomp_events ? CORDON_LSM_F_SECCOMP : 0) | (options.landlock_events ? CORDON_LSM_F_LANDLOCK : 0) |
         (options.landlock_scope_events ? CORDON_LSM_F_LANDLOCK_SCOPE : 0) |
         (options.read_only_events ? CORDON_LSM_F_READ_ONLY_MOUNTS : 0);
}

}  // namespace

Result<AttachResult> AttachSandbox(const CgroupRef& cgroup, const policy::CompiledPolicy& policy,
                                   const AttachOptions& options) {
  // Everything that can fail on bad input is decided before anything attaches.
  CORDON_TRY(CheckSandboxName(options.name));
  const LsmAvailability& lsm = ProbeLsm();
  std::vector<ResolvedFileRule> rules;
  std::vector<std::string> skipped;
  const bool report_layers =
      options.seccomp_events || options.landlock_events || options.landlock_scope_events || options.read_only_events;
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
  std::unique_ptr<NetworkReplacement> replacement;
  Result<AttachResult> fresh = Error{"not attached"};
  if (existed) {
    auto prepared = NetworkReplacement::Prepare(dir, cgroup, policy, unix_flags, options);
    if (!prepared) return prepared.error();
    replacement = std::move(*prepared);
  } else {
    fresh = AttachFresh(*root, cgroup, policy, options, unix_flags);
    if (!fresh) return fresh;
  }
  // A failed registration leaves nothing of a new sandbox behind; a
  // replacement stays wholly old, or (switched before the failure) is completed.
  auto undo = [&](const Error& error, const char* what) -> Error {
    if (!replacement) {
      (void)LsmRemoveSandbox(cgroup.id);
      (void)DestroyPinDir(dir);
    } else if (replacement->unfinished()) {
      (void)replacement->Finish(cgroup, policy, options);
    }
    return error.Wrap(what);
  };
  // The egress tries BPF LSM judges sockets from outside the sandbox by, and
  // the cfg both host-wide objects count refusals towards onViolation with:
  // the new instance's (a replacement), or those a fresh attach pinned.
  UniqueFd pinned_addr, pinned_port, pinned_cfg;
  EgressTries egress;
  if (replacement) {
    egress = replacement->egress();
  } else if (lsm.usable() || detect) {
    pinned_addr = UniqueFd(bpf_obj_get((dir + "/addr_rules").c_str()));
    pinned_port = UniqueFd(bpf_obj_get((dir + "/port_rules").c_str()));
    pinned_cfg = UniqueFd(bpf_obj_get((dir + "/sandbox_cfg").c_str()));
    if (!pinned_addr.valid() || !pinned_port.valid() || !pinned_cfg.valid())
      return undo(SysError("open the sandbox's egress rules in " + dir),
                  lsm.usable() ? "register with BPF LSM" : "register for detect mode");
    egress.addr_fd = pinned_addr.get();
    egress.port_fd = pinned_port.get();
    egress.cfg_fd = pinned_cfg.get();
  }
  if (lsm.usable()) {
    Status added = RegisterHostWide(dir, cgroup, policy, rules, HostWide::kLsm, 0, replacement.get(), egress);
    if (!added.ok()) return undo(added.error(), "register with BPF LSM");
  } else if (detect) {
    Status added = RegisterHostWide(dir, cgroup, policy, rules, HostWide::kDetect, LayerReportFlags(options),
                                    replacement.get(), egress);
    if (!added.ok()) return undo(added.error(), "register for detect mode");
  } else if (replacement) {
    // No file layer to switch with: the network alone. A detect registration
    // of the policy before (one with files) would go on checking its rules.
    auto info = ReadInfo(dir);
    if (!info) return info.error();
    CORDON_TRY(replacement->Commit());
    if (info->flags & CORDON_INFO_F_DETECT) {
      if (Status removed = LsmRemoveSandbox(cgroup.id); !removed.ok()) return undo(removed.error(), "leave detect mode");
      if (Status cleared = SetHostWideInfo(dir, 0); !cleared.ok()) return undo(cleared.error(), "leave detect mode");
    }
  }
  auto result = replacement ? replacement->Finish(cgroup, policy, options) : std::move(fresh);
  if (!result) return result;
  if (lsm.usable()) {
    result->info.lsm = true;
    // cordon run's second layers refuse before BPF LSM sees the operation:
    // the detect object reports their refusals (and checks nothing else).
    if (report_layers) {
      Status reported =
          RegisterHostWide(dir, cgroup, policy, {}, HostWide::kReportOnly, LayerReportFlags(options), nullptr, egress);
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
  // Each field up to its NUL, never past its end (a record is kernel state
  // any root process may have written).
  auto field = [](const char* text, size_t cap) { return std::string(text, ::strnlen(text, cap)); };
  out.name = field(info->name, sizeof info->name);
  out.policy = field(info->policy, sizeof info->policy);
  out.cgroup_path = field(info->cgroup_path, sizeof info->cgroup_path);
  out.policy_digest = field(info->policy_digest, sizeof info->policy_digest);
  out.mode = info->mode;
  out.generation = info->generation;
  out.ephemeral = info->flags & CORDON_INFO_F_EPHEMERAL;
  out.lsm = info->flags & CORDON_INFO_F_LSM;
  out.landlock = info->flags & CORDON_INFO_F_LANDLOCK;
  out.seccomp = info->flags & CORDON_INFO_F_SECCOMP;
  out.detect = info->flags & CORDON_INFO_F_DETECT;
  out.detect_kill = info->flags & CORDON_INFO_F_DETECT_KILL;
  out.degraded = info->flags & CORDON_INFO_F_DEGRADED;
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
  UniqueFd state(bpf_obj_get((dir + "/" + kStatePin).c_str()));
  uint32_t zero = 0;
  cordon_sandbox_state st = {};
  if (state.valid() && bpf_map_lookup_elem(state.get(), &zero, &st) == 0) {
    out.has_state = true;
    out.state = st;
  }
  UniqueFd egress(bpf_obj_get((dir + "/" + kEgressPin).c_str()));
  if (egress.valid() && bpf_map_lookup_elem(egress.get(), &zero, &out.egress) == 0) out.has_egress = true;
  UniqueFd budget(bpf_obj_get((dir + "/egress_budget").c_str()));
  cordon_egress_budget b = {};
  if (budget.valid() && bpf_map_lookup_elem(budget.get(), &zero, &b) == 0) out.egress_limit = b.limit;
  return out;
}

Result<std::vector<EgressDest>> ReadEgressDests(const std::string& pin_dir) {
  UniqueFd dests(bpf_obj_get((pin_dir + "/" + kEgressDestsPin).c_str()));
  if (!dests.valid()) return SysError("open " + pin_dir + "/" + kEgressDestsPin);
  std::vector<EgressDest> out;
  cordon_egress_dest_key key = {}, next = {};
  const void* prev = nullptr;
  while (bpf_map_get_next_key(dests.get(), prev, &next) == 0 && out.size() < CORDON_EGRESS_DESTS_MAX) {
    uint64_t bytes = 0;
    if (bpf_map_lookup_elem(dests.get(), &next, &bytes) == 0) out.push_back({next, bytes});
    key = next;
    prev = &key;
  }
  std::sort(out.begin(), out.end(), [](const EgressDest& a, const EgressDest& b) { return a.bytes > b.bytes; });
  return out;
}

// Changes the state's flags with the programs' own atomic operations on the
// mapped element (see CORDON_STATE_FLAGS_WORD), so that a program containing
// the sandbox meanwhile (CONTAINED|AUTO, its trigger, its count) and this
// change both hold. Clearing CONTAINED also restarts onViolation's count:
// flags and count in one operation, then the trigger (a program counts only
// while the sandbox is not contained). Returns the state before.
static Result<cordon_sandbox_state> ChangeStateWords(int fd, uint32_t set, uint32_t clear) {
  struct bpf_map_info info = {};
  uint32_t len = sizeof info;
  if (bpf_obj_get_info_by_fd(fd, &info, &len)) return SysError("inspect");
  const bool restart = clear & CORDON_STATE_F_CONTAINED;
  uint32_t zero = 0;
  cordon_sandbox_state before = {};
  if (!(info.map_flags & BPF_F_MMAPABLE)) {
    // Pinned by a cordon of this layout before the map was mmapable: one
    // write of the whole element, which can undo a program's write made
    // between this read and it (its next replacement keeps this map).
    if (bpf_map_lookup_elem(fd, &zero, &before)) return SysError("read");
    cordon_sandbox_state after = before;
    after.flags = (before.flags & ~clear) | set;
    if (restart) after.violations = 0, after.contained_boot_ns = 0, after.trigger_kind = 0;
    if (bpf_map_update_elem(fd, &zero, &after, BPF_ANY)) return SysError("write");
    return before;
  }
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  void* mem = ::mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mem == MAP_FAILED) return SysError("map");
  auto* st = static_cast<cordon_sandbox_state*>(mem);
  auto* word = static_cast<uint64_t*>(mem);  // flags and violations
  uint64_t old_word = 0;
  if (restart) {
    // Flags and count first: a program that contains the sandbox again
    // after this (its trigger, then its flags) keeps its containment; the
    // trigger is cleared only while no program has contained it since (one
    // racing in between may lose its trigger's record, never its flags).
    old_word =
        __atomic_fetch_and(word, ~(CORDON_STATE_FLAGS_WORD(clear) | CORDON_STATE_VIOLATIONS_WORD), __ATOMIC_SEQ_CST);
    before.contained_boot_ns = __atomic_load_n(&st->contained_boot_ns, __ATOMIC_SEQ_CST);
    before.trigger_kind = __atomic_load_n(&st->trigger_kind, __ATOMIC_SEQ_CST);
    if (!(__atomic_load_n(word, __ATOMIC_SEQ_CST) & CORDON_STATE_FLAGS_WORD(CORDON_STATE_F_CONTAINED))) {
      __atomic_store_n(&st->contained_boot_ns, 0, __ATOMIC_SEQ_CST);
      __atomic_store_n(&st->trigger_kind, 0, __ATOMIC_SEQ_CST);
    }
  } else if (clear) {
    old_word = __atomic_fetch_and(word, ~CORDON_STATE_FLAGS_WORD(clear), __ATOMIC_SEQ_CST);
  }
  if (set) {
    const uint64_t was = __atomic_fetch_or(word, CORDON_STATE_FLAGS_WORD(set), __ATOMIC_SEQ_CST);
    if (!clear) old_word = was;
  } else if (!clear) {
    old_word = __atomic_load_n(word, __ATOMIC_SEQ_CST);
  }
  if (!restart) {  // a program writes them before its flags: read after
    before.contained_boot_ns = __atomic_load_n(&st->contained_boot_ns, __ATOMIC_SEQ_CST);
    before.trigger_kind = __atomic_load_n(&st->trigger_kind, __ATOMIC_SEQ_CST);
  }
  ::munmap(mem, page);
  std::memcpy(&before, &old_word, sizeof old_word);  // flags and violations, as they were
  return before;
}

Status SetSandboxFilesContained(uint64_t sandbox_id, bool contained) {
  auto root = SandboxPinRoot();
  if (!root) return root.error();
  auto lock = LockPinRoot(*root);
  if (!lock) return lock.error();
  return LsmSetContained(sandbox_id, contained);
}

Result<cordon_sandbox_state> ChangeSandboxState(uint64_t sandbox_id, uint32_t set, uint32_t clear,
                                                std::string* lsm_problem, bool with_files) {
  auto root = SandboxPinRoot();
  if (!root) return root.error();
  auto lock = LockPinRoot(*root);
  if (!lock) return lock.error();
  std::string dir = SandboxPinDir(*root, sandbox_id);
  if (!Exists(dir)) return Error{"no sandbox is attached to cgroup id " + std::to_string(sandbox_id)};
  UniqueFd state(bpf_obj_get((dir + "/" + kStatePin).c_str()));
  if (!state.valid()) {
    if (errno == ENOENT)
      return Error{"sandbox " + std::to_string(sandbox_id) +
                   " was attached by a cordon without containment state; replace its policy once (cordon update) "
                   "to add it"};
    return SysError("open " + dir + "/" + kStatePin);
  }
  auto changed = ChangeStateWords(state.get(), set, clear);
  if (!changed) return changed.error().Wrap(dir + "/" + kStatePin);
  const cordon_sandbox_state before = *changed;
  cordon_sandbox_state after = before;
  after.flags = (before.flags & ~clear) | set;
  // The BPF LSM object's entry of the sandbox (file and exec checks), under
  // the same lock as every replacement of that entry.
  const bool was = before.flags & CORDON_STATE_F_CONTAINED, is = after.flags & CORDON_STATE_F_CONTAINED;
  if (was != is && with_files)
    if (Status lsm = LsmSetContained(sandbox_id, is); !lsm.ok() && lsm_problem) *lsm_problem = lsm.error().ToString();
  return before;
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

Status AddSandboxFlags(uint64_t sandbox_id, uint32_t flags, uint32_t clear) {
  auto root = SandboxPinRoot();
  if (!root) return root.error();
  auto lock = LockPinRoot(*root);
  if (!lock) return lock.error();
  std::string dir = SandboxPinDir(*root, sandbox_id);
  auto info = ReadInfo(dir);
  if (!info) return info.error();
  info->flags = (info->flags & ~clear) | flags;
  return WriteInfo(dir, *info);
}

Result<std::shared_ptr<const std::vector<policy::QuietPattern>>> ReadSandboxQuiet(const std::string& dir,
                                                                                  uint32_t generation) {
  using Patterns = std::shared_ptr<const std::vector<policy::QuietPattern>>;
  const std::string path = dir + "/" + kQuietPin;
  UniqueFd fd(bpf_obj_get(path.c_str()));
  if (!fd.valid()) {
    if (errno == ENOENT) return Patterns();  // attached by a cordon without spec.quiet
    return SysError("open " + path);
  }
  struct bpf_map_info minfo = {};
  uint32_t len = sizeof minfo;
  if (bpf_obj_get_info_by_fd(fd.get(), &minfo, &len)) return SysError("inspect " + path);
  if (minfo.type != BPF_MAP_TYPE_ARRAY || minfo.key_size != sizeof(uint32_t) || minfo.max_entries != 1 ||
      minfo.value_size < sizeof(cordon_quiet_header) ||
      minfo.value_size > sizeof(cordon_quiet_header) + CORDON_QUIET_MAX_BYTES)
    return Error{path + " is not a spec.quiet map of this cordon"};
  std::string value(minfo.value_size, '\0');
  uint32_t zero = 0;
  if (bpf_map_lookup_elem(fd.get(), &zero, value.data())) return SysError("read " + path);
  cordon_quiet_header header;
  std::memcpy(&header, value.data(), sizeof header);
  if (header.length != value.size() - sizeof header) return Error{path + ": its length field disagrees with its size"};
  if (header.generation != generation) return Patterns();  // another policy's: none until the generations agree
  auto patterns = policy::ParseQuiet(std::string_view(value).substr(sizeof header));
  if (!patterns) return patterns.error().Wrap(path);
  if (patterns->empty()) return Patterns();
  return Patterns(std::make_shared<const std::vector<policy::QuietPattern>>(std::move(*patterns)));
}

}  // namespace cordon
