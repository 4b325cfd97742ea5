#include "events/decoder.h"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>
#include <time.h>
#include <unistd.h>

#include <array>
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

google::protobuf::Timestamp BootToRealtime(uint64_t boot_ns) {
  int64_t offset = NowNs(CLOCK_REALTIME) - NowNs(CLOCK_BOOTTIME);
  return google::protobuf::util::TimeUtil::NanosecondsToTimestamp(static_cast<int64_t>(boot_ns) + offset);
}

std::string ReasonText(const cordon_event& e, const std::string& target) {
  switch (e.reason) {
    case CORDON_REASON_NO_RULE:
      return "no egress rule allows " + target;
    case CORDON_REASON_PORT:
      return "egress rule #" + std::to_string(e.rule) + " matches the address but not " + std::to_string(e.port) +
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
  }
  return "unknown";
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
    case CORDON_EV_FILE_OPEN: return "file.open";
    case CORDON_EV_FILE_CREATE: return "file.create";
    case CORDON_EV_FILE_UNLINK: return "file.unlink";
    case CORDON_EV_FILE_RENAME: return "file.rename";
    case CORDON_EV_FILE_LINK: return "file.link";
    case CORDON_EV_FILE_EXEC: return "file.exec";
    case CORDON_EV_FILE_MMAP_EXEC: return "file.mmap_exec";
    case CORDON_EV_FILE_SETATTR: return "file.setattr";
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

std::string EventDecoder::CgroupPath(uint64_t cgroup_id, const SandboxContext& sandbox) {
  if (cgroup_id == sandbox.id) return sandbox.cgroup_path;
  auto it = cgroup_paths_.find(cgroup_id);
  if (it != cgroup_paths_.end()) return it->second;
  std::string path = CgroupPathFromId(cgroup_mount_, cgroup_id);
  if (cgroup_paths_.size() > 4096) cgroup_paths_.clear();  // bounded: ids are chosen by the sandbox
  cgroup_paths_[cgroup_id] = path;
  return path;
}

namespace {

bool IsLsmKind(uint16_t kind) { return kind >= CORDON_EV_NET_UNIX; }

}  // namespace

Result<cordon::v1::AuditEvent> EventDecoder::Decode(const void* data, size_t size, const SandboxContext& sandbox) {
  if (size < sizeof(cordon_event))
    return Error{"malformed event: " + std::to_string(size) + " bytes, expected at least " +
                 std::to_string(sizeof(cordon_event))};
  cordon_event e;
  std::memcpy(&e, data, sizeof e);
  std::string kind = KindName(e.kind);
  if (kind.empty()) return Error{"malformed event: unknown kind " + std::to_string(e.kind)};
  if (e.verdict < CORDON_VERDICT_DENIED || e.verdict > CORDON_VERDICT_KILLED)
    return Error{"malformed event: unknown verdict " + std::to_string(e.verdict)};
  if (e.reason < CORDON_REASON_NO_RULE || e.reason > CORDON_REASON_LANDLOCK)
    return Error{"malformed event: unknown reason " + std::to_string(e.reason)};

  // LSM events (and LSM net.socket ones) are a cordon_file_event plus a path.
  bool lsm_layout = IsLsmKind(e.kind) || (e.kind == CORDON_EV_NET_SOCKET && e.size != sizeof(cordon_event));
  cordon_file_event fe = {};
  std::string path;
  if (lsm_layout) {
    if (size < sizeof fe) return Error{"malformed event: " + std::to_string(size) + " bytes for a " + kind + " record"};
    std::memcpy(&fe, data, sizeof fe);
    if (fe.path_len >= CORDON_PATH_MAX || e.size != sizeof fe + fe.path_len || size < e.size)
      return Error{"malformed event: " + kind + " record declares " + std::to_string(e.size) + " bytes with a " +
                   std::to_string(fe.path_len) + "-byte path, got " + std::to_string(size)};
    path.assign(static_cast<const char*>(data) + sizeof fe, fe.path_len);
  } else if (e.size != sizeof(cordon_event)) {
    return Error{"malformed event: declares " + std::to_string(e.size) + " bytes, expected " +
                 std::to_string(sizeof(cordon_event))};
  }

  cordon::v1::AuditEvent out;
  *out.mutable_time() = BootToRealtime(e.boot_ns);
  out.set_sandbox(sandbox.name);
  out.set_cgroup_path(CgroupPath(e.cgroup_id, sandbox));
  out.set_cgroup_id(e.cgroup_id);
  out.set_sandbox_cgroup_id(e.sandbox_id);
  out.set_pid(e.pid);
  out.set_tid(e.tid);
  out.set_ppid(e.ppid);
  out.set_uid(e.uid);
  out.set_gid(e.gid);
  out.set_comm(Printable(CommString(e.comm)));
  char exe[4096];
  std::string link = "/proc/" + std::to_string(e.pid) + "/exe";
  ssize_t n = ::readlink(link.c_str(), exe, sizeof exe);
  if (n > 0) out.set_exe(Printable(std::string(exe, static_cast<size_t>(n))));
  out.set_kind(kind);
  static const char* const kVerdicts[] = {"", "denied", "audited", "detected", "killed"};
  out.set_verdict(kVerdicts[e.verdict]);
  out.set_policy(sandbox.policy);
  bool detected = e.verdict == CORDON_VERDICT_DETECTED || e.verdict == CORDON_VERDICT_KILLED;
  out.set_enforcement(detected                               ? (e.verdict == CORDON_VERDICT_KILLED ? "detect+kill" : "detect")
                      : e.reason == CORDON_REASON_SECCOMP ? "seccomp"
                      : e.reason == CORDON_REASON_LANDLOCK ? "landlock"
                      : (lsm_layout && (fe.path_flags & CORDON_PATH_F_AS_WRITTEN)) ? "kernel-cgroup"
                      : lsm_layout                        ? "kernel-lsm"
                                                          : "kernel-cgroup");
  std::string target;
  if (lsm_layout) {
    if (e.kind == CORDON_EV_NET_SOCKET) {
      // LSM socket_create: family in arg, type << 16 | protocol in arg2.
      e.family = static_cast<uint16_t>(fe.arg);
      e.sock_type = static_cast<uint16_t>(fe.arg2 >> 16);
      e.protocol = static_cast<uint16_t>(fe.arg2 & 0xffff);
      auto* net = out.mutable_net();
      net->set_family(SocketFamilyName(e.family));
      net->set_sock_type(SocketTypeName(e.sock_type));
      net->set_protocol(ProtocolName(e.protocol));
    } else {
      bool has_object = fe.path_len > 0;
      if (has_object) {
        auto* file = out.mutable_file();
        file->set_path(Printable(path));
        file->set_access(RightsString(fe.access));
        file->set_granted(RightsString(fe.granted));
        file->set_truncated(fe.path_flags & CORDON_PATH_F_TRUNCATED);
        file->set_inode(fe.ino);
        file->set_device(fe.dev);
        file->set_rule(e.rule);
        target = file->access().empty() ? file->path() : file->access() + " on " + file->path();
      }
      if (kind.rfind("tamper.", 0) == 0) {
        auto* t = out.mutable_target();
        t->set_pid(fe.target_pid);
        t->set_arg(fe.arg);
        if (fe.target_pid) target = "pid " + std::to_string(fe.target_pid);
        if (e.kind == CORDON_EV_TAMPER_SIGNAL) target += ", signal " + std::to_string(fe.arg);
        if (e.kind == CORDON_EV_TAMPER_CGROUP) target = "cgroup id " + std::to_string(fe.arg);
        if (e.reason == CORDON_REASON_SECCOMP) target = "syscall " + std::to_string(fe.arg);
      }
    }
  } else {
    auto* net = out.mutable_net();
    net->set_family(SocketFamilyName(e.family));
    net->set_sock_type(SocketTypeName(e.sock_type));
    net->set_protocol(ProtocolName(e.protocol));
    if (e.kind != CORDON_EV_NET_SOCKET) {
      std::array<uint8_t, 16> addr;
      std::memcpy(addr.data(), e.addr, 16);
      net->set_address(policy::AddressToString(addr));
      net->set_port(e.port);
      net->set_rule(e.rule);
      target = net->address() + " port " + std::to_string(e.port) + "/" + net->protocol();
    }
  }
  out.set_reason(ReasonText(e, target));
  return out;
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

std::string ToJsonLine(const cordon::v1::AuditEvent& event) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = false;
  options.preserve_proto_field_names = false;
  (void)google::protobuf::util::MessageToJsonString(event, &json, options);
  return json;
}

std::string ToCompactLine(const cordon::v1::AuditEvent& event) {
  std::string time = google::protobuf::util::TimeUtil::ToString(event.time());
  std::string line = time + " " + event.sandbox() + " ";
  if (event.kind() == "loss") return line + "LOSS " + event.reason();
  if (event.kind() == "suppressed") return line + "SUPPRESSED " + event.reason();
  line += event.verdict() + " " + event.kind() + " " + event.comm() + "[" + std::to_string(event.pid()) + "]";
  if (event.has_net() && !event.net().address().empty())
    line += " -> " + event.net().address() + ":" + std::to_string(event.net().port()) + "/" + event.net().protocol();
  else if (event.has_net())
    line += " socket(" + event.net().family() + ", " + event.net().sock_type() + ", " + event.net().protocol() + ")";
  else if (event.has_file())
    line += " " + event.file().path();
  return line + ": " + event.reason();
}

}  // namespace cordon
