// The per-sandbox counters map (per-CPU; indices CORDON_CNT_* in abi/cordon_common.h).
#pragma once

#include <array>
#include <cstdint>

#include "abi/cordon_common.h"
#include "util/result.h"

namespace cordon {

// Sums a per-CPU counters map over the possible CPUs.
Result<std::array<uint64_t, CORDON_CNT_MAX>> ReadCounters(int counters_fd);

}  // namespace cordon
