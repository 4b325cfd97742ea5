// spec.resources (issue 17): the hard resource limits of a sandbox, parsed
// from their unit spellings and validated. Pure: no kernel access.
//
// Spellings (every other one is an error naming file, line and field):
//   byte sizes  an integer with an optional unit: Ki Mi Gi Ti (powers of 1024)
//               or K M G T (powers of 1000): 512Mi, 1G, 1048576. No fractions
//               ("1.5Gi"), no signs, no other units ("MB", "mi"), at most
//               2^63-1 bytes.
//   cpu         cores, a decimal number > 0 with at most 3 decimals: "1.5",
//               2, "0.25"; at least 0.01, at most 10000.
//   durations   NhNmNs, each part optional but in that order, at least one:
//               30s, 30m, 2h, 1h30m; > 0, at most 8760h.
//   warnAt      a percentage N% with N 1..100.
//   pids        an integer 1..4194304; cpuWeight an integer 1..10000.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "policy/diagnostic.h"
#include "policy/parser.h"

namespace cordon::policy {

struct ResourceLimits {
  std::optional<uint64_t> memory;          // bytes, memory.max
  std::optional<uint64_t> memory_high;     // bytes, memory.high (<= memory)
  std::optional<uint64_t> swap;            // bytes, memory.swap.max (0 allowed)
  std::optional<uint64_t> pids;            // pids.max
  std::optional<uint64_t> cpu_millicores;  // cpu.max quota = millicores * 100 us per 100000 us
  std::optional<uint64_t> cpu_weight;      // cpu.weight
  std::optional<uint64_t> io_write_bytes_per_second;
  std::optional<uint64_t> wall_time_seconds;
  std::optional<uint64_t> egress_bytes;
  std::optional<uint64_t> disk;
  std::optional<uint64_t> warn_at_percent;

  bool any() const;
  bool operator==(const ResourceLimits&) const = default;
};

constexpr uint64_t kMaxPids = 4194304;  // PID_MAX_LIMIT
constexpr uint64_t kCpuPeriodUs = 100000;

// The unit parsers; on error false with *error a sentence ("invalid byte size
// '1.5Gi': fractions of a byte are not allowed ...").
bool ParseByteSize(std::string_view text, uint64_t* bytes, std::string* error);
bool ParseCpuCores(std::string_view text, uint64_t* millicores, std::string* error);
bool ParseDuration(std::string_view text, uint64_t* seconds, std::string* error);
bool ParsePercent(std::string_view text, uint64_t* percent, std::string* error);
// A decimal integer lo..hi.
bool ParseBoundedInteger(std::string_view text, uint64_t lo, uint64_t hi, uint64_t* value, std::string* error);

// Validates spec.resources of `parsed` into *out; each error is appended to
// *diags at its field ("spec.resources.memory"). memoryHigh above memory is
// an error at memoryHigh.
void CompileResources(const ParsedPolicy& parsed, ResourceLimits* out, Diagnostics* diags);

// Display: 536870912 -> "512Mi", 1000 -> "1000", 1500 millicores -> "1.5".
std::string ByteSizeText(uint64_t bytes);
std::string CpuCoresText(uint64_t millicores);
std::string DurationText(uint64_t seconds);
// "resources: ..." lines for `cordon policy check` ("resources: none" when empty).
std::string DescribeResources(const ResourceLimits& limits);

}  // namespace cordon::policy
