#include "events/decoder.h"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>
#include <linux/audit.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <vector>
#include <cstdio>
#include <cstring>

#include "abi/cordon_event.h"
#include "abi/cordon_file.h"
#include "events/identity.h"
#include "policy/cidr.h"
#include "sys/cgroup.h"
#include "util/clock.h"
#include "util/text.h"

namespace cordon {

void SetTimestamp(int64_t ns, google::protobuf::Timestamp* ts) {
  // As TimeUtil::NanosecondsToTimestamp: nanos in [0, 1e9).
  int64_t seconds = ns / 1000000000;
  int64_t nanos = ns % 1000000000;
  if (nanos < 0) {
    nanos += 1000000000;
    seconds -= 1;
  }
  ts->set_seconds(seconds);
  ts->set_nanos(static_cast<int32_t>(nanos));
}

namespace {

// e: the record's header and, for net-layout records, its address and socket
// kind (zero for the object layout).
std::string ReasonText(const cordon_net_event& e, const std::string& target) {
  switch (e.hdr.reason) {
    case CORDON_REASON_NO_RULE:
      return "no egress rule allows " + target;
    case CORDON_REASON_DNS_DIVERTED:
      return (e.hdr.rule ? "egress rule #" + std::to_string(e.hdr.rule) + " matches the address but not " +
                               std::to_string(e.port) + "/" + ProtocolName(e.protocol)
                         : "no egress rule allows " + target) +
             ": the datagram went to cordon's DNS resolver instead (a DNS query is answered there by the name rules; "
             "anything else is dropped)";
    case CORDON_REASON_PORT:
      return "egress rule #" + std::to_string(e.hdr.rule) + " matches the address but not " + std::to_string(e.port) +
             "/" + ProtocolName(e.protocol);
    case CORDON_REASON_FAMILY:
      return "socket family " + SocketFamilyName(e.family) + " is not in spec.network.families";
    case CORDON_REASON_SOCK_KIND:
      return SocketTypeName(e.sock_type) + " " + ProtocolName(e.protocol) +
             " sockets are not allowed (spec.network.extraProtocols)";
    case CORDON_REASON_FILE_RULE:
      return "no files rule grants " + target;
    case CORDON_REASON_PATH_TOO_DEEP:
      return "path deeper than " + std::to_string(CORDON_WALK_MAX) + " levels: denied";
    case CORDON_REASON_LINK_GAIN: return std::string(kLinkGainReason) + " (" + target + ")";
    case CORDON_REASON_DEVICE_NODE:
      return "device nodes may not be created in a sandbox";
    case CORDON_REASON_MEMFD_EXEC:
      return "executing anonymous memory files needs spec.files.allowMemfdExec";
    case CORDON_REASON_ABSTRACT_UNIX:
      return "abstract unix sockets need spec.network.abstractUnix";
    case CORDON_REASON_OUTSIDE_SANDBOX:
      return "the target is outside the sandbox" + (target.empty() ? std::string() : " (" + target + ")");
    case CORDON_REASON_FORBIDDEN:
      return "never allowed inside a sandbox" + (target.empty() ? std::string() : " (" + target + ")");
    case CORDON_REASON_SECCOMP:
      return "refused by cordon run's seccomp filter" + (target.empty() ? std::string() : " (" + target + ")");
    case CORDON_REASON_UNIX_PATH:
      return "no files rule grants write on the unix socket address " + target + " (checked as written)";
    case CORDON_REASON_UNIX_UNCHECKABLE:
      return "unix socket address " + target +
             " is relative or has a \"..\" component: without BPF LSM only absolute, plain paths can be checked";
    case CORDON_REASON_LANDLOCK:
      return "refused by cordon run's Landlock ruleset" + (target.empty() ? std::string() : " (" + target + ")");
    case CORDON_REASON_NO_LISTEN_RULE:
      return "no listen rule allows binding " + target + " (spec.network.listen)";
    case CORDON_REASON_CAPABILITY:
      return "capability not granted by spec.capabilities" + (target.empty() ? std::string() : " (" + target + ")");
    case CORDON_REASON_DETACHED_MOUNT:
      return "reached through a detached mount or another mount namespace" +
             (target.empty() ? std::string() : " (" + target + ")");
    case CORDON_REASON_NOT_SAFE:
      return "outside the set a sandbox may use" + (target.empty() ? std::string() : " (" + target + ")");
    case CORDON_REASON_FOREIGN_SOCKET: {
      const std::string from_outside = "socket created outside the sandbox (inherited or passed in), judged by BPF LSM: ";
      if (e.sock_type != 1 && e.sock_type != 2)  // SOCK_STREAM, SOCK_DGRAM
        return from_outside + SocketTypeName(e.sock_type) + " sockets from outside are never allowed to send";
      if (e.hdr.rule)
        return from_outside + "egress rule #" + std::to_string(e.hdr.rule) + " matches the address but not " +
               std::to_string(e.port) + "/" + ProtocolName(e.protocol);
      return from_outside + "no egress rule allows " + target;
    }
    case CORDON_REASON_COREDUMP:
      return "the process began a core dump, written with its own rights: the file rules decide where it may go"
             " (working directory " +
             target + ")";
    case CORDON_REASON_READ_ONLY_MOUNT:
      return "on a read-only mount (cordon run gives its command /sys and the host's /proc control files read-only)" +
             (target.empty() ? std::string() : " (" + target + ")");
    case CORDON_REASON_CONTAINED:
      return "the sandbox is contained: every operation is refused until `cordon release`" +
             (target.empty() ? std::string() : " (" + target + ")");
    case CORDON_REASON_EGRESS_BUDGET:
      return "spec.resources.egressBytes" + (target.empty() ? std::string() : " (" + target + ")");
    case CORDON_REASON_CORDON_STATE:
      return "cordon's own state (signing keys, kept policy texts): refused to every sandbox whatever its policy" +
             (target.empty() ? std::string() : " (" + target + ")");
  }
  return "unknown";
}

// policy::AddressToString (inet_ntop), with IPv4 and IPv4-mapped addresses
// formatted here as inet_ntop does ("%u.%u.%u.%u"), without its sprintf.
std::string AddressText(const std::array<uint8_t, 16>& addr) {
  static const uint8_t kMappedPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(addr.data(), kMappedPrefix, sizeof kMappedPrefix) != 0) return policy::AddressToString(addr);
  char buf[16];
  char* p = buf;
  for (int i = 12; i < 16; ++i) {
    unsigned v = addr[i];
    if (v >= 100) *p++ = static_cast<char>('0' + v / 100);
    if (v >= 10) *p++ = static_cast<char>('0' + v / 10 % 10);
    *p++ = static_cast<char>('0' + v % 10);
    if (i < 15) *p++ = '.';
  }
  return std::string(buf, static_cast<size_t>(p - buf));
}

std::string CommString(const char (&comm)[16]) { return std::string(comm, strnlen(comm, sizeof comm)); }


}  // namespace

std::string KindName(uint32_t kind) { return policy::EventKindName(kind); }

std::string RightsString(uint32_t rights) {
  static const struct {
    uint32_t bit;
    const char* name;
  } kNames[] = {{CORDON_FILE_READ, "read"},
                {CORDON_FILE_WRITE, "write"},
                {CORDON_FILE_CREATE, "create"},
                {CORDON_FILE_EXEC, "exec"},
                {CORDON_FILE_MAP_EXEC, "map_exec"}};
  std::string out;
  for (const auto& n : kNames) {
    if (!(rights & n.bit)) continue;
    if (!out.empty()) out += ",";
    out += n.name;
  }
  return out;
}

std::string ProtocolName(uint32_t protocol) {
  switch (protocol) {
    case 0: return "ip";
    case 1: return "icmp";
    case 6: return "tcp";
    case 17: return "udp";
    case 58: return "icmpv6";
    case 132: return "sctp";
    case 136: return "udplite";
    case 255: return "raw";
    case 262: return "mptcp";
  }
  return std::to_string(protocol);
}

std::string SocketFamilyName(uint32_t family) {
  switch (family) {
    case 1: return "unix";
    case 2: return "inet";
    case 10: return "inet6";
    case 16: return "netlink";
    case 17: return "packet";
    case 40: return "vsock";
  }
  return std::to_string(family);
}

std::string SocketTypeName(uint32_t type) {
  switch (type & 0xf) {
    case 1: return "stream";
    case 2: return "dgram";
    case 3: return "raw";
    case 4: return "rdm";
    case 5: return "seqpacket";
  }
  return std::to_string(type);
}

const std::string& EventDecoder::CgroupPath(uint64_t cgroup_id, const SandboxContext& sandbox) {
  if (cgroup_id == sandbox.id) {
    if (root_raw_ != sandbox.cgroup_path) {
      root_raw_ = sandbox.cgroup_path;
      root_escaped_ = EscapeWorkloadBytes(root_raw_);
    }
    return root_escaped_;
  }
  auto it = cgroup_paths_.find(cgroup_id);
  if (it != cgroup_paths_.end()) return it->second;
  // A child cgroup's name is the sandbox's choice.
  std::string path = EscapeWorkloadBytes(CgroupPathFromId(cgroup_mount_, cgroup_id));
  if (cgroup_paths_.size() > 4096) cgroup_paths_.clear();  // bounded: ids are chosen by the sandbox
  return cgroup_paths_[cgroup_id] = std::move(path);
}

namespace {

// The layout each kind is written in: net.bind has both (an address from the
// cgroup bind programs, an abstract unix name from BPF LSM).
bool KindHasLayout(uint16_t kind, uint8_t layout) {
  switch (kind) {
    case CORDON_EV_NET_CONNECT:
    case CORDON_EV_NET_SENDMSG:
    case CORDON_EV_NET_SOCKET:
      return layout == CORDON_EVL_NET;
    case CORDON_EV_NET_BIND:
      return layout == CORDON_EVL_NET || layout == CORDON_EVL_OBJECT;
    case CORDON_EV_RESOURCE_EGRESS: return layout == CORDON_EVL_RESOURCE;
    default:
      return layout == CORDON_EVL_OBJECT;
  }
}

// The layer that decided: named by the verdict (detect mode) or the reason
// (seccomp and Landlock refusals are reported by other programs), else the
// program that wrote the record.
const char* EnforcementName(const cordon_event_header& h) {
  if (h.verdict == CORDON_VERDICT_KILLED) return "detect+kill";
  // BPF LSM's observations (proc.coredump) are "detected" too.
  // ... and the cgroup programs' (resource.egress at warnAt).
  if (h.verdict == CORDON_VERDICT_DETECTED)
    return h.layer == CORDON_LAYER_LSM ? "kernel-lsm" : h.layer == CORDON_LAYER_CGROUP ? "kernel-cgroup" : "detect";
  if (h.reason == CORDON_REASON_SECCOMP) return "seccomp";
  if (h.reason == CORDON_REASON_LANDLOCK) return "landlock";
  if (h.reason == CORDON_REASON_READ_ONLY_MOUNT) return "mount";
  switch (h.layer) {
    case CORDON_LAYER_CGROUP: return "kernel-cgroup";
    case CORDON_LAYER_LSM: return "kernel-lsm";
    default: return "detect";
  }
}

}  // namespace

int64_t EventDecoder::BootToRealNs(uint64_t boot_ns) const {
  // Wrapping (unsigned) sum: boot_ns comes from the record, so it is not trusted
  // to keep a signed sum in range (found by the UBSan build of the tests).
  // One offset for the boot, shared by every reader (events/identity.h):
  // the same record has the same time wherever and whenever it is read.
  return static_cast<int64_t>(boot_ns + static_cast<uint64_t>(BootClockOffsetNs()));
}

void EventDecoder::BeginBatch() {
  batch_ = true;
  exes_.clear();
}

void EventDecoder::EndBatch() {
  batch_ = false;
  exes_.clear();
}

const std::string& EventDecoder::Exe(uint32_t pid, const char (&comm)[16]) {
  if (batch_) {
    auto it = exes_.find(pid);
    if (it != exes_.end() && std::memcmp(it->second.comm, comm, sizeof comm) == 0) return it->second.exe;
  }
  char exe[4096];
  char link[32];
  std::snprintf(link, sizeof link, "/proc/%u/exe", pid);
  ssize_t n = ::readlink(link, exe, sizeof exe);
  exe_scratch_.clear();
  if (n > 0) exe_scratch_ = EscapeWorkloadBytes(std::string_view(exe, static_cast<size_t>(n)));
  if (!batch_) return exe_scratch_;
  if (exes_.size() >= 1024) exes_.clear();  // bounded: pids are chosen by the sandbox
  ExeEntry& entry = exes_[pid];
  std::memcpy(entry.comm, comm, sizeof comm);
  entry.exe = exe_scratch_;
  return entry.exe;
}

Result<cordon::v1::AuditEvent> EventDecoder::Decode(const void* data, size_t size, const SandboxContext& sandbox) {
  cordon::v1::AuditEvent out;
  CORDON_TRY(DecodeInto(data, size, sandbox, &out));
  return out;
}

Status EventDecoder::DecodeInto(const void* data, size_t size, const SandboxContext& sandbox,
                                cordon::v1::AuditEvent* event) {
  if (size < sizeof(cordon_event_header))
    return Error{"malformed event: " + std::to_string(size) + " bytes, expected at least " +
                 std::to_string(sizeof(cordon_event_header))};
  // ne: the header, and the net payload when the layout has one (else zero).
  cordon_net_event ne = {};
  cordon_event_header& h = ne.hdr;
  std::memcpy(&h, data, sizeof h);
  std::string kind = KindName(h.kind);
  if (kind.empty()) return Error{"malformed event: unknown kind " + std::to_string(h.kind)};
  if (h.verdict < CORDON_VERDICT_DENIED || h.verdict > CORDON_VERDICT_KILLED)
    return Error{"malformed event: unknown verdict " + std::to_string(h.verdict)};
  if (h.reason < CORDON_REASON_NO_RULE || h.reason > CORDON_REASON_MAX)
    return Error{"malformed event: unknown reason " + std::to_string(h.reason)};
  if (h.layer < CORDON_LAYER_CGROUP || h.layer > CORDON_LAYER_DETECT)
    return Error{"malformed event: unknown layer " + std::to_string(h.layer)};
  if (h.layout != CORDON_EVL_NET && h.layout != CORDON_EVL_OBJECT && h.layout != CORDON_EVL_RESOURCE)
    return Error{"malformed event: unknown layout " + std::to_string(h.layout)};
  if (!KindHasLayout(h.kind, h.layout))
    return Error{"malformed event: " + kind + " record in layout " + std::to_string(h.layout)};

  // A resource record's destination is shown as a net record's.
  const bool resource_layout = h.layout == CORDON_EVL_RESOURCE;
  const bool net_layout = h.layout == CORDON_EVL_NET || resource_layout;
  cordon_object_event fe = {};
  cordon_resource_event re = {};
  std::string path;
  if (resource_layout) {
    if (h.size != sizeof re || size < sizeof re)
      return Error{"malformed event: " + kind + " record declares " + std::to_string(h.size) + " bytes, got " +
                   std::to_string(size) + ", expected " + std::to_string(sizeof re)};
    std::memcpy(&re, data, sizeof re);
    if (re.threshold != CORDON_RES_WARN && re.threshold != CORDON_RES_MAX)
      return Error{"malformed event: " + kind + " record with threshold " + std::to_string(re.threshold)};
    std::memcpy(ne.addr, re.addr, sizeof ne.addr);
    ne.port = re.port;
    ne.family = re.family;
    ne.protocol = re.protocol;
    ne.sock_type = re.protocol == IPPROTO_TCP ? SOCK_STREAM : re.protocol == IPPROTO_UDP ? SOCK_DGRAM : 0;
  } else if (net_layout) {
    if (h.size != sizeof ne || size < sizeof ne)
      return Error{"malformed event: " + kind + " record declares " + std::to_string(h.size) + " bytes, got " +
                   std::to_string(size) + ", expected " + std::to_string(sizeof ne)};
    std::memcpy(&ne, data, sizeof ne);
  } else {
    if (size < sizeof fe) return Error{"malformed event: " + std::to_string(size) + " bytes for a " + kind + " record"};
    std::memcpy(&fe, data, sizeof fe);
    if (fe.path_len >= CORDON_PATH_MAX || h.size != sizeof fe + fe.path_len || size < h.size)
      return Error{"malformed event: " + kind + " record declares " + std::to_string(h.size) + " bytes with a " +
                   std::to_string(fe.path_len) + "-byte path, got " + std::to_string(size)};
    path.assign(static_cast<const char*>(data) + sizeof fe, fe.path_len);
  }

  // The message is reused from record to record: what this record does not
  // set is cleared, the rest overwritten (Clear() would free the sub-messages
  // only for the next record to allocate them again).
  cordon::v1::AuditEvent& out = *event;
  const bool uses_file = !net_layout && fe.path_len > 0;
  const bool uses_target = !net_layout && (kind.rfind("tamper.", 0) == 0 || h.kind == CORDON_EV_NET_SOCKOPT ||
                                           h.kind == CORDON_EV_FILE_IOCTL || h.reason == CORDON_REASON_SECCOMP);
  if (!net_layout) out.clear_net();
  if (!uses_file) out.clear_file();
  if (!uses_target) out.clear_target();
  out.clear_loss();
  out.clear_open_files();
  out.clear_suppressed();
  out.clear_repeats();
  if (!resource_layout) out.clear_resource();
  if (h.repeats) {
    auto* r = out.mutable_repeats();
    r->set_count(h.repeats);
    SetTimestamp(BootToRealNs(h.repeats_first_ns), r->mutable_first());
    SetTimestamp(BootToRealNs(h.repeats_last_ns), r->mutable_last());
  }
  const int64_t at_ns = BootToRealNs(h.boot_ns);
  SetTimestamp(at_ns, out.mutable_time());
  out.set_sandbox(sandbox.name);
  out.set_cgroup_path(CgroupPath(h.cgroup_id, sandbox));
  out.set_cgroup_id(h.cgroup_id);
  out.set_sandbox_cgroup_id(h.sandbox_id);
  // A record that was never in the ring (the stored first occurrence of a
  // repeats entry) has no number: no id.
  out.set_seq(h.seq);
  if (h.seq)
    out.set_id(EventId(h.sandbox_id, h.seq));
  else
    out.clear_id();
  out.set_pid(h.pid);
  out.set_tid(h.tid);
  out.set_ppid(h.ppid);
  out.set_uid(h.uid);
  out.set_gid(h.gid);
  out.set_comm(EscapeWorkloadBytes(CommString(h.comm)));
  if (const std::string& exe = Exe(h.pid, h.comm); !exe.empty()) out.set_exe(exe);
  else out.clear_exe();
  out.set_kind(kind);
  static const char* const kVerdicts[] = {"", "denied", "audited", "detected", "killed"};
  out.set_verdict(kVerdicts[h.verdict]);
  out.set_policy(sandbox.policy);
  out.set_enforcement(EnforcementName(h));
  std::string target;
  if (net_layout) {
    auto* net = out.mutable_net();
    net->set_family(SocketFamilyName(ne.family));
    net->set_sock_type(SocketTypeName(ne.sock_type));
    net->set_protocol(ProtocolName(ne.protocol));
    if (h.kind == CORDON_EV_NET_SOCKET) {
      net->clear_address();
      net->clear_port();
      net->clear_rule();
    } else {
      std::array<uint8_t, 16> addr;
      std::memcpy(addr.data(), ne.addr, 16);
      net->set_address(AddressText(addr));
      net->set_port(ne.port);
      net->set_rule(h.rule);
      net->set_name_id(h.name_id);
      target.reserve(net->address().size() + net->protocol().size() + 16);
      target += net->address();
      target += " port ";
      target += std::to_string(ne.port);
      target += '/';
      target += net->protocol();
    }
  } else {
    if (uses_file) {
      auto* file = out.mutable_file();
      file->set_path(EscapeWorkloadBytes(path));
      file->set_access(RightsString(fe.access));
      file->set_granted(RightsString(fe.granted));
      file->set_truncated(fe.path_flags & CORDON_PATH_F_TRUNCATED);
      file->set_inode(fe.ino);
      file->set_device(fe.dev);
      file->set_rule(h.rule);
      target = file->access().empty() ? file->path() : file->access() + " on " + file->path();
    }
    if (uses_target) {
      auto* t = out.mutable_target();
      t->set_pid(fe.target_pid);
      t->set_arg(fe.arg);
      t->set_arg2(fe.arg2);
      if (fe.target_pid) target = "pid " + std::to_string(fe.target_pid);
      if (h.kind == CORDON_EV_TAMPER_SIGNAL) target += ", signal " + std::to_string(fe.arg);
      if (h.kind == CORDON_EV_TAMPER_CGROUP) target = "cgroup id " + std::to_string(fe.arg);
      if (h.kind == CORDON_EV_NET_SOCKOPT)
        target = "setsockopt level " + std::to_string(fe.arg) + " option " + std::to_string(fe.arg2);
      if (h.kind == CORDON_EV_TAMPER_DEVICE)
        target = std::string((fe.arg2 >> 16) == 1   ? "block "
                             : (fe.arg2 >> 16) == 2 ? "char "
                                                    : "") +
                 "device " + std::to_string(fe.arg >> 20) + ":" + std::to_string(fe.arg & 0xfffff);
      if (h.kind == CORDON_EV_TAMPER_SYSCTL) target = (fe.arg ? "write " : "read ") + EscapeWorkloadBytes(path);
      if (h.reason == CORDON_REASON_CAPABILITY) target = "capability " + std::to_string(fe.arg);
      if ((h.kind == CORDON_EV_FILE_IOCTL || h.kind == CORDON_EV_TAMPER_TERMINAL) && h.reason != CORDON_REASON_SECCOMP) {
        char cmd[16];
        std::snprintf(cmd, sizeof cmd, "0x%x", fe.arg);
        target = std::string("ioctl ") + cmd + (path.empty() ? std::string() : " on " + EscapeWorkloadBytes(path));
      }
      if (h.reason == CORDON_REASON_SECCOMP) {
        target = "syscall " + std::to_string(fe.arg);
        if (fe.arg2) {
          char cmd[16];
          std::snprintf(cmd, sizeof cmd, "0x%x", fe.arg2);
          target += std::string(", argument ") + cmd;
        }
        if (h.kind == CORDON_EV_TAMPER_ABI && fe.arg2 == AUDIT_ARCH_I386)
          target = "i386 syscall " + std::to_string(fe.arg) + " (int 0x80)";
      }
    }
  }
  out.set_reason(ReasonText(ne, target));
  if (resource_layout) {
    const bool max = re.threshold == CORDON_RES_MAX;
    auto* r = out.mutable_resource();
    r->set_name("egress");
    r->set_event(max ? "max" : "warn");
    r->set_count(1);
    r->set_limit(re.limit);
    r->set_value(re.value);
    out.set_reason(max ? "spec.resources.egressBytes: " + std::to_string(re.value) + " bytes sent, the budget is " +
                             std::to_string(re.limit) + ": every further packet is dropped (last: to " + target + ")"
                       : "spec.resources.egressBytes: " + std::to_string(re.value) + " bytes sent of " +
                             std::to_string(re.limit) + ", past the warnAt share (to " + target + ")");
  }
  if (h.kind == CORDON_EV_CREDENTIAL_READ && uses_file) {
    // Whose credential: the file is <view or store>/<sandbox>/<name>.
    const std::string& shown = out.file().path();
    const size_t slash = shown.rfind('/');
    const size_t dir = slash == std::string::npos || slash == 0 ? std::string::npos : shown.rfind('/', slash - 1);
    auto* cred = out.mutable_credential();
    cred->Clear();
    cred->set_name(slash == std::string::npos ? shown : shown.substr(slash + 1));
    cred->set_path(shown);
    cred->set_deliver("file");
    if (dir != std::string::npos) cred->set_sandbox(shown.substr(dir + 1, slash - dir - 1));
    const uint64_t owner = static_cast<uint64_t>(fe.arg2) << 32 | fe.arg;
    cred->set_sandbox_cgroup_id(owner);
    out.set_reason("credential " + cred->name() + " of sandbox " +
                   (cred->sandbox().empty() ? "cgroup id " + std::to_string(owner) : cred->sandbox()) +
                   ": only that sandbox's processes (and root outside every sandbox) may open it (" + target + ")");
  } else {
    out.clear_credential();
  }
  // An expected event (spec.quiet): still what its verdict says, marked
  // apart; judged by the patterns of the policy in force when it happened.
  const bool before = sandbox.Before(at_ns);
  out.set_policy_digest(before ? sandbox.previous_policy_digest : sandbox.policy_digest);
  const SandboxContext::QuietPatterns& quiet = before ? sandbox.previous_quiet : sandbox.quiet;
  out.set_quiet(quiet && policy::MatchQuiet(*quiet, out) >= 0);
  return {};
}

cordon::v1::AuditEvent EventDecoder::LossRecord(const SandboxContext& sandbox, uint64_t dropped) const {
  cordon::v1::AuditEvent out;
  *out.mutable_time() = google::protobuf::util::TimeUtil::NanosecondsToTimestamp(NowNs(CLOCK_REALTIME));
  out.set_sandbox(sandbox.name);
  out.set_cgroup_path(EscapeWorkloadBytes(sandbox.cgroup_path));
  out.set_sandbox_cgroup_id(sandbox.id);
  out.set_cgroup_id(sandbox.id);
  out.set_kind("loss");
  out.set_policy(sandbox.policy);
  out.set_policy_digest(sandbox.policy_digest);
  out.set_reason(std::to_string(dropped) + " events lost: the sandbox's ring buffer was full");
  out.mutable_loss()->set_dropped(dropped);
  return out;
}

}  // namespace cordon
