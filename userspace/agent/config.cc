#include "agent/config.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <set>

#include "policy/resources.h"
#include "policy/yaml_reader.h"

namespace cordon::agent {

using policy::Diagnostic;
using policy::Diagnostics;
using policy::YamlNode;

namespace {

constexpr size_t kMaxConfigBytes = 1u << 20;

const std::map<std::string, int>& Facilities() {
  static const std::map<std::string, int> facilities = {
      {"kern", 0},    {"user", 1},    {"mail", 2},    {"daemon", 3},  {"auth", 4},    {"syslog", 5},
      {"lpr", 6},     {"news", 7},    {"uucp", 8},    {"cron", 9},    {"authpriv", 10}, {"ftp", 11},
      {"local0", 16}, {"local1", 17}, {"local2", 18}, {"local3", 19}, {"local4", 20}, {"local5", 21},
      {"local6", 22}, {"local7", 23}};
  return facilities;
}

bool IsNull(const YamlNode& node) {
  if (node.kind != YamlNode::Kind::kScalar || node.quoted) return false;
  const std::string& s = node.scalar;
  return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL";
}

std::string WhatIs(const YamlNode& node) {
  switch (node.kind) {
    case YamlNode::Kind::kMapping: return "a mapping";
    case YamlNode::Kind::kSequence: return "a list";
    case YamlNode::Kind::kScalar: break;
  }
  if (IsNull(node)) return "null";
  std::string text = node.scalar.size() > 40 ? node.scalar.substr(0, 40) + "..." : node.scalar;
  return node.quoted ? "the string \"" + text + "\"" : "'" + text + "'";
}

// Only whitespace and comments: the same as an absent file.
bool Blank(std::string_view text) {
  bool in_comment = false;
  for (char c : text) {
    if (in_comment) {
      in_comment = c != '\n';
      continue;
    }
    if (c == '#') in_comment = true;
    else if (c != ' ' && c != '\t' && c != '\r' && c != '\n') return false;
  }
  return true;
}

// tcp://HOST:PORT, tls://HOST:PORT (HOST a name, an IPv4 address or [IPv6])
// or unix:///PATH into the sink; false with *error.
bool SyslogAddress(const std::string& text, SinkConfig* sink, std::string* error) {
  if (text.rfind("unix://", 0) == 0) {
    sink->socket = text.substr(7);
    if (sink->socket.empty() || sink->socket[0] != '/' || sink->socket.size() >= 108) {
      *error = "expected unix:///absolute/path (at most 107 bytes), got '" + text + "'";
      return false;
    }
    return true;
  }
  bool tls = text.rfind("tls://", 0) == 0;
  if (!tls && text.rfind("tcp://", 0) != 0) {
    *error = "expected tcp://HOST:PORT, tls://HOST:PORT or unix:///PATH, got '" + text + "'";
    return false;
  }
  std::string rest = text.substr(6), host, port;
  if (!rest.empty() && rest[0] == '[') {
    size_t close = rest.find(']');
    if (close != std::string::npos && close + 1 < rest.size() && rest[close + 1] == ':') {
      host = rest.substr(1, close - 1);
      port = rest.substr(close + 2);
    }
  } else if (size_t colon = rest.rfind(':'); colon != std::string::npos && rest.find(':') == colon) {
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  bool host_ok = !host.empty() && host.size() <= 253;
  for (char ch : host)
    host_ok =
        host_ok && (std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' || ch == ':' || ch == '_');
  uint64_t p = 0;
  bool port_ok = !port.empty() && port.size() <= 5 && port[0] != '0';
  for (char ch : port)
    port_ok = port_ok && ch >= '0' && ch <= '9' && (p = p * 10 + static_cast<uint64_t>(ch - '0'), true);
  if (!host_ok || !port_ok || p > 65535) {
    *error = "expected " + text.substr(0, 6) +
             "HOST:PORT (a host name, IPv4 address or [IPv6] address, port 1-65535), got '" + text + "'";
    return false;
  }
  sink->remote.host = host;
  sink->remote.port = static_cast<uint16_t>(p);
  sink->remote.tls = tls;
  return true;
}

class Reader {
 public:
  Reader(std::string file, Diagnostics* diags) : file_(std::move(file)), diags_(diags) {}

  void Error(const YamlNode& node, const std::string& field, std::string message) {
    diags_->push_back(Diagnostic{file_, node.line, node.column, field, std::move(message)});
  }

  using Handler = std::function<void(const YamlNode& value, const std::string& field)>;

  // Calls the handler of each key present with a non-null value; unknown
  // keys are errors listing the known ones.
  void Mapping(const YamlNode& node, const std::string& path, const std::vector<std::pair<std::string, Handler>>& fields,
               const char* what) {
    if (node.kind != YamlNode::Kind::kMapping) {
      Error(node, path, std::string("expected a mapping of ") + what + " settings, got " + WhatIs(node));
      return;
    }
    for (const auto& [key, value] : node.entries) {
      const std::string field = path.empty() ? key->scalar : path + "." + key->scalar;
      const Handler* handler = nullptr;
      for (const auto& [name, h] : fields)
        if (name == key->scalar) handler = &h;
      if (!handler) {
        std::string expected;
        for (const auto& f : fields) expected += (expected.empty() ? "" : ", ") + f.first;
        Error(*key, field, "unknown field '" + key->scalar + "' (expected one of: " + expected + ")");
        continue;
      }
      if (IsNull(*value)) continue;  // as if absent
      (*handler)(*value, field);
    }
  }

  bool String(const YamlNode& node, const std::string& field, std::string* out) {
    if (node.kind != YamlNode::Kind::kScalar) {
      Error(node, field, "expected a string, got " + WhatIs(node));
      return false;
    }
    *out = node.scalar;
    return true;
  }

  bool Bool(const YamlNode& node, const std::string& field, bool* out) {
    const std::string& t = node.scalar;
    if (node.kind == YamlNode::Kind::kScalar && !node.quoted) {
      if (t == "true" || t == "True" || t == "TRUE") return *out = true, true;
      if (t == "false" || t == "False" || t == "FALSE") return *out = false, true;
    }
    Error(node, field, "expected true or false, got " + WhatIs(node));
    return false;
  }

  bool Unsigned(const YamlNode& node, const std::string& field, uint64_t min, uint64_t max, uint64_t* out) {
    const std::string& t = node.scalar;
    bool ok = node.kind == YamlNode::Kind::kScalar && !node.quoted && !t.empty() && (t == "0" || t[0] != '0');
    uint64_t v = 0;
    for (size_t i = 0; ok && i < t.size(); ++i) {
      if (t[i] < '0' || t[i] > '9') ok = false;
      else if (v > (std::numeric_limits<uint64_t>::max() - static_cast<uint64_t>(t[i] - '0')) / 10) ok = false;
      else v = v * 10 + static_cast<uint64_t>(t[i] - '0');
    }
    if (!ok) {
      Error(node, field, "expected a non-negative integer, got " + WhatIs(node));
      return false;
    }
    if (v < min || v > max) {
      Error(node, field, "must be between " + std::to_string(min) + " and " + std::to_string(max) + ", got " + t);
      return false;
    }
    *out = v;
    return true;
  }

  bool Choice(const YamlNode& node, const std::string& field, const std::vector<std::string>& choices,
              std::string* out) {
    std::string text;
    if (!String(node, field, &text)) return false;
    for (const auto& c : choices)
      if (c == text) return *out = text, true;
    std::string expected;
    for (const auto& c : choices) expected += (expected.empty() ? "" : ", ") + c;
    Error(node, field, "unknown value '" + text + "' (expected one of: " + expected + ")");
    return false;
  }

  void StringList(const YamlNode& node, const std::string& field, std::vector<std::string>* out) {
    if (node.kind != YamlNode::Kind::kSequence) {
      Error(node, field, "expected a list, got " + WhatIs(node));
      return;
    }
    for (size_t i = 0; i < node.items.size(); ++i) {
      std::string s;
      if (String(*node.items[i], field + "[" + std::to_string(i) + "]", &s)) out->push_back(s);
    }
  }

  void Sink(const YamlNode& node, const std::string& path, SinkConfig* sink);

  // An absolute path to a file this process can read (TLS material: checked
  // here so that a typo fails at load, not at the first connect; the error
  // names the path, never what is in it).
  void ReadableFile(const YamlNode& node, const std::string& field, std::string* out) {
    if (!String(node, field, out)) return;
    if (out->empty() || (*out)[0] != '/') {
      Error(node, field, "must be an absolute path, got '" + *out + "'");
      return;
    }
    int fd = ::open(out->c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      Error(node, field, "cannot read " + *out + ": " + std::strerror(errno));
      return;
    }
    ::close(fd);
  }
  // A private key: root's (the agent's) and read by nobody else.
  void SecretFile(const YamlNode& node, const std::string& field, const std::string& path) {
    struct stat st;
    if (path.empty() || ::stat(path.c_str(), &st) != 0) return;  // ReadableFile said why
    if (st.st_uid != ::geteuid())
      Error(node, field, path + " is owned by uid " + std::to_string(st.st_uid) + ", not by the agent's user");
    else if (st.st_mode & 077) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
      Error(node, field, path + " can be read or written by others (mode " + mode + "): chmod 0600 it");
    }
  }

 private:
  std::string file_;
  Diagnostics* diags_;
};

void Reader::Sink(const YamlNode& node, const std::string& path, SinkConfig* sink) {
  if (node.kind != YamlNode::Kind::kMapping) {
    Error(node, path, "expected a mapping with a kind (jsonl, stdout, syslog), got " + WhatIs(node));
    return;
  }
  // The kind decides which other fields apply.
  const YamlNode* kind_node = nullptr;
  for (const auto& [key, value] : node.entries)
    if (key->scalar == "kind") kind_node = value.get();
  std::string kind;
  if (!kind_node || IsNull(*kind_node)) {
    Error(node, path + ".kind", "a sink needs a kind (jsonl, stdout or syslog)");
    return;
  }
  if (!Choice(*kind_node, path + ".kind", {"jsonl", "stdout", "syslog"}, &kind)) return;
  std::vector<std::pair<std::string, Handler>> fields = {{"kind", [](const YamlNode&, const std::string&) {}}};
  bool has_path = false;
  const YamlNode* socket_node = nullptr;
  const YamlNode* address_node = nullptr;
  const YamlNode* tls_node = nullptr;
  const YamlNode* spool_node = nullptr;
  bool replay_given = false;
  if (kind == "jsonl") {
    sink->kind = SinkConfig::Kind::kJsonl;
    fields.push_back({"path", [&](const YamlNode& v, const std::string& f) {
                        if (!String(v, f, &sink->path)) return;
                        has_path = true;
                        if (sink->path.empty() || sink->path[0] != '/')
                          Error(v, f, "must be an absolute path, got '" + sink->path + "'");
                        else if (sink->path.back() == '/')
                          Error(v, f, "names a directory, not a file: '" + sink->path + "'");
                      }});
    fields.push_back({"maxBytes", [&](const YamlNode& v, const std::string& f) {
                        uint64_t n;
                        if (Unsigned(v, f, 0, std::numeric_limits<uint64_t>::max(), &n)) {
                          if (n != 0 && n < 4096) Error(v, f, "must be 0 (no rotation) or at least 4096, got " + v.scalar);
                          sink->jsonl.max_bytes = n;
                        }
                      }});
    fields.push_back({"keep", [&](const YamlNode& v, const std::string& f) {
                        uint64_t n;
                        if (Unsigned(v, f, 0, 1000, &n)) sink->jsonl.keep = static_cast<uint32_t>(n);
                      }});
    fields.push_back({"fsync", [&](const YamlNode& v, const std::string& f) {
                        std::string s;
                        if (!Choice(v, f, {"every-event", "interval", "never"}, &s)) return;
                        sink->jsonl.fsync = s == "every-event" ? JsonlOptions::Fsync::kEveryEvent
                                            : s == "interval"  ? JsonlOptions::Fsync::kInterval
                                                               : JsonlOptions::Fsync::kNever;
                      }});
    fields.push_back({"fsyncIntervalMs", [&](const YamlNode& v, const std::string& f) {
                        uint64_t n;
                        if (Unsigned(v, f, 1, 3600000, &n)) sink->jsonl.fsync_interval_ms = static_cast<uint32_t>(n);
                      }});
  } else if (kind == "stdout") {
    sink->kind = SinkConfig::Kind::kStdout;
    fields.push_back({"format", [&](const YamlNode& v, const std::string& f) {
                        std::string s;
                        if (Choice(v, f, {"json", "compact", "ocsf"}, &s))
                          sink->format = s == "json"      ? StreamSink::Format::kJson
                                         : s == "compact" ? StreamSink::Format::kCompact
                                                          : StreamSink::Format::kOcsf;
                      }});
  } else {
    sink->kind = SinkConfig::Kind::kSyslog;
    fields.push_back({"socket", [&](const YamlNode& v, const std::string& f) {
                        socket_node = &v;
                        if (String(v, f, &sink->socket) && (sink->socket.empty() || sink->socket[0] != '/'))
                          Error(v, f, "must be an absolute path to a unix datagram socket, got '" + sink->socket + "'");
                      }});
    fields.push_back({"facility", [&](const YamlNode& v, const std::string& f) {
                        std::vector<std::string> names;
                        for (const auto& [name, code] : Facilities()) names.push_back(name);
                        std::string s;
                        if (Choice(v, f, names, &s)) {
                          sink->facility = Facilities().at(s);
                          sink->facility_name = s;
                        }
                      }});
    fields.push_back({"address", [&](const YamlNode& v, const std::string& f) {
                        address_node = &v;
                        std::string text, error;
                        if (String(v, f, &text) && !SyslogAddress(text, sink, &error)) Error(v, f, error);
                      }});
    fields.push_back({"format", [&](const YamlNode& v, const std::string& f) {
                        std::string s;
                        if (Choice(v, f, {"rfc5424", "ocsf"}, &s))
                          sink->body = s == "ocsf" ? SyslogSink::Body::kOcsf : SyslogSink::Body::kJson;
                      }});
    fields.push_back(
        {"tls", [&](const YamlNode& v, const std::string& f) {
           tls_node = &v;
           Mapping(v, f,
                   {{"ca", [&](const YamlNode& x, const std::string& g) { ReadableFile(x, g, &sink->remote.ca); }},
                    {"cert", [&](const YamlNode& x, const std::string& g) { ReadableFile(x, g, &sink->remote.cert); }},
                    {"key",
                     [&](const YamlNode& x, const std::string& g) {
                       ReadableFile(x, g, &sink->remote.key);
                       SecretFile(x, g, sink->remote.key);
                     }}},
                   "tls");
         }});
    fields.push_back(
        {"spool", [&](const YamlNode& v, const std::string& f) {
           spool_node = &v;
           auto size = [&](const YamlNode& x, const std::string& g, uint64_t min, uint64_t* out) {
             std::string text, error;
             uint64_t n = 0;
             if (!String(x, g, &text)) return;
             if (!policy::ParseByteSize(text, &n, &error))
               Error(x, g, error);
             else if (n < min)
               Error(x, g, "must be at least " + std::to_string(min) + ", got " + text);
             else
               *out = n;
           };
           Mapping(v, f,
                   {{"path",
                     [&](const YamlNode& x, const std::string& g) {
                       if (String(x, g, &sink->remote.spool_dir) &&
                           (sink->remote.spool_dir.size() < 2 || sink->remote.spool_dir[0] != '/'))
                         Error(x, g, "must be an absolute path, got '" + sink->remote.spool_dir + "'");
                     }},
                    {"maxBytes", [&](const YamlNode& x,
                                     const std::string& g) { size(x, g, 1 << 20, &sink->remote.spool_max_bytes); }},
                    {"replayBytes",
                     [&](const YamlNode& x, const std::string& g) {
                       replay_given = true;
                       size(x, g, 0, &sink->remote.replay_bytes);
                     }}},
                   "spool");
         }});
  }
  Mapping(node, path, fields, (kind + " sink").c_str());
  if (kind == "jsonl" && !has_path) Error(node, path + ".path", "a jsonl sink needs a path");
  if (kind != "syslog") return;
  if (address_node && socket_node)
    Error(*socket_node, path + ".socket",
          "give either address or socket (the old form of address: unix://PATH), not both");
  RemoteSyslogOptions& remote = sink->remote;
  if (remote.host.empty()) {
    if (tls_node) Error(*tls_node, path + ".tls", "applies only to a tls:// address");
    if (spool_node) Error(*spool_node, path + ".spool", "applies only to a tcp:// or tls:// address");
    return;
  }
  if (!remote.tls && tls_node) Error(*tls_node, path + ".tls", "applies only to a tls:// address, not tcp://");
  if (remote.tls && remote.ca.empty())
    Error(tls_node ? *tls_node : *address_node, path + ".tls.ca", "a tls:// address needs the collector's CA (tls.ca)");
  if (remote.cert.empty() != remote.key.empty())
    Error(*tls_node, path + (remote.cert.empty() ? ".tls.cert" : ".tls.key"),
          "a client certificate needs both cert and key");
  if (remote.spool_dir.empty()) remote.spool_dir = kDefaultSpoolDir;
  // One spelling per directory ("/x/spool/" is "/x/spool"): two sinks must not share one.
  remote.spool_dir = std::filesystem::path(remote.spool_dir).lexically_normal().string();
  while (remote.spool_dir.size() > 1 && remote.spool_dir.back() == '/') remote.spool_dir.pop_back();
  if (remote.replay_bytes > remote.spool_max_bytes / 2) {
    if (replay_given)
      Error(*spool_node, path + ".spool.replayBytes", "must be at most half of spool.maxBytes");
    else
      remote.replay_bytes = remote.spool_max_bytes / 2;  // the default, in a small spool
  }
}

// Why `issuer` cannot be an iss (a verifier fetches
// <issuer>/.well-known/openid-configuration and compares iss as a string);
// "" when it can.
std::string BadIssuer(const std::string& issuer) {
  if (issuer.size() > 512) return "is longer than 512 bytes";
  for (unsigned char ch : issuer)
    if (ch <= ' ' || ch >= 0x7f) return "must be printable ASCII without spaces (a URL)";
  size_t scheme = issuer.rfind("https://", 0) == 0 ? 8 : issuer.rfind("http://", 0) == 0 ? 7 : 0;
  if (!scheme) return "must be an http:// or https:// URL, got '" + issuer + "'";
  if (issuer.size() == scheme || issuer[scheme] == '/') return "has no host: '" + issuer + "'";
  if (issuer.find_first_of("?#") != std::string::npos)
    return "must not have a query or a fragment (verifiers append /.well-known/...): '" + issuer + "'";
  if (issuer.back() == '/') return "must not end with '/' (iss is compared as a string): '" + issuer + "'";
  return "";
}

}  // namespace

std::string AgentConfig::OidcIssuer() const {
  if (!oidc_issuer.empty()) return oidc_issuer;
  ListenAddress addr;
  std::string error;
  if (metrics_listen.empty() || !ParseListenAddress(metrics_listen, &addr, &error) || addr.port == 0) return "";
  return "http://" + metrics_listen;
}

bool ParseListenAddress(const std::string& text, ListenAddress* out, std::string* error) {
  std::string host, port;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      *error = "expected [IPv6]:port, got '" + text + "'";
      return false;
    }
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
    if (host.find(':') == std::string::npos) {
      *error = "only IPv6 addresses go in brackets, got '" + text + "'";
      return false;
    }
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string::npos || text.find(':') != colon) {
      *error = "expected host:port (IPv4), [host]:port (IPv6) or localhost:port, got '" + text + "'";
      return false;
    }
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  uint64_t p = 0;
  bool port_ok = !port.empty() && port.size() <= 5 && (port == "0" || port[0] != '0');
  for (char c : port) port_ok = port_ok && c >= '0' && c <= '9' && (p = p * 10 + static_cast<uint64_t>(c - '0'), true);
  if (!port_ok || p > 65535) {
    *error = "bad port '" + port + "' in '" + text + "' (expected 0-65535)";
    return false;
  }
  out->port = static_cast<uint16_t>(p);
  if (host == "localhost") host = "127.0.0.1";
  in_addr a4;
  in6_addr a6;
  if (::inet_pton(AF_INET, host.c_str(), &a4) == 1) {
    out->v6 = false;
    out->loopback = (ntohl(a4.s_addr) >> 24) == 127;
  } else if (::inet_pton(AF_INET6, host.c_str(), &a6) == 1) {
    out->v6 = true;
    out->loopback = IN6_IS_ADDR_LOOPBACK(&a6) ||
                    (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
  } else {
    *error = "'" + host + "' in '" + text + "' is not a numeric IPv4 or IPv6 address (or localhost)";
    return false;
  }
  out->host = host;
  return true;
}

std::string AgentConfig::LockPath() const {
  size_t slash = socket.rfind('/');
  return (slash == std::string::npos ? std::string(".") : socket.substr(0, slash)) + "/agent.lock";
}

std::string AgentConfig::AuditPath() const {
  for (const auto& s : sinks)
    if (s.kind == SinkConfig::Kind::kJsonl) return s.path;
  return "";
}

bool AgentConfig::InScope(const std::string& cgroup_path, const std::string& name) const {
  if (adopt_cgroup_prefixes.empty() && adopt_name_prefixes.empty()) return true;
  for (const auto& p : adopt_cgroup_prefixes)
    if (cgroup_path.compare(0, p.size(), p) == 0) return true;
  for (const auto& p : adopt_name_prefixes)
    if (name.compare(0, p.size(), p) == 0) return true;
  return false;
}

AgentConfig DefaultAgentConfig() {
  AgentConfig config;
  SinkConfig audit;
  audit.kind = SinkConfig::Kind::kJsonl;
  audit.path = kDefaultAuditPath;
  audit.jsonl.max_bytes = 100ull << 20;
  audit.jsonl.keep = 5;
  config.sinks.push_back(audit);
  return config;
}

bool ParseAgentConfig(std::string_view text, const std::string& file, AgentConfig* out, Diagnostics* diags) {
  *out = DefaultAgentConfig();
  out->file = file;
  const size_t before = diags->size();
  if (text.size() > kMaxConfigBytes) {
    diags->push_back(Diagnostic{file, 0, 0, "", "configuration is larger than 1 MiB"});
    return false;
  }
  if (Blank(text)) return true;
  std::unique_ptr<YamlNode> root = policy::ReadYaml(text, file, diags);
  if (!root) {
    if (diags->size() == before) diags->push_back(Diagnostic{file, 0, 0, "", "cannot parse the configuration"});
    return false;
  }
  if (IsNull(*root)) return true;
  Reader r(file, diags);
  AgentConfig& c = *out;
  const YamlNode* metrics_listen_node = nullptr;
  r.Mapping(
      *root, "",
      {
          {"socket",
           [&](const YamlNode& v, const std::string& f) {
             if (!r.String(v, f, &c.socket)) return;
             if (c.socket.empty() || c.socket[0] != '/')
               r.Error(v, f, "must be an absolute path, got '" + c.socket + "'");
             else if (c.socket.size() >= 108)
               r.Error(v, f, "is longer than a unix socket path may be (107 bytes)");
           }},
          {"sinks",
           [&](const YamlNode& v, const std::string& f) {
             c.sinks.clear();
             if (v.kind != YamlNode::Kind::kSequence) {
               r.Error(v, f, "expected a list of sinks, got " + WhatIs(v));
               return;
             }
             std::set<std::string> names, spools;
             for (size_t i = 0; i < v.items.size(); ++i) {
               const std::string item = f + "[" + std::to_string(i) + "]";
               SinkConfig sink;
               if (sink.kind == SinkConfig::Kind::kJsonl) {
                 sink.jsonl.max_bytes = 100ull << 20;
                 sink.jsonl.keep = 5;
               }
               const size_t errors = diags->size();
               r.Sink(*v.items[i], item, &sink);
               if (diags->size() != errors) continue;
               if (!names.insert(sink.Name()).second) {
                 r.Error(*v.items[i], item,
                         sink.kind == SinkConfig::Kind::kStdout ? "stdout is already a sink"
                                                                : "duplicate sink " + sink.Name());
                 continue;
               }
               if (!sink.remote.host.empty() && !spools.insert(sink.remote.spool_dir).second) {
                 r.Error(*v.items[i], item + ".spool.path",
                         "spool " + sink.remote.spool_dir + " is already another sink's (each needs its own)");
                 continue;
               }
               c.sinks.push_back(sink);
             }
           }},
          {"metrics",
           [&](const YamlNode& v, const std::string& f) {
             r.Mapping(
                 v, f,
                 {{"listen",
                   [&](const YamlNode& lv, const std::string& lf) {
                     if (r.String(lv, lf, &c.metrics_listen)) metrics_listen_node = &lv;
                   }},
                  {"allowNonLoopback",
                   [&](const YamlNode& bv, const std::string& bf) { r.Bool(bv, bf, &c.metrics_allow_non_loopback); }},
                  {"requestTimeoutMs",
                   [&](const YamlNode& n, const std::string& nf) {
                     r.Unsigned(n, nf, 10, 600000, &c.metrics_request_timeout_ms);
                   }},
                  {"maxConnections",
                   [&](const YamlNode& n, const std::string& nf) {
                     uint64_t x;
                     if (r.Unsigned(n, nf, 1, 4096, &x)) c.metrics_max_connections = static_cast<uint32_t>(x);
                   }}},
                 "metrics");
           }},
          {"rateLimit",
           [&](const YamlNode& v, const std::string& f) {
             r.Mapping(v, f,
                       {{"eventsPerSecond",
                         [&](const YamlNode& n, const std::string& nf) {
                           r.Unsigned(n, nf, 0, 100000000, &c.rate_per_second);
                         }},
                        {"burst",
                         [&](const YamlNode& n, const std::string& nf) {
                           r.Unsigned(n, nf, 1, 100000000, &c.rate_burst);
                         }}},
                       "rateLimit");
           }},
          {"tail",
           [&](const YamlNode& v, const std::string& f) {
             r.Mapping(v, f,
                       {{"queueEvents",
                         [&](const YamlNode& n, const std::string& nf) {
                           uint64_t x;
                           if (r.Unsigned(n, nf, 1, 1000000, &x)) c.tail_queue_events = static_cast<uint32_t>(x);
                         }},
                        {"disconnectAfterDropped",
                         [&](const YamlNode& n, const std::string& nf) {
                           r.Unsigned(n, nf, 0, std::numeric_limits<uint64_t>::max(), &c.tail_disconnect_after_dropped);
                         }},
                        {"maxClients",
                         [&](const YamlNode& n, const std::string& nf) {
                           uint64_t x;
                           if (r.Unsigned(n, nf, 1, 4096, &x)) c.max_clients = static_cast<uint32_t>(x);
                         }}},
                       "tail");
           }},
          {"control",
           [&](const YamlNode& v, const std::string& f) {
             r.Mapping(v, f,
                       {{"idleTimeoutMs",
                         [&](const YamlNode& n, const std::string& nf) {
                           r.Unsigned(n, nf, 10, 86400000, &c.control_idle_timeout_ms);
                         }},
                        {"requestTimeoutMs",
                         [&](const YamlNode& n, const std::string& nf) {
                           r.Unsigned(n, nf, 10, 600000, &c.control_request_timeout_ms);
                         }},
                        {"partialFramesMaxBytes",
                         [&](const YamlNode& n, const std::string& nf) {
                           r.Unsigned(n, nf, 1u << 20, 1ull << 32, &c.control_partial_frames_max_bytes);
                         }}},
                       "control");
           }},
          {"adopt",
           [&](const YamlNode& v, const std::string& f) {
             r.Mapping(v, f,
                       {{"cgroupPrefixes",
                         [&](const YamlNode& n, const std::string& nf) {
                           r.StringList(n, nf, &c.adopt_cgroup_prefixes);
                           for (size_t i = 0; i < c.adopt_cgroup_prefixes.size(); ++i)
                             if (c.adopt_cgroup_prefixes[i].empty() || c.adopt_cgroup_prefixes[i][0] != '/')
                               r.Error(*n.items[i], nf + "[" + std::to_string(i) + "]",
                                       "a cgroup prefix starts with '/' (relative to the cgroup2 mount)");
                         }},
                        {"namePrefixes",
                         [&](const YamlNode& n, const std::string& nf) {
                           r.StringList(n, nf, &c.adopt_name_prefixes);
                         }}},
                       "adopt");
           }},
          {"runLogs",
           [&](const YamlNode& v, const std::string& f) {
             r.Mapping(v, f,
                       {{"keepDays",
                         [&](const YamlNode& n, const std::string& nf) {
                           uint64_t x;
                           if (r.Unsigned(n, nf, 0, 36500, &x)) c.run_log_keep_days = static_cast<uint32_t>(x);
                         }}},
                       "runLogs");
           }},
          {"oidc",
           [&](const YamlNode& v, const std::string& f) {
             r.Mapping(v, f,
                       {{"issuer",
                         [&](const YamlNode& n, const std::string& nf) {
                           if (!r.String(n, nf, &c.oidc_issuer) || c.oidc_issuer.empty()) return;  // "": derived
                           std::string why = BadIssuer(c.oidc_issuer);
                           if (!why.empty()) r.Error(n, nf, why);
                         }},
                        {"keyDir",
                         [&](const YamlNode& n, const std::string& nf) {
                           if (r.String(n, nf, &c.oidc_key_dir) && (c.oidc_key_dir.empty() || c.oidc_key_dir[0] != '/'))
                             r.Error(n, nf, "must be an absolute path, got '" + c.oidc_key_dir + "'");
                         }},
                        {"publishDir",
                         [&](const YamlNode& n, const std::string& nf) {
                           if (r.String(n, nf, &c.oidc_publish_dir) && !c.oidc_publish_dir.empty() &&
                               c.oidc_publish_dir[0] != '/')
                             r.Error(n, nf, "must be an absolute path or \"\" (none), got '" + c.oidc_publish_dir + "'");
                         }}},
                       "oidc");
           }},
      },
      "agent");
  if (metrics_listen_node && !c.metrics_listen.empty()) {
    ListenAddress addr;
    std::string error;
    if (!ParseListenAddress(c.metrics_listen, &addr, &error))
      r.Error(*metrics_listen_node, "metrics.listen", error);
    else if (!addr.loopback && !c.metrics_allow_non_loopback)
      r.Error(*metrics_listen_node, "metrics.listen",
              "'" + c.metrics_listen +
                  "' is not a loopback address: metrics would be reachable from the network (set "
                  "metrics.allowNonLoopback: true to mean it)");
  }
  return diags->size() == before;
}

bool LoadAgentConfig(const std::string& path, bool must_exist, AgentConfig* out, Diagnostics* diags) {
  const std::string file = path.empty() ? kDefaultConfigPath : path;
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT && !must_exist) {
      *out = DefaultAgentConfig();
      return true;
    }
    diags->push_back(Diagnostic{file, 0, 0, "", std::string("cannot open: ") + std::strerror(errno)});
    return false;
  }
  std::string text;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      diags->push_back(Diagnostic{file, 0, 0, "", std::string("cannot read: ") + std::strerror(err)});
      return false;
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxConfigBytes) break;
  }
  ::close(fd);
  return ParseAgentConfig(text, file, out, diags);
}

}  // namespace cordon::agent
