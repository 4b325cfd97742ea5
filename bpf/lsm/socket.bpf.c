/* SPDX-License-Identifier: Apache-2.0 */
/*
 * socket() for every address family (the cgroup sock_create hook sees only
 * inet ones), and connections to unix sockets: a pathname socket counts as
 * write access to its path, so /run/docker.sock and other host daemons are
 * out of reach unless a rule allows them; abstract sockets need
 * network.abstractUnix.
 */
#include "lib/lsm_common.bpf.h"

#define AF_UNIX 1
#define AF_INET 2
#define AF_INET6 10
#define AF_NETLINK 16
#define AF_PACKET 17
#define AF_VSOCK 40

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
	return cordon_lsm_report(sb, CORDON_EV_NET_SOCKET, CORDON_REASON_FAMILY, 0, 0, 0, NULL, NULL, 0, family,
				 ((__u32)type << 16) | (protocol & 0xffff), CORDON_CNT_DENIED_LSM_NET,
				 CORDON_CNT_AUDITED_LSM_NET);
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
