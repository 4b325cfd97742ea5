// Audit sinks without a kernel: JSONL rotation and fsync policies, write
// errors, RFC 5424 syslog over a unix datagram socket the test binds itself.
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "events/decoder.h"
#include "events/json_line.h"
#include "events/sink.h"

namespace cordon {
namespace {

using cordon::v1::AuditEvent;

// The file sink's mechanics without the hash chain (lines as ToJsonLine
// makes them, sizes exact); core_audit_chain_test.cc covers the chain.
JsonlOptions Plain() {
  JsonlOptions options;
  options.chain = false;
  return options;
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/cordon-sink-test.XXXXXX";
    char* p = ::mkdtemp(tmpl);
    EXPECT_NE(p, nullptr);
    path_ = p ? p : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

AuditEvent Event(uint32_t pid, const std::string& sandbox = "agent-1") {
  AuditEvent e;
  e.mutable_time()->set_seconds(1700000000);
  e.mutable_time()->set_nanos(123456789);
  e.set_sandbox(sandbox);
  e.set_kind("net.connect");
  e.set_verdict("denied");
  e.set_pid(pid);
  e.set_comm("python3");
  e.set_reason("port not allowed");
  e.mutable_net()->set_address("169.254.169.254");
  e.mutable_net()->set_port(80);
  return e;
}

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < all.size()) {
    size_t nl = all.find('\n', start);
    EXPECT_NE(nl, std::string::npos) << path << " ends without a newline";
    if (nl == std::string::npos) break;
    lines.push_back(all.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

// pids of the events in a file, each line checked to be one whole event.
std::vector<uint32_t> Pids(const std::string& path) {
  std::vector<uint32_t> pids;
  for (const std::string& line : Lines(path)) {
    AuditEvent e;
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(line, &e).ok()) << "not one event: " << line;
    pids.push_back(e.pid());
  }
  return pids;
}

bool Exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }
uint64_t FileSize(const std::string& path) { return std::filesystem::file_size(path); }

TEST(SinkJsonl, OpenWithoutOptionsAppends) {
  TempDir dir;
  std::string path = dir / "sub/dir/audit.jsonl";
  for (uint32_t pid : {1u, 2u}) {
    auto sink = JsonlFileSink::Open(path, Plain());
    ASSERT_TRUE(sink.ok()) << sink.error().ToString();
    ASSERT_TRUE((*sink)->Write(Event(pid)).ok());
    ASSERT_TRUE((*sink)->Flush().ok());
  }
  EXPECT_EQ(Pids(path), (std::vector<uint32_t>{1, 2}));
  struct stat st = {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// A writer killed in the middle of a write() leaves a torn last line: the
// agent (the file's only writer) cuts it off before appending, so the file
// stays one whole event per line; the torn event is delivered again.
TEST(SinkJsonl, RepairCutsATornLastLineOnlyWhenAsked) {
  TempDir dir;
  std::string path = dir / "audit.jsonl";
  {
    auto sink = JsonlFileSink::Open(path, Plain());
    ASSERT_TRUE(sink.ok());
    ASSERT_TRUE((*sink)->Write(Event(1)).ok());
    ASSERT_TRUE((*sink)->Write(Event(2)).ok());
  }
  std::string torn = "{\"time\":\"2023-11-14T22:13:20.123456789Z\",\"sandbox\":\"ag";
  std::ofstream(path, std::ios::app) << torn;
  uint64_t torn_size = FileSize(path);
  {
    auto plain = JsonlFileSink::Open(path, Plain());  // another writer's file: left alone
    ASSERT_TRUE(plain.ok());
  }
  EXPECT_EQ(FileSize(path), torn_size);
  JsonlOptions options = Plain();
  options.repair_torn_tail = true;
  auto sink = JsonlFileSink::Open(path, options);
  ASSERT_TRUE(sink.ok()) << sink.error().ToString();
  ASSERT_TRUE((*sink)->Write(Event(3)).ok());
  EXPECT_EQ(Pids(path), (std::vector<uint32_t>{1, 2, 3}));
  // A file that is only a torn line becomes empty; a whole file is untouched.
  std::ofstream(dir / "only-torn.jsonl") << torn;
  ASSERT_TRUE(JsonlFileSink::Open(dir / "only-torn.jsonl", options).ok());
  EXPECT_EQ(FileSize(dir / "only-torn.jsonl"), 0u);
  uint64_t whole = FileSize(path);
  ASSERT_TRUE(JsonlFileSink::Open(path, options).ok());
  EXPECT_EQ(FileSize(path), whole);
}

TEST(SinkJsonl, RotationKeepsEveryLineWhole) {
  TempDir dir;
  std::string path = dir / "audit.jsonl";
  const uint64_t line_size = ToJsonLine(Event(1000)).size() + 1;
  JsonlOptions options = Plain();
  options.max_bytes = line_size * 3 + line_size / 2;  // 3 lines per file
  options.keep = 100;
  auto sink = JsonlFileSink::Open(path, options);
  ASSERT_TRUE(sink.ok()) << sink.error().ToString();
  const uint32_t kEvents = 20;
  for (uint32_t i = 0; i < kEvents; ++i) ASSERT_TRUE((*sink)->Write(Event(1000 + i)).ok());

  // Oldest first: path.7 .. path.1, path.
  std::vector<std::string> files;
  for (int k = 100; k >= 1; --k)
    if (Exists(path + "." + std::to_string(k))) files.push_back(path + "." + std::to_string(k));
  files.push_back(path);
  EXPECT_EQ(files.size(), 7u);  // 20 lines, 3 per file
  std::vector<uint32_t> all;
  for (const std::string& f : files) {
    EXPECT_LE(FileSize(f), options.max_bytes) << f;
    std::vector<uint32_t> pids = Pids(f);
    EXPECT_EQ(pids.size(), f == path ? 2u : 3u) << f;
    all.insert(all.end(), pids.begin(), pids.end());
    struct stat st = {};
    ASSERT_EQ(::stat(f.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u) << f;
  }
  ASSERT_EQ(all.size(), kEvents);
  for (uint32_t i = 0; i < kEvents; ++i) EXPECT_EQ(all[i], 1000 + i);
}

TEST(SinkJsonl, RotationDropsFilesBeyondKeep) {
  TempDir dir;
  std::string path = dir / "audit.jsonl";
  const uint64_t line_size = ToJsonLine(Event(1000)).size() + 1;
  JsonlOptions options = Plain();
  options.max_bytes = line_size * 2;  // exactly 2 lines per file
  options.keep = 2;
  auto sink = JsonlFileSink::Open(path, options);
  ASSERT_TRUE(sink.ok()) << sink.error().ToString();
  for (uint32_t i = 0; i < 11; ++i) ASSERT_TRUE((*sink)->Write(Event(1000 + i)).ok());
  EXPECT_EQ(Pids(path + ".2"), (std::vector<uint32_t>{1006, 1007}));
  EXPECT_EQ(Pids(path + ".1"), (std::vector<uint32_t>{1008, 1009}));
  EXPECT_EQ(Pids(path), (std::vector<uint32_t>{1010}));
  EXPECT_FALSE(Exists(path + ".3"));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), std::filesystem::directory_iterator()), 3);
}

TEST(SinkJsonl, RotationWithKeepZeroKeepsOnlyTheCurrentFile) {
  TempDir dir;
  std::string path = dir / "audit.jsonl";
  JsonlOptions options = Plain();
  options.max_bytes = ToJsonLine(Event(1000)).size() + 1;
  options.keep = 0;
  auto sink = JsonlFileSink::Open(path, options);
  ASSERT_TRUE(sink.ok()) << sink.error().ToString();
  for (uint32_t i = 0; i < 3; ++i) ASSERT_TRUE((*sink)->Write(Event(1000 + i)).ok());
  EXPECT_EQ(Pids(path), (std::vector<uint32_t>{1002}));
  EXPECT_FALSE(Exists(path + ".1"));
}

TEST(SinkJsonl, LineLargerThanMaxBytesGoesAloneToAFreshFile) {
  TempDir dir;
  std::string path = dir / "audit.jsonl";
  JsonlOptions options = Plain();
  options.max_bytes = 100;
  auto sink = JsonlFileSink::Open(path, options);
  ASSERT_TRUE(sink.ok()) << sink.error().ToString();
  AuditEvent big = Event(2);
  big.set_reason(std::string(500, 'x'));
  ASSERT_TRUE((*sink)->Write(Event(1)).ok());  // alone bigger than 100 bytes too
  ASSERT_TRUE((*sink)->Write(big).ok());
  ASSERT_TRUE((*sink)->Write(Event(3)).ok());
  EXPECT_EQ(Pids(path + ".2"), (std::vector<uint32_t>{1}));
  EXPECT_EQ(Pids(path + ".1"), (std::vector<uint32_t>{2}));
  EXPECT_EQ(Pids(path), (std::vector<uint32_t>{3}));
}

TEST(SinkJsonl, RotationCountsTheExistingFile) {
  TempDir dir;
  std::string path = dir / "audit.jsonl";
  const uint64_t line_size = ToJsonLine(Event(1000)).size() + 1;
  {
    auto sink = JsonlFileSink::Open(path, Plain());
    ASSERT_TRUE(sink.ok());
    ASSERT_TRUE((*sink)->Write(Event(1000)).ok());
  }
  JsonlOptions options = Plain();
  options.max_bytes = line_size * 2;
  auto sink = JsonlFileSink::Open(path, options);
  ASSERT_TRUE(sink.ok());
  ASSERT_TRUE((*sink)->Write(Event(1001)).ok());
  ASSERT_TRUE((*sink)->Write(Event(1002)).ok());
  EXPECT_EQ(Pids(path + ".1"), (std::vector<uint32_t>{1000, 1001}));
  EXPECT_EQ(Pids(path), (std::vector<uint32_t>{1002}));
}

TEST(SinkJsonl, EveryFsyncPolicyWrites) {
  using F = JsonlOptions::Fsync;
  for (auto [policy, interval] : {std::pair{F::kEveryEvent, 1000u}, std::pair{F::kInterval, 0u},
                                  std::pair{F::kInterval, 60000u}, std::pair{F::kNever, 1000u}}) {
    TempDir dir;
    std::string path = dir / "audit.jsonl";
    JsonlOptions options = Plain();
    options.fsync = policy;
    options.fsync_interval_ms = interval;
    options.max_bytes = 1000;  // rotation syncs too
    options.keep = 100;
    {
      auto sink = JsonlFileSink::Open(path, options);
      ASSERT_TRUE(sink.ok()) << sink.error().ToString();
      for (uint32_t i = 0; i < 20; ++i) ASSERT_TRUE((*sink)->Write(Event(i)).ok());
      ASSERT_TRUE((*sink)->Flush().ok());
      ASSERT_TRUE((*sink)->Sync().ok());
      ASSERT_TRUE((*sink)->Write(Event(20)).ok());
    }  // destructor syncs
    size_t lines = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir.path())) lines += Pids(entry.path()).size();
    EXPECT_EQ(lines, 21u) << "policy " << static_cast<int>(policy);
  }
}

TEST(SinkJsonl, OpenErrorNamesThePath) {
  TempDir dir;
  std::ofstream(dir / "file") << "not a directory";
  std::string path = dir / "file/audit.jsonl";
  auto sink = JsonlFileSink::Open(path, Plain());
  ASSERT_FALSE(sink.ok());
  EXPECT_NE(sink.error().ToString().find(path), std::string::npos) << sink.error().ToString();
  EXPECT_NE(sink.error().ToString().find(std::strerror(ENOTDIR)), std::string::npos) << sink.error().ToString();
}

TEST(SinkJsonl, WriteErrorNamesThePathAndErrno) {
  if (!Exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  JsonlOptions options = Plain();
  options.fsync = JsonlOptions::Fsync::kNever;
  auto sink = JsonlFileSink::Open("/dev/full", options);
  ASSERT_TRUE(sink.ok()) << sink.error().ToString();
  for (int i = 0; i < 2; ++i) {  // still usable: the next write tries again
    Status s = (*sink)->Write(Event(1));
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().err, ENOSPC);
    EXPECT_NE(s.error().ToString().find("/dev/full"), std::string::npos) << s.error().ToString();
    EXPECT_NE(s.error().ToString().find(std::strerror(ENOSPC)), std::string::npos) << s.error().ToString();
  }
}

// A write cut short (here by RLIMIT_FSIZE) leaves no half line, and the sink
// writes again once the cause is gone.
TEST(SinkJsonl, FailedWriteLeavesNoPartialLineAndRecovers) {
  TempDir dir;
  std::string path = dir / "audit.jsonl";
  const uint64_t line_size = ToJsonLine(Event(1000)).size() + 1;
  auto sink = JsonlFileSink::Open(path, Plain());
  ASSERT_TRUE(sink.ok());
  ASSERT_TRUE((*sink)->Write(Event(1000)).ok());
  ASSERT_TRUE((*sink)->Write(Event(1001)).ok());

  struct rlimit old_limit = {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit limit = old_limit;
  limit.rlim_cur = line_size * 2 + line_size / 2;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limit), 0);
  Status s = (*sink)->Write(Event(1002));
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &old_limit), 0);
  std::signal(SIGXFSZ, old_handler);

  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().err, EFBIG);
  EXPECT_NE(s.error().ToString().find(path), std::string::npos) << s.error().ToString();
  EXPECT_EQ(FileSize(path), line_size * 2);
  ASSERT_TRUE((*sink)->Write(Event(1003)).ok());
  EXPECT_EQ(Pids(path), (std::vector<uint32_t>{1000, 1001, 1003}));
}

TEST(SinkStream, WritesJsonAndCompactLines) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  StreamSink json(fds[1], StreamSink::Format::kJson);
  StreamSink compact(fds[1], StreamSink::Format::kCompact);
  ASSERT_TRUE(json.Write(Event(7)).ok());
  ASSERT_TRUE(compact.Write(Event(7)).ok());
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, n);
  ::close(fds[0]);
  EXPECT_EQ(out, ToJsonLine(Event(7)) + "\n" + ToCompactLine(Event(7)) + "\n");
}

// ---- syslog -----------------------------------------------------------------

class Receiver {
 public:
  explicit Receiver(std::string path) : path_(std::move(path)) { Bind(); }
  ~Receiver() { Close(); }
  void Bind() {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd_, 0);
    sockaddr_un addr = {};
    addr.sun_family = AF_UNIX;
    path_.copy(addr.sun_path, sizeof addr.sun_path - 1);
    ASSERT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << std::strerror(errno);
    timeval tv = {2, 0};
    ASSERT_EQ(::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
  }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    ::unlink(path_.c_str());
  }
  std::string Recv() {
    std::string buf(65536, '\0');
    ssize_t n = ::recv(fd_, buf.data(), buf.size(), 0);
    EXPECT_GE(n, 0) << std::strerror(errno);
    buf.resize(n < 0 ? 0 : n);
    return buf;
  }

 private:
  std::string path_;
  int fd_ = -1;
};

std::string Hostname() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return host;
}

TEST(SinkSyslog, SendsRfc5424WithEscapedStructuredData) {
  TempDir dir;
  Receiver receiver(dir / "log");
  auto sink = SyslogSink::Open(dir / "log");
  ASSERT_TRUE(sink.ok()) << sink.error().ToString();
  AuditEvent event = Event(1234, "we\"ird]\\name");
  ASSERT_TRUE((*sink)->Write(event).ok());
  std::string msg = receiver.Recv();
  std::string want = "<84>1 2023-11-14T22:13:20.123456Z " + Hostname() + " cordon " + std::to_string(::getpid()) +
                     " net.connect [cordon@32473 sandbox=\"we\\\"ird\\]\\\\name\" kind=\"net.connect\" "
                     "verdict=\"denied\" pid=\"1234\"] ";
  ASSERT_EQ(msg.substr(0, want.size()), want);
  AuditEvent parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(msg.substr(want.size()), &parsed).ok()) << msg;
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(parsed, event));
}

TEST(SinkSyslog, SeverityFacilityAppNameAndMissingFields) {
  TempDir dir;
  Receiver receiver(dir / "log");
  auto sink = SyslogSink::Open(dir / "log", "my app", 1);
  ASSERT_TRUE(sink.ok()) << sink.error().ToString();
  std::string prefix = " " + Hostname() + " my_app " + std::to_string(::getpid()) + " ";

  AuditEvent audited = Event(5);
  audited.set_verdict("audited");
  ASSERT_TRUE((*sink)->Write(audited).ok());
  EXPECT_EQ(receiver.Recv().rfind("<13>1 2023-11-14T22:13:20.123456Z" + prefix + "net.connect [", 0), 0u);

  AuditEvent loss;
  loss.set_kind("loss");
  loss.set_sandbox("s");
  ASSERT_TRUE((*sink)->Write(loss).ok());
  EXPECT_EQ(receiver.Recv(), "<12>1 -" + prefix + "loss [cordon@32473 sandbox=\"s\" kind=\"loss\" verdict=\"\" pid=\"0\"] " +
                                 ToJsonLine(loss));

  AuditEvent empty;
  ASSERT_TRUE((*sink)->Write(empty).ok());
  EXPECT_EQ(receiver.Recv().rfind("<13>1 -" + prefix + "- [cordon@32473 ", 0), 0u);

  AuditEvent killed = Event(6);
  killed.set_verdict("killed");
  ASSERT_TRUE((*sink)->Write(killed).ok());
  EXPECT_EQ(receiver.Recv().rfind("<12>1 ", 0), 0u);
}

TEST(SinkSyslog, ReconnectsWhenTheReceiverIsRecreated) {
  TempDir dir;
  Receiver receiver(dir / "log");
  auto sink = SyslogSink::Open(dir / "log");
  ASSERT_TRUE(sink.ok()) << sink.error().ToString();
  ASSERT_TRUE((*sink)->Write(Event(1)).ok());
  EXPECT_NE(receiver.Recv().find("\"pid\":1"), std::string::npos);

  receiver.Close();  // the daemon restarts: a new socket at the same path
  receiver.Bind();
  Status s = (*sink)->Write(Event(2));
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  EXPECT_NE(receiver.Recv().find("\"pid\":2"), std::string::npos);

  receiver.Close();  // the daemon is gone for a while
  s = (*sink)->Write(Event(3));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().ToString().find(dir / "log"), std::string::npos) << s.error().ToString();
  s = (*sink)->Write(Event(4));
  ASSERT_FALSE(s.ok());
  receiver.Bind();
  s = (*sink)->Write(Event(5));
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  EXPECT_NE(receiver.Recv().find("\"pid\":5"), std::string::npos);
}

TEST(SinkSyslog, TruncatesAt8KiB) {
  TempDir dir;
  Receiver receiver(dir / "log");
  auto sink = SyslogSink::Open(dir / "log");
  ASSERT_TRUE(sink.ok()) << sink.error().ToString();
  AuditEvent big = Event(1);
  big.set_reason(std::string(20000, 'x'));
  ASSERT_TRUE((*sink)->Write(big).ok());
  std::string msg = receiver.Recv();
  EXPECT_EQ(msg.size(), 8192u);
  EXPECT_EQ(msg, (*sink)->Format(big));
  EXPECT_EQ(msg.rfind("<84>1 2023-11-14T22:13:20.123456Z ", 0), 0u);
  EXPECT_EQ(msg.substr(msg.size() - 10), std::string(10, 'x'));

  // Never cut inside a UTF-8 character (2-byte characters in the SD part).
  for (const char* prefix : {"a", "ab"}) {
    std::string name = prefix;
    for (int i = 0; i < 5000; ++i) name += "\xc3\xa9";
    ASSERT_TRUE((*sink)->Write(Event(1, name)).ok());
    std::string cut = receiver.Recv();
    EXPECT_GE(cut.size(), 8191u);
    EXPECT_LE(cut.size(), 8192u);
    EXPECT_EQ(cut.back(), '\xa9') << "ends inside a character";
  }

  ASSERT_TRUE((*sink)->Write(Event(2)).ok());  // small ones are whole
  EXPECT_EQ(receiver.Recv(), (*sink)->Format(Event(2)));
}

TEST(SinkSyslog, OpenFailsWithoutAReceiver) {
  TempDir dir;
  auto sink = SyslogSink::Open(dir / "nolog");
  ASSERT_FALSE(sink.ok());
  EXPECT_NE(sink.error().ToString().find(dir / "nolog"), std::string::npos) << sink.error().ToString();
  EXPECT_FALSE(SyslogSink::Open(dir / "nolog", "cordon", 24).ok());
}

}  // namespace
}  // namespace cordon
