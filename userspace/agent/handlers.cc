// The agent's control requests (userspace/proto/control.proto): status,
// tail, attach and update, detach and release. Each replies on the client
// that asked; what they deliver goes to the sinks and tails like any event.
#include <bpf/bpf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "abi/cordon_common.h"
#include "agent/agent_impl.h"
#include "agent/log.h"
#include "loader/sandbox.h"
#include "ops/contain.h"
#include "ops/ops.h"
#include "ops/policy_store.h"
#include "sys/bpffs.h"
#include "sys/cgroup.h"
#include "util/clock.h"
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
      ops::AttachRequest request;
      request.cgroup = a.cgroup();
      request.policy_text = a.policy_text();
      request.policy_file = a.policy_file();
      request.mode = a.mode();
      request.name = a.name();
      request.allow_degraded = a.allow_degraded();
      return CompileThenAttach(c, std::move(request), false);
    }
    case v1::Request::kUpdate: {
      const auto& u = req.update();
      auto info = GetSandbox(u.sandbox_id());
      if (!info) {
        v1::Response r;
        r.set_error(info.error().ToString());
        return tails_->Reply(c, r);
      }
      ops::AttachRequest request;
      request.cgroup = JoinPath(cgroup_mount_, info->cgroup_path);
      request.sandbox_id = u.sandbox_id();
      request.policy_text = u.policy_text();
      request.policy_file = u.policy_file();
      request.mode = u.mode();
      request.allow_degraded = u.allow_degraded();
      return CompileThenAttach(c, std::move(request), true);
    }
    case v1::Request::kDetach:
      return HandleDrain(c, req.detach().sandbox_id(), true, false);
    case v1::Request::kRelease:
      return HandleDrain(c, req.release().sandbox_id(), req.release().detach(), true);
    case v1::Request::kContain: return HandleContain(c, req.contain());
    case v1::Request::kReleaseContainment: return HandleReleaseContainment(c, req.release_containment());
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
    a->set_quiet(sb->quiet);
    a->set_suppressed(sb->suppression.suppressed());
    a->set_lost(sb->lost);
    a->set_malformed(sb->reader->malformed());
    a->set_repeated(sb->reader->repeated());
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
  s->set_quiet(quiet_);
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
  f.verdicts.assign(req.verdicts().begin(), req.verdicts().end());
  f.pid = req.pid();
  f.until_unix_ns = req.until_unix_ns();
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

void Agent::CompileThenAttach(Client& c, ops::AttachRequest request, bool must_exist) {
  tails_->SetBusy(c, true);
  auto job = std::make_shared<CompiledRequest>();
  job->client = c.key;
  job->pid = c.pid;
  job->client_gone = c.gone;
  job->held = request.policy_text.size() + request.policy_file.size() + request.cgroup.size() + request.name.size();
  job->request = std::move(request);
  job->must_exist = must_exist;
  tails_->Hold(job->held);
  compile_worker_->Post([this, job](const ops::CredentialEvents&) {
    policy::CompiledPolicy compiled;
    ops::AttachRequest& req = job->request;
    if (job->client_gone->load()) {
      // Hung up while its request waited: nobody asks for it any more (a
      // client hanging up once its compilation started is still served).
      job->dropped = true;
      std::string().swap(req.policy_text);
    } else if (ops::CompilePolicyText(req.policy_text, req.policy_file, req.mode, &compiled, &job->error)) {
      // Kept here, off the loop (the write is synced), before the attach:
      // an entry is only a text by its digest, harmless if the attach fails.
      if (cordon::Status kept = ops::KeepPolicyText(req.policy_text, compiled.digest); !kept.ok())
        req.notes.push_back("the policy's text is not kept by its digest (" + PolicyStoreDir() +
                            "): " + kept.error().ToString());
      req.compiled = std::move(compiled);
      std::string().swap(req.policy_text);  // compiled: the text goes (it may be megabytes)
    }
    {
      std::lock_guard<std::mutex> lock(compiled_mu_);
      compiled_.push_back(std::move(*job));
    }
    const uint64_t one = 1;
    (void)!::write(compile_fd_.get(), &one, sizeof one);
  });
}

void Agent::OnCompiled() {
  uint64_t n = 0;
  (void)!::read(compile_fd_.get(), &n, sizeof n);
  std::vector<CompiledRequest> done;
  {
    std::lock_guard<std::mutex> lock(compiled_mu_);
    done.swap(compiled_);
  }
  for (auto& job : done) {
    tails_->Unhold(job.held);
    if (job.dropped) {
      static LogLimiter dropped;
      dropped.Log(std::string(job.must_exist ? "update" : "attach") + " request of pid " + std::to_string(job.pid) +
                  " dropped: its client hung up before its policy was compiled");
      continue;
    }
    // A client that hung up once its policy was being compiled: its request
    // is carried out all the same (it was sent whole), unanswered.
    Client gone;
    gone.dead = true;
    Client* c = tails_->Find(job.client);
    Client& to = c ? *c : gone;
    if (!job.error.empty()) {
      v1::Response r;
      r.set_error(job.error);
      tails_->Reply(to, r);
    } else {
      HandleAttach(to, std::move(job.request), job.must_exist);
    }
    if (c) tails_->SetBusy(*c, false);  // its next requests
  }
}

void Agent::HandleAttach(Client& c, ops::AttachRequest request, bool must_exist) {
  const int64_t t_start = MonoNs();
  request.pool = &pool_;
  // spec.credentials: issued here, in the loop (the client waits for them;
  // each issue program at most 30 s), then held: refreshed, expired and
  // revoked on the credential worker.
  request.hold_credentials = true;
  request.agent_watches = true;  // wallTime and warnAt (WatchResources)
  request.names_served = true;   // its resolver (ServeNames)
  request.oidc = CredentialOidc();
  // Adopted at once, before the retroactive check and the notes.
  request.after_attach = [this](const AttachResult&, const CgroupRef& cgroup) {
    std::vector<std::string> notes;
    Status adopted = AdoptNow(cgroup.id);
    if (!adopted.ok()) notes.push_back("attached, but the agent cannot read its events: " + adopted.error().ToString());
    if (auto it = sandboxes_.find(cgroup.id); it != sandboxes_.end()) {
      bool foreign = false;
      if (auto pinned = ReadPinnedInfo(SandboxPinDir(pin_root_, cgroup.id), &foreign)) Refresh(*it->second, *pinned);
    }
    return notes;
  };
  ops::AttachOutcome out = must_exist ? ops::Update(request) : ops::Attach(request);
  v1::Response r;
  for (const auto& event : out.credential_events) {
    Deliver(event);
    *r.mutable_attach()->add_credential_events() = event;
  }
  if (!out.error.empty()) {
    r.set_error(out.error);
    return tails_->Reply(c, r);
  }
  if (out.credentials) HoldCredentials(out.sandbox_id, std::move(out.credentials));
  for (const auto& note : out.notes) r.add_notes(note);
  auto* a = r.mutable_attach();
  // Retroactive attach: its events go into the audit trail like any other.
  if (out.retro_error.empty()) {
    for (const auto& event : out.retro_events) {
      Deliver(event);
      *a->add_retro_events() = event;
    }
    a->set_retro_summary(out.retro_summary);
    a->set_retro_destroy_failed(out.retro_destroy_failed);
  } else {
    a->set_retro_error(out.retro_error);
  }
  a->set_sandbox_id(out.sandbox_id);
  a->set_name(out.name);
  a->set_policy(out.policy);
  a->set_mode(out.mode);
  a->set_replaced(out.replaced);
  a->set_swap_ns(out.swap_ns);
  a->set_cgroup(out.cgroup);
  const int64_t t_end = MonoNs();
  auto ms = [](int64_t ns) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", static_cast<double>(ns) / 1e6);
    return std::string(buf);
  };
  Log(std::string(out.replaced ? "replaced the policy of" : "attached") + " sandbox " + out.name + " (cgroup id " +
      std::to_string(out.sandbox_id) + ", " + out.cgroup + ", policy " + out.policy + ") for pid " +
      std::to_string(c.pid) + " in " + ms(t_end - t_start) + " ms: AttachSandbox " + ms(out.attach_ns) + " ms" +
      (out.prepared_instance ? " (prepared instance)" : "") + ", adopt and retroactive check " + ms(out.after_ns) +
      " ms; " + std::to_string(sandboxes_.size()) + " sandboxes read");
  tails_->Reply(c, r);
  if (out.prepared_instance) PrepareInstance();  // the next one
}

void Agent::HandleDrain(Client& c, uint64_t id, bool detach, bool release) {
  v1::Response r;
  auto* d = r.mutable_drain();
  d->set_sandbox_id(id);
  d->set_drained(Finish(id, /*ended=*/detach));
  if (release && !detach) released_.insert(id);
  if (detach) {
    // Its credentials: let go of, so that the detach removes and revokes
    // them from their state once the programs are detached; a refused
    // detach leaves them to be taken over again.
    LetGoOfCredentials(id);
    ops::DetachOutcome detached = ops::Detach({id});
    if (!detached.error.empty()) r.set_error(detached.error);
    else d->set_detached(true), d->set_removed_cgroup(detached.removed_cgroup);
    for (const auto& event : detached.credential_events) {
      Deliver(event);
      *d->add_credential_events() = event;
    }
    d->set_credential_error(detached.credential_error);
    for (const auto& note : detached.limit_notes) d->add_limit_notes(note);
  }
  tails_->Reply(c, r);
}

namespace {

// The reply to contain and release: its events, also delivered.
template <typename Outcome>
v1::Response ContainResponse(const Outcome& out, const std::string& evidence) {
  v1::Response r;
  if (!out.error.empty()) r.set_error(out.error);
  for (const auto& note : out.notes) r.add_notes(note);
  auto* reply = r.mutable_contain();
  reply->set_sandbox_id(out.sandbox_id);
  reply->set_name(out.name);
  reply->set_evidence(evidence);
  for (const auto& event : out.events) *reply->add_events() = event;
  return r;
}

}  // namespace

void Agent::LetGoOfCredentials(uint64_t id) {
  auto it = held_.find(id);
  if (it == held_.end()) return;
  std::shared_ptr<HeldCredentials> h = it->second;
  std::lock_guard<std::mutex> lock(h->mu);  // a program of theirs in progress ends first
  if (h->creds) h->creds->Release();
  h->creds.reset();
  held_.erase(it);
}

ops::ContainRequest Agent::AgentContainRequest(uint64_t sandbox_id, std::string by) {
  ops::ContainRequest request;
  request.sandbox_id = sandbox_id;
  request.by = std::move(by);
  request.via = "agent";
  // The sandbox's credentials (cordon attach's): let go of, so that the
  // containment revokes them from their state (if it is refused, they are
  // taken over again at the next check).
  LetGoOfCredentials(sandbox_id);
  request.audit_path = config_.AuditPath();
  return request;
}

void Agent::CheckContainment(Sandbox& sb) {
  if (!sb.state_fd.valid()) {
    auto fd = OpenSandboxMap(sb.id, "state");
    if (!fd) return;  // attached by a cordon without it: never contained
    sb.state_fd = std::move(*fd);
  }
  uint32_t zero = 0;
  cordon_sandbox_state state = {};
  if (bpf_map_lookup_elem(sb.state_fd.get(), &zero, &state) != 0) return;
  const bool pending =
      (state.flags & CORDON_STATE_F_CONTAINED) && !(state.flags & (CORDON_STATE_F_EVIDENCE | CORDON_STATE_F_KILLED));
  if (!pending) {
    sb.containment_tried = false;
    return;
  }
  // Tried and failed: the operator's `cordon contain` completes it. Queued: under way.
  if (sb.containment_tried || sb.containment_queued) return;
  ops::ContainRequest request = AgentContainRequest(sb.id, "the agent (pid " + std::to_string(::getpid()) + ")");
  request.lock_wait_ms = 0;  // a cordon contain under way completes it: never wait for it here
  ContainmentHandoff::Done done;
  done.id = sb.id;
  done.by_kernel = (state.flags & CORDON_STATE_F_AUTO) != 0;
  ContainOnWorker(std::move(request), std::move(done));
}

void Agent::ContainOnWorker(ops::ContainRequest request, ContainmentHandoff::Done done) {
  // The evidence goes on without the drain if the loop does not answer (stopping).
  request.before_evidence = [handoff = handoff_, id = request.sandbox_id] {
    auto drained = std::make_shared<std::promise<void>>();
    std::future<void> drain_done = drained->get_future();
    {
      std::lock_guard<std::mutex> lock(handoff->mu);
      handoff->drains.emplace_back(id, drained);
    }
    drain_done.wait_for(std::chrono::seconds(2));
  };
  if (auto it = sandboxes_.find(request.sandbox_id); it != sandboxes_.end()) it->second->containment_queued = true;
  contain_worker_->Post(
      [handoff = handoff_, request = std::move(request), done = std::move(done)](const ops::CredentialEvents&) mutable {
        done.out = ops::Contain(request);
        std::lock_guard<std::mutex> lock(handoff->mu);
        handoff->done.push_back(std::move(done));
      });
}

void Agent::ServiceContainments() {
  decltype(handoff_->drains) drains;
  decltype(handoff_->done) done;
  {
    std::lock_guard<std::mutex> lock(handoff_->mu);
    drains.swap(handoff_->drains);
    done.swap(handoff_->done);
  }
  for (auto& [id, drained] : drains) {
    if (auto it = sandboxes_.find(id); it != sandboxes_.end()) {
      DrainAll(*it->second);
      it->second->reader->CheckLosses();
      Commit(*it->second);
    }
    sinks_.FlushBatches();
    drained->set_value();
  }
  for (auto& d : done) {
    for (const auto& event : d.out.events) Deliver(event);
    sinks_.FlushBatches();
    auto it = sandboxes_.find(d.id);
    Sandbox* sb = it == sandboxes_.end() ? nullptr : it->second.get();
    if (d.egress_cut) {
      Log("sandbox " + d.out.name + " (cgroup id " + std::to_string(d.id) + ") reached its egress budget: " +
          (d.out.error.empty() ? std::to_string(d.out.events.size()) + " connection(s) acted on"
                               : "its connections were not destroyed: " + d.out.error));
      continue;
    }
    if (sb) sb->containment_queued = false;
    if (d.client) {  // a client's `cordon contain`: answered now (it may have hung up)
      if (d.out.error.empty())
        Log("contained sandbox " + d.out.name + " (cgroup id " + std::to_string(d.out.sandbox_id) + ") for pid " +
            std::to_string(d.client_pid) + (d.kill ? ", killed" : "") + "; evidence " +
            (d.out.evidence_path.empty() ? "not written" : d.out.evidence_path));
      if (Client* c = tails_->Find(d.client)) {
        tails_->Reply(*c, ContainResponse(d.out, d.out.evidence_path));
        tails_->SetBusy(*c, false);
      }
      continue;
    }
    if (d.out.busy) continue;  // tried again at the next check
    if (sb) sb->containment_tried = true;
    const std::string what = "sandbox " + (sb ? sb->ctx.name : d.out.name) + " (cgroup id " + std::to_string(d.id) +
                             ") was contained " +
                             (d.by_kernel      ? "by the kernel"
                              : d.by_wall_time ? "by this agent at its wallTime (onViolation: contain)"
                                               : "by a cordon contain that did not finish");
    if (!d.out.error.empty())
      Log(what + ", but completing it failed: " + d.out.error);
    else
      Log(what + ": frozen and its evidence taken (" +
          (d.out.evidence_path.empty() ? "not written" : d.out.evidence_path) + ")");
    for (const auto& note : d.out.notes) Log("  " + note);
  }
}

void Agent::HandleContain(Client& c, const v1::ContainRequest& req) {
  // SO_PEERCRED: root's, or refused
  ops::ContainRequest request = AgentContainRequest(req.sandbox_id(), ops::Requester(static_cast<pid_t>(c.pid), 0));
  request.kill = req.kill();
  request.reason = req.reason();
  // On the containment worker: freezing and the evidence of a large sandbox
  // take seconds, while the loop drains every sandbox's events (this one's
  // too, to the audit file, before its evidence reads the tail). The client
  // is answered when it is done; its later requests wait behind it.
  tails_->SetBusy(c, true);
  ContainmentHandoff::Done done;
  done.id = request.sandbox_id;
  done.client = c.key;
  done.client_pid = static_cast<uint32_t>(c.pid);
  done.kill = req.kill();
  ContainOnWorker(std::move(request), std::move(done));
}

void Agent::HandleReleaseContainment(Client& c, const v1::ReleaseContainmentRequest& req) {
  ops::ReleaseContainmentRequest request;
  request.sandbox_id = req.sandbox_id();
  request.reason = req.reason();
  request.by = ops::Requester(static_cast<pid_t>(c.pid), 0);
  request.via = "agent";
  ops::ReleaseContainmentOutcome out = ops::ReleaseContainment(request);
  for (const auto& event : out.events) Deliver(event);
  sinks_.FlushBatches();
  if (out.error.empty())
    Log("released the containment of sandbox " + out.name + " (cgroup id " + std::to_string(out.sandbox_id) +
        ") for pid " + std::to_string(c.pid));
  tails_->Reply(c, ContainResponse(out, ""));
}

}  // namespace cordon::agent
