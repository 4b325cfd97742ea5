/* SPDX-License-Identifier: Apache-2.0 */
/*
 * connect(): TCP connections, connected UDP, and TCP Fast Open (the kernel
 * runs the connect hook for sendto(MSG_FASTOPEN) before the SYN leaves).
 */
#include "lib/egress_match.bpf.h"

static __always_inline void cordon_v4_mapped(__u32 ip4_be, __u8 out[16])
{
	__builtin_memset(out, 0, 10);
	out[10] = 0xff;
	out[11] = 0xff;
	__builtin_memcpy(out + 12, &ip4_be, 4);
}

SEC("cgroup/connect4")
int cordon_connect4(struct bpf_sock_addr *ctx)
{
	__u8 addr[16];
	cordon_v4_mapped(ctx->user_ip4, addr);
	return cordon_sock_addr_decide(ctx, addr, AF_INET, CORDON_EV_NET_CONNECT,
				       CORDON_CNT_ALLOWED_CONNECT, CORDON_CNT_DENIED_CONNECT,
				       CORDON_CNT_AUDITED_CONNECT);
}

SEC("cgroup/connect6")
int cordon_connect6(struct bpf_sock_addr *ctx)
{
	__u32 addr[4];
	/* Each 32-bit word is read separately: the ctx only allows aligned
	 * 4-byte loads of user_ip6. ::ffff:a.b.c.d lands in the same trie
	 * slot as a.b.c.d, so mapped destinations obey the IPv4 rules. */
	addr[0] = ctx->user_ip6[0];
	addr[1] = ctx->user_ip6[1];
	addr[2] = ctx->user_ip6[2];
	addr[3] = ctx->user_ip6[3];
	return cordon_sock_addr_decide(ctx, (const __u8 *)addr, AF_INET6, CORDON_EV_NET_CONNECT,
				       CORDON_CNT_ALLOWED_CONNECT, CORDON_CNT_DENIED_CONNECT,
				       CORDON_CNT_AUDITED_CONNECT);
}
