// Compiles one spec section of a policy written by a unit test, and checks
// that an error sits at the file, line and field it should.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "policy/compiler.h"
#include "policy/parser.h"

namespace cordon::policy {

struct SectionOutcome {
  bool ok = false;
  CompiledPolicy compiled;
  Diagnostics diags;
};

// "apiVersion..spec:\n  <section>:\n" (6 lines) then `body`, as `file`.
inline SectionOutcome CompileSection(const std::string& section, const std::string& body, const std::string& file) {
  SectionOutcome out;
  ParsedPolicy parsed;
  const std::string text =
      "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata:\n  name: t\nspec:\n  " + section + ":\n" + body;
  if (!ParsePolicyText(text, file, &parsed, &out.diags)) return out;
  out.ok = Compile(parsed, &out.compiled, &out.diags);
  return out;
}

// Exactly one error, at <file>:<line>, naming `field`, containing `text`.
inline void ExpectSectionError(const SectionOutcome& out, const std::string& file, const std::string& field, int line,
                               const std::string& text) {
  EXPECT_FALSE(out.ok);
  ASSERT_EQ(out.diags.size(), 1u) << FormatDiagnostics(out.diags);
  const Diagnostic& d = out.diags[0];
  EXPECT_EQ(d.file, file);
  EXPECT_EQ(d.line, line) << d.ToString();
  EXPECT_EQ(d.field, field) << d.ToString();
  EXPECT_NE(d.message.find(text), std::string::npos) << d.ToString();
  const std::string shown = d.ToString();
  EXPECT_NE(shown.find(file + ":" + std::to_string(line) + ":"), std::string::npos) << shown;
  EXPECT_NE(shown.find(field), std::string::npos) << shown;
}

}  // namespace cordon::policy
