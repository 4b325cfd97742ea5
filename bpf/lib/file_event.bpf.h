/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cordon_object_event records written by the network object's cgroup programs
 * (net.sockopt, tamper.device, tamper.sysctl) into the sandbox's ring buffer.
 */
#ifndef CORDON_BPF_FILE_EVENT_H
#define CORDON_BPF_FILE_EVENT_H

#include "lib/common.bpf.h"
#include "abi/cordon_file.h"

/* Writes one record: the task header, arg/arg2, and (when path_cap > 0) up to
 * path_cap bytes of `path` (path_len of them meaningful; more is marked
 * truncated; path_flags: CORDON_PATH_F_*). path_cap must be a compile-time constant. A full ring buffer
 * counts a drop: a lost event is never silent. */
static __always_inline void cordon_object_event_emit(const struct cordon_sandbox_cfg *cfg, __u16 kind, __u8 verdict,
						   __u8 reason, __u32 arg, __u32 arg2, const char *path,
						   __u32 path_len, const __u32 path_cap, __u32 path_flags)
{
	struct cordon_object_event *e = bpf_ringbuf_reserve(&events, sizeof(struct cordon_object_event) + path_cap, 0);
	if (!e) {
		cordon_count(CORDON_CNT_EVENTS_DROPPED);
		return;
	}
	__builtin_memset(e, 0, sizeof(*e));
	cordon_event_header(&e->hdr, CORDON_EVL_OBJECT, CORDON_LAYER_CGROUP, kind, verdict, reason, cfg->sandbox_id);
	e->hdr.seq = cordon_next_seq(cordon_seq());
	e->arg = arg;
	e->path_flags = path_flags;
	e->arg2 = arg2;
	__u32 len = 0;
	if (path_cap > 0 && path) {
		len = path_len;
		if (len > path_cap) {
			len = path_cap;
			e->path_flags |= CORDON_PATH_F_TRUNCATED;
		}
		bpf_probe_read_kernel((char *)(e + 1), path_cap, path);
	}
	e->path_len = len;
	e->hdr.size = sizeof(*e) + len;
	bpf_ringbuf_submit(e, 0);
}

#endif
