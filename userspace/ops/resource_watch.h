// A sandbox cgroup's resource use (issue 17): the kernel's own counters in
// memory.events and pids.events, watched with inotify (the kernel notifies
// a change of these files; nothing polls), turned into resource.* events; and
// the peak use, read once at the end.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "abi/cordon_net.h"
#include "event.pb.h"
#include "ops/oom_victims.h"
#include "util/fd.h"

namespace cordon::ops {

// What a cgroup used (each field only where the kernel has the file).
struct ResourceUsage {
  std::optional<uint64_t> memory_current, memory_peak, memory_max;  // bytes; memory_max unset when "max"
  std::optional<uint64_t> pids_current, pids_peak, pids_max;        // pids.peak (6.12+); pids_max unset when "max"
  std::optional<uint64_t> cpu_usec, cpu_throttled_usec;             // cpu.stat usage_usec, throttled_usec
  // spec.resources.egressBytes: the sandbox's pinned egress accounting (not
  // a cgroup file; set by the agent's scrape, not by ReadResourceUsage):
  // bytes sent, bytes dropped over the limit, the limit (unset: none).
  std::optional<uint64_t> egress_bytes, egress_dropped_bytes, egress_limit;
  // "peak 212 MiB of 512 MiB, 14 of 128 pids, 3.1 s CPU" (the parts known);
  // "" when nothing is.
  std::string Describe() const;
  // Now: "memory 12 MiB (peak 30 MiB) of 512 MiB, pids 3 of 128, cpu 1.2 s
  // (throttled 0.3 s)" (the parts known); "" when nothing is.
  std::string DescribeCurrent() const;
  // {"memory":{"current":..,"peak":..,"limit":..},"pids":{..},"cpu":{"usageUsec":..,"throttledUsec":..}}
  // with the members known ({} when none).
  std::string Json() const;
};
ResourceUsage ReadResourceUsage(const std::string& cgroup_dir);

// A destination of the sandbox's egress accounting (bpf/abi/cordon_net.h):
// "127.0.0.1:80/tcp", "[::1]:53/udp", "10.0.0.1/1" (ICMP). In ops/resources.cc.
std::string EgressDestText(const cordon_egress_dest_key& key);

// One counter of an events file, e.g. memory.events "oom_kill", or of
// cpu.stat ("nr_throttled").
struct ResourceCounter {
  const char* file;      // memory.events | pids.events | cpu.stat
  const char* key;       // oom_kill, oom, max, high, nr_throttled
  const char* resource;  // memory | pids | cpu
  const char* limit_file;
  uint64_t seen = 0;      // the kernel's value when last read
  uint64_t reported = 0;  // the value the last event covered
  int64_t last_event_ns = 0;
};

// What to watch beyond the events files.
struct ResourceWatchOptions {
  // spec.resources.warnAt: one event (resource.memory / resource.pids,
  // event "warn") when memory.current or pids.current crosses this share of
  // memory.max / pids.max, again only after it fell back below. The kernel
  // notifies no share of a limit: CheckWarnAt() reads the two files, on the
  // caller's slow timer and on every notification of this sandbox.
  std::optional<uint64_t> warn_at_percent;
  // An inotify instance shared by many watches (the agent's: one per
  // sandbox would exhaust fs.inotify.max_user_instances, 128 by default, at
  // a hundred sandboxes). The watch adds its files to it and removes them
  // when destroyed; the owner reads the instance and calls MarkNotified()
  // on the watch whose descriptor (wds()) an event names. -1: the watch has
  // an instance of its own (fd()).
  int shared_inotify_fd = -1;
};

class ResourceWatch {
 public:
  // Watches <cgroup_dir>/memory.events and pids.events where they exist; the
  // counters start at their current values. fd() is -1 when neither exists.
  // With a cpu quota in cpu.max, also throttling (cpu.stat nr_throttled):
  // cpu.stat is not notified, so a PSI trigger on the cgroup's cpu.pressure
  // (some 100 ms stalled in a 1 s window) wakes pressure_fd() (POLLPRI),
  // and cpu.stat is read then, on any other notification, and at the end.
  static std::unique_ptr<ResourceWatch> Open(const std::string& cgroup_dir, ResourceWatchOptions options = {});
  ~ResourceWatch();
  ResourceWatch(const ResourceWatch&) = delete;
  ResourceWatch& operator=(const ResourceWatch&) = delete;
  int fd() const { return inotify_.get(); }  // -1 with a shared instance
  // With options.shared_inotify_fd: the watch descriptors of its files.
  const std::vector<int>& wds() const { return wds_; }
  // The shared instance named one of wds(): the next Poll reads the files.
  void MarkNotified() { shared_notified_ = true; }
  // Why a file that exists is not watched ("" when all are): the kernel
  // refused a watch (ENOSPC: fs.inotify.max_user_watches; EMFILE: instances).
  // Its counters are then read only at the end and when another watched
  // file of the sandbox changes.
  const std::string& problem() const { return problem_; }
  // -1: no cpu quota, or no PSI (cpu.stat is then read on the other
  // notifications and at the end only).
  int pressure_fd() const { return pressure_.get(); }
  // pressure_fd() was readable (POLLPRI): the next Poll reads cpu.stat.
  void OnPressure() { pressure_notified_ = true; }
  // A rise held back by the one-event-a-second spacing is due now (no
  // system call: the caller's timer asks every sandbox).
  bool Due(int64_t now_mono_ns) const;
  // A resource event about this cgroup that another watcher reported (an
  // agent, for a `cordon run` that reads through it): its count is taken as
  // reported here, so that this watch reports only the rest.
  void Covered(const cordon::v1::AuditEvent& event);
  // Reads the counters now (before the cgroup goes), without reporting.
  void Refresh() { Read(); }
  bool watches_warn_at() const { return options_.warn_at_percent.has_value(); }
  // warnAt: the crossings since the last check (see ResourceWatchOptions).
  std::vector<cordon::v1::AuditEvent> CheckWarnAt();

  // Events for the counters that rose since the last one about them: at most
  // one per counter a second (the increases in between are counted into the
  // next), every pending one when `final`. Kind resource.memory / resource.pids,
  // verdict denied (a fork refused, allocations reclaimed at memory.max) or
  // killed (oom_kill), enforcement kernel-cgroup; the caller adds the sandbox.
  std::vector<cordon::v1::AuditEvent> Poll(int64_t now_mono_ns, bool final);
  // oom_kill as last read: the OOM killer killed a process of the cgroup.
  uint64_t oom_kills() const;
  bool oom_kills_watched() const;  // memory.events is watched
  // `count` OOM kills of this sandbox at `limit_text` ("memory.max 32 MiB"):
  // one resource.memory oom_kill event per victim recorded in the cgroup's
  // subtree (bpf/oom: pid, tid, uid, comm, cgroup of the victim), and one
  // with the rest of the count and no process when fewer were recorded
  // (never a guessed name). Poll uses it; `cordon run` for the kills of its
  // v1 memory cgroup (memory.oom_control), whose processes are in this
  // watch's cgroup on the unified hierarchy.
  // The kernel counts a kill, then marks its victim; it also marks an
  // exiting process without a kill. So the victims are matched to the kills
  // counted in the same interval (marked after the previous match, up to
  // `counted_by_ns`, CLOCK_BOOTTIME; 0: now): named only when as many were
  // marked as counted (at most kMaxNamedOomVictims, the rest in the count
  // event), else the count without names and why. Older victims are dropped,
  // newer ones wait for the next rise.
  static constexpr uint64_t kMaxNamedOomVictims = 8;
  std::vector<cordon::v1::AuditEvent> OomKillEvents(uint64_t count, const std::string& limit_text,
                                                    std::optional<uint64_t> limit, std::optional<uint64_t> value,
                                                    int64_t counted_by_ns = 0);

 private:
  explicit ResourceWatch(std::string dir) : dir_(std::move(dir)) {}
  bool Notified();  // drains the inotify queue: true if a watched file changed
  void Read();
  std::string dir_;
  ResourceWatchOptions options_;
  UniqueFd inotify_;
  int shared_inotify_ = -1;
  std::vector<int> wds_;
  bool shared_notified_ = false;
  std::string problem_;
  UniqueFd pressure_;
  bool pressure_notified_ = false;
  std::vector<ResourceCounter> counters_;
  bool memory_above_ = false, pids_above_ = false;  // warnAt: above the share at the last check
  // OOM victims (OomKillEvents): the subtree's cgroup ids (now's and the
  // previous match's, so a cgroup just removed still matches), victims taken but
  // not yet counted by the kernel's oom_kill, and the pids reported (the
  // kernel marks each thread of a victim: one process is named once).
  std::vector<uint64_t> victim_cgroups_;
  std::vector<OomVictim> pending_victims_;
  std::vector<uint32_t> named_victims_;
  int64_t read_boot_ns_ = 0;        // CLOCK_BOOTTIME after the last Read
  int64_t victims_matched_ns_ = 0;  // the end of the last interval matched
};

}  // namespace cordon::ops
