// sock_diag over libnl: dumping inet sockets of a network namespace and
// destroying one (SOCK_DESTROY), for the retroactive check; and finding the
// socket at the other end of a loopback exchange (who asks).
#pragma once

#include <linux/inet_diag.h>
#include <sys/socket.h>

#include <optional>

#include <cstdint>
#include <string>
#include <vector>

#include "util/result.h"

struct nl_msg;
struct nl_sock;
struct nlmsgerr;
struct sockaddr_nl;

namespace cordon {

// One dumped socket.
struct DiagSocket {
  uint8_t family = 0;
  uint8_t protocol = 0;
  uint8_t state = 0;
  inet_diag_sockid id{};  // as dumped: ports in network order, cookie included
  uint32_t inode = 0;
};

// One NETLINK_SOCK_DIAG socket, in one network namespace.
class DiagChannel {
 public:
  DiagChannel() = default;
  ~DiagChannel();
  DiagChannel(const DiagChannel&) = delete;
  DiagChannel& operator=(const DiagChannel&) = delete;

  // Connects in the network namespace of `ns_path` (empty: ours). The socket
  // belongs to the namespace it was created in, so only creation happens on a
  // helper thread that joined that namespace.
  Status Open(const std::string& ns_path);

  // Every socket of (family, protocol) in every state. An unsupported
  // protocol (no diag handler: ENOENT) yields no sockets when `optional`.
  Status Dump(uint8_t family, uint8_t protocol, bool optional, std::vector<DiagSocket>* out);

  // SOCK_DESTROY of exactly this socket (id and cookie). Returns 0 or the
  // kernel's errno (ENOENT: no such socket any more).
  int Destroy(const DiagSocket& s, std::string* local_error);

 private:
  static int OnDiag(nl_msg* msg, void* arg);
  static int Ignore(nl_msg*, void*);
  static int OnError(sockaddr_nl*, nlmsgerr* e, void* arg);

  nl_sock* sk_ = nullptr;
  std::vector<DiagSocket>* dump_ = nullptr;
  uint8_t dump_protocol_ = 0;  // inet_diag_msg does not carry it
  int kernel_errno_ = 0;
};

// The socket at the other end of a loopback exchange of ours: `peer` is its
// address (the sender of a datagram, or the other end of a TCP connection),
// `self` ours, both in our network namespace; protocol IPPROTO_TCP or
// IPPROTO_UDP. An exact sock_diag lookup (the kernel's own socket lookup, the
// one a datagram or segment to `peer` would take). nullopt: no such socket
// (gone, or not in our namespace) or no answer within 200 ms.
struct LoopbackPeer {
  uint32_t uid = 0;
  uint64_t cgroup_id = 0;  // the cgroup2 id of the cgroup that made the socket (0: not reported)
};
std::optional<LoopbackPeer> FindLoopbackPeer(const sockaddr_storage& peer, const sockaddr_storage& self,
                                             uint8_t protocol);

}  // namespace cordon
