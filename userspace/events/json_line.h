// AuditEvent -> text: the audit file's line (canonical protobuf JSON) and a
// short line for people.
#pragma once

#include <string>

#include "event.pb.h"

namespace cordon {

// One line of the audit file: canonical protobuf JSON, without the newline.
std::string ToJsonLine(const cordon::v1::AuditEvent& event);
// Appends ToJsonLine(event) to *out. Byte-identical to protobuf's
// MessageToJsonString (no whitespace, lowerCamelCase names): written here for
// events whose strings are all ASCII (the common case, and much faster), and
// by protobuf for the others.
void AppendJsonLine(const cordon::v1::AuditEvent& event, std::string* out);

// One short line for people: time, sandbox, verdict, kind, process, target, reason.
std::string ToCompactLine(const cordon::v1::AuditEvent& event, bool colour = false);

}  // namespace cordon
