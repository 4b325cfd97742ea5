#include "loader/bpffs.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/statfs.h>

#include "abi/cordon_common.h"
#include "util/fs.h"

namespace cordon {

Result<std::string> EnsureBpffs() {
  struct statfs sfs;
  if (::statfs(kBpffsDefault, &sfs) == 0 && sfs.f_type == BPF_FS_MAGIC) return std::string(kBpffsDefault);
  CORDON_TRY(MakeDirs(kBpffsDefault));
  if (::mount("bpf", kBpffsDefault, "bpf", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0700") != 0)
    return SysError(std::string("mount bpffs at ") + kBpffsDefault);
  return std::string(kBpffsDefault);
}

Result<std::string> SandboxPinRoot() {
  auto fs = EnsureBpffs();
  if (!fs) return fs.error();
  std::string root = *fs + "/cordon/v" + std::to_string(CORDON_LAYOUT_VERSION) + "/sandboxes";
  CORDON_TRY(MakeDirs(root, 0700));
  return root;
}

std::string SandboxPinDir(const std::string& root, uint64_t sandbox_id) {
  return root + "/" + std::to_string(sandbox_id);
}

Result<UniqueFd> LockPinRoot(const std::string& root) {
  UniqueFd fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return SysError("open " + root);
  if (::flock(fd.get(), LOCK_EX) != 0) return SysError("lock " + root);
  return fd;
}

}  // namespace cordon
