#include "ops/resource_watch.h"

#include <fcntl.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "events/decoder.h"
#include "util/clock.h"
#include "util/fs.h"
#include "util/text.h"

namespace cordon::ops {
namespace {

constexpr int64_t kEventSpacingNs = 1000000000;  // one event per counter a second at most

// The value of `key` in a flat-keyed cgroup file ("oom_kill 3\n...").
std::optional<uint64_t> KeyedValue(const std::string& text, const char* key) {
  std::istringstream in(text);
  std::string name;
  uint64_t value = 0;
  while (in >> name >> value)
    if (name == key) return value;
  return std::nullopt;
}

// A single-value file: a number, or nullopt for "max", absent or unreadable.
std::optional<uint64_t> NumberFile(const std::string& path) {
  auto read = ReadFile(path, 4096);
  if (!read) return std::nullopt;
  const std::string& text = *read;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (end == text.c_str() || errno) return std::nullopt;
  return static_cast<uint64_t>(v);
}

std::string Bytes(uint64_t b) {
  char buf[32];
  if (b >= (uint64_t{1} << 30))
    std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(b) / (1 << 30));
  else if (b >= (uint64_t{1} << 20))
    std::snprintf(buf, sizeof buf, "%llu MiB", static_cast<unsigned long long>(b >> 20));
  else
    std::snprintf(buf, sizeof buf, "%llu KiB", static_cast<unsigned long long>(b >> 10));
  return buf;
}

}  // namespace

ResourceUsage ReadResourceUsage(const std::string& dir) {
  ResourceUsage u;
  u.memory_current = NumberFile(dir + "/memory.current");
  u.memory_peak = NumberFile(dir + "/memory.peak");
  u.memory_max = NumberFile(dir + "/memory.max");
  u.pids_current = NumberFile(dir + "/pids.current");
  u.pids_peak = NumberFile(dir + "/pids.peak");
  u.pids_max = NumberFile(dir + "/pids.max");
  if (auto stat = ReadFile(dir + "/cpu.stat", 4096)) {
    u.cpu_usec = KeyedValue(*stat, "usage_usec");
    u.cpu_throttled_usec = KeyedValue(*stat, "throttled_usec");  // with the cpu controller only
  }
  return u;
}

namespace {
std::string Seconds(uint64_t usec) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(usec) / 1e6);
  return buf;
}
}  // namespace

std::string ResourceUsage::DescribeCurrent() const {
  std::vector<std::string> parts;
  if (memory_current)
    parts.push_back("memory " + Bytes(*memory_current) + (memory_peak ? " (peak " + Bytes(*memory_peak) + ")" : "") +
                    (memory_max ? " of " + Bytes(*memory_max) : ""));
  if (pids_current)
    parts.push_back("pids " + std::to_string(*pids_current) + (pids_max ? " of " + std::to_string(*pids_max) : ""));
  if (cpu_usec)
    parts.push_back("cpu " + Seconds(*cpu_usec) +
                    (cpu_throttled_usec && *cpu_throttled_usec ? " (throttled " + Seconds(*cpu_throttled_usec) + ")" : ""));
  return JoinStrings(parts, ", ");
}

std::string ResourceUsage::Json() const {
  auto group = [](std::initializer_list<std::pair<const char*, const std::optional<uint64_t>*>> members) {
    std::string g;
    for (const auto& [name, v] : members)
      if (*v) g += std::string(g.empty() ? "" : ",") + "\"" + name + "\":" + std::to_string(**v);
    return g;
  };
  std::string out;
  auto add = [&](const char* name, const std::string& g) {
    if (!g.empty()) out += std::string(out.empty() ? "" : ",") + "\"" + name + "\":{" + g + "}";
  };
  add("memory", group({{"current", &memory_current}, {"peak", &memory_peak}, {"limit", &memory_max}}));
  add("pids", group({{"current", &pids_current}, {"peak", &pids_peak}, {"limit", &pids_max}}));
  add("cpu", group({{"usageUsec", &cpu_usec}, {"throttledUsec", &cpu_throttled_usec}}));
  return "{" + out + "}";
}

std::string ResourceUsage::Describe() const {
  std::string out;
  auto add = [&](const std::string& part) { out += (out.empty() ? "peak " : ", ") + part; };
  if (memory_peak) add(Bytes(*memory_peak) + (memory_max ? " of " + Bytes(*memory_max) : std::string()));
  if (pids_peak) add(std::to_string(*pids_peak) + (pids_max ? " of " + std::to_string(*pids_max) : std::string()) + " pids");
  if (cpu_usec) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f s CPU", static_cast<double>(*cpu_usec) / 1e6);
    if (out.empty()) out = buf; else out += std::string(", ") + buf;
  }
  return out;
}

std::unique_ptr<ResourceWatch> ResourceWatch::Open(const std::string& dir, ResourceWatchOptions options) {
  std::unique_ptr<ResourceWatch> w(new ResourceWatch(dir));
  w->options_ = options;
  w->shared_inotify_ = options.shared_inotify_fd;
  if (w->shared_inotify_ < 0) {
    w->inotify_ = UniqueFd(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
    if (!w->inotify_.valid()) w->problem_ = std::string("inotify_init1: ") + std::strerror(errno);
  }
  const int instance = w->shared_inotify_ >= 0 ? w->shared_inotify_ : w->inotify_.get();
  bool any = false;
  for (const char* file : {"memory.events", "pids.events"}) {
    const std::string path = dir + "/" + file;
    if (::access(path.c_str(), F_OK) != 0) continue;  // no such controller here
    const int wd = instance < 0 ? -1 : ::inotify_add_watch(instance, path.c_str(), IN_MODIFY);
    if (wd < 0) {  // its counters are still read: at the end, and with the others'
      if (instance >= 0 && w->problem_.empty())
        w->problem_ = std::string("inotify_add_watch ") + file + ": " + std::strerror(errno);
    } else {
      if (w->shared_inotify_ >= 0) w->wds_.push_back(wd);
      any = true;
    }
    if (std::strcmp(file, "memory.events") == 0) {
      w->counters_.push_back({file, "oom_kill", "memory", "memory.max"});
      w->counters_.push_back({file, "max", "memory", "memory.max"});
      w->counters_.push_back({file, "high", "memory", "memory.high"});
    } else {
      w->counters_.push_back({file, "max", "pids", "pids.max"});
    }
  }
  if (!any) w->inotify_.Reset();
  // A cpu quota ("max 100000": none): its throttling is watched.
  if (NumberFile(dir + "/cpu.max")) {
    w->counters_.push_back({"cpu.stat", "nr_throttled", "cpu", "cpu.max"});
    // PSI: a task throttled by cpu.max is runnable and not running, which the
    // cgroup's cpu.pressure counts as "some" stall. The trigger wakes at most
    // once per window; without PSI (absent, or psi=0) cpu.stat is read on the
    // other notifications and at the end.
    UniqueFd pressure(::open((dir + "/cpu.pressure").c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC));
    static const char kTrigger[] = "some 100000 1000000";  // 100 ms stalled within 1 s
    if (pressure.valid() && ::write(pressure.get(), kTrigger, sizeof kTrigger) > 0) w->pressure_ = std::move(pressure);
  }
  // The OOM victim recorder (one per process), loaded before any kill it
  // should name, where kills are counted; and this cgroup's id, for a
  // victim taken after the cgroup is gone.
  if (w->oom_kills_watched()) (void)OomVictimRecorder();
  w->victim_cgroups_ = CgroupSubtreeIds(dir);
  w->victims_matched_ns_ = NowNs(CLOCK_BOOTTIME);  // victims marked before the watch: not its kills
  w->Read();
  for (auto& c : w->counters_) c.reported = c.seen;
  if (w->options_.warn_at_percent) (void)w->CheckWarnAt();  // above already: no event until it falls back below
  return w;
}

ResourceWatch::~ResourceWatch() {
  for (int wd : wds_) ::inotify_rm_watch(shared_inotify_, wd);  // gone with the cgroup already: EINVAL
}

bool ResourceWatch::Due(int64_t now) const {
  for (const auto& c : counters_)
    if (c.seen != c.reported && now - c.last_event_ns >= kEventSpacingNs) return true;
  return false;
}

void ResourceWatch::Covered(const cordon::v1::AuditEvent& e) {
  if (!e.has_resource()) return;
  if (e.resource().event() == "warn") {  // the agent's warnAt crossing (an egress warn is the kernel's: not ours)
    if (e.resource().name() == "memory") memory_above_ = true;
    if (e.resource().name() == "pids") pids_above_ = true;
    return;
  }
  for (auto& c : counters_)
    if (e.resource().name() == c.resource && e.resource().event() == c.key) {
      c.reported += e.resource().count();
      if (c.seen < c.reported) c.seen = c.reported;
    }
}

std::vector<cordon::v1::AuditEvent> ResourceWatch::CheckWarnAt() {
  std::vector<cordon::v1::AuditEvent> out;
  if (!options_.warn_at_percent) return out;
  const uint64_t percent = *options_.warn_at_percent;
  struct Share {
    const char* resource;
    const char* current_file;
    const char* max_file;
    bool* above;
  };
  for (const Share& s : {Share{"memory", "memory.current", "memory.max", &memory_above_},
                         Share{"pids", "pids.current", "pids.max", &pids_above_}}) {
    std::optional<uint64_t> limit = NumberFile(dir_ + "/" + s.max_file);
    if (!limit || *limit == 0) continue;  // no limit ("max"), or no such controller
    std::optional<uint64_t> current = NumberFile(dir_ + "/" + s.current_file);
    if (!current) continue;
    // current >= percent% of limit, without overflow for byte counts
    const bool above = static_cast<long double>(*current) * 100 >= static_cast<long double>(*limit) * percent;
    const bool crossed = above && !*s.above;
    *s.above = above;
    if (!crossed) continue;
    const bool memory = std::strcmp(s.resource, "memory") == 0;
    cordon::v1::AuditEvent e;
    SetTimestamp(RealNs(), e.mutable_time());
    e.set_kind(std::string("resource.") + s.resource);
    e.set_verdict("detected");
    e.set_enforcement("kernel-cgroup");
    e.set_reason(std::string(s.current_file) + " " + (memory ? Bytes(*current) : std::to_string(*current)) +
                 " crossed warnAt " + std::to_string(percent) + "% of " + s.max_file + " " +
                 (memory ? Bytes(*limit) : std::to_string(*limit)));
    auto* r = e.mutable_resource();
    r->set_name(s.resource);
    r->set_event("warn");
    r->set_count(1);
    r->set_limit(*limit);
    r->set_value(*current);
    out.push_back(std::move(e));
  }
  return out;
}

bool ResourceWatch::Notified() {
  bool any = shared_notified_;
  shared_notified_ = false;
  char buf[4096];
  if (inotify_.valid())
    while (::read(inotify_.get(), buf, sizeof buf) > 0) any = true;
  return any;
}

void ResourceWatch::Read() {
  // Each file once, and only the ones some counter is of.
  std::vector<std::pair<const char*, std::optional<std::string>>> files;
  for (auto& c : counters_) {
    auto it =
        std::find_if(files.begin(), files.end(), [&](const auto& f) { return std::strcmp(f.first, c.file) == 0; });
    if (it == files.end()) {
      auto read = ReadFile(dir_ + "/" + c.file, 4096);
      files.emplace_back(c.file, read ? std::optional<std::string>(*read) : std::nullopt);
      it = std::prev(files.end());
    }
    if (!it->second) continue;  // the cgroup is gone: keep what was read
    if (auto v = KeyedValue(*it->second, c.key); v && *v > c.seen) c.seen = *v;
  }
  read_boot_ns_ = NowNs(CLOCK_BOOTTIME);  // every kill counted in what was read was counted before this
}

bool ResourceWatch::oom_kills_watched() const {
  return std::any_of(counters_.begin(), counters_.end(),
                     [](const auto& c) { return std::strcmp(c.key, "oom_kill") == 0; });
}

uint64_t ResourceWatch::oom_kills() const {
  for (const auto& c : counters_)
    if (std::strcmp(c.key, "oom_kill") == 0) return c.seen;
  return 0;
}

std::vector<cordon::v1::AuditEvent> ResourceWatch::Poll(int64_t now, bool final) {
  std::vector<cordon::v1::AuditEvent> out;
  // The files are read only when the kernel said they changed, at the end,
  // or when a held-back rise is due: not on every turn of the caller's loop.
  const bool due = Due(now);
  const bool pressure = pressure_notified_;
  pressure_notified_ = false;
  const bool notified = Notified() || pressure;
  if (notified || final)
    Read();
  else if (!due) return out;
  if (notified && !final) out = CheckWarnAt();
  for (auto& c : counters_) {
    if (c.seen == c.reported) continue;
    if (!final && c.last_event_ns && now - c.last_event_ns < kEventSpacingNs) continue;
    const uint64_t count = c.seen - c.reported;
    c.reported = c.seen;
    c.last_event_ns = now;
    const std::string key = c.key, resource = c.resource;
    std::optional<uint64_t> limit = NumberFile(dir_ + "/" + c.limit_file);
    std::optional<uint64_t> value;
    if (resource == "cpu") {
      if (auto stat = ReadFile(dir_ + "/cpu.stat", 4096)) value = KeyedValue(*stat, "throttled_usec");
    } else {
      value = NumberFile(dir_ + "/" + (resource == "memory" ? "memory.peak" : "pids.current"));
    }
    cordon::v1::AuditEvent e;
    SetTimestamp(RealNs(), e.mutable_time());
    e.set_kind("resource." + resource);
    e.set_enforcement("kernel-cgroup");
    const std::string times = count == 1 ? "once" : std::to_string(count) + " times";
    const std::string limit_text =
        std::string(c.limit_file) + " " +
        (limit ? (resource == "memory" ? Bytes(*limit) : std::to_string(*limit)) : std::string("max"));
    if (resource == "cpu") {
      // cpu.max holds "QUOTA PERIOD" (microseconds); the limit is the quota.
      e.set_verdict("detected");
      e.set_reason("the sandbox was throttled at its cpu.max quota " +
                   (limit ? std::to_string(*limit) + " us per period" : std::string("(now max)")) + " (" + times +
                   (value ? ", " + Seconds(*value) + " throttled in all" : std::string()) + ")");
    } else if (resource == "pids") {
      e.set_verdict("denied");
      e.set_reason("a fork was refused at " + limit_text + " (" + times + ")");
    } else if (key == "oom_kill") {
      for (auto& killed : OomKillEvents(count, limit_text, limit, value, read_boot_ns_))
        out.push_back(std::move(killed));
      continue;
    } else if (key == "max") {
      e.set_verdict("denied");
      e.set_reason("memory use reached " + limit_text + " (" + times + "): allocations were reclaimed or failed");
    } else {
      e.set_verdict("detected");
      e.set_reason("memory use crossed " + limit_text + " (" + times + "): the sandbox is throttled");
    }
    auto* r = e.mutable_resource();
    r->set_name(resource);
    r->set_event(key);
    r->set_count(count);
    if (limit) r->set_limit(*limit);
    if (value) r->set_value(*value);
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<cordon::v1::AuditEvent> ResourceWatch::OomKillEvents(uint64_t count, const std::string& limit_text,
                                                                 std::optional<uint64_t> limit,
                                                                 std::optional<uint64_t> value, int64_t counted_by) {
  if (!counted_by) counted_by = NowNs(CLOCK_BOOTTIME);
  // The subtree now and as it was at the previous match (a child cgroup
  // removed since still matches; one generation: the set stays bounded).
  std::vector<uint64_t> ids = CgroupSubtreeIds(dir_);
  std::vector<uint64_t> now_ids = ids;
  for (uint64_t id : victim_cgroups_)
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  victim_cgroups_ = std::move(now_ids);
  for (auto& v : TakeOomVictims(ids)) {
    // Another thread of a process named already, or taken before.
    auto same = [&v](const OomVictim& p) { return p.pid == v.pid; };
    if (std::find(named_victims_.begin(), named_victims_.end(), v.pid) != named_victims_.end() ||
        std::any_of(pending_victims_.begin(), pending_victims_.end(), same))
      continue;
    pending_victims_.push_back(std::move(v));
  }
  // This interval's victims; older ones were marked without a kill counted
  // (dropped), newer ones are kills counted after the read (kept).
  std::vector<OomVictim> marked, later;
  for (auto& v : pending_victims_) {
    if (v.boot_ns > counted_by)
      later.push_back(std::move(v));
    else if (v.boot_ns > victims_matched_ns_)
      marked.push_back(std::move(v));
  }
  pending_victims_ = std::move(later);
  victims_matched_ns_ = counted_by;

  std::vector<cordon::v1::AuditEvent> out;
  auto base = [&](uint64_t n) {
    cordon::v1::AuditEvent e;
    SetTimestamp(RealNs(), e.mutable_time());
    e.set_kind("resource.memory");
    e.set_verdict("killed");
    e.set_enforcement("kernel-cgroup");
    auto* r = e.mutable_resource();
    r->set_name("memory");
    r->set_event("oom_kill");
    r->set_count(n);
    if (limit) r->set_limit(*limit);
    if (value) r->set_value(*value);
    return e;
  };
  uint64_t named = 0;
  if (marked.size() == count) {
    for (const auto& v : marked) {
      if (named == kMaxNamedOomVictims) break;
      cordon::v1::AuditEvent e = base(1);
      SetTimestamp(RealNs() - (NowNs(CLOCK_BOOTTIME) - v.boot_ns), e.mutable_time());
      const std::string comm = EscapeWorkloadBytes(v.comm);
      e.set_pid(v.pid);
      e.set_tid(v.tid);
      e.set_uid(v.uid);
      e.set_comm(comm);
      e.set_cgroup_id(v.cgroup_id);
      e.set_reason("the kernel's OOM killer killed " + comm + " (pid " + std::to_string(v.pid) +
                   ") of the sandbox at " + limit_text);
      out.push_back(std::move(e));
      named_victims_.push_back(v.pid);
      if (named_victims_.size() > 256) named_victims_.erase(named_victims_.begin());
      ++named;
    }
  }
  if (named < count) {
    const uint64_t rest = count - named;
    const std::string& why = OomVictimRecorder();
    std::string not_named;
    if (!why.empty())
      not_named = why;
    else if (named)
      not_named = "at most " + std::to_string(kMaxNamedOomVictims) + " victims are named at a time";
    else if (marked.empty())
      not_named =
          "no victim was recorded for it (killed before cordon watched, the record was lost, or marked "
          "after cordon read the count)";
    else
      not_named = std::to_string(marked.size()) + " processes were marked for " + std::to_string(count) +
                  " kills counted (the kernel also marks an exiting process without a kill): which were killed "
                  "is not certain";
    cordon::v1::AuditEvent e = base(rest);
    e.set_reason("the kernel's OOM killer killed " +
                 (rest == 1 ? std::string("a process") : std::to_string(rest) + " processes") + " of the sandbox at " +
                 limit_text + "; not named: " + not_named);
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace cordon::ops
