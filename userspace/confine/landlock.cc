#include "confine/landlock.h"

#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

// <linux/landlock.h> of Debian 12 is from Linux 6.1 (ABI 2). The values below
// are the kernel's (include/uapi/linux/landlock.h), defined when missing.
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14) /* ABI 3 */
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15) /* ABI 5 */
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0) /* ABI 6 */
#endif
#ifndef LANDLOCK_SCOPE_SIGNAL
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1) /* ABI 6 */
#endif
#ifndef LANDLOCK_CREATE_RULESET_VERSION
#define LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#endif
#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#endif
#ifndef __NR_landlock_add_rule
#define __NR_landlock_add_rule 445
#endif
#ifndef __NR_landlock_restrict_self
#define __NR_landlock_restrict_self 446
#endif

namespace cordon {
namespace {

// struct landlock_ruleset_attr as of ABI 6 (the 6.1 header has only the
// first field). The kernel accepts a shorter size from older callers; we
// pass the size matching the ABI in use.
struct RulesetAttr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;  // ABI 4 (never set: see PrepareLandlock)
  uint64_t scoped;              // ABI 6
};

struct PathBeneathAttr {
  uint64_t allowed_access;
  int32_t parent_fd;
} __attribute__((packed));
static_assert(sizeof(PathBeneathAttr) == sizeof(landlock_path_beneath_attr));

constexpr uint64_t kFsAbi1 = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                             LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR |
                             LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
                             LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR |
                             LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK |
                             LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |
                             LANDLOCK_ACCESS_FS_MAKE_SYM;
// Rights Landlock accepts on a non-directory (the kernel's ACCESS_FILE).
constexpr uint64_t kFsFileRights = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                                   LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE |
                                   LANDLOCK_ACCESS_FS_IOCTL_DEV;

// The ELF interpreter named by every dynamically linked x86_64 program.
constexpr const char* kDynamicLoader = "/lib64/ld-linux-x86-64.so.2";

uint64_t HandledFs(int abi) {
  uint64_t fs = kFsAbi1;
  if (abi >= 2) fs |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) fs |= LANDLOCK_ACCESS_FS_TRUNCATE;
  if (abi >= 5) fs |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
  return fs;
}

// Landlock rights for cordon rights, before masking by what the ABI handles
// and by what a non-directory may hold.
uint64_t FsRights(uint32_t rights) {
  uint64_t out = 0;
  if (rights & CORDON_FILE_READ) out |= LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
  if (rights & CORDON_FILE_WRITE)
    out |= LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV;
  if (rights & CORDON_FILE_CREATE)
    out |= LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_SYM |
           LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_REMOVE_FILE |
           LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REFER;
  if (rights & CORDON_FILE_EXEC) out |= LANDLOCK_ACCESS_FS_EXECUTE;
  // CORDON_FILE_MAP_EXEC: Landlock does not mediate mmap/mprotect.
  return out;
}

std::string RealPath(const std::string& path) {
  std::unique_ptr<char, decltype(&std::free)> real(::realpath(path.c_str(), nullptr), &std::free);
  return real ? std::string(real.get()) : std::string();
}

bool Beneath(const std::string& path, const std::string& dir) {
  if (dir == "/") return !path.empty() && path[0] == '/';
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/');
}

int CreateRuleset(const RulesetAttr& attr, int abi) {
  size_t size = abi >= 6 ? sizeof(RulesetAttr) : abi >= 4 ? 2 * sizeof(uint64_t) : sizeof(uint64_t);
  return static_cast<int>(::syscall(__NR_landlock_create_ruleset, &attr, size, 0));
}

int AddPathRule(int ruleset, int fd, uint64_t access) {
  PathBeneathAttr attr{access, fd};
  return static_cast<int>(::syscall(__NR_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &attr, 0));
}

}  // namespace

LandlockSupport ProbeLandlock() {
  LandlockSupport out;
  long abi = ::syscall(__NR_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (abi > 0) {
    out.abi = static_cast<int>(abi);
    return out;
  }
  int err = errno;
  if (err == ENOSYS)
    out.detail = "Landlock is not built into this kernel (landlock_create_ruleset: ENOSYS)";
  else if (err == EOPNOTSUPP)
    out.detail = "Landlock is built in but not enabled (add landlock to the lsm= boot parameter)";
  else
    out.detail = std::string("Landlock probe failed: ") + std::strerror(err);
  return out;
}

Result<LandlockPlan> PrepareLandlock(const policy::CompiledPolicy& policy, const LandlockSupport& support) {
  if (support.abi <= 0)
    return Error{"Landlock is unavailable" + (support.detail.empty() ? std::string() : ": " + support.detail)};
  const int abi = support.abi;
  LandlockPlan plan;
  plan.abi = abi;
  RulesetAttr attr{};

  // ---- files
  if (policy.has_files) {
    attr.handled_access_fs = HandledFs(abi);
    plan.files = true;
  }

  // ---- TCP connect: never handled. The cgroup egress programs judge every
  // destination (address and port) and report each refusal; Landlock would
  // refuse first, with EACCES and no event, and only by port.
  plan.notes.push_back(
      "TCP and UDP are left to the cgroup egress programs: Landlock's network rules (ports only, EACCES, no audit "
      "event) are not used.");

  // ---- scoping
  if (abi >= 6) {
    attr.scoped = LANDLOCK_SCOPE_SIGNAL;
    if (!(policy.lsm_flags & CORDON_LSM_F_ABSTRACT_UNIX)) {
      attr.scoped |= LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET;
      plan.notes.push_back(
          "abstract unix sockets are refused only when their server is outside the sandbox's Landlock domain: the "
          "command's own processes may still use them among themselves.");
    }
    plan.scoped = true;
  } else {
    plan.notes.push_back("signal and abstract unix socket scoping need Landlock ABI 6 (this kernel has ABI " +
                         std::to_string(abi) + ").");
  }

  if (attr.handled_access_fs == 0 && attr.handled_access_net == 0 && attr.scoped == 0) {
    plan.notes.push_back("nothing for Landlock to enforce for this policy on this kernel.");
    return plan;
  }

  int ruleset_fd = CreateRuleset(attr, abi);
  if (ruleset_fd < 0) return SysError("landlock_create_ruleset (ABI " + std::to_string(abi) + ")");
  plan.ruleset = UniqueFd(ruleset_fd);

  if (policy.has_files) {
    const uint64_t handled = attr.handled_access_fs;
    const std::string loader_real = RealPath(kDynamicLoader);
    bool loader_mappable = false;  // some MAP_EXEC rule covers the dynamic loader
    bool loader_executable = false;
    for (const auto& rule : policy.file_rules) {
      UniqueFd fd(::open(rule.path.c_str(), O_PATH | O_CLOEXEC));
      if (!fd.valid()) {
        int err = errno;
        if (!rule.required && (err == ENOENT || err == ENOTDIR)) continue;
        return SysError(rule.origin + ": " + rule.path, err).Wrap("Landlock file rule");
      }
      struct stat st;
      if (::fstat(fd.get(), &st) != 0) return SysError(rule.origin + ": stat " + rule.path).Wrap("Landlock file rule");
      uint64_t access = FsRights(rule.rights) & handled;
      if (!S_ISDIR(st.st_mode)) access &= kFsFileRights;
      if (!loader_real.empty()) {
        std::string real = RealPath(rule.path);
        if (!real.empty() && Beneath(loader_real, real)) {
          if (rule.rights & CORDON_FILE_MAP_EXEC) loader_mappable = true;
          if (access & LANDLOCK_ACCESS_FS_EXECUTE) loader_executable = true;
        }
      }
      if (access == 0) continue;
      if (AddPathRule(plan.ruleset.get(), fd.get(), access) != 0)
        return SysError(rule.origin + ": landlock_add_rule " + rule.path).Wrap("Landlock file rule");
    }
    if (loader_mappable && !loader_executable) {
      UniqueFd fd(::open(loader_real.c_str(), O_PATH | O_CLOEXEC));
      if (!fd.valid()) return SysError(std::string("open ") + kDynamicLoader).Wrap("Landlock file rule");
      uint64_t access = (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE) & handled;
      if (AddPathRule(plan.ruleset.get(), fd.get(), access) != 0)
        return SysError(std::string("landlock_add_rule ") + kDynamicLoader).Wrap("Landlock file rule");
      plan.notes.push_back(std::string("the dynamic loader ") + kDynamicLoader +
                           " may be executed (the kernel checks exec on the ELF interpreter of every dynamic "
                           "program), so any readable ELF file can be run as `" +
                           kDynamicLoader + " FILE`: exec rules bind execve, not code execution.");
    }
    plan.notes.push_back(
        "executable mappings are not restricted by Landlock: PROT_EXEC mappings (mmap, mprotect) of readable files "
        "are allowed.");
    plan.notes.push_back(
        "metadata changes (chmod, chown, utimes, extended attributes), stat, access and chdir are not restricted by "
        "Landlock.");
    plan.notes.push_back(
        "connecting to pathname unix sockets is not restricted by Landlock (creating them is): write access to the "
        "socket's path is not required.");
    if (abi < 2)
      plan.notes.push_back(
          "renaming or linking files into another directory is always refused (Landlock ABI 1 has no REFER right).");
    if (abi < 3) plan.notes.push_back("truncate() is not restricted (needs Landlock ABI 3).");
    if (abi < 5) plan.notes.push_back("ioctl() on device files is not restricted (needs Landlock ABI 5).");
    if (policy.lsm_flags & CORDON_LSM_F_PROC_SELF)
      plan.notes.push_back(
          "the task's own /proc/<pid> (profile runtime-minimal) can be granted to the command's first process only "
          "(ApplyLandlockInChild with proc_self): the processes it starts cannot read their own, because Landlock "
          "rules name objects fixed before they exist.");
    if (!(policy.lsm_flags & CORDON_LSM_F_MEMFD_EXEC))
      plan.notes.push_back(
          "executing memfd files (memfd_create + fexecve) is not refused by Landlock: they live on an internal mount "
          "that Landlock does not mediate.");
  }

  plan.notes.push_back(
      "Landlock's denials are reported as cordon events from the failed call (EACCES), with the path as the command "
      "wrote it (a relative path stays relative); the kernel does not say which check refused, so an EACCES from a "
      "file's own permissions on a path the policy grants is reported the same way.");
  return plan;
}

int ApplyLandlockInChild(int ruleset_fd, bool proc_self) {
  if (ruleset_fd < 0) return EBADF;
  if (proc_self) {
    // The child's own /proc/<pid>, resolved here where "self" is the child:
    // the command keeps its pid across exec (its later children do not).
    int fd = ::open("/proc/self", O_PATH | O_CLOEXEC);
    if (fd >= 0) {
      struct {
        uint64_t allowed_access;
        int32_t parent_fd;
      } __attribute__((packed)) rule = {LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR, fd};
      (void)::syscall(__NR_landlock_add_rule, ruleset_fd, LANDLOCK_RULE_PATH_BENEATH, &rule, 0);
      ::close(fd);
    }
  }
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  if (::syscall(__NR_landlock_restrict_self, ruleset_fd, 0) != 0) return errno;
  return 0;
}

}  // namespace cordon
