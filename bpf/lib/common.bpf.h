/* SPDX-License-Identifier: Apache-2.0 */
/* Config, counters and event emission shared by every hook. */
#ifndef CORDON_BPF_COMMON_H
#define CORDON_BPF_COMMON_H

#include "lib/maps.bpf.h"
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
static __always_inline struct cordon_event *
cordon_event_begin(const struct cordon_sandbox_cfg *cfg, __u16 kind, __u8 verdict, __u8 reason)
{
	struct cordon_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		cordon_count(CORDON_CNT_EVENTS_DROPPED);
		return NULL;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->size = sizeof(*e);
	e->kind = kind;
	e->verdict = verdict;
	e->reason = reason;
	e->boot_ns = bpf_ktime_get_boot_ns();
	e->sandbox_id = cfg->sandbox_id;
	e->cgroup_id = bpf_get_current_cgroup_id();
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	e->pid = pid_tgid >> 32;
	e->tid = (__u32)pid_tgid;
	__u64 uid_gid = bpf_get_current_uid_gid();
	e->uid = (__u32)uid_gid;
	e->gid = uid_gid >> 32;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	e->ppid = BPF_CORE_READ(task, real_parent, tgid);
	return e;
}

static __always_inline void cordon_event_submit(struct cordon_event *e)
{
	bpf_ringbuf_submit(e, 0);
}

#endif
