#include "sys/cgroup_limits.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <limits>
#include <optional>
#include <sstream>

#include "util/fs.h"

namespace cordon {
namespace {

constexpr uint64_t kUnlimited = std::numeric_limits<uint64_t>::max();

std::string Trim(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

bool HasWord(const std::string& list, const std::string& word) {
  std::istringstream in(list);
  std::string w;
  while (in >> w)
    if (w == word) return true;
  return false;
}

// A file of the cgroup directory `dir_fd`, read whole (small files only).
Result<std::string> ReadAt(int dir_fd, const std::string& name, const std::string& shown) {
  UniqueFd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return SysError("open " + shown);
  char buf[4096];  // io.max: a line per device
  const ssize_t n = ::read(fd.get(), buf, sizeof buf - 1);
  if (n < 0) return SysError("read " + shown);
  return Trim(std::string(buf, static_cast<size_t>(n)));
}

Status WriteAt(int dir_fd, const std::string& name, const std::string& data, const std::string& shown) {
  UniqueFd fd(::openat(dir_fd, name.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd.valid()) return SysError("open " + shown + " for writing");
  const ssize_t n = ::write(fd.get(), data.data(), data.size());
  if (n < 0) return SysError("write '" + data + "' to " + shown);
  if (static_cast<size_t>(n) != data.size()) return Error{"short write of '" + data + "' to " + shown};
  return {};
}

// "max" -> unlimited; a number; cpu.max "QUOTA PERIOD" -> quota scaled to kCgroupCpuPeriodUs.
std::optional<uint64_t> ParseFileValue(CgroupLimit limit, const std::string& text) {
  std::istringstream in(text);
  std::string first, second;
  in >> first >> second;
  if (first == "max") return kUnlimited;
  uint64_t v = 0;
  for (char c : first) {
    if (c < '0' || c > '9' || v > kUnlimited / 10 - 10) return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (first.empty()) return std::nullopt;
  if (limit != CgroupLimit::kCpuMax) return v;
  uint64_t period = 0;
  for (char c : second) {
    if (c < '0' || c > '9' || period > kUnlimited / 10 - 10) return std::nullopt;
    period = period * 10 + static_cast<uint64_t>(c - '0');
  }
  if (period == 0) return std::nullopt;
  return static_cast<uint64_t>(static_cast<long double>(v) * kCgroupCpuPeriodUs / period);
}

// The wbps of device `id` ("254:0") in io.max's content: "max" when the
// device has no line (no limit).
std::string IoWbps(const std::string& content, const std::string& id) {
  std::istringstream lines(content);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string dev, word;
    words >> dev;
    if (dev != id) continue;
    while (words >> word)
      if (word.rfind("wbps=", 0) == 0) return word.substr(5);
  }
  return "max";
}

std::string DevId(const CgroupLimitValue& value) {
  return std::to_string(value.dev_major) + ":" + std::to_string(value.dev_minor);
}

// Makes `controller` available to the cgroup `relative` below `mount` (see
// ApplyCgroupLimits); "" when it is, else why not.
std::string EnableController(const std::string& mount, const std::string& relative, const std::string& controller,
                             bool enable_from_root) {
  std::string reason;
  if (!Cgroup2HasController(mount, controller, &reason)) return reason;
  const std::string own = JoinPath(mount, relative);
  if (auto have = ReadFile(JoinPath(own, "cgroup.controllers")); have && HasWord(*have, controller)) return "";
  // The ancestors, root first, down to the direct parent.
  std::vector<std::string> ancestors{mount};
  for (size_t slash = relative.find('/', 1); slash != std::string::npos; slash = relative.find('/', slash + 1))
    ancestors.push_back(JoinPath(mount, relative.substr(0, slash)));
  size_t first = enable_from_root ? 0 : ancestors.size() - 1;
  for (size_t i = first; i < ancestors.size(); ++i) {
    const std::string& dir = ancestors[i];
    const std::string subtree = JoinPath(dir, "cgroup.subtree_control");
    auto enabled = ReadFile(subtree);
    if (!enabled) return enabled.error().ToString();
    if (HasWord(*enabled, controller)) continue;
    auto offered = ReadFile(JoinPath(dir, "cgroup.controllers"));
    if (!offered) return offered.error().ToString();
    if (!HasWord(*offered, controller))
      return "the " + controller + " controller is not enabled for " + dir + " (not in its cgroup.controllers)";
    if (Status s = WriteFile(subtree, "+" + controller); !s.ok())
      return "cannot enable the " + controller + " controller in " + subtree + ": " + s.error().ToString();
  }
  return "";
}

}  // namespace

const char* CgroupLimitFile(CgroupLimit limit) {
  switch (limit) {
    case CgroupLimit::kMemoryMax: return "memory.max";
    case CgroupLimit::kMemoryHigh: return "memory.high";
    case CgroupLimit::kSwapMax: return "memory.swap.max";
    case CgroupLimit::kPidsMax: return "pids.max";
    case CgroupLimit::kCpuMax: return "cpu.max";
    case CgroupLimit::kCpuWeight: return "cpu.weight";
    case CgroupLimit::kIoWriteBps: return "io.max";
  }
  return "?";
}

const char* CgroupLimitController(CgroupLimit limit) {
  switch (limit) {
    case CgroupLimit::kMemoryMax:
    case CgroupLimit::kMemoryHigh:
    case CgroupLimit::kSwapMax: return "memory";
    case CgroupLimit::kPidsMax: return "pids";
    case CgroupLimit::kCpuMax:
    case CgroupLimit::kCpuWeight: return "cpu";
    case CgroupLimit::kIoWriteBps: return "io";
  }
  return "?";
}

std::string CgroupLimitText(const CgroupLimitValue& value) {
  if (value.limit == CgroupLimit::kCpuMax)
    return std::to_string(value.value) + " " + std::to_string(kCgroupCpuPeriodUs);
  if (value.limit == CgroupLimit::kIoWriteBps) return DevId(value) + " wbps=" + std::to_string(value.value);
  return std::to_string(value.value);
}

std::string CgroupLimitLabel(const CgroupLimitValue& value) {
  std::string label = CgroupLimitFile(value.limit);
  if (value.limit == CgroupLimit::kIoWriteBps) label += " " + DevId(value);
  return label;
}

std::string CgroupLimitOutcome::Describe() const {
  const std::string file = CgroupLimitFile(requested.limit);
  const std::string wanted = CgroupLimitText(requested);
  if (restored) return file + ": not in the new policy: the platform's '" + platform + "' is back";
  if (!enforced) return file + " " + wanted + " NOT enforced: " + reason;
  if (!v1_file.empty() && requested.limit == CgroupLimit::kIoWriteBps)
    return file + " " + wanted + " enforced (cgroup v1 " + v1_file +
           "; direct I/O only: cgroup v1 does not charge the kernel's background writeback of buffered writes to the "
           "cgroup)";
  if (!v1_file.empty()) return file + " " + wanted + " enforced (cgroup v1 " + v1_file + ")";
  if (platform_kept)
    return file + ": the platform's stricter '" + (platform.empty() ? previous : platform) + "' applies (policy: '" +
           wanted + "')";
  return file + " " + wanted + " enforced (cgroup v2, policy)";
}

bool Cgroup2HasController(const std::string& mount, const std::string& controller, std::string* reason) {
  auto offered = ReadFile(JoinPath(mount, "cgroup.controllers"));
  if (!offered) {
    *reason = offered.error().ToString();
    return false;
  }
  if (HasWord(*offered, controller)) return true;
  *reason = "no " + controller + " controller in cgroup2 at " + mount +
            " (on a hybrid host it is on cgroup v1, where only cordon run places its command)";
  return false;
}

namespace {

// Writes `text` to the limit file; on an error, restores the limits written
// so far (`outcomes`) and says so in the error.
Status WriteOrUndo(const CgroupRef& cgroup, const std::string& file, const std::string& text, const std::string& shown,
                   const std::vector<CgroupLimitOutcome>& outcomes) {
  Status s = WriteAt(cgroup.fd.get(), file, text, shown);
  if (s.ok()) return s;
  Error error{s.error().ToString()};
  if (Status r = RestoreCgroupLimits(cgroup, outcomes); !r.ok())
    error.message += "; restoring the limits already written failed too: " + r.error().ToString();
  return error;
}

}  // namespace

std::optional<CgroupLimitValue> CgroupLimitOfLabel(const std::string& label) {
  for (CgroupLimit limit : {CgroupLimit::kMemoryMax, CgroupLimit::kMemoryHigh, CgroupLimit::kSwapMax,
                            CgroupLimit::kPidsMax, CgroupLimit::kCpuMax, CgroupLimit::kCpuWeight}) {
    if (label == CgroupLimitFile(limit)) return CgroupLimitValue{limit, 0};
  }
  unsigned major = 0, minor = 0;
  char tail = 0;
  if (std::sscanf(label.c_str(), "io.max %u:%u%c", &major, &minor, &tail) == 2 &&
      label == "io.max " + std::to_string(major) + ":" + std::to_string(minor))
    return CgroupLimitValue{CgroupLimit::kIoWriteBps, 0, major, minor};
  return std::nullopt;
}

Result<std::vector<CgroupLimitOutcome>> ApplyCgroupLimits(const CgroupRef& cgroup,
                                                          const std::vector<CgroupLimitValue>& limits, LimitMerge merge,
                                                          bool enable_from_root, const PlatformLimits* platform) {
  std::vector<CgroupLimitOutcome> outcomes;
  std::vector<std::pair<std::string, std::string>> enabled;  // controller -> "" or why not
  for (const CgroupLimitValue& value : limits) {
    CgroupLimitOutcome out;
    out.requested = value;
    const std::string controller = CgroupLimitController(value.limit);
    std::string why;
    bool known = false;
    for (const auto& [name, reason] : enabled)
      if (name == controller) why = reason, known = true;
    if (!known) {
      why = EnableController(cgroup.mount, cgroup.relative, controller, enable_from_root);
      enabled.emplace_back(controller, why);
      // cgroup v2 charges the writeback of buffered writes to the cgroup of
      // the pages' memory cgroup: io.max holds them only with memory enabled
      // too (best effort: direct I/O is held either way).
      if (controller == "io" && why.empty())
        (void)EnableController(cgroup.mount, cgroup.relative, "memory", enable_from_root);
    }
    const std::string file = CgroupLimitFile(value.limit);
    const std::string shown = JoinPath(cgroup.path, file);
    if (!why.empty()) {
      out.reason = why;
      outcomes.push_back(out);
      continue;
    }
    auto previous = ReadAt(cgroup.fd.get(), file, shown);
    if (!previous) {
      // memory.swap.max is absent without swap accounting.
      out.reason = previous.error().err == ENOENT ? shown + " does not exist (this kernel does not account it)"
                                                  : previous.error().ToString();
      outcomes.push_back(out);
      continue;
    }
    out.previous = *previous;
    // io.max: this device's line only, as it is written back ("254:0 wbps=max").
    std::string previous_value = *previous;
    if (value.limit == CgroupLimit::kIoWriteBps) {
      previous_value = IoWbps(*previous, DevId(value));
      out.previous = DevId(value) + " wbps=" + previous_value;
    }
    // The platform's value: recorded at the first attach, else the file's.
    std::string platform_text = out.previous, platform_value = previous_value;
    if (platform)
      if (auto it = platform->find(CgroupLimitLabel(value)); it != platform->end()) {
        platform_text = it->second;
        platform_value = value.limit == CgroupLimit::kIoWriteBps ? IoWbps(it->second, DevId(value)) : it->second;
      }
    const std::optional<uint64_t> current = ParseFileValue(value.limit, platform_value);
    if (merge == LimitMerge::kStricter && value.limit != CgroupLimit::kCpuWeight && current &&
        *current <= value.value) {
      out.enforced = true;
      out.platform_kept = true;
      out.platform = platform_text;
      if (platform_text != out.previous) {  // an earlier policy's value is there: the platform's goes back
        if (Status s = WriteOrUndo(cgroup, file, platform_text, shown, outcomes); !s.ok()) return s.error();
        out.written = true;
      }
      outcomes.push_back(out);
      continue;
    }
    if (Status s = WriteAt(cgroup.fd.get(), file, CgroupLimitText(value), shown); !s.ok()) {
      const int err = s.error().err;
      if (value.limit == CgroupLimit::kIoWriteBps && (err == EINVAL || err == ENODEV || err == EOPNOTSUPP)) {
        out.reason = "the kernel does not throttle device " + DevId(value) + " (" + s.error().ToString() + ")";
        outcomes.push_back(out);
        continue;
      }
      Error error{s.error().ToString()};
      if (Status r = RestoreCgroupLimits(cgroup, outcomes); !r.ok())
        error.message += "; restoring the limits already written failed too: " + r.error().ToString();
      else if (!outcomes.empty())
        error.message += " (the limits written before it were restored)";
      return error;
    }
    out.enforced = true;
    out.written = true;
    outcomes.push_back(out);
  }
  return outcomes;
}

Result<std::vector<CgroupLimitOutcome>> RestorePlatformLimits(const CgroupRef& cgroup, const PlatformLimits& limits) {
  std::vector<CgroupLimitOutcome> outcomes;
  for (const auto& [label, value] : limits) {
    auto limit = CgroupLimitOfLabel(label);
    if (!limit) continue;
    CgroupLimitOutcome out;
    out.requested = *limit;
    out.restored = true;
    out.platform = value;
    const std::string file = CgroupLimitFile(limit->limit);
    const std::string shown = JoinPath(cgroup.path, file);
    auto previous = ReadAt(cgroup.fd.get(), file, shown);
    if (!previous) continue;  // the controller went away: nothing of cordon's is left there
    out.previous = limit->limit == CgroupLimit::kIoWriteBps
                       ? DevId(*limit) + " wbps=" + IoWbps(*previous, DevId(*limit))
                       : *previous;
    if (out.previous != value) {
      if (Status s = WriteOrUndo(cgroup, file, value, shown, outcomes); !s.ok()) return s.error();
      out.written = true;
    }
    outcomes.push_back(out);
  }
  return outcomes;
}

Status RestoreCgroupLimits(const CgroupRef& cgroup, const std::vector<CgroupLimitOutcome>& outcomes) {
  std::string failed;
  int err = 0;
  // In reverse: memory.high before memory.max could otherwise be refused.
  for (auto it = outcomes.rbegin(); it != outcomes.rend(); ++it) {
    if (!it->written) continue;
    const std::string file = CgroupLimitFile(it->requested.limit);
    if (Status s = WriteAt(cgroup.fd.get(), file, it->previous, JoinPath(cgroup.path, file)); !s.ok()) {
      failed += (failed.empty() ? "" : "; ") + s.error().message;
      err = s.error().err;
    }
  }
  if (!failed.empty()) return Error{failed, err};
  return {};
}

}  // namespace cordon
