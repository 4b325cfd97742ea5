/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Inbound: default-deny listening, for kernels with or without BPF LSM.
 *
 * cgroup/bind4|6: bind() to a non-zero port needs a spec.network.listen rule
 * whose address (CIDR; the bind address as given, so binding the wildcard
 * 0.0.0.0 or :: needs a rule containing it) and protocol allow it. The rules
 * are the egress image's two-trie form (lib/egress_match.bpf.h);
 * ::ffff:a.b.c.d binds are judged as a.b.c.d. bind() to port 0 is always
 * allowed: UDP clients and many libraries bind port 0 before sending, and
 * the kernel's choice of port is not inbound by itself.
 *
 * cgroup_skb/ingress: a socket also gets a port without bind() (listen() on
 * an unbound socket auto-binds, without the bind hook), or from bind(port 0).
 * Whatever way a TCP listener got its port, every packet delivered to a
 * sandbox socket in state LISTEN (a SYN, or a syncookie ACK) is dropped
 * unless a listen rule allows the listener's (address, port, tcp), or lists
 * port 0 ("any port the kernel chose") for its address. The connecting peer
 * sees no answer (its connect times out); the sandbox sees no connection.
 * Established connections and the sandbox's own outgoing ones are never in
 * LISTEN state and are not looked at. One net.bind event per listening port
 * per second (syn_reported): a SYN flood cannot flood events; the counter
 * counts every dropped packet.
 *
 * Not covered here: UDP needs no listen(); an unconnected UDP socket on a
 * kernel-chosen port receives datagrams from anyone who learns the port.
 */
#include "lib/egress_match.bpf.h"

static __always_inline int cordon_bind_decide(struct bpf_sock_addr *ctx, const __u8 addr[16], __u16 family)
{
	__u16 port = bpf_ntohs((__u16)ctx->user_port);
	const struct cordon_sandbox_cfg *cfg = cordon_cfg();
	if (!cfg)
		return 0;
	__u32 protocol = ctx->protocol;
	if (cordon_contained())
		return cordon_refuse_contained_net(cfg, CORDON_EV_NET_BIND, CORDON_CNT_DENIED_LSM_NET, addr, port,
						   family, ctx->type, protocol);
	if (port == 0)
		return 1; /* ephemeral: see above */
	__u32 rule = 0;
	__u8 reason = 0;
	if (cordon_rules_allowed(&listen_addr_rules, &listen_port_rules, addr, port, cordon_rule_proto(protocol),
				 &rule, &reason))
		return 1;
	int audit = cfg->mode == CORDON_MODE_AUDIT;
	cordon_count(audit ? CORDON_CNT_AUDITED_LSM_NET : CORDON_CNT_DENIED_LSM_NET);
	if (!audit)
		cordon_violation(cfg, CORDON_EV_NET_BIND);
	struct cordon_net_event ev;
	struct cordon_net_event *e = cordon_event_begin(&ev, cfg, CORDON_EV_NET_BIND,
						    audit ? CORDON_VERDICT_AUDITED : CORDON_VERDICT_DENIED,
						    CORDON_REASON_NO_LISTEN_RULE);
	if (e) {
		__builtin_memcpy(e->addr, addr, 16);
		e->port = port;
		e->family = family;
		e->sock_type = ctx->type;
		e->protocol = protocol;
		e->hdr.rule = rule;
		cordon_event_submit(e);
	}
	return audit;
}

SEC("cgroup/bind4")
int cordon_bind4(struct bpf_sock_addr *ctx)
{
	__u8 addr[16];
	cordon_dest_v4(ctx, addr);
	return cordon_bind_decide(ctx, addr, AF_INET);
}

SEC("cgroup/bind6")
int cordon_bind6(struct bpf_sock_addr *ctx)
{
	__u32 addr[4];
	cordon_dest_v6(ctx, addr);
	return cordon_bind_decide(ctx, (const __u8 *)addr, AF_INET6);
}

#define CORDON_ETH_P_IP 0x0800
#define CORDON_ETH_P_IPV6 0x86DD
#define CORDON_TCP_RST 0x04

/* Whether `skb` (cgroup_skb: its data starts at the IP header) is a TCP
 * reset the kernel sends for one of the sandbox's TCP sockets: RST set, no
 * payload, and the packet's socket a full SOCK_STREAM/IPPROTO_TCP socket (a
 * raw socket, which a policy may grant with NET_RAW, builds its own headers
 * and could dress data up as a reset). IPv6 extension headers are not
 * followed: a segment behind one is not a reset here. */
static __always_inline int cordon_is_tcp_reset(struct __sk_buff *skb)
{
	struct bpf_sock *sk = skb->sk;
	if (!sk)
		return 0;
	sk = bpf_sk_fullsock(sk);
	if (!sk || sk->type != SOCK_STREAM || sk->protocol != IPPROTO_TCP)
		return 0;
	__u32 off, ip_len;
	__be16 total = 0;
	if (skb->protocol == bpf_htons(CORDON_ETH_P_IP)) {
		__u8 vihl = 0, proto = 0;
		if (bpf_skb_load_bytes(skb, 0, &vihl, 1) || bpf_skb_load_bytes(skb, 9, &proto, 1) ||
		    proto != IPPROTO_TCP || bpf_skb_load_bytes(skb, 2, &total, 2))
			return 0;
		off = (vihl & 0xf) * 4;
		ip_len = bpf_ntohs(total); /* header and payload */
	} else if (skb->protocol == bpf_htons(CORDON_ETH_P_IPV6)) {
		__u8 next = 0;
		if (bpf_skb_load_bytes(skb, 6, &next, 1) || next != IPPROTO_TCP ||
		    bpf_skb_load_bytes(skb, 4, &total, 2))
			return 0;
		off = 40;
		ip_len = 40 + bpf_ntohs(total); /* payload length excludes the fixed header */
	} else {
		return 0;
	}
	__u8 doff = 0, flags = 0;
	if (bpf_skb_load_bytes(skb, off + 12, &doff, 1) || bpf_skb_load_bytes(skb, off + 13, &flags, 1))
		return 0;
	return (flags & CORDON_TCP_RST) != 0 && ip_len == off + (doff >> 4) * 4;
}

/* Whether IPv4 options (a header of `ihl` words, > 5) hold a loose or
 * strict source route (LSRR 0x83, SSRR 0x89). Other options pass: the
 * host's own (a CIPSO label NetLabel adds, a router alert) change no
 * destination. Options that cannot be read or parsed count as a route. */
static __always_inline int cordon_ipv4_routed(struct __sk_buff *skb, __u32 ihl)
{
	/* Indexes are masked to 63 for the verifier. Packets with options are
	 * rare: the room is zeroed. */
	__u8 o[64];
	__builtin_memset(o, 0, sizeof(o));
	/* The bounds are checked on the header length itself, in 64 bits (clang
	 * would check a copy, or drop the checks it proves from the 4-bit field,
	 * whose bound the verifier does not carry through), and the options'
	 * length is derived from it: 4 to 40 bytes. */
	__u64 words = ihl;
	asm volatile("" : "+r"(words));
	if (words <= 5)
		return 0;
	if (words > 15)
		return 1;
	__u64 len = words * 4 - 20;
	if (bpf_skb_load_bytes(skb, 20, o, len))
		return 1;
	__u32 i = 0;
	for (int n = 0; n < 40; n++) {
		if (i >= len)
			return 0;
		__u8 type = o[i & 63];
		if (type == 0) /* end of the list */
			return 0;
		if (type == 1) { /* no-op */
			i++;
			continue;
		}
		if (type == 0x83 || type == 0x89)
			return 1;
		__u8 optlen = o[(i + 1) & 63];
		if (i + 1 >= len || optlen < 2)
			return 1;
		i += optlen;
	}
	return 0;
}

/* Whether an IPv6 packet whose first next header is `next` carries a routing
 * header (behind at most two hop-by-hop or destination options headers) of
 * a type other than segment routing (4): type 2 (Mobile IPv6) is the one a
 * process can give per message, and it sends the packet to the address it
 * holds. An SRH (type 4) is what the host's own SRv6 encapsulation adds (a
 * sandbox cannot set one: IPV6_RTHDR is refused, and the kernel takes no
 * type 4 per message). */
static __always_inline int cordon_ipv6_routed(struct __sk_buff *skb, __u8 next)
{
	__u32 off = 40;
	for (int i = 0; i < 2 && (next == 0 || next == 60); i++) {
		__u8 h[2];
		if (bpf_skb_load_bytes(skb, off, h, 2))
			return 0;
		next = h[0];
		off += ((__u32)h[1] + 1) * 8;
	}
	if (next != 43)
		return 0;
	__u8 rh[4];
	if (bpf_skb_load_bytes(skb, off, rh, sizeof(rh)))
		return 1;
	return rh[2] != 4;
}

/* The destination of an egress packet (cgroup_skb: its data starts at the IP
 * header): address as IPv6 (IPv4 as ::ffff:a.b.c.d), port of TCP/UDP/UDP-Lite
 * (0 for others; IPv6 extension headers are not followed). 0 when parsed.
 * *routed: whether it carries a source route (IPv4 options LSRR/SSRR, an
 * IPv6 routing header other than SRv6's), which sends it to its first hop,
 * not to the destination the egress rules judged: the socket options that
 * set them are refused (bpf/net/host.bpf.c), but given per message, as
 * IP_RETOPTS or IPV6_RTHDR control messages, they pass no hook but this
 * one. One load of the IP header: the program runs for every packet the
 * sandbox sends. */
static __always_inline int cordon_skb_dest(struct __sk_buff *skb, struct cordon_egress_dest_key *k, int *routed)
{
	__u32 off;
	__u8 proto;
	__u32 protocol = skb->protocol;
	asm volatile("" : "+r"(protocol)); /* one load: no pointer arithmetic on the context */
	if (protocol == bpf_htons(CORDON_ETH_P_IP)) {
		__u8 h[20];
		if (bpf_skb_load_bytes(skb, 0, h, sizeof(h)))
			return -1;
		proto = h[9];
		__builtin_memcpy(k->addr + 12, h + 16, 4);
		k->addr[10] = 0xff;
		k->addr[11] = 0xff;
		k->family = AF_INET;
		off = (h[0] & 0xf) * 4;
		if ((h[0] & 0xf) > 5)
			*routed = cordon_ipv4_routed(skb, h[0] & 0xf);
	} else if (protocol == bpf_htons(CORDON_ETH_P_IPV6)) {
		__u8 h[40];
		if (bpf_skb_load_bytes(skb, 0, h, sizeof(h)))
			return -1;
		proto = h[6];
		__builtin_memcpy(k->addr, h + 24, 16);
		k->family = AF_INET6;
		off = 40;
		if (proto == 0 || proto == 60 || proto == 43)
			*routed = cordon_ipv6_routed(skb, proto);
	} else {
		return -1;
	}
	k->protocol = proto;
	__u16 port = 0;
	if ((proto == IPPROTO_TCP || proto == IPPROTO_UDP || proto == IPPROTO_UDPLITE) &&
	    bpf_skb_load_bytes(skb, off + 2, &port, 2) == 0)
		k->port = bpf_ntohs(port);
	return 0;
}

/* The one resource.egress record of a threshold (the caller won its
 * compare-and-swap). No task: see struct cordon_resource_event. */
static __always_inline int cordon_egress_report(struct __sk_buff *skb, const struct cordon_egress_dest_key *dest,
						__u16 threshold, __u64 limit, __u64 value)
{
	const struct cordon_sandbox_cfg *cfg = cordon_cfg();
	struct cordon_resource_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		cordon_count(CORDON_CNT_EVENTS_DROPPED);
		return -1;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->hdr.size = sizeof(*e);
	e->hdr.layout = CORDON_EVL_RESOURCE;
	e->hdr.layer = CORDON_LAYER_CGROUP;
	e->hdr.kind = CORDON_EV_RESOURCE_EGRESS;
	e->hdr.verdict = threshold == CORDON_RES_MAX ? CORDON_VERDICT_DENIED : CORDON_VERDICT_DETECTED;
	e->hdr.reason = CORDON_REASON_EGRESS_BUDGET;
	e->hdr.boot_ns = bpf_ktime_get_boot_ns();
	e->hdr.sandbox_id = cfg ? cfg->sandbox_id : 0;
	e->hdr.cgroup_id = bpf_skb_cgroup_id(skb);
	e->hdr.seq = cordon_next_seq(cordon_seq());
	e->limit = limit;
	e->value = value;
	__builtin_memcpy(e->addr, dest->addr, 16);
	e->port = dest->port;
	e->family = dest->family;
	e->protocol = dest->protocol;
	e->threshold = threshold;
	bpf_ringbuf_submit(e, 0);
	return 0;
}

/* Sets *reported from what it was to `to`, once: 1 for the one caller that
 * did (it writes the record), 0 for everyone else. */
static __always_inline int cordon_report_once(__u64 *reported, __u64 to)
{
	__u64 was = *(volatile __u64 *)reported;
	return was != to && __sync_val_compare_and_swap(reported, was, to) == was;
}

/* spec.resources.egressBytes: counts every packet that leaves (skb->len:
 * IP header and payload, every protocol; a TCP segment offload skb counts
 * whole) in the sandbox's egress_usage and, per destination, egress_dests.
 * A packet that would take the total over the budget is dropped, and from
 * then on every packet but a TCP reset (like containment): the total
 * exceeds the budget only by those resets and by packets of other CPUs
 * checked at the same moment (each at most one GSO packet: the check and
 * the count are two atomic steps). A datagram dropped fails its
 * send() with EPERM; TCP segments are dropped and the connection stalls
 * (the reader of the max record destroys its sockets, README). The budget
 * is the policy's (egress_budget): a replacement applies its own to the
 * running total, and a larger one lets traffic flow again. */
static __always_inline int cordon_egress_account(struct __sk_buff *skb, const struct cordon_egress_dest_key *dest,
						 int parsed)
{
	__u32 zero = 0;
	struct cordon_egress_usage *u = bpf_map_lookup_elem(&egress_usage, &zero);
	const struct cordon_egress_budget *b = bpf_map_lookup_elem(&egress_budget, &zero);
	if (!u || !b)
		return 1;
	__u64 len = skb->len;
	__u64 limit = b->limit, warn = b->warn;
	if (limit && (*(volatile __u64 *)&u->max_reported == limit || *(volatile __u64 *)&u->bytes + len > limit)) {
		if (cordon_is_tcp_reset(skb)) {
			__sync_fetch_and_add(&u->bytes, len);
			__sync_fetch_and_add(&u->packets, 1);
			return 1;
		}
		__sync_fetch_and_add(&u->dropped_bytes, len);
		__sync_fetch_and_add(&u->dropped_packets, 1);
		/* A full ring buffer (a flood at the crossing) gives the
		 * threshold back: the next dropped packet writes the record. */
		if (cordon_report_once(&u->max_reported, limit) &&
		    cordon_egress_report(skb, dest, CORDON_RES_MAX, limit, *(volatile __u64 *)&u->bytes))
			__sync_val_compare_and_swap(&u->max_reported, limit, 0);
		return 0;
	}
	__u64 total = __sync_fetch_and_add(&u->bytes, len) + len;
	__sync_fetch_and_add(&u->packets, 1);
	if (parsed) {
		__u64 *per = bpf_map_lookup_elem(&egress_dests, dest);
		if (per)
			__sync_fetch_and_add(per, len);
		else if (bpf_map_update_elem(&egress_dests, dest, &len, BPF_NOEXIST)) {
			per = bpf_map_lookup_elem(&egress_dests, dest); /* another CPU added it */
			if (per)
				__sync_fetch_and_add(per, len);
		}
	}
	if (warn && total >= warn && cordon_report_once(&u->warn_reported, warn) &&
	    cordon_egress_report(skb, dest, CORDON_RES_WARN, limit, total))
		__sync_val_compare_and_swap(&u->warn_reported, warn, 0);
	return 1;
}

/* Whether the UDP payload at `off` (cgroup_skb: data starts at the IP
 * header) looks like a DNS query: a header with QR clear, opcode QUERY, one
 * question, no answer or authority records, at most one additional (EDNS),
 * and room for a question. */
static __always_inline int cordon_skb_dns_query(struct __sk_buff *skb, __u32 off)
{
	__u8 h[12];
	if (bpf_skb_load_bytes(skb, off + 8, h, sizeof(h)))
		return 0;
	if ((h[2] & 0xf8) != 0 || h[4] != 0 || h[5] != 1 || h[6] || h[7] || h[8] || h[9] || h[10] || h[11] > 1)
		return 0;
	return skb->len >= off + 8 + 12 + 5;
}

/* A UDP datagram to the sandbox's own resolver: it gets the resolver's mark
 * (bpf/abi/cordon_dns.h CORDON_RESOLVER_MARK), whatever mark it had, and the
 * resolver serves UDP queries that carry it. The mark is set after the
 * host's output hooks ran (routing and netfilter's OUTPUT and POSTROUTING
 * saw the datagram without it). One diverted there from a denied destination
 * (its socket's named destination is not port 53: lib/egress_match.bpf.h)
 * must be a DNS query, else it is dropped (0). */
static __always_inline int cordon_resolver_query(struct __sk_buff *skb, const struct cordon_egress_dest_key *d)
{
	if (d->protocol != IPPROTO_UDP)
		return 1;
	__u32 w[4];
	__builtin_memcpy(w, d->addr, 16);
	/* The resolver listens on loopback (127.0.0.0/8, ::1): nothing else is
	 * looked at further. */
	if (d->family == AF_INET ? d->addr[12] != 127 : (w[0] || w[1] || w[2] || w[3] != bpf_htonl(1)))
		return 1;
	__u32 zero = 0;
	const struct cordon_resolver *r = bpf_map_lookup_elem(&resolver, &zero);
	if (!r)
		return 1;
	int to_v4 = (r->flags & CORDON_RESOLVER_F_V4) && d->family == AF_INET && w[3] == r->ip4 &&
		    d->port == bpf_ntohs(r->port4);
	int to_v6 = (r->flags & CORDON_RESOLVER_F_V6) && d->family == AF_INET6 && w[0] == r->ip6[0] &&
		    w[1] == r->ip6[1] && w[2] == r->ip6[2] && w[3] == r->ip6[3] && d->port == bpf_ntohs(r->port6);
	if (!to_v4 && !to_v6)
		return 1;
	/* No DNS query needs UDP segmentation offload (UDP_SEGMENT): only the
	 * first segment's header would be checked below. */
	if (skb->gso_segs > 1)
		return 0;
	struct bpf_sock *sk = skb->sk;
	if (sk)
		sk = bpf_sk_fullsock(sk);
	if (sk) {
		const struct cordon_dns_origin *o = bpf_sk_storage_get(&dns_origin, sk, 0, 0);
		__u32 off = 40;
		if (d->family == AF_INET) {
			__u8 vihl = 0;
			if (bpf_skb_load_bytes(skb, 0, &vihl, 1))
				return 0;
			off = (vihl & 0xf) * 4;
		}
		if (o && o->port != bpf_htons(CORDON_DNS_PORT) && !cordon_skb_dns_query(skb, off))
			return 0;
	}
	if (r->mark)
		skb->mark = r->mark;
	return 1;
}

/* cgroup_skb/egress: a contained sandbox sends nothing, in the kernel and
 * at once. New connections and datagrams are refused by the sock_addr hooks;
 * this cuts what was open before: an established TCP connection's segments
 * and a connected UDP socket's datagrams (neither passes cgroup/sendmsg).
 * A dropped datagram fails its send() with EPERM; TCP segments are dropped
 * and its sends queue up unsent. Only resets leave: those the destruction
 * of its connections sends (a containment's step 3), so that their peers
 * learn of it (the workload cannot write a TCP header: raw sockets are
 * refused). No event: every packet would be one. Judged by the socket's
 * cgroup, so a socket of the sandbox handed to a process outside is cut too.
 * Otherwise a source-routed packet is dropped (cordon_skb_dest), a UDP datagram to the
 * sandbox's resolver is marked (a diverted one that is not DNS dropped:
 * above), and the packet is counted against spec.resources.egressBytes. */
SEC("cgroup_skb/egress")
int cordon_egress(struct __sk_buff *skb)
{
	if (cordon_contained())
		return cordon_is_tcp_reset(skb);
	struct cordon_egress_dest_key dest = {};
	int routed = 0;
	int parsed = cordon_skb_dest(skb, &dest, &routed) == 0;
	if (routed)
		return 0;
	if (parsed && !cordon_resolver_query(skb, &dest))
		return 0;
	return cordon_egress_account(skb, &dest, parsed);
}

SEC("cgroup_skb/ingress")
int cordon_ingress(struct __sk_buff *skb)
{
	/* A contained sandbox receives nothing (no event: every packet would be one). */
	if (cordon_contained())
		return 0;
	struct bpf_sock *sk = skb->sk;
	if (!sk)
		return 1;
	sk = bpf_sk_fullsock(sk);
	if (!sk)
		return 1;
	if (sk->state != BPF_TCP_LISTEN || sk->protocol != IPPROTO_TCP)
		return 1;
	__u16 port = (__u16)sk->src_port; /* host order */
	__u32 family = sk->family;
	/* Every field loaded unconditionally, then chosen: clang must not turn
	 * per-family loads into pointer arithmetic on the socket, which the
	 * verifier forbids. */
	__u32 ip4 = sk->src_ip4;
	__u32 ip6_0 = sk->src_ip6[0], ip6_1 = sk->src_ip6[1], ip6_2 = sk->src_ip6[2], ip6_3 = sk->src_ip6[3];
	asm volatile("" : "+r"(ip4), "+r"(ip6_0), "+r"(ip6_1), "+r"(ip6_2), "+r"(ip6_3));
	__u32 words[4] = {};
	if (family == AF_INET) {
		words[2] = bpf_htonl(0xffff);
		words[3] = ip4;
	} else if (family == AF_INET6) {
		words[0] = ip6_0;
		words[1] = ip6_1;
		words[2] = ip6_2;
		words[3] = ip6_3;
	} else {
		return 1;
	}
	const __u8 *addr = (const __u8 *)words;
	__u32 rule = 0;
	__u8 reason = 0;
	if (cordon_rules_allowed(&listen_addr_rules, &listen_port_rules, addr, port, IPPROTO_TCP, &rule, &reason) ||
	    cordon_rules_allowed(&listen_addr_rules, &listen_port_rules, addr, 0, IPPROTO_TCP, &rule, &reason))
		return 1;
	const struct cordon_sandbox_cfg *cfg = cordon_cfg();
	if (!cfg)
		return 0;
	int audit = cfg->mode == CORDON_MODE_AUDIT;
	cordon_count(audit ? CORDON_CNT_AUDITED_LSM_NET : CORDON_CNT_DENIED_LSM_NET);

	__u64 now = bpf_ktime_get_boot_ns();
	__u32 key = family << 16 | port;
	__u64 *last = bpf_map_lookup_elem(&syn_reported, &key);
	if (last && now - *last < CORDON_SYN_REPORT_INTERVAL_NS)
		return audit;
	bpf_map_update_elem(&syn_reported, &key, &now, BPF_ANY);

	/* Softirq context: no task to describe (pid 0); the cgroup is the
	 * listening socket's. */
	struct cordon_net_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		cordon_count(CORDON_CNT_EVENTS_DROPPED);
		return audit;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->hdr.size = sizeof(*e);
	e->hdr.layout = CORDON_EVL_NET;
	e->hdr.layer = CORDON_LAYER_CGROUP;
	e->hdr.kind = CORDON_EV_NET_BIND;
	e->hdr.verdict = audit ? CORDON_VERDICT_AUDITED : CORDON_VERDICT_DENIED;
	e->hdr.reason = CORDON_REASON_NO_LISTEN_RULE;
	e->hdr.boot_ns = now;
	e->hdr.sandbox_id = cfg->sandbox_id;
	e->hdr.cgroup_id = bpf_skb_cgroup_id(skb);
	e->hdr.rule = rule;
	e->hdr.seq = cordon_next_seq(cordon_seq());
	__builtin_memcpy(e->addr, addr, 16);
	e->port = port;
	e->family = family;
	e->sock_type = SOCK_STREAM;
	e->protocol = IPPROTO_TCP;
	bpf_ringbuf_submit(e, 0);
	return audit;
}
