// The pure parts of preparing cordon run's command: its environment and
// which program it execs (resolved once, against the command's own PATH).
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>

#include "confine/child.h"
#include "policy/compiler.h"
#include "policy/parser.h"

namespace cordon {
namespace {

policy::CompiledPolicy WithEnvironment(const std::string& list) {
  std::string text = "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: t}\nspec:\n  environment: " + list + "\n";
  policy::ParsedPolicy parsed;
  policy::Diagnostics diags;
  policy::CompiledPolicy compiled;
  EXPECT_TRUE(policy::ParsePolicyText(text, "t.yaml", &parsed, &diags) && policy::Compile(parsed, &compiled, &diags))
      << policy::FormatDiagnostics(diags);
  return compiled;
}

TEST(ChildEnvironment, OnlyTheDefaultSetThePolicyAndTheCommandLine) {
  const char* caller[] = {"PATH=/opt/bin:/usr/bin", "LANG=C.UTF-8", "LC_ALL=C", "TERM=xterm", "HOME=/root",
                          "GITHUB_TOKEN=secret", "CORDON_AGENT_SOCKET=/run/cordon/agent.sock", "SSH_AUTH_SOCK=/x",
                          "AWS_PROFILE=prod", "NOEQUALS", nullptr};
  auto env = BuildEnvironment(const_cast<char**>(caller), WithEnvironment("[AWS_PROFILE, 'MODE=ci', MISSING]"),
                              {"EXTRA=1", "MODE=cli"}, "/tmp");
  ASSERT_TRUE(env) << env.error().ToString();
  std::vector<std::string> want = {"PATH=/opt/bin:/usr/bin", "LANG=C.UTF-8", "LC_ALL=C", "TERM=xterm", "HOME=/tmp",
                                   "SHELL=/bin/sh", "AWS_PROFILE=prod", "MODE=cli", "EXTRA=1"};
  EXPECT_EQ(*env, want);
  // No PATH at all: a default one.
  const char* bare[] = {nullptr};
  auto minimal = BuildEnvironment(const_cast<char**>(bare), WithEnvironment("[]"), {}, "/tmp");
  ASSERT_TRUE(minimal);
  EXPECT_EQ((*minimal)[0], "PATH=/usr/local/bin:/usr/bin:/bin");
  EXPECT_FALSE(BuildEnvironment(const_cast<char**>(bare), WithEnvironment("[]"), {"CORDON_X=1"}, "/tmp"));
  EXPECT_FALSE(BuildEnvironment(const_cast<char**>(bare), WithEnvironment("[]"), {"=1"}, "/tmp"));
  EXPECT_FALSE(BuildEnvironment(const_cast<char**>(bare), WithEnvironment("[]"), {"A B=1"}, "/tmp"));
}

TEST(ChildCommand, ResolvedOnceAgainstTheCommandsPath) {
  char tmpl[] = "/tmp/cordon-resolve-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  std::string first = dir + "/first", second = dir + "/second";
  ::mkdir(first.c_str(), 0755);
  ::mkdir(second.c_str(), 0755);
  std::ofstream(first + "/tool") << "not executable";
  std::ofstream(second + "/tool") << "#!/bin/sh\n";
  ::chmod((second + "/tool").c_str(), 0755);
  auto found = ResolveCommand("tool", first + ":" + second);
  ASSERT_TRUE(found) << found.error().ToString();
  EXPECT_EQ(*found, second + "/tool") << "the first executable hit, as execvp";
  auto missing = ResolveCommand("tool", first);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().ToString().find("not found in the command's PATH"), std::string::npos);
  auto direct = ResolveCommand(second + "/tool", "");
  ASSERT_TRUE(direct);
  EXPECT_EQ(*direct, second + "/tool") << "a path is taken as it is";
  EXPECT_FALSE(ResolveCommand(first + "/tool", ""));  // not executable
  EXPECT_FALSE(ResolveCommand(dir + "/none", ""));
  std::remove((first + "/tool").c_str());
  std::remove((second + "/tool").c_str());
  ::rmdir(first.c_str());
  ::rmdir(second.c_str());
  ::rmdir(dir.c_str());
}

}  // namespace
}  // namespace cordon
