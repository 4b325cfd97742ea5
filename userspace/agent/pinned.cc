#include "agent/pinned.h"

#include <bpf/bpf.h>
#include <signal.h>

#include <cerrno>
#include <cstdlib>
#include <vector>

#include "agent/agent.h"
#include "loader/sandbox.h"
#include "sys/bpffs.h"
#include "util/fd.h"
#include "util/fs.h"

namespace cordon::agent {

namespace {
void TerminateStrings(cordon_sandbox_info* info) {
  info->name[sizeof info->name - 1] = '\0';
  info->policy[sizeof info->policy - 1] = '\0';
  info->cgroup_path[sizeof info->cgroup_path - 1] = '\0';
}
}  // namespace

Result<PinnedInfo> ReadPinnedInfo(const std::string& dir, bool* foreign) {
  auto out = ReadSandboxInfo(dir, foreign);
  if (out) TerminateStrings(&out->info);
  return out;
}

bool ReadHeldInfo(int info_fd, PinnedInfo* pinned) {
  uint32_t zero = 0;
  if (bpf_map_lookup_elem(info_fd, &zero, &pinned->info) != 0 ||
      pinned->info.layout_version != CORDON_LAYOUT_VERSION)
    return false;
  TerminateStrings(&pinned->info);
  return true;
}

bool IsNumber(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

// A run that found the agent asked it to adopt the sandbox explicitly. Its
// cgroup is /cordon/run-<pid>-<random>.
bool RunStillReading(const cordon_sandbox_info& info) {
  if (!(info.flags & CORDON_INFO_F_EPHEMERAL)) return false;
  const std::string path = info.cgroup_path;
  const std::string prefix = "/cordon/run-";
  if (path.compare(0, prefix.size(), prefix) != 0) return false;
  int pid = std::atoi(path.c_str() + prefix.size());
  return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM);
}

std::string EnforcementLevel(uint32_t flags) {
  SandboxInfo info;
  info.lsm = flags & CORDON_INFO_F_LSM;
  info.landlock = flags & CORDON_INFO_F_LANDLOCK;
  info.seccomp = flags & CORDON_INFO_F_SECCOMP;
  info.detect = flags & CORDON_INFO_F_DETECT;
  info.detect_kill = flags & CORDON_INFO_F_DETECT_KILL;
  return info.Level();
}

Status CheckPinnedLayout() {
  // Stricter than an attach (CheckNoForeignLayoutState): the agent owns the
  // tree for as long as it runs, so even an empty tree of another release
  // (one being set up or torn down) stops it.
  std::vector<std::string> problems;
  for (const auto& tree : ForeignLayoutTrees())
    problems.push_back(tree.dir + " holds state of layout version " + tree.version);
  const std::string base = std::string(kBpffsDefault) + "/cordon";
  const std::string sandboxes = base + "/v" + std::to_string(CORDON_LAYOUT_VERSION) + "/sandboxes";
  if (auto ids = ListDir(sandboxes)) {
    for (const auto& name : *ids) {
      if (!IsNumber(name)) continue;
      bool foreign = false;
      auto pinned = ReadPinnedInfo(sandboxes + "/" + name, &foreign);
      if (!pinned && foreign) problems.push_back(pinned.error().ToString());
    }
  }
  if (problems.empty()) return {};
  std::string list;
  for (const auto& p : problems) list += (list.empty() ? "" : "; ") + p;
  return Error{"refusing to start: " + list + ". This cordon understands state layout version " +
               std::to_string(CORDON_LAYOUT_VERSION) +
               " only; nothing was touched. Use the cordon that wrote that state (its agent, or its detach)"};
}

}  // namespace cordon::agent
