/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sendto()/sendmsg()/sendmmsg() with a destination address on UDP sockets:
 * egress that never calls connect(). (Connected UDP sends carry no address
 * and were judged at connect().)
 */
#include "lib/egress_match.bpf.h"

SEC("cgroup/sendmsg4")
int cordon_sendmsg4(struct bpf_sock_addr *ctx)
{
	__u8 addr[16];
	cordon_dest_v4(ctx, addr);
	return cordon_sock_addr_decide(ctx, addr, AF_INET, CORDON_EV_NET_SENDMSG,
				       CORDON_CNT_ALLOWED_SENDMSG, CORDON_CNT_DENIED_SENDMSG,
				       CORDON_CNT_AUDITED_SENDMSG);
}

SEC("cgroup/sendmsg6")
int cordon_sendmsg6(struct bpf_sock_addr *ctx)
{
	__u32 addr[4];
	cordon_dest_v6(ctx, addr);
	return cordon_sock_addr_decide(ctx, (const __u8 *)addr, AF_INET6, CORDON_EV_NET_SENDMSG,
				       CORDON_CNT_ALLOWED_SENDMSG, CORDON_CNT_DENIED_SENDMSG,
				       CORDON_CNT_AUDITED_SENDMSG);
}
