#include "policy/resources.h"

#include <limits>

#include "util/text.h"

namespace cordon::policy {
namespace {

constexpr uint64_t kMaxBytes = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
constexpr uint64_t kMaxCpuMillicores = 10000ull * 1000;
constexpr uint64_t kMaxDurationSeconds = 8760ull * 3600;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Leading decimal digits of text from *at into *value; false on none or overflow past `max`.
bool Digits(std::string_view text, size_t* at, uint64_t max, uint64_t* value, bool* overflow) {
  const size_t start = *at;
  uint64_t v = 0;
  *overflow = false;
  while (*at < text.size() && IsDigit(text[*at])) {
    const uint64_t d = static_cast<uint64_t>(text[*at] - '0');
    if (d > max || v > (max - d) / 10) *overflow = true;
    if (!*overflow) v = v * 10 + d;
    ++*at;
  }
  *value = v;
  return *at > start;
}

struct Unit {
  const char* name;
  uint64_t factor;
};
constexpr Unit kByteUnits[] = {
    {"Ki", 1ull << 10}, {"Mi", 1ull << 20}, {"Gi", 1ull << 30},   {"Ti", 1ull << 40},
    {"K", 1000ull},     {"M", 1000000ull},  {"G", 1000000000ull}, {"T", 1000000000000ull},
};

}  // namespace

bool ResourceLimits::any() const {
  return memory || memory_high || swap || pids || cpu_millicores || cpu_weight || io_write_bytes_per_second ||
         wall_time_seconds || egress_bytes || disk || warn_at_percent;
}

bool ParseByteSize(std::string_view text, uint64_t* bytes, std::string* error) {
  const std::string usage = " (expected an integer with an optional unit Ki, Mi, Gi, Ti or K, M, G, T: 512Mi)";
  size_t at = 0;
  uint64_t number = 0;
  bool overflow = false;
  if (!Digits(text, &at, kMaxBytes, &number, &overflow)) {
    *error = "invalid byte size " + Quoted(text) +
             (!text.empty() && text[0] == '-' ? ": negative sizes are not allowed" : "") + usage;
    return false;
  }
  if (at < text.size() && text[at] == '.') {
    *error = "invalid byte size " + Quoted(text) + ": fractions are not allowed, use a smaller unit" + usage;
    return false;
  }
  const std::string_view suffix = text.substr(at);
  uint64_t factor = 1;
  if (!suffix.empty()) {
    factor = 0;
    for (const Unit& unit : kByteUnits)
      if (suffix == unit.name) factor = unit.factor;
    if (factor == 0) {
      *error = "invalid byte size " + Quoted(text) + ": unknown unit " + Quoted(suffix) + usage;
      return false;
    }
  }
  if (overflow || number > kMaxBytes / factor) {
    *error = "byte size " + Quoted(text) + " is too large (at most 2^63-1 bytes)";
    return false;
  }
  *bytes = number * factor;
  return true;
}

bool ParseCpuCores(std::string_view text, uint64_t* millicores, std::string* error) {
  const std::string usage = " (expected a number of cores > 0 with at most 3 decimals: 1.5, 2, 0.25)";
  size_t at = 0;
  uint64_t whole = 0;
  bool overflow = false;
  const bool has_whole = Digits(text, &at, kMaxCpuMillicores, &whole, &overflow);
  uint64_t fraction = 0;
  size_t decimals = 0;
  if (at < text.size() && text[at] == '.') {
    ++at;
    while (at < text.size() && IsDigit(text[at])) {
      if (++decimals > 3) {
        *error = "invalid cpu " + Quoted(text) + ": at most 3 decimals" + usage;
        return false;
      }
      fraction = fraction * 10 + static_cast<uint64_t>(text[at] - '0');
      ++at;
    }
    if (decimals == 0 && !has_whole) at = 0;  // "." alone
  }
  if ((!has_whole && decimals == 0) || at != text.size()) {
    *error = "invalid cpu " + Quoted(text) + usage;
    return false;
  }
  for (size_t i = decimals; i < 3; ++i) fraction *= 10;
  if (overflow || whole * 1000 + fraction > kMaxCpuMillicores) {
    *error = "cpu " + Quoted(text) + " is too large (at most 10000 cores)";
    return false;
  }
  const uint64_t value = whole * 1000 + fraction;
  if (value < 10) {
    *error = "cpu " + Quoted(text) + " is too small (at least 0.01 cores)";
    return false;
  }
  *millicores = value;
  return true;
}

bool ParseDuration(std::string_view text, uint64_t* seconds, std::string* error) {
  const std::string usage = " (expected hours, minutes and seconds in that order: 30s, 30m, 2h, 1h30m)";
  constexpr struct {
    char unit;
    uint64_t factor;
  } kParts[] = {{'h', 3600}, {'m', 60}, {'s', 1}};
  size_t at = 0, part = 0;
  uint64_t total = 0;
  bool overflow = false;
  while (at < text.size()) {
    uint64_t number = 0;
    bool big = false;
    if (!Digits(text, &at, kMaxDurationSeconds, &number, &big) || at >= text.size()) {
      *error = "invalid duration " + Quoted(text) + usage;
      return false;
    }
    while (part < 3 && kParts[part].unit != text[at]) ++part;
    if (part == 3) {
      *error = "invalid duration " + Quoted(text) + ": unit " + Quoted(text.substr(at, 1)) +
               " unknown or out of order" + usage;
      return false;
    }
    overflow = overflow || big || number > kMaxDurationSeconds / kParts[part].factor;
    if (!overflow) total += number * kParts[part].factor;
    ++part;
    ++at;
  }
  if (text.empty()) {
    *error = "invalid duration ''" + usage;
    return false;
  }
  if (overflow || total > kMaxDurationSeconds) {
    *error = "duration " + Quoted(text) + " is too long (at most 8760h)";
    return false;
  }
  if (total == 0) {
    *error = "duration " + Quoted(text) + " must be greater than 0";
    return false;
  }
  *seconds = total;
  return true;
}

bool ParseBoundedInteger(std::string_view text, uint64_t lo, uint64_t hi, uint64_t* value, std::string* error) {
  const std::string range = " (expected an integer " + std::to_string(lo) + ".." + std::to_string(hi) + ")";
  size_t at = 0;
  uint64_t v = 0;
  bool overflow = false;
  if (!Digits(text, &at, hi, &v, &overflow) || at != text.size()) {
    *error = "invalid integer " + Quoted(text) + range;
    return false;
  }
  if (overflow || v < lo || v > hi) {
    *error = Quoted(text) + " is out of range" + range;
    return false;
  }
  *value = v;
  return true;
}

bool ParsePercent(std::string_view text, uint64_t* percent, std::string* error) {
  if (text.empty() || text.back() != '%') {
    *error = "invalid percentage " + Quoted(text) + " (expected N% with N 1..100: 80%)";
    return false;
  }
  std::string inner;
  if (!ParseBoundedInteger(text.substr(0, text.size() - 1), 1, 100, percent, &inner)) {
    *error = "invalid percentage " + Quoted(text) + " (expected N% with N 1..100: 80%)";
    return false;
  }
  return true;
}

void CompileResources(const ParsedPolicy& parsed, ResourceLimits* out, Diagnostics* diags) {
  const cordon::v1::Resources& r = parsed.proto.spec().resources();
  const std::string base = "spec.resources.";
  // Each field: its JSON name, its text, how it parses, where it goes.
  auto field = [&](const char* name, const std::string& text, auto parse, std::optional<uint64_t>* slot) {
    if (text.empty() && !parsed.positions.Find(base + name)) return;  // omitted
    uint64_t value = 0;
    std::string error;
    if (!parse(text, &value, &error)) {
      diags->push_back(parsed.At(base + name, error));
      return;
    }
    *slot = value;
  };
  auto positive_bytes = [](std::string_view text, uint64_t* v, std::string* error) {
    if (!ParseByteSize(text, v, error)) return false;
    if (*v == 0) *error = "must be greater than 0 (omit the field for no limit)";
    return *v != 0;
  };
  auto any_bytes = [](std::string_view text, uint64_t* v, std::string* error) { return ParseByteSize(text, v, error); };
  auto pids = [](std::string_view text, uint64_t* v, std::string* error) {
    return ParseBoundedInteger(text, 1, kMaxPids, v, error);
  };
  auto weight = [](std::string_view text, uint64_t* v, std::string* error) {
    return ParseBoundedInteger(text, 1, 10000, v, error);
  };
  field("memory", r.memory(), positive_bytes, &out->memory);
  field("memoryHigh", r.memory_high(), positive_bytes, &out->memory_high);
  field("swap", r.swap(), any_bytes, &out->swap);
  field("pids", r.pids(), pids, &out->pids);
  field("cpu", r.cpu(), ParseCpuCores, &out->cpu_millicores);
  field("cpuWeight", r.cpu_weight(), weight, &out->cpu_weight);
  field("ioWriteBytesPerSecond", r.io_write_bytes_per_second(), positive_bytes, &out->io_write_bytes_per_second);
  field("wallTime", r.wall_time(), ParseDuration, &out->wall_time_seconds);
  field("egressBytes", r.egress_bytes(), positive_bytes, &out->egress_bytes);
  field("disk", r.disk(), positive_bytes, &out->disk);
  field("warnAt", r.warn_at(), ParsePercent, &out->warn_at_percent);
  if (out->memory && out->memory_high && *out->memory_high > *out->memory)
    diags->push_back(parsed.At(base + "memoryHigh", "memoryHigh " + ByteSizeText(*out->memory_high) +
                                                        " is above memory " + ByteSizeText(*out->memory) +
                                                        " (the throttle point must not exceed the hard limit)"));
}

std::string ByteSizeText(uint64_t bytes) {
  if (bytes == 0) return "0";
  for (int i = 3; i >= 0; --i) {
    const Unit& unit = kByteUnits[i];
    if (bytes % unit.factor == 0) return std::to_string(bytes / unit.factor) + unit.name;
  }
  return std::to_string(bytes);
}

std::string CpuCoresText(uint64_t millicores) {
  std::string out = std::to_string(millicores / 1000);
  uint64_t fraction = millicores % 1000;
  if (fraction == 0) return out;
  std::string digits = std::to_string(fraction);
  digits.insert(0, 3 - digits.size(), '0');
  while (digits.back() == '0') digits.pop_back();
  return out + "." + digits;
}

std::string DurationText(uint64_t seconds) {
  std::string out;
  if (seconds >= 3600) out += std::to_string(seconds / 3600) + "h";
  if (seconds % 3600 >= 60) out += std::to_string(seconds % 3600 / 60) + "m";
  if (seconds % 60 || out.empty()) out += std::to_string(seconds % 60) + "s";
  return out;
}

std::string DescribeResources(const ResourceLimits& l) {
  if (!l.any()) return "resources: no limits set by this policy (no spec.resources)\n";
  std::string out = "resources:\n";
  auto line = [&out](const char* what, const std::optional<uint64_t>& v, std::string (*text)(uint64_t),
                     const char* where) {
    if (v) out += std::string("  ") + what + ": " + text(*v) + "  (" + where + ")\n";
  };
  auto plain = [](uint64_t v) { return std::to_string(v); };
  auto percent = [](uint64_t v) { return std::to_string(v) + "%"; };
  auto cores = [](uint64_t v) { return CpuCoresText(v) + " cores"; };
  line("memory", l.memory, ByteSizeText, "memory.max");
  line("memoryHigh", l.memory_high, ByteSizeText, "memory.high");
  line("swap", l.swap, ByteSizeText, "memory.swap.max");
  line("pids", l.pids, plain, "pids.max");
  line("cpu", l.cpu_millicores, cores, "cpu.max");
  line("cpuWeight", l.cpu_weight, plain, "cpu.weight");
  line("ioWriteBytesPerSecond", l.io_write_bytes_per_second, ByteSizeText,
       "bytes/s: io.max wbps on each disk of the write paths; cordon run on cgroup v1: blkio, direct I/O only");
  line("wallTime", l.wall_time_seconds, DurationText,
       "cordon run: SIGTERM, then SIGKILL; attach: the agent reports it, contains with onViolation: contain");
  line("egressBytes", l.egress_bytes, ByteSizeText,
       "cgroup_skb/egress: bytes sent counted in the kernel, every packet dropped once over; "
       "one resource.egress event at the limit");
  line("disk", l.disk, ByteSizeText, "cordon run: the size of its scratch tmpfs; not spec.files write paths, not attach");
  line("warnAt", l.warn_at_percent, percent,
       l.egress_bytes ? "of memory.max and pids.max: an event (cordon run, the agent); of egressBytes: one "
                        "resource.egress event"
                      : "of memory.max and pids.max: an event (cordon run, the agent)");
  return out;
}

}  // namespace cordon::policy
