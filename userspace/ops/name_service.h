// Egress by name put in force for one sandbox (README "Egress by name"):
// cordon's resolver (dns/) listening on loopback, the sandbox's DNS
// redirected to it (loader/grants.h SetResolver), the addresses it answers
// granted to that sandbox only (GrantAddress) before the reply leaves,
// expired grants removed, and its dns.query events, rate-limited. Whoever
// keeps the sandbox runs one (cordon run, for its own sandbox) for as long
// as the sandbox lives; when it stops, the sandbox's DNS goes to a closed
// port (refused, fail closed) and the grants run out.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dns/resolver.h"
#include "dns/server.h"
#include "event.pb.h"
#include "policy/compiler.h"
#include "util/fd.h"
#include "util/result.h"

namespace cordon::ops {

// dns.query records one a second for each name, type and verdict (the others
// counted in a repeats record at the end of the second), and at most this
// many names a second for each verdict (the rest counted in one record a
// second): refused names cannot crowd answered ones out of the trail.
constexpr uint32_t kQueryEventsPerSecond = 20;
// How often expired grants are removed from the kernel's map.
constexpr std::chrono::seconds kGrantExpiryInterval{5};

// A net.* record of a name rule's address (net.nameId set, net.host not):
// a copy with net.host, the name from its sandbox's name table; nullopt
// otherwise (or when the table no longer has the name). For every reader of
// a sandbox's records (cordon run, the agent).
std::optional<cordon::v1::AuditEvent> WithGrantHost(const cordon::v1::AuditEvent& event);

// Whether the policy has name rules (spec.network.egress[].host).
bool HasNameRules(const policy::CompiledPolicy& policy);

// The upstreams a policy's resolver asks: spec.network.dns.upstream, or the
// nameservers of `resolv_conf`; an error naming both when there are none.
Result<std::vector<policy::DnsUpstream>> NameUpstreams(const policy::CompiledPolicy& policy,
                                                       const std::string& resolv_conf = "/etc/resolv.conf");

// The dns.query records of one resolver (thread-safe): Add() per decision,
// Flush() at the end of each second (and at the end).
class QueryEvents {
 public:
  explicit QueryEvents(uint32_t per_second = kQueryEventsPerSecond) : per_second_(per_second) {}
  // `now_ns`: CLOCK_REALTIME, the records' times; `mono_ns`: CLOCK_MONOTONIC,
  // the seconds' windows (a clock step does not stall them); both default to
  // now_ns. Returns the records to deliver now.
  std::vector<cordon::v1::AuditEvent> Add(const dns::QueryDecision& d, int64_t now_ns, int64_t mono_ns = -1);
  std::vector<cordon::v1::AuditEvent> Flush(int64_t now_ns, int64_t mono_ns = -1);

 private:
  struct Held {
    cordon::v1::AuditEvent first;  // as recorded
    uint64_t more = 0;             // the same again since
    int64_t first_more_ns = 0, last_ns = 0;
  };
  std::vector<cordon::v1::AuditEvent> FlushLocked();
  std::mutex mu_;
  uint32_t per_second_;
  int64_t window_start_ns_ = 0;
  uint32_t recorded_[2] = {0, 0};  // names recorded this second: refused, answered
  std::map<std::string, Held> held_;
  std::map<std::string, Held> over_;  // by verdict: names over per_second_
};

class NameService {
 public:
  // Starts the resolver for the sandbox (cgroup id `sandbox_id`) with the
  // policy's name rules, and redirects the sandbox's DNS to it.
  static Result<std::unique_ptr<NameService>> Start(uint64_t sandbox_id, const policy::CompiledPolicy& policy);
  ~NameService();  // Stop()
  NameService(const NameService&) = delete;
  NameService& operator=(const NameService&) = delete;

  // Readable when events are waiting (an eventfd).
  int fd() const { return wake_.get(); }
  // The dns.query events (and notes of grants that failed) since the last call.
  std::vector<cordon::v1::AuditEvent> TakeEvents();
  // Stops serving (the redirection stays: the sandbox's DNS is then refused);
  // what the last second held is then in TakeEvents().
  void Stop();

  uint16_t port4() const { return server4_ ? server4_->port() : 0; }
  const std::string& listen4() const { return listen4_; }  // "127.53.A.B:53"
  const std::vector<std::string>& notes() const { return notes_; }
  uint16_t port6() const { return server6_ ? server6_->port() : 0; }
  const std::vector<policy::DnsUpstream>& upstreams() const { return upstreams_; }
  uint64_t queries() const;

 private:
  NameService() = default;
  bool Grant(const std::vector<dns::Grant>& grants);
  bool FromSandbox(const sockaddr_storage& peer, const sockaddr_storage& self, int protocol);
  void Decided(const dns::QueryDecision& d);
  void Queue(std::vector<cordon::v1::AuditEvent> events);
  void Tick();
  void NoteUnmarked();

  uint64_t sandbox_id_ = 0;
  std::string policy_digest_;  // grants are refused once it is no longer in force
  std::string cgroup_mount_, sandbox_path_;  // the sandbox's cgroup below the cgroup2 mount
  std::mutex peers_mu_;
  std::vector<uint64_t> member_ids_;   // cgroups found below the sandbox's (it, and its descendants)
  std::vector<uint64_t> outside_ids_;  // cgroups found outside it
  bool cgroups_reported_ = true;       // sock_diag reports a socket's cgroup
  bool unmarked_noted_ = false;        // NoteUnmarked() wrote its line (the ticker; Stop() after joining it)
  std::string listen4_;
  std::vector<std::string> notes_;
  std::vector<policy::DnsUpstream> upstreams_;
  std::unique_ptr<dns::SocketUpstreamClient> client_;
  std::unique_ptr<dns::Resolver> resolver_;
  std::unique_ptr<dns::Server> server4_, server6_;
  QueryEvents limiter_;
  UniqueFd wake_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<cordon::v1::AuditEvent> events_;
  std::thread ticker_;
};

}  // namespace cordon::ops
