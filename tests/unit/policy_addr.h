// Addresses for the policy unit tests, as the compiler stores them (IPv4 as
// ::ffff:a.b.c.d).
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdint>

#include "policy/cidr.h"

namespace cordon::policy::test {

using Addr = std::array<uint8_t, 16>;

inline Addr V4(const char* text) {
  uint8_t raw[4];
  EXPECT_EQ(inet_pton(AF_INET, text, raw), 1) << text;
  return ToMapped(raw, 4);
}

inline Addr V6(const char* text) {
  Addr out{};
  EXPECT_EQ(inet_pton(AF_INET6, text, out.data()), 1) << text;
  return out;
}

}  // namespace cordon::policy::test
