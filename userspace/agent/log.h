// The agent's log: one line on stderr (the journal under systemd).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "util/clock.h"

namespace cordon::agent {

inline void Log(const std::string& message) { std::fprintf(stderr, "cordon: agent: %s\n", message.c_str()); }

// A log line that clients can provoke at will (malformed requests, refused
// or timed-out connections, libprotobuf's complaints about their input) goes
// through a LogLimiter: at most one line per interval, the next one saying
// how many were left out in between. Callers log what happened, never the
// client's payload.
class LogLimiter {
 public:
  explicit LogLimiter(int64_t interval_ns = 10'000'000'000LL) : interval_ns_(interval_ns) {}
  void Log(const std::string& message) {
    const int64_t now = MonoNs();
    if (logged_ && now - last_ns_ < interval_ns_) {
      ++unlogged_;
      return;
    }
    cordon::agent::Log(
        message +
        (unlogged_ ? " (and " + std::to_string(unlogged_) + " more like it since the last report, not logged)" : ""));
    logged_ = true;
    last_ns_ = now;
    unlogged_ = 0;
  }
  uint64_t unlogged() const { return unlogged_; }

 private:
  int64_t interval_ns_;
  bool logged_ = false;
  int64_t last_ns_ = 0;
  uint64_t unlogged_ = 0;
};

// Routes libprotobuf's own log output (e.g. "String field ... contains
// invalid UTF-8 data" for every such request) through a LogLimiter instead
// of raw stderr. Called once at the agent's start.
void CaptureProtobufLog();

}  // namespace cordon::agent
