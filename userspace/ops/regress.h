// Regression tests from violations (`cordon regress`, README "Regression
// tests from violations"): a denied violation of an audit trail becomes a
// case (the policy in force, a probe that attempts exactly that operation,
// the verdict expected), written as plain YAML for review; a case is checked
// by running its probe in a fresh sandbox and matching what it saw (errno)
// and what the sandbox reported (the event).
//
// This file is pure: events in, cases out; case text in, a case or errors
// naming file:line:field out; probe results and events in, a verdict out.
// The probe's syscalls are in regress_probe.cc, the sandbox is cordon run's.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "event.pb.h"
#include "util/fd.h"

namespace cordon::ops {

// What the probe attempts: the operation of one event kind on one target.
struct RegressProbe {
  std::string kind;      // the event kind (NoProbeReason says which have a probe)
  std::string family;    // net.connect / sendmsg / bind: inet | inet6; net.socket: the family (NetTarget.family)
  std::string protocol;  // net.connect / sendmsg / bind: tcp | udp; net.socket: NetTarget.protocol
  std::string address;   // net.connect / sendmsg: the destination address; net.bind: the local one
  uint32_t port = 0;     // net.connect / sendmsg / bind
  std::string type;      // net.socket: the socket type (NetTarget.sock_type: stream, dgram, raw, ...)
  std::string path;      // net.unix, file.*: the path (raw bytes, not the escaped form)
  std::string access;    // file.open: read, write, create (comma-separated)
  uint32_t arg = 0;      // tamper.* (not refused by seccomp): TaskTarget.arg (tamper.bpf: the bpf command)
  // A refusal of cordon run's seccomp filter (enforcement seccomp: tamper.*,
  // file.memfd, file.ioctl): the system call (TaskTarget.arg) and the argument
  // the filter judged (TaskTarget.arg2). syscall 0 (read) is never refused.
  uint32_t syscall = 0;
  uint32_t argument = 0;
  // net.sockopt: the option's level and name (TaskTarget.arg, arg2).
  uint32_t level = 0;
  uint32_t option = 0;
  // Set by `regress run` for one run of the probe, never in a case file
  // (ProbeScratch): what it made outside the probe's sandbox for the probe to
  // act on instead of the recorded target, which it must not touch.
  std::string scratch;      // file.unlink/rename/link: a name beside the recorded path; tamper.device: the
                            // device's node in /dev; tamper.cgroup: a cgroup directory
  uint32_t target_pid = 0;  // tamper.signal / tamper.ptrace: a process of the run's own uid

  // The target for matching and naming: "tcp 127.0.0.1:9", "read /etc/x", ...
  std::string Target() const;
  bool operator==(const RegressProbe& o) const;
};

struct RegressCase {
  std::string file;  // where it was read from (or will be written)
  RegressProbe probe;
  // expect:
  std::string verdict = "denied";
  std::string enforcement;  // the layer that refused it when recorded
  std::string errno_name;   // what that layer returns (ExpectedErrno)
  // policy:
  std::string policy_file;  // next to the case file
  std::string policy_name;
  std::string policy_digest;    // sha256:<hex> of that file's text
  std::string policy_in_force;  // the digest the trail named ("" when it named none)
  // source: (provenance, for the reviewer; not checked)
  std::string audit, event_id, chain, time, sandbox;
  uint64_t occurrences = 0;
};

// The numbers of a net.socket probe's family, type and protocol (the names
// events write, or numbers); nullopt when one is neither.
struct SocketCall {
  int family, type, protocol;
};
std::optional<SocketCall> SocketOf(const RegressProbe& probe);

// The call of the net.sockopt probe for an option (level, name) the
// sandbox's setsockopt program refuses (bpf/net/host.bpf.c): the socket it is
// set on and a value that program refuses; nullopt for any other option.
struct SockoptCall {
  int family, type;
  enum Value { kInt1, kInt7, kInt65536, kDevice, kGarbage } value;
};
std::optional<SockoptCall> SockoptOf(uint32_t level, uint32_t option);

// Whether an event is a violation a case is made of: verdict denied, not
// quiet (an expected denial of spec.quiet), of a kind a probe describes
// (RegressProbeOf gives a probe). Fills *probe.
bool RegressProbeOf(const cordon::v1::AuditEvent& event, RegressProbe* probe);

// One case per distinct (kind, target) among `events` (RegressProbeOf),
// in order of first occurrence; occurrences counted (the kernel's repeats
// included). Source fields from the first event.
struct CaptureSource {
  std::string audit;  // the file the event came from
};
std::vector<RegressCase> DistinctCases(const std::vector<std::pair<cordon::v1::AuditEvent, CaptureSource>>& events);

// The errno a layer returns when it refuses: EPERM for kernel-cgroup,
// kernel-lsm and seccomp, EACCES for landlock, EROFS for mount; "" unknown.
// Landlock's scoping refusals (a signal, an abstract unix socket outside its
// domain) are EPERM: `kind` says which.
std::string ExpectedErrno(const std::string& enforcement, const std::string& kind = "");

// Why the case needs BPF LSM ("" when it does not): recorded at enforcement
// kernel-lsm, or a kind only BPF LSM judges (file.setattr's chmod,
// file.mmap_exec: Landlock mediates neither).
std::string NeedsBpfLsm(const RegressCase& c);
// Why there is no probe for this case's operation ("" when there is one):
// a probe attempts exactly the recorded operation and changes nothing outside
// its sandbox even where the policy now allows it; where no probe can, the
// reason says why (README "Regression tests from violations").
std::string NoProbeReason(const RegressProbe& probe);

// Why the probe cannot be attempted on this host now ("" when it can; the
// case is skipped with the reason): file.create of a path that exists (only
// a name the probe itself makes is removed), file.setattr of a path that is
// missing or a symlink (chmod would change its target). Looks at the file
// system (regress_probe.cc); the probe checks again where it runs.
std::string ProbePrecondition(const RegressProbe& probe);

// What `regress run` makes outside the probe's sandbox for the probes that
// act on something there (README "Regression tests from violations"), and
// removes when destroyed (a process it started is killed and reaped):
// - file.unlink, file.rename, file.link: the recorded operation's rule is
//   the directory's (BPF LSM's CREATE right on it, Landlock's REMOVE/MAKE
//   rights), so the probe acts on a fresh name (random, mode 0600, owned by
//   the run's identity) the runner made in the recorded path's directory
//   (resolved, opened without following symlinks; an empty file, or an empty
//   directory where the recorded path is one now): unlink (rmdir) it, rename
//   it to a second fresh name, or link it there. The recorded file is never
//   touched; only the runner's own inode is removed afterwards. Not made in
//   cordon's own state, on kernel file systems, or where the directory's file
//   mode would refuse the run's identity (that refusal, EACCES, cannot be
//   told from Landlock's).
// - tamper.signal, tamper.ptrace: a process outside the sandbox with the
//   run's uid and gid (the kernel's own credential check must pass for the
//   sandbox's rule to be asked), which ignores every signal it can.
// - tamper.cgroup: an empty cgroup beside the sandbox's tree whose
//   cgroup.procs any uid may open (only the sandbox's rule refuses).
// - tamper.device: nothing is made: the device's own node in /dev is found
//   (a node made for the probe would let other users open the raw device
//   while it exists), and the probe asks the kernel's device check with
//   access(2), which never opens it (no driver code runs). A node whose file
//   mode the run's identity fails is skipped (that check comes first).
// `run_as` is the identity the probe runs as (spec.runAs: "" or dynamic,
// root, a user, UID[:GID]).
class ProbeScratch {
 public:
  ProbeScratch() = default;
  ~ProbeScratch();
  ProbeScratch(const ProbeScratch&) = delete;
  ProbeScratch& operator=(const ProbeScratch&) = delete;
  // Fills probe->scratch / target_pid. "" when ready (or when the kind needs
  // nothing), else why it cannot be made (the case is skipped with that).
  // `self` is cordon's executable (the stand-in process runs its hidden
  // `regress stand-in` mode).
  std::string Prepare(RegressProbe* probe, const std::string& run_as, const std::string& self);

 private:
  UniqueFd dir_;                    // beside: the recorded path's directory
  std::vector<std::string> names_;  // beside: the fresh name and its second name, removed only while they are
  uint64_t ino_ = 0, dev_ = 0;      // ... the runner's own object (this inode)
  std::vector<std::string> dirs_;   // scratch cgroups, removed
  int pid_ = 0;
};

// A tamper case recorded by BPF LSM whose operation is one system call
// cordon run's seccomp filter refuses as the same kind (mount, module, clock,
// reboot, io_uring, syslog, acct, userns): the probe of that call
// (syscall and argument set); any other probe as it is.
RegressProbe SeccompFormOf(const RegressProbe& probe);

// The second fresh name of a rename or link probe (beside `scratch`).
std::string ScratchSecondName(const std::string& scratch);

// A file name for the case: <kind>-<target>, letters, digits, '.', '-', '_' only.
std::string CaseFileStem(const RegressCase& c);

// The case as YAML: a comment header saying where it came from, then
// version, source, probe, expect, policy.
std::string CaseYaml(const RegressCase& c);

// Strict reading of a case file (untrusted input): unknown or missing
// fields, wrong types, values out of range are errors "FILE:LINE:COL: FIELD:
// what". Returns nullopt with *error set.
std::optional<RegressCase> ParseCaseYaml(const std::string& text, const std::string& file, std::string* error);

// The probe's result line (one JSON object) and its reading.
struct ProbeResult {
  bool ok = false;         // the operation succeeded (not denied)
  int error = 0;           // errno when it failed
  std::string errno_name;  // EPERM, ...
  std::string step;        // which call failed: socket, connect, sendto, open, execve, bpf
  std::string detail;      // anything else said (a connect that timed out, ...)
  // The errno this call returns when any layer refuses it, where that is not
  // the layer's own (the ptrace checks of /proc files say EACCES); "" the layer's.
  std::string refused_as;
};
std::string ProbeResultJson(const ProbeResult& r);
std::optional<ProbeResult> ParseProbeResult(const std::string& line);
std::string ErrnoName(int error);  // "EPERM", or the number

// How a case ended when run.
struct CaseOutcome {
  enum class Kind { kPassed, kFailed, kSkipped } kind = Kind::kFailed;
  std::string message;  // what happened (failed: why; skipped: the reason)
};

// Judges a run of the case's probe: the probe's result, and the events of
// its sandbox. Passed when the probe failed with the errno of the layer
// the matching event names (or the case's errno when the event names none)
// and an event of the case's kind, verdict denied, on the same target is
// among `events`.
CaseOutcome JudgeCase(const RegressCase& c, const std::optional<ProbeResult>& result,
                      const std::vector<cordon::v1::AuditEvent>& events);

// JUnit XML for the cases (testsuite "cordon-regress"): name, outcome.
struct JunitCase {
  std::string name, classname;
  CaseOutcome outcome;
  double seconds = 0;
};
std::string JunitXml(const std::vector<JunitCase>& cases);

// Attempts the probe's operation once, here (regress_probe.cc): a net
// probe non-blocking with a 2 s limit (a connect that is neither refused nor
// completed counts as not denied: ETIMEDOUT in detail), a bind of the
// recorded address and port (closed at once), a socket of the recorded
// family, type and protocol (closed at once), a file.open with the recorded
// access (a file it created is removed), a file.create as mknod of a regular
// file (removed at once if made), a file.setattr as chmod to the mode the
// path has, a file.mmap_exec as one page mapped PROT_READ|PROT_EXEC (then
// unmapped), a file.exec in a child whose own
// seccomp filter kills it at the new program's first system call (the target
// never makes one), tamper.bpf as bpf(arg) with an empty attribute, a seccomp
// refusal as SeccompCallFor makes it in a child. No probe: nullopt.
std::optional<ProbeResult> RunProbe(const RegressProbe& probe);

// The probe's options on a command line (`cordon regress probe ...`) and back.
std::vector<std::string> ProbeArgs(const RegressProbe& p);

}  // namespace cordon::ops
