#include "agent/tail_server.h"

#include <linux/sockios.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "agent/log.h"
#include "events/wire.h"
#include "util/clock.h"

namespace cordon::agent {

namespace v1 = cordon::v1;

namespace {
constexpr int64_t kCloseDeadlineNs = 5000000000;      // a closing client gets this long to take its last frame
constexpr int64_t kEndDeadlineNs = 60 * 1000000000ll;  // ... and a tail that ended, this long
constexpr int64_t kRefuseDeadlineNs = 1000000000;      // ... and one refused (a deadline, the budget), this long
constexpr size_t kMaxUnreadReplies = 256;  // replies (and notices) queued for a client beyond its socket buffer
constexpr size_t kClientFlushFrames = 64;  // queued tail frames that are sent at once, not at the batch's end
}  // namespace

// The length prefix, TailFrame.event's tag and length, the event.
std::shared_ptr<const std::string> EventFrame(const v1::AuditEvent& event) {
  thread_local std::string body;
  body.clear();
  AppendWireEvent(event, &body);
  char head[16];
  size_t n = 4;
  head[n++] = 0x0a;  // TailFrame.event: field 1, length-delimited
  for (uint64_t v = body.size();; v >>= 7) {
    if (v < 0x80) {
      head[n++] = static_cast<char>(v);
      break;
    }
    head[n++] = static_cast<char>(v | 0x80);
  }
  const uint32_t len = static_cast<uint32_t>(n - 4 + body.size());
  head[0] = static_cast<char>(len >> 24);
  head[1] = static_cast<char>(len >> 16);
  head[2] = static_cast<char>(len >> 8);
  head[3] = static_cast<char>(len);
  auto frame = std::make_shared<std::string>();
  frame->reserve(n + body.size());
  frame->append(head, n);
  frame->append(body);
  return frame;
}

TailServer::TailServer(int epoll_fd, EpollKey epoll_key, TailLimits limits, RequestHandler handler)
    : epoll_fd_(epoll_fd), epoll_key_(std::move(epoll_key)), limits_(limits), handler_(std::move(handler)) {}

Client& TailServer::Add(UniqueFd fd, uint32_t pid) {
  auto c = std::make_unique<Client>();
  c->key = next_key_++;
  c->pid = pid;
  socklen_t sl = sizeof c->sndbuf;
  if (::getsockopt(fd.get(), SOL_SOCKET, SO_SNDBUF, &c->sndbuf, &sl) != 0) c->sndbuf = 212992;
  c->fd = std::move(fd);
  c->idle_since_ns = MonoNs();
  struct epoll_event ev = {};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.u64 = epoll_key_(c->key);
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c->fd.get(), &ev);
  Client& added = *c;
  clients_[c->key] = std::move(c);
  return added;
}

void TailServer::OnReady(uint64_t client_key, uint32_t events) {
  auto it = clients_.find(client_key);
  if (it == clients_.end() || it->second->dead) return;
  Client& c = *it->second;
  if (events & EPOLLOUT) Flush(c);
  if (c.dead) return;
  // A busy client is not read; a hangup or error on it (reported whatever
  // the interest) closes it: its request still completes, unanswered.
  if (c.busy) {
    if (events & (EPOLLHUP | EPOLLERR)) Kill(c);
    return;
  }
  if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) OnReadable(c);
}

void TailServer::Kill(Client& c) {
  if (c.dead) return;
  c.dead = true;
  c.gone->store(true);
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd.get(), nullptr);
  c.fd.Reset();
  c.out.clear();
  c.event_frames = 0;
  Release(c);
  std::string().swap(c.in);
}

void TailServer::Release(Client& c) {
  partial_bytes_ -= c.reserved;
  c.reserved = 0;
}

bool TailServer::Reserve(Client& c) {
  if (c.reserved) return true;  // this frame is counted already
  const auto* p = reinterpret_cast<const unsigned char*>(c.in.data());
  const uint32_t n = (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
  const size_t announced = 4 + static_cast<size_t>(n);
  if (partial_bytes_ + announced > limits_.partial_frames_max_bytes) {
    over_budget_++;
    Refuse(c, "agent busy: request frames still arriving or waiting to be compiled would exceed the agent's budget (" +
                  std::to_string(partial_bytes_ >> 20) + " of " +
                  std::to_string(limits_.partial_frames_max_bytes >> 20) + " MiB in use; this frame announces " +
                  std::to_string(announced >> 10) + " KiB; control.partialFramesMaxBytes); try again");
    return false;
  }
  c.reserved = announced;
  partial_bytes_ += announced;
  // The whole frame is allowed for now: one allocation, not a doubling
  // string that holds up to twice the frame.
  if (c.in.capacity() < announced) c.in.reserve(announced);
  return true;
}

void TailServer::Refuse(Client& c, const std::string& reason) {
  if (c.dead) return;
  Release(c);
  std::string().swap(c.in);
  c.frame_started_ns = 0;
  refusals_.Log("control connection of pid " + std::to_string(c.pid) + " closed: " + reason);
  c.closing = true;
  c.close_deadline = MonoNs() + kRefuseDeadlineNs;
  v1::Response r;
  r.set_error(reason);
  Reply(c, r);
}

void TailServer::Reap() {
  for (auto it = clients_.begin(); it != clients_.end();) it = it->second->dead ? clients_.erase(it) : std::next(it);
}

void TailServer::SetWantOut(Client& c, bool want) {
  if (c.want_out == want) return;
  c.want_out = want;
  Watch(c);
}

void TailServer::Watch(Client& c) {
  if (c.dead) return;
  struct epoll_event ev = {};
  ev.events =
      (c.busy ? 0u : static_cast<uint32_t>(EPOLLIN | EPOLLRDHUP)) | (c.want_out ? static_cast<uint32_t>(EPOLLOUT) : 0u);
  ev.data.u64 = epoll_key_(c.key);
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd.get(), &ev);
}

Client* TailServer::Find(uint64_t key) {
  auto it = clients_.find(key);
  return it == clients_.end() || it->second->dead ? nullptr : it->second.get();
}

void TailServer::SetBusy(Client& c, bool busy) {
  if (c.dead || c.busy == busy) return;
  c.busy = busy;
  Watch(c);
  if (busy) return;
  const int64_t now = MonoNs();
  c.idle_since_ns = now;
  c.frame_started_ns = c.in.empty() ? 0 : now;
  Dispatch(c, now);
  if (!c.dead) OnReadable(c);  // what arrived meanwhile (level-triggered epoll would say so too)
}

void TailServer::Flush(Client& c) {
  if (c.dead) return;
  c.unflushed = 0;
  constexpr size_t kMaxIov = 256;
  struct iovec iov[kMaxIov];
  while (!c.out.empty()) {
    OutFrame& f = c.out.front();
    ssize_t n;
    if (c.out_off == 0 && !f.fds.empty()) {
      // A frame with file descriptors goes alone, with them.
      const std::string& data = *f.data;
      struct iovec one = {const_cast<char*>(data.data()), data.size()};
      std::vector<char> control(CMSG_SPACE(sizeof(int) * f.fds.size()));
      struct msghdr msg = {};
      msg.msg_iov = &one;
      msg.msg_iovlen = 1;
      msg.msg_control = control.data();
      msg.msg_controllen = control.size();
      struct cmsghdr* cm = CMSG_FIRSTHDR(&msg);
      cm->cmsg_level = SOL_SOCKET;
      cm->cmsg_type = SCM_RIGHTS;
      cm->cmsg_len = CMSG_LEN(sizeof(int) * f.fds.size());
      for (size_t i = 0; i < f.fds.size(); ++i) {
        int raw = f.fds[i].get();
        std::memcpy(CMSG_DATA(cm) + i * sizeof(int), &raw, sizeof raw);
      }
      n = ::sendmsg(c.fd.get(), &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) f.fds.clear();
    } else {
      // Frames from the front, gathered into one sendmsg(). Event frames may
      // fill only half the socket buffer: the rest is kept for notices, so a
      // tailer that stopped reading still gets told why it was cut off when
      // it reads again. (A frame already begun is always finished.)
      int outq = -1;
      size_t gathered = 0, bytes = 0;
      for (size_t i = 0; i < c.out.size() && gathered < kMaxIov; ++i) {
        OutFrame& g = c.out[i];
        const size_t off = i == 0 ? c.out_off : 0;
        if (off == 0 && !g.fds.empty()) break;
        if (g.event && off == 0) {
          if (outq < 0 && ::ioctl(c.fd.get(), SIOCOUTQ, &outq) != 0) outq = 0;
          if (static_cast<size_t>(outq) + bytes >= static_cast<size_t>(c.sndbuf / 2)) break;
        }
        iov[gathered++] = {const_cast<char*>(g.data->data() + off), g.data->size() - off};
        bytes += g.data->size() - off;
      }
      if (gathered == 0) {
        SetWantOut(c, true);
        return;
      }
      struct msghdr msg = {};
      msg.msg_iov = iov;
      msg.msg_iovlen = gathered;
      n = ::sendmsg(c.fd.get(), &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        SetWantOut(c, true);
        return;
      }
      Kill(c);  // the peer is gone
      return;
    }
    // Retire what went out.
    size_t sent = static_cast<size_t>(n);
    while (!c.out.empty()) {
      OutFrame& g = c.out.front();
      const size_t left = g.data->size() - c.out_off;
      if (sent < left) {
        c.out_off += sent;
        break;
      }
      sent -= left;
      if (g.event) {
        c.event_frames--;
        c.sent++;
      }
      c.out.pop_front();
      c.out_off = 0;
      if (sent == 0) break;
    }
  }
  SetWantOut(c, false);
  if (c.closing) Kill(c);
}

void TailServer::Push(Client& c, std::shared_ptr<const std::string> data, bool event, std::vector<UniqueFd> fds) {
  OutFrame f;
  f.data = std::move(data);
  f.event = event;
  f.fds = std::move(fds);
  c.out.push_back(std::move(f));
  if (event) c.event_frames++;
}

void TailServer::PushNotice(Client& c, const v1::TailFrame& notice) {
  Push(c, std::make_shared<const std::string>(EncodeFrame(notice)), false);
}

void TailServer::Reply(Client& c, const v1::Response& response, std::vector<UniqueFd> fds) {
  std::string frame;
  if (c.tail) {
    v1::TailFrame tf;
    *tf.mutable_response() = response;
    frame = EncodeFrame(tf);
  } else {
    frame = EncodeFrame(response);
  }
  Push(c, std::make_shared<const std::string>(std::move(frame)), false, std::move(fds));
  Flush(c);
  // A client that sends requests but does not read the replies would have
  // them pile up here without bound: past kMaxUnreadReplies it is closed.
  // (A tail's queue is bounded by tail.queueEvents.)
  if (!c.dead && !c.tail && c.out.size() > kMaxUnreadReplies) {
    refusals_.Log("control connection of pid " + std::to_string(c.pid) + " closed: more than " +
                  std::to_string(kMaxUnreadReplies) + " replies it does not read");
    unread_++;
    Kill(c);
  }
}

void TailServer::StartTail(Client& c, TailFilter filter) {
  c.filter = std::move(filter);
  c.tail = true;
}

void TailServer::EndTail(Client& c) {
  if (c.dead) return;
  v1::TailFrame tf;
  tf.mutable_notice()->set_end(true);
  tf.mutable_notice()->set_dropped(c.dropped_unreported);
  tf.mutable_notice()->set_dropped_total(c.dropped);
  PushNotice(c, tf);
  c.closing = true;
  c.close_deadline = MonoNs() + kEndDeadlineNs;
  Flush(c);
}

void TailServer::Broadcast(const v1::AuditEvent& event) {
  std::shared_ptr<const std::string> frame;
  for (auto& [key, c] : clients_) {
    if (c->dead || !c->tail || c->closing || !TailMatches(event, c->filter)) continue;
    if (!frame) frame = EventFrame(event);
    Enqueue(*c, frame);
  }
}

void TailServer::Enqueue(Client& c, const std::shared_ptr<const std::string>& frame) {
  if (c.event_frames >= limits_.queue_events) {
    c.dropped++;
    c.dropped_unreported++;
    drops_++;
    if (limits_.disconnect_after_dropped && c.dropped >= limits_.disconnect_after_dropped)
      Disconnect(c, "fell too far behind: " + std::to_string(c.dropped) + " events dropped (tail.disconnectAfterDropped = " +
                        std::to_string(limits_.disconnect_after_dropped) + ")");
    return;
  }
  if (c.dropped_unreported) {
    v1::TailFrame tf;
    tf.mutable_notice()->set_dropped(c.dropped_unreported);
    tf.mutable_notice()->set_dropped_total(c.dropped);
    PushNotice(c, tf);
    c.dropped_unreported = 0;
  }
  Push(c, frame, true);
  // Sent in bunches: at the end of the batch (FlushAll), or now when a
  // bunch has gathered (or half the queue bound, so the bound keeps its
  // meaning for a reading tailer); while the socket is full, EPOLLOUT will.
  if (!c.want_out && ++c.unflushed >= std::min<size_t>(kClientFlushFrames, std::max<size_t>(1, limits_.queue_events / 2)))
    Flush(c);
}

void TailServer::FlushAll() {
  for (auto& [key, c] : clients_)
    if (!c->dead && c->unflushed && !c->want_out) Flush(*c);
}

void TailServer::Disconnect(Client& c, const std::string& reason) {
  // Frames not yet begun are discarded (and counted); a frame half-written
  // is finished so the stream stays parseable; then the reason.
  std::deque<OutFrame> keep;
  uint64_t discarded = 0;
  for (size_t i = 0; i < c.out.size(); ++i) {
    if (i == 0 && c.out_off > 0) {
      keep.push_back(std::move(c.out[i]));
      continue;
    }
    if (c.out[i].event) discarded++;
  }
  c.out = std::move(keep);
  c.event_frames = !c.out.empty() && c.out.front().event ? 1 : 0;
  c.dropped += discarded;
  drops_ += discarded;
  disconnected_++;
  v1::TailFrame tf;
  tf.mutable_notice()->set_dropped(c.dropped_unreported + discarded);
  tf.mutable_notice()->set_dropped_total(c.dropped);
  tf.mutable_notice()->set_disconnect_reason(reason);
  c.dropped_unreported = 0;
  PushNotice(c, tf);
  c.closing = true;
  c.close_deadline = MonoNs() + kCloseDeadlineNs;
  Log("tail of pid " + std::to_string(c.pid) + " disconnected: " + reason);
  Flush(c);
}

void TailServer::ExpireClosing(int64_t now_ns) {
  for (auto& [key, cp] : clients_) {
    Client& c = *cp;
    if (c.dead) continue;
    if (c.closing) {
      if (now_ns >= c.close_deadline) Kill(c);
      continue;
    }
    // Total deadlines: the bytes of a trickled frame do not extend them.
    if (c.busy) continue;  // its request is being prepared; what it sent next is not read yet
    if (c.frame_started_ns && now_ns - c.frame_started_ns >= limits_.request_timeout_ns) {
      timed_out_++;
      Refuse(c, "the request did not arrive whole within " + std::to_string(limits_.request_timeout_ns / 1000000) +
                    " ms of its first byte (control.requestTimeoutMs)");
    } else if (!c.tail && !c.busy && !c.frame_started_ns && now_ns - c.idle_since_ns >= limits_.idle_timeout_ns) {
      timed_out_++;
      Refuse(c, "idle for " + std::to_string(limits_.idle_timeout_ns / 1000000) +
                    " ms without a request (control.idleTimeoutMs)");
    }
  }
}

void TailServer::OnReadable(Client& c) {
  char buf[65536];
  while (!c.dead && !c.busy) {
    ssize_t n = ::recv(c.fd.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) Kill(c);
      return;
    }
    if (n == 0) {
      Kill(c);  // the client is done (queued frames have no reader any more)
      return;
    }
    if (c.closing) continue;  // requests after the end are ignored
    const int64_t now = MonoNs();
    if (c.in.empty()) c.frame_started_ns = now;
    c.in.append(buf, static_cast<size_t>(n));
    Dispatch(c, now);
    if (c.dead || c.closing || c.busy) continue;
    if (c.in.empty()) {
      if (c.in.capacity() > sizeof buf) std::string().swap(c.in);  // a large frame's buffer goes back
    } else if (c.in.size() >= 4 && !Reserve(c)) {
      return;
    }
  }
}

void TailServer::Dispatch(Client& c, int64_t now) {
  std::string payload;
  while (!c.dead && !c.closing && !c.busy) {
    int got = TakeFrame(&c.in, &payload);
    if (got < 0) {
      Refuse(c, "request frame larger than " + std::to_string(kMaxFrameBytes >> 20) + " MiB");
      return;
    }
    if (got == 0) break;
    Release(c);
    c.idle_since_ns = now;
    c.frame_started_ns = c.in.empty() ? 0 : now;
    handler_(c, payload);
  }
}

void TailServer::Shutdown() {
  for (auto& [key, cp] : clients_) {
    Client& c = *cp;
    if (c.dead) continue;
    if (c.tail && !c.closing) {
      v1::TailFrame tf;
      tf.mutable_notice()->set_dropped(c.dropped_unreported);
      tf.mutable_notice()->set_dropped_total(c.dropped);
      tf.mutable_notice()->set_disconnect_reason("the agent is shutting down");
      PushNotice(c, tf);
      c.closing = true;
    }
    Flush(c);
  }
  clients_.clear();
}

}  // namespace cordon::agent
