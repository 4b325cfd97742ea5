// Root integration-test harness: real cgroups, real processes, real syscalls,
// and the real cordon binary. Everything created here is removed in
// destructors (cgroups, processes this harness started, sandboxes).
#pragma once

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "event.pb.h"

namespace cordon::test {

struct CommandResult {
  int status = -1;  // exit status, or 128+signal
  std::string out;
  std::string err;
};

// The cordon binary under test: $CORDON_TEST_CORDON when set (another build of
// the same sources: tests/run.sh runs this suite against the sanitized cordon
// of build-san/, or one with a change reverted, to show that a test fails
// without it), otherwise the one built beside this test binary.
const char* CordonBinary();
// Whether that binary is built with AddressSanitizer (it links libasan):
// its quarantine holds freed memory, so resident-memory bounds do not apply.
bool CordonIsSanitized();
// Every use of CORDON_BINARY names the binary under test (integration_tests
// is compiled with CORDON_BUILT_BINARY only; lsm_tests keeps the literal).
#ifndef CORDON_BINARY
#define CORDON_BINARY (::cordon::test::CordonBinary())
#endif

// Runs the cordon binary under test with `args`.
CommandResult Cordon(const std::vector<std::string>& args, const std::string& stdin_data = "");
// Runs any command. A sanitizer report on its stderr (the sanitized cordon's:
// AddressSanitizer, LeakSanitizer, UndefinedBehaviorSanitizer) fails the
// current test even when the test expects the command to fail.
CommandResult Run(const std::vector<std::string>& argv, const std::string& stdin_data = "");

// The sandbox a killed cordon run left pinned (id: its cgroup's inode):
// detached and its cgroup removed at the end of the test.
struct PinnedRunCleanup {
  uint64_t id;
  std::string cgroup;
  ~PinnedRunCleanup();
};

// A cgroup v2 directory made for one test; processes it holds are killed and
// the cgroup (and any sandbox attached to it) removed at the end.
class TestCgroup {
 public:
  explicit TestCgroup(const std::string& tag);
  ~TestCgroup();
  TestCgroup(const TestCgroup&) = delete;
  TestCgroup& operator=(const TestCgroup&) = delete;

  const std::string& path() const { return path_; }          // absolute
  const std::string& relative() const { return relative_; }  // below the cgroup2 mount
  uint64_t id() const;

 private:
  std::string path_;
  std::string relative_;
};

std::string Cgroup2Mount();

// Forks a child that joins `cgroup_path` (absolute) and runs `body`, whose
// return value is sent back (typically 0 or an errno). Returns it, or
// kChildDied if the child died before it answered (RunInCgroupStatus tells
// how it died).
constexpr int kChildDied = -1000;
int RunInCgroup(const std::string& cgroup_path, const std::function<int()>& body);

// How a body run in the cgroup ended: its result, or the wait status of a
// child that died first (so "killed by SIGKILL" is told from "crashed").
struct ChildOutcome {
  bool answered = false;  // the body returned and sent its result
  int result = kChildDied;
  int wait_status = 0;    // of waitpid(), valid in every case
  bool KilledBy(int sig) const { return !answered && WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == sig; }
};
ChildOutcome RunInCgroupStatus(const std::string& cgroup_path, const std::function<int()>& body);

// A child that joins the cgroup and then waits for Go(): lets a test attach
// a policy to a cgroup whose process is already running.
class WaitingChild {
 public:
  // `before` runs in the child after it joined the cgroup, before waiting.
  WaitingChild(const std::string& cgroup_path, std::function<int()> body, std::function<void()> before = nullptr);
  ~WaitingChild();
  int pid() const { return pid_; }
  int Go();  // releases the child and returns its body's result (or kChildDied)
  ChildOutcome GoStatus();  // the same, with the wait status

 private:
  int pid_ = -1;
  int go_fd_ = -1;
  int result_fd_ = -1;
};

// Syscall bodies: return 0 on success or errno.
int TcpConnect(const sockaddr_storage& addr);
int UdpConnect(const sockaddr_storage& addr);
int UdpSendto(const sockaddr_storage& addr);
int UdpSendmmsg(const sockaddr_storage& addr);
int TcpFastOpen(const sockaddr_storage& addr);
int SocketCreate(int family, int type, int protocol);

sockaddr_storage V4(const char* ip, uint16_t port);
socklen_t SockaddrLen(const sockaddr_storage& addr);  // of sockaddr_in or sockaddr_in6

// What ReadOne reports when nothing happened within the wait, or the peer closed.
constexpr int kTimedOut = -2;
constexpr int kEof = -3;
// Waits up to `ms` for fd to become readable, then reads one byte: 1000 +
// the byte, kEof, kTimedOut, or the errno (ECONNABORTED, ECONNRESET, ...).
int ReadOne(int fd, int ms = 5000);
sockaddr_storage V6(const char* ip, uint16_t port);

// Loopback listeners owned by the test process (outside every sandbox).
class TcpListener {
 public:
  explicit TcpListener(bool v6 = false);
  ~TcpListener();
  uint16_t port() const { return port_; }
  int AcceptPending();  // number of connections accepted without blocking
  // Accepts until `want` connections arrived (waiting for each with poll(),
  // at most timeout_ms in all: the last handshake step of a loopback
  // connection may still be in a softirq when connect() returns); returns
  // how many were accepted.
  int AcceptCount(int want, int timeout_ms = 10000);
 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

class UdpReceiver {
 public:
  explicit UdpReceiver(bool v6 = false);
  ~UdpReceiver();
  uint16_t port() const { return port_; }
  int Received();  // datagrams waiting, drained
 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

// A TCP server of the test's own on 127.0.0.1 (outside every sandbox) that
// reads everything one connection sends, counting it, until the peer closes
// or Stop() (which first reads what has arrived).
class TcpSink {
 public:
  TcpSink();
  ~TcpSink() {
    Stop();
    ::close(listen_fd_);
  }
  uint16_t port() const { return port_; }
  // Stops reading (after what has arrived; with `until_eof`, once the peer
  // closed, waiting for that at most 30 s) and returns the bytes received.
  uint64_t Stop(bool until_eof = false);
  // Whether the connection ended with a reset (ECONNRESET) rather than EOF.
  bool reset() const { return reset_; }

 private:
  void Serve();
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> received_{0};
  std::atomic<bool> reset_{false};
  std::atomic<bool> done_{false};
};

// The workload: sends up to `total` bytes to 127.0.0.1:port over TCP. 0 when
// all were sent; else the errno of the send that failed, EAGAIN for one that
// made no progress for `stall_s` seconds (its SO_SNDTIMEO: the connection stalled).
int TcpFlood(uint16_t port, uint64_t total, int stall_s = 1);

// The number after "key": in the "egress" object of sandbox `id` in
// `cordon status --json` (0 when absent).
uint64_t EgressStatusNumber(const std::string& json, uint64_t id, const std::string& key);

// A policy without egress whose spec.quiet expects one thing: connects of
// `kind` (net.connect, or a family such as net) to 127.0.0.1:port.
std::string QuietConnectPolicy(const std::string& name, uint16_t port, const std::string& kind = "net.connect");

// Writes a temporary policy file; removed at destruction.
class PolicyFile {
 public:
  explicit PolicyFile(const std::string& yaml);
  ~PolicyFile();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Events currently waiting for the sandbox on `cgroup_path` (consumes them).
// A failed `cordon tail` fails the calling test: otherwise every "no such
// event" assertion would pass when collection broke.
std::vector<cordon::v1::AuditEvent> TakeEvents(const std::string& cgroup_path);
// One event per line; a line that is not an AuditEvent fails the calling test.
// With `growing`, text is a file still being written: an unterminated last
// line is left for the next read instead.
std::vector<cordon::v1::AuditEvent> ParseJsonLines(const std::string& text, bool growing = false);
// The events of one kind, in order.
std::vector<cordon::v1::AuditEvent> OfKind(const std::vector<cordon::v1::AuditEvent>& events, const std::string& kind);
// The events of an audit file (`cordon run --audit`, an agent's file sink).
// A file that cannot be read fails the calling test: cordon creates it before
// the workload starts, so a missing file means collection broke.
// growing: a file a writer still appends to: its whole lines only.
std::vector<cordon::v1::AuditEvent> AuditFileEvents(const std::string& path, bool growing = false);

// A child of the test that only waits for signals (a stand-in for a process
// outside the sandbox: the agent, a host service). Killed and reaped by the
// destructor on every path out of a test.
class Sleeper {
 public:
  Sleeper() {
    pid_ = ::fork();
    if (pid_ == 0) {
      for (;;) ::pause();
    }
  }
  ~Sleeper() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);  // our own child
      ::waitpid(pid_, nullptr, 0);
    }
  }
  Sleeper(const Sleeper&) = delete;
  Sleeper& operator=(const Sleeper&) = delete;
  pid_t pid() const { return pid_; }
  bool Alive() const { return ::waitpid(pid_, nullptr, WNOHANG) == 0; }

 private:
  pid_t pid_ = -1;
};

// Whether `cordon status` reports BPF LSM usable on this kernel.
bool LsmUsableHere();

// Where BPF LSM is usable, an idle sandbox held for the whole run keeps the
// host-wide LSM object loaded between tests (harness.cc, KeepLsmLoaded). A
// test of that object's lifetime detaches it for its own duration.
class LsmAnchorReleased {
 public:
  LsmAnchorReleased();
  ~LsmAnchorReleased();  // attaches it again if any test is still to run
  LsmAnchorReleased(const LsmAnchorReleased&) = delete;
  LsmAnchorReleased& operator=(const LsmAnchorReleased&) = delete;
  bool detached() const { return detached_; }
  const std::string& path() const { return path_; }  // its cgroup ("" if none)

 private:
  std::string path_;
  bool detached_;
};

// Polls `done` every 20 ms until it is true or timeout_ms passed; its last answer.
bool WaitFor(const std::function<bool()>& done, int timeout_ms);
// A file's whole text ("" if it cannot be read).
std::string Slurp(const std::string& path);

// Runs `script` with /bin/sh in a session of its own whose controlling
// terminal (stdin, stdout, stderr) is a pty of the test's; returns what it
// wrote there, and its wait status in *status. *session_leader: its pid.
std::string RunOnTerminal(const std::string& script, int* status, pid_t* session_leader = nullptr);

// A policy allowing egress to loopback TCP/UDP `port` only (IPv4 and IPv6).
std::string LoopbackPolicy(const std::string& name, uint16_t port, const std::string& mode = "enforce");

}  // namespace cordon::test
