// `cordon learn`'s two forms: from a run of a command (learn.cc) and from a
// cgroup watched for a while (learn_cgroup.cc, --cgroup). Both feed the same
// pure synthesizer (policy/learn.h) and end the same way (WriteLearned).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/args.h"
#include "policy/compiler.h"
#include "policy/learn.h"
#include "policy/parser.h"
#include "util/result.h"

namespace cordon::cli {

// Written, but the report says why an enforce run may still see violations.
constexpr int kExitWrittenWithWarnings = 3;

// A usage error: the message and the help on stderr; returns 2.
int LearnUsage(const std::string& message);

// What the synthesizer asks about this host's paths; `start_ns` (CLOCK_REALTIME)
// is when learning started: what was made after it was made by the workload.
policy::LearnFacts HostFacts(int64_t start_ns);
int64_t RealNowNs();

// `path` whole or not at all: a temporary file beside it, renamed over it.
Status WriteOutput(const std::string& path, const std::string& data);

// How a form ends its report.
struct LearnEnding {
  std::string lost_hint;              // after "the policy may miss what they reported"
  std::string unplaced_hint;          // after "an enforce run refuses those no learned rule covers"
  bool tried_clean = false;           // an enforce round refused nothing (unplaced changes then no warning)
  std::vector<std::string> warnings;  // the form's own reasons for exit 3, after the common ones
  std::vector<std::string> closing;   // the report's last lines
};

// The candidate checked (it compiles again; the write paths it names exist
// here), the warnings (events lost, accesses not learned, changes not placed,
// and the form's own), then the policy written to `out_path` (stdout when
// empty) and the report to `report_path` (stderr when empty). Returns the
// exit status: 0, kExitWrittenWithWarnings, or 1 (nothing written).
int WriteLearned(const policy::LearnResult& learned, const std::vector<policy::LearnRound>& rounds,
                 const LearnEnding& ending, const std::string& out_path, const std::string& report_path);

// `cordon learn --cgroup PATH --duration D`: `base` (parsed, and compiled)
// attached in audit mode for the window, its events collected, then
// detached; `name` replaces the candidate's metadata.name unless empty.
int LearnFromCgroup(const ParsedArgs& parsed, const policy::ParsedPolicy& base, const policy::CompiledPolicy& compiled,
                    const std::string& name);

}  // namespace cordon::cli
