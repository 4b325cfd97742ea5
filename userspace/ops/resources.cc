// spec.resources on a sandbox cgroup: the policy's limits as cgroup v2 file
// values, and the lines that say what applies.
#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <cstring>

#include "ops/ops.h"
#include "ops/resource_watch.h"
#include "policy/cidr.h"

namespace cordon::ops {

std::vector<CgroupLimitValue> CgroupLimitsOf(const policy::ResourceLimits& r, const WriteDevices& io) {
  std::vector<CgroupLimitValue> out;
  auto add = [&out](CgroupLimit limit, const std::optional<uint64_t>& v) {
    if (v) out.push_back(CgroupLimitValue{limit, *v});
  };
  add(CgroupLimit::kMemoryMax, r.memory);
  add(CgroupLimit::kMemoryHigh, r.memory_high);
  add(CgroupLimit::kSwapMax, r.swap);
  add(CgroupLimit::kPidsMax, r.pids);
  if (r.cpu_millicores)  // millicores of kCgroupCpuPeriodUs: 1000 = the whole period
    out.push_back(CgroupLimitValue{CgroupLimit::kCpuMax, *r.cpu_millicores * kCgroupCpuPeriodUs / 1000});
  add(CgroupLimit::kCpuWeight, r.cpu_weight);
  if (r.io_write_bytes_per_second)
    for (const BlockDevice& d : io.devices)
      out.push_back(CgroupLimitValue{CgroupLimit::kIoWriteBps, *r.io_write_bytes_per_second, d.major, d.minor});
  return out;
}

WriteDevices IoWriteDevices(const policy::CompiledPolicy& policy) {
  if (!policy.resources.io_write_bytes_per_second) return {};
  std::vector<std::string> paths;
  if (!policy.has_files) paths.push_back("/");  // writes anywhere: every mounted disk
  for (const policy::FileRule& rule : policy.file_rules)
    if (rule.rights & (CORDON_FILE_WRITE | CORDON_FILE_CREATE)) paths.push_back(rule.path);
  auto mounts = ReadMountTable();
  return ResolveWriteDevices(paths, mounts ? *mounts : std::vector<MountEntry>{});
}

std::vector<std::string> IoWriteNotes(const policy::ResourceLimits& limits, const WriteDevices& io) {
  std::vector<std::string> out;
  if (!limits.io_write_bytes_per_second) return out;
  const std::string field =
      "resources: ioWriteBytesPerSecond " + policy::ByteSizeText(*limits.io_write_bytes_per_second);
  for (const BlockDevice& d : io.devices) {
    std::string paths;
    for (const auto& p : d.paths) paths += (paths.empty() ? "" : ", ") + p;
    out.push_back(field + ": device " + d.Id() + " (" + d.name + ") holds " + paths);
  }
  for (const UnthrottledPath& p : io.not_applicable)
    out.push_back(field + ": not applicable to " + p.path + " (" + p.reason + ")");
  if (io.devices.empty())
    out.push_back(field + ": no write path of the policy is on a block device: there is no disk write to throttle");
  return out;
}

std::vector<std::string> UnimplementedLimits(const policy::ResourceLimits& r, bool for_run = false,
                                             bool agent = false) {
  std::vector<std::string> out;
  // cordon run sizes its scratch tmpfs with disk and says what that covers (cli/run.cc).
  if (r.disk && !for_run)
    out.push_back(
        "resource limit spec.resources.disk: not enforced by cordon attach (only cordon run's scratch tmpfs has a "
        "size; spec.files write paths would need file-system quotas)");
  // A clock and a share of a limit: watched by `cordon run` for its command,
  // by the agent for the sandboxes attached through it. (warnAt of
  // egressBytes is the kernel's: it needs no watcher.)
  for (const auto& [field, set] : {std::pair{"wallTime", r.wall_time_seconds.has_value()},
                                   std::pair{"warnAt", r.warn_at_percent.has_value() && (r.memory || r.pids)}})
    if (set && !for_run && !agent)
      out.push_back(std::string("resource limit spec.resources.") + field +
                    ": needs the agent (cordon attach without an agent does not watch it)");
  return out;
}

std::vector<std::string> UnenforcedLimits(const policy::ResourceLimits& limits,
                                          const std::vector<CgroupLimitOutcome>& outcomes, bool for_run, bool agent) {
  std::vector<std::string> out;
  for (const CgroupLimitOutcome& o : outcomes)
    if (!o.enforced) out.push_back("resource limit " + CgroupLimitLabel(o.requested) + ": " + o.reason);
  for (auto& line : UnimplementedLimits(limits, for_run, agent)) out.push_back(std::move(line));
  return out;
}

std::vector<std::string> LimitNotes(const policy::ResourceLimits& limits,
                                    const std::vector<CgroupLimitOutcome>& outcomes, bool agent) {
  std::vector<std::string> out;
  for (const CgroupLimitOutcome& o : outcomes) out.push_back("resources: " + o.Describe());
  if (agent && limits.wall_time_seconds)
    out.push_back("resources: wallTime " + std::to_string(*limits.wall_time_seconds) +
                  " s from now watched by the agent: one resource.walltime event, and the sandbox contained if "
                  "spec.onViolation is contain (its processes are not signalled)");
  if (agent && limits.warn_at_percent)
    out.push_back("resources: warnAt " + std::to_string(*limits.warn_at_percent) +
                  "% of memory.max and pids.max watched by the agent (memory.current and pids.current read every "
                  "second)");
  for (const auto& line : UnimplementedLimits(limits, false, agent)) out.push_back("resources: NOT enforced: " + line);
  return out;
}

std::string EgressDestText(const cordon_egress_dest_key& key) {
  std::array<uint8_t, 16> addr;
  std::memcpy(addr.data(), key.addr, addr.size());
  const std::string a = policy::AddressToString(addr);
  const char* proto = key.protocol == IPPROTO_TCP ? "tcp" : key.protocol == IPPROTO_UDP ? "udp" : nullptr;
  std::string out = key.family == AF_INET6 ? "[" + a + "]" : a;
  if (key.port) out += ":" + std::to_string(key.port);
  out += "/" + (proto ? std::string(proto) : std::to_string(key.protocol));
  return out;
}

std::string EgressText(const SandboxInfo& s) {
  if (!s.has_egress) return "";
  const cordon_egress_usage& e = s.egress;
  std::string out = std::to_string(e.bytes) + " bytes sent (" + std::to_string(e.packets) + " packets)";
  out +=
      s.egress_limit ? " of " + policy::ByteSizeText(s.egress_limit) + " (spec.resources.egressBytes)" : ", no limit";
  if (e.dropped_packets)
    out += "; " + std::to_string(e.dropped_packets) + " packets (" + std::to_string(e.dropped_bytes) +
           " bytes) dropped over the limit";
  return out;
}

std::string EgressJson(const SandboxInfo& s, size_t top) {
  if (!s.has_egress) return "null";
  const cordon_egress_usage& e = s.egress;
  std::string out = "{\"bytes\":" + std::to_string(e.bytes) + ",\"packets\":" + std::to_string(e.packets) +
                    ",\"droppedBytes\":" + std::to_string(e.dropped_bytes) +
                    ",\"droppedPackets\":" + std::to_string(e.dropped_packets) +
                    ",\"limit\":" + std::to_string(s.egress_limit) + ",\"destinations\":[";
  if (auto dests = ReadEgressDests(s.pin_dir)) {
    for (size_t i = 0; i < dests->size() && i < top; ++i)
      out += std::string(i ? "," : "") + "{\"destination\":\"" + EgressDestText((*dests)[i].key) +
             "\",\"bytes\":" + std::to_string((*dests)[i].bytes) + "}";
  }
  return out + "]}";
}

}  // namespace cordon::ops
