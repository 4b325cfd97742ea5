// Parser: YAML/JSON -> SandboxPolicy with positions, and the errors it reports.
#include <gtest/gtest.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <utility>

#include "policy/diagnostic.h"
#include "policy/parser.h"
#include "policy/yaml_reader.h"

namespace cordon::policy {
namespace {

struct ParseOutcome {
  bool ok = false;
  ParsedPolicy parsed;
  Diagnostics diags;
};

ParseOutcome Parse(const std::string& text) {
  ParseOutcome out;
  out.ok = ParsePolicyText(text, "test.yaml", &out.parsed, &out.diags);
  EXPECT_EQ(out.ok, out.diags.empty()) << FormatDiagnostics(out.diags);
  return out;
}

// The only diagnostic of a failed parse.
Diagnostic OnlyError(const std::string& text) {
  ParseOutcome out = Parse(text);
  EXPECT_FALSE(out.ok);
  EXPECT_EQ(out.diags.size(), 1u) << FormatDiagnostics(out.diags);
  return out.diags.empty() ? Diagnostic{} : out.diags[0];
}

constexpr const char* kGood = R"(apiVersion: cordon/v1
kind: SandboxPolicy
metadata:
  name: build
  labels:
    team: infra
    tier:
spec:
  mode: audit
  network:
    families: [unix, inet]
    extraProtocols: [icmp]
    egress:
      - name: mirror
        cidr: 203.0.113.0/24
        ports: [443, "8000-8100", 80]
        protocols: [tcp]
      - cidr: 2001:db8::/32
)";

TEST(PolicyParser, ParsesEveryKindOfField) {
  ParseOutcome out = Parse(kGood);
  ASSERT_TRUE(out.ok);
  const auto& p = out.parsed.proto;
  EXPECT_EQ(p.api_version(), "cordon/v1");
  EXPECT_EQ(p.kind(), "SandboxPolicy");
  EXPECT_EQ(p.metadata().name(), "build");
  EXPECT_EQ(p.metadata().labels().at("team"), "infra");
  EXPECT_EQ(p.metadata().labels().at("tier"), "");  // null map value: empty string
  EXPECT_EQ(p.spec().mode(), "audit");
  ASSERT_EQ(p.spec().network().families_size(), 2);
  EXPECT_EQ(p.spec().network().families(1), "inet");
  EXPECT_EQ(p.spec().network().extra_protocols(0), "icmp");
  ASSERT_EQ(p.spec().network().egress_size(), 2);
  const auto& rule = p.spec().network().egress(0);
  EXPECT_EQ(rule.name(), "mirror");
  EXPECT_EQ(rule.cidr(), "203.0.113.0/24");
  ASSERT_EQ(rule.ports_size(), 3);
  EXPECT_EQ(rule.ports(0), "443");  // an unquoted number into a string field
  EXPECT_EQ(rule.ports(1), "8000-8100");
  EXPECT_EQ(rule.protocols(0), "tcp");
  EXPECT_EQ(p.spec().network().egress(1).cidr(), "2001:db8::/32");
}

// The digest (the tokens' cordon_policy_digest) is the SHA-256 of the text
// as read, as sha256sum computes it; another byte, another digest.
TEST(PolicyParser, DigestIsTheSha256OfTheText) {
  auto sha256sum = [](const std::string& text) {
    char path[] = "/tmp/cordon-digest-XXXXXX";
    int fd = ::mkstemp(path);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    ::close(fd);
    FILE* f = ::popen(("sha256sum " + std::string(path)).c_str(), "r");
    char hex[65] = {};
    EXPECT_EQ(std::fread(hex, 1, 64, f), 64u);
    ::pclose(f);
    ::unlink(path);
    return "sha256:" + std::string(hex);
  };
  ParseOutcome out = Parse(kGood);
  ASSERT_TRUE(out.ok);
  EXPECT_EQ(out.parsed.digest, sha256sum(kGood));
  const std::string other = std::string(kGood) + "# a comment\n";
  ParseOutcome again = Parse(other);
  ASSERT_TRUE(again.ok);
  EXPECT_EQ(again.parsed.digest, sha256sum(other));
  EXPECT_NE(again.parsed.digest, out.parsed.digest);
  // A text that does not read leaves none behind from the last parse.
  ParsedPolicy reused = out.parsed;
  Diagnostics diags;
  EXPECT_FALSE(ParsePolicyText("a: [unclosed\n", "test.yaml", &reused, &diags));
  EXPECT_EQ(reused.digest, "");
}

TEST(PolicyParser, RecordsPositionsOfFieldsAndListItems) {
  ParseOutcome out = Parse(kGood);
  ASSERT_TRUE(out.ok);
  const auto& pos = out.parsed.positions;
  EXPECT_EQ(pos.at("apiVersion").line, 1);
  EXPECT_EQ(pos.at("apiVersion").column, 13);
  EXPECT_EQ(pos.at("metadata.name").line, 4);
  EXPECT_EQ(pos.at("metadata.labels.team").line, 6);
  EXPECT_EQ(pos.at("spec.network.families").line, 11);
  EXPECT_EQ(pos.at("spec.network.egress[0]").line, 14);
  EXPECT_EQ(pos.at("spec.network.egress[0].ports[1]").line, 16);
  EXPECT_EQ(pos.at("spec.network.egress[0].ports[1]").column, 22);
  EXPECT_EQ(pos.at("spec.network.egress[1].cidr").line, 18);
  EXPECT_EQ(pos.count("metadata.labels.tier"), 1u);
}

TEST(PolicyParser, AtFallsBackToNearestKnownAncestor) {
  ParseOutcome out = Parse(kGood);
  ASSERT_TRUE(out.ok);
  Diagnostic d = out.parsed.At("spec.network.egress[1].ports", "x");
  EXPECT_EQ(d.line, 18);  // egress[1] itself
  EXPECT_EQ(d.field, "spec.network.egress[1].ports");
  EXPECT_EQ(d.file, "test.yaml");
  Diagnostic root = out.parsed.At("nothing.here", "x");
  EXPECT_EQ(root.line, 1);
}

TEST(PolicyParser, UnknownFieldNamesPathLineAndAlternatives) {
  Diagnostic d = OnlyError(R"(apiVersion: cordon/v1
kind: SandboxPolicy
metadata: {name: x}
spec:
  network:
    egress:
      - cidr: 10.0.0.0/8
      - cidr: 10.0.0.0/8
      - cidr: 10.0.0.0/8
        portz: [443]
)");
  EXPECT_EQ(d.line, 10);
  EXPECT_EQ(d.column, 9);
  EXPECT_EQ(d.field, "spec.network.egress[2].portz");
  EXPECT_EQ(d.message,
            "unknown field 'portz' (expected one of: name, cidr, ports, protocols, description, host, allowPrivate)");
  EXPECT_EQ(d.ToString(),
            "test.yaml:10:9: spec.network.egress[2].portz: unknown field 'portz' (expected one of: name, cidr, "
            "ports, protocols, description, host, allowPrivate)");
}

TEST(PolicyParser, SnakeCaseKeysAreUnknown) {
  Diagnostic d = OnlyError("api_version: cordon/v1\n");
  EXPECT_EQ(d.line, 1);
  EXPECT_EQ(d.field, "api_version");
  EXPECT_EQ(d.message, "unknown field 'api_version' (expected one of: apiVersion, kind, metadata, spec)");
}

TEST(PolicyParser, ReportsEveryErrorNotJustTheFirst) {
  ParseOutcome out = Parse("apiVersion: cordon/v1\nkindd: x\nmetadata:\n  nmae: y\nspec: []\n");
  ASSERT_FALSE(out.ok);
  ASSERT_EQ(out.diags.size(), 3u) << FormatDiagnostics(out.diags);
  EXPECT_EQ(out.diags[0].line, 2);
  EXPECT_EQ(out.diags[1].line, 4);
  EXPECT_EQ(out.diags[1].field, "metadata.nmae");
  EXPECT_EQ(out.diags[2].line, 5);
  EXPECT_EQ(out.diags[2].field, "spec");
}

TEST(PolicyParser, WrongTypes) {
  Diagnostic list_for_string = OnlyError("apiVersion: [cordon/v1]\n");
  EXPECT_EQ(list_for_string.line, 1);
  EXPECT_EQ(list_for_string.column, 13);
  EXPECT_EQ(list_for_string.field, "apiVersion");
  EXPECT_EQ(list_for_string.message, "expected a string, got a list");

  Diagnostic scalar_for_list = OnlyError("spec:\n  network:\n    families: unix\n");
  EXPECT_EQ(scalar_for_list.line, 3);
  EXPECT_EQ(scalar_for_list.field, "spec.network.families");
  EXPECT_EQ(scalar_for_list.message, "expected a list, got 'unix'");

  Diagnostic scalar_for_message = OnlyError("metadata: build\n");
  EXPECT_EQ(scalar_for_message.field, "metadata");
  EXPECT_EQ(scalar_for_message.message, "expected a mapping of Metadata fields, got 'build'");

  Diagnostic mapping_in_list = OnlyError("spec:\n  network:\n    egress:\n      - cidr: 10.0.0.0/8\n"
                                         "        ports:\n          - {from: 1}\n");
  EXPECT_EQ(mapping_in_list.line, 6);
  EXPECT_EQ(mapping_in_list.field, "spec.network.egress[0].ports[0]");
  EXPECT_EQ(mapping_in_list.message, "expected a string, got a mapping");

  Diagnostic labels = OnlyError("metadata:\n  labels: [a]\n");
  EXPECT_EQ(labels.field, "metadata.labels");
  EXPECT_EQ(labels.message, "expected a mapping, got a list");

  Diagnostic root = OnlyError("- a\n- b\n");
  EXPECT_EQ(root.line, 1);
  EXPECT_EQ(root.field, "");
}

TEST(PolicyParser, NullMeansUnsetButNullListItemIsAnError) {
  ParseOutcome out = Parse("apiVersion:\nkind: ~\nspec:\n  network:\n    families: null\n");
  ASSERT_TRUE(out.ok);
  EXPECT_EQ(out.parsed.proto.api_version(), "");
  EXPECT_FALSE(out.parsed.proto.has_metadata());
  EXPECT_EQ(out.parsed.positions.count("spec.network.families"), 0u);  // as if omitted
  EXPECT_EQ(out.parsed.positions.count("apiVersion"), 0u);

  ParseOutcome empty_list = Parse("spec:\n  network:\n    families: []\n");
  ASSERT_TRUE(empty_list.ok);
  EXPECT_EQ(empty_list.parsed.positions.count("spec.network.families"), 1u);  // explicit

  Diagnostic item = OnlyError("spec:\n  network:\n    families: [unix, ~]\n");
  EXPECT_EQ(item.field, "spec.network.families[1]");
  EXPECT_EQ(item.message, "list item is null");

  // Quoted "null" is a string, not null.
  ParseOutcome quoted = Parse("kind: \"null\"\n");
  ASSERT_TRUE(quoted.ok);
  EXPECT_EQ(quoted.parsed.proto.kind(), "null");
}

TEST(PolicyParser, YamlSyntaxErrorsNameLineAndColumn) {
  Diagnostic flow = OnlyError("apiVersion: cordon/v1\nspec:\n  network:\n    families: [unix, inet\n"
                              "    egress: []\n");
  EXPECT_EQ(flow.line, 5);
  EXPECT_NE(flow.message.find("YAML syntax error"), std::string::npos) << flow.message;
  EXPECT_NE(flow.message.find("started at line 4"), std::string::npos) << flow.message;

  Diagnostic indent = OnlyError("apiVersion: cordon/v1\nkind: SandboxPolicy\n  metadata: x\n");
  EXPECT_EQ(indent.line, 3);
  EXPECT_EQ(indent.column, 11);
  EXPECT_EQ(indent.message, "YAML syntax error: mapping values are not allowed in this context");
  EXPECT_EQ(indent.ToString(),
            "test.yaml:3:11: YAML syntax error: mapping values are not allowed in this context");

  Diagnostic quote = OnlyError("apiVersion: \"cordon/v1\nkind: x\n");
  EXPECT_GE(quote.line, 1);
  EXPECT_NE(quote.message.find("quoted scalar"), std::string::npos) << quote.message;

  Diagnostic control = OnlyError("kind: a\x01\n");
  EXPECT_EQ(control.line, 1);
  EXPECT_EQ(control.column, 8);
  EXPECT_NE(control.message.find("control characters"), std::string::npos) << control.message;
}

// A JSON document (it starts with '{' or '[') is read as YAML, but its
// errors say JSON, and a trailing comma (YAML allows one, JSON does not) is
// an error at the comma. Control: the same YAML flow list is accepted.
TEST(PolicyParser, JsonErrorsSayJsonAndTrailingCommasAreRefused) {
  const std::string head = "{\"apiVersion\": \"cordon/v1\", \"kind\": \"SandboxPolicy\", \"metadata\": {\"name\": \"j\"},\n";
  ParseOutcome good = Parse(head + " \"spec\": {\"network\": {\"egress\": [{\"cidr\": \"10.0.0.0/8\", \"ports\": [443]}]}}}\n");
  ASSERT_TRUE(good.ok) << FormatDiagnostics(good.diags);
  Diagnostic list = OnlyError(head + " \"spec\": {\"network\": {\"egress\": [{\"cidr\": \"10.0.0.0/8\", \"ports\": [443,]}]}}}\n");
  EXPECT_EQ(list.ToString(), "test.yaml:2:70: JSON syntax error: a trailing comma before ']'");
  Diagnostic map = OnlyError("  \n{\"kind\": \"SandboxPolicy\",}\n");
  EXPECT_EQ(map.ToString(), "test.yaml:2:25: JSON syntax error: a trailing comma before '}'");
  Diagnostic cut = OnlyError(head);
  EXPECT_EQ(cut.message.rfind("JSON syntax error: ", 0), 0u) << cut.message;
  // "," inside a string is no comma.
  ParseOutcome quoted = Parse("{\"kind\": \"a,]\", \"metadata\": {\"name\": \"x,}\"}}\n");
  EXPECT_EQ(FormatDiagnostics(quoted.diags).find("comma"), std::string::npos) << FormatDiagnostics(quoted.diags);
  // YAML: a trailing comma in a flow list is allowed there.
  ParseOutcome yaml = Parse("apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: y}\nspec:\n  network:\n"
                            "    egress:\n      - {cidr: 10.0.0.0/8, ports: [443,]}\n");
  EXPECT_TRUE(yaml.ok) << FormatDiagnostics(yaml.diags);
}

TEST(PolicyParser, DuplicateKeysAreRejected) {
  Diagnostic d = OnlyError("apiVersion: cordon/v1\nmetadata:\n  name: a\n  description: b\n  name: c\n");
  EXPECT_EQ(d.line, 5);
  EXPECT_EQ(d.column, 3);
  EXPECT_EQ(d.field, "metadata.name");
  EXPECT_EQ(d.message, "duplicate key 'name' (first at line 3)");

  Diagnostic quoted = OnlyError("kind: a\n\"kind\": b\n");
  EXPECT_EQ(quoted.line, 2);
  EXPECT_EQ(quoted.message, "duplicate key 'kind' (first at line 1)");
}

// The message is filled while the YAML is read; a YAML error anywhere is
// still the only error reported, as if nothing had been converted.
TEST(PolicyParser, AYamlErrorLaterHidesSchemaErrorsBefore) {
  Diagnostic d = OnlyError("apiVersion: cordon/v1\nunknownField: 1\nspec:\n  mode: 7\nmetadata:\n  name: a\n"
                           "  name: b\n");
  EXPECT_EQ(d.line, 7);
  EXPECT_EQ(d.field, "metadata.name");
  EXPECT_EQ(d.message, "duplicate key 'name' (first at line 6)");
  Diagnostic syntax = OnlyError("apiVersion: cordon/v1\nunknownField: 1\nspec: [\n");
  EXPECT_NE(syntax.message.find("YAML syntax error"), std::string::npos) << syntax.message;
}

TEST(PolicyParser, PositionsOfMapKeysWithDotsAndBrackets) {
  ParseOutcome out = Parse(
      "metadata:\n  name: x\n  labels:\n    a: 1\n    a.b: 2\n    \"c[0]\": 3\n    \"\": 4\nspec:\n"
      "  network:\n    egress:\n      - {cidr: 10.0.0.0/8}\n      - cidr: 10.1.0.0/16\n        ports: [1, 2]\n");
  ASSERT_TRUE(out.ok);
  const auto& pos = out.parsed.positions;
  // Label keys are read whole, whatever separators they hold.
  const std::pair<const char*, int> label_lines[] = {
      {"metadata.labels.a", 4}, {"metadata.labels.a.b", 5}, {"metadata.labels.c[0]", 6}, {"metadata.labels.", 7}};
  for (const auto& [path, line] : label_lines) EXPECT_EQ(pos.at(path).line, line) << path;
  EXPECT_EQ(pos.at("spec.network.egress[1].ports[1]").column, 20);
  for (const char* absent : {"spec.network.egress[2]", "spec.network.egress[01]", "spec.network.egress[0].ports",
                             "metadata.labels.a.c"}) {
    EXPECT_EQ(pos.count(absent), 0u) << absent;
  }
  EXPECT_THROW(pos.at("spec.files"), std::out_of_range);
  EXPECT_EQ(out.parsed.At("spec.network.egress[0].ports[3]", "x").line, 11);
}

TEST(PolicyParser, ReaderRejectsAnchorsAliasesTagsAndManyDocuments) {
  EXPECT_NE(OnlyError("metadata: &m {name: a}\n").message.find("anchors are not supported"), std::string::npos);
  Diagnostic alias = OnlyError("a: &x 1\nb: *x\n");
  EXPECT_NE(alias.message.find("not supported"), std::string::npos);
  Diagnostic tag = OnlyError("kind: !!int 3\n");
  EXPECT_NE(tag.message.find("tags are not supported"), std::string::npos);
  Diagnostic docs = OnlyError("kind: a\n---\nkind: b\n");
  EXPECT_EQ(docs.line, 2);
  EXPECT_NE(docs.message.find("more than one YAML document"), std::string::npos);
  Diagnostic key = OnlyError("[a]: b\n");
  EXPECT_NE(key.message.find("mapping keys must be scalars"), std::string::npos);

  // !!str is fine and makes the scalar a string.
  ParseOutcome str = Parse("kind: !!str SandboxPolicy\n");
  EXPECT_TRUE(str.ok);
}

TEST(PolicyParser, DepthAndEmptyDocuments) {
  std::string deep = "a: " + std::string(70, '[') + std::string(70, ']') + "\n";
  Diagnostic d = OnlyError(deep);
  EXPECT_NE(d.message.find("nesting deeper than 64"), std::string::npos) << d.message;

  for (const char* empty : {"", "# only a comment\n", "---\n", "~\n", "null\n"}) {
    Diagnostic e = OnlyError(empty);
    EXPECT_NE(e.message.find("document is empty"), std::string::npos) << empty << ": " << e.message;
  }
}

TEST(PolicyParser, ReadYamlMarksQuotedScalars) {
  Diagnostics diags;
  auto root = ReadYaml("a: '443'\nb: 443\nc: |\n  x\n", "f", &diags);
  ASSERT_TRUE(root) << FormatDiagnostics(diags);
  ASSERT_EQ(root->entries.size(), 3u);
  EXPECT_TRUE(root->entries[0].second->quoted);
  EXPECT_FALSE(root->entries[1].second->quoted);
  EXPECT_TRUE(root->entries[2].second->quoted);
  EXPECT_EQ(root->entries[2].second->scalar, "x\n");
}

TEST(PolicyParser, JsonGoesThroughTheSamePath) {
  ParseOutcome out = Parse(R"({
	"apiVersion": "cordon/v1",
	"kind": "SandboxPolicy",
	"metadata": {"name": "json"},
	"spec": {"network": {"egress": [
		{"cidr": "127.0.0.1", "ports": ["8000-8100", 9000]},
		{"cidr": "::1", "protocols": ["tcp"]}
	]}}
})");
  ASSERT_TRUE(out.ok);
  const auto& egress = out.parsed.proto.spec().network().egress();
  ASSERT_EQ(egress.size(), 2);
  EXPECT_EQ(egress[0].ports(1), "9000");
  EXPECT_EQ(egress[1].cidr(), "::1");
  EXPECT_EQ(out.parsed.positions.at("spec.network.egress[1].cidr").line, 7);

  Diagnostic unknown = OnlyError("{\n  \"apiVersion\": \"cordon/v1\",\n  \"spek\": {}\n}\n");
  EXPECT_EQ(unknown.line, 3);
  EXPECT_EQ(unknown.column, 3);
  EXPECT_EQ(unknown.field, "spek");

  Diagnostic syntax = OnlyError("{\"apiVersion\": \"cordon/v1\",\n \"kind\": \"SandboxPolicy\"\n \"metadata\": {}}\n");
  EXPECT_EQ(syntax.line, 3);

  Diagnostic dup = OnlyError("{\"kind\": \"a\", \"kind\": \"b\"}");
  EXPECT_EQ(dup.message, "duplicate key 'kind' (first at line 1)");
}

TEST(PolicyParser, InputSizeCap) {
  std::string big = "kind: x\n" + std::string(16u << 20, '#');
  Diagnostic d = OnlyError(big);
  EXPECT_NE(d.message.find("too large"), std::string::npos);
}

TEST(PolicyParser, FileErrorsNameTheFile) {
  ParsedPolicy parsed;
  Diagnostics diags;
  EXPECT_FALSE(ParsePolicyFile("/nonexistent/policy.yaml", &parsed, &diags));
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_EQ(diags[0].file, "/nonexistent/policy.yaml");
  EXPECT_EQ(diags[0].ToString(), "/nonexistent/policy.yaml: cannot open: No such file or directory");

  diags.clear();
  EXPECT_FALSE(ParsePolicyFile("/", &parsed, &diags));
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_NE(diags[0].message.find("Is a directory"), std::string::npos);

  char path[] = "/tmp/cordon-policy-test-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string text = "apiVersion: cordon/v1\nkind: [x]\n";
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  diags.clear();
  EXPECT_FALSE(ParsePolicyFile(path, &parsed, &diags));
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_EQ(diags[0].file, path);
  EXPECT_EQ(diags[0].line, 2);
  unlink(path);
}

TEST(PolicyParser, DiagnosticFormatting) {
  EXPECT_EQ((Diagnostic{"f", 3, 4, "a.b", "bad"}).ToString(), "f:3:4: a.b: bad");
  EXPECT_EQ((Diagnostic{"f", 3, 0, "", "bad"}).ToString(), "f:3: bad");
  EXPECT_EQ((Diagnostic{"f", 0, 0, "", "bad"}).ToString(), "f: bad");
  EXPECT_EQ((Diagnostic{"", 0, 0, "x", "bad"}).ToString(), "x: bad");
  EXPECT_EQ(FormatDiagnostics({{"f", 1, 1, "", "a"}, {"f", 2, 1, "", "b"}}), "f:1:1: a\nf:2:1: b\n");
  EXPECT_EQ((Diagnostic{"f", 1, 1, "a\x1b[31m", "unknown field 'a\x1b[31m'"}).ToString(),
            "f:1:1: a?[31m: unknown field 'a?[31m'");
}

}  // namespace
}  // namespace cordon::policy
