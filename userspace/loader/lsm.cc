#include "loader/lsm.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <fcntl.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include "abi/cordon_file.h"
#include "cordon_detect.skel.h"
#include "cordon_lsm.skel.h"
#include "sys/bpffs.h"
#include "sys/libbpf_log.h"
#include "sys/map_batch.h"
#include "util/clock.h"
#include "util/fd.h"
#include "util/fs.h"
#include "util/text.h"

namespace cordon {
std::string LsmRefusalCause() {
  // A trivial fentry program on a kernel function: another kind of BPF
  // trampoline, which LSM programs need too.
  std::string fentry = "fentry programs could not be tried (no kernel BTF)";
  if (struct btf* vmlinux = btf__load_vmlinux_btf()) {
    const int id = btf__find_by_name_kind(vmlinux, "security_file_open", BTF_KIND_FUNC);
    btf__free(vmlinux);
    if (id > 0) {
      const struct bpf_insn insns[] = {{0xb7, 0, 0, 0, 0}, {0x95, 0, 0, 0, 0}};  // r0 = 0; exit
      LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = BPF_TRACE_FENTRY,
                  .attach_btf_id = static_cast<__u32>(id));
      UniqueFd prog(bpf_prog_load(BPF_PROG_TYPE_TRACING, "cordon_fentry", "GPL", insns, 2, &opts));
      const int load_errno = errno;
      if (!prog.valid()) {
        fentry = std::string("fentry programs are refused too (loading one fails: ") + std::strerror(load_errno) + ")";
      } else {
        UniqueFd link(bpf_link_create(prog.get(), 0, BPF_TRACE_FENTRY, nullptr));
        fentry = link.valid() ? "fentry programs load and attach, so BPF trampolines work"
                              : std::string("fentry programs load but do not attach (") + std::strerror(errno) + ")";
      }
    }
  }
  std::string lockdown = "unknown";
  if (auto text = ReadFile("/sys/kernel/security/lockdown")) {
    const size_t open = text->find('['), close = text->find(']');
    if (open != std::string::npos && close > open) lockdown = text->substr(open + 1, close - open - 1);
  }
  // The kernel's configuration: Debian's /boot/config-<release>, else /proc/config.gz.
  std::string config = "not readable";
  struct utsname uts;
  std::string text;
  if (::uname(&uts) == 0)
    if (auto boot = ReadFile(std::string("/boot/config-") + uts.release)) text = std::move(*boot);
  if (text.empty() && ::access("/proc/config.gz", R_OK) == 0)
    if (FILE* zcat = ::popen("zcat /proc/config.gz 2>/dev/null", "r")) {
      char buf[65536];
      for (size_t n; (n = std::fread(buf, 1, sizeof buf, zcat)) > 0 && text.size() < (64u << 20);) text.append(buf, n);
      ::pclose(zcat);
    }
  if (!text.empty()) config = text.find("\nCONFIG_BPF_LSM=y") != std::string::npos ? "y" : "not set";
  const bool trampolines = fentry.rfind("fentry programs load and attach", 0) == 0;
  return fentry + "; lockdown: " + lockdown + "; CONFIG_BPF_LSM: " + config +
         (trampolines ? ": the refusal is particular to LSM programs (a kernel or security policy restriction)"
                      : ": this kernel (or the hypervisor it runs under) refuses BPF trampoline programs, so BPF LSM "
                        "cannot work here whatever the boot parameters");
}

namespace {

struct LsmSkelDeleter {
  void operator()(cordon_lsm* skel) const { cordon_lsm__destroy(skel); }
};
using LsmSkel = std::unique_ptr<cordon_lsm, LsmSkelDeleter>;

// The two host-wide objects sharing one map layout: the BPF LSM programs, and
// the detect-mode tracepoint program for kernels without usable BPF LSM.
enum class Backend { kLsm, kDetect };

struct LoadedObject {
  std::shared_ptr<void> owner;  // the skeleton
  bpf_object* obj = nullptr;
};

constexpr const char* kSecurityfs = "/sys/kernel/security";

// The maps userspace writes, by pin name.
const char* const kMapPins[] = {"lsm_sandboxes",  "cgroup_cache",     "lsm_state",   "file_rules",
                                "sandbox_events", "sandbox_counters", "sandbox_seqs"};
// ... and those of the BPF LSM object only (bpf/lsm/socket.bpf.c).
const char* const kLsmOnlyMapPins[] = {"sandbox_egress_addr", "sandbox_egress_port"};
// ... and the credential guard's inode storage (bpf/lsm/file.bpf.c): pinned by
// the objects of cordons that have it, judged by its presence like the above.
constexpr const char* kCredOwnersPin = "cred_owners";
// ... and the sandboxes' containment states (bpf/lib/lsm_common.bpf.h): an
// object pinned by a cordon without it sees only `cordon contain`'s flag.
// Both objects have it (and the next).
constexpr const char* kStatesPin = "sandbox_states";
// ... and their network objects' sandbox_cfg (contain_after, contain_kinds),
// keyed like the egress tries: without it, the refusals of BPF LSM (or those
// of cordon run's layers the detect object reports) do not count towards
// onViolation: contain.
constexpr const char* kCfgsPin = "sandbox_cfgs";
// cordon's state directory: BPF LSM refuses every sandbox's writes there.
constexpr const char* kStateDir = "/run/cordon";

// A path's object as the BPF programs key it: the superblock's device
// (major << 20 | minor) and the inode.
struct ObjectId {
  uint32_t dev = 0;
  uint64_t ino = 0;
};
std::map<uint64_t, uint32_t> MountDevices();
Result<ObjectId> ResolveObject(const std::string& path, const std::map<uint64_t, uint32_t>& mount_devices);
// ... and the sandboxes' repeats maps (bpf/lib/repeats.bpf.h): an object
// pinned by a cordon without it writes every record of a flood.
constexpr const char* kRepeatsMapsPin = "sandbox_repeats";

std::string ReadLsmList() {
  auto list = ReadFile(std::string(kSecurityfs) + "/lsm");
  if (!list) {
    // securityfs is not mounted on every host; mounting it changes nothing else.
    ::mkdir(kSecurityfs, 0755);
    ::mount("securityfs", kSecurityfs, "securityfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
    list = ReadFile(std::string(kSecurityfs) + "/lsm");
  }
  if (!list) return "";
  std::string s = *list;
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
  return s;
}

bool ListHasBpf(const std::string& list) {
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ','))
    if (item == "bpf") return true;
  return false;
}

Result<std::string> PinDir(Backend backend) {
  auto fs = EnsureBpffs();
  if (!fs) return fs.error();
  return *fs + "/cordon/v" + std::to_string(CORDON_LAYOUT_VERSION) + (backend == Backend::kLsm ? "/lsm" : "/detect");
}

Result<std::string> LsmPinDir() { return PinDir(Backend::kLsm); }

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

// The kernel functions whose exits invalidate the LSM walk's directory cache
// (bpf/lib/dir_cache.bpf.h), present in its BTF.
bool DirCacheSupported() {
  btf* vmlinux = btf__load_vmlinux_btf();
  if (!vmlinux) return false;
  bool all = true;
  for (const char* fn : {"__d_move", "vfs_rmdir", "security_sb_alloc"})
    all = all && btf__find_by_name_kind(vmlinux, fn, BTF_KIND_FUNC) > 0;
  btf__free(vmlinux);
  return all;
}

// Hooks some kernels of the support range lack (6.2+: POSIX ACLs outside the
// xattr hooks): their programs load only where the kernel's BTF has them.
bool KernelHasLsmHook(const btf* vmlinux, const char* hook) {
  return vmlinux && btf__find_by_name_kind(vmlinux, (std::string("bpf_lsm_") + hook).c_str(), BTF_KIND_FUNC) > 0;
}

// Number of arguments of an LSM hook in this kernel (-1: no such hook).
int LsmHookArgs(const btf* vmlinux, const char* hook) {
  if (!vmlinux) return -1;
  int id = btf__find_by_name_kind(vmlinux, (std::string("bpf_lsm_") + hook).c_str(), BTF_KIND_FUNC);
  if (id <= 0) return -1;
  const btf_type* func = btf__type_by_id(vmlinux, static_cast<__u32>(id));
  const btf_type* proto = func ? btf__type_by_id(vmlinux, func->type) : nullptr;
  return proto && btf_is_func_proto(proto) ? btf_vlen(proto) : -1;
}

// probe_only: load a single program, enough to learn whether this kernel
// accepts BPF LSM programs at all without verifying all of them.
Result<LsmSkel> LoadSkeleton(bool probe_only = false) {
  LibbpfLogCapture log;
  LsmSkel skel(cordon_lsm__open());
  if (!skel) return SysError("open the BPF LSM object" + log.Tail());
  CORDON_TRY(RandomBytes(skel->rodata->cordon_repeat_seed, sizeof skel->rodata->cordon_repeat_seed));
  if (probe_only) {
    bpf_program* prog;
    bpf_object__for_each_program(prog, skel->obj) bpf_program__set_autoload(prog, prog == skel->progs.cordon_file_open);
    // The probe is thrown away: one entry per table, not file_rules' 16 MiB of
    // hash buckets (creating them took ~20 ms of every command on a host whose
    // kernel refuses BPF LSM, where the probe runs each time).
    bpf_map* map;
    bpf_object__for_each_map(map, skel->obj) {
      bpf_map_type type = bpf_map__type(map);
      if ((type == BPF_MAP_TYPE_HASH || type == BPF_MAP_TYPE_LRU_HASH || type == BPF_MAP_TYPE_HASH_OF_MAPS) &&
          bpf_map__set_max_entries(map, 1))
        return SysError(std::string("size the probe's map ") + bpf_map__name(map));
    }
  } else if (!DirCacheSupported()) {
    // Without its invalidation programs the directory cache would go stale:
    // the walk then always climbs the whole way.
    skel->rodata->cordon_dir_cache_on = 0;
    for (bpf_program* prog : {skel->progs.cordon_dentry_moved, skel->progs.cordon_dir_removed,
                              skel->progs.cordon_sb_allocated})
      bpf_program__set_autoload(prog, false);
  }
  if (!probe_only) {
    // cordon's state directory, made if need be (0711, as the credential
    // store and the clock want it): refused to every sandbox's writes.
    (void)::mkdir(kStateDir, 0711);
    if (auto dir = ResolveObject(kStateDir, MountDevices())) {
      skel->rodata->cordon_state_dir_dev = dir->dev;
      skel->rodata->cordon_state_dir_ino = dir->ino;
    }
    // cordon's own state, for the sandboxes without spec.files (the others
    // meet the marks AddSandbox writes in their rules).
    const std::vector<std::string> own = CordonOwnStateDirs();
    (void)::mkdir(kVarStateDir, 0700);  // protected from the first sandbox on, not from its creation
    const auto devices = MountDevices();
    size_t above = 0;
    constexpr size_t kAbove = sizeof skel->rodata->cordon_own_anc_ino / sizeof skel->rodata->cordon_own_anc_ino[0];
    for (size_t i = 0; i < own.size() && i < 2; ++i) {
      if (auto dir = ResolveObject(own[i], devices)) {
        skel->rodata->cordon_own_dev[i] = dir->dev;
        skel->rodata->cordon_own_ino[i] = dir->ino;
      }
      // The directories above it ("/" cannot be renamed): no sandbox may
      // rename them (the state would leave its path for one of the
      // workload's making).
      for (std::string up = own[i]; up.rfind('/') != std::string::npos && up.rfind('/') > 0;) {
        up.resize(up.rfind('/'));
        auto dir = ResolveObject(up, devices);
        if (!dir) continue;
        bool known = false;
        for (size_t j = 0; j < above; ++j)
          known = known ||
                  (skel->rodata->cordon_own_anc_ino[j] == dir->ino && skel->rodata->cordon_own_anc_dev[j] == dir->dev);
        if (known) continue;
        if (above == kAbove) {
          std::fprintf(stderr,
                       "cordon: note: %s (above cordon's own state %s) is not protected from renames: "
                       "more than %zu directories above it\n",
                       up.c_str(), own[i].c_str(), kAbove);
          continue;
        }
        skel->rodata->cordon_own_anc_dev[above] = dir->dev;
        skel->rodata->cordon_own_anc_ino[above] = dir->ino;
        ++above;
      }
    }
    btf* vmlinux = btf__load_vmlinux_btf();
    const std::pair<bpf_program*, const char*> optional[] = {
        {skel->progs.cordon_inode_set_acl, "inode_set_acl"},
        {skel->progs.cordon_inode_remove_acl, "inode_remove_acl"},
    };
    for (const auto& [prog, hook] : optional)
      if (!KernelHasLsmHook(vmlinux, hook)) bpf_program__set_autoload(prog, false);
    // Before 6.5 splice()/sendfile() into a socket pass no socket_sendmsg
    // (sendpage): file_permission judges them for sockets from outside.
    bpf_program__set_autoload(skel->progs.cordon_socket_file_write,
                              vmlinux && btf__find_by_name_kind(vmlinux, "kernel_sendpage", BTF_KIND_FUNC) > 0);
    // inode_setattr gained a leading idmap argument in 6.3.
    int setattr_args = LsmHookArgs(vmlinux, "inode_setattr");
    bpf_program__set_autoload(skel->progs.cordon_inode_setattr, setattr_args == 3);
    bpf_program__set_autoload(skel->progs.cordon_inode_setattr_v1, setattr_args == 2);
    btf__free(vmlinux);
  }
  if (int err = cordon_lsm__load(skel.get()))
    return Error{"load the BPF LSM programs" + log.Tail(), -err};
  return skel;
}

Result<LoadedObject> LoadBackend(Backend backend) {
  if (backend == Backend::kLsm) {
    auto skel = LoadSkeleton();
    if (!skel) return skel.error();
    cordon_lsm* raw = skel->release();
    return LoadedObject{std::shared_ptr<void>(raw, [](void* p) { cordon_lsm__destroy(static_cast<cordon_lsm*>(p)); }),
                        raw->obj};
  }
  LibbpfLogCapture log;
  cordon_detect* raw = cordon_detect__open();
  if (!raw) return SysError("open the detect-mode BPF object" + log.Tail());
  std::shared_ptr<void> owner(raw, [](void* p) { cordon_detect__destroy(static_cast<cordon_detect*>(p)); });
  CORDON_TRY(RandomBytes(raw->rodata->cordon_repeat_seed, sizeof raw->rodata->cordon_repeat_seed));
  if (int err = cordon_detect__load(raw)) return Error{"load the detect-mode BPF program" + log.Tail(), -err};
  return LoadedObject{owner, raw->obj};
}

// Loads, attaches and pins a host-wide object; a failure leaves nothing behind.
Status LoadAndPin(const std::string& dir, Backend backend) {
  auto loaded = LoadBackend(backend);
  if (!loaded) return loaded.error();
  std::string staging = dir + "_staging_" + std::to_string(::getpid());
  CORDON_TRY(MakeDirs(staging, 0700));
  std::vector<bpf_link*> links;
  auto fail = [&](const Error& error) -> Error {
    for (auto* link : links) {
      bpf_link__unpin(link);
      bpf_link__destroy(link);
    }
    if (auto names = ListDir(staging))
      for (const auto& n : *names) ::unlink((staging + "/" + n).c_str());
    ::rmdir(staging.c_str());
    return error;
  };
  bpf_program* prog;
  bpf_object__for_each_program(prog, loaded->obj) {
    if (!bpf_program__autoload(prog)) continue;
    bpf_link* link = bpf_program__attach(prog);  // by section: lsm/..., fexit/... or raw_tp/...
    if (!link) return fail(SysError(std::string("attach BPF program ") + bpf_program__name(prog)));
    links.push_back(link);
    std::string pin = staging + "/link_" + bpf_program__name(prog);
    if (bpf_link__pin(link, pin.c_str())) return fail(SysError("pin " + pin));
  }
  std::vector<const char*> pins(std::begin(kMapPins), std::end(kMapPins));
  if (backend == Backend::kLsm) {
    pins.insert(pins.end(), std::begin(kLsmOnlyMapPins), std::end(kLsmOnlyMapPins));
    pins.push_back(kCredOwnersPin);
  }
  pins.push_back(kStatesPin);
  pins.push_back(kCfgsPin);
  pins.push_back(kRepeatsMapsPin);
  for (const char* name : pins) {
    bpf_map* map = bpf_object__find_map_by_name(loaded->obj, name);
    std::string pin = staging + "/" + name;
    if (!map || bpf_map__pin(map, pin.c_str())) return fail(SysError("pin " + pin));
  }
  if (::rename(staging.c_str(), dir.c_str()) != 0) return fail(SysError("publish " + dir));
  for (auto* link : links) bpf_link__destroy(link);  // pinned: stays attached
  return {};
}

Result<UniqueFd> OpenPinned(const std::string& dir, const char* name) {
  UniqueFd fd(bpf_obj_get((dir + "/" + name).c_str()));
  if (!fd.valid()) return SysError("open " + dir + "/" + name);
  return fd;
}

Result<uint64_t> ReadGeneration(const std::string& dir) {
  auto state = OpenPinned(dir, "lsm_state");
  if (!state) return state.error();
  uint32_t zero = 0;
  cordon_lsm_state value = {};
  if (bpf_map_lookup_elem(state->get(), &zero, &value)) return SysError("read lsm_state");
  return value.generation;
}

Status BumpGeneration(const std::string& dir) {
  auto state = OpenPinned(dir, "lsm_state");
  if (!state) return state.error();
  uint32_t zero = 0;
  cordon_lsm_state value = {};
  if (bpf_map_lookup_elem(state->get(), &zero, &value)) return SysError("read lsm_state");
  value.generation++;
  if (bpf_map_update_elem(state->get(), &zero, &value, BPF_ANY)) return SysError("write lsm_state");
  return {};
}

// Deletes the sandbox's file rules, all of them or all but `keep_version`.
Status DeleteRules(const std::string& dir, uint64_t sandbox_id, std::optional<uint32_t> keep_version) {
  auto rules = OpenPinned(dir, "file_rules");
  if (!rules) return rules.error();
  std::vector<cordon_inode_key> doomed;
  cordon_inode_key key = {}, next = {};
  void* prev = nullptr;
  while (bpf_map_get_next_key(rules->get(), prev, &next) == 0) {
    if (next.sandbox_id == sandbox_id && (!keep_version || next.version != *keep_version)) doomed.push_back(next);
    key = next;
    prev = &key;
  }
  for (const auto& k : doomed) bpf_map_delete_elem(rules->get(), &k);
  return {};
}

// Deletes the sandbox's egress tries and cfg references, all of them or all
// but `keep_version` (nothing to do in an object without them: see
// LsmJudgesForeignSockets).
Status DeleteEgress(const std::string& dir, uint64_t sandbox_id, std::optional<uint32_t> keep_version) {
  for (const char* name : {kLsmOnlyMapPins[0], kLsmOnlyMapPins[1], kCfgsPin}) {
    if (!Exists(dir + "/" + name)) continue;
    auto map = OpenPinned(dir, name);
    if (!map) return map.error();
    std::vector<cordon_lsm_net_key> doomed;
    cordon_lsm_net_key key = {}, next = {};
    void* prev = nullptr;
    while (bpf_map_get_next_key(map->get(), prev, &next) == 0) {
      if (next.sandbox_id == sandbox_id && (!keep_version || next.version != *keep_version)) doomed.push_back(next);
      key = next;
      prev = &key;
    }
    for (const auto& k : doomed) bpf_map_delete_elem(map->get(), &k);
  }
  return {};
}

size_t CountSandboxes(const std::string& dir) {
  auto sandboxes = OpenPinned(dir, "lsm_sandboxes");
  if (!sandboxes) return 0;
  size_t n = 0;
  uint64_t key = 0, next = 0;
  void* prev = nullptr;
  while (bpf_map_get_next_key(sandboxes->get(), prev, &next) == 0) {
    ++n;
    key = next;
    prev = &key;
  }
  return n;
}

Status Unload(const std::string& dir) {
  auto names = ListDir(dir);
  if (!names) return names.error();
  for (const auto& name : *names) {
    std::string path = dir + "/" + name;
    if (name.rfind("link_", 0) == 0) {
      UniqueFd link(bpf_obj_get(path.c_str()));
      if (link.valid()) bpf_link_detach(link.get());
    }
    ::unlink(path.c_str());
  }
  if (::rmdir(dir.c_str()) != 0 && errno != ENOENT) return SysError("remove " + dir);
  return {};
}

}  // namespace

const LsmAvailability& ProbeLsm() {
  static const LsmAvailability availability = [] {
    LsmAvailability a;
    a.lsm_list = ReadLsmList();
    a.listed = ListHasBpf(a.lsm_list);
    auto dir = LsmPinDir();
    if (dir && Exists(*dir + "/lsm_sandboxes")) {
      a.loadable = true;  // already loaded and attached by an earlier cordon
    } else {
      auto skel = LoadSkeleton(/*probe_only=*/true);
      a.loadable = skel.ok();
      if (!skel.ok())
        a.detail = std::string("the kernel refuses BPF LSM programs (loading one fails: ") +
                   std::strerror(skel.error().err ? skel.error().err : EINVAL) + ")";
    }
    if (!a.listed) {
      a.detail = "BPF LSM is not active: 'bpf' is missing from the kernel's LSM list (" +
                 (a.lsm_list.empty() ? std::string("unreadable") : a.lsm_list) +
                 "); boot with lsm=...,bpf to enable it";
    }
    return a;
  }();
  return availability;
}

namespace {

// Mount id -> the superblock's device (major << 20 | minor), from mountinfo.
// stat()'s st_dev is not always the superblock's: overlayfs and btrfs report
// another device, and the BPF programs key rules by d_sb->s_dev.
std::map<uint64_t, uint32_t> MountDevices() {
  std::map<uint64_t, uint32_t> out;
  auto text = ReadFile("/proc/self/mountinfo");
  if (!text) return out;
  std::istringstream in(*text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    uint64_t id = 0, parent = 0;
    std::string majmin;
    fields >> id >> parent >> majmin;
    size_t colon = majmin.find(':');
    if (colon == std::string::npos) continue;
    uint32_t maj = static_cast<uint32_t>(std::strtoul(majmin.c_str(), nullptr, 10));
    uint32_t min = static_cast<uint32_t>(std::strtoul(majmin.c_str() + colon + 1, nullptr, 10));
    out[id] = (maj << 20) | min;
  }
  return out;
}

Result<ObjectId> ResolveObject(const std::string& path, const std::map<uint64_t, uint32_t>& mount_devices) {
  struct statx stx;
  if (::statx(AT_FDCWD, path.c_str(), 0, STATX_INO | STATX_MNT_ID, &stx) != 0) return SysError(path);
  auto dev = (stx.stx_mask & STATX_MNT_ID) ? mount_devices.find(stx.stx_mnt_id) : mount_devices.end();
  return ObjectId{dev != mount_devices.end() ? dev->second : (stx.stx_dev_major << 20) | stx.stx_dev_minor,
                  stx.stx_ino};
}

// The directories to mark CORDON_FILE_FORBIDDEN: each state directory and
// the directories below it (two levels, at most 64: oidc/, oidc/public/,
// policies/), so that a bind mount of one of them elsewhere, whose walk never
// climbs to the state directory itself, meets a mark too.
std::vector<ObjectId> OwnStateObjects(const std::map<uint64_t, uint32_t>& mount_devices) {
  std::vector<ObjectId> out;
  std::vector<std::pair<std::string, int>> todo;  // breadth first: the state directories themselves first
  for (const std::string& dir : CordonOwnStateDirs()) todo.emplace_back(dir, 0);
  for (size_t next = 0; next < todo.size() && out.size() < 64; ++next) {
    const auto [dir, depth] = todo[next];
    auto object = ResolveObject(dir, mount_devices);
    if (!object) continue;
    out.push_back(*object);
    if (depth == 2) continue;
    auto names = ListDir(dir);
    if (!names) continue;
    for (const std::string& name : *names) {
      const std::string sub = dir + "/" + name;
      struct stat st;
      if (::lstat(sub.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) todo.emplace_back(sub, depth + 1);
    }
  }
  return out;
}

}  // namespace

Result<std::vector<ResolvedFileRule>> ResolveFileRules(const policy::CompiledPolicy& policy,
                                                       std::vector<std::string>* skipped) {
  std::vector<ResolvedFileRule> out;
  const std::map<uint64_t, uint32_t> mount_devices = MountDevices();
  const std::vector<std::string> own_state = CordonOwnStateDirs();
  for (const auto& rule : policy.file_rules) {
    auto object = ResolveObject(rule.path, mount_devices);
    if (!object) {
      if (!rule.required) {
        if (skipped) skipped->push_back(rule.path);
        continue;
      }
      return Error{rule.origin + ": " + object.error().message, object.error().err};
    }
    // Named through a symlink or a test's store elsewhere: what the rule
    // reaches, not how it is spelled (the compiler refuses the spelling).
    char real[PATH_MAX];
    const std::string reached = ::realpath(rule.path.c_str(), real) ? real : rule.path;
    auto own = std::find_if(own_state.begin(), own_state.end(),
                            [&](const std::string& dir) { return PathAtOrBelow(reached, dir); });
    if (own != own_state.end()) {
      if (rule.required)
        return Error{rule.origin + ": " + Quoted(rule.path) +
                         (reached == rule.path ? "" : " (" + Quoted(reached) + ")") + " is cordon's own state (" +
                         *own + ": signing keys, kept policy texts): no sandbox is granted it, whatever its policy",
                     EPERM};
      if (skipped) skipped->push_back(rule.path);
      continue;
    }
    ResolvedFileRule r;
    r.dev = object->dev;
    r.ino = object->ino;
    r.rights = rule.rights;
    r.rule = rule.rule;
    r.path = rule.path;
    out.push_back(std::move(r));
  }
  return out;
}

namespace {

Status AddSandbox(Backend backend, uint64_t sandbox_id, uint32_t cgroup_level, const policy::CompiledPolicy& policy,
                  const std::vector<ResolvedFileRule>& rules, int events_fd, int counters_fd, int seq_fd, int state_fd,
                  uint32_t extra_flags, const EgressTries* egress, SwitchedLayer* with) {
  auto dir = PinDir(backend);
  if (!dir) return dir.error();
  if (!Exists(*dir + "/lsm_sandboxes")) CORDON_TRY(LoadAndPin(*dir, backend));
  auto sandboxes = OpenPinned(*dir, "lsm_sandboxes");
  auto file_rules = OpenPinned(*dir, "file_rules");
  auto events = OpenPinned(*dir, "sandbox_events");
  auto counters = OpenPinned(*dir, "sandbox_counters");
  auto seqs = OpenPinned(*dir, "sandbox_seqs");
  if (!sandboxes) return sandboxes.error();
  if (!seqs) return seqs.error();
  if (!file_rules) return file_rules.error();
  if (!events) return events.error();
  if (!counters) return counters.error();

  cordon_lsm_sandbox current = {};
  bool replacing = bpf_map_lookup_elem(sandboxes->get(), &sandbox_id, &current) == 0;
  // A version names one immutable rule set of this cgroup for as long as the
  // object is loaded (the BPF walk caches directory rights under it): a fresh
  // sandbox starts above every version ever used. Each registration bumps the
  // generation, so no version handed out so far exceeds it.
  uint32_t version = 1;
  if (replacing) {
    version = current.version + 1;
  } else {
    auto generation = ReadGeneration(*dir);
    if (!generation) return generation.error();
    version = static_cast<uint32_t>(*generation + 1);
  }

  // Nothing of a replacement that fails before its switch stays behind.
  auto discard_new = [&](const Error& error) -> Error {
    if (replacing) {
      (void)DeleteRules(*dir, sandbox_id, current.version);
      (void)DeleteEgress(*dir, sandbox_id, current.version);
    }
    return error;
  };
  // New rules first, under a version nothing reads yet: one entry per object
  // (two rule paths naming one object share it: the union of their rights,
  // the first one's rule), written in one batch.
  std::vector<cordon_inode_key> keys;
  std::vector<cordon_inode_rule> values;
  keys.reserve(rules.size());
  values.reserve(rules.size());
  std::map<std::pair<uint32_t, uint64_t>, size_t> by_object;
  auto add = [&](uint32_t dev, uint64_t ino, uint32_t rights, uint32_t rule) {
    auto [it, first] = by_object.try_emplace({dev, ino}, keys.size());
    if (!first) {
      values[it->second].rights |= rights;
      return;
    }
    cordon_inode_key key = {};
    key.sandbox_id = sandbox_id;
    key.ino = ino;
    key.dev = dev;
    key.version = version;
    keys.push_back(key);
    values.push_back(cordon_inode_rule{rights, rule});
  };
  for (const auto& r : rules) add(r.dev, r.ino, r.rights, r.rule);
  // cordon's own state: marked for every sandbox, whatever its rules (none
  // names it: ResolveFileRules refuses that).
  for (const ObjectId& own : OwnStateObjects(MountDevices())) add(own.dev, own.ino, CORDON_FILE_FORBIDDEN, 0);
  if (Status written = UpdateMapEntries(file_rules->get(), keys.data(), sizeof(cordon_inode_key), values.data(),
                                        sizeof(cordon_inode_rule), keys.size(), "file rules");
      !written.ok())
    return discard_new(written.error());
  if (bpf_map_update_elem(events->get(), &sandbox_id, &events_fd, BPF_ANY))
    return discard_new(SysError("register the sandbox's ring buffer with the LSM programs"));
  if (bpf_map_update_elem(counters->get(), &sandbox_id, &counters_fd, BPF_ANY))
    return discard_new(SysError("register the sandbox's counters with the LSM programs"));
  if (bpf_map_update_elem(seqs->get(), &sandbox_id, &seq_fd, BPF_ANY))
    return discard_new(SysError("register the sandbox's record sequence with the LSM programs"));
  // Its repeats map (pinned in its directory; absent in a sandbox attached by
  // a cordon without one): the LSM's records of a flood are counted there,
  // as its network programs' are, and the reader delivers the counts.
  if (Exists(*dir + "/" + kRepeatsMapsPin)) {
    auto root = SandboxPinRoot();
    if (!root) return discard_new(root.error());
    const std::string pin = SandboxPinDir(*root, sandbox_id) + "/" + CORDON_REPEATS_PIN;
    UniqueFd repeats(bpf_obj_get(pin.c_str()));
    if (!repeats.valid() && errno != ENOENT) return discard_new(SysError("open " + pin));
    auto maps = OpenPinned(*dir, kRepeatsMapsPin);
    if (!maps) return discard_new(maps.error());
    const int fd = repeats.get();
    if (repeats.valid() && bpf_map_update_elem(maps->get(), &sandbox_id, &fd, BPF_ANY))
      return discard_new(SysError("register the sandbox's repeats map with the LSM programs"));
  }
  // Its containment state (a sandbox attached by a cordon without one, or
  // with one that is not mmapable, cannot be referenced: the inner maps must
  // match. `cordon contain`'s flag still applies to it).
  struct bpf_map_info state_info = {};
  uint32_t state_info_len = sizeof state_info;
  if (state_fd >= 0 && Exists(*dir + "/" + kStatesPin) &&
      bpf_obj_get_info_by_fd(state_fd, &state_info, &state_info_len) == 0 && (state_info.map_flags & BPF_F_MMAPABLE)) {
    auto states = OpenPinned(*dir, kStatesPin);
    if (!states) return discard_new(states.error());
    if (bpf_map_update_elem(states->get(), &sandbox_id, &state_fd, BPF_ANY))
      return discard_new(SysError("register the sandbox's containment state with the LSM programs"));
  }
  // Its network object's cfg, under the new version too, so that this
  // object's refusals count towards its onViolation: contain.
  if (egress && egress->cfg_fd >= 0 && Exists(*dir + "/" + kCfgsPin)) {
    auto cfgs = OpenPinned(*dir, kCfgsPin);
    if (!cfgs) return discard_new(cfgs.error());
    cordon_lsm_net_key key = {};
    key.sandbox_id = sandbox_id;
    key.version = version;
    if (bpf_map_update_elem(cfgs->get(), &key, &egress->cfg_fd, BPF_ANY))
      return discard_new(SysError("register the sandbox's onViolation settings with the LSM programs"));
  }
  // The egress tries, under the new version too: the socket programs look
  // both up under the version they read from the sandbox's entry.
  if (egress && Exists(*dir + "/" + kLsmOnlyMapPins[0])) {
    if (egress->addr_fd < 0 || egress->port_fd < 0)
      return discard_new(Error{"the sandbox's egress rules are not open (internal error)"});
    auto addr = OpenPinned(*dir, kLsmOnlyMapPins[0]);
    auto port = OpenPinned(*dir, kLsmOnlyMapPins[1]);
    if (!addr) return discard_new(addr.error());
    if (!port) return discard_new(port.error());
    cordon_lsm_net_key key = {};
    key.sandbox_id = sandbox_id;
    key.version = version;
    if (bpf_map_update_elem(addr->get(), &key, &egress->addr_fd, BPF_ANY) ||
        bpf_map_update_elem(port->get(), &key, &egress->port_fd, BPF_ANY))
      return discard_new(SysError("register the sandbox's egress rules with the LSM programs"));
  }

  cordon_lsm_sandbox next = {};
  next.sandbox_id = sandbox_id;
  next.version = version;
  next.mode = policy.mode;
  next.flags = policy.lsm_flags | (policy.has_files ? CORDON_LSM_F_FILES : 0) | extra_flags;
  // Report-only (detect object next to BPF LSM): no after-the-fact file
  // checks or kills, just the refusals of cordon run's own layers.
  if (extra_flags & CORDON_LSM_F_REPORT_ONLY) next.flags &= ~(CORDON_LSM_F_FILES | CORDON_LSM_F_KILL);
  // A contained sandbox stays contained through a replacement (LsmSetContained).
  if (replacing) next.flags |= current.flags & CORDON_LSM_F_CONTAINED;
  next.families = policy.families;
  next.level = cgroup_level;
  next.capabilities = policy.capabilities;
  // The other layer switches right before this one (with: a replacement),
  // so the whole policy switches within two system calls.
  if (with) {
    if (Status committed = with->Commit(); !committed.ok()) return discard_new(committed.error());
  }
  // One hash update switches every hook to the new version at once.
  if (bpf_map_update_elem(sandboxes->get(), &sandbox_id, &next, BPF_ANY)) {
    Error error = SysError("register the sandbox with the LSM programs");
    if (with) with->Rollback();
    return discard_new(error);
  }
  if (with) {
    with->FileLayerSwitched(static_cast<uint64_t>(MonoNs()));
  }
  CORDON_TRY(BumpGeneration(*dir));
  if (replacing) {
    CORDON_TRY(DeleteRules(*dir, sandbox_id, version));
    CORDON_TRY(DeleteEgress(*dir, sandbox_id, version));
  }
  return {};
}

// Unregisters the record sequences of sandboxes removed earlier (all but
// `kept`): those whose ring buffer is no longer registered. A registration
// registers its ring buffer before its sequence, so one in progress keeps its
// sequence.
void SweepSequences(const std::string& dir, uint64_t kept) {
  auto seqs = OpenPinned(dir, "sandbox_seqs");
  auto events = OpenPinned(dir, "sandbox_events");
  if (!seqs || !events) return;
  std::vector<uint64_t> stale;
  uint64_t key = 0, next = 0;
  void* prev = nullptr;
  while (bpf_map_get_next_key(seqs->get(), prev, &next) == 0) {
    uint32_t ring_id = 0;
    if (next != kept && bpf_map_lookup_elem(events->get(), &next, &ring_id) != 0 && errno == ENOENT)
      stale.push_back(next);
    key = next;
    prev = &key;
  }
  for (uint64_t id : stale) bpf_map_delete_elem(seqs->get(), &id);
}

Status RemoveSandbox(Backend backend, uint64_t sandbox_id) {
  auto dir = PinDir(backend);
  if (!dir) return dir.error();
  if (!Exists(*dir + "/lsm_sandboxes")) return {};
  auto sandboxes = OpenPinned(*dir, "lsm_sandboxes");
  if (!sandboxes) return sandboxes.error();
  bpf_map_delete_elem(sandboxes->get(), &sandbox_id);
  CORDON_TRY(BumpGeneration(*dir));
  CORDON_TRY(DeleteRules(*dir, sandbox_id, std::nullopt));
  CORDON_TRY(DeleteEgress(*dir, sandbox_id, std::nullopt));
  if (auto events = OpenPinned(*dir, "sandbox_events")) bpf_map_delete_elem(events->get(), &sandbox_id);
  if (auto counters = OpenPinned(*dir, "sandbox_counters")) bpf_map_delete_elem(counters->get(), &sandbox_id);
  // Its record sequence stays registered until the next removal: a program
  // that looked the sandbox up just before it went may still be writing a
  // record into the ring buffer it holds, and takes the record's number
  // after reserving its place; with the sequence gone it got none (seq 0, no
  // id). The sequences of sandboxes removed before go now.
  SweepSequences(*dir, sandbox_id);
  if (Exists(*dir + "/" + kRepeatsMapsPin))
    if (auto maps = OpenPinned(*dir, kRepeatsMapsPin)) bpf_map_delete_elem(maps->get(), &sandbox_id);
  if (Exists(*dir + "/" + kStatesPin))
    if (auto states = OpenPinned(*dir, kStatesPin)) bpf_map_delete_elem(states->get(), &sandbox_id);
  if (CountSandboxes(*dir) == 0) return Unload(*dir);
  return {};
}

}  // namespace

Status LsmAddSandbox(uint64_t sandbox_id, uint32_t cgroup_level, const policy::CompiledPolicy& policy,
                     const std::vector<ResolvedFileRule>& rules, int events_fd, int counters_fd, int seq_fd,
                     int state_fd, const EgressTries& egress, SwitchedLayer* with) {
  return AddSandbox(Backend::kLsm, sandbox_id, cgroup_level, policy, rules, events_fd, counters_fd, seq_fd, state_fd,
                    0, &egress, with);
}

bool LsmJudgesForeignSockets() {
  auto dir = LsmPinDir();
  if (!dir) return true;  // nothing pinned: the object this cordon loads has them
  return !Exists(*dir + "/lsm_sandboxes") || Exists(*dir + "/" + kLsmOnlyMapPins[0]);
}

std::string ForeignSocketsNote() {
  if (LsmJudgesForeignSockets()) return "";
  return "inet sockets created outside the sandbox are NOT judged by its egress rules: the BPF LSM object in force "
         "was loaded by an earlier cordon without socket_connect/socket_sendmsg; it is replaced when the last "
         "sandbox leaves";
}

Status DetectAddSandbox(uint64_t sandbox_id, uint32_t cgroup_level, const policy::CompiledPolicy& policy,
                        const std::vector<ResolvedFileRule>& rules, int events_fd, int counters_fd, int seq_fd,
                        int state_fd, int cfg_fd, uint32_t extra_flags, SwitchedLayer* with) {
  EgressTries cfg_only;  // no egress tries in this object: only the cfg is registered
  cfg_only.cfg_fd = cfg_fd;
  return AddSandbox(Backend::kDetect, sandbox_id, cgroup_level, policy, rules, events_fd, counters_fd, seq_fd, state_fd,
                    extra_flags, &cfg_only, with);
}

Status LsmRemoveSandbox(uint64_t sandbox_id) {
  Status lsm = RemoveSandbox(Backend::kLsm, sandbox_id);
  Status detect = RemoveSandbox(Backend::kDetect, sandbox_id);
  return lsm.ok() ? detect : lsm;
}

bool DetectLoadable(std::string* detail) {
  auto dir = PinDir(Backend::kDetect);
  if (dir && Exists(*dir + "/lsm_sandboxes")) return true;
  auto loaded = LoadBackend(Backend::kDetect);
  if (!loaded && detail) *detail = std::strerror(loaded.error().err ? loaded.error().err : EINVAL);
  return loaded.ok();
}

Status LsmSetContained(uint64_t sandbox_id, bool contained) {
  auto dir = LsmPinDir();
  if (!dir || !Exists(*dir + "/lsm_sandboxes")) return {};
  auto sandboxes = OpenPinned(*dir, "lsm_sandboxes");
  if (!sandboxes) return sandboxes.error();
  cordon_lsm_sandbox value;
  if (bpf_map_lookup_elem(sandboxes->get(), &sandbox_id, &value) != 0) return {};  // not registered here
  if (contained)
    value.flags |= CORDON_LSM_F_CONTAINED;
  else
    value.flags &= ~CORDON_LSM_F_CONTAINED;
  // BPF_EXIST: never re-create an entry a detach removed meanwhile.
  if (bpf_map_update_elem(sandboxes->get(), &sandbox_id, &value, BPF_EXIST) != 0 && errno != ENOENT)
    return SysError(std::string(contained ? "contain" : "release") + " the sandbox in the BPF LSM object");
  return {};
}

bool LsmGuardsCredentials() {
  if (!ProbeLsm().usable()) return false;
  auto dir = LsmPinDir();
  if (!dir) return true;  // nothing pinned: the object this cordon loads has it
  return !Exists(*dir + "/lsm_sandboxes") || Exists(*dir + "/" + kCredOwnersPin);
}

Result<bool> LsmGuardCredential(int fd, uint64_t sandbox_id) {
  auto dir = LsmPinDir();
  if (!dir || !Exists(*dir + "/" + kCredOwnersPin)) return false;
  auto owners = OpenPinned(*dir, kCredOwnersPin);
  if (!owners) return owners.error();
  cordon_cred_owner value = {};
  value.sandbox_id = sandbox_id;
  if (bpf_map_update_elem(owners->get(), &fd, &value, BPF_ANY) != 0)
    return SysError("mark the credential file for BPF LSM (cred_owners)");
  return true;
}

uint64_t LsmCredentialOwner(int fd) {
  auto dir = LsmPinDir();
  if (!dir || !Exists(*dir + "/" + kCredOwnersPin)) return 0;
  auto owners = OpenPinned(*dir, kCredOwnersPin);
  cordon_cred_owner value = {};
  if (!owners || bpf_map_lookup_elem(owners->get(), &fd, &value) != 0) return 0;
  return value.sandbox_id;
}

bool LsmHasSandbox(uint64_t sandbox_id) {
  auto dir = LsmPinDir();
  if (!dir) return false;
  auto sandboxes = OpenPinned(*dir, "lsm_sandboxes");
  if (!sandboxes) return false;
  cordon_lsm_sandbox value;
  return bpf_map_lookup_elem(sandboxes->get(), &sandbox_id, &value) == 0;
}

}  // namespace cordon
