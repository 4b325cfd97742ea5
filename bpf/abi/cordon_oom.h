/* SPDX-License-Identifier: Apache-2.0 */
/*
 * OOM victims (issue 17: a resource.memory oom_kill event names the process
 * the kernel killed). bpf/oom/oom.bpf.c records every task the OOM killer
 * marks as its victim (tracepoint oom:mark_victim, with the task pointer) in
 * the hash map `oom_victims`; the resource watcher (userspace/ops/
 * oom_victims.cc) takes the ones of a sandbox's cgroup subtree when that
 * cgroup's oom_kill counter rises. The object is loaded by the watching
 * process (`cordon run`, the agent) and never pinned: its layout may change
 * freely (no CORDON_LAYOUT_VERSION), and a victim marked while no watcher
 * has it loaded is not recorded (the event then gives the count only).
 */
#ifndef CORDON_ABI_OOM_H
#define CORDON_ABI_OOM_H

#include "cordon_common.h"

/* Victims kept until taken; when full, the least recently written goes
 * (an LRU hash): a watcher that finds fewer victims than kills says so. */
#define CORDON_OOM_VICTIMS_MAX 1024

/* One per victim process: the tracepoint fires once per thread marked, and
 * the threads of one process share the key. */
struct cordon_oom_victim_key {
	__u64 cgroup_id; /* the victim task's cgroup on the unified (v2) hierarchy */
	__u32 tgid;	 /* the victim process */
	__u32 _pad;
};
CORDON_ABI_SIZE(struct cordon_oom_victim_key, 16);

struct cordon_oom_victim {
	__u64 boot_ns; /* bpf_ktime_get_boot_ns() when it was marked */
	__u32 tid;     /* the thread marked */
	__u32 uid;     /* its real uid (as the tracepoint gives it) */
	char comm[16]; /* the victim thread's comm */
};
CORDON_ABI_SIZE(struct cordon_oom_victim, 32);

#endif
