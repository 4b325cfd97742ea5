#include "sys/cgroup_v1.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <limits>
#include <sstream>

#include "sys/cgroup.h"
#include "util/fs.h"

namespace cordon {
namespace {

std::vector<std::string> Split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, sep))
    if (!part.empty()) out.push_back(part);
  return out;
}

bool Contains(const std::vector<std::string>& list, const std::string& word) {
  for (const auto& w : list)
    if (w == word) return true;
  return false;
}

std::optional<uint64_t> Number(const std::string& path) {
  auto text = ReadFile(path, 4096);
  if (!text || text->empty() || (*text)[0] < '0' || (*text)[0] > '9') return std::nullopt;
  return std::strtoull(text->c_str(), nullptr, 10);
}

// "key N" in a keyed file (memory.oom_control, pids.events).
std::optional<uint64_t> Keyed(const std::string& path, const std::string& key) {
  auto text = ReadFile(path, 4096);
  if (!text) return std::nullopt;
  std::istringstream in(*text);
  std::string k;
  uint64_t v = 0;
  while (in >> k >> v)
    if (k == key) return v;
  return std::nullopt;
}

std::vector<pid_t> Procs(const std::string& dir) {
  std::vector<pid_t> out;
  auto text = ReadFile(JoinPath(dir, "cgroup.procs"));
  if (!text) return out;
  std::istringstream in(*text);
  pid_t pid = 0;
  while (in >> pid) out.push_back(pid);
  return out;
}

void SleepMs(int ms) {
  struct timespec ts = {0, ms * 1000000L};
  ::nanosleep(&ts, nullptr);
}

// <parent>/run-<pid>-<suffix> of runs whose cordon process is gone (killed
// with -9): removed when empty (rmdir refuses a populated v1 cgroup).
void RemoveStale(const std::string& parent) {
  auto names = ListDir(parent);
  if (!names) return;
  for (const auto& name : *names) {
    if (name.rfind("run-", 0) != 0) continue;
    const int pid = std::atoi(name.c_str() + 4);
    if (pid <= 0 || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    (void)::rmdir(JoinPath(parent, name).c_str());
  }
}

}  // namespace

std::vector<CgroupV1Hierarchy> FindCgroupV1Hierarchies() {
  std::vector<CgroupV1Hierarchy> out;
  auto mounts = ReadMountTable();
  auto own = ReadFile("/proc/self/cgroup");
  if (!mounts || !own) return out;
  // hierarchy-id:controllers:path
  for (const std::string& line : Split(*own, '\n')) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos || line.compare(0, a, "0") == 0) continue;
    const std::vector<std::string> controllers = Split(line.substr(a + 1, b - a - 1), ',');
    if (controllers.empty() || controllers[0].rfind("name=", 0) == 0) continue;
    const std::string path = line.substr(b + 1);
    for (const MountEntry& m : *mounts) {
      if (m.fstype != "cgroup") continue;
      const std::vector<std::string> options = Split(m.superopts, ',');
      bool all = true;
      for (const auto& c : controllers) all &= Contains(options, c);
      if (!all) continue;
      CgroupV1Hierarchy h{m.mountpoint, controllers, m.mountpoint};
      // The mount shows the subtree m.root of the hierarchy.
      if (m.root == "/")
        h.own = path == "/" ? m.mountpoint : m.mountpoint + path;
      else if (path.compare(0, m.root.size(), m.root) == 0 &&
               (path.size() == m.root.size() || path[m.root.size()] == '/'))
        h.own = m.mountpoint + path.substr(m.root.size());
      out.push_back(std::move(h));
      break;
    }
  }
  return out;
}

std::optional<CgroupV1Hierarchy> FindCgroupV1Controller(const std::string& controller) {
  for (auto& h : FindCgroupV1Hierarchies())
    if (Contains(h.controllers, controller)) return h;
  return std::nullopt;
}

const char* CgroupV1LimitFile(CgroupLimit limit) {
  switch (limit) {
    case CgroupLimit::kMemoryMax: return "memory.limit_in_bytes";
    case CgroupLimit::kMemoryHigh: return "";
    case CgroupLimit::kSwapMax: return "memory.memsw.limit_in_bytes";
    case CgroupLimit::kPidsMax: return "pids.max";
    case CgroupLimit::kCpuMax: return "cpu.cfs_quota_us";
    case CgroupLimit::kCpuWeight: return "cpu.shares";
    case CgroupLimit::kIoWriteBps: return "blkio.throttle.write_bps_device";
  }
  return "";
}

const char* CgroupV1Controller(CgroupLimit limit) {
  return limit == CgroupLimit::kIoWriteBps ? "blkio" : CgroupLimitController(limit);
}

Result<std::unique_ptr<CgroupV1Placement>> CgroupV1Placement::Create(const std::string& leaf,
                                                                     std::vector<CgroupLimitOutcome>* outcomes) {
  std::unique_ptr<CgroupV1Placement> self(new CgroupV1Placement());
  const std::vector<CgroupV1Hierarchy> hierarchies = FindCgroupV1Hierarchies();
  std::optional<uint64_t> memory;
  for (const CgroupLimitOutcome& o : *outcomes)
    if (o.requested.limit == CgroupLimit::kMemoryMax) memory = o.requested.value;
  for (CgroupLimitOutcome& out : *outcomes) {
    if (out.enforced) continue;
    const std::string controller = CgroupV1Controller(out.requested.limit);
    const CgroupV1Hierarchy* hierarchy = nullptr;
    for (const auto& h : hierarchies)
      if (Contains(h.controllers, controller)) hierarchy = &h;
    if (!hierarchy) continue;  // the cgroup2 reason stands
    const std::string file = CgroupV1LimitFile(out.requested.limit);
    if (file.empty()) {
      out.reason =
          "cgroup v1 (where the memory controller is here) has no memory.high: memory.soft_limit_in_bytes only "
          "reclaims under host-wide memory pressure, it does not throttle";
      continue;
    }
    if (out.requested.limit == CgroupLimit::kSwapMax && !memory) {
      out.reason =
          "cgroup v1 (where the memory controller is here) limits swap only together with memory "
          "(memory.memsw.limit_in_bytes = memory + swap): set spec.resources.memory too";
      continue;
    }
    std::string dir = self->Find(controller);
    if (dir.empty()) {
      const std::string parent = JoinPath(hierarchy->own, "cordon");
      if (::mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST) return SysError("create cgroup v1 " + parent);
      RemoveStale(parent);
      dir = JoinPath(parent, leaf);
      if (::mkdir(dir.c_str(), 0755) != 0) return SysError("create cgroup v1 " + dir);
      self->dirs_.push_back({dir, hierarchy->controllers});
    }
    const std::string path = JoinPath(dir, file);
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      out.reason = path + " does not exist" +
                   (out.requested.limit == CgroupLimit::kSwapMax      ? " (no swap accounting in this kernel)"
                    : out.requested.limit == CgroupLimit::kIoWriteBps ? " (no blkio throttling in this kernel)"
                                                                      : "");
      continue;
    }
    std::string value = std::to_string(out.requested.value);
    if (out.requested.limit == CgroupLimit::kSwapMax) value = std::to_string(*memory + out.requested.value);
    if (out.requested.limit == CgroupLimit::kCpuWeight)
      value = std::to_string(std::max<uint64_t>(2, out.requested.value * 1024 / 100));
    if (out.requested.limit == CgroupLimit::kIoWriteBps)
      value = std::to_string(out.requested.dev_major) + ":" + std::to_string(out.requested.dev_minor) + " " + value;
    if (out.requested.limit == CgroupLimit::kCpuMax)
      CORDON_TRY(WriteFile(JoinPath(dir, "cpu.cfs_period_us"), std::to_string(kCgroupCpuPeriodUs)));
    if (Status s = WriteFile(path, value); !s.ok()) {
      // A device the kernel does not throttle is an outcome, as in cgroup2 (sys/cgroup_limits.h).
      const int err = s.error().err;
      if (out.requested.limit != CgroupLimit::kIoWriteBps || (err != EINVAL && err != ENODEV && err != EOPNOTSUPP))
        return s.error();
      out.reason = "the kernel does not throttle this device (" + s.error().ToString() + ")";
      continue;
    }
    out.enforced = true;
    out.written = true;
    out.reason.clear();
    out.v1_file = file + " " + value;
  }
  if (self->dirs_.empty()) return std::unique_ptr<CgroupV1Placement>();
  return self;
}

std::string CgroupV1Placement::Find(const std::string& controller) const {
  for (const Dir& d : dirs_)
    if (Contains(d.controllers, controller)) return d.path;
  return "";
}

std::vector<std::string> CgroupV1Placement::paths() const {
  std::vector<std::string> out;
  for (const Dir& d : dirs_) out.push_back(d.path);
  return out;
}

Status CgroupV1Placement::Place(pid_t pid) const {
  for (const Dir& d : dirs_)
    if (Status s = WriteFile(JoinPath(d.path, "cgroup.procs"), std::to_string(pid)); !s.ok())
      return s.error().Wrap("place the command in its cgroup v1 " + d.path);
  return {};
}

CgroupV1Usage CgroupV1Placement::ReadUsage() const {
  CgroupV1Usage u;
  if (std::string m = Find("memory"); !m.empty()) {
    u.memory_current = Number(m + "/memory.usage_in_bytes");
    u.memory_peak = Number(m + "/memory.max_usage_in_bytes");
    // Unlimited reads as a huge page-rounded number.
    if (auto max = Number(m + "/memory.limit_in_bytes"); max && *max < (uint64_t{1} << 62)) u.memory_max = max;
    u.oom_kills = Keyed(m + "/memory.oom_control", "oom_kill").value_or(0);
  }
  if (std::string p = Find("pids"); !p.empty()) {
    u.pids_current = Number(p + "/pids.current");
    u.pids_peak = Number(p + "/pids.peak");
    u.pids_max = Number(p + "/pids.max");
    u.pids_refused = Keyed(p + "/pids.events", "max").value_or(0);
  }
  return u;
}

Status CgroupV1Placement::Remove(int timeout_ms) {
  if (removed_) return {};
  removed_ = true;
  std::string failed;
  for (const Dir& d : dirs_) {
    bool gone = false;
    int err = 0;
    for (int waited = 0; !gone; waited += 10) {
      // Only the run's own processes are in it (the run placed them; its
      // command cannot write cgroupfs): what is left is killed.
      for (pid_t pid : Procs(d.path)) (void)::kill(pid, SIGKILL);
      gone = ::rmdir(d.path.c_str()) == 0 || (err = errno) == ENOENT;
      if (gone || waited >= timeout_ms) break;
      SleepMs(10);
    }
    if (!gone) {
      errno = err;
      failed += (failed.empty() ? "" : "; ") + SysError("remove cgroup v1 " + d.path).ToString();
    }
    // The shared parent goes with the last run (EBUSY/ENOTEMPTY otherwise).
    (void)::rmdir(d.path.substr(0, d.path.rfind('/')).c_str());
  }
  if (!failed.empty()) return Error{failed};
  return {};
}

CgroupV1Placement::~CgroupV1Placement() { (void)Remove(); }

}  // namespace cordon
