#include "cli/agent_status.h"
#include "cli/table.h"
#include "util/clock.h"
#include "util/text.h"

#include <google/protobuf/util/json_util.h>
#include <time.h>

#include <cstdio>

namespace cordon::cli {

namespace {
std::string U(uint64_t v) { return std::to_string(v); }
std::string Uptime(int64_t started_ns) {
  int64_t s = (RealNs() - started_ns) / 1000000000ll;
  if (s < 0) s = 0;
  char buf[64];
  if (s >= 86400) std::snprintf(buf, sizeof buf, "%lldd%02lldh", (long long)(s / 86400), (long long)(s % 86400 / 3600));
  else if (s >= 3600) std::snprintf(buf, sizeof buf, "%lldh%02lldm", (long long)(s / 3600), (long long)(s % 3600 / 60));
  else std::snprintf(buf, sizeof buf, "%lldm%02llds", (long long)(s / 60), (long long)(s % 60));
  return buf;
}
}  // namespace

std::string AgentStatusText(const cordon::v1::StatusReply& s) {
  std::string out = "agent: pid " + std::to_string(s.pid()) + ", cordon " + s.version() + ", up " +
                    Uptime(s.started_unix_ns()) + ", socket " + s.socket() + ", config " +
                    (s.config_file().empty() ? std::string("(defaults)") : s.config_file()) + "\n";
  out += "agent events: " + U(s.delivered()) + " delivered (" + U(s.quiet()) + " of them quiet: spec.quiet), " +
         U(s.suppressed()) + " suppressed by the rate limit (";
  if (s.rate_limit_per_second() > 0) {
    char rate[64];
    std::snprintf(rate, sizeof rate, "%.0f/s, burst %llu", s.rate_limit_per_second(),
                  static_cast<unsigned long long>(s.rate_limit_burst()));
    out += std::string(rate) + " per sandbox";
  } else {
    out += "none";
  }
  out += "), " + U(s.lost()) + " lost (ring buffer full), " + U(s.malformed()) + " malformed\n";
  out += "agent sinks:";
  if (s.sinks().empty()) out += " none";
  for (int i = 0; i < s.sinks_size(); ++i) {
    const auto& k = s.sinks(i);
    out += std::string(i ? ";" : "") + " " + k.name() + " " + U(k.written()) + " written, " + U(k.failed()) + " failed";
    if (!k.last_error().empty()) out += " (last error: " + k.last_error() + ")";
  }
  out += "\nagent tailers: " + std::to_string(s.tailers_size()) + " connected, " + U(s.tailer_drops()) +
         " events dropped for slow tailers, " + U(s.tailers_disconnected()) + " disconnected for falling behind\n";
  out += "agent metrics: " + (s.metrics_listen().empty() ? std::string("off") : "http://" + s.metrics_listen() + "/metrics") + "\n";
  if (!s.sandboxes().empty()) {
    Table table({"AGENT SANDBOX", "CGROUP-ID", "CONSUMED", "DELIVERED", "QUIET", "SUPPRESSED", "LOST", "BACKLOG",
                 "STATE"});
    for (const auto& b : s.sandboxes()) {
      std::string state = !b.problem().empty() ? "problem: " + b.problem() : b.suppressing() ? "rate-limited" : "ok";
      table.Add({DisplayText(b.name()), U(b.id()), U(b.consumed()), U(b.delivered()), U(b.quiet()), U(b.suppressed()),
                 U(b.lost()), U(b.backlog()), DisplayText(state)});
    }
    out += table.Render(false);
  }
  return out;
}

std::string AgentStatusJson(const cordon::v1::StatusReply& status) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  (void)google::protobuf::util::MessageToJsonString(status, &json, options);
  return json;
}

}  // namespace cordon::cli
