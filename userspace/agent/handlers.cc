// The agent's control requests (userspace/proto/control.proto): status,
// tail, attach and update, detach and release. Each replies on the client
// that asked; what they deliver goes to the sinks and tails like any event.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "abi/cordon_common.h"
#include "agent/agent_impl.h"
#include "agent/clock.h"
#include "agent/log.h"
#include "inspect/retro.h"
#include "loader/kernel_features.h"
#include "loader/sandbox.h"
#include "policy/parser.h"
#include "sys/bpffs.h"
#include "sys/cgroup.h"
#include "util/fs.h"

namespace cordon::agent {

namespace v1 = cordon::v1;

void Agent::Handle(Client& c, const std::string& payload) {
  v1::Request req;
  if (!req.ParseFromString(payload)) {
    // Any root client can send these in a loop: rate-limited, and never the
    // payload itself.
    static LogLimiter malformed;
    malformed.Log("malformed control request from pid " + std::to_string(c.pid) + " (" +
                  std::to_string(payload.size()) + " bytes) refused");
    v1::Response r;
    r.set_error("malformed request");
    tails_->Reply(c, r);
    return;
  }
  switch (req.body_case()) {
    case v1::Request::kStatus:
      return HandleStatus(c);
    case v1::Request::kTail:
      return HandleTail(c, req.tail());
    case v1::Request::kAttach: {
      const auto& a = req.attach();
      return HandleAttach(c, a.cgroup(), a.policy_text(), a.policy_file(), a.mode(), a.name(), a.allow_degraded(),
                          false);
    }
    case v1::Request::kUpdate: {
      const auto& u = req.update();
      auto info = GetSandbox(u.sandbox_id());
      if (!info) {
        v1::Response r;
        r.set_error(info.error().ToString());
        return tails_->Reply(c, r);
      }
      return HandleAttach(c, JoinPath(cgroup_mount_, info->cgroup_path), u.policy_text(), u.policy_file(), u.mode(), "", u.allow_degraded(),
                          true);
    }
    case v1::Request::kDetach:
      return HandleDrain(c, req.detach().sandbox_id(), true, false);
    case v1::Request::kRelease:
      return HandleDrain(c, req.release().sandbox_id(), req.release().detach(), true);
    case v1::Request::BODY_NOT_SET:
      break;
  }
  v1::Response r;
  r.set_error("unknown request (is the agent older than this cordon?)");
  tails_->Reply(c, r);
}

void Agent::HandleStatus(Client& c) {
  v1::Response r;
  auto* s = r.mutable_status();
  s->set_pid(static_cast<uint32_t>(::getpid()));
  s->set_version(CORDON_VERSION);
  s->set_started_unix_ns(started_real_ns_);
  s->set_socket(config_.socket);
  s->set_config_file(config_.file);
  s->set_layout_version(CORDON_LAYOUT_VERSION);
  s->set_rate_limit_per_second(static_cast<double>(config_.rate_per_second));
  s->set_rate_limit_burst(config_.rate_burst);
  s->set_metrics_listen(metrics_ ? metrics_address_ : "");
  for (const auto& slot : sinks_.slots()) {
    auto* k = s->add_sinks();
    k->set_name(slot.config.Name());
    k->set_written(slot.written);
    k->set_failed(slot.failed);
    k->set_last_error(slot.failed ? slot.last_error : "");
  }
  for (const auto& [key, cl] : tails_->clients()) {
    if (cl->dead || !cl->tail) continue;
    auto* t = s->add_tailers();
    t->set_pid(cl->pid);
    t->set_sent(cl->sent);
    t->set_dropped(cl->dropped);
    t->set_queued(static_cast<uint32_t>(cl->event_frames));
  }
  for (const auto& [id, sb] : sandboxes_) {
    auto* a = s->add_sandboxes();
    a->set_id(id);
    a->set_name(sb->ctx.name);
    a->set_consumed(sb->reader->consumed());
    a->set_delivered(sb->delivered);
    a->set_suppressed(sb->suppression.suppressed());
    a->set_lost(sb->lost);
    a->set_malformed(sb->reader->malformed());
    a->set_backlog(sb->backlog);
    a->set_suppressing(sb->suppression.suppressing());
  }
  for (const auto& [id, problem] : problems_) {
    auto* a = s->add_sandboxes();
    a->set_id(id);
    a->set_problem(problem);
  }
  uint64_t malformed = 0;
  for (const auto& [id, sb] : sandboxes_) malformed += sb->reader->malformed();
  s->set_delivered(delivered_);
  s->set_suppressed(suppressed_);
  s->set_lost(lost_);
  s->set_malformed(malformed);
  s->set_sink_failures(sinks_.failures());
  s->set_tailer_drops(tails_->drops());
  s->set_tailers_disconnected(tails_->disconnected());
  tails_->Reply(c, r);
}

void Agent::HandleTail(Client& c, const v1::TailRequest& req) {
  v1::Response r;
  if (c.tail) {
    r.set_error("this connection is already a tail");
    return tails_->Reply(c, r);
  }
  if (req.adopt_sandbox_id()) {
    Status adopted = AdoptNow(req.adopt_sandbox_id());
    if (!adopted.ok()) {
      r.set_error("cannot adopt sandbox " + std::to_string(req.adopt_sandbox_id()) + ": " + adopted.error().ToString());
      return tails_->Reply(c, r);
    }
  }
  TailFilter f;
  f.sandbox_ids.assign(req.sandbox_ids().begin(), req.sandbox_ids().end());
  f.sandbox_name = req.sandbox_name();
  f.kind_prefix = req.kind_prefix();
  std::vector<UniqueFd> fds;
  if (req.since_unix_ns() > 0) {
    sinks_.FlushBatches();  // what was delivered before this request is in the files, not after them
    // The files as they are now; what comes after arrives live. Oldest
    // first: path.keep .. path.1, then path.
    std::string path = config_.AuditPath();
    if (path.empty()) {
      r.add_notes("--since: the agent has no jsonl sink, so there is nothing to replay");
    } else {
      const uint32_t keep = sinks_.KeepOf(path);
      std::vector<std::string> files;
      for (uint32_t k = keep; k >= 1; --k) files.push_back(path + "." + std::to_string(k));
      files.push_back(path);
      for (const auto& file : files) {
        UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
        if (!fd.valid()) continue;
        struct stat st;
        if (::fstat(fd.get(), &st) != 0) continue;
        auto* rf = r.mutable_tail()->add_replay();
        rf->set_path(file);
        rf->set_end_offset(static_cast<uint64_t>(st.st_size));
        fds.push_back(std::move(fd));
      }
    }
  }
  r.mutable_tail();
  tails_->Reply(c, r, std::move(fds));
  if (c.dead) return;
  tails_->StartTail(c, f);
  if (!req.follow()) {
    // What the ring buffers hold now, then the end.
    for (auto& [id, sb] : sandboxes_) {
      if (!f.sandbox_ids.empty() && std::find(f.sandbox_ids.begin(), f.sandbox_ids.end(), id) == f.sandbox_ids.end())
        continue;
      DrainAll(*sb);
      sb->reader->CheckLosses();
      Commit(*sb);
    }
    tails_->EndTail(c);
  }
}

void Agent::HandleAttach(Client& c, const std::string& cgroup_arg, const std::string& text, const std::string& file,
                         const std::string& mode, const std::string& name, bool allow_degraded, bool must_exist) {
  const int64_t t_start = MonoNs();
  v1::Response r;
  policy::CompiledPolicy compiled;
  if (text.empty()) {
    compiled = policy::DefaultPolicy();
  } else {
    policy::ParsedPolicy parsed;
    policy::Diagnostics diags;
    const std::string display = file.empty() ? "<policy>" : file;
    if (!policy::ParsePolicyText(text, display, &parsed, &diags) || !policy::Compile(parsed, &compiled, &diags)) {
      std::string msg = policy::FormatDiagnostics(diags);
      r.set_error(msg + "policy " + display + " rejected (" + std::to_string(diags.size()) + " error" +
                  (diags.size() == 1 ? "" : "s") + "); nothing attached");
      return tails_->Reply(c, r);
    }
  }
  if (mode == "enforce") compiled.mode = CORDON_MODE_ENFORCE;
  else if (mode == "audit") compiled.mode = CORDON_MODE_AUDIT;
  else if (!mode.empty()) {
    r.set_error("mode must be enforce or audit, not '" + mode + "'");
    return tails_->Reply(c, r);
  }
  auto cgroup = ResolveCgroup(cgroup_arg);
  if (!cgroup) {
    r.set_error(cgroup.error().ToString() + "; nothing attached");
    return tails_->Reply(c, r);
  }
  if (must_exist && !sandboxes_.count(cgroup->id) && !GetSandbox(cgroup->id)) {
    r.set_error("no sandbox is attached to " + cgroup->path);
    return tails_->Reply(c, r);
  }
  std::vector<std::string> missing = UndeliverableInAttach(compiled, ProbeLsm());
  if (!missing.empty() && !allow_degraded) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : "; ") + m;
    r.set_error("this kernel cannot enforce, for processes cordon attaches to: " + list +
                ". Nothing attached; allow degraded enforcement to enforce only the rest");
    return tails_->Reply(c, r);
  }
  AttachOptions options;
  options.name = name;
  const int64_t t_attach = MonoNs();
  auto result = AttachSandbox(*cgroup, compiled, options);
  const int64_t t_attached = MonoNs();
  if (!result) {
    r.set_error(result.error().ToString() + "; nothing attached");
    return tails_->Reply(c, r);
  }
  Status adopted = AdoptNow(cgroup->id);
  if (!adopted.ok()) r.add_notes("attached, but the agent cannot read its events: " + adopted.error().ToString());
  if (auto it = sandboxes_.find(cgroup->id); it != sandboxes_.end()) {
    bool foreign = false;
    if (auto pinned = ReadPinnedInfo(SandboxPinDir(pin_root_, cgroup->id), &foreign)) Refresh(*it->second, *pinned);
  }
  for (const auto& line : UnenforcedControls(compiled, ProbeLsm())) r.add_notes(line);
  if (ProbeLsm().usable())
    if (std::string note = ForeignSocketsNote(); !note.empty()) r.add_notes(note);
  for (const auto& path : result->skipped_paths) r.add_notes("profile path absent on this host, skipped: " + path);
  auto* a = r.mutable_attach();
  // Retroactive attach: its events go into the audit trail like any other.
  SandboxContext retro_ctx{result->info.id, result->info.name,
                           result->info.policy.empty() ? compiled.name : result->info.policy, result->info.cgroup_path};
  if (auto retro = ApplyRetroactively(*cgroup, compiled, retro_ctx)) {
    for (const auto& event : retro->events) {
      Deliver(event);
      *a->add_retro_events() = event;
    }
    a->set_retro_summary(RetroSummaryLine(*retro));
    a->set_retro_destroy_failed(retro->destroy_failed);
  } else {
    a->set_retro_error(retro.error().ToString());
  }
  a->set_sandbox_id(result->info.id);
  a->set_name(result->info.name);
  a->set_policy(compiled.name);
  a->set_mode(compiled.mode == CORDON_MODE_AUDIT ? "audit" : "enforce");
  a->set_replaced(result->replaced);
  a->set_swap_ns(result->swap_ns);
  a->set_cgroup(cgroup->path);
  const int64_t t_end = MonoNs();
  auto ms = [](int64_t ns) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", static_cast<double>(ns) / 1e6);
    return std::string(buf);
  };
  Log(std::string(result->replaced ? "replaced the policy of" : "attached") + " sandbox " + result->info.name +
      " (cgroup id " + std::to_string(result->info.id) + ", " + cgroup->path + ", policy " + compiled.name +
      ") for pid " + std::to_string(c.pid) + " in " + ms(t_end - t_start) + " ms: AttachSandbox " +
      ms(t_attached - t_attach) + " ms" + (result->prepared_instance ? " (prepared instance)" : "") +
      ", adopt and retroactive check " + ms(t_end - t_attached) + " ms; " + std::to_string(sandboxes_.size()) +
      " sandboxes read");
  tails_->Reply(c, r);
  if (result->prepared_instance) PrepareInstance();  // the next one
}

void Agent::HandleDrain(Client& c, uint64_t id, bool detach, bool release) {
  v1::Response r;
  auto* d = r.mutable_drain();
  d->set_sandbox_id(id);
  d->set_drained(Finish(id));
  if (release && !detach) released_.insert(id);
  if (detach) {
    Status detached = DetachSandbox(id);
    if (!detached.ok()) r.set_error(detached.error().ToString());
    else d->set_detached(true);
  }
  tails_->Reply(c, r);
}

}  // namespace cordon::agent
