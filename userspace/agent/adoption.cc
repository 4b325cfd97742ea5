// The agent's sandboxes: adopting what is pinned (at start, on every rescan,
// and on request), draining each ring buffer in bounded batches, delivering
// its events, rate limiting them, and finishing a sandbox that is detached.
#include <bpf/bpf.h>
#include <dirent.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>

#include "agent/agent_impl.h"
#include "agent/log.h"
#include "inspect/retro.h"
#include "loader/sandbox.h"
#include "ops/policy_store.h"
#include "policy/parser.h"
#include "policy/resources.h"
#include "sys/bpffs.h"
#include "sys/cgroup.h"
#include "util/clock.h"
#include "util/fs.h"

namespace cordon::agent {

namespace v1 = cordon::v1;

Status Agent::Adopt(uint64_t id, const PinnedInfo& pinned) {
  auto events = OpenSandboxMap(id, "events");
  if (!events) return events.error();
  auto counters = OpenSandboxMap(id, "counters");
  if (!counters) return counters.error();
  auto sb = std::make_unique<Sandbox>();
  Sandbox* raw = sb.get();
  sb->id = id;
  sb->ctx =
      SandboxContext{id, pinned.info.name, pinned.info.policy, pinned.info.cgroup_path, pinned.info.policy_digest};
  sb->ctx.quiet = QuietOf(id, pinned.info.generation);
  sb->info_map_id = pinned.map_id;
  sb->generation = pinned.info.generation;
  sb->flags = pinned.info.flags;
  sb->suppression.Configure(config_.rate_per_second, config_.rate_burst, MonoNs());
  {
    // The directory first: if it is replaced after this, its inode differs.
    const std::string dir = SandboxPinDir(pin_root_, id);
    struct stat st;
    if (::stat(dir.c_str(), &st) == 0) {
      UniqueFd info_fd(bpf_obj_get((dir + "/info").c_str()));
      struct bpf_map_info minfo = {};
      uint32_t len = sizeof minfo;
      if (info_fd.valid() && bpf_obj_get_info_by_fd(info_fd.get(), &minfo, &len) == 0 && minfo.id == pinned.map_id) {
        sb->info_fd = std::move(info_fd);
        sb->dir_ino = st.st_ino;
      }
    }
  }
  // Counted by an agent that died before writing them: written out now.
  if (uint64_t left = sb->suppression.Resume(pending_.Claim(id), MonoNs()))
    Log("sandbox " + std::string(pinned.info.name) + ": " + std::to_string(left) +
        " suppressed events left by the previous agent");
  sb->reader = std::make_unique<EventReader>(cgroup_mount_, [this, raw](const v1::AuditEvent& e) { OnEvent(*raw, e); });
  sb->reader->SetAdmit([this, raw](const v1::AuditEvent& e) { return Admit(*raw, e); });
  sb->reader->SetDeferCommit(true);
  CORDON_TRY(sb->reader->Add(sb->ctx, std::move(*events), std::move(*counters)));
  Watch(sb->reader->epoll_fd(), Key(kSandbox, id), EPOLLIN);
  WatchResources(*sb, pinned);
  ServeNames(*sb, pinned);
  sandboxes_[id] = std::move(sb);
  problems_.erase(id);
  // What waited while nobody read, then what could not wait.
  uint64_t before = raw->reader->consumed();
  DrainAll(*raw);
  raw->backlog = raw->reader->consumed() - before;
  raw->reader->CheckLosses();
  Commit(*raw);
  if (uint64_t again = raw->reader->repeated())
    Log("sandbox " + raw->ctx.name + ": " + std::to_string(again) +
        " records read again were committed by an earlier reader: dropped by sequence number, not written twice");
  return {};
}

Status Agent::AdoptNow(uint64_t id) {
  released_.erase(id);
  if (sandboxes_.count(id)) return {};
  bool foreign = false;
  auto pinned = ReadPinnedInfo(SandboxPinDir(pin_root_, id), &foreign);
  if (!pinned) return pinned.error();
  return Adopt(id, *pinned);
}

uint64_t Agent::Finish(uint64_t id, bool ended) {
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end()) return 0;
  Sandbox& sb = *it->second;
  uint64_t before = sb.reader->consumed();
  DrainAll(sb);
  sb.reader->CheckLosses(ended);
  if (sb.suppression.suppressing()) EmitSuppressed(sb, true, MonoNs());
  Commit(sb);
  uint64_t drained = sb.reader->consumed() - before;
  // The last rises (a `cordon run` may have removed the cgroup already: the
  // ones read before are reported).
  if (sb.resources) PollResources(sb, /*final=*/true);
  if (sb.names) DeliverNames(sb, /*final=*/true);
  FlushDeliveries();
  ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, sb.reader->epoll_fd(), nullptr);
  pending_.Release(id);
  sandboxes_.erase(it);
  return drained;
}

void Agent::Rescan() {
  // The listing with each directory's inode (readdir has it): an adopted
  // sandbox whose directory is the same one is read through the info map fd
  // we hold, one system call, without reopening its pins.
  std::vector<std::pair<std::string, ino_t>> entries;
  {
    DIR* d = ::opendir(pin_root_.c_str());
    if (!d) return;
    while (struct dirent* ent = ::readdir(d)) entries.emplace_back(ent->d_name, ent->d_ino);
    ::closedir(d);
  }
  std::set<uint64_t> present;
  for (const auto& [name, dir_ino] : entries) {
    if (!IsNumber(name)) continue;  // staging-*, ".", ".."
    uint64_t id = std::strtoull(name.c_str(), nullptr, 10);
    present.insert(id);
    if (released_.count(id)) continue;
    auto it = sandboxes_.find(id);
    if (it != sandboxes_.end() && it->second->info_fd.valid()) {
      Sandbox& sb = *it->second;
      if (dir_ino == sb.dir_ino) {
        PinnedInfo same;
        same.map_id = sb.info_map_id;
        if (ReadHeldInfo(sb.info_fd.get(), &same)) {
          Refresh(sb, same);
          continue;
        }
      }
    }
    bool foreign = false;
    auto pinned = ReadPinnedInfo(SandboxPinDir(pin_root_, id), &foreign);
    if (!pinned) {
      // Half-published or being removed: look again next time; foreign
      // state is never read.
      if (foreign && !problems_.count(id)) {
        Log("not reading sandbox " + std::to_string(id) + ": " + pinned.error().ToString());
        problems_[id] = pinned.error().ToString();
      }
      continue;
    }
    if (it != sandboxes_.end()) {
      Sandbox& sb = *it->second;
      if (sb.info_map_id != pinned->map_id) {
        // Detached and attached again between two scans: finish the old
        // instance (its maps live while we hold them), adopt the new one.
        Finish(id, /*ended=*/true);
      } else {
        Refresh(sb, *pinned);
        continue;
      }
    }
    if (!config_.InScope(pinned->info.cgroup_path, pinned->info.name)) continue;
    if (RunStillReading(pinned->info)) continue;
    Status adopted = Adopt(id, *pinned);
    if (!adopted.ok() && !problems_.count(id)) {
      Log("cannot read sandbox " + std::to_string(id) + ": " + adopted.error().ToString());
      problems_[id] = adopted.error().ToString();
    }
  }
  // Detached without us: drain what is left (we still hold the ring buffer).
  std::vector<uint64_t> gone;
  for (const auto& [id, sb] : sandboxes_)
    if (!present.count(id)) gone.push_back(id);
  for (uint64_t id : gone) Finish(id, /*ended=*/true);
  for (auto& [id, sb] : sandboxes_) CheckContainment(*sb);
  for (auto it = released_.begin(); it != released_.end();)
    it = present.count(*it) ? std::next(it) : released_.erase(it);
  for (auto it = problems_.begin(); it != problems_.end();)
    it = present.count(it->first) ? std::next(it) : problems_.erase(it);
}

void Agent::Refresh(Sandbox& sb, const PinnedInfo& pinned) {
  sb.flags = pinned.info.flags;
  if (sb.generation == pinned.info.generation && sb.ctx.name == pinned.info.name &&
      sb.ctx.policy == pinned.info.policy)
    return;
  if (sb.generation != pinned.info.generation) {
    // The new policy's spec.quiet patterns for what happened from its
    // replacement on; what waits from before is judged by the old ones.
    sb.ctx.Replaced(QuietOf(sb.id, pinned.info.generation), static_cast<int64_t>(pinned.info.updated_at_ns),
                    pinned.info.policy_digest);
    sb.reader->Update(sb.ctx);
  }
  DrainAll(sb);
  const bool replaced = sb.generation != pinned.info.generation;
  sb.ctx.name = pinned.info.name;
  sb.ctx.policy = pinned.info.policy;
  sb.generation = pinned.info.generation;
  sb.reader->Update(sb.ctx);
  if (replaced) {
    // The new policy's limits: what rose under the old one first.
    if (sb.resources) PollResources(sb, /*final=*/true);
    WatchResources(sb, pinned);
    ServeNames(sb, pinned);
  }
}

namespace {

// spec.resources of the policy in force, from its text kept by digest
// (ops/policy_store.h: every attach, replacement and run keeps it). False
// when it is not there (a sandbox of a cordon before the store): its
// counters are still watched, wallTime and warnAt are not.
bool PolicyResources(const std::string& digest, policy::ResourceLimits* limits, bool* contain) {
  auto text = ops::KeptPolicyText(digest);
  if (!text) return false;
  policy::ParsedPolicy parsed;
  policy::Diagnostics diags;
  if (!policy::ParsePolicyText(*text, digest, &parsed, &diags)) return false;
  policy::CompileResources(parsed, limits, &diags);
  *contain = parsed.proto.spec().on_violation() == "contain";
  return true;
}

}  // namespace

void Agent::WatchResources(Sandbox& sb, const PinnedInfo& pinned) {
  sb.resources.reset();  // its fds leave the epoll set as they close
  sb.wall_deadline_ns = 0;
  sb.egress_cut = false;  // a policy put in force: its own budget's max record cuts again
  if (sb.ctx.cgroup_path.empty()) return;
  policy::ResourceLimits limits;
  bool contain = false;
  const bool known = PolicyResources(sb.ctx.policy_digest, &limits, &contain);
  ops::ResourceWatchOptions options;
  if (known) options.warn_at_percent = limits.warn_at_percent;
  options.shared_inotify_fd = inotify_fd_.get();
  auto watch = ops::ResourceWatch::Open(JoinPath(cgroup_mount_, sb.ctx.cgroup_path), options);
  for (int wd : watch->wds()) inotify_owner_[wd] = sb.id;
  if (watch->fd() >= 0) Watch(watch->fd(), Key(kResources, sb.id), EPOLLIN);  // no shared instance
  if (!watch->problem().empty())
    Log("sandbox " + sb.ctx.name + " (cgroup id " + std::to_string(sb.id) +
        "): its resource events are read only at its end and with its other notifications: " + watch->problem());
  if (watch->pressure_fd() >= 0) Watch(watch->pressure_fd(), Key(kPressure, sb.id), EPOLLPRI);
  if (!watch->wds().empty() || watch->fd() >= 0 || !watch->problem().empty() || watch->pressure_fd() >= 0 ||
      watch->watches_warn_at())
    sb.resources = std::move(watch);
  // wallTime of an attached sandbox (a run's own clock ends a run's command),
  // from the moment its policy was put in force: an agent started later, or
  // a replacement by the same policy text, does not restart it.
  if (known && limits.wall_time_seconds && !(pinned.info.flags & CORDON_INFO_F_EPHEMERAL)) {
    sb.wall_time_s = *limits.wall_time_seconds;
    const uint64_t in_force = pinned.info.updated_at_ns    ? pinned.info.updated_at_ns
                              : pinned.info.attached_at_ns ? pinned.info.attached_at_ns
                                                           : static_cast<uint64_t>(RealNs());
    sb.wall_deadline_ns = static_cast<int64_t>(in_force) + static_cast<int64_t>(sb.wall_time_s) * 1000000000LL;
    sb.contain_at_wall_time = contain;
  }
}

void Agent::ServeNames(Sandbox& sb, const PinnedInfo& pinned) {
  if (sb.names) {
    DeliverNames(sb, /*final=*/true);
    sb.names.reset();
  }
  if (pinned.info.flags & CORDON_INFO_F_EPHEMERAL) return;  // a cordon run serves its own
  auto text = ops::KeptPolicyText(sb.ctx.policy_digest);
  // Without "host" in its text a policy has no name rule: most are not compiled here.
  if (!text || text->find("host") == std::string::npos) return;
  policy::CompiledPolicy compiled;
  std::string error;
  const std::string what = "sandbox " + sb.ctx.name + " (cgroup id " + std::to_string(sb.id) + ")";
  if (!ops::CompilePolicyText(*text, sb.ctx.policy_digest, "", &compiled, &error)) {
    Log(what + ": its kept policy does not compile here, its name rules are NOT served: " + error);
    return;
  }
  if (!ops::HasNameRules(compiled)) return;
  auto names = ops::NameService::Start(sb.id, compiled);
  if (!names) {
    Log(what + ": its name rules are NOT served (its DNS is refused): " + names.error().ToString());
    return;
  }
  Watch((*names)->fd(), Key(kNames, sb.id), EPOLLIN);
  Log(what + ": name rules served by cordon's resolver on " + (*names)->listen4() +
      ((*names)->port6() ? " and [::1]:" + std::to_string((*names)->port6()) : std::string()));
  for (const auto& note : (*names)->notes()) Log(what + ": " + note);
  sb.names = std::move(*names);
}

void Agent::DeliverNames(Sandbox& sb, bool final) {
  if (final) sb.names->Stop();
  for (auto& e : sb.names->TakeEvents()) DeliverOwn(sb, std::move(e));
}

void Agent::DeliverOwn(Sandbox& sb, v1::AuditEvent e) {
  e.set_sandbox(sb.ctx.name);
  e.set_policy(sb.ctx.policy);
  e.set_policy_digest(sb.ctx.policy_digest);
  e.set_cgroup_path(sb.ctx.cgroup_path);
  e.set_cgroup_id(sb.id);
  e.set_sandbox_cgroup_id(sb.id);
  if (Admit(sb, e)) OnEvent(sb, e);
}

// spec.resources.egressBytes reached (the kernel's max record): from now on
// the kernel drops every packet of the sandbox but TCP resets; destroying its
// connections (sock_diag, as containment does) tells the peers and the
// workload at once instead of at their timeouts. Once per policy put in
// force, on the containment worker (a snapshot of a large sandbox takes a
// while); a `cordon run`'s sandbox is left to the run, which does the same.
void Agent::CutEgress(Sandbox& sb) {
  if (sb.egress_cut || (sb.flags & CORDON_INFO_F_EPHEMERAL) || sb.ctx.cgroup_path.empty()) return;
  sb.egress_cut = true;
  ContainmentHandoff::Done done;
  done.id = sb.id;
  done.egress_cut = true;
  contain_worker_->Post([handoff = handoff_, dir = JoinPath(cgroup_mount_, sb.ctx.cgroup_path), ctx = sb.ctx,
                         done = std::move(done)](const ops::CredentialEvents&) mutable {
    done.out.name = ctx.name;
    done.out.sandbox_id = done.id;
    auto cgroup = ResolveCgroup(dir);
    if (cgroup && cgroup->id != done.id)  // detached, and another cgroup made at its path meanwhile
      cgroup =
          Error{"the sandbox's cgroup " + dir + " was replaced (now cgroup id " + std::to_string(cgroup->id) + ")"};
    auto snap = cgroup ? SnapshotAndDisconnect(*cgroup, ctx, "spec.resources.egressBytes reached",
                                               "connection of a sandbox over its egress budget")
                       : Result<ContainmentSnapshot>(cgroup.error());
    if (snap)
      done.out.events = std::move(snap->events);
    else
      done.out.error = snap.error().ToString();
    std::lock_guard<std::mutex> lock(handoff->mu);
    handoff->done.push_back(std::move(done));
  });
}

void Agent::ReadResourceNotifications() {
  alignas(struct inotify_event) char buf[4096];
  std::vector<uint64_t> notified;
  for (;;) {
    const ssize_t n = ::read(inotify_fd_.get(), buf, sizeof buf);
    if (n <= 0) break;  // EAGAIN: all read (an overflow is IN_Q_OVERFLOW, below)
    for (ssize_t at = 0; at + static_cast<ssize_t>(sizeof(struct inotify_event)) <= n;) {
      const auto* ev = reinterpret_cast<const struct inotify_event*>(buf + at);
      at += static_cast<ssize_t>(sizeof(struct inotify_event) + ev->len);
      if (ev->mask & IN_Q_OVERFLOW) {  // notifications lost: every sandbox reads its files
        for (auto& [id, sb] : sandboxes_)
          if (sb->resources) sb->resources->MarkNotified(), notified.push_back(id);
        continue;
      }
      auto owner = inotify_owner_.find(ev->wd);
      if (owner == inotify_owner_.end()) continue;
      if (ev->mask & IN_IGNORED) {  // removed (its watch ended, or its cgroup went)
        inotify_owner_.erase(owner);
        continue;
      }
      auto it = sandboxes_.find(owner->second);
      if (it == sandboxes_.end() || !it->second->resources) continue;
      const auto& wds = it->second->resources->wds();
      if (std::find(wds.begin(), wds.end(), ev->wd) == wds.end()) continue;  // an earlier watch's
      it->second->resources->MarkNotified();
      notified.push_back(owner->second);
    }
  }
  std::sort(notified.begin(), notified.end());
  notified.erase(std::unique(notified.begin(), notified.end()), notified.end());
  for (uint64_t id : notified)
    if (auto it = sandboxes_.find(id); it != sandboxes_.end() && it->second->resources)
      PollResources(*it->second, false);
}

void Agent::PollResources(Sandbox& sb, bool final) {
  for (auto& e : sb.resources->Poll(MonoNs(), final)) DeliverOwn(sb, std::move(e));
}

void Agent::CheckWallTime(Sandbox& sb, int64_t now_real_ns) {
  if (!sb.wall_deadline_ns || now_real_ns < sb.wall_deadline_ns) return;
  sb.wall_deadline_ns = 0;  // once per policy put in force
  v1::AuditEvent e;
  SetTimestamp(RealNs(), e.mutable_time());
  e.set_kind("resource.walltime");
  e.set_verdict("detected");
  e.set_enforcement("agent");
  const std::string limit = std::to_string(sb.wall_time_s) + " s";
  e.set_reason("wallTime " + limit + " reached since the policy was put in force" +
               (sb.contain_at_wall_time ? ": the agent contains the sandbox (onViolation: contain)"
                                        : ": reported only (onViolation is not contain)"));
  auto* r = e.mutable_resource();
  r->set_name("walltime");
  r->set_event("expired");
  r->set_count(1);
  r->set_limit(sb.wall_time_s);
  r->set_value(sb.wall_time_s);
  DeliverOwn(sb, std::move(e));
  FlushDeliveries();
  if (!sb.contain_at_wall_time) return;
  ops::ContainRequest request = AgentContainRequest(sb.id, "the agent (pid " + std::to_string(::getpid()) + ")");
  request.reason = "wallTime " + limit + " reached";
  request.lock_wait_ms = 0;
  ContainmentHandoff::Done done;
  done.id = sb.id;
  done.by_wall_time = true;
  ContainOnWorker(std::move(request), std::move(done));
}

std::shared_ptr<const std::vector<policy::QuietPattern>> Agent::QuietOf(uint64_t id, uint32_t generation) {
  auto patterns = ReadSandboxQuiet(SandboxPinDir(pin_root_, id), generation);
  if (patterns) return *patterns;
  Log("sandbox " + std::to_string(id) +
      ": its spec.quiet patterns cannot be read (its events are not marked quiet): " + patterns.error().ToString());
  return nullptr;
}

void Agent::DrainSandbox(Sandbox& sb, int budget) {
  auto n = sb.reader->Drain(budget);
  sb.more = n && *n >= budget;
  Commit(sb);
}

void Agent::DrainAll(Sandbox& sb) {
  do DrainSandbox(sb, kDrainBudget);
  while (sb.more);
}

void Agent::Commit(Sandbox& sb) {
  // What was consumed is in the sinks (or counted as failed there) before
  // the ring buffer may reuse its space: a kill -9 before this point makes
  // the next agent read those records again, never lose them.
  FlushDeliveries();
  sb.reader->Commit();
}

bool Agent::Admit(Sandbox& sb, const v1::AuditEvent& event) {
  consumed_++;
  // resource.* records are never rate limited: each source gives at most one
  // a second (the watch's spacing) or one per crossing (the kernel's egress
  // records), and a flood of violations must not hold back the one record
  // that says a limit was reached (or the egress cut that follows it).
  if (event.kind().rfind("resource.", 0) == 0) return true;
  const uint64_t occurrences = Occurrences(event);
  if (sb.suppression.Admit(MonoNs(), event.quiet(), occurrences)) return true;
  suppressed_ += occurrences;
  return false;
}

void Agent::OnEvent(Sandbox& sb, const v1::AuditEvent& event) {
  if (auto named = ops::WithGrantHost(event)) return OnEvent(sb, *named);  // a name rule's address: its name
  if (event.kind() == "resource.egress" && event.resource().event() == "max") CutEgress(sb);
  if (event.kind() == "loss") {
    sb.lost += event.loss().dropped();
    lost_ += event.loss().dropped();
  } else {
    // Counted as the occurrences the record stands for (the kernel's
    // repeats too): delivered + suppressed + lost = the kernel's counters.
    const uint64_t occurrences = Occurrences(event);
    sb.delivered += occurrences;
    delivered_ += occurrences;
    if (event.quiet()) sb.quiet += occurrences, quiet_ += occurrences;
  }
  Deliver(event);
}

void Agent::EmitSuppressed(Sandbox& sb, bool final, int64_t now) {
  Deliver(SuppressedRecord(sb.ctx, sb.suppression.pending(), config_.rate_per_second, config_.rate_burst, final,
                           RealNs()));
  sb.suppression.Recorded(final, now);  // the count is cleared after the sinks have it
}

void Agent::Deliver(const v1::AuditEvent& event) {
  sinks_.Write(event);
  tails_->Broadcast(event);
}

void Agent::FlushDeliveries() {
  sinks_.FlushBatches();
  tails_->FlushAll();
}

}  // namespace cordon::agent
