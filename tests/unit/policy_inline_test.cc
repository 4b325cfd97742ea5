// cordon run's inline options merged into a policy, and a policy written
// back as JSON (policy/inline.h).
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <dirent.h>

#include <fstream>
#include <sstream>

#include "policy/compiler.h"
#include "policy/inline.h"
#include "policy/parser.h"

namespace cordon::policy {
namespace {

ParsedPolicy Parse(const std::string& text, const std::string& file = "p.yaml") {
  ParsedPolicy parsed;
  Diagnostics diags;
  EXPECT_TRUE(ParsePolicyText(text, file, &parsed, &diags)) << FormatDiagnostics(diags);
  return parsed;
}

CompiledPolicy CompileOk(const ParsedPolicy& parsed) {
  CompiledPolicy compiled;
  Diagnostics diags;
  EXPECT_TRUE(Compile(parsed, &compiled, &diags)) << FormatDiagnostics(diags);
  return compiled;
}

// The JSON of a policy compiles to the same policy (the digest aside: it is
// of the text), presence included: `families: []` (none) is not an omitted
// list (the default families), `files: {}` (deny every file) not omitted
// files (unrestricted).
TEST(PolicyJson, ReadsBackToTheSamePolicyWithPresenceKept) {
  const std::vector<std::string> texts = {
      DefaultPolicyYaml(),
      "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: none}\nspec:\n  network: {families: []}\n"
      "  files: {}\n",
      "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: omitted, labels: {z: '1', a: \"q\\\"\\\\\\t\"}}\n"
      "spec: {}\n",
      "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: rules, description: \"caf\xc3\xa9 \\x01\"}\n"
      "spec:\n  mode: audit\n  onViolation: kill\n  runAs: '1000:1000'\n  capabilities: [net_bind_service]\n"
      "  network:\n    egress:\n      - {name: web, cidr: 10.0.0.0/8, ports: [443, '8000-8100'], protocols: [tcp]}\n"
      "      - {cidr: '::1'}\n    listen: [{ports: [8080]}]\n    extraProtocols: [icmp]\n"
      "  files: {read: [/etc], write: [/tmp], exec: [/bin/true], allowMemfdExec: true}\n"
      "  resources: {pids: 64, memory: 1Gi, wallTime: 10m, warnAt: 80%}\n",
      // Characters a YAML reader would fold or refuse raw (NEL, U+2028, U+2029, a C1 control).
      "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: text, description: \"a\\u0085b \\u2028 c\\u2029d "
      "\\u009b e \\U0001F600 \\u00e9\"}\nspec:\n  files: {read: [\"/a\\u0085b\", \"/x\\u2028y\", \"/caf\\u00e9\"]}\n",
  };
  for (const std::string& text : texts) {
    const ParsedPolicy parsed = Parse(text);
    const std::string json = PolicyJson(parsed);
    const ParsedPolicy again = Parse(json, "again.json");
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(again.proto, parsed.proto)) << json;
    CompiledPolicy a = CompileOk(parsed), b = CompileOk(again);
    EXPECT_EQ(a.families, b.families) << json;
    EXPECT_EQ(a.has_files, b.has_files) << json;
    EXPECT_EQ(a.file_rules, b.file_rules) << json;
    EXPECT_EQ(a.addr_entries.size(), b.addr_entries.size()) << json;
    EXPECT_EQ(a.mode, b.mode);
    EXPECT_EQ(a.lsm_flags, b.lsm_flags);
    EXPECT_EQ(a.run_as, b.run_as);
    EXPECT_EQ(PolicyJson(again), json) << "the same text each time";
  }
  // The controls: omitted and empty differ, so the test above can tell.
  EXPECT_EQ(CompileOk(Parse(texts[1])).families, 0u);
  EXPECT_NE(CompileOk(Parse(texts[2])).families, 0u);
  EXPECT_TRUE(CompileOk(Parse(texts[1])).has_files);
  EXPECT_FALSE(CompileOk(Parse(texts[2])).has_files);
}

// Every shipped example reads back alike.
TEST(PolicyJson, ShippedExamplesReadBack) {
  const std::string dir = std::string(CORDON_SOURCE_DIR) + "/policy/examples";
  DIR* d = ::opendir(dir.c_str());
  ASSERT_NE(d, nullptr);
  int n = 0;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    ParsedPolicy parsed;
    Diagnostics diags;
    ASSERT_TRUE(ParsePolicyFile(dir + "/" + name, &parsed, &diags)) << name << FormatDiagnostics(diags);
    const ParsedPolicy again = Parse(PolicyJson(parsed), name + ".json");
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(again.proto, parsed.proto)) << name;
    ++n;
  }
  ::closedir(d);
  EXPECT_GT(n, 3);
}

MergedPolicy Merge(const std::string& base_text, const std::vector<InlineOption>& options) {
  MergedPolicy merged;
  std::vector<std::string> errors;
  EXPECT_TRUE(MergeInlineOptions(Parse(base_text), options, &merged, &errors));
  for (const auto& e : errors) ADD_FAILURE() << e;
  return merged;
}

TEST(InlineOptions, AreMergedAfterThePolicysOwnRules) {
  const std::string base =
      "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: base}\nspec:\n"
      "  network: {egress: [{cidr: 192.0.2.0/24, ports: [80]}]}\n  files: {read: [/etc]}\n"
      "  resources: {wallTime: 1h}\n";
  MergedPolicy merged = Merge(base, {{"--allow-net", "10.0.0.0/8:443,8000-8100"},
                                     {"--allow-net", "[2001:db8::/32]:53/udp"},
                                     {"--allow-net", "::1"},
                                     {"--allow-net", "203.0.113.7"},
                                     {"--read", "/srv"},
                                     {"--write", "/var/tmp"},
                                     {"--exec", "/usr/bin/env"},
                                     {"--timeout", "90s"},
                                     {"--mode", "audit"},
                                     {"--user", "root"}});
  const auto& spec = merged.parsed.proto.spec();
  ASSERT_EQ(spec.network().egress_size(), 5);
  EXPECT_EQ(spec.network().egress(0).cidr(), "192.0.2.0/24") << "the policy's own rule first";
  EXPECT_EQ(spec.network().egress(1).cidr(), "10.0.0.0/8");
  EXPECT_EQ(spec.network().egress(1).ports_size(), 2);
  EXPECT_EQ(spec.network().egress(1).ports(1), "8000-8100");
  EXPECT_EQ(spec.network().egress(1).protocols_size(), 0) << "both protocols";
  EXPECT_EQ(spec.network().egress(2).cidr(), "2001:db8::/32");
  EXPECT_EQ(spec.network().egress(2).ports(0), "53");
  ASSERT_EQ(spec.network().egress(2).protocols_size(), 1);
  EXPECT_EQ(spec.network().egress(2).protocols(0), "udp");
  EXPECT_EQ(spec.network().egress(3).cidr(), "::1");
  EXPECT_EQ(spec.network().egress(3).ports_size(), 0) << "a bare IPv6 address: every port";
  EXPECT_EQ(spec.network().egress(4).cidr(), "203.0.113.7");
  EXPECT_EQ(spec.files().read(1), "/srv");
  EXPECT_EQ(spec.files().write(0), "/var/tmp");
  EXPECT_EQ(spec.files().exec(0), "/usr/bin/env");
  EXPECT_EQ(spec.resources().wall_time(), "90s") << "replaced";
  EXPECT_EQ(spec.mode(), "audit");
  EXPECT_EQ(spec.run_as(), "root");
  EXPECT_EQ(merged.SourceOf("spec.network.egress[1].ports[0]"), "--allow-net '10.0.0.0/8:443,8000-8100'");
  EXPECT_EQ(merged.SourceOf("spec.network.egress[0].cidr"), "") << "the base's";
  EXPECT_EQ(merged.SourceOf("spec.network.egress[10]"), "") << "not egress[1]";
  EXPECT_EQ(merged.SourceOf("spec.files.read[1]"), "--read '/srv'");
  EXPECT_EQ(merged.SourceOf("spec.resources.wallTime"), "--timeout '90s'");

  CompiledPolicy base_compiled = CompileOk(Parse(base));
  CompiledPolicy compiled;
  Diagnostics diags;
  ASSERT_TRUE(CompileMerged(merged, base_compiled, &compiled, &diags)) << FormatDiagnostics(diags);
  EXPECT_EQ(compiled.rules.size(), 5u);
  EXPECT_EQ(compiled.mode, CORDON_MODE_AUDIT);
  EXPECT_EQ(compiled.resources.wall_time_seconds, 90u);
  EXPECT_EQ(compiled.digest, Parse(merged.text).digest) << "the digest is of the merged text";
  EXPECT_NE(compiled.digest, base_compiled.digest);
  for (const FileRule& rule : compiled.file_rules) {
    if (rule.path == "/etc") {
      EXPECT_EQ(rule.where, "p.yaml:6:18: spec.files.read[0]") << "where the base wrote it";
    } else if (rule.path == "/srv") {
      EXPECT_EQ(rule.where, "--read '/srv'");
    } else if (rule.path == "/var/tmp") {
      EXPECT_EQ(rule.where, "--write '/var/tmp'");
    }
  }
}

TEST(InlineOptions, ValuesThatCannotBeRulesNameTheOption) {
  const std::string base = DefaultPolicyYaml();
  for (const auto& [value, why] : std::vector<std::pair<std::string, std::string>>{
           {"", "no address"},
           {":443", "no address"},
           {"10.0.0.1:", "no ports after ':'"},
           {"[::1", "needs its ']'"},
           {"[::1]443", "after ']' comes ':'"},
           {"[::1]:", "no ports after ':'"},
           {"10.0.0.1:80,,443", "an empty port"},
       }) {
    MergedPolicy merged;
    std::vector<std::string> errors;
    EXPECT_FALSE(MergeInlineOptions(Parse(base), {{"--allow-net", value}}, &merged, &errors)) << value;
    ASSERT_EQ(errors.size(), 1u) << value;
    EXPECT_EQ(errors[0].rfind("--allow-net '" + value + "': ", 0), 0u) << errors[0];
    EXPECT_NE(errors[0].find(why), std::string::npos) << errors[0];
  }
  // Option values come from argv: bytes that are not UTF-8 are refused by name.
  {
    MergedPolicy m;
    std::vector<std::string> errs;
    EXPECT_FALSE(MergeInlineOptions(Parse(base), {{"--read", "/d/\xff"}}, &m, &errs));
    ASSERT_EQ(errs.size(), 1u);
    EXPECT_NE(errs[0].find("--read '/d/\\xff': not valid UTF-8"), std::string::npos) << errs[0];
  }
  // A path the policy's list has already is no second entry (the compiler refuses those).
  {
    MergedPolicy m = Merge("apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: x}\nspec:\n  files: {read: [/srv]}\n",
                           {{"--read", "/srv"}});
    EXPECT_EQ(m.parsed.proto.spec().files().read_size(), 1);
  }
  // Files options need a policy that restricts files.
  MergedPolicy merged;
  std::vector<std::string> errors;
  EXPECT_FALSE(MergeInlineOptions(Parse("apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: x}\nspec: {}\n"),
                                  {{"--read", "/srv"}, {"--exec", "/bin/true"}}, &merged, &errors));
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_NE(errors[0].find("--read '/srv': the policy p.yaml has no spec.files"), std::string::npos) << errors[0];

  // The compiler's refusals of merged values name the option, not a line.
  CompiledPolicy base_compiled = CompileOk(Parse(base));
  for (const auto& [option, message] : std::vector<std::pair<InlineOption, std::string>>{
           {{"--allow-net", "example.com:443"}, "--allow-net 'example.com:443': spec.network.egress[0].cidr: "},
           {{"--allow-net", "10.0.0.1:0"}, "--allow-net '10.0.0.1:0': spec.network.egress[0].ports[0]: "},
           {{"--read", "relative"}, "--read 'relative': spec.files.read[0]: relative path"},
           {{"--timeout", "0s"}, "--timeout '0s': spec.resources.wallTime: "},
           {{"--mode", "loud"}, "--mode 'loud': spec.mode: "},
       }) {
    MergedPolicy m = Merge(base, {option});
    CompiledPolicy compiled;
    Diagnostics diags;
    EXPECT_FALSE(CompileMerged(m, base_compiled, &compiled, &diags)) << option.option << " " << option.value;
    ASSERT_EQ(diags.size(), 1u) << FormatDiagnostics(diags);
    EXPECT_EQ(diags[0].ToString().rfind(message, 0), 0u) << diags[0].ToString();
  }
}

}  // namespace
}  // namespace cordon::policy
