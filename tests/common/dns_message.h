// DNS messages for the resolver's tests, built with ldns (never by hand).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "dns/ldns_include.h"

namespace cordon::test {

// The wire form of `pkt`, which is freed.
inline std::vector<uint8_t> DnsWire(ldns_pkt* pkt) {
  uint8_t* buf = nullptr;
  size_t size = 0;
  EXPECT_EQ(ldns_pkt2wire(&buf, pkt, &size), LDNS_STATUS_OK);
  std::vector<uint8_t> out(buf, buf + size);
  std::free(buf);
  ldns_pkt_free(pkt);
  return out;
}

// A query with RD set; `edns`: with an OPT record offering 1232 bytes.
inline std::vector<uint8_t> DnsQuery(const std::string& name, ldns_rr_type type, uint16_t id, bool edns = false,
                                     ldns_rr_class klass = LDNS_RR_CLASS_IN) {
  ldns_pkt* q = ldns_pkt_query_new(ldns_dname_new_frm_str(name.c_str()), type, klass, LDNS_RD);
  ldns_pkt_set_id(q, id);
  if (edns) ldns_pkt_set_edns_udp_size(q, 1232);
  return DnsWire(q);
}

}  // namespace cordon::test
