/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Egress by name, the kernel side (README "Egress by name: the kernel side").
 *
 * grants: the addresses cordon's resolver answered for a name rule of the
 * sandbox, each allowed for the answer's TTL on that rule's ports and
 * protocols. One per network instance (a policy map): a policy replacement
 * starts with none, so nothing granted under an old policy allows under a new
 * one. Consulted by connect4/6 and sendmsg4/6 only after the CIDR rules
 * denied, so an allowed-by-CIDR connect costs what it did.
 *
 * resolver: where the sandbox's DNS goes. One per sandbox (pinned as
 * CORDON_RESOLVER_PIN, shared by its instances like the containment state).
 * With it set, a TCP or UDP connect/sendmsg to port 53, whatever the address,
 * is sent to the resolver instead (before the egress rules are asked, and
 * without an event); the recvmsg4/6 and getpeername4/6 programs show the
 * workload the address it targeted (dns_origin, socket storage).
 */
#ifndef CORDON_ABI_DNS_H
#define CORDON_ABI_DNS_H

#include "cordon_common.h"

/* Addresses one instance can hold (a hash map allocated on demand): the
 * loader refuses a grant beyond it (after removing expired ones). */
#define CORDON_GRANTS_MAX 4096
/* Rules one address can be granted for at once (a CDN address behind two
 * names of different rules). */
#define CORDON_GRANT_SLOTS 4
/* Port ranges of one rule a grant can carry. */
#define CORDON_GRANT_PORT_RANGES 8

#define CORDON_GRANT_TCP 1u
#define CORDON_GRANT_UDP 2u

/* IPv6, or IPv4 as ::ffff:a.b.c.d: a mapped IPv6 destination is judged by
 * the grant of the IPv4 address it denotes, as by the CIDR rules. */
struct cordon_grant_key {
	__u8 addr[16];
};
CORDON_ABI_SIZE(struct cordon_grant_key, 16);

struct cordon_grant_port_range {
	__u16 first; /* host order, inclusive */
	__u16 last;
};
CORDON_ABI_SIZE(struct cordon_grant_port_range, 4);

struct cordon_grant_slot {
	__u64 expires_boot_ns; /* bpf_ktime_get_boot_ns() after which it allows nothing; 0: empty */
	__u32 rule;            /* 1-based egress rule (reported in events) */
	__u32 name_id;         /* userspace's id of the name answered (reported in events) */
	__u8 protocols;        /* CORDON_GRANT_TCP | CORDON_GRANT_UDP */
	__u8 nranges;          /* ranges used; 0: every port */
	__u16 _pad;
	__u32 _pad2;
	struct cordon_grant_port_range ranges[CORDON_GRANT_PORT_RANGES];
};
CORDON_ABI_SIZE(struct cordon_grant_slot, 56);

struct cordon_grant_value {
	struct cordon_grant_slot slots[CORDON_GRANT_SLOTS];
};
CORDON_ABI_SIZE(struct cordon_grant_value, 224);

/* The names grants were made for, by their id (events carry the id): a hash
 * map of __u32 -> struct cordon_grant_name, userspace only, pinned as
 * CORDON_GRANT_NAMES_PIN when the first grant is made. */
#define CORDON_GRANT_NAMES_PIN "grant_names"
struct cordon_grant_name {
	char name[256]; /* NUL-terminated */
};
CORDON_ABI_SIZE(struct cordon_grant_name, 256);

#define CORDON_RESOLVER_PIN "resolver"
#define CORDON_RESOLVER_F_V4 1u /* ip4/port4 set: IPv4 (and mapped) DNS is redirected */
#define CORDON_RESOLVER_F_V6 2u /* ip6/port6 set: IPv6 DNS is redirected */

/* The mark the sandbox's cgroup_skb/egress program puts on its UDP datagrams
 * to its resolver (struct cordon_resolver.mark), which the resolver reads
 * with SO_RCVMARK: proof that a datagram left a socket of a sandbox, which
 * its source address is not (a local process may send from another's
 * address and port with IP_PKTINFO). The resolver also checks that the
 * socket at the source address is its sandbox's (sock_diag). Setting a mark
 * takes CAP_NET_ADMIN, or CAP_NET_RAW since 5.17, in the host's network
 * namespace; a sandbox cannot set SO_MARK (its setsockopt program refuses
 * it), and one granted CAP_NET_RAW that marks a message (an SO_MARK control
 * message) still fails the socket check of another sandbox's resolver. Bits
 * that common host firewalls do not drop on (kube-proxy's 0x8000, 0x4000;
 * wg-quick's 0xca6c). */
#define CORDON_RESOLVER_MARK 0x0c0d0000u

struct cordon_resolver {
	__u32 flags; /* CORDON_RESOLVER_F_*; 0: no redirection */
	__u32 ip4;   /* network order */
	__u16 port4; /* network order */
	__u16 port6; /* network order */
	/* Put on the sandbox's UDP datagrams to the resolver (0: none). Was
	 * padding: a sandbox whose programs predate it marks nothing, and its
	 * resolver then answers its UDP queries truncated (the client asks
	 * again over TCP, where the peer is checked exactly). */
	__u32 mark;
	__u32 ip6[4]; /* network order */
};
CORDON_ABI_SIZE(struct cordon_resolver, 32);

#define CORDON_DNS_PORT 53

/* Socket storage of a redirected socket: the destination the workload named
 * (its last one: replies are shown as coming from it). In the socket's own
 * family: IPv4 in ip[0]. */
struct cordon_dns_origin {
	__u32 ip[4];  /* network order */
	__u16 port;   /* network order */
	__u16 family; /* AF_INET / AF_INET6 */
	__u32 _pad;
};
CORDON_ABI_SIZE(struct cordon_dns_origin, 24);

#endif
