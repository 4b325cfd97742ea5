#include "loader/kernel_features.h"

#include "abi/cordon_net.h"
#include "policy/describe.h"

namespace cordon {

std::vector<std::string> UnenforcedControls(const policy::CompiledPolicy& policy) {
  std::vector<std::string> out;
  // cgroup/sock_create is an inet hook (measured): socket(AF_PACKET/AF_NETLINK/
  // AF_VSOCK/...) is invisible to it. Refusing those needs BPF LSM or seccomp.
  std::string denied_other;
  for (int bit : {CORDON_FAM_UNIX, CORDON_FAM_NETLINK, CORDON_FAM_PACKET, CORDON_FAM_VSOCK, CORDON_FAM_OTHER}) {
    if (policy.families & (1u << bit)) continue;
    if (!denied_other.empty()) denied_other += ", ";
    denied_other += bit == CORDON_FAM_OTHER ? "other" : policy::FamilyName(bit);
  }
  if (!denied_other.empty())
    out.push_back("socket families " + denied_other +
                  " are NOT refused: only inet/inet6 sockets are enforced (cgroup/sock_create); other families "
                  "need BPF LSM socket_create or a seccomp filter, which this build does not install yet");
  out.push_back(
      "file and exec rules: NOT enforced (this build has no BPF LSM file programs yet); the sandbox can read and "
      "write files as its uid allows");
  return out;
}

std::string EnforcementSummary() {
  return "enforced: network egress (connect/sendmsg, IPv4/IPv6) and inet socket kinds, in the kernel "
         "(cgroup hooks); NOT enforced: file/exec rules, non-inet socket families";
}

}  // namespace cordon
