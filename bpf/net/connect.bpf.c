/* SPDX-License-Identifier: Apache-2.0 */
/*
 * connect(): TCP connections, connected UDP, and TCP Fast Open (the kernel
 * runs the connect hook for sendto(MSG_FASTOPEN) before the SYN leaves).
 */
#include "lib/egress_match.bpf.h"

SEC("cgroup/connect4")
int cordon_connect4(struct bpf_sock_addr *ctx)
{
	__u8 addr[16];
	cordon_dest_v4(ctx, addr);
	return cordon_sock_addr_decide(ctx, addr, AF_INET, CORDON_EV_NET_CONNECT,
				       CORDON_CNT_ALLOWED_CONNECT, CORDON_CNT_DENIED_CONNECT,
				       CORDON_CNT_AUDITED_CONNECT);
}

SEC("cgroup/connect6")
int cordon_connect6(struct bpf_sock_addr *ctx)
{
	__u32 addr[4];
	cordon_dest_v6(ctx, addr);
	return cordon_sock_addr_decide(ctx, (const __u8 *)addr, AF_INET6, CORDON_EV_NET_CONNECT,
				       CORDON_CNT_ALLOWED_CONNECT, CORDON_CNT_DENIED_CONNECT,
				       CORDON_CNT_AUDITED_CONNECT);
}
