// The agent's start, its loop and 100 ms tick, and its shutdown (the class
// and where its other parts are: agent_impl.h).
#include "agent/agent.h"

#include <google/protobuf/stubs/logging.h>

#include <bpf/bpf.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>
#include <system_error>

#include "abi/cordon_pins.h"
#include "agent/agent_impl.h"
#include "agent/control_socket.h"
#include "agent/log.h"
#include "loader/sandbox.h"
#include "ops/credentials.h"
#include "sys/bpffs.h"
#include "sys/cgroup.h"
#include "sys/counters.h"
#include "util/clock.h"
#include "util/fs.h"

namespace cordon::agent {
namespace {

constexpr int kTickMs = 100;
constexpr int kRescanEveryTicks = 2;          // pins rescanned every 200 ms
constexpr int kCredentialSweepEveryTicks = 20;  // credentials a dead cordon run left: every 2 s
constexpr int kWarnAtEveryTicks = 10;           // warnAt's shares read every second
constexpr int64_t kUnmapIdleNs = 2000000000;  // a ring buffer with nothing for this long is unmapped

}  // namespace

Agent::~Agent() {
  if (preparer_.joinable()) preparer_.join();
  if (compile_worker_) compile_worker_->Stop();  // its job touches compiled_ and compile_fd_
}

void Agent::Watch(int fd, uint64_t key, uint32_t events) {
  struct epoll_event ev = {};
  ev.events = events;
  ev.data.u64 = key;
  ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, fd, &ev);
}

Status Agent::Lock() {
  const std::string dir = config_.socket.substr(0, config_.socket.rfind('/'));
  if (!dir.empty()) CORDON_TRY(MakeDirs(dir, 0755));
  const std::string path = config_.LockPath();
  lock_fd_ = UniqueFd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!lock_fd_.valid()) return SysError("open lock file " + path);
  if (::flock(lock_fd_.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) return SysError("lock " + path);
    char buf[32] = {};
    ssize_t n = ::pread(lock_fd_.get(), buf, sizeof buf - 1, 0);
    std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    return Error{"another cordon agent is running (" + (pid.empty() ? std::string("pid unknown") : "pid " + pid) +
                 ", lock " + path + "); only one may consume the ring buffers"};
  }
  std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(lock_fd_.get(), 0) != 0 || ::pwrite(lock_fd_.get(), pid.data(), pid.size(), 0) < 0)
    return SysError("write " + path);
  return {};
}

Status Agent::Start() {
  // One malloc arena: the thread that prepares network instances would
  // otherwise get an arena of its own, keeping libbpf's freed kernel-BTF parse
  // (about 12 MiB) a second time in the agent's RSS.
  (void)::mallopt(M_ARENA_MAX, 1);
  // A fixed mmap threshold: a large request frame's buffer (up to 32 MiB) is
  // its own mapping, returned when freed, instead of raising glibc's dynamic
  // threshold and staying in the heap.
  (void)::mallopt(M_MMAP_THRESHOLD, 1 << 20);
  CaptureProtobufLog();
  started_real_ns_ = RealNs();
  started_mono_ns_ = rate_last_ns_ = MonoNs();
  // Read-only checks first: on refusal nothing is touched.
  CORDON_TRY(CheckPinnedLayout());
  auto mount = FindCgroup2Mount();
  if (!mount) return mount.error();
  cgroup_mount_ = *mount;
  CORDON_TRY(Lock());
  {
    const std::string state = config_.LockPath().substr(0, config_.LockPath().rfind('/')) + "/agent.state";
    Status opened = pending_.Open(state);
    if (!opened.ok()) Log(opened.error().ToString() + ": suppressed counts will not survive a crash of the agent");
  }
  auto root = SandboxPinRoot();
  if (!root) return root.error();
  pin_root_ = *root;
  CORDON_TRY(sinks_.Open(config_.sinks));

  ::signal(SIGPIPE, SIG_IGN);
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGHUP);
  sigprocmask(SIG_BLOCK, &mask, nullptr);
  signal_fd_ = UniqueFd(::signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!signal_fd_.valid()) return SysError("signalfd");
  timer_fd_ = UniqueFd(::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
  struct itimerspec its = {};
  its.it_interval.tv_nsec = its.it_value.tv_nsec = kTickMs * 1000000L;
  if (!timer_fd_.valid() || ::timerfd_settime(timer_fd_.get(), 0, &its, nullptr) != 0) return SysError("timerfd");
  epoll_fd_ = UniqueFd(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_fd_.valid()) return SysError("epoll_create1");
  Watch(signal_fd_.get(), Key(kSignal, 0), EPOLLIN);
  Watch(timer_fd_.get(), Key(kTimer, 0), EPOLLIN);
  compile_fd_ = UniqueFd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!compile_fd_.valid()) return SysError("eventfd");
  Watch(compile_fd_.get(), Key(kCompiled, 0), EPOLLIN);
  // One inotify instance for every sandbox's resource files (WatchResources).
  // Without it (uid 0's instances used up: fs.inotify.max_user_instances,
  // which a root workload counts against too) the agent still starts; each
  // watch then tries an instance of its own.
  inotify_fd_ = UniqueFd(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (inotify_fd_.valid())
    Watch(inotify_fd_.get(), Key(kResources, 0), EPOLLIN);
  else
    Log(std::string("inotify_init1 (the sandboxes' resource events): ") + std::strerror(errno) +
        "; each sandbox's watch tries an instance of its own");
  compile_worker_ = std::make_unique<CredentialWorker>("cordon-compile");
  tails_ = std::make_unique<TailServer>(
      epoll_fd_.get(), [](uint64_t client) { return Key(kClient, client); },
      TailLimits{config_.tail_queue_events, config_.tail_disconnect_after_dropped,
                 static_cast<int64_t>(config_.control_idle_timeout_ms) * 1000000,
                 static_cast<int64_t>(config_.control_request_timeout_ms) * 1000000,
                 config_.control_partial_frames_max_bytes},
      [this](Client& c, const std::string& payload) { Handle(c, payload); });

  auto listening = ListenOnControlSocket(config_.socket, &socket_ino_);
  if (!listening) return listening.error();
  listen_fd_ = std::move(*listening);
  Watch(listen_fd_.get(), Key(kListen, 0), EPOLLIN);

  if (!config_.metrics_listen.empty()) {
    MetricsLimits limits;
    limits.max_connections = config_.metrics_max_connections;
    limits.request_timeout = std::chrono::milliseconds(config_.metrics_request_timeout_ms);
    auto server = MetricsServer::Listen(config_.metrics_listen, config_.metrics_allow_non_loopback, limits);
    if (!server) {
      // Metrics are optional; events are not: keep running without them.
      Log("metrics disabled: " + server.error().ToString());
    } else {
      metrics_ = std::move(*server);
      std::string host = config_.metrics_listen.substr(0, config_.metrics_listen.rfind(':'));
      metrics_address_ = host + ":" + std::to_string(metrics_->port());
      Watch(metrics_->fd(), Key(kMetrics, 0), EPOLLIN);
    }
  }

  LoadOidc();

  // Adopt everything pinned: enforcement never stopped; what the ring
  // buffers held while no agent ran is drained now, and what they could not
  // hold is reported as loss records.
  contain_worker_ = std::make_unique<CredentialWorker>("cordon-contain");  // before Rescan: it completes containments
  Rescan();
  cred_worker_ = std::make_unique<CredentialWorker>("cordon-creds");
  ServiceCredentials(true);
  for (const auto& slot : pending_.Used()) {
    if (sandboxes_.count(slot.sandbox_id)) continue;
    struct stat st;
    if (::stat(SandboxPinDir(pin_root_, slot.sandbox_id).c_str(), &st) == 0) continue;  // pinned, not ours now
    if (slot.pending)
      Log("sandbox " + std::to_string(slot.sandbox_id) + " was detached while no agent ran; " +
          std::to_string(slot.pending) + " of its suppressed events were counted but never recorded");
    pending_.Release(slot.sandbox_id);
  }
  uint64_t backlog = 0, lost = 0;
  for (const auto& [id, sb] : sandboxes_) backlog += sb->backlog, lost += sb->lost;
  Log("running (pid " + std::to_string(::getpid()) + ", socket " + config_.socket + ", config " +
      (config_.file.empty() ? std::string("built-in defaults") : config_.file) + "): adopted " +
      std::to_string(sandboxes_.size()) + " sandbox" + (sandboxes_.size() == 1 ? "" : "es") + ", drained " +
      std::to_string(backlog) + " buffered event" + (backlog == 1 ? "" : "s") + ", " + std::to_string(lost) +
      " lost while no agent ran" + (metrics_ ? ", metrics on http://" + metrics_address_ + "/metrics" : ""));
  return {};
}

// Keeps kPreparedInstances network instances loaded ahead for the next
// attaches (loading and verifying one is most of an attach's time), on a
// thread of its own: at start, right after an attach took one, and on every
// tick while fewer are ready.
void Agent::PrepareInstance() {
  const int64_t now = MonoNs();
  std::string error;
  {
    std::lock_guard<std::mutex> lock(prepare_mu_);
    error.swap(prepare_error_);
  }
  if (!error.empty()) {
    next_prepare_ns_ = now + 10 * 1000000000LL;
    Log("attaches load their own network instance: " + error + " (retrying in 10 s)");
  }
  if (preparing_ || pool_.Ready() >= kPreparedInstances || now < next_prepare_ns_) return;
  if (preparer_.joinable()) preparer_.join();  // it has finished
  preparing_ = true;
  try {
    preparer_ = std::thread([this] {
      const int64_t t0 = MonoNs();
      auto loaded = pool_.Fill();
      // Loading parses the kernel's BTF (about 12 MiB, freed again): give it
      // back to the system here, off the loop (it takes a few ms).
      (void)::malloc_trim(0);
      if (loaded) {
        char ms[32];
        std::snprintf(ms, sizeof ms, "%.2f", static_cast<double>(MonoNs() - t0) / 1e6);
        Log("prepared network instances for the next attaches: " + std::to_string(*loaded) + " loaded in " + ms +
            " ms");
      } else {
        std::lock_guard<std::mutex> lock(prepare_mu_);
        prepare_error_ = loaded.error().ToString();
      }
      preparing_ = false;
    });
  } catch (const std::system_error& e) {
    preparing_ = false;
    next_prepare_ns_ = now + 10 * 1000000000LL;
    Log(std::string("attaches load their own network instance: no thread to prepare one: ") + e.what());
  }
}

void Agent::Tick() {
  uint64_t expirations;
  while (::read(timer_fd_.get(), &expirations, sizeof expirations) > 0) {
  }
  ticks_++;
  const int64_t now = MonoNs();
  PrepareInstance();
  const bool rescan = ticks_ % kRescanEveryTicks == 0;
  for (auto& [id, sb] : sandboxes_) {
    // A safety net for a missed wakeup; normally the ring's epoll fd fires.
    if (!sb->more && sb->reader->AnyMapped()) DrainSandbox(*sb, kDrainBudget);
    // Drops happen only while a ring is full, so while it is mapped (it is
    // for 2 s after its last record): idle ones are checked every 2 s.
    if (rescan && (sb->reader->AnyMapped() || ticks_ % (10 * kRescanEveryTicks) == 0)) {
      sb->reader->CheckLosses();
      Commit(*sb);
      sb->reader->UnmapIdle(kUnmapIdleNs);
    }
    if (bool ended = false; sb->suppression.Due(now, &ended)) EmitSuppressed(*sb, ended, now);
    // Resources: a rise held back by the spacing (no system call unless
    // one is), warnAt's slow read (only for a policy that sets it: two small
    // files a second), wallTime (a comparison).
    if (sb->resources) {
      if (sb->resources->Due(now)) PollResources(*sb, false);
      if (sb->resources->watches_warn_at() && ticks_ % kWarnAtEveryTicks == 0)
        for (auto& e : sb->resources->CheckWarnAt()) DeliverOwn(*sb, std::move(e));
    }
    if (sb->wall_deadline_ns) CheckWallTime(*sb, RealNs());
  }
  if (rescan) Rescan();
  ServiceContainments();
  ServiceCredentials(ticks_ % kCredentialSweepEveryTicks == 0);
  sinks_.FlushSinks();
  sinks_.Retry(now);
  if (metrics_) metrics_->Service([this] { return RenderMetrics(); }, [this](const std::string& path) { return Document(path); });
  if (now - rate_last_ns_ >= 1000000000) {
    events_per_second_ = static_cast<double>(consumed_ - rate_last_delivered_) * 1e9 / static_cast<double>(now - rate_last_ns_);
    rate_last_delivered_ = consumed_;
    rate_last_ns_ = now;
  }
  tails_->ExpireClosing(now);
}

ops::OidcContext Agent::CredentialOidc() const {
  ops::OidcContext oidc;
  oidc.issuer = oidc_issuer_;
  oidc.key_dir = config_.oidc_key_dir;
  oidc.setting = config_.file.empty() ? std::string(kDefaultConfigPath) + " (absent: the defaults)" : config_.file;
  return oidc;
}

void Agent::HoldCredentials(uint64_t id, std::shared_ptr<ops::SandboxCredentials> creds) {
  auto h = std::make_shared<HeldCredentials>();
  h->creds = std::move(creds);
  h->id = id;
  if (auto it = sandboxes_.find(id); it != sandboxes_.end()) {
    h->name = it->second->ctx.name;
    h->policy = it->second->ctx.policy;
    h->cgroup_path = it->second->ctx.cgroup_path;
  } else {
    h->name = h->creds->sandbox();
  }
  held_[id] = std::move(h);
}

void Agent::AdoptCredentials() {
  for (const auto& state : ops::ListCredentialStates()) {
    if (!state.attached || held_.count(state.cgroup_id) || !sandboxes_.count(state.cgroup_id)) continue;
    // A sandbox whose kernel containment this agent is completing, or has
    // completed: its credentials were let go of for the containment to
    // revoke them; taken over again they would be refreshed for a contained
    // workload (and the revoke would find them locked).
    if (const Sandbox& sb = *sandboxes_.at(state.cgroup_id); sb.containment_queued || sb.containment_tried) continue;
    // Held by another process (a cordon attach in progress, the sweep): tried again in 2 s.
    auto adopted = ops::SandboxCredentials::Adopt(state.stem, CredentialOidc());
    if (!adopted) continue;
    HoldCredentials(state.cgroup_id, std::move(*adopted));
    size_t live = 0;
    for (const auto& c : state.credentials) live += !c.pending;
    Log("took over the credentials of sandbox " + state.stem + " (" + std::to_string(live) +
        " live): refreshed, expired and revoked by this agent from now on");
  }
}

// The programs run on the worker (each at most
// kCredentialProgramTimeoutSeconds); the loop only posts jobs, delivers
// their events and, at detach, waits for one of that sandbox's in progress.
void Agent::ServiceCredentials(bool every_2s) {
  for (const auto& e : cred_worker_->TakeEvents()) Deliver(e);
  for (auto& line : cred_worker_->TakeLogs()) Log(line);
  if (every_2s) {
    AdoptCredentials();
    // Credentials of cordon processes that ended (a killed cordon run, a
    // cordon attach without agent): removed and revoked once expired or
    // their sandbox is gone (ops/credentials.h).
    if (!sweep_queued_->exchange(true)) {
      CredentialWorker* worker = cred_worker_.get();
      cred_worker_->Post([worker, queued = sweep_queued_](const ops::CredentialEvents& emit) {
        const int swept = ops::SweepCredentials(static_cast<int64_t>(std::time(nullptr)), emit);
        if (swept)
          worker->Log("removed and revoked " + std::to_string(swept) +
                      " credential(s) left by cordon processes that ended");
        *queued = false;
      });
    }
  }
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  for (auto it = held_.begin(); it != held_.end();) {
    std::shared_ptr<HeldCredentials> h = it->second;
    std::unique_lock<std::mutex> lock(h->mu, std::try_to_lock);
    if (!lock.owns_lock() || h->queued) {
      ++it;
      continue;
    }
    if (!h->creds) {
      it = held_.erase(it);
      continue;
    }
    const std::string gone = every_2s ? h->creds->Gone() : "";
    const int64_t next = h->creds->NextDeadline();
    if (gone.empty() && (next == 0 || next > now)) {
      ++it;
      continue;
    }
    h->queued = true;
    cred_worker_->Post([h, gone](const ops::CredentialEvents& emit) {
      std::lock_guard<std::mutex> held(h->mu);
      auto named = [&](cordon::v1::AuditEvent e) {
        h->Name(&e);
        emit(std::move(e));
      };
      if (h->creds && !gone.empty()) {
        h->creds->RevokeAll(gone, named);
        h->creds.reset();  // files, tmpfs, view, state (but failed revokes) and lock removed
      } else if (h->creds) {
        h->creds->Tick(static_cast<int64_t>(std::time(nullptr)), named);
      }
      h->queued = false;
    });
    ++it;
  }
}

void Agent::ReleaseCredentials() {
  cred_worker_->Stop();  // the program in progress ends first
  for (const auto& e : cred_worker_->TakeEvents()) Deliver(e);
  for (auto& line : cred_worker_->TakeLogs()) Log(line);
  for (auto& [id, h] : held_) {
    std::lock_guard<std::mutex> lock(h->mu);
    if (h->creds) h->creds->Release();
    h->creds.reset();
  }
  held_.clear();
}

void Agent::LoadOidc() {
  oidc_issuer_ = config_.OidcIssuer();
  if (oidc_issuer_.empty() && metrics_) oidc_issuer_ = "http://" + metrics_address_;  // metrics.listen port 0
  if (oidc_issuer_.empty()) {
    Log("the built-in OIDC issuer is off: no oidc.issuer and no metrics listener to serve its keys on");
    return;
  }
  const std::string stamp = ops::OidcKeyStamp(config_.oidc_key_dir);
  auto signer = ops::OidcSigner::LoadOrCreate(config_.oidc_key_dir);
  if (!signer) {
    // Tokens are optional; events are not: keep running without them.
    if (oidc_) Log("the built-in OIDC issuer keeps its keys: " + signer.error().ToString());
    else Log("the built-in OIDC issuer is off: " + signer.error().ToString());
    oidc_stamp_ = stamp;  // not retried until the files change again
    return;
  }
  const bool reloaded = oidc_.has_value();
  oidc_.emplace(std::move(*signer));
  oidc_stamp_ = ops::OidcKeyStamp(config_.oidc_key_dir);  // after a first start made the key
  std::string published;
  if (!config_.oidc_publish_dir.empty()) {
    Status written = ops::PublishFiles(*oidc_, oidc_issuer_, config_.oidc_publish_dir);
    published = written.ok() ? ", published in " + config_.oidc_publish_dir
                             : ", not published: " + written.error().ToString();
  }
  Log(std::string(reloaded ? "the built-in OIDC issuer read its keys again" : "the built-in OIDC issuer") + " (iss " +
      oidc_issuer_ + ", key " + oidc_->kid() + ")" + (metrics_ ? ", keys on http://" + metrics_address_ : "") +
      published);
}

// /healthz: 200 "ok" while every sink writes what it is given, 503 "degraded"
// while one loses events (or is not open); one line per sink says which. The
// answer comes from the event loop itself, so an agent that stopped serving
// gives none.
std::optional<HttpDocument> Agent::Document(const std::string& path) {
  if (path != "/healthz") return OidcDocument(path);
  bool degraded = false;
  std::string lines = "sandboxes: " + std::to_string(sandboxes_.size()) + " adopted\n";
  for (const SinkSlot& slot : sinks_.slots()) {
    const bool failing = !slot.sink || slot.failing;
    degraded = degraded || failing;
    lines += "sink " + slot.config.Name() + ": " +
             (!slot.sink ? "not open" + (slot.last_error.empty() ? "" : ": " + slot.last_error)
              : slot.failing ? "failing: " + slot.last_error
                             : std::string("writing")) +
             " (" + std::to_string(slot.written) + " written, " + std::to_string(slot.failed) + " not written)\n";
  }
  HttpDocument doc{"text/plain; charset=utf-8", (degraded ? "degraded\n" : "ok\n") + lines};
  if (degraded) doc.status = "503 Service Unavailable";
  return doc;
}

std::optional<HttpDocument> Agent::OidcDocument(const std::string& path) {
  if (oidc_issuer_.empty()) return std::nullopt;
  if (ops::OidcKeyStamp(config_.oidc_key_dir) != oidc_stamp_) LoadOidc();
  if (!oidc_) return std::nullopt;
  auto body = ops::OidcDocumentAt(*oidc_, oidc_issuer_, path);
  if (!body) return std::nullopt;
  return HttpDocument{"application/json", std::move(*body)};
}

std::string Agent::RenderMetrics() {
  AgentMetrics m;
  m.events_total = consumed_;
  m.events_per_second = events_per_second_;
  m.sink_write_failures = sinks_.failures();
  for (const auto& slot : sinks_.slots()) m.sink_failures_by_sink[slot.config.Name()] = slot.failed;
  m.tailer_drops = tails_->drops();
  for (const auto& [key, c] : tails_->clients()) m.tailers_connected += c->tail ? 1 : 0;
  m.tailers_disconnected_slow = tails_->disconnected();
  m.control_refused_busy = tails_->busy();
  m.control_refused_deadline = tails_->timed_out();
  m.control_refused_budget = tails_->over_budget();
  m.control_refused_unread = tails_->unread();
  if (metrics_) {
    m.metrics_refused_busy = metrics_->refused();
    m.metrics_refused_deadline = metrics_->timed_out();
  }
  m.uptime_seconds = static_cast<double>(MonoNs() - started_mono_ns_) / 1e9;
  if (auto statm = ReadFile("/proc/self/statm", 4096)) {
    unsigned long long size = 0, resident = 0;
    if (std::sscanf(statm->c_str(), "%llu %llu", &size, &resident) == 2)
      m.rss_bytes = resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  }
  for (const auto& [id, sb] : sandboxes_) {
    m.ringbuf_fill_ratio_max = std::max(m.ringbuf_fill_ratio_max, sb->reader->Fill());
    SandboxMetrics s;
    s.id = id;
    s.name = sb->ctx.name;
    s.level = EnforcementLevel(sb->flags);
    if (auto counters = OpenSandboxMap(id, "counters"))
      if (auto sums = ReadCounters(counters->get())) s.counters = *sums;
    s.events_delivered = sb->delivered;
    s.events_quiet = sb->quiet;
    s.events_suppressed = sb->suppression.suppressed();
    s.ringbuf_lost = sb->lost;
    if (!sb->ctx.cgroup_path.empty()) s.resources = ops::ReadResourceUsage(JoinPath(cgroup_mount_, sb->ctx.cgroup_path));
    uint32_t zero = 0;
    cordon_egress_usage egress = {};
    if (auto usage = OpenSandboxMap(id, CORDON_EGRESS_PIN);
        usage && !bpf_map_lookup_elem(usage->get(), &zero, &egress)) {
      s.resources.egress_bytes = egress.bytes;
      s.resources.egress_dropped_bytes = egress.dropped_bytes;
    }
    cordon_egress_budget budget = {};
    if (auto map = OpenSandboxMap(id, "egress_budget");
        map && !bpf_map_lookup_elem(map->get(), &zero, &budget) && budget.limit)
      s.resources.egress_limit = budget.limit;
    m.sandboxes.push_back(std::move(s));
  }
  return RenderPrometheus(m);
}

void Agent::Shutdown() {
  // Requests whose policy is still compiling are not attached: their
  // clients are closed below, unanswered, and nothing was attached for them.
  if (compile_worker_) compile_worker_->Stop();
  // A containment under way ends first (its drain answered here), its events delivered.
  if (contain_worker_) {
    std::thread stopping([worker = contain_worker_.get()] { worker->Stop(); });
    while (contain_worker_->Pending()) {
      ServiceContainments();
      ::usleep(10 * 1000);
    }
    stopping.join();
    ServiceContainments();
  }
  // Everything the ring buffers hold goes out before we do.
  std::vector<uint64_t> ids;
  for (const auto& [id, sb] : sandboxes_) ids.push_back(id);
  uint64_t drained = 0;
  for (uint64_t id : ids) drained += Finish(id, /*ended=*/false);
  // Credentials stay with their sandboxes (files, state): the next agent
  // takes them over; until one does, a sweep ends them at their ttl.
  if (cred_worker_) ReleaseCredentials();
  sinks_.Close();
  tails_->Shutdown();
  struct stat st;
  if (socket_ino_ && ::stat(config_.socket.c_str(), &st) == 0 && st.st_ino == socket_ino_)
    ::unlink(config_.socket.c_str());
  if (lock_fd_.valid()) (void)!::ftruncate(lock_fd_.get(), 0);
  Log("stopped: drained " + std::to_string(drained) + " final events; " + std::to_string(delivered_) +
      " delivered, " + std::to_string(suppressed_) + " suppressed, " + std::to_string(lost_) + " lost, " +
      std::to_string(sinks_.failures()) + " sink write failures since start");
}

int Agent::Loop() {
  struct epoll_event evs[64];
  PrepareInstance();
  while (!stop_) {
    bool more = false;
    for (const auto& [id, sb] : sandboxes_) more = more || sb->more;
    int n = ::epoll_wait(epoll_fd_.get(), evs, 64, more ? 0 : -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      Log(std::string("epoll_wait: ") + std::strerror(errno));
      break;
    }
    for (int i = 0; i < n && !stop_; ++i) {
      uint64_t key = evs[i].data.u64;
      uint64_t id = key & kKeyIdMask;
      switch (static_cast<Tag>(key >> 56)) {
        case kSignal: {
          struct signalfd_siginfo si;
          while (::read(signal_fd_.get(), &si, sizeof si) == sizeof si) {
            if (si.ssi_signo == SIGHUP) {
              Log("SIGHUP: the configuration is read at start only; restart the agent to apply changes");
              continue;
            }
            Log(std::string("stopping on ") + (si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT"));
            stop_ = true;
          }
          break;
        }
        case kListen:
          AcceptControlClients(listen_fd_.get(), cgroup_mount_, pin_root_, config_.max_clients, *tails_);
          break;
        case kTimer:
          Tick();
          break;
        case kCompiled: OnCompiled(); break;
        case kMetrics:
          if (metrics_) metrics_->Service([this] { return RenderMetrics(); }, [this](const std::string& path) { return Document(path); });
          break;
        case kClient:
          tails_->OnReady(id, evs[i].events);
          break;
        case kSandbox: {
          auto it = sandboxes_.find(id);
          if (it != sandboxes_.end()) DrainSandbox(*it->second, kDrainBudget);
          break;
        }
        case kNames: {
          auto it = sandboxes_.find(id);
          if (it != sandboxes_.end() && it->second->names) DeliverNames(*it->second, false);
          break;
        }
        case kResources:
        case kPressure: {
          if (static_cast<Tag>(key >> 56) == kResources && id == 0) {  // the shared instance
            ReadResourceNotifications();
            break;
          }
          auto it = sandboxes_.find(id);
          if (it == sandboxes_.end() || !it->second->resources) break;
          if (static_cast<Tag>(key >> 56) == kPressure) it->second->resources->OnPressure();
          PollResources(*it->second, false);
          break;
        }
      }
    }
    // Sandboxes whose budget ran out go again, each with a fresh budget, so
    // one flooding sandbox cannot starve the others (or the control socket).
    if (!stop_)
      for (auto& [id, sb] : sandboxes_)
        if (sb->more) DrainSandbox(*sb, kDrainBudget);
    // Whatever this turn delivered outside a drain (suppressed records,
    // retroactive attach events, loss records) goes out now.
    FlushDeliveries();
    tails_->Reap();
  }
  Shutdown();
  return 0;
}

void CaptureProtobufLog() {
  static std::mutex mu;
  static LogLimiter limiter;
  google::protobuf::SetLogHandler(
      [](google::protobuf::LogLevel level, const char* filename, int line, const std::string& message) {
        if (level == google::protobuf::LOGLEVEL_FATAL) {
          Log(std::string("libprotobuf FATAL ") + filename + ":" + std::to_string(line) + ": " + message);
          return;
        }
        // What libprotobuf says about a client's message (invalid UTF-8, a
        // missing field) comes with every such request: rate-limited. It
        // names the field, never the bytes.
        std::lock_guard<std::mutex> lock(mu);
        limiter.Log(std::string("libprotobuf ") + (level == google::protobuf::LOGLEVEL_ERROR ? "error" : "warning") +
                    " (" + filename + ":" + std::to_string(line) + "): " + message);
      });
}

// The agent holds descriptors for every sandbox it watches (ring buffers,
// maps, pressure triggers, cgroup files): the soft RLIMIT_NOFILE most
// service managers give (1,024) ran out at about 130 sandboxes (EMFILE on
// the next attach). The hard limit is the operator's bound: the soft one is
// raised to it. The agent's only child (a credential program) closes every
// descriptor above 2 and never sees more than a few.
static void RaiseOpenFilesLimit() {
  rlimit files = {};
  if (::getrlimit(RLIMIT_NOFILE, &files) != 0 || files.rlim_cur >= files.rlim_max) return;
  const rlim_t was = files.rlim_cur;
  files.rlim_cur = files.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &files) != 0)
    std::fprintf(stderr, "cordon: agent: cannot raise the open files limit from %llu to %llu: %s\n",
                 static_cast<unsigned long long>(was), static_cast<unsigned long long>(files.rlim_max),
                 std::strerror(errno));
}

int RunAgent(const AgentConfig& config) {
  RaiseOpenFilesLimit();
  Agent agent(config);
  Status started = agent.Start();
  if (!started.ok()) {
    std::fprintf(stderr, "cordon: agent: %s\n", started.error().ToString().c_str());
    return 1;
  }
  return agent.Loop();
}

}  // namespace cordon::agent
