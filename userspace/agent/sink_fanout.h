// The agent's audit sinks: what agent.yaml configures (SinkConfig), and the
// fan-out that writes every delivered event to each of them and accounts per
// sink for what was written and what failed.
//
// Sinks that take audit-file lines get them batched: rendered once per event,
// written out by FlushBatches() (at the end of each ring-buffer batch, before
// its records are committed) and whenever kSinkBatchBytes have gathered. A
// syslog sink whose daemon is not up yet is opened again every 10 s; events
// meanwhile count as its failed writes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "event.pb.h"
#include "events/remote_syslog.h"
#include "events/sink.h"
#include "util/result.h"

namespace cordon::agent {

struct SinkConfig {
  enum class Kind { kJsonl, kStdout, kSyslog };
  Kind kind = Kind::kJsonl;
  // jsonl
  std::string path;
  JsonlOptions jsonl;
  // stdout
  StreamSink::Format format = StreamSink::Format::kJson;
  // syslog
  std::string socket = "/dev/log";
  int facility = 10;  // authpriv
  SyslogSink::Body body = SyslogSink::Body::kJson;  // format: rfc5424 | ocsf (local and remote)
  std::string facility_name = "authpriv";
  // syslog with address: tcp://HOST:PORT or tls://HOST:PORT: the remote sink
  // (events/remote_syslog.h); remote.host empty: the unix socket above.
  RemoteSyslogOptions remote;

  // "jsonl:/var/log/cordon/audit.jsonl", "stdout", "syslog:/dev/log",
  // "syslog:tls://collector.example:6514"
  std::string Name() const;
};

struct SinkSlot {
  SinkConfig config;
  std::unique_ptr<AuditSink> sink;  // null: not open (syslog without a daemon yet)
  std::string batch;                // lines not yet written
  size_t batch_count = 0;
  uint64_t written = 0;
  uint64_t failed = 0;
  std::string last_error;
  bool failing = false;  // the last write lost events (cleared by one that loses none)
  int64_t last_log_ns = 0;
  int64_t last_open_try_ns = 0;
  uint64_t remote_connects = 0;  // a remote syslog sink's connects, as last logged
  std::string remote_error;      // ... and its last fault logged
};

class SinkFanout {
 public:
  static constexpr size_t kSinkBatchBytes = 1 << 20;

  // Opens every configured sink. Fails for a jsonl file that cannot be
  // opened and a remote syslog sink whose spool or TLS files are unusable; a
  // syslog sink without a daemon is retried (Retry), a remote one reconnects
  // by itself (its sender logs the faults through Retry()).
  Status Open(const std::vector<SinkConfig>& configs);
  void Write(const cordon::v1::AuditEvent& event);
  void FlushBatches();  // writes the batched lines out
  void FlushSinks();    // asks each open sink to flush what it buffers itself
  void Retry(int64_t now_ns);  // syslog sinks not open yet
  // At shutdown, after FlushBatches(): flushes and syncs audit files.
  void Close();

  const std::vector<SinkSlot>& slots() const { return slots_; }
  uint64_t failures() const { return failures_; }  // events not written, all sinks, since start
  // Rotated files kept by the jsonl sink writing `path` (0 if none does).
  uint32_t KeepOf(const std::string& path) const;

 private:
  void Flush(SinkSlot& slot);
  void Failed(SinkSlot& slot, uint64_t events, const Error& error);

  std::vector<SinkSlot> slots_;
  uint64_t failures_ = 0;
};

}  // namespace cordon::agent
