// The remote syslog sink (events/remote_syslog.h) against a real collector:
// Debian's rsyslog, started here on loopback (imtcp, plain or TLS with the
// ossl driver, certificates made here with the openssl CLI), writing each
// message it receives to a file. Nothing of the system's rsyslog is used:
// rsyslog gets its own config, pid file and work directory, and loads no
// input but imtcp (no imuxsock: /dev/log is not touched).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include "events/json_line.h"
#include "events/remote_syslog.h"
#include "tests/integration/harness.h"
#include "tests/integration/rsyslog_collector.h"

namespace cordon {
namespace {

using test::Collector;
using test::kRsyslogd;
using test::Slurp;
using test::WaitFor;

cordon::v1::AuditEvent Event(uint64_t seq) {
  cordon::v1::AuditEvent e;
  e.mutable_time()->set_seconds(1700000000 + static_cast<int64_t>(seq));
  e.set_sandbox("remote-syslog-test");
  e.set_sandbox_cgroup_id(7);
  e.set_seq(seq);
  e.set_id("7-" + std::to_string(seq));
  e.set_kind("net.connect");
  e.set_verdict("denied");
  e.set_policy("p");
  // Some bulk, so that a flood fills socket buffers.
  e.set_reason("connect to 127.0.0.1:9 refused by the sandbox's egress rules " + std::string(200, 'x'));
  return e;
}

// The length of a line the collector writes for `event`, about.
std::string Frame(const cordon::v1::AuditEvent& event) { return ToJsonLine(event) + "\n"; }

off_t FileSize(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_size : 0;
}

std::string Id(uint64_t seq) { return "7-" + std::to_string(seq); }

// What arrived, measured: events 1..n each at least once, and how often
// again; in order means the first arrival of each id follows the previous id.
struct Arrival {
  uint64_t missing = 0, duplicates = 0, out_of_order = 0, losses = 0;
  std::string first_missing;
};
Arrival Measure(const std::vector<std::string>& ids, uint64_t n) {
  Arrival a;
  std::map<std::string, int> seen;
  uint64_t next = 1;
  for (const auto& id : ids) {
    if (id == "loss") {
      a.losses++;
      continue;
    }
    if (seen[id]++) {
      a.duplicates++;
      continue;
    }
    if (id != Id(next)) a.out_of_order++;
    next = std::stoull(id.substr(2)) + 1;
  }
  for (uint64_t i = 1; i <= n; ++i)
    if (!seen.count(Id(i))) {
      if (!a.missing) a.first_missing = Id(i);
      a.missing++;
    }
  return a;
}

class RemoteSyslog : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "integration tests need root";
    if (::access(kRsyslogd, X_OK) != 0) GTEST_SKIP() << "rsyslog is not installed (setup.sh installs it)";
    spool_ = collector_.dir() + "/spool";
  }

  RemoteSyslogOptions Options(bool tls) {
    RemoteSyslogOptions o;
    o.host = "127.0.0.1";
    o.port = collector_.port();
    o.tls = tls;
    o.ca = collector_.dir() + "/ca.pem";
    o.spool_dir = spool_;
    o.spool_max_bytes = 256 << 20;
    return o;
  }

  std::unique_ptr<RemoteSyslogSink> OpenSink(const RemoteSyslogOptions& o) {
    auto sink = RemoteSyslogSink::Open(o);
    EXPECT_TRUE(sink.ok()) << sink.error().ToString();
    return sink.ok() ? std::move(*sink) : nullptr;
  }

  Collector collector_;
  std::string spool_;
};

TEST_F(RemoteSyslog, EventsOverTcpArriveOnceInOrderOctetCounted) {
  ASSERT_TRUE(collector_.Start(Collector::Mode::kTcp)) << collector_.Log();
  auto sink = OpenSink(Options(false));
  ASSERT_TRUE(sink);
  for (uint64_t i = 1; i <= 100; ++i) ASSERT_TRUE(sink->Write(Event(i)).ok());
  ASSERT_TRUE(WaitFor([&] { return collector_.Ids().size() >= 100; }, 30000))
      << collector_.Ids().size() << " arrived; " << sink->stats().last_error << "\n"
      << collector_.Log();
  EXPECT_TRUE(sink->WaitDrained(30000));
  auto ids = collector_.Ids();
  ASSERT_EQ(ids.size(), 100u);
  for (uint64_t i = 1; i <= 100; ++i) EXPECT_EQ(ids[i - 1], Id(i));
  // The whole JSON event is the message (octet counting kept it whole).
  auto lines = collector_.Lines();
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0].front(), '{') << lines[0];
  EXPECT_EQ(lines[0].back(), '}') << lines[0];
  EXPECT_NE(lines[0].find(std::string(200, 'x')), std::string::npos);
  struct stat st {};
  ASSERT_EQ(::lstat(spool_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
}

TEST_F(RemoteSyslog, TlsWithTheCollectorsCaAndAClientCertificateArrives) {
  ASSERT_TRUE(collector_.MakeCertificates());
  ASSERT_TRUE(collector_.Start(Collector::Mode::kTls, /*client_certs=*/true)) << collector_.Log();
  auto o = Options(true);
  o.cert = collector_.dir() + "/client.pem";
  o.key = collector_.dir() + "/client.key";
  auto sink = OpenSink(o);
  ASSERT_TRUE(sink);
  for (uint64_t i = 1; i <= 50; ++i) ASSERT_TRUE(sink->Write(Event(i)).ok());
  ASSERT_TRUE(WaitFor([&] { return collector_.Ids().size() >= 50; }, 30000))
      << collector_.Ids().size() << " arrived; " << sink->stats().last_error << "\n"
      << collector_.Log();
  auto ids = collector_.Ids();
  ASSERT_EQ(ids.size(), 50u);
  for (uint64_t i = 1; i <= 50; ++i) EXPECT_EQ(ids[i - 1], Id(i));
}

// format: ocsf: each message rsyslog receives is one OCSF object (Network
// Activity, refused), in order, once, its metadata.uid the event's id, and
// the whole event under unmapped.cordon.
TEST_F(RemoteSyslog, OcsfObjectsOverTlsArriveOnceInOrder) {
  ASSERT_TRUE(collector_.MakeCertificates());
  ASSERT_TRUE(collector_.Start(Collector::Mode::kTls)) << collector_.Log();
  auto o = Options(true);
  o.body = SyslogSink::Body::kOcsf;
  auto sink = OpenSink(o);
  ASSERT_TRUE(sink);
  for (uint64_t i = 1; i <= 50; ++i) ASSERT_TRUE(sink->Write(Event(i)).ok());
  ASSERT_TRUE(WaitFor([&] { return collector_.Lines().size() >= 50; }, 30000))
      << collector_.Lines().size() << " arrived; " << sink->stats().last_error << "\n"
      << collector_.Log();
  EXPECT_TRUE(sink->WaitDrained(30000));
  const auto lines = collector_.Lines();
  ASSERT_EQ(lines.size(), 50u);
  for (uint64_t i = 1; i <= 50; ++i) {
    google::protobuf::Struct ocsf;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(lines[i - 1], &ocsf).ok()) << lines[i - 1];
    const auto& f = ocsf.fields();
    ASSERT_TRUE(f.count("class_uid") && f.count("metadata") && f.count("unmapped")) << lines[i - 1];
    EXPECT_EQ(f.at("class_uid").number_value(), 4001) << lines[i - 1];
    EXPECT_EQ(f.at("activity_id").number_value(), 5) << lines[i - 1];
    EXPECT_EQ(f.at("disposition_id").number_value(), 2) << lines[i - 1];
    EXPECT_EQ(f.at("metadata").struct_value().fields().at("uid").string_value(), Id(i));
    const auto& cordon_event = f.at("unmapped").struct_value().fields().at("cordon").struct_value().fields();
    EXPECT_EQ(cordon_event.at("id").string_value(), Id(i));
    EXPECT_EQ(cordon_event.at("reason").string_value(), Event(i).reason());
  }
}

// Negative controls of the TLS checks: a collector whose certificate another
// CA signed, and one whose certificate names another host, get nothing (the
// handshake fails on the agent's side, before a byte of an event is sent);
// the same collector with the sink trusting its CA, or its name, gets them.
TEST_F(RemoteSyslog, ACollectorCertificateFromAnotherCaOrForAnotherHostIsRefused) {
  ASSERT_TRUE(collector_.MakeCertificates("IP:127.0.0.1", "other-ca"));
  ASSERT_TRUE(collector_.Start(Collector::Mode::kTls)) << collector_.Log();
  {
    auto sink = OpenSink(Options(true));
    ASSERT_TRUE(sink);
    for (uint64_t i = 1; i <= 5; ++i) ASSERT_TRUE(sink->Write(Event(i)).ok());
    ASSERT_TRUE(WaitFor([&] { return sink->stats().last_error.find("certificate") != std::string::npos; }, 30000))
        << sink->stats().last_error;
    EXPECT_NE(sink->stats().last_error.find("unable to get local issuer certificate"), std::string::npos)
        << sink->stats().last_error;
    EXPECT_EQ(sink->stats().connects, 0u);
    EXPECT_GT(sink->stats().spooled_bytes, 0u) << "the events stay in the spool";
  }
  EXPECT_TRUE(collector_.Ids().empty());
  {
    // Control: trusting the CA that signed it, the spool's events arrive.
    auto o = Options(true);
    o.ca = collector_.dir() + "/other-ca.pem";
    auto sink = OpenSink(o);
    ASSERT_TRUE(sink);
    ASSERT_TRUE(WaitFor([&] { return collector_.Ids().size() >= 5; }, 30000)) << sink->stats().last_error;
    EXPECT_TRUE(sink->WaitDrained(30000));
  }
  collector_.Stop();
  EXPECT_EQ(Measure(collector_.Ids(), 5).missing, 0u);

  // The right CA, the wrong name: a certificate for DNS:elsewhere.example.
  ASSERT_TRUE(collector_.MakeCertificates("DNS:elsewhere.example", "ca"));
  ASSERT_EQ(::truncate(collector_.received().c_str(), 0), 0);
  ASSERT_TRUE(collector_.Start(Collector::Mode::kTls)) << collector_.Log();
  {
    auto sink = OpenSink(Options(true));
    ASSERT_TRUE(sink);
    ASSERT_TRUE(sink->Write(Event(6)).ok());
    ASSERT_TRUE(WaitFor([&] { return sink->stats().last_error.find("certificate") != std::string::npos; }, 30000))
        << sink->stats().last_error;
    EXPECT_NE(sink->stats().last_error.find("IP address mismatch"), std::string::npos) << sink->stats().last_error;
    EXPECT_EQ(sink->stats().connects, 0u);
  }
  EXPECT_TRUE(collector_.Ids().empty());
}

// The collector is stopped (SIGTERM, rsyslog's orderly shutdown) in the middle
// of a flood and started again on the same port: every event arrives, and
// the first arrival of each is in order. Duplicates are measured, not
// forbidden: the replay window is sent again after the fault (see README
// "Remote syslog": TCP's acknowledgement is not the collector's).
TEST_F(RemoteSyslog, FloodThroughACollectorRestartLosesNothingAndKeepsOrder) {
  ASSERT_TRUE(collector_.MakeCertificates());
  ASSERT_TRUE(collector_.Start(Collector::Mode::kTls)) << collector_.Log();
  auto sink = OpenSink(Options(true));
  ASSERT_TRUE(sink);
  constexpr uint64_t kEvents = 100000;
  // The flood: a writer that stays about 20000 events ahead of what the
  // collector has written (measured by its file's size) until the restart,
  // and then writes the rest at full speed, while the collector is down and
  // after it is back. The sender is thus in the middle of sending when the
  // collector gets SIGTERM (checked below, not assumed).
  std::atomic<uint64_t> written{0};
  std::atomic<bool> paced{true};
  const off_t line_bytes = static_cast<off_t>(Frame(Event(1)).size());
  std::thread writer([&] {
    for (uint64_t i = 1; i <= kEvents; ++i) {
      while (paced && static_cast<uint64_t>(FileSize(collector_.received()) / line_bytes) + 20000 < i)
        std::this_thread::yield();
      if (!sink->Write(Event(i)).ok()) break;
      written = i;
    }
  });
  ASSERT_TRUE(WaitFor([&] { return FileSize(collector_.received()) / line_bytes >= 30000; }, 120000))
      << sink->stats().last_error;
  paced = false;
  const uint64_t written_at_stop = written;
  collector_.Stop();
  const size_t before_restart = collector_.Ids().size();
  ASSERT_TRUE(collector_.Start(Collector::Mode::kTls)) << collector_.Log();
  writer.join();
  ASSERT_EQ(written, kEvents);
  EXPECT_LT(before_restart, written_at_stop) << "the collector stopped in the middle of the flood";
  ASSERT_TRUE(WaitFor([&] { return Measure(collector_.Ids(), kEvents).missing == 0; }, 180000))
      << Measure(collector_.Ids(), kEvents).missing << " missing, first "
      << Measure(collector_.Ids(), kEvents).first_missing << "; " << sink->stats().last_error;
  EXPECT_TRUE(sink->WaitDrained(60000));
  EXPECT_GE(sink->stats().connects, 2u);
  collector_.Stop();
  Arrival a = Measure(collector_.Ids(), kEvents);
  EXPECT_EQ(a.missing, 0u) << "first missing " << a.first_missing;
  EXPECT_EQ(a.out_of_order, 0u);
  EXPECT_EQ(a.losses, 0u);
  RecordProperty("arrived_before_restart", std::to_string(before_restart));
  RecordProperty("duplicates", std::to_string(a.duplicates));
  std::printf(
      "flood of %llu events through a collector restart (stopped with %llu written, %zu had arrived): %llu "
      "missing, %llu out of order, %llu duplicates\n",
      static_cast<unsigned long long>(kEvents), static_cast<unsigned long long>(written_at_stop), before_restart,
      static_cast<unsigned long long>(a.missing), static_cast<unsigned long long>(a.out_of_order),
      static_cast<unsigned long long>(a.duplicates));
}

// While the collector is down the spool fills: later events are dropped and
// counted, and once the collector is back a loss record with that count
// arrives where the gap is: after the last event kept, before the next one.
TEST_F(RemoteSyslog, SpoolOverflowIsCountedAndReportedAsALossRecordInPlace) {
  auto o = Options(false);
  o.spool_max_bytes = 1 << 20;
  o.replay_bytes = 64 << 10;
  auto sink = OpenSink(o);
  ASSERT_TRUE(sink);
  uint64_t seq = 0, kept = 0;
  while (sink->stats().dropped == 0 && seq < 100000)
    if (sink->Write(Event(++seq)).ok()) kept = seq;
  ASSERT_GT(sink->stats().dropped, 0u);
  for (int i = 0; i < 99; ++i) EXPECT_FALSE(sink->Write(Event(++seq)).ok());
  EXPECT_EQ(sink->stats().dropped, 100u);
  EXPECT_EQ(sink->stats().loss_pending, 100u);

  ASSERT_TRUE(collector_.Start(Collector::Mode::kTcp)) << collector_.Log();
  ASSERT_TRUE(WaitFor([&] { return collector_.Ids().size() >= kept + 1; }, 60000))
      << collector_.Ids().size() << "; " << sink->stats().last_error;
  ASSERT_TRUE(sink->Write(Event(++seq)).ok());
  const uint64_t after = seq;
  ASSERT_TRUE(WaitFor([&] { return collector_.Ids().size() >= kept + 2; }, 60000));
  EXPECT_TRUE(sink->WaitDrained(30000));
  EXPECT_EQ(sink->stats().loss_pending, 0u);
  collector_.Stop();
  auto ids = collector_.Ids();
  ASSERT_EQ(ids.size(), kept + 2);
  for (uint64_t i = 1; i <= kept; ++i) ASSERT_EQ(ids[i - 1], Id(i));
  EXPECT_EQ(ids[kept], "loss");
  EXPECT_EQ(ids[kept + 1], Id(after));
  auto lines = collector_.Lines();
  ASSERT_EQ(lines.size(), kept + 2);
  EXPECT_NE(lines[kept].find("\"dropped\":\"100\""), std::string::npos) << lines[kept];
  EXPECT_NE(lines[kept].find("100 events lost: the remote syslog spool was full"), std::string::npos) << lines[kept];
}

// The agent stops with events still in the spool (the collector down); the
// next agent's sink sends them once the collector is up, in order, once.
TEST_F(RemoteSyslog, ASpoolLeftByAStoppedAgentIsReplayedByTheNext) {
  auto o = Options(false);
  {
    auto sink = OpenSink(o);
    ASSERT_TRUE(sink);
    for (uint64_t i = 1; i <= 500; ++i) ASSERT_TRUE(sink->Write(Event(i)).ok());
    EXPECT_GT(sink->stats().spooled_bytes, 0u);
  }
  auto sink = OpenSink(o);
  ASSERT_TRUE(sink);
  EXPECT_GT(sink->stats().spooled_bytes, 0u) << "the spool survived";
  ASSERT_TRUE(collector_.Start(Collector::Mode::kTcp)) << collector_.Log();
  for (uint64_t i = 501; i <= 510; ++i) ASSERT_TRUE(sink->Write(Event(i)).ok());
  ASSERT_TRUE(WaitFor([&] { return collector_.Ids().size() >= 510; }, 60000))
      << collector_.Ids().size() << "; " << sink->stats().last_error;
  EXPECT_TRUE(sink->WaitDrained(30000));
  collector_.Stop();
  auto ids = collector_.Ids();
  ASSERT_EQ(ids.size(), 510u);
  for (uint64_t i = 1; i <= 510; ++i) ASSERT_EQ(ids[i - 1], Id(i));
}

// An agent killed in the middle of an append leaves half a frame at the
// spool's end: the next one cuts it off and sends the whole frames before it.
TEST_F(RemoteSyslog, AFrameTornAtTheSpoolsEndIsCutOff) {
  {
    auto sink = OpenSink(Options(false));
    ASSERT_TRUE(sink);
    for (uint64_t i = 1; i <= 3; ++i) ASSERT_TRUE(sink->Write(Event(i)).ok());
  }
  std::string segment = spool_ + "/seg-00000000000000000000";
  {
    std::ofstream torn(segment, std::ios::app);
    torn << "900 <85>1 2026-01-01T00:00:00Z host cordon 1 net.connect - {\"id\":\"7-4\"";
  }
  const off_t torn_size = FileSize(segment);
  auto sink = OpenSink(Options(false));
  ASSERT_TRUE(sink);
  EXPECT_LT(FileSize(segment), torn_size);
  ASSERT_TRUE(collector_.Start(Collector::Mode::kTcp)) << collector_.Log();
  ASSERT_TRUE(sink->Write(Event(5)).ok());
  ASSERT_TRUE(WaitFor([&] { return collector_.Ids().size() >= 4; }, 30000)) << sink->stats().last_error;
  EXPECT_TRUE(sink->WaitDrained(30000));
  collector_.Stop();
  EXPECT_EQ(collector_.Ids(), (std::vector<std::string>{Id(1), Id(2), Id(3), Id(5)}));
}

// A segment that is not what the agent wrote (damaged on disk) does not stop
// the sink: the rest of it is skipped, said in its error, and what follows
// arrives in order. Control: the segments after it, whole.
TEST_F(RemoteSyslog, ADamagedSpoolSegmentIsSkippedAndTheRestSent) {
  auto o = Options(false);
  o.spool_max_bytes = 1 << 20;  // segments of 128 KiB
  uint64_t n = 0;
  {
    auto sink = OpenSink(o);
    ASSERT_TRUE(sink);
    while (FileSize(spool_ + "/seg-00000000000000000002") == 0) ASSERT_TRUE(sink->Write(Event(++n)).ok());
  }
  const std::string first = spool_ + "/seg-00000000000000000000";
  {
    int fd = ::open(first.c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, "garbage!", 8, 0), 8);
    ::close(fd);
  }
  auto sink = OpenSink(o);
  ASSERT_TRUE(sink);
  ASSERT_TRUE(collector_.Start(Collector::Mode::kTcp)) << collector_.Log();
  ASSERT_TRUE(WaitFor(
      [&] {
        auto ids = collector_.Ids();
        return !ids.empty() && ids.back() == Id(n);
      },
      30000))
      << sink->stats().last_error;
  EXPECT_NE(sink->stats().last_error.find("is damaged at offset 0"), std::string::npos) << sink->stats().last_error;
  EXPECT_TRUE(sink->WaitDrained(30000));
  collector_.Stop();
  auto ids = collector_.Ids();
  ASSERT_FALSE(ids.empty());
  const uint64_t from = std::stoull(ids[0].substr(2));
  EXPECT_GT(from, 1u) << "the damaged segment's frames are not sent";
  ASSERT_EQ(ids.size(), n - from + 1);
  for (uint64_t i = from; i <= n; ++i) EXPECT_EQ(ids[i - from], Id(i));
}

// A spool directory others could write to (or a symlink) is refused: frames
// planted there would be sent as the agent's.
TEST_F(RemoteSyslog, ASpoolDirectoryOthersCanWriteOrASymlinkIsRefused) {
  ASSERT_EQ(::mkdir(spool_.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(spool_.c_str(), 0777), 0);
  auto sink = RemoteSyslogSink::Open(Options(false));
  ASSERT_FALSE(sink.ok());
  EXPECT_NE(sink.error().ToString().find("writable by group or others (mode 0777; refused)"), std::string::npos)
      << sink.error().ToString();
  ASSERT_EQ(::chmod(spool_.c_str(), 0700), 0);
  std::string link = collector_.dir() + "/spool-link";
  ASSERT_EQ(::symlink(spool_.c_str(), link.c_str()), 0);
  auto o = Options(false);
  o.spool_dir = link;
  sink = RemoteSyslogSink::Open(o);
  ASSERT_FALSE(sink.ok());
  EXPECT_NE(sink.error().ToString().find("is a symlink (refused)"), std::string::npos) << sink.error().ToString();
  // Control: the same directory, 0700, is used.
  EXPECT_TRUE(RemoteSyslogSink::Open(Options(false)).ok());
}

}  // namespace
}  // namespace cordon
