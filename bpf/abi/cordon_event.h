/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Violation events, written by the BPF programs into the sandbox's ring
 * buffer and decoded by userspace/event_decoder.cc into the AuditEvent
 * protobuf (userspace/proto/event.proto).
 */
#ifndef CORDON_ABI_EVENT_H
#define CORDON_ABI_EVENT_H

#include "cordon_common.h"

enum cordon_event_kind {
	CORDON_EV_NET_CONNECT = 1,
	CORDON_EV_NET_SENDMSG = 2,
	CORDON_EV_NET_SOCKET = 3,
};

enum cordon_verdict {
	CORDON_VERDICT_DENIED = 1,
	CORDON_VERDICT_AUDITED = 2,
};

enum cordon_reason {
	CORDON_REASON_NO_RULE = 1,           /* destination matches no egress rule */
	CORDON_REASON_PORT = 2,              /* address matches, port/protocol does not */
	CORDON_REASON_FAMILY = 3,            /* socket family not in spec.network.families */
	CORDON_REASON_SOCK_KIND = 4,         /* raw or non-TCP/UDP protocol not allowed */
};

struct cordon_event {
	__u32 size;          /* sizeof(struct cordon_event) as the writer knew it */
	__u16 kind;          /* enum cordon_event_kind */
	__u8 verdict;        /* enum cordon_verdict */
	__u8 reason;         /* enum cordon_reason */
	__u64 boot_ns;       /* bpf_ktime_get_boot_ns() */
	__u64 sandbox_id;    /* cgroup id of the sandbox root */
	__u64 cgroup_id;     /* cgroup id of the offending task */
	__u32 pid;
	__u32 tid;
	__u32 ppid;
	__u32 uid;
	__u32 gid;
	__u32 rule;          /* 1-based rule index for port denials, else 0 */
	char comm[16];
	/* net.* */
	__u8 addr[16];       /* IPv6 or ::ffff:a.b.c.d */
	__u16 port;          /* host order */
	__u16 family;        /* AF_INET / AF_INET6 as passed by the caller */
	__u16 sock_type;     /* SOCK_STREAM, SOCK_DGRAM, SOCK_RAW ... */
	__u16 protocol;      /* IPPROTO_* */
};

#endif
