// Audit sinks: where AuditEvents go.
//  - JsonlFileSink: one canonical-JSON event per line, appended (O_APPEND)
//    with one write() per line, or per batch of whole lines (WriteLines), so
//    concurrent writers never interleave within a line; optional size-based
//    rotation and an fdatasync policy.
//  - SyslogSink: RFC 5424 messages over a unix datagram socket (/dev/log).
//  - StreamSink: a stream (stdout) in json or compact form.
// None is thread-safe: one thread writes to a sink.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>
#include <string_view>

#include "event.pb.h"
#include "util/fd.h"
#include "util/result.h"

namespace cordon {

class AuditSink {
 public:
  virtual ~AuditSink() = default;
  virtual Status Write(const cordon::v1::AuditEvent& event) = 0;
  virtual Status Flush() { return {}; }
  // Batched audit-file lines (the agent's fast path), for sinks whose output
  // is exactly the events' ToJsonLine() each followed by '\n': `lines` holds
  // `count` such lines. Returns how many of them were written: all, or the
  // first ones before an error (then set in *status). Sinks that write
  // something else say false to TakesJsonLines() and get Write() per event.
  virtual bool TakesJsonLines() const { return false; }
  virtual size_t WriteLines(std::string_view lines, size_t count, Status* status);
};

struct JsonlOptions {
  uint64_t max_bytes = 0;  // 0 = no rotation
  uint32_t keep = 5;       // rotated files kept: path.1 .. path.N, newest .1 (0: none kept)
  // kEveryEvent: fdatasync after every line. kInterval: fdatasync of written
  // data at most once per fsync_interval_ms, from Write() and from Flush() (no
  // thread: call Flush() periodically to bound the delay). kNever: only
  // Sync() does. Every policy but kNever syncs unsynced data on destruction.
  // After each sync the file's synced whole pages are dropped from the page
  // cache (POSIX_FADV_DONTNEED): the agent never reads them back, a flood of
  // events would otherwise push other programs' cache out, and the freed
  // pages are what the next writes reuse (on VMs with free page reporting, a
  // page not touched lately costs a fault on the host: docs/performance.md, B4).
  enum class Fsync { kEveryEvent, kInterval, kNever } fsync = Fsync::kInterval;
  uint32_t fsync_interval_ms = 1000;
  // Only for the file's single writer (the agent, under its lock): on open, cut
  // a torn last line (a writer killed in the middle of a write()) back to the
  // last newline. Its events were not released from the ring buffer, so the
  // next writer delivers them again, whole.
  bool repair_torn_tail = false;
  // Each line carries a hash chained to the line before it, and each file
  // starts with a chain.start record naming the last one of the file before
  // (events/audit_chain.h; `cordon audit verify`). A writer appending to a
  // file continues its chain from its last line.
  bool chain = true;
};

class JsonlFileSink : public AuditSink {
 public:
  // Creates parent directories (0750) and the file (0600), appends.
  static Result<std::unique_ptr<JsonlFileSink>> Open(const std::string& path);
  // With max_bytes > 0, rotates before a write that would make the file exceed
  // max_bytes (a longer single line still goes, alone, to a fresh file):
  // fsync, path.(k) -> path.(k+1) for k = keep-1..1 (path.keep is dropped),
  // path -> path.1, a new path (0600), fsync of the directory. The size is
  // counted from the file's size at open plus what this sink wrote.
  static Result<std::unique_ptr<JsonlFileSink>> Open(const std::string& path, const JsonlOptions& options);
  ~JsonlFileSink() override;

  // Errors name the path and carry errno. The sink stays usable: a failed
  // write removes the partial line it left (the file never holds half a
  // line), a failed rotation or reopen is retried by the next Write().
  Status Write(const cordon::v1::AuditEvent& event) override;
  // As Write() for each line, with one write() for all of them when no
  // rotation falls among them (rotation happens before the line that would
  // cross max_bytes, exactly as with Write()). A failed write() keeps the
  // whole lines that reached the file and removes a partial one. kEveryEvent
  // syncs once after the lines.
  bool TakesJsonLines() const override { return true; }
  size_t WriteLines(std::string_view lines, size_t count, Status* status) override;
  Status Flush() override;  // fdatasync per the policy (see JsonlOptions)
  Status Sync();            // fdatasync now if anything is unsynced
  const std::string& path() const { return path_; }

 private:
  JsonlFileSink(std::string path, const JsonlOptions& options) : path_(std::move(path)), options_(options) {}
  Status OpenFile();
  Status Rotate();
  Status ReadChainTail();  // the chain value of the file's last line
  // The chained bytes of `lines` (whole JSON lines), after a chain.start
  // record if one is due; *ends: the offset after each line written, with the
  // chain value there (for a partial write).
  std::string Chained(std::string_view lines, std::vector<std::pair<size_t, std::string>>* ends);
  Status WriteChained(std::string_view lines, size_t count, size_t* done);
  Status SyncIfDue();
  void DropSyncedPages();

  std::string path_;
  JsonlOptions options_;
  UniqueFd fd_;
  uint64_t size_ = 0;
  bool dirty_ = false;  // written since the last fdatasync
  uint64_t dropped_ = 0;  // the file's first dropped_ bytes were synced and dropped from the page cache
  std::chrono::steady_clock::time_point last_sync_{};
  std::string chain_;          // the chain value of the file's last line
  bool chain_start_ = true;    // the next line is preceded by a chain.start record
};

// RFC 5424 over a unix datagram socket, one message per event:
//   <PRI>1 TIMESTAMP HOSTNAME APP-NAME PROCID MSGID
//     [cordon@32473 sandbox="..." kind="..." verdict="..." pid="..."] JSON
// PRI = facility*8 + severity (4 warning for verdict denied/killed and kind
// loss, else 5 notice); TIMESTAMP is the event's time (UTC, microseconds; "-"
// if unset); MSGID the event kind; PROCID the agent's pid; JSON the event's
// ToJsonLine(). Messages over 8 KiB are truncated to 8 KiB (at a UTF-8
// character boundary). The socket is nonblocking: a full receiver queue is an
// error (EAGAIN), never a stall.
class SyslogSink : public AuditSink {
 public:
  static constexpr size_t kMaxMessage = 8192;
  static constexpr int kFacilityAuthpriv = 10;

  // Fails if the socket cannot be connected (no syslog daemon listening).
  // The message's body after the structured data: the event as the audit
  // file has it, or its OCSF form (events/ocsf.h).
  enum class Body { kJson, kOcsf };
  static Result<std::unique_ptr<SyslogSink>> Open(const std::string& socket_path = "/dev/log",
                                                  const std::string& app_name = "cordon",
                                                  int facility = kFacilityAuthpriv, Body body = Body::kJson);
  // Reconnects once per call when the socket reports ECONNREFUSED, ENOTCONN
  // or ECONNRESET (the syslog daemon restarted) or the last reconnect failed.
  Status Write(const cordon::v1::AuditEvent& event) override;
  // A sink that only formats (the remote syslog sink's messages): never connected.
  static std::unique_ptr<SyslogSink> Formatter(const std::string& app_name, int facility, Body body = Body::kJson);
  // The message Write() sends (exposed for tests and diagnostics).
  std::string Format(const cordon::v1::AuditEvent& event) const;

 private:
  SyslogSink(std::string socket_path, std::string app_name, int facility, Body body);
  Status Connect();

  std::string socket_path_;
  std::string app_name_;
  std::string hostname_;
  int facility_;
  Body body_;
  UniqueFd fd_;
};

class StreamSink : public AuditSink {
 public:
  // kOcsf: one OCSF object a line (events/ocsf.h).
  enum class Format { kJson, kCompact, kOcsf };
  // `colour`: compact lines coloured (a terminal; see util/colour.h).
  StreamSink(int fd, Format format, bool colour = false);
  Status Write(const cordon::v1::AuditEvent& event) override;
  bool TakesJsonLines() const override { return format_ == Format::kJson; }
  size_t WriteLines(std::string_view lines, size_t count, Status* status) override;

 private:
  int fd_;
  Format format_;
  bool colour_;
  std::string hostname_;  // kOcsf: device.hostname, read once
};

// Writes the whole buffer, retrying on EINTR and short writes.
Status WriteAll(int fd, const std::string& data);

}  // namespace cordon
