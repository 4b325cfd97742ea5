/* SPDX-License-Identifier: Apache-2.0 */
/*
 * socket() for AF_INET/AF_INET6 (the only families this hook sees): denies
 * the family when the policy omits it, raw sockets, and every protocol other
 * than TCP and UDP unless the policy lists it in extraProtocols.
 */
#include "lib/common.bpf.h"

#define IPPROTO_ICMP 1
#define IPPROTO_TCP 6
#define IPPROTO_UDP 17
#define IPPROTO_ICMPV6 58
#define IPPROTO_SCTP 132
#define IPPROTO_UDPLITE 136
#define IPPROTO_MPTCP 262

/* Returns the cordon_sock_proto bit this socket needs, or -1 if plain TCP/UDP
 * (always allowed within an allowed family), or -2 if nothing can allow it. */
static __always_inline int cordon_needed_sock_proto(__u32 type, __u32 protocol)
{
	if (type == SOCK_RAW)
		return CORDON_SP_RAW;
	switch (protocol) {
	case IPPROTO_TCP:
		return type == SOCK_STREAM ? -1 : -2;
	case IPPROTO_UDP:
		return type == SOCK_DGRAM ? -1 : -2;
	case IPPROTO_ICMP:
		return CORDON_SP_ICMP;
	case IPPROTO_ICMPV6:
		return CORDON_SP_ICMPV6;
	case IPPROTO_SCTP:
		return CORDON_SP_SCTP;
	case IPPROTO_MPTCP:
		return CORDON_SP_MPTCP;
	case IPPROTO_UDPLITE:
		return CORDON_SP_UDPLITE;
	}
	return -2;
}

SEC("cgroup/sock_create")
int cordon_sock_create(struct bpf_sock *ctx)
{
	const struct cordon_sandbox_cfg *cfg = cordon_cfg();
	if (!cfg)
		return 0;

	__u32 family = ctx->family;
	__u32 type = ctx->type;
	__u32 protocol = ctx->protocol;
	__u8 reason = 0;

	int family_bit = family == AF_INET ? CORDON_FAM_INET : family == AF_INET6 ? CORDON_FAM_INET6 : -1;
	if (family_bit < 0)
		return 1; /* not an inet family: not this hook's to judge */
	if (cordon_contained())
		return cordon_refuse_contained_net(cfg, CORDON_EV_NET_SOCKET, CORDON_CNT_DENIED_SOCKET, NULL, 0, family,
						   type, protocol);
	if (!(cfg->families & (1u << family_bit))) {
		reason = CORDON_REASON_FAMILY;
	} else {
		int needed = cordon_needed_sock_proto(type, protocol);
		if (needed == -1)
			return 1;
		if (needed >= 0 && (cfg->sock_protos & (1u << needed)))
			return 1;
		reason = CORDON_REASON_SOCK_KIND;
	}

	int audit = cfg->mode == CORDON_MODE_AUDIT;
	cordon_count(audit ? CORDON_CNT_AUDITED_SOCKET : CORDON_CNT_DENIED_SOCKET);
	if (!audit)
		cordon_violation(cfg, CORDON_EV_NET_SOCKET);
	struct cordon_net_event ev;
	struct cordon_net_event *e = cordon_event_begin(
		&ev, cfg, CORDON_EV_NET_SOCKET, audit ? CORDON_VERDICT_AUDITED : CORDON_VERDICT_DENIED, reason);
	if (e) {
		e->family = family;
		e->sock_type = type;
		e->protocol = protocol;
		cordon_event_submit(e);
	}
	return audit ? 1 : 0;
}
