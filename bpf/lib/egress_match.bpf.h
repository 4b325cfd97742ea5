/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The egress matcher: two LPM lookups, constant cost whatever the number of
 * rules (see bpf/abi/cordon_net.h for why the longest match alone decides).
 */
#ifndef CORDON_BPF_EGRESS_MATCH_H
#define CORDON_BPF_EGRESS_MATCH_H

#include "lib/common.bpf.h"
#include "lib/egress_rules.bpf.h"
#include <bpf/bpf_endian.h>

/* The egress rules (addr_rules/port_rules). */
static __always_inline int cordon_egress_allowed(const __u8 addr[16], __u16 port, __u8 proto,
						 __u32 *rule, __u8 *reason)
{
	return cordon_rules_allowed(&addr_rules, &port_rules, addr, port, proto, rule, reason);
}

/* IPv4 destinations this instance allowed, remembered so that the next
 * connect or datagram to one costs one array read instead of two trie walks
 * (the trie's nodes are cold between a program's connects). Safe to keep for
 * the instance's life: its rule maps are written once, before it is attached,
 * and a new policy is a new instance with an empty cache. Direct-mapped; each
 * slot is one 64-bit word holding the whole (address, port, protocol) and a
 * valid bit, so racing writers can only replace a whole entry by another.
 * Denials are never cached: each must be reported anyway. */
static __always_inline __u64 cordon_allow_word(const __u8 addr[16], __u16 port, __u8 proto)
{
	__u32 ip4;
	__builtin_memcpy(&ip4, addr + 12, 4);
	return (1ULL << 63) | ((__u64)proto << 48) | ((__u64)port << 32) | ip4;
}

static __always_inline __u32 cordon_allow_slot(__u64 word)
{
	return (__u32)((word * 0x9E3779B97F4A7C15ULL) >> 56) & (CORDON_ALLOW_CACHE_SLOTS - 1);
}

/* The destination of a sock_addr hook as the 16-byte key form. */
static __always_inline void cordon_dest_v4(struct bpf_sock_addr *ctx, __u8 out[16])
{
	__u32 ip4_be = ctx->user_ip4;
	__builtin_memset(out, 0, 10);
	out[10] = 0xff;
	out[11] = 0xff;
	__builtin_memcpy(out + 12, &ip4_be, 4);
}

static __always_inline void cordon_dest_v6(struct bpf_sock_addr *ctx, __u32 out[4])
{
	/* Each 32-bit word is read separately: the ctx only allows aligned
	 * 4-byte loads of user_ip6. ::ffff:a.b.c.d lands in the same trie
	 * slot as a.b.c.d, so mapped destinations obey the IPv4 rules. */
	out[0] = ctx->user_ip6[0];
	out[1] = ctx->user_ip6[1];
	out[2] = ctx->user_ip6[2];
	out[3] = ctx->user_ip6[3];
}

/* Whether a live grant of a name rule (bpf/abi/cordon_dns.h) allows the
 * destination: asked only once the CIDR rules denied. Otherwise, when the
 * address was granted at all, *rule and *name_id name a grant that would
 * have allowed it: a live one whose port or protocol differ (*reason PORT),
 * else (the CIDR rules named no rule) an expired one. */
static __always_inline int cordon_grant_allowed(const __u8 addr[16], __u16 port, __u8 proto, __u32 *rule,
						__u32 *name_id, __u8 *reason)
{
	struct cordon_grant_key key;
	__builtin_memcpy(key.addr, addr, 16);
	const struct cordon_grant_value *v = bpf_map_lookup_elem(&grants, &key);
	if (!v)
		return 0;
	__u8 bit = proto == IPPROTO_TCP ? CORDON_GRANT_TCP : proto == IPPROTO_UDP ? CORDON_GRANT_UDP : 0;
	__u64 now = bpf_ktime_get_boot_ns();
	int live = 0;
#pragma unroll
	for (int i = 0; i < CORDON_GRANT_SLOTS; i++) {
		const struct cordon_grant_slot *s = &v->slots[i];
		__u64 expires = s->expires_boot_ns;
		if (!expires)
			continue;
		if (expires <= now) {
			if (!live && !*rule) {
				*rule = s->rule;
				*name_id = s->name_id;
			}
			continue;
		}
		int port_ok = s->nranges == 0;
#pragma unroll
		for (int j = 0; j < CORDON_GRANT_PORT_RANGES; j++) {
			if (j < s->nranges && port >= s->ranges[j].first && port <= s->ranges[j].last)
				port_ok = 1;
		}
		if (port_ok && (s->protocols & bit)) {
			*rule = s->rule;
			*name_id = s->name_id;
			return 1;
		}
		live = 1;
		*rule = s->rule;
		*name_id = s->name_id;
		*reason = CORDON_REASON_PORT;
	}
	return 0;
}

/* DNS redirection (bpf/abi/cordon_dns.h): a TCP or UDP destination on port
 * 53 goes to the sandbox's resolver, if one is set for its family. Returns 1
 * when the destination was rewritten (the caller then allows it). The
 * destination the workload named is kept in the socket's storage for the
 * recvmsg and getpeername programs. `family` is a constant at each call. */
static __always_inline int cordon_dns_redirect(struct bpf_sock_addr *ctx, const __u8 addr[16], __u16 family, __u8 proto,
					       int need_origin)
{
	if (proto != IPPROTO_TCP && proto != IPPROTO_UDP)
		return 0;
	__u32 zero = 0;
	const struct cordon_resolver *r = bpf_map_lookup_elem(&resolver, &zero);
	if (!r)
		return 0;
	/* An IPv4-mapped destination of an IPv6 socket is IPv4 DNS: it goes to
	 * the IPv4 resolver, mapped (the socket may be bound to a mapped address). */
	int v4 =
		family == AF_INET || (addr[10] == 0xff && addr[11] == 0xff && !addr[0] && !addr[1] && !addr[2] &&
				      !addr[3] && !addr[4] && !addr[5] && !addr[6] && !addr[7] && !addr[8] && !addr[9]);
	if (!(r->flags & (v4 ? CORDON_RESOLVER_F_V4 : CORDON_RESOLVER_F_V6)))
		return 0;
	struct cordon_dns_origin *o = bpf_sk_storage_get(&dns_origin, ctx->sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	/* A diversion (need_origin) is judged again by cgroup_skb/egress through
	 * the origin: without room for it (the socket's option memory full), none. */
	if (!o && need_origin)
		return 0;
	if (o) {
		o->family = family;
		o->port = (__u16)ctx->user_port;
		if (family == AF_INET) {
			o->ip[0] = ctx->user_ip4;
		} else {
			o->ip[0] = ctx->user_ip6[0];
			o->ip[1] = ctx->user_ip6[1];
			o->ip[2] = ctx->user_ip6[2];
			o->ip[3] = ctx->user_ip6[3];
		}
	}
	if (family == AF_INET) {
		ctx->user_ip4 = r->ip4;
		ctx->user_port = r->port4;
	} else if (v4) {
		ctx->user_ip6[3] = r->ip4; /* the ::ffff: prefix stays */
		ctx->user_port = r->port4;
	} else {
		ctx->user_ip6[0] = r->ip6[0];
		ctx->user_ip6[1] = r->ip6[1];
		ctx->user_ip6[2] = r->ip6[2];
		ctx->user_ip6[3] = r->ip6[3];
		ctx->user_port = r->port6;
	}
	return 1;
}

/* recvmsg4/6 and getpeername4/6 of a redirected socket: an address that is
 * the resolver's is shown as the destination the workload named. An IPv6
 * socket's datagram to a mapped address passes sendmsg4 (the kernel hands it
 * to UDP over IPv4 first), so its origin may be an IPv4 one: shown mapped. */
static __always_inline void cordon_dns_restore(struct bpf_sock_addr *ctx, __u16 family)
{
	struct cordon_dns_origin *o = bpf_sk_storage_get(&dns_origin, ctx->sk, 0, 0);
	if (!o)
		return;
	__u32 zero = 0;
	const struct cordon_resolver *r = bpf_map_lookup_elem(&resolver, &zero);
	if (!r)
		return;
	__u16 port = (__u16)ctx->user_port;
	if (family == AF_INET) {
		if (o->family != AF_INET || !(r->flags & CORDON_RESOLVER_F_V4) || ctx->user_ip4 != r->ip4 ||
		    port != r->port4)
			return;
		ctx->user_ip4 = o->ip[0];
		ctx->user_port = o->port;
		return;
	}
	__u32 w0 = ctx->user_ip6[0], w1 = ctx->user_ip6[1], w2 = ctx->user_ip6[2], w3 = ctx->user_ip6[3];
	int from_v4 = (r->flags & CORDON_RESOLVER_F_V4) && !w0 && !w1 && w2 == bpf_htonl(0xffff) && w3 == r->ip4 &&
		      port == r->port4;
	int from_v6 = (r->flags & CORDON_RESOLVER_F_V6) && w0 == r->ip6[0] && w1 == r->ip6[1] && w2 == r->ip6[2] &&
		      w3 == r->ip6[3] && port == r->port6;
	if (from_v4 && o->family == AF_INET) {
		ctx->user_ip6[0] = 0;
		ctx->user_ip6[1] = 0;
		ctx->user_ip6[2] = bpf_htonl(0xffff);
		ctx->user_ip6[3] = o->ip[0];
	} else if ((from_v4 || from_v6) && o->family == AF_INET6) {
		ctx->user_ip6[0] = o->ip[0];
		ctx->user_ip6[1] = o->ip[1];
		ctx->user_ip6[2] = o->ip[2];
		ctx->user_ip6[3] = o->ip[3];
	} else {
		return;
	}
	ctx->user_port = o->port;
}

/* Decides a connect()/sendmsg() on a sock_addr hook and reports denials.
 * Returns the hook's verdict: 1 let it through, 0 refuse with EPERM. */
static __always_inline int cordon_sock_addr_decide(struct bpf_sock_addr *ctx, const __u8 addr[16],
						   __u16 family, __u16 kind, __u32 allowed_counter,
						   __u32 denied_counter, __u32 audited_counter)
{
	const struct cordon_sandbox_cfg *cfg = cordon_cfg();
	if (!cfg)
		return 0; /* unreachable: array map; fail closed */

	__u16 port = bpf_ntohs((__u16)ctx->user_port);
	__u32 protocol = ctx->protocol;
	__u8 proto = cordon_rule_proto(protocol);
	if (cordon_contained())
		return cordon_refuse_contained_net(cfg, kind, denied_counter, addr, port, family, ctx->type, protocol);
	/* DNS goes to the sandbox's resolver whatever the rules say (one
	 * compare on every other destination's path). */
	if (port == CORDON_DNS_PORT && cordon_dns_redirect(ctx, addr, family, proto, 0))
		return 1;
	__u64 *cached = NULL;
	__u64 word = 0;
	if (family == AF_INET) {
		word = cordon_allow_word(addr, port, proto);
		__u32 slot = cordon_allow_slot(word);
		cached = bpf_map_lookup_elem(&allow_cache, &slot);
		if (cached && *cached == word) {
			cordon_count(allowed_counter);
			return 1;
		}
	}
	__u32 rule = 0;
	__u8 reason = 0;
	if (cordon_egress_allowed(addr, port, proto, &rule, &reason)) {
		if (cached)
			*cached = word;
		cordon_count(allowed_counter);
		return 1;
	}
	/* Addresses cordon's resolver answered for a name rule: never cached
	 * (they expire). */
	__u32 name_id = 0;
	if (cordon_grant_allowed(addr, port, proto, &rule, &name_id, &reason)) {
		cordon_count(allowed_counter);
		return 1;
	}

	int audit = cfg->mode == CORDON_MODE_AUDIT;
	cordon_count(audit ? audited_counter : denied_counter);
	if (!audit)
		cordon_violation(cfg, kind);
	/* UDP to a destination the policy denies goes to the sandbox's resolver
	 * instead, where it has one (a refusal all the same: recorded and
	 * counted as one). So DNS aimed at any address and port is answered by
	 * the name rules; cgroup_skb/egress drops a diverted datagram that is
	 * not a DNS query, and its send() fails with EPERM as a refused one
	 * does. TCP is not diverted: a connect carries no payload to tell DNS
	 * by. */
	int diverted = 0;
	if (!audit && protocol == IPPROTO_UDP && cordon_dns_redirect(ctx, addr, family, proto, 1)) {
		diverted = 1;
		reason = CORDON_REASON_DNS_DIVERTED;
	}
	struct cordon_net_event ev;
	struct cordon_net_event *e = cordon_event_begin(
		&ev, cfg, kind, audit ? CORDON_VERDICT_AUDITED : CORDON_VERDICT_DENIED, reason);
	if (e) {
		__builtin_memcpy(e->addr, addr, 16);
		e->port = port;
		e->family = family;
		e->sock_type = ctx->type;
		e->protocol = protocol;
		e->hdr.rule = rule;
		e->hdr.name_id = name_id;
		cordon_event_submit(e);
	}
	return audit || diverted ? 1 : 0;
}

#endif
