// libFuzzer target: any bytes through parse -> compile -> describe -> evaluate.
// Must never crash, hang or leak; a failure must always explain itself.
// File rules must come out normalized, unique and numbered; the path
// normalizer is also fed the raw input. A policy written back as JSON
// (PolicyJson, what `cordon run --print-policy` prints) reads back to the
// same message and compiles alike; the raw input as an inline option's value
// (cordon run --allow-net, --read) is merged or refused with a reason.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <unordered_set>

#include "policy/compiler.h"
#include <google/protobuf/util/message_differencer.h>

#include "policy/describe.h"
#include "policy/inline.h"
#include "policy/parser.h"
#include "policy/quiet.h"
#include "policy/resources.h"

namespace policy = cordon::policy;

namespace {

// Accepted paths are absolute, normalized and printable; normalizing is idempotent.
void CheckNormalizer(std::string_view input) {
  std::string normalized, error;
  if (!policy::NormalizeFilePath(input, &normalized, &error)) {
    if (error.empty()) std::abort();
    return;
  }
  if (normalized.empty() || normalized[0] != '/' || normalized.size() > input.size()) std::abort();
  if (normalized.size() > 1 && normalized.back() == '/') std::abort();
  if (normalized.find("//") != std::string::npos || normalized.find("/./") != std::string::npos ||
      normalized.find("/../") != std::string::npos || normalized.ends_with("/.") || normalized.ends_with("/..")) {
    std::abort();
  }
  for (char c : normalized) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) std::abort();
  }
  std::string again;
  if (!policy::NormalizeFilePath(normalized, &again, &error) || again != normalized) std::abort();
}

void CheckFileRules(const policy::CompiledPolicy& compiled) {
  if (!compiled.has_files) {
    if (!compiled.file_rules.empty()) std::abort();
    if (compiled.lsm_flags & (CORDON_LSM_F_MEMFD_EXEC | CORDON_LSM_F_PROC_SELF)) std::abort();
  }
  constexpr uint32_t kKnownFlags =
      CORDON_LSM_F_MEMFD_EXEC | CORDON_LSM_F_ABSTRACT_UNIX | CORDON_LSM_F_USERNS | CORDON_LSM_F_PROC_SELF;
  if (compiled.lsm_flags & ~kKnownFlags) std::abort();
  std::unordered_set<std::string> paths;
  bool profile_seen = false;
  for (size_t i = 0; i < compiled.file_rules.size(); ++i) {
    const policy::FileRule& rule = compiled.file_rules[i];
    if (rule.rule != i + 1) std::abort();
    if (rule.rights == 0 || (rule.rights & ~policy::kFileRightsAll) || !(rule.rights & CORDON_FILE_READ)) std::abort();
    if (!paths.insert(rule.path).second) std::abort();
    std::string normalized, error;
    if (!policy::NormalizeFilePath(rule.path, &normalized, &error) || normalized != rule.path) std::abort();
    // Explicit entries (required) all come before profile entries.
    const bool from_profile = rule.origin.starts_with("profile:");
    if (from_profile == rule.required) std::abort();
    if (!from_profile && profile_seen) std::abort();
    profile_seen = profile_seen || from_profile;
  }
}

// Accepted limits keep their documented bounds and their display form reads back the same.
void CheckResources(const policy::ResourceLimits& r) {
  if (r.memory && *r.memory == 0) std::abort();
  if (r.memory && r.memory_high && *r.memory_high > *r.memory) std::abort();
  if (r.pids && (*r.pids == 0 || *r.pids > policy::kMaxPids)) std::abort();
  if (r.cpu_millicores && (*r.cpu_millicores < 10 || *r.cpu_millicores > 10'000'000)) std::abort();
  if (r.cpu_weight && (*r.cpu_weight == 0 || *r.cpu_weight > 10000)) std::abort();
  if (r.warn_at_percent && (*r.warn_at_percent == 0 || *r.warn_at_percent > 100)) std::abort();
  for (const auto& bytes : {r.memory, r.memory_high, r.swap, r.disk, r.egress_bytes, r.io_write_bytes_per_second}) {
    if (!bytes) continue;
    uint64_t again = 0;
    std::string error;
    if (!policy::ParseByteSize(policy::ByteSizeText(*bytes), &again, &error) || again != *bytes) std::abort();
  }
  if (r.wall_time_seconds) {
    uint64_t again = 0;
    std::string error;
    if (!policy::ParseDuration(policy::DurationText(*r.wall_time_seconds), &again, &error) ||
        again != *r.wall_time_seconds)
      std::abort();
  }
  if (r.cpu_millicores) {
    uint64_t again = 0;
    std::string error;
    if (!policy::ParseCpuCores(policy::CpuCoresText(*r.cpu_millicores), &again, &error) || again != *r.cpu_millicores)
      std::abort();
  }
}

// The unit parsers on the raw input: a refusal always explains itself.
void CheckUnitParsers(std::string_view input) {
  if (input.size() > 64) return;
  uint64_t v = 0;
  std::string error;
  if (!policy::ParseByteSize(input, &v, &error) && error.empty()) std::abort();
  error.clear();
  if (!policy::ParseCpuCores(input, &v, &error) && error.empty()) std::abort();
  error.clear();
  if (!policy::ParseDuration(input, &v, &error) && error.empty()) std::abort();
  error.clear();
  if (!policy::ParsePercent(input, &v, &error) && error.empty()) std::abort();
}

// PolicyJson reads back to the same message and the same presence.
void CheckRoundTrip(const policy::ParsedPolicy& parsed, const policy::CompiledPolicy& compiled) {
  const std::string json = policy::PolicyJson(parsed);
  policy::ParsedPolicy again;
  policy::Diagnostics diags;
  if (!policy::ParsePolicyText(json, "again.json", &again, &diags)) std::abort();
  if (!google::protobuf::util::MessageDifferencer::Equals(again.proto, parsed.proto)) std::abort();
  policy::CompiledPolicy recompiled;
  if (!policy::Compile(again, &recompiled, &diags)) std::abort();
  if (recompiled.families != compiled.families || recompiled.has_files != compiled.has_files ||
      recompiled.file_rules != compiled.file_rules || recompiled.addr_entries.size() != compiled.addr_entries.size() ||
      recompiled.lsm_flags != compiled.lsm_flags || recompiled.mode != compiled.mode ||
      recompiled.quiet != compiled.quiet)
    std::abort();
  if (policy::PolicyJson(again) != json) std::abort();
}

// spec.quiet: every accepted pattern has a target, reads back the same from
// its pinned form, and a glob without wildcards matches exactly its own
// path; the glob matcher takes the raw input as a glob and as a path (a
// match is only ever of a path in normal form).
void CheckQuiet(const policy::CompiledPolicy& compiled, std::string_view input) {
  for (const policy::QuietPattern& p : compiled.quiet) {
    if (p.kind.empty() || (p.path.empty() && p.unix_address.empty() && !p.prefix)) std::abort();
    if (!p.ports.empty() && !p.prefix) std::abort();
    if (!p.path.empty() && p.path.find_first_of("*?") == std::string::npos && !policy::MatchGlob(p.path, p.path))
      std::abort();
  }
  auto back = policy::ParseQuiet(policy::SerializeQuiet(compiled.quiet));
  if (!back || *back != compiled.quiet) std::abort();
  if (input.size() > 4096) return;
  for (std::string_view glob : {input, std::string_view("/usr/**"), std::string_view("/a*b?/c")}) {
    if (!policy::MatchGlob(glob, input)) continue;
    if (input.empty() || (input[0] != '/' && input[0] != '@')) std::abort();
    if (input[0] == '/' &&
        (input.find("//") != std::string_view::npos || input.find("/../") != std::string_view::npos ||
         input.find("/./") != std::string_view::npos || input.ends_with("/..") || input.ends_with("/.")))
      std::abort();
  }
}

// The input as the value of inline options: merged, or refused with a reason.
void CheckInline(const policy::ParsedPolicy& parsed, const policy::CompiledPolicy& compiled, std::string_view input) {
  if (input.size() > 256) return;
  for (const char* option : {"--allow-net", "--read", "--timeout"}) {
    policy::MergedPolicy merged;
    std::vector<std::string> errors;
    if (!policy::MergeInlineOptions(parsed, {{option, std::string(input)}}, &merged, &errors)) {
      if (errors.empty()) std::abort();
      continue;
    }
    policy::CompiledPolicy out;
    policy::Diagnostics diags;
    if (!policy::CompileMerged(merged, compiled, &out, &diags) && diags.empty()) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  CheckNormalizer(text);
  CheckUnitParsers(text);
  policy::ParsedPolicy parsed;
  policy::Diagnostics diags;
  if (!policy::ParsePolicyText(text, "fuzz.yaml", &parsed, &diags)) {
    if (diags.empty()) std::abort();  // a rejection without a reason
    (void)policy::FormatDiagnostics(diags);
    return 0;
  }
  if (!diags.empty()) std::abort();  // success must not carry errors
  policy::CompiledPolicy compiled;
  if (!policy::Compile(parsed, &compiled, &diags)) {
    if (diags.empty()) std::abort();
    (void)policy::FormatDiagnostics(diags);
    return 0;
  }
  (void)policy::Describe(compiled);
  CheckFileRules(compiled);
  CheckResources(compiled.resources);
  CheckRoundTrip(parsed, compiled);
  CheckQuiet(compiled, text);
  CheckInline(parsed, compiled, text);

  // The image must decide as the rules do, at a few addresses derived from
  // the policy itself (each rule's first address) and from the input.
  const uint8_t protos[] = {policy::kProtoTcp, policy::kProtoUdp, 1 /* icmp */, 132 /* sctp */};
  size_t probes = 0;
  for (const auto& rule : compiled.rules) {
    if (++probes > 16) break;
    const uint16_t port = rule.ports.empty() ? static_cast<uint16_t>(size) : rule.ports.front().lo;
    for (uint8_t proto : protos) {
      for (uint16_t p : {port, static_cast<uint16_t>(port + 1), static_cast<uint16_t>(port - 1)}) {
        if (policy::EvaluateImage(compiled, rule.prefix.addr, p, proto) !=
            policy::EvaluateRules(compiled, rule.prefix.addr, p, proto)) {
          std::abort();
        }
      }
    }
  }
  return 0;
}
