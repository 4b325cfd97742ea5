// The agent's control socket, client side and framing (userspace/proto/
// control.proto): every message is a 4-byte big-endian length followed by the
// serialized message. The CLI uses AgentClient to reach a running agent;
// without one (no socket, or nobody listening) it works directly on the
// pinned state. What the CLI shows of the replies is in userspace/cli/.
#pragma once

#include <signal.h>

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "control.pb.h"
#include "util/fd.h"
#include "util/result.h"

namespace cordon::agent {

constexpr uint32_t kMaxFrameBytes = 32u << 20;

// How an error Response of an agent that has no room for the request begins
// ("agent busy: all 64 control connections in use ...").
constexpr const char* kAgentBusy = "agent busy: ";
inline bool AgentBusy(const std::string& error) { return error.rfind(kAgentBusy, 0) == 0; }

// length prefix + message
std::string EncodeFrame(const google::protobuf::MessageLite& message);

// Takes one whole frame off the front of `buffer` into *payload: 1 if one was
// there, 0 if more bytes are needed, -1 if the announced length is too large.
int TakeFrame(std::string* buffer, std::string* payload);

// Where the CLI looks for the agent: $CORDON_AGENT_SOCKET, else the socket
// named in /etc/cordon/agent.yaml (if it parses), else /run/cordon/agent.sock.
std::string AgentSocketPath();

class AgentClient {
 public:
  // Connects to the agent's socket. An error with err ENOENT or ECONNREFUSED
  // means no agent is running there (see NoAgent()).
  static Result<AgentClient> Connect(const std::string& socket_path);

  Status Send(const cordon::v1::Request& request);
  // One whole frame, waiting up to timeout_ms (-1: forever). File descriptors
  // passed with it (SCM_RIGHTS) are appended to received_fds(). EOF is an
  // error with err 0 and message "the agent closed the connection".
  // `wait_mask`: the signal mask while waiting (ppoll), so that a caller that
  // blocks its stop signals and checks a flag before calling never misses one
  // that arrives in between (the wait ends at once with EINTR).
  Result<std::string> ReadFrame(int timeout_ms, const sigset_t* wait_mask = nullptr);
  // Send + one Response (on a connection that is not a tail).
  Result<cordon::v1::Response> Call(const cordon::v1::Request& request, int timeout_ms = 30000);

  int fd() const { return fd_.get(); }
  const std::string& path() const { return path_; }
  std::deque<UniqueFd>& received_fds() { return fds_; }
  // Bytes already received but not yet returned as frames.
  bool Buffered() const;
  // A whole frame is buffered: ReadFrame() returns it without waiting.
  bool FrameReady() const;

 private:
  int TakeBuffered(std::string* payload);
  AgentClient(UniqueFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}
  UniqueFd fd_;
  std::string path_;
  std::string in_;
  size_t in_off_ = 0;  // in_ before this offset was returned already
  bool received_any_ = false;
  std::deque<UniqueFd> fds_;
};

bool NoAgent(const Error& error);

// Connects to the agent the CLI should use. Returns false with *client unset
// when none is running; prints "cordon: ..." and returns false with *failed
// set when one seems to be there but cannot be reached (e.g. permission).
bool ReachAgent(std::optional<AgentClient>* client, bool* failed);

// Which events a tail selects (TailRequest's filters): the agent applies it
// to what it delivers, `cordon tail` without an agent to what it reads.
struct TailFilter {
  std::vector<uint64_t> sandbox_ids;  // empty: every sandbox
  std::string sandbox_name;
  std::string kind_prefix;
  std::vector<std::string> verdicts;  // empty: every verdict
  uint32_t pid = 0;                   // 0: every process
  int64_t until_unix_ns = 0;          // 0: no end
};
// Whether an event passes the tail filters (loss and suppressed records pass
// the kind, verdict and pid filters: what was lost may have matched them).
bool TailMatches(const cordon::v1::AuditEvent& event, const TailFilter& filter);

}  // namespace cordon::agent
