// `cordon report`: the impact of a sandbox from its audit trail (and its
// containment evidence): inspect/impact.h aggregates, this reads the files.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "agent/config.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "events/audit_file.h"
#include "inspect/impact.h"
#include "sys/cgroup.h"
#include "util/fs.h"
#include "util/text.h"

namespace cordon::cli {
namespace {

const char* kReportHelp =
    "usage: cordon report [--sandbox NAME | --cgroup PATH] [--audit FILE...] [--since T] [--until T]\n"
    "                     [-o text|json|html]\n"
    "\n"
    "What a sandbox did, from its audit trail: the time span; the processes and executables\n"
    "seen; every network destination attempted, with its verdict, count and first and last\n"
    "time (connections open when it was contained, from the containment evidence, as\n"
    "connected: allowed connections are not events otherwise); file accesses collapsed by\n"
    "directory; the credentials issued and their lifetime (names and fingerprints, never\n"
    "values); resource peaks; tamper attempts; containment (who, why, and its evidence).\n"
    "Without --sandbox or --cgroup, every sandbox in the files is reported, each apart.\n"
    "\n"
    "options:\n"
    "  --sandbox NAME       only the sandbox of that name\n"
    "  --cgroup PATH        only the sandbox of that cgroup (absolute, or below the cgroup2 mount;\n"
    "                       a cgroup that is gone is matched by the events' cgroup paths)\n"
    "  --audit FILE         an audit file to read (repeatable; rotated files oldest first).\n"
    "                       Default: the agent's audit file and its rotations (its configuration),\n"
    "                       then cordon run's default logs (/var/log/cordon/run-*.jsonl)\n"
    "  --since T            only events from T on: a duration ago (90s, 10m, 2h, 1d) or a UTC time\n"
    "                       (2026-12-04T21:30:00Z)\n"
    "  --until T            only events up to T (the same forms)\n"
    "  -o, --output FMT     text (default), json (ImpactReport in userspace/proto/report.proto),\n"
    "                       or html: one self-contained page (no scripts, nothing fetched) with a\n"
    "                       timeline chart of events by kind\n"
    "\n"
    "The hash chain is verified while reading: a chain that does not verify is said in the\n"
    "report (and on stderr), which still covers every line. A file that cannot be read or a line\n"
    "that is not an audit event is an error naming FILE:LINE (exit 1). Names the workload chose\n"
    "are shown escaped (text) and HTML-escaped (html): treat them as data.\n";

}  // namespace

std::vector<std::string> DefaultAuditFiles() {
  std::vector<std::string> files = AgentAuditFiles();
  files.erase(
      std::remove_if(files.begin(), files.end(), [](const std::string& f) { return ::access(f.c_str(), R_OK) != 0; }),
      files.end());
  // cordon run's default logs (run-<time>-<pid>.jsonl), oldest first.
  std::vector<std::string> runs;
  if (auto names = ListDir(agent::kDefaultRunLogDir))
    for (const auto& n : *names)
      if (n.rfind("run-", 0) == 0 && n.size() > 10 && n.compare(n.size() - 6, 6, ".jsonl") == 0)
        runs.push_back(JoinPath(agent::kDefaultRunLogDir, n));
  std::sort(runs.begin(), runs.end());
  files.insert(files.end(), runs.begin(), runs.end());
  return files;
}

int ReportCommand(const Args& args) {
  if (WantsHelp(args)) return std::fputs(kReportHelp, stdout), 0;
  ParsedArgs parsed;
  std::string error;
  if (!ParseArgs(args,
                 {{"--sandbox", "", true},
                  {"--cgroup", "", true},
                  {"--audit", "", true, true},
                  {"--since", "", true},
                  {"--until", "", true},
                  {"--output", "-o", true, false, {"text", "json", "html"}}},
                 &parsed, &error) ||
      !parsed.positionals.empty()) {
    Usage(error.empty() ? "unexpected argument " + Quoted(parsed.positionals[0]) : error, kReportHelp);
    return 2;
  }
  if (parsed.Has("--sandbox") && parsed.Has("--cgroup"))
    return Usage("give --sandbox or --cgroup, not both", kReportHelp), 2;
  inspect::ImpactScope scope;
  if (!ParseTimeWindow(parsed, &scope.since_unix_ns, &scope.until_unix_ns, kReportHelp)) return 2;
  scope.sandbox = parsed.Get("--sandbox").value_or("");
  if (auto cgroup = parsed.Get("--cgroup")) {
    auto ref = ResolveCgroup(*cgroup);
    if (ref) {
      scope.sandbox_id = ref->id;
    } else {
      // Gone (an incident's sandbox often is): matched by path below the mount.
      std::string path = *cgroup;
      auto mount = FindCgroup2Mount();
      if (mount && path.rfind(*mount + "/", 0) == 0) path = path.substr(mount->size());
      scope.cgroup = path;
    }
  }
  std::vector<std::string> files;
  if (parsed.options.count("--audit")) {
    files = parsed.options.at("--audit");
  } else {
    files = DefaultAuditFiles();
    if (files.empty())
      return PrintError("no audit file found (neither the agent's configured one nor cordon run's logs in " +
                        std::string(agent::kDefaultRunLogDir) + "): give --audit FILE"),
             1;
  }
  inspect::ImpactBuilder builder(scope, [](const std::string& path, std::string* text, std::string* why) {
    auto read = ReadFile(path, 64u << 20);
    if (!read) return *why = read.error().ToString(), false;
    *text = std::move(*read);
    return true;
  });
  AuditFileReader reader;
  for (const auto& file : files)
    if (!reader.ReadFile(file, [&](const cordon::v1::AuditEvent& e) { builder.Add(e); }))
      return PrintError("report: " + DisplayText(EscapeWorkloadBytes(reader.error()))), 1;
  cordon::v1::ImpactReport report = builder.Finish();
  for (const auto& f : files) report.add_files(EscapeWorkloadBytes(f));
  auto* integrity = report.mutable_integrity();
  integrity->set_lines(reader.lines());
  integrity->set_chain_verified(reader.chain_error().empty());
  integrity->set_chain_error(EscapeWorkloadBytes(reader.chain_error()));
  for (const auto& note : reader.notes()) integrity->add_notes(EscapeWorkloadBytes(note));
  if (!reader.chain_error().empty())
    PrintError("warning: the audit trail's hash chain does not verify: " +
               DisplayText(EscapeWorkloadBytes(reader.chain_error())) + " (reported anyway; the report says so)");
  if ((!scope.sandbox.empty() || scope.sandbox_id || !scope.cgroup.empty()) && report.sandboxes().empty())
    PrintNote("no event of that sandbox in the files and window given");
  const std::string format = parsed.Get("--output").value_or("text");
  const std::string out = format == "json"   ? inspect::ImpactJson(report)
                          : format == "html" ? inspect::ImpactHtml(report)
                                             : inspect::ImpactText(report);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace cordon::cli
