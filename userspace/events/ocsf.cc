#include "events/ocsf.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <cstdint>
#include <string_view>

#include "events/json_line.h"

namespace cordon {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

// OCSF 1.3.0 enumerations used here.
enum Category { kCategoryOther = 0, kCategorySystem = 1, kCategoryNetwork = 4 };
enum Class {
  kClassBase = 0,
  kClassFileSystem = 1001,
  kClassProcess = 1007,
  kClassNetwork = 4001,
  kClassDns = 4003,
};
constexpr int kActivityOther = 99;

struct Mapping {
  int category = kCategoryOther;
  int class_uid = kClassBase;
  const char* class_name = "Base Event";
  int activity_id = kActivityOther;
  const char* activity = "Other";
};

bool Starts(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

Mapping MapKind(const v1::AuditEvent& e) {
  const std::string& kind = e.kind();
  const bool refused = e.verdict() == "denied";
  Mapping m;
  if (kind == "dns.query") return {kCategoryNetwork, kClassDns, "DNS Activity", 1, "Query"};
  if (Starts(kind, "net.")) {
    m = {kCategoryNetwork, kClassNetwork, "Network Activity", kActivityOther, "Other"};
    if (kind == "net.connect" || kind == "net.unix") {
      m.activity_id = refused ? 5 : 1;
      m.activity = refused ? "Refuse" : "Open";
    } else if (kind == "net.sendmsg") {
      m.activity_id = refused ? 5 : 6;
      m.activity = refused ? "Refuse" : "Traffic";
    } else if (kind == "net.bind") {
      m.activity_id = refused ? 5 : 7;
      m.activity = refused ? "Refuse" : "Listen";
    } else if (kind == "net.preexisting") {
      m.activity_id = e.verdict() == "destroyed" ? 3 : 6;
      m.activity = e.verdict() == "destroyed" ? "Reset" : "Traffic";
    }
    return m;
  }
  if (kind == "file.exec") return {kCategorySystem, kClassProcess, "Process Activity", 1, "Launch"};
  if (Starts(kind, "file.")) {
    m = {kCategorySystem, kClassFileSystem, "File System Activity", kActivityOther, "Other"};
    if (kind == "file.open" || kind == "file.preexisting") m.activity_id = 14, m.activity = "Open";
    if (kind == "file.create" || kind == "file.link" || kind == "file.memfd") m.activity_id = 1, m.activity = "Create";
    if (kind == "file.unlink") m.activity_id = 4, m.activity = "Delete";
    if (kind == "file.rename") m.activity_id = 5, m.activity = "Rename";
    if (kind == "file.setattr") m.activity_id = 6, m.activity = "Set Attributes";
    return m;
  }
  if (kind == "tamper.ptrace") return {kCategorySystem, kClassProcess, "Process Activity", 4, "Inject"};
  return m;
}

// security_control: action_id 1 Allowed / 2 Denied; disposition_id 1
// Allowed, 2 Blocked, 4 Isolated, 15 Detected, 17 Logged, 99 Other.
struct Outcome {
  int action_id;
  const char* action;
  int disposition_id;
  const char* disposition;
  int severity_id;  // 1 Informational, 2 Low, 3 Medium, 4 High
  const char* severity;
  int status_id;  // 1 Success, 2 Failure, 0 Unknown
  const char* status;
  bool alert;
};

Outcome OutcomeOf(const v1::AuditEvent& e) {
  const std::string& v = e.verdict();
  if (e.kind() == "loss" || e.kind() == "suppressed")
    return {0, "Unknown", 0, "Unknown", 3, "Medium", 0, "Unknown", true};
  if (e.kind() == "sandbox.contained") return {2, "Denied", 4, "Isolated", 4, "High", 1, "Success", true};
  if (v == "denied" || v == "destroyed") return {2, "Denied", 2, "Blocked", 3, "Medium", 2, "Failure", !e.quiet()};
  if (v == "killed") return {2, "Denied", 99, "Killed", 4, "High", 1, "Success", true};
  if (v == "audited" || v == "detected") return {1, "Allowed", 15, "Detected", 2, "Low", 1, "Success", !e.quiet()};
  return {1, "Allowed", 17, "Logged", 1, "Informational", 1, "Success", false};
}

Value Str(const std::string& s) {
  Value v;
  v.set_string_value(s);
  return v;
}
Value Num(double n) {
  Value v;
  v.set_number_value(n);
  return v;
}
Value Bool(bool b) {
  Value v;
  v.set_bool_value(b);
  return v;
}
Struct* Obj(Struct* parent, const char* key) { return (*parent->mutable_fields())[key].mutable_struct_value(); }
void Put(Struct* s, const char* key, Value v) { (*s->mutable_fields())[key] = std::move(v); }
void PutIf(Struct* s, const char* key, const std::string& text) {
  if (!text.empty()) Put(s, key, Str(text));
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

void PutFile(Struct* file, const std::string& path) {
  Put(file, "path", Str(path));
  Put(file, "name", Str(BaseName(path)));
  Put(file, "type_id", Num(0));  // Unknown: the event does not say
}

}  // namespace

std::string ToOcsfJson(const v1::AuditEvent& event, const std::string& hostname, bool with_original, size_t max_field) {
  v1::AuditEvent cut_event;
  bool cut = false;
  if (max_field > 0) {
    cut_event = event;
    auto cap = [&](std::string* text) {
      if (text->size() <= max_field) return;
      size_t n = max_field;
      while (n > 0 && (static_cast<unsigned char>((*text)[n]) & 0xC0) == 0x80) --n;  // a whole UTF-8 character
      text->resize(n);
      *text += "...[cut]";
      cut = true;
    };
    cap(cut_event.mutable_comm());
    cap(cut_event.mutable_exe());
    cap(cut_event.mutable_reason());
    cap(cut_event.mutable_sandbox());
    cap(cut_event.mutable_policy());
    cap(cut_event.mutable_file()->mutable_path());
    cap(cut_event.mutable_net()->mutable_host());
    cap(cut_event.mutable_dns()->mutable_name());
  }
  const v1::AuditEvent& e = max_field > 0 ? cut_event : event;
  const Mapping m = MapKind(e);
  const Outcome o = OutcomeOf(e);
  Struct root;
  Put(&root, "category_uid", Num(m.category));
  Put(&root, "class_uid", Num(m.class_uid));
  Put(&root, "class_name", Str(m.class_name));
  Put(&root, "activity_id", Num(m.activity_id));
  Put(&root, "activity_name", Str(m.activity));
  Put(&root, "type_uid", Num(static_cast<double>(m.class_uid) * 100 + m.activity_id));
  const int64_t ms = e.time().seconds() * 1000 + e.time().nanos() / 1000000;
  Put(&root, "time", Num(static_cast<double>(ms)));
  Put(&root, "severity_id", Num(o.severity_id));
  Put(&root, "severity", Str(o.severity));
  Put(&root, "status_id", Num(o.status_id));
  Put(&root, "status", Str(o.status));
  Put(&root, "action_id", Num(o.action_id));
  Put(&root, "action", Str(o.action));
  Put(&root, "disposition_id", Num(o.disposition_id));
  Put(&root, "disposition", Str(o.disposition));
  Put(&root, "is_alert", Bool(o.alert));
  Put(&root, "message", Str(e.kind() + " " + e.verdict() + (e.reason().empty() ? "" : ": " + e.reason())));

  Struct* meta = Obj(&root, "metadata");
  Put(meta, "version", Str(kOcsfVersion));
  Struct* product = Obj(meta, "product");
  Put(product, "name", Str("cordon"));
  Put(product, "vendor_name", Str("cordon"));
  Put(product, "version", Str(CORDON_VERSION));
  PutIf(meta, "uid", e.id());
  Put(meta, "event_code", Str(e.kind()));
  Put(meta, "log_name", Str(e.sandbox()));
  Value profiles;
  profiles.mutable_list_value()->add_values()->set_string_value("security_control");
  if (!hostname.empty()) profiles.mutable_list_value()->add_values()->set_string_value("host");
  Put(meta, "profiles", profiles);

  if (!hostname.empty()) {
    Struct* device = Obj(&root, "device");
    Put(device, "hostname", Str(hostname));
    Put(device, "type_id", Num(1));  // Server
  }
  if (!e.policy().empty()) {
    Struct* policy = Obj(&root, "policy");
    Put(policy, "name", Str(e.policy()));
    PutIf(policy, "uid", e.policy_digest());
  }

  // The process that acted.
  if (e.pid()) {
    Struct* process = Obj(Obj(&root, "actor"), "process");
    Put(process, "pid", Num(e.pid()));
    PutIf(process, "name", e.comm());
    if (e.tid()) Put(process, "tid", Num(e.tid()));
    if (!e.exe().empty()) PutFile(Obj(process, "file"), e.exe());
    Struct* user = Obj(process, "user");
    Put(user, "uid", Str(std::to_string(e.uid())));
    if (e.ppid()) Put(Obj(process, "parent_process"), "pid", Num(e.ppid()));
  }

  if (m.class_uid == kClassNetwork) {
    Struct* info = Obj(&root, "connection_info");
    Put(info, "direction_id", Num(2));  // Outbound (net.bind: the sandbox's own end)
    Put(info, "direction", Str("Outbound"));
    PutIf(info, "protocol_name", e.kind() == "net.unix" ? std::string("unix") : e.net().protocol());
    if (e.net().family() == "inet") Put(info, "protocol_ver_id", Num(4));
    if (e.net().family() == "inet6") Put(info, "protocol_ver_id", Num(6));
    Struct* dst = Obj(&root, "dst_endpoint");
    PutIf(dst, "ip", e.net().address());
    if (e.net().port()) Put(dst, "port", Num(e.net().port()));
    PutIf(dst, "hostname", e.net().host());
    if (e.kind() == "net.unix") PutIf(dst, "name", e.file().path());
    if (dst->fields().empty()) PutIf(dst, "name", e.sandbox());  // net.socket, net.sockopt: no peer
  } else if (m.class_uid == kClassDns) {
    Struct* query = Obj(&root, "query");
    Put(query, "hostname", Str(e.dns().name()));
    Put(query, "type", Str(e.dns().type()));
    Put(query, "class", Str("IN"));
    Put(Obj(&root, "src_endpoint"), "name", Str(e.sandbox()));
    Put(&root, "rcode_id", Num(e.verdict() == "denied" ? 5 : 0));  // Refused / NoError
    Put(&root, "rcode", Str(e.verdict() == "denied" ? "Refused" : "NoError"));
  } else if (m.class_uid == kClassFileSystem) {
    PutFile(Obj(&root, "file"), e.file().path());
  } else if (m.class_uid == kClassProcess) {
    Struct* process = Obj(&root, "process");
    if (e.kind() == "file.exec") {
      PutFile(Obj(process, "file"), e.file().path());
    } else if (e.target().pid()) {
      Put(process, "pid", Num(e.target().pid()));
    }
  }

  // Everything, as the audit file has it.
  if (cut) Put(Obj(&root, "unmapped"), "cut", Bool(true));
  Struct cordon_event;
  if (!with_original)
    Put(Obj(&root, "unmapped"), "cordon_omitted", Bool(true));
  else if (google::protobuf::util::JsonStringToMessage(ToJsonLine(e), &cordon_event).ok())
    *Obj(Obj(&root, "unmapped"), "cordon") = std::move(cordon_event);

  std::string out;
  // Cannot fail for strings that are valid UTF-8 (every event's are: the
  // decoder escapes the workload's bytes); should it, the event's own line.
  if (!google::protobuf::util::MessageToJsonString(root, &out).ok()) return ToJsonLine(event);
  return out;
}

}  // namespace cordon
