/* SPDX-License-Identifier: Apache-2.0 */
/* Config, counters and event emission shared by every hook. */
#ifndef CORDON_BPF_COMMON_H
#define CORDON_BPF_COMMON_H

#include "lib/maps.bpf.h"
#include "lib/event_header.bpf.h"
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

/* Reserves an event and fills the task fields. NULL (and the drop counted)
 * when the ring buffer is full: a lost event is never silent. */
static __always_inline struct cordon_net_event *
cordon_event_begin(const struct cordon_sandbox_cfg *cfg, __u16 kind, __u8 verdict, __u8 reason)
{
	struct cordon_net_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		cordon_count(CORDON_CNT_EVENTS_DROPPED);
		return NULL;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->hdr.size = sizeof(*e);
	cordon_event_header(&e->hdr, CORDON_EVL_NET, CORDON_LAYER_CGROUP, kind, verdict, reason, cfg->sandbox_id);
	return e;
}

static __always_inline void cordon_event_submit(struct cordon_net_event *e)
{
	bpf_ringbuf_submit(e, 0);
}

#endif
