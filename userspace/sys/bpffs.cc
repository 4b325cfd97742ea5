#include "sys/bpffs.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>

#include <vector>

#include <bpf/bpf.h>

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

namespace {

// The first non-directory below dir (depth-first), or "".
std::string FirstPin(const std::string& dir, int depth) {
  if (depth > 8) return dir;  // deeper than any layout nests: not ours to judge, count it as state
  auto names = ListDir(dir);
  if (!names) return "";
  for (const auto& name : *names) {
    std::string path = dir + "/" + name;
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) continue;
    if (!S_ISDIR(st.st_mode)) return path;
    if (std::string pin = FirstPin(path, depth + 1); !pin.empty()) return pin;
  }
  return "";
}

}  // namespace

std::vector<ForeignLayoutTree> ForeignLayoutTrees() {
  std::vector<ForeignLayoutTree> out;
  struct statfs sfs;
  if (::statfs(kBpffsDefault, &sfs) != 0 || sfs.f_type != BPF_FS_MAGIC) return out;  // no bpffs: no state
  const std::string base = std::string(kBpffsDefault) + "/cordon";
  auto names = ListDir(base);
  if (!names) return out;  // nothing pinned yet
  const std::string ours = "v" + std::to_string(CORDON_LAYOUT_VERSION);
  for (const auto& name : *names) {
    if (name.size() < 2 || name[0] != 'v' || name == ours ||
        name.find_first_not_of("0123456789", 1) != std::string::npos)
      continue;
    out.push_back({base + "/" + name, name.substr(1), FirstPin(base + "/" + name, 0)});
  }
  return out;
}

Status CheckNoForeignLayoutState() {
  for (const auto& tree : ForeignLayoutTrees())
    if (!tree.first_pin.empty())
      return Error{tree.dir + " holds pinned state of layout version " + tree.version + " (" + tree.first_pin +
                   "), written by another cordon release; this one uses layout " +
                   std::to_string(CORDON_LAYOUT_VERSION) +
                   ": detach those sandboxes with that release first (README: Upgrades)"};
  return {};
}

Result<PinnedSandboxInfo> ReadSandboxInfo(const std::string& dir, bool* foreign) {
  *foreign = false;
  const std::string path = dir + "/info";
  UniqueFd fd(bpf_obj_get(path.c_str()));
  if (!fd.valid()) return SysError("open " + path);
  struct bpf_map_info minfo = {};
  uint32_t len = sizeof minfo;
  if (bpf_obj_get_info_by_fd(fd.get(), &minfo, &len)) return SysError("inspect " + path);
  if (minfo.value_size != sizeof(cordon_sandbox_info)) {
    *foreign = true;
    return Error{dir + " was written by a cordon with another state layout (info of " +
                 std::to_string(minfo.value_size) + " bytes, this cordon's has " +
                 std::to_string(sizeof(cordon_sandbox_info)) + ")"};
  }
  PinnedSandboxInfo out;
  out.map_id = minfo.id;
  uint32_t zero = 0;
  if (bpf_map_lookup_elem(fd.get(), &zero, &out.info)) return SysError("read " + path);
  if (out.info.layout_version != CORDON_LAYOUT_VERSION) {
    *foreign = true;
    return Error{dir + " has state layout version " + std::to_string(out.info.layout_version) +
                 " (this cordon understands " + std::to_string(CORDON_LAYOUT_VERSION) + ")"};
  }
  return out;
}

Result<UniqueFd> LockPinRoot(const std::string& root) {
  UniqueFd fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return SysError("open " + root);
  if (::flock(fd.get(), LOCK_EX) != 0) return SysError("lock " + root);
  return fd;
}

Result<UniqueFd> OpenSandboxMap(uint64_t sandbox_id, const std::string& map_name) {
  auto root = SandboxPinRoot();
  if (!root) return root.error();
  std::string path = SandboxPinDir(*root, sandbox_id) + "/" + map_name;
  UniqueFd fd(bpf_obj_get(path.c_str()));
  if (!fd.valid()) return SysError("open " + path);
  return fd;
}

}  // namespace cordon
