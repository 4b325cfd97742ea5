// spec.resources on a sandbox cgroup: the policy's limits as cgroup v2 file
// values, and the lines that say what applies.
#include "ops/ops.h"

namespace cordon::ops {

std::vector<CgroupLimitValue> CgroupLimitsOf(const policy::ResourceLimits& r) {
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
  return out;
}

std::vector<std::string> UnimplementedLimits(const policy::ResourceLimits& r, bool for_run = false,
                                             bool agent = false) {
  std::vector<std::string> out;
  auto add = [&out](const char* field, bool set) {
    if (set) out.push_back(std::string("resource limit spec.resources.") + field + ": not implemented yet");
  };
  add("ioWriteBytesPerSecond", r.io_write_bytes_per_second.has_value());
  add("egressBytes", r.egress_bytes.has_value());
  add("disk", r.disk.has_value());
  // A clock and a share of a limit: watched by `cordon run` for its command,
  // by the agent for the sandboxes attached through it.
  for (const auto& [field, set] :
       {std::pair{"wallTime", r.wall_time_seconds.has_value()}, std::pair{"warnAt", r.warn_at_percent.has_value()}})
    if (set && !for_run && !agent)
      out.push_back(std::string("resource limit spec.resources.") + field +
                    ": needs the agent (cordon attach without an agent does not watch it)");
  return out;
}

std::vector<std::string> UnenforcedLimits(const policy::ResourceLimits& limits,
                                          const std::vector<CgroupLimitOutcome>& outcomes, bool for_run, bool agent) {
  std::vector<std::string> out;
  for (const CgroupLimitOutcome& o : outcomes)
    if (!o.enforced)
      out.push_back(std::string("resource limit ") + CgroupLimitFile(o.requested.limit) + ": " + o.reason);
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

}  // namespace cordon::ops
