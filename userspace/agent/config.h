// The agent's configuration: /etc/cordon/agent.yaml (or --config FILE).
// YAML or JSON, read with the policy reader, so every error names
// file:line:column and the field ("sinks[1].fsync: ..."). A missing default
// file means the defaults; a file given explicitly must exist.
//
//   socket: /run/cordon/agent.sock        # control socket (0600, root only)
//   sinks:                                # default: the jsonl sink below
//     - kind: jsonl                       # jsonl | stdout | syslog
//       path: /var/log/cordon/audit.jsonl
//       maxBytes: 104857600               # rotate before exceeding; 0 = never
//       keep: 5                           # rotated files kept (path.1 newest)
//       fsync: interval                   # every-event | interval | never
//       fsyncIntervalMs: 1000
//     - {kind: stdout, format: compact}   # json | compact
//     - {kind: syslog, socket: /dev/log, facility: authpriv}
//   metrics:
//     listen: 127.0.0.1:9464              # "" disables; port 0 picks one
//     allowNonLoopback: false
//   rateLimit: {eventsPerSecond: 2000, burst: 10000}   # per sandbox; 0 = unlimited
//   tail: {queueEvents: 10000, disconnectAfterDropped: 100000, maxClients: 64}
//   adopt: {cgroupPrefixes: [], namePrefixes: []}      # empty: every sandbox
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "agent/sink_fanout.h"  // SinkConfig: the sinks: entries, with the sinks
#include "policy/diagnostic.h"

namespace cordon::agent {

constexpr const char* kDefaultConfigPath = "/etc/cordon/agent.yaml";
constexpr const char* kDefaultSocketPath = "/run/cordon/agent.sock";
constexpr const char* kDefaultAuditPath = "/var/log/cordon/audit.jsonl";
constexpr const char* kDefaultMetricsListen = "127.0.0.1:9464";

// host:port with a numeric IPv4 address, [IPv6]:port, or localhost:port.
struct ListenAddress {
  std::string host;  // numeric
  uint16_t port = 0;
  bool v6 = false;
  bool loopback = false;
};
// False (and *error set to one sentence) when `text` is not such an address.
bool ParseListenAddress(const std::string& text, ListenAddress* out, std::string* error);

struct AgentConfig {
  std::string file;  // where it was read from; "" for the built-in defaults
  std::string socket = kDefaultSocketPath;
  std::vector<SinkConfig> sinks;  // the built-in default: one jsonl sink at kDefaultAuditPath
  std::string metrics_listen = kDefaultMetricsListen;
  bool metrics_allow_non_loopback = false;
  uint64_t rate_per_second = 2000;  // per sandbox; 0 = unlimited
  uint64_t rate_burst = 10000;
  uint32_t tail_queue_events = 10000;
  uint64_t tail_disconnect_after_dropped = 100000;  // 0 = never
  uint32_t max_clients = 64;
  std::vector<std::string> adopt_cgroup_prefixes;
  std::vector<std::string> adopt_name_prefixes;

  // The lock file that keeps a second agent from starting: beside the socket.
  std::string LockPath() const;
  // The first jsonl sink's path ("" if there is none): what --since replays.
  std::string AuditPath() const;
  // Whether a sandbox (cgroup path relative to the cgroup2 mount, name) is
  // within the adopt scope.
  bool InScope(const std::string& cgroup_path, const std::string& name) const;
};

AgentConfig DefaultAgentConfig();

// Parses config text. On any error returns false with every error in *diags.
bool ParseAgentConfig(std::string_view text, const std::string& file, AgentConfig* out,
                      policy::Diagnostics* diags);

// Reads `path` (empty: kDefaultConfigPath). A missing file is the defaults
// unless `must_exist`.
bool LoadAgentConfig(const std::string& path, bool must_exist, AgentConfig* out, policy::Diagnostics* diags);

}  // namespace cordon::agent
