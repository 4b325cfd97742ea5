// libFuzzer target: cordon's DNS resolver (userspace/dns/resolver.cc) given
// any client message and any upstream reply. Input: 2 bytes (big endian) the
// client message's length, the message, then the upstream's reply. The fake
// upstream gives the reply the forwarded query's ID and question when it
// parses (so the answer filter is reached), else returns it as is. Must
// never crash, hang or leak; a reply, when there is one, carries the client's
// ID, and a UDP reply fits the client's payload.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "dns/ldns_include.h"

#include "dns/resolver.h"
#include "policy/compiler.h"
#include "policy/parser.h"

namespace {

class FakeUpstream : public cordon::dns::UpstreamClient {
 public:
  std::vector<uint8_t> reply;
  cordon::Result<std::vector<uint8_t>> Exchange(const cordon::policy::DnsUpstream&, std::span<const uint8_t> query,
                                                cordon::dns::Transport) override {
    ldns_pkt* sent = nullptr;
    ldns_pkt* got = nullptr;
    std::vector<uint8_t> out = reply;
    if (ldns_wire2pkt(&sent, query.data(), query.size()) == LDNS_STATUS_OK &&
        ldns_wire2pkt(&got, reply.data(), reply.size()) == LDNS_STATUS_OK) {
      ldns_pkt_set_id(got, ldns_pkt_id(sent));
      ldns_pkt_set_qr(got, true);
      ldns_rr_list_deep_free(ldns_pkt_question(got));
      ldns_pkt_set_question(got, ldns_rr_list_clone(ldns_pkt_question(sent)));
      ldns_pkt_set_qdcount(got, ldns_pkt_qdcount(sent));
      uint8_t* buf = nullptr;
      size_t size = 0;
      if (ldns_pkt2wire(&buf, got, &size) == LDNS_STATUS_OK) out.assign(buf, buf + size);
      std::free(buf);
    }
    ldns_pkt_free(sent);
    ldns_pkt_free(got);
    return out;
  }
};

std::vector<cordon::policy::CompiledRule> Rules() {
  cordon::policy::ParsedPolicy parsed;
  cordon::policy::Diagnostics diags;
  cordon::policy::CompiledPolicy compiled;
  const char* text =
      "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: f}\nspec:\n  network:\n    egress:\n"
      "      - host: a.test\n        ports: [443]\n      - host: \"*.w.test\"\n"
      "      - host: p.test\n        allowPrivate: true\n";
  if (!cordon::policy::ParsePolicyText(text, "f.yaml", &parsed, &diags) ||
      !cordon::policy::Compile(parsed, &compiled, &diags))
    std::abort();
  return compiled.rules;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<cordon::policy::CompiledRule> rules = Rules();
  if (size < 2) return 0;
  const size_t length = std::min<size_t>(static_cast<size_t>(data[0] << 8 | data[1]), size - 2);
  const std::span<const uint8_t> query(data + 2, length);
  FakeUpstream upstream;
  upstream.reply.assign(data + 2 + length, data + size);
  std::string error;
  const cordon::dns::Resolver resolver(rules, {*cordon::policy::ParseDnsUpstream("127.0.0.1", &error)}, &upstream);
  for (auto transport : {cordon::dns::Transport::kUdp, cordon::dns::Transport::kTcp}) {
    const cordon::dns::Answer answer = resolver.Handle(query, transport);
    if (answer.reply.empty()) continue;
    if (answer.reply.size() < 12 || answer.reply[0] != query[0] || answer.reply[1] != query[1]) std::abort();
    if (transport == cordon::dns::Transport::kUdp && answer.reply.size() > 65535) std::abort();
    if (answer.grants.size() > 3 * cordon::dns::kMaxAddressesPerName) std::abort();
  }
  return 0;
}
