#include "events/wire.h"

#include <cstdint>
#include <string>

namespace cordon {
namespace {

// ---- the wire encoding, by hand ----------------------------------------------

void PutVarint(std::string* out, uint64_t v) {
  char buf[10];
  size_t n = 0;
  while (v >= 0x80) {
    buf[n++] = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  buf[n++] = static_cast<char>(v);
  out->append(buf, n);
}
void PutTag(std::string* out, uint32_t field, uint32_t wire_type) { PutVarint(out, (field << 3) | wire_type); }
void PutUint(std::string* out, uint32_t field, uint64_t v) {
  if (!v) return;
  PutTag(out, field, 0);
  PutVarint(out, v);
}
void PutBytes(std::string* out, uint32_t field, const std::string& v) {
  if (v.empty()) return;
  PutTag(out, field, 2);
  PutVarint(out, v.size());
  out->append(v);
}
void PutMessage(std::string* out, uint32_t field, const std::string& body) {
  PutTag(out, field, 2);
  PutVarint(out, body.size());
  out->append(body);
}

}  // namespace

void AppendWireEvent(const cordon::v1::AuditEvent& e, std::string* out) {
  thread_local std::string sub;  // one sub-message at a time
  if (e.has_time()) {
    sub.clear();
    // int64 and int32 are varints of their two's complement (10 bytes when negative).
    PutUint(&sub, 1, static_cast<uint64_t>(e.time().seconds()));
    PutUint(&sub, 2, static_cast<uint64_t>(static_cast<int64_t>(e.time().nanos())));
    PutMessage(out, 1, sub);
  }
  PutBytes(out, 2, e.sandbox());
  PutBytes(out, 3, e.cgroup_path());
  PutUint(out, 4, e.cgroup_id());
  PutUint(out, 5, e.sandbox_cgroup_id());
  PutUint(out, 6, e.pid());
  PutUint(out, 7, e.tid());
  PutUint(out, 8, e.ppid());
  PutUint(out, 9, e.uid());
  PutUint(out, 10, e.gid());
  PutBytes(out, 11, e.comm());
  PutBytes(out, 12, e.exe());
  PutBytes(out, 13, e.kind());
  PutBytes(out, 14, e.verdict());
  PutBytes(out, 15, e.policy());
  PutBytes(out, 16, e.reason());
  if (e.has_net()) {
    const auto& n = e.net();
    sub.clear();
    PutBytes(&sub, 1, n.address());
    PutUint(&sub, 2, n.port());
    PutBytes(&sub, 3, n.protocol());
    PutBytes(&sub, 4, n.family());
    PutBytes(&sub, 5, n.sock_type());
    PutUint(&sub, 6, n.rule());
    PutUint(&sub, 7, n.name_id());
    PutBytes(&sub, 8, n.host());
    PutMessage(out, 17, sub);
  }
  if (e.has_loss()) {
    sub.clear();
    PutUint(&sub, 1, e.loss().dropped());
    PutUint(&sub, 2, e.loss().first_seq());
    PutUint(&sub, 3, e.loss().last_seq());
    PutMessage(out, 18, sub);
  }
  PutBytes(out, 19, e.enforcement());
  if (e.has_file()) {
    const auto& f = e.file();
    sub.clear();
    PutBytes(&sub, 1, f.path());
    PutBytes(&sub, 2, f.access());
    PutBytes(&sub, 3, f.granted());
    PutUint(&sub, 4, f.truncated());
    PutUint(&sub, 5, f.inode());
    PutUint(&sub, 6, f.device());
    PutUint(&sub, 7, f.rule());
    PutMessage(out, 20, sub);
  }
  if (e.has_target()) {
    sub.clear();
    PutUint(&sub, 1, e.target().pid());
    PutUint(&sub, 2, e.target().arg());
    PutUint(&sub, 3, e.target().arg2());
    PutMessage(out, 21, sub);
  }
  for (const auto& f : e.open_files()) {  // repeated string: every element, empty ones too
    PutTag(out, 22, 2);
    PutVarint(out, f.size());
    out->append(f);
  }
  if (e.has_suppressed()) {
    sub.clear();
    PutUint(&sub, 1, e.suppressed().count());
    PutUint(&sub, 2, e.suppressed().final());
    PutMessage(out, 23, sub);
  }
  // Rare records (audit-file chains, resource and credential events):
  // protobuf's own encoding of the sub-message, in field order.
  PutBytes(out, 24, e.chain());
  if (e.has_chain_start()) PutMessage(out, 25, e.chain_start().SerializeAsString());
  if (e.has_resource()) PutMessage(out, 26, e.resource().SerializeAsString());
  if (e.has_credential()) PutMessage(out, 27, e.credential().SerializeAsString());
  PutUint(out, 28, e.quiet());
  if (e.has_containment()) PutMessage(out, 29, e.containment().SerializeAsString());
  if (e.has_repeats()) PutMessage(out, 30, e.repeats().SerializeAsString());
  PutBytes(out, 31, e.id());
  PutUint(out, 32, e.seq());
  PutBytes(out, 33, e.policy_digest());
  if (e.has_dns()) PutMessage(out, 34, e.dns().SerializeAsString());
  if (sub.capacity() > (1u << 16)) std::string().swap(sub);
}

}  // namespace cordon
