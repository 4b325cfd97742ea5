// AuditEvent -> protobuf wire bytes, written directly (the agent encodes
// every event for its tailers).
#pragma once

#include <string>

#include "event.pb.h"

namespace cordon {

// Appends the event's protobuf wire encoding to *out: the bytes
// SerializeToString() produces (fields in number order, defaults omitted).
// Unknown fields are left out; the events the agent makes have none.
void AppendWireEvent(const cordon::v1::AuditEvent& event, std::string* out);

}  // namespace cordon
