// Containment (issue 18): `cordon contain` and `cordon release` on real
// processes in a real cgroup. Each test watches what the workload and its
// peer observe (a reset connection, a frozen cgroup, a counter that stops and
// resumes, a refused connect) and has the same probe before containment (or
// after release) as its control. Network only on loopback.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <google/protobuf/util/json_util.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "event.pb.h"
#include "tests/integration/harness.h"

namespace cordon::test {
namespace {

constexpr int kTimedOut = -2;
constexpr int kEof = -3;

socklen_t Len(const sockaddr_storage& a) { return a.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6); }

// Waits up to `ms` for a byte on fd: 1000 + the byte, kEof, kTimedOut, or the errno.
int ReadOne(int fd, int ms = 5000) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, ms) <= 0) return kTimedOut;
  unsigned char c;
  ssize_t n = ::recv(fd, &c, 1, 0);
  if (n == 1) return 1000 + c;
  if (n == 0) return kEof;
  return errno;
}

int ConnectTo(const sockaddr_storage& addr) {
  int fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), Len(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// A loopback TCP listener of the test (outside every sandbox) keeping what it accepts.
class Listener {
 public:
  Listener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_storage a = V4("127.0.0.1", 0);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), Len(a));
    ::listen(fd_, 16);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port);
  }
  ~Listener() {
    for (int fd : accepted_) ::close(fd);
    ::close(fd_);
  }
  uint16_t port() const { return port_; }
  int Accept() {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 5000) <= 0) return -1;
    int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) accepted_.push_back(fd);
    return fd;
  }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
  std::vector<int> accepted_;
};

// An unconnected TCP socket created by a process in `cgroup` and handed to the
// test over SCM_RIGHTS: the cgroup hooks judge it as the sandbox's (by the
// cgroup that created it), while the test process, which is never frozen,
// makes the calls.
int SocketMadeIn(const std::string& cgroup) {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    std::ofstream(cgroup + "/cgroup.procs") << ::getpid();
    int s = ::socket(AF_INET, SOCK_STREAM, 0);
    char byte = 's';
    iovec iov{&byte, 1};
    char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(cm), &s, sizeof s);
    _exit(s >= 0 && ::sendmsg(pair[1], &msg, 0) == 1 ? 0 : 1);
  }
  ::close(pair[1]);
  char byte;
  iovec iov{&byte, 1};
  char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  int fd = -1;
  if (::recvmsg(pair[0], &msg, MSG_CMSG_CLOEXEC) == 1 && CMSG_FIRSTHDR(&msg))
    std::memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&msg)), sizeof fd);
  ::close(pair[0]);
  ::waitpid(pid, nullptr, 0);
  return fd;
}

// connect() of a socket made in the sandbox (SocketMadeIn) to 127.0.0.1:port:
// 0 or the errno. Made before containment: a process that joins a frozen
// cgroup is frozen too.
int ConnectWith(int fd, uint16_t port) {
  if (fd < 0) return -1;
  sockaddr_storage a = V4("127.0.0.1", port);
  int r = ::connect(fd, reinterpret_cast<sockaddr*>(&a), Len(a)) == 0 ? 0 : errno;
  ::close(fd);
  return r;
}

// A process exec'd into the cgroup: python3 counting in a file (one write
// every 2 ms) with a secret in its environment that nothing may record.
class Writer {
 public:
  Writer(const std::string& cgroup, const std::string& file, const std::string& secret) {
    pid_ = ::fork();
    if (pid_ == 0) {
      std::ofstream(cgroup + "/cgroup.procs") << ::getpid();
      const std::string env_secret = "GITHUB_TOKEN=" + secret;
      char* envp[] = {const_cast<char*>("PATH=/usr/bin:/bin"), const_cast<char*>(env_secret.c_str()), nullptr};
      const std::string script =
          "import os, sys, time\n"
          "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o600)\n"
          "i = 0\n"
          "while True:\n"
          "    i += 1\n"
          "    os.pwrite(fd, b'%020d' % i, 0)\n"
          "    time.sleep(0.002)\n";
      char* argv[] = {const_cast<char*>("python3"), const_cast<char*>("-c"), const_cast<char*>(script.c_str()),
                      const_cast<char*>(file.c_str()), nullptr};
      ::execve("/usr/bin/python3", argv, envp);
      _exit(127);
    }
  }
  ~Writer() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);  // our own child (a frozen one dies too: cgroup v2 lets SIGKILL through)
      ::waitpid(pid_, nullptr, 0);
    }
  }
  int pid() const { return pid_; }
  // Reaps it (it must have ended): its wait status.
  int Wait() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

 private:
  int pid_ = -1;
};

long Counter(const std::string& file) {
  std::string text = Slurp(file);
  return text.size() == 20 ? std::atol(text.c_str()) : -1;
}

std::string CgroupEvent(const std::string& cgroup, const std::string& key) {
  std::istringstream in(Slurp(cgroup + "/cgroup.events"));
  std::string k, v;
  while (in >> k >> v)
    if (k == key) return v;
  return "";
}

// A scratch directory (0700, root's) holding an agent configuration whose
// jsonl sink is there: the evidence goes next to it. No agent answers on its
// socket unless a test starts one; CORDON_AGENT_SOCKET points at it meanwhile.
class Scratch {
 public:
  Scratch() {
    char tmpl[] = "/tmp/cordon-contain-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    config_ = dir_ + "/agent.yaml";
    audit_ = dir_ + "/audit.jsonl";
    std::ofstream(config_) << "socket: " << dir_ << "/agent.sock\nsinks:\n  - kind: jsonl\n    path: " << audit_
                           << "\n    fsync: never\nmetrics:\n  listen: \"\"\nadopt:\n  cgroupPrefixes: [/cordon-test-"
                           << ::getpid() << "-]\noidc:\n  keyDir: " << dir_ << "/oidc\n  publishDir: \"\"\n";
    const char* old = std::getenv("CORDON_AGENT_SOCKET");
    if (old) old_env_ = old, had_env_ = true;
    ::setenv("CORDON_AGENT_SOCKET", (dir_ + "/agent.sock").c_str(), 1);
  }
  ~Scratch() {
    if (had_env_)
      ::setenv("CORDON_AGENT_SOCKET", old_env_.c_str(), 1);
    else
      ::unsetenv("CORDON_AGENT_SOCKET");
    Run({"rm", "-rf", dir_});
  }
  const std::string& dir() const { return dir_; }
  const std::string& config() const { return config_; }
  const std::string& audit() const { return audit_; }

 private:
  std::string dir_, config_, audit_, old_env_;
  bool had_env_ = false;
};

// The evidence path that `cordon contain` names on stderr.
std::string EvidencePath(const std::string& err) {
  size_t at = err.find("evidence: ");
  if (at == std::string::npos) return "";
  size_t end = err.find('\n', at);
  return err.substr(at + 10, end - at - 10);
}

std::vector<cordon::v1::AuditEvent> OfKind(const std::vector<cordon::v1::AuditEvent>& events, const std::string& kind) {
  std::vector<cordon::v1::AuditEvent> out;
  for (const auto& e : events)
    if (e.kind() == kind) out.push_back(e);
  return out;
}

class Contain : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "integration tests need root";
  }
  CommandResult Attach(const TestCgroup& cg, const std::string& yaml) {
    PolicyFile policy(yaml);
    return Cordon({"attach", "--cgroup", cg.path(), "--policy", policy.path(), "--allow-degraded", "-q"});
  }
};

TEST_F(Contain, ContainFreezesDisconnectsAndRecordsReleaseResumes) {
  Scratch scratch;
  TestCgroup cg("contain");
  Listener listener;
  ASSERT_EQ(Attach(cg, LoopbackPolicy("contain-policy", listener.port())).status, 0);
  // A process with a live TCP connection (allowed by the policy) ...
  int fd = -1;
  WaitingChild holder(cg.path(), [&] { return ReadOne(fd); },
                      [&] { fd = ConnectTo(V4("127.0.0.1", listener.port())); });
  int server = listener.Accept();
  ASSERT_GE(server, 0) << "the holder did not connect";
  // ... and one writing a file.
  const std::string counter = scratch.dir() + "/counter";
  const std::string secret = "ghp_contain" + std::to_string(std::random_device{}()) + "SECRETvalue";
  Writer writer(cg.path(), counter, secret);
  // Controls, before containment: the writer writes, the connection has no
  // reset pending, a connect the policy allows succeeds.
  ASSERT_TRUE(WaitFor([&] { return Counter(counter) > 5; }, 10000)) << "the writer never wrote";
  long seen = Counter(counter);
  ASSERT_TRUE(WaitFor([&] { return Counter(counter) > seen; }, 10000));
  pollfd p{server, POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 0) << "the connection was not quiet before containment";
  EXPECT_EQ(ConnectWith(SocketMadeIn(cg.path()), listener.port()), 0);
  const int probe1 = SocketMadeIn(cg.path()), probe2 = SocketMadeIn(cg.path());
  EXPECT_EQ(CgroupEvent(cg.path(), "frozen"), "0");

  CommandResult r = Cordon({"contain", "--cgroup", cg.path(), "--reason", "incident 7", "--config", scratch.config()});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("frozen, 2 processes, 1 connection destroyed"), std::string::npos) << r.err;
  // Frozen, and the kernel says so.
  EXPECT_EQ(CgroupEvent(cg.path(), "frozen"), "1");
  // The peer of the connection got a reset.
  EXPECT_EQ(ReadOne(server), ECONNRESET);
  // A connect the policy allows is refused (EPERM) from a socket of the sandbox's.
  EXPECT_EQ(ConnectWith(probe1, listener.port()), EPERM);
  // Writes stopped: the counter holds still while the above happened.
  const long frozen_at = Counter(counter);
  EXPECT_GT(frozen_at, seen);
  EXPECT_EQ(ConnectWith(probe2, listener.port()), EPERM);
  EXPECT_EQ(Counter(counter), frozen_at);

  // The events: printed, and in the audit file.
  auto printed = ParseJsonLines(r.out);
  auto destroyed = OfKind(printed, "net.preexisting");
  ASSERT_EQ(destroyed.size(), 1u) << r.out;
  EXPECT_EQ(destroyed[0].verdict(), "destroyed");
  EXPECT_EQ(destroyed[0].net().port(), listener.port());
  auto contained = OfKind(printed, "sandbox.contained");
  ASSERT_EQ(contained.size(), 1u) << r.out;
  const auto& k = contained[0].containment();
  EXPECT_EQ(contained[0].verdict(), "noted");
  EXPECT_EQ(contained[0].sandbox_cgroup_id(), cg.id());
  EXPECT_EQ(k.reason(), "incident 7");
  EXPECT_EQ(k.via(), "cli");
  EXPECT_NE(k.by().find("uid 0"), std::string::npos) << k.by();
  EXPECT_TRUE(k.frozen());
  EXPECT_FALSE(k.killed());
  EXPECT_EQ(k.processes(), 2u);
  EXPECT_EQ(k.connections_destroyed(), 1u);
  EXPECT_GT(k.not_stopped_size(), 0);
  EXPECT_EQ(OfKind(AuditFileEvents(scratch.audit()), "sandbox.contained").size(), 1u);
  // The refused connect is an event of the sandbox's, saying why.
  bool refused_event = false;
  for (const auto& e : TakeEvents(cg.path()))
    refused_event |= e.kind() == "net.connect" && e.verdict() == "denied" && e.net().port() == listener.port() &&
                     e.reason().find("contained") != std::string::npos;
  EXPECT_TRUE(refused_event);

  // The evidence: root's, 0600, one JSON document listing the processes and the connection.
  const std::string path = EvidencePath(r.err);
  ASSERT_FALSE(path.empty()) << r.err;
  EXPECT_EQ(k.evidence(), path);
  EXPECT_EQ(path.rfind(scratch.dir() + "/contain-", 0), 0u) << path;
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_uid, 0u);
  const std::string text = Slurp(path);
  EXPECT_EQ(text.find(secret), std::string::npos) << "the evidence holds the workload's secret";
  EXPECT_EQ(r.out.find(secret), std::string::npos);
  cordon::v1::ContainmentEvidence evidence;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(text, &evidence).ok()) << text;
  EXPECT_EQ(evidence.sandbox_cgroup_id(), cg.id());
  EXPECT_EQ(evidence.policy().name(), "contain-policy");
  EXPECT_EQ(evidence.policy().digest().rfind("sha256:", 0), 0u) << evidence.policy().digest();
  EXPECT_EQ(evidence.containment().reason(), "incident 7");
  bool saw_writer = false, saw_holder = false;
  for (const auto& proc : evidence.processes()) {
    if (proc.pid() == static_cast<uint32_t>(writer.pid())) {
      saw_writer = true;
      EXPECT_NE(proc.exe().find("python3"), std::string::npos) << proc.exe();
      ASSERT_GE(proc.cmdline_size(), 4);
      EXPECT_EQ(proc.cmdline(0), "python3");
      EXPECT_EQ(proc.cmdline(3), counter);
      bool holds_counter = false;
      for (const auto& f : proc.fds()) holds_counter |= f.target() == counter && f.type() == "file";
      EXPECT_TRUE(holds_counter);
    }
    if (proc.pid() == static_cast<uint32_t>(holder.pid())) {
      saw_holder = true;
      EXPECT_EQ(proc.ppid(), static_cast<uint32_t>(::getpid()));
      EXPECT_EQ(proc.uid(), 0u);
      EXPECT_FALSE(proc.cwd().empty());
    }
  }
  EXPECT_TRUE(saw_writer) << text;
  EXPECT_TRUE(saw_holder) << text;
  bool saw_connection = false;
  for (const auto& s : evidence.sockets())
    saw_connection |= s.remote() == "127.0.0.1:" + std::to_string(listener.port()) && s.action() == "destroyed" &&
                      s.pid() == static_cast<uint32_t>(holder.pid()) && s.protocol() == "tcp";
  EXPECT_TRUE(saw_connection) << text;
  EXPECT_TRUE(evidence.counters().count("deniedConnect"));

  // Contained twice: a clear error, nothing changed.
  CommandResult again = Cordon({"contain", "--id", std::to_string(cg.id()), "--config", scratch.config()});
  EXPECT_EQ(again.status, 1);
  EXPECT_NE(again.err.find("is already contained"), std::string::npos) << again.err;
  EXPECT_EQ(CgroupEvent(cg.path(), "frozen"), "1");

  // Release: thawed, the writer writes again, the policy allows again.
  CommandResult rel = Cordon({"release", "--cgroup", cg.path(), "--reason", "all clear", "--config", scratch.config()});
  ASSERT_EQ(rel.status, 0) << rel.err;
  EXPECT_EQ(CgroupEvent(cg.path(), "frozen"), "0");
  EXPECT_TRUE(WaitFor([&] { return Counter(counter) > frozen_at; }, 10000)) << "the writer did not resume";
  EXPECT_EQ(ConnectWith(SocketMadeIn(cg.path()), listener.port()), 0);
  EXPECT_EQ(ConnectWith(SocketMadeIn(cg.path()), 1), EPERM);  // the policy, not everything-allowed
  // The holder's connection stays destroyed.
  EXPECT_EQ(holder.Go(), ECONNABORTED);
  auto released = OfKind(ParseJsonLines(rel.out), "sandbox.released");
  ASSERT_EQ(released.size(), 1u) << rel.out;
  EXPECT_EQ(released[0].containment().reason(), "all clear");
  EXPECT_NE(released[0].reason().find("contain-policy"), std::string::npos) << released[0].reason();
  EXPECT_EQ(OfKind(AuditFileEvents(scratch.audit()), "sandbox.released").size(), 1u);

  // Released twice: a clear error.
  CommandResult twice = Cordon({"release", "--cgroup", cg.path(), "--config", scratch.config()});
  EXPECT_EQ(twice.status, 1);
  EXPECT_NE(twice.err.find("is not contained"), std::string::npos) << twice.err;
}

TEST_F(Contain, KillTakesTheEvidenceFirstAndCannotBeReleased) {
  Scratch scratch;
  TestCgroup cg("contain-kill");
  ASSERT_EQ(Attach(cg, LoopbackPolicy("contain-kill", 1)).status, 0);
  const std::string counter = scratch.dir() + "/counter";
  Writer writer(cg.path(), counter, "not-a-secret");
  ASSERT_TRUE(WaitFor([&] { return Counter(counter) > 0; }, 10000));
  EXPECT_EQ(CgroupEvent(cg.path(), "populated"), "1");  // the control

  CommandResult r = Cordon({"contain", "--cgroup", cg.path(), "--kill", "--config", scratch.config()});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(CgroupEvent(cg.path(), "populated"), "0");
  const int writer_pid = writer.pid();
  const int status = writer.Wait();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  cordon::v1::ContainmentEvidence evidence;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(Slurp(EvidencePath(r.err)), &evidence).ok()) << r.err;
  ASSERT_EQ(evidence.processes_size(), 1);
  EXPECT_EQ(evidence.processes(0).pid(), static_cast<uint32_t>(writer_pid));
  EXPECT_TRUE(evidence.containment().killed());
  auto contained = OfKind(ParseJsonLines(r.out), "sandbox.contained");
  ASSERT_EQ(contained.size(), 1u);
  EXPECT_TRUE(contained[0].containment().killed());

  CommandResult rel = Cordon({"release", "--cgroup", cg.path(), "--config", scratch.config()});
  EXPECT_EQ(rel.status, 1);
  EXPECT_NE(rel.err.find("was killed when it was contained"), std::string::npos) << rel.err;
  CommandResult again = Cordon({"contain", "--cgroup", cg.path(), "--config", scratch.config()});
  EXPECT_EQ(again.status, 1);
  EXPECT_NE(again.err.find("its processes killed"), std::string::npos) << again.err;
}

TEST_F(Contain, BadRequestsGetOneClearLine) {
  Scratch scratch;
  TestCgroup cg("contain-none");
  CommandResult none = Cordon({"contain", "--cgroup", cg.path(), "--config", scratch.config()});
  EXPECT_EQ(none.status, 1);
  EXPECT_NE(none.err.find("no sandbox is attached"), std::string::npos) << none.err;
  CommandResult unknown = Cordon({"contain", "--name", "no-such-sandbox-here", "--config", scratch.config()});
  EXPECT_EQ(unknown.status, 1);
  EXPECT_NE(unknown.err.find("no sandbox is named"), std::string::npos) << unknown.err;
  CommandResult both = Cordon({"release", "--cgroup", cg.path(), "--id", "7"});
  EXPECT_EQ(both.status, 2);
  EXPECT_NE(both.err.find("exactly one of --cgroup, --id or --name"), std::string::npos) << both.err;
  ASSERT_EQ(Attach(cg, LoopbackPolicy("contain-none", 1)).status, 0);
  CommandResult not_contained = Cordon({"release", "--cgroup", cg.path(), "--config", scratch.config()});
  EXPECT_EQ(not_contained.status, 1);
  EXPECT_NE(not_contained.err.find("is not contained"), std::string::npos) << not_contained.err;
}

}  // namespace
}  // namespace cordon::test
