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

	int audit = cfg->mode == CORDON_MODE_AUDIT;
	cordon_count(audit ? audited_counter : denied_counter);
	if (!audit)
		cordon_violation(cfg, kind);
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
		cordon_event_submit(e);
	}
	return audit ? 1 : 0;
}

#endif
