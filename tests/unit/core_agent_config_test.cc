// The agent's configuration: defaults, every field, and errors naming
// file:line:column and the field.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "tests/unit/temp_dir.h"

#include <string>

#include "agent/config.h"
#include "agent/control.h"
#include "cli/args.h"

namespace cordon::agent {
namespace {

struct Parsed {
  bool ok = false;
  AgentConfig config;
  std::string errors;  // FormatDiagnostics
};

Parsed Parse(const std::string& text) {
  Parsed p;
  policy::Diagnostics diags;
  p.ok = ParseAgentConfig(text, "agent.yaml", &p.config, &diags);
  p.errors = policy::FormatDiagnostics(diags);
  return p;
}

TEST(AgentConfig, EmptyOrMissingMeansDefaults) {
  for (const char* text : {"", "# nothing here\n\n", "---\n"}) {
    Parsed p = Parse(text);
    ASSERT_TRUE(p.ok) << p.errors;
    EXPECT_EQ(p.config.socket, "/run/cordon/agent.sock");
    ASSERT_EQ(p.config.sinks.size(), 1u);
    EXPECT_EQ(p.config.sinks[0].kind, SinkConfig::Kind::kJsonl);
    EXPECT_EQ(p.config.sinks[0].path, "/var/log/cordon/audit.jsonl");
    EXPECT_EQ(p.config.metrics_listen, "127.0.0.1:9464");
    EXPECT_EQ(p.config.rate_per_second, 2000u);
    EXPECT_EQ(p.config.rate_burst, 10000u);
    EXPECT_EQ(p.config.tail_queue_events, 10000u);
    EXPECT_EQ(p.config.LockPath(), "/run/cordon/agent.lock");
  }
  AgentConfig config;
  policy::Diagnostics diags;
  EXPECT_TRUE(LoadAgentConfig("/nonexistent/agent.yaml", false, &config, &diags));
  EXPECT_EQ(config.AuditPath(), "/var/log/cordon/audit.jsonl");
  EXPECT_FALSE(LoadAgentConfig("/nonexistent/agent.yaml", true, &config, &diags));
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_NE(diags[0].ToString().find("/nonexistent/agent.yaml: cannot open"), std::string::npos) << diags[0].ToString();
}

TEST(AgentConfig, ShippedExampleIsValidAndStatesTheDefaults) {
  std::string here = __FILE__;
  std::string example = here.substr(0, here.rfind("/tests/")) + "/packaging/agent.yaml.example";
  AgentConfig config;
  policy::Diagnostics diags;
  ASSERT_TRUE(LoadAgentConfig(example, true, &config, &diags)) << policy::FormatDiagnostics(diags);
  AgentConfig defaults = DefaultAgentConfig();
  EXPECT_EQ(config.socket, defaults.socket);
  ASSERT_EQ(config.sinks.size(), 1u);
  EXPECT_EQ(config.sinks[0].Name(), defaults.sinks[0].Name());
  EXPECT_EQ(config.sinks[0].jsonl.max_bytes, defaults.sinks[0].jsonl.max_bytes);
  EXPECT_EQ(config.metrics_listen, defaults.metrics_listen);
  EXPECT_EQ(config.rate_per_second, defaults.rate_per_second);
  EXPECT_EQ(config.rate_burst, defaults.rate_burst);
  EXPECT_EQ(config.tail_queue_events, defaults.tail_queue_events);
  EXPECT_EQ(config.tail_disconnect_after_dropped, defaults.tail_disconnect_after_dropped);
  EXPECT_EQ(config.metrics_request_timeout_ms, defaults.metrics_request_timeout_ms);
  EXPECT_EQ(config.metrics_max_connections, defaults.metrics_max_connections);
  EXPECT_EQ(config.control_idle_timeout_ms, defaults.control_idle_timeout_ms);
  EXPECT_EQ(config.control_request_timeout_ms, defaults.control_request_timeout_ms);
  EXPECT_EQ(config.control_partial_frames_max_bytes, defaults.control_partial_frames_max_bytes);
  EXPECT_EQ(config.oidc_issuer, defaults.oidc_issuer);
  EXPECT_EQ(config.oidc_key_dir, defaults.oidc_key_dir);
  EXPECT_EQ(config.oidc_publish_dir, defaults.oidc_publish_dir);
}

// oidc: the issuer is a URL a verifier can append /.well-known/... to and
// compare as a string; by default the metrics listener's; the directories
// are absolute.
TEST(AgentConfig, OidcSection) {
  Parsed p = Parse("");
  ASSERT_TRUE(p.ok) << p.errors;
  EXPECT_EQ(p.config.oidc_key_dir, "/var/lib/cordon/oidc");
  EXPECT_EQ(p.config.oidc_publish_dir, "/var/lib/cordon/oidc/public");
  EXPECT_EQ(p.config.OidcIssuer(), "http://127.0.0.1:9464") << "the default: where the agent serves the keys";
  EXPECT_EQ(Parse("metrics:\n  listen: \"[::1]:8080\"\n").config.OidcIssuer(), "http://[::1]:8080");
  EXPECT_EQ(Parse("metrics:\n  listen: \"\"\n").config.OidcIssuer(), "") << "no listener, no default";
  EXPECT_EQ(Parse("metrics:\n  listen: 127.0.0.1:0\n").config.OidcIssuer(), "") << "port 0 is no URL";
  EXPECT_EQ(Parse("oidc:\n  issuer: \"\"\n").config.OidcIssuer(), "http://127.0.0.1:9464");

  p = Parse("metrics:\n  listen: \"\"\noidc:\n  issuer: https://cordon.example.com/ci\n  keyDir: /srv/oidc\n"
            "  publishDir: \"\"\n");
  ASSERT_TRUE(p.ok) << p.errors;
  EXPECT_EQ(p.config.OidcIssuer(), "https://cordon.example.com/ci");
  EXPECT_EQ(p.config.oidc_key_dir, "/srv/oidc");
  EXPECT_EQ(p.config.oidc_publish_dir, "");

  const std::pair<const char*, const char*> bad[] = {
      {"ftp://cordon.example", "must be an http:// or https:// URL, got 'ftp://cordon.example'"},
      {"cordon.example", "must be an http:// or https:// URL"},
      {"https://", "has no host"},
      {"https:///path", "has no host"},
      {"https://cordon.example/", "must not end with '/'"},
      {"https://cordon.example/?a=1", "must not have a query or a fragment"},
      {"https://cordon.example/#x", "must not have a query or a fragment"},
      {"\"https://cordon.example/a b\"", "must be printable ASCII without spaces"},
      {"\"https://cordon.example/\\u00e9\"", "must be printable ASCII without spaces"},
      {"\"https://cordon.example/\\x1b[31m\"", "must be printable ASCII without spaces"},
  };
  for (const auto& [issuer, why] : bad) {
    p = Parse(std::string("oidc:\n  issuer: ") + issuer + "\n");
    EXPECT_FALSE(p.ok) << issuer;
    EXPECT_NE(p.errors.find("agent.yaml:2:11: oidc.issuer: " + std::string(why)), std::string::npos) << p.errors;
  }
  p = Parse("oidc:\n  issuer: https://" + std::string(520, 'a') + "\n");
  EXPECT_NE(p.errors.find("oidc.issuer: is longer than 512 bytes"), std::string::npos) << p.errors;
  p = Parse("oidc:\n  keyDir: oidc-keys\n");
  EXPECT_NE(p.errors.find("agent.yaml:2:11: oidc.keyDir: must be an absolute path, got 'oidc-keys'"),
            std::string::npos)
      << p.errors;
  p = Parse("oidc:\n  keyDir: \"\"\n");
  EXPECT_NE(p.errors.find("oidc.keyDir: must be an absolute path"), std::string::npos) << p.errors;
  p = Parse("oidc:\n  publishDir: pub\n");
  EXPECT_NE(p.errors.find("agent.yaml:2:15: oidc.publishDir: must be an absolute path or \"\" (none), got 'pub'"),
            std::string::npos)
      << p.errors;
  p = Parse("oidc:\n  audience: x\n");
  EXPECT_NE(p.errors.find("agent.yaml:2:3: oidc.audience"), std::string::npos) << p.errors;
}

TEST(AgentConfig, HostileClientLimits) {
  Parsed p = Parse(R"(metrics:
  requestTimeoutMs: 1500
  maxConnections: 4
control:
  idleTimeoutMs: 2000
  requestTimeoutMs: 1000
  partialFramesMaxBytes: 16777216
)");
  ASSERT_TRUE(p.ok) << p.errors;
  EXPECT_EQ(p.config.metrics_request_timeout_ms, 1500u);
  EXPECT_EQ(p.config.metrics_max_connections, 4u);
  EXPECT_EQ(p.config.control_idle_timeout_ms, 2000u);
  EXPECT_EQ(p.config.control_request_timeout_ms, 1000u);
  EXPECT_EQ(p.config.control_partial_frames_max_bytes, 16u << 20);
  Parsed defaults = Parse("");
  EXPECT_EQ(defaults.config.control_idle_timeout_ms, 300000u);
  EXPECT_EQ(defaults.config.control_request_timeout_ms, 30000u);
  EXPECT_EQ(defaults.config.control_partial_frames_max_bytes, 64u << 20);
  EXPECT_EQ(defaults.config.metrics_request_timeout_ms, 5000u);
  EXPECT_EQ(defaults.config.metrics_max_connections, 16u);

  Parsed bad = Parse("control:\n  idleTimeoutMs: 0\n  partialFramesMaxBytes: 1024\n  idle: 5\n");
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.errors.find("agent.yaml:2:18: control.idleTimeoutMs: must be between 10 and"), std::string::npos)
      << bad.errors;
  EXPECT_NE(bad.errors.find("control.partialFramesMaxBytes: must be between 1048576 and"), std::string::npos)
      << bad.errors;
  EXPECT_NE(bad.errors.find("control.idle: unknown field 'idle' (expected one of: idleTimeoutMs, requestTimeoutMs, "
                            "partialFramesMaxBytes)"),
            std::string::npos)
      << bad.errors;
}

TEST(AgentConfig, EveryField) {
  Parsed p = Parse(R"(socket: /run/cordon/test.sock
sinks:
  - kind: jsonl
    path: /var/log/cordon/a.jsonl
    maxBytes: 1048576
    keep: 3
    fsync: every-event
    fsyncIntervalMs: 250
  - {kind: stdout, format: compact}
  - kind: syslog
    socket: /dev/log
    facility: local3
metrics:
  listen: "[::1]:9000"
  allowNonLoopback: false
rateLimit: {eventsPerSecond: 50, burst: 100}
tail: {queueEvents: 64, disconnectAfterDropped: 500, maxClients: 8}
adopt: {cgroupPrefixes: [/agents/], namePrefixes: [task-]}
runLogs: {keepDays: 7}
)");
  ASSERT_TRUE(p.ok) << p.errors;
  const AgentConfig& c = p.config;
  EXPECT_EQ(c.socket, "/run/cordon/test.sock");
  EXPECT_EQ(c.LockPath(), "/run/cordon/agent.lock");
  ASSERT_EQ(c.sinks.size(), 3u);
  EXPECT_EQ(c.sinks[0].Name(), "jsonl:/var/log/cordon/a.jsonl");
  EXPECT_EQ(c.sinks[0].jsonl.max_bytes, 1048576u);
  EXPECT_EQ(c.sinks[0].jsonl.keep, 3u);
  EXPECT_EQ(c.sinks[0].jsonl.fsync, JsonlOptions::Fsync::kEveryEvent);
  EXPECT_EQ(c.sinks[0].jsonl.fsync_interval_ms, 250u);
  EXPECT_EQ(c.sinks[1].kind, SinkConfig::Kind::kStdout);
  EXPECT_EQ(c.sinks[1].format, StreamSink::Format::kCompact);
  EXPECT_EQ(c.sinks[2].kind, SinkConfig::Kind::kSyslog);
  EXPECT_EQ(c.sinks[2].facility, 19);
  EXPECT_EQ(c.metrics_listen, "[::1]:9000");
  EXPECT_EQ(c.rate_per_second, 50u);
  EXPECT_EQ(c.rate_burst, 100u);
  EXPECT_EQ(c.tail_queue_events, 64u);
  EXPECT_EQ(c.tail_disconnect_after_dropped, 500u);
  EXPECT_EQ(c.max_clients, 8u);
  EXPECT_TRUE(c.InScope("/agents/t1", "x"));
  EXPECT_TRUE(c.InScope("/other", "task-9"));
  EXPECT_FALSE(c.InScope("/other", "x"));
  EXPECT_EQ(c.AuditPath(), "/var/log/cordon/a.jsonl");
  EXPECT_EQ(c.run_log_keep_days, 7u);
  EXPECT_EQ(DefaultAgentConfig().run_log_keep_days, 30u);

  // JSON works too; an empty list of sinks means tailers only.
  Parsed j = Parse(R"({"sinks": [], "metrics": {"listen": ""}, "rateLimit": {"eventsPerSecond": 0}})");
  ASSERT_TRUE(j.ok) << j.errors;
  EXPECT_TRUE(j.config.sinks.empty());
  EXPECT_TRUE(j.config.metrics_listen.empty());
  EXPECT_EQ(j.config.rate_per_second, 0u);
}

TEST(AgentConfig, UnknownKeyNamesFileLineColumnAndField) {
  Parsed p = Parse("socket: /run/x.sock\nrateLimit:\n  eventsPerSecond: 10\n  brust: 20\n");
  EXPECT_FALSE(p.ok);
  EXPECT_NE(p.errors.find("agent.yaml:4:3: rateLimit.brust: unknown field 'brust' (expected one of: eventsPerSecond, burst)"),
            std::string::npos)
      << p.errors;
  p = Parse("sockett: /x\n");
  EXPECT_NE(p.errors.find("agent.yaml:1:1: sockett: unknown field 'sockett'"), std::string::npos) << p.errors;
  // A field of another sink kind does not apply.
  p = Parse("sinks:\n  - kind: stdout\n    path: /tmp/x\n");
  EXPECT_NE(p.errors.find("agent.yaml:3:5: sinks[0].path: unknown field 'path' (expected one of: kind, format)"),
            std::string::npos)
      << p.errors;
}

TEST(AgentConfig, RunLogsKeepDaysIsBounded) {
  Parsed p = Parse("runLogs: {keepDays: 0}\n");
  ASSERT_TRUE(p.ok) << p.errors;
  EXPECT_EQ(p.config.run_log_keep_days, 0u) << "0 keeps them";
  p = Parse("runLogs:\n  keepDays: 36501\n");
  EXPECT_FALSE(p.ok);
  EXPECT_NE(p.errors.find("agent.yaml:2:13: runLogs.keepDays: "), std::string::npos) << p.errors;
  p = Parse("runLogs:\n  keepdays: 3\n");
  EXPECT_NE(p.errors.find("runLogs.keepdays: unknown field 'keepdays' (expected one of: keepDays)"), std::string::npos)
      << p.errors;
}

TEST(AgentConfig, WrongTypeNamesFieldAndWhatWasGiven) {
  Parsed p = Parse("rateLimit:\n  eventsPerSecond: fast\n");
  EXPECT_FALSE(p.ok);
  EXPECT_NE(p.errors.find("agent.yaml:2:20: rateLimit.eventsPerSecond: expected a non-negative integer, got 'fast'"),
            std::string::npos)
      << p.errors;
  p = Parse("tail:\n  queueEvents: \"10\"\n");
  EXPECT_NE(p.errors.find("agent.yaml:2:16: tail.queueEvents: expected a non-negative integer, got the string \"10\""),
            std::string::npos)
      << p.errors;
  p = Parse("metrics:\n  allowNonLoopback: yes\n");
  EXPECT_NE(p.errors.find("agent.yaml:2:21: metrics.allowNonLoopback: expected true or false, got 'yes'"),
            std::string::npos)
      << p.errors;
  p = Parse("sinks: /var/log/x\n");
  EXPECT_NE(p.errors.find("agent.yaml:1:8: sinks: expected a list of sinks, got '/var/log/x'"), std::string::npos)
      << p.errors;
  p = Parse("tail: {queueEvents: 0}\n");
  EXPECT_NE(p.errors.find("agent.yaml:1:21: tail.queueEvents: must be between 1 and 1000000, got 0"), std::string::npos)
      << p.errors;
  p = Parse("socket: run/agent.sock\n");
  EXPECT_NE(p.errors.find("agent.yaml:1:9: socket: must be an absolute path"), std::string::npos) << p.errors;
}

TEST(AgentConfig, BadSinkKindAndSinkFields) {
  Parsed p = Parse("sinks:\n  - kind: jsonl\n    path: /var/log/a.jsonl\n  - kind: kafka\n    topic: x\n");
  EXPECT_FALSE(p.ok);
  EXPECT_NE(p.errors.find("agent.yaml:4:11: sinks[1].kind: unknown value 'kafka' (expected one of: jsonl, stdout, syslog)"),
            std::string::npos)
      << p.errors;
  p = Parse("sinks:\n  - path: /var/log/a.jsonl\n");
  EXPECT_NE(p.errors.find("agent.yaml:2:5: sinks[0].kind: a sink needs a kind"), std::string::npos) << p.errors;
  p = Parse("sinks:\n  - kind: jsonl\n");
  EXPECT_NE(p.errors.find("agent.yaml:2:5: sinks[0].path: a jsonl sink needs a path"), std::string::npos) << p.errors;
  p = Parse("sinks:\n  - {kind: jsonl, path: /a.jsonl, fsync: sometimes}\n");
  EXPECT_NE(p.errors.find("sinks[0].fsync: unknown value 'sometimes' (expected one of: every-event, interval, never)"),
            std::string::npos)
      << p.errors;
  p = Parse("sinks:\n  - {kind: syslog, facility: local9}\n");
  EXPECT_NE(p.errors.find("sinks[0].facility: unknown value 'local9'"), std::string::npos) << p.errors;
  p = Parse("sinks:\n  - {kind: stdout}\n  - {kind: stdout, format: compact}\n");
  EXPECT_NE(p.errors.find("agent.yaml:3:5: sinks[1]: stdout is already a sink"), std::string::npos) << p.errors;
  p = Parse("sinks:\n  - {kind: jsonl, path: relative.jsonl}\n");
  EXPECT_NE(p.errors.find("sinks[0].path: must be an absolute path"), std::string::npos) << p.errors;
}

TEST(AgentConfig, BadListenAddress) {
  Parsed p = Parse("metrics:\n  listen: 0.0.0.0:9464\n");
  EXPECT_FALSE(p.ok);
  EXPECT_NE(p.errors.find("agent.yaml:2:11: metrics.listen: '0.0.0.0:9464' is not a loopback address"),
            std::string::npos)
      << p.errors;
  EXPECT_NE(p.errors.find("metrics.allowNonLoopback: true"), std::string::npos) << p.errors;
  EXPECT_TRUE(Parse("metrics:\n  listen: 0.0.0.0:9464\n  allowNonLoopback: true\n").ok);
  p = Parse("metrics:\n  listen: 127.0.0.1:99999\n");
  EXPECT_NE(p.errors.find("agent.yaml:2:11: metrics.listen: bad port '99999'"), std::string::npos) << p.errors;
  p = Parse("metrics:\n  listen: metrics.example:9464\n");
  EXPECT_NE(p.errors.find("metrics.listen: 'metrics.example' in 'metrics.example:9464' is not a numeric IPv4 or IPv6"),
            std::string::npos)
      << p.errors;
  p = Parse("metrics:\n  listen: 9464\n");
  EXPECT_NE(p.errors.find("metrics.listen: expected host:port"), std::string::npos) << p.errors;

  ListenAddress a;
  std::string error;
  ASSERT_TRUE(ParseListenAddress("localhost:0", &a, &error)) << error;
  EXPECT_TRUE(a.loopback);
  EXPECT_EQ(a.host, "127.0.0.1");
  ASSERT_TRUE(ParseListenAddress("[::1]:9464", &a, &error)) << error;
  EXPECT_TRUE(a.loopback && a.v6);
  ASSERT_TRUE(ParseListenAddress("[::]:9464", &a, &error)) << error;
  EXPECT_FALSE(a.loopback);
}

TEST(AgentConfig, EveryErrorIsReportedNotJustTheFirst) {
  Parsed p = Parse("bogus: 1\nrateLimit: {burst: 0}\nsinks:\n  - kind: nope\n");
  EXPECT_FALSE(p.ok);
  EXPECT_NE(p.errors.find("agent.yaml:1:1: bogus"), std::string::npos) << p.errors;
  EXPECT_NE(p.errors.find("agent.yaml:2:20: rateLimit.burst: must be between 1"), std::string::npos) << p.errors;
  EXPECT_NE(p.errors.find("agent.yaml:4:11: sinks[0].kind"), std::string::npos) << p.errors;
  p = Parse("socket: [unclosed\n");
  EXPECT_FALSE(p.ok);
  EXPECT_NE(p.errors.find("agent.yaml:"), std::string::npos) << p.errors;
}

TEST(AgentControl, FramesAndDurations) {
  cordon::v1::Request req;
  req.mutable_tail()->set_sandbox_name("x");
  std::string buffer = EncodeFrame(req) + EncodeFrame(req);
  std::string half = buffer.substr(0, 3), payload;
  EXPECT_EQ(TakeFrame(&half, &payload), 0);
  EXPECT_EQ(TakeFrame(&buffer, &payload), 1);
  cordon::v1::Request back;
  ASSERT_TRUE(back.ParseFromString(payload));
  EXPECT_EQ(back.tail().sandbox_name(), "x");
  EXPECT_EQ(TakeFrame(&buffer, &payload), 1);
  EXPECT_TRUE(buffer.empty());
  std::string huge("\x7f\xff\xff\xff", 4);
  EXPECT_EQ(TakeFrame(&huge, &payload), -1);

  int64_t ns = 0;
  ASSERT_TRUE(cli::ParseDuration("90s", &ns));
  EXPECT_EQ(ns, 90'000'000'000);
  ASSERT_TRUE(cli::ParseDuration("5m", &ns));
  EXPECT_EQ(ns, 300'000'000'000);
  ASSERT_TRUE(cli::ParseDuration("1500ms", &ns));
  EXPECT_EQ(ns, 1'500'000'000);
  ASSERT_TRUE(cli::ParseDuration("2", &ns));
  EXPECT_EQ(ns, 2'000'000'000);
  EXPECT_FALSE(cli::ParseDuration("soon", &ns));
  EXPECT_FALSE(cli::ParseDuration("5 m", &ns));
  EXPECT_FALSE(cli::ParseDuration("", &ns));
}

TEST(AgentControl, TailFilters) {
  cordon::v1::AuditEvent e;
  e.set_sandbox("a");
  e.set_sandbox_cgroup_id(7);
  e.set_kind("net.connect");
  TailFilter o;
  EXPECT_TRUE(TailMatches(e, o));
  o.kind_prefix = "file.";
  EXPECT_FALSE(TailMatches(e, o));
  e.set_kind("suppressed");
  EXPECT_TRUE(TailMatches(e, o)) << "accounting records pass any kind filter";
  o.sandbox_name = "b";
  EXPECT_FALSE(TailMatches(e, o));
  o.sandbox_name.clear();
  o.sandbox_ids = {8};
  EXPECT_FALSE(TailMatches(e, o));
  o.sandbox_ids = {8, 7};
  EXPECT_TRUE(TailMatches(e, o));

  // Verdict, pid and time: accounting records pass the first two (what they
  // account for may have matched), not an end time.
  TailFilter f;
  e.set_kind("net.connect");
  e.set_verdict("denied");
  e.set_pid(42);
  e.mutable_time()->set_seconds(1000);
  e.mutable_time()->set_nanos(5);
  f.verdicts = {"audited", "denied"};
  EXPECT_TRUE(TailMatches(e, f));
  f.verdicts = {"audited"};
  EXPECT_FALSE(TailMatches(e, f));
  e.set_kind("loss");
  EXPECT_TRUE(TailMatches(e, f));
  e.set_kind("net.connect");
  f.verdicts.clear();
  f.pid = 43;
  EXPECT_FALSE(TailMatches(e, f));
  f.pid = 42;
  EXPECT_TRUE(TailMatches(e, f));
  f.until_unix_ns = 1000'000'000'005;
  EXPECT_TRUE(TailMatches(e, f)) << "at the end time: in";
  f.until_unix_ns = 1000'000'000'004;
  EXPECT_FALSE(TailMatches(e, f));
  e.set_kind("suppressed");
  EXPECT_FALSE(TailMatches(e, f)) << "after the end time, whatever it is";
}

// The remote syslog sink (issue 21): address forms, TLS files checked at load
// (readable, cert and key together, ca for tls://), the spool's size with
// units, and every error naming file:line:column and the field.
TEST(AgentConfig, RemoteSyslogSink) {
  // Files that exist and are readable (this test's own binary's directory
  // holds none; /proc/self/... is readable by anyone).
  const std::string readable = "/proc/self/stat";
  // The key: a file of the agent's user that nobody else may read.
  cordon::test::TempDir dir("agentcfg");
  const std::string key = dir.path() + "/client.key";
  { std::ofstream(key) << "not a real key\n"; }
  ASSERT_EQ(::chmod(key.c_str(), 0600), 0);
  Parsed p = Parse("sinks:\n  - kind: syslog\n    address: tls://collector.example:6514\n    tls: {ca: " + readable +
                   ", cert: " + readable + ", key: " + key +
                   "}\n    format: rfc5424\n    facility: local3\n    spool: {path: /var/spool/x/, maxBytes: 1Gi, "
                   "replayBytes: 8Mi}\n");
  ASSERT_TRUE(p.ok) << p.errors;
  ASSERT_EQ(p.config.sinks.size(), 1u);
  const SinkConfig& s = p.config.sinks[0];
  EXPECT_EQ(s.remote.host, "collector.example");
  EXPECT_EQ(s.remote.port, 6514);
  EXPECT_TRUE(s.remote.tls);
  EXPECT_EQ(s.remote.ca, readable);
  EXPECT_EQ(s.remote.key, key);
  EXPECT_EQ(s.remote.spool_dir, "/var/spool/x") << "one spelling per directory";
  EXPECT_EQ(s.remote.spool_max_bytes, 1ull << 30);
  EXPECT_EQ(s.remote.replay_bytes, 8ull << 20);
  EXPECT_EQ(s.facility, 19);
  EXPECT_EQ(s.Name(), "syslog:tls://collector.example:6514");
  // A key others may read is refused, naming the field and the mode.
  ASSERT_EQ(::chmod(key.c_str(), 0644), 0);
  p = Parse("sinks:\n  - kind: syslog\n    address: tls://collector.example:6514\n    tls: {ca: " + readable +
            ", cert: " + readable + ", key: " + key + "}\n");
  EXPECT_FALSE(p.ok);
  EXPECT_NE(p.errors.find("sinks[0].tls.key: " + key + " can be read or written by others (mode 0644)"),
            std::string::npos)
      << p.errors;

  p = Parse("sinks:\n  - {kind: syslog, address: \"tcp://[::1]:514\"}\n");
  ASSERT_TRUE(p.ok) << p.errors;
  EXPECT_EQ(p.config.sinks[0].remote.host, "::1");
  EXPECT_FALSE(p.config.sinks[0].remote.tls);
  EXPECT_EQ(p.config.sinks[0].remote.spool_dir, "/var/lib/cordon/spool");
  EXPECT_EQ(p.config.sinks[0].Name(), "syslog:tcp://[::1]:514");
  EXPECT_EQ(p.config.sinks[0].remote.replay_bytes, 8u << 20);
  EXPECT_EQ(p.config.sinks[0].body, SyslogSink::Body::kJson) << "format rfc5424 by default";
  p = Parse(
      "sinks:\n  - {kind: syslog, address: \"tcp://a:1\", format: ocsf}\n  - {kind: syslog, format: ocsf}\n"
      "  - {kind: stdout, format: ocsf}\n");
  ASSERT_TRUE(p.ok) << p.errors;
  EXPECT_EQ(p.config.sinks[0].body, SyslogSink::Body::kOcsf);
  EXPECT_EQ(p.config.sinks[1].body, SyslogSink::Body::kOcsf) << "the local syslog sink too";
  EXPECT_EQ(p.config.sinks[2].format, StreamSink::Format::kOcsf);
  p = Parse("sinks:\n  - {kind: syslog, address: \"tcp://a:1\", spool: {maxBytes: 4Mi}}\n");
  ASSERT_TRUE(p.ok) << p.errors;
  EXPECT_EQ(p.config.sinks[0].remote.replay_bytes, 2u << 20) << "the default, at most half the spool";

  // unix:// is the socket: form.
  p = Parse("sinks:\n  - {kind: syslog, address: \"unix:///run/log.sock\"}\n");
  ASSERT_TRUE(p.ok) << p.errors;
  EXPECT_TRUE(p.config.sinks[0].remote.host.empty());
  EXPECT_EQ(p.config.sinks[0].socket, "/run/log.sock");

  struct Bad {
    std::string yaml, error;
  };
  const std::vector<Bad> bad = {
      {"  - {kind: syslog, socket: /dev/log, address: \"tcp://a:1\"}\n",
       "agent.yaml:2:28: sinks[0].socket: give either address or socket"},
      {"  - {kind: syslog, address: \"udp://a:1\"}\n",
       "agent.yaml:2:29: sinks[0].address: expected tcp://HOST:PORT, tls://HOST:PORT or unix:///PATH, got 'udp://a:1'"},
      {"  - {kind: syslog, address: \"tcp://a:0\"}\n", "sinks[0].address: expected tcp://HOST:PORT"},
      {"  - {kind: syslog, address: \"tcp://a b:1\"}\n", "sinks[0].address: expected tcp://HOST:PORT"},
      {"  - {kind: syslog, address: \"tls://a:1\"}\n",
       "agent.yaml:2:29: sinks[0].tls.ca: a tls:// address needs the collector's CA (tls.ca)"},
      {"  - {kind: syslog, address: \"tcp://a:1\", tls: {ca: " + readable + "}}\n",
       "sinks[0].tls: applies only to a tls:// address, not tcp://"},
      {"  - {kind: syslog, tls: {ca: " + readable + "}}\n", "sinks[0].tls: applies only to a tls:// address"},
      {"  - {kind: syslog, address: \"tls://a:1\", tls: {ca: " + readable + ", cert: " + readable + "}}\n",
       "sinks[0].tls.key: a client certificate needs both cert and key"},
      {"  - {kind: syslog, address: \"tls://a:1\", tls: {ca: /nonexistent/ca.pem}}\n",
       "sinks[0].tls.ca: cannot read /nonexistent/ca.pem: No such file or directory"},
      {"  - {kind: syslog, address: \"tls://a:1\", tls: {ca: " + readable + ", cert: " + readable +
           ", key: /nonexistent/client.key}}\n",
       "sinks[0].tls.key: cannot read /nonexistent/client.key"},
      {"  - {kind: syslog, address: \"tcp://a:1\", format: cef}\n",
       "sinks[0].format: unknown value 'cef' (expected one of: rfc5424, ocsf)"},
      {"  - {kind: syslog, address: \"tcp://a:1\", spool: {maxBytes: 1.5Gi}}\n",
       "sinks[0].spool.maxBytes: invalid byte size '1.5Gi': fractions are not allowed"},
      {"  - {kind: syslog, address: \"tcp://a:1\", spool: {maxBytes: 1Ki}}\n",
       "sinks[0].spool.maxBytes: must be at least 1048576, got 1Ki"},
      {"  - {kind: syslog, address: \"tcp://a:1\", spool: {path: spool}}\n",
       "sinks[0].spool.path: must be an absolute path, got 'spool'"},
      {"  - {kind: syslog, address: \"tcp://a:1\", spool: {maxBytes: 4Mi, replayBytes: 3Mi}}\n",
       "sinks[0].spool.replayBytes: must be at most half of spool.maxBytes"},
      {"  - {kind: syslog, address: \"tcp://a:1\"}\n  - {kind: syslog, address: \"tcp://b:1\"}\n",
       "agent.yaml:3:5: sinks[1].spool.path: spool /var/lib/cordon/spool is already another sink's"},
      {"  - {kind: syslog, address: \"tcp://a:1\", spool: {size: 1}}\n", "sinks[0].spool.size: unknown field 'size'"},
  };
  for (const auto& b : bad) {
    p = Parse("sinks:\n" + b.yaml);
    EXPECT_FALSE(p.ok) << b.yaml;
    EXPECT_NE(p.errors.find(b.error), std::string::npos) << b.yaml << p.errors;
  }
  // The key is a secret: an error about it names its path, never its bytes.
  p = Parse("sinks:\n  - {kind: syslog, address: \"tls://a:1\", tls: {ca: " + readable + ", key: " + readable + "}}\n");
  EXPECT_EQ(p.errors.find("(cordon"), std::string::npos) << p.errors;
}

}  // namespace
}  // namespace cordon::agent
