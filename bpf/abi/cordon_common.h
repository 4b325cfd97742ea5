/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cordon ABI shared by the BPF programs and the C++ userspace.
 *
 * Plain C, fixed-width types, explicit padding. Included by both sides; the
 * C++ side static_asserts every size (userspace/abi_check.cc). Never mirror a
 * struct by hand: change it here.
 */
#ifndef CORDON_ABI_COMMON_H
#define CORDON_ABI_COMMON_H

#ifdef __bpf__
/* vmlinux.h provides __u8 .. __u64. */
#else
#include <linux/types.h>
#endif

/* Bumped whenever the layout of pinned state that a later cordon reads or
 * reuses changes (info, counters, events, the LSM objects' maps, the link
 * names), or the event layout. A loader refuses pinned state carrying another
 * version instead of misreading it. Maps that belong to one policy instance
 * and are never read back (sandbox_cfg, the rule tries) are replaced whole by
 * every attach, so their layout may change within a version. */
#define CORDON_LAYOUT_VERSION 6

/* Every ABI struct's size (and the offsets a reader depends on) is asserted
 * where it is defined, so that both compilers check it: clang -target bpf
 * (_Static_assert) and the C++ userspace (static_assert). A changed size
 * fails both builds until the number here is changed too, which is the
 * moment to bump CORDON_LAYOUT_VERSION if the struct is pinned state or an
 * event. */
#ifdef __cplusplus
#define CORDON_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define CORDON_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif
#define CORDON_ABI_SIZE(type, bytes) \
	CORDON_STATIC_ASSERT(sizeof(type) == (bytes), "ABI size of " #type " changed")
#define CORDON_ABI_OFFSET(type, field, bytes) \
	CORDON_STATIC_ASSERT(__builtin_offsetof(type, field) == (bytes), "ABI offset of " #type "." #field " changed")

enum cordon_mode {
	CORDON_MODE_ENFORCE = 0,
	CORDON_MODE_AUDIT = 1,
};

/* Per-sandbox configuration: array map with exactly one element. Mode is a
 * naturally aligned __u32 so flipping it with one map update is atomic for
 * readers. */
struct cordon_sandbox_cfg {
	__u64 sandbox_id;      /* cgroup id of the sandbox root cgroup */
	__u32 mode;            /* enum cordon_mode */
	__u32 families;        /* bit (1 << CORDON_FAM_*) set: socket family allowed */
	__u32 sock_protos;     /* bit (1 << CORDON_SP_*) set: extra inet protocol allowed */
	__u32 layout_version;  /* CORDON_LAYOUT_VERSION */
	__u32 unix_flags;      /* CORDON_UNIX_F_*: the cgroup unix-socket hooks */
	/* spec.onViolation: contain: after this many refusals (0: never) of the
	 * kinds in contain_kinds (bit 1 << enum cordon_event_kind), the program
	 * that refused sets CORDON_STATE_F_CONTAINED in the sandbox's state. */
	__u32 contain_after;
	__u64 contain_kinds;
};
CORDON_ABI_SIZE(struct cordon_sandbox_cfg, 40);
CORDON_ABI_OFFSET(struct cordon_sandbox_cfg, contain_kinds, 32);

/* Containment (`cordon contain`, spec.onViolation: contain): one element of
 * an array map pinned as "state" in the sandbox's directory. Unlike
 * sandbox_cfg it belongs to the sandbox, not to one policy instance: every
 * instance of the network object (a replacement too) shares it, as it shares
 * the counters. While CORDON_STATE_F_CONTAINED is set, every program of the
 * sandbox refuses first, whatever its policy allows; the policy itself stays
 * loaded, so clearing the flag restores it exactly, in one map write. */
struct cordon_sandbox_state {
	__u32 flags;             /* CORDON_STATE_F_* */
	__u32 violations;        /* refusals counted towards contain_after */
	__u64 contained_boot_ns; /* a program contained it: when (boot clock) */
	__u16 trigger_kind;      /* ... and the kind it refused (enum cordon_event_kind) */
	__u16 _pad[3];
};
CORDON_ABI_SIZE(struct cordon_sandbox_state, 24);
CORDON_ABI_OFFSET(struct cordon_sandbox_state, violations, 4);
CORDON_ABI_OFFSET(struct cordon_sandbox_state, contained_boot_ns, 8);
/* The map is mmapable: the programs and userspace change flags with atomic
 * operations on the same memory, so neither loses the other's bits (a map
 * update writes the whole value over what a program wrote meanwhile). BPF
 * has 32-bit atomic OR/AND only from -mcpu=v3: both sides use 64-bit ones on
 * the word of flags and violations, with these bits at flags' place. */
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define CORDON_STATE_FLAGS_WORD(bits) ((__u64)(bits) << 32)
#define CORDON_STATE_VIOLATIONS_WORD 0x00000000ffffffffULL
#else
#define CORDON_STATE_FLAGS_WORD(bits) ((__u64)(bits))
#define CORDON_STATE_VIOLATIONS_WORD 0xffffffff00000000ULL
#endif
#define CORDON_STATE_F_CONTAINED 1u /* every operation refused */
#define CORDON_STATE_F_AUTO 2u      /* set by a program (onViolation: contain), not by `cordon contain` */
#define CORDON_STATE_F_KILLED 4u    /* `cordon contain --kill` killed its processes: nothing to release */
#define CORDON_STATE_F_EVIDENCE 8u  /* the containment was completed in userspace: frozen, evidence taken */

/* cgroup/connect_unix and cgroup/sendmsg_unix (kernel 6.7+) decide unix
 * connects only where BPF LSM does not (it resolves paths to inodes; these
 * hooks see the address string as the caller wrote it). */
#define CORDON_UNIX_F_ENFORCE 1u   /* this layer decides */
#define CORDON_UNIX_F_PATHS 2u     /* pathname sockets need a rule granting write (spec.files given) */
#define CORDON_UNIX_F_ABSTRACT 4u  /* abstract sockets allowed (spec.network.abstractUnix) */

/* Indices of the per-CPU counters array (one per sandbox). */
enum cordon_counter {
	CORDON_CNT_DENIED_CONNECT = 0,
	CORDON_CNT_DENIED_SENDMSG = 1,
	CORDON_CNT_DENIED_SOCKET = 2,
	CORDON_CNT_AUDITED_CONNECT = 3,
	CORDON_CNT_AUDITED_SENDMSG = 4,
	CORDON_CNT_AUDITED_SOCKET = 5,
	CORDON_CNT_EVENTS_DROPPED = 6, /* ring buffer full: bpf_ringbuf_reserve failed */
	CORDON_CNT_ALLOWED_CONNECT = 7,
	CORDON_CNT_ALLOWED_SENDMSG = 8,
	CORDON_CNT_DENIED_FILE = 9, /* file.* refusals (BPF LSM, seccomp, Landlock) */
	CORDON_CNT_AUDITED_FILE = 10,
	CORDON_CNT_DENIED_TAMPER = 11, /* tamper.* denials (BPF LSM) */
	CORDON_CNT_AUDITED_TAMPER = 12,
	CORDON_CNT_DENIED_LSM_NET = 13, /* net.socket (non-inet) and net.unix denials (BPF LSM) */
	CORDON_CNT_AUDITED_LSM_NET = 14,
	/* Written by userspace only (never by BPF): the drop count already reported
	 * in loss records by the consumer (the agent, `cordon tail`, `cordon run`),
	 * so a restarted consumer reports only what is new. */
	CORDON_CNT_LOSS_REPORTED = 15,
	/* By verdict, whatever the kind: it happened and was seen afterwards
	 * (detect mode), or it happened and the task was then killed. Never in
	 * the DENIED_* slots: those count refusals only. */
	CORDON_CNT_DETECTED = 16,
	CORDON_CNT_KILLED = 17,
	/* Occurrences counted in the repeats map instead of written one record
	 * each (bpf/abi/cordon_event.h): they reach the trail as the `repeats`
	 * of a later record. Also counted under their verdict's slot above. */
	CORDON_CNT_REPEATS = 18,
	/* Written by userspace only, like LOSS_REPORTED: the last record sequence
	 * number (struct cordon_event_header.seq) a consumer of the ring buffer
	 * committed (wrote out), so a restarted one neither repeats nor loses. */
	CORDON_CNT_SEQ_COMMITTED = 19,
	CORDON_CNT_MAX = 20,
};

#endif
