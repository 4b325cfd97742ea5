// spec.quiet: what is accepted, every error with its file:line:column and
// field, the glob syntax, the matcher on decoded events, the pinned form.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "abi/cordon_event.h"
#include "policy/compiler.h"
#include "policy/describe.h"
#include "policy/parser.h"
#include "policy/quiet.h"
#include "tests/unit/policy_section.h"

namespace cordon::policy {
namespace {

using cordon::v1::AuditEvent;
using Outcome = SectionOutcome;

// The section starts at line 7 of the file (policy_section.h).
Outcome CompileQuietText(const std::string& body) { return CompileSection("quiet", body, "q.yaml"); }

void ExpectError(const std::string& body, const std::string& field, int line, const std::string& text) {
  ExpectSectionError(CompileQuietText(body), "q.yaml", field, line, text);
}

std::vector<QuietPattern> Patterns(const std::string& body) {
  Outcome out = CompileQuietText(body);
  EXPECT_TRUE(out.ok) << FormatDiagnostics(out.diags);
  return out.compiled.quiet;
}

AuditEvent FileEvent(const std::string& kind, const std::string& path, bool truncated = false) {
  AuditEvent e;
  e.set_kind(kind);
  e.set_verdict("denied");
  e.mutable_file()->set_path(path);
  e.mutable_file()->set_truncated(truncated);
  return e;
}

AuditEvent NetEvent(const std::string& kind, const std::string& address, uint32_t port) {
  AuditEvent e;
  e.set_kind(kind);
  e.set_verdict("denied");
  e.mutable_net()->set_address(address);
  e.mutable_net()->set_port(port);
  e.mutable_net()->set_protocol("tcp");
  return e;
}

TEST(Quiet, TheIssuesExamplesCompile) {
  Outcome out = CompileQuietText(
      "    - kind: file.exec\n"
      "      path: /usr/bin/rustc\n"
      "      description: pip probes for a Rust compiler\n"
      "    - kind: file\n"
      "      path: /usr/lib/python3/**\n"
      "    - kind: net.unix\n"
      "      address: /var/run/nscd/socket\n"
      "    - kind: net.connect\n"
      "      address: 10.0.0.53\n"
      "      ports: [53, \"5353-5354\"]\n"
      "    - kind: net\n"
      "      address: \"@/tmp/.X11-unix/X*\"\n");
  ASSERT_TRUE(out.ok) << FormatDiagnostics(out.diags);
  const auto& q = out.compiled.quiet;
  ASSERT_EQ(q.size(), 5u);
  EXPECT_EQ(q[0].kind, "file.exec");
  EXPECT_FALSE(q[0].family);
  EXPECT_EQ(q[0].path, "/usr/bin/rustc");
  EXPECT_EQ(q[0].origin, "spec.quiet[0]");
  EXPECT_TRUE(q[1].family);
  EXPECT_EQ(q[2].unix_address, "/var/run/nscd/socket");
  ASSERT_TRUE(q[3].prefix.has_value());
  EXPECT_EQ(q[3].prefix->ToString(), "10.0.0.53/32");
  EXPECT_EQ(q[3].ports, (std::vector<PortRange>{{53, 53}, {5353, 5354}}));
  EXPECT_EQ(q[4].unix_address, "@/tmp/.X11-unix/X*");

  const std::string shown = Describe(out.compiled);
  EXPECT_NE(shown.find("quiet (expected: still enforced, recorded and counted; not violations of cordon run):\n"
                       "  file.exec on /usr/bin/rustc (pip probes for a Rust compiler)\n"
                       "  file.* on /usr/lib/python3/**\n"
                       "  net.unix to /var/run/nscd/socket\n"
                       "  net.connect to 10.0.0.53/32 port 53,5353-5354\n"
                       "  net.* to @/tmp/.X11-unix/X*\n"),
            std::string::npos)
      << shown;
}

TEST(Quiet, NoneIsNotSaid) {
  ParsedPolicy parsed;
  Diagnostics diags;
  ASSERT_TRUE(
      ParsePolicyText("apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata:\n  name: t\n", "q.yaml", &parsed, &diags));
  CompiledPolicy compiled;
  ASSERT_TRUE(Compile(parsed, &compiled, &diags)) << FormatDiagnostics(diags);
  EXPECT_TRUE(compiled.quiet.empty());
  EXPECT_EQ(Describe(compiled).find("quiet"), std::string::npos);
}

TEST(Quiet, ErrorsNameFileLineColumnAndField) {
  {
    Outcome out = CompileQuietText("    - kind: file.exce\n      path: /usr/bin/rustc\n");
    ExpectSectionError(out, "q.yaml", "spec.quiet[0].kind", 7, "unknown kind 'file.exce'");
    ASSERT_EQ(out.diags.size(), 1u);
    EXPECT_EQ(out.diags[0].column, 13);
    EXPECT_EQ(out.diags[0].ToString().rfind("q.yaml:7:13: spec.quiet[0].kind: ", 0), 0u) << out.diags[0].ToString();
  }
  ExpectError("    - path: /usr/bin/rustc\n", "spec.quiet[0]", 7, "required: kind");
  ExpectError("    - kind: file.*\n      path: /x\n", "spec.quiet[0].kind", 7, "write the family 'file'");
  // A kind alone would silence every attempt of that kind.
  ExpectError("    - kind: net.connect\n", "spec.quiet[0]", 7, "needs path or address");
  ExpectError("    - kind: file.exec\n      path: usr/bin/rustc\n", "spec.quiet[0].path", 8, "relative path");
  ExpectError("    - kind: file.exec\n      path: /usr/bin/../bin/rustc\n", "spec.quiet[0].path", 8, "'..'");
  ExpectError("    - kind: file.exec\n      path: /usr/**/rustc\n", "spec.quiet[0].path", 8, "'**' only as");
  ExpectError("    - kind: file.exec\n      path: /usr/bin/r**\n", "spec.quiet[0].path", 8, "'**' only as");
  ExpectError("    - kind: file.open\n      path: /**\n", "spec.quiet[0].path", 8, "only wildcards");
  ExpectError("    - kind: file.open\n      path: /*/**\n", "spec.quiet[0].path", 8, "only wildcards");
  ExpectError("    - kind: file.open\n      path: '/a\\b'\n", "spec.quiet[0].path", 8, "backslash");
  ExpectError("    - kind: file.open\n      path: \"/a\\tb\"\n", "spec.quiet[0].path", 8, "control character");
  ExpectError("    - kind: file.open\n      path: /" + std::string(5000, 'a') + "\n", "spec.quiet[0].path", 8,
              "too long");
  ExpectError("    - kind: net.connect\n      path: /run/x\n", "spec.quiet[0].path", 8, "carry no path");
  ExpectError("    - kind: net.connect\n      address: 10.0.0.1/8\n", "spec.quiet[0].address", 8, "host bits set");
  ExpectError("    - kind: net.connect\n      address: example.com\n", "spec.quiet[0].address", 8,
              "expected an IP address or CIDR");
  ExpectError("    - kind: net.connect\n      address: 0.0.0.0/0\n", "spec.quiet[0].address", 8, "every address");
  ExpectError("    - kind: net.connect\n      address: ::/0\n", "spec.quiet[0].address", 8, "every address");
  ExpectError("    - kind: file.open\n      address: 10.0.0.1\n", "spec.quiet[0].address", 8,
              "applies to net.connect, net.sendmsg and net.bind");
  ExpectError("    - kind: net.connect\n      address: /run/nscd/socket\n", "spec.quiet[0].address", 8,
              "applies to net.unix");
  ExpectError("    - kind: net.unix\n      address: \"@\"\n", "spec.quiet[0].address", 8, "without a name");
  ExpectError("    - kind: net.unix\n      address: \"@*\"\n", "spec.quiet[0].address", 8, "only wildcards");
  ExpectError("    - kind: file.exec\n      path: /x\n      ports: [53]\n", "spec.quiet[0].ports", 9,
              "ports apply to an IP address or CIDR only");
  ExpectError("    - kind: net.unix\n      address: /run/x\n      ports: [53]\n", "spec.quiet[0].ports", 9,
              "ports apply to an IP address or CIDR only");
  ExpectError("    - kind: net.connect\n      address: 10.0.0.1\n      ports: []\n", "spec.quiet[0].ports", 9,
              "empty list");
  ExpectError("    - kind: net.connect\n      address: 10.0.0.1\n      ports: [53, 70000]\n", "spec.quiet[0].ports[1]",
              9, "70000");
  ExpectError("    - kind: file.exec\n      path: /x\n      description: " + std::string(300, 'd') + "\n",
              "spec.quiet[0].description", 9, "too long");
  ExpectError("    - kind: file.exec\n      path: /x\n      paths: /y\n", "spec.quiet[0].paths", 9,
              "unknown field 'paths'");
  // Patterns are bounded.
  std::string many;
  for (size_t i = 0; i <= kMaxQuietPatterns; ++i)
    many += "    - {kind: file.exec, path: /x" + std::to_string(i) + "}\n";
  ExpectError(many, "spec.quiet", 7, "too many patterns: 65");
  // The second pattern's error is at its own line.
  ExpectError("    - kind: file.exec\n      path: /x\n    - kind: file.exec\n      path: y\n", "spec.quiet[1].path", 10,
              "relative path");
}

// What an attacker review found the checks let through: '?' as a name,
// prefixes holding every IPv4 address, patterns where the workload makes
// names (a symlink there passes any refusal off as expected).
TEST(Quiet, PatternsThatWouldQuietTooMuchAreRefused) {
  ExpectError("    - kind: file\n      path: /?*/**\n", "spec.quiet[0].path", 8, "only wildcards");
  ExpectError("    - kind: net.unix\n      address: /?/?\n", "spec.quiet[0].address", 8, "only wildcards");
  ExpectError("    - kind: net.connect\n      address: ::/1\n", "spec.quiet[0].address", 8, "too wide");
  ExpectError("    - kind: net.connect\n      address: \"::ffff:0:0/96\"\n", "spec.quiet[0].address", 8,
              "every address");
  ExpectError("    - kind: net.connect\n      address: \"::/80\"\n", "spec.quiet[0].address", 8,
              "every IPv4 address");
  ExpectError("    - kind: net.connect\n      address: 0.0.0.0/1\n", "spec.quiet[0].address", 8, "too wide");
  ExpectError("    - kind: file.exec\n      path: /tmp/x\n", "spec.quiet[0].path", 8, "private '/tmp'");
  ExpectError("    - kind: file\n      path: /dev/*\n", "spec.quiet[0].path", 8, "private '/dev/shm'");
  ExpectError("    - kind: net.unix\n      address: /tmp/.X11-unix/X0\n", "spec.quiet[0].address", 8, "private '/tmp'");
  {
    // spec.files.write: the quiet path below it, or above it.
    ParsedPolicy parsed;
    Diagnostics diags;
    CompiledPolicy compiled;
    const std::string text =
        "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: t}\nspec:\n  files:\n    write: [/srv/out]\n"
        "  quiet:\n    - {kind: file.open, path: /srv/out/cache/*}\n    - {kind: file.exec, path: /srv/*}\n";
    ASSERT_TRUE(ParsePolicyText(text, "w.yaml", &parsed, &diags)) << FormatDiagnostics(diags);
    EXPECT_FALSE(Compile(parsed, &compiled, &diags));
    ASSERT_EQ(diags.size(), 2u) << FormatDiagnostics(diags);
    for (const auto& d : diags) EXPECT_NE(d.message.find("the write path '/srv/out'"), std::string::npos) << d.ToString();
  }
  // Controls: narrow ones compile.
  EXPECT_EQ(Patterns("    - kind: net.connect\n      address: 10.0.0.0/8\n").size(), 1u);
  EXPECT_EQ(Patterns("    - kind: net.connect\n      address: \"2001:db8::/32\"\n").size(), 1u);
  EXPECT_EQ(Patterns("    - kind: file\n      path: /usr/lib/?y*/**\n").size(), 1u);
  EXPECT_EQ(Patterns("    - kind: file.open\n      path: /srv/other/*\n").size(), 1u);
}

// Only refusals are expected away: what happened (audit mode's audited,
// detect mode's detected and killed) never is.
TEST(Quiet, OnlyDeniedEventsAreQuiet) {
  auto patterns = Patterns("    - kind: file.exec\n      path: /usr/bin/rustc\n");
  AuditEvent e = FileEvent("file.exec", "/usr/bin/rustc");
  EXPECT_EQ(MatchQuiet(patterns, e), 0) << "control: denied";
  for (const char* verdict : {"audited", "detected", "killed"}) {
    e.set_verdict(verdict);
    EXPECT_EQ(MatchQuiet(patterns, e), -1) << verdict;
  }
}

TEST(Quiet, GlobSyntax) {
  struct {
    const char* glob;
    const char* path;
    bool match;
  } cases[] = {
      {"/usr/bin/rustc", "/usr/bin/rustc", true},
      {"/usr/bin/rustc", "/usr/bin/rustc2", false},
      {"/usr/bin/rust*", "/usr/bin/rustc", true},
      {"/usr/bin/rust*", "/usr/bin/rust", true},
      {"/usr/bin/*", "/usr/bin/x/y", false},  // '*' stays within a component
      {"/usr/bin/?ustc", "/usr/bin/rustc", true},
      {"/usr/bin/?ustc", "/usr/bin/ustc", false},
      {"/a*b*c", "/aXXbYYc", true},
      {"/a*b", "/ab", true},
      {"/a*b", "/abba", false},
      {"/usr/lib/**", "/usr/lib/a", true},
      {"/usr/lib/**", "/usr/lib/a/b/c", true},
      {"/usr/lib/**", "/usr/lib", false},  // below the directory, not the directory
      {"/usr/lib/**", "/usr/lib64/a", false},
      {"/usr/*/rustc", "/usr/bin/rustc", true},
      {"/", "/", true},
      {"/[ab]", "/[ab]", true},  // no character classes
      {"/[ab]", "/a", false},
      // Paths not in normal form never match (Landlock events carry the
      // path as the caller wrote it).
      {"/usr/bin/rustc", "/usr/bin/../bin/rustc", false},
      {"/usr/lib/**", "/usr/lib/../../etc/shadow", false},
      {"/usr/lib/**", "/usr/lib/./x", false},
      {"/usr/bin/rustc", "/usr//bin/rustc", false},
      {"/usr/bin/*", "/usr/bin/", false},
      {"/usr/bin/rustc", "usr/bin/rustc", false},
      {"/usr/bin/rustc", "", false},
      // Abstract unix socket names.
      {"@/tmp/.X11-unix/X*", "@/tmp/.X11-unix/X0", true},
      {"@/tmp/.X11-unix/X*", "/tmp/.X11-unix/X0", false},
      {"@dbus-*", "@dbus-abc", true},
      {"@dbus-*", "@dbus/abc", false},
  };
  for (const auto& c : cases) EXPECT_EQ(MatchGlob(c.glob, c.path), c.match) << c.glob << " on " << c.path;
}

TEST(Quiet, MatcherOnDecodedEvents) {
  const auto q = Patterns(
      "    - kind: file.exec\n"
      "      path: /usr/bin/rustc\n"
      "    - kind: file\n"
      "      path: /usr/lib/python3/**\n"
      "    - kind: net.unix\n"
      "      address: /var/run/nscd/socket\n"
      "    - kind: net.connect\n"
      "      address: 10.0.0.0/24\n"
      "      ports: [53]\n"
      "    - kind: net\n"
      "      address: 2001:db8::/32\n");
  ASSERT_EQ(q.size(), 5u);
  EXPECT_EQ(MatchQuiet(q, FileEvent("file.exec", "/usr/bin/rustc")), 0);
  EXPECT_EQ(MatchQuiet(q, FileEvent("file.exec", "/usr/bin/lsb_release")), -1);
  EXPECT_EQ(MatchQuiet(q, FileEvent("file.open", "/usr/bin/rustc")), -1) << "another kind";
  EXPECT_EQ(MatchQuiet(q, FileEvent("file.exec", "/usr/bin/rustc", true)), -1) << "a truncated path is a tail";
  EXPECT_EQ(MatchQuiet(q, FileEvent("file.open", "/usr/lib/python3/dist-packages/x.py")), 1);
  EXPECT_EQ(MatchQuiet(q, FileEvent("file.mmap_exec", "/usr/lib/python3/x.so")), 1) << "the family";
  EXPECT_EQ(MatchQuiet(q, FileEvent("tamper.mount", "/usr/lib/python3/x")), -1) << "not of the family";
  EXPECT_EQ(MatchQuiet(q, FileEvent("net.unix", "/var/run/nscd/socket")), 2);
  EXPECT_EQ(MatchQuiet(q, FileEvent("net.unix", "/run/nscd/socket")), -1) << "the path as the event has it";
  EXPECT_EQ(MatchQuiet(q, FileEvent("file.open", "/var/run/nscd/socket")), -1) << "a socket address is net.unix's";
  EXPECT_EQ(MatchQuiet(q, NetEvent("net.connect", "10.0.0.53", 53)), 3);
  EXPECT_EQ(MatchQuiet(q, NetEvent("net.connect", "10.0.0.53", 54)), -1) << "another port";
  EXPECT_EQ(MatchQuiet(q, NetEvent("net.connect", "10.0.1.53", 53)), -1) << "another address";
  EXPECT_EQ(MatchQuiet(q, NetEvent("net.sendmsg", "10.0.0.53", 53)), -1) << "another kind";
  EXPECT_EQ(MatchQuiet(q, NetEvent("net.connect", "::ffff:10.0.0.53", 53)), 3) << "IPv4-mapped is IPv4";
  EXPECT_EQ(MatchQuiet(q, NetEvent("net.sendmsg", "2001:db8::1", 443)), 4);
  EXPECT_EQ(MatchQuiet(q, NetEvent("net.bind", "2001:db9::1", 443)), -1);
  EXPECT_EQ(MatchQuiet(q, NetEvent("net.connect", "garbage", 53)), -1);
  // Records that are no kernel event are never quiet, whatever they hold.
  AuditEvent pre = NetEvent("net.preexisting", "2001:db8::1", 443);
  pre.set_verdict("destroyed");
  EXPECT_EQ(MatchQuiet(q, pre), -1);
  AuditEvent loss;
  loss.set_kind("loss");
  EXPECT_EQ(MatchQuiet(q, loss), -1);
  EXPECT_EQ(MatchQuiet(q, FileEvent("file.preexisting", "/usr/lib/python3/x")), -1);
  EXPECT_EQ(MatchQuiet({}, FileEvent("file.exec", "/usr/bin/rustc")), -1);
}

TEST(Quiet, PathAndAddressBothMustMatch) {
  const auto q = Patterns("    - kind: net.unix\n      path: /run/**\n      address: /run/nscd/*\n");
  ASSERT_EQ(q.size(), 1u);
  EXPECT_EQ(MatchQuiet(q, FileEvent("net.unix", "/run/nscd/socket")), 0);
  EXPECT_EQ(MatchQuiet(q, FileEvent("net.unix", "/run/dbus/socket")), -1);
}

TEST(Quiet, PinnedFormRoundTripsAndIsValidatedAgain) {
  const auto q = Patterns(
      "    - kind: file.exec\n"
      "      path: /usr/bin/rustc/\n"  // normalized
      "    - kind: net.connect\n"
      "      address: 10.0.0.0/24\n"
      "      ports: [53, \"100-200\"]\n"
      "      description: dns\n");
  const std::string bytes = SerializeQuiet(q);
  auto back = ParseQuiet(bytes);
  ASSERT_TRUE(back.ok()) << back.error().ToString();
  EXPECT_EQ(*back, q);
  EXPECT_EQ((*back)[0].path, "/usr/bin/rustc");
  EXPECT_EQ((*back)[1].source.description(), "dns");
  auto none = ParseQuiet(SerializeQuiet({}));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());

  EXPECT_FALSE(ParseQuiet("\xff\xff\xff").ok());
  cordon::v1::Spec bad;
  bad.add_quiet()->set_kind("net.connect");  // no target
  auto refused = ParseQuiet(bad.SerializeAsString());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("spec.quiet[0]: a pattern needs path or address"), std::string::npos)
      << refused.error().message;
}

TEST(Quiet, KindNamesAreTheKernels) {
  EXPECT_STREQ(EventKindName(CORDON_EV_FILE_EXEC), "file.exec");
  EXPECT_STREQ(EventKindName(CORDON_EV_NET_UNIX), "net.unix");
  EXPECT_STREQ(EventKindName(CORDON_EV_PROC_COREDUMP), "proc.coredump");
  EXPECT_STREQ(EventKindName(9999), "");
  EXPECT_TRUE(IsKernelEventKind("tamper.sysctl"));
  EXPECT_FALSE(IsKernelEventKind("net.preexisting"));
  EXPECT_FALSE(IsKernelEventKind("loss"));
  // Every family holds some kind.
  for (const char* family : QuietFamilies()) {
    bool found = false;
    for (uint32_t k = 0; k < 256; ++k) {
      const std::string name = EventKindName(k);
      found = found || name.rfind(std::string(family) + ".", 0) == 0;
    }
    EXPECT_TRUE(found) << family;
  }
}

}  // namespace
}  // namespace cordon::policy
