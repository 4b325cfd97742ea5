// Writing many entries into a BPF map: BPF_MAP_UPDATE_BATCH (Linux 5.6+;
// hash maps, arrays and LPM tries take it) where the kernel has it, one
// bpf_map_update_elem per entry otherwise. A 100,000-prefix trie is filled in
// one system call instead of 100,000.
#pragma once

#include <bpf/bpf.h>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "util/result.h"

namespace cordon {

// Writes n entries (keys and values each contiguous) into the map, replacing
// existing keys (BPF_ANY). `what` names the map in errors ("write <what>").
inline Status UpdateMapEntries(int map_fd, const void* keys, size_t key_size, const void* values, size_t value_size,
                               size_t n, const std::string& what) {
  if (n == 0) return {};
  __u32 count = static_cast<__u32>(n);
  LIBBPF_OPTS(bpf_map_batch_opts, opts, .elem_flags = BPF_ANY);
  if (bpf_map_update_batch(map_fd, keys, values, &count, &opts) == 0) return {};
  // Without batch support (a kernel that does not know the command leaves
  // `count` as it was), or to learn which entry the kernel refuses: one at a
  // time, from the start (rewriting an entry is harmless).
  const auto* k = static_cast<const unsigned char*>(keys);
  const auto* v = static_cast<const unsigned char*>(values);
  for (size_t i = 0; i < n; ++i) {
    if (bpf_map_update_elem(map_fd, k + i * key_size, v + i * value_size, BPF_ANY)) return SysError("write " + what);
  }
  return {};
}

template <typename K, typename V>
Status UpdateMapEntries(int map_fd, const std::vector<std::pair<K, V>>& entries, const std::string& what) {
  std::vector<K> keys;
  std::vector<V> values;
  keys.reserve(entries.size());
  values.reserve(entries.size());
  for (const auto& [key, value] : entries) {
    keys.push_back(key);
    values.push_back(value);
  }
  return UpdateMapEntries(map_fd, keys.data(), sizeof(K), values.data(), sizeof(V), entries.size(), what);
}

}  // namespace cordon
