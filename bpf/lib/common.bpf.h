/* SPDX-License-Identifier: Apache-2.0 */
/* Config, counters and event emission shared by every hook. */
#ifndef CORDON_BPF_COMMON_H
#define CORDON_BPF_COMMON_H

#include "lib/maps.bpf.h"
#include "lib/event_header.bpf.h"
#include "lib/violation.bpf.h"
#include "lib/repeats.bpf.h"
#include <bpf/bpf_core_read.h>

CORDON_MAPS_DECLARE(extern);

#define AF_UNIX 1
#define AF_INET 2
#define AF_INET6 10
#define SOCK_STREAM 1
#define SOCK_DGRAM 2
#define SOCK_RAW 3

static __always_inline const struct cordon_sandbox_cfg *cordon_cfg(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&sandbox_cfg, &zero);
}

static __always_inline void cordon_count(__u32 counter)
{
	__u64 *value = bpf_map_lookup_elem(&counters, &counter);
	if (value)
		*value += 1; /* per-CPU slot: no atomics needed */
}

/* Fills the header of a net record on the caller's stack, written by
 * cordon_event_submit(). Never NULL (kept so for the callers' shape). */
static __always_inline struct cordon_net_event *cordon_event_begin(struct cordon_net_event *e,
								   const struct cordon_sandbox_cfg *cfg, __u16 kind,
								   __u8 verdict, __u8 reason)
{
	__builtin_memset(e, 0, sizeof(*e));
	e->hdr.size = sizeof(*e);
	cordon_event_header(&e->hdr, CORDON_EVL_NET, CORDON_LAYER_CGROUP, kind, verdict, reason, cfg->sandbox_id);
	return e;
}

/* The sandbox's sequence counter (cordon_next_seq). */
static __always_inline __u64 *cordon_seq(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&seq, &zero);
}

/* The sandbox's ring buffer, counters, sequence and repeats map (this
 * instance's maps). -1 without the per-CPU scratch (never expected). */
static __always_inline int cordon_net_sink(struct cordon_sink *k)
{
	__u32 zero = 0;
	struct cordon_repeat_value *scratch = bpf_map_lookup_elem(&repeat_scratch, &zero);
	if (!scratch)
		return -1;
	k->ring = &events;
	k->counters = &counters;
	k->seq = cordon_seq();
	k->repeats = &repeats;
	k->scratch = scratch;
	return 0;
}

/* Writes a net record, unless it repeats one of its key's window
 * (lib/repeats.bpf.h, cordon_net_repeat_key). */
static __always_inline void cordon_event_submit(struct cordon_net_event *e)
{
	struct cordon_sink k;
	if (cordon_net_sink(&k)) {
		cordon_count(CORDON_CNT_EVENTS_DROPPED);
		return;
	}
	struct cordon_repeat_key key;
	cordon_net_repeat_key(e, &key);
	cordon_repeat_submit(&k, &key, &e->hdr, sizeof(*e));
}

/* The sandbox's containment state (bpf/abi/cordon_common.h), shared by every
 * instance of this object that the sandbox had. */
static __always_inline struct cordon_sandbox_state *cordon_state(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&sandbox_state, &zero);
}

/* Whether the sandbox is contained: then every program refuses first, in
 * audit mode too, before its policy is asked. */
static __always_inline int cordon_contained(void)
{
	struct cordon_sandbox_state *st = cordon_state();
	return st && (*(volatile __u32 *)&st->flags & CORDON_STATE_F_CONTAINED);
}

/* A refusal in enforce mode: counted towards spec.onViolation: contain
 * (bpf/lib/violation.bpf.h) in the sandbox's state. */
static __always_inline void cordon_violation(const struct cordon_sandbox_cfg *cfg, __u16 kind)
{
	cordon_count_violation(cfg, cordon_state(), kind);
}

/* The refusal of a contained sandbox's operation that has an address (or
 * none): a net event, reason CORDON_REASON_CONTAINED, counted as denied. */
static __always_inline int cordon_refuse_contained_net(const struct cordon_sandbox_cfg *cfg, __u16 kind, __u32 counter,
						       const __u8 *addr, __u16 port, __u16 family, __u16 sock_type,
						       __u16 protocol)
{
	cordon_count(counter);
	struct cordon_net_event ev;
	struct cordon_net_event *e = cordon_event_begin(&ev, cfg, kind, CORDON_VERDICT_DENIED, CORDON_REASON_CONTAINED);
	if (e) {
		if (addr)
			__builtin_memcpy(e->addr, addr, 16);
		e->port = port;
		e->family = family;
		e->sock_type = sock_type;
		e->protocol = protocol;
		cordon_event_submit(e);
	}
	return 0;
}

#endif
