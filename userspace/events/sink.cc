#include "events/sink.h"

#include <fcntl.h>
#include <unistd.h>

#include "events/decoder.h"
#include "util/fs.h"

namespace cordon {

Status WriteAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return SysError("write");
    }
    off += static_cast<size_t>(n);
  }
  return {};
}

Result<std::unique_ptr<JsonlFileSink>> JsonlFileSink::Open(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) CORDON_TRY(MakeDirs(path.substr(0, slash), 0750));
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  if (!fd.valid()) return SysError("open audit file " + path);
  return std::unique_ptr<JsonlFileSink>(new JsonlFileSink(path, std::move(fd)));
}

Status JsonlFileSink::Write(const cordon::v1::AuditEvent& event) {
  Status s = WriteAll(fd_.get(), ToJsonLine(event) + "\n");
  if (!s.ok()) return s.error().Wrap("audit file " + path_);
  return {};
}

Status JsonlFileSink::Flush() {
  if (::fdatasync(fd_.get()) != 0) return SysError("sync audit file " + path_);
  return {};
}

Status StreamSink::Write(const cordon::v1::AuditEvent& event) {
  return WriteAll(fd_, (format_ == Format::kJson ? ToJsonLine(event) : ToCompactLine(event)) + "\n");
}

}  // namespace cordon
