/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cordon_object_event records written by the network object's cgroup programs
 * (net.unix, net.sockopt, tamper.device, tamper.sysctl) into the sandbox's
 * ring buffer, with repeats counted (lib/repeats.bpf.h).
 */
#ifndef CORDON_BPF_FILE_EVENT_H
#define CORDON_BPF_FILE_EVENT_H

#include "lib/common.bpf.h"
#include "abi/cordon_file.h"

/* Writes one record: the task header, access/arg/arg2, and (when path_cap >
 * 0) path_len bytes of `path` (more than path_cap: cut there and marked
 * truncated; path_flags: CORDON_PATH_F_*). path_cap must be a compile-time
 * constant, at most CORDON_OBJECT_PATH_MAX. A net.unix path starting with a
 * NUL (abstract) is shown as "@name", as ss(8) does. The record is built in
 * the per-CPU room of obj_scratch and written unless it repeats one of its
 * key's window (lib/repeats.bpf.h: the kind, verdict, reason, process and the
 * keyed hash of access, arg, arg2 and the path): a flood of one refused
 * unix connect, sockopt, device or sysctl costs a count, not the ring. */
static __always_inline void cordon_object_event_emit(const struct cordon_sandbox_cfg *cfg, __u16 kind, __u8 verdict,
						     __u8 reason, __u32 access, __u32 arg, __u32 arg2, const char *path,
						     __u32 path_len, const __u32 path_cap, __u32 path_flags)
{
	__u32 zero = 0;
	struct cordon_object_record *r = bpf_map_lookup_elem(&obj_scratch, &zero);
	struct cordon_sink k;
	if (!r || cordon_net_sink(&k)) {
		cordon_count(CORDON_CNT_EVENTS_DROPPED);
		return;
	}
	struct cordon_object_event *e = &r->e;
	__builtin_memset(r, 0, sizeof(*r));
	cordon_event_header(&e->hdr, CORDON_EVL_OBJECT, CORDON_LAYER_CGROUP, kind, verdict, reason, cfg->sandbox_id);
	e->access = access;
	e->arg = arg;
	e->arg2 = arg2;
	e->path_flags = path_flags;
	__u32 len = 0;
	if (path_cap > 0 && path) {
		__u64 n = path_len;
		if (n > path_cap) {
			n = path_cap;
			e->path_flags |= CORDON_PATH_F_TRUNCATED;
		}
		/* The bound is checked on n itself (clang would fold it into
		 * the one above, which the verifier does not carry over). */
		asm volatile("" : "+r"(n));
		if (n > CORDON_OBJECT_PATH_MAX)
			n = CORDON_OBJECT_PATH_MAX;
		bpf_probe_read_kernel(r->path, n, path);
		len = n;
	}
	/* An abstract name (a leading NUL) is another target than the path
	 * "@name" it is shown as: the key says which. */
	__u64 abstract = 0;
	if (kind == CORDON_EV_NET_UNIX && len && r->path[0] == 0) {
		abstract = 1ULL << 31;
		r->path[0] = '@';
	}
	e->path_len = len;
	e->hdr.size = sizeof(*e) + len;
	/* The path's words, zero past its end (the memset): one path, one key. */
	const __u64 *w = (const __u64 *)r->path;
	struct cordon_repeat_key key = {
		.kind = kind,
		.verdict = verdict,
		.reason = reason,
		.pid = e->hdr.pid,
	};
	__u64 h = cordon_target_hash((__u64)access << 32 | abstract | len, (__u64)arg << 32 | arg2, w[0], w[1], w[2]);
	h = cordon_target_hash(h, w[3], w[4], w[5], w[6]);
	h = cordon_target_hash(h, w[7], w[8], w[9], w[10]);
	key.target = cordon_target_hash(h, w[11], w[12], w[13], 0);
	cordon_repeat_submit(&k, &key, &e->hdr, sizeof(*e) + len);
}

#endif
