// `cordon regress capture | run` (and the hidden `probe`): regression tests
// from violations. The case model, its YAML and the judging are
// ops/regress.h; the probe's syscalls ops/regress_probe.cc; the sandbox a
// case runs in is cordon run's own (RunCommandWith). This file reads the
// files and the options.
#include <fcntl.h>
#include <google/protobuf/util/json_util.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/run_events.h"
#include "confine/landlock.h"
#include "events/audit_file.h"
#include "loader/lsm.h"
#include "ops/policy_store.h"
#include "ops/regress.h"
#include "policy/compiler.h"
#include "policy/parser.h"
#include "util/fd.h"
#include "util/fs.h"
#include "util/text.h"

namespace cordon::cli {
namespace {

namespace v1 = cordon::v1;

const char* kRegressHelp =
    "usage: cordon regress capture (--audit FILE... [--id EVENT_ID...] | --sandbox NAME) --out DIR\n"
    "                              [--policy FILE [--policy-mismatch-ok]]\n"
    "       cordon regress run DIR... [--policy FILE] [--junit FILE] [--allow-skipped]\n"
    "\n"
    "capture: one test case per distinct denied violation (kind and target: address and port,\n"
    "path and access, operation) of an audit trail, in DIR: <kind>-<target>.case.yaml (plain\n"
    "YAML to review and commit: where it came from, the probe, the verdict expected) and the\n"
    "policy in force, copied as policy-<digest>.yaml with its sha256 digest in the case. Quiet\n"
    "(expected) denials and detected or noted records are not violations to keep out.\n"
    "  --audit FILE   an audit file to read (repeatable; default: the agent's and cordon run's)\n"
    "  --id ID        only this event: its id (AuditEvent.id) or its line's chain value, or a\n"
    "                 prefix of either of at least 8 characters (repeatable)\n"
    "  --sandbox NAME only the events of this sandbox\n"
    "  --out DIR      where the cases go (created; a case of the same name is replaced)\n"
    "  --policy FILE  the policy text that was in force, instead of the one kept by its digest.\n"
    "                 Each event names the digest of its policy, and cordon keeps every policy\n"
    "                 it puts in force under /var/lib/cordon/policies/ by that digest: this is\n"
    "                 needed only for a trail of a cordon that kept none, or another host's.\n"
    "                 A file whose name or digest differs from what the trail names is refused,\n"
    "  --policy-mismatch-ok  unless this is given (then the case records both digests)\n"
    "\n"
    "run: each case (DIR's *.case.yaml, or a case file) in a fresh sandbox made as `cordon run`\n"
    "makes one, with the case's policy (or --policy FILE, to test a changed policy) and the probe's\n"
    "own executable allowed to run: cordon's built-in probe attempts exactly the recorded\n"
    "operation once (connect or sendto, non-blocking, 2 s at most; open with the access; exec;\n"
    "mknod of a regular file, removed at once if made (skipped where the path exists); chmod to\n"
    "the mode the path has; one page mapped PROT_EXEC; bpf()). A case passes when the operation\n"
    "failed with the errno of the layer that refused it (EPERM: kernel-cgroup, kernel-lsm,\n"
    "seccomp; EACCES: landlock; EROFS: mount) AND the sandbox reported a denied event of that\n"
    "kind on that target. A case recorded at kernel-lsm needs BPF\n"
    "LSM, and so do file.setattr and file.mmap_exec (Landlock judges neither): without it, it is\n"
    "skipped with the reason (never passed); so is a kind without a probe.\n"
    "  --policy FILE  run every case under this policy instead of its own\n"
    "  --junit FILE   JUnit XML of the results (failure and skipped messages say what happened)\n"
    "  --allow-skipped  exit 0 even when cases were skipped (a CI host that knowingly lacks BPF\n"
    "                 LSM); they are still listed, with the reason\n"
    "\n"
    "Exit status: 0 every case ran and was denied as expected; 1 a case was not denied or its\n"
    "event is missing (each named on stderr), or capture found nothing; 2 usage errors and case\n"
    "files that do not read (FILE:LINE:COLUMN: FIELD: what); 3 no case failed but some were\n"
    "skipped (each named on stderr with the reason, and in the JUnit file; 0 with --allow-skipped).\n";

// The first `n` hex digits of a sha256:<hex> digest.
std::string DigestStem(const std::string& digest) { return digest.substr(7, 12); }

// What a --id selects: the id, the chain value, or a prefix of either (8+).
bool IdMatches(const std::string& want, const v1::AuditEvent& e) {
  if (want == e.id() || want == e.chain()) return true;
  if (want.size() < 8) return false;
  return e.id().rfind(want, 0) == 0 || e.chain().rfind(want, 0) == 0;
}

// The policy digest the containment evidence of a sandbox.contained event names ("" if none).
std::string EvidenceDigest(const v1::AuditEvent& e) {
  if (e.containment().evidence().empty()) return "";
  auto text = ReadFile(e.containment().evidence(), 64u << 20);
  if (!text) return "";
  v1::ContainmentEvidence evidence;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  if (!google::protobuf::util::JsonStringToMessage(*text, &evidence, options).ok()) return "";
  return evidence.policy().digest();
}

int Capture(const Args& args) {
  ParsedArgs parsed;
  std::string error;
  if (!ParseArgs(args,
                 {{"--audit", "", true, true},
                  {"--id", "", true, true},
                  {"--sandbox", "", true},
                  {"--out", "", true},
                  {"--policy", "", true},
                  {"--policy-mismatch-ok"}},
                 &parsed, &error) ||
      !parsed.positionals.empty())
    return Usage(error.empty() ? "unexpected argument " + Quoted(parsed.positionals[0]) : error, kRegressHelp), 2;
  if (!parsed.Has("--out")) return Usage("capture needs --out DIR", kRegressHelp), 2;
  if (!parsed.Has("--audit") && !parsed.Has("--sandbox"))
    return Usage("capture needs --audit FILE or --sandbox NAME", kRegressHelp), 2;
  if (parsed.Has("--id") && !parsed.Has("--audit"))
    return Usage("--id selects events of --audit FILE", kRegressHelp), 2;
  const std::string sandbox = parsed.Get("--sandbox").value_or("");
  std::vector<std::string> files = parsed.Has("--audit") ? parsed.options.at("--audit") : DefaultAuditFiles();
  if (files.empty()) return PrintError("no audit file found: give --audit FILE"), 1;

  // The trail: violations in scope, and the digests containment evidence names.
  std::vector<std::pair<v1::AuditEvent, ops::CaptureSource>> selected;
  std::map<std::string, std::set<std::string>> evidence_digests;  // by policy name
  const std::vector<std::string> ids = parsed.Has("--id") ? parsed.options.at("--id") : std::vector<std::string>{};
  std::map<std::string, int> id_hits;
  std::set<uint64_t> contained;  // sandboxes between sandbox.contained and sandbox.released
  AuditFileReader reader;
  for (const auto& file : files) {
    const bool ok = reader.ReadFile(file, [&](const v1::AuditEvent& e) {
      if (!sandbox.empty() && e.sandbox() != sandbox) return;
      if (e.kind() == "sandbox.contained") {
        if (std::string d = EvidenceDigest(e); !d.empty()) evidence_digests[e.policy()].insert(d);
        contained.insert(e.sandbox_cgroup_id());
      }
      if (e.kind() == "sandbox.released") contained.erase(e.sandbox_cgroup_id());
      // While contained everything is refused: not the policy's refusals.
      if (contained.count(e.sandbox_cgroup_id())) return;
      if (!ids.empty()) {
        bool hit = false;
        for (const auto& id : ids)
          if (IdMatches(id, e)) hit = true, ++id_hits[id];
        if (!hit) return;
        ops::RegressProbe probe;
        if (!ops::RegressProbeOf(e, &probe)) {
          PrintError("event " + Quoted(e.id().empty() ? e.chain() : e.id()) + " (" + e.kind() + ", " + e.verdict() +
                     (e.quiet() ? ", quiet" : "") + ") is not a denied violation: no case is made of it");
          return;
        }
      }
      selected.push_back({e, ops::CaptureSource{file}});
    });
    if (!ok) return PrintError("regress capture: " + DisplayText(EscapeWorkloadBytes(reader.error()))), 1;
  }
  if (!reader.chain_error().empty())
    PrintError("warning: the audit trail's hash chain does not verify: " +
               DisplayText(EscapeWorkloadBytes(reader.chain_error())));
  for (const auto& id : ids) {
    if (id_hits[id] == 0) return PrintError("no event with id or chain " + Quoted(id) + " in the files given"), 1;
    if (id_hits[id] > 1)
      return PrintError("--id " + Quoted(id) + " matches " + std::to_string(id_hits[id]) + " events: give more of it"),
             1;
  }
  std::vector<ops::RegressCase> cases = ops::DistinctCases(selected);
  if (cases.empty())
    return PrintError("no denied violation" + (sandbox.empty() ? std::string() : " of sandbox " + Quoted(sandbox)) +
                      " in the files given: nothing captured"),
           1;
  // The policy of each case: the text kept under the digest its event
  // names (README "Policy texts by digest"), or --policy FILE.
  struct PolicyText {
    std::string text, from, digest, file;
  };
  std::map<std::string, PolicyText> policies;  // by the digest in force ("" unknown)
  const std::optional<std::string> given = parsed.Get("--policy");
  const bool mismatch_ok = parsed.Has("--policy-mismatch-ok");
  for (auto& c : cases) {
    std::string& in_force = c.policy_in_force;
    if (in_force.empty())  // a trail of an older cordon: the containment evidence's digest, if one
      if (auto it = evidence_digests.find(c.policy_name); it != evidence_digests.end() && it->second.size() == 1)
        in_force = *it->second.begin();
    if (in_force.empty() && c.policy_name == "default" && !given) in_force = "builtin:default";
    if (policies.count(in_force)) continue;
    PolicyText p;
    if (given) {
      auto read = ReadFile(*given, 16u << 20);
      if (!read) return PrintError("--policy: " + read.error().ToString()), 1;
      p.text = std::move(*read);
      p.from = *given;
    } else if (!in_force.empty()) {
      auto kept = ops::KeptPolicyText(in_force);
      if (!kept)
        return PrintError("the policy of " + c.probe.kind + " " + DisplayText(c.probe.Target()) + " (" +
                          Quoted(c.policy_name) + "): " + kept.error().ToString() +
                          ". Give --policy FILE, the file that was in force; nothing captured"),
               1;
      p.text = std::move(*kept);
      p.from = in_force == "builtin:default" ? "the built-in default policy"
                                             : JoinPath(PolicyStoreDir(), ops::PolicyStoreName(in_force));
    } else {
      return PrintError("the trail names policy " + Quoted(c.policy_name) +
                        " without its digest (written by a cordon that recorded none): give --policy FILE, the "
                        "file that was in force; nothing captured"),
             1;
    }
    policy::ParsedPolicy parsed_policy;
    policy::Diagnostics diags;
    if (!policy::ParsePolicyText(p.text, p.from, &parsed_policy, &diags)) {
      std::fputs(policy::FormatDiagnostics(diags).c_str(), stderr);
      return PrintError("the policy " + Quoted(p.from) + " does not read: nothing captured"), 1;
    }
    p.digest = parsed_policy.digest;
    if (given && !in_force.empty() && in_force != "builtin:default" && in_force != p.digest) {
      if (!mismatch_ok)
        return PrintError("--policy " + Quoted(p.from) + " has digest " + p.digest + ", but the policy in force had " +
                          in_force + ": not the same text. Give the right file, or --policy-mismatch-ok to record " +
                          "it anyway (the case then names both)"),
               1;
      PrintNote("the policy recorded (" + p.digest + ") is not the one in force (" + in_force +
                "): --policy-mismatch-ok");
    }
    if (given && parsed_policy.proto.metadata().name() != c.policy_name && !mismatch_ok)
      return PrintError("--policy " + Quoted(p.from) + " is named " + Quoted(parsed_policy.proto.metadata().name()) +
                        ", but the violations were under " + Quoted(c.policy_name) +
                        ": give that policy's file, or --policy-mismatch-ok"),
             1;
    p.file = "policy-" + DigestStem(p.digest) + ".yaml";
    policies[in_force] = std::move(p);
  }

  // The files: each policy once, then each case.
  const std::string out = *parsed.Get("--out");
  if (Status st = MakeDirs(out); !st.ok()) return PrintError("--out: " + st.error().ToString()), 1;
  for (const auto& [in_force, p] : policies)
    if (Status st = WriteFileAtomic(out, p.file, p.text, 0644); !st.ok())
      return PrintError(st.error().ToString() + "; nothing captured"), 1;
  std::set<std::string> stems;
  for (auto& c : cases) {
    const PolicyText& p = policies.at(c.policy_in_force);
    c.policy_file = p.file;
    c.policy_digest = p.digest;
    if (c.policy_in_force == p.digest) c.policy_in_force.clear();
    std::string stem = ops::CaseFileStem(c);
    for (int n = 2; stems.count(stem); ++n) stem = ops::CaseFileStem(c) + "-" + std::to_string(n);
    stems.insert(stem);
    const std::string name = stem + ".case.yaml";
    if (Status st = WriteFileAtomic(out, name, ops::CaseYaml(c), 0644); !st.ok())
      return PrintError(st.error().ToString()), 1;
    std::printf("%s\t%s %s (%llu time%s)\n", DisplayText(EscapeWorkloadBytes(JoinPath(out, name))).c_str(),
                c.probe.kind.c_str(), DisplayText(c.probe.Target()).c_str(),
                static_cast<unsigned long long>(c.occurrences), c.occurrences == 1 ? "" : "s");
  }
  std::fflush(stdout);
  return 0;
}

// A case and the policy it runs under.
struct LoadedCase {
  ops::RegressCase c;
  std::string policy_path;
};

// The cases of the arguments (directories: their *.case.yaml, sorted), or
// an error naming the file (exit 2).
bool LoadCases(const std::vector<std::string>& paths, const std::string& policy_override,
               std::vector<LoadedCase>* out) {
  std::vector<std::string> files;
  for (const auto& p : paths) {
    struct stat st;
    if (::stat(p.c_str(), &st) != 0) return PrintError(p + ": " + std::strerror(errno)), false;
    if (!S_ISDIR(st.st_mode)) {
      files.push_back(p);
      continue;
    }
    auto names = ListDir(p);
    if (!names) return PrintError(p + ": " + names.error().ToString()), false;
    std::vector<std::string> found;
    for (const auto& n : *names)
      if (n.size() > 10 && n.compare(n.size() - 10, 10, ".case.yaml") == 0) found.push_back(JoinPath(p, n));
    if (found.empty()) return PrintError(p + ": no case file (*.case.yaml) in it"), false;
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  for (const auto& f : files) {
    auto text = ReadFile(f, 1u << 20);
    if (!text) return PrintError(text.error().ToString()), false;
    std::string error;
    auto c = ops::ParseCaseYaml(*text, f, &error);
    if (!c) return PrintError(error), false;
    LoadedCase lc{*c, ""};
    if (!policy_override.empty()) {
      lc.policy_path = policy_override;
    } else {
      const std::string dir = f.find('/') == std::string::npos ? "." : f.substr(0, f.rfind('/'));
      lc.policy_path = JoinPath(dir, c->policy_file);
      auto policy_text = ReadFile(lc.policy_path, 16u << 20);
      if (!policy_text) return PrintError(f + ": policy.file: " + policy_text.error().ToString()), false;
      policy::ParsedPolicy parsed;
      policy::Diagnostics diags;
      policy::ParsePolicyText(*policy_text, lc.policy_path, &parsed, &diags);
      if (parsed.digest != c->policy_digest)
        return PrintError(f + ": policy.digest: " + lc.policy_path + " has digest " + parsed.digest + ", not " +
                          c->policy_digest +
                          " (changed since it was captured? give --policy FILE to test a changed policy)"),
               false;
    }
    // Never issued here: an issue program runs as root on the host (a case
    // directory is data), and a regression test has no use for a live token.
    {
      auto text = ReadFile(lc.policy_path, 16u << 20);
      policy::ParsedPolicy parsed;
      policy::Diagnostics diags;
      if (text && policy::ParsePolicyText(*text, lc.policy_path, &parsed, &diags) &&
          parsed.proto.spec().credentials_size() > 0)
        std::fprintf(stderr,
                     "cordon: note: %s: spec.credentials are not issued by regress run (their issue and revoke "
                     "programs would run as root on this host); the probe runs without them\n",
                     lc.policy_path.c_str());
    }
    out->push_back(std::move(lc));
  }
  return true;
}

// Descriptors 1 and 2 into files of the case's directory while its sandbox
// runs (cordon run's notes and summary, the probe's result); restored after.
// Regular files: cordon run gives the command a Landlock rule for its stdio,
// which a memfd or a pipe cannot have.
class OutputAside {
 public:
  explicit OutputAside(const std::string& dir) {
    std::fflush(stdout);
    std::fflush(stderr);
    out_ = UniqueFd(::open((dir + "/out").c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    err_ = UniqueFd(::open((dir + "/err").c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    saved_out_ = UniqueFd(::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3));
    saved_err_ = UniqueFd(::fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3));
    if (out_.valid() && err_.valid() && saved_out_.valid() && saved_err_.valid()) {
      ::dup2(out_.get(), STDOUT_FILENO);
      ::dup2(err_.get(), STDERR_FILENO);
      active_ = true;
    }
  }
  ~OutputAside() { Restore(); }
  OutputAside(const OutputAside&) = delete;
  OutputAside& operator=(const OutputAside&) = delete;
  void Restore() {
    if (!active_) return;
    std::fflush(stdout);
    std::fflush(stderr);
    ::dup2(saved_out_.get(), STDOUT_FILENO);
    ::dup2(saved_err_.get(), STDERR_FILENO);
    active_ = false;
  }
  std::string Out() const { return Read(out_.get()); }
  std::string Err() const { return Read(err_.get()); }

 private:
  static std::string Read(int fd) {
    std::string text;
    char buf[4096];
    for (off_t off = 0;;) {
      ssize_t n = ::pread(fd, buf, sizeof buf, off);
      if (n <= 0 || text.size() > (1u << 20)) break;
      text.append(buf, static_cast<size_t>(n));
      off += n;
    }
    return text;
  }
  UniqueFd out_, err_, saved_out_, saved_err_;
  bool active_ = false;
};

// The probe's result: the last line of its output that is one.
std::optional<ops::ProbeResult> ResultIn(const std::string& out) {
  std::optional<ops::ProbeResult> found;
  size_t start = 0;
  while (start < out.size()) {
    size_t nl = out.find('\n', start);
    if (nl == std::string::npos) nl = out.size();
    const std::string line = out.substr(start, nl - start);
    if (!line.empty() && line[0] == '{')
      if (auto r = ops::ParseProbeResult(line)) found = r;
    start = nl + 1;
  }
  return found;
}

std::string LastLine(const std::string& text) {
  std::string t = text;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  size_t nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

ops::CaseOutcome RunCase(const LoadedCase& lc, int index, const std::string& self) {
  ops::RegressCase c = lc.c;  // with the stand-ins of this run (ProbeScratch)
  ops::CaseOutcome outcome;
  policy::ParsedPolicy parsed;
  {
    auto text = ReadFile(lc.policy_path, 16u << 20);
    policy::Diagnostics diags;
    if (!text || !policy::ParsePolicyText(*text, lc.policy_path, &parsed, &diags)) {
      outcome.message = "the case's policy " + lc.policy_path + " cannot be read now";
      return outcome;
    }
  }
  // A policy in audit mode refuses nothing: the case is not denied, and its
  // probe is not made (it would act where nothing refuses it).
  if (parsed.proto.spec().mode() == "audit") {
    outcome.message = "not denied: the policy " + lc.policy_path +
                      " is in audit mode (spec.mode: audit), which "
                      "refuses nothing; the probe was not made";
    return outcome;
  }
  // Namespace flags without CLONE_NEWUSER need CAP_SYS_ADMIN: without it the
  // kernel refuses them too, with the same EPERM, which cannot be told from
  // the filter's refusal.
  if ((c.probe.syscall == 56 || c.probe.syscall == 272) && !(c.probe.argument & CLONE_NEWUSER)) {
    bool sys_admin = false;
    for (const auto& cap : parsed.proto.spec().capabilities()) {
      std::string name = cap;
      for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      if (name.rfind("cap_", 0) == 0) name = name.substr(4);
      sys_admin = sys_admin || name == "sys_admin";
    }
    if (!sys_admin)
      return {ops::CaseOutcome::Kind::kSkipped,
              "these namespace flags need CAP_SYS_ADMIN, which the policy does not grant: the kernel would refuse "
              "them too, with the same EPERM as cordon's filter"};
  }
  // Landlock refuses a ptrace of a process outside its domain before BPF LSM
  // is asked, and reports nothing: where cordon run applies a Landlock
  // domain (file rules, or ABI 6 scoping), BPF LSM's refusal cannot be shown.
  if (c.probe.kind == "tamper.ptrace") {
    const int abi = ProbeLandlock().abi;
    if (abi >= 6 || (abi >= 1 && parsed.proto.spec().has_files()))
      return {ops::CaseOutcome::Kind::kSkipped,
              "cordon run's Landlock domain (ABI " + std::to_string(abi) +
                  (abi >= 6 ? ": signal scoping" : ": file rules") +
                  ") refuses a ptrace of a process outside it before BPF LSM is asked, and without an event: the "
                  "recorded refusal cannot be shown in regress's sandbox here"};
  }
  // Made before the sandbox, removed (and a stand-in process ended) after it.
  ops::ProbeScratch scratch;
  if (std::string why = scratch.Prepare(&c.probe, parsed.proto.spec().run_as(), self); !why.empty())
    return {ops::CaseOutcome::Kind::kSkipped, why};
  char tmpl[] = "/tmp/cordon-regress-XXXXXX";
  if (!::mkdtemp(tmpl)) {
    outcome.message = std::string("a directory for the case's audit file: ") + std::strerror(errno);
    return outcome;
  }
  const std::string dir = tmpl;
  const std::string audit = dir + "/audit.jsonl";
  // The probe is cordon itself, run through a descriptor of its executable:
  // what the sandbox's mounts hide (its private /tmp, where a build may be)
  // cannot hide the probe.
  UniqueFd exe(::open(self.c_str(), O_PATH | O_CLOEXEC));
  if (!exe.valid()) {
    outcome.message = "cordon's own executable " + self + ": " + std::strerror(errno);
    ::rmdir(dir.c_str());
    return outcome;
  }
  const std::string exe_fd = std::to_string(exe.get());
  Args run_args = {"--policy", lc.policy_path, "--audit", audit, "--name", "regress-" + std::to_string(index),
                   "--quiet",  "--keep-fd",    exe_fd};
  // The probe is cordon itself: a policy that restricts files must let it run.
  if (parsed.proto.spec().has_files()) run_args.insert(run_args.end(), {"--exec", self});
  run_args.insert(run_args.end(), {"--", "/proc/self/fd/" + exe_fd, "regress", "probe"});
  for (auto& a : ops::ProbeArgs(c.probe)) run_args.push_back(std::move(a));
  RunHooks hooks;
  hooks.events_directly = true;
  hooks.without_credentials = true;  // LoadCases said so for policies that have them
  bool ran = false;
  hooks.ran = &ran;
  std::string out, err;
  {
    OutputAside aside(dir);
    (void)RunCommandWith(run_args, hooks);
    aside.Restore();
    out = aside.Out();
    err = aside.Err();
  }
  std::vector<v1::AuditEvent> events;
  struct stat st;
  // cordon run removes (or leaves empty) a log no event was written to.
  if (::stat(audit.c_str(), &st) == 0 && st.st_size > 0) {
    AuditFileReader reader;
    if (!reader.ReadFile(audit, [&](const v1::AuditEvent& e) { events.push_back(e); }))
      outcome.message = "the case's audit file: " + reader.error();
  }
  ::unlink(audit.c_str());
  ::unlink((dir + "/out").c_str());
  ::unlink((dir + "/err").c_str());
  ::rmdir(dir.c_str());
  if (!outcome.message.empty()) return outcome;
  if (!ran) {
    outcome.message = "the probe's sandbox did not start: " + LastLine(err);
    return outcome;
  }
  auto result = ResultIn(out);
  ops::CaseOutcome judged = ops::JudgeCase(c, result, events);
  if (!result && !LastLine(err).empty()) judged.message += " (the run said: " + LastLine(err) + ")";
  return judged;
}

std::string SelfExe() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

int RunCases(const Args& args) {
  ParsedArgs parsed;
  std::string error;
  if (!ParseArgs(args, {{"--policy", "", true}, {"--junit", "", true}, {"--allow-skipped", "", false}}, &parsed,
                 &error))
    return Usage(error, kRegressHelp), 2;
  if (parsed.positionals.empty()) return Usage("run needs a case directory (or case file)", kRegressHelp), 2;
  const std::string policy_override = parsed.Get("--policy").value_or("");
  if (!policy_override.empty() && ::access(policy_override.c_str(), R_OK) != 0)
    return PrintError("--policy " + policy_override + ": " + std::strerror(errno)), 2;
  std::vector<LoadedCase> cases;
  if (!LoadCases(parsed.positionals, policy_override, &cases)) return 2;
  if (!IsRoot()) return PrintError("regress run needs root (each case runs in a fresh sandbox, as cordon run)"), 1;
  const std::string self = SelfExe();
  if (self.empty()) return PrintError("cannot find cordon's own executable (/proc/self/exe) for the probe"), 1;
  std::vector<ops::JunitCase> results;
  int failed = 0, skipped = 0, index = 0;
  for (const auto& lc : cases) {
    const ops::RegressCase& c = lc.c;
    ops::JunitCase j;
    j.name = c.file.substr(c.file.rfind('/') == std::string::npos ? 0 : c.file.rfind('/') + 1);
    j.classname = "cordon.regress." + c.probe.kind;
    const auto start = std::chrono::steady_clock::now();
    if (std::string why = ops::NoProbeReason(c.probe); !why.empty()) {
      j.outcome = {ops::CaseOutcome::Kind::kSkipped, why};
    } else if (std::string lsm = ops::NeedsBpfLsm(c); !lsm.empty() && !ProbeLsm().usable()) {
      j.outcome = {ops::CaseOutcome::Kind::kSkipped,
                   "needs BPF LSM (" + lsm + "), unusable here: " + ProbeLsm().detail};
    } else if (std::string now = ops::ProbePrecondition(c.probe); !now.empty()) {
      j.outcome = {ops::CaseOutcome::Kind::kSkipped, now};
    } else {
      j.outcome = RunCase(lc, ++index, self);
    }
    j.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const char* word = j.outcome.kind == ops::CaseOutcome::Kind::kPassed    ? "pass"
                       : j.outcome.kind == ops::CaseOutcome::Kind::kSkipped ? "skipped"
                                                                            : "FAIL";
    failed += j.outcome.kind == ops::CaseOutcome::Kind::kFailed;
    skipped += j.outcome.kind == ops::CaseOutcome::Kind::kSkipped;
    std::fprintf(stderr, "cordon: regress: %s %s: %s\n", word, DisplayText(EscapeWorkloadBytes(c.file)).c_str(),
                 DisplayText(j.outcome.message).c_str());
    results.push_back(std::move(j));
  }
  if (auto junit = parsed.Get("--junit")) {
    const std::string path = *junit;
    const std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
    if (Status st =
            WriteFileAtomic(dir.empty() ? "/" : dir, path.substr(path.rfind('/') + 1), ops::JunitXml(results), 0644);
        !st.ok())
      return PrintError("--junit: " + st.error().ToString()), 1;
  }
  std::fprintf(stderr, "cordon: regress: %zu case(s): %zu denied as expected, %d not, %d skipped\n", results.size(),
               results.size() - static_cast<size_t>(failed + skipped), failed, skipped);
  if (failed) return 1;
  if (!skipped) return 0;
  // A skipped case was not shown to be denied: not a pass, unless the
  // operator said this host knowingly skips them.
  for (const auto& j : results)
    if (j.outcome.kind == ops::CaseOutcome::Kind::kSkipped)
      std::fprintf(stderr, "cordon: regress: skipped %s: %s\n", DisplayText(EscapeWorkloadBytes(j.name)).c_str(),
                   DisplayText(j.outcome.message).c_str());
  if (parsed.Has("--allow-skipped")) return 0;
  std::fprintf(stderr,
               "cordon: regress: %d case(s) skipped, not shown to be denied here (exit 3; --allow-skipped accepts "
               "that)\n",
               skipped);
  return 3;
}

// The hidden stand-in mode of ProbeScratch (`cordon regress stand-in`): a
// process outside the sandbox for a signal or ptrace probe to act on. It
// ignores every signal it can, says it is ready on descriptor 3, and waits
// to be killed.
int StandIn() {
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  for (int sig = 1; sig < 65; ++sig)
    if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &ignore, nullptr);
  ::prctl(PR_SET_DUMPABLE, 1);  // ptrace's own checks refuse a process that is not
  if (::write(3, "r", 1) != 1) return 1;
  ::close(3);
  for (;;) ::pause();
}

// The hidden probe mode: `cordon regress probe KIND [options]`, one JSON line.
int Probe(const Args& args) {
  ParsedArgs parsed;
  std::string error;
  if (!ParseArgs(args,
                 {{"--family", "", true},
                  {"--protocol", "", true},
                  {"--address", "", true},
                  {"--port", "", true},
                  {"--path", "", true},
                  {"--access", "", true},
                  {"--arg", "", true},
                  {"--type", "", true},
                  {"--syscall", "", true},
                  {"--argument", "", true},
                  {"--level", "", true},
                  {"--option", "", true},
                  {"--scratch", "", true},
                  {"--target-pid", "", true}},
                 &parsed, &error) ||
      parsed.positionals.size() != 1)
    return PrintError(error.empty() ? "probe KIND [options]" : error), 2;
  ops::RegressProbe p;
  p.kind = parsed.positionals[0];
  p.family = parsed.Get("--family").value_or("inet");
  p.protocol = parsed.Get("--protocol").value_or("tcp");
  p.address = parsed.Get("--address").value_or("");
  p.port = static_cast<uint32_t>(std::strtoul(parsed.Get("--port").value_or("0").c_str(), nullptr, 10));
  p.path = parsed.Get("--path").value_or("");
  p.access = parsed.Get("--access").value_or("");
  p.arg = static_cast<uint32_t>(std::strtoul(parsed.Get("--arg").value_or("0").c_str(), nullptr, 10));
  p.type = parsed.Get("--type").value_or("");
  p.syscall = static_cast<uint32_t>(std::strtoul(parsed.Get("--syscall").value_or("0").c_str(), nullptr, 10));
  p.argument = static_cast<uint32_t>(std::strtoul(parsed.Get("--argument").value_or("0").c_str(), nullptr, 10));
  p.level = static_cast<uint32_t>(std::strtoul(parsed.Get("--level").value_or("0").c_str(), nullptr, 10));
  p.option = static_cast<uint32_t>(std::strtoul(parsed.Get("--option").value_or("0").c_str(), nullptr, 10));
  p.scratch = parsed.Get("--scratch").value_or("");
  p.target_pid = static_cast<uint32_t>(std::strtoul(parsed.Get("--target-pid").value_or("0").c_str(), nullptr, 10));
  auto r = ops::RunProbe(p);
  if (!r) return PrintError(ops::NoProbeReason(p)), 2;
  std::printf("%s\n", ops::ProbeResultJson(*r).c_str());
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace

int RegressCommand(const Args& args) {
  if (args.empty()) return Usage("regress needs capture or run", kRegressHelp), 2;
  if (WantsHelp({args[0]})) return std::fputs(kRegressHelp, stdout), 0;
  const Args rest(args.begin() + 1, args.end());
  if (args[0] == "probe") return Probe(rest);
  if (args[0] == "stand-in") return StandIn();
  if (WantsHelp(rest)) return std::fputs(kRegressHelp, stdout), 0;
  if (args[0] == "capture") return Capture(rest);
  if (args[0] == "run") return RunCases(rest);
  return Usage("unknown regress command " + Quoted(args[0]) + " (capture or run)", kRegressHelp), 2;
}

}  // namespace cordon::cli
