// cordon status, status --watch and cordon ls, read by a person and by a
// script (issue 19 items 8 and 12): aligned columns whatever the names,
// counters by verdict and kind, the policy digest against sha256sum, the
// processes in a sandbox, colour only on a terminal.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <sstream>
#include <string>
#include <vector>

#include "tests/integration/harness.h"

namespace cordon::test {
namespace {

class Status : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "integration tests need root";
  }
};

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// What sha256sum (an independent implementation) says of a file.
std::string Sha256Sum(const std::string& path) {
  CommandResult r = Run({"sha256sum", path});
  return r.status == 0 ? "sha256:" + r.out.substr(0, 64) : "";
}

// The JSON object of the sandbox with this id in status --json's or ls --json's output.
std::string ObjectOf(const std::string& out, uint64_t id) {
  size_t at = out.find("{\"id\":" + std::to_string(id) + ",");
  if (at == std::string::npos) at = out.find(",\"id\":" + std::to_string(id) + ",");
  if (at == std::string::npos) return "";
  size_t start = out.rfind('{', at + 1);
  int depth = 0;
  for (size_t i = start; i < out.size(); ++i) {
    depth += out[i] == '{' ? 1 : out[i] == '}' ? -1 : 0;
    if (depth == 0) return out.substr(start, i - start + 1);
  }
  return "";
}

// The column where `header` starts in the table's header line, and the
// row of the sandbox named `name`.
struct TableView {
  std::string header, row;
  size_t Column(const std::string& title) const { return header.find(title); }
};

TableView ViewOf(const std::string& out, const std::string& name) {
  TableView v;
  for (const auto& l : Lines(out)) {
    if (l.rfind("SANDBOX ", 0) == 0) v.header = l;
    if (l.rfind(name + " ", 0) == 0) v.row = l;
  }
  return v;
}

TEST_F(Status, ColumnsStayAlignedAndCountersSayVerdictAndKind) {
  TestCgroup short_cg("st-a"), long_cg("st-b");
  TcpListener allowed, other;
  PolicyFile policy(LoopbackPolicy("status-policy", allowed.port()));
  // A short name and one of 60 characters: the columns must hold for both.
  const std::string short_name = "st-" + std::to_string(::getpid());
  const std::string long_name = "st-" + std::string(50, 'x') + "-" + std::to_string(::getpid() % 100000);
  for (const auto& [cg, name] : {std::pair<TestCgroup*, std::string>{&short_cg, short_name}, {&long_cg, long_name}}) {
    CommandResult a =
        Cordon({"attach", "--cgroup", cg->path(), "--policy", policy.path(), "--name", name, "--allow-degraded", "-q"});
    ASSERT_EQ(a.status, 0) << a.err;
  }
  // Two denied connects and an allowed one (the control) in the short one.
  EXPECT_EQ(RunInCgroup(short_cg.path(), [&] { return TcpConnect(V4("127.0.0.1", other.port())); }), EPERM);
  EXPECT_EQ(RunInCgroup(short_cg.path(), [&] { return TcpConnect(V4("127.0.0.1", other.port())); }), EPERM);
  EXPECT_EQ(RunInCgroup(short_cg.path(), [&] { return TcpConnect(V4("127.0.0.1", allowed.port())); }), 0);

  CommandResult text = Cordon({"status"});
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_EQ(text.out.find('\033'), std::string::npos) << "no colour on a pipe: " << text.out;
  const std::vector<std::string> lines = Lines(text.out);
  ASSERT_FALSE(lines.empty());
  EXPECT_LT(lines[0].size(), 200u) << "the kernel line is one short line: " << lines[0];
  EXPECT_EQ(lines[0].rfind("kernel: ", 0), 0u) << lines[0];
  TableView s = ViewOf(text.out, short_name), l = ViewOf(text.out, long_name);
  ASSERT_FALSE(s.header.empty()) << text.out;
  ASSERT_FALSE(s.row.empty()) << text.out;
  ASSERT_FALSE(l.row.empty()) << text.out;
  for (const char* title : {"MODE", "LAYERS", "DENIED", "AUDITED", "DETECTED", "KILLED", "DROPPED", "OWNER", "AGE"}) {
    const size_t col = s.Column(title);
    ASSERT_NE(col, std::string::npos) << title << " in " << s.header;
    for (const std::string* row : {&s.row, &l.row}) {
      ASSERT_GT(row->size(), col) << title << ": " << *row;
      EXPECT_NE((*row)[col], ' ') << title << " starts at column " << col << " in the header, not in: " << *row;
      EXPECT_EQ((*row)[col - 1], ' ') << title << " starts at column " << col << " in the header, not in: " << *row;
    }
  }
  EXPECT_EQ(s.row.substr(s.Column("DENIED"), 2), "2 ") << s.row;
  EXPECT_EQ(l.row.substr(l.Column("DENIED"), 2), "0 ") << "negative control: nothing denied there: " << l.row;
  EXPECT_EQ(s.row.substr(s.Column("OWNER"), 2), "- ") << "attached, no cordon run owns it: " << s.row;
  // Under the row: the cgroup and policy, the denials by kind.
  const size_t at = text.out.find(s.row);
  const std::string details = text.out.substr(at, text.out.find(l.row) > at ? text.out.find(l.row) - at : std::string::npos);
  const std::string digest = Sha256Sum(policy.path());
  ASSERT_FALSE(digest.empty());
  EXPECT_NE(details.find("  cgroup " + short_cg.relative() + " (id " + std::to_string(short_cg.id()) +
                         "), policy status-policy " + digest.substr(0, 7 + 12)),
            std::string::npos)
      << details;
  EXPECT_NE(details.find("\n  denied: 2 connect\n"), std::string::npos) << details;

  CommandResult json = Cordon({"status", "--json"});
  ASSERT_EQ(json.status, 0) << json.err;
  const std::string mine = ObjectOf(json.out, short_cg.id());
  EXPECT_NE(mine.find("\"policyDigest\":\"" + digest + "\""), std::string::npos) << "sha256sum says " << digest << ": " << mine;
  EXPECT_NE(mine.find("\"denied\":{\"connect\":2,\"sendmsg\":0,"), std::string::npos) << mine;
  EXPECT_NE(mine.find("\"allowed\":{\"connect\":1,"), std::string::npos) << "the control connect: " << mine;
  // What the kernel enforces, per control, as data.
  const bool lsm = LsmUsableHere();
  EXPECT_NE(json.out.find("\"enforcement\":{\"controls\":{\"network.egress\":\"enforced\","), std::string::npos) << json.out;
  EXPECT_NE(json.out.find(std::string("\"files\":\"") + (lsm ? "enforced" : "not-enforced") + "\""), std::string::npos)
      << json.out;
  EXPECT_NE(json.out.find(std::string("\"cause\":\"") + (lsm ? "\"" : "")), std::string::npos) << json.out;
}

TEST_F(Status, LsNamesOwnerDigestAndProcesses) {
  TestCgroup cg("ls-a");
  PolicyFile policy(LoopbackPolicy("ls-policy", 9));
  const std::string name = "ls-" + std::to_string(::getpid());
  ASSERT_EQ(Cordon({"attach", "--cgroup", cg.path(), "--policy", policy.path(), "--name", name, "--allow-degraded", "-q"})
                .status,
            0);
  auto procs = [&] {
    CommandResult r = Cordon({"ls", "--json"});
    EXPECT_EQ(r.status, 0) << r.err;
    std::string mine = ObjectOf(r.out, cg.id());
    size_t at = mine.find("\"processes\":");
    return at == std::string::npos ? std::string("missing: ") + r.out : mine.substr(at + 12, mine.find_first_of(",}", at) - at - 12);
  };
  EXPECT_EQ(procs(), "0") << "negative control: nothing runs there yet";
  // Two processes: one in the sandbox's cgroup, one in a cgroup below it
  // (named with a dot: a workload managing its subtree may hide there).
  WaitingChild top(cg.path(), [] { return 0; });
  const std::string below = cg.path() + "/.below";
  ASSERT_EQ(::mkdir(below.c_str(), 0755), 0);
  WaitingChild nested(below, [] { return 0; });
  EXPECT_EQ(procs(), "2");

  CommandResult r = Cordon({"ls"});
  ASSERT_EQ(r.status, 0) << r.err;
  std::string header, row;
  for (const auto& l : Lines(r.out)) {
    if (l.rfind("NAME ", 0) == 0) header = l;
    if (l.rfind(name + " ", 0) == 0) row = l;
  }
  ASSERT_FALSE(row.empty()) << r.out;
  const std::string digest = Sha256Sum(policy.path());
  ASSERT_FALSE(digest.empty());
  EXPECT_EQ(row.substr(header.find("OWNER"), 2), "- ") << row;
  EXPECT_EQ(row.substr(header.find("POLICY"), 10), "ls-policy ") << row;
  EXPECT_EQ(row.substr(header.find("DIGEST"), 19), digest.substr(0, 19)) << row;
  EXPECT_EQ(row.substr(header.find("PROCS"), 2), "2 ") << row;
  EXPECT_EQ(row.substr(header.find("CGROUP")), cg.relative()) << row;
  EXPECT_EQ(top.Go(), 0);
  EXPECT_EQ(nested.Go(), 0);
  EXPECT_EQ(procs(), "0") << "they exited";
  ::rmdir(below.c_str());

  // Usage errors name the option.
  CommandResult bad = Cordon({"ls", "--watch"});
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("--watch"), std::string::npos) << bad.err;
}

// --watch says it again every interval, and follows what changes; it ends
// with status 0 on SIGINT.
TEST_F(Status, WatchFollowsTheCountersUntilInterrupted) {
  TestCgroup cg("st-watch");
  TcpListener other;
  PolicyFile policy(LoopbackPolicy("watch-policy", 9));
  ASSERT_EQ(Cordon({"attach", "--cgroup", cg.path(), "--policy", policy.path(), "--allow-degraded", "-q"}).status, 0);
  int out[2];
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out[1], 1);
    ::execl(CORDON_BINARY, CORDON_BINARY, "status", "--json", "--watch", "--interval", "200ms", nullptr);
    _exit(127);
  }
  ::close(out[1]);
  std::string buf;
  // The next snapshot (one JSON object per line) with this sandbox's object.
  auto next = [&]() -> std::string {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (;;) {
      size_t nl = buf.find('\n');
      if (nl != std::string::npos) {
        std::string line = buf.substr(0, nl);
        buf.erase(0, nl + 1);
        return ObjectOf(line, cg.id());
      }
      if (std::chrono::steady_clock::now() > deadline) return "timeout";
      pollfd p = {out[0], POLLIN, 0};
      if (::poll(&p, 1, 1000) <= 0) continue;
      char chunk[4096];
      ssize_t n = ::read(out[0], chunk, sizeof chunk);
      if (n <= 0) return "eof";
      buf.append(chunk, static_cast<size_t>(n));
    }
  };
  std::string first = next();
  EXPECT_NE(first.find("\"connect\":0,"), std::string::npos) << first;
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return TcpConnect(V4("127.0.0.1", other.port())); }), EPERM);
  bool seen = false;
  for (int i = 0; i < 50 && !seen; ++i) {
    std::string snap = next();
    ASSERT_NE(snap, "eof");
    ASSERT_NE(snap, "timeout");
    seen = snap.find("\"denied\":{\"connect\":1,") != std::string::npos;
  }
  EXPECT_TRUE(seen) << "a later snapshot shows the denial";
  ASSERT_EQ(::kill(pid, SIGINT), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ::close(out[0]);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;

  CommandResult bad = Cordon({"status", "--interval", "1s"});
  EXPECT_EQ(bad.status, 2) << "--interval without --watch";
  EXPECT_NE(bad.err.find("--interval goes with --watch"), std::string::npos) << bad.err;
  bad = Cordon({"status", "--watch", "--interval", "10ms"});
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("at least 100ms"), std::string::npos) << bad.err;
}

// Colour on a terminal, none with NO_COLOR or on a pipe: status's counters,
// tail -o compact's verdicts.
TEST_F(Status, ColourOnATerminalOnly) {
  TestCgroup cg("st-colour");
  TcpListener other;
  PolicyFile policy(LoopbackPolicy("colour-policy", 9));
  ASSERT_EQ(Cordon({"attach", "--cgroup", cg.path(), "--policy", policy.path(), "--allow-degraded", "-q"}).status, 0);
  EXPECT_EQ(RunInCgroup(cg.path(), [&] { return TcpConnect(V4("127.0.0.1", other.port())); }), EPERM);
  const std::string cordon = CORDON_BINARY;
  const std::string red = "\033[31m";
  int status = 0;
  std::string tty = RunOnTerminal("TERM=xterm; export TERM; unset NO_COLOR; " + cordon + " status; " + cordon +
                                      " tail -o compact --cgroup " + cg.path(),
                                  &status);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << tty;
  EXPECT_NE(tty.find(red + "1\033[0m"), std::string::npos) << "the denied counter, red: " << tty;
  EXPECT_NE(tty.find(red + "denied\033[0m net.connect"), std::string::npos) << "the verdict, red: " << tty;
  std::string plain = RunOnTerminal("TERM=xterm NO_COLOR=1 " + cordon + " status", &status);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << plain;
  EXPECT_EQ(plain.find('\033'), std::string::npos) << "NO_COLOR: " << plain;
  EXPECT_NE(plain.find("DENIED"), std::string::npos) << "control: status did print: " << plain;
  CommandResult piped = Cordon({"status"});
  EXPECT_EQ(piped.out.find('\033'), std::string::npos) << piped.out;
}

}  // namespace
}  // namespace cordon::test
