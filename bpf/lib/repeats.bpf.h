/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Writing a sandbox's records, and repeats (bpf/abi/cordon_event.h, README
 * "Repeats"): the first record of each key in a window is written, the same
 * again within the window is counted in the sandbox's `repeats` map. One
 * implementation for every writer: the sandbox's cgroup programs pass their
 * own maps, the host-wide BPF LSM and detect objects the sandbox's maps found
 * through map-in-map. Declares no maps: every map is in the sink.
 */
#ifndef CORDON_BPF_REPEATS_H
#define CORDON_BPF_REPEATS_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "abi/cordon_common.h"
#include "abi/cordon_event.h"
#include "lib/event_header.bpf.h"

/* Where a sandbox's records go. ring and counters are never NULL. */
struct cordon_sink {
	void *ring;			     /* its ring buffer (events) */
	void *counters;			     /* its per-CPU counters */
	__u64 *seq;			     /* its sequence counter (cordon_next_seq), or NULL */
	void *repeats;			     /* its repeats map */
	struct cordon_repeat_value *scratch; /* per-CPU room to open a repeats entry */
};

/* The key of the repeats map's target hash: random for each loaded object,
 * set by the loader before the load (rodata: the workload cannot read it,
 * bpf() is refused to it). The hash is keyed SipHash-1-3 (as the kernel's
 * hsiphash on 64-bit): an unkeyed hash let the workload choose two targets
 * of one key (e.g. two IPv6 addresses that differ in the top bits of both
 * halves collided in FNV-1a), so that a violation it cared about was counted
 * as a repeat of a decoy and never named in the trail. */
extern const volatile __u64 cordon_repeat_seed[2];

#define CORDON_ROTL(x, b) (((x) << (b)) | ((x) >> (64 - (b))))
#define CORDON_SIPROUND                                                                                                \
	do {                                                                                                           \
		v0 += v1;                                                                                              \
		v1 = CORDON_ROTL(v1, 13);                                                                              \
		v1 ^= v0;                                                                                              \
		v0 = CORDON_ROTL(v0, 32);                                                                              \
		v2 += v3;                                                                                              \
		v3 = CORDON_ROTL(v3, 16);                                                                              \
		v3 ^= v2;                                                                                              \
		v0 += v3;                                                                                              \
		v3 = CORDON_ROTL(v3, 21);                                                                              \
		v3 ^= v0;                                                                                              \
		v2 += v1;                                                                                              \
		v1 = CORDON_ROTL(v1, 17);                                                                              \
		v1 ^= v2;                                                                                              \
		v2 = CORDON_ROTL(v2, 32);                                                                              \
	} while (0)
#define CORDON_SIPWORD(m)                                                                                              \
	do {                                                                                                           \
		v3 ^= (m);                                                                                             \
		CORDON_SIPROUND;                                                                                       \
		v0 ^= (m);                                                                                             \
	} while (0)

/* The keyed hash of five words (a target of more chains: the hash of the
 * first five is the first word of the next). A subprogram, not inlined: its
 * state lives in its own frame, not in the hooks' (the BPF LSM hooks share
 * 512 bytes of stack with the path walk). */
static __noinline __u64 cordon_target_hash(__u64 a, __u64 b, __u64 c, __u64 d, __u64 e)
{
	const __u64 k0 = cordon_repeat_seed[0], k1 = cordon_repeat_seed[1];
	__u64 v0 = k0 ^ 0x736f6d6570736575ULL, v1 = k1 ^ 0x646f72616e646f6dULL;
	__u64 v2 = k0 ^ 0x6c7967656e657261ULL, v3 = k1 ^ 0x7465646279746573ULL;
	CORDON_SIPWORD(a);
	CORDON_SIPWORD(b);
	CORDON_SIPWORD(c);
	CORDON_SIPWORD(d);
	CORDON_SIPWORD(e);
	const __u64 last = (__u64)(5 * 8) << 56;
	CORDON_SIPWORD(last);
	v2 ^= 0xff;
	CORDON_SIPROUND;
	CORDON_SIPROUND;
	CORDON_SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

static __always_inline void cordon_sink_count(const struct cordon_sink *k, __u32 counter)
{
	__u64 *value = bpf_map_lookup_elem(k->counters, &counter);
	if (value)
		*value += 1; /* per-CPU slot: no atomics needed */
}

/* Writes a record of `size` bytes (as many as hdr's buffer holds) with the
 * sandbox's next sequence number, taken once the ring has room: a gap in
 * what a reader sees is then a record a reader lost (event_header.bpf.h).
 * hdr itself keeps seq 0. Returns 0 when written; the caller counts a drop. */
static __always_inline int cordon_sink_output(const struct cordon_sink *k, struct cordon_event_header *hdr, __u32 size)
{
	struct bpf_dynptr out;
	if (bpf_ringbuf_reserve_dynptr(k->ring, size, 0, &out)) {
		bpf_ringbuf_discard_dynptr(&out, 0);
		return -1;
	}
	hdr->seq = cordon_next_seq(k->seq);
	bpf_dynptr_write(&out, 0, hdr, size, 0);
	bpf_ringbuf_submit_dynptr(&out, 0);
	hdr->seq = 0;
	return 0;
}

/* One more occurrence counted in a repeats entry. first_ns is written before
 * the count, so whoever sees the count sees a time (racing writers only move
 * the times, never the count). */
static __always_inline void cordon_repeat_add(const struct cordon_sink *k, struct cordon_repeat_value *v, __u64 now)
{
	if (!*(volatile __u64 *)&v->count)
		v->first_ns = now;
	v->last_ns = now;
	__sync_fetch_and_add(&v->count, 1);
	cordon_sink_count(k, CORDON_CNT_REPEATS);
}

/* Opens the repeats entry of `key` with the record hdr (written, when count
 * is 0; else counted). A record longer than the entry holds (an object
 * record with a path over 104 bytes) is stored with the tail of its path
 * (CORDON_PATH_F_TRUNCATED).
 * Returns 0 when the entry holds it. */
static __always_inline int cordon_repeat_open(const struct cordon_sink *k, const struct cordon_repeat_key *key,
					      const struct cordon_event_header *hdr, __u32 size, __u64 now, __u64 count)
{
	struct cordon_repeat_value *s = k->scratch;
	s->window_ns = now;
	s->count = count;
	s->first_ns = count ? now : 0;
	s->last_ns = count ? now : 0;
	s->_pad = 0;
	__u64 n = size;
	/* The bound is checked on n itself: clang would check it on the path
	 * length size came from, which the verifier does not relate to size. */
	asm volatile("" : "+r"(n));
	if (n <= CORDON_REPEAT_RECORD_MAX) {
		s->size = n;
		bpf_probe_read_kernel(s->record, n, hdr);
	} else {
		/* Only an object record is longer: its fields, and the tail of
		 * its path (as the kernel cuts a path too long for a record). */
		struct cordon_object_event *o = (struct cordon_object_event *)s->record;
		const __u32 tail = CORDON_REPEAT_RECORD_MAX - sizeof(*o);
		s->size = CORDON_REPEAT_RECORD_MAX;
		bpf_probe_read_kernel(o, sizeof(*o), hdr);
		bpf_probe_read_kernel(o + 1, tail, (const char *)hdr + size - tail);
		o->hdr.size = CORDON_REPEAT_RECORD_MAX;
		o->path_len = tail;
		o->path_flags |= CORDON_PATH_F_TRUNCATED;
	}
	if (bpf_map_update_elem(k->repeats, key, s, BPF_NOEXIST) == 0) {
		if (count)
			cordon_sink_count(k, CORDON_CNT_REPEATS);
		return 0;
	}
	/* Another CPU opened it first, or the map is full. */
	struct cordon_repeat_value *v = bpf_map_lookup_elem(k->repeats, key);
	if (!v)
		return -1;
	if (count)
		cordon_repeat_add(k, v, now);
	return 0;
}

/* Whether an occurrence of `key` at `now` repeats one of its window: then it
 * is counted, and nothing is to be written. Lets a writer whose record is
 * costly to build (a path) ask before building it. */
static __always_inline int cordon_repeat_counted(const struct cordon_sink *k, const struct cordon_repeat_key *key,
						 __u64 now)
{
	struct cordon_repeat_value *v = bpf_map_lookup_elem(k->repeats, key);
	if (v && now - *(volatile __u64 *)&v->window_ns < CORDON_REPEAT_WINDOW_NS) {
		cordon_repeat_add(k, v, now);
		return 1;
	}
	return 0;
}

/* The repeats key of a net record: its (kind, verdict, reason, process) and
 * the keyed hash of its target (address, port, family, socket kind, rule). */
static __always_inline void cordon_net_repeat_key(const struct cordon_net_event *e, struct cordon_repeat_key *key)
{
	__builtin_memset(key, 0, sizeof(*key));
	key->kind = e->hdr.kind;
	key->verdict = e->hdr.verdict;
	key->reason = e->hdr.reason;
	key->pid = e->hdr.pid;
	__u64 a0, a1;
	__builtin_memcpy(&a0, e->addr, 8);
	__builtin_memcpy(&a1, e->addr + 8, 8);
	key->target = cordon_target_hash(
		a0, a1, (__u64)e->port << 48 | (__u64)e->family << 32 | (__u64)e->sock_type << 16 | e->protocol,
		e->hdr.rule, 0);
}

/* Writes a record of `key` (size bytes at hdr), unless it repeats one of its
 * key's window: then it is counted in the repeats map. The first record
 * after a window carries what the window counted. A full ring buffer counts
 * the record there too; it is lost (and counted as dropped) only when the
 * map is full as well. */
static __always_inline void cordon_repeat_submit(const struct cordon_sink *k, const struct cordon_repeat_key *key,
						 struct cordon_event_header *hdr, __u32 size)
{
	__u64 now = hdr->boot_ns;
	struct cordon_repeat_value *v = bpf_map_lookup_elem(k->repeats, key);
	if (v && now - *(volatile __u64 *)&v->window_ns < CORDON_REPEAT_WINDOW_NS) {
		cordon_repeat_add(k, v, now);
		return;
	}
	__u64 taken = v ? *(volatile __u64 *)&v->count : 0;
	if (taken) {
		hdr->repeats = taken;
		hdr->repeats_first_ns = v->first_ns;
		hdr->repeats_last_ns = v->last_ns;
	}
	if (cordon_sink_output(k, hdr, size) == 0) {
		if (v) {
			v->window_ns = now;
			if (taken) {
				v->first_ns = 0;
				/* Only what this record carries: increments racing
				 * with it stay counted for the next one. */
				__sync_fetch_and_add(&v->count, -taken);
			}
		} else {
			(void)cordon_repeat_open(k, key, hdr, size, now, 0);
		}
		return;
	}
	if (v) {
		cordon_repeat_add(k, v, now);
		return;
	}
	hdr->repeats = 0;
	hdr->repeats_first_ns = 0;
	hdr->repeats_last_ns = 0;
	if (cordon_repeat_open(k, key, hdr, size, now, 1))
		cordon_sink_count(k, CORDON_CNT_EVENTS_DROPPED);
}

#endif
