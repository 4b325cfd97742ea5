#include "cli/tail.h"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>

#include "events/audit_file.h"
#include "events/decoder.h"
#include "events/json_line.h"
#include "events/sink.h"
#include "util/text.h"

namespace cordon::cli {

using agent::AgentClient;
using agent::TailMatches;

bool ReplayAuditFile(int fd, uint64_t end_offset, const TailOptions& options) {
  std::string pending, out;
  uint64_t offset = 0;
  char buf[65536];
  size_t unparseable = 0;
  auto line_done = [&](const std::string& line) {
    if (line.empty()) return;
    cordon::v1::AuditEvent event;
    if (!ParseAuditLine(line, &event)) {
      unparseable++;
      return;
    }
    if (event.kind() == "chain.start") return;  // the audit file's own record, not an event
    int64_t ns = google::protobuf::util::TimeUtil::TimestampToNanoseconds(event.time());
    if (options.since_unix_ns > 0 && ns < options.since_unix_ns) return;
    if (!TailMatches(event, options)) return;
    out += options.json ? line : ToCompactLine(event, options.colour);
    out += '\n';
  };
  for (;;) {
    size_t want = sizeof buf;
    if (end_offset > 0) {
      if (offset >= end_offset) break;
      want = static_cast<size_t>(std::min<uint64_t>(want, end_offset - offset));
    }
    ssize_t n = ::pread(fd, buf, want, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    offset += static_cast<uint64_t>(n);
    pending.append(buf, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1)
      line_done(pending.substr(start, nl - start));
    pending.erase(0, start);
    if (out.size() > (1u << 16)) {
      if (!WriteAll(STDOUT_FILENO, out).ok()) return false;
      out.clear();
    }
  }
  line_done(pending);  // a last line without newline
  if (unparseable)
    std::fprintf(stderr, "cordon: replay: %zu unparseable audit-file line%s skipped\n", unparseable,
                 unparseable == 1 ? "" : "s");
  return out.empty() || WriteAll(STDOUT_FILENO, out).ok();
}

SandboxContext DirectReaderContext(const SandboxInfo& sandbox) {
  SandboxContext ctx{sandbox.id, sandbox.name, sandbox.policy, sandbox.cgroup_path, sandbox.policy_digest};
  auto quiet = ReadSandboxQuiet(sandbox.pin_dir, sandbox.generation);
  if (quiet)
    ctx.quiet = *quiet;
  else
    std::fprintf(stderr,
                 "cordon: warning: sandbox %s: its spec.quiet patterns cannot be read (its events are not "
                 "marked quiet): %s\n",
                 DisplayText(sandbox.name).c_str(), quiet.error().ToString().c_str());
  return ctx;
}

namespace {
std::atomic<bool> g_stop{false};
void OnStop(int) { g_stop = true; }
}  // namespace

int TailThroughAgent(AgentClient& client, const TailOptions& options) {
  cordon::v1::Request request;
  auto* tail = request.mutable_tail();
  tail->set_follow(options.follow);
  for (uint64_t id : options.sandbox_ids) tail->add_sandbox_ids(id);
  tail->set_sandbox_name(options.sandbox_name);
  tail->set_kind_prefix(options.kind_prefix);
  for (const auto& v : options.verdicts) tail->add_verdicts(v);
  tail->set_pid(options.pid);
  tail->set_until_unix_ns(options.until_unix_ns);
  tail->set_since_unix_ns(options.since_unix_ns);
  auto response = client.Call(request, 30000);
  if (!response) {
    std::fprintf(stderr, "cordon: %s\n", response.error().ToString().c_str());
    return 1;
  }
  if (!response->error().empty()) {
    std::fprintf(stderr, "cordon: agent: %s\n", response->error().c_str());
    return 1;
  }
  for (const auto& note : response->notes()) std::fprintf(stderr, "cordon: note: %s\n", note.c_str());
  // Replay first: the files end where the live stream begins.
  const auto& replay = response->tail().replay();
  for (int i = 0; i < replay.size(); ++i) {
    if (client.received_fds().empty()) {
      std::fprintf(stderr, "cordon: the agent named %s for replay but passed no file\n", replay[i].path().c_str());
      return 1;
    }
    UniqueFd fd = std::move(client.received_fds().front());
    client.received_fds().pop_front();
    if (!ReplayAuditFile(fd.get(), replay[i].end_offset(), options)) return 1;
  }

  struct sigaction sa = {};
  sa.sa_handler = OnStop;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  // Both stay blocked except while waiting for a frame: one that arrives
  // after the check of g_stop ends that wait at once instead of being
  // missed until the next frame (a tail stopped right after it printed
  // once waited forever).
  sigset_t stop_signals, wait_mask;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigprocmask(SIG_BLOCK, &stop_signals, &wait_mask);
  sigdelset(&wait_mask, SIGINT);
  sigdelset(&wait_mask, SIGTERM);
  // Lines are gathered while frames are already here, and written before
  // waiting for more (or at 64 KiB): one write() per bunch, whole lines only.
  std::string out;
  auto flush = [&] {
    bool ok = out.empty() || WriteAll(STDOUT_FILENO, out).ok();
    out.clear();
    return ok;
  };
  cordon::v1::TailFrame tf;
  for (;;) {
    if (g_stop) return flush() ? 0 : 1;
    if ((!client.FrameReady() || out.size() >= (1u << 16)) && !flush()) return 1;
    auto frame = client.ReadFrame(-1, &wait_mask);
    if (!frame) {
      if (frame.error().err == EINTR) continue;
      flush();
      std::fprintf(stderr, "cordon: %s\n", frame.error().ToString().c_str());
      return 1;
    }
    if (!tf.ParseFromString(*frame)) {
      flush();
      std::fprintf(stderr, "cordon: the agent sent a malformed frame\n");
      return 1;
    }
    if (tf.has_event()) {
      if (options.json) AppendJsonLine(tf.event(), &out);
      else out += ToCompactLine(tf.event(), options.colour);
      out += '\n';
      continue;
    }
    if (!flush()) return 1;
    if (tf.has_notice()) {
      const auto& n = tf.notice();
      if (n.dropped())
        std::fprintf(stderr,
                     "cordon: %llu events not shown: this tail fell behind (%llu in all; the agent's sinks have "
                     "them)\n",
                     static_cast<unsigned long long>(n.dropped()), static_cast<unsigned long long>(n.dropped_total()));
      if (!n.disconnect_reason().empty()) {
        std::fprintf(stderr, "cordon: the agent ended this tail: %s\n", n.disconnect_reason().c_str());
        return 1;
      }
      if (n.end()) return 0;
    }
  }
}

}  // namespace cordon::cli
