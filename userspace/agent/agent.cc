#include "agent/agent.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <google/protobuf/util/time_util.h>
#include <linux/magic.h>
#include <linux/sockios.h>
#include <malloc.h>
#include <signal.h>
#include <dirent.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <system_error>
#include <thread>
#include <unordered_map>

#include "abi/cordon_common.h"
#include "abi/cordon_pins.h"
#include "agent/clock.h"
#include "agent/control.h"
#include "agent/log.h"
#include "agent/metrics.h"
#include "agent/sink_fanout.h"
#include "agent/suppression.h"
#include "agent/tail_server.h"
#include "events/decoder.h"
#include "events/reader.h"
#include "events/sink.h"
#include "loader/bpffs.h"
#include "loader/cgroup.h"
#include "loader/retro.h"
#include "loader/kernel_features.h"
#include "loader/sandbox.h"
#include "policy/parser.h"
#include "util/fs.h"

namespace cordon::agent {
namespace {

namespace v1 = cordon::v1;

constexpr int kTickMs = 100;
constexpr int kRescanEveryTicks = 2;        // pins rescanned every 200 ms
constexpr int kDrainBudget = 4096;          // records per sandbox per loop turn
constexpr int64_t kUnmapIdleNs = 2000000000;  // a ring buffer with nothing for this long is unmapped


// ---- pinned state -----------------------------------------------------------

struct PinnedInfo {
  cordon_sandbox_info info = {};
  uint32_t map_id = 0;  // the info map's id: changes when the sandbox is re-created
};

// Reads <dir>/info. *foreign: the state is of another layout (never misread).
Result<PinnedInfo> ReadPinnedInfo(const std::string& dir, bool* foreign) {
  *foreign = false;
  const std::string path = dir + "/info";
  UniqueFd fd(bpf_obj_get(path.c_str()));
  if (!fd.valid()) return SysError("open " + path);
  struct bpf_map_info minfo = {};
  uint32_t len = sizeof minfo;
  if (bpf_obj_get_info_by_fd(fd.get(), &minfo, &len)) return SysError("inspect " + path);
  if (minfo.value_size != sizeof(cordon_sandbox_info)) {
    *foreign = true;
    return Error{dir + " was written by a cordon with another state layout (info of " +
                 std::to_string(minfo.value_size) + " bytes, this cordon's has " +
                 std::to_string(sizeof(cordon_sandbox_info)) + ")"};
  }
  PinnedInfo out;
  out.map_id = minfo.id;
  uint32_t zero = 0;
  if (bpf_map_lookup_elem(fd.get(), &zero, &out.info)) return SysError("read " + path);
  if (out.info.layout_version != CORDON_LAYOUT_VERSION) {
    *foreign = true;
    return Error{dir + " has state layout version " + std::to_string(out.info.layout_version) +
                 " (this cordon understands " + std::to_string(CORDON_LAYOUT_VERSION) + ")"};
  }
  out.info.name[sizeof out.info.name - 1] = '\0';
  out.info.policy[sizeof out.info.policy - 1] = '\0';
  out.info.cgroup_path[sizeof out.info.cgroup_path - 1] = '\0';
  return out;
}

bool IsNumber(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

// `cordon run` reads its own sandbox's ring buffer when it found no agent:
// while that run lives, a rescan must not become a second consumer. (A run
// that found the agent asked it to adopt the sandbox explicitly.) Its cgroup
// is /cordon/run-<pid>-<random>.
bool RunStillReading(const cordon_sandbox_info& info) {
  if (!(info.flags & CORDON_INFO_F_EPHEMERAL)) return false;
  const std::string path = info.cgroup_path;
  const std::string prefix = "/cordon/run-";
  if (path.compare(0, prefix.size(), prefix) != 0) return false;
  int pid = std::atoi(path.c_str() + prefix.size());
  return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM);
}

std::string Level(uint32_t flags) {
  SandboxInfo info;
  info.lsm = flags & CORDON_INFO_F_LSM;
  info.landlock = flags & CORDON_INFO_F_LANDLOCK;
  info.seccomp = flags & CORDON_INFO_F_SECCOMP;
  info.detect = flags & CORDON_INFO_F_DETECT;
  info.detect_kill = flags & CORDON_INFO_F_DETECT_KILL;
  return info.Level();
}

// ---- the agent ----------------------------------------------------------------

struct Sandbox {
  uint64_t id = 0;
  SandboxContext ctx;
  uint32_t info_map_id = 0;
  UniqueFd info_fd;   // the info map, held: a rescan reads it without reopening the pin
  ino_t dir_ino = 0;  // the pin directory's inode: another one means the sandbox was re-created
  uint32_t generation = 0;
  uint32_t flags = 0;
  std::unique_ptr<EventReader> reader;
  bool more = false;  // the last drain spent its budget
  uint64_t delivered = 0;
  uint64_t lost = 0;
  uint64_t backlog = 0;
  Suppression suppression;
};

enum Tag : uint64_t { kSignal = 1, kListen, kTimer, kMetrics, kClient, kSandbox };
constexpr uint64_t Key(Tag tag, uint64_t id) { return (static_cast<uint64_t>(tag) << 56) | (id & ((1ull << 56) - 1)); }

class Agent {
 public:
  explicit Agent(AgentConfig config) : config_(std::move(config)) {}
  ~Agent();
  Status Start();
  int Loop();

 private:
  // setup
  Status Lock();
  Status OpenSocket();
  void Watch(int fd, uint64_t key, uint32_t events = EPOLLIN);

  // sandboxes
  void Rescan();
  Status Adopt(uint64_t id, const PinnedInfo& pinned);
  Status AdoptNow(uint64_t id);
  uint64_t Finish(uint64_t id);  // final drain; stops reading; returns records drained
  void DrainSandbox(Sandbox& sb, int budget);  // one batch, written out and committed
  void DrainAll(Sandbox& sb);
  void Commit(Sandbox& sb);
  // After a policy replacement: what waits is decoded under the old names,
  // then the new ones apply.
  void Refresh(Sandbox& sb, const PinnedInfo& pinned);
  void OnEvent(Sandbox& sb, const v1::AuditEvent& event);
  bool Admit(Sandbox& sb);
  void EmitSuppressed(Sandbox& sb, bool final, int64_t now);
  void Tick();
  void PrepareInstance();

  // delivery
  void Deliver(const v1::AuditEvent& event);

  // clients
  void Accept();
  void Handle(Client& c, const std::string& payload);
  void HandleStatus(Client& c);
  void HandleTail(Client& c, const v1::TailRequest& req);
  void HandleAttach(Client& c, const std::string& cgroup, const std::string& text, const std::string& file,
                    const std::string& mode, const std::string& name, bool allow_degraded, bool must_exist);
  void HandleDrain(Client& c, uint64_t id, bool detach, bool release);
  std::string RenderMetrics();

  void Shutdown();

  AgentConfig config_;
  std::string cgroup_mount_;
  std::string pin_root_;
  UniqueFd lock_fd_;
  UniqueFd listen_fd_;
  ino_t socket_ino_ = 0;
  UniqueFd epoll_fd_;
  UniqueFd signal_fd_;
  UniqueFd timer_fd_;
  std::unique_ptr<MetricsServer> metrics_;
  std::string metrics_address_;
  SinkFanout sinks_;
  std::unique_ptr<TailServer> tails_;  // made once the epoll set exists
  PendingState pending_;
  std::map<uint64_t, std::unique_ptr<Sandbox>> sandboxes_;
  std::set<uint64_t> released_;               // finished on request: not re-adopted while pinned
  std::map<uint64_t, std::string> problems_;  // pinned sandboxes this agent will not read
  bool stop_ = false;
  uint64_t ticks_ = 0;
  int64_t next_prepare_ns_ = 0;  // when to try PrepareNetworkInstances() again after a failure
  // The thread loading the next network instance ahead of an attach (so the
  // loop, and a detach waiting in it, never wait for that), and its error.
  std::thread preparer_;
  std::atomic<bool> preparing_{false};
  std::mutex prepare_mu_;
  std::string prepare_error_;
  int64_t started_real_ns_ = 0;
  int64_t started_mono_ns_ = 0;
  // accounting since start
  uint64_t consumed_ = 0, delivered_ = 0, suppressed_ = 0, lost_ = 0;
  uint64_t rate_last_delivered_ = 0;
  int64_t rate_last_ns_ = 0;
  double events_per_second_ = 0;
};

Agent::~Agent() {
  if (preparer_.joinable()) preparer_.join();
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

Status Agent::OpenSocket() {
  const std::string& path = config_.socket;
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return Error{"socket path too long: " + path};
  std::memcpy(addr.sun_path, path.data(), path.size());
  listen_fd_ = UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!listen_fd_.valid()) return SysError("socket");
  // We hold the lock: whatever is at the path was left by a dead agent.
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return Error{path + " exists and is not a socket; refusing to replace it"};
    ::unlink(path.c_str());
  }
  mode_t old = ::umask(0177);
  int bound = ::bind(listen_fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ::umask(old);
  if (bound != 0) return SysError("bind " + path);
  ::chmod(path.c_str(), 0600);
  if (::stat(path.c_str(), &st) == 0) socket_ino_ = st.st_ino;
  if (::listen(listen_fd_.get(), 64) != 0) return SysError("listen on " + path);
  return {};
}

Status Agent::Start() {
  // One malloc arena: the thread that prepares network instances would
  // otherwise get an arena of its own, keeping libbpf's freed kernel-BTF parse
  // (about 12 MiB) a second time in the agent's RSS.
  (void)::mallopt(M_ARENA_MAX, 1);
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
  Watch(signal_fd_.get(), Key(kSignal, 0));
  Watch(timer_fd_.get(), Key(kTimer, 0));
  tails_ = std::make_unique<TailServer>(
      epoll_fd_.get(), [](uint64_t client) { return Key(kClient, client); },
      TailLimits{config_.tail_queue_events, config_.tail_disconnect_after_dropped},
      [this](Client& c, const std::string& payload) { Handle(c, payload); });

  CORDON_TRY(OpenSocket());
  Watch(listen_fd_.get(), Key(kListen, 0));

  if (!config_.metrics_listen.empty()) {
    auto server = MetricsServer::Listen(config_.metrics_listen, config_.metrics_allow_non_loopback);
    if (!server) {
      // Metrics are optional; events are not: keep running without them.
      Log("metrics disabled: " + server.error().ToString());
    } else {
      metrics_ = std::move(*server);
      std::string host = config_.metrics_listen.substr(0, config_.metrics_listen.rfind(':'));
      metrics_address_ = host + ":" + std::to_string(metrics_->port());
      Watch(metrics_->fd(), Key(kMetrics, 0));
    }
  }

  // Adopt everything pinned: enforcement never stopped; what the ring
  // buffers held while no agent ran is drained now, and what they could not
  // hold is reported as loss records.
  Rescan();
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

// ---- sandboxes ------------------------------------------------------------------

Status Agent::Adopt(uint64_t id, const PinnedInfo& pinned) {
  auto events = OpenSandboxMap(id, "events");
  if (!events) return events.error();
  auto counters = OpenSandboxMap(id, "counters");
  if (!counters) return counters.error();
  auto sb = std::make_unique<Sandbox>();
  Sandbox* raw = sb.get();
  sb->id = id;
  sb->ctx = SandboxContext{id, pinned.info.name, pinned.info.policy, pinned.info.cgroup_path};
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
  sb->reader->SetAdmit([this, raw] { return Admit(*raw); });
  sb->reader->SetDeferCommit(true);
  CORDON_TRY(sb->reader->Add(sb->ctx, std::move(*events), std::move(*counters)));
  Watch(sb->reader->epoll_fd(), Key(kSandbox, id));
  sandboxes_[id] = std::move(sb);
  problems_.erase(id);
  // What waited while nobody read, then what could not wait.
  uint64_t before = raw->reader->consumed();
  DrainAll(*raw);
  raw->backlog = raw->reader->consumed() - before;
  raw->reader->CheckLosses();
  Commit(*raw);
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

uint64_t Agent::Finish(uint64_t id) {
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end()) return 0;
  Sandbox& sb = *it->second;
  uint64_t before = sb.reader->consumed();
  DrainAll(sb);
  sb.reader->CheckLosses();
  if (sb.suppression.suppressing()) EmitSuppressed(sb, true, MonoNs());
  Commit(sb);
  uint64_t drained = sb.reader->consumed() - before;
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
        uint32_t zero = 0;
        if (bpf_map_lookup_elem(sb.info_fd.get(), &zero, &same.info) == 0 &&
            same.info.layout_version == CORDON_LAYOUT_VERSION) {
          same.info.name[sizeof same.info.name - 1] = '\0';
          same.info.policy[sizeof same.info.policy - 1] = '\0';
          same.info.cgroup_path[sizeof same.info.cgroup_path - 1] = '\0';
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
        Finish(id);
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
  for (uint64_t id : gone) Finish(id);
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
  DrainAll(sb);
  sb.ctx.name = pinned.info.name;
  sb.ctx.policy = pinned.info.policy;
  sb.generation = pinned.info.generation;
  sb.reader->Update(sb.ctx);
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
  sinks_.FlushBatches();
  tails_->FlushAll();
  sb.reader->Commit();
}

bool Agent::Admit(Sandbox& sb) {
  consumed_++;
  if (sb.suppression.Admit(MonoNs())) return true;
  suppressed_++;
  return false;
}

void Agent::OnEvent(Sandbox& sb, const v1::AuditEvent& event) {
  if (event.kind() == "loss") {
    sb.lost += event.loss().dropped();
    lost_ += event.loss().dropped();
  } else {
    sb.delivered++;
    delivered_++;
  }
  Deliver(event);
}

void Agent::EmitSuppressed(Sandbox& sb, bool final, int64_t now) {
  Deliver(SuppressedRecord(sb.ctx, sb.suppression.pending(), config_.rate_per_second, config_.rate_burst, final,
                           RealNs()));
  sb.suppression.Recorded(final, now);  // the count is cleared after the sinks have it
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
  if (preparing_ || PreparedNetworkInstances() >= kPreparedInstances || now < next_prepare_ns_) return;
  if (preparer_.joinable()) preparer_.join();  // it has finished
  preparing_ = true;
  try {
    preparer_ = std::thread([this] {
      const int64_t t0 = MonoNs();
      auto loaded = PrepareNetworkInstances();
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
    if (bool ended; sb->suppression.Due(now, &ended)) EmitSuppressed(*sb, ended, now);
  }
  if (rescan) Rescan();
  sinks_.FlushSinks();
  sinks_.Retry(now);
  if (metrics_) metrics_->Service([this] { return RenderMetrics(); });
  if (now - rate_last_ns_ >= 1000000000) {
    events_per_second_ = static_cast<double>(consumed_ - rate_last_delivered_) * 1e9 / static_cast<double>(now - rate_last_ns_);
    rate_last_delivered_ = consumed_;
    rate_last_ns_ = now;
  }
  tails_->ExpireClosing(now);
}

// ---- delivery -------------------------------------------------------------------

void Agent::Deliver(const v1::AuditEvent& event) {
  sinks_.Write(event);
  tails_->Broadcast(event);
}

// ---- clients --------------------------------------------------------------------

void Agent::Accept() {
  for (;;) {
    UniqueFd fd(::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd.valid()) return;
    struct ucred cred = {};
    socklen_t len = sizeof cred;
    auto refuse = [&](const std::string& why) {
      v1::Response r;
      r.set_error(why);
      std::string frame = EncodeFrame(r);
      (void)!::send(fd.get(), frame.data(), frame.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    };
    if (::getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != 0) {
      refuse("only root may use the agent's control socket");
      continue;
    }
    // A sandboxed root is still root: a peer inside any sandbox is refused
    // whatever its uid (it could replace its own policy), and so is one
    // whose cgroup cannot be established.
    if (auto sandbox = SandboxOfPeer(fd.get(), cgroup_mount_, pin_root_); !sandbox || *sandbox != 0) {
      refuse(sandbox ? "the agent refuses requests from inside a sandbox (sandbox " + std::to_string(*sandbox) + ")"
                     : "the agent refuses this peer: " + sandbox.error().ToString());
      // Logged at most every 10 s: a sandbox can connect in a loop.
      static int64_t last_logged_ns = 0;
      static uint64_t unlogged = 0;
      if (MonoNs() - last_logged_ns >= 10'000'000'000LL) {
        Log("refused a control connection from pid " + std::to_string(cred.pid) +
            (sandbox ? " inside sandbox " + std::to_string(*sandbox) : ": " + sandbox.error().ToString()) +
            (unlogged ? " (and " + std::to_string(unlogged) + " more since the last report)" : ""));
        last_logged_ns = MonoNs();
        unlogged = 0;
      } else {
        ++unlogged;
      }
      continue;
    }
    if (tails_->clients().size() >= config_.max_clients) {
      refuse("too many clients (tail.maxClients = " + std::to_string(config_.max_clients) + ")");
      continue;
    }
    tails_->Add(std::move(fd), static_cast<uint32_t>(cred.pid));
  }
}

void Agent::Handle(Client& c, const std::string& payload) {
  v1::Request req;
  if (!req.ParseFromString(payload)) {
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

std::string Agent::RenderMetrics() {
  AgentMetrics m;
  m.events_total = consumed_;
  m.events_per_second = events_per_second_;
  m.sink_write_failures = sinks_.failures();
  for (const auto& slot : sinks_.slots()) m.sink_failures_by_sink[slot.config.Name()] = slot.failed;
  m.tailer_drops = tails_->drops();
  for (const auto& [key, c] : tails_->clients()) m.tailers_connected += c->tail ? 1 : 0;
  m.tailers_disconnected_slow = tails_->disconnected();
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
    s.level = Level(sb->flags);
    if (auto counters = OpenSandboxMap(id, "counters"))
      if (auto sums = ReadCounters(counters->get())) s.counters = *sums;
    s.events_delivered = sb->delivered;
    s.events_suppressed = sb->suppression.suppressed();
    s.ringbuf_lost = sb->lost;
    m.sandboxes.push_back(std::move(s));
  }
  return RenderPrometheus(m);
}

void Agent::Shutdown() {
  // Everything the ring buffers hold goes out before we do.
  std::vector<uint64_t> ids;
  for (const auto& [id, sb] : sandboxes_) ids.push_back(id);
  uint64_t drained = 0;
  for (uint64_t id : ids) drained += Finish(id);
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
      uint64_t id = key & ((1ull << 56) - 1);
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
          Accept();
          break;
        case kTimer:
          Tick();
          break;
        case kMetrics:
          if (metrics_) metrics_->Service([this] { return RenderMetrics(); });
          break;
        case kClient:
          tails_->OnReady(id, evs[i].events);
          break;
        case kSandbox: {
          auto it = sandboxes_.find(id);
          if (it != sandboxes_.end()) DrainSandbox(*it->second, kDrainBudget);
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
    sinks_.FlushBatches();
    tails_->FlushAll();
    tails_->Reap();
  }
  Shutdown();
  return 0;
}

}  // namespace

Status CheckPinnedLayout() {
  struct statfs sfs;
  if (::statfs(kBpffsDefault, &sfs) != 0 || sfs.f_type != BPF_FS_MAGIC) return {};  // no bpffs: no state
  const std::string base = std::string(kBpffsDefault) + "/cordon";
  auto names = ListDir(base);
  if (!names) return {};  // nothing pinned yet
  std::vector<std::string> problems;
  for (const auto& name : *names) {
    if (name.size() < 2 || name[0] != 'v' || !IsNumber(name.substr(1))) continue;
    if (name == "v" + std::to_string(CORDON_LAYOUT_VERSION)) continue;
    problems.push_back(base + "/" + name + " holds state of layout version " + name.substr(1));
  }
  const std::string sandboxes = base + "/v" + std::to_string(CORDON_LAYOUT_VERSION) + "/sandboxes";
  if (auto ids = ListDir(sandboxes)) {
    for (const auto& name : *ids) {
      if (!IsNumber(name)) continue;
      bool foreign = false;
      auto pinned = ReadPinnedInfo(sandboxes + "/" + name, &foreign);
      if (!pinned && foreign) problems.push_back(pinned.error().ToString());
    }
  }
  if (problems.empty()) return {};
  std::string list;
  for (const auto& p : problems) list += (list.empty() ? "" : "; ") + p;
  return Error{"refusing to start: " + list + ". This cordon understands state layout version " +
               std::to_string(CORDON_LAYOUT_VERSION) +
               " only; nothing was touched. Use the cordon that wrote that state (its agent, or its detach)"};
}

int RunAgent(const AgentConfig& config) {
  Agent agent(config);
  Status started = agent.Start();
  if (!started.ok()) {
    std::fprintf(stderr, "cordon: agent: %s\n", started.error().ToString().c_str());
    return 1;
  }
  return agent.Loop();
}

}  // namespace cordon::agent
