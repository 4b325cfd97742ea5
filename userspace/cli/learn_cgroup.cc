// `cordon learn --cgroup PATH --duration D`: the base policy attached to an
// existing cgroup in audit mode for a window, the sandbox's events collected
// (through the agent when one runs, else from its ring buffer directly), the
// sandbox detached, and a policy learned by the same synthesizer as the run
// form (policy/learn.h). Nothing stays attached: the window ends at D or at
// SIGINT, SIGTERM or SIGHUP, and the sandbox is detached before anything is
// written.
#include <poll.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <optional>

#include "agent/control.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/learn.h"
#include "cli/sandboxes.h"
#include "cli/tail.h"
#include "events/learn_trail.h"
#include "events/reader.h"
#include "events/sink.h"
#include "loader/kernel_features.h"
#include "loader/lsm.h"
#include "loader/sandbox.h"
#include "ops/ops.h"
#include "sys/bpffs.h"
#include "sys/cgroup.h"
#include "util/clock.h"
#include "util/text.h"

namespace cordon::cli {
namespace {

namespace v1 = cordon::v1;

constexpr int kAgentAnswerMs = 60000;  // an attach or a release through the agent, per frame

std::atomic<int> g_stop_signal{0};
void OnStopSignal(int sig) { g_stop_signal = sig; }

// SIGINT, SIGTERM and SIGHUP end the window. They are caught (a flag) and
// blocked except while learn waits (wait_mask), so one that arrives between
// a look at the flag and the wait ends that wait at once. One that arrives
// while the sandbox is being attached ends the window as soon as it is.
class StopSignals {
 public:
  StopSignals() {
    struct sigaction sa = {};
    sa.sa_handler = OnStopSignal;
    sigemptyset(&blocked_);
    for (int sig : kSignals) {
      ::sigaction(sig, &sa, nullptr);
      sigaddset(&blocked_, sig);
    }
    ::sigprocmask(SIG_BLOCK, &blocked_, &wait_);
    for (int sig : kSignals) sigdelset(&wait_, sig);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  const sigset_t* wait_mask() const { return &wait_; }
  int received() const { return g_stop_signal; }

 private:
  static constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
  sigset_t blocked_, wait_;
};

const char* SignalName(int sig) { return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP"; }

std::string Seconds(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ns) / 1e9);
  return buf;
}

// What attached processes show of the base policy's controls on this
// kernel, when BPF LSM is not usable (empty when it is).
std::vector<std::string> Unobservable(const policy::CompiledPolicy& compiled, const LsmAvailability& lsm) {
  std::vector<std::string> out;
  if (lsm.usable()) return out;
  if (compiled.has_files)
    out.push_back(
        "files: only successful opens and executions are seen (the detect object), not a directory made, a file "
        "removed, renamed or changed in its metadata without being opened for writing, or the script of a #! "
        "program");
  for (auto& line : UndeliverableInAttach(compiled, lsm)) out.push_back(line + ": not seen");
  return out;
}

// The window's events, however they arrive: the trail, and the --audit file.
class Collector {
 public:
  explicit Collector(AuditSink* sink) : sink_(sink) {}
  void Event(const v1::AuditEvent& event) {
    trail.Add(event);
    if (!sink_) return;
    Status st = sink_->Write(event);
    if (!st.ok() && sink_status.ok()) sink_status = st;
  }
  // A tail frame from the agent: an event, a notice (what this command fell
  // behind on), or the response to a request. False when the agent ends the
  // tail (*ended says why).
  bool Frame(const v1::TailFrame& frame, std::optional<v1::Response>* response, std::string* ended) {
    if (frame.has_event()) {
      Event(frame.event());
    } else if (frame.has_notice()) {
      not_received += frame.notice().dropped();
      if (!frame.notice().disconnect_reason().empty()) {
        *ended = "the agent ended the stream: " + frame.notice().disconnect_reason();
        return false;
      }
    } else if (frame.has_response()) {
      *response = frame.response();
    }
    return true;
  }
  void Flush() {
    if (!sink_) return;
    Status st = sink_->Flush();
    if (!st.ok() && sink_status.ok()) sink_status = st;
  }

  LearnTrail trail;
  uint64_t not_received = 0;  // the agent had them; this command fell behind (its sinks have them)
  Status sink_status;

 private:
  AuditSink* sink_;
};

// Frames from the agent until the response to the request just sent; the
// events before it are collected. Waits out signals: the request was made.
Result<v1::Response> AwaitResponse(agent::AgentClient& client, Collector& collector, const sigset_t* wait_mask) {
  for (;;) {
    auto frame = client.ReadFrame(kAgentAnswerMs, wait_mask);
    if (!frame) {
      if (frame.error().err == EINTR) continue;
      return frame.error();  // ETIMEDOUT: no answer within kAgentAnswerMs
    }
    v1::TailFrame tf;
    if (!tf.ParseFromString(*frame)) return Error{"the agent sent a malformed frame"};
    std::optional<v1::Response> response;
    std::string ended;
    if (!collector.Frame(tf, &response, &ended)) return Error{ended};
    if (response) return *response;
  }
}

}  // namespace

int LearnFromCgroup(const ParsedArgs& parsed, const policy::ParsedPolicy& base, const policy::CompiledPolicy& compiled,
                    const std::string& name) {
  const bool quiet = parsed.Has("--quiet"), verbose = parsed.Has("--verbose");
  const std::string duration_text = *parsed.Get("--duration");
  int64_t window_ns = 0;
  (void)ParseDuration(duration_text, &window_ns);  // checked by the parser
  const std::string out_path = parsed.Get("--out").value_or("");
  const std::string report_path = parsed.Get("--report").value_or("");
  if (!out_path.empty() && out_path == report_path) return LearnUsage("--out and --report name the same file");

  auto cgroup = ResolveCgroup(*parsed.Get("--cgroup"));
  if (!cgroup) return PrintError(cgroup.error().ToString() + "; nothing learned"), 1;
  const std::string shown_cgroup = DisplayText(EscapeWorkloadBytes(cgroup->path));
  // Learning replaces the policy in force, and the pins keep the compiled
  // policy, not its file: nothing could put the old one back afterwards.
  if (auto existing = GetSandbox(cgroup->id))
    return PrintError("sandbox '" + DisplayText(existing->name) + "' (policy '" + DisplayText(existing->policy) +
                      "', " + ModeName(existing->mode) + " mode) is attached to " + shown_cgroup +
                      " already: learning would replace its policy, which cordon cannot put back afterwards; nothing "
                      "learned (detach it first, or learn in a cgroup of its own)"),
           1;
  const LsmAvailability& lsm = ProbeLsm();
  const std::vector<std::string> unobservable = Unobservable(compiled, lsm);
  if (!unobservable.empty() && !parsed.Has("--allow-degraded")) {
    std::string list;
    for (const auto& line : unobservable) list += "\n  " + line;
    return PrintError("in processes cordon attaches to, this kernel does not show (" + lsm.detail + "):" + list +
                      "\nNothing learned; pass --allow-degraded to learn from the rest, or see `cordon doctor`"),
           1;
  }

  // The policy watched: the base in audit mode, without what an attach would
  // leave behind (resource limits stay in the cgroup's files) or refuses
  // (credentials). Both are kept in the learned policy.
  policy::ParsedPolicy watched = base;
  std::vector<std::string> closing;
  {
    v1::Spec* spec = watched.proto.mutable_spec();
    if (spec->has_resources() || spec->credentials_size() > 0)
      closing.push_back(
          "note: the base policy's spec.resources and spec.credentials were not applied while learning (an attach "
          "would leave the limits in the cgroup, and does not issue credentials); the learned policy keeps them");
    spec->clear_resources();
    spec->clear_credentials();
    spec->set_mode("audit");
  }
  const std::string policy_file = parsed.Get("--policy").value_or("");
  const std::string watched_text = policy::PolicyJson(watched);
  ops::AttachRequest request;
  request.cgroup = cgroup->path;
  request.policy_file = policy_file.empty() ? "<default>" : policy_file;
  request.mode = "audit";
  request.name = parsed.Get("--name").value_or("");
  request.allow_degraded = true;  // said above, or refused
  request.wording = ops::Wording::kCli;
  {
    policy::CompiledPolicy c;
    std::string error;
    if (!ops::CompilePolicyText(watched_text, request.policy_file, "audit", &c, &error))
      return PrintError(error + " (the base policy in audit mode: a bug in cordon learn); nothing learned"), 1;
    request.compiled = std::move(c);
  }

  std::unique_ptr<JsonlFileSink> audit;
  if (auto path = parsed.Get("--audit")) {
    auto sink = JsonlFileSink::Open(*path);
    if (!sink) return PrintError(sink.error().ToString() + "; nothing learned"), 1;
    audit = std::move(*sink);
  }
  Collector collector(audit.get());
  auto mount = FindCgroup2Mount();
  if (!mount) return PrintError(mount.error().ToString() + "; nothing learned"), 1;
  EventReader reader(*mount, [&collector](const v1::AuditEvent& event) { collector.Event(event); });
  bool reading = false;  // this command reads the ring buffer itself
  // Takes the sandbox's ring buffer (its lock refuses a second reader).
  auto read_directly = [&](uint64_t id) -> Status {
    auto info = GetSandbox(id);
    if (!info) return info.error();
    auto events = OpenSandboxMap(id, "events");
    if (!events) return events.error();
    auto counters = OpenSandboxMap(id, "counters");
    if (!counters) return counters.error();
    CORDON_TRY(reader.Add(DirectReaderContext(*info), std::move(*events), std::move(*counters)));
    reading = true;
    return {};
  };

  StopSignals stop;
  const int64_t start_ns = RealNowNs();  // what exists before this was not made by the workload
  std::optional<agent::AgentClient> client;
  bool agent_failed = false;
  const bool through_agent = agent::ReachAgent(&client, &agent_failed);
  if (agent_failed) return PrintError("nothing learned"), 1;

  // ---- attach, in audit mode
  ops::AttachOutcome attached;
  std::string link_problem;  // the agent's stream ended during the window: why
  if (through_agent) {
    // The tail first (of this cgroup's sandbox, which does not exist yet),
    // then the attach on the same connection: the agent reads the sandbox
    // from its attach on, and every event reaches this stream, in order with
    // the responses.
    v1::Request tail;
    tail.mutable_tail()->set_follow(true);
    tail.mutable_tail()->add_sandbox_ids(cgroup->id);
    auto started = client->Call(tail, 10000);
    if (!started || !started->error().empty())
      return PrintError("agent: " + (started ? started->error() : started.error().ToString()) + "; nothing learned"), 1;
    const Status sent = client->Send(AttachRequestFrame(request, watched_text, false));
    auto response =
        sent.ok() ? AwaitResponse(*client, collector, stop.wait_mask()) : Result<v1::Response>(sent.error());
    if (!response) {
      // Whether it attached is not known: if it did, it is detached here.
      PrintError("agent: " + response.error().ToString());
      if (auto now = GetSandbox(cgroup->id)) {
        const ops::DetachOutcome d = ops::Detach({cgroup->id});
        if (!d.error.empty())
          return PrintError("the sandbox it attached is still attached to " + shown_cgroup + ": " + d.error +
                            " (cordon detach --cgroup PATH removes it); nothing learned"),
                 1;
      }
      return PrintError("nothing attached, nothing learned"), 1;
    }
    attached = AttachOutcomeOf(*response);
  } else {
    request.after_attach = [&](const AttachResult&, const CgroupRef& cg) {
      std::vector<std::string> notes;
      if (Status st = read_directly(cg.id); !st.ok())
        notes.push_back("learn cannot read its events: " + st.error().ToString());
      return notes;
    };
    attached = ops::Attach(request);
  }
  if (!attached.error.empty()) return PrintError(attached.error + "; nothing learned"), 1;
  const uint64_t id = attached.sandbox_id;
  // Detaches (the agent first delivers what the ring buffer holds; here it
  // is read after the detach, from the maps this command still holds).
  auto detach = [&]() -> std::string {
    if (through_agent && link_problem.empty()) {
      v1::Request release;
      release.mutable_release()->set_sandbox_id(id);
      release.mutable_release()->set_detach(true);
      const Status sent = client->Send(release);
      auto response =
          sent.ok() ? AwaitResponse(*client, collector, stop.wait_mask()) : Result<v1::Response>(sent.error());
      if (response && response->error().empty() && response->drain().detached()) return "";
      link_problem = "the agent did not detach the sandbox (" +
                     (response ? response->error() : response.error().ToString()) + "): detached here";
    }
    std::string error;
    if (reading || !through_agent) {
      const ops::DetachOutcome d = ops::Detach({id});
      error = d.error;
    } else {
      bool failed = false;
      auto sandboxes = PickSandboxes(&failed);
      error = sandboxes ? sandboxes->Detach({id}).error : "the agent cannot be reached";
    }
    if (reading) {
      (void)reader.Drain();
      reader.CheckLosses();
    }
    if (error.empty() && GetSandbox(id)) error = "the sandbox is still pinned";
    return error;
  };
  if (!through_agent && !reading) {
    const std::string error = detach();
    return PrintError(
               "learn cannot read the sandbox's events (an agent started meanwhile may have taken them: learn "
               "again); " +
               (error.empty() ? std::string("detached, ") : "NOT detached: " + error + "; ") + "nothing learned"),
           1;
  }
  // The retroactive check's events: through the agent they came in the
  // stream (it delivers them to its sinks and tailers before it answers).
  if (!through_agent)
    for (const auto& event : attached.retro_events) collector.Event(event);
  if (!quiet) {
    PrintNote("learning from " + shown_cgroup + " for " + duration_text + ": sandbox '" + DisplayText(attached.name) +
              "' attached in audit mode under policy '" + DisplayText(attached.policy) + "' (" +
              (through_agent ? "through the agent" : "its events read here") +
              "); SIGINT or SIGTERM ends the window early");
    if (verbose)
      for (const auto& note : attached.notes) PrintNote(note);
    for (const auto& line : unobservable) PrintNote("not seen on this kernel: " + line);
  }

  // ---- the window
  const int64_t window_start = MonoNs(), deadline = window_start + window_ns;
  while (!stop.received()) {
    const int64_t left = deadline - MonoNs();
    if (left <= 0) break;
    const int64_t wait_ns = std::min<int64_t>(left, 1000000000);
    if (through_agent && link_problem.empty()) {
      auto frame = client->ReadFrame(static_cast<int>((wait_ns + 999999) / 1000000), stop.wait_mask());
      std::string ended;
      if (frame) {
        v1::TailFrame tf;
        std::optional<v1::Response> unused;
        if (!tf.ParseFromString(*frame))
          ended = "the agent sent a malformed frame";
        else
          collector.Frame(tf, &unused, &ended);
      } else if (frame.error().err != ETIMEDOUT && frame.error().err != EINTR) {  // not the wait's end
        ended = frame.error().ToString();
      }
      if (ended.empty()) continue;
      // The agent went away (or dropped this stream): the ring buffer is
      // read here from now on if it is free, else the window ends.
      link_problem = ended;
      if (Status st = read_directly(id); !st.ok()) {
        link_problem += "; its events cannot be read here (" + st.error().ToString() + "): the window ended there";
        break;
      }
      link_problem += "; read here from then on";
      continue;
    }
    struct timespec ts = {static_cast<time_t>(wait_ns / 1000000000), static_cast<long>(wait_ns % 1000000000)};
    struct pollfd ready = {reader.epoll_fd(), POLLIN, 0};
    (void)::ppoll(&ready, 1, &ts, stop.wait_mask());
    (void)reader.Drain();
    reader.CheckLosses();
    collector.Flush();
  }
  const int64_t watched_ns = std::min(MonoNs() - window_start, window_ns);
  const int signal = stop.received();

  // ---- detach: nothing stays attached
  if (const std::string error = detach(); !error.empty())
    return PrintError("detaching the sandbox from " + shown_cgroup + " failed: " + error +
                      "; it is still attached in audit mode (cordon detach --cgroup PATH removes it); nothing "
                      "written"),
           1;
  collector.Flush();
  if (!quiet)
    PrintNote((signal
                   ? std::string("the window was cut short by ") + SignalName(signal) + " after " + Seconds(watched_ns)
                   : "the window of " + duration_text + " ended") +
              "; the sandbox is detached");

  // ---- the policy
  const LearnTrail& trail = collector.trail;
  policy::LearnRound round;
  round.label =
      "window (audit) of " + duration_text + " on " + shown_cgroup +
      (signal ? ", cut short by " + std::string(SignalName(signal)) + " after " + Seconds(watched_ns) : std::string()) +
      ", " + (through_agent ? "through the agent" : "read directly");
  round.events = trail.events;
  round.new_observations = trail.observations.size();
  round.lost = trail.lost;
  round.suppressed = trail.suppressed;
  round.not_received = collector.not_received;
  const policy::LearnResult learned =
      policy::Learn(base, compiled, trail.observations, {round}, HostFacts(start_ns), name);

  LearnEnding ending;
  ending.lost_hint = " (learn again with the learned policy as --policy to see what it misses)";
  if (signal)
    ending.warnings.push_back("the window was cut short after " + Seconds(watched_ns) + " of " + duration_text +
                              ": the policy covers what the workload did until then");
  if (!link_problem.empty())
    ending.warnings.push_back("the agent's stream of events ended during the window (" + link_problem +
                              "): events it read and had not sent are in its sinks, not in this trail");
  if (!attached.retro_error.empty())
    ending.warnings.push_back("the retroactive check failed (" + attached.retro_error +
                              "): connections open before the window were not looked at");
  if (!collector.sink_status.ok())
    ending.warnings.push_back("the --audit file is incomplete: " + collector.sink_status.error().ToString());
  if (!attached.retro_summary.empty()) closing.push_back("the retroactive check at attach: " + attached.retro_summary);
  if (trail.preexisting_connections)
    closing.push_back("learned as destinations: " + std::to_string(trail.preexisting_connections) +
                      " connection(s) open before the window that the base policy denies (an enforce attach would "
                      "destroy them)");
  if (trail.preexisting_files)
    closing.push_back(std::to_string(trail.preexisting_files) +
                      " process(es) held files open before the window: counted, not learned (reads and writes "
                      "through them are reported where BPF LSM works)");
  for (const auto& line : unobservable) closing.push_back("note: not seen on this kernel: " + line);
  closing.push_back(
      "note: the policy was not tried in enforce mode (cordon learn --cgroup again with it as --policy reports what "
      "it misses; cordon attach --policy FILE enforces it)");
  ending.closing = std::move(closing);
  return WriteLearned(learned, {round}, ending, out_path, report_path);
}

}  // namespace cordon::cli
