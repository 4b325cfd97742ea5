#include "events/remote_syslog.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <deque>
#include <optional>

#include "util/fs.h"

namespace cordon {

namespace {

constexpr size_t kMaxFrame = 1 << 20;  // a message longer than this is not a frame we wrote
constexpr size_t kSendChunk = 64 << 10;

// "LEN SP": true with the header's and the message's length when `data` at
// `at` starts with a complete, valid header; *bad when it cannot be one.
bool FrameHeader(std::string_view data, size_t at, size_t* header, size_t* length, bool* bad) {
  *bad = false;
  size_t n = 0, i = at;
  while (i < data.size() && data[i] >= '0' && data[i] <= '9' && i - at < 8) n = n * 10 + (data[i++] - '0');
  if (i == data.size()) return false;
  if (i == at || data[i] != ' ' || data[at] == '0' || n > kMaxFrame) {
    *bad = true;
    return false;
  }
  *header = i + 1 - at;
  *length = n;
  return true;
}

// The length of the whole frames at the start of `data`; *bad when a frame
// header is malformed there.
size_t WholeFrames(std::string_view data, bool* bad) {
  size_t at = 0, header = 0, length = 0;
  while (FrameHeader(data, at, &header, &length, bad) && at + header + length <= data.size()) at += header + length;
  return at;
}

std::string OpenSslError(const std::string& what) {
  std::string detail;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    detail += (detail.empty() ? "" : "; ") + std::string(buf);
  }
  return what + (detail.empty() ? "" : ": " + detail);
}

}  // namespace

// ---- Spool --------------------------------------------------------------------

std::string Spool::SegPath(uint64_t seg) const {
  char name[32];
  std::snprintf(name, sizeof name, "seg-%020" PRIu64, seg);
  return JoinPath(dir_, name);
}

Result<std::unique_ptr<Spool>> Spool::Open(const std::string& dir, uint64_t max_bytes) {
  if (dir.empty() || dir[0] != '/') return Error{"spool directory '" + dir + "' is not an absolute path"};
  size_t slash = dir.find_last_of('/');
  if (slash > 0) CORDON_TRY(MakeDirs(dir.substr(0, slash), 0755));
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return SysError("create spool directory " + dir);
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return SysError("spool directory " + dir);
  if (S_ISLNK(st.st_mode)) return Error{"spool directory " + dir + " is a symlink (refused)"};
  if (!S_ISDIR(st.st_mode)) return Error{"spool directory " + dir + " is not a directory"};
  if (st.st_uid != ::geteuid())
    return Error{"spool directory " + dir + " is owned by uid " + std::to_string(st.st_uid) + ", not " +
                 std::to_string(::geteuid()) + " (refused)"};
  if (st.st_mode & 022) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Error{"spool directory " + dir + " is writable by group or others (mode " + mode + "; refused)"};
  }
  if ((st.st_mode & 077) && ::chmod(dir.c_str(), 0700) != 0) return SysError("chmod 0700 " + dir);
  std::unique_ptr<Spool> spool(new Spool(dir, max_bytes));
  spool->seg_max_ = std::clamp<uint64_t>(max_bytes / 8, 64 << 10, 64 << 20);
  CORDON_TRY(spool->Load());
  return spool;
}

Status Spool::Load() {
  auto names = ListDir(dir_);
  if (!names) return names.error();
  std::vector<uint64_t> segs;
  for (const auto& name : *names) {
    uint64_t n = 0;
    if (name.size() == 24 && name.rfind("seg-", 0) == 0 && std::sscanf(name.c_str() + 4, "%" SCNu64, &n) == 1)
      segs.push_back(n);
  }
  std::sort(segs.begin(), segs.end());
  auto head = ReadFile(JoinPath(dir_, "head"), 64);
  if (head) {
    unsigned long long seg = 0, off = 0;
    if (std::sscanf(head->c_str(), "%llu %llu", &seg, &off) == 2) head_ = SpoolPos{seg, off};
  }
  // Segments before the head were taken off already (a crash between the
  // head's write and their removal).
  while (!segs.empty() && segs.front() < head_.seg) {
    (void)::unlink(SegPath(segs.front()).c_str());
    segs.erase(segs.begin());
  }
  if (segs.empty() || segs.front() != head_.seg) head_ = SpoolPos{segs.empty() ? head_.seg : segs.front(), 0};
  bytes_ = 0;
  for (uint64_t seg : segs) {
    struct stat st {};
    if (::lstat(SegPath(seg).c_str(), &st) != 0) return SysError("spool segment " + SegPath(seg));
    if (!S_ISREG(st.st_mode)) return Error{"spool segment " + SegPath(seg) + " is not a regular file"};
    bytes_ += static_cast<uint64_t>(st.st_size);
  }
  if (segs.empty()) {
    tail_seg_ = head_.seg;
    return OpenTail(true);
  }
  tail_seg_ = segs.back();
  CORDON_TRY(OpenTail(false));
  // A frame torn by a crash in the middle of its write is cut off.
  std::string data;
  data.resize(tail_size_);
  UniqueFd reader(::open(SegPath(tail_seg_).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!reader.valid() || ::pread(reader.get(), data.data(), data.size(), 0) != static_cast<ssize_t>(data.size()))
    return SysError("read spool segment " + SegPath(tail_seg_));
  bool bad = false;
  size_t whole = WholeFrames(data, &bad);
  if (whole < tail_size_) {
    if (::ftruncate(tail_fd_.get(), static_cast<off_t>(whole)) != 0)
      return SysError("truncate spool segment " + SegPath(tail_seg_));
    bytes_ -= tail_size_ - whole;
    tail_size_ = whole;
  }
  if (head_.off > (head_.seg == tail_seg_ ? tail_size_ : UINT64_MAX)) head_.off = 0;
  bytes_ -= std::min(bytes_, head_.off);
  return {};
}

Status Spool::OpenTail(bool create) {
  int flags = O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT | O_EXCL : 0);
  UniqueFd fd(::open(SegPath(tail_seg_).c_str(), flags, 0600));
  if (!fd.valid()) return SysError("open spool segment " + SegPath(tail_seg_));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return SysError("stat spool segment " + SegPath(tail_seg_));
  tail_size_ = static_cast<uint64_t>(st.st_size);
  tail_fd_ = std::move(fd);
  return {};
}

Result<bool> Spool::Append(const std::string& frame) {
  if (!Fits(frame.size())) return false;
  if (tail_size_ >= seg_max_) {
    (void)Sync();
    tail_seg_++;
    CORDON_TRY(OpenTail(true));
  }
  ssize_t n = ::write(tail_fd_.get(), frame.data(), frame.size());
  if (n != static_cast<ssize_t>(frame.size())) {
    int err = n < 0 ? errno : ENOSPC;
    (void)::ftruncate(tail_fd_.get(), static_cast<off_t>(tail_size_));  // never half a frame
    return SysError("append to spool segment " + SegPath(tail_seg_), err);
  }
  tail_size_ += frame.size();
  bytes_ += frame.size();
  dirty_ = true;
  return true;
}

Result<std::string> Spool::Read(SpoolPos pos, size_t max, SpoolPos* next) const {
  *next = pos;
  std::string data;
  while (pos.seg <= tail_seg_) {
    UniqueFd fd(::open(SegPath(pos.seg).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd.valid()) {
      if (errno == ENOENT && pos.seg < tail_seg_) {
        pos = SpoolPos{pos.seg + 1, 0};
        continue;
      }
      return SysError("open spool segment " + SegPath(pos.seg));
    }
    uint64_t size = pos.seg == tail_seg_ ? tail_size_ : 0;
    if (pos.seg != tail_seg_) {
      struct stat st {};
      if (::fstat(fd.get(), &st) != 0) return SysError("stat spool segment " + SegPath(pos.seg));
      size = static_cast<uint64_t>(st.st_size);
    }
    if (pos.off >= size) {
      if (pos.seg == tail_seg_) break;
      pos = SpoolPos{pos.seg + 1, 0};
      continue;
    }
    size_t want = static_cast<size_t>(std::min<uint64_t>(size - pos.off, std::max(max, kMaxFrame + 16)));
    data.resize(want);
    ssize_t n = ::pread(fd.get(), data.data(), want, static_cast<off_t>(pos.off));
    if (n < 0) return SysError("read spool segment " + SegPath(pos.seg));
    data.resize(static_cast<size_t>(n));
    // Whole frames, at most `max` bytes unless the first is longer.
    size_t at = 0, header = 0, length = 0;
    bool bad = false;
    while (FrameHeader(data, at, &header, &length, &bad) && at + header + length <= data.size() &&
           (at == 0 || at + header + length <= max))
      at += header + length;
    if (at == 0)
      return Error{"spool segment " + SegPath(pos.seg) + " is damaged at offset " + std::to_string(pos.off), EBADMSG};
    data.resize(at);
    *next = SpoolPos{pos.seg, pos.off + at};
    return data;
  }
  *next = pos;
  return std::string();
}

Status Spool::Advance(SpoolPos pos) {
  if (pos == head_) return {};
  uint64_t freed = 0;
  for (uint64_t seg = head_.seg; seg < pos.seg; ++seg) {
    struct stat st {};
    if (::lstat(SegPath(seg).c_str(), &st) == 0) freed += static_cast<uint64_t>(st.st_size);
  }
  freed = freed - head_.off + pos.off;
  // The head first: a crash after it removes the old segments at the next open.
  std::string text = std::to_string(pos.seg) + " " + std::to_string(pos.off) + "\n";
  std::string tmp = JoinPath(dir_, "head.tmp");
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid() || ::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    return SysError("write " + tmp);
  if (::rename(tmp.c_str(), JoinPath(dir_, "head").c_str()) != 0) return SysError("rename " + tmp);
  for (uint64_t seg = head_.seg; seg < pos.seg; ++seg) (void)::unlink(SegPath(seg).c_str());
  head_ = pos;
  bytes_ -= std::min(bytes_, freed);
  return {};
}

Status Spool::Sync() {
  if (!dirty_) return {};
  if (::fdatasync(tail_fd_.get()) != 0) return SysError("fdatasync spool segment " + SegPath(tail_seg_));
  dirty_ = false;
  return {};
}

UniqueFd Spool::TakeUnsynced() {
  if (!dirty_) return UniqueFd();
  dirty_ = false;
  return UniqueFd(::fcntl(tail_fd_.get(), F_DUPFD_CLOEXEC, 0));
}

// ---- RemoteSyslogSink ---------------------------------------------------------

void RemoteSyslogSink::SslCtxFree::operator()(void* ctx) const { SSL_CTX_free(static_cast<SSL_CTX*>(ctx)); }

RemoteSyslogSink::RemoteSyslogSink(const RemoteSyslogOptions& options)
    : options_(options), formatter_(SyslogSink::Formatter(options.app_name, options.facility, options.body)) {}

Result<std::unique_ptr<RemoteSyslogSink>> RemoteSyslogSink::Open(const RemoteSyslogOptions& options) {
  std::unique_ptr<RemoteSyslogSink> sink(new RemoteSyslogSink(options));
  if (options.tls) CORDON_TRY(sink->LoadTls());
  auto spool = Spool::Open(options.spool_dir, options.spool_max_bytes);
  if (!spool) return spool.error();
  sink->spool_ = std::move(*spool);
  sink->drained_ = sink->spool_->bytes() == 0;
  // The sender takes no signal: the agent's are for its event loop (a thread
  // that inherits an unblocked SIGTERM would let it kill the process).
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  sink->sender_ = std::thread([s = sink.get()] { s->Run(); });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return sink;
}

RemoteSyslogSink::~RemoteSyslogSink() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (sender_.joinable()) sender_.join();
  if (spool_) (void)spool_->Sync();
}

Status RemoteSyslogSink::LoadTls() {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (!ctx) return Error{OpenSslError("TLS: SSL_CTX_new")};
  ssl_ctx_.reset(ctx);
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) return Error{OpenSslError("TLS: minimum version")};
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  if (SSL_CTX_load_verify_locations(ctx, options_.ca.c_str(), nullptr) != 1)
    return Error{OpenSslError("TLS: load CA certificates from " + options_.ca)};
  if (!options_.cert.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx, options_.cert.c_str()) != 1)
      return Error{OpenSslError("TLS: load client certificate " + options_.cert)};
    // An encrypted key would make OpenSSL ask for its passphrase on the
    // terminal (an agent started from one would hang): no passphrase, a
    // clear error. OpenSSL's errors name the file and the reason, never the
    // key's bytes.
    SSL_CTX_set_default_passwd_cb(ctx, [](char*, int, int, void*) { return 0; });
    if (SSL_CTX_use_PrivateKey_file(ctx, options_.key.c_str(), SSL_FILETYPE_PEM) != 1)
      return Error{OpenSslError("TLS: load client key " + options_.key)};
    if (SSL_CTX_check_private_key(ctx) != 1)
      return Error{OpenSslError("TLS: client key " + options_.key + " does not match " + options_.cert)};
  }
  return {};
}

std::string RemoteSyslogSink::Frame(const cordon::v1::AuditEvent& event) const {
  std::string msg = formatter_->Format(event);
  return std::to_string(msg.size()) + " " + msg;
}

bool RemoteSyslogSink::AppendLossRecordLocked() {
  if (!loss_pending_) return true;
  cordon::v1::AuditEvent loss;
  auto now = std::chrono::system_clock::now().time_since_epoch();
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(now).count();
  loss.mutable_time()->set_seconds(us / 1000000);
  loss.mutable_time()->set_nanos(static_cast<int32_t>(us % 1000000) * 1000);
  loss.set_kind("loss");
  loss.set_verdict("noted");
  loss.set_enforcement("agent");
  loss.set_reason(std::to_string(loss_pending_) + " events lost: the remote syslog spool was full");
  loss.mutable_loss()->set_dropped(loss_pending_);
  std::string frame = Frame(loss);
  auto appended = spool_->Append(frame);
  if (!appended || !*appended) return false;
  loss_pending_ = 0;
  return true;
}

Status RemoteSyslogSink::Write(const cordon::v1::AuditEvent& event) {
  std::string frame = Frame(event);
  std::lock_guard<std::mutex> lock(mu_);
  // The loss record goes where the gap is: before the first event kept after it.
  bool room = loss_pending_ == 0 || (spool_->Fits(frame.size() + 1024) && AppendLossRecordLocked());
  Result<bool> appended = room ? spool_->Append(frame) : Result<bool>(false);
  if (appended && *appended) {
    drained_ = false;
    cv_.notify_all();
    return {};
  }
  dropped_++;
  loss_pending_++;
  if (!appended) return appended.error();
  return Error{"remote syslog spool " + options_.spool_dir + " is full (" + std::to_string(spool_->bytes()) +
               " bytes): event dropped"};
}

RemoteSyslogSink::Stats RemoteSyslogSink::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  Stats s;
  s.connected = connected_;
  s.spooled_bytes = spool_->bytes();
  s.dropped = dropped_;
  s.loss_pending = loss_pending_;
  s.connects = connects_;
  s.last_error = last_error_;
  return s;
}

bool RemoteSyslogSink::WaitDrained(uint32_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return drained_ && !loss_pending_; });
}

void RemoteSyslogSink::SetError(const std::string& error) {
  std::lock_guard<std::mutex> lock(mu_);
  last_error_ = error;
}

namespace {

struct SslFree {
  void operator()(SSL* ssl) const { SSL_free(ssl); }
};

// One connection to the collector: a TCP socket, with TLS over it or not.
struct Connection {
  UniqueFd fd;
  std::unique_ptr<SSL, SslFree> ssl;
  uint64_t wire = 0;  // bytes handed to the kernel (TLS: records)

  ~Connection() {
    if (ssl) (void)SSL_shutdown(ssl.get());  // close_notify, not waited for
  }

  // Writes all of `data`; *wire grows by what the kernel got.
  Status Send(const std::string& data) {
    if (ssl) {
      ERR_clear_error();
      BIO* bio = SSL_get_wbio(ssl.get());
      uint64_t before = BIO_number_written(bio);
      int n = SSL_write(ssl.get(), data.data(), static_cast<int>(data.size()));
      wire += BIO_number_written(bio) - before;
      if (n != static_cast<int>(data.size()))
        return SysError(OpenSslError("TLS write (SSL error " + std::to_string(SSL_get_error(ssl.get(), n)) + ")"));
      return {};
    }
    size_t done = 0;
    while (done < data.size()) {
      ssize_t n = ::send(fd.get(), data.data() + done, data.size() - done, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return SysError("send");
      done += static_cast<size_t>(n);
      wire += static_cast<uint64_t>(n);
    }
    return {};
  }

  // Bytes the collector's TCP acknowledged so far.
  Result<uint64_t> Acked() const {
    int outq = 0;
    if (::ioctl(fd.get(), SIOCOUTQ, &outq) != 0) return SysError("ioctl SIOCOUTQ");
    return wire - std::min<uint64_t>(wire, static_cast<uint64_t>(outq));
  }

  // The collector closed or reset the connection.
  bool PeerGone() const {
    pollfd p{fd.get(), POLLRDHUP, 0};
    return ::poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
  }
};

bool IsNumericHost(const std::string& host) {
  in6_addr a;
  return ::inet_pton(AF_INET, host.c_str(), &a) == 1 || ::inet_pton(AF_INET6, host.c_str(), &a) == 1;
}

Result<UniqueFd> TcpConnect(const RemoteSyslogOptions& o) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  int rc = ::getaddrinfo(o.host.c_str(), std::to_string(o.port).c_str(), &hints, &list);
  if (rc != 0) return Error{"resolve " + o.host + ": " + gai_strerror(rc)};
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> owner(list, ::freeaddrinfo);
  Error last{"no address for " + o.host};
  for (addrinfo* ai = list; ai; ai = ai->ai_next) {
    UniqueFd fd(::socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd.valid()) {
      last = SysError("socket");
      continue;
    }
    if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
      last = SysError("connect to " + o.host + ":" + std::to_string(o.port));
      continue;
    }
    pollfd p{fd.get(), POLLOUT, 0};
    int err = 0;
    socklen_t len = sizeof err;
    if (::poll(&p, 1, static_cast<int>(o.connect_timeout_ms)) != 1)
      err = ETIMEDOUT;
    else if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0)
      err = errno;
    if (err) {
      last = SysError("connect to " + o.host + ":" + std::to_string(o.port), err);
      continue;
    }
    int flags = ::fcntl(fd.get(), F_GETFL);
    (void)::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
    timeval tv{static_cast<time_t>(o.io_timeout_ms / 1000), static_cast<suseconds_t>(o.io_timeout_ms % 1000) * 1000};
    (void)::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    (void)::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    int one = 1;
    (void)::setsockopt(fd.get(), SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    return fd;
  }
  return last;
}

Status TlsHandshake(SSL_CTX* ctx, const RemoteSyslogOptions& o, Connection* c) {
  ERR_clear_error();
  c->ssl.reset(SSL_new(ctx));
  if (!c->ssl) return Error{OpenSslError("TLS: SSL_new")};
  SSL* ssl = c->ssl.get();
  SSL_set_fd(ssl, c->fd.get());
  // The certificate must name the collector as configured: a DNS name, or an
  // IP address (in an iPAddress subjectAltName).
  if (IsNumericHost(o.host)) {
    if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), o.host.c_str()) != 1)
      return Error{OpenSslError("TLS: expected address " + o.host)};
  } else {
    if (SSL_set1_host(ssl, o.host.c_str()) != 1) return Error{OpenSslError("TLS: expected host name " + o.host)};
    (void)SSL_set_tlsext_host_name(ssl, o.host.c_str());
  }
  if (SSL_connect(ssl) != 1) {
    long verify = SSL_get_verify_result(ssl);
    std::string why = verify != X509_V_OK
                          ? std::string(": certificate verification failed: ") + X509_verify_cert_error_string(verify)
                          : "";
    return Error{OpenSslError("TLS handshake with " + o.host + ":" + std::to_string(o.port) + why)};
  }
  c->wire = BIO_number_written(SSL_get_wbio(ssl));  // the handshake's bytes count as sent
  return {};
}

}  // namespace

// Runs with every signal blocked (Open): the TLS library writes with
// write(2), and a reset connection gives EPIPE, not the process a SIGPIPE.
void RemoteSyslogSink::Run() {
  // The spool reaches the disk at most a second after an append (a crash of
  // the agent alone loses nothing: the page cache keeps it).
  auto last_sync = std::chrono::steady_clock::now();
  auto sync_due = [&] {
    auto now = std::chrono::steady_clock::now();
    if (now - last_sync < std::chrono::seconds(1)) return;
    last_sync = now;
    UniqueFd fd;
    {
      std::lock_guard<std::mutex> lock(mu_);
      fd = spool_->TakeUnsynced();
    }
    if (fd.valid()) (void)::fdatasync(fd.get());
  };
  uint32_t backoff_ms = 100;
  const std::string where = (options_.tls ? "tls://" : "tcp://") + options_.host + ":" + std::to_string(options_.port);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
    }
    Connection c;
    Status status;
    auto fd = TcpConnect(options_);
    if (!fd)
      status = fd.error();
    else {
      c.fd = std::move(*fd);
      if (options_.tls) status = TlsHandshake(static_cast<SSL_CTX*>(ssl_ctx_.get()), options_, &c);
    }
    if (!status.ok()) {
      sync_due();
      SetError(where + ": " + status.error().ToString());
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(backoff_ms), [&] { return stop_; });
      backoff_ms = std::min<uint32_t>(backoff_ms * 2, 30000);
      continue;
    }
    backoff_ms = 100;

    // What was sent on this connection and not yet acknowledged (the spool
    // position after it, the wire bytes it ended at, its spool bytes), and
    // what was acknowledged but stays in the replay window.
    struct Sent {
      SpoolPos end;
      uint64_t wire_end;
      uint64_t bytes;
    };
    std::deque<Sent> in_flight, replay;
    uint64_t replay_bytes = 0;
    SpoolPos send_pos;
    {
      std::lock_guard<std::mutex> lock(mu_);
      connected_ = true;
      connects_++;
      // A loss record waits for the link (and room) when nothing was written
      // since the spool filled.
      (void)AppendLossRecordLocked();
      send_pos = spool_->head();
    }
    // Moves acknowledged sends to the replay window and the head past what
    // falls out of it (everything acknowledged when `keep` is 0).
    auto take_acks = [&](uint64_t keep) -> Status {
      auto acked = c.Acked();
      if (!acked) return acked.error();
      while (!in_flight.empty() && in_flight.front().wire_end <= *acked) {
        replay.push_back(in_flight.front());
        replay_bytes += in_flight.front().bytes;
        in_flight.pop_front();
      }
      std::optional<SpoolPos> head;
      while (!replay.empty() && replay_bytes - replay.front().bytes >= keep) {
        head = replay.front().end;
        replay_bytes -= replay.front().bytes;
        replay.pop_front();
      }
      std::lock_guard<std::mutex> lock(mu_);
      if (head) {
        CORDON_TRY(spool_->Advance(*head));
        (void)AppendLossRecordLocked();  // room again: the gap is reported where it is
      }
      bool drained = in_flight.empty() && send_pos == spool_->end();
      if (drained != drained_) {
        drained_ = drained;
        cv_.notify_all();
      }
      return {};
    };
    for (;;) {
      sync_due();
      std::string data;
      SpoolPos next;
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (stop_) break;
        auto read = spool_->Read(send_pos, kSendChunk, &next);
        if (!read && read.error().err == EBADMSG) {
          // Not a frame the agent wrote (a damaged file): the rest of that
          // segment is skipped, said in the log, rather than the sink stuck.
          last_error_ = read.error().ToString() + " (the rest of it is skipped)";
          send_pos = send_pos.seg < spool_->end().seg ? SpoolPos{send_pos.seg + 1, 0} : spool_->end();
          continue;
        }
        if (!read) {
          status = read.error();
          break;
        }
        data = std::move(*read);
      }
      if (data.empty()) {
        status = take_acks(options_.replay_bytes);
        if (!status.ok()) break;
        if (c.PeerGone()) {
          status = Error{"the collector closed the connection"};
          break;
        }
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait_for(lock, std::chrono::milliseconds(in_flight.empty() ? 1000 : 20),
                     [&] { return stop_ || !(send_pos == spool_->end()); });
        continue;
      }
      if (c.PeerGone()) {
        status = Error{"the collector closed the connection"};
        break;
      }
      status = c.Send(data);
      if (!status.ok()) break;
      in_flight.push_back(Sent{next, c.wire, data.size()});
      send_pos = next;
      status = take_acks(options_.replay_bytes);
      if (!status.ok()) break;
    }
    bool stopping;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping = stop_;
      connected_ = false;
    }
    if (stopping) {
      // An orderly stop with the collector up: what its TCP acknowledged, it
      // will read. The rest is sent again at the next start.
      if (status.ok()) (void)take_acks(0);
      return;
    }
    SetError(where + ": " + status.error().ToString() + " (reconnecting; " + std::to_string(replay_bytes) +
             " acknowledged bytes will be sent again)");
    {
      std::lock_guard<std::mutex> lock(mu_);
      drained_ = false;
    }
  }
}

}  // namespace cordon
