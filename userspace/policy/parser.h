// Policy file -> cordon.v1.SandboxPolicy, with every field's source position.
// Schema-driven by protobuf reflection: keys are the fields' JSON names;
// unknown fields and wrong types are errors naming file, line and field.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "cordon/v1/policy.pb.h"
#include "policy/diagnostic.h"
#include "util/result.h"

namespace cordon::policy {

struct SourcePos {
  int line = 0;
  int column = 0;
};

struct ParsedPolicy {
  cordon::v1::SandboxPolicy proto;
  std::string file;
  // Field path (same spelling as Diagnostic::field) -> position of its value,
  // for every field written with a non-null value, every list item
  // ("spec.network.egress[3]") and map entry ("metadata.labels.team"); ""
  // is the document. Presence here is how the compiler tells `x: []` from an
  // omitted x (proto3 cannot).
  std::map<std::string, SourcePos> positions;

  // A diagnostic for `field`, positioned at the field if known, else at its
  // nearest known ancestor.
  Diagnostic At(const std::string& field, std::string message) const;
};

// Parses YAML or JSON text. Maximum accepted input: 16 MiB.
// Returns false and fills *diags (never empty on failure) on any error; every
// error is reported, not just the first.
//
// Value rules: string fields take any scalar as written (`443` -> "443");
// bool/integer fields only unquoted literals; messages need mappings, repeated
// fields sequences, map fields mappings. A YAML null value (`key:`, `~`,
// `null`, unquoted) leaves the field unset exactly as if the key were absent,
// and its position is not recorded; so `families:` alone means "omitted"
// while `families: []` is present and empty (see `positions`). A null list
// item is an error; a null map value is "".
bool ParsePolicyText(std::string_view text, const std::string& file, ParsedPolicy* out, Diagnostics* diags);

// Reads and parses a file ("-" is standard input). I/O errors become diagnostics too.
bool ParsePolicyFile(const std::string& path, ParsedPolicy* out, Diagnostics* diags);

}  // namespace cordon::policy
