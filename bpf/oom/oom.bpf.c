/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Records each OOM victim (bpf/abi/cordon_oom.h). tp_btf/mark_victim has the
 * victim's task pointer (mark_oom_victim(), kernel 6.1 as Debian ships it,
 * 6.12, 6.18): its own cgroup is read, not the current task's, which in a
 * global OOM may be any task of the host. Runs only when the OOM killer
 * marks a victim: no cost anywhere else.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "abi/cordon_oom.h"

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, CORDON_OOM_VICTIMS_MAX);
	__type(key, struct cordon_oom_victim_key);
	__type(value, struct cordon_oom_victim);
} oom_victims SEC(".maps");

SEC("tp_btf/mark_victim")
int BPF_PROG(cordon_oom_victim, struct task_struct *task, __u32 uid)
{
	struct cordon_oom_victim_key key = {};
	struct cordon_oom_victim v = {};

	key.cgroup_id = BPF_CORE_READ(task, cgroups, dfl_cgrp, kn, id);
	key.tgid = BPF_CORE_READ(task, tgid);
	v.boot_ns = bpf_ktime_get_boot_ns();
	v.tid = BPF_CORE_READ(task, pid);
	v.uid = uid;
	BPF_CORE_READ_STR_INTO(&v.comm, task, comm);
	bpf_map_update_elem(&oom_victims, &key, &v, BPF_ANY);
	return 0;
}
