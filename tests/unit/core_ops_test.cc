// The use-case layer's request validation (userspace/ops): no root needed.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <fstream>

#include "abi/cordon_common.h"
#include "ops/ops.h"
#include "ops/policy_store.h"
#include "ops/resource_watch.h"
#include "policy/compiler.h"
#include "policy/parser.h"
#include "tests/unit/temp_dir.h"
#include "util/clock.h"
#include "util/fs.h"

namespace cordon::ops {
namespace {

// Issue 17: an oom_kill rise for which no victim was recorded (here a
// directory no process is in; the recorder loaded or not) is one event with
// the whole count, no process, and the reason says it is not named: a name
// is never guessed.
TEST(ResourceWatch, AnOomKillWithoutARecordedVictimNamesNoOne) {
  test::TempDir tmp("oom-watch");
  std::ofstream(tmp / "memory.events") << "high 0\nmax 0\noom 0\noom_kill 0\n";
  std::ofstream(tmp / "memory.max") << "33554432\n";
  auto watch = ResourceWatch::Open(tmp.path());
  ASSERT_GE(watch->fd(), 0);
  std::ofstream(tmp / "memory.events") << "high 0\nmax 0\noom 2\noom_kill 2\n";
  auto events = watch->Poll(MonoNs(), /*final=*/true);
  ASSERT_EQ(events.size(), 1u);
  const auto& e = events[0];
  EXPECT_EQ(e.kind(), "resource.memory");
  EXPECT_EQ(e.verdict(), "killed");
  EXPECT_EQ(e.resource().event(), "oom_kill");
  EXPECT_EQ(e.resource().count(), 2u);
  EXPECT_EQ(e.resource().limit(), 32u << 20);
  EXPECT_EQ(e.pid(), 0u);
  EXPECT_EQ(e.comm(), "");
  EXPECT_NE(e.reason().find("killed 2 processes of the sandbox at memory.max 32 MiB; not named: "), std::string::npos)
      << e.reason();
}

// README "Policy texts by digest": what an event's policyDigest names is
// found again byte for byte, and a changed entry is never taken for it.
TEST(PolicyStore, KeepsTheTextByItsDigestAndRefusesAChangedEntry) {
  test::TempDir tmp("policy-store");
  const std::string dir = tmp / "policies";
  const std::string text = "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: kept}\nspec: {}\n";
  const std::string digest = policy::TextDigest(text);
  ASSERT_EQ(digest.size(), 7u + 64u);
  const std::string path = dir + "/sha256-" + digest.substr(7) + ".yaml";

  EXPECT_FALSE(KeptPolicyText(digest, dir).ok()) << "nothing kept yet";
  EXPECT_NE(KeptPolicyText(digest, dir).error().ToString().find("no policy text is kept for " + digest),
            std::string::npos);
  ASSERT_TRUE(KeepPolicyText(text, digest, dir).ok());
  struct stat st;
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  auto kept = KeptPolicyText(digest, dir);
  ASSERT_TRUE(kept.ok()) << kept.error().ToString();
  EXPECT_EQ(*kept, text);
  ASSERT_TRUE(KeepPolicyText(text, digest, dir).ok()) << "kept again: left as it is";

  // An entry changed after it was kept: an error naming it, never its text.
  ASSERT_TRUE(WriteFile(path, text + "# added\n").ok());
  auto changed = KeptPolicyText(digest, dir);
  ASSERT_FALSE(changed.ok());
  EXPECT_NE(changed.error().ToString().find(path), std::string::npos) << changed.error().ToString();
  EXPECT_NE(changed.error().ToString().find("changed after cordon kept it"), std::string::npos);
  ASSERT_TRUE(KeepPolicyText(text, digest, dir).ok()) << "the next keep mends it";
  auto again = KeptPolicyText(digest, dir);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, text);

  // What a workload that may write there could plant: a fifo (reading it
  // would block the agent's compile worker), a symlink to a host file, a
  // store that others may write or that is a symlink: refused, never waited on.
  ASSERT_EQ(::unlink(path.c_str()), 0);
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  auto fifo = KeptPolicyText(digest, dir);
  ASSERT_FALSE(fifo.ok());
  EXPECT_NE(fifo.error().ToString().find("not a regular file"), std::string::npos) << fifo.error().ToString();
  ASSERT_TRUE(KeepPolicyText(text, digest, dir).ok()) << "renamed over the fifo";
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  const std::string host_file = tmp / "host-file";
  ASSERT_TRUE(WriteFileAtomic(tmp.path(), "host-file", text, 0600).ok());
  ASSERT_EQ(::unlink(path.c_str()), 0);
  ASSERT_EQ(::symlink(host_file.c_str(), path.c_str()), 0);
  EXPECT_FALSE(KeptPolicyText(digest, dir).ok()) << "a symlink is not followed";
  ASSERT_TRUE(KeepPolicyText(text, digest, dir).ok());
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode)) << "the symlink replaced, the host file untouched";
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  EXPECT_NE(KeptPolicyText(digest, dir).error().ToString().find("not trusted"), std::string::npos);
  EXPECT_FALSE(KeepPolicyText(text, digest, dir).ok());
  ASSERT_EQ(::chmod(dir.c_str(), 0700), 0);
  const std::string linked = tmp / "linked";
  ASSERT_EQ(::symlink(dir.c_str(), linked.c_str()), 0);
  EXPECT_FALSE(KeptPolicyText(digest, linked).ok()) << "a symlinked store is not used";

  // Not a policy's digest, a text that is not the digest's, the built-in default.
  EXPECT_FALSE(KeptPolicyText("sha256:../../etc/passwd", dir).ok());
  EXPECT_FALSE(KeptPolicyText("sha256:" + std::string(64, 'A'), dir).ok());
  EXPECT_FALSE(KeepPolicyText(text + " ", digest, dir).ok());
  EXPECT_TRUE(KeepPolicyText(policy::DefaultPolicyYaml(), "builtin:default", dir).ok());
  auto builtin = KeptPolicyText("builtin:default", dir);
  ASSERT_TRUE(builtin.ok());
  EXPECT_EQ(*builtin, policy::DefaultPolicyYaml());
  EXPECT_EQ(PolicyStoreName(digest), "sha256-" + digest.substr(7) + ".yaml");
  EXPECT_EQ(PolicyStoreName("builtin:default"), "");
}

TEST(OpsMode, ParsesEnforceAuditAndEmpty) {
  uint32_t mode = CORDON_MODE_ENFORCE;
  EXPECT_TRUE(ParseMode("audit", &mode));
  EXPECT_EQ(mode, static_cast<uint32_t>(CORDON_MODE_AUDIT));
  EXPECT_TRUE(ParseMode("", &mode));
  EXPECT_EQ(mode, static_cast<uint32_t>(CORDON_MODE_AUDIT));  // unchanged
  EXPECT_TRUE(ParseMode("enforce", &mode));
  EXPECT_EQ(mode, static_cast<uint32_t>(CORDON_MODE_ENFORCE));
  EXPECT_FALSE(ParseMode("Audit", &mode));
  EXPECT_EQ(BadModeError("x"), "mode must be enforce or audit, not 'x'");
}

TEST(OpsPolicy, EmptyTextIsTheDefaultWithTheModeOverride) {
  policy::CompiledPolicy compiled;
  std::string error;
  ASSERT_TRUE(CompilePolicyText("", "", "audit", &compiled, &error)) << error;
  EXPECT_EQ(compiled.mode, static_cast<uint32_t>(CORDON_MODE_AUDIT));
  EXPECT_EQ(compiled.name, policy::DefaultPolicy().name);
}

TEST(OpsPolicy, BadModeIsRefused) {
  policy::CompiledPolicy compiled;
  std::string error;
  EXPECT_FALSE(CompilePolicyText("", "", "permissive", &compiled, &error));
  EXPECT_EQ(error, "mode must be enforce or audit, not 'permissive'");
}

TEST(OpsPolicy, RejectedTextNamesTheFileAndSaysNothingAttached) {
  policy::CompiledPolicy compiled;
  std::string error;
  EXPECT_FALSE(CompilePolicyText("this: [is not a policy", "p.yaml", "", &compiled, &error));
  EXPECT_NE(error.find("p.yaml"), std::string::npos) << error;
  EXPECT_NE(error.find("policy p.yaml rejected ("), std::string::npos) << error;
  EXPECT_NE(error.find("); nothing attached"), std::string::npos) << error;
  error.clear();
  EXPECT_FALSE(CompilePolicyText("this: [is not a policy", "", "", &compiled, &error));
  EXPECT_NE(error.find("policy <policy> rejected"), std::string::npos) << error;
}

TEST(OpsDegraded, WordingPerCaller) {
  std::vector<std::string> missing = {"file rules", "exec rules"};
  EXPECT_EQ(DegradedError(missing, "no bpf in lsm=", Wording::kAgent),
            "this kernel cannot enforce, for processes cordon attaches to: file rules; exec rules. Nothing "
            "attached; allow degraded enforcement to enforce only the rest");
  EXPECT_EQ(DegradedError(missing, "no bpf in lsm=", Wording::kCli),
            "this kernel cannot enforce, for processes cordon attaches to: file rules; exec rules (no bpf in "
            "lsm=). Nothing attached; pass --allow-degraded to enforce only the rest, or see `cordon doctor`");
  EXPECT_EQ(DegradedError(missing, "no bpf in lsm=", Wording::kCli, /*update=*/true),
            "this kernel cannot enforce, for processes cordon attaches to: file rules; exec rules (no bpf in "
            "lsm=). The sandbox keeps its current policy; pass --allow-degraded to enforce only the rest, or see "
            "`cordon doctor`");
}

}  // namespace
}  // namespace cordon::ops

namespace cordon::ops {
namespace {

// spec.credentials[].owner as attach resolves it: UID[:GID] (a uid alone:
// its user's primary group, else the same number) or a user name.
TEST(CredentialOwner, NumbersAndNames) {
  auto root = ResolveCredentialOwner("root");
  ASSERT_TRUE(root) << root.error().ToString();
  EXPECT_EQ(*root, std::make_pair(uid_t{0}, gid_t{0}));
  for (const auto& [owner, want] : std::vector<std::pair<std::string, std::pair<uid_t, gid_t>>>{
           {"0", {0, 0}}, {"4242:17", {4242, 17}}, {"2000000000", {2000000000, 2000000000}}}) {
    auto got = ResolveCredentialOwner(owner);
    ASSERT_TRUE(got) << owner;
    EXPECT_EQ(*got, want) << owner;
  }
  auto missing = ResolveCredentialOwner("no-such-user-here");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().ToString(), "owner 'no-such-user-here': no such user on this host");
  EXPECT_FALSE(ResolveCredentialOwner("4242:"));
  EXPECT_FALSE(ResolveCredentialOwner("name:17"));
}

// The names attach accepts for its credentials' directory.
TEST(CredentialOwner, DirectoryNames) {
  EXPECT_TRUE(SafeCredentialDir("task-17"));
  EXPECT_TRUE(SafeCredentialDir("agenttest_1"));
  EXPECT_FALSE(SafeCredentialDir("run-1-abc")) << "cordon run's";
  EXPECT_FALSE(SafeCredentialDir("a.b"));
  EXPECT_FALSE(SafeCredentialDir("a/b"));
  EXPECT_FALSE(SafeCredentialDir(""));
  EXPECT_FALSE(SafeCredentialDir(std::string(129, 'a')));
}

}  // namespace
}  // namespace cordon::ops
