// spec.credentials for `cordon attach` without an agent (issue 15): the
// attached processes already run as some uid (the credential's owner); the
// file is theirs alone on the host, at /run/cordon/credentials/<sandbox>/NAME;
// detach removes and revokes it, a sweep does after its ttl. Through the
// agent: Agent.* in agent_test.cc.
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <thread>

#include "tests/integration/harness.h"

namespace cordon::test {
namespace {

constexpr uid_t kOwner = 4242;     // the attached workload's uid (no passwd entry needed)
constexpr uid_t kStranger = 4243;  // another user on the host

class AttachCredentials : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "integration tests need root";
    char tmpl[] = "/tmp/cordon-attach-creds-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    ::chmod(dir_.c_str(), 0711);
    secret_ = "attach-secret-" + std::to_string(::getpid()) + "-" + std::to_string(::time(nullptr));
    revoked_ = dir_ + "/revoked";
    // Counts its runs: a replacement must not issue again.
    Script("mint", "#!/bin/sh\necho x >> " + dir_ + "/minted\nprintf '%s\\n' '" + secret_ + "'\n");
    Script("revoke", "#!/bin/sh\ncat >> " + revoked_ + "\necho >> " + revoked_ + "\n");
    Script("fail", "#!/bin/sh\nexit 3\n");
    // No agent: the CLI does it directly (a socket nobody listens on).
    if (const char* old = std::getenv("CORDON_AGENT_SOCKET")) old_socket_ = old, had_socket_ = true;
    ::setenv("CORDON_AGENT_SOCKET", (dir_ + "/no-agent.sock").c_str(), 1);
    name_ = "credtest-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++);
    store_before_ = Store();
  }
  void TearDown() override {
    if (had_socket_)
      ::setenv("CORDON_AGENT_SOCKET", old_socket_.c_str(), 1);
    else
      ::unsetenv("CORDON_AGENT_SOCKET");
    if (!dir_.empty()) cordon::test::Run({"rm", "-rf", "--", dir_});
  }
  std::string Script(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    ::chmod(path.c_str(), 0700);
    return path;
  }
  std::string Policy(const std::string& credential_fields, const std::string& name = "attachcreds") {
    const std::string path = dir_ + "/policy-" + std::to_string(policies_++) + ".yaml";
    std::ofstream(path) << "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: " << name
                        << "}\nspec:\n  mode: enforce\n  credentials:\n"
                        << credential_fields;
    return path;
  }
  std::string Token(const std::string& extra = "") {
    return "    - {name: TOKEN, issue: [" + dir_ + "/mint], revoke: [" + dir_ + "/revoke], ttl: 10m, owner: \"" +
           std::to_string(kOwner) + ":" + std::to_string(kOwner) + "\"" + extra + "}\n";
  }
  CommandResult Attach(const TestCgroup& cg, const std::string& policy) {
    return Cordon({"attach", "--cgroup", cg.path(), "--policy", policy, "--name", name_, "--allow-degraded"});
  }
  std::string View() const { return "/run/cordon/credentials/" + name_; }
  static std::vector<std::string> Store() {
    std::vector<std::string> names;
    for (const char* dir : {"/run/cordon/credential-store", "/run/cordon/credentials"}) {
      if (auto* d = ::opendir(dir)) {
        while (auto* e = ::readdir(d))
          if (e->d_name[0] != '.') names.push_back(std::string(dir) + "/" + e->d_name);
        ::closedir(d);
      }
    }
    std::sort(names.begin(), names.end());
    return names;
  }
  std::string Revoked() { return Slurp(revoked_); }
  int Minted() {
    std::string m = Slurp(dir_ + "/minted");
    return static_cast<int>(std::count(m.begin(), m.end(), '\n'));
  }
  void ExpectNoValue(const std::string& where, const std::string& text) {
    EXPECT_EQ(text.find(secret_), std::string::npos) << "the credential's value appears in " << where;
  }
  static std::map<std::string, int> Kinds(const std::string& jsonl) {
    std::map<std::string, int> kinds;
    for (const auto& e : ParseJsonLines(jsonl))
      if (e.kind().rfind("credential.", 0) == 0) kinds[e.kind() + " " + e.credential().name()]++;
    return kinds;
  }

  std::string dir_, secret_, revoked_, name_, old_socket_;
  std::vector<std::string> store_before_;
  bool had_socket_ = false;
  int policies_ = 0;
  static inline int counter_ = 0;
};

// The owner's process in the sandbox reads the file; another user on the
// host cannot (control: root outside reads it; the owner outside can too,
// as attach says: ownership is the guard). Nothing is listable on the way.
// detach removes it and revoke gets the value; no output holds the value.
TEST_F(AttachCredentials, FileIsTheOwnersAndDetachRevokesIt) {
  TestCgroup cg("creds");
  const std::string path = View() + "/TOKEN";
  // A process already running as the owner when the policy is attached.
  WaitingChild reader(
      cg.path(),
      [&] {
        int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) return errno;
        char buf[256] = {};
        ssize_t n = ::read(fd, buf, sizeof buf - 1);
        ::close(fd);
        return n > 0 && std::string(buf, static_cast<size_t>(n)) == secret_ ? 0 : 1000;
      },
      [] {
        (void)!::setgroups(0, nullptr);
        (void)!::setresgid(kOwner, kOwner, kOwner);
        (void)!::setresuid(kOwner, kOwner, kOwner);
      });
  CommandResult a = Attach(cg, Policy(Token()));
  ASSERT_EQ(a.status, 0) << a.out << a.err;
  EXPECT_NE(a.err.find("credential TOKEN issued: " + path + " (mode 0400, owner 4242:4242"), std::string::npos)
      << a.err;
  // Where BPF LSM enforces, it guards the file (tests/lsm: CredentialGuard.*);
  // elsewhere attach states the weaker guarantee.
  const bool lsm = LsmUsableHere();
  EXPECT_NE(
      a.err.find(lsm ? "credentials: guarded by BPF LSM: only this sandbox's processes"
                     : "only file ownership guards them on the host: any process running as '4242:4242' can read"),
      std::string::npos)
      << a.err;
  EXPECT_NE(a.err.find("issued once: refresh needs the agent"), std::string::npos) << a.err;
  // Attach prints the retroactive check's events too (what the test process
  // holds open, its environment): only the credential's are counted.
  auto issued = OfKind(ParseJsonLines(a.out), "credential.issued");
  ASSERT_EQ(issued.size(), 1u) << a.out;
  EXPECT_EQ(issued[0].kind(), "credential.issued");
  EXPECT_EQ(issued[0].sandbox(), name_);
  EXPECT_EQ(issued[0].enforcement(), "cordon-attach");
  EXPECT_EQ(issued[0].credential().path(), path);
  EXPECT_EQ(issued[0].sandbox_cgroup_id(), cg.id());

  EXPECT_EQ(reader.Go(), 0) << "the owner's process in the sandbox reads its credential";
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0400u);
  EXPECT_EQ(st.st_uid, kOwner);
  EXPECT_EQ(st.st_gid, kOwner);
  EXPECT_EQ(Slurp(path), secret_) << "control: root outside reads it";
  auto as = [&](uid_t uid, const std::vector<std::string>& cmd) {
    std::vector<std::string> argv = {"setpriv", "--reuid=" + std::to_string(uid), "--regid=" + std::to_string(uid),
                                     "--clear-groups"};
    argv.insert(argv.end(), cmd.begin(), cmd.end());
    return cordon::test::Run(argv);
  };
  CommandResult stranger = as(kStranger, {"cat", path});
  EXPECT_NE(stranger.status, 0) << "another user on the host read it";
  EXPECT_NE(stranger.err.find("Permission denied"), std::string::npos) << stranger.err;
  ExpectNoValue("a stranger's read", stranger.out);
  for (const std::string& d : {View(), std::string("/run/cordon/credentials")}) {
    CommandResult list = as(kOwner, {"ls", d});
    EXPECT_NE(list.status, 0) << d << " is listable: " << list.out;
  }
  CommandResult owner_outside = as(kOwner, {"cat", path});
  if (lsm) {
    ExpectNoValue("the owner's read outside the sandbox", owner_outside.out);
    EXPECT_NE(owner_outside.err.find("Operation not permitted"), std::string::npos)
        << "BPF LSM lets the owner outside the sandbox read it: " << owner_outside.err;
  } else {
    EXPECT_EQ(owner_outside.out, secret_) << "the owner on the host reads it too, as attach says";
  }
  // A cordon run command, root with no spec.files to stop it, does not see
  // it: its mount namespace covers the host's views (control: root outside
  // reads it, above).
  CommandResult other = Cordon({"run", "--user", "root", "--audit", dir_ + "/other.jsonl", "--", "/bin/sh", "-c",
                                "cat " + path + "; ls -A /run/cordon/credentials | wc -l"});
  EXPECT_EQ(other.status, 0) << other.err;
  EXPECT_EQ(other.out, "0\n") << "a cordon run saw the attached sandbox's credential";
  EXPECT_NE(other.err.find(path + ": No such file"), std::string::npos) << other.err;
  // The state that sweeps need: root's.
  EXPECT_EQ(::access(("/run/cordon/credential-store/" + name_ + ".state").c_str(), F_OK), 0);
  EXPECT_NE(as(kOwner, {"cat", "/run/cordon/credential-store/" + name_ + ".state"}).status, 0);

  CommandResult status = Cordon({"status", "--json"});
  EXPECT_NE(status.out.find("{\"name\":\"TOKEN\",\"fingerprint\":\"" + issued[0].credential().fingerprint() + "\""),
            std::string::npos)
      << status.out;
  ExpectNoValue("status --json", status.out);
  CommandResult text = Cordon({"status"});
  EXPECT_NE(text.out.find("credentials: TOKEN " + issued[0].credential().fingerprint()), std::string::npos) << text.out;

  EXPECT_EQ(Revoked(), "") << "nothing revoked while it is attached";
  CommandResult d = Cordon({"detach", "--cgroup", cg.path()});
  EXPECT_EQ(d.status, 0) << d.err;
  auto revoked = OfKind(ParseJsonLines(d.out), "credential.revoked");
  ASSERT_EQ(revoked.size(), 1u) << d.out;
  EXPECT_EQ(revoked[0].kind(), "credential.revoked");
  EXPECT_EQ(revoked[0].reason(), "the sandbox was detached");
  EXPECT_EQ(revoked[0].credential().revoke(), "ran");
  EXPECT_EQ(revoked[0].credential().fingerprint(), issued[0].credential().fingerprint());
  EXPECT_EQ(Revoked(), secret_ + "\n") << "revoke got the value on stdin";
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
  EXPECT_EQ(Store(), store_before_) << "detach left a file, mount, state or lock";
  ExpectNoValue("attach's output", a.out + a.err);
  ExpectNoValue("detach's output", d.out + d.err);
  if (::access("/var/log", W_OK) == 0) {
    const auto kinds = Kinds(Slurp("/var/log/cordon/credentials.jsonl"));
    EXPECT_GE(kinds.count("credential.issued TOKEN"), 1u);
    ExpectNoValue("the credential log", Slurp("/var/log/cordon/credentials.jsonl"));
  }
}

// Containing an attached sandbox ends the credentials attach issued:
// removed and revoked at once (the revoke program gets the value), said in
// the containment event and the evidence, never the value; release does not
// issue them again. The control: before the containment the file is there
// and nothing was revoked.
TEST_F(AttachCredentials, ContainmentRevokesThem) {
  TestCgroup cg("creds-contain");
  const std::string path = View() + "/TOKEN";
  WaitingChild holder(
      cg.path(), [] { return 0; },
      [] {
        (void)!::setgroups(0, nullptr);
        (void)!::setresgid(kOwner, kOwner, kOwner);
        (void)!::setresuid(kOwner, kOwner, kOwner);
      });
  CommandResult a = Attach(cg, Policy(Token()));
  ASSERT_EQ(a.status, 0) << a.out << a.err;
  EXPECT_EQ(Slurp(path), secret_) << "control: issued";
  EXPECT_EQ(Revoked(), "") << "control: nothing revoked yet";
  // The configuration whose audit file gets the events and, beside it, the evidence.
  const std::string audit = dir_ + "/contain.jsonl", config = dir_ + "/agent.yaml";
  std::ofstream(config) << "socket: " << dir_ << "/no-agent.sock\nsinks:\n  - kind: jsonl\n    path: " << audit
                        << "\n    fsync: never\nmetrics:\n  listen: \"\"\n";
  CommandResult c = Cordon({"contain", "--cgroup", cg.path(), "--reason", "exfiltration suspected", "--config", config});
  ASSERT_EQ(c.status, 0) << c.err;
  EXPECT_EQ(Revoked(), secret_ + "\n") << "revoke got the value on stdin";
  EXPECT_NE(::access(path.c_str(), F_OK), 0) << "the file outlived the containment";
  EXPECT_NE(::access(("/run/cordon/credential-store/" + name_ + ".state").c_str(), F_OK), 0);
  std::string events_text = c.out + Slurp(audit);
  auto revoked = OfKind(ParseJsonLines(c.out), "credential.revoked");
  if (revoked.empty()) revoked = OfKind(ParseJsonLines(Slurp(audit)), "credential.revoked");
  ASSERT_EQ(revoked.size(), 1u) << events_text;
  EXPECT_EQ(revoked[0].reason(), "the sandbox was contained");
  EXPECT_EQ(revoked[0].sandbox(), name_);
  auto contained = OfKind(ParseJsonLines(c.out), "sandbox.contained");
  if (contained.empty()) contained = OfKind(ParseJsonLines(Slurp(audit)), "sandbox.contained");
  ASSERT_EQ(contained.size(), 1u) << events_text;
  EXPECT_NE(contained[0].containment().credentials().find("1 issued by cordon attach: removed and revoked"),
            std::string::npos)
      << contained[0].containment().credentials();
  const std::string evidence = contained[0].containment().evidence();
  ASSERT_FALSE(evidence.empty()) << c.err;
  EXPECT_NE(Slurp(evidence).find("removed and revoked"), std::string::npos);
  ExpectNoValue("the evidence", Slurp(evidence));
  ExpectNoValue("contain's output", c.out + c.err);
  ExpectNoValue("the audit file", Slurp(audit));
  CommandResult r = Cordon({"release", "--cgroup", cg.path(), "--reason", "false alarm", "--config", config});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(::access(path.c_str(), F_OK), 0) << "release issued it again";
  EXPECT_EQ(Minted(), 1);
  ::unlink(evidence.c_str());
  EXPECT_EQ(holder.Go(), 0);
}

// What attach cannot do is refused at the policy's line, before anything
// runs: an env credential (a running process's environment cannot be
// changed), a file without owner, an owner this host does not know, a
// sandbox name that cannot name the directory. Nothing is attached, no
// issue program runs, nothing is left in the store.
TEST_F(AttachCredentials, RefusedAtTheLineAndNothingAttached) {
  TestCgroup cg("refused");
  const std::string mint = dir_ + "/mint";
  struct Case {
    std::string credential, said;
    std::string name;
  };
  for (const Case& c : std::vector<Case>{
           {"    - name: TOKEN\n      issue: [" + mint + "]\n      ttl: 1m\n",
            ":7:7: spec.credentials[0]: credential TOKEN: cordon attach needs owner", ""},
           {"    - name: TOKEN\n      issue: [" + mint + "]\n      ttl: 1m\n      deliver: env\n",
            ":10:16: spec.credentials[0].deliver: credential TOKEN: deliver: env is for cordon run only", ""},
           {"    - name: TOKEN\n      issue: [" + mint + "]\n      ttl: 1m\n      owner: no-such-user-here\n",
            ":7:7: spec.credentials[0]: credential TOKEN: owner 'no-such-user-here': no such user on this host", ""},
           {Token(), "the sandbox name 'bad.name' cannot name its credentials' directory", "bad.name"},
       }) {
    SCOPED_TRACE(c.said);
    const std::string policy = Policy(c.credential);
    CommandResult a = Cordon({"attach", "--cgroup", cg.path(), "--policy", policy, "--name",
                              c.name.empty() ? name_ : c.name, "--allow-degraded"});
    EXPECT_EQ(a.status, 1) << a.out << a.err;
    EXPECT_NE(a.err.find((c.name.empty() ? policy : "") + c.said), std::string::npos) << a.err;
    EXPECT_NE(a.err.find("nothing attached"), std::string::npos) << a.err;
    EXPECT_EQ(Cordon({"status"}).out.find(cg.relative()), std::string::npos) << "attached all the same";
  }
  EXPECT_EQ(Minted(), 0) << "an issue program ran for a refused attach";
  EXPECT_EQ(Store(), store_before_);
  // Control: with an owner it attaches (and detach ends it).
  CommandResult ok = Attach(cg, Policy(Token()));
  EXPECT_EQ(ok.status, 0) << ok.err;
  EXPECT_EQ(Cordon({"detach", "--cgroup", cg.path()}).status, 0);
  EXPECT_EQ(Store(), store_before_);
}

// An attach whose issue fails attaches nothing: no sandbox, no file, no
// state; the credential issued before it is revoked. The events say so.
TEST_F(AttachCredentials, FailingIssueAttachesNothing) {
  TestCgroup cg("failing");
  CommandResult a =
      Attach(cg, Policy(Token() + "    - {name: SECOND, issue: [" + dir_ + "/fail], ttl: 1m, owner: \"4242\"}\n"));
  EXPECT_EQ(a.status, 1) << a.out << a.err;
  EXPECT_NE(a.err.find("credential 'SECOND': issue: exit status 3; nothing attached"), std::string::npos) << a.err;
  EXPECT_EQ(Cordon({"status"}).out.find(cg.relative()), std::string::npos) << "half-attached";
  EXPECT_EQ(Revoked(), secret_ + "\n") << "TOKEN, issued first, revoked";
  EXPECT_EQ(Store(), store_before_) << "a file, mount, state or lock left";
  const auto kinds = Kinds(a.out);
  EXPECT_EQ(kinds.at("credential.issued TOKEN"), 1);
  EXPECT_EQ(kinds.at("credential.issue_failed SECOND"), 1);
  EXPECT_EQ(kinds.at("credential.revoked TOKEN"), 1);
  ExpectNoValue("attach's output", a.out + a.err);
}

// Without an agent nothing refreshes: at its ttl the next sweep (here the
// next cordon run's start) removes the file and revokes it, while the
// sandbox stays attached; before the ttl a sweep leaves it.
TEST_F(AttachCredentials, TheNextSweepEndsItAtItsTtl) {
  TestCgroup cg("ttl");
  const auto before_issue = std::chrono::steady_clock::now();
  CommandResult a = Attach(cg, Policy(Token().replace(Token().find("ttl: 10m"), 8, "ttl: 3s")));
  ASSERT_EQ(a.status, 0) << a.err;
  const std::string path = View() + "/TOKEN";
  const std::string audit = dir_ + "/run.jsonl";
  CommandResult early = Cordon({"run", "--audit", audit, "--", "/bin/true"});
  EXPECT_EQ(early.status, 0) << early.err;
  // The ttl counts whole seconds from the issue: 2 s at least from before it.
  if (std::chrono::steady_clock::now() - before_issue < std::chrono::seconds(2)) {
    EXPECT_EQ(Slurp(path), secret_) << "swept before its ttl";
    EXPECT_EQ(Revoked(), "");
  }
  std::this_thread::sleep_until(before_issue + std::chrono::seconds(4));
  CommandResult next = Cordon({"run", "--audit", audit, "--", "/bin/true"});
  EXPECT_EQ(next.status, 0) << next.err;
  EXPECT_NE(::access(path.c_str(), F_OK), 0) << "the file outlived its ttl";
  EXPECT_EQ(Revoked(), secret_ + "\n");
  EXPECT_NE(Cordon({"status"}).out.find(cg.relative()), std::string::npos) << "the sandbox stays attached";
  for (const auto& e : AuditFileEvents(audit)) EXPECT_NE(e.sandbox(), name_) << "in another run's audit log";
  CommandResult d = Cordon({"detach", "--cgroup", cg.path()});
  EXPECT_EQ(d.status, 0) << d.err;
  EXPECT_EQ(d.out, "") << "nothing left to revoke at detach";
  EXPECT_EQ(Revoked(), secret_ + "\n") << "revoked once";
  EXPECT_EQ(Store(), store_before_);
  ExpectNoValue("outputs", a.out + a.err + early.err + next.err + Slurp(audit));
}

// A replacement (cordon update, or attach again) keeps the credentials as
// issued: the same section is accepted without issuing again; a changed one,
// or none, is refused and the sandbox keeps its policy.
TEST_F(AttachCredentials, ReplacementKeepsOrRefusesThem) {
  TestCgroup cg("update");
  const std::string policy = Policy(Token());
  ASSERT_EQ(Attach(cg, policy).status, 0);
  ASSERT_EQ(Minted(), 1);
  // The same credentials in a policy written otherwise (another name, comments).
  const std::string same = Policy("    # the same one\n" + Token(), "renamed");
  CommandResult u = Cordon({"update", "--cgroup", cg.path(), "--policy", same, "--allow-degraded"});
  EXPECT_EQ(u.status, 0) << u.err;
  EXPECT_EQ(Minted(), 1) << "an update issued again";
  EXPECT_NE(Cordon({"status", "--json"}).out.find("\"policy\":\"renamed\""), std::string::npos);
  for (const auto& [changed, said] : std::vector<std::pair<std::string, std::string>>{
           {Policy(Token(", refreshBefore: 1m")),
            "a replacement cannot change the credentials the sandbox holds (TOKEN as "
            "issued; the new policy has TOKEN)"},
           {dir_ + "/none.yaml", "the new policy has none"}}) {
    std::ofstream(dir_ + "/none.yaml")
        << "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: none}\nspec: {}\n";
    CommandResult r = Cordon({"update", "--cgroup", cg.path(), "--policy", changed, "--allow-degraded"});
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_NE(r.err.find(said), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("the sandbox keeps its current policy"), std::string::npos) << r.err;
  }
  EXPECT_NE(Cordon({"status", "--json"}).out.find("\"policy\":\"renamed\""), std::string::npos) << "kept its policy";
  EXPECT_EQ(Slurp(View() + "/TOKEN"), secret_);
  EXPECT_EQ(Revoked(), "");
  EXPECT_EQ(Cordon({"detach", "--cgroup", cg.path()}).status, 0);
  EXPECT_EQ(Revoked(), secret_ + "\n");
  EXPECT_EQ(Store(), store_before_);
}

}  // namespace
}  // namespace cordon::test
