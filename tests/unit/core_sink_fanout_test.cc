// The agent's sink fan-out without a kernel: audit-file lines batched until
// FlushBatches (the point before ring-buffer records are committed), the same
// line in every file sink, and a syslog sink whose daemon comes up late:
// counted as failed meanwhile, then opened again by Retry (time injected).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "agent/sink_fanout.h"
#include "util/clock.h"
#include "util/fs.h"

namespace cordon::agent {
namespace {

std::string Contents(const std::string& path) {
  auto text = ReadFile(path);
  return text ? *text : "(unreadable)";
}

cordon::v1::AuditEvent Event(uint32_t pid) {
  cordon::v1::AuditEvent e;
  e.set_kind("net.connect");
  e.set_sandbox("build");
  e.set_verdict("denied");
  e.set_pid(pid);
  return e;
}

class SinkFanoutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cordon-fanout-test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  SinkConfig Jsonl(const std::string& name, uint32_t keep) {
    SinkConfig c;
    c.kind = SinkConfig::Kind::kJsonl;
    c.path = dir_ + "/" + name;
    c.jsonl.keep = keep;
    c.jsonl.fsync = JsonlOptions::Fsync::kNever;
    c.jsonl.chain = false;  // lines compared with ToJsonLine's
    return c;
  }
  std::string dir_;
};

TEST_F(SinkFanoutTest, FileSinksGetTheSameLinesOnceTheBatchIsFlushed) {
  SinkFanout sinks;
  ASSERT_TRUE(sinks.Open({Jsonl("a.jsonl", 3), Jsonl("b.jsonl", 7)}).ok());
  for (uint32_t pid = 1; pid <= 3; ++pid) sinks.Write(Event(pid));
  EXPECT_EQ(Contents(dir_ + "/a.jsonl"), "") << "batched until the batch's end";
  sinks.FlushBatches();
  const std::string a = Contents(dir_ + "/a.jsonl");
  EXPECT_EQ(a, Contents(dir_ + "/b.jsonl"));
  size_t lines = 0;
  for (char ch : a) lines += ch == '\n';
  EXPECT_EQ(lines, 3u);
  EXPECT_NE(a.find("\"pid\":3"), std::string::npos) << a;
  ASSERT_EQ(sinks.slots().size(), 2u);
  for (const auto& slot : sinks.slots()) {
    EXPECT_EQ(slot.written, 3u) << slot.config.Name();
    EXPECT_EQ(slot.failed, 0u);
  }
  EXPECT_EQ(sinks.failures(), 0u);
  EXPECT_EQ(sinks.slots()[0].config.Name(), "jsonl:" + dir_ + "/a.jsonl");
  EXPECT_EQ(sinks.KeepOf(dir_ + "/b.jsonl"), 7u);
  EXPECT_EQ(sinks.KeepOf(dir_ + "/none.jsonl"), 0u);
}

TEST_F(SinkFanoutTest, SyslogWithoutADaemonCountsFailuresUntilRetryConnects) {
  SinkConfig syslog;
  syslog.kind = SinkConfig::Kind::kSyslog;
  syslog.socket = dir_ + "/log";
  SinkFanout sinks;
  const int64_t opened_ns = MonoNs();
  ASSERT_TRUE(sinks.Open({syslog}).ok()) << "a missing syslog daemon does not stop the agent";
  EXPECT_FALSE(sinks.slots()[0].sink);
  sinks.Write(Event(1));
  sinks.Write(Event(2));
  EXPECT_EQ(sinks.slots()[0].failed, 2u);
  EXPECT_EQ(sinks.failures(), 2u);
  EXPECT_FALSE(sinks.slots()[0].last_error.empty());

  // The daemon comes up.
  int daemon = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(daemon, 0);
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, syslog.socket.c_str(), sizeof addr.sun_path - 1);
  ASSERT_EQ(::bind(daemon, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  sinks.Retry(opened_ns + 1000000000);
  EXPECT_FALSE(sinks.slots()[0].sink) << "retried every 10 s, not sooner";
  sinks.Retry(opened_ns + 20000000000);
  ASSERT_TRUE(sinks.slots()[0].sink);
  sinks.Write(Event(3));
  EXPECT_EQ(sinks.slots()[0].written, 1u);
  EXPECT_EQ(sinks.failures(), 2u);
  char buf[8192];
  ssize_t n = ::recv(daemon, buf, sizeof buf, MSG_DONTWAIT);
  ASSERT_GT(n, 0);
  EXPECT_NE(std::string(buf, static_cast<size_t>(n)).find("net.connect"), std::string::npos);
  ::close(daemon);
}

}  // namespace
}  // namespace cordon::agent
