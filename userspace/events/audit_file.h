// Reading audit files (one AuditEvent per line, README "Audit events"): the
// one parse of a line every reader shares (cordon tail's replay, cordon
// learn, the containment evidence, cordon report), and a reader of whole
// files that names FILE:LINE and verifies the hash chain on the way.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "event.pb.h"
#include "events/audit_chain.h"

namespace cordon {

// One line of an audit file (without its newline) as an AuditEvent; fields a
// later cordon added are ignored. False if the line is not one.
bool ParseAuditLine(std::string_view line, cordon::v1::AuditEvent* event);

// Reads audit files strictly: a file that cannot be read or a line that is
// not an AuditEvent is an error naming FILE:LINE. The chain is verified on
// the side (a break is recorded, reading goes on), by ChainVerifier's rule: a
// file starting a chain of its own (chain.start naming no previous value)
// starts a new one, any other continues the file before it (rotated files,
// oldest first).
class AuditFileReader {
 public:
  using OnEvent = std::function<void(const cordon::v1::AuditEvent& event)>;
  // Calls on_event for every record but chain.start. A last line without a
  // newline (being written) is not read: notes() says so.
  bool ReadFile(const std::string& path, const OnEvent& on_event);

  const std::string& error() const { return error_; }              // why ReadFile failed
  const std::string& chain_error() const { return chain_error_; }  // the first break, "" if none
  uint64_t lines() const { return lines_; }
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  bool Line(const std::string& path, uint64_t number, std::string_view line, const OnEvent& on_event);
  std::unique_ptr<ChainVerifier> chain_;
  std::string error_, chain_error_;
  uint64_t lines_ = 0;
  std::vector<std::string> notes_;
};

}  // namespace cordon
