#include "sys/sock_diag.h"

#include <fcntl.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>
#include <sched.h>
#include <unistd.h>

#include <sys/time.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "util/fd.h"

namespace cordon {

namespace {

std::string ProtoText(uint8_t protocol) {
  if (protocol == IPPROTO_TCP) return "tcp";
  if (protocol == IPPROTO_UDP) return "udp";
  return protocol == IPPROTO_UDPLITE ? "udplite" : std::to_string(protocol);
}
std::string FamilyText(uint8_t family) { return family == AF_INET ? "inet" : "inet6"; }

}  // namespace

DiagChannel::~DiagChannel() {
  if (sk_) nl_socket_free(sk_);
}

Status DiagChannel::Open(const std::string& ns_path) {
  sk_ = nl_socket_alloc();
  if (!sk_) return Error{"sock_diag: allocate a netlink socket"};
  int rc = 0;
  if (ns_path.empty()) {
    rc = nl_connect(sk_, NETLINK_SOCK_DIAG);
  } else {
    UniqueFd ns(::open(ns_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!ns.valid()) return SysError("sock_diag: open " + ns_path);
    int setns_errno = 0;
    std::thread t([&] {
      if (::setns(ns.get(), CLONE_NEWNET) != 0) {
        setns_errno = errno;
        return;
      }
      rc = nl_connect(sk_, NETLINK_SOCK_DIAG);
    });
    t.join();
    if (setns_errno) return SysError("sock_diag: enter the network namespace " + ns_path, setns_errno);
  }
  if (rc < 0) return Error{std::string("sock_diag: connect a NETLINK_SOCK_DIAG socket: ") + nl_geterror(rc)};
  nl_socket_enable_msg_peek(sk_);  // dump messages may exceed a page
  nl_socket_disable_auto_ack(sk_);
  nl_socket_modify_err_cb(sk_, NL_CB_CUSTOM, &DiagChannel::OnError, this);
  return {};
}

Status DiagChannel::Dump(uint8_t family, uint8_t protocol, bool optional, std::vector<DiagSocket>* out) {
  const std::string what = "sock_diag: dump " + ProtoText(protocol) + " sockets (" + FamilyText(family) + ")";
  for (int attempt = 0;; ++attempt) {
    std::vector<DiagSocket> got;
    nl_msg* msg = nlmsg_alloc_simple(SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP);
    if (!msg) return Error{what + ": allocate a message"};
    inet_diag_req_v2 req{};
    req.sdiag_family = family;
    req.sdiag_protocol = protocol;
    req.idiag_states = ~0u;
    int rc = nlmsg_append(msg, &req, sizeof req, NLMSG_ALIGNTO);
    if (rc >= 0) rc = nl_send_auto(sk_, msg);
    nlmsg_free(msg);
    if (rc < 0) return Error{what + ": send: " + nl_geterror(rc)};
    dump_ = &got;
    dump_protocol_ = protocol;
    kernel_errno_ = 0;
    nl_socket_modify_cb(sk_, NL_CB_VALID, NL_CB_CUSTOM, &DiagChannel::OnDiag, this);
    rc = nl_recvmsgs_default(sk_);
    dump_ = nullptr;
    if (rc == -NLE_DUMP_INTR && attempt < 4) continue;  // the tables changed under the dump: again
    if (rc < 0) {
      int e = kernel_errno_;
      if (optional && (e == ENOENT || e == EINVAL || e == EOPNOTSUPP || e == EPROTONOSUPPORT)) return {};
      if (e) return SysError(what, e);
      return Error{what + ": " + nl_geterror(rc)};
    }
    out->insert(out->end(), got.begin(), got.end());
    return {};
  }
}

int DiagChannel::Destroy(const DiagSocket& s, std::string* local_error) {
  nl_msg* msg = nlmsg_alloc_simple(SOCK_DESTROY, NLM_F_REQUEST | NLM_F_ACK);
  if (!msg) {
    *local_error = "allocate a message";
    return ENOMEM;
  }
  inet_diag_req_v2 req{};
  req.sdiag_family = s.family;
  req.sdiag_protocol = s.protocol;
  req.idiag_states = ~0u;
  req.id = s.id;
  int rc = nlmsg_append(msg, &req, sizeof req, NLMSG_ALIGNTO);
  if (rc >= 0) rc = nl_send_auto(sk_, msg);
  nlmsg_free(msg);
  if (rc < 0) {
    *local_error = std::string("send: ") + nl_geterror(rc);
    return EIO;
  }
  kernel_errno_ = 0;
  nl_socket_modify_cb(sk_, NL_CB_VALID, NL_CB_CUSTOM, &DiagChannel::Ignore, this);
  rc = nl_recvmsgs_default(sk_);  // up to the acknowledgement
  if (kernel_errno_) return kernel_errno_;
  if (rc < 0) {
    *local_error = std::string("receive the acknowledgement: ") + nl_geterror(rc);
    return EIO;
  }
  return 0;
}

int DiagChannel::OnDiag(nl_msg* msg, void* arg) {
  auto* self = static_cast<DiagChannel*>(arg);
  nlmsghdr* h = nlmsg_hdr(msg);
  if (!self->dump_ || h->nlmsg_type != SOCK_DIAG_BY_FAMILY || h->nlmsg_len < NLMSG_LENGTH(sizeof(inet_diag_msg)))
    return NL_SKIP;
  const auto* m = static_cast<const inet_diag_msg*>(nlmsg_data(h));
  DiagSocket s;
  s.family = m->idiag_family;
  s.state = m->idiag_state;
  s.id = m->id;
  s.inode = m->idiag_inode;
  s.protocol = self->dump_protocol_;
  self->dump_->push_back(s);
  return NL_OK;
}

int DiagChannel::OnError(sockaddr_nl*, nlmsgerr* e, void* arg) {
  static_cast<DiagChannel*>(arg)->kernel_errno_ = -e->error;
  return NL_STOP;
}

int DiagChannel::Ignore(nl_msg*, void*) { return NL_OK; }

std::optional<LoopbackPeer> FindLoopbackPeer(const sockaddr_storage& peer, const sockaddr_storage& self,
                                             uint8_t protocol) {
  if (peer.ss_family != self.ss_family || (protocol != IPPROTO_TCP && protocol != IPPROTO_UDP)) return std::nullopt;
  struct {
    nlmsghdr nlh;
    inet_diag_req_v2 req;
  } msg = {};
  msg.nlh.nlmsg_len = sizeof msg;
  msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  msg.nlh.nlmsg_flags = NLM_F_REQUEST;
  msg.req.sdiag_family = static_cast<uint8_t>(peer.ss_family);
  msg.req.sdiag_protocol = protocol;
  msg.req.idiag_states = ~0u;
  msg.req.id.idiag_cookie[0] = msg.req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  // TCP looks up the socket whose local end is id.src; UDP (its "src and dst
  // are swapped for historical reasons") the one whose local end is id.dst.
  const sockaddr_storage& local = protocol == IPPROTO_TCP ? peer : self;
  const sockaddr_storage& remote = protocol == IPPROTO_TCP ? self : peer;
  if (peer.ss_family == AF_INET) {
    const auto* l = reinterpret_cast<const sockaddr_in*>(&local);
    const auto* r = reinterpret_cast<const sockaddr_in*>(&remote);
    msg.req.id.idiag_sport = l->sin_port;
    msg.req.id.idiag_dport = r->sin_port;
    std::memcpy(msg.req.id.idiag_src, &l->sin_addr, 4);
    std::memcpy(msg.req.id.idiag_dst, &r->sin_addr, 4);
  } else if (peer.ss_family == AF_INET6) {
    const auto* l = reinterpret_cast<const sockaddr_in6*>(&local);
    const auto* r = reinterpret_cast<const sockaddr_in6*>(&remote);
    msg.req.id.idiag_sport = l->sin6_port;
    msg.req.id.idiag_dport = r->sin6_port;
    std::memcpy(msg.req.id.idiag_src, &l->sin6_addr, 16);
    std::memcpy(msg.req.id.idiag_dst, &r->sin6_addr, 16);
  } else {
    return std::nullopt;
  }
  UniqueFd nl(::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
  if (!nl.valid()) return std::nullopt;
  struct timeval tv = {0, 200000};  // the kernel answers at once; never wait long
  (void)::setsockopt(nl.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_nl kernel = {};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(nl.get(), &msg, sizeof msg, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) !=
      static_cast<ssize_t>(sizeof msg))
    return std::nullopt;
  alignas(nlmsghdr) char buf[8192];
  ssize_t n = ::recv(nl.get(), buf, sizeof buf, 0);
  for (auto* h = reinterpret_cast<nlmsghdr*>(buf); n > 0 && NLMSG_OK(h, static_cast<size_t>(n)); h = NLMSG_NEXT(h, n)) {
    if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY || h->nlmsg_len < NLMSG_LENGTH(sizeof(inet_diag_msg))) break;
    const auto* d = reinterpret_cast<const inet_diag_msg*>(NLMSG_DATA(h));
    LoopbackPeer out;
    out.uid = d->idiag_uid;
    int left = static_cast<int>(h->nlmsg_len - NLMSG_LENGTH(sizeof(inet_diag_msg)));
    for (auto* a = reinterpret_cast<rtattr*>(const_cast<inet_diag_msg*>(d) + 1); RTA_OK(a, left); a = RTA_NEXT(a, left))
      if (a->rta_type == INET_DIAG_CGROUP_ID && RTA_PAYLOAD(a) >= sizeof(uint64_t))
        std::memcpy(&out.cgroup_id, RTA_DATA(a), sizeof(uint64_t));
    return out;
  }
  return std::nullopt;
}

}  // namespace cordon
