// The agent's tail server without a kernel: real sockets (socketpairs whose
// far ends are the test's tails), a real epoll set, and no clock. A tail that
// stops reading is cut off after its queue overflowed; the others get every
// event; every event is either received or counted as dropped.
#include <gtest/gtest.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <string>
#include <vector>

#include "agent/control.h"
#include "agent/tail_server.h"

namespace cordon::agent {
namespace {

namespace v1 = cordon::v1;

// One end for the server, the other for the test, which reads it (or not).
struct Connection {
  UniqueFd server_end;
  UniqueFd tail_end;
};

Connection Connect(int sndbuf = 0) {
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
  Connection c{UniqueFd(fds[0]), UniqueFd(fds[1])};
  // A small socket buffer: a stalled reader fills it after a few events.
  if (sndbuf) {
    EXPECT_EQ(::setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf), 0);
  }
  return c;
}

v1::AuditEvent Event(uint32_t seq) {
  v1::AuditEvent e;
  e.set_kind("net.connect");
  e.set_sandbox("build");
  e.set_sandbox_cgroup_id(7);
  e.set_verdict("denied");
  e.set_pid(seq);  // the order is checked on this
  e.set_reason("connect to 192.0.2.1:443 denied by the sandbox's policy");
  return e;
}

// What a tail's end received: its frames, and whether the server closed it.
struct Received {
  std::string bytes;
  bool closed = false;
  std::vector<v1::TailFrame> frames;

  void ReadFrom(int fd) {
    char buf[65536];
    for (;;) {
      ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) {
        bytes.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n == 0) closed = true;
      break;
    }
    std::string payload;
    while (TakeFrame(&bytes, &payload) == 1) {
      v1::TailFrame tf;
      EXPECT_TRUE(tf.ParseFromString(payload));
      frames.push_back(tf);
    }
  }
  std::vector<uint32_t> EventSeqs() const {
    std::vector<uint32_t> out;
    for (const auto& f : frames)
      if (f.has_event()) out.push_back(f.event().pid());
    return out;
  }
};

class TailServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    epoll_ = UniqueFd(::epoll_create1(EPOLL_CLOEXEC));
    ASSERT_TRUE(epoll_.valid());
  }
  void Make(TailLimits limits) {
    server_.emplace(epoll_.get(), [](uint64_t key) { return key; }, limits,
                    [this](Client& c, const std::string& payload) { requests_.push_back({c.key, payload}); });
  }
  // One turn of the agent's loop for the clients: readiness, then what is queued.
  void Turn() {
    struct epoll_event evs[16];
    int n = ::epoll_wait(epoll_.get(), evs, 16, 0);
    for (int i = 0; i < n; ++i) server_->OnReady(evs[i].data.u64, evs[i].events);
    server_->FlushAll();
  }

  UniqueFd epoll_;
  std::optional<TailServer> server_;
  std::vector<std::pair<uint64_t, std::string>> requests_;
};

TEST_F(TailServerTest, StalledTailIsCutOffAndTheOtherGetsEverything) {
  Make(TailLimits{100, 50});
  Connection stalled = Connect(4096), reading = Connect();
  Client& s = server_->Add(std::move(stalled.server_end), 101);
  Client& r = server_->Add(std::move(reading.server_end), 102);
  server_->StartTail(s, {});
  server_->StartTail(r, {});

  constexpr uint32_t kEvents = 3000;
  uint32_t cut_at = 0;  // events broadcast when the stalled tail was cut off
  Received got;
  for (uint32_t seq = 0; seq < kEvents; ++seq) {
    server_->Broadcast(Event(seq));
    got.ReadFrom(reading.tail_end.get());
    Turn();
    if (!cut_at && s.closing) cut_at = seq + 1;
  }
  for (int i = 0; i < 1000 && !r.out.empty(); ++i) {
    got.ReadFrom(reading.tail_end.get());
    Turn();
  }
  got.ReadFrom(reading.tail_end.get());

  // The reading tail: every event, in order, and no notice of drops.
  std::vector<uint32_t> seqs = got.EventSeqs();
  ASSERT_EQ(seqs.size(), kEvents);
  for (uint32_t i = 0; i < kEvents; ++i) ASSERT_EQ(seqs[i], i);
  for (const auto& f : got.frames) EXPECT_FALSE(f.has_notice()) << f.notice().ShortDebugString();
  EXPECT_EQ(r.dropped, 0u);
  EXPECT_FALSE(got.closed);

  // The stalled one: cut off once its queue was full and 50 more events
  // did not fit. What it reads now: what was sent before, then why it was
  // cut off, then the end of the stream.
  ASSERT_GT(cut_at, 0u) << "the stalled tail was never cut off";
  Received late;
  for (int i = 0; i < 100 && !late.closed; ++i) {
    late.ReadFrom(stalled.tail_end.get());
    Turn();
  }
  EXPECT_TRUE(late.closed);
  EXPECT_TRUE(s.dead) << "closed once its last frame was written";
  ASSERT_FALSE(late.frames.empty());
  const v1::TailFrame& last = late.frames.back();
  ASSERT_TRUE(last.has_notice());
  EXPECT_EQ(last.notice().disconnect_reason(),
            "fell too far behind: 50 events dropped (tail.disconnectAfterDropped = 50)");
  std::vector<uint32_t> before = late.EventSeqs();
  ASSERT_FALSE(before.empty());
  for (uint32_t i = 0; i < before.size(); ++i) ASSERT_EQ(before[i], i) << "in order, none skipped";
  EXPECT_EQ(late.frames.size(), before.size() + 1) << "events, then the one notice";
  // Accounting: each event meant for it was received or counted as dropped.
  EXPECT_EQ(before.size() + last.notice().dropped_total(), cut_at);
  EXPECT_EQ(last.notice().dropped(), last.notice().dropped_total());
  EXPECT_EQ(server_->drops(), last.notice().dropped_total());
  EXPECT_EQ(server_->disconnected(), 1u);
  server_->Reap();
  EXPECT_EQ(server_->clients().size(), 1u);
}

TEST_F(TailServerTest, LaggingTailIsToldWhatItMissedAndCarriesOn) {
  Make(TailLimits{20, 0});  // never cut off
  Connection lagging = Connect(4096);
  Client& c = server_->Add(std::move(lagging.server_end), 7);
  server_->StartTail(c, {});
  constexpr uint32_t kEvents = 500;
  for (uint32_t seq = 0; seq < kEvents; ++seq) {
    server_->Broadcast(Event(seq));
    Turn();
  }
  EXPECT_EQ(c.event_frames, 20u) << "the queue holds its bound, no more";
  EXPECT_GT(c.dropped, 0u);
  // It reads again: what was queued arrives (EPOLLOUT), then the next event
  // comes after a notice of what it missed.
  Received got;
  for (int i = 0; i < 1000 && !c.out.empty(); ++i) {
    got.ReadFrom(lagging.tail_end.get());
    Turn();
  }
  ASSERT_TRUE(c.out.empty());
  got.ReadFrom(lagging.tail_end.get());
  server_->Broadcast(Event(kEvents));
  for (int i = 0; i < 1000 && !c.out.empty(); ++i) {
    Turn();
    got.ReadFrom(lagging.tail_end.get());
  }

  ASSERT_GE(got.frames.size(), 3u);
  const v1::TailFrame& notice = got.frames[got.frames.size() - 2];
  ASSERT_TRUE(notice.has_notice());
  EXPECT_TRUE(notice.notice().disconnect_reason().empty());
  ASSERT_TRUE(got.frames.back().has_event());
  EXPECT_EQ(got.frames.back().event().pid(), kEvents);
  std::vector<uint32_t> seqs = got.EventSeqs();
  const uint64_t received_before = seqs.size() - 1;
  for (uint32_t i = 0; i < received_before; ++i) ASSERT_EQ(seqs[i], i);
  EXPECT_EQ(received_before + notice.notice().dropped(), kEvents);
  EXPECT_EQ(notice.notice().dropped_total(), notice.notice().dropped());
  EXPECT_EQ(server_->drops(), notice.notice().dropped());
  EXPECT_EQ(server_->disconnected(), 0u);
  EXPECT_FALSE(got.closed);
}

TEST_F(TailServerTest, FiltersAndRequests) {
  Make(TailLimits{});
  Connection other = Connect(), plain = Connect();
  Client& t = server_->Add(std::move(other.server_end), 1);
  TailFilter filter;
  filter.sandbox_name = "other";
  server_->StartTail(t, filter);
  Client& p = server_->Add(std::move(plain.server_end), 2);  // not a tail
  server_->Broadcast(Event(1));
  server_->FlushAll();
  EXPECT_EQ(t.sent, 0u) << "another sandbox's event";
  EXPECT_TRUE(p.out.empty());

  // A request frame reaches the handler whole, even in two pieces.
  v1::Request request;
  request.mutable_status();
  const std::string frame = EncodeFrame(request);
  ASSERT_EQ(::write(plain.tail_end.get(), frame.data(), 2), 2);
  Turn();
  EXPECT_TRUE(requests_.empty());
  ASSERT_EQ(::write(plain.tail_end.get(), frame.data() + 2, frame.size() - 2),
            static_cast<ssize_t>(frame.size() - 2));
  Turn();
  ASSERT_EQ(requests_.size(), 1u);
  EXPECT_EQ(requests_[0].first, p.key);
  v1::Request back;
  ASSERT_TRUE(back.ParseFromString(requests_[0].second));
  EXPECT_TRUE(back.has_status());

  // A reply is a bare Response on a plain connection, a TailFrame on a tail.
  v1::Response response;
  response.add_notes("hello");
  server_->Reply(p, response);
  server_->Reply(t, response);
  std::string bytes(65536, '\0'), payload;
  ssize_t n = ::recv(plain.tail_end.get(), bytes.data(), bytes.size(), MSG_DONTWAIT);
  ASSERT_GT(n, 0);
  bytes.resize(static_cast<size_t>(n));
  ASSERT_EQ(TakeFrame(&bytes, &payload), 1);
  v1::Response plain_reply;
  ASSERT_TRUE(plain_reply.ParseFromString(payload));
  EXPECT_EQ(plain_reply.notes(0), "hello");
  Received tail_got;
  tail_got.ReadFrom(other.tail_end.get());
  ASSERT_EQ(tail_got.frames.size(), 1u);
  ASSERT_TRUE(tail_got.frames[0].has_response());
  EXPECT_EQ(tail_got.frames[0].response().notes(0), "hello");

  // A tail that does not follow ends with a notice, and is closed.
  server_->EndTail(t);
  tail_got.ReadFrom(other.tail_end.get());
  ASSERT_EQ(tail_got.frames.size(), 2u);
  EXPECT_TRUE(tail_got.frames[1].notice().end());
  EXPECT_TRUE(tail_got.closed);

  // The client hangs up: closed and reaped.
  plain.tail_end.Reset();
  Turn();
  EXPECT_TRUE(p.dead);
  server_->Reap();
  EXPECT_TRUE(server_->clients().empty());
}

}  // namespace
}  // namespace cordon::agent
