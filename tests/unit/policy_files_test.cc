// spec.files, spec.allowUserNamespaces, spec.network.abstractUnix: parsing,
// path validation, profile expansion, merging, flags and their description.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "policy/compiler.h"
#include "policy/describe.h"
#include "policy/parser.h"

namespace cordon::policy {
namespace {

struct Outcome {
  bool parsed = false;
  bool ok = false;
  ParsedPolicy policy;
  CompiledPolicy compiled;
  Diagnostics diags;
};

Outcome CompileText(const std::string& text) {
  Outcome out;
  out.parsed = ParsePolicyText(text, "f.yaml", &out.policy, &out.diags);
  if (!out.parsed) return out;
  out.ok = Compile(out.policy, &out.compiled, &out.diags);
  EXPECT_EQ(out.ok, out.diags.empty()) << FormatDiagnostics(out.diags);
  return out;
}

// Lines 1-5 are the header; `spec` continues at line 6 (two-space indent).
std::string WithSpec(const std::string& spec) {
  return "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata:\n  name: t\nspec:\n" + spec;
}

CompiledPolicy MustCompile(const std::string& spec) {
  Outcome out = CompileText(WithSpec(spec));
  EXPECT_TRUE(out.ok) << FormatDiagnostics(out.diags);
  return out.compiled;
}

void ExpectDiag(const Diagnostics& diags, const std::string& field, int line, const std::string& text) {
  const Diagnostic* found = nullptr;
  for (const auto& d : diags) {
    if (d.field == field) found = &d;
  }
  ASSERT_NE(found, nullptr) << "no diagnostic for " << field << " in:\n" << FormatDiagnostics(diags);
  EXPECT_EQ(found->line, line) << found->ToString();
  EXPECT_NE(found->message.find(text), std::string::npos) << found->ToString();
  EXPECT_EQ(found->file, "f.yaml");
}

const FileRule* FindRule(const CompiledPolicy& policy, const std::string& path) {
  for (const FileRule& rule : policy.file_rules) {
    if (rule.path == path) return &rule;
  }
  return nullptr;
}

const FileProfile& Profile(const std::string& name) {
  for (const FileProfile& profile : FileProfiles()) {
    if (name == profile.name) return profile;
  }
  ADD_FAILURE() << "no profile " << name;
  return FileProfiles()[0];
}

TEST(PolicyFiles, ParsesTheNewFields) {
  Outcome out = CompileText(WithSpec(R"(  allowUserNamespaces: true
  network:
    abstractUnix: true
  files:
    include: [runtime-minimal, python3]
    read: [/usr, /etc/ssl/certs]
    write: [/work/out]
    exec: [/usr/bin/python3, /usr/bin/git]
    allowMemfdExec: true
)"));
  ASSERT_TRUE(out.ok) << FormatDiagnostics(out.diags);
  const cordon::v1::Spec& spec = out.policy.proto.spec();
  EXPECT_TRUE(spec.allow_user_namespaces());
  EXPECT_TRUE(spec.network().abstract_unix());
  ASSERT_TRUE(spec.has_files());
  EXPECT_EQ(spec.files().include_size(), 2);
  EXPECT_EQ(spec.files().read(1), "/etc/ssl/certs");
  EXPECT_EQ(spec.files().write(0), "/work/out");
  EXPECT_EQ(spec.files().exec(1), "/usr/bin/git");
  EXPECT_TRUE(spec.files().allow_memfd_exec());
  const auto& pos = out.policy.positions;
  EXPECT_EQ(pos.at("spec.allowUserNamespaces").line, 6);
  EXPECT_EQ(pos.at("spec.network.abstractUnix").line, 8);
  EXPECT_EQ(pos.at("spec.files").line, 10);
  EXPECT_EQ(pos.at("spec.files.include[1]").line, 10);
  EXPECT_EQ(pos.at("spec.files.read[1]").line, 11);
  EXPECT_EQ(pos.at("spec.files.allowMemfdExec").line, 14);
  EXPECT_EQ(out.compiled.lsm_flags, static_cast<uint32_t>(CORDON_LSM_F_USERNS | CORDON_LSM_F_ABSTRACT_UNIX |
                                                          CORDON_LSM_F_MEMFD_EXEC | CORDON_LSM_F_PROC_SELF));
}

TEST(PolicyFiles, WrongTypesAreParseErrorsWithLines) {
  Outcome memfd = CompileText(WithSpec("  files:\n    allowMemfdExec: yes\n"));
  ASSERT_FALSE(memfd.parsed);
  ASSERT_EQ(memfd.diags.size(), 1u) << FormatDiagnostics(memfd.diags);
  EXPECT_EQ(memfd.diags[0].ToString(), "f.yaml:7:21: spec.files.allowMemfdExec: expected true or false, got 'yes'");

  Outcome quoted = CompileText(WithSpec("  files:\n    allowMemfdExec: \"true\"\n"));
  ASSERT_FALSE(quoted.parsed);
  ExpectDiag(quoted.diags, "spec.files.allowMemfdExec", 7, "expected true or false, got the string \"true\"");

  Outcome others = CompileText(WithSpec(R"(  allowUserNamespaces: [true]
  network:
    abstractUnix: 1
  files:
    read: /usr
    write: [[/a]]
    include: {name: shell}
    nope: 1
)"));
  ASSERT_FALSE(others.parsed);
  ExpectDiag(others.diags, "spec.allowUserNamespaces", 6, "expected a scalar, got a list");
  ExpectDiag(others.diags, "spec.network.abstractUnix", 8, "expected true or false, got '1'");
  ExpectDiag(others.diags, "spec.files.read", 10, "expected a list, got '/usr'");
  ExpectDiag(others.diags, "spec.files.write[0]", 11, "expected a string, got a list");
  ExpectDiag(others.diags, "spec.files.include", 12, "expected a list, got a mapping");
  ExpectDiag(others.diags, "spec.files.nope", 13,
             "unknown field 'nope' (expected one of: include, read, write, exec, allowMemfdExec)");
  EXPECT_EQ(others.diags.size(), 6u) << FormatDiagnostics(others.diags);

  Outcome files_scalar = CompileText(WithSpec("  files: all\n"));
  ASSERT_FALSE(files_scalar.parsed);
  ExpectDiag(files_scalar.diags, "spec.files", 6, "expected a mapping of Files fields, got 'all'");
}

// cordon's own state (/var/lib/cordon: signing keys, kept policy texts) is
// never granted: a path at or below it is an error naming the field and line;
// /var/lib above it and a sibling that only shares the prefix are not.
TEST(PolicyFiles, RefusesCordonsOwnStateDirectory) {
  Outcome out = CompileText(WithSpec(R"(  files:
    read:
      - /var/lib/cordon
      - /var/lib
      - /var/lib/cordon-other
    write:
      - /var/lib/cordon/policies/
    exec:
      - /var/lib/cordon/oidc/../x
)"));
  ASSERT_TRUE(out.parsed) << FormatDiagnostics(out.diags);
  ASSERT_FALSE(out.ok);
  const Diagnostics& d = out.diags;
  ExpectDiag(d, "spec.files.read[0]", 8,
             "'/var/lib/cordon' is cordon's own state (/var/lib/cordon: signing keys, kept policy texts): no sandbox "
             "is granted it, whatever its policy");
  ExpectDiag(d, "spec.files.write[0]", 12,
             "'/var/lib/cordon/policies' is cordon's own state (/var/lib/cordon: signing keys, kept policy texts): no "
             "sandbox is granted it, whatever its policy");
  ExpectDiag(d, "spec.files.exec[0]", 14, "'..' in path '/var/lib/cordon/oidc/../x'");
  EXPECT_EQ(d.size(), 3u) << FormatDiagnostics(d);
}

TEST(PolicyFiles, ReportsEveryPathErrorWithLineAndField) {
  const std::string long_path = "/" + std::string(4095, 'a');
  Outcome out = CompileText(WithSpec(R"(  files:
    include: [runtime-minimal, python, shell, runtime-minimal]
    read:
      - /usr
      - usr/lib
      - /usr/../etc
      - ""
      - /usr/
      - "/etc/\tx"
      - "/etc/\0x"
      - ~/secrets
      - /etc/ssl/certs
    write:
      - /work/out
      - /work//out/.
      - /usr
      - /..
    exec:
      - )" + long_path + R"(
      - ./run.sh
)"));
  ASSERT_TRUE(out.parsed) << FormatDiagnostics(out.diags);
  ASSERT_FALSE(out.ok);
  const Diagnostics& d = out.diags;
  ExpectDiag(d, "spec.files.include[1]", 7,
             "unknown profile 'python' (expected one of: runtime-minimal, python3, shell, git)");
  ExpectDiag(d, "spec.files.include[3]", 7, "duplicate profile 'runtime-minimal' (first at line 7)");
  ExpectDiag(d, "spec.files.read[1]", 10, "relative path 'usr/lib' (paths must be absolute, starting with /)");
  ExpectDiag(d, "spec.files.read[2]", 11, "'..' in path '/usr/../etc'");
  ExpectDiag(d, "spec.files.read[3]", 12, "empty path");
  ExpectDiag(d, "spec.files.read[4]", 13, "duplicate path '/usr' (first as read[0], line 9)");
  ExpectDiag(d, "spec.files.read[5]", 14, "path contains a control character (0x09 at byte 5)");
  ExpectDiag(d, "spec.files.read[6]", 15, "path contains a NUL byte (at byte 5)");
  ExpectDiag(d, "spec.files.read[7]", 16,
             "relative path '~/secrets' (paths must be absolute, starting with /; '~' is "
             "not expanded)");
  ExpectDiag(d, "spec.files.write[1]", 20, "duplicate path '/work/out' (first as write[0], line 19)");
  ExpectDiag(d, "spec.files.write[3]", 22, "'..' in path '/..'");
  ExpectDiag(d, "spec.files.exec[0]", 24, "path is too long: 4096 bytes (the limit is 4095)");
  ExpectDiag(d, "spec.files.exec[1]", 25, "relative path './run.sh'");
  EXPECT_EQ(d.size(), 13u) << FormatDiagnostics(d);  // /usr in read and write is a merge, not an error
  EXPECT_TRUE(std::is_sorted(d.begin(), d.end(), [](const Diagnostic& a, const Diagnostic& b) {
    return a.line != b.line ? a.line < b.line : a.column < b.column;
  }));
  // The field path and line, as the user sees them.
  EXPECT_EQ(d[2].ToString(),
            "f.yaml:10:9: spec.files.read[1]: relative path 'usr/lib' (paths must be absolute, starting with /)");
  // Control characters never reach the terminal.
  for (const Diagnostic& diag : d) {
    const std::string text = diag.ToString();
    EXPECT_TRUE(std::none_of(text.begin(), text.end(), [](char c) { return c == '\t' || c == '\0'; })) << text;
  }
}

TEST(PolicyFiles, LengthLimitIsInclusive) {
  const std::string max_path = "/" + std::string(4094, 'a');  // 4095 bytes
  CompiledPolicy p = MustCompile("  files:\n    read: [" + max_path + "]\n");
  ASSERT_EQ(p.file_rules.size(), 1u);
  EXPECT_EQ(p.file_rules[0].path, max_path);
}

TEST(PolicyFiles, NormalizeFilePath) {
  auto norm = [](const std::string& in) {
    std::string out, error;
    EXPECT_TRUE(NormalizeFilePath(in, &out, &error)) << in << ": " << error;
    return out;
  };
  EXPECT_EQ(norm("/"), "/");
  EXPECT_EQ(norm("//"), "/");
  EXPECT_EQ(norm("/."), "/");
  EXPECT_EQ(norm("/./."), "/");
  EXPECT_EQ(norm("/usr"), "/usr");
  EXPECT_EQ(norm("/usr/"), "/usr");
  EXPECT_EQ(norm("//usr///lib//"), "/usr/lib");
  EXPECT_EQ(norm("/usr/./lib/."), "/usr/lib");
  EXPECT_EQ(norm("/a b/..c/.d/c.."), "/a b/..c/.d/c..");  // only whole components are special
  EXPECT_EQ(norm("/usr/bin/["), "/usr/bin/[");
  EXPECT_EQ(norm("/tmp/caf\xc3\xa9"), "/tmp/caf\xc3\xa9");
  // Already normalized stays unchanged (idempotent).
  for (const char* path : {"/usr/lib", "/", "/a/b/c"}) EXPECT_EQ(norm(norm(path)), norm(path));

  auto fails = [](const std::string& in, const std::string& expected) {
    std::string out = "untouched", error;
    EXPECT_FALSE(NormalizeFilePath(in, &out, &error)) << in;
    EXPECT_NE(error.find(expected), std::string::npos) << in << ": " << error;
    EXPECT_EQ(out, "untouched");
  };
  fails("", "empty path");
  fails("usr", "relative path 'usr'");
  fails(".", "relative path");
  fails("./usr", "relative path");
  fails("~", "'~' is not expanded");
  fails("/..", "'..' in path");
  fails("/usr/..", "'..' in path");
  fails("/usr/../", "'..' in path");
  fails("/a/b/../../c", "'..' in path");
  fails(std::string("/a\0b", 4), "NUL byte (at byte 2)");
  fails("/a\nb", "control character (0x0a at byte 2)");
  fails("/a\x7f", "control character (0x7f at byte 2)");
  fails("/" + std::string(4095, 'x'), "too long: 4096 bytes");
  fails(std::string(5000, '/'), "too long");  // the limit applies to the path as written
}

TEST(PolicyFiles, OrderRightsAndMerging) {
  CompiledPolicy p = MustCompile(R"(  files:
    include: [git, runtime-minimal]
    exec: [/usr/bin/git, /opt/tool/run]
    write: [/work/out, /work/shared]
    read: [/work/shared, /work/src/, /usr/lib/git-core]
)");
  ASSERT_TRUE(p.has_files);
  // Explicit read, then write, then exec (whatever the key order in the file),
  // each in file order; repeated paths merge into their first entry.
  ASSERT_GE(p.file_rules.size(), 6u);
  EXPECT_EQ(p.file_rules[0], (FileRule{"/work/shared", kFileRightsWrite, 1, true, "spec.files.read[0]"}));
  EXPECT_EQ(p.file_rules[1], (FileRule{"/work/src", kFileRightsRead, 2, true, "spec.files.read[1]"}));
  // Explicit read of a profile's path: the explicit entry comes first and gains the profile's rights.
  EXPECT_EQ(p.file_rules[2], (FileRule{"/usr/lib/git-core", kFileRightsExec, 3, true, "spec.files.read[2]"}));
  EXPECT_EQ(p.file_rules[3], (FileRule{"/work/out", kFileRightsWrite, 4, true, "spec.files.write[0]"}));
  EXPECT_EQ(p.file_rules[4], (FileRule{"/usr/bin/git", kFileRightsExec, 5, true, "spec.files.exec[0]"}));
  EXPECT_EQ(p.file_rules[5], (FileRule{"/opt/tool/run", kFileRightsExec, 6, true, "spec.files.exec[1]"}));
  // Then the profiles in include order: git's remaining entries, then runtime-minimal's.
  ASSERT_GE(p.file_rules.size(), 8u);
  EXPECT_EQ(p.file_rules[6], (FileRule{"/usr/share/git-core", kFileRightsRead, 7, false, "profile:git"}));
  EXPECT_EQ(p.file_rules[7], (FileRule{"/etc/gitconfig", kFileRightsRead, 8, false, "profile:git"}));
  EXPECT_EQ(p.file_rules[8], (FileRule{"/lib", kFileRightsLibrary, 9, false, "profile:runtime-minimal"}));
  // Where each explicit entry was first written, as diagnostics name it (the
  // host's path check starts its lines with it); a profile's entries have none.
  EXPECT_EQ(p.file_rules[0].where, "f.yaml:10:12: spec.files.read[0]");
  EXPECT_EQ(p.file_rules[3].where, "f.yaml:9:13: spec.files.write[0]");
  EXPECT_EQ(p.file_rules[5].where, "f.yaml:8:26: spec.files.exec[1]");
  EXPECT_EQ(p.file_rules[8].where, "");
  EXPECT_EQ(p.file_rules.size(), 6 + 2 + Profile("runtime-minimal").entries.size());
  std::set<std::string> paths;
  for (size_t i = 0; i < p.file_rules.size(); ++i) {
    EXPECT_EQ(p.file_rules[i].rule, i + 1);
    EXPECT_TRUE(paths.insert(p.file_rules[i].path).second) << "twice: " << p.file_rules[i].path;
  }

  // The same path in read, write and exec: one rule with every right.
  CompiledPolicy all = MustCompile("  files:\n    read: [/x]\n    write: [/x/]\n    exec: [//x]\n");
  ASSERT_EQ(all.file_rules.size(), 1u);
  EXPECT_EQ(all.file_rules[0], (FileRule{"/x", kFileRightsAll, 1, true, "spec.files.read[0]"}));

  // An explicit path that a profile lists too: one rule, in the explicit entry's place.
  CompiledPolicy twice = MustCompile("  files:\n    include: [shell, python3]\n    exec: [/bin/sh]\n");
  const FileRule* sh = FindRule(twice, "/bin/sh");
  ASSERT_NE(sh, nullptr);
  EXPECT_EQ(sh->rule, 1u);
  EXPECT_TRUE(sh->required);
  EXPECT_EQ(sh->origin, "spec.files.exec[0]");
}

TEST(PolicyFiles, RightsOfEachSpelling) {
  EXPECT_EQ(kFileRightsRead, static_cast<uint32_t>(CORDON_FILE_READ));
  EXPECT_EQ(kFileRightsWrite, static_cast<uint32_t>(CORDON_FILE_READ | CORDON_FILE_WRITE | CORDON_FILE_CREATE));
  EXPECT_EQ(kFileRightsExec, static_cast<uint32_t>(CORDON_FILE_READ | CORDON_FILE_EXEC | CORDON_FILE_MAP_EXEC));
  EXPECT_EQ(kFileRightsLibrary, static_cast<uint32_t>(CORDON_FILE_READ | CORDON_FILE_MAP_EXEC));
  EXPECT_EQ(FileRightsText(0), "-----");
  EXPECT_EQ(FileRightsText(kFileRightsRead), "r----");
  EXPECT_EQ(FileRightsText(kFileRightsWrite), "rwc--");
  EXPECT_EQ(FileRightsText(kFileRightsExec), "r--xm");
  EXPECT_EQ(FileRightsText(kFileRightsLibrary), "r---m");
  EXPECT_EQ(FileRightsText(kFileRightsAll), "rwcxm");
}

TEST(PolicyFiles, ProfilesAreWellFormed) {
  std::vector<std::string> names;
  for (const FileProfile& profile : FileProfiles()) names.push_back(profile.name);
  EXPECT_EQ(names, (std::vector<std::string>{"runtime-minimal", "python3", "shell", "git"}));
  for (const FileProfile& profile : FileProfiles()) {
    SCOPED_TRACE(profile.name);
    EXPECT_FALSE(profile.entries.empty());
    std::set<std::string> seen;
    for (const FileProfileEntry& entry : profile.entries) {
      std::string normalized, error;
      ASSERT_TRUE(NormalizeFilePath(entry.path, &normalized, &error)) << entry.path << ": " << error;
      EXPECT_EQ(normalized, entry.path);
      EXPECT_TRUE(seen.insert(entry.path).second) << "twice: " << entry.path;
      EXPECT_NE(entry.rights, 0u) << entry.path;
      EXPECT_EQ(entry.rights & ~kFileRightsAll, 0u) << entry.path;
      EXPECT_NE(entry.rights & CORDON_FILE_READ, 0u) << entry.path;
      // No profile lets the sandbox create, delete or rename anything.
      EXPECT_EQ(entry.rights & CORDON_FILE_CREATE, 0u) << entry.path;
      // Only device nodes are writable.
      if (entry.rights & CORDON_FILE_WRITE) {
        EXPECT_TRUE(std::string(entry.path).starts_with("/dev/")) << entry.path;
      }
      // Paths the loader would resolve for itself, not for the sandbox.
      const std::string path = entry.path;
      EXPECT_FALSE(path.starts_with("/proc")) << path;
      EXPECT_FALSE(path == "/dev/stdin" || path == "/dev/stdout" || path == "/dev/stderr" || path == "/dev/fd") << path;
      // Nothing secret.
      EXPECT_NE(path, "/etc/shadow");
      EXPECT_FALSE(path == "/" || path == "/etc" || path == "/home" || path == "/root") << path;
    }
  }
  EXPECT_EQ(Profile("runtime-minimal").lsm_flags, static_cast<uint32_t>(CORDON_LSM_F_PROC_SELF));
  EXPECT_EQ(Profile("python3").lsm_flags, 0u);
  EXPECT_EQ(Profile("shell").lsm_flags, 0u);
  EXPECT_EQ(Profile("git").lsm_flags, 0u);
}

TEST(PolicyFiles, ProfileContents) {
  auto rights_in = [](const char* profile, const std::string& spec_files) {
    return MustCompile("  files:\n    include: [" + std::string(profile) + "]\n" + spec_files);
  };
  CompiledPolicy rt = rights_in("runtime-minimal", "");
  auto expect = [](const CompiledPolicy& p, const char* path, uint32_t rights, const char* origin) {
    const FileRule* rule = FindRule(p, path);
    ASSERT_NE(rule, nullptr) << path;
    EXPECT_EQ(rule->rights, rights) << path;
    EXPECT_FALSE(rule->required) << path;
    EXPECT_EQ(rule->origin, origin) << path;
  };
  // Merged /usr: both spellings of the library directories.
  for (const char* lib :
       {"/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu"}) {
    expect(rt, lib, kFileRightsLibrary, "profile:runtime-minimal");
  }
  for (const char* config :
       {"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/usr/share/zoneinfo",
        "/etc/nsswitch.conf", "/etc/passwd", "/etc/group", "/etc/host.conf", "/etc/resolv.conf", "/etc/hosts",
        "/usr/lib/locale", "/usr/share/locale", "/dev/zero", "/dev/urandom", "/dev/random"}) {
    expect(rt, config, kFileRightsRead, "profile:runtime-minimal");
  }
  for (const char* dev : {"/dev/null", "/dev/tty", "/dev/full"}) {
    expect(rt, dev, CORDON_FILE_READ | CORDON_FILE_WRITE, "profile:runtime-minimal");
  }
  EXPECT_EQ(FindRule(rt, "/etc/shadow"), nullptr);
  EXPECT_EQ(FindRule(rt, "/usr/bin/python3"), nullptr);
  EXPECT_EQ(rt.lsm_flags, static_cast<uint32_t>(CORDON_LSM_F_PROC_SELF));

  CompiledPolicy py = rights_in("python3", "");
  expect(py, "/usr/bin/python3", kFileRightsExec, "profile:python3");
  expect(py, "/usr/bin/python3.11", kFileRightsExec, "profile:python3");
  expect(py, "/usr/lib/python3.11", kFileRightsRead, "profile:python3");
  expect(py, "/usr/lib/python3.11/lib-dynload", kFileRightsLibrary, "profile:python3");
  expect(py, "/usr/lib/python3", kFileRightsRead, "profile:python3");
  expect(py, "/usr/lib/python3/dist-packages", kFileRightsLibrary, "profile:python3");
  expect(py, "/usr/local/lib/python3.11", kFileRightsRead, "profile:python3");
  expect(py, "/etc/python3.11", kFileRightsRead, "profile:python3");
  EXPECT_EQ(py.lsm_flags, 0u);  // PROC_SELF comes with runtime-minimal only
  EXPECT_EQ(FindRule(py, "/lib"), nullptr);

  CompiledPolicy sh = rights_in("shell", "");
  for (const char* exe : {"/bin/sh", "/usr/bin/sh", "/bin/dash", "/usr/bin/dash", "/bin/bash", "/usr/bin/bash",
                          "/usr/bin/env", "/bin/cat", "/usr/bin/cat", "/usr/bin/[", "/usr/bin/test", "/bin/sed",
                          "/usr/bin/grep", "/usr/bin/basename", "/usr/bin/dirname"}) {
    expect(sh, exe, kFileRightsExec, "profile:shell");
  }
  EXPECT_EQ(sh.file_rules.size(), Profile("shell").entries.size());

  CompiledPolicy git = rights_in("git", "");
  expect(git, "/usr/bin/git", kFileRightsExec, "profile:git");
  expect(git, "/usr/lib/git-core", kFileRightsExec, "profile:git");
  expect(git, "/usr/share/git-core", kFileRightsRead, "profile:git");
  expect(git, "/etc/gitconfig", kFileRightsRead, "profile:git");
  EXPECT_EQ(git.file_rules.size(), 4u);

  // Every profile at once: every path once, numbered in order.
  CompiledPolicy every = rights_in("runtime-minimal, python3, shell, git", "");
  size_t total = 0;
  for (const FileProfile& profile : FileProfiles()) total += profile.entries.size();
  EXPECT_EQ(every.file_rules.size(), total);  // the profiles do not overlap
  for (size_t i = 0; i < every.file_rules.size(); ++i) EXPECT_EQ(every.file_rules[i].rule, i + 1);
}

TEST(PolicyFiles, Flags) {
  EXPECT_EQ(MustCompile("  mode: enforce\n").lsm_flags, 0u);
  EXPECT_EQ(MustCompile("  allowUserNamespaces: true\n").lsm_flags, static_cast<uint32_t>(CORDON_LSM_F_USERNS));
  EXPECT_EQ(MustCompile("  allowUserNamespaces: false\n").lsm_flags, 0u);
  EXPECT_EQ(MustCompile("  network:\n    abstractUnix: true\n").lsm_flags,
            static_cast<uint32_t>(CORDON_LSM_F_ABSTRACT_UNIX));
  EXPECT_EQ(MustCompile("  files:\n    allowMemfdExec: true\n").lsm_flags,
            static_cast<uint32_t>(CORDON_LSM_F_MEMFD_EXEC));
  EXPECT_EQ(MustCompile("  files:\n    allowMemfdExec: false\n").lsm_flags, 0u);
  EXPECT_EQ(MustCompile("  files: {include: [runtime-minimal]}\n").lsm_flags,
            static_cast<uint32_t>(CORDON_LSM_F_PROC_SELF));
  EXPECT_EQ(MustCompile("  files: {include: [shell, git, python3]}\n").lsm_flags, 0u);
  // Flags are independent of the network and egress settings.
  CompiledPolicy both = MustCompile(
      "  allowUserNamespaces: true\n  network:\n    families: []\n    abstractUnix: true\n    egress: []\n");
  EXPECT_EQ(both.lsm_flags, static_cast<uint32_t>(CORDON_LSM_F_USERNS | CORDON_LSM_F_ABSTRACT_UNIX));
  EXPECT_EQ(both.families, 0u);
  EXPECT_FALSE(both.has_files);
}

TEST(PolicyFiles, PresenceOfFiles) {
  // Absent, and null (as if absent): files are not restricted.
  CompiledPolicy absent = MustCompile("  mode: enforce\n");
  EXPECT_FALSE(absent.has_files);
  EXPECT_TRUE(absent.file_rules.empty());
  CompiledPolicy null_files = MustCompile("  files:\n");
  EXPECT_FALSE(null_files.has_files);
  CompiledPolicy tilde = MustCompile("  files: ~\n");
  EXPECT_FALSE(tilde.has_files);
  Outcome no_spec = CompileText("apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: a}\n");
  ASSERT_TRUE(no_spec.ok);
  EXPECT_FALSE(no_spec.compiled.has_files);

  // Present but empty: everything is denied.
  CompiledPolicy empty = MustCompile("  files: {}\n");
  EXPECT_TRUE(empty.has_files);
  EXPECT_TRUE(empty.file_rules.empty());
  EXPECT_EQ(empty.lsm_flags, 0u);
  CompiledPolicy empty_lists = MustCompile("  files:\n    include: []\n    read: []\n");
  EXPECT_TRUE(empty_lists.has_files);
  EXPECT_TRUE(empty_lists.file_rules.empty());
  CompiledPolicy only_flag = MustCompile("  files:\n    allowMemfdExec: false\n");
  EXPECT_TRUE(only_flag.has_files);

  Outcome json = CompileText(
      R"({"apiVersion": "cordon/v1", "kind": "SandboxPolicy", "metadata": {"name": "j"}, "spec": {"files": {}}})");
  ASSERT_TRUE(json.ok);
  EXPECT_TRUE(json.compiled.has_files);
  Outcome json_null = CompileText(
      R"({"apiVersion": "cordon/v1", "kind": "SandboxPolicy", "metadata": {"name": "j"}, "spec": {"files": null}})");
  ASSERT_TRUE(json_null.ok);
  EXPECT_FALSE(json_null.compiled.has_files);

  // A policy built in code, without positions: the message's presence decides.
  ParsedPolicy built;
  built.proto.set_api_version("cordon/v1");
  built.proto.set_kind("SandboxPolicy");
  built.proto.mutable_metadata()->set_name("code");
  CompiledPolicy compiled;
  Diagnostics diags;
  ASSERT_TRUE(Compile(built, &compiled, &diags));
  EXPECT_FALSE(compiled.has_files);
  built.proto.mutable_spec()->mutable_files();
  ASSERT_TRUE(Compile(built, &compiled, &diags));
  EXPECT_TRUE(compiled.has_files);
}

TEST(PolicyFiles, TooManyPaths) {
  std::string read = "  files:\n    read:\n";
  for (size_t i = 0; i <= kMaxFileRules; ++i) read += "      - /data/" + std::to_string(i) + "\n";
  Outcome out = CompileText(WithSpec(read));
  ASSERT_FALSE(out.ok);
  ASSERT_EQ(out.diags.size(), 1u);
  ExpectDiag(out.diags, "spec.files", 7, "too many paths: 10001 in read, write and exec (the limit is 10000)");

  std::string at_limit = "  files:\n    read:\n";
  for (size_t i = 0; i < kMaxFileRules; ++i) at_limit += "      - /data/" + std::to_string(i) + "\n";
  at_limit += "    include: [runtime-minimal, python3, shell, git]\n";  // profiles do not count
  CompiledPolicy p = MustCompile(at_limit);
  EXPECT_GT(p.file_rules.size(), kMaxFileRules);
  EXPECT_EQ(p.file_rules[kMaxFileRules - 1].path, "/data/9999");
}

TEST(PolicyFiles, ErrorsLeaveOutputUntouched) {
  Outcome bad = CompileText(WithSpec("  files:\n    read: [relative]\n"));
  ASSERT_FALSE(bad.ok);
  EXPECT_FALSE(bad.compiled.has_files);
  EXPECT_TRUE(bad.compiled.file_rules.empty());
}

TEST(PolicyFiles, DescribeShowsTheExpansion) {
  CompiledPolicy p = MustCompile(R"(  allowUserNamespaces: true
  files:
    include: [git]
    read: [/work/src]
    write: [/work/out]
    exec: [/usr/bin/git]
    allowMemfdExec: true
  network:
    abstractUnix: true
)");
  const std::string text = Describe(p);
  const std::string expected_files =
      "egress: nothing else (default deny)\n"
      "files: 6 rules (r read, w write, c create/delete/rename, x execute, m map executable; an explicit write "
      "path must exist, an explicit read or exec path or a profile path absent on the host is skipped)\n"
      "  r---- /work/src  (spec.files.read[0])\n"
      "  rwc-- /work/out  (spec.files.write[0])\n"
      "  r--xm /usr/bin/git  (spec.files.exec[0])\n"
      "  r--xm /usr/lib/git-core  (profile:git)\n"
      "  r---- /usr/share/git-core  (profile:git)\n"
      "  r---- /etc/gitconfig  (profile:git)\n"
      "files: everything else denied (default deny)\n"
      "own /proc/<pid>: denied\n"
      "memfd exec: allowed (spec.files.allowMemfdExec)\n"
      "abstract unix sockets: allowed (spec.network.abstractUnix)\n"
      "user namespaces: allowed (spec.allowUserNamespaces)\n"
      "resources: no limits set by this policy (no spec.resources)\n"
      "credentials: none (no spec.credentials)\n";
  ASSERT_GE(text.size(), expected_files.size());
  EXPECT_EQ(text.substr(text.size() - expected_files.size()), expected_files) << text;
  EXPECT_EQ(text.rfind("policy: t\n", 0), 0u) << text;  // the network part is unchanged

  const std::string empty = Describe(MustCompile("  files: {}\n"));
  EXPECT_NE(empty.find("files: 0 rules"), std::string::npos) << empty;
  EXPECT_NE(empty.find("files: everything else denied (default deny)\nown /proc/<pid>: denied\nmemfd exec: denied\n"
                       "abstract unix sockets: denied\nuser namespaces: denied\n"),
            std::string::npos)
      << empty;

  const std::string rt = Describe(MustCompile("  files: {include: [runtime-minimal]}\n"));
  EXPECT_NE(rt.find("  r---m /lib  (profile:runtime-minimal)\n"), std::string::npos) << rt;
  EXPECT_NE(rt.find("  rw--- /dev/null  (profile:runtime-minimal)\n"), std::string::npos) << rt;
  EXPECT_NE(rt.find("own /proc/<pid>: readable (profile runtime-minimal)\n"), std::string::npos) << rt;

  const std::string none = Describe(MustCompile("  mode: audit\n"));
  EXPECT_NE(none.find("files: not restricted by this policy (no spec.files)\n"), std::string::npos) << none;
  EXPECT_EQ(none.find("memfd"), std::string::npos) << none;
  EXPECT_EQ(none.find("default deny)\nfiles: everything"), std::string::npos) << none;

  // Paths with control characters never get this far (see NormalizeFilePath);
  // Describe masks them anyway.
  CompiledPolicy odd;
  odd.has_files = true;
  odd.file_rules.push_back(FileRule{"/a\x1b[2Jb", kFileRightsRead, 1, true, "spec.files.read[0]"});
  EXPECT_NE(Describe(odd).find("  r---- /a\\x1b[2Jb  (spec.files.read[0])\n"), std::string::npos) << Describe(odd);
}

TEST(PolicyFiles, DescribeOfTheDefaultPolicy) {
  const std::string text = Describe(DefaultPolicy());
  EXPECT_NE(text.find("policy: default\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  r---m /usr/lib  (profile:runtime-minimal)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  r--xm /bin/sh  (profile:shell)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  r--xm /usr/bin/python3  (profile:python3)\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("profile:git"), std::string::npos) << text;
  EXPECT_NE(text.find("files: everything else denied (default deny)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("own /proc/<pid>: readable"), std::string::npos) << text;
  EXPECT_NE(text.find("user namespaces: denied\n"), std::string::npos) << text;
  // Nothing is creatable or writable but the three device nodes.
  for (const FileRule& rule : DefaultPolicy().file_rules) {
    if (rule.rights & CORDON_FILE_WRITE) {
      EXPECT_TRUE(rule.path == "/dev/null" || rule.path == "/dev/tty" || rule.path == "/dev/full") << rule.path;
    }
  }
}

}  // namespace
}  // namespace cordon::policy
