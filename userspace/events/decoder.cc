#include "events/decoder.h"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <vector>
#include <cstdio>
#include <cstring>

#include "abi/cordon_event.h"
#include "abi/cordon_file.h"
#include "loader/cgroup.h"
#include "policy/cidr.h"

namespace cordon {
namespace {

int64_t NowNs(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int64_t RealtimeMinusBoottime() { return NowNs(CLOCK_REALTIME) - NowNs(CLOCK_BOOTTIME); }

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

// e: the record's header and, for net-layout records, its address and socket
// kind (zero for the object layout).
std::string ReasonText(const cordon_net_event& e, const std::string& target) {
  switch (e.hdr.reason) {
    case CORDON_REASON_NO_RULE:
      return "no egress rule allows " + target;
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
    case CORDON_REASON_LINK_GAIN:
      return "the new name would have more rights than the old (" + target + ")";
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
             " (working directory " + target + ")";
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

// Comm is chosen by the sandboxed process: keep it printable.
std::string Printable(std::string s) {
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return s;
}

}  // namespace

std::string KindName(uint32_t kind) {
  switch (kind) {
    case CORDON_EV_NET_CONNECT: return "net.connect";
    case CORDON_EV_NET_SENDMSG: return "net.sendmsg";
    case CORDON_EV_NET_SOCKET: return "net.socket";
    case CORDON_EV_NET_UNIX: return "net.unix";
    case CORDON_EV_NET_BIND: return "net.bind";
    case CORDON_EV_NET_SOCKOPT: return "net.sockopt";
    case CORDON_EV_FILE_OPEN: return "file.open";
    case CORDON_EV_FILE_CREATE: return "file.create";
    case CORDON_EV_FILE_UNLINK: return "file.unlink";
    case CORDON_EV_FILE_RENAME: return "file.rename";
    case CORDON_EV_FILE_LINK: return "file.link";
    case CORDON_EV_FILE_EXEC: return "file.exec";
    case CORDON_EV_FILE_MMAP_EXEC: return "file.mmap_exec";
    case CORDON_EV_FILE_SETATTR: return "file.setattr";
    case CORDON_EV_FILE_IOCTL: return "file.ioctl";
    case CORDON_EV_FILE_MEMFD: return "file.memfd";
    case CORDON_EV_TAMPER_BPF: return "tamper.bpf";
    case CORDON_EV_TAMPER_SIGNAL: return "tamper.signal";
    case CORDON_EV_TAMPER_PTRACE: return "tamper.ptrace";
    case CORDON_EV_TAMPER_MOUNT: return "tamper.mount";
    case CORDON_EV_TAMPER_MODULE: return "tamper.module";
    case CORDON_EV_TAMPER_USERNS: return "tamper.userns";
    case CORDON_EV_TAMPER_CLOCK: return "tamper.clock";
    case CORDON_EV_TAMPER_REBOOT: return "tamper.reboot";
    case CORDON_EV_TAMPER_CGROUP: return "tamper.cgroup";
    case CORDON_EV_TAMPER_CAPABILITY: return "tamper.capability";
    case CORDON_EV_TAMPER_IO_URING: return "tamper.io_uring";
    case CORDON_EV_TAMPER_TERMINAL: return "tamper.terminal";
    case CORDON_EV_TAMPER_SCHED: return "tamper.sched";
    case CORDON_EV_TAMPER_RLIMIT: return "tamper.rlimit";
    case CORDON_EV_TAMPER_SYSLOG: return "tamper.syslog";
    case CORDON_EV_TAMPER_NOTIFY: return "tamper.notify";
    case CORDON_EV_TAMPER_KEYRING: return "tamper.keyring";
    case CORDON_EV_TAMPER_IPC: return "tamper.ipc";
    case CORDON_EV_TAMPER_ACCT: return "tamper.acct";
    case CORDON_EV_TAMPER_PERSONALITY: return "tamper.personality";
    case CORDON_EV_TAMPER_DEVICE: return "tamper.device";
    case CORDON_EV_TAMPER_SYSCTL: return "tamper.sysctl";
    case CORDON_EV_PROC_COREDUMP: return "proc.coredump";
  }
  return "";
}

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
  if (cgroup_id == sandbox.id) return sandbox.cgroup_path;
  auto it = cgroup_paths_.find(cgroup_id);
  if (it != cgroup_paths_.end()) return it->second;
  std::string path = CgroupPathFromId(cgroup_mount_, cgroup_id);
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
  if (h.verdict == CORDON_VERDICT_DETECTED) return h.layer == CORDON_LAYER_LSM ? "kernel-lsm" : "detect";
  if (h.reason == CORDON_REASON_SECCOMP) return "seccomp";
  if (h.reason == CORDON_REASON_LANDLOCK) return "landlock";
  switch (h.layer) {
    case CORDON_LAYER_CGROUP: return "kernel-cgroup";
    case CORDON_LAYER_LSM: return "kernel-lsm";
    default: return "detect";
  }
}

}  // namespace

void EventDecoder::BeginBatch() {
  batch_ = true;
  batch_offset_ns_ = RealtimeMinusBoottime();
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
  if (n > 0) exe_scratch_ = Printable(std::string(exe, static_cast<size_t>(n)));
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
  if (h.layout != CORDON_EVL_NET && h.layout != CORDON_EVL_OBJECT)
    return Error{"malformed event: unknown layout " + std::to_string(h.layout)};
  if (!KindHasLayout(h.kind, h.layout))
    return Error{"malformed event: " + kind + " record in layout " + std::to_string(h.layout)};

  const bool net_layout = h.layout == CORDON_EVL_NET;
  cordon_object_event fe = {};
  std::string path;
  if (net_layout) {
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
  SetTimestamp(static_cast<int64_t>(h.boot_ns) + (batch_ ? batch_offset_ns_ : RealtimeMinusBoottime()),
               out.mutable_time());
  out.set_sandbox(sandbox.name);
  out.set_cgroup_path(CgroupPath(h.cgroup_id, sandbox));
  out.set_cgroup_id(h.cgroup_id);
  out.set_sandbox_cgroup_id(h.sandbox_id);
  out.set_pid(h.pid);
  out.set_tid(h.tid);
  out.set_ppid(h.ppid);
  out.set_uid(h.uid);
  out.set_gid(h.gid);
  out.set_comm(Printable(CommString(h.comm)));
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
      file->set_path(Printable(path));
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
        target = "device " + std::to_string(fe.arg >> 20) + ":" + std::to_string(fe.arg & 0xfffff);
      if (h.kind == CORDON_EV_TAMPER_SYSCTL) target = (fe.arg ? "write " : "read ") + path;
      if (h.reason == CORDON_REASON_CAPABILITY) target = "capability " + std::to_string(fe.arg);
      if ((h.kind == CORDON_EV_FILE_IOCTL || h.kind == CORDON_EV_TAMPER_TERMINAL) && h.reason != CORDON_REASON_SECCOMP) {
        char cmd[16];
        std::snprintf(cmd, sizeof cmd, "0x%x", fe.arg);
        target = std::string("ioctl ") + cmd + (path.empty() ? std::string() : " on " + Printable(path));
      }
      if (h.reason == CORDON_REASON_SECCOMP) {
        target = "syscall " + std::to_string(fe.arg);
        if (fe.arg2) {
          char cmd[16];
          std::snprintf(cmd, sizeof cmd, "0x%x", fe.arg2);
          target += std::string(", argument ") + cmd;
        }
      }
    }
  }
  out.set_reason(ReasonText(ne, target));
  return {};
}

cordon::v1::AuditEvent EventDecoder::LossRecord(const SandboxContext& sandbox, uint64_t dropped) const {
  cordon::v1::AuditEvent out;
  *out.mutable_time() = google::protobuf::util::TimeUtil::NanosecondsToTimestamp(NowNs(CLOCK_REALTIME));
  out.set_sandbox(sandbox.name);
  out.set_cgroup_path(sandbox.cgroup_path);
  out.set_sandbox_cgroup_id(sandbox.id);
  out.set_cgroup_id(sandbox.id);
  out.set_kind("loss");
  out.set_policy(sandbox.policy);
  out.set_reason(std::to_string(dropped) + " events lost: the sandbox's ring buffer was full");
  out.mutable_loss()->set_dropped(dropped);
  return out;
}

namespace {

// ---- the audit-file line, by hand -------------------------------------------
//
// Exactly what protobuf 3's MessageToJsonString prints with add_whitespace
// off: fields in field-number order, lowerCamelCase names, proto3 defaults
// omitted, set sub-messages printed even when empty ({}), 64-bit integers as
// strings, Timestamp as RFC 3339 with 0, 3, 6 or 9 fractional digits. Strings
// are escaped as protobuf escapes ASCII (control characters, '"', '\\', '<',
// '>' and DEL). Unknown fields (an event parsed from a newer writer) are not
// printed, as protobuf does not print them. Anything this writer does not
// reproduce byte for byte (non-ASCII strings, timestamps out of range) makes
// it return false, and protobuf prints the whole line instead.
// tests/unit/core_json_test.cc compares both on varied events.

// Characters written as they are: printable ASCII but '"', '\\', '<', '>'.
struct PlainTable {
  bool v[256] = {};
  constexpr PlainTable() {
    for (int c = 0x20; c < 0x7f; ++c) v[c] = c != '"' && c != '\\' && c != '<' && c != '>';
  }
  constexpr bool operator[](unsigned char c) const { return v[c]; }
};
constexpr PlainTable kPlain;

// Writes into a buffer sized beforehand for the worst case (every string
// character escaped as \u00XX), then trimmed.
class JsonWriter {
 public:
  explicit JsonWriter(std::string* out) : out_(out) {}

  bool Event(const cordon::v1::AuditEvent& e) {
    size_t chars = e.sandbox().size() + e.cgroup_path().size() + e.comm().size() + e.exe().size() + e.kind().size() +
                   e.verdict().size() + e.policy().size() + e.reason().size() + e.enforcement().size();
    if (e.has_net())
      chars += e.net().address().size() + e.net().protocol().size() + e.net().family().size() +
               e.net().sock_type().size();
    if (e.has_file()) chars += e.file().path().size() + e.file().access().size() + e.file().granted().size();
    for (const auto& f : e.open_files()) chars += f.size() + 3;
    // Names, numbers and punctuation take less than 1024 bytes; a string
    // character at most 6 (\u00XX). Written into a scratch buffer that is
    // kept (not zero-filled for every event as a resized string would be).
    thread_local std::vector<char> scratch;
    const size_t need = 1024 + 6 * chars;
    if (scratch.size() < need) scratch.resize(need);
    p_ = scratch.data();
    if (!Body(e)) return false;
    out_->append(scratch.data(), static_cast<size_t>(p_ - scratch.data()));
    if (scratch.size() > (1u << 20)) std::vector<char>().swap(scratch);  // after a huge event
    return true;
  }

 private:
  bool Body(const cordon::v1::AuditEvent& e) {
    Open();
    if (e.has_time() && !Time(e.time())) return false;
    if (!Str("sandbox", e.sandbox()) || !Str("cgroupPath", e.cgroup_path())) return false;
    U64("cgroupId", e.cgroup_id());
    U64("sandboxCgroupId", e.sandbox_cgroup_id());
    U32("pid", e.pid());
    U32("tid", e.tid());
    U32("ppid", e.ppid());
    U32("uid", e.uid());
    U32("gid", e.gid());
    if (!Str("comm", e.comm()) || !Str("exe", e.exe()) || !Str("kind", e.kind()) || !Str("verdict", e.verdict()) ||
        !Str("policy", e.policy()) || !Str("reason", e.reason()))
      return false;
    if (e.has_net()) {
      const auto& n = e.net();
      Key("net");
      Open();
      if (!Str("address", n.address())) return false;
      U32("port", n.port());
      if (!Str("protocol", n.protocol()) || !Str("family", n.family()) || !Str("sockType", n.sock_type())) return false;
      U32("rule", n.rule());
      Close();
    }
    if (e.has_loss()) {
      Key("loss");
      Open();
      U64("dropped", e.loss().dropped());
      Close();
    }
    if (!Str("enforcement", e.enforcement())) return false;
    if (e.has_file()) {
      const auto& f = e.file();
      Key("file");
      Open();
      if (!Str("path", f.path()) || !Str("access", f.access()) || !Str("granted", f.granted())) return false;
      Bool("truncated", f.truncated());
      U64("inode", f.inode());
      U32("device", f.device());
      U32("rule", f.rule());
      Close();
    }
    if (e.has_target()) {
      Key("target");
      Open();
      U32("pid", e.target().pid());
      U32("arg", e.target().arg());
      U32("arg2", e.target().arg2());
      Close();
    }
    if (e.open_files_size() > 0) {
      Key("openFiles");
      *p_++ = '[';
      for (int i = 0; i < e.open_files_size(); ++i) {
        if (i) *p_++ = ',';
        if (!Quoted(e.open_files(i))) return false;
      }
      *p_++ = ']';
    }
    if (e.has_suppressed()) {
      Key("suppressed");
      Open();
      U64("count", e.suppressed().count());
      Bool("final", e.suppressed().final());
      Close();
    }
    Close();
    return true;
  }

  void Put(const char* s, size_t n) {
    std::memcpy(p_, s, n);
    p_ += n;
  }
  void Open() {
    *p_++ = '{';
    first_ = true;
  }
  void Close() {
    *p_++ = '}';
    first_ = false;
  }
  template <size_t N>
  void Key(const char (&name)[N]) {
    if (!first_) *p_++ = ',';
    first_ = false;
    *p_++ = '"';
    Put(name, N - 1);
    *p_++ = '"';
    *p_++ = ':';
  }
  void Digits(uint64_t v) {
    char buf[24];
    char* q = buf + sizeof buf;
    do {
      *--q = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v);
    Put(q, static_cast<size_t>(buf + sizeof buf - q));
  }
  template <size_t N>
  void U32(const char (&name)[N], uint32_t v) {
    if (!v) return;
    Key(name);
    Digits(v);
  }
  template <size_t N>
  void U64(const char (&name)[N], uint64_t v) {
    if (!v) return;
    Key(name);
    *p_++ = '"';
    Digits(v);
    *p_++ = '"';
  }
  template <size_t N>
  void Bool(const char (&name)[N], bool v) {
    if (!v) return;
    Key(name);
    Put("true", 4);
  }
  template <size_t N>
  bool Str(const char (&name)[N], const std::string& v) {
    if (v.empty()) return true;
    Key(name);
    return Quoted(v);
  }
  bool Quoted(const std::string& v) {
    static const char kHex[] = "0123456789abcdef";
    *p_++ = '"';
    const unsigned char* q = reinterpret_cast<const unsigned char*>(v.data());
    const unsigned char* end = q + v.size();
    while (q < end) {
      const unsigned char* run = q;
      while (q < end && kPlain[*q]) ++q;
      Put(reinterpret_cast<const char*>(run), static_cast<size_t>(q - run));
      if (q == end) break;
      const unsigned char c = *q++;
      if (c >= 0x80) return false;  // UTF-8: protobuf's rules (and its handling of invalid bytes) apply
      *p_++ = '\\';
      switch (c) {
        case '"': *p_++ = '"'; break;
        case '\\': *p_++ = '\\'; break;
        case '\b': *p_++ = 'b'; break;
        case '\t': *p_++ = 't'; break;
        case '\n': *p_++ = 'n'; break;
        case '\f': *p_++ = 'f'; break;
        case '\r': *p_++ = 'r'; break;
        default: {  // other control characters, '<', '>', DEL
          const char u[5] = {'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
          Put(u, sizeof u);
        }
      }
    }
    *p_++ = '"';
    return true;
  }
  bool Time(const google::protobuf::Timestamp& ts) {
    // The range protobuf accepts: 0001-01-01T00:00:00Z .. 9999-12-31T23:59:59Z.
    constexpr int64_t kMin = -62135596800, kMax = 253402300799;
    int64_t s = ts.seconds();
    int32_t nanos = ts.nanos();
    if (s < kMin || s > kMax || nanos < 0 || nanos > 999999999) return false;
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    int64_t days = s >= 0 ? s / 86400 : (s - 86399) / 86400;
    int64_t secs = s - days * 86400;
    int64_t z = days + 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t y = yoe + era * 400;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int64_t d = doy - (153 * mp + 2) / 5 + 1;
    int64_t m = mp < 10 ? mp + 3 : mp - 9;
    if (m <= 2) ++y;
    char buf[40];
    auto put = [&](int pos, int64_t v, int width) {
      for (int i = width - 1; i >= 0; --i, v /= 10) buf[pos + i] = static_cast<char>('0' + v % 10);
    };
    put(0, y, 4);
    buf[4] = '-';
    put(5, m, 2);
    buf[7] = '-';
    put(8, d, 2);
    buf[10] = 'T';
    put(11, secs / 3600, 2);
    buf[13] = ':';
    put(14, secs / 60 % 60, 2);
    buf[16] = ':';
    put(17, secs % 60, 2);
    int n = 19;
    if (nanos) {
      buf[n++] = '.';
      if (nanos % 1000000 == 0) put(n, nanos / 1000000, 3), n += 3;
      else if (nanos % 1000 == 0) put(n, nanos / 1000, 6), n += 6;
      else put(n, nanos, 9), n += 9;
    }
    buf[n++] = 'Z';
    Key("time");
    *p_++ = '"';
    Put(buf, static_cast<size_t>(n));
    *p_++ = '"';
    return true;
  }

  std::string* out_;
  char* p_ = nullptr;
  bool first_ = true;
};

}  // namespace

void AppendJsonLine(const cordon::v1::AuditEvent& event, std::string* out) {
  if (JsonWriter(out).Event(event)) return;
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = false;
  options.preserve_proto_field_names = false;
  (void)google::protobuf::util::MessageToJsonString(event, &json, options);
  out->append(json);
}

namespace {

// ---- the wire encoding, by hand ----------------------------------------------

void PutVarint(std::string* out, uint64_t v) {
  char buf[10];
  size_t n = 0;
  while (v >= 0x80) {
    buf[n++] = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  buf[n++] = static_cast<char>(v);
  out->append(buf, n);
}
void PutTag(std::string* out, uint32_t field, uint32_t wire_type) { PutVarint(out, (field << 3) | wire_type); }
void PutUint(std::string* out, uint32_t field, uint64_t v) {
  if (!v) return;
  PutTag(out, field, 0);
  PutVarint(out, v);
}
void PutBytes(std::string* out, uint32_t field, const std::string& v) {
  if (v.empty()) return;
  PutTag(out, field, 2);
  PutVarint(out, v.size());
  out->append(v);
}
void PutMessage(std::string* out, uint32_t field, const std::string& body) {
  PutTag(out, field, 2);
  PutVarint(out, body.size());
  out->append(body);
}

}  // namespace

void AppendWireEvent(const cordon::v1::AuditEvent& e, std::string* out) {
  thread_local std::string sub;  // one sub-message at a time
  if (e.has_time()) {
    sub.clear();
    // int64 and int32 are varints of their two's complement (10 bytes when negative).
    PutUint(&sub, 1, static_cast<uint64_t>(e.time().seconds()));
    PutUint(&sub, 2, static_cast<uint64_t>(static_cast<int64_t>(e.time().nanos())));
    PutMessage(out, 1, sub);
  }
  PutBytes(out, 2, e.sandbox());
  PutBytes(out, 3, e.cgroup_path());
  PutUint(out, 4, e.cgroup_id());
  PutUint(out, 5, e.sandbox_cgroup_id());
  PutUint(out, 6, e.pid());
  PutUint(out, 7, e.tid());
  PutUint(out, 8, e.ppid());
  PutUint(out, 9, e.uid());
  PutUint(out, 10, e.gid());
  PutBytes(out, 11, e.comm());
  PutBytes(out, 12, e.exe());
  PutBytes(out, 13, e.kind());
  PutBytes(out, 14, e.verdict());
  PutBytes(out, 15, e.policy());
  PutBytes(out, 16, e.reason());
  if (e.has_net()) {
    const auto& n = e.net();
    sub.clear();
    PutBytes(&sub, 1, n.address());
    PutUint(&sub, 2, n.port());
    PutBytes(&sub, 3, n.protocol());
    PutBytes(&sub, 4, n.family());
    PutBytes(&sub, 5, n.sock_type());
    PutUint(&sub, 6, n.rule());
    PutMessage(out, 17, sub);
  }
  if (e.has_loss()) {
    sub.clear();
    PutUint(&sub, 1, e.loss().dropped());
    PutMessage(out, 18, sub);
  }
  PutBytes(out, 19, e.enforcement());
  if (e.has_file()) {
    const auto& f = e.file();
    sub.clear();
    PutBytes(&sub, 1, f.path());
    PutBytes(&sub, 2, f.access());
    PutBytes(&sub, 3, f.granted());
    PutUint(&sub, 4, f.truncated());
    PutUint(&sub, 5, f.inode());
    PutUint(&sub, 6, f.device());
    PutUint(&sub, 7, f.rule());
    PutMessage(out, 20, sub);
  }
  if (e.has_target()) {
    sub.clear();
    PutUint(&sub, 1, e.target().pid());
    PutUint(&sub, 2, e.target().arg());
    PutUint(&sub, 3, e.target().arg2());
    PutMessage(out, 21, sub);
  }
  for (const auto& f : e.open_files()) {  // repeated string: every element, empty ones too
    PutTag(out, 22, 2);
    PutVarint(out, f.size());
    out->append(f);
  }
  if (e.has_suppressed()) {
    sub.clear();
    PutUint(&sub, 1, e.suppressed().count());
    PutUint(&sub, 2, e.suppressed().final());
    PutMessage(out, 23, sub);
  }
  if (sub.capacity() > (1u << 16)) std::string().swap(sub);
}

std::string ToJsonLine(const cordon::v1::AuditEvent& event) {
  std::string json;
  AppendJsonLine(event, &json);
  return json;
}

std::string ToCompactLine(const cordon::v1::AuditEvent& event) {
  std::string time = google::protobuf::util::TimeUtil::ToString(event.time());
  std::string line = time + " " + event.sandbox() + " ";
  if (event.kind() == "loss") return line + "LOSS " + event.reason();
  if (event.kind() == "suppressed") return line + "SUPPRESSED " + event.reason();
  line += event.verdict() + " " + event.kind() + " " + event.comm() + "[" + std::to_string(event.pid()) + "]";
  if (event.has_net() && !event.net().address().empty())
    line += (event.kind() == "net.bind" ? " bind " : " -> ") + event.net().address() + ":" + std::to_string(event.net().port()) + "/" + event.net().protocol();
  else if (event.has_net())
    line += " socket(" + event.net().family() + ", " + event.net().sock_type() + ", " + event.net().protocol() + ")";
  else if (event.has_file())
    line += " " + event.file().path();
  return line + ": " + event.reason();
}

}  // namespace cordon
