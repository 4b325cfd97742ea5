#include "agent/sink_fanout.h"

#include <unistd.h>

#include "agent/log.h"
#include "events/json_line.h"
#include "util/clock.h"

namespace cordon::agent {

namespace {
constexpr int64_t kSinkErrorLogEveryNs = 10000000000;
constexpr int64_t kSyslogRetryNs = 10000000000;
}  // namespace

std::string SinkConfig::Name() const {
  switch (kind) {
    case Kind::kJsonl: return "jsonl:" + path;
    case Kind::kStdout: return "stdout";
    case Kind::kSyslog:
      if (!remote.host.empty())
        return "syslog:" + std::string(remote.tls ? "tls://" : "tcp://") +
               (remote.host.find(':') != std::string::npos ? "[" + remote.host + "]" : remote.host) + ":" +
               std::to_string(remote.port);
      return "syslog:" + socket;
  }
  return "?";
}

Status SinkFanout::Open(const std::vector<SinkConfig>& configs) {
  for (const auto& sc : configs) {
    SinkSlot slot;
    slot.config = sc;
    switch (sc.kind) {
      case SinkConfig::Kind::kJsonl: {
        JsonlOptions options = sc.jsonl;
        options.repair_torn_tail = true;  // the agent lock makes it the only writer
        auto sink = JsonlFileSink::Open(sc.path, options);
        if (!sink) return sink.error().Wrap("sink " + sc.Name());
        slot.sink = std::move(*sink);
        break;
      }
      case SinkConfig::Kind::kStdout:
        slot.sink = std::make_unique<StreamSink>(STDOUT_FILENO, sc.format);
        break;
      case SinkConfig::Kind::kSyslog: {
        if (!sc.remote.host.empty()) {
          RemoteSyslogOptions options = sc.remote;
          options.facility = sc.facility;
          options.body = sc.body;
          auto sink = RemoteSyslogSink::Open(options);
          if (!sink) return sink.error().Wrap("sink " + sc.Name());
          slot.sink = std::move(*sink);
          break;
        }
        // The syslog daemon may come up after the agent: retried, and events
        // meanwhile counted as failed writes of this sink.
        auto sink = SyslogSink::Open(sc.socket, "cordon", sc.facility, sc.body);
        slot.last_open_try_ns = MonoNs();
        if (sink) {
          slot.sink = std::move(*sink);
        } else {
          slot.last_error = sink.error().ToString();
          Log("sink " + sc.Name() + ": " + slot.last_error + " (retried every 10 s; events count as failed)");
        }
        break;
      }
    }
    slots_.push_back(std::move(slot));
  }
  if (slots_.empty()) Log("no sinks configured: events reach only tailers");
  return {};
}

void SinkFanout::Failed(SinkSlot& slot, uint64_t events, const Error& error) {
  slot.failed += events;
  failures_ += events;
  slot.failing = true;
  slot.last_error = error.ToString();
  int64_t now = MonoNs();
  if (now - slot.last_log_ns >= kSinkErrorLogEveryNs) {
    slot.last_log_ns = now;
    Log("sink " + slot.config.Name() + ": " + slot.last_error + " (" + std::to_string(slot.failed) +
        " events not written so far)");
  }
}

void SinkFanout::Write(const cordon::v1::AuditEvent& event) {
  // The line is rendered once, into the first sink that takes lines, and
  // copied from there into the others.
  const SinkSlot* rendered = nullptr;
  size_t line_start = 0;
  for (auto& slot : slots_) {
    if (slot.sink && slot.sink->TakesJsonLines()) {
      if (!rendered) {
        line_start = slot.batch.size();
        AppendJsonLine(event, &slot.batch);
        slot.batch.push_back('\n');
        rendered = &slot;
      } else {
        slot.batch.append(rendered->batch, line_start, std::string::npos);
      }
      slot.batch_count++;
      continue;
    }
    Status s = slot.sink ? slot.sink->Write(event) : Status(Error{slot.last_error.empty() ? "not open" : slot.last_error});
    if (s.ok()) slot.written++;
    else Failed(slot, 1, s.error());
  }
  if (rendered)
    for (auto& slot : slots_)
      if (slot.batch.size() >= kSinkBatchBytes) Flush(slot);
}

void SinkFanout::Flush(SinkSlot& slot) {
  if (!slot.batch_count) return;
  Status s;
  size_t written = slot.sink->WriteLines(slot.batch, slot.batch_count, &s);
  slot.written += written;
  if (written < slot.batch_count) Failed(slot, slot.batch_count - written, s.ok() ? Error{"short write"} : s.error());
  else if (!s.ok()) slot.last_error = s.error().ToString();  // written, but not synced
  else slot.failing = false;
  slot.batch.clear();
  slot.batch_count = 0;
  if (slot.batch.capacity() > 2 * kSinkBatchBytes) slot.batch.shrink_to_fit();
}

void SinkFanout::FlushBatches() {
  for (auto& slot : slots_) Flush(slot);
}

void SinkFanout::FlushSinks() {
  for (auto& slot : slots_)
    if (slot.sink) (void)slot.sink->Flush();
}

void SinkFanout::Retry(int64_t now_ns) {
  for (auto& slot : slots_) {
    // A remote sink's sender reconnects by itself: its faults are logged here
    // (each new one, at most every 10 s).
    if (auto* remote = dynamic_cast<RemoteSyslogSink*>(slot.sink.get())) {
      auto stats = remote->stats();
      if (stats.connects != slot.remote_connects) {
        slot.remote_connects = stats.connects;
        Log("sink " + slot.config.Name() + " connected");
      }
      if (!stats.last_error.empty() && stats.last_error != slot.remote_error &&
          now_ns - slot.last_log_ns >= kSinkErrorLogEveryNs) {
        slot.remote_error = stats.last_error;
        slot.last_log_ns = now_ns;
        Log("sink " + slot.config.Name() + ": " + stats.last_error);
      }
      continue;
    }
    if (slot.sink || slot.config.kind != SinkConfig::Kind::kSyslog) continue;
    if (now_ns - slot.last_open_try_ns < kSyslogRetryNs) continue;
    slot.last_open_try_ns = now_ns;
    auto sink = SyslogSink::Open(slot.config.socket, "cordon", slot.config.facility);
    if (sink) {
      slot.sink = std::move(*sink);
      Log("sink " + slot.config.Name() + " connected");
    }
  }
}

void SinkFanout::Close() {
  for (auto& slot : slots_)
    if (slot.sink) {
      (void)slot.sink->Flush();
      if (auto* jsonl = dynamic_cast<JsonlFileSink*>(slot.sink.get())) (void)jsonl->Sync();
    }
}

uint32_t SinkFanout::KeepOf(const std::string& path) const {
  uint32_t keep = 0;
  for (const auto& slot : slots_)
    if (slot.config.kind == SinkConfig::Kind::kJsonl && slot.config.path == path) keep = slot.config.jsonl.keep;
  return keep;
}

}  // namespace cordon::agent
