#pragma once

#include <string>

#include "policy/compiler.h"

namespace cordon::policy {

// Human summary for `cordon policy check`: name, mode, families, extra
// protocols, and each egress rule as "allow tcp,udp 10.0.0.0/8 ports 443,8000-8100".
// Ends with "egress: nothing else (default deny)".
std::string Describe(const CompiledPolicy& policy);

// Names for display and events.
std::string FamilyName(int cordon_family_bit);
std::string SockProtoName(int cordon_sock_proto_bit);

}  // namespace cordon::policy
