// spec.quiet (issue 19, item 7): expected denials. A pattern names an event
// kind and what the event was about; an event matching one is still enforced,
// recorded and counted, but marked quiet (AuditEvent.quiet) and kept apart
// from the violations. Pure: validation and matching, no kernel.
//
//   quiet:
//     - kind: file.exec                 # an event kind, or a family: file, net, tamper, proc
//       path: /usr/bin/rustc            # glob on file.path
//     - kind: net.unix
//       address: /var/run/nscd/socket   # unix socket path (glob) or @abstract name
//     - kind: net.connect
//       address: 10.0.0.53              # IP or CIDR on net.address
//       ports: [53]                     # optional, with an IP or CIDR only
//
// Globs: "*" matches any run of characters within one path component, "?"
// one character of a component, and a last component "**" every path below
// the directory before it (not the directory itself); every other character
// stands for itself (no character classes, no escapes). Event paths that are
// not in normal form (relative, or with an empty, "." or ".." component, as
// Landlock events may carry them as the caller wrote them) and truncated
// paths never match: only the complete path the pattern names is quiet.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cordon/v1/policy.pb.h"
#include "event.pb.h"
#include "policy/cidr.h"
#include "policy/diagnostic.h"
#include "policy/parser.h"
#include "util/result.h"

namespace cordon::policy {

constexpr size_t kMaxQuietPatterns = 64;
constexpr size_t kMaxQuietPorts = 64;  // entries of one pattern's ports
constexpr size_t kMaxQuietDescriptionBytes = 256;
constexpr size_t kMaxQuietAbstractBytes = 108;  // "@" and an abstract unix name (sun_path)

struct QuietPattern {
  cordon::v1::QuietPattern source;  // as written (the pinned form keeps it)
  std::string kind;                 // an event kind, or a family ("file" = every "file.*")
  bool family = false;
  std::string path;              // glob on file.path; "" = none
  std::optional<Prefix> prefix;  // address: an IP or CIDR, on net.address
  std::vector<PortRange> ports;  // with prefix; empty = every port
  std::string unix_address;      // address: a unix socket path glob or "@name" glob, on net.unix's file.path
  std::string origin;            // "spec.quiet[2]"
  bool operator==(const QuietPattern& o) const {
    return kind == o.kind && family == o.family && path == o.path && prefix == o.prefix && ports == o.ports &&
           unix_address == o.unix_address && origin == o.origin;
  }
};

// The kinds the kernel layers report (bpf/abi/cordon_event.h enum
// cordon_event_kind): "net.connect" ... "proc.coredump"; "" for a number that
// is none. The decoder names events by it; only these kinds can be quiet.
const char* EventKindName(uint32_t kind);
bool IsKernelEventKind(std::string_view kind);
// The families a pattern may name: file, net, tamper, proc.
std::span<const char* const> QuietFamilies();

// Validates spec.quiet of `parsed` into *out (file order); each error is
// appended to *diags at its field ("spec.quiet[1].path"): a missing or
// unknown kind, no path and no address, a relative or malformed glob, one
// that names nothing but wildcards ("/**", "/*/*": it would quiet every
// path), an address that is neither an IP, a CIDR, a unix socket path nor an
// "@" name, a /0 CIDR, ports without an IP address, bad ports, a target the
// kind never carries (a path on net.connect), more than kMaxQuietPatterns.
void CompileQuiet(const ParsedPolicy& parsed, std::vector<QuietPattern>* out, Diagnostics* diags);

// The glob syntax above, on a path ("/usr/bin/rustc") or an abstract unix
// name ("@name"); false for a path not in normal form.
bool MatchGlob(std::string_view glob, std::string_view path);

// The first pattern the event matches (its index), or -1. Only events of
// the kernel's kinds (IsKernelEventKind) match; loss, suppressed and the
// records cordon makes itself (net.preexisting, credential.*, ...) never do.
int MatchQuiet(std::span<const QuietPattern> patterns, const cordon::v1::AuditEvent& event);

// The pinned form of a sandbox's patterns (bpf/abi/cordon_pins.h, pin
// "quiet"): a cordon.v1.Spec holding only `quiet`, as written, serialized.
std::string SerializeQuiet(std::span<const QuietPattern> patterns);
// Back, validated again as a policy's would be (an error names the pattern).
Result<std::vector<QuietPattern>> ParseQuiet(std::string_view bytes);

// "quiet: ..." lines for `cordon policy check`.
std::string DescribeQuiet(std::span<const QuietPattern> patterns);

}  // namespace cordon::policy
