// The impact of a sandbox's run as its audit trail records it (`cordon
// report`): events in, an ImpactReport out (pure: no kernel, no files but
// the containment evidence documents the trail names, read through a hook).
// Renderers for people: text (the display form of userspace/util/text.h for
// every [workload] string) and one self-contained HTML page.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "event.pb.h"
#include "report.pb.h"

namespace cordon::inspect {

struct ImpactScope {
  std::string sandbox;        // only this sandbox name ("" = every one)
  uint64_t sandbox_id = 0;    // only this sandbox cgroup id (0 = any)
  std::string cgroup;         // only events whose cgroupPath is this cgroup or below it ("" = any)
  int64_t since_unix_ns = 0;  // 0: unbounded
  int64_t until_unix_ns = 0;
};

// Reads a containment evidence document: its text, or an error.
using EvidenceLoader = std::function<bool(const std::string& path, std::string* text, std::string* error)>;

class ImpactBuilder {
 public:
  explicit ImpactBuilder(ImpactScope scope, EvidenceLoader evidence = {});
  ~ImpactBuilder();
  // One event of the trail (chain.start records are ignored); those outside
  // the scope are skipped.
  void Add(const cordon::v1::AuditEvent& event);
  // The report, sandboxes ordered by their first event.
  cordon::v1::ImpactReport Finish();

 private:
  struct Sandbox;
  Sandbox& SandboxOf(const cordon::v1::AuditEvent& event);
  ImpactScope scope_;
  EvidenceLoader evidence_;
  std::map<std::pair<uint64_t, std::string>, std::unique_ptr<Sandbox>> sandboxes_;
  // Ids seen (AuditEvent.id): a record written twice (an agent killed
  // between writing and committing it) counts once.
  std::unordered_set<std::string> ids_;
};

// The family a kind belongs to in the timeline: net, file, tamper, resource,
// credential, sandbox or other.
std::string KindFamily(const std::string& kind);

std::string ImpactText(const cordon::v1::ImpactReport& report);
std::string ImpactHtml(const cordon::v1::ImpactReport& report);
std::string ImpactJson(const cordon::v1::ImpactReport& report);

// Text for an HTML document: & < > " ' as character references.
std::string HtmlEscape(std::string_view text);

}  // namespace cordon::inspect
