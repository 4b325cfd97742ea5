/* SPDX-License-Identifier: Apache-2.0 */
/*
 * DNS redirection's way back (bpf/abi/cordon_dns.h): connect4/6 and
 * sendmsg4/6 send the sandbox's DNS to its resolver; a reply read with
 * recvfrom()/recvmsg() (UDP, connected or not), and getpeername() of a
 * redirected socket, show the address the workload named instead of the
 * resolver's. These hooks cannot refuse: they always return 1.
 */
#include "lib/egress_match.bpf.h"

SEC("cgroup/recvmsg4")
int cordon_recvmsg4(struct bpf_sock_addr *ctx)
{
	cordon_dns_restore(ctx, AF_INET);
	return 1;
}

SEC("cgroup/recvmsg6")
int cordon_recvmsg6(struct bpf_sock_addr *ctx)
{
	cordon_dns_restore(ctx, AF_INET6);
	return 1;
}

SEC("cgroup/getpeername4")
int cordon_getpeername4(struct bpf_sock_addr *ctx)
{
	cordon_dns_restore(ctx, AF_INET);
	return 1;
}

SEC("cgroup/getpeername6")
int cordon_getpeername6(struct bpf_sock_addr *ctx)
{
	cordon_dns_restore(ctx, AF_INET6);
	return 1;
}
