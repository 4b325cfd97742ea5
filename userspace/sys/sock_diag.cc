#include "sys/sock_diag.h"

#include <fcntl.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
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

}  // namespace cordon
