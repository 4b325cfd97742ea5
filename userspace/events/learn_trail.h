// The audit trail as `cordon learn` reads it: each event an access the
// policy in force did not allow (policy/learn.h Observation), and what the
// trail says was lost on the way.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "event.pb.h"
#include "policy/learn.h"

namespace cordon {

// The access an event reports; false for records that report none (loss,
// suppressed, chain.start, credential.*, resource.*, the retroactive
// check's *.preexisting, proc.coredump) and for verdicts of no access.
bool ObservationOf(const cordon::v1::AuditEvent& event, policy::Observation* out);

// A connection the retroactive check of an attach found open and the policy
// denies (net.preexisting, verdict audited, destroyed or destroy-failed) as a
// connect to its destination: an enforce attach of a policy without it would
// destroy that connection. False for every other record.
bool PreexistingObservationOf(const cordon::v1::AuditEvent& event, policy::Observation* out);

struct LearnTrail {
  // Distinct (policy::Observation's ==), in the order each was first seen.
  std::vector<policy::Observation> observations;
  uint64_t events = 0;                   // records that were events (every kind but chain.start)
  uint64_t lost = 0;                     // loss records' counts
  uint64_t suppressed = 0;               // suppressed records' counts
  uint64_t unreadable = 0;               // lines that are not AuditEvents (a torn last line included)
  uint64_t preexisting_connections = 0;  // net.preexisting records taken as observations
  uint64_t preexisting_files = 0;        // file.preexisting records (a process holding files open)

  // One record, as each line of a trail: counted, and its access (ObservationOf,
  // PreexistingObservationOf) added unless already there.
  void Add(const cordon::v1::AuditEvent& event);

 private:
  std::set<std::string> keys_;  // of `observations`
};

// An audit file's text (one AuditEvent per line, cordon run --audit).
LearnTrail ReadLearnTrail(const std::string& text);

}  // namespace cordon
