// Rules given on `cordon run`'s command line (--allow-net, --read, --write,
// --exec, --timeout, --mode, --user), merged into a parsed policy; and a
// policy written back as text (what `cordon run --print-policy` prints).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "policy/parser.h"

namespace cordon::policy {

// One option as given: {"--read", "/data"}.
struct InlineOption {
  std::string option;
  std::string value;
};

// The options cordon run merges into its policy, in this order.
//   --allow-net ADDR[:PORTS][/tcp|/udp]  an item of spec.network.egress: ADDR an
//       address or CIDR (IPv6 in brackets when ports follow: [::1]:443), PORTS
//       a comma list of ports and ranges (443,8000-8100); omitted: every port
//   --read / --write / --exec PATH       an item of spec.files.read/write/exec
//   --timeout DURATION                   spec.resources.wallTime (replaced)
//   --mode enforce|audit                 spec.mode (replaced)
//   --user WHO                           spec.runAs (replaced)
const std::vector<std::string>& InlineOptionNames();

struct MergedPolicy {
  ParsedPolicy parsed;  // parsed back from `text`, positions there
  std::string text;     // the merged policy as JSON text (PolicyJson)
  // Field path of each merged item or field ("spec.network.egress[2]",
  // "spec.files.read[7]", "spec.resources.wallTime") -> the option that
  // wrote it, as a diagnostic names it: "--read '/data'".
  std::vector<std::pair<std::string, std::string>> sources;
  // The option that wrote `field` or a field inside it; "" for the base's.
  std::string SourceOf(const std::string& field) const;
};

// Merges `options` into `base` (already checked by the compiler on its own).
// A value the policy language cannot hold (a malformed --allow-net, files
// options where the base has no spec.files) is an error in *errors, one
// line each naming the option; then false. The merged policy may still be
// refused by the compiler: its diagnostics name fields, MergedPolicy::SourceOf
// tells which option wrote them.
bool MergeInlineOptions(const ParsedPolicy& base, const std::vector<InlineOption>& options, MergedPolicy* out,
                        std::vector<std::string>* errors);

struct CompiledPolicy;

// Compiles the merged policy. A diagnostic of a field an option wrote names
// the option in place of the file (no line); file rules say where they were
// written: the base's entries at the base's file:line:column (from `base`,
// the base compiled), the options' by the option.
bool CompileMerged(const MergedPolicy& merged, const CompiledPolicy& base, CompiledPolicy* out, Diagnostics* diags);

// The policy as JSON (two-space indented, the fields' JSON names, in field
// order) that ParsePolicyText reads back to the same message and the same
// presence: a field the document wrote stays written even when empty
// (`families: []` is not an omitted list), one it did not write stays out.
std::string PolicyJson(const ParsedPolicy& parsed);

}  // namespace cordon::policy
