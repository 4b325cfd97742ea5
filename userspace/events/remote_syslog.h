// The remote syslog sink: RFC 5424 messages (SyslogSink::Format) sent to a
// collector over TCP or TLS with octet-counting framing (RFC 6587 3.4.1,
// "LEN SP MSG"; RFC 5425 for TLS), through a bounded on-disk spool.
//
// Write() (the agent's event loop) only appends the framed message to the
// spool, a file write to the page cache; it never touches the network. A
// sender thread connects (blocking I/O with timeouts, so the TLS handshake,
// name resolution and reconnect backoff stay out of the loop without a state
// machine), sends the spool in order from its head and moves the head only over
// what the collector's TCP has acknowledged (SIOCOUTQ, mapped back to spool
// positions through the wire bytes each send cost, TLS records included), and
// keeps the last `replay_bytes` of acknowledged data besides: TCP's
// acknowledgement says the bytes reached the collector's kernel, not that the
// collector read them (a collector that exits with unread data resets the
// connection and they are gone), so after a fault that window is sent again.
// Delivery is therefore at least once; duplicates carry the event's id (and
// its per-sandbox seq) for the receiver to drop. See README "Remote syslog".
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "event.pb.h"
#include "events/sink.h"
#include "util/fd.h"
#include "util/result.h"

namespace cordon {

// A place in the spool: segment number and offset in it.
struct SpoolPos {
  uint64_t seg = 0;
  uint64_t off = 0;
  bool operator==(const SpoolPos& o) const { return seg == o.seg && off == o.off; }
};

// Octet-counted frames in segment files seg-<20 digits> under a directory
// (0700, owned by the caller's uid, not a symlink, not group/other-writable;
// files 0600); `head` holds the first frame not yet taken off. Bounded by
// max_bytes (the frames from the head on). Not thread-safe: the sink locks.
class Spool {
 public:
  static Result<std::unique_ptr<Spool>> Open(const std::string& dir, uint64_t max_bytes);
  // False when the frame does not fit (the caller counts the loss).
  Result<bool> Append(const std::string& frame);
  bool Fits(size_t bytes) const { return bytes_ + bytes <= max_bytes_; }
  // Whole frames from `pos` on, at most about `max` bytes (at least one frame
  // if there is one); *next is the position after them.
  Result<std::string> Read(SpoolPos pos, size_t max, SpoolPos* next) const;
  // Takes everything before `pos` off: the head moves there, segments wholly
  // before it are removed.
  Status Advance(SpoolPos pos);
  SpoolPos head() const { return head_; }
  SpoolPos end() const { return SpoolPos{tail_seg_, tail_size_}; }
  uint64_t bytes() const { return bytes_; }  // frames from the head on
  Status Sync();                             // fdatasync of the segment being appended to
  // A descriptor of that segment, for an fdatasync outside the sink's lock
  // (invalid when nothing was appended since the last one).
  UniqueFd TakeUnsynced();

 private:
  Spool(std::string dir, uint64_t max_bytes) : dir_(std::move(dir)), max_bytes_(max_bytes) {}
  std::string SegPath(uint64_t seg) const;
  Status Load();
  Status OpenTail(bool create);

  std::string dir_;
  uint64_t max_bytes_;
  uint64_t seg_max_ = 0;  // a segment is closed once it holds this much
  SpoolPos head_;
  uint64_t tail_seg_ = 0;
  uint64_t tail_size_ = 0;
  UniqueFd tail_fd_;
  uint64_t bytes_ = 0;
  bool dirty_ = false;
};

struct RemoteSyslogOptions {
  std::string host;  // a name or a numeric address
  uint16_t port = 0;
  bool tls = false;
  std::string ca;    // PEM: the CA(s) the collector's certificate must chain to
  std::string cert;  // PEM client certificate (optional, with key)
  std::string key;   // its private key
  std::string spool_dir;
  uint64_t spool_max_bytes = 1ull << 30;
  // Acknowledged bytes kept and sent again after a fault: more than a
  // collector's socket may hold unread (Linux: net.ipv4.tcp_rmem's maximum,
  // 6 MiB by default).
  uint64_t replay_bytes = 8ull << 20;
  std::string app_name = "cordon";
  int facility = SyslogSink::kFacilityAuthpriv;
  SyslogSink::Body body = SyslogSink::Body::kJson;  // format: rfc5424 (the event's JSON) | ocsf
  uint32_t connect_timeout_ms = 10000;
  uint32_t io_timeout_ms = 30000;
};

class RemoteSyslogSink : public AuditSink {
 public:
  // Opens (and replays, once connected) the spool and starts the sender.
  // Fails for an unusable spool directory or TLS files that do not load.
  static Result<std::unique_ptr<RemoteSyslogSink>> Open(const RemoteSyslogOptions& options);
  ~RemoteSyslogSink() override;

  // Appends the event's frame to the spool (after a loss record when events
  // were dropped before and there is room again). A full spool drops the
  // event and returns an error (counted).
  Status Write(const cordon::v1::AuditEvent& event) override;
  // Nothing: the sender thread fdatasyncs the spool every second, out of the
  // event loop.

  struct Stats {
    bool connected = false;
    uint64_t spooled_bytes = 0;
    uint64_t dropped = 0;       // events dropped for a full spool, since start
    uint64_t loss_pending = 0;  // of those, not yet reported in a loss record
    uint64_t connects = 0;      // successful connects (TLS: handshakes)
    std::string last_error;     // the sender's last fault ("" none yet)
  };
  Stats stats() const;
  // Blocks until the spool is empty and all of it was acknowledged by the
  // collector's TCP (true), or until timeout_ms passed (false). For tests and
  // the agent's shutdown.
  bool WaitDrained(uint32_t timeout_ms);

 private:
  explicit RemoteSyslogSink(const RemoteSyslogOptions& options);
  Status LoadTls();
  void Run();
  bool AppendLossRecordLocked();
  std::string Frame(const cordon::v1::AuditEvent& event) const;
  void SetError(const std::string& error);

  RemoteSyslogOptions options_;
  std::unique_ptr<SyslogSink> formatter_;
  struct SslCtxFree {
    void operator()(void* ctx) const;
  };
  std::unique_ptr<void, SslCtxFree> ssl_ctx_;  // SSL_CTX

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::unique_ptr<Spool> spool_;
  bool stop_ = false;
  uint64_t dropped_ = 0;
  uint64_t loss_pending_ = 0;
  bool connected_ = false;
  bool drained_ = true;  // nothing in flight and the spool empty
  uint64_t connects_ = 0;
  std::string last_error_;
  std::thread sender_;
};

}  // namespace cordon
