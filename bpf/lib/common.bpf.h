/* SPDX-License-Identifier: Apache-2.0 */
/* Config, counters and event emission shared by every hook. */
#ifndef CORDON_BPF_COMMON_H
#define CORDON_BPF_COMMON_H

#include "lib/maps.bpf.h"
#include "lib/event_header.bpf.h"
#include "lib/violation.bpf.h"
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

/* Writes a net record into the ring buffer with its sequence number (taken
 * once the ring has room: bpf/abi/cordon_event.h). e itself keeps seq 0.
 * Returns 0 when written. */
static __always_inline int cordon_net_output(const struct cordon_net_event *e)
{
	struct cordon_net_event *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r)
		return -1;
	__builtin_memcpy(r, e, sizeof(*r));
	r->hdr.seq = cordon_next_seq(cordon_seq());
	bpf_ringbuf_submit(r, 0);
	return 0;
}

static __always_inline __u64 cordon_hash_mix(__u64 h, __u64 v)
{
	return (h ^ v) * 0x100000001b3ULL; /* FNV-1a, a word at a time */
}

/* One more occurrence counted in a repeats entry. first_ns is written before
 * the count, so whoever sees the count sees a time (racing writers only move
 * the times, never the count). */
static __always_inline void cordon_repeat_add(struct cordon_repeat_value *v, __u64 now)
{
	if (!*(volatile __u64 *)&v->count)
		v->first_ns = now;
	v->last_ns = now;
	__sync_fetch_and_add(&v->count, 1);
	cordon_count(CORDON_CNT_REPEATS);
}

/* Opens the repeats entry of `key` with the net record `e` (written, when
 * count is 0; else counted). Returns 0 when the entry holds it. */
static __always_inline int cordon_repeat_open(const struct cordon_repeat_key *key, const struct cordon_net_event *e,
					      __u64 now, __u64 count)
{
	__u32 zero = 0;
	struct cordon_repeat_value *s = bpf_map_lookup_elem(&repeat_scratch, &zero);
	if (!s)
		return -1;
	s->window_ns = now;
	s->count = count;
	s->first_ns = count ? now : 0;
	s->last_ns = count ? now : 0;
	s->size = sizeof(*e);
	s->_pad = 0;
	__builtin_memcpy(s->record, e, sizeof(*e));
	if (bpf_map_update_elem(&repeats, key, s, BPF_NOEXIST) == 0) {
		if (count)
			cordon_count(CORDON_CNT_REPEATS);
		return 0;
	}
	/* Another CPU opened it first, or the map is full. */
	struct cordon_repeat_value *v = bpf_map_lookup_elem(&repeats, key);
	if (!v)
		return -1;
	if (count)
		cordon_repeat_add(v, now);
	return 0;
}

/* Writes a net record, unless it repeats one of its key's window: then it is
 * counted in the repeats map (bpf/abi/cordon_event.h). The first record after
 * a window carries what the window counted. A full ring buffer counts the
 * record there too; it is lost (and counted as dropped) only when the map is
 * full as well. */
static __always_inline void cordon_event_submit(struct cordon_net_event *e)
{
	struct cordon_repeat_key key = {};
	key.kind = e->hdr.kind;
	key.verdict = e->hdr.verdict;
	key.reason = e->hdr.reason;
	key.pid = e->hdr.pid;
	__u64 a0, a1;
	__builtin_memcpy(&a0, e->addr, 8);
	__builtin_memcpy(&a1, e->addr + 8, 8);
	__u64 h = 0xcbf29ce484222325ULL;
	h = cordon_hash_mix(h, a0);
	h = cordon_hash_mix(h, a1);
	h = cordon_hash_mix(h, (__u64)e->port << 48 | (__u64)e->family << 32 | (__u64)e->sock_type << 16 | e->protocol);
	h = cordon_hash_mix(h, e->hdr.rule);
	key.target = h;

	__u64 now = e->hdr.boot_ns;
	struct cordon_repeat_value *v = bpf_map_lookup_elem(&repeats, &key);
	if (v && now - *(volatile __u64 *)&v->window_ns < CORDON_REPEAT_WINDOW_NS) {
		cordon_repeat_add(v, now);
		return;
	}
	__u64 taken = v ? *(volatile __u64 *)&v->count : 0;
	if (taken) {
		e->hdr.repeats = taken;
		e->hdr.repeats_first_ns = v->first_ns;
		e->hdr.repeats_last_ns = v->last_ns;
	}
	if (cordon_net_output(e) == 0) {
		if (v) {
			v->window_ns = now;
			if (taken) {
				v->first_ns = 0;
				/* Only what this record carries: increments racing
				 * with it stay counted for the next one. */
				__sync_fetch_and_add(&v->count, -taken);
			}
		} else {
			(void)cordon_repeat_open(&key, e, now, 0);
		}
		return;
	}
	if (v) {
		cordon_repeat_add(v, now);
		return;
	}
	e->hdr.repeats = 0;
	if (cordon_repeat_open(&key, e, now, 1))
		cordon_count(CORDON_CNT_EVENTS_DROPPED);
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
