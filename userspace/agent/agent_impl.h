// The Agent behind RunAgent (agent.h): one thread, one epoll loop. The class
// is written in three files:
//   agent.cc     start, the loop and its 100 ms tick, shutdown, metrics
//   adoption.cc  sandboxes: adopting pinned ones, draining their ring
//                buffers, delivering their events, suppression records
//   handlers.cc  control requests: status, tail, attach/update, detach/release
// Its parts with state of their own are classes of their own: SinkFanout
// (sink_fanout.h), TailServer (tail_server.h), Suppression and PendingState
// (suppression.h); the control socket's listener is control_socket.h and the
// pinned state it reads is pinned.h.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/config.h"
#include "agent/credential_worker.h"
#include "agent/metrics.h"
#include "agent/pinned.h"
#include "agent/sink_fanout.h"
#include "agent/suppression.h"
#include "agent/tail_server.h"
#include "events/decoder.h"
#include "events/reader.h"
#include "ops/contain.h"
#include "ops/name_service.h"
#include "ops/oidc.h"
#include "ops/ops.h"
#include "ops/resource_watch.h"
#include "util/fd.h"
#include "util/result.h"

namespace cordon::agent {

constexpr int kDrainBudget = 4096;  // records per sandbox per loop turn

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
  uint64_t quiet = 0;  // of the delivered: matched the policy's spec.quiet
  uint64_t lost = 0;
  uint64_t backlog = 0;
  Suppression suppression;
  UniqueFd state_fd;               // the containment state map (opened on first use)
  bool containment_tried = false;  // the kernel's containment was completed (or tried) by this agent
  bool containment_queued = false;  // ... is being completed on the containment worker
  // Its cgroup's resource counters (ops/resource_watch.h), watched in the
  // loop (inotify, PSI): null when its cgroup has none of their files.
  std::unique_ptr<ops::ResourceWatch> resources;
  // spec.resources.wallTime of an attached sandbox: CLOCK_REALTIME when it
  // is reached, counted from the moment the policy that set it was put in
  // force (0: none, or reported); `cordon run` keeps its own.
  int64_t wall_deadline_ns = 0;
  uint64_t wall_time_s = 0;
  bool contain_at_wall_time = false;  // spec.onViolation: contain
  bool egress_cut = false;            // its connections were destroyed at its egress budget (CutEgress)
  // Name rules of a sandbox the agent keeps (not a `cordon run`'s, which runs
  // its own): cordon's resolver for it (ServeNames); null without any.
  std::unique_ptr<ops::NameService> names;
};

// Between the loop and the worker completing kernel containments: the
// worker asks the loop to drain a sandbox's ring buffer to the audit file
// before its evidence reads it, and hands back what each containment did.
struct ContainmentHandoff {
  struct Done {
    uint64_t id = 0;
    bool by_kernel = false;  // CORDON_STATE_F_AUTO was set
    // Asked for by a client (`cordon contain` through the agent): its
    // TailServer key and pid, answered when done; 0: the kernel's.
    uint64_t client = 0;
    uint32_t client_pid = 0;
    bool kill = false;  // --kill was asked for
    bool by_wall_time = false;  // spec.resources.wallTime reached (onViolation: contain)
    // Not a containment: the sandbox's connections destroyed at its egress
    // budget (CutEgress); out has their events, or the error.
    bool egress_cut = false;
    ops::ContainOutcome out;
  };
  std::mutex mu;
  std::vector<std::pair<uint64_t, std::shared_ptr<std::promise<void>>>> drains;
  std::vector<Done> done;
};

// What an epoll event is for: the tag in the key's top byte, an id below.
enum Tag : uint64_t {
  kSignal = 1,
  kListen,
  kTimer,
  kMetrics,
  kClient,
  kSandbox,
  kCompiled,
  kResources,
  kPressure,
  kNames
};
constexpr uint64_t kKeyIdMask = (1ull << 56) - 1;
constexpr uint64_t Key(Tag tag, uint64_t id) { return (static_cast<uint64_t>(tag) << 56) | (id & kKeyIdMask); }

class Agent {
 public:
  explicit Agent(AgentConfig config) : config_(std::move(config)) {}
  ~Agent();
  Status Start();
  int Loop();

 private:
  // setup (agent.cc)
  Status Lock();
  void Watch(int fd, uint64_t key, uint32_t events);
  void Tick();
  void PrepareInstance();
  std::string RenderMetrics();
  void Shutdown();
  // The built-in OIDC issuer's keys (oidc.keyDir): loaded, or made, at
  // start; read again when their files change (`cordon oidc rotate`). Its
  // discovery document and JWKS are served on the metrics listener and
  // written to oidc.publishDir.
  void LoadOidc();
  std::optional<HttpDocument> OidcDocument(const std::string& path);
  // /healthz, else OidcDocument.
  std::optional<HttpDocument> Document(const std::string& path);

  // sandboxes (adoption.cc)
  void Rescan();
  Status Adopt(uint64_t id, const PinnedInfo& pinned);
  Status AdoptNow(uint64_t id);
  // Final drain; stops reading; returns records drained. `ended`: the
  // sandbox is detached (or detaching): every count of repeats is taken too
  // (else the next reader takes them).
  uint64_t Finish(uint64_t id, bool ended);
  void DrainSandbox(Sandbox& sb, int budget);  // one batch, written out and committed
  void DrainAll(Sandbox& sb);
  void Commit(Sandbox& sb);
  // After a policy replacement: what waits is decoded under the old names,
  // then the new ones apply.
  void Refresh(Sandbox& sb, const PinnedInfo& pinned);
  // The sandbox's spec.quiet patterns of that generation (null: none, or
  // not readable, which is logged: its events are then not marked quiet).
  std::shared_ptr<const std::vector<policy::QuietPattern>> QuietOf(uint64_t id, uint32_t generation);
  void OnEvent(Sandbox& sb, const cordon::v1::AuditEvent& event);
  // Resources (adoption.cc): the sandbox's counters watched from its
  // adoption (and again after a policy replacement) to its end; their
  // events, with the sandbox's context, through Admit and OnEvent like any.
  void WatchResources(Sandbox& sb, const PinnedInfo& pinned);
  // The policy in force has name rules: its resolver started (again, for a
  // replacement); `final`: its last events delivered before it goes.
  void ServeNames(Sandbox& sb, const PinnedInfo& pinned);
  void DeliverNames(Sandbox& sb, bool final);
  void PollResources(Sandbox& sb, bool final);
  void CutEgress(Sandbox& sb);  // spec.resources.egressBytes reached
  void ReadResourceNotifications();  // inotify_fd_ readable: polls the sandboxes it names
  void DeliverOwn(Sandbox& sb, cordon::v1::AuditEvent event);
  void CheckWallTime(Sandbox& sb, int64_t now_real_ns);
  bool Admit(Sandbox& sb, const v1::AuditEvent& event);
  // Stops holding the sandbox's attached credentials (waiting for a program
  // of theirs in progress); their files and state stay, for a detach or a
  // containment to end them, or to be taken over again.
  void LetGoOfCredentials(uint64_t id);
  void EmitSuppressed(Sandbox& sb, bool final, int64_t now);
  // spec.credentials of attached sandboxes (credential_worker.h): held from
  // an attach through the agent, or taken over from the state a `cordon
  // attach` without agent, or an agent before this one, left (every 2 s,
  // for the sandboxes this agent reads). Each tick: their due refreshes,
  // expiries and revokes posted to the worker, its events delivered; every
  // 2 s: the sweep of what dead cordon processes left, and the end of held
  // ones whose sandbox is gone.
  void ServiceCredentials(bool every_2s);
  void AdoptCredentials();
  void HoldCredentials(uint64_t id, std::shared_ptr<ops::SandboxCredentials> creds);
  void ReleaseCredentials();  // at shutdown: the next agent takes them over
  ops::OidcContext CredentialOidc() const;
  void Deliver(const cordon::v1::AuditEvent& event);  // to the sinks and the tails
  void FlushDeliveries();  // what was delivered outside a drain goes out

  // control requests (handlers.cc)
  void Handle(Client& c, const std::string& payload);
  void HandleStatus(Client& c);
  void HandleTail(Client& c, const cordon::v1::TailRequest& req);
  void HandleAttach(Client& c, ops::AttachRequest request, bool must_exist);  // ops::Attach or ops::Update
  // Attach and update: the policy is parsed and compiled on compile_worker_
  // (a large policy takes seconds: events keep being drained meanwhile, and
  // the client's next requests wait), then attached here, in the loop.
  void CompileThenAttach(Client& c, ops::AttachRequest request, bool must_exist);
  void OnCompiled();  // compile_fd_ readable: the compiled requests are attached
  void HandleDrain(Client& c, uint64_t id, bool detach, bool release);
  // A sandbox the kernel contained (spec.onViolation: contain): frozen and
  // its evidence taken, once, on contain_worker_ (handlers.cc): freezing,
  // destroying sockets and the evidence take seconds, while every ring
  // buffer keeps being drained.
  void CheckContainment(Sandbox& sb);
  // Each loop turn: the drains the worker asks for, and the containments it
  // completed (their events delivered, logged).
  void ServiceContainments();
  // A contain request of this agent: its audit file, the sandbox's held
  // credentials let go of (the containment revokes them).
  ops::ContainRequest AgentContainRequest(uint64_t sandbox_id, std::string by);
  // Runs the containment on the containment worker; the loop drains the
  // sandbox's ring buffer to the audit file when the evidence asks
  // (ServiceContainments) and delivers what it did when it is done.
  void ContainOnWorker(ops::ContainRequest request, ContainmentHandoff::Done done);
  void HandleContain(Client& c, const cordon::v1::ContainRequest& req);  // ops::Contain
  void HandleReleaseContainment(Client& c,
                                const cordon::v1::ReleaseContainmentRequest& req);  // ops::ReleaseContainment

  AgentConfig config_;
  std::string cgroup_mount_;
  std::string pin_root_;
  UniqueFd lock_fd_;
  UniqueFd listen_fd_;
  ino_t socket_ino_ = 0;
  UniqueFd epoll_fd_;
  UniqueFd signal_fd_;
  UniqueFd timer_fd_;
  // The sandboxes' resource files (memory.events, pids.events): one inotify
  // instance, each watch descriptor's sandbox in inotify_owner_.
  UniqueFd inotify_fd_;
  std::map<int, uint64_t> inotify_owner_;
  std::unique_ptr<MetricsServer> metrics_;
  std::string metrics_address_;
  std::optional<ops::OidcSigner> oidc_;
  std::string oidc_issuer_, oidc_stamp_;
  SinkFanout sinks_;
  std::unique_ptr<TailServer> tails_;  // made once the epoll set exists
  PendingState pending_;
  std::map<uint64_t, std::unique_ptr<Sandbox>> sandboxes_;
  std::map<uint64_t, std::shared_ptr<HeldCredentials>> held_;
  std::unique_ptr<CredentialWorker> cred_worker_;
  // Policies of attach and update requests being compiled (CompileThenAttach):
  // the worker runs one job at a time (the credential worker's class, its own
  // thread), queues the result and wakes the loop through compile_fd_.
  // Each queued request's bytes count against control.partialFramesMaxBytes
  // until OnCompiled (TailServer::Hold); one whose client is gone before its
  // compilation starts is dropped there (nobody to answer; not carried out).
  struct CompiledRequest {
    uint64_t client = 0;  // TailServer key of the client that asked
    uint32_t pid = 0;     // of the client, for the log
    std::shared_ptr<std::atomic<bool>> client_gone;
    ops::AttachRequest request;
    bool must_exist = false;
    uint64_t held = 0;     // bytes held in the budget
    bool dropped = false;  // the client was gone before compiling started
    std::string error;     // the policy did not compile
  };
  std::unique_ptr<CredentialWorker> compile_worker_;
  UniqueFd compile_fd_;  // eventfd
  std::mutex compiled_mu_;
  std::vector<CompiledRequest> compiled_;
  // The same kind of worker (one job at a time, in order), for containments:
  // never queued behind a credential program.
  std::unique_ptr<CredentialWorker> contain_worker_;
  std::shared_ptr<ContainmentHandoff> handoff_ = std::make_shared<ContainmentHandoff>();
  std::shared_ptr<std::atomic<bool>> sweep_queued_ = std::make_shared<std::atomic<bool>>(false);
  std::set<uint64_t> released_;               // finished on request: not re-adopted while pinned
  std::map<uint64_t, std::string> problems_;  // pinned sandboxes this agent will not read
  bool stop_ = false;
  uint64_t ticks_ = 0;
  int64_t next_prepare_ns_ = 0;  // when to try pool_.Fill() again after a failure
  // The network instances loaded ahead for the next attaches, the thread
  // that loads them (so the loop, and a detach waiting in it, never wait for
  // that), and its error. The pool outlives the thread.
  NetworkInstancePool pool_;
  std::thread preparer_;
  std::atomic<bool> preparing_{false};
  std::mutex prepare_mu_;
  std::string prepare_error_;
  int64_t started_real_ns_ = 0;
  int64_t started_mono_ns_ = 0;
  // accounting since start
  uint64_t consumed_ = 0, delivered_ = 0, suppressed_ = 0, lost_ = 0, quiet_ = 0;
  uint64_t rate_last_delivered_ = 0;
  int64_t rate_last_ns_ = 0;
  double events_per_second_ = 0;
};

}  // namespace cordon::agent
