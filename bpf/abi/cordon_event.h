/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Violation events, written by the BPF programs into the sandbox's ring
 * buffer and decoded by userspace/events/decoder.cc into the AuditEvent
 * protobuf (userspace/proto/event.proto).
 */
#ifndef CORDON_ABI_EVENT_H
#define CORDON_ABI_EVENT_H

#include "cordon_common.h"

enum cordon_event_kind {
	CORDON_EV_NET_CONNECT = 1,
	CORDON_EV_NET_SENDMSG = 2,
	CORDON_EV_NET_SOCKET = 3,
	CORDON_EV_NET_UNIX = 4, /* connect/send to a unix socket */
	/* bind() refused: cgroup bind4/bind6 write a cordon_net_event (address, port);
	 * BPF LSM (abstract unix names) a cordon_object_event with the name as path. */
	CORDON_EV_NET_BIND = 5,
	/* setsockopt() refused (cgroup/setsockopt): a cordon_object_event without
	 * path, arg = level, arg2 = optname. */
	CORDON_EV_NET_SOCKOPT = 6,
	CORDON_EV_FILE_OPEN = 10,
	CORDON_EV_FILE_CREATE = 11, /* create, mkdir, mknod, symlink */
	CORDON_EV_FILE_UNLINK = 12, /* unlink, rmdir */
	CORDON_EV_FILE_RENAME = 13,
	CORDON_EV_FILE_LINK = 14,
	CORDON_EV_FILE_EXEC = 15,
	CORDON_EV_FILE_MMAP_EXEC = 16,
	CORDON_EV_FILE_SETATTR = 17, /* truncate, chmod, chown, setxattr, removexattr */
	CORDON_EV_FILE_IOCTL = 18,   /* ioctl refused: inode flags, or a command outside the safe set (arg = cmd) */
	CORDON_EV_FILE_MEMFD = 19,   /* memfd_create refused (spec.files.allowMemfdExec is false) */
	CORDON_EV_TAMPER_BPF = 30,
	CORDON_EV_TAMPER_SIGNAL = 31,
	CORDON_EV_TAMPER_PTRACE = 32,
	CORDON_EV_TAMPER_MOUNT = 33,
	CORDON_EV_TAMPER_MODULE = 34,
	CORDON_EV_TAMPER_USERNS = 35,
	CORDON_EV_TAMPER_CLOCK = 36,
	CORDON_EV_TAMPER_REBOOT = 37,
	CORDON_EV_TAMPER_CGROUP = 38,
	CORDON_EV_TAMPER_CAPABILITY = 39,
	CORDON_EV_TAMPER_IO_URING = 40,
	CORDON_EV_TAMPER_TERMINAL =
		41, /* terminal injection or hangup: TIOCSTI, TIOCLINUX, vhangup ... (arg = cmd or nr) */
	CORDON_EV_TAMPER_SCHED = 42,	   /* scheduling class or priority of another process */
	CORDON_EV_TAMPER_RLIMIT = 43,	   /* resource limits of another process */
	CORDON_EV_TAMPER_SYSLOG = 44,	   /* the kernel log through syslog(2) */
	CORDON_EV_TAMPER_NOTIFY = 45,	   /* fanotify, or inotify/dnotify marks outside the allowed files */
	CORDON_EV_TAMPER_KEYRING = 46,	   /* keyrings: add_key, request_key, keyctl, or a key from outside */
	CORDON_EV_TAMPER_IPC = 47,	   /* System V IPC or POSIX message queue objects from outside */
	CORDON_EV_TAMPER_ACCT = 48,	   /* process accounting: acct() */
	CORDON_EV_TAMPER_PERSONALITY = 49, /* personality flags that weaken ASLR or W^X (arg = persona) */
	CORDON_EV_TAMPER_DEVICE =
		50, /* device access outside the safe set (cgroup/dev: arg = major << 20 | minor, arg2 = access) */
	CORDON_EV_TAMPER_SYSCTL =
		51, /* /proc/sys write, or read outside the safe set (cgroup/sysctl: path = name, arg = 1 write) */
	CORDON_EV_TAMPER_ABI =
		52, /* a system call of another ABI: x32 (cordon run's seccomp filter; arg = the number, bit 30 set) */
	/* A sandboxed process began a core dump (BPF LSM cred_prepare of the dump
	 * writer): verdict detected, path = its working directory (where a relative
	 * core_pattern writes). Where the dump may go is judged by the file rules:
	 * BPF LSM reports its own refusals as file.*; in `cordon run` Landlock
	 * refuses first and reports nothing, so this is the record. */
	CORDON_EV_PROC_COREDUMP = 60,
	/* A sandbox's credential file (spec.credentials, deliver: file) opened
	 * by a task outside that sandbox: one of another sandbox, or an
	 * unconfined task that is not root (BPF LSM lsm/file_open; reason
	 * CORDON_REASON_OUTSIDE_SANDBOX, path = the file, arg/arg2 = low/high
	 * 32 bits of the owning sandbox's id). Written to the caller's sandbox's
	 * ring buffer, or the owner's for an unconfined caller. */
	CORDON_EV_CREDENTIAL_READ = 61,
	/* spec.resources.egressBytes (cgroup_skb/egress, bpf/net/inbound.bpf.c):
	 * the sandbox's bytes sent crossed warnAt of the budget (verdict
	 * detected) or the budget itself (verdict denied: from then on its
	 * packets are dropped). Layout CORDON_EVL_RESOURCE, one record per
	 * crossing of each threshold, never one per packet. */
	CORDON_EV_RESOURCE_EGRESS = 62,
};

enum cordon_verdict {
	CORDON_VERDICT_DENIED = 1,
	CORDON_VERDICT_AUDITED = 2,
	CORDON_VERDICT_DETECTED = 3,        /* seen after the fact (detect mode), not prevented */
	CORDON_VERDICT_KILLED = 4,          /* detected, and the process was sent SIGKILL */
};

enum cordon_reason {
	CORDON_REASON_NO_RULE = 1,	     /* destination matches no egress rule */
	CORDON_REASON_PORT = 2,		     /* address matches, port/protocol does not */
	CORDON_REASON_FAMILY = 3,	     /* socket family not in spec.network.families */
	CORDON_REASON_SOCK_KIND = 4,	     /* raw or non-TCP/UDP protocol not allowed */
	CORDON_REASON_FILE_RULE = 5,	     /* no files rule grants the access */
	CORDON_REASON_PATH_TOO_DEEP = 6,     /* ancestry deeper than CORDON_WALK_MAX */
	CORDON_REASON_LINK_GAIN = 7,	     /* link/rename would grant more rights */
	CORDON_REASON_DEVICE_NODE = 8,	     /* mknod of a char/block device */
	CORDON_REASON_MEMFD_EXEC = 9,	     /* exec/mmap of an anonymous file */
	CORDON_REASON_ABSTRACT_UNIX = 10,    /* abstract unix socket */
	CORDON_REASON_OUTSIDE_SANDBOX = 11,  /* target task/cgroup outside the sandbox */
	CORDON_REASON_FORBIDDEN = 12,	     /* operation never allowed in a sandbox */
	CORDON_REASON_SECCOMP = 13,	     /* refused by cordon run's seccomp filter (arg: syscall nr) */
	CORDON_REASON_UNIX_PATH = 14,	     /* unix socket path, as written, under no rule granting write */
	CORDON_REASON_UNIX_UNCHECKABLE = 15, /* relative unix socket path, or one with a ".." component */
	CORDON_REASON_LANDLOCK =
		16, /* refused by cordon run's Landlock ruleset (seen as EACCES/EXDEV at syscall exit) */
	CORDON_REASON_NO_LISTEN_RULE = 17, /* bind address/port matches no spec.network.listen rule */
	CORDON_REASON_CAPABILITY = 18,	   /* capability not in spec.capabilities (arg: capability number) */
	CORDON_REASON_DETACHED_MOUNT = 19, /* object reached through a detached mount or another mount namespace */
	CORDON_REASON_NOT_SAFE = 20,	   /* device, sysctl, ioctl or option outside the documented safe set */
	CORDON_REASON_FOREIGN_SOCKET = 21, /* socket created outside the sandbox: its destination is not allowed, or its
					      kind (raw ...) never is (BPF LSM) */
	CORDON_REASON_COREDUMP = 22,	   /* a core dump began (observed, not a denial) */
	CORDON_REASON_READ_ONLY_MOUNT = 23, /* a write on a read-only mount (cordon run's /sys, /proc/sysrq-trigger
					       ...), seen as EROFS at syscall exit */
	CORDON_REASON_CONTAINED =
		24, /* the sandbox is contained: every operation is refused (cordon contain, onViolation: contain) */
	CORDON_REASON_EGRESS_BUDGET = 25, /* spec.resources.egressBytes: the warn share or the budget was reached */
	CORDON_REASON_CORDON_STATE =
		26, /* cordon's own state (/var/lib/cordon): refused to every sandbox whatever its policy */
	CORDON_REASON_DNS_DIVERTED =
		27, /* UDP to a destination no rule allows, sent to the sandbox's DNS resolver instead */
	CORDON_REASON_MAX = 27,
};

/* Every record is a header naming its layout, then that layout's payload.
 * The layout is never guessed from the kind or the size: a record whose
 * size does not match its layout is rejected by the decoder. */
enum cordon_event_layout {
	CORDON_EVL_NET = 1,    /* struct cordon_net_event: an address, port, socket kind */
	CORDON_EVL_OBJECT = 2, /* struct cordon_object_event: an object (path), a target, arguments */
	CORDON_EVL_RESOURCE = 3, /* struct cordon_resource_event: a counter, its limit, the packet that crossed */
};

/* Which program wrote the record: the layer that decided, unless the reason
 * names another (seccomp and Landlock refusals are reported by BPF LSM or the
 * detect object, which see them at syscall exit). */
enum cordon_event_layer {
	CORDON_LAYER_CGROUP = 1, /* the sandbox's cgroup programs (connect, sendmsg, sock_create, bind, unix, ...) */
	CORDON_LAYER_LSM = 2,    /* the host-wide BPF LSM object */
	CORDON_LAYER_DETECT = 3, /* the detect object (tracepoints; no BPF LSM) */
};

struct cordon_event_header {
	__u32 size;          /* the whole record's size as the writer knew it */
	__u16 kind;          /* enum cordon_event_kind */
	__u8 verdict;        /* enum cordon_verdict */
	__u8 reason;         /* enum cordon_reason */
	__u8 layout;         /* enum cordon_event_layout */
	__u8 layer;          /* enum cordon_event_layer */
	__u8 _pad[2];
	__u32 rule;          /* 1-based rule index for port denials, else 0 */
	__u64 boot_ns;       /* bpf_ktime_get_boot_ns() */
	__u64 sandbox_id;    /* cgroup id of the sandbox root */
	__u64 cgroup_id;     /* cgroup id of the offending task */
	__u32 pid;
	__u32 tid;
	__u32 ppid;
	__u32 uid;
	__u32 gid;
	/* Net records of a name rule's address (bpf/abi/cordon_dns.h): the
	 * name id of the grant that matched the address (userspace maps it to
	 * the name); 0 otherwise. Was padding: records written before it hold 0. */
	__u32 name_id;
	char comm[16];
	/* Repeats of this record's (kind, target, process) aggregated by the
	 * kernel in the window before this one (struct cordon_repeat_value),
	 * written with this record: how many, the first and the last (boot
	 * clock). 0: none. */
	__u64 repeats;
	__u64 repeats_first_ns;
	__u64 repeats_last_ns;
	/* The record's place in its sandbox's sequence (struct
	 * cordon_sandbox_state.seq), 1 for the first: taken only for a record
	 * the ring buffer accepted (after bpf_ringbuf_reserve succeeded), so a
	 * number missing from what a reader saw is a record a reader lost, never
	 * one the kernel dropped or counted as a repeat (those are counted in
	 * CORDON_CNT_EVENTS_DROPPED and the repeats map). 0: a record that never
	 * was in the ring (the stored first occurrence of a repeats entry). */
	__u64 seq;
};
CORDON_ABI_SIZE(struct cordon_event_header, 112);
CORDON_ABI_OFFSET(struct cordon_event_header, seq, 104);
CORDON_ABI_OFFSET(struct cordon_event_header, layout, 8);
CORDON_ABI_OFFSET(struct cordon_event_header, layer, 9);
CORDON_ABI_OFFSET(struct cordon_event_header, boot_ns, 16);
CORDON_ABI_OFFSET(struct cordon_event_header, comm, 64);

/* net.connect, net.sendmsg, net.socket (both the cgroup programs' and BPF
 * LSM's), net.bind of an address: layout CORDON_EVL_NET,
 * hdr.size == sizeof(struct cordon_net_event). */
struct cordon_net_event {
	struct cordon_event_header hdr;
	__u8 addr[16];       /* IPv6 or ::ffff:a.b.c.d; zero for net.socket */
	__u16 port;          /* host order; zero for net.socket */
	__u16 family;        /* AF_INET / AF_INET6 ... as passed by the caller */
	__u16 sock_type;     /* SOCK_STREAM, SOCK_DGRAM, SOCK_RAW ... */
	__u16 protocol;      /* IPPROTO_* */
};
CORDON_ABI_SIZE(struct cordon_net_event, 136);
CORDON_ABI_OFFSET(struct cordon_net_event, addr, 112);
CORDON_ABI_OFFSET(struct cordon_net_event, port, 128);

/* resource.egress: layout CORDON_EVL_RESOURCE, hdr.size == sizeof(struct
 * cordon_resource_event). Written in the network stack (softirq or the
 * sender's context): no task is described (pid, uid, comm zero); cgroup_id
 * is the sending socket's cgroup. addr/port/family/protocol: the destination
 * of the packet that crossed the threshold. */
enum cordon_resource_threshold {
	CORDON_RES_WARN = 1, /* warnAt of the limit */
	CORDON_RES_MAX = 2,  /* the limit */
};
struct cordon_resource_event {
	struct cordon_event_header hdr;
	__u64 limit;     /* the budget (bytes) */
	__u64 value;     /* bytes sent when the threshold was crossed */
	__u8 addr[16];   /* IPv6 or ::ffff:a.b.c.d */
	__u16 port;      /* host order; 0 for protocols without ports */
	__u16 family;    /* AF_INET / AF_INET6 */
	__u16 protocol;  /* IPPROTO_* */
	__u16 threshold; /* enum cordon_resource_threshold */
};
CORDON_ABI_SIZE(struct cordon_resource_event, 152);
CORDON_ABI_OFFSET(struct cordon_resource_event, limit, 112);
CORDON_ABI_OFFSET(struct cordon_resource_event, addr, 128);

/* Every other kind (file.*, tamper.*, proc.*, net.unix, net.sockopt, net.bind
 * of an abstract unix name): layout CORDON_EVL_OBJECT, the path of the object
 * (whole, up to CORDON_PATH_MAX; CORDON_PATH_F_TRUNCATED when cut, no NUL)
 * after the payload. hdr.size == sizeof(struct cordon_object_event) + path_len. */
#define CORDON_PATH_F_TRUNCATED 1u
#define CORDON_PATH_F_TOO_DEEP 2u
/* The path is the string the caller passed (unix socket address, syscall
 * argument), not one resolved by the kernel. */
#define CORDON_PATH_F_AS_WRITTEN 4u

struct cordon_object_event {
	struct cordon_event_header hdr;
	__u32 access;   /* CORDON_FILE_* requested */
	__u32 granted;  /* CORDON_FILE_* the path has */
	__u64 ino;
	__u32 dev;
	__u32 path_len;
	__u32 path_flags;
	__u32 target_pid;  /* tamper.signal / tamper.ptrace */
	__u32 arg;         /* signal number, capability, bpf cmd, syscall nr, ioctl cmd, sockopt level ... */
	__u32 arg2;        /* seccomp: the argument refused; net.sockopt: the option */
	/* followed by path_len bytes of path */
};
CORDON_ABI_SIZE(struct cordon_object_event, 152);
CORDON_ABI_OFFSET(struct cordon_object_event, access, 112);
CORDON_ABI_OFFSET(struct cordon_object_event, arg, 144);

/*
 * Repeats (README "Repeats"): the sandbox's network programs write the first
 * record of each (kind, verdict, reason, process, target) in a window of
 * CORDON_REPEAT_WINDOW_NS; the same again within the window is counted in the
 * `repeats` hash map (pinned in the sandbox's directory) instead of written.
 * The count reaches the audit trail either with the next record of that key
 * after the window (the header's repeats fields), or through the reader of
 * the ring buffer, which takes the entries idle for a window (and all of
 * them when the sandbox ends) with an atomic lookup-and-delete and writes a
 * record of the stored first one carrying the count. A record that does not
 * fit in the full ring buffer is counted there too, not lost; only when the
 * map is full as well is it lost (CORDON_CNT_EVENTS_DROPPED). So a flood of
 * one violation costs one record a window, and another violation of the
 * same sandbox still finds room.
 */
#define CORDON_REPEAT_WINDOW_NS 1000000000ULL
#define CORDON_REPEATS_MAX 1024
#define CORDON_REPEAT_RECORD_MAX 256

struct cordon_repeat_key {
	__u64 target; /* hash of the target: address, port, family, socket kind, rule */
	__u32 pid;    /* the process (tgid) */
	__u16 kind;
	__u8 verdict;
	__u8 reason;
};
CORDON_ABI_SIZE(struct cordon_repeat_key, 16);

struct cordon_repeat_value {
	__u64 window_ns; /* boot clock: when the window began (the key's last record written) */
	__u64 count;     /* occurrences counted here, not yet in a record (atomic add) */
	__u64 first_ns;  /* boot clock: the first of them */
	__u64 last_ns;   /* ... and the last */
	__u32 size;      /* bytes of record */
	__u32 _pad;
	__u8 record[CORDON_REPEAT_RECORD_MAX]; /* the record that opened the entry (repeats fields 0) */
};
CORDON_ABI_SIZE(struct cordon_repeat_value, 296);

#endif
