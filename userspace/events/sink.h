// Audit sinks: where AuditEvents go. A JSONL file (one canonical-JSON event
// per line, appended with one write() per line so concurrent writers never
// interleave within a line) and a stream (stdout) in json or compact form.
#pragma once

#include <memory>
#include <string>

#include "event.pb.h"
#include "util/fd.h"
#include "util/result.h"

namespace cordon {

class AuditSink {
 public:
  virtual ~AuditSink() = default;
  virtual Status Write(const cordon::v1::AuditEvent& event) = 0;
  virtual Status Flush() { return {}; }
};

class JsonlFileSink : public AuditSink {
 public:
  // Creates parent directories (0750) and the file (0600), appends.
  static Result<std::unique_ptr<JsonlFileSink>> Open(const std::string& path);
  Status Write(const cordon::v1::AuditEvent& event) override;
  Status Flush() override;  // fdatasync
  const std::string& path() const { return path_; }

 private:
  JsonlFileSink(std::string path, UniqueFd fd) : path_(std::move(path)), fd_(std::move(fd)) {}
  std::string path_;
  UniqueFd fd_;
};

class StreamSink : public AuditSink {
 public:
  enum class Format { kJson, kCompact };
  StreamSink(int fd, Format format) : fd_(fd), format_(format) {}
  Status Write(const cordon::v1::AuditEvent& event) override;

 private:
  int fd_;
  Format format_;
};

// Writes the whole buffer, retrying on EINTR and short writes.
Status WriteAll(int fd, const std::string& data);

}  // namespace cordon
