// `cordon learn --cgroup PATH --duration D` in the integration tests (Learn.*
// in learn_test.cc, Agent.Learn* in agent_test.cc): learn started in the
// background and followed until it says its window began, a workload in a
// real cgroup that makes its accesses only then, and the learned policy
// attached in enforce mode to the same cgroup afterwards.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <time.h>

#include <cerrno>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "abi/cordon_common.h"
#include "tests/integration/harness.h"

namespace cordon::test {

// `cordon learn ...` started in the background, its stdout to /dev/null (the
// tests give --out and --report) and its stderr read here.
class LearnInBackground {
 public:
  explicit LearnInBackground(const std::vector<std::string>& args) {
    int err[2];
    if (::pipe2(err, O_CLOEXEC) != 0) return;
    const std::string binary = CORDON_BINARY;  // as Cordon(): the binary under test
    std::vector<char*> argv = {const_cast<char*>(binary.c_str())};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      const int null = ::open("/dev/null", O_RDWR);
      ::dup2(null, 0);
      ::dup2(null, 1);
      ::dup2(err[1], 2);
      ::execv(argv[0], argv.data());
      _exit(127);
    }
    ::close(err[1]);
    err_fd_ = err[0];
  }
  ~LearnInBackground() {
    if (err_fd_ >= 0) ::close(err_fd_);
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);  // our own child (a failed test; TestCgroup removes what it attached)
      ::waitpid(pid_, nullptr, 0);
    }
  }
  LearnInBackground(const LearnInBackground&) = delete;
  LearnInBackground& operator=(const LearnInBackground&) = delete;

  // Reads its stderr until it says the window began (the sandbox is attached
  // and its events are collected): the synchronisation. False when it ended
  // first.
  bool WaitForWindow() {
    for (;;) {
      const size_t line = err_.find("learning from ");
      if (line != std::string::npos && err_.find('\n', line) != std::string::npos) return true;
      char buf[4096];
      const ssize_t n = ::read(err_fd_, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      err_.append(buf, static_cast<size_t>(n));
    }
  }
  void Signal(int sig) { ::kill(pid_, sig); }  // our own child
  // Waits for it to end: its status and all it wrote on stderr.
  CommandResult Finish() {
    CommandResult r;
    char buf[4096];
    for (ssize_t n; (n = ::read(err_fd_, buf, sizeof buf)) != 0;) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;
      err_.append(buf, static_cast<size_t>(n));
    }
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.err = err_;
    return r;
  }

 private:
  pid_t pid_ = -1;
  int err_fd_ = -1;
  std::string err_;
};

// A directory of the test's under /run (the test VMs' root and /var/log are
// read-only), 0755, removed at the end.
class RunTestDir {
 public:
  explicit RunTestDir(const std::string& prefix) {
    std::string tmpl = "/run/" + prefix + "-XXXXXX";
    if (::mkdtemp(tmpl.data())) path_ = tmpl, ::chmod(path_.c_str(), 0755);
  }
  ~RunTestDir() {
    if (!path_.empty()) Run({"rm", "-rf", path_});
  }
  RunTestDir(const RunTestDir&) = delete;
  RunTestDir& operator=(const RunTestDir&) = delete;
  const std::string& path() const { return path_; }  // "" if it could not be made

 private:
  std::string path_;
};

inline std::string SandboxPinDir(uint64_t id) {
  return "/sys/fs/bpf/cordon/v" + std::to_string(CORDON_LAYOUT_VERSION) + "/sandboxes/" + std::to_string(id);
}

inline bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

// 0 when the file reads, else errno.
inline int ReadFileErrno(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  char buf[64];
  const int result = ::read(fd, buf, sizeof buf) < 0 ? errno : 0;
  ::close(fd);
  return result;
}

// A TCP connection to 127.0.0.1:port opened by the calling process and left
// open (the workload's connection from before the window).
inline int HoldConnection(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  const sockaddr_storage addr = V4("127.0.0.1", port);
  return fd >= 0 && ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(sockaddr_in)) == 0 ? 0 : -1;
}

// What the tests of the --cgroup form share: a workload that connects to a
// loopback port and reads a file in the window (and holds a connection it
// opened before); learn over the window (ended by its duration or by a
// signal); the learned policy attached in enforce mode, under which the same
// work sees no violation while another port and another file are refused
// (each with its unconfined control). `dir` is the test's directory (/run).
struct LearnFromCgroupCase {
  std::string dir;
  std::string how;          // "read directly" or "through the agent": the report's window line
  int stop_signal = 0;      // 0: the window runs to its end (--duration 6s); else this signal ends it
  std::string audit;        // non-empty: learn's --audit FILE
  std::string agent_audit;  // non-empty: the agent's audit file, which must hold the window's events
  // The enforce phase's events of the sandbox on cgroup `id` since `since_ns`
  // once they hold the two refusals (net.connect to `other_port`, file.open of
  // `key`); empty: TakeEvents (no agent).
  std::function<std::vector<cordon::v1::AuditEvent>(uint64_t id, int64_t since_ns, uint16_t other_port,
                                                    const std::string& key)>
      enforce_events;
};

inline int64_t WallClockNs() {
  struct timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

inline int64_t EventNs(const cordon::v1::AuditEvent& e) {
  return static_cast<int64_t>(e.time().seconds()) * 1000000000 + e.time().nanos();
}

inline void LearnFromCgroupAndEnforce(const LearnFromCgroupCase& c) {
  TestCgroup cg("learn-cg");
  TestCgroup control("learn-control");
  TcpListener used, other, held;
  const std::string data = c.dir + "/data", input = data + "/input.txt", key = c.dir + "/private/key.txt";
  const std::string policy = c.dir + "/learned.json", report = c.dir + "/report.txt";
  ASSERT_EQ(::mkdir(data.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((c.dir + "/private").c_str(), 0755), 0);
  for (const auto& [path, text] : {std::pair<std::string, std::string>{input, "input\n"}, {key, "secret\n"}}) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0) << path;
    ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    ::close(fd);
  }
  auto work = [&] {
    const int connected = TcpConnect(V4("127.0.0.1", used.port()));
    return connected ? connected : ReadFileErrno(input);
  };

  // The workload is in its cgroup, holding a connection, before learn starts.
  {
    WaitingChild workload(cg.path(), work, [&] { (void)HoldConnection(held.port()); });
    std::vector<std::string> args = {
        "learn", "--cgroup", cg.path(),  "--duration", c.stop_signal ? "10m" : "6s", "--allow-degraded",
        "--out", policy,     "--report", report};
    if (!c.audit.empty()) args.insert(args.end(), {"--audit", c.audit});
    LearnInBackground learn(args);
    ASSERT_TRUE(learn.WaitForWindow()) << learn.Finish().err;
    ASSERT_TRUE(Exists(SandboxPinDir(cg.id()))) << "attached for the window";
    // The accesses, made in the window: the workload answers once it made them.
    EXPECT_EQ(workload.Go(), 0);
    if (c.stop_signal) learn.Signal(c.stop_signal);
    const CommandResult learned = learn.Finish();
    const std::string text = Slurp(report);
    // Nothing is left attached, whatever ended the window.
    EXPECT_FALSE(Exists(SandboxPinDir(cg.id()))) << learned.err;
    EXPECT_EQ(learned.status, c.stop_signal ? 3 : 0) << learned.err << text;
    EXPECT_NE(text.find("window (audit) of " + std::string(c.stop_signal ? "10m" : "6s") + " on " + cg.path()),
              std::string::npos)
        << text;
    EXPECT_NE(text.find(c.how + "; "), std::string::npos) << text;
    EXPECT_NE(text.find("trail complete"), std::string::npos) << text;
    if (c.stop_signal) {
      EXPECT_NE(text.find("cut short by SIGINT"), std::string::npos) << text;
      EXPECT_NE(text.find("warning: the window was cut short after"), std::string::npos) << text;
      EXPECT_NE(learned.err.find("the window was cut short by SIGINT"), std::string::npos) << learned.err;
    }
    // One egress rule for the address: the port of the window's connect and
    // the one of the connection held from before the window (the base denies
    // it: an enforce attach without it would destroy it).
    const size_t egress = text.find("  egress 127.0.0.1 ports ");
    ASSERT_NE(egress, std::string::npos) << text;
    const std::string line = text.substr(egress, text.find('\n', egress) - egress);
    EXPECT_NE(line.find(std::to_string(used.port())), std::string::npos) << line;
    EXPECT_NE(line.find(std::to_string(held.port())), std::string::npos) << line;
    EXPECT_NE(line.find("/tcp: exactly the observed address and ports"), std::string::npos) << line;
    EXPECT_NE(text.find("learned as destinations: 1 connection(s) open before the window"), std::string::npos) << text;
    EXPECT_NE(text.find("read " + data + ": read every file below it"), std::string::npos) << text;
    EXPECT_EQ(text.find(std::to_string(other.port())), std::string::npos) << text;
    EXPECT_EQ(text.find("\nnot learned (observed"), std::string::npos) << text;
    if (!c.audit.empty()) {
      int connects = 0;
      for (const auto& e : AuditFileEvents(c.audit))
        if (e.kind() == "net.connect" && e.net().port() == used.port()) ++connects;
      EXPECT_EQ(connects, 1) << Slurp(c.audit);
    }
    if (!c.agent_audit.empty()) {
      auto connects = [&] {
        int n = 0;
        for (const auto& e : ParseJsonLines(Slurp(c.agent_audit), /*growing=*/true))
          n += e.kind() == "net.connect" && e.net().port() == used.port() && e.sandbox_cgroup_id() == cg.id();
        return n;
      };
      EXPECT_TRUE(WaitFor([&] { return connects() == 1; }, 10000)) << "the agent's sinks got the window's events too";
    }
  }
  const CommandResult check = Cordon({"policy", "check", policy});
  ASSERT_EQ(check.status, 0) << check.out << check.err;

  // The learned policy, enforced on the same cgroup: the same work (and the
  // connection it holds from before) sees no violation; another port and
  // another file are refused (without BPF LSM the file is only detected).
  const bool lsm = LsmUsableHere();
  const int64_t enforce_ns = WallClockNs();
  WaitingChild same(cg.path(), work, [&] { (void)HoldConnection(held.port()); });
  WaitingChild to_other(cg.path(), [&] { return TcpConnect(V4("127.0.0.1", other.port())); });
  WaitingChild reads_key(cg.path(), [&] { return ReadFileErrno(key); });
  const CommandResult attached =
      Cordon({"attach", "--cgroup", cg.path(), "--policy", policy, "--mode", "enforce", "--allow-degraded"});
  ASSERT_EQ(attached.status, 0) << attached.err;
  EXPECT_EQ(attached.out.find("net.preexisting"), std::string::npos)
      << "the held connection is allowed: " << attached.out;
  EXPECT_EQ(same.Go(), 0);
  EXPECT_EQ(to_other.Go(), EPERM);
  EXPECT_EQ(reads_key.Go(), lsm ? EPERM : 0);
  const auto events =
      c.enforce_events ? c.enforce_events(cg.id(), enforce_ns, other.port(), key) : TakeEvents(cg.path());
  int refused_connect = 0, key_events = 0;
  for (const auto& e : events) {
    EXPECT_FALSE(e.net().port() == used.port() || e.net().port() == held.port() || e.file().path() == input)
        << "a violation of the learned work: " << e.kind() << " " << e.reason();
    if (e.kind() == "net.connect" && e.net().port() == other.port() && e.verdict() == "denied") ++refused_connect;
    if (e.kind() == "file.open" && e.file().path() == key && e.verdict() == (lsm ? "denied" : "detected")) ++key_events;
  }
  EXPECT_EQ(refused_connect, 1);
  EXPECT_EQ(key_events, 1);
  // The controls: the same probes in a cgroup of their own, unconfined.
  EXPECT_EQ(RunInCgroup(control.path(), [&] { return TcpConnect(V4("127.0.0.1", other.port())); }), 0);
  EXPECT_EQ(other.AcceptCount(1), 1);
  EXPECT_EQ(RunInCgroup(control.path(), [&] { return ReadFileErrno(key); }), 0);
  const CommandResult detached = Cordon({"detach", "--cgroup", cg.path()});
  EXPECT_EQ(detached.status, 0) << detached.err;
}

}  // namespace cordon::test
