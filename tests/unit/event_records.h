// Ring-buffer records as the BPF programs write them (bpf/abi/cordon_event.h),
// for the decoder's tests: a header naming its layout and writer, then the
// payload of that layout.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "abi/cordon_event.h"

namespace cordon::testing {

inline cordon_event_header RecordHeader(uint16_t kind, uint8_t reason, uint8_t layout, uint8_t layer) {
  cordon_event_header h = {};
  h.kind = kind;
  h.verdict = CORDON_VERDICT_DENIED;
  h.reason = reason;
  h.layout = layout;
  h.layer = layer;
  h.sandbox_id = 42;
  h.cgroup_id = 42;
  return h;
}

// net.connect / net.sendmsg / net.socket / net.bind of an address.
inline cordon_net_event NetRecord(uint16_t kind, uint8_t reason, uint8_t layer = CORDON_LAYER_CGROUP) {
  cordon_net_event e = {};
  e.hdr = RecordHeader(kind, reason, CORDON_EVL_NET, layer);
  e.hdr.size = sizeof e;
  return e;
}

// Any other kind: the payload, then the path.
struct ObjectRecord {
  cordon_object_event fe;
  char path[64];

  const void* data() const { return this; }
  size_t size() const { return fe.hdr.size; }
};

inline ObjectRecord MakeObjectRecord(uint16_t kind, uint8_t reason, std::string_view path = {},
                                     uint8_t layer = CORDON_LAYER_LSM) {
  ObjectRecord r = {};
  r.fe.hdr = RecordHeader(kind, reason, CORDON_EVL_OBJECT, layer);
  const size_t n = path.size() < sizeof r.path ? path.size() : sizeof r.path;
  if (n) std::memcpy(r.path, path.data(), n);
  r.fe.path_len = static_cast<uint32_t>(n);
  r.fe.hdr.size = static_cast<uint32_t>(sizeof r.fe + n);
  return r;
}

// The bytes of a record, to keep records of both layouts in one sequence.
template <typename Record>
std::vector<char> Bytes(const Record& r, size_t size = sizeof(Record)) {
  const char* p = reinterpret_cast<const char*>(&r);
  return std::vector<char>(p, p + size);
}

}  // namespace cordon::testing
