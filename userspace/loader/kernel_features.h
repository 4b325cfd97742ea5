// What this kernel and this build enforce, stated plainly. A control the
// kernel is not applying is never reported as active.
#pragma once

#include <string>
#include <vector>

#include "policy/compiler.h"

namespace cordon {

// Lines naming each part of the policy that is NOT enforced here, e.g. socket
// families other than inet/inet6 (cgroup/sock_create does not see them).
std::vector<std::string> UnenforcedControls(const policy::CompiledPolicy& policy);

// One line summarising the enforcement in force, for status output.
std::string EnforcementSummary();

}  // namespace cordon
