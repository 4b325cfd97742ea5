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

/* Bumped whenever a pinned map layout or the event layout changes. A loader
 * refuses pinned state carrying another version instead of misreading it. */
#define CORDON_LAYOUT_VERSION 1

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
};

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
	CORDON_CNT_DENIED_FILE = 9,     /* file.* denials (BPF LSM) */
	CORDON_CNT_AUDITED_FILE = 10,
	CORDON_CNT_DENIED_TAMPER = 11,  /* tamper.* denials (BPF LSM) */
	CORDON_CNT_AUDITED_TAMPER = 12,
	CORDON_CNT_DENIED_LSM_NET = 13, /* net.socket (non-inet) and net.unix denials (BPF LSM) */
	CORDON_CNT_AUDITED_LSM_NET = 14,
	CORDON_CNT_MAX = 16,
};

#endif
