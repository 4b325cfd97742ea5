// The clients of the agent's control socket: request frames in, replies
// and tail frames out. Every connection is a client here; a tail is one that
// asked for events (StartTail), which then get broadcast to it.
//
// Backpressure: a tail's queue holds at most limits.queue_events event
// frames; beyond that its events are dropped and counted (and it is told so,
// in a notice before its next event), and after limits.disconnect_after_dropped
// drops it is cut off with a notice saying why. Event frames may fill only
// half its socket buffer, so the notices still fit when it reads again. A
// slow tail never holds up the sinks or the other tails.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/control.h"
#include "agent/log.h"
#include "control.pb.h"
#include "event.pb.h"
#include "util/fd.h"

namespace cordon::agent {

struct TailLimits {
  uint32_t queue_events = 10000;             // tail.queueEvents
  uint64_t disconnect_after_dropped = 100000;  // tail.disconnectAfterDropped; 0 = never
  // Deadlines of a connection that is not a tail (control.idleTimeoutMs) and
  // of every request frame from its first byte (control.requestTimeoutMs),
  // and the bytes that request frames still arriving may announce, summed
  // over all clients (control.partialFramesMaxBytes).
  int64_t idle_timeout_ns = 300 * 1000000000LL;
  int64_t request_timeout_ns = 30 * 1000000000LL;
  uint64_t partial_frames_max_bytes = 64ull << 20;
};

struct OutFrame {
  std::shared_ptr<const std::string> data;
  bool event = false;         // counted against the tail queue bound; may be discarded
  std::vector<UniqueFd> fds;  // sent with the frame's first byte
};

struct Client {
  uint64_t key = 0;
  UniqueFd fd;
  uint32_t pid = 0;
  int sndbuf = 0;
  std::string in;
  std::deque<OutFrame> out;
  size_t out_off = 0;
  size_t event_frames = 0;
  bool want_out = false;
  size_t unflushed = 0;  // frames queued since the last Flush()
  bool tail = false;
  TailFilter filter;
  uint64_t sent = 0;
  uint64_t dropped = 0;
  uint64_t dropped_unreported = 0;
  bool closing = false;  // close once `out` is written (or at close_deadline)
  int64_t close_deadline = 0;
  bool dead = false;  // closed; erased from the client map by Reap()
  int64_t idle_since_ns = 0;     // the connect, or the end of the last whole request frame
  int64_t frame_started_ns = 0;  // first byte of the request frame now arriving; 0: none
  size_t reserved = 0;           // bytes of the partial frame counted against the budget
  // A request of this client is being prepared off the loop (a policy
  // compiling): its connection is not read meanwhile (later frames wait in
  // the socket, in order), and it is not idle.
  bool busy = false;
  // Set when the connection closes, read off the loop: a request of it still
  // queued there (not started) is dropped.
  std::shared_ptr<std::atomic<bool>> gone = std::make_shared<std::atomic<bool>>(false);
};

class TailServer {
 public:
  // Called with each whole request frame's payload.
  using RequestHandler = std::function<void(Client& client, const std::string& payload)>;
  // The epoll key under which a client's fd is watched in `epoll_fd`.
  using EpollKey = std::function<uint64_t(uint64_t client_key)>;

  TailServer(int epoll_fd, EpollKey epoll_key, TailLimits limits, RequestHandler handler);

  // A connection accepted (and allowed) on the control socket.
  Client& Add(UniqueFd fd, uint32_t pid);
  // epoll readiness of a client (its key, as given to EpollKey).
  void OnReady(uint64_t client_key, uint32_t events);

  void Reply(Client& c, const cordon::v1::Response& response, std::vector<UniqueFd> fds = {});
  // From now on the client gets the events that pass `filter`.
  void StartTail(Client& c, TailFilter filter);
  // A tail that does not follow: the end notice, then it is closed.
  void EndTail(Client& c);
  // Queues the event for every tail it passes; sent in bunches, or by FlushAll().
  void Broadcast(const cordon::v1::AuditEvent& event);
  void FlushAll();  // sends what was queued for tails
  // Closes clients whose last frame was not taken by their deadline, and
  // tells clients past their idle or request deadline so, then closes them.
  void ExpireClosing(int64_t now_ns);
  // Erases closed clients.
  void Reap();
  // The agent stops: every tail is told, what is queued is sent if it can be,
  // and every client is closed.
  void Shutdown();

  const std::map<uint64_t, std::unique_ptr<Client>>& clients() const { return clients_; }
  Client* Find(uint64_t key);  // a live client, or null
  // While busy the client's connection is not read; back to not busy, the
  // frames it had sent before are handled, then it is read again.
  void SetBusy(Client& c, bool busy);
  uint64_t drops() const { return drops_; }                // events dropped for slow tails, since start
  uint64_t disconnected() const { return disconnected_; }  // tails cut off for falling behind
  // Request bytes in the agent's memory, counted against
  // control.partialFramesMaxBytes: announced by request frames still
  // arriving, and held by requests queued off the loop (Hold, until Unhold).
  uint64_t partial_bytes() const { return partial_bytes_; }
  // A whole request taken off the loop (a policy to compile) keeps its bytes
  // counted until it is done, whether or not its client is still there: a
  // client hanging up does not free the budget while its request waits.
  void Hold(uint64_t bytes) { partial_bytes_ += bytes; }
  void Unhold(uint64_t bytes) { partial_bytes_ -= bytes; }
  uint64_t timed_out() const { return timed_out_; }          // clients closed for an idle or request deadline
  uint64_t over_budget() const { return over_budget_; }      // frames refused for the partial-frame budget
  uint64_t unread() const { return unread_; }                // clients closed for replies they never read
  uint64_t busy() const { return busy_; }                    // connections refused: no free slot
  void CountBusy() { busy_++; }

 private:
  void OnReadable(Client& c);
  void Dispatch(Client& c, int64_t now);  // the whole frames in c.in, while not busy
  void Watch(Client& c);                  // epoll interest: in unless busy, out when wanted
  void Flush(Client& c);
  void SetWantOut(Client& c, bool want);
  void Kill(Client& c);  // closes now; the entry goes at the next Reap()
  void Push(Client& c, std::shared_ptr<const std::string> data, bool event, std::vector<UniqueFd> fds = {});
  void PushNotice(Client& c, const cordon::v1::TailFrame& notice);
  void Enqueue(Client& c, const std::shared_ptr<const std::string>& frame);
  void Disconnect(Client& c, const std::string& reason);
  // A request connection ends with an error Response saying why.
  void Refuse(Client& c, const std::string& reason);
  // Accounts the partial frame at the front of c.in against the budget;
  // false: it does not fit (the client was refused).
  bool Reserve(Client& c);
  void Release(Client& c);

  int epoll_fd_;
  EpollKey epoll_key_;
  TailLimits limits_;
  RequestHandler handler_;
  std::map<uint64_t, std::unique_ptr<Client>> clients_;
  uint64_t next_key_ = 1;
  uint64_t drops_ = 0;
  uint64_t disconnected_ = 0;
  uint64_t partial_bytes_ = 0;
  uint64_t timed_out_ = 0;
  uint64_t over_budget_ = 0;
  uint64_t unread_ = 0;
  uint64_t busy_ = 0;
  LogLimiter refusals_;
};

// EncodeFrame of a TailFrame holding `event`, without copying the event into
// one.
std::shared_ptr<const std::string> EventFrame(const cordon::v1::AuditEvent& event);

}  // namespace cordon::agent
