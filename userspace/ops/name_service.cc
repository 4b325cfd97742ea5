#include "ops/name_service.h"

#include <arpa/inet.h>
#include <sys/eventfd.h>
#include <sys/random.h>

#include <algorithm>
#include <cstring>

#include "abi/cordon_dns.h"
#include "events/decoder.h"
#include "loader/grants.h"
#include "sys/cgroup.h"
#include "sys/sock_diag.h"
#include "util/clock.h"
#include "util/text.h"

namespace cordon::ops {

namespace {

constexpr int64_t kSecondNs = 1'000'000'000;

cordon::v1::AuditEvent QueryEvent(const dns::QueryDecision& d, int64_t now_ns) {
  cordon::v1::AuditEvent e;
  SetTimestamp(now_ns, e.mutable_time());
  e.set_kind("dns.query");
  e.set_verdict(d.allowed ? "noted" : "denied");
  e.set_enforcement("cordon-dns");
  e.set_reason(EscapeWorkloadBytes(d.reason));
  auto* q = e.mutable_dns();
  q->set_name(EscapeWorkloadBytes(d.name));
  q->set_type(dns::QueryTypeName(d.qtype));
  q->set_addresses(d.addresses);
  return e;
}

void SetRepeats(cordon::v1::AuditEvent* e, uint64_t count, int64_t first_ns, int64_t last_ns) {
  auto* r = e->mutable_repeats();
  r->set_count(count);
  SetTimestamp(first_ns, r->mutable_first());
  SetTimestamp(last_ns, r->mutable_last());
}

// Whether sock_diag reports a socket's cgroup (INET_DIAG_CGROUP_ID, Linux
// 5.9+), found by looking up a UDP socket of our own: 1 yes, 0 no, -1 the
// lookup itself fails (no udp_diag: then no query can be attributed).
int KernelReportsSocketCgroups() {
  UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_storage mine{}, self{};
  auto* in = reinterpret_cast<sockaddr_in*>(&mine);
  in->sin_family = AF_INET;
  in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof mine;
  if (!fd.valid() || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&mine), sizeof(sockaddr_in)) != 0 ||
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&mine), &len) != 0)
    return -1;
  self = mine;
  reinterpret_cast<sockaddr_in*>(&self)->sin_port = htons(53);
  auto found = FindLoopbackPeer(mine, self, IPPROTO_UDP);
  if (!found) return -1;
  return found->cgroup_id != 0 ? 1 : 0;
}

}  // namespace

std::optional<cordon::v1::AuditEvent> WithGrantHost(const cordon::v1::AuditEvent& event) {
  if (!event.has_net() || event.net().name_id() == 0 || !event.net().host().empty()) return std::nullopt;
  auto name = GrantName(event.sandbox_cgroup_id(), event.net().name_id());
  if (!name || name->empty()) return std::nullopt;
  cordon::v1::AuditEvent named = event;
  named.mutable_net()->set_host(*name);
  return named;
}

bool HasNameRules(const policy::CompiledPolicy& policy) {
  for (const auto& rule : policy.rules)
    if (!rule.host.empty()) return true;
  return false;
}

Result<std::vector<policy::DnsUpstream>> NameUpstreams(const policy::CompiledPolicy& policy,
                                                       const std::string& resolv_conf) {
  if (!policy.dns_upstreams.empty()) return policy.dns_upstreams;
  std::vector<policy::DnsUpstream> found = dns::ResolvConfUpstreams(resolv_conf);
  if (found.empty())
    return Error("name rules need an upstream DNS server: spec.network.dns.upstream is empty and " + resolv_conf +
                 " names no nameserver");
  return found;
}

std::vector<cordon::v1::AuditEvent> QueryEvents::Add(const dns::QueryDecision& d, int64_t now_ns, int64_t mono_ns) {
  if (mono_ns < 0) mono_ns = now_ns;
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<cordon::v1::AuditEvent> out;
  if (window_start_ns_ == 0 || mono_ns - window_start_ns_ >= kSecondNs) {
    out = FlushLocked();
    window_start_ns_ = mono_ns;
  }
  const std::string verdict = d.allowed ? "noted" : "denied";
  const std::string key = d.name + '\0' + std::to_string(d.qtype) + '\0' + verdict;
  auto count = [now_ns](Held* h) {
    if (h->more++ == 0) h->first_more_ns = now_ns;
    h->last_ns = now_ns;
  };
  if (auto it = held_.find(key); it != held_.end()) {
    count(&it->second);
  } else if (recorded_[d.allowed] < per_second_) {
    ++recorded_[d.allowed];
    Held& h = held_[key];
    h.first = QueryEvent(d, now_ns);
    out.push_back(h.first);
  } else {
    auto [it2, inserted] = over_.try_emplace(verdict);
    if (inserted) {
      dns::QueryDecision any;
      any.allowed = d.allowed;
      any.reason = "queries for more than " + std::to_string(per_second_) +
                   " names in a second: counted here, not recorded one by one";
      it2->second.first = QueryEvent(any, now_ns);
      it2->second.first.mutable_dns()->clear_type();
    }
    count(&it2->second);
  }
  return out;
}

std::vector<cordon::v1::AuditEvent> QueryEvents::Flush(int64_t now_ns, int64_t mono_ns) {
  if (mono_ns < 0) mono_ns = now_ns;
  std::lock_guard<std::mutex> lock(mu_);
  if (window_start_ns_ != 0 && mono_ns - window_start_ns_ < kSecondNs) return {};
  window_start_ns_ = 0;
  return FlushLocked();
}

std::vector<cordon::v1::AuditEvent> QueryEvents::FlushLocked() {
  std::vector<cordon::v1::AuditEvent> out;
  for (auto* held : {&held_, &over_})
    for (auto& [key, h] : *held) {
      if (h.more == 0) continue;
      cordon::v1::AuditEvent e = h.first;
      SetTimestamp(h.last_ns, e.mutable_time());
      SetRepeats(&e, h.more, h.first_more_ns, h.last_ns);
      out.push_back(std::move(e));
    }
  held_.clear();
  over_.clear();
  recorded_[0] = recorded_[1] = 0;
  return out;
}

Result<std::unique_ptr<NameService>> NameService::Start(uint64_t sandbox_id, const policy::CompiledPolicy& policy) {
  auto upstreams = NameUpstreams(policy);
  if (!upstreams) return upstreams.error();
  std::unique_ptr<NameService> s(new NameService());
  s->sandbox_id_ = sandbox_id;
  s->policy_digest_ = policy.digest;
  s->upstreams_ = std::move(*upstreams);
  s->wake_ = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!s->wake_.valid()) return SysError("DNS resolver: eventfd");
  s->client_ = std::make_unique<dns::SocketUpstreamClient>();
  s->resolver_ = std::make_unique<dns::Resolver>(policy.rules, s->upstreams_, s->client_.get());
  auto mount = FindCgroup2Mount();
  if (!mount) return mount.error().Wrap("DNS resolver");
  s->cgroup_mount_ = *mount;
  s->sandbox_path_ = CgroupPathFromId(*mount, sandbox_id);
  if (s->sandbox_path_.empty())
    return Error{"DNS resolver: no cgroup has id " + std::to_string(sandbox_id) + " (the sandbox is gone)"};
  s->member_ids_.push_back(sandbox_id);
  const int reported = KernelReportsSocketCgroups();
  s->cgroups_reported_ = reported != 0;
  if (reported == 0)
    s->notes_.push_back(
        "this kernel does not report a socket's cgroup to sock_diag: cordon's resolver cannot tell the "
        "sandbox's queries from other local processes' (any local process may ask it for this sandbox's names)");
  if (reported < 0)
    s->notes_.push_back(
        "sock_diag cannot look up UDP sockets here (no udp_diag?): cordon's resolver cannot tell who asks and "
        "answers nobody, so the sandbox's names do not resolve");
  auto accept_peer = [p = s.get()](const sockaddr_storage& peer, const sockaddr_storage& self, int protocol) {
    return p->FromSandbox(peer, self, protocol);
  };
  auto on_grants = [p = s.get()](const std::vector<dns::Grant>& g) { return p->Grant(g); };
  auto on_decision = [p = s.get()](const dns::QueryDecision& d) { p->Decided(d); };
  // IPv4: port 53 of an address of its own in 127.0.0.0/8 (127.53.A.B, A.B
  // random): a privileged port, so that no unprivileged process can take it
  // over should this resolver go while the sandbox lives on (cordon run
  // killed with -9), and one address per sandbox. Else (all taken, or
  // someone holds 0.0.0.0:53) 127.0.0.1 on a port the kernel picks.
  auto v4 = std::make_optional<policy::DnsUpstream>();
  v4->ipv4 = true;
  const uint8_t mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 53, 0, 0};
  std::memcpy(v4->addr.data(), mapped, 16);
  for (int attempt = 0; attempt < 8 && !s->server4_; ++attempt) {
    uint8_t r[2] = {0, 0};
    if (::getrandom(r, sizeof r, 0) != sizeof r) break;
    v4->addr[14] = r[0];
    v4->addr[15] = static_cast<uint8_t>(r[1] ? r[1] : 1);
    v4->port = 53;
    if (auto server =
            dns::Server::Start(*v4, s->resolver_.get(), on_grants, on_decision, accept_peer, CORDON_RESOLVER_MARK))
      s->server4_ = std::move(*server);
  }
  if (!s->server4_) {
    v4->addr[13] = 0, v4->addr[14] = 0, v4->addr[15] = 1;
    v4->port = 0;
    s->notes_.push_back(
        "cordon's resolver listens on an unprivileged port of 127.0.0.1 (port 53 of 127.53.x.y "
        "was not free): should it go while the sandbox lives on, another local process could "
        "take that port and hear the sandbox's queries");
    // Port 0 for both UDP and TCP: the TCP port may be taken; a few tries.
    for (int attempt = 0; attempt < 8 && !s->server4_; ++attempt) {
      auto server =
          dns::Server::Start(*v4, s->resolver_.get(), on_grants, on_decision, accept_peer, CORDON_RESOLVER_MARK);
      if (server)
        s->server4_ = std::move(*server);
      else if (attempt == 7)
        return Error("cordon's DNS resolver cannot listen on 127.0.0.1: " + server.error().ToString());
    }
  }
  auto v6 = std::make_optional<policy::DnsUpstream>();
  v6->port = 0;
  v6->addr[15] = 1;
  // IPv6 loopback may be disabled: the sandbox's IPv6 DNS is then judged by
  // its egress rules, as without a resolver.
  for (int attempt = 0; attempt < 8 && !s->server6_; ++attempt)
    if (auto server =
            dns::Server::Start(*v6, s->resolver_.get(), on_grants, on_decision, accept_peer, CORDON_RESOLVER_MARK))
      s->server6_ = std::move(*server);
  if (!s->server6_)
    s->notes_.push_back(
        "cordon's resolver has no IPv6 listener (::1 unusable): the sandbox's IPv6 DNS is judged by "
        "its egress rules (denied unless a rule allows it) and answers nothing by name");
  ResolverAddress a4;
  std::memcpy(a4.ip.data(), v4->addr.data() + 12, 4);
  a4.port = s->server4_->port();
  s->listen4_ = v4->ToString();
  s->listen4_ = s->listen4_.substr(0, s->listen4_.rfind(':')) + ":" + std::to_string(a4.port);
  std::optional<ResolverAddress> a6;
  if (s->server6_) {
    a6.emplace();
    ::inet_pton(AF_INET6, "::1", a6->ip.data());
    a6->port = s->server6_->port();
  }
  if (!s->server4_->reads_marks())
    s->notes_.push_back(
        "this kernel does not report a datagram's mark (SO_RCVMARK, Linux 5.19+): cordon's resolver cannot "
        "tell the sandbox's UDP queries from another local process's sent from the sandbox's address and port, "
        "and answers them truncated (empty): the sandbox's resolver library asks again over TCP");
  if (Status set = SetResolver(sandbox_id, a4, a6, CORDON_RESOLVER_MARK); !set.ok())
    return Error("the sandbox's DNS cannot be redirected to cordon's resolver: " + set.error().ToString());
  s->ticker_ = std::thread([p = s.get()] { p->Tick(); });
  return s;
}

NameService::~NameService() { Stop(); }

void NameService::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (ticker_.joinable()) ticker_.join();
  NoteUnmarked();
  server4_.reset();  // joins its threads: no decision after this
  server6_.reset();
  Queue(limiter_.Flush(RealNs(), INT64_MAX));
}

uint64_t NameService::queries() const {
  return (server4_ ? server4_->queries() : 0) + (server6_ ? server6_->queries() : 0);
}

// Only the sandbox asks: the socket a query comes from (found with
// sock_diag) must have been made in the sandbox's cgroup or below it. Another
// local process (or another sandbox allowed loopback) that writes to the
// resolver's address is not answered, so it can neither grant anything in
// this sandbox's map nor write dns.query records into its trail. A socket the
// kernel reports without a cgroup (a TCP client that closed at once: its
// TIME_WAIT socket) is refused, unless this kernel reports no socket's cgroup
// (before 5.9: every local process may ask, with a note); a socket gone before
// the lookup (a query sent and the socket closed at once) is not answered.
// Outside cgroups are remembered too (ids are never reused), so a flood from
// one costs a lookup per query, not a path resolution. UDP: the lookup finds
// the socket a reply to the datagram's source would reach, which a local
// process that chooses its source address (IP_PKTINFO) and holds the port of
// a sandbox's connected socket on another loopback address can point at that
// socket. So a UDP query is served only with this check passed and the mark
// the sandbox's egress program puts on it (dns::Server's udp_mark); one
// accepted here without the mark is answered truncated, and the client asks
// again over TCP. The check is still needed for marked queries: the sandbox
// chooses its datagrams' source address too (IP_PKTINFO), and the reply
// goes there (to another local service's socket, which this refuses), and a
// sandbox whose resolver went (cordon run killed) marks its queries to a
// port another sandbox's resolver may hold later.
bool NameService::FromSandbox(const sockaddr_storage& peer, const sockaddr_storage& self, int protocol) {
  auto found = FindLoopbackPeer(peer, self, static_cast<uint8_t>(protocol));
  if (!found) return false;
  if (found->cgroup_id == 0) return !cgroups_reported_;
  std::lock_guard<std::mutex> lock(peers_mu_);
  if (std::find(member_ids_.begin(), member_ids_.end(), found->cgroup_id) != member_ids_.end()) return true;
  if (std::find(outside_ids_.begin(), outside_ids_.end(), found->cgroup_id) != outside_ids_.end()) return false;
  const std::string path = CgroupPathFromId(cgroup_mount_, found->cgroup_id);
  const bool member = !path.empty() && path.compare(0, sandbox_path_.size() + 1, sandbox_path_ + "/") == 0;
  auto& ids = member ? member_ids_ : outside_ids_;
  if (!path.empty() && ids.size() < 1024) ids.push_back(found->cgroup_id);
  return member;
}

bool NameService::Grant(const std::vector<dns::Grant>& grants) {
  bool all = true;
  for (const dns::Grant& g : grants) {
    NameGrant ng;
    ng.family = g.family;
    ng.address = g.addr;
    ng.ports = g.ports;
    ng.tcp = g.tcp;
    ng.udp = g.udp;
    ng.rule_index = g.rule;
    ng.name = g.name;
    ng.ttl_seconds = g.ttl;
    ng.grace_seconds = dns::kGrantGraceSeconds;
    ng.policy_digest = policy_digest_;
    if (Status granted = GrantAddress(sandbox_id_, ng); !granted.ok()) {
      all = false;
      static std::atomic<int> logged{0};
      if (logged.fetch_add(1) < 10)
        std::fprintf(stderr, "cordon: DNS resolver: %s not granted to the sandbox: %s\n", g.AddressText().c_str(),
                     granted.error().ToString().c_str());
    }
  }
  return all;
}

void NameService::Decided(const dns::QueryDecision& d) { Queue(limiter_.Add(d, RealNs(), MonoNs())); }

void NameService::Queue(std::vector<cordon::v1::AuditEvent> events) {
  if (events.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& e : events) events_.push_back(std::move(e));
  }
  const uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof one);
}

std::vector<cordon::v1::AuditEvent> NameService::TakeEvents() {
  uint64_t n = 0;
  (void)!::read(wake_.get(), &n, sizeof n);
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<cordon::v1::AuditEvent> out;
  out.swap(events_);
  return out;
}

// Once per resolver, on stderr (cordon run's, the agent's log): UDP queries
// from the sandbox's sockets came without the mark its egress program puts on
// them, and were answered truncated.
void NameService::NoteUnmarked() {
  if (unmarked_noted_ || !server4_ || !server4_->reads_marks()) return;
  const uint64_t truncated = server4_->truncated() + (server6_ ? server6_->truncated() : 0);
  if (truncated == 0) return;
  unmarked_noted_ = true;
  std::fprintf(stderr,
               "cordon: DNS resolver of sandbox %llu: %llu UDP quer%s from the sandbox's address and port came "
               "without cordon's mark and got an empty truncated answer (its client asks again over TCP). "
               "Another local process may have sent %s from the sandbox's address (IP_PKTINFO), or a host "
               "firewall rule rewrites marks on loopback (e.g. CONNMARK --restore-mark in PREROUTING), or the "
               "sandbox was attached by an earlier cordon (a policy update loads its current programs)\n",
               static_cast<unsigned long long>(sandbox_id_), static_cast<unsigned long long>(truncated),
               truncated == 1 ? "y" : "ies", truncated == 1 ? "it" : "them");
}

void NameService::Tick() {
  int64_t last_expiry = MonoNs();
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(250));
    if (stop_) break;
    lock.unlock();
    Queue(limiter_.Flush(RealNs(), MonoNs()));
    NoteUnmarked();
    if (MonoNs() - last_expiry >= std::chrono::duration_cast<std::chrono::nanoseconds>(kGrantExpiryInterval).count()) {
      last_expiry = MonoNs();
      (void)ExpireGrants(sandbox_id_, static_cast<uint64_t>(NowNs(CLOCK_BOOTTIME)));
    }
    lock.lock();
  }
}

}  // namespace cordon::ops
