/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The egress matcher over a given pair of rule tries (addr_rules, port_rules
 * of bpf/abi/cordon_net.h): used by the per-sandbox network programs with
 * their own maps (egress_match.bpf.h) and by the host-wide BPF LSM object
 * with the sandbox's maps found through map-in-map (bpf/lsm/socket.bpf.c).
 * Needs nothing but the map pointers, so it declares no maps.
 */
#ifndef CORDON_BPF_EGRESS_RULES_H
#define CORDON_BPF_EGRESS_RULES_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "abi/cordon_event.h"
#include "abi/cordon_net.h"

#define IPPROTO_TCP 6
#define IPPROTO_UDP 17
#define IPPROTO_UDPLITE 136
#define IPPROTO_MPTCP 262

/* Egress rules speak of tcp and udp; MPTCP is TCP on the wire and UDP-Lite
 * is UDP's sibling, so they are judged by those rules. Anything else matches
 * no port rule and is denied. */
static __always_inline __u8 cordon_rule_proto(__u32 protocol)
{
	if (protocol == IPPROTO_MPTCP)
		return IPPROTO_TCP;
	if (protocol == IPPROTO_UDPLITE)
		return IPPROTO_UDP;
	return protocol > 255 ? 255 : (__u8)protocol;
}

/* Returns 1 if allowed. On denial *reason says why; *rule names the rule that
 * matched the address (0 if none). */
static __always_inline int cordon_rules_allowed(void *addr_map, void *port_map, const __u8 addr[16], __u16 port,
						__u8 proto, __u32 *rule, __u8 *reason)
{
	struct cordon_addr_key key = { .prefixlen = CORDON_ADDR_MAX_PREFIX };
	__builtin_memcpy(key.addr, addr, 16);
	struct cordon_addr_value *av = bpf_map_lookup_elem(addr_map, &key);
	if (!av) {
		*rule = 0;
		*reason = CORDON_REASON_NO_RULE;
		return 0;
	}
	*rule = av->rule;
	if (av->port_set == CORDON_PORT_SET_ALL) {
		/* Rules speak of tcp and udp only; anything else is refused. */
		if (proto == IPPROTO_TCP || proto == IPPROTO_UDP)
			return 1;
		*reason = CORDON_REASON_PORT;
		return 0;
	}

	struct cordon_port_key pkey = { .prefixlen = CORDON_PORT_KEY_BITS };
	pkey.port_set[0] = av->port_set >> 24;
	pkey.port_set[1] = av->port_set >> 16;
	pkey.port_set[2] = av->port_set >> 8;
	pkey.port_set[3] = av->port_set;
	pkey.proto = proto;
	pkey.port[0] = port >> 8;
	pkey.port[1] = port & 0xff;
	struct cordon_port_value *pv = bpf_map_lookup_elem(port_map, &pkey);
	if (!pv) {
		*reason = CORDON_REASON_PORT;
		return 0;
	}
	*rule = pv->rule;
	return 1;
}

#endif
