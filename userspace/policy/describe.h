#pragma once

#include <string>

#include "policy/compiler.h"

namespace cordon::policy {

// Human summary for `cordon policy check`: name, mode, families, extra
// protocols, and each egress rule as "allow tcp,udp 10.0.0.0/8 ports 443,8000-8100",
// then "egress: nothing else (default deny)". Then the files section: each
// file rule (profiles expanded) as "  rwc-- /work/out  (spec.files.write[0])"
// and "files: everything else denied (default deny)", or "files: not
// restricted by this policy (no spec.files)"; then the sandbox flags (own
// /proc/<pid> and memfd exec with files; abstract unix sockets, user namespaces).
std::string Describe(const CompiledPolicy& policy);

// CORDON_FILE_* as five letters r w c x m, '-' for each right not granted.
std::string FileRightsText(uint32_t rights);

// Names for display and events.
std::string FamilyName(int cordon_family_bit);
std::string SockProtoName(int cordon_sock_proto_bit);

}  // namespace cordon::policy
