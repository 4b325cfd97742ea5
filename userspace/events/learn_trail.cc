#include "events/learn_trail.h"

#include "abi/cordon_file.h"
#include "events/audit_file.h"
#include "util/text.h"

namespace cordon {
namespace {

// "read,write,create" (events' file.access) -> CORDON_FILE_* bits.
uint32_t AccessBits(const std::string& access) {
  static const struct {
    const char* name;
    uint32_t bit;
  } kNames[] = {{"read", CORDON_FILE_READ},
                {"write", CORDON_FILE_WRITE},
                {"create", CORDON_FILE_CREATE},
                {"exec", CORDON_FILE_EXEC},
                {"map_exec", CORDON_FILE_MAP_EXEC}};
  uint32_t bits = 0;
  size_t start = 0;
  while (start <= access.size()) {
    size_t comma = access.find(',', start);
    if (comma == std::string::npos) comma = access.size();
    const std::string name = access.substr(start, comma - start);
    for (const auto& n : kNames)
      if (name == n.name) bits |= n.bit;
    start = comma + 1;
  }
  return bits;
}

}  // namespace

bool ObservationOf(const cordon::v1::AuditEvent& e, policy::Observation* out) {
  const std::string& kind = e.kind();
  const std::string& verdict = e.verdict();
  if (verdict != "denied" && verdict != "audited" && verdict != "detected" && verdict != "killed") return false;
  if (kind.empty() || kind == "loss" || kind == "suppressed" || kind == "chain.start" || kind == "proc.coredump" ||
      kind.rfind("credential.", 0) == 0 || kind.rfind("resource.", 0) == 0 ||
      kind.find(".preexisting") != std::string::npos)
    return false;
  *out = policy::Observation{};
  out->kind = kind;
  if (e.has_file() && !e.file().path().empty()) {
    auto raw = UnescapeWorkloadBytes(e.file().path());
    out->path = raw ? *raw : "";
    out->path_truncated = e.file().truncated();
    out->access = AccessBits(e.file().access());
  }
  // Landlock's refusals and the cgroup unix hooks carry the path as the
  // caller wrote it (README "Audit events").
  out->path_as_written = e.enforcement() == "landlock" || (kind == "net.unix" && e.enforcement() == "kernel-cgroup");
  if (e.has_net()) {
    out->address = e.net().address();
    out->port = e.net().port();
    out->protocol = e.net().protocol();
    out->family = e.net().family();
    out->sock_type = e.net().sock_type();
  }
  if (e.has_target()) out->arg = e.target().arg();
  out->reason = e.reason();
  return true;
}

bool PreexistingObservationOf(const cordon::v1::AuditEvent& e, policy::Observation* out) {
  const std::string& verdict = e.verdict();
  if (e.kind() != "net.preexisting" || !e.has_net() || e.net().address().empty() ||
      (verdict != "audited" && verdict != "destroyed" && verdict != "destroy-failed"))
    return false;
  *out = policy::Observation{};
  out->kind = "net.connect";
  out->address = e.net().address();
  out->port = e.net().port();
  out->protocol = e.net().protocol();
  out->family = e.net().family();
  out->sock_type = e.net().sock_type();
  out->reason = "a connection open before learning began (" + e.reason() + ")";
  return true;
}

void LearnTrail::Add(const cordon::v1::AuditEvent& event) {
  if (event.kind() == "chain.start") return;
  ++events;
  if (event.kind() == "loss") lost += event.loss().dropped();
  if (event.kind() == "suppressed") suppressed += event.suppressed().count();
  if (event.kind() == "file.preexisting") ++preexisting_files;
  policy::Observation o;
  const bool preexisting = PreexistingObservationOf(event, &o);
  if (!preexisting && !ObservationOf(event, &o)) return;
  if (preexisting) ++preexisting_connections;
  // What Observation's == compares, each field ended by a byte no field holds.
  std::string key;
  for (const std::string* field : {&o.kind, &o.path, &o.address, &o.protocol, &o.family, &o.sock_type})
    key += *field + '\0';
  key += std::to_string(o.path_truncated) + ',' + std::to_string(o.access) + ',' + std::to_string(o.port) + ',' +
         std::to_string(o.arg);
  if (keys_.insert(std::move(key)).second) observations.push_back(std::move(o));
}

LearnTrail ReadLearnTrail(const std::string& text) {
  LearnTrail trail;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    cordon::v1::AuditEvent event;
    if (!ParseAuditLine(line, &event)) {
      ++trail.unreadable;
      continue;
    }
    trail.Add(event);
  }
  return trail;
}

}  // namespace cordon
