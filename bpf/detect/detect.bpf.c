/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Detect mode: for `cordon attach` on kernels without usable BPF LSM. Runs at
 * every system call exit of a sandboxed task and checks, with the same
 * inode-ancestry rules as the LSM programs, the file a successful open just
 * returned and the program a successful exec just started. A violation is
 * reported with verdict "detected"; with onViolation: kill the task is sent
 * SIGKILL, which it receives before returning to user space: the open fd or
 * the new program never runs an instruction. What it cannot stop: another
 * thread of the same process using the fd in that window, and anything that
 * needs no open (mmap of fds opened before attach, metadata changes, unlink).
 * It also reports the refusals of `cordon run`'s own layers (Landlock,
 * seccomp, read-only mounts), which no other program sees; each counts
 * towards the sandbox's onViolation: contain (sandbox_cfgs, sandbox_states),
 * as BPF LSM's and the cgroup programs' refusals do.
 */
#define CORDON_DETECT 1
#include "lib/lsm_common.bpf.h"

#define __NR_open 2
#define __NR_creat 85
#define __NR_execve 59
#define __NR_openat 257
#define __NR_open_by_handle_at 304
#define __NR_execveat 322
#define __NR_openat2 437
#define __NR_connect 42
#define __NR_bind 49
#define __NR_ioctl 16
#define __NR_rt_sigqueueinfo 129
#define __NR_rt_tgsigqueueinfo 297
#define __NR_pidfd_send_signal 424
#define S_IFMT_ 0170000
#define S_IFCHR_ 0020000
#define S_IFBLK_ 0060000
#define SI_TKILL (-6)
/* userspace/confine/child.h kDynamicUidBase, kDynamicUidCount */
#define CORDON_DYNAMIC_UID_BASE 0x7E000000u
#define CORDON_DYNAMIC_UID_COUNT 65536u
#define AF_UNIX 1
#define FMODE_READ 0x1
#define FMODE_WRITE 0x2

static __always_inline struct file *cordon_fd_file(struct task_struct *task, long fd)
{
	struct files_struct *files = BPF_CORE_READ(task, files);
	struct fdtable *fdt = BPF_CORE_READ(files, fdt);
	if (fd < 0 || fd >= BPF_CORE_READ(fdt, max_fds))
		return NULL;
	struct file **array = BPF_CORE_READ(fdt, fd);
	struct file *file = NULL;
	bpf_core_read(&file, sizeof(file), &array[fd & 0xffffff]);
	return file;
}

#define ENOSYS 38

static __always_inline __u64 cordon_arg(struct pt_regs *regs, int i)
{
	switch (i) {
	case 0: return BPF_CORE_READ(regs, di);
	case 1: return BPF_CORE_READ(regs, si);
	case 2: return BPF_CORE_READ(regs, dx);
	}
	return BPF_CORE_READ(regs, r10);
}


/* What a syscall refused by cordon run's seccomp filter was an attempt at, or
 * 0 when the filter does not refuse it with these arguments. The conditions
 * are those of userspace/confine/seccomp.cc (PrepareSeccomp); *shown is the
 * argument the event carries (arg2): ioctl command, target pid, flags. */
static __always_inline __u16 cordon_seccomp_kind(struct pt_regs *regs, long nr, __u32 flags, __u32 *shown)
{
	__u32 a0 = cordon_arg(regs, 0), a1 = cordon_arg(regs, 1), a2 = cordon_arg(regs, 2);
	*shown = 0;
	if (nr & 0x40000000) /* x32: the filter refuses every one (userspace/confine/seccomp.cc) */
		return CORDON_EV_TAMPER_ABI;
	switch (nr) {
	case 41: case 53:                                               /* socket, socketpair */
		/* inet and inet6 pass the filter: their EPERM is the cgroup
		 * program's (or BPF LSM's), which reports (and counts) it. */
		return a0 == 2 || a0 == 10 ? 0 : CORDON_EV_NET_SOCKET;
	case 321: return CORDON_EV_TAMPER_BPF;
	case 165: case 166: case 155: case 428: case 429: case 430: case 431: case 432: case 433: case 442:
	case 467: return CORDON_EV_TAMPER_MOUNT;                        /* mount family, open_tree_attr */
	case 175: case 176: case 313: case 246: case 320: return CORDON_EV_TAMPER_MODULE;
	case 101: case 310: case 311: case 438: case 440: case 312:   /* ptrace, process_vm_*, pidfd_getfd, process_madvise, kcmp */
		return CORDON_EV_TAMPER_PTRACE;
	case 56:
	case 272: /* clone, unshare: the flags */
		*shown = a0;
		return CORDON_EV_TAMPER_USERNS;
	case 308:
	case 435:
		return CORDON_EV_TAMPER_USERNS; /* setns, clone3 */
	case 159: case 164: case 227: case 305: return CORDON_EV_TAMPER_CLOCK;
	case 169: return CORDON_EV_TAMPER_REBOOT;
	case 298: return CORDON_EV_TAMPER_CAPABILITY;                   /* perf_event_open */
	case 425: case 426: case 427: return CORDON_EV_TAMPER_IO_URING;
	case 153: return CORDON_EV_TAMPER_TERMINAL;                     /* vhangup */
	case 300: return CORDON_EV_TAMPER_NOTIFY;                       /* fanotify_init */
	case 103: *shown = a0; return CORDON_EV_TAMPER_SYSLOG;
	case 163: return CORDON_EV_TAMPER_ACCT;
	case 248: case 249: case 250:                                   /* add_key, request_key, keyctl */
		return (flags & CORDON_LSM_F_KEYRINGS) ? 0 : CORDON_EV_TAMPER_KEYRING;
	case 302: case 256: case 279:                                   /* prlimit64, migrate_pages, move_pages */
		*shown = a0;
		return a0 ? (nr == 302 ? CORDON_EV_TAMPER_RLIMIT : CORDON_EV_TAMPER_SCHED) : 0;
	case 142: case 144: case 314: case 203:                         /* sched_setparam/scheduler/attr/affinity */
		*shown = a0;
		return a0 ? CORDON_EV_TAMPER_SCHED : 0;
	case 141: case 251:                                             /* setpriority, ioprio_set */
		*shown = a1;
		return a1 ? CORDON_EV_TAMPER_SCHED : 0;
	case 16:                                                        /* ioctl */
		*shown = a1;
		switch (a1) {
		case 0x5412: case 0x541C: case 0x541D: case 0x540E: case 0x5437: case 0x5423:
			return CORDON_EV_TAMPER_TERMINAL;
		case 0x8901: case 0x8902: case 0x5452: return CORDON_EV_TAMPER_SIGNAL;  /* FIOSETOWN, SIOCSPGRP, FIOASYNC */
		case 0x40086602: case 0x40046602: case 0x401c5820: return CORDON_EV_FILE_IOCTL;
		}
		return 0;
	case 72:            /* fcntl F_SETOWN_EX, F_SETSIG, F_SETOWN != 0, F_SETFL with O_ASYNC */
		*shown = a1 == 8 ? a2 : a1;
		return (a1 == 15 || a1 == 10 || (a1 == 8 && a2) || (a1 == 4 && (a2 & 020000))) ? CORDON_EV_TAMPER_SIGNAL
											       : 0;
	case 135:                                                       /* personality */
		*shown = a0;
		return (a0 != 0xffffffff && (a0 & (0x0040000 | 0x0100000 | 0x0200000 | 0x0400000)))
			       ? CORDON_EV_TAMPER_PERSONALITY : 0;
	case 2: case 257: case 304:                                     /* open, openat, open_by_handle_at: mode 3 */
		*shown = nr == 2 ? a1 : a2;
		return (*shown & 3) == 3 ? CORDON_EV_FILE_OPEN : 0;
	case 319:                                                       /* memfd_create */
		*shown = a1;
		return ((flags & CORDON_LSM_F_MEMFD_EXEC) || (a1 & 0x0008)) ? 0 : CORDON_EV_FILE_MEMFD;
	}
	return 0;
}

/* cordon run's seccomp filter refuses silently; the refusal shows here as
 * -EPERM (-ENOSYS for clone3) at the exit of one of the filtered syscalls. */
static __always_inline void cordon_report_seccomp(struct pt_regs *regs, long nr, long ret)
{
	if (ret != -EPERM && !(ret == -ENOSYS && nr == 435))
		return;
	const struct cordon_lsm_sandbox *sb = cordon_current_sandbox();
	if (!sb || !(sb->flags & CORDON_LSM_F_SECCOMP))
		return;
	__u32 shown = 0;
	__u16 kind = cordon_seccomp_kind(regs, nr, sb->flags, &shown);
	if (!kind)
		return;
	__u32 arg0 = BPF_CORE_READ(regs, di);
	__u32 arg1 = BPF_CORE_READ(regs, si);
	__u32 arg2 = BPF_CORE_READ(regs, dx);
	if (kind == CORDON_EV_NET_SOCKET)  /* socket(family, type, protocol) */
		cordon_lsm_emit_net(sb, CORDON_VERDICT_DENIED, kind, CORDON_REASON_SECCOMP, 0, NULL, 0, arg0, arg1, arg2,
				    CORDON_CNT_DENIED_LSM_NET, CORDON_CNT_AUDITED_LSM_NET);
	else if (kind == CORDON_EV_FILE_MEMFD || kind == CORDON_EV_FILE_IOCTL || kind == CORDON_EV_FILE_OPEN)
		cordon_lsm_emit(sb, CORDON_VERDICT_DENIED, kind, CORDON_REASON_SECCOMP, 0, 0, 0, NULL, NULL, 0, nr, shown,
				CORDON_CNT_DENIED_FILE, CORDON_CNT_AUDITED_FILE);
	else
		cordon_lsm_emit(sb, CORDON_VERDICT_DENIED, kind, CORDON_REASON_SECCOMP, 0, 0, 0, NULL, NULL, 0, nr, shown,
				CORDON_CNT_DENIED_TAMPER, CORDON_CNT_AUDITED_TAMPER);
}

#define TS_COMPAT 0x0002 /* arch/x86/include/asm/thread_info.h: a 32-bit syscall is active */
#define AUDIT_ARCH_I386 0x40000003

/* An i386 system call (int 0x80 from a 64-bit process, or a 32-bit one): its
 * numbers are not x86_64's, so nothing else here may read them as such.
 * cordon run's seccomp filter refuses every one with EPERM: reported as
 * tamper.abi, target.arg the i386 number, target.arg2 AUDIT_ARCH_I386.
 * Detect mode checks i386 opens and execs by their own numbers. */
static __always_inline int cordon_in_i386_syscall(void)
{
	return BPF_CORE_READ(bpf_get_current_task_btf(), thread_info.status) & TS_COMPAT;
}

static __always_inline void cordon_report_i386(long nr, long ret)
{
	if (ret != -EPERM)
		return;
	const struct cordon_lsm_sandbox *sb = cordon_current_sandbox();
	if (!sb || !(sb->flags & CORDON_LSM_F_SECCOMP))
		return;
	cordon_lsm_emit(sb, CORDON_VERDICT_DENIED, CORDON_EV_TAMPER_ABI, CORDON_REASON_SECCOMP, 0, 0, 0, NULL, NULL, 0,
			nr, AUDIT_ARCH_I386, CORDON_CNT_DENIED_TAMPER, CORDON_CNT_AUDITED_TAMPER);
}

#define EACCES 13
#define EROFS 30
#define O_ACCMODE 3
#define O_WRONLY 1
#define O_RDWR 2

/* A file syscall refused with EACCES in a sandbox that cordon run confined
 * with Landlock: what it was, and which argument holds the path. */
struct cordon_file_call {
	__u16 kind;
	__u8 path_arg;   /* 0..2 */
	__u8 flags_arg;  /* open flags: 1..3 (0: none; 4: openat2's struct open_how) */
};

static __always_inline int cordon_file_call(long nr, struct cordon_file_call *c)
{
	switch (nr) {
	case 2: *c = (struct cordon_file_call){CORDON_EV_FILE_OPEN, 0, 2}; return 1;        /* open */
	case 85: *c = (struct cordon_file_call){CORDON_EV_FILE_OPEN, 0, 0}; return 1;       /* creat */
	case 257: *c = (struct cordon_file_call){CORDON_EV_FILE_OPEN, 1, 3}; return 1;      /* openat */
	case 437: *c = (struct cordon_file_call){CORDON_EV_FILE_OPEN, 1, 4}; return 1;      /* openat2 */
	case 59: *c = (struct cordon_file_call){CORDON_EV_FILE_EXEC, 0, 0}; return 1;       /* execve */
	case 322: *c = (struct cordon_file_call){CORDON_EV_FILE_EXEC, 1, 0}; return 1;      /* execveat */
	case 83: case 133: *c = (struct cordon_file_call){CORDON_EV_FILE_CREATE, 0, 0}; return 1; /* mkdir, mknod */
	case 258: case 259: *c = (struct cordon_file_call){CORDON_EV_FILE_CREATE, 1, 0}; return 1;
	case 88: *c = (struct cordon_file_call){CORDON_EV_FILE_CREATE, 1, 0}; return 1;     /* symlink */
	case 266: *c = (struct cordon_file_call){CORDON_EV_FILE_CREATE, 2, 0}; return 1;    /* symlinkat */
	case 87: case 84: *c = (struct cordon_file_call){CORDON_EV_FILE_UNLINK, 0, 0}; return 1; /* unlink, rmdir */
	case 263: *c = (struct cordon_file_call){CORDON_EV_FILE_UNLINK, 1, 0}; return 1;    /* unlinkat */
	case 82: *c = (struct cordon_file_call){CORDON_EV_FILE_RENAME, 0, 0}; return 1;     /* rename */
	case 264: case 316: *c = (struct cordon_file_call){CORDON_EV_FILE_RENAME, 1, 0}; return 1;
	case 86: *c = (struct cordon_file_call){CORDON_EV_FILE_LINK, 0, 0}; return 1;       /* link */
	case 265: *c = (struct cordon_file_call){CORDON_EV_FILE_LINK, 1, 0}; return 1;      /* linkat */
	case 76: *c = (struct cordon_file_call){CORDON_EV_FILE_SETATTR, 0, 0}; return 1;    /* truncate */
	case 304: *c = (struct cordon_file_call){CORDON_EV_FILE_OPEN, 1, 3}; return 1;      /* open_by_handle_at: no path */
	case 240: *c = (struct cordon_file_call){CORDON_EV_FILE_OPEN, 0, 2}; return 1;      /* mq_open (name as written) */
	case __NR_bind: *c = (struct cordon_file_call){CORDON_EV_FILE_CREATE, 1, 0}; return 1; /* unix socket path */
	case __NR_ioctl: *c = (struct cordon_file_call){CORDON_EV_FILE_IOCTL, 0, 0}; return 1; /* device files */
	}
	return 0;
}

/* cordon run's Landlock ruleset refuses with EACCES, before BPF LSM (it
 * precedes bpf in the LSM order) and without an event of its own; the
 * read-only mounts cordon run gives its command (/sys, /proc/sysrq-trigger
 * ...) refuse writes with EROFS, before any LSM is asked. Both are reported
 * here, with the path as the caller wrote it. */
static __always_inline void cordon_report_file_refusal(struct pt_regs *regs, long nr, long ret)
{
	if (ret != -EACCES && ret != -EROFS)
		return;
	struct cordon_file_call call;
	if (!cordon_file_call(nr, &call))
		return;
	const struct cordon_lsm_sandbox *sb = cordon_current_sandbox();
	if (!sb)
		return;
	__u8 reason = CORDON_REASON_LANDLOCK;
	if (ret == -EROFS) {
		/* ioctl's EROFS (inode flags) names no path: seccomp refuses
		 * those ioctls first anyway. */
		if (!(sb->flags & CORDON_LSM_F_READ_ONLY_MOUNTS) || nr == __NR_ioctl)
			return;
		reason = CORDON_REASON_READ_ONLY_MOUNT;
	} else if (!(sb->flags & CORDON_LSM_F_LANDLOCK)) {
		return;
	}
	if (nr == __NR_ioctl) {
		/* LANDLOCK_ACCESS_FS_IOCTL_DEV (ABI 5) applies to device files
		 * only; EACCES on anything else is the file's own answer. */
		struct file *file = cordon_fd_file(bpf_get_current_task_btf(), cordon_arg(regs, 0));
		__u16 mode = file ? BPF_CORE_READ(file, f_inode, i_mode) : 0;
		if ((mode & S_IFMT_) != S_IFCHR_ && (mode & S_IFMT_) != S_IFBLK_)
			return;
		cordon_lsm_emit(sb, CORDON_VERDICT_DENIED, CORDON_EV_FILE_IOCTL, CORDON_REASON_LANDLOCK, CORDON_FILE_WRITE,
				0, 0, BPF_CORE_READ(file, f_path.dentry), BPF_CORE_READ(file, f_path.mnt), 0,
				(__u32)cordon_arg(regs, 1), 0, CORDON_CNT_DENIED_FILE, CORDON_CNT_AUDITED_FILE);
		return;
	}
	__u64 path_ptr = cordon_arg(regs, call.path_arg);
	if (nr == __NR_bind) {
		/* bind(fd, sockaddr_un, len): Landlock's MAKE_SOCK on the
		 * directory of a path (abstract names make no file). */
		struct { __u16 family; char first; } addr = {};
		bpf_probe_read_user(&addr, 3, (void *)path_ptr);
		if (addr.family != AF_UNIX || addr.first == 0)
			return;
		path_ptr += 2;  /* sun_path */
	}
	if (nr == __NR_open_by_handle_at)
		path_ptr = 0;  /* a struct file_handle, not a name */
	__u32 access = CORDON_FILE_WRITE | CORDON_FILE_CREATE;
	if (call.kind == CORDON_EV_FILE_EXEC) {
		access = CORDON_FILE_EXEC;
	} else if (call.kind == CORDON_EV_FILE_OPEN) {
		__u64 flags = O_WRONLY;  /* creat */
		if (call.flags_arg == 4) {
			struct open_how how = {};
			bpf_probe_read_user(&how, sizeof(how), (void *)cordon_arg(regs, 2));
			flags = how.flags;
		} else if (call.flags_arg) {
			flags = cordon_arg(regs, call.flags_arg - 1);
		}
		__u64 mode = flags & O_ACCMODE;
		access = mode == O_WRONLY ? CORDON_FILE_WRITE
			 : mode == O_RDWR ? CORDON_FILE_READ | CORDON_FILE_WRITE
					  : CORDON_FILE_READ;
	} else if (call.kind == CORDON_EV_FILE_SETATTR) {
		access = CORDON_FILE_WRITE;
	}
	__u64 sandbox_id = sb->sandbox_id;
	cordon_lsm_tally(sb, CORDON_VERDICT_DENIED, call.kind, reason, CORDON_CNT_DENIED_FILE, CORDON_CNT_AUDITED_FILE);
	__u32 zero = 0;
	struct cordon_lsm_scratch *s = bpf_map_lookup_elem(&lsm_scratch, &zero);
	void *ring = bpf_map_lookup_elem(&sandbox_events, &sandbox_id);
	if (!s || !ring) {
		cordon_lsm_count(sandbox_id, CORDON_CNT_EVENTS_DROPPED);
		return;
	}
	struct cordon_object_event *e = &s->ev;
	__builtin_memset(e, 0, sizeof(*e));
	cordon_event_header(&e->hdr, CORDON_EVL_OBJECT, CORDON_LSM_LAYER, call.kind, CORDON_VERDICT_DENIED, reason,
			    sandbox_id);
	e->access = access;
	e->path_flags = CORDON_PATH_F_AS_WRITTEN;
	long n = bpf_probe_read_user_str(s->path, CORDON_PATH_MAX, (void *)path_ptr);
	__u32 path_len = n > 1 ? (__u32)(n - 1) : 0;  /* without the NUL */
	if (n == CORDON_PATH_MAX)
		e->path_flags |= CORDON_PATH_F_TRUNCATED;
	path_len &= CORDON_PATH_MAX - 1;
	e->path_len = path_len;
	e->hdr.size = sizeof(*e) + path_len;
	cordon_lsm_output(sandbox_id, ring, &e->hdr, sizeof(*e) + path_len);
}

/* Landlock's scoping (ABI 6) refuses signals to, and abstract-socket
 * connects towards, processes outside the command's domain with EPERM,
 * before BPF LSM's task_kill and unix_stream_connect. Abstract connects are
 * reported only next to BPF LSM: elsewhere cgroup/connect_unix refuses them
 * first and reports itself. */
static __always_inline void cordon_report_scope(struct pt_regs *regs, long nr, long ret)
{
	if (ret != -EPERM || (nr != 62 && nr != 200 && nr != 234 && nr != __NR_connect && nr != __NR_rt_sigqueueinfo &&
			      nr != __NR_rt_tgsigqueueinfo && nr != __NR_pidfd_send_signal))
		return;
	const struct cordon_lsm_sandbox *sb = cordon_current_sandbox();
	if (!sb || !(sb->flags & CORDON_LSM_F_LANDLOCK_SCOPE))
		return;
	if (nr != __NR_connect) {
		/* kill(pid, sig), tkill(tid, sig), tgkill(tgid, tid, sig),
		 * rt_sigqueueinfo(pid, sig, info), rt_tgsigqueueinfo(tgid, tid,
		 * sig, info), pidfd_send_signal(pidfd, sig, info, flags) */
		int three = nr == 234 || nr == __NR_rt_tgsigqueueinfo;
		__u32 pid = cordon_arg(regs, three ? 1 : 0);
		__u32 sig = cordon_arg(regs, three ? 2 : 1);
		/* A dynamic uid (cordon run's default, unique to the run) without
		 * CAP_KILL fails the kernel's own credential check (EPERM, before
		 * any LSM) towards every process outside the run: not Landlock's. */
		const struct cred *cred = BPF_CORE_READ(bpf_get_current_task_btf(), cred);
		__u32 uid = BPF_CORE_READ(cred, uid.val), euid = BPF_CORE_READ(cred, euid.val);
		__u32 caps_lo = 0;  /* kernel_cap_t: u64 (6.3+) or u32[2], low word first */
		bpf_core_read(&caps_lo, sizeof(caps_lo), &cred->cap_effective);
		if (uid - CORDON_DYNAMIC_UID_BASE < CORDON_DYNAMIC_UID_COUNT &&
		    euid - CORDON_DYNAMIC_UID_BASE < CORDON_DYNAMIC_UID_COUNT && !(caps_lo & (1u << 5 /* CAP_KILL */)))
			return;
		__u64 info = nr == __NR_rt_sigqueueinfo ? cordon_arg(regs, 2)
			     : nr == __NR_rt_tgsigqueueinfo || nr == __NR_pidfd_send_signal ? cordon_arg(regs, three ? 3 : 2)
											       : 0;
		if (info) {
			/* The kernel itself refuses (EPERM, before any LSM) a
			 * siginfo another process could not have sent. */
			int si_code = 0;
			bpf_probe_read_user(&si_code, sizeof(si_code), (void *)(info + 8));
			if (si_code >= 0 || si_code == SI_TKILL)
				return;
		}
		if (nr == __NR_pidfd_send_signal) {
			struct file *file = cordon_fd_file(bpf_get_current_task_btf(), cordon_arg(regs, 0));
			struct pid *p = file ? BPF_CORE_READ(file, private_data) : NULL;
			if (file && !p)  /* pidfs keeps it in the inode on newer kernels */
				p = BPF_CORE_READ(file, f_inode, i_private);
			pid = 0;
			if (p)
				bpf_core_read(&pid, sizeof(pid), &p->numbers[0].nr);
		}
		cordon_lsm_emit(sb, CORDON_VERDICT_DENIED, CORDON_EV_TAMPER_SIGNAL, CORDON_REASON_LANDLOCK, 0, 0, 0, NULL,
				NULL, pid, sig, 0, CORDON_CNT_DENIED_TAMPER, CORDON_CNT_AUDITED_TAMPER);
		return;
	}
	if (!(sb->flags & CORDON_LSM_F_REPORT_ONLY))
		return;
	struct { __u16 family; char first; } addr = {};
	bpf_probe_read_user(&addr, 3, (void *)cordon_arg(regs, 1));
	if (addr.family != AF_UNIX || addr.first != 0)
		return;
	cordon_lsm_emit(sb, CORDON_VERDICT_DENIED, CORDON_EV_NET_UNIX, CORDON_REASON_LANDLOCK, CORDON_FILE_WRITE, 0, 0,
			NULL, NULL, 0, 0, 0, CORDON_CNT_DENIED_LSM_NET, CORDON_CNT_AUDITED_LSM_NET);
}

SEC("raw_tp/sys_exit")
int BPF_PROG(cordon_sys_exit, struct pt_regs *regs, long ret)
{
	long nr = BPF_CORE_READ(regs, orig_ax);
	const int i386 = cordon_in_i386_syscall();
	if (i386) {
		cordon_report_i386(nr, ret);
		if (ret < 0)
			return 0;
	} else if (ret < 0) {
		cordon_report_seccomp(regs, nr, ret);
		cordon_report_file_refusal(regs, nr, ret);
		cordon_report_scope(regs, nr, ret);
		return 0;
	}
	/* What detect mode checks after the fact, by each ABI's numbers: an
	 * i386 call (int 0x80, a 32-bit program) opens and executes as well.
	 * i386: open 5, creat 8, openat 295, open_by_handle_at 342, openat2
	 * 437, execve 11, execveat 358, connect 362 (its fd in bx; socketcall's
	 * connect, whose arguments are in user memory, is not checked). */
	int is_open, is_exec, is_connect;
	if (i386) {
		is_open = nr == 5 || nr == 8 || nr == 295 || nr == 342 || nr == 437;
		is_exec = nr == 11 || nr == 358;
		is_connect = nr == 362;
	} else {
		is_open = nr == __NR_openat || nr == __NR_open || nr == __NR_openat2 || nr == __NR_creat ||
			  nr == __NR_open_by_handle_at;
		is_exec = nr == __NR_execve || nr == __NR_execveat;
		is_connect = nr == __NR_connect;
	}
	if (!is_open && !is_exec && !is_connect)
		return 0;
	const struct cordon_lsm_sandbox *sb = cordon_file_sandbox();
	if (!sb)
		return 0;
	struct task_struct *task = bpf_get_current_task_btf();
	if (is_connect) {
		/* A connected unix socket: the peer's path needs write access,
		 * as the LSM programs require (host daemons' sockets). */
		struct file *sock_file =
			cordon_fd_file(task, i386 ? (__u32)BPF_CORE_READ(regs, bx) : BPF_CORE_READ(regs, di));
		if (!sock_file)
			return 0;
		struct socket *sock = BPF_CORE_READ(sock_file, private_data);
		struct sock *sk = BPF_CORE_READ(sock, sk);
		if (!sk || BPF_CORE_READ(sk, __sk_common.skc_family) != AF_UNIX)
			return 0;
		struct unix_sock *self = (struct unix_sock *)((void *)sk - bpf_core_field_offset(struct unix_sock, sk));
		struct sock *peer_sk = BPF_CORE_READ(self, peer);
		if (!peer_sk)
			return 0;
		struct unix_sock *peer =
			(struct unix_sock *)((void *)peer_sk - bpf_core_field_offset(struct unix_sock, sk));
		struct dentry *dentry = BPF_CORE_READ(peer, path.dentry);
		if (dentry)
			cordon_check_path(sb, CORDON_EV_NET_UNIX, dentry, BPF_CORE_READ(peer, path.mnt), CORDON_FILE_WRITE);
		return 0;
	}
	struct file *file;
	__u32 want;
	__u16 kind;
	if (is_exec) {
		file = BPF_CORE_READ(task, mm, exe_file);
		want = CORDON_FILE_EXEC;
		kind = CORDON_EV_FILE_EXEC;
	} else {
		file = cordon_fd_file(task, ret);
		__u32 fmode = file ? BPF_CORE_READ(file, f_mode) : 0;
		want = ((fmode & FMODE_READ) ? CORDON_FILE_READ : 0) | ((fmode & FMODE_WRITE) ? CORDON_FILE_WRITE : 0);
		kind = CORDON_EV_FILE_OPEN;
	}
	if (!file || !want)
		return 0;
	struct vfsmount *mnt = BPF_CORE_READ(file, f_path.mnt);
	if (cordon_is_anonymous(mnt))
		return 0;
	cordon_check_path(sb, kind, BPF_CORE_READ(file, f_path.dentry), mnt, want);
	return 0;
}
