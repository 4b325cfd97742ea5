/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Network egress policy ABI: the contents of the two LPM tries a compiled
 * policy becomes.
 *
 * Lookup is two constant-cost steps, whatever the number of rules:
 *  1. addr_rules: longest-prefix match of the destination, always as a
 *     128-bit IPv6 address; IPv4 (and IPv4-mapped IPv6, ::ffff:a.b.c.d) is
 *     ::ffff:a.b.c.d, so an IPv4 rule a.b.c.d/n is stored as ::ffff:a.b.c.d/(96+n)
 *     and a mapped destination is judged as the IPv4 address it denotes.
 *     The value names a port set. The compiler folds every covering (shorter)
 *     rule into each prefix's set, so the longest match alone decides.
 *  2. port_rules: longest-prefix match of (port_set, protocol, port). A port
 *     range becomes at most 30 aligned prefixes.
 */
#ifndef CORDON_ABI_NET_H
#define CORDON_ABI_NET_H

#include "cordon_common.h"

/* Socket families a policy may allow (bit numbers in cfg.families). Only
 * inet/inet6 are visible to cgroup/sock_create; the others need BPF LSM or
 * seccomp (see docs). */
enum cordon_family {
	CORDON_FAM_UNIX = 0,
	CORDON_FAM_INET = 1,
	CORDON_FAM_INET6 = 2,
	CORDON_FAM_NETLINK = 3,
	CORDON_FAM_PACKET = 4,
	CORDON_FAM_VSOCK = 5,
	CORDON_FAM_OTHER = 31,
};

/* Extra inet socket kinds (bit numbers in cfg.sock_protos). Plain TCP and
 * UDP stream/datagram sockets are always allowed in an allowed family. */
enum cordon_sock_proto {
	CORDON_SP_RAW = 0,     /* SOCK_RAW, any protocol */
	CORDON_SP_ICMP = 1,    /* SOCK_DGRAM/IPPROTO_ICMP ping sockets */
	CORDON_SP_ICMPV6 = 2,  /* SOCK_DGRAM/IPPROTO_ICMPV6 ping sockets */
	CORDON_SP_SCTP = 3,
	CORDON_SP_MPTCP = 4,
	CORDON_SP_UDPLITE = 5,
};

#define CORDON_ADDR_MAX_PREFIX 128

struct cordon_addr_key {
	__u32 prefixlen;  /* in bits over addr */
	__u8 addr[16];    /* IPv6, network order; IPv4 as ::ffff:a.b.c.d */
};
CORDON_ABI_SIZE(struct cordon_addr_key, 20);

#define CORDON_PORT_SET_ALL 0xffffffffu /* every port of tcp and udp */

struct cordon_addr_value {
	__u32 port_set;  /* id in port_rules, or CORDON_PORT_SET_ALL */
	__u32 rule;      /* 1-based index of the (most specific) policy rule */
};
CORDON_ABI_SIZE(struct cordon_addr_value, 8);

/* prefixlen counts bits over port_set (32), proto (8), port (16). */
struct cordon_port_key {
	__u32 prefixlen;
	__u8 port_set[4]; /* big endian */
	__u8 proto;       /* IPPROTO_TCP or IPPROTO_UDP */
	__u8 port[2];     /* big endian */
	__u8 pad;
};
CORDON_ABI_SIZE(struct cordon_port_key, 12);
CORDON_ABI_OFFSET(struct cordon_port_key, port_set, 4);
CORDON_ABI_OFFSET(struct cordon_port_key, proto, 8);
CORDON_ABI_OFFSET(struct cordon_port_key, port, 9);

#define CORDON_PORT_KEY_BITS (32 + 8 + 16)

struct cordon_port_value {
	__u32 rule; /* 1-based index of a policy rule that allows it */
};
CORDON_ABI_SIZE(struct cordon_port_value, 4);

/* Unix socket paths granted write (cgroup unix hooks): an LPM trie over the
 * path bytes, zero-padded. A rule for P is stored twice: "P\0" (the path
 * itself, prefixlen (len+1)*8) and "P/" (everything below it). */
#define CORDON_UNIX_PATH_MAX 108 /* sizeof(sockaddr_un.sun_path) */

struct cordon_unix_key {
	__u32 prefixlen;  /* in bits over path */
	__u8 path[CORDON_UNIX_PATH_MAX];
};
CORDON_ABI_SIZE(struct cordon_unix_key, 112);

struct cordon_unix_value {
	__u32 rule; /* 1-based file rule */
};
CORDON_ABI_SIZE(struct cordon_unix_value, 4);

/* Inbound (cgroup/bind4|6, cgroup_skb/ingress): spec.network.listen compiles
 * into listen_addr_rules / listen_port_rules, the same two-trie image as the
 * egress rules (a bind address is judged like a destination). Port 0 in a
 * port set means "a port the kernel chose" (ephemeral; see bpf/net/inbound.bpf.c). */

/* Devices (cgroup/dev): dev_rules holds the devices the loader allows beyond
 * the built-in safe set (AttachOptions::allowed_devices). */
#define CORDON_DEV_RULES_MAX 64
#define CORDON_DEV_MINOR_ANY 0xffffffffu
struct cordon_dev_key {
	__u32 type;   /* BPF_DEVCG_DEV_CHAR (2) or BPF_DEVCG_DEV_BLOCK (1) */
	__u32 major;
	__u32 minor;  /* or CORDON_DEV_MINOR_ANY */
};
CORDON_ABI_SIZE(struct cordon_dev_key, 12);
/* value: __u32 of BPF_DEVCG_ACC_* bits allowed (MKNOD 1, READ 2, WRITE 4) */

/* Sysctls (cgroup/sysctl): names readable by a sandbox, as
 * bpf_sysctl_get_name() spells them ("kernel/ostype"), zero-padded.
 * Filled by the loader with a constant set; writes are never allowed. */
#define CORDON_SYSCTL_NAME_MAX 64
#define CORDON_SYSCTL_SAFE_MAX 64
struct cordon_sysctl_key {
	char name[CORDON_SYSCTL_NAME_MAX];
};
CORDON_ABI_SIZE(struct cordon_sysctl_key, 64);

/* Listening ports already reported by cgroup_skb/ingress (key: family << 16 |
 * port, value: boot ns of the last report): one event per port per second. */
#define CORDON_SYN_REPORTED_MAX 1024
#define CORDON_SYN_REPORT_INTERVAL_NS 1000000000ull

/* spec.resources.egressBytes (cgroup_skb/egress, bpf/net/inbound.bpf.c).
 * egress_budget: a policy map (one element, replaced with every policy, so a
 * replacement applies its budget to the running total). */
struct cordon_egress_budget {
	__u64 limit; /* bytes; 0: no budget (bytes are still counted) */
	__u64 warn;  /* bytes at which the warn record is written (warnAt); 0: none */
};
CORDON_ABI_SIZE(struct cordon_egress_budget, 16);

/* egress_usage: the sandbox's, pinned as CORDON_EGRESS_PIN and shared by
 * every instance of the object it has (like the counters): a policy
 * replacement and an agent restart keep the total. Updated with atomics. */
struct cordon_egress_usage {
	__u64 bytes; /* skb->len of every packet that left (IPv4, IPv6, any protocol) */
	__u64 packets;
	__u64 dropped_bytes; /* refused for the budget */
	__u64 dropped_packets;
	/* The thresholds already reported, changed by compare-and-swap so that
	 * exactly one record is written per threshold (a new budget brings new
	 * thresholds and so new records). While max_reported equals the limit
	 * in force, every packet but a TCP reset is dropped. */
	__u64 warn_reported;
	__u64 max_reported;
};
CORDON_ABI_SIZE(struct cordon_egress_usage, 48);

/* egress_dests: bytes sent per destination (an LRU hash: the busiest stay),
 * pinned as CORDON_EGRESS_DESTS_PIN, for the impact report and status. */
#define CORDON_EGRESS_DESTS_MAX 1024
struct cordon_egress_dest_key {
	__u8 addr[16]; /* IPv6 or ::ffff:a.b.c.d */
	__u16 port;    /* host order; 0 for protocols without ports */
	__u8 family;   /* AF_INET / AF_INET6 */
	__u8 protocol; /* IPPROTO_* */
	__u32 _pad;
};
CORDON_ABI_SIZE(struct cordon_egress_dest_key, 24);
/* value: __u64 bytes (atomic add) */

#endif
