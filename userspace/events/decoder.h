// Ring-buffer records (bpf/abi/cordon_event.h) -> AuditEvent protobufs, and
// their canonical JSON. Payloads are validated: a record of the wrong size or
// with unknown enum values is rejected with an error, never misread.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

#include "event.pb.h"
#include "util/result.h"

namespace cordon {

struct SandboxContext {
  uint64_t id = 0;
  std::string name;
  std::string policy;
  std::string cgroup_path;  // of the sandbox root, relative to the cgroup2 mount
};

class EventDecoder {
 public:
  explicit EventDecoder(std::string cgroup_mount) : cgroup_mount_(std::move(cgroup_mount)) {}

  Result<cordon::v1::AuditEvent> Decode(const void* data, size_t size, const SandboxContext& sandbox);

  // A record stating that `dropped` events of this sandbox were lost (the
  // kernel could not reserve ring-buffer space for them).
  cordon::v1::AuditEvent LossRecord(const SandboxContext& sandbox, uint64_t dropped) const;

 private:
  std::string CgroupPath(uint64_t cgroup_id, const SandboxContext& sandbox);

  std::string cgroup_mount_;
  std::unordered_map<uint64_t, std::string> cgroup_paths_;
};

// One line of the audit file: canonical protobuf JSON, without the newline.
std::string ToJsonLine(const cordon::v1::AuditEvent& event);

// One short line for people: time, sandbox, verdict, kind, process, target, reason.
std::string ToCompactLine(const cordon::v1::AuditEvent& event);

// Names used in events.
std::string KindName(uint32_t kind);
std::string ProtocolName(uint32_t protocol);
std::string SocketFamilyName(uint32_t family);
std::string SocketTypeName(uint32_t type);
std::string RightsString(uint32_t rights);  // "read,write,create,exec,map_exec"

}  // namespace cordon
