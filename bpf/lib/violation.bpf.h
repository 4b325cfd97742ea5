/* SPDX-License-Identifier: Apache-2.0 */
/*
 * spec.onViolation: contain, in the program that refused (or, for cordon
 * run's Landlock and seccomp, the one that reports the refusal): shared by
 * the sandbox's cgroup programs (bpf/lib/common.bpf.h, their own state and
 * cfg) and the BPF LSM and detect objects (bpf/lib/lsm_common.bpf.h, the
 * same two maps referenced by sandbox id), so that a refusal of any layer
 * counts towards the same contain.after and contains the sandbox the same
 * way.
 */
#ifndef CORDON_BPF_VIOLATION_H
#define CORDON_BPF_VIOLATION_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "abi/cordon_common.h"

/* A refusal in enforce mode (never an audited one, nor one of a contained
 * sandbox): counted in `st` when its kind is one of cfg->contain_kinds; at
 * cfg->contain_after refusals this program contains the sandbox itself, so
 * the next operation of any of its processes is refused without a round
 * trip to userspace. st may be NULL (a sandbox without a state: nothing).
 * Audit mode never contains, whatever refused (cordon run's read-only
 * mounts refuse in audit mode too). */
static __always_inline void cordon_count_violation(const struct cordon_sandbox_cfg *cfg,
						   struct cordon_sandbox_state *st, __u16 kind)
{
	__u32 after = cfg->contain_after;
	if (!after || cfg->mode == CORDON_MODE_AUDIT || kind >= 64 || !(cfg->contain_kinds & (1ULL << kind)) || !st)
		return;
	__sync_fetch_and_add(&st->violations, 1);
	if (*(volatile __u32 *)&st->violations < after || (*(volatile __u32 *)&st->flags & CORDON_STATE_F_CONTAINED))
		return;
	st->trigger_kind = kind;
	st->contained_boot_ns = bpf_ktime_get_boot_ns();
	/* One atomic OR, after the trigger: userspace changes other bits of
	 * this word with atomic operations of its own (the map is mmapable),
	 * so neither write loses the other's bits. */
	__sync_fetch_and_or((__u64 *)st, CORDON_STATE_FLAGS_WORD(CORDON_STATE_F_CONTAINED | CORDON_STATE_F_AUTO));
}

#endif
