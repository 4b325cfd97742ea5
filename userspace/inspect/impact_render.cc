// The impact report for people: text and one self-contained HTML page.
// Every [workload] string goes through DisplayText (controls, bidi and
// invisible characters escaped), and in HTML through HtmlEscape as well.
#include <google/protobuf/util/time_util.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "inspect/impact.h"
#include "util/text.h"

namespace cordon::inspect {
namespace {

using google::protobuf::Timestamp;
using google::protobuf::util::TimeUtil;
namespace v1 = cordon::v1;

std::string Time(const Timestamp& t) { return TimeUtil::ToString(t); }

// A protobuf map in the order of its keys.
std::map<std::string, uint64_t> Sorted(const google::protobuf::Map<std::string, uint64_t>& map) {
  std::map<std::string, uint64_t> out;
  for (const auto& [k, v] : map) out[k] = v;
  return out;
}

std::string Show(const std::string& workload) { return DisplayText(workload); }

std::string Seen(const v1::Occurrences& o) {
  return std::to_string(o.count()) + "x, " + Time(o.first()) + (o.count() > 1 ? " .. " + Time(o.last()) : "");
}

std::string Destination(const v1::DestinationSeen& d) {
  std::string where = d.address().find(':') != std::string::npos && d.port() ? "[" + d.address() + "]" : d.address();
  if (d.port()) where += ":" + std::to_string(d.port());
  if (!d.protocol().empty()) where += "/" + d.protocol();
  return where;
}

std::string Directory(const v1::DirectorySeen& d) {
  return d.directory().empty() ? std::string("(relative, as written)") : d.directory();
}

// The family colours of the timeline (also what the browser test looks for).
const std::vector<std::pair<std::string, std::string>>& FamilyColours() {
  static const std::vector<std::pair<std::string, std::string>> kColours = {
      {"net", "#d62728"},        {"file", "#1f77b4"},    {"tamper", "#9467bd"}, {"resource", "#ff7f0e"},
      {"credential", "#2ca02c"}, {"sandbox", "#000000"}, {"other", "#7f7f7f"}};
  return kColours;
}

std::string Integrity(const v1::ImpactReport& r) {
  std::string out;
  if (r.integrity().chain_verified())
    out = "hash chain verified (" + std::to_string(r.integrity().lines()) + " lines)";
  else
    out = "HASH CHAIN DOES NOT VERIFY: " + Show(r.integrity().chain_error()) +
          " (the report covers every line read; what it says after that point may have been changed)";
  return out;
}

}  // namespace

std::string HtmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string ImpactText(const v1::ImpactReport& r) {
  std::string out;
  auto line = [&](const std::string& text) { out += text + "\n"; };
  line("cordon impact report");
  line("  files: " + Show(JoinStrings({r.files().begin(), r.files().end()}, ", ")));
  line("  integrity: " + Integrity(r));
  for (const auto& note : r.integrity().notes()) line("  note: " + Show(note));
  if (r.has_since() || r.has_until())
    line("  window: " + (r.has_since() ? Time(r.since()) : std::string("start")) + " .. " +
         (r.has_until() ? Time(r.until()) : std::string("end")));
  if (r.sandboxes().empty()) line("\nno events of the sandbox(es) asked for in the files and window given");
  for (const auto& s : r.sandboxes()) {
    line("");
    line("sandbox " + Show(s.name()) + " (cgroup id " + std::to_string(s.sandbox_cgroup_id()) + ")");
    line("  time span: " + Time(s.events().first()) + " .. " + Time(s.events().last()) + ", " +
         std::to_string(s.events().count()) + " events");
    line("  cgroups: " + Show(JoinStrings({s.cgroup_paths().begin(), s.cgroup_paths().end()}, ", ")));
    line("  policies: " + Show(JoinStrings({s.policies().begin(), s.policies().end()}, ", ")));
    std::vector<std::string> verdicts;
    for (const auto& [v, n] : Sorted(s.by_verdict())) verdicts.push_back(Show(v) + " " + std::to_string(n));
    line("  verdicts: " + JoinStrings(verdicts, ", "));
    if (s.lost() || s.suppressed())
      line("  INCOMPLETE: " + std::to_string(s.lost()) + " events lost (ring buffer full), " +
           std::to_string(s.suppressed()) + " held back by the rate limit");
    line("  processes and executables:");
    for (const auto& p : s.processes()) {
      std::vector<std::string> pids;
      for (uint32_t pid : p.pids()) pids.push_back(std::to_string(pid));
      line("    " + Show(p.exe().empty() ? std::string("(exe unknown: gone)") : p.exe()) + " as " +
           Show(JoinStrings({p.comms().begin(), p.comms().end()}, ", ")) + "; pids " + JoinStrings(pids, " ") +
           (p.distinct_pids() > static_cast<uint64_t>(p.pids_size()) ? " ..." : "") + "; " + Seen(p.events()));
    }
    line("  network:");
    if (s.network().empty()) line("    none recorded (allowed connections are not events)");
    for (const auto& d : s.network())
      line("    " + Show(d.verdict()) + " " + Show(d.kind()) + " " + Show(Destination(d)) + ": " + Seen(d.seen()) +
           (d.source() == "evidence" ? " (open at containment)" : ""));
    line("  files (by directory):");
    if (s.files().empty()) line("    none recorded");
    for (const auto& f : s.files()) {
      std::vector<std::string> names;
      for (const auto& n : f.examples()) names.push_back(Show(n));
      line("    " + Show(f.verdict()) + " " + Show(f.access()) + " in " + Show(Directory(f)) + ": " + Seen(f.seen()) +
           ", " + std::to_string(f.distinct_files()) + " file(s): " + JoinStrings(names, ", ") +
           (f.distinct_files() > static_cast<uint64_t>(f.examples_size()) ? ", ..." : ""));
    }
    line("  credentials:");
    if (s.credentials().empty() && s.exposed_variables().empty()) line("    none");
    for (const auto& c : s.credentials()) {
      std::string text = "    " + Show(c.name()) + " (fingerprint " +
                         (c.fingerprint().empty() ? "-" : Show(c.fingerprint())) + ", by " + Show(c.issuer()) + ")";
      if (c.has_issued()) text += " issued " + Time(c.issued());
      if (c.has_expires()) text += ", expires " + Time(c.expires());
      if (c.refreshed()) text += ", refreshed " + std::to_string(c.refreshed()) + "x";
      if (c.has_revoked()) text += ", revoked " + Time(c.revoked()) + " (" + Show(c.revoked_reason()) + ")";
      if (c.has_expired()) text += ", expired " + Time(c.expired());
      if (c.issue_failed()) text += ", issue failed " + std::to_string(c.issue_failed()) + "x";
      line(text);
    }
    if (!s.exposed_variables().empty())
      line("    exposed in the environment (names only): " +
           Show(JoinStrings({s.exposed_variables().begin(), s.exposed_variables().end()}, ", ")));
    line("  resource peaks:");
    if (s.resources().empty()) line("    none reported");
    for (const auto& res : s.resources()) {
      std::vector<std::string> counters;
      for (const auto& [k, v] : Sorted(res.counters())) counters.push_back(Show(k) + " " + std::to_string(v));
      line("    " + Show(res.name()) + ": peak " + std::to_string(res.peak()) + " at " + Time(res.at()) +
           (res.limit() ? ", limit " + std::to_string(res.limit()) : "") + "; " + JoinStrings(counters, ", "));
    }
    line("  tamper attempts:");
    if (s.tamper().empty()) line("    none");
    for (const auto& t : s.tamper()) {
      std::vector<std::string> examples;
      for (const auto& e : t.examples()) examples.push_back(Show(e));
      line("    " + Show(t.verdict()) + " " + Show(t.kind()) + ": " + Seen(t.seen()) +
           (examples.empty() ? "" : " (" + JoinStrings(examples, "; ") + ")"));
    }
    line("  containment:");
    if (s.containment().empty()) line("    none");
    for (const auto& c : s.containment()) {
      const auto& k = c.containment();
      line("    " + Time(c.time()) + " " + Show(c.kind()) + " by " + Show(k.by()) + " via " + Show(k.via()) + ": " +
           Show(k.reason()) + (k.frozen() ? "; frozen" : "") + (k.killed() ? "; killed" : "") + "; " +
           std::to_string(k.processes()) + " processes, " + std::to_string(k.connections_destroyed()) +
           " connections destroyed" + (k.trigger().empty() ? "" : "; trigger " + Show(k.trigger())));
      if (!k.evidence().empty())
        line("      evidence " + Show(k.evidence()) +
             (c.evidence_error().empty() ? "" : ": not read (" + Show(c.evidence_error()) + ")"));
      for (const auto& p : c.processes()) {
        std::vector<std::string> args;
        for (const auto& a : p.cmdline()) args.push_back(Show(a));
        line("      pid " + std::to_string(p.pid()) + " " + Show(p.exe()) + ": " + JoinStrings(args, " "));
      }
    }
  }
  return out;
}

std::string ImpactHtml(const v1::ImpactReport& r) {
  std::string h;
  auto esc = [](const std::string& workload) { return HtmlEscape(DisplayText(workload)); };
  h += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
       "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n"
       "<title>cordon impact report</title>\n<style>\n"
       "body{font-family:sans-serif;margin:1.5em;color:#222;background:#fff}\n"
       "table{border-collapse:collapse;margin:.5em 0 1em}td,th{border:1px solid #ccc;padding:2px 6px;"
       "text-align:left;vertical-align:top;font-size:13px}th{background:#eee}\n"
       "code{font-family:monospace;white-space:pre-wrap;word-break:break-all}.bad{color:#b00;font-weight:bold}\n"
       ".legend span{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:middle}\n"
       "</style></head><body>\n<h1>cordon impact report</h1>\n";
  h += "<p>Files: <code>" + esc(JoinStrings({r.files().begin(), r.files().end()}, ", ")) + "</code></p>\n";
  h += std::string("<p id=\"integrity\"") + (r.integrity().chain_verified() ? ">" : " class=\"bad\">") +
       esc(Integrity(r)) + "</p>\n";
  for (const auto& note : r.integrity().notes()) h += "<p>Note: <code>" + esc(note) + "</code></p>\n";
  if (r.sandboxes().empty()) h += "<p>No events of the sandbox(es) asked for in the files and window given.</p>\n";
  int index = 0;
  for (const auto& s : r.sandboxes()) {
    h += "<section class=\"sandbox\" id=\"sandbox-" + std::to_string(index++) + "\">\n<h2>Sandbox <code>" +
         esc(s.name()) + "</code> (cgroup id " + std::to_string(s.sandbox_cgroup_id()) + ")</h2>\n";
    h += "<p>" + Time(s.events().first()) + " .. " + Time(s.events().last()) + ", " +
         std::to_string(s.events().count()) + " events</p>\n";
    if (s.lost() || s.suppressed())
      h += "<p class=\"bad\">Incomplete: " + std::to_string(s.lost()) + " events lost, " +
           std::to_string(s.suppressed()) + " held back by the rate limit.</p>\n";
    // The timeline: stacked bars of events by family per bucket.
    const int width = 900, height = 200, left = 40, bottom = 20;
    const auto& buckets = s.timeline().buckets();
    uint64_t peak = 1;
    std::set<std::string> present;
    for (const auto& b : buckets) {
      uint64_t sum = 0;
      for (const auto& [family, n] : b.by_family()) sum += n, present.insert(family);
      peak = std::max(peak, sum);
    }
    const double bar = buckets.empty() ? 0 : static_cast<double>(width - left) / buckets.size();
    h += "<h3>Timeline (events by kind)</h3>\n<svg class=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
         std::to_string(width) + "\" height=\"" + std::to_string(height) + "\" role=\"img\">\n";
    h += "<line x1=\"" + std::to_string(left) + "\" y1=\"" + std::to_string(height - bottom) + "\" x2=\"" +
         std::to_string(width) + "\" y2=\"" + std::to_string(height - bottom) + "\" stroke=\"#888\"/>\n";
    h += "<text x=\"0\" y=\"12\" font-size=\"11\">" + std::to_string(peak) + "</text>\n";
    char buf[256];
    for (int i = 0; i < buckets.size(); ++i) {
      double y = height - bottom;
      for (const auto& [family, colour] : FamilyColours()) {
        auto it = buckets[i].by_family().find(family);
        if (it == buckets[i].by_family().end() || it->second == 0) continue;
        const double bar_height = static_cast<double>(height - bottom - 16) * it->second / peak;
        y -= bar_height;
        std::snprintf(buf, sizeof buf,
                      "<rect class=\"bar %s\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\">"
                      "<title>%s: %llu</title></rect>\n",
                      family.c_str(), left + i * bar + 1, y, std::max(1.0, bar - 2), bar_height, colour.c_str(),
                      family.c_str(), static_cast<unsigned long long>(it->second));
        h += buf;
      }
    }
    h += "<text x=\"" + std::to_string(left) + "\" y=\"" + std::to_string(height - 4) + "\" font-size=\"11\">" +
         Time(s.events().first()) + "</text>\n<text x=\"" + std::to_string(width) + "\" y=\"" +
         std::to_string(height - 4) + "\" font-size=\"11\" text-anchor=\"end\">" + Time(s.events().last()) +
         "</text>\n</svg>\n<p class=\"legend\">";
    for (const auto& [family, colour] : FamilyColours())
      if (present.count(family)) h += "<span style=\"background:" + colour + "\"></span>" + family;
    h += "</p>\n";
    auto table = [&](const std::string& title, const std::string& css, const std::vector<std::string>& head,
                     const std::vector<std::vector<std::string>>& rows) {
      h += "<h3>" + title + "</h3>\n";
      if (rows.empty()) return void(h += "<p>None recorded.</p>\n");
      h += "<table class=\"" + css + "\"><tr>";
      for (const auto& c : head) h += "<th>" + c + "</th>";
      h += "</tr>\n";
      for (const auto& row : rows) {
        h += "<tr>";
        for (const auto& c : row) h += "<td>" + c + "</td>";
        h += "</tr>\n";
      }
      h += "</table>\n";
    };
    auto count = [](const v1::Occurrences& o) { return std::to_string(o.count()); };
    std::vector<std::vector<std::string>> rows;
    for (const auto& p : s.processes()) {
      std::vector<std::string> pids;
      for (uint32_t pid : p.pids()) pids.push_back(std::to_string(pid));
      rows.push_back({"<code>" + esc(p.exe()) + "</code>",
                      "<code>" + esc(JoinStrings({p.comms().begin(), p.comms().end()}, ", ")) + "</code>",
                      JoinStrings(pids, " "), count(p.events()), Time(p.events().first()), Time(p.events().last())});
    }
    table("Processes and executables", "processes", {"executable", "names", "pids", "events", "first", "last"}, rows);
    rows.clear();
    for (const auto& d : s.network())
      rows.push_back({esc(d.verdict()), esc(d.kind()), "<code>" + esc(Destination(d)) + "</code>", count(d.seen()),
                      Time(d.seen().first()), Time(d.seen().last()), esc(d.source())});
    table("Network", "network", {"verdict", "kind", "destination", "count", "first", "last", "source"}, rows);
    rows.clear();
    for (const auto& f : s.files()) {
      std::vector<std::string> names;
      for (const auto& n : f.examples()) names.push_back(esc(n));
      rows.push_back({esc(f.verdict()), esc(f.access()), "<code>" + esc(Directory(f)) + "</code>",
                      std::to_string(f.distinct_files()), "<code>" + JoinStrings(names, ", ") + "</code>",
                      count(f.seen()), Time(f.seen().first()), Time(f.seen().last())});
    }
    table("Files (by directory)", "files",
          {"verdict", "access", "directory", "files", "examples", "count", "first", "last"}, rows);
    rows.clear();
    for (const auto& c : s.credentials())
      rows.push_back({"<code>" + esc(c.name()) + "</code>", esc(c.fingerprint()), esc(c.issuer()),
                      c.has_issued() ? Time(c.issued()) : "", c.has_expires() ? Time(c.expires()) : "",
                      std::to_string(c.refreshed()),
                      c.has_revoked() ? Time(c.revoked()) + " " + esc(c.revoked_reason()) : "",
                      c.has_expired() ? Time(c.expired()) : ""});
    table("Credentials", "credentials",
          {"name", "fingerprint", "issuer", "issued", "expires", "refreshed", "revoked", "expired"}, rows);
    rows.clear();
    for (const auto& res : s.resources())
      rows.push_back({esc(res.name()), std::to_string(res.peak()), Time(res.at()), std::to_string(res.limit())});
    table("Resource peaks", "resources", {"resource", "peak", "at", "limit"}, rows);
    rows.clear();
    for (const auto& t : s.tamper()) {
      std::vector<std::string> examples;
      for (const auto& e : t.examples()) examples.push_back(esc(e));
      rows.push_back({esc(t.verdict()), esc(t.kind()), count(t.seen()), Time(t.seen().first()), Time(t.seen().last()),
                      "<code>" + JoinStrings(examples, "; ") + "</code>"});
    }
    table("Tamper attempts", "tamper", {"verdict", "kind", "count", "first", "last", "examples"}, rows);
    rows.clear();
    for (const auto& c : s.containment()) {
      const auto& k = c.containment();
      rows.push_back({Time(c.time()), esc(c.kind()), esc(k.by()), esc(k.via()), esc(k.reason()),
                      std::string(k.frozen() ? "frozen " : "") + (k.killed() ? "killed " : "") +
                          std::to_string(k.processes()) + " processes, " + std::to_string(k.connections_destroyed()) +
                          " connections destroyed",
                      "<code>" + esc(k.evidence()) + "</code>" +
                          (c.evidence_error().empty() ? "" : " (not read: " + esc(c.evidence_error()) + ")")});
    }
    table("Containment", "containment", {"time", "event", "by", "via", "reason", "done", "evidence"}, rows);
    h += "</section>\n";
  }
  h += "</body></html>\n";
  return h;
}

}  // namespace cordon::inspect
