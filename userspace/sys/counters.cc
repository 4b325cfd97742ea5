#include "sys/counters.h"

#include <vector>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

namespace cordon {

Result<std::array<uint64_t, CORDON_CNT_MAX>> ReadCounters(int counters_fd) {
  int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) return Error{"count possible CPUs", -ncpu};
  std::array<uint64_t, CORDON_CNT_MAX> sums{};
  std::vector<uint64_t> per_cpu(static_cast<size_t>(ncpu));
  for (uint32_t i = 0; i < CORDON_CNT_MAX; ++i) {
    if (bpf_map_lookup_elem(counters_fd, &i, per_cpu.data())) return SysError("read counters");
    for (uint64_t v : per_cpu) sums[i] += v;
  }
  return sums;
}

}  // namespace cordon
