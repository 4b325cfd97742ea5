#include "loader/kernel_features.h"

#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include <cstring>

#include "abi/cordon_file.h"
#include "abi/cordon_net.h"
#include "policy/describe.h"

namespace cordon {

std::vector<std::string> UnenforcedControls(const policy::CompiledPolicy& policy, const LsmAvailability& lsm) {
  std::vector<std::string> out;
  if (lsm.usable()) return out;
  std::string why = lsm.detail.empty() ? "BPF LSM is not usable on this kernel" : lsm.detail;
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
                  " are NOT refused: only inet/inet6 sockets are enforced (cgroup/sock_create); the rest needs BPF "
                  "LSM");
  if (policy.has_files)
    out.push_back(std::string("file and exec rules are only DETECTED, after the fact: a successful open or exec "
                              "outside the policy is reported with verdict \"detected\"") +
                  ((policy.lsm_flags & CORDON_LSM_F_KILL) ? " and the process is killed before it returns"
                                                           : " (onViolation: kill also kills the process)") +
                  "; nothing is prevented (" + why + ")");
  if (policy.has_files || !(policy.lsm_flags & CORDON_LSM_F_ABSTRACT_UNIX))
    out.push_back(UnixHooks().available()
                      ? std::string("unix-socket connects are refused by address as written (cgroup unix hooks): a "
                                    "symlink in a writable directory that aliases a forbidden socket is only "
                                    "detected")
                      : std::string("connections to pathname unix sockets outside the policy are only detected "
                                    "(kernel before 6.7: no cgroup unix hooks)"));
  out.push_back("tamper protection (bpf(), mounts, signals and ptrace outside the sandbox, cgroup escape) is NOT "
                "enforced: it needs BPF LSM");
  out.push_back("for attached processes, capabilities (a root workload keeps them), terminal ioctls (TIOCSTI), "
                "descriptors opened outside the sandbox and host-wide objects (kernel log, keyrings, System V IPC, "
                "other processes' limits and scheduling) are NOT restricted: that needs BPF LSM (cordon run "
                "restricts them for its own command)");
  out.push_back("inet sockets created outside the sandbox (inherited before attach, or passed in over SCM_RIGHTS) "
                "are NOT judged by the egress rules: the cgroup programs judge a socket by the cgroup that created "
                "it, so such a socket reaches any destination; judging them needs BPF LSM (cordon run closes "
                "inherited descriptors above 2; stdio and --keep-fd descriptors stay usable)");
  return out;
}

std::vector<std::string> UndeliverableInAttach(const policy::CompiledPolicy& policy, const LsmAvailability& lsm) {
  std::vector<std::string> out;
  if (lsm.usable()) return out;
  uint32_t non_inet = (1u << CORDON_FAM_UNIX) | (1u << CORDON_FAM_NETLINK) | (1u << CORDON_FAM_PACKET) |
                      (1u << CORDON_FAM_VSOCK) | (1u << CORDON_FAM_OTHER);
  if ((policy.families & non_inet) != non_inet) out.push_back("network.families (non-inet socket families)");
  out.push_back("tamper (bpf(), mounts, signals, ptrace, cgroup escape, modules, namespaces, clock)");
  out.push_back("identity (capabilities outside spec.capabilities)");
  out.push_back("terminal (TIOCSTI, TIOCLINUX)");
  out.push_back("inherited (descriptors opened outside the sandbox, inet sockets included)");
  out.push_back("hostObjects (kernel log, keyrings, System V IPC, other processes' limits and scheduling)");
  return out;
}

int KernelAttachType(const char* name) {
  struct btf* btf = btf__load_vmlinux_btf();
  if (!btf) return -1;
  int value = -1;
  int id = btf__find_by_name_kind(btf, "bpf_attach_type", BTF_KIND_ENUM);
  if (id > 0) {
    const struct btf_type* t = btf__type_by_id(btf, id);
    const struct btf_enum* e = btf_enum(t);
    for (int i = 0; i < btf_vlen(t); ++i, ++e)
      if (std::strcmp(btf__name_by_offset(btf, e->name_off), name) == 0) value = e->val;
  }
  btf__free(btf);
  return value;
}

const UnixHookTypes& UnixHooks() {
  static const UnixHookTypes types = [] {
    UnixHookTypes t;
    t.connect = KernelAttachType("BPF_CGROUP_UNIX_CONNECT");
    t.sendmsg = KernelAttachType("BPF_CGROUP_UNIX_SENDMSG");
    return t;
  }();
  return types;
}

std::string EnforcementSummary(const LsmAvailability& lsm) {
  if (lsm.usable())
    return "enforced in the kernel: network egress and socket kinds (cgroup hooks); socket families, unix sockets, "
           "files, exec and tamper protection (BPF LSM)";
  return "enforced in the kernel: network egress (connect/sendmsg, IPv4/IPv6) and inet socket kinds (cgroup "
         "hooks); NOT enforced: file/exec rules, non-inet socket families, tamper protection (" +
         (lsm.detail.empty() ? std::string("no BPF LSM") : lsm.detail) + ")";
}

}  // namespace cordon
