// Clocks in nanoseconds: one helper for every layer.
#pragma once

#include <time.h>

#include <cstdint>

namespace cordon {

inline int64_t NowNs(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}
inline int64_t MonoNs() { return NowNs(CLOCK_MONOTONIC); }
inline int64_t MonoMs() { return MonoNs() / 1000000; }
inline int64_t RealNs() { return NowNs(CLOCK_REALTIME); }

}  // namespace cordon
