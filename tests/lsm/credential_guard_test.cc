// BPF LSM's guard of spec.credentials files (issue 15, credential.read): a
// sandbox's credential file is opened only by that sandbox's processes and
// by root outside every sandbox; a root process of another sandbox, and a
// process outside every sandbox running as the file's owner (whom file
// ownership would let in), are refused with EPERM and reported once each.
// A refreshed file (a new inode, renamed into place) is guarded too. The
// mint programs are real scripts; no output may hold a value.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "tests/integration/harness.h"

namespace cordon::test {
namespace {

constexpr uid_t kOwner = 4242;  // the attached workload's uid (no passwd entry needed)
// Sandbox B: its root keeps the capabilities that pass over file ownership
// (without them BPF LSM's capable hook refuses them first: EACCES), so only
// the credential guard stands between it and the file.
constexpr const char* kRootPolicy =
    "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: other}\nspec:\n  mode: enforce\n"
    "  capabilities: [dac_override, dac_read_search]\n";

int ExpectLsm() {
  const char* v = std::getenv("CORDON_EXPECT_LSM");
  return v ? std::atoi(v) : -1;  // -1: not said (host)
}

// Opens `path` read-only and reads it: 0 when it holds a value starting with
// `prefix`, else the errno (1000: read, but not the value).
int ReadsValue(const std::string& path, const std::string& prefix) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  char buf[256] = {};
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  return n > 0 && std::string(buf, static_cast<size_t>(n)).rfind(prefix, 0) == 0 ? 0 : 1000;
}

void BecomeOwner() {
  (void)!::setgroups(0, nullptr);
  (void)!::setresgid(kOwner, kOwner, kOwner);
  (void)!::setresuid(kOwner, kOwner, kOwner);
}

// A body run by a forked child of the test (outside every sandbox): its
// result, or kChildDied.
int Unconfined(const std::function<int()>& body) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return kChildDied;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    int r = body();
    (void)!::write(fds[1], &r, sizeof r);
    _exit(0);
  }
  ::close(fds[1]);
  int r = kChildDied;
  if (::read(fds[0], &r, sizeof r) != sizeof r) r = kChildDied;
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return r;
}

class CredentialGuard : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root";
    const bool usable = LsmUsableHere();
    if (ExpectLsm() == 1) {
      ASSERT_TRUE(usable) << "this VM boots with bpf in lsm=: cordon must be able to enforce";
    }
    if (!usable)
      GTEST_SKIP() << "BPF LSM not usable on this kernel: credential files are guarded by file ownership only "
                      "(AttachCredentials.* checks what attach says then)";
    char tmpl[] = "/tmp/cordon-credguard-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    ::chmod(dir_.c_str(), 0711);
    secret_ = "guarded-secret-" + std::to_string(::getpid()) + "-";
    // Each run prints a new value (secret_ and a count): a refresh is seen.
    Script("mint", "#!/bin/sh\nn=$(cat " + dir_ + "/count 2>/dev/null || echo 0); n=$((n+1)); echo $n > " + dir_ +
                       "/count\nprintf '%s%s\\n' '" + secret_ + "' $n\n");
    Script("revoke", "#!/bin/sh\ncat > /dev/null\n");
    // No agent: the CLI attaches directly (a socket nobody listens on).
    if (const char* old = std::getenv("CORDON_AGENT_SOCKET")) old_socket_ = old, had_socket_ = true;
    ::setenv("CORDON_AGENT_SOCKET", (dir_ + "/no-agent.sock").c_str(), 1);
  }
  void TearDown() override {
    if (had_socket_)
      ::setenv("CORDON_AGENT_SOCKET", old_socket_.c_str(), 1);
    else
      ::unsetenv("CORDON_AGENT_SOCKET");
    if (!dir_.empty()) cordon::test::Run({"rm", "-rf", "--", dir_});
  }
  void Script(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    ::chmod(path.c_str(), 0700);
  }
  int Minted() { return std::atoi(Slurp(dir_ + "/count").c_str()); }
  void ExpectNoValue(const std::string& where, const std::string& text) {
    EXPECT_EQ(text.find(secret_), std::string::npos) << "a credential's value appears in " << where;
  }
  // One credential.read event, as the guard reports it.
  void ExpectRead(const cordon::v1::AuditEvent& e, const std::string& path, uint32_t uid, const std::string& owner,
                  uint64_t owner_id) {
    EXPECT_EQ(e.verdict(), "denied");
    EXPECT_EQ(e.enforcement(), "kernel-lsm");
    EXPECT_EQ(e.file().path(), path);
    EXPECT_EQ(e.uid(), uid);
    EXPECT_EQ(e.credential().name(), "TOKEN");
    EXPECT_EQ(e.credential().sandbox(), owner);
    EXPECT_EQ(e.credential().sandbox_cgroup_id(), owner_id);
    EXPECT_TRUE(e.credential().fingerprint().empty());
    EXPECT_NE(e.reason().find("credential TOKEN of sandbox " + owner), std::string::npos) << e.reason();
  }

  std::string dir_, secret_, old_socket_;
  bool had_socket_ = false;
};

// Sandbox A (attached; its process runs as the credential's owner) reads its
// credential; a root process of attached sandbox B, and a process of the
// owner's uid outside every sandbox, are refused (EPERM) and reported, B's
// in B's trail and the unconfined one's in A's; root outside reads it.
TEST_F(CredentialGuard, OnlyTheOwningSandboxOpensAnAttachedSandboxsCredential) {
  TestCgroup a("credguard-a"), b("credguard-b");
  const std::string name = "credguard-" + std::to_string(::getpid());
  const std::string path = "/run/cordon/credentials/" + name + "/TOKEN";
  WaitingChild in_a(
      a.path(), [&] { return ReadsValue(path, secret_); }, BecomeOwner);
  WaitingChild in_b(b.path(), [&] { return ReadsValue(path, secret_); });  // root
  PolicyFile with_credential(
      "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: guarded}\nspec:\n"
      "  mode: enforce\n  credentials:\n    - {name: TOKEN, issue: [" +
      dir_ + "/mint], revoke: [" + dir_ + "/revoke], ttl: 10m, owner: \"" + std::to_string(kOwner) + ":" +
      std::to_string(kOwner) + "\"}\n");
  PolicyFile plain(kRootPolicy);
  CommandResult attach_a = Cordon({"attach", "--cgroup", a.path(), "--policy", with_credential.path(), "--name", name});
  ASSERT_EQ(attach_a.status, 0) << attach_a.err;
  EXPECT_NE(attach_a.err.find("credentials: guarded by BPF LSM: only this sandbox's processes"), std::string::npos)
      << attach_a.err;
  EXPECT_EQ(attach_a.err.find("only file ownership guards them"), std::string::npos) << attach_a.err;
  CommandResult attach_b = Cordon({"attach", "--cgroup", b.path(), "--policy", plain.path()});
  ASSERT_EQ(attach_b.status, 0) << attach_b.err;
  (void)TakeEvents(a.path());  // what attach's checks left: only what follows is counted
  (void)TakeEvents(b.path());

  EXPECT_EQ(in_a.Go(), 0) << "the owner's process in sandbox A reads its credential";
  EXPECT_EQ(in_b.Go(), EPERM) << "a root process of sandbox B opened A's credential";
  EXPECT_EQ(Unconfined([&] {
              BecomeOwner();
              return ReadsValue(path, secret_);
            }),
            EPERM)
      << "a process of the owner's uid outside every sandbox (file ownership lets it in) opened it";
  EXPECT_EQ(Unconfined([&] { return ReadsValue(path, secret_); }), 0) << "control: root outside every sandbox reads it";

  CommandResult tail_b = Cordon({"tail", "--cgroup", b.path(), "-o", "json"});
  CommandResult tail_a = Cordon({"tail", "--cgroup", a.path(), "-o", "json"});
  auto reads_b = OfKind(ParseJsonLines(tail_b.out), "credential.read");
  auto reads_a = OfKind(ParseJsonLines(tail_a.out), "credential.read");
  ASSERT_EQ(reads_b.size(), 1u) << tail_b.out;
  ExpectRead(reads_b[0], path, 0, name, a.id());
  EXPECT_EQ(reads_b[0].sandbox_cgroup_id(), b.id()) << "B's attempt is in B's trail";
  ASSERT_EQ(reads_a.size(), 1u) << "the unconfined attempt is in the owner's trail: " << tail_a.out;
  ExpectRead(reads_a[0], path, kOwner, name, a.id());
  EXPECT_EQ(reads_a[0].sandbox_cgroup_id(), a.id());

  CommandResult status = Cordon({"status"});
  EXPECT_NE(status.out.find("(guarded by BPF LSM: only this sandbox opens it)"), std::string::npos) << status.out;
  CommandResult json = Cordon({"status", "--json"});
  EXPECT_NE(json.out.find("\"guard\":\"bpf-lsm\""), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"credentials\":\"enforced\""), std::string::npos) << json.out;
  CommandResult detach_a = Cordon({"detach", "--cgroup", a.path()});
  CommandResult detach_b = Cordon({"detach", "--cgroup", b.path()});
  EXPECT_EQ(detach_a.status, 0) << detach_a.err;
  EXPECT_EQ(detach_b.status, 0) << detach_b.err;
  for (const auto& [where, r] : {std::pair<const char*, const CommandResult*>{"attach A", &attach_a},
                                 {"attach B", &attach_b},
                                 {"tail A", &tail_a},
                                 {"tail B", &tail_b},
                                 {"status", &status},
                                 {"status --json", &json},
                                 {"detach A", &detach_a},
                                 {"detach B", &detach_b}}) {
    ExpectNoValue(std::string(where) + " (stdout)", r->out);
    ExpectNoValue(std::string(where) + " (stderr)", r->err);
  }
}

// cordon run refreshes its credential (a new file renamed into place, about
// every second): the refreshed file is guarded as the first one was. A root
// process of an attached sandbox, which can reach the store, is refused;
// root outside every sandbox reads the refreshed value (control).
TEST_F(CredentialGuard, ARunsRefreshedCredentialIsStillGuarded) {
  TestCgroup b("credguard-run-b");
  PolicyFile plain(kRootPolicy);
  CommandResult attach_b = Cordon({"attach", "--cgroup", b.path(), "--policy", plain.path()});
  ASSERT_EQ(attach_b.status, 0) << attach_b.err;
  (void)TakeEvents(b.path());
  PolicyFile policy(
      "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: refreshed}\nspec:\n"
      "  mode: enforce\n  credentials:\n    - {name: TOKEN, issue: [" +
      dir_ + "/mint], ttl: 3s, refreshBefore: 2s}\n");
  const std::string out = dir_ + "/run.out", err = dir_ + "/run.err";
  // The command waits on its stdin (the run's /tmp is its own: no file the
  // test makes there is seen); closing the pipe lets it finish.
  int go[2];
  ASSERT_EQ(::pipe2(go, O_CLOEXEC), 0);
  pid_t run = ::fork();
  if (run == 0) {
    int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ::dup2(go[0], 0);
    ::dup2(o, 1);
    ::dup2(e, 2);
    const std::string script = "echo \"$TOKEN_FILE\"; read line; cat \"$TOKEN_FILE\" | wc -c";
    ::execl(CORDON_BINARY, CORDON_BINARY, "run", "--policy", policy.path().c_str(), "--audit",
            (dir_ + "/run.jsonl").c_str(), "--", "/bin/sh", "-c", script.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  ASSERT_GT(run, 0);
  ::close(go[0]);
  // Ends the run however the test ends (an assertion returns early).
  struct Finish {
    int go = -1;
    pid_t pid = -1;
    int operator()() {
      if (go >= 0) ::close(go);
      go = -1;
      int status = 0;
      while (pid > 0 && ::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      pid = -1;
      return status;
    }
    ~Finish() { (*this)(); }
  } finish{go[1], run};
  // The command printed its file's path once it started; then two refreshes.
  ASSERT_TRUE(WaitFor([&] { return Slurp(out).find('\n') != std::string::npos && Minted() >= 3; }, 120000))
      << "no refresh: " << Slurp(err);
  std::string view = Slurp(out);
  view = view.substr(0, view.find('\n'));
  ASSERT_EQ(view.rfind("/run/cordon/credentials/run-", 0), 0u) << view;
  // On the host the run's file is in the store (root-only directories: the
  // owner's uid cannot reach it, root of another sandbox can).
  const std::string path =
      "/run/cordon/credential-store/" + view.substr(std::string("/run/cordon/credentials/").size());
  const std::string store_dir = path.substr(0, path.rfind('/'));
  const std::string sandbox = store_dir.substr(store_dir.rfind('/') + 1);
  WaitingChild in_b(b.path(), [&] { return ReadsValue(path, secret_); });
  EXPECT_EQ(in_b.Go(), EPERM) << "a root process of another sandbox opened a refreshed credential of the run";
  EXPECT_EQ(Unconfined([&] { return ReadsValue(path, secret_); }), 0) << "control: root outside reads it";
  const std::string value = Slurp(path);
  EXPECT_TRUE(value.rfind(secret_, 0) == 0 && value != secret_ + "1") << "the file is not a refreshed value";
  const int status = finish();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << Slurp(err);
  CommandResult tail_b = Cordon({"tail", "--cgroup", b.path(), "-o", "json"});
  auto reads = OfKind(ParseJsonLines(tail_b.out), "credential.read");
  ASSERT_EQ(reads.size(), 1u) << tail_b.out;
  EXPECT_EQ(reads[0].verdict(), "denied");
  EXPECT_EQ(reads[0].enforcement(), "kernel-lsm");
  EXPECT_EQ(reads[0].file().path(), path);
  EXPECT_EQ(reads[0].credential().name(), "TOKEN");
  EXPECT_EQ(reads[0].credential().sandbox(), sandbox);
  EXPECT_EQ(reads[0].uid(), 0u);
  CommandResult detach_b = Cordon({"detach", "--cgroup", b.path()});
  EXPECT_EQ(detach_b.status, 0) << detach_b.err;
  ExpectNoValue("run's stdout", Slurp(out));
  ExpectNoValue("run's stderr", Slurp(err));
  ExpectNoValue("run's audit file", Slurp(dir_ + "/run.jsonl"));
  ExpectNoValue("tail", tail_b.out + tail_b.err);
  ExpectNoValue("attach", attach_b.out + attach_b.err);
}

}  // namespace
}  // namespace cordon::test
