/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shared by every LSM program: finding the caller's sandbox, the ancestry
 * walk that computes a path's rights (see bpf/abi/cordon_file.h for why it
 * resists aliasing), building the path for an event, and reporting.
 */
#ifndef CORDON_BPF_LSM_COMMON_H
#define CORDON_BPF_LSM_COMMON_H

#include "lib/lsm_maps.bpf.h"
#include "lib/event_header.bpf.h"
#include "lib/violation.bpf.h"
#include "lib/repeats.bpf.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#ifndef CORDON_DETECT
#define CORDON_DIR_CACHE 1
#include "lib/dir_cache.bpf.h"
#endif

CORDON_LSM_MAPS_DECLARE(extern);

#define EPERM 1
#define PROC_SUPER_MAGIC 0x9fa0
#define TMPFS_MAGIC 0x01021994
#define CGROUP2_SUPER_MAGIC 0x63677270
#define MAX_CGROUP_LEVELS 64

/* The sandbox of the calling task (its innermost sandbox cgroup), or NULL. */
static __always_inline const struct cordon_lsm_sandbox *cordon_current_sandbox(void)
{
	__u32 zero = 0;
	struct cordon_lsm_state *state = bpf_map_lookup_elem(&lsm_state, &zero);
	if (!state)
		return NULL;
	__u64 gen = state->generation;
	__u64 cgid = bpf_get_current_cgroup_id();
	__u64 sandbox_id = 0;
	struct cordon_cgroup_cache *cached = bpf_map_lookup_elem(&cgroup_cache, &cgid);
	if (cached && cached->gen == gen) {
		sandbox_id = cached->sandbox_id;
	} else {
		struct task_struct *task = bpf_get_current_task_btf();
		int level = BPF_CORE_READ(task, cgroups, dfl_cgrp, level);
		for (int i = 0; i < MAX_CGROUP_LEVELS; i++) {
			int l = level - i;
			if (l < 0)
				break;
			__u64 anc = bpf_get_current_ancestor_cgroup_id(l);
			if (bpf_map_lookup_elem(&lsm_sandboxes, &anc)) {
				sandbox_id = anc;
				break;
			}
		}
		struct cordon_cgroup_cache fresh = { .sandbox_id = sandbox_id, .gen = gen };
		bpf_map_update_elem(&cgroup_cache, &cgid, &fresh, BPF_ANY);
	}
	if (!sandbox_id)
		return NULL;
	return bpf_map_lookup_elem(&lsm_sandboxes, &sandbox_id);
}

#ifndef CORDON_DETECT
/* A file whose open was audited (audit mode: reported, and let through),
 * until lsm/file_free_security (key: struct file *): what its open asked
 * for, under which policy version. Its reads and writes within that are
 * that one refusal's consequences, not refusals of their own: they are not
 * reported again (one event per would-be refusal, README "Audit mode"). A
 * new policy version (a switch to enforce) judges them afresh. */
struct cordon_audited_open {
	__u64 sandbox_id;
	__u32 version;
	__u32 rights;
};

/* Credentials prepared by a task inside a sandbox (key: struct cred *,
 * value: that sandbox's id), from lsm/cred_prepare until lsm/cred_free; and
 * files whose owner (F_SETOWN) a sandboxed task set (key: struct file *,
 * value: the sandbox's id), until lsm/file_free_security; and files whose
 * open was audited (struct cordon_audited_open). Defined in
 * bpf/lsm/creds.bpf.c. */
#define CORDON_LSM_OWNER_MAPS(storage)                                         \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_HASH);                               \
		__uint(max_entries, 1 << 20);                                  \
		__uint(map_flags, BPF_F_NO_PREALLOC);                          \
		__type(key, __u64);                                            \
		__type(value, __u64);                                          \
	} sandbox_creds SEC(".maps");                                          \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_HASH);                               \
		__uint(max_entries, 65536);                                    \
		__uint(map_flags, BPF_F_NO_PREALLOC);                          \
		__type(key, __u64);                                            \
		__type(value, __u64);                                          \
	} fown_sandbox SEC(".maps");                                           \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_LRU_HASH);                           \
		__uint(max_entries, 65536);                                    \
		__type(key, __u64);                                            \
		__type(value, struct cordon_audited_open);                     \
	} audited_opens SEC(".maps")
#ifdef CORDON_OWNER_MAPS_DEFINE
CORDON_LSM_OWNER_MAPS();
#else
CORDON_LSM_OWNER_MAPS(extern);
#endif
#endif

/* Each sandbox's containment state (bpf/abi/cordon_common.h), the map its
 * network programs read and set (onViolation: contain), referenced by
 * sandbox id from attach until detach: a sandbox its own cgroup programs
 * contained is contained here too, with no round trip to userspace. The
 * inner template is the network object's sandbox_state (an array's type,
 * sizes, flags and max_entries must match). The detect object has them too:
 * the refusals of cordon run's Landlock and seccomp it reports count there
 * (it judges nothing itself, so containment changes nothing it does). */
#define CORDON_LSM_STATE_MAPS(storage)                                         \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);                       \
		__uint(max_entries, 16384);                                    \
		__type(key, __u64);                                            \
		__array(values, struct {                                       \
			__uint(type, BPF_MAP_TYPE_ARRAY);                      \
			__uint(max_entries, 1);                                \
			__uint(map_flags, BPF_F_MMAPABLE);                     \
			__type(key, __u32);                                    \
			__type(value, struct cordon_sandbox_state);            \
		});                                                            \
	} sandbox_states SEC(".maps");                                         \
	/* Each sandbox's network sandbox_cfg (contain_after and               \
	 * contain_kinds), by policy version like the egress tries:            \
	 * this object's refusals count towards onViolation: contain. */       \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);                       \
		__uint(max_entries, 16384);                                    \
		__type(key, struct cordon_lsm_net_key);                        \
		__array(values, struct {                                       \
			__uint(type, BPF_MAP_TYPE_ARRAY);                      \
			__uint(max_entries, 1);                                \
			__type(key, __u32);                                    \
			__type(value, struct cordon_sandbox_cfg);              \
		});                                                            \
	} sandbox_cfgs SEC(".maps")
/* clang 14 emits only a forward declaration for a struct named this deep in
 * a map definition (see CORDON_LSM_EGRESS_MAPS), in the definition and in
 * every extern declaration alike (libbpf cannot size it): this makes it
 * whole in each object file. */
static const volatile struct cordon_sandbox_state cordon_state_btf_type __attribute__((used));
static const volatile struct cordon_sandbox_cfg cordon_cfg_btf_type __attribute__((used));
/* Defined by bpf/lsm/creds.bpf.c in the BPF LSM object, by detect.bpf.c (its
 * one program file) in the detect object. */
#if defined(CORDON_OWNER_MAPS_DEFINE) || defined(CORDON_DETECT)
CORDON_LSM_STATE_MAPS();
#else
CORDON_LSM_STATE_MAPS(extern);
#endif

/* Whether the sandbox is contained: by userspace (`cordon contain` sets its
 * entry's CORDON_LSM_F_CONTAINED once its processes are frozen, so that none
 * sees a file access refused half-way) or by its own cgroup programs
 * (onViolation: contain sets CONTAINED|AUTO in its state, which this object
 * reads in place: refused from the next check on, with no round trip). */
static __always_inline int cordon_lsm_contained(const struct cordon_lsm_sandbox *sb)
{
	if (sb->flags & CORDON_LSM_F_CONTAINED)
		return 1;
#ifdef CORDON_DETECT
	return 0;
#else
	__u64 sandbox_id = sb->sandbox_id;
	void *states = bpf_map_lookup_elem(&sandbox_states, &sandbox_id);
	if (!states)
		return 0;
	__u32 zero = 0;
	struct cordon_sandbox_state *st = bpf_map_lookup_elem(states, &zero);
	const __u32 by_kernel = CORDON_STATE_F_CONTAINED | CORDON_STATE_F_AUTO;
	return st && (*(volatile __u32 *)&st->flags & by_kernel) == by_kernel;
#endif
}

/* Whether a check made with credentials `cred` on behalf of the calling
 * (sandboxed) task is the sandbox's to judge. Every check is, whatever the
 * task's credentials, except one made while the kernel overrides them with
 * credentials no sandboxed task prepared: the only such case a sandboxed
 * task can reach is overlayfs acting with its creator's credentials (taken
 * by whoever mounted it, outside the sandbox: a sandbox cannot mount) to
 * copy a file up, open the real lower/upper file or read its own
 * trusted.overlay.* xattrs. That is the filesystem's own work on its layers,
 * already judged at the overlay path the task asked for.
 * Judged although overridden: credentials the task prepared itself (the core
 * dump writer, faccessat, io-wq workers running a request with the
 * submitter's newer credentials) are in sandbox_creds. io_uring personalities
 * and SQPOLL (whose credentials may predate the sandbox) are refused
 * (lsm/uring_override_creds, lsm/uring_sqpoll), so they never get here. */
static __always_inline int cordon_cred_judged(const struct cred *cred)
{
#ifdef CORDON_DETECT
	return 1; /* at system call exit nothing is overridden */
#else
	struct task_struct *task = bpf_get_current_task_btf();
	if (cred == BPF_CORE_READ(task, real_cred))
		return 1;
	__u64 key = (__u64)cred;
	if (bpf_map_lookup_elem(&sandbox_creds, &key))
		return 1;
	/* Overridden (or another task's credentials, e.g. a file's f_cred):
	 * not the sandbox's to judge. */
	return 0;
#endif
}

/* `sb` (the caller's sandbox, or NULL) if its policy restricts files (has
 * spec.files). */
static __always_inline const struct cordon_lsm_sandbox *cordon_file_sandbox_of(const struct cordon_lsm_sandbox *sb)
{
	if (!sb || !((sb->flags & CORDON_LSM_F_FILES) || cordon_lsm_contained(sb)))
		return NULL;
	struct task_struct *task = bpf_get_current_task_btf();
	if (!cordon_cred_judged(BPF_CORE_READ(task, cred)))
		return NULL;
	return sb;
}

/* The caller's sandbox if its policy restricts files (has spec.files). */
static __always_inline const struct cordon_lsm_sandbox *cordon_file_sandbox(void)
{
	return cordon_file_sandbox_of(cordon_current_sandbox());
}

/* Whether a cgroup is inside the sandbox subtree. */
static __always_inline int cordon_cgroup_in_sandbox(struct cgroup *cgrp, const struct cordon_lsm_sandbox *sb)
{
	if (!cgrp)
		return 0;
	int level = BPF_CORE_READ(cgrp, level);
	if (level < (int)sb->level || sb->level >= MAX_CGROUP_LEVELS)
		return 0;
	struct cgroup *anc = NULL;
	__u32 idx = sb->level & (MAX_CGROUP_LEVELS - 1); /* a local: see cordon_walk_step */
	bpf_core_read(&anc, sizeof(anc), &cgrp->ancestors[idx]);
	return BPF_CORE_READ(anc, kn, id) == sb->sandbox_id;
}

/* Whether a task is inside the sandbox subtree (for signals, ptrace). */
static __always_inline int cordon_task_in_sandbox(struct task_struct *task,
						  const struct cordon_lsm_sandbox *sb)
{
	struct cgroup *cgrp = BPF_CORE_READ(task, cgroups, dfl_cgrp);
	int level = BPF_CORE_READ(cgrp, level);
	if (level < (int)sb->level || sb->level >= MAX_CGROUP_LEVELS)
		return 0;
	struct cgroup *anc = NULL;
	__u32 idx = sb->level & (MAX_CGROUP_LEVELS - 1); /* a local: see cordon_walk_step */
	bpf_core_read(&anc, sizeof(anc), &cgrp->ancestors[idx]);
	return BPF_CORE_READ(anc, kn, id) == sb->sandbox_id;
}

/* The writer named in this object's events. */
#ifdef CORDON_DETECT
#define CORDON_LSM_LAYER CORDON_LAYER_DETECT
#else
#define CORDON_LSM_LAYER CORDON_LAYER_LSM
#endif

/* A counter index no slot has: the event is not counted (observations). */
#define CORDON_CNT_NONE 0xffffffffu

/* The slot an event of `verdict` counts in: the caller's per-kind slots for
 * refusals and audits, the per-verdict ones for what happened (detected,
 * killed); none for an observation (CORDON_CNT_NONE). */
static __always_inline __u32 cordon_verdict_counter(__u8 verdict, __u32 denied_counter, __u32 audited_counter)
{
	if (denied_counter == CORDON_CNT_NONE)
		return CORDON_CNT_NONE;
	switch (verdict) {
	case CORDON_VERDICT_AUDITED:
		return audited_counter;
	case CORDON_VERDICT_DETECTED:
		return CORDON_CNT_DETECTED;
	case CORDON_VERDICT_KILLED:
		return CORDON_CNT_KILLED;
	default:
		return denied_counter;
	}
}

static __always_inline void cordon_lsm_count(__u64 sandbox_id, __u32 counter)
{
	void *counters = bpf_map_lookup_elem(&sandbox_counters, &sandbox_id);
	if (!counters)
		return;
	__u64 *value = bpf_map_lookup_elem(counters, &counter);
	if (value)
		*value += 1;
}

/* The hook's return for `verdict`: -EPERM when denied, else 0. Kept a
 * choice between two values the verifier knows: clang makes `denied ?
 * -EPERM : 0` a negation of the comparison, which verifiers before 6.13
 * track as an unknown value, and then refuse the program's return. */
static __always_inline int cordon_hook_return(__u8 verdict)
{
	int refused = -EPERM;
	asm volatile("" : "+r"(refused));
	return verdict == CORDON_VERDICT_DENIED ? refused : 0;
}

/* spec.onViolation: contain: a refusal of this layer (denied, not because
 * the sandbox is already contained) counts like one of the sandbox's cgroup
 * programs, in the same state with the same cfg (bpf/lib/violation.bpf.h),
 * and contains the sandbox at contain.after. In the detect object the
 * refusals are those of cordon run's Landlock, seccomp filter and read-only
 * mounts, which it alone reports (they refuse before BPF LSM is asked, so
 * none is counted twice); its detected violations (after the fact) do not
 * count. Counted before any repeats check: a repeat is a refusal too. */
static __always_inline void cordon_lsm_violation(const struct cordon_lsm_sandbox *sb, __u8 verdict, __u16 kind,
						 __u8 reason)
{
	if (verdict != CORDON_VERDICT_DENIED || reason == CORDON_REASON_CONTAINED)
		return;
	__u32 zero = 0;
	struct cordon_lsm_scratch *s = bpf_map_lookup_elem(&lsm_scratch, &zero);
	if (!s)
		return;
	s->cfg_key.sandbox_id = sb->sandbox_id;
	s->cfg_key.version = sb->version;
	s->cfg_key.pad = 0;
	void *cfgs = bpf_map_lookup_elem(&sandbox_cfgs, &s->cfg_key);
	void *states = bpf_map_lookup_elem(&sandbox_states, &s->cfg_key.sandbox_id);
	if (!cfgs || !states)
		return;
	const struct cordon_sandbox_cfg *cfg = bpf_map_lookup_elem(cfgs, &zero);
	if (cfg)
		cordon_count_violation(cfg, bpf_map_lookup_elem(states, &zero), kind);
}

/* Counts a decision of this layer: in its verdict's slot, and towards
 * onViolation: contain. */
static __always_inline void cordon_lsm_tally(const struct cordon_lsm_sandbox *sb, __u8 verdict, __u16 kind, __u8 reason,
					     __u32 denied_counter, __u32 audited_counter)
{
	cordon_lsm_count(sb->sandbox_id, cordon_verdict_counter(verdict, denied_counter, audited_counter));
	cordon_lsm_violation(sb, verdict, kind, reason);
}

/* Writes a record of `size` bytes (at most sizeof(*hdr)'s buffer allows)
 * into the sandbox's ring buffer with the sandbox's next sequence number
 * (lib/repeats.bpf.h, cordon_sink_output). A full ring counts a drop. */
static __always_inline void cordon_lsm_output(__u64 sandbox_id, void *ring, struct cordon_event_header *hdr, __u32 size)
{
	__u32 zero = 0;
	void *seqs = bpf_map_lookup_elem(&sandbox_seqs, &sandbox_id);
	struct cordon_sink k = {.ring = ring, .seq = seqs ? bpf_map_lookup_elem(seqs, &zero) : NULL};
	if (cordon_sink_output(&k, hdr, size))
		cordon_lsm_count(sandbox_id, CORDON_CNT_EVENTS_DROPPED);
}

/* The sandbox's sink for records that repeats may count (lib/repeats.bpf.h),
 * its ring buffer being `ring`. 0 when it has one: a sandbox registered by a
 * cordon without repeats for this object (no counters or repeats map here)
 * has every record written (cordon_lsm_output). */
static __always_inline int cordon_lsm_sink(__u64 sandbox_id, void *ring, struct cordon_lsm_scratch *s,
					   struct cordon_sink *k)
{
	__u32 zero = 0;
	void *counters = bpf_map_lookup_elem(&sandbox_counters, &sandbox_id);
	void *repeats = bpf_map_lookup_elem(&sandbox_repeats, &sandbox_id);
	if (!counters || !repeats)
		return -1;
	void *seqs = bpf_map_lookup_elem(&sandbox_seqs, &sandbox_id);
	k->ring = ring;
	k->counters = counters;
	k->seq = seqs ? bpf_map_lookup_elem(seqs, &zero) : NULL;
	k->repeats = repeats;
	k->scratch = &s->repeat;
	return 0;
}

static __always_inline struct mount *cordon_real_mount(struct vfsmount *mnt)
{
	return (struct mount *)((void *)mnt - bpf_core_field_offset(struct mount, mnt));
}

/* The repeats key of an object record (lib/repeats.bpf.h): its (kind,
 * verdict, reason, process) and a hash of what it names: the fields of the
 * record, and for a path what the path is built from: the object (inode,
 * device), its name in its parent directory (the name's hash and length,
 * the parent's inode) and the mount (its id). Two paths of one file (hard links,
 * bind mounts) are two targets; a file created and denied has no inode yet
 * and is told apart by its name. Taken before the path is built, so that a
 * repeat costs no path walk. */
static __always_inline void cordon_lsm_repeat_key(const struct cordon_object_event *e, struct dentry *dentry,
						  struct vfsmount *mnt, struct cordon_repeat_key *key)
{
	/* The kernel's fields first: read before the record's, so that the
	 * record's are not held in stack slots across the reads (a hook's frame
	 * and the walk's bpf_loop callback share 512 bytes). */
	__u64 name = 0, parent = 0, mount = 0;
	if (dentry) {
		name = BPF_CORE_READ(dentry, d_name.hash_len);
		parent = BPF_CORE_READ(dentry, d_parent, d_inode, i_ino);
		if (mnt)
			mount = BPF_CORE_READ(cordon_real_mount(mnt), mnt_id);
	}
	asm volatile("" ::: "memory");
	__builtin_memset(key, 0, sizeof(*key));
	key->kind = e->hdr.kind;
	key->verdict = e->hdr.verdict;
	key->reason = e->hdr.reason;
	key->pid = e->hdr.pid;
	__u64 h = cordon_target_hash((__u64)e->access << 32 | e->granted, (__u64)e->hdr.rule << 32 | e->target_pid,
				     (__u64)e->arg << 32 | e->arg2, 0, 0);
	if (dentry) {
		h = cordon_target_hash(h, e->ino, e->dev, name, parent);
		h = cordon_target_hash(h, mount, 0, 0, 0);
	}
	key->target = h;
}

/* ---- the ancestry walk ------------------------------------------------- */

struct cordon_walk {
	struct dentry *dentry;
	struct vfsmount *mnt;  /* NULL: stay inside the dentry's filesystem */
	struct pid *self_pid;  /* non-NULL: grant the task's own /proc/<pid> */
	__u64 sandbox_id;
	__u32 version;
	__u32 want;            /* stop once all granted; 0: collect everything */
	__u32 granted;
	__u32 rule;
	__u32 steps;
	__u32 complete;        /* reached the root (or satisfied want) */
	__u32 detached;        /* ended at the root of a mount outside the task's namespace */
	__u32 contained;       /* the sandbox is contained: nothing granted, no walk */
#ifdef CORDON_DIR_CACHE
	/* The directory whose in-mount result is being computed for the cache
	 * (fill_ino == 0: none); its tags, and rights/rule met since it. */
	__u64 epoch;
	__u64 fill_ino;
	__u64 fill_root_ino;
	__u32 fill_dev;
	__u32 fill_granted;
	__u32 fill_rule;
#endif
};

/* Leaves the walk's current mount at its root: on to the mountpoint, or done
 * at the root of the mount tree. */
static __always_inline long cordon_walk_cross(struct cordon_walk *w, struct vfsmount *mnt)
{
	struct mount *m = cordon_real_mount(mnt);
	struct mount *up = BPF_CORE_READ(m, mnt_parent);
	if (up == m) {
		/* The top of a mount tree: the task's namespace's root, or a
		 * detached tree (open_tree clone whose fd is closed, a private
		 * clone) or another namespace's root (cordon_walk tells which).
		 * Rules name objects, so whatever was met on the way counts;
		 * nothing above does. w->mnt stays at this mount. */
		w->complete = 1;
		return 1;
	}
	w->dentry = BPF_CORE_READ(m, mnt_mountpoint);
	w->mnt = &up->mnt;
	return 0;
}

/* Why a walk that did not grant `want` denies. */
static __always_inline __u8 cordon_walk_reason(const struct cordon_walk *w)
{
	if (w->contained)
		return CORDON_REASON_CONTAINED;
	if (w->granted & CORDON_FILE_FORBIDDEN)
		return CORDON_REASON_CORDON_STATE;
	if (!w->complete)
		return CORDON_REASON_PATH_TOO_DEEP;
	return w->detached ? CORDON_REASON_DETACHED_MOUNT : CORDON_REASON_FILE_RULE;
}

static __always_inline int cordon_walk_done(struct cordon_walk *w)
{
	/* cordon's own state: nothing above can grant it. */
	if ((w->want && (w->granted & w->want) == w->want) || (w->granted & CORDON_FILE_FORBIDDEN)) {
		w->complete = 1;
		return 1;
	}
	return 0;
}

#ifdef CORDON_DIR_CACHE
/* A valid cache entry for the walk's fill directory: its rights and rule
 * into the fill. Compared field by field against a copy (see dir_cache.bpf.h). */
static __always_inline int cordon_dir_get(struct cordon_walk *w)
{
	struct cordon_dir_key key = { .sandbox_id = w->sandbox_id, .ino = w->fill_ino, .dev = w->fill_dev };
	struct cordon_dir_entry *stored = bpf_map_lookup_elem(&dir_cache, &key);
	if (!stored)
		return 0;
	struct cordon_dir_entry e;
	__builtin_memcpy(&e, stored, sizeof(e));
	asm volatile("" ::: "memory"); /* judge the copy only */
	if (e.check != cordon_dir_check(&e) || e.sandbox_id != w->sandbox_id || e.ino != w->fill_ino ||
	    e.dev != w->fill_dev || e.epoch != w->epoch || e.version != w->version || e.root_ino != w->fill_root_ino)
		return 0;
	w->fill_granted = e.granted;
	w->fill_rule = e.rule;
	return 1;
}

static __always_inline void cordon_dir_put(const struct cordon_walk *w)
{
	struct cordon_dir_entry e = {
		.sandbox_id = w->sandbox_id,
		.ino = w->fill_ino,
		.epoch = w->epoch,
		.root_ino = w->fill_root_ino,
		.dev = w->fill_dev,
		.version = w->version,
		.granted = w->fill_granted,
		.rule = w->fill_rule,
	};
	e.check = cordon_dir_check(&e);
	struct cordon_dir_key key = { .sandbox_id = w->sandbox_id, .ino = w->fill_ino, .dev = w->fill_dev };
	bpf_map_update_elem(&dir_cache, &key, &e, BPF_ANY);
}
#endif

static long cordon_walk_step(__u32 index, void *data)
{
	struct cordon_walk *w = data;
	struct dentry *d = w->dentry;
	if (!d)
		return 1;
	w->steps++;
	struct inode *inode = BPF_CORE_READ(d, d_inode);
	struct super_block *sb = BPF_CORE_READ(d, d_sb);
	struct dentry *parent = BPF_CORE_READ(d, d_parent);
	/* Locals only in BPF_CORE_READ chains: a field of this (non-kernel)
	 * struct inside one would become an unresolvable CO-RE relocation. */
	struct vfsmount *mnt = w->mnt;
	if (inode) {
		struct cordon_inode_key key = {
			.sandbox_id = w->sandbox_id,
			.ino = BPF_CORE_READ(inode, i_ino),
			.dev = BPF_CORE_READ(sb, s_dev),
			.version = w->version,
		};
		struct cordon_inode_rule *r = bpf_map_lookup_elem(&file_rules, &key);
		__u32 rights = 0, rule = 0;
		if (r) {
			rights = r->rights;
			rule = r->rule;
			w->granted |= rights;
			if (!w->rule)
				w->rule = rule;
		}
		/* The task's own /proc/<tgid>: procfs inodes of other processes
		 * share nothing a rule could name, so this is decided by pid. */
		if (w->self_pid && parent != d && BPF_CORE_READ(sb, s_magic) == PROC_SUPER_MAGIC &&
		    BPF_CORE_READ(parent, d_parent) == parent) {
			struct proc_inode *pi = (struct proc_inode *)((void *)inode -
				bpf_core_field_offset(struct proc_inode, vfs_inode));
			if (BPF_CORE_READ(pi, pid) == w->self_pid)
				w->granted |= CORDON_FILE_READ | CORDON_FILE_WRITE;
		}
#ifdef CORDON_DIR_CACHE
		if (w->fill_ino) {
			/* Filling: on to the mount's root even when granted. */
			w->fill_granted |= rights;
			if (!w->fill_rule)
				w->fill_rule = rule;
		} else {
			if (cordon_walk_done(w))
				return 1;
			/* Not decided here: this directory's rights up to its
			 * mount's root from the cache, or start computing them. */
			if (mnt && cordon_dir_cacheable(inode, sb) && (w->epoch = cordon_dir_epoch()) != ~0ULL) {
				/* The epoch is read here, before this directory's part
				 * of the walk: a move during it invalidates the entry. */
				struct dentry *root = BPF_CORE_READ(mnt, mnt_root);
				w->fill_ino = key.ino;
				w->fill_dev = key.dev;
				w->fill_root_ino = BPF_CORE_READ(root, d_inode, i_ino);
				if (cordon_dir_get(w)) {
					w->granted |= w->fill_granted;
					if (!w->rule)
						w->rule = w->fill_rule;
					w->fill_ino = 0;
					if (cordon_walk_done(w))
						return 1;
					return cordon_walk_cross(w, mnt);
				}
				w->fill_granted = rights;
				w->fill_rule = rule;
			}
		}
#else
		if (cordon_walk_done(w))
			return 1;
#endif
	}
	if (mnt && d == BPF_CORE_READ(mnt, mnt_root)) {
#ifdef CORDON_DIR_CACHE
		if (w->fill_ino) {
			cordon_dir_put(w);
			w->fill_ino = 0;
			if (cordon_walk_done(w))
				return 1;
		}
#endif
		return cordon_walk_cross(w, mnt);
	}
	/* The root of a filesystem outside any mount walk, or a disconnected
	 * dentry: done, and nothing to remember (no mount root was reached). */
	if (parent == d) {
		w->complete = 1;
		return 1;
	}
	w->dentry = parent;
	return 0;
}

/* Rights of a path. Returns the walk's result in *w. */
static __always_inline void cordon_walk(struct cordon_walk *w, const struct cordon_lsm_sandbox *sb,
					struct dentry *dentry, struct vfsmount *mnt, __u32 want)
{
	__builtin_memset(w, 0, sizeof(*w));
	w->dentry = dentry;
	w->mnt = mnt;
	w->sandbox_id = sb->sandbox_id;
	w->version = sb->version;
	w->want = want;
	if (cordon_lsm_contained(sb)) {
		w->contained = 1;
		w->complete = 1;
		return;
	}
	if (sb->flags & CORDON_LSM_F_PROC_SELF) {
		struct task_struct *task = bpf_get_current_task_btf();
		w->self_pid = BPF_CORE_READ(task, group_leader, thread_pid);
	}
	bpf_loop(CORDON_WALK_MAX, cordon_walk_step, w, 0);
	/* Below cordon's own state: no right at all (whatever was met before
	 * the mark or is cached above it), and the mark for the reason. */
	if (w->granted & CORDON_FILE_FORBIDDEN) {
		w->granted = CORDON_FILE_FORBIDDEN;
		w->rule = 0;
		return;
	}
	/* Ended at the top of a mount tree that is not the task's namespace's
	 * (decided here, not in the step: 6.7+ verify bpf_loop callbacks to
	 * convergence, so the step is kept as small as possible). */
	struct vfsmount *last = w->mnt;
	if (w->complete && last) {
		struct mount *m = cordon_real_mount(last);
		if (BPF_CORE_READ(m, mnt_parent) == m) {
			struct task_struct *task = bpf_get_current_task_btf();
			if (BPF_CORE_READ(m, mnt_ns) != BPF_CORE_READ(task, nsproxy, mnt_ns))
				w->detached = 1;
		}
	}
}

/* ---- paths for events ------------------------------------------------- */

struct cordon_path_build {
	struct dentry *dentry;
	struct vfsmount *mnt;
	struct dentry *root_dentry; /* the task's root (chroot): paths are shown from there, as d_path does */
	struct vfsmount *root_mnt;
	struct cordon_lsm_scratch *s; /* s->build: the path, assembled right to left from s->build_pos */
	__u32 flags;
};

static long cordon_path_step(__u32 index, void *data)
{
	struct cordon_path_build *p = data;
	struct dentry *d = p->dentry;
	if (!d)
		return 1;
	struct vfsmount *mnt = p->mnt;
	if (d == p->root_dentry && mnt == p->root_mnt)
		return 1;
	if (mnt && d == BPF_CORE_READ(mnt, mnt_root)) {
		struct mount *m = cordon_real_mount(mnt);
		struct mount *up = BPF_CORE_READ(m, mnt_parent);
		if (up == m)
			return 1;
		p->dentry = BPF_CORE_READ(m, mnt_mountpoint);
		p->mnt = &up->mnt;
		return 0;
	}
	struct dentry *parent = BPF_CORE_READ(d, d_parent);
	if (parent == d)
		return 1;
	__u32 len = BPF_CORE_READ(d, d_name.len);
	const unsigned char *name = BPF_CORE_READ(d, d_name.name);
	if (len > 255)
		len = 255;
	/* The position lives in the map value, not in *p on the stack: the
	 * verifier knows nothing of a map value's contents, so every
	 * iteration's state is the same and the callback converges at once
	 * (a constant start on the stack made 6.18's verifier explore every
	 * reachable position, over its 1M-instruction limit once inlined at
	 * each report site). */
	struct cordon_lsm_scratch *s = p->s;
	__u32 pos = s->build_pos;
	if (pos < len + 1) {
		p->flags |= CORDON_PATH_F_TRUNCATED;
		return 1;
	}
	pos -= len;
	bpf_probe_read_kernel(s->build + (pos & (CORDON_PATH_MAX - 1)), len & 255, name);
	pos -= 1;
	s->build[pos & (CORDON_PATH_MAX - 1)] = '/';
	s->build_pos = pos;
	p->dentry = parent;
	return 0;
}

/* Emits an event with the given verdict and counts it. Returns the hook
 * verdict for `verdict`: -EPERM when denied, else 0. dentry may be NULL. */
static __always_inline int cordon_lsm_emit(const struct cordon_lsm_sandbox *sb, __u8 verdict, __u16 kind,
					   __u8 reason, __u32 access, __u32 granted, __u32 rule,
					   struct dentry *dentry, struct vfsmount *mnt,
					   __u32 target_pid, __u32 arg, __u32 arg2,
					   __u32 denied_counter, __u32 audited_counter)
{
	__u64 sandbox_id = sb->sandbox_id;
	cordon_lsm_tally(sb, verdict, kind, reason, denied_counter, audited_counter);

	__u32 zero = 0;
	struct cordon_lsm_scratch *s = bpf_map_lookup_elem(&lsm_scratch, &zero);
	void *ring = bpf_map_lookup_elem(&sandbox_events, &sandbox_id);
	if (!s || !ring) {
		cordon_lsm_count(sandbox_id, CORDON_CNT_EVENTS_DROPPED);
		return cordon_hook_return(verdict);
	}
	struct cordon_object_event *e = &s->ev;
	__builtin_memset(e, 0, sizeof(*e));
	cordon_event_header(&e->hdr, CORDON_EVL_OBJECT, CORDON_LSM_LAYER, kind, verdict, reason, sandbox_id);
	e->hdr.rule = rule;
	struct task_struct *task = bpf_get_current_task_btf();
	e->access = access;
	e->granted = granted;
	e->target_pid = target_pid;
	e->arg = arg;
	e->arg2 = arg2;
	if (dentry) {
		struct inode *inode = BPF_CORE_READ(dentry, d_inode);
		if (inode) {
			e->ino = BPF_CORE_READ(inode, i_ino);
			e->dev = BPF_CORE_READ(dentry, d_sb, s_dev);
		}
	}
	/* A repeat of its window is counted, not written (lib/repeats.bpf.h). */
	struct cordon_repeat_key *key = &s->repeat_key;
	struct cordon_sink k;
	const int repeats = cordon_lsm_sink(sandbox_id, ring, s, &k) == 0;
	if (repeats) {
		cordon_lsm_repeat_key(e, dentry, mnt, key);
		if (cordon_repeat_counted(&k, key, e->hdr.boot_ns))
			return cordon_hook_return(verdict);
	}

	__u32 path_len = 0;
	if (dentry) {
		struct cordon_path_build p = {
			.dentry = dentry, .mnt = mnt, .s = s,
		};
		s->build_pos = CORDON_PATH_MAX - 1;
		p.root_dentry = BPF_CORE_READ(task, fs, root.dentry);
		p.root_mnt = BPF_CORE_READ(task, fs, root.mnt);
		bpf_loop(CORDON_WALK_MAX, cordon_path_step, &p, 0);
		struct dentry *last = p.dentry;
		/* Stopped early, unless at the root of a detached tree or of
		 * another namespace (the path is then shown from that root). */
		struct vfsmount *last_mnt = p.mnt;
		int at_top = 0;
		if (last_mnt && last == BPF_CORE_READ(last_mnt, mnt_root)) {
			struct mount *m = cordon_real_mount(last_mnt);
			at_top = BPF_CORE_READ(m, mnt_parent) == m;
		}
		if (last && last != p.root_dentry && BPF_CORE_READ(last, d_parent) != last && !at_top &&
		    !(p.flags & CORDON_PATH_F_TRUNCATED))
			p.flags |= CORDON_PATH_F_TOO_DEEP;
		__u32 pos = s->build_pos;
		path_len = (CORDON_PATH_MAX - 1) - pos;
		if (path_len == 0) {
			s->path[0] = '/';
			path_len = 1;
		} else {
			bpf_probe_read_kernel(s->path, path_len & (CORDON_PATH_MAX - 1),
					      s->build + (pos & (CORDON_PATH_MAX - 1)));
		}
		e->path_flags = p.flags;
	}
	path_len &= CORDON_PATH_MAX - 1;
	e->path_len = path_len;
	e->hdr.size = sizeof(*e) + path_len;
	if (repeats)
		cordon_repeat_submit(&k, key, &e->hdr, sizeof(*e) + path_len);
	else
		cordon_lsm_output(sandbox_id, ring, &e->hdr, sizeof(*e) + path_len);
	return cordon_hook_return(verdict);
}

/* Emits a net-layout record (net.socket; connects and datagrams of sockets
 * made outside the sandbox) with the given verdict and counts it. addr (16
 * bytes) may be NULL. Returns -EPERM when denied, else 0. */
static __always_inline int cordon_lsm_emit_net(const struct cordon_lsm_sandbox *sb, __u8 verdict, __u16 kind,
					       __u8 reason, __u32 rule, const __u8 *addr, __u16 port,
					       __u16 family, __u16 sock_type, __u16 protocol,
					       __u32 denied_counter, __u32 audited_counter)
{
	__u64 sandbox_id = sb->sandbox_id;
	cordon_lsm_tally(sb, verdict, kind, reason, denied_counter, audited_counter);
	struct cordon_net_event e;
	__builtin_memset(&e, 0, sizeof(e));
	e.hdr.size = sizeof(e);
	cordon_event_header(&e.hdr, CORDON_EVL_NET, CORDON_LSM_LAYER, kind, verdict, reason, sandbox_id);
	e.hdr.rule = rule;
	if (addr)
		__builtin_memcpy(e.addr, addr, 16);
	e.port = port;
	e.family = family;
	e.sock_type = sock_type;
	e.protocol = protocol;
	__u32 zero = 0;
	struct cordon_lsm_scratch *s = bpf_map_lookup_elem(&lsm_scratch, &zero);
	void *ring = bpf_map_lookup_elem(&sandbox_events, &sandbox_id);
	struct cordon_sink k;
	if (!s || !ring) {
		cordon_lsm_count(sandbox_id, CORDON_CNT_EVENTS_DROPPED);
	} else if (cordon_lsm_sink(sandbox_id, ring, s, &k) == 0) {
		struct cordon_repeat_key key;
		cordon_net_repeat_key(&e, &key);
		cordon_repeat_submit(&k, &key, &e.hdr, sizeof(e));
	} else {
		cordon_lsm_output(sandbox_id, ring, &e.hdr, sizeof(e));
	}
	return cordon_hook_return(verdict);
}

/* The verdict of this layer on something its policy does not allow. */
static __always_inline __u8 cordon_lsm_verdict(const struct cordon_lsm_sandbox *sb)
{
	int audit = sb->mode == CORDON_MODE_AUDIT && !cordon_lsm_contained(sb);
#ifdef CORDON_DETECT
	/* Detect mode: the operation already happened; report it, and kill
	 * the process before it returns to user space if the policy says so. */
	int kill = !audit && (sb->flags & CORDON_LSM_F_KILL);
	if (kill)
		bpf_send_signal(9);
	return kill ? CORDON_VERDICT_KILLED : CORDON_VERDICT_DETECTED;
#else
	return audit ? CORDON_VERDICT_AUDITED : CORDON_VERDICT_DENIED;
#endif
}

/* Reports a decision of this layer. Returns the hook's verdict: 0 (allowed,
 * audit mode) or -EPERM. */
static __always_inline int cordon_lsm_report(const struct cordon_lsm_sandbox *sb, __u16 kind, __u8 reason,
					     __u32 access, __u32 granted, __u32 rule,
					     struct dentry *dentry, struct vfsmount *mnt,
					     __u32 target_pid, __u32 arg, __u32 arg2,
					     __u32 denied_counter, __u32 audited_counter)
{
	__u8 verdict = cordon_lsm_verdict(sb);
#ifndef CORDON_DETECT
	/* cordon's own state: refused in audit mode too (a policy in audit
	 * mode, `cordon learn`, would hand the signing key over). */
	if (reason == CORDON_REASON_CORDON_STATE)
		verdict = CORDON_VERDICT_DENIED;
#endif
	return cordon_lsm_emit(sb, verdict, kind, reason, access, granted, rule, dentry, mnt, target_pid, arg, arg2,
			       denied_counter, audited_counter);
}

/* Checks `want` on a path and reports a denial. Returns the hook verdict. */
static __always_inline int cordon_check_path(const struct cordon_lsm_sandbox *sb, __u16 kind,
					     struct dentry *dentry, struct vfsmount *mnt, __u32 want)
{
	struct cordon_walk w;
	cordon_walk(&w, sb, dentry, mnt, want);
	if ((w.granted & want) == want)
		return 0;
	return cordon_lsm_report(sb, kind, cordon_walk_reason(&w), want, w.granted, w.rule, dentry, mnt, 0, 0, 0,
				 CORDON_CNT_DENIED_FILE, CORDON_CNT_AUDITED_FILE);
}

#define CORDON_MNT_INTERNAL 0x4000   /* include/linux/mount.h */
#define CORDON_SB_KERNMOUNT (1 << 22) /* include/linux/fs.h */

/* Anonymous objects: pipes, sockets, anon inodes, memfd, nsfs: files of
 * kernel-internal mounts (kern_mount(): MNT_INTERNAL on the mount,
 * SB_KERNMOUNT on the superblock), which no path of any tree reaches.
 * Not a mount without a namespace: open_tree(OPEN_TREE_CLONE) clones whose
 * fd was closed and mounts of another namespace have none (or another) and
 * are judged by the walk like any other (the walk ends at their root). */
static __always_inline int cordon_is_anonymous(struct vfsmount *mnt)
{
	int mnt_flags = BPF_CORE_READ(mnt, mnt_flags);
	unsigned long sb_flags = BPF_CORE_READ(mnt, mnt_sb, s_flags);
	return (mnt_flags & CORDON_MNT_INTERNAL) || (sb_flags & CORDON_SB_KERNMOUNT);
}

#endif
