#include "events/audit_file.h"

#include <fcntl.h>
#include <google/protobuf/util/json_util.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/fd.h"

namespace cordon {

bool ParseAuditLine(std::string_view line, cordon::v1::AuditEvent* event) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;  // a later cordon's fields
  return google::protobuf::util::JsonStringToMessage(google::protobuf::StringPiece(line.data(), line.size()), event,
                                                     options)
      .ok();
}

bool AuditFileReader::Line(const std::string& path, uint64_t number, std::string_view line, const OnEvent& on_event) {
  ++lines_;
  // One verifier across the files, as `cordon audit verify` (ChainVerifier
  // says when a file starts a chain of its own).
  if (chain_error_.empty()) {
    if (!chain_) chain_ = std::make_unique<ChainVerifier>();
    if (number == 1) chain_->BeginFile(path);
    std::string with_newline(line);
    with_newline += '\n';
    if (!chain_->Feed(with_newline)) chain_error_ = chain_->error();
  }
  cordon::v1::AuditEvent event;
  if (!ParseAuditLine(line, &event) || event.kind().empty()) {
    error_ = path + ":" + std::to_string(number) + ": not an audit event (one JSON AuditEvent per line" +
             (number == 1 ? ": is this an audit file?)" : ")");
    return false;
  }
  if (event.kind() != "chain.start") on_event(event);
  return true;
}

bool AuditFileReader::ReadFile(const std::string& path, const OnEvent& on_event) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return error_ = path + ": " + std::strerror(errno), false;
  std::string pending;
  uint64_t number = 0;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return error_ = path + ": " + std::strerror(errno), false;
    if (n == 0) break;
    pending.append(buf, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1)
      if (!Line(path, ++number, std::string_view(pending).substr(start, nl - start), on_event)) return false;
    pending.erase(0, start);
  }
  if (number == 0 && pending.empty()) return error_ = path + ": empty file (not an audit file)", false;
  cordon::v1::AuditEvent last;
  if (!pending.empty() && !ParseAuditLine(pending, &last))
    return error_ = path + ":" + std::to_string(number + 1) + ": not an audit event (one JSON AuditEvent per line)",
           false;
  if (!pending.empty())
    notes_.push_back(path + ":" + std::to_string(number + 1) +
                     ": the last line has no newline (still being written?): not read");
  return true;
}

}  // namespace cordon
