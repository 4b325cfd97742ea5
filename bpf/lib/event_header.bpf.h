/* SPDX-License-Identifier: Apache-2.0 */
/* The part of every event record that describes the calling task. */
#ifndef CORDON_BPF_EVENT_HEADER_H
#define CORDON_BPF_EVENT_HEADER_H

#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "abi/cordon_event.h"

/* Fills the header of a zeroed record: its layout and writer, what, when,
 * which sandbox, who. The writer sets e->size. */
static __always_inline void cordon_event_header(struct cordon_event_header *e, __u8 layout, __u8 layer,
						__u16 kind, __u8 verdict, __u8 reason, __u64 sandbox_id)
{
	e->layout = layout;
	e->layer = layer;
	e->kind = kind;
	e->verdict = verdict;
	e->reason = reason;
	e->boot_ns = bpf_ktime_get_boot_ns();
	e->sandbox_id = sandbox_id;
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
}

/* The sandbox's next sequence number (struct cordon_event_header.seq), from
 * its `seq` map (the last number given), shared by every writer of its
 * records: the network object's instances, the BPF LSM and detect objects
 * (sandbox_seqs). A map of its own, not a field of the containment state,
 * which userspace rewrites whole. Taken only once the ring buffer has room
 * for the record (after a reserve): a gap in what a reader sees is then a
 * record a reader lost, never one the kernel dropped (counted in
 * CORDON_CNT_EVENTS_DROPPED) or folded into a repeats count. 0 without the
 * map (never expected: the loader registers it with the ring buffer). */
static __always_inline __u64 cordon_next_seq(__u64 *last)
{
	return last ? __sync_fetch_and_add(last, 1) + 1 : 0;
}

#endif
