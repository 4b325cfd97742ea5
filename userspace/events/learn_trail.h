// The audit trail as `cordon learn` reads it: each event an access the
// policy in force did not allow (policy/learn.h Observation), and what the
// trail says was lost on the way.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "event.pb.h"
#include "policy/learn.h"

namespace cordon {

// The access an event reports; false for records that report none (loss,
// suppressed, chain.start, credential.*, resource.*, the retroactive
// check's *.preexisting, proc.coredump) and for verdicts of no access.
bool ObservationOf(const cordon::v1::AuditEvent& event, policy::Observation* out);

struct LearnTrail {
  std::vector<policy::Observation> observations;  // in trail order, not deduplicated
  uint64_t events = 0;                            // records that were events (every kind but chain.start)
  uint64_t lost = 0;                              // loss records' counts
  uint64_t suppressed = 0;                        // suppressed records' counts
  uint64_t unreadable = 0;                        // lines that are not AuditEvents (a torn last line included)
};

// An audit file's text (one AuditEvent per line, cordon run --audit).
LearnTrail ReadLearnTrail(const std::string& text);

}  // namespace cordon
