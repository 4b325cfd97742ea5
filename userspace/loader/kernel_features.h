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

// One line summarising the enforcement this kernel allows, for status output.
std::string EnforcementSummary(const LsmAvailability& lsm);

}  // namespace cordon
