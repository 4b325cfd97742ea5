/* SPDX-License-Identifier: Apache-2.0 */
/*
 * socket() for every address family (the cgroup sock_create hook sees only
 * inet ones), and connections to unix sockets: a pathname socket counts as
 * write access to its path, so /run/docker.sock and other host daemons are
 * out of reach unless a rule allows them; abstract sockets need
 * network.abstractUnix. And inet sockets created outside the sandbox
 * (inherited before attach, received over SCM_RIGHTS): the cgroup connect
 * and sendmsg programs judge a socket by the cgroup that created it, so such
 * a socket is judged here, by the calling task's sandbox's egress rules.
 */
#include "lib/lsm_common.bpf.h"
#include "lib/egress_rules.bpf.h"
#include <bpf/bpf_endian.h>

#define AF_UNIX 1
#define AF_INET 2
#define AF_INET6 10
#define AF_NETLINK 16
#define AF_PACKET 17
#define AF_VSOCK 40
#define AF_UNSPEC 0
#define SOCK_STREAM 1
#define SOCK_DGRAM 2
#define CORDON_MAY_WRITE 0x2
#define CORDON_MAY_APPEND 0x8
#define CORDON_S_IFMT_SOCK 00170000
#define CORDON_S_IFSOCK 0140000

static __always_inline int cordon_family_bit(int family)
{
	switch (family) {
	case AF_UNIX: return CORDON_FAM_UNIX;
	case AF_INET: return CORDON_FAM_INET;
	case AF_INET6: return CORDON_FAM_INET6;
	case AF_NETLINK: return CORDON_FAM_NETLINK;
	case AF_PACKET: return CORDON_FAM_PACKET;
	case AF_VSOCK: return CORDON_FAM_VSOCK;
	}
	return CORDON_FAM_OTHER;
}

SEC("lsm/socket_create")
int BPF_PROG(cordon_socket_create, int family, int type, int protocol, int kern)
{
	if (kern)
		return 0;
	const struct cordon_lsm_sandbox *sb = cordon_current_sandbox();
	if (!sb)
		return 0;
	if (sb->families & (1u << cordon_family_bit(family)))
		return 0;
	return cordon_lsm_emit_net(sb, cordon_lsm_verdict(sb), CORDON_EV_NET_SOCKET, CORDON_REASON_FAMILY, 0, NULL, 0,
				   family, type, protocol, CORDON_CNT_DENIED_LSM_NET, CORDON_CNT_AUDITED_LSM_NET);
}

static __always_inline int cordon_unix_peer(struct sock *other)
{
	const struct cordon_lsm_sandbox *sb = cordon_current_sandbox();
	if (!sb || !other)
		return 0;
	struct unix_sock *peer = (struct unix_sock *)((void *)other - bpf_core_field_offset(struct unix_sock, sk));
	struct dentry *dentry = BPF_CORE_READ(peer, path.dentry);
	if (dentry && !(sb->flags & CORDON_LSM_F_FILES))
		return 0; /* no file rules: socket paths are not restricted either */
	if (dentry)
		return cordon_check_path(sb, CORDON_EV_NET_UNIX, dentry, BPF_CORE_READ(peer, path.mnt), CORDON_FILE_WRITE);
	struct unix_address *addr = BPF_CORE_READ(peer, addr);
	if (!addr)
		return 0; /* unnamed (socketpair) */
	char first = 0;
	bpf_probe_read_kernel(&first, 1, &addr->name[0].sun_path[0]);
	if (first != 0 || (sb->flags & CORDON_LSM_F_ABSTRACT_UNIX))
		return 0;
	return cordon_lsm_report(sb, CORDON_EV_NET_UNIX, CORDON_REASON_ABSTRACT_UNIX, CORDON_FILE_WRITE, 0, 0, NULL,
				 NULL, 0, 0, 0, CORDON_CNT_DENIED_LSM_NET, CORDON_CNT_AUDITED_LSM_NET);
}

SEC("lsm/unix_stream_connect")
int BPF_PROG(cordon_unix_stream_connect, struct sock *sock, struct sock *other, struct sock *newsk)
{
	return cordon_unix_peer(other);
}

SEC("lsm/unix_may_send")
int BPF_PROG(cordon_unix_may_send, struct socket *sock, struct socket *other)
{
	return cordon_unix_peer(BPF_CORE_READ(other, sk));
}

/* ---- inet sockets created outside the sandbox ------------------------- */

CORDON_LSM_EGRESS_MAPS();

/* A destination as the egress matcher takes it. */
struct cordon_dest {
	__u8 addr[16]; /* IPv6, or ::ffff:a.b.c.d */
	__u16 port;    /* host order */
	__u16 family;  /* as the caller gave it */
};

#define CORDON_DEST_NONE 0  /* nothing to judge (AF_UNSPEC: disconnect, or no address) */
#define CORDON_DEST_OK 1
#define CORDON_DEST_BAD 2   /* a form this layer does not read: refused */

static __always_inline void cordon_dest_mapped(struct cordon_dest *d, __u32 ip4_be)
{
	__builtin_memset(d->addr, 0, 10);
	d->addr[10] = 0xff;
	d->addr[11] = 0xff;
	__builtin_memcpy(d->addr + 12, &ip4_be, 4);
}

/* Reads a sockaddr the kernel copied in (connect's address, sendmsg's
 * msg_name) the way the inet protocols do: AF_INET6 only on an inet6 socket
 * (with at least the RFC 2133 length), AF_INET on either (inet6 UDP sends and
 * connects to it as IPv4), AF_UNSPEC per `unspec_v4`: udp_sendmsg reads it as
 * IPv4 on an inet socket; connect() disconnects, and udpv6_sendmsg ignores it. */
static __always_inline int cordon_read_dest(const void *uaddr, int len, __u16 sock_family, int unspec_v4,
					    struct cordon_dest *d)
{
	__u16 family = 0;
	if (!uaddr || len < (int)sizeof(family))
		return CORDON_DEST_BAD;
	if (bpf_probe_read_kernel(&family, sizeof(family), uaddr))
		return CORDON_DEST_BAD;
	d->family = family;
	if (family == AF_INET6) {
		struct sockaddr_in6 sa6;
		if (sock_family != AF_INET6 || len < 24 || bpf_probe_read_kernel(&sa6, 24, uaddr))
			return CORDON_DEST_BAD;
		__builtin_memcpy(d->addr, &sa6.sin6_addr, 16);
		d->port = bpf_ntohs(sa6.sin6_port);
		return CORDON_DEST_OK;
	}
	if (family == AF_INET || (family == AF_UNSPEC && unspec_v4)) {
		struct sockaddr_in sa;
		if (len < (int)sizeof(sa) || bpf_probe_read_kernel(&sa, sizeof(sa), uaddr))
			return CORDON_DEST_BAD;
		cordon_dest_mapped(d, sa.sin_addr.s_addr);
		d->port = bpf_ntohs(sa.sin_port);
		return CORDON_DEST_OK;
	}
	return family == AF_UNSPEC ? CORDON_DEST_NONE : CORDON_DEST_BAD;
}

/* The peer of a connected (or connecting) socket; NONE when it has none. */
static __always_inline int cordon_peer_dest(struct sock *sk, __u16 sock_family, struct cordon_dest *d)
{
	__u16 dport = BPF_CORE_READ(sk, __sk_common.skc_dport);
	if (!dport)
		return CORDON_DEST_NONE;
	d->port = bpf_ntohs(dport);
	d->family = sock_family;
	if (sock_family == AF_INET6)
		BPF_CORE_READ_INTO(&d->addr, sk, __sk_common.skc_v6_daddr);
	else
		cordon_dest_mapped(d, BPF_CORE_READ(sk, __sk_common.skc_daddr));
	return CORDON_DEST_OK;
}

/* The calling task's sandbox, if it is using an inet socket that was created
 * outside that sandbox's subtree; NULL otherwise (the common case, fast: a
 * task outside every sandbox, a unix socket, a kernel socket, or a socket the
 * sandbox's own cgroup programs judge). */
static __always_inline const struct cordon_lsm_sandbox *cordon_foreign_inet(struct socket *sock, struct sock **out,
									    __u16 *family)
{
	struct sock *sk = BPF_CORE_READ(sock, sk);
	if (!sk)
		return NULL;
	__u16 fam = BPF_CORE_READ(sk, __sk_common.skc_family);
	if (fam != AF_INET && fam != AF_INET6)
		return NULL;
	/* In-kernel users (NFS, iSCSI ...) have no file: their sockets are the
	 * kernel's, whatever task's context they send from. */
	if (!BPF_CORE_READ(sock, file))
		return NULL;
	const struct cordon_lsm_sandbox *sb = cordon_current_sandbox();
	if (!sb)
		return NULL;
	if (cordon_cgroup_in_sandbox(BPF_CORE_READ(sk, sk_cgrp_data.cgroup), sb))
		return NULL; /* created inside: the cgroup programs judged it */
	*out = sk;
	*family = fam;
	return sb;
}

/* Judges a destination of a foreign socket by the sandbox's egress rules and
 * reports a refusal. Returns the hook's verdict. */
static __always_inline int cordon_foreign_decide(const struct cordon_lsm_sandbox *sb, struct sock *sk,
						 const struct cordon_dest *d, int dest, __u16 kind,
						 __u32 allowed_counter, __u32 denied_counter, __u32 audited_counter)
{
	__u16 type = BPF_CORE_READ(sk, sk_type);
	__u16 protocol = BPF_CORE_READ(sk, sk_protocol);
	__u32 rule = 0;
	int allowed = 0;
	/* Only TCP and UDP sockets are judged by destination: a raw socket's
	 * packets carry whatever header the caller writes. */
	if (dest == CORDON_DEST_OK && (type == SOCK_STREAM || type == SOCK_DGRAM)) {
		struct cordon_lsm_net_key key = { .sandbox_id = sb->sandbox_id, .version = sb->version };
		void *addr_map = bpf_map_lookup_elem(&sandbox_egress_addr, &key);
		void *port_map = bpf_map_lookup_elem(&sandbox_egress_port, &key);
		if (!addr_map || !port_map) {
			/* A replacement switched the version (and deleted the old
			 * pair) between the lookups: the entry as it is now. */
			__u64 id = sb->sandbox_id;
			const struct cordon_lsm_sandbox *now = bpf_map_lookup_elem(&lsm_sandboxes, &id);
			if (now) {
				key.version = now->version;
				addr_map = bpf_map_lookup_elem(&sandbox_egress_addr, &key);
				port_map = bpf_map_lookup_elem(&sandbox_egress_port, &key);
			}
		}
		__u8 why = 0;
		/* No tries registered (a cordon without them attached this
		 * sandbox): nothing is allowed, as for a policy without rules. */
		if (addr_map && port_map)
			allowed = cordon_rules_allowed(addr_map, port_map, d->addr, d->port, cordon_rule_proto(protocol),
						       &rule, &why);
	}
	if (allowed) {
		cordon_lsm_count(sb->sandbox_id, allowed_counter);
		return 0;
	}

	return cordon_lsm_emit_net(sb, cordon_lsm_verdict(sb), kind, CORDON_REASON_FOREIGN_SOCKET, rule, d->addr, d->port, d->family,
				   type, protocol, denied_counter, audited_counter);
}

SEC("lsm/socket_connect")
int BPF_PROG(cordon_socket_connect, struct socket *sock, struct sockaddr *address, int addrlen)
{
	struct sock *sk = NULL;
	__u16 family = 0;
	const struct cordon_lsm_sandbox *sb = cordon_foreign_inet(sock, &sk, &family);
	if (!sb)
		return 0;
	struct cordon_dest d = {};
	int dest = cordon_read_dest(address, addrlen, family, 0, &d);
	if (dest == CORDON_DEST_NONE)
		return 0; /* AF_UNSPEC: dissolves the association, reaches no one */
	return cordon_foreign_decide(sb, sk, &d, dest, CORDON_EV_NET_CONNECT, CORDON_CNT_ALLOWED_CONNECT,
				     CORDON_CNT_DENIED_CONNECT, CORDON_CNT_AUDITED_CONNECT);
}

/* Every send: send, sendto, sendmsg, sendmmsg, write, io_uring, and (6.5+)
 * splice and sendfile. A stream socket sends to its peer (sendmsg's address
 * is read only when it is not connected: TCP Fast Open); a datagram socket to
 * msg_name when given, else to its peer. */
SEC("lsm/socket_sendmsg")
int BPF_PROG(cordon_socket_sendmsg, struct socket *sock, struct msghdr *msg, int size)
{
	struct sock *sk = NULL;
	__u16 family = 0;
	const struct cordon_lsm_sandbox *sb = cordon_foreign_inet(sock, &sk, &family);
	if (!sb)
		return 0;
	struct cordon_dest d = {};
	int dest = CORDON_DEST_NONE;
	void *name = BPF_CORE_READ(msg, msg_name);
	int namelen = BPF_CORE_READ(msg, msg_namelen);
	if (!name)
		namelen = 0;
	if (BPF_CORE_READ(sk, sk_type) == SOCK_STREAM) {
		dest = cordon_peer_dest(sk, family, &d);
		if (dest == CORDON_DEST_NONE && namelen)
			dest = cordon_read_dest(name, namelen, family, family == AF_INET, &d);
	} else {
		if (namelen)
			dest = cordon_read_dest(name, namelen, family, family == AF_INET, &d);
		if (dest == CORDON_DEST_NONE)
			dest = cordon_peer_dest(sk, family, &d);
	}
	/* Nothing to send to (the protocol refuses the send), except on a
	 * socket kind that is never judged by destination: refused anyway. */
	__u16 type = BPF_CORE_READ(sk, sk_type);
	if (dest == CORDON_DEST_NONE && (type == SOCK_STREAM || type == SOCK_DGRAM))
		return 0;
	return cordon_foreign_decide(sb, sk, &d, dest, CORDON_EV_NET_SENDMSG, CORDON_CNT_ALLOWED_SENDMSG,
				     CORDON_CNT_DENIED_SENDMSG, CORDON_CNT_AUDITED_SENDMSG);
}

/* Kernels before 6.5 move splice() and sendfile() data into a socket through
 * sendpage, which passes no socket_sendmsg; both check write permission on
 * the file first (rw_verify_area), so here the peer of a connected socket
 * from outside is judged as a send to it. The loader loads this only where
 * sendpage exists (kernel_sendpage in the kernel's BTF): later kernels send
 * them through sock_sendmsg, judged above. */
SEC("lsm/file_permission")
int BPF_PROG(cordon_socket_file_write, struct file *file, int mask)
{
	if (!(mask & (CORDON_MAY_WRITE | CORDON_MAY_APPEND)))
		return 0;
	struct inode *inode = file->f_inode;
	if (!inode || (inode->i_mode & CORDON_S_IFMT_SOCK) != CORDON_S_IFSOCK)
		return 0;
	struct socket *sock = BPF_CORE_READ(file, private_data);
	struct sock *sk = NULL;
	__u16 family = 0;
	const struct cordon_lsm_sandbox *sb = cordon_foreign_inet(sock, &sk, &family);
	if (!sb)
		return 0;
	struct cordon_dest d = {};
	int dest = cordon_peer_dest(sk, family, &d);
	__u16 type = BPF_CORE_READ(sk, sk_type);
	if (dest == CORDON_DEST_NONE && (type == SOCK_STREAM || type == SOCK_DGRAM))
		return 0; /* not connected: nowhere to write to */
	return cordon_foreign_decide(sb, sk, &d, dest, CORDON_EV_NET_SENDMSG, CORDON_CNT_ALLOWED_SENDMSG,
				     CORDON_CNT_DENIED_SENDMSG, CORDON_CNT_AUDITED_SENDMSG);
}
