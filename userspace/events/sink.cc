#include "events/sink.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>

#include "events/audit_chain.h"
#include "events/decoder.h"
#include "events/json_line.h"
#include "events/ocsf.h"
#include "util/fs.h"

namespace cordon {
namespace {

// Like WriteAll, and says how much went out before an error.
Status WriteCounting(int fd, std::string_view data, size_t* written) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      *written = off;
      return SysError("write");
    }
    off += static_cast<size_t>(n);
  }
  *written = off;
  return {};
}

std::string DirOf(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// RFC 5424 header fields are PRINTUSASCII without spaces, of bounded length.
std::string HeaderField(const std::string& value, size_t max) {
  std::string out;
  for (char c : value) {
    if (out.size() == max) break;
    out += (c > 32 && c < 127) ? c : '_';
  }
  return out.empty() ? "-" : out;
}

// SD-PARAM value: '"', '\' and ']' are escaped with a backslash.
std::string SdEscape(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '"' || c == '\\' || c == ']') out += '\\';
    out += c;
  }
  return out;
}

std::string Rfc3339Micros(const google::protobuf::Timestamp& ts) {
  time_t secs = static_cast<time_t>(ts.seconds());
  struct tm tm = {};
  if (!::gmtime_r(&secs, &tm)) return "-";
  char buf[64];
  size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%06dZ", static_cast<int>(ts.nanos() / 1000));
  return buf;
}

size_t CountLines(std::string_view data) {
  size_t n = 0;
  for (size_t pos = 0; (pos = data.find('\n', pos)) != std::string_view::npos; ++pos) ++n;
  return n;
}

}  // namespace

size_t AuditSink::WriteLines(std::string_view, size_t, Status* status) {
  *status = Error{"this sink does not take audit-file lines"};
  return 0;
}

Status WriteAll(int fd, const std::string& data) {
  size_t written = 0;
  return WriteCounting(fd, data, &written);
}

// ---- JsonlFileSink ----------------------------------------------------------

Result<std::unique_ptr<JsonlFileSink>> JsonlFileSink::Open(const std::string& path) {
  return Open(path, JsonlOptions{});
}

Result<std::unique_ptr<JsonlFileSink>> JsonlFileSink::Open(const std::string& path, const JsonlOptions& options) {
  if (path.empty()) return Error{"audit file: empty path"};
  size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) CORDON_TRY(MakeDirs(path.substr(0, slash), 0750));
  std::unique_ptr<JsonlFileSink> sink(new JsonlFileSink(path, options));
  CORDON_TRY(sink->OpenFile());
  sink->last_sync_ = std::chrono::steady_clock::now();
  return sink;
}

JsonlFileSink::~JsonlFileSink() {
  if (options_.fsync != JsonlOptions::Fsync::kNever) (void)Sync();
}

Status JsonlFileSink::OpenFile() {
  UniqueFd fd(::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  if (!fd.valid()) return SysError("open audit file " + path_);
  struct stat st = {};
  if (::fstat(fd.get(), &st) != 0) return SysError("stat audit file " + path_);
  size_ = S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0;
  if (options_.repair_torn_tail && size_ > 0) {
    UniqueFd in(::open(path_.c_str(), O_RDONLY | O_CLOEXEC));
    if (!in.valid()) return SysError("read audit file " + path_);
    // Scan back from the end for the last newline; keep everything up to it.
    uint64_t keep = 0;
    char buf[65536];
    for (uint64_t end = size_; end > 0 && keep == 0;) {
      uint64_t start = end > sizeof buf ? end - sizeof buf : 0;
      ssize_t n = ::pread(in.get(), buf, end - start, static_cast<off_t>(start));
      if (n != static_cast<ssize_t>(end - start)) return SysError("read audit file " + path_);
      for (ssize_t i = n - 1; i >= 0; --i)
        if (buf[i] == '\n') {
          keep = start + static_cast<uint64_t>(i) + 1;
          break;
        }
      if (end == size_ && keep == size_) break;  // ends with a newline: nothing torn
      end = start;
    }
    if (keep < size_) {
      if (::ftruncate(fd.get(), static_cast<off_t>(keep)) != 0) return SysError("repair torn last line of " + path_);
      size_ = keep;
    }
  }
  fd_ = std::move(fd);
  dropped_ = 0;
  if (options_.chain) return ReadChainTail();
  return {};
}

Status JsonlFileSink::ReadChainTail() {
  // An empty file starts with a chain.start record naming the chain before
  // (a rotation's previous file; "" for a new one). A file ending in a line
  // without a chain value (another writer's, or cut) restarts the chain.
  chain_start_ = true;
  if (size_ == 0) return {};
  UniqueFd in(::open(path_.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in.valid()) return SysError("read audit file " + path_);
  char buf[65536];
  const uint64_t start = size_ > sizeof buf ? size_ - sizeof buf : 0;
  ssize_t n = ::pread(in.get(), buf, size_ - start, static_cast<off_t>(start));
  if (n != static_cast<ssize_t>(size_ - start)) return SysError("read audit file " + path_);
  std::string_view tail(buf, static_cast<size_t>(n));
  if (!tail.empty() && tail.back() == '\n') tail.remove_suffix(1);
  size_t nl = tail.rfind('\n');
  std::string last = ChainOf(nl == std::string_view::npos ? (start == 0 ? tail : std::string_view()) : tail.substr(nl + 1));
  chain_ = last;
  chain_start_ = last.empty();
  return {};
}

std::string JsonlFileSink::Chained(std::string_view lines, std::vector<std::pair<size_t, std::string>>* ends) {
  std::string out;
  out.reserve(lines.size() + (CountLines(lines) + 1) * kChainGrowth + 128);
  if (chain_start_) {
    AppendChained(ChainStartBody(chain_, ::time(nullptr)), &chain_, &out);
    chain_start_ = false;
    ends->push_back({out.size(), chain_});
  }
  for (size_t off = 0; off < lines.size();) {
    size_t nl = lines.find('\n', off);
    size_t end = nl == std::string_view::npos ? lines.size() : nl;
    AppendChained(lines.substr(off, end - off), &chain_, &out);
    ends->push_back({out.size(), chain_});
    off = end + 1;
  }
  return out;
}

// One chunk (no rotation inside it): chained, written; on a partial write
// the whole lines that reached the file stay and the chain goes on from the
// last of them.
Status JsonlFileSink::WriteChained(std::string_view lines, size_t count, size_t* done) {
  const std::string chain_before = chain_;
  const bool start_before = chain_start_;
  std::vector<std::pair<size_t, std::string>> ends;
  std::string data = Chained(lines, &ends);
  const size_t starts = ends.size() - count;  // 0 or 1 chain.start record
  size_t written = 0;
  Status s = WriteCounting(fd_.get(), data, &written);
  if (s.ok()) {
    size_ += data.size();
    dirty_ = true;
    *done += count;
    return {};
  }
  size_t kept = 0;
  while (kept < ends.size() && ends[kept].first <= written) ++kept;
  const size_t keep_bytes = kept ? ends[kept - 1].first : 0;
  if (written > keep_bytes) (void)::ftruncate(fd_.get(), static_cast<off_t>(size_ + keep_bytes));
  size_ += keep_bytes;
  if (keep_bytes) dirty_ = true;
  if (kept) {
    chain_ = ends[kept - 1].second;
    chain_start_ = false;
  } else {
    chain_ = chain_before;
    chain_start_ = start_before;
  }
  *done += kept > starts ? kept - starts : 0;
  return s;
}

Status JsonlFileSink::Rotate() {
  // EINVAL: not a file that can be synced (a pipe, /dev/null): nothing to do.
  if (::fsync(fd_.get()) != 0 && errno != EINVAL) return SysError("sync audit file " + path_ + " before rotation");
  dirty_ = false;
  last_sync_ = std::chrono::steady_clock::now();
  DropSyncedPages();
  auto rename = [](const std::string& from, const std::string& to) -> Status {
    if (::rename(from.c_str(), to.c_str()) != 0 && errno != ENOENT)
      return SysError("rotate audit file " + from + " to " + to);
    return {};
  };
  if (options_.keep == 0) {
    if (::unlink(path_.c_str()) != 0 && errno != ENOENT) return SysError("rotate audit file: unlink " + path_);
  } else {
    for (uint32_t k = options_.keep - 1; k >= 1; --k)
      CORDON_TRY(rename(path_ + "." + std::to_string(k), path_ + "." + std::to_string(k + 1)));
    CORDON_TRY(rename(path_, path_ + ".1"));
  }
  fd_.Reset();
  size_ = 0;
  CORDON_TRY(OpenFile());
  std::string dir = DirOf(path_);
  UniqueFd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dfd.valid() || ::fsync(dfd.get()) != 0) return SysError("sync directory " + dir + " after rotating " + path_);
  return {};
}

Status JsonlFileSink::Write(const cordon::v1::AuditEvent& event) {
  std::string line = ToJsonLine(event) + "\n";
  if (options_.chain) {
    Status status;
    (void)WriteLines(line, 1, &status);
    return status;
  }
  if (!fd_.valid()) CORDON_TRY(OpenFile());  // a previous rotation failed to reopen
  if (options_.max_bytes > 0 && size_ > 0 && size_ + line.size() > options_.max_bytes) CORDON_TRY(Rotate());
  size_t written = 0;
  Status s = WriteCounting(fd_.get(), line, &written);
  if (!s.ok()) {
    // Never leave half a line behind for the next line to be glued to.
    if (written > 0) (void)::ftruncate(fd_.get(), static_cast<off_t>(size_));
    return s.error().Wrap("audit file " + path_);
  }
  size_ += line.size();
  dirty_ = true;
  return SyncIfDue();
}

size_t JsonlFileSink::WriteLines(std::string_view lines, size_t count, Status* status) {
  *status = {};
  size_t done = 0;
  size_t off = 0;
  while (off < lines.size()) {
    if (!fd_.valid()) {
      if (Status s = OpenFile(); !s.ok()) {
        *status = s;
        return done;
      }
    }
    // The chunk: all that is left, or the lines before the one that would
    // cross max_bytes (Write()'s rule, line by line), counted as written:
    // chained, and after the chain.start record a fresh file begins with.
    const uint64_t growth = options_.chain ? kChainGrowth : 0;
    const uint64_t start =
        options_.chain && chain_start_ ? ChainStartBody(chain_, ::time(nullptr)).size() + kChainGrowth + 1 : 0;
    size_t end = lines.size();
    size_t chunk_lines = count - done;
    if (options_.max_bytes > 0 && size_ + start + (end - off) + chunk_lines * growth > options_.max_bytes) {
      end = off;
      chunk_lines = 0;
      while (end < lines.size()) {
        size_t nl = lines.find('\n', end);
        size_t next = nl == std::string_view::npos ? lines.size() : nl + 1;
        uint64_t before = size_ + (end - off);  // 0: nothing in the file yet, the line goes whatever its size
        if (before > 0 && before + start + chunk_lines * growth + (next - end) + growth > options_.max_bytes) break;
        end = next;
        chunk_lines++;
      }
      if (end == off) {  // the next line needs a fresh file
        if (Status s = Rotate(); !s.ok()) {
          *status = s;
          return done;
        }
        continue;
      }
    }
    const std::string_view chunk = lines.substr(off, end - off);
    if (options_.chain) {
      if (Status s = WriteChained(chunk, chunk_lines, &done); !s.ok()) {
        *status = s.error().Wrap("audit file " + path_);
        return done;
      }
      off = end;
      continue;
    }
    size_t written = 0;
    Status s = WriteCounting(fd_.get(), chunk, &written);
    if (!s.ok()) {
      // Keep the whole lines that got out; never leave half a line behind.
      size_t keep = written == 0 ? 0 : chunk.substr(0, written).rfind('\n');
      keep = (written == 0 || keep == std::string_view::npos) ? 0 : keep + 1;
      if (written > keep) (void)::ftruncate(fd_.get(), static_cast<off_t>(size_ + keep));
      size_ += keep;
      if (keep) dirty_ = true;
      done += CountLines(chunk.substr(0, keep));
      *status = s.error().Wrap("audit file " + path_);
      return done;
    }
    size_ += chunk.size();
    dirty_ = true;
    done += chunk_lines;
    off = end;
  }
  if (Status s = SyncIfDue(); !s.ok()) *status = s;
  return done;
}

Status JsonlFileSink::SyncIfDue() {
  switch (options_.fsync) {
    case JsonlOptions::Fsync::kEveryEvent:
      return Sync();
    case JsonlOptions::Fsync::kInterval:
      if (dirty_ && std::chrono::steady_clock::now() - last_sync_ >=
                        std::chrono::milliseconds(options_.fsync_interval_ms))
        return Sync();
      return {};
    case JsonlOptions::Fsync::kNever:
      return {};
  }
  return {};
}

Status JsonlFileSink::Flush() { return SyncIfDue(); }

Status JsonlFileSink::Sync() {
  if (!dirty_ || !fd_.valid()) return {};
  if (::fdatasync(fd_.get()) != 0 && errno != EINVAL) return SysError("sync audit file " + path_);
  dirty_ = false;
  last_sync_ = std::chrono::steady_clock::now();
  DropSyncedPages();
  return {};
}

void JsonlFileSink::DropSyncedPages() {
  // Whole pages only: the last, partial one is written again by the next line.
  static const uint64_t kPage = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t end = size_ / kPage * kPage;
  if (end <= dropped_) return;
  // Advice only: a file that takes none (a pipe, /dev/null) is left as it is.
  (void)::posix_fadvise(fd_.get(), static_cast<off_t>(dropped_), static_cast<off_t>(end - dropped_),
                        POSIX_FADV_DONTNEED);
  dropped_ = end;
}

// ---- SyslogSink -------------------------------------------------------------

namespace {
// This host's name ("" if it cannot be read).
std::string LocalHostName() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return host;
}
}  // namespace

SyslogSink::SyslogSink(std::string socket_path, std::string app_name, int facility, Body body)
    : socket_path_(std::move(socket_path)), app_name_(HeaderField(app_name, 48)), facility_(facility), body_(body) {
  hostname_ = HeaderField(LocalHostName(), 255);
}

Result<std::unique_ptr<SyslogSink>> SyslogSink::Open(const std::string& socket_path, const std::string& app_name,
                                                     int facility, Body body) {
  if (facility < 0 || facility > 23) return Error{"syslog facility " + std::to_string(facility) + " is not 0..23"};
  if (socket_path.empty() || socket_path.size() >= sizeof(sockaddr_un{}.sun_path))
    return Error{"syslog socket path '" + socket_path + "' is empty or too long"};
  std::unique_ptr<SyslogSink> sink(new SyslogSink(socket_path, app_name, facility, body));
  CORDON_TRY(sink->Connect());
  return sink;
}

std::unique_ptr<SyslogSink> SyslogSink::Formatter(const std::string& app_name, int facility, Body body) {
  return std::unique_ptr<SyslogSink>(new SyslogSink("", app_name, facility, body));
}

Status SyslogSink::Connect() {
  fd_.Reset();
  UniqueFd fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return SysError("syslog: socket");
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  socket_path_.copy(addr.sun_path, sizeof addr.sun_path - 1);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    return SysError("connect to syslog socket " + socket_path_);
  fd_ = std::move(fd);
  return {};
}

std::string SyslogSink::Format(const cordon::v1::AuditEvent& event) const {
  bool warning = event.verdict() == "denied" || event.verdict() == "killed" || event.kind() == "loss";
  std::string msg = "<" + std::to_string(facility_ * 8 + (warning ? 4 : 5)) + ">1 ";
  msg += (event.has_time() ? Rfc3339Micros(event.time()) : "-") + " ";
  msg += hostname_ + " " + app_name_ + " " + std::to_string(::getpid()) + " " + HeaderField(event.kind(), 32) + " ";
  msg += "[cordon@32473 sandbox=\"" + SdEscape(event.sandbox()) + "\" kind=\"" + SdEscape(event.kind()) +
         "\" verdict=\"" + SdEscape(event.verdict()) + "\" pid=\"" + std::to_string(event.pid()) + "\"] ";
  if (body_ == Body::kOcsf) {
    // The object carries the event twice (mapped, and whole under
    // unmapped.cordon): one that would not fit goes without the copy.
    const std::string host = hostname_ == "-" ? "" : hostname_;
    std::string body = ToOcsfJson(event, host);
    if (msg.size() + body.size() > kMaxMessage) body = ToOcsfJson(event, host, false);
    // Still too long (a path of 4,096 escaped bytes is 16 KiB): the
    // workload's strings cut, never the JSON.
    if (msg.size() + body.size() > kMaxMessage) body = ToOcsfJson(event, host, false, 512);
    msg += body;
  } else {
    msg += ToJsonLine(event);
  }
  if (msg.size() > kMaxMessage) {
    size_t n = kMaxMessage;
    while (n > 0 && (static_cast<unsigned char>(msg[n]) & 0xC0) == 0x80) --n;  // not inside a UTF-8 character
    msg.resize(n);
  }
  return msg;
}

Status SyslogSink::Write(const cordon::v1::AuditEvent& event) {
  std::string msg = Format(event);
  bool reconnected = false;
  if (!fd_.valid()) {
    reconnected = true;
    CORDON_TRY(Connect());
  }
  for (;;) {
    if (::send(fd_.get(), msg.data(), msg.size(), MSG_NOSIGNAL) >= 0) return {};
    int err = errno;
    if (err == EINTR) continue;
    if (!reconnected && (err == ECONNREFUSED || err == ENOTCONN || err == ECONNRESET)) {
      reconnected = true;
      CORDON_TRY(Connect());
      continue;
    }
    return SysError("send to syslog socket " + socket_path_, err);
  }
}

// ---- StreamSink -------------------------------------------------------------

size_t StreamSink::WriteLines(std::string_view lines, size_t count, Status* status) {
  size_t written = 0;
  *status = WriteCounting(fd_, lines, &written);
  return status->ok() ? count : CountLines(lines.substr(0, written));
}

StreamSink::StreamSink(int fd, Format format, bool colour)
    : fd_(fd), format_(format), colour_(colour), hostname_(format == Format::kOcsf ? LocalHostName() : "") {}

Status StreamSink::Write(const cordon::v1::AuditEvent& event) {
  if (format_ == Format::kOcsf) return WriteAll(fd_, ToOcsfJson(event, hostname_) + "\n");
  return WriteAll(fd_, (format_ == Format::kJson ? ToJsonLine(event) : ToCompactLine(event, colour_)) + "\n");
}

}  // namespace cordon
