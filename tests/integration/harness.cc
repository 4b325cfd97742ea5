#include "tests/integration/harness.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <google/protobuf/util/json_util.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <thread>

#include "events/audit_chain.h"

namespace cordon::test {
namespace {

// The policy texts every cordon these suites start keeps by digest (README
// "Policy texts by digest") go to a directory of the suite's own, removed at
// its end, not to the host's /var/lib/cordon/policies. A suite that wants to
// look there reads $CORDON_POLICY_STORE.
class PolicyStoreOfTheSuite : public ::testing::Environment {
 public:
  void SetUp() override {
    if (const char* set = std::getenv("CORDON_POLICY_STORE"); set && *set) return;  // the caller's
    char tmpl[] = "/tmp/cordon-policy-store-XXXXXX";
    if (!::mkdtemp(tmpl)) return;
    dir_ = tmpl;
    ::setenv("CORDON_POLICY_STORE", (dir_ + "/policies").c_str(), 1);
  }
  void TearDown() override {
    if (dir_.empty()) return;
    ::unsetenv("CORDON_POLICY_STORE");
    pid_t pid = ::fork();
    if (pid == 0) {
      ::execl("/bin/rm", "rm", "-rf", "--", dir_.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    if (pid > 0) ::waitpid(pid, nullptr, 0);
  }

 private:
  std::string dir_;
};
[[maybe_unused]] ::testing::Environment* const kPolicyStore =
    ::testing::AddGlobalTestEnvironment(new PolicyStoreOfTheSuite);

std::string ReadAll(int fd) {
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

void WriteString(const std::string& path, const std::string& data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return;
  (void)!::write(fd, data.data(), data.size());
  ::close(fd);
}

std::atomic<int> g_counter{0};

}  // namespace

CommandResult Run(const std::vector<std::string>& argv, const std::string& stdin_data) {
  int in[2], out[2], err[2];
  if (::pipe2(in, O_CLOEXEC) || ::pipe2(out, O_CLOEXEC) || ::pipe2(err, O_CLOEXEC)) return {};
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    _exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  // Feed stdin from a thread so a large input cannot deadlock with output.
  std::thread feeder([&] {
    size_t off = 0;
    while (off < stdin_data.size()) {
      ssize_t n = ::write(in[1], stdin_data.data() + off, stdin_data.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    ::close(in[1]);
  });
  CommandResult result;
  std::thread err_reader([&] { result.err = ReadAll(err[0]); });
  result.out = ReadAll(out[0]);
  err_reader.join();
  feeder.join();
  ::close(out[0]);
  ::close(err[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  // A sanitized build reports on stderr and exits 1 (UBSan: halt_on_error),
  // which a test expecting a refusal would take for one: fail it here.
  for (const char* report : {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer", ": runtime error: "})
    if (result.err.find(report) != std::string::npos)
      ADD_FAILURE() << "sanitizer report from " << argv[0] << ":\n" << result.err;
  return result;
}

const char* CordonBinary() {
#ifdef CORDON_BUILT_BINARY
  static const char* const built = CORDON_BUILT_BINARY;
#else
  static const char* const built = CORDON_BINARY;
#endif
  static const std::string binary = [] {
    const char* other = std::getenv("CORDON_TEST_CORDON");
    return std::string(other && *other ? other : built);
  }();
  return binary.c_str();
}

bool CordonIsSanitized() {
  static const bool sanitized = [] {
    std::ifstream in(CordonBinary(), std::ios::binary);
    const std::string image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return image.find("libasan.so.") != std::string::npos;
  }();
  return sanitized;
}

CommandResult Cordon(const std::vector<std::string>& args, const std::string& stdin_data) {
  std::vector<std::string> argv = {CordonBinary()};
  argv.insert(argv.end(), args.begin(), args.end());
  return Run(argv, stdin_data);
}

std::string Cgroup2Mount() {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    size_t sep = line.find(" - cgroup2 ");
    if (sep == std::string::npos) continue;
    std::istringstream head(line.substr(0, sep));
    std::string a, b, c, root, mnt;
    head >> a >> b >> c >> root >> mnt;
    if (root == "/") return mnt;
  }
  return "";
}

TestCgroup::TestCgroup(const std::string& tag) {
  relative_ = "/cordon-test-" + std::to_string(::getpid()) + "-" + std::to_string(g_counter++) + "-" + tag;
  path_ = Cgroup2Mount() + relative_;
  ::mkdir(path_.c_str(), 0755);
}

uint64_t TestCgroup::id() const {
  struct stat st;
  return ::stat(path_.c_str(), &st) == 0 ? st.st_ino : 0;
}

namespace {
void RemoveCgroupTree(const std::string& path) {
  // Processes first: only ever the ones this test put there.
  WriteString(path + "/cgroup.kill", "1");
  // Up to 30 s: 500 killed processes holding 100,000 fds (the containment
  // tests) took longer than 2 s to exit on a loaded machine, and the cgroup
  // was left behind.
  for (int i = 0; i < 6000; ++i) {
    std::ifstream ev(path + "/cgroup.events");
    std::string content((std::istreambuf_iterator<char>(ev)), std::istreambuf_iterator<char>());
    if (content.find("populated 1") == std::string::npos) break;
    ::usleep(5000);
  }
  // Children (created by tests that escape into sub-cgroups) before the parent.
  {
    std::vector<std::string> dirs;
    if (auto* d = ::opendir(path.c_str())) {
      while (auto* e = ::readdir(d)) {
        if (e->d_type == DT_DIR && std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, ".."))
          dirs.push_back(path + "/" + e->d_name);
      }
      ::closedir(d);
    }
    for (const auto& d : dirs) RemoveCgroupTree(d);
  }
  // "populated 0" is written before the last exits are accounted: EBUSY can
  // still follow it for a moment.
  for (int i = 0; i < 200 && ::rmdir(path.c_str()) != 0 && errno == EBUSY; ++i) ::usleep(10000);
}
}  // namespace

TestCgroup::~TestCgroup() {
  uint64_t cg_id = id();
  // (A contained sandbox with live processes refuses detach: once they are
  // killed with the cgroup, the second detach removes it.)
  if (cg_id && Cordon({"detach", "--id", std::to_string(cg_id)}).status != 0) {
    RemoveCgroupTree(path_);
    Cordon({"detach", "--id", std::to_string(cg_id)});
  }
  RemoveCgroupTree(path_);
}

int RunInCgroup(const std::string& cgroup_path, const std::function<int()>& body) {
  WaitingChild child(cgroup_path, body);
  return child.Go();
}

ChildOutcome RunInCgroupStatus(const std::string& cgroup_path, const std::function<int()>& body) {
  WaitingChild child(cgroup_path, body);
  return child.GoStatus();
}

WaitingChild::WaitingChild(const std::string& cgroup_path, std::function<int()> body, std::function<void()> before) {
  int go[2], result[2];
  if (::pipe2(go, O_CLOEXEC) || ::pipe2(result, O_CLOEXEC)) return;
  int joined[2];
  if (::pipe2(joined, O_CLOEXEC)) return;
  pid_ = ::fork();
  if (pid_ == 0) {
    ::close(go[1]);
    ::close(result[0]);
    ::close(joined[0]);
    std::string pid = std::to_string(::getpid());
    int fd = ::open((cgroup_path + "/cgroup.procs").c_str(), O_WRONLY);
    int ok = fd >= 0 && ::write(fd, pid.data(), pid.size()) == static_cast<ssize_t>(pid.size()) ? 0 : errno;
    if (fd >= 0) ::close(fd);
    if (ok == 0 && before) before();
    (void)!::write(joined[1], &ok, sizeof ok);
    if (ok != 0) _exit(1);
    char c;
    if (::read(go[0], &c, 1) != 1) _exit(1);
    int r = body();
    (void)!::write(result[1], &r, sizeof r);
    _exit(0);
  }
  ::close(go[0]);
  ::close(result[1]);
  ::close(joined[1]);
  int join_status = -1;
  if (::read(joined[0], &join_status, sizeof join_status) != sizeof join_status || join_status != 0) {
    std::fprintf(stderr, "child could not join %s: %s\n", cgroup_path.c_str(), std::strerror(join_status));
  }
  ::close(joined[0]);
  go_fd_ = go[1];
  result_fd_ = result[0];
}

int WaitingChild::Go() { return GoStatus().result; }

ChildOutcome WaitingChild::GoStatus() {
  ChildOutcome out;
  if (go_fd_ < 0) {
    ADD_FAILURE() << "WaitingChild: the child never started (pipe or fork failed)";
    return out;
  }
  char c = 'g';
  (void)!::write(go_fd_, &c, 1);
  ::close(go_fd_);
  go_fd_ = -1;
  int r = kChildDied;
  out.answered = ::read(result_fd_, &r, sizeof r) == sizeof r;
  out.result = out.answered ? r : kChildDied;
  ::close(result_fd_);
  result_fd_ = -1;
  while (::waitpid(pid_, &out.wait_status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  return out;
}

WaitingChild::~WaitingChild() {
  if (go_fd_ >= 0) ::close(go_fd_);
  if (result_fd_ >= 0) ::close(result_fd_);
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);  // our own child only
    int status;
    ::waitpid(pid_, &status, 0);
  }
}

sockaddr_storage V4(const char* ip, uint16_t port) {
  sockaddr_storage ss = {};
  auto* sin = reinterpret_cast<sockaddr_in*>(&ss);
  sin->sin_family = AF_INET;
  sin->sin_port = htons(port);
  ::inet_pton(AF_INET, ip, &sin->sin_addr);
  return ss;
}

sockaddr_storage V6(const char* ip, uint16_t port) {
  sockaddr_storage ss = {};
  auto* sin6 = reinterpret_cast<sockaddr_in6*>(&ss);
  sin6->sin6_family = AF_INET6;
  sin6->sin6_port = htons(port);
  ::inet_pton(AF_INET6, ip, &sin6->sin6_addr);
  return ss;
}

socklen_t SockaddrLen(const sockaddr_storage& a) {
  return a.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
}

int ReadOne(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, ms) <= 0) return kTimedOut;
  unsigned char c;
  ssize_t n = ::recv(fd, &c, 1, 0);
  if (n == 1) return 1000 + c;  // a byte: 1000 + its value
  if (n == 0) return kEof;
  return errno;
}

namespace {
socklen_t Len(const sockaddr_storage& a) { return SockaddrLen(a); }
int WithSocket(int family, int type, int protocol, const std::function<int(int)>& fn) {
  int fd = ::socket(family, type | SOCK_CLOEXEC, protocol);
  if (fd < 0) return errno;
  int r = fn(fd);
  ::close(fd);
  return r;
}
}  // namespace

int TcpConnect(const sockaddr_storage& addr) {
  return WithSocket(addr.ss_family, SOCK_STREAM, 0, [&](int fd) {
    return ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), Len(addr)) == 0 ? 0 : errno;
  });
}

int UdpConnect(const sockaddr_storage& addr) {
  return WithSocket(addr.ss_family, SOCK_DGRAM, 0, [&](int fd) {
    return ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), Len(addr)) == 0 ? 0 : errno;
  });
}

int UdpSendto(const sockaddr_storage& addr) {
  return WithSocket(addr.ss_family, SOCK_DGRAM, 0, [&](int fd) {
    const char msg[] = "x";
    return ::sendto(fd, msg, 1, 0, reinterpret_cast<const sockaddr*>(&addr), Len(addr)) == 1 ? 0 : errno;
  });
}

int UdpSendmmsg(const sockaddr_storage& addr) {
  return WithSocket(addr.ss_family, SOCK_DGRAM, 0, [&](int fd) {
    char payload[2] = {'a', 'b'};
    struct iovec iov[2] = {{&payload[0], 1}, {&payload[1], 1}};
    struct mmsghdr msgs[2] = {};
    for (int i = 0; i < 2; ++i) {
      msgs[i].msg_hdr.msg_name = const_cast<sockaddr_storage*>(&addr);
      msgs[i].msg_hdr.msg_namelen = Len(addr);
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
    }
    int n = ::sendmmsg(fd, msgs, 2, 0);
    return n == 2 ? 0 : (n < 0 ? errno : -n - 1);
  });
}

int TcpFastOpen(const sockaddr_storage& addr) {
  return WithSocket(addr.ss_family, SOCK_STREAM, 0, [&](int fd) {
    const char msg[] = "GET";
    ssize_t n = ::sendto(fd, msg, 3, MSG_FASTOPEN, reinterpret_cast<const sockaddr*>(&addr), Len(addr));
    return n >= 0 ? 0 : errno;
  });
}

int SocketCreate(int family, int type, int protocol) {
  return WithSocket(family, type, protocol, [](int) { return 0; });
}

TcpListener::TcpListener(bool v6) {
  fd_ = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_FASTOPEN, &one, sizeof one);
  sockaddr_storage a = v6 ? V6("::1", 0) : V4("127.0.0.1", 0);
  ::bind(fd_, reinterpret_cast<sockaddr*>(&a), Len(a));
  ::listen(fd_, 128);
  socklen_t len = sizeof a;
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port);
}

TcpListener::~TcpListener() { ::close(fd_); }

int TcpListener::AcceptPending() {
  int n = 0;
  for (;;) {
    int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) break;
    ::close(c);
    ++n;
  }
  return n;
}

int TcpListener::AcceptCount(int want, int timeout_ms) {
  int n = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (n < want) {
    n += AcceptPending();
    if (n >= want) break;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p = {fd_, POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(left.count()));
  }
  return n;
}

UdpReceiver::UdpReceiver(bool v6) {
  fd_ = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_storage a = v6 ? V6("::1", 0) : V4("127.0.0.1", 0);
  ::bind(fd_, reinterpret_cast<sockaddr*>(&a), Len(a));
  socklen_t len = sizeof a;
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port);
}

UdpReceiver::~UdpReceiver() { ::close(fd_); }

int UdpReceiver::Received() {
  int n = 0;
  char buf[64];
  while (::recv(fd_, buf, sizeof buf, 0) >= 0) ++n;
  return n;
}

std::string QuietConnectPolicy(const std::string& name, uint16_t port, const std::string& kind) {
  return "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata:\n  name: " + name +
         "\nspec:\n  quiet:\n    - kind: " + kind + "\n      address: 127.0.0.1\n      ports: [" +
         std::to_string(port) + "]\n";
}

PolicyFile::PolicyFile(const std::string& yaml) {
  char tmpl[] = "/tmp/cordon-policy-XXXXXX.yaml";
  int fd = ::mkstemps(tmpl, 5);
  path_ = tmpl;
  (void)!::write(fd, yaml.data(), yaml.size());
  ::close(fd);
}

PolicyFile::~PolicyFile() { ::unlink(path_.c_str()); }

std::vector<cordon::v1::AuditEvent> ParseJsonLines(const std::string& text, bool growing) {
  std::vector<cordon::v1::AuditEvent> events;
  const std::string complete =
      growing ? text.substr(0, text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1) : text;
  std::istringstream in(complete);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    cordon::v1::AuditEvent e;
    auto parsed = google::protobuf::util::JsonStringToMessage(line, &e);
    if (parsed.ok() && e.kind() == "chain.start") continue;  // an audit file's own first record
    // The events as the tail and the other sinks carry them: an audit file
    // line's chain value belongs to the line (AuditFileEvents checks it).
    e.clear_chain();
    if (parsed.ok()) events.push_back(e);
    else ADD_FAILURE() << "unparseable event line (" << parsed.ToString() << "): " << line;
  }
  return events;
}

std::vector<cordon::v1::AuditEvent> OfKind(const std::vector<cordon::v1::AuditEvent>& events, const std::string& kind) {
  std::vector<cordon::v1::AuditEvent> out;
  for (const auto& e : events)
    if (e.kind() == kind) out.push_back(e);
  return out;
}

std::vector<cordon::v1::AuditEvent> TakeEvents(const std::string& cgroup_path) {
  CommandResult r = Cordon({"tail", "--cgroup", cgroup_path, "-o", "json"});
  if (r.status != 0) ADD_FAILURE() << "cordon tail --cgroup " << cgroup_path << " failed (" << r.status << "): " << r.err;
  return ParseJsonLines(r.out);
}

std::vector<cordon::v1::AuditEvent> AuditFileEvents(const std::string& path, bool growing) {
  std::ifstream in(path);
  if (!in) {
    ADD_FAILURE() << "audit file " << path << " cannot be read: " << std::strerror(errno);
    return {};
  }
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  // A file a writer is still appending to (growing): its whole lines.
  if (growing) text.resize(text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1);
  // Every audit file a test reads must hold its hash chain (cordon audit verify).
  ChainVerifier chain;
  if (!text.empty() && !chain.File(path, text)) ADD_FAILURE() << "audit file chain broken: " << chain.error();
  return ParseJsonLines(text);
}

namespace {

// Loading and attaching ~30 LSM programs takes seconds under the test VMs'
// TCG emulation, and cordon unloads them when its last sandbox leaves. Where
// BPF LSM is usable, one idle sandbox held for the whole run keeps them
// loaded between tests.
class KeepLsmLoaded : public ::testing::Environment {
 public:
  void SetUp() override {
    if (::geteuid() != 0) return;
    if (Cordon({"status", "--json"}).out.find("\"usable\":true") == std::string::npos) return;
    anchor_ = std::make_unique<TestCgroup>("anchor");
    Reattach();
  }
  void TearDown() override { anchor_.reset(); }
  std::string path() const { return anchor_ ? anchor_->path() : ""; }
  // Detaches the anchor (true if there was one) or attaches it again.
  bool Detach() { return anchor_ && Cordon({"detach", "--cgroup", anchor_->path()}).status == 0; }
  void Reattach() {  // (also the first attach)
    PolicyFile policy("apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: anchor}\nspec:\n  files: {}\n");
    Cordon({"attach", "--cgroup", anchor_->path(), "--policy", policy.path(), "--allow-degraded"});
  }

 private:
  std::unique_ptr<TestCgroup> anchor_;
};
KeepLsmLoaded* const kKeepLsmLoaded =
    static_cast<KeepLsmLoaded*>(::testing::AddGlobalTestEnvironment(new KeepLsmLoaded));

}  // namespace

// Whether a test after the current one is still to run (in run order, which
// --gtest_shuffle changes).
bool MoreTestsToRun() {
  const auto* unit = ::testing::UnitTest::GetInstance();
  const ::testing::TestInfo* current = unit->current_test_info();
  bool after = false;
  for (int i = 0; i < unit->total_test_suite_count(); ++i) {
    const ::testing::TestSuite* suite = unit->GetTestSuite(i);
    for (int j = 0; j < suite->total_test_count(); ++j) {
      const ::testing::TestInfo* test = suite->GetTestInfo(j);
      if (after && test->should_run()) return true;
      after |= test == current;
    }
  }
  return !current;
}

LsmAnchorReleased::LsmAnchorReleased() : path_(kKeepLsmLoaded->path()), detached_(kKeepLsmLoaded->Detach()) {}
LsmAnchorReleased::~LsmAnchorReleased() {
  if (detached_ && MoreTestsToRun()) kKeepLsmLoaded->Reattach();
}

bool LsmUsableHere() { return Cordon({"status", "--json"}).out.find("\"usable\":true") != std::string::npos; }

bool WaitFor(const std::function<bool()>& done, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string RunOnTerminal(const std::string& script, int* status, pid_t* session_leader) {
  std::string out;
  *status = -1;
  int master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0) {
    if (master >= 0) ::close(master);
    return out;
  }
  const std::string slave = ::ptsname(master);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setsid();
    int fd = ::open(slave.c_str(), O_RDWR);  // the session's controlling terminal
    if (fd < 0 || ::ioctl(fd, TIOCSCTTY, 0) != 0) _exit(126);
    ::dup2(fd, 0);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execl("/bin/sh", "sh", "-c", script.c_str(), nullptr);
    _exit(127);
  }
  if (session_leader) *session_leader = pid;
  for (;;) {
    struct pollfd p = {master, POLLIN, 0};
    if (pid < 0 || ::poll(&p, 1, 60000) <= 0) break;
    char buf[4096];
    ssize_t n = ::read(master, buf, sizeof buf);
    if (n <= 0) break;  // EIO: the session's last process closed the terminal
    out.append(buf, static_cast<size_t>(n));
  }
  if (pid > 0) ::waitpid(pid, status, 0);
  ::close(master);
  return out;
}

std::string LoopbackPolicy(const std::string& name, uint16_t port, const std::string& mode) {
  return "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata:\n  name: " + name + "\nspec:\n  mode: " + mode +
         "\n  network:\n    egress:\n      - cidr: 127.0.0.1\n        ports: [" + std::to_string(port) +
         "]\n      - cidr: ::1\n        ports: [" + std::to_string(port) + "]\n";
}

PinnedRunCleanup::~PinnedRunCleanup() {
  Cordon({"detach", "--id", std::to_string(id)});
  // What the test's command left in it (its own processes) goes first.
  std::ofstream(cgroup + "/cgroup.kill") << "1";
  WaitFor([&] { return ::rmdir(cgroup.c_str()) == 0 || errno == ENOENT; }, 5000);
  // The killed run's lock (ops::RunOwner), if detach did not remove it.
  ::unlink(("/run/cordon/runs/" + cgroup.substr(cgroup.rfind('/') + 1)).c_str());
}

TcpSink::TcpSink() {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) || ::listen(listen_fd_, 4) ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len))
    ADD_FAILURE() << "tcp sink: " << std::strerror(errno);
  port_ = ntohs(a.sin_port);
  thread_ = std::thread([this] { Serve(); });
}
uint64_t TcpSink::Stop(bool until_eof) {
  if (until_eof) WaitFor([this] { return done_.load(); }, 30000);
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  return received_;
}

void TcpSink::Serve() {
  int conn = -1;
  char buf[1 << 16];
  for (;;) {
    const int fd = conn >= 0 ? conn : listen_fd_;
    pollfd p = {fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, 50);
    if (ready == 0) {
      if (stop_) break;
      continue;
    }
    if (conn < 0) {
      conn = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      continue;
    }
    const ssize_t n = ::recv(conn, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      received_ += static_cast<uint64_t>(n);
      continue;
    }
    if (n < 0 && errno == EAGAIN) continue;
    reset_ = n < 0 && errno == ECONNRESET;
    break;  // EOF or an error
  }
  if (conn >= 0) ::close(conn);
  done_ = true;
}
int TcpFlood(uint16_t port, uint64_t total, int stall_s) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  sockaddr_storage to = V4("127.0.0.1", port);
  timeval timeout = {stall_s, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&to), SockaddrLen(to))) {
    const int err = errno;
    ::close(fd);
    return err;
  }
  static char chunk[1 << 16];
  uint64_t sent = 0;
  int err = 0;
  while (sent < total) {
    const ssize_t n = ::send(fd, chunk, std::min<uint64_t>(sizeof chunk, total - sent), MSG_NOSIGNAL);
    if (n < 0) {
      err = errno;
      break;
    }
    sent += static_cast<uint64_t>(n);
  }
  ::close(fd);
  return err;
}

uint64_t EgressStatusNumber(const std::string& json, uint64_t id, const std::string& key) {
  const size_t at = json.find("{\"id\":" + std::to_string(id) + ",");
  if (at == std::string::npos) return 0;
  const size_t egress = json.find("\"egress\":{", at);
  const size_t k = egress == std::string::npos ? egress : json.find("\"" + key + "\":", egress);
  return k == std::string::npos ? 0 : std::stoull(json.substr(k + key.size() + 3));
}

}  // namespace cordon::test
