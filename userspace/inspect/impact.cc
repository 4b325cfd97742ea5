#include "inspect/impact.h"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>

#include <algorithm>
#include <cstdlib>
#include <set>

#include "events/decoder.h"

namespace cordon::inspect {
namespace {

using google::protobuf::Timestamp;
using google::protobuf::util::TimeUtil;
namespace v1 = cordon::v1;

constexpr size_t kExamples = 5;    // file names and tamper targets shown per row
constexpr size_t kPidsShown = 20;  // pids listed per executable
constexpr int kTimelineBuckets = 60;

int64_t Ns(const Timestamp& t) { return TimeUtil::TimestampToNanoseconds(t); }

// Occurrences grown by one event at `time`, seen `count` times.
void Count(v1::Occurrences* o, const Timestamp& time, uint64_t count = 1) {
  if (o->count() == 0 || Ns(time) < Ns(o->first())) *o->mutable_first() = time;
  if (o->count() == 0 || Ns(time) > Ns(o->last())) *o->mutable_last() = time;
  o->set_count(o->count() + count);
}

void AddExample(google::protobuf::RepeatedPtrField<std::string>* examples, const std::string& example) {
  if (examples->size() >= static_cast<int>(kExamples)) return;
  for (const auto& e : *examples)
    if (e == example) return;
  *examples->Add() = example;
}

// "/a/b/c" -> ("/a/b", "c"); "c" (relative, as written) -> ("", "c").
std::pair<std::string, std::string> SplitPath(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return {"", path};
  if (slash == 0) return {"/", path.substr(1)};
  return {path.substr(0, slash), path.substr(slash + 1)};
}

// What an access row says: the rights asked for, or the operation of a kind
// without them (file.unlink -> unlink).
std::string AccessOf(const v1::AuditEvent& e) {
  if (!e.file().access().empty()) return e.file().access();
  return e.kind().substr(e.kind().find('.') + 1);
}

}  // namespace

std::string KindFamily(const std::string& kind) {
  for (const char* family : {"net", "file", "tamper", "resource", "credential", "sandbox"})
    if (kind.rfind(std::string(family) + ".", 0) == 0) return family;
  return "other";
}

struct ImpactBuilder::Sandbox {
  v1::SandboxImpact out;
  std::set<std::string> cgroups, policies, exposed;
  struct Process {
    v1::ProcessSeen out;
    std::set<std::string> comms;
    std::set<uint32_t> pids;
  };
  std::map<std::string, Process> processes;  // by exe
  std::map<std::string, v1::DestinationSeen> network;
  // The row of one destination and verdict.
  v1::DestinationSeen* Destination(const std::string& kind, const std::string& address, uint32_t port,
                                   const std::string& protocol, const std::string& verdict, const char* source) {
    auto& d = network[kind + '\0' + address + '\0' + std::to_string(port) + '\0' + protocol + '\0' + verdict];
    d.set_kind(kind);
    d.set_address(address);
    d.set_port(port);
    d.set_protocol(protocol);
    d.set_verdict(verdict);
    d.set_source(source);
    return &d;
  }
  struct Directory {
    v1::DirectorySeen out;
    std::set<std::string> names;
  };
  std::map<std::string, Directory> files;
  void FileSeen(const std::string& dir, const std::string& name, const std::string& access, const std::string& verdict,
                const Timestamp& t, uint64_t n) {
    auto& d = files[dir + '\0' + access + '\0' + verdict];
    d.out.set_directory(dir);
    d.out.set_access(access);
    d.out.set_verdict(verdict);
    Count(d.out.mutable_seen(), t, n);
    d.names.insert(name);
    AddExample(d.out.mutable_examples(), name);
  }
  std::map<std::string, v1::CredentialLifetime> credentials;  // by name and fingerprint, in order of issue
  std::vector<std::string> credential_order;
  std::map<std::string, v1::ResourcePeak> resources;
  std::map<std::string, v1::TamperSeen> tamper;
  std::vector<std::pair<int64_t, std::string>> times;  // (event time, family), for the timeline
};

ImpactBuilder::ImpactBuilder(ImpactScope scope, EvidenceLoader evidence)
    : scope_(std::move(scope)), evidence_(std::move(evidence)) {}
ImpactBuilder::~ImpactBuilder() = default;

ImpactBuilder::Sandbox& ImpactBuilder::SandboxOf(const v1::AuditEvent& e) {
  auto& slot = sandboxes_[{e.sandbox_cgroup_id(), e.sandbox()}];
  if (!slot) {
    slot = std::make_unique<Sandbox>();
    slot->out.set_name(e.sandbox());
    slot->out.set_sandbox_cgroup_id(e.sandbox_cgroup_id());
  }
  return *slot;
}

void ImpactBuilder::Add(const v1::AuditEvent& e) {
  if (e.kind().empty() || e.kind() == "chain.start") return;
  const int64_t ns = Ns(e.time());
  if (scope_.since_unix_ns && ns < scope_.since_unix_ns) return;
  if (scope_.until_unix_ns && ns > scope_.until_unix_ns) return;
  if (!scope_.sandbox.empty() && e.sandbox() != scope_.sandbox) return;
  if (scope_.sandbox_id && e.sandbox_cgroup_id() != scope_.sandbox_id) return;
  if (!scope_.cgroup.empty()) {
    auto trim = [](std::string p) {
      while (!p.empty() && p.front() == '/') p.erase(0, 1);
      while (!p.empty() && p.back() == '/') p.pop_back();
      return p;
    };
    const std::string want = trim(scope_.cgroup), have = trim(e.cgroup_path());
    if (have != want && have.rfind(want + "/", 0) != 0) return;
  }
  if (!e.id().empty() && !ids_.insert(e.id()).second) return;  // the same record again (README "Event identity")
  Sandbox& s = SandboxOf(e);
  const Timestamp& t = e.time();
  // The occurrences a record stands for (the kernel's repeats), over the
  // span they were seen in.
  const uint64_t n = Occurrences(e);
  auto count = [&](v1::Occurrences* o) {
    Count(o, t, n);
    if (e.has_repeats()) {
      if (e.repeats().has_first()) Count(o, e.repeats().first(), 0);
      if (e.repeats().has_last()) Count(o, e.repeats().last(), 0);
    }
  };
  count(s.out.mutable_events());
  (*s.out.mutable_by_kind())[e.kind()] += n;
  (*s.out.mutable_by_verdict())[e.verdict()] += n;
  if (!e.cgroup_path().empty()) s.cgroups.insert(e.cgroup_path());
  if (!e.policy().empty()) s.policies.insert(e.policy());
  s.times.emplace_back(ns, KindFamily(e.kind()));

  if (e.pid() != 0) {
    auto& p = s.processes[e.exe()];
    p.out.set_exe(e.exe());
    if (!e.comm().empty()) p.comms.insert(e.comm());
    p.pids.insert(e.pid());
    count(p.out.mutable_events());
  }

  const std::string& kind = e.kind();
  if (kind == "loss") {
    s.out.set_lost(s.out.lost() + e.loss().dropped());
  } else if (kind == "suppressed") {
    s.out.set_suppressed(s.out.suppressed() + e.suppressed().count());
  } else if (kind.rfind("net.", 0) == 0 && (e.has_net() || kind == "net.unix")) {
    std::string address = e.net().address();
    if (address.empty() && e.has_file()) address = e.file().path();  // unix sockets: the path
    count(s.Destination(kind, address, e.net().port(), e.net().protocol(), e.verdict(), "audit")->mutable_seen());
  } else if (kind == "file.preexisting") {
    for (const auto& path : e.open_files()) {
      auto [dir, name] = SplitPath(path);
      s.FileSeen(dir, name, "open", e.verdict(), t, n);
    }
  } else if (kind.rfind("file.", 0) == 0 && e.has_file()) {
    auto [dir, name] = SplitPath(e.file().path());
    s.FileSeen(dir, name, AccessOf(e), e.verdict(), t, n);
  } else if (kind.rfind("tamper.", 0) == 0 || kind == "proc.coredump") {
    auto& ts = s.tamper[kind + '\0' + e.verdict()];
    ts.set_kind(kind);
    ts.set_verdict(e.verdict());
    count(ts.mutable_seen());
    std::string example;
    if (e.has_file() && !e.file().path().empty())
      example = e.file().path();
    else if (e.has_target())
      example = "pid " + std::to_string(e.target().pid()) + " arg " + std::to_string(e.target().arg());
    if (!example.empty()) AddExample(ts.mutable_examples(), example);
  } else if (kind == "credential.exposed") {
    for (const auto& v : e.credential().variables()) s.exposed.insert(v);
  } else if (kind.rfind("credential.", 0) == 0) {
    const auto& c = e.credential();
    const std::string key = c.name() + '\0' + c.fingerprint();
    if (!s.credentials.count(key)) s.credential_order.push_back(key);
    auto& life = s.credentials[key];
    life.set_name(c.name());
    life.set_fingerprint(c.fingerprint());
    if (life.issuer().empty()) life.set_issuer(e.enforcement());
    if (c.expires_at()) *life.mutable_expires() = TimeUtil::SecondsToTimestamp(c.expires_at());
    if (kind == "credential.issued") {
      *life.mutable_issued() = t;
    } else if (kind == "credential.refreshed") {
      life.set_refreshed(life.refreshed() + n);
    } else if (kind == "credential.revoked") {
      *life.mutable_revoked() = t;
      life.set_revoked_reason(e.reason());
      life.set_revoke(c.revoke());
    } else if (kind == "credential.expired") {
      *life.mutable_expired() = t;
      if (!c.revoke().empty()) life.set_revoke(c.revoke());
    } else if (kind == "credential.issue_failed") {
      life.set_issue_failed(life.issue_failed() + n);
    }
  } else if (kind.rfind("resource.", 0) == 0) {
    const auto& r = e.resource();
    const std::string name = r.name().empty() ? kind.substr(9) : r.name();
    auto& peak = s.resources[name];
    peak.set_name(name);
    if (r.value() > peak.peak() || !peak.has_at()) {
      peak.set_peak(std::max(peak.peak(), r.value()));
      *peak.mutable_at() = t;
    }
    if (r.limit()) peak.set_limit(r.limit());
    if (!r.event().empty()) (*peak.mutable_counters())[r.event()] += r.count() ? r.count() : 1;
  } else if (kind == "sandbox.contained" || kind == "sandbox.released") {
    auto* c = s.out.add_containment();
    c->set_kind(kind);
    *c->mutable_time() = t;
    *c->mutable_containment() = e.containment();
    const std::string& path = e.containment().evidence();
    if (kind == "sandbox.contained" && !path.empty()) {
      std::string text, error;
      v1::ContainmentEvidence evidence;
      google::protobuf::util::JsonParseOptions options;
      options.ignore_unknown_fields = true;
      if (!evidence_) {
        c->set_evidence_error("not read");
      } else if (!evidence_(path, &text, &error)) {
        c->set_evidence_error(error);
      } else if (!google::protobuf::util::JsonStringToMessage(text, &evidence, options).ok()) {
        c->set_evidence_error(path + ": not a containment evidence document");
      } else {
        *c->mutable_processes() = evidence.processes();
        *c->mutable_sockets() = evidence.sockets();
        *c->mutable_policy() = evidence.policy();
        // Connections open when it was contained: destinations the policy allowed.
        const Timestamp at = evidence.has_time() ? evidence.time() : t;
        for (const auto& sock : evidence.sockets()) {
          if (sock.remote().empty() || sock.state() == "listen") continue;
          const size_t colon = sock.remote().rfind(':');
          std::string address = sock.remote().substr(0, colon);
          if (address.size() > 1 && address.front() == '[') address = address.substr(1, address.size() - 2);
          const uint32_t port =
              colon == std::string::npos ? 0 : static_cast<uint32_t>(std::atoi(sock.remote().c_str() + colon + 1));
          Count(s.Destination("net.connect", address, port, sock.protocol(), "connected", "evidence")->mutable_seen(),
                at);
        }
      }
    }
  }
}

v1::ImpactReport ImpactBuilder::Finish() {
  v1::ImpactReport report;
  report.set_version(1);
  if (scope_.since_unix_ns) *report.mutable_since() = TimeUtil::NanosecondsToTimestamp(scope_.since_unix_ns);
  if (scope_.until_unix_ns) *report.mutable_until() = TimeUtil::NanosecondsToTimestamp(scope_.until_unix_ns);
  std::vector<Sandbox*> order;
  for (auto& [key, s] : sandboxes_) order.push_back(s.get());
  std::stable_sort(order.begin(), order.end(),
                   [](Sandbox* a, Sandbox* b) { return Ns(a->out.events().first()) < Ns(b->out.events().first()); });
  for (Sandbox* s : order) {
    v1::SandboxImpact& out = s->out;
    for (const auto& c : s->cgroups) out.add_cgroup_paths(c);
    for (const auto& p : s->policies) out.add_policies(p);
    for (const auto& v : s->exposed) out.add_exposed_variables(v);
    for (auto& [exe, p] : s->processes) {
      for (const auto& c : p.comms) p.out.add_comms(c);
      for (uint32_t pid : p.pids)
        if (p.out.pids_size() < static_cast<int>(kPidsShown)) p.out.add_pids(pid);
      p.out.set_distinct_pids(p.pids.size());
      *out.add_processes() = std::move(p.out);
    }
    // Most seen first; ties in the order of the key (address, directory).
    auto by_count = [](const auto& a, const auto& b) { return a.seen().count() > b.seen().count(); };
    for (auto& [k, d] : s->network) *out.add_network() = std::move(d);
    std::stable_sort(out.mutable_network()->begin(), out.mutable_network()->end(), by_count);
    for (auto& [k, d] : s->files) {
      d.out.set_distinct_files(d.names.size());
      *out.add_files() = std::move(d.out);
    }
    std::stable_sort(out.mutable_files()->begin(), out.mutable_files()->end(), by_count);
    for (const auto& key : s->credential_order) *out.add_credentials() = std::move(s->credentials[key]);
    for (auto& [k, r] : s->resources) *out.add_resources() = std::move(r);
    for (auto& [k, ts] : s->tamper) *out.add_tamper() = std::move(ts);
    std::stable_sort(out.mutable_tamper()->begin(), out.mutable_tamper()->end(), by_count);
    // The timeline: equal buckets from the first event to the last.
    const int64_t first = Ns(out.events().first()), last = Ns(out.events().last());
    const int64_t width = std::max<int64_t>(1, (last - first) / kTimelineBuckets + 1);
    auto* timeline = out.mutable_timeline();
    *timeline->mutable_start() = out.events().first();
    timeline->set_bucket_ns(static_cast<uint64_t>(width));
    const int buckets = static_cast<int>((last - first) / width) + 1;
    for (int i = 0; i < buckets; ++i) timeline->add_buckets();
    for (const auto& [ns, family] : s->times)
      (*timeline->mutable_buckets(static_cast<int>((ns - first) / width))->mutable_by_family())[family] += 1;
    *report.add_sandboxes() = std::move(out);
  }
  return report;
}

std::string ImpactJson(const v1::ImpactReport& report) {
  std::string json;
  google::protobuf::util::JsonPrintOptions print;
  print.add_whitespace = true;
  print.preserve_proto_field_names = false;
  if (!google::protobuf::util::MessageToJsonString(report, &json, print).ok()) json = "{}\n";
  return json;
}

}  // namespace cordon::inspect
