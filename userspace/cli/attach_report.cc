#include "cli/attach_report.h"

#include <cstdio>

#include "events/json_line.h"

namespace cordon::cli {

AttachReport RenderAttachOutcome(const ops::AttachOutcome& out) {
  AttachReport r;
  std::string* to = &r.head;
  auto line = [&to](const std::string& text) { *to += "cordon: " + text + "\n"; };
  // spec.credentials: issued (or, when the attach failed, issue_failed and
  // revoked): names and fingerprints, never values.
  for (const auto& event : out.credential_events) r.events += ToJsonLine(event) + "\n";
  if (!out.error.empty()) {
    line(out.error);
    r.status = 1;
    return r;
  }
  line(std::string(out.replaced ? "replaced policy of" : "attached") + " sandbox '" + out.name + "' on " +
       out.cgroup + " (cgroup id " + std::to_string(out.sandbox_id) + "): policy '" + out.policy + "', mode " +
       out.mode);
  if (out.replaced) {
    char us[32];
    std::snprintf(us, sizeof us, "%.1f", static_cast<double>(out.swap_ns) / 1000.0);
    line(std::string("the network programs were swapped in ") + us + " us (each hook atomically)");
  }
  for (const auto& note : out.notes) line("note: " + note);
  // Retroactive attach: pre-existing connections the policy denies are
  // destroyed, open files listed.
  to = &r.tail;
  if (!out.retro_error.empty()) {
    line("attached, but retroactive check failed: " + out.retro_error);
    r.status = 1;
    return r;
  }
  for (const auto& event : out.retro_events) r.events += ToJsonLine(event) + "\n";
  line(out.retro_summary);
  if (out.retro_destroy_failed) {
    line("attached, but " + std::to_string(out.retro_destroy_failed) +
         " pre-existing connection(s) the policy denies could not be destroyed (see the events)");
    r.status = 1;
  }
  return r;
}

}  // namespace cordon::cli
