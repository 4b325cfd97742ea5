// `cordon learn`'s pure part: what an audit-mode run reported (observations)
// and the base policy in; a least-privilege candidate policy (the base plus
// rules for what was observed) and a report of what it grants that was never
// observed out. No kernel, no file system: what the synthesizer needs to know
// about the host's paths comes through LearnFacts (the CLI asks the file
// system; tests give fixed answers).
//
// How observations become rules:
//   - connects and datagrams: one egress rule per address and protocol,
//     the exact address (/32, /128) and the observed ports (rules by host
//     name do not exist yet); binds: a listen rule per address and protocol;
//   - executed programs and executable mappings: the exact file (spec.files.exec),
//     never a directory;
//   - file reads and writes: collapsed to the file's directory ("read: [D]"
//     grants every file below D), a listed directory to itself; a
//     directory the workload made (or removed) during the run is not there
//     when the next run starts, so the rule climbs to the nearest one that
//     was. Never onto or above a sensitive boundary (LearnBoundaries()): there
//     the rule names the file itself, and what only a rule on the boundary
//     could allow (creating a file directly in /etc) is not learned but
//     reported;
//   - unix sockets: write on the socket's path (exact), abstract names:
//     spec.network.abstractUnix; socket families and kinds: spec.network.families
//     and extraProtocols; memfd execution, keyrings and user namespaces: their
//     spec switches. Tamper attempts (bpf, mount, ptrace, ...) are never
//     allowed by a policy: reported, not learned.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "policy/compiler.h"
#include "policy/parser.h"

namespace cordon::policy {

// One reported access the policy in force did not allow, as the learner
// needs it (from an AuditEvent: events/learn_trail.h).
struct Observation {
  std::string kind;              // the event's kind: "file.open", "net.connect", ...
  std::string path;              // file.path, unescaped ("" when none); "@name" for an abstract unix name
  bool path_as_written = false;  // the path is the caller's string (may be relative), not one the kernel resolved
  bool path_truncated = false;
  uint32_t access = 0;  // CORDON_FILE_* requested (file.access)
  std::string address;  // net.*: destination or bound address
  uint32_t port = 0;
  std::string protocol;   // tcp, udp, icmp, ...
  std::string family;     // inet, inet6, netlink, ...
  std::string sock_type;  // stream, dgram, raw, ...
  uint32_t arg = 0;       // target.arg (capability number, device, ...)
  std::string reason;     // the event's reason, for the report
  // The same access: what a rule is made from (the layer that reported it,
  // its reason and whether it was refused or only reported do not count).
  bool operator==(const Observation& o) const {
    return kind == o.kind && path == o.path && path_truncated == o.path_truncated && access == o.access &&
           address == o.address && port == o.port && protocol == o.protocol && family == o.family &&
           sock_type == o.sock_type && arg == o.arg;
  }
};

// What the learner asks about the host's paths.
struct LearnFacts {
  // The path exists now and is a directory.
  std::function<bool(const std::string&)> is_directory = [](const std::string&) { return false; };
  // The path exists now and existed before learning started: a rule naming
  // it is resolved when the next run starts. False for what the workload
  // made (or removed) during the run.
  std::function<bool(const std::string&)> existed_before = [](const std::string&) { return true; };
  // The names in a directory (for the report: what a directory rule grants
  // that was never observed); empty when unknown.
  std::function<std::vector<std::string>(const std::string&)> entries = [](const std::string&) {
    return std::vector<std::string>{};
  };
  // The path with symlinks resolved (the base policy's rules are resolved
  // by the loader: /lib may be /usr/lib); itself when unknown.
  std::function<std::string(const std::string&)> canonical = [](const std::string& p) { return p; };
  // More sensitive boundaries (the caller's home directory).
  std::vector<std::string> extra_boundaries;
};

// The sensitive boundaries, as patterns ('*' is one path component): a
// directory matching one, or holding one below it, is never a collapsed
// rule's directory; below one marked "(whole tree)" every rule names a file.
struct LearnBoundary {
  const char* pattern;
  bool whole_tree;  // nothing below it is collapsed either (keys, credentials, kernel files)
  const char* why;
};
const std::vector<LearnBoundary>& LearnBoundaries();
// The boundary that forbids `dir` as a collapsed rule's directory ("" when
// none does): `dir` matches it, lies above it, or lies inside a whole-tree one.
std::string BoundaryOf(const std::string& dir, const std::vector<std::string>& extra = {});

// Where a learned policy never writes, whatever the workload did while it
// was learned: the host's programs, libraries, configuration and services'
// state, and every whole-tree boundary (keys, credentials, kernel files). A
// grant there would let the next run of the workload change the host (a
// program in /usr/bin, /etc/shadow). Returns why `path` is such a place, ""
// when it is not.
std::string HostWriteRefusal(const std::string& path);

// Unix sockets a learned policy never connects to: host daemons' sockets
// (/run, /var/run: the container engines, systemd, D-Bus, cordon's own agent),
// each a privileged interface to the host. Returns why, "" when none.
std::string HostSocketRefusal(const std::string& path);

// One round of learning: the command run once, the first in audit mode,
// the later ones in enforce mode under the policy learned so far; or a
// window of watching an attached cgroup (`label` says which).
struct LearnRound {
  bool enforce = false;           // run in enforce mode (what it reports was refused)
  int exit_status = 0;            // the command's (as cordon run returns it)
  // What the report calls the round; "" = "round N (audit|enforce): the
  // command exited S" (a window has no command: "window of 10m on ...").
  std::string label;
  uint64_t events = 0;            // events read from the trail
  uint64_t new_observations = 0;  // distinct observations no earlier round had
  uint64_t lost = 0;              // loss records: the kernel could not buffer them
  uint64_t suppressed = 0;        // the agent's rate limit held them back
  uint64_t not_received = 0;      // the agent had them, this run fell behind
  uint64_t unreadable = 0;        // lines of the trail that were not events
  bool Incomplete() const { return lost || suppressed || not_received || unreadable; }
};

struct LearnResult {
  ParsedPolicy candidate;  // the base with the learned rules (positions: the base's)
  std::string text;        // PolicyJson(candidate): what `cordon policy check` reads back
  // The report (lines, no trailing newline): per learned rule what it grants
  // beyond what was observed, what was not learned and why, the trail.
  std::vector<std::string> report;
  std::vector<std::string> not_learned;  // observed, but the candidate does not allow it (also in report)
  // Metadata changes reported with a path from the root of a file system
  // mounted elsewhere (BPF LSM's hooks without a mount): no rule can be made
  // from them; a rule learned for their directory covers them (also in report).
  std::vector<std::string> unplaced;
  size_t learned_rules = 0;  // entries added to the base
};

// Deduplicates observations in place (first occurrence kept, order kept).
void DedupeObservations(std::vector<Observation>* observations);

// The candidate: `base` (as parsed; `compiled` is it compiled) with rules for
// every observation it does not allow already. `rounds` (may be empty) is
// summarized in the report; `name` (unless empty) replaces metadata.name. Pure:
// every fact about the host comes from `facts`.
LearnResult Learn(const ParsedPolicy& base, const CompiledPolicy& compiled,
                  const std::vector<Observation>& observations, const std::vector<LearnRound>& rounds,
                  const LearnFacts& facts, const std::string& name = "");

}  // namespace cordon::policy
