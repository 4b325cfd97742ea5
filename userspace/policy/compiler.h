// The policy compiler: pure. A parsed policy in, an image of the BPF map
// contents out (bpf/abi/cordon_net.h) and the file rules the loader resolves
// (bpf/abi/cordon_file.h). No kernel or filesystem access; tested without
// privileges. The same image can be evaluated in userspace (Evaluate*), which
// is the reference the kernel's decisions are checked against.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "abi/cordon_file.h"
#include "abi/cordon_net.h"
#include "policy/cidr.h"
#include "policy/credentials.h"
#include "policy/diagnostic.h"
#include "policy/dns_names.h"
#include "policy/parser.h"
#include "policy/quiet.h"
#include "policy/resources.h"

namespace cordon::policy {

constexpr uint8_t kProtoTcp = 6;
constexpr uint8_t kProtoUdp = 17;

struct CompiledRule {           // one egress rule after validation (for display, evaluation)
  std::string name;             // may be empty
  Prefix prefix;                // meaningless for a host rule (never in the image)
  // A name rule (spec.network.egress[].host): the normalised name
  // (policy/dns_names.h), "*." + name for a wildcard; empty for a CIDR rule.
  // Such a rule allows only what cordon's resolver grants for it; the map
  // images and EvaluateRules skip it.
  std::string host;
  bool allow_private = false;   // host rules: private/loopback/... answers allowed
  std::string where;            // host rules: "file:line:column: spec.network.egress[N].host"
  std::vector<PortRange> ports; // empty = every port
  bool tcp = true;
  bool udp = true;
};

// Rights of the policy spellings (CORDON_FILE_* of bpf/abi/cordon_file.h).
constexpr uint32_t kFileRightsRead = CORDON_FILE_READ;
constexpr uint32_t kFileRightsWrite = CORDON_FILE_READ | CORDON_FILE_WRITE | CORDON_FILE_CREATE;
constexpr uint32_t kFileRightsExec = CORDON_FILE_READ | CORDON_FILE_EXEC | CORDON_FILE_MAP_EXEC;
constexpr uint32_t kFileRightsLibrary = CORDON_FILE_READ | CORDON_FILE_MAP_EXEC;  // profile library directories
constexpr uint32_t kFileRightsAll =
    CORDON_FILE_READ | CORDON_FILE_WRITE | CORDON_FILE_CREATE | CORDON_FILE_EXEC | CORDON_FILE_MAP_EXEC;

// Longest accepted path in bytes, as written (PATH_MAX less the NUL).
constexpr size_t kMaxFilePathBytes = CORDON_PATH_MAX - 1;
// Most explicit paths (read + write + exec) in one policy.
constexpr size_t kMaxFileRules = 10'000;

// One spec.files path after validation and profile expansion. The loader
// resolves `path` (following symlinks) to its (device, inode) and stores
// {rights, rule} for it; several rules may resolve to the same object (with
// merged /usr, /lib and /usr/lib do), whose rights are then the union.
struct FileRule {
  std::string path;     // absolute, lexically normalized: no "." or ".." components, no "//", no trailing "/" (but "/")
  uint32_t rights = 0;  // CORDON_FILE_*; the union over every mention of this path
  uint32_t rule = 0;    // 1-based index into file_rules (cordon_inode_rule.rule, reported in events)
  bool required = false;  // explicit entry: attach fails if the path does not exist; profile entry: skipped if absent
  std::string origin;   // first mention: "spec.files.read[0]", "profile:python3"
  // Explicit entries: "file:line:column: spec.files.read[0]", as diagnostics
  // start. Where the rule was written, not what it is: not compared.
  std::string where = {};
  bool operator==(const FileRule& o) const {
    return path == o.path && rights == o.rights && rule == o.rule && required == o.required && origin == o.origin;
  }
};

struct CompiledPolicy {
  std::string name;                 // metadata.name
  std::string digest;               // ParsedPolicy::digest; "builtin:default" for DefaultPolicy()
  uint32_t mode = CORDON_MODE_ENFORCE;
  uint32_t families = 0;            // bits of enum cordon_family
  uint32_t sock_protos = 0;         // bits of enum cordon_sock_proto
  std::vector<CompiledRule> rules;  // in file order; rule index i+1 in events
  // Map images. addr_entries: at most one per distinct prefix. port_entries:
  // port sets deduplicated (identical port/protocol sets share an id).
  std::vector<std::pair<cordon_addr_key, cordon_addr_value>> addr_entries;
  std::vector<std::pair<cordon_port_key, cordon_port_value>> port_entries;
  // spec.network.listen: rules (prefix ::/0 when the address is omitted; port
  // 0 = a kernel-chosen port) and their image in the same two-trie form
  // (listen_addr_rules / listen_port_rules). Empty: no inbound at all.
  std::vector<CompiledRule> listen_rules;
  std::vector<std::pair<cordon_addr_key, cordon_addr_value>> listen_addr_entries;
  std::vector<std::pair<cordon_port_key, cordon_port_value>> listen_port_entries;
  // spec.devices: device nodes allowed beyond the safe set (cgroup/dev).
  struct DeviceAllow {
    static constexpr uint32_t kAnyMinor = 0xffffffffu;  // CORDON_DEV_MINOR_ANY
    char type = 'c';                                     // 'c' or 'b'
    uint32_t major = 0;
    uint32_t minor = 0;
    uint32_t access = 0;  // BPF_DEVCG_ACC_*: 1 mknod, 2 read, 4 write
    bool operator==(const DeviceAllow&) const = default;
  };
  std::vector<DeviceAllow> devices;
  // spec.network.dns.upstream (empty: the host's resolv.conf nameservers).
  std::vector<DnsUpstream> dns_upstreams;

  // spec.files was given (even as `files: {}`): every file access not granted
  // by file_rules is denied. False: files are not restricted (file_rules is
  // empty). The built-in default policy has files.
  bool has_files = false;
  // Explicit read, then write, then exec entries in file order, then the
  // entries of each included profile in include order. A path mentioned again
  // adds its rights to its first entry (which keeps its place and origin), so
  // paths are unique and file_rules[i].rule == i + 1.
  std::vector<FileRule> file_rules;
  // CORDON_LSM_F_*: MEMFD_EXEC (spec.files.allowMemfdExec), ABSTRACT_UNIX
  // (spec.network.abstractUnix), USERNS (spec.allowUserNamespaces), PROC_SELF
  // (profile runtime-minimal: the task's own /proc/<pid>, enforced by pid in
  // the kernel rather than by a path rule).
  uint32_t lsm_flags = 0;
  // spec.onViolation: contain: after this many refusals (0: never) of the
  // kinds in contain_kinds (bit 1 << enum cordon_event_kind) the program that
  // refused contains the sandbox (cordon_sandbox_cfg.contain_after/_kinds).
  uint32_t contain_after = 0;
  uint64_t contain_kinds = 0;

  // spec.runAs: "dynamic" (also when omitted), "root", a user name or
  // "UID[:GID]" (resolved by `cordon run`, not here: the compiler is pure).
  std::string run_as = "dynamic";
  // spec.capabilities: bit (1 << CAP_*) per capability kept. Default 0.
  uint64_t capabilities = 0;
  // spec.environment in file order: {name, value}; pass_through: take the
  // caller's value (an entry "NAME" without "=").
  struct EnvEntry {
    std::string name;
    std::string value;
    bool pass_through = false;
    bool operator==(const EnvEntry&) const = default;
  };
  std::vector<EnvEntry> environment;
  // spec.resources (policy/resources.h): the sandbox cgroup's limits.
  ResourceLimits resources;
  // spec.credentials (policy/credentials.h), in file order.
  std::vector<CredentialSpec> credentials;
  // spec.quiet (policy/quiet.h), in file order: expected events.
  std::vector<QuietPattern> quiet;
};

// The kinds in a contain_kinds mask, "net.connect, net.sendmsg" ("none").
std::string ContainKindsText(uint64_t kinds);
// Whether a contain_kinds mask counts refusals of BPF LSM (file.*, tamper.*
// but device and sysctl) or of cordon run's Landlock and seccomp filter:
// without BPF LSM, only a cordon run refuses (and counts) those.
bool ContainKindsNeedBpfLsm(uint64_t kinds);

// spec.runAs / --user spelling: dynamic, root, a user name, UID or UID:GID.
bool ValidRunAs(const std::string& run_as);

// Capability names as the kernel spells them without CAP_, lower case, by
// number (0 = chown .. 40 = checkpoint_restore).
std::span<const char* const> CapabilityNames();
// "net_bind_service", "NET_BIND_SERVICE", "cap_net_bind_service" -> 10; -1 if unknown.
int CapabilityNumber(std::string_view name);
// 1 << n for each capability -> "net_bind_service, sys_admin" ("none" when 0).
std::string CapabilitiesString(uint64_t caps);

// A built-in file profile (spec.files.include).
struct FileProfileEntry {
  const char* path;
  uint32_t rights;
};
struct FileProfile {
  const char* name;
  std::span<const FileProfileEntry> entries;
  uint32_t lsm_flags;  // CORDON_LSM_F_* the profile sets
};
// runtime-minimal, python3, shell, git, in that order.
std::span<const FileProfile> FileProfiles();

// Validates and normalizes a spec.files path (see FileRule::path). Rejects
// the empty string, relative paths, NUL and other control characters, ".."
// components and paths longer than kMaxFilePathBytes; "." components,
// repeated and trailing slashes are removed. On error returns false and sets
// *error to a sentence naming the problem. Pure: never touches the filesystem.
bool NormalizeFilePath(std::string_view path, std::string* out, std::string* error);

// Validates and compiles. Errors (each naming file, line and field, all of
// them reported, in file order): wrong apiVersion or kind, missing/invalid
// metadata.name, unknown mode, unknown or duplicate family / protocol / extra
// protocol, missing or bad CIDR, bad port or range, duplicate or overlapping
// ports within a rule, explicit empty `ports: []` / `protocols: []` (proto3
// cannot tell them from omitted, and "no ports" would allow nothing), duplicate
// rule names, more than 100,000 rules; in spec.files: bad paths (see
// NormalizeFilePath), a path twice in the same list, unknown or repeated
// profiles, more than kMaxFileRules explicit paths. On error returns false
// with *diags non-empty and *out untouched.
//
// The image: one addr entry per distinct prefix; its port set folds in every
// rule whose prefix contains it, and is CORDON_PORT_SET_ALL when that covers
// every port (0-65535) of both tcp and udp; its rule is the first rule with
// exactly that prefix. Port sets are numbered from 1 in order of first use,
// deduplicated by their (protocol, port) content. Port entries are grouped by
// set, tcp then udp, ascending; each entry's rule allows every port of its
// block (for the prefix that first produced the set: with sharing, not
// necessarily for every address using it).
bool Compile(const ParsedPolicy& parsed, CompiledPolicy* out, Diagnostics* diags);

// Most spec.devices entries.
constexpr size_t kMaxPolicyDevices = 32;

// The built-in default: unix, inet and inet6 sockets may be created, no
// egress at all (loopback included), enforce mode, name "default"; files
// restricted to the profiles runtime-minimal, shell and python3 (nothing
// writable but /dev/null, /dev/tty and /dev/full).
CompiledPolicy DefaultPolicy();

// The egress name rules of a policy put in force by something that does not
// run cordon's resolver for the sandbox (cordon attach and update without an
// agent, learn; cordon run and the agent do): one line per host rule, "where:
// name rules need cordon's DNS resolver, ...". Those refuse such a policy
// with these lines; `cordon policy check` shows them as warnings.
std::vector<std::string> UnenforcedNameRules(const CompiledPolicy& policy);
// Its YAML text (shown by `cordon policy check --default`).
const char* DefaultPolicyYaml();

// Reference decision from the map image, emulating LPM semantics exactly
// as the BPF programs use it. addr is 16 bytes (IPv4 as ::ffff:a.b.c.d).
// *rule receives the deciding rule (1-based) when allowed: the port entry's
// rule, or the addr entry's for CORDON_PORT_SET_ALL. A linear scan: meant
// for tests and one-off queries, not bulk use.
// Agrees with EvaluateRules for every protocol: only tcp and udp are ever
// allowed (the kernel maps MPTCP to tcp and UDP-Lite to udp before asking).
bool EvaluateImage(const CompiledPolicy& policy, const std::array<uint8_t, 16>& addr, uint16_t port,
                   uint8_t proto, uint32_t* rule = nullptr);

// Reference decision from the rules directly: allowed iff some rule's prefix
// contains addr, lists the protocol, and lists the port (or all ports).
bool EvaluateRules(const CompiledPolicy& policy, const std::array<uint8_t, 16>& addr, uint16_t port,
                   uint8_t proto);

}  // namespace cordon::policy
