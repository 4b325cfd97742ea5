// `cordon explain`: which rule of a policy allows a connection or a file
// access, or why none does. Connections are judged by the compiled map image
// (policy::EvaluateImage, the reference the kernel's decisions are tested
// against); file accesses as the kernel judges them: by object, the rights of
// every rule whose (device, inode) is the target or a directory above it.
#include <sys/stat.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "abi/cordon_common.h"
#include "abi/cordon_file.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "event.pb.h"
#include "events/audit_file.h"
#include "policy/cidr.h"
#include "policy/parser.h"
#include "util/fs.h"
#include "util/text.h"

namespace cordon::cli {
namespace {

const char* kExplainHelp =
    "usage: cordon explain [--policy FILE] EVENT_JSON\n"
    "       cordon explain [--policy FILE] --address ADDR:PORT[/tcp|/udp]\n"
    "       cordon explain [--policy FILE] --path PATH --access read|write|create|exec[,...]\n"
    "\n"
    "Says which rule of the policy (default: the built-in one) allows a connection or a file\n"
    "access, or why none does. EVENT_JSON is a line of an audit log (a net.connect, net.sendmsg\n"
    "or file.* event; '-' reads it from standard input). ADDR is IPv4 or IPv6 ([::1]:53/udp);\n"
    "the protocol is tcp unless named. Connections are judged by the policy's compiled map image,\n"
    "the one loaded into the kernel; a file access by object, as the kernel judges it: the\n"
    "rights of every rule naming the file or a directory above it (symlinks followed), so the\n"
    "answer is this host's. The rules cordon run adds for its own command (its stdio, private\n"
    "/tmp) are not in the policy and not judged here.\n"
    "\n"
    "Exit status: 0 allowed, 1 refused by the policy (or the policy does not load), 2 usage errors.\n";

int Usage(const std::string& error) {
  PrintError(error);
  std::fputs(kExplainHelp, stderr);
  return 2;
}

// "file:line:column: " of a field, or "" when unknown.
std::string Where(const policy::ParsedPolicy& parsed, const std::string& field) {
  const policy::SourcePos* pos = parsed.positions.Find(field);
  if (!pos || parsed.file.empty()) return "";
  return " at " + parsed.file + ":" + std::to_string(pos->line) + ":" + std::to_string(pos->column);
}

std::string DescribeRule(const policy::CompiledPolicy& compiled, const policy::ParsedPolicy& parsed, uint32_t rule) {
  const policy::CompiledRule& r = compiled.rules[rule - 1];
  const std::string field = "spec.network.egress[" + std::to_string(rule - 1) + "]";
  std::string ports;
  for (const auto& range : r.ports)
    ports += (ports.empty() ? "" : ",") + std::to_string(range.lo) +
             (range.hi != range.lo ? "-" + std::to_string(range.hi) : "");
  return field + (r.name.empty() ? "" : " '" + r.name + "'") + " (" + (r.host.empty() ? r.prefix.ToString() : r.host) +
         ", " + (ports.empty() ? "every port" : "ports " + ports) + ", " +
         (r.tcp && r.udp ? "tcp and udp"
          : r.tcp        ? "tcp"
                         : "udp") +
         ")" + Where(parsed, field);
}

int ExplainAddress(const policy::CompiledPolicy& compiled, const policy::ParsedPolicy& parsed,
                   const std::string& address, uint32_t port, const std::string& protocol) {
  std::string error;
  auto prefix = policy::ParsePrefix(address, &error);
  if (!prefix || prefix->length != 128) return Usage("address " + Quoted(address) + ": " + (prefix ? "a prefix, not one address" : error));
  if (port < 1 || port > 65535) return Usage("port " + std::to_string(port) + " is out of range (1-65535)");
  if (protocol != "tcp" && protocol != "udp")
    return Usage("protocol " + Quoted(protocol) + ": egress rules judge tcp and udp (other protocols are refused when "
                 "their socket is created, unless spec.network.extraProtocols lists them)");
  const std::string what = protocol + " " + (prefix->ipv4 ? policy::AddressToString(prefix->addr)
                                                          : "[" + policy::AddressToString(prefix->addr) + "]") +
                           ":" + std::to_string(port);
  // An IPv4-mapped IPv6 address is judged by the IPv4 rules, from an inet6 socket.
  const bool written_v6 = address.find(':') != std::string::npos;
  const uint32_t family = written_v6 ? CORDON_FAM_INET6 : CORDON_FAM_INET;
  const std::string audit = compiled.mode == CORDON_MODE_AUDIT ? " (audit mode: allowed, and reported as audited)" : "";
  if (!(compiled.families & (1u << family))) {
    std::printf("refused: %s: the %s family is not in spec.network.families%s: its socket cannot be created%s\n",
                what.c_str(), written_v6 ? "inet6" : "inet", Where(parsed, "spec.network.families").c_str(),
                audit.c_str());
    return 1;
  }
  uint32_t rule = 0;
  if (policy::EvaluateImage(compiled, prefix->addr, static_cast<uint16_t>(port),
                            protocol == "tcp" ? policy::kProtoTcp : policy::kProtoUdp, &rule)) {
    std::printf("allowed: %s by %s\n", what.c_str(),
                rule >= 1 && rule <= compiled.rules.size() ? DescribeRule(compiled, parsed, rule).c_str() : "a rule");
    return 0;
  }
  std::string near;
  for (uint32_t i = 1; i <= compiled.rules.size(); ++i)
    if (compiled.rules[i - 1].host.empty() && compiled.rules[i - 1].prefix.Contains(prefix->addr))
      near += "; " + DescribeRule(compiled, parsed, i);
  std::printf("refused: %s: no egress rule allows it (%zu rule%s)%s%s\n", what.c_str(), compiled.rules.size(),
              compiled.rules.size() == 1 ? "" : "s",
              near.empty() ? "" : ("; the rules for this address allow other ports or protocols: " + near.substr(2)).c_str(),
              audit.c_str());
  return 1;
}

// Rights from the spellings an event's access field and --access use.
bool ParseAccess(const std::string& text, uint32_t* rights) {
  *rights = 0;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string word = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (word == "read") *rights |= CORDON_FILE_READ;
    else if (word == "write") *rights |= CORDON_FILE_WRITE;
    else if (word == "create") *rights |= CORDON_FILE_CREATE;
    else if (word == "exec") *rights |= CORDON_FILE_EXEC;
    else if (word == "map_exec") *rights |= CORDON_FILE_MAP_EXEC;
    else return false;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return *rights != 0;
}

std::string RightsText(uint32_t rights) {
  std::string out;
  const std::pair<uint32_t, const char*> names[] = {{CORDON_FILE_READ, "read"},   {CORDON_FILE_WRITE, "write"},
                                                    {CORDON_FILE_CREATE, "create"}, {CORDON_FILE_EXEC, "exec"},
                                                    {CORDON_FILE_MAP_EXEC, "map_exec"}};
  for (const auto& [bit, name] : names)
    if (rights & bit) out += (out.empty() ? "" : ",") + std::string(name);
  return out.empty() ? "nothing" : out;
}

int ExplainPath(const policy::CompiledPolicy& compiled, const std::string& path, uint32_t wanted) {
  const std::string what = RightsText(wanted) + " of " + DisplayText(EscapeWorkloadBytes(path));
  if (!compiled.has_files) {
    std::printf("allowed: %s: the policy has no spec.files (files are not restricted)\n", what.c_str());
    return 0;
  }
  if (path.empty() || path[0] != '/') return Usage("the path " + Quoted(path) + " is not absolute");
  if (path.size() > policy::kMaxFilePathBytes || path.find('\0') != std::string::npos)
    return Usage("the path is longer than " + std::to_string(policy::kMaxFilePathBytes) + " bytes or holds a NUL");
  // The target as the kernel meets it: the object itself when it exists, then
  // each directory above it. Creating, removing, renaming and linking are
  // judged on the directory (CREATE there), never on the object.
  std::vector<std::pair<dev_t, ino_t>> chain;
  std::string at = path;
  char resolved[PATH_MAX];
  while (!::realpath(at.c_str(), resolved)) {
    const size_t slash = at.find_last_of('/');
    at = slash == 0 ? "/" : at.substr(0, slash);
  }
  for (std::string dir = resolved;;) {
    struct stat st;
    if (::stat(dir.c_str(), &st) == 0) chain.emplace_back(st.st_dev, st.st_ino);
    if (dir == "/") break;
    const size_t slash = dir.find_last_of('/');
    dir = slash == 0 ? "/" : dir.substr(0, slash);
  }
  const bool object_exists = at == path;
  const std::string audit = compiled.mode == CORDON_MODE_AUDIT ? " (audit mode: allowed, and reported as audited)" : "";
  const std::string own = kVarStateDir;
  auto in_own = [&](const std::string& p) { return p == own || p.rfind(own + "/", 0) == 0; };
  if (in_own(path) || in_own(resolved)) {
    std::printf(
        "refused: %s: %s is cordon's own state (signing keys, kept policy texts), refused to every sandbox "
        "whatever its rules%s\n",
        what.c_str(), own.c_str(), audit.c_str());
    return 1;
  }
  uint32_t granted = 0;
  std::string by;
  for (const policy::FileRule& rule : compiled.file_rules) {
    struct stat st;
    if (::stat(rule.path.c_str(), &st) != 0) continue;  // absent here: it grants nothing
    int found = -1;
    for (size_t i = 0; i < chain.size() && found < 0; ++i)
      if (chain[i].first == st.st_dev && chain[i].second == st.st_ino) found = static_cast<int>(i);
    if (found < 0) continue;
    // On the object itself, CREATE grants nothing: it is the directory's.
    granted |= found == 0 && object_exists ? rule.rights & ~CORDON_FILE_CREATE : rule.rights;
    const std::string origin = rule.origin.rfind("profile:", 0) == 0
                                   ? "profile " + rule.origin.substr(8) + " (spec.files.include)"
                                   : rule.origin;
    by += (by.empty() ? "" : "; ") + origin + " " + DisplayText(rule.path) + " (" + RightsText(rule.rights) + ")" +
          (rule.where.empty() ? "" : " at " + rule.where.substr(0, rule.where.find(": ")));
  }
  if ((granted & wanted) == wanted) {
    std::printf("allowed: %s by %s\n", what.c_str(), by.c_str());
    return 0;
  }
  if (by.empty())
    std::printf("refused: %s: no file rule names it or a directory above it%s\n", what.c_str(), audit.c_str());
  else
    std::printf("refused: %s: the rules on its path grant %s, not %s: %s%s\n", what.c_str(),
                RightsText(granted).c_str(), RightsText(wanted & ~granted).c_str(), by.c_str(), audit.c_str());
  return 1;
}

// "ADDR:PORT[/PROTO]", IPv6 in brackets.
bool SplitAddress(std::string text, std::string* address, uint32_t* port, std::string* protocol) {
  *protocol = "tcp";
  const size_t slash = text.rfind('/'), close = text.find(']');
  if (slash != std::string::npos && (close == std::string::npos || slash > close)) {
    *protocol = text.substr(slash + 1);
    text.resize(slash);
  }
  size_t colon;
  if (!text.empty() && text[0] == '[') {
    const size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') return false;
    *address = text.substr(1, close - 1);
    colon = close + 1;
  } else {
    colon = text.find(':');
    if (colon == std::string::npos || text.find(':', colon + 1) != std::string::npos) return false;
    *address = text.substr(0, colon);
  }
  const std::string digits = text.substr(colon + 1);
  if (digits.empty() || digits.size() > 5 || digits.find_first_not_of("0123456789") != std::string::npos) return false;
  *port = static_cast<uint32_t>(std::stoul(digits));
  return true;
}

}  // namespace

int ExplainCommand(const Args& args) {
  for (const auto& a : args) {
    if (a == "--") break;
    if (a == "-h" || a == "--help") return std::fputs(kExplainHelp, stdout), 0;
  }
  ParsedArgs parsed;
  std::string error;
  if (!ParseArgs(args, {{"--policy", "", true}, {"--address", "", true}, {"--path", "", true}, {"--access", "", true}},
                 &parsed, &error))
    return Usage(error);
  const int forms = (parsed.Has("--address") ? 1 : 0) + (parsed.Has("--path") ? 1 : 0) +
                    (parsed.positionals.empty() ? 0 : 1);
  if (forms != 1 || parsed.positionals.size() > 1 || !parsed.after_dashdash.empty())
    return Usage("explain takes one of: an event (JSON), --address ADDR:PORT, or --path PATH --access RIGHTS");
  if (parsed.Has("--path") != parsed.Has("--access")) return Usage("--path and --access go together");

  // The policy, compiled as attach and run compile it; its positions for the answer.
  const std::string file = parsed.Get("--policy").value_or("");
  policy::ParsedPolicy positions;  // for the answer's file:line
  // A path absent here grants nothing here; the built-in policy has no lines to name.
  auto compiled = LoadPolicy(file, "", "", /*check_host=*/false, file.empty() ? nullptr : &positions);
  if (!compiled) return 1;

  if (auto address = parsed.Get("--address")) {
    std::string addr, protocol;
    uint32_t port = 0;
    if (!SplitAddress(*address, &addr, &port, &protocol))
      return Usage("--address " + Quoted(*address) + ": expected ADDR:PORT[/tcp|/udp] (IPv6 in brackets: [::1]:53)");
    return ExplainAddress(*compiled, positions, addr, port, protocol);
  }
  if (auto path = parsed.Get("--path")) {
    uint32_t rights = 0;
    if (!ParseAccess(*parsed.Get("--access"), &rights))
      return Usage("--access " + Quoted(*parsed.Get("--access")) +
                   ": expected read, write, create, exec or map_exec (comma-separated)");
    return ExplainPath(*compiled, *path, rights);
  }

  // An event: a line of an audit log.
  std::string line = parsed.positionals[0];
  if (line == "-") {
    line.clear();
    char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0 && line.size() < (1u << 20)) line.append(buf, n);
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  }
  cordon::v1::AuditEvent event;
  if (!ParseAuditLine(line, &event))
    return Usage("the event is not an audit log line (one JSON object, as `cordon tail` prints it)");
  if (event.kind() == "net.connect" || event.kind() == "net.sendmsg") {
    if (event.net().protocol() != "tcp" && event.net().protocol() != "udp")
      return Usage("the event's protocol " + Quoted(event.net().protocol()) + " is judged when its socket is created, "
                   "not by an egress rule");
    return ExplainAddress(*compiled, positions, event.net().address(), event.net().port(), event.net().protocol());
  }
  if (event.kind().rfind("file.", 0) == 0 && !event.file().path().empty()) {
    if (event.file().truncated()) return Usage("the event's path is truncated (longer than 4095 bytes)");
    auto raw = UnescapeWorkloadBytes(event.file().path());
    uint32_t rights = 0;
    if (!raw || !ParseAccess(event.file().access(), &rights))
      return Usage("the event's file path or access " + Quoted(event.file().access()) + " cannot be read");
    return ExplainPath(*compiled, *raw, rights);
  }
  return Usage("explain covers net.connect, net.sendmsg and file.* events with a path, not " +
               Quoted(event.kind().empty() ? std::string("an event without a kind") : event.kind()));
}

}  // namespace cordon::cli
