// How `cordon attach` and `cordon update` show an attach outcome, the same
// whether the CLI attached directly or through the agent: the attach line,
// the notes, the retroactive check's events (stdout, as `cordon tail -o
// json`) and summary, and the exit status they imply.
#pragma once

#include <string>

#include "ops/ops.h"

namespace cordon::cli {

// Printed in this order: head (stderr), events (stdout), tail (stderr).
struct AttachReport {
  std::string head;    // "cordon: ..." lines: the attach line, the notes (or the error)
  std::string events;  // one JSON line per retroactive event
  std::string tail;    // "cordon: ..." lines: the retroactive check's summary, its failures
  int status = 0;      // 0; 1: failed, or attached with a failed retroactive check
};

AttachReport RenderAttachOutcome(const ops::AttachOutcome& outcome);

}  // namespace cordon::cli
