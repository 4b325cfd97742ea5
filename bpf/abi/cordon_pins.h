/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pinned state of an attached sandbox, under
 *   <bpffs>/cordon/v<CORDON_LAYOUT_VERSION>/sandboxes/<sandbox cgroup id>/
 * holding the maps (sandbox_cfg, addr_rules, port_rules, counters, events, repeats, seq),
 * the links (link_connect4 ...), `info`: an array map with one
 * struct cordon_sandbox_info, written only by userspace, and `quiet` (below).
 * Enforcement lives in the links; it survives every cordon process exiting or
 * crashing.
 */
#ifndef CORDON_ABI_PINS_H
#define CORDON_ABI_PINS_H

#include "cordon_common.h"

/* The repeats map (struct cordon_repeat_key -> struct cordon_repeat_value,
 * bpf/abi/cordon_event.h), shared by the sandbox's instances. */
#define CORDON_REPEATS_PIN "repeats"
/* The sequence counter of the sandbox's records (one __u64: the last
 * struct cordon_event_header.seq given), shared by its instances and, through
 * their sandbox_seqs maps, the BPF LSM and detect objects. */
#define CORDON_SEQ_PIN "seq"
/* spec.resources.egressBytes: the sandbox's bytes sent (struct
 * cordon_egress_usage) and bytes per destination (bpf/abi/cordon_net.h),
 * shared by its instances. A sandbox attached by a cordon without them gets
 * them at its next replacement (counting from then). */
#define CORDON_EGRESS_PIN "egress"
#define CORDON_EGRESS_DESTS_PIN "egress_dests"

#define CORDON_NAME_MAX 64
#define CORDON_CGROUP_PATH_MAX 3896
#define CORDON_DIGEST_MAX 72

struct cordon_sandbox_info {
	__u32 layout_version;           /* CORDON_LAYOUT_VERSION */
	__u32 mode;                     /* enum cordon_mode, as last set */
	__u64 sandbox_id;               /* cgroup id */
	__u64 attached_at_ns;           /* CLOCK_REALTIME of the first attach */
	__u64 updated_at_ns;            /* CLOCK_REALTIME of the last policy change */
	__u32 generation;               /* policy replacements so far */
	__u32 flags;                    /* CORDON_INFO_F_* */
	char name[CORDON_NAME_MAX];     /* sandbox name */
	char policy[CORDON_NAME_MAX];   /* policy metadata.name */
	char cgroup_path[CORDON_CGROUP_PATH_MAX]; /* relative to the cgroup2 mount */
	/* The policy in force: "sha256:" and 64 hex digits of its text as read
	 * (what sha256sum prints), or "builtin:default". Carved out of what was
	 * the end of cgroup_path: a record written before it has zeros here
	 * (digest unknown), and the size and layout version are unchanged. */
	char policy_digest[CORDON_DIGEST_MAX];
};
CORDON_ABI_SIZE(struct cordon_sandbox_info, 4136);

/* Created by `cordon run`: ephemeral, removed with its command. */
#define CORDON_INFO_F_EPHEMERAL 1u
/* Registered with the BPF LSM object: file, exec, family and tamper rules enforced. */
#define CORDON_INFO_F_LSM 2u
/* `cordon run` confined the command with Landlock / a seccomp filter. */
#define CORDON_INFO_F_LANDLOCK 4u
#define CORDON_INFO_F_SECCOMP 8u
/* File and exec rules checked after the fact (detect mode), with SIGKILL. */
#define CORDON_INFO_F_DETECT 16u
#define CORDON_INFO_F_DETECT_KILL 32u
/* Attached with degraded enforcement allowed (some controls its policy asks
 * for are not enforced on this kernel): an update keeps that acceptance. */
#define CORDON_INFO_F_DEGRADED 64u

/*
 * `quiet`: the policy's spec.quiet patterns, for the readers of the ring
 * buffer (the agent, `cordon tail`, `cordon run`), which mark the events they
 * match quiet (userspace/policy/quiet.h). Userspace only: no BPF program
 * uses it. An array map of one element whose value is a struct
 * cordon_quiet_header followed by `length` bytes (the value is exactly that
 * long): a cordon.v1.Spec (policy/proto/cordon/v1/policy.proto) holding only
 * `quiet`, serialized. Written at attach; a policy replacement pins a new map
 * over it (rename, atomic) before it bumps the info's generation.
 * `generation` is the info generation the patterns belong to: a reader that
 * finds another one (a replacement in progress, or one by a cordon without
 * this pin) uses no patterns until the generations agree. A sandbox without
 * the pin (attached by an earlier cordon) has no patterns. Its presence
 * changes no other pinned struct: the layout version is unchanged.
 */
#define CORDON_QUIET_PIN "quiet"
#define CORDON_QUIET_MAX_BYTES (1024 * 1024)
struct cordon_quiet_header {
	__u32 generation; /* cordon_sandbox_info.generation these patterns are for */
	__u32 length;	  /* bytes that follow */
};
CORDON_ABI_SIZE(struct cordon_quiet_header, 8);

#endif
