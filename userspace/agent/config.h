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
//     - {kind: stdout, format: compact}   # json | compact | ocsf
//     - {kind: syslog, socket: /dev/log, facility: authpriv}
//     - kind: syslog                      # remote: RFC 5424, octet-counted, via a spool
//       address: tls://collector.example:6514   # tcp://HOST:PORT | tls://HOST:PORT | unix:///dev/log
//       tls: {ca: /etc/cordon/collector-ca.pem, cert: /etc/cordon/client.pem, key: /etc/cordon/client.key}
//       format: rfc5424                   # rfc5424 (body: the event's JSON) | ocsf (body: OCSF 1.3.0)
//       spool: {path: /var/lib/cordon/spool, maxBytes: 1Gi, replayBytes: 8Mi}
//   metrics:
//     listen: 127.0.0.1:9464              # "" disables; port 0 picks one
//     allowNonLoopback: false
//     requestTimeoutMs: 5000              # whole request from the accept; then as long for the reply
//     maxConnections: 16                  # the next scraper gets a prompt 503
//   rateLimit: {eventsPerSecond: 2000, burst: 10000}   # per sandbox; 0 = unlimited
//   tail: {queueEvents: 10000, disconnectAfterDropped: 100000, maxClients: 64}
//   control: {idleTimeoutMs: 300000, requestTimeoutMs: 30000, partialFramesMaxBytes: 67108864}
//   adopt: {cgroupPrefixes: [], namePrefixes: []}      # empty: every sandbox
//   runLogs: {keepDays: 30}               # cordon run's default logs (/var/log/cordon/run-*.jsonl)
//                                         # older than this are removed by the next run; 0 = kept
//   oidc:                                 # the built-in issuer of spec.credentials[].oidc
//     issuer: https://cordon.example.com  # iss; default http://<metrics.listen>
//     keyDir: /var/lib/cordon/oidc        # signing-key.pem (0600), previous-key.pem
//     publishDir: /var/lib/cordon/oidc/public   # openid-configuration, jwks.json; "" = none
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
constexpr const char* kDefaultRunLogDir = "/var/log/cordon";  // cordon run's run-<time>-<pid>.jsonl
constexpr const char* kDefaultMetricsListen = "127.0.0.1:9464";
constexpr const char* kDefaultSpoolDir = "/var/lib/cordon/spool";  // a remote syslog sink's
constexpr const char* kDefaultOidcKeyDir = "/var/lib/cordon/oidc";
constexpr const char* kDefaultOidcPublishDir = "/var/lib/cordon/oidc/public";

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
  uint64_t metrics_request_timeout_ms = 5000;  // metrics.requestTimeoutMs
  uint32_t metrics_max_connections = 16;       // metrics.maxConnections
  // control.idleTimeoutMs: a control connection that is not a tail and sends
  // nothing for this long (after its connect or its last whole request) is
  // told so and closed.
  uint64_t control_idle_timeout_ms = 300000;
  // control.requestTimeoutMs: a request frame must arrive whole within this
  // long of its first byte (a total deadline: bytes trickling in do not
  // extend it).
  uint64_t control_request_timeout_ms = 30000;
  // control.partialFramesMaxBytes: request frames still arriving, summed over
  // all connections, may announce at most this many bytes; a frame beyond it
  // is refused and its connection closed.
  uint64_t control_partial_frames_max_bytes = 64ull << 20;
  std::vector<std::string> adopt_cgroup_prefixes;
  std::vector<std::string> adopt_name_prefixes;
  // runLogs.keepDays: cordon run removes its default logs (run-*.jsonl in
  // kDefaultRunLogDir) last modified longer ago than this; 0 keeps them.
  uint32_t run_log_keep_days = 30;
  std::string oidc_issuer;  // oidc.issuer as written ("" : OidcIssuer() derives it)
  std::string oidc_key_dir = kDefaultOidcKeyDir;
  std::string oidc_publish_dir = kDefaultOidcPublishDir;

  // The iss of the tokens cordon signs: oidc.issuer, else http://<metrics.listen>
  // (the agent serves the discovery document and the JWKS there); "" when
  // neither is usable (no metrics listener, or port 0).
  std::string OidcIssuer() const;
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
