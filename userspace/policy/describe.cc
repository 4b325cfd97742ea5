#include "policy/describe.h"

#include "util/text.h"

namespace cordon::policy {
namespace {

// Lists the names of the set bits, "none" if there are none.
std::string BitNames(uint32_t bits, std::string (*name)(int)) {
  std::string out;
  for (int bit = 0; bit < 32; ++bit) {
    if (!(bits & (1u << bit))) continue;
    if (!out.empty()) out += ", ";
    out += name(bit);
  }
  return out.empty() ? "none" : out;
}

std::string PortsText(const std::vector<PortRange>& ports) {
  if (ports.empty()) return "all ports";
  std::string out = ports.size() == 1 && ports[0].lo == ports[0].hi ? "port " : "ports ";
  for (size_t i = 0; i < ports.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(ports[i].lo);
    if (ports[i].hi != ports[i].lo) out += "-" + std::to_string(ports[i].hi);
  }
  return out;
}

// Rule names and paths come from the policy file: keep them on one line
// that cannot steer the terminal.
std::string Printable(const std::string& text) { return DisplayText(text); }

}  // namespace

std::string FamilyName(int cordon_family_bit) {
  switch (cordon_family_bit) {
    case CORDON_FAM_UNIX:
      return "unix";
    case CORDON_FAM_INET:
      return "inet";
    case CORDON_FAM_INET6:
      return "inet6";
    case CORDON_FAM_NETLINK:
      return "netlink";
    case CORDON_FAM_PACKET:
      return "packet";
    case CORDON_FAM_VSOCK:
      return "vsock";
    case CORDON_FAM_OTHER:
      return "other";
  }
  return "family-bit-" + std::to_string(cordon_family_bit);
}

std::string SockProtoName(int cordon_sock_proto_bit) {
  switch (cordon_sock_proto_bit) {
    case CORDON_SP_RAW:
      return "raw";
    case CORDON_SP_ICMP:
      return "icmp";
    case CORDON_SP_ICMPV6:
      return "icmpv6";
    case CORDON_SP_SCTP:
      return "sctp";
    case CORDON_SP_MPTCP:
      return "mptcp";
    case CORDON_SP_UDPLITE:
      return "udplite";
  }
  return "protocol-bit-" + std::to_string(cordon_sock_proto_bit);
}

std::string Describe(const CompiledPolicy& policy) {
  std::string out;
  out += "policy: " + Printable(policy.name) + "\n";
  out += std::string("mode: ") +
         (policy.mode == CORDON_MODE_AUDIT ? "audit (denials are reported, not enforced)" : "enforce") + "\n";
  out += "socket families: " + BitNames(policy.families, FamilyName) +
         (policy.families == 0 ? " (every socket() is denied)" : "") + "\n";
  out += "extra inet protocols: " + BitNames(policy.sock_protos, SockProtoName) +
         (policy.sock_protos == 0 ? " (only tcp and udp sockets)" : "") + "\n";
  out += "egress rules: " + std::to_string(policy.rules.size()) + " (compiled to " +
         std::to_string(policy.addr_entries.size()) + " address and " + std::to_string(policy.port_entries.size()) +
         " port map entries)\n";
  for (size_t i = 0; i < policy.rules.size(); ++i) {
    const CompiledRule& rule = policy.rules[i];
    const char* protocols = rule.tcp && rule.udp ? "tcp,udp" : rule.tcp ? "tcp" : "udp";
    const std::string destination =
        rule.host.empty()
            ? rule.prefix.ToString()
            : "the addresses cordon's resolver answers for " + rule.host +
                  (rule.host[0] == '*' ? " (one or more labels before " + rule.host.substr(2) + ")" : "") +
                  (rule.allow_private ? ", private ranges included" : "");
    out += "  " + std::to_string(i + 1) + ". allow " + protocols + " " + destination + " " + PortsText(rule.ports);
    if (!rule.name.empty()) out += "  (" + Printable(rule.name) + ")";
    out += "\n";
  }
  out += "egress: nothing else (default deny)\n";
  if (!policy.dns_upstreams.empty()) {
    out += "dns upstreams (for name rules):";
    for (const auto& upstream : policy.dns_upstreams) out += " " + upstream.ToString();
    out += "\n";
  }

  if (!policy.has_files) {
    out += "files: not restricted by this policy (no spec.files)\n";
  } else {
    out += "files: " + std::to_string(policy.file_rules.size()) +
           " rules (r read, w write, c create/delete/rename, x execute, m map executable; an explicit write "
           "path must exist, an explicit read or exec path or a profile path absent on the host is skipped)\n";
    for (const FileRule& rule : policy.file_rules) {
      out += "  " + FileRightsText(rule.rights) + " " + Printable(rule.path) + "  (" + Printable(rule.origin) + ")\n";
    }
    out += "files: everything else denied (default deny)\n";
    out += std::string("own /proc/<pid>: ") +
           (policy.lsm_flags & CORDON_LSM_F_PROC_SELF ? "readable (profile runtime-minimal)" : "denied") + "\n";
    out += std::string("memfd exec: ") +
           (policy.lsm_flags & CORDON_LSM_F_MEMFD_EXEC ? "allowed (spec.files.allowMemfdExec)" : "denied") + "\n";
  }
  out += std::string("abstract unix sockets: ") +
         (policy.lsm_flags & CORDON_LSM_F_ABSTRACT_UNIX ? "allowed (spec.network.abstractUnix)" : "denied") + "\n";
  out += std::string("user namespaces: ") +
         (policy.lsm_flags & CORDON_LSM_F_USERNS ? "allowed (spec.allowUserNamespaces)" : "denied") + "\n";
  if (policy.contain_after)
    out += "on violation: contain the sandbox in the kernel after " + std::to_string(policy.contain_after) +
           " refusal" + (policy.contain_after == 1 ? "" : "s") + " (" + ContainKindsText(policy.contain_kinds) +
           "; released by `cordon release`)\n" +
           (ContainKindsNeedBpfLsm(policy.contain_kinds)
                ? "  note: file and tamper refusals count where BPF LSM refuses them and, in cordon run, where its "
                  "Landlock or seccomp filter does; without BPF LSM a sandbox of cordon attach has no such refusals "
                  "(network, device and sysctl refusals always count)\n"
                : "");
  out += DescribeResources(policy.resources);
  out += DescribeCredentials(policy.credentials);
  out += DescribeQuiet(policy.quiet);
  return out;
}

std::string FileRightsText(uint32_t rights) {
  std::string out = "-----";
  if (rights & CORDON_FILE_READ) out[0] = 'r';
  if (rights & CORDON_FILE_WRITE) out[1] = 'w';
  if (rights & CORDON_FILE_CREATE) out[2] = 'c';
  if (rights & CORDON_FILE_EXEC) out[3] = 'x';
  if (rights & CORDON_FILE_MAP_EXEC) out[4] = 'm';
  return out;
}

}  // namespace cordon::policy
