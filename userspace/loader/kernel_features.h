// What this kernel and this build enforce, stated plainly. A control the
// kernel is not applying is never reported as active.
#pragma once

#include <string>
#include <vector>

#include "loader/lsm.h"
#include "policy/compiler.h"

namespace cordon {

// Lines naming each part of the policy that is NOT enforced here, given
// whether BPF LSM is usable.
std::vector<std::string> UnenforcedControls(const policy::CompiledPolicy& policy, const LsmAvailability& lsm);

// Controls the policy asks for that no layer at all can deliver to processes
// cordon attaches to (attach mode: no Landlock or seccomp can be imposed on
// running processes). `cordon attach` refuses them unless --allow-degraded.
std::vector<std::string> UndeliverableInAttach(const policy::CompiledPolicy& policy, const LsmAvailability& lsm);

// The value of a BPF_* attach type in this kernel's BTF (enum
// bpf_attach_type), or -1 when the kernel does not have it.
int KernelAttachType(const char* name);

// cgroup/connect_unix and cgroup/sendmsg_unix (kernel 6.7+): the attach types
// (BPF_CGROUP_UNIX_CONNECT, BPF_CGROUP_UNIX_SENDMSG), or -1 each. Cached.
struct UnixHookTypes {
  int connect = -1;
  int sendmsg = -1;
  bool available() const { return connect >= 0 && sendmsg >= 0; }
};
const UnixHookTypes& UnixHooks();

// One line summarising the enforcement this kernel allows, for status output.
std::string EnforcementSummary(const LsmAvailability& lsm);

}  // namespace cordon
