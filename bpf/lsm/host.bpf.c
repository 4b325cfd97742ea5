/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Host-wide kernel objects, and objects made outside the sandbox.
 *
 *  - Other processes' scheduling and limits: sched_setscheduler/setparam/
 *    setattr/setaffinity, setpriority, ioprio_set and prlimit/setrlimit on a
 *    process outside the sandbox (a workload lowered its parent's
 *    RLIMIT_FSIZE and killed it with SIGXFSZ).
 *  - The kernel log through syslog(2) (/dev/kmsg is a file rule).
 *  - Keyrings, unless spec.allowKeyrings: the invoking shell's session
 *    keyring is inherited, and held a token.
 *  - System V IPC and POSIX message queues created outside the sandbox:
 *    objects are stamped with the creating sandbox when they are allocated;
 *    a sandbox may use only the objects it created itself.
 *  - fanotify/inotify/dnotify marks on what the policy does not let it read.
 *  - Binding abstract unix names (a host client connecting to a name it
 *    expects would be served by the sandbox), unless network.abstractUnix.
 *  - Reads, writes and mappings through a file descriptor opened outside
 *    the policy (before attach, inherited, or received over SCM_RIGHTS): the
 *    fd's file is judged by the same ancestry walk as file_open, with the
 *    verdict cached per struct file (see file_verdicts).
 */
#include "lib/lsm_common.bpf.h"

#define AF_UNIX 1
#define MAY_WRITE 0x2
#define MAY_READ 0x4
#define MAY_APPEND 0x8
#define PROT_READ 0x1
#define PROT_WRITE 0x2
#define MAP_SHARED 0x01
#define MAP_SHARED_VALIDATE 0x03
#define VM_SHARED 0x8
#define S_IFMT 00170000
#define S_IFCHR 0020000
#define MQUEUE_MAGIC 0x19800202
#define FSNOTIFY_OBJ_INODE 0
#define FSNOTIFY_OBJ_VFSMOUNT 1

static __always_inline int cordon_host_tamper(const struct cordon_lsm_sandbox *sb, __u16 kind, __u8 reason,
					      struct dentry *dentry, struct vfsmount *mnt, __u32 target_pid,
					      __u32 arg, __u32 arg2)
{
	return cordon_lsm_report(sb, kind, reason, 0, 0, 0, dentry, mnt, target_pid, arg, arg2,
				 CORDON_CNT_DENIED_TAMPER, CORDON_CNT_AUDITED_TAMPER);
}

/* ---- other processes' scheduling and resource limits --------------------- */

static __always_inline int cordon_other_task(struct task_struct *p, __u16 kind, __u32 arg)
{
	const struct cordon_lsm_sandbox *sb = cordon_current_sandbox();
	if (!sb || !p || cordon_task_in_sandbox(p, sb))
		return 0;
	return cordon_host_tamper(sb, kind, CORDON_REASON_OUTSIDE_SANDBOX, NULL, NULL, BPF_CORE_READ(p, tgid), arg, 0);
}

SEC("lsm/task_setscheduler")
int BPF_PROG(cordon_task_setscheduler, struct task_struct *p)
{
	return cordon_other_task(p, CORDON_EV_TAMPER_SCHED, 0);
}

SEC("lsm/task_setnice")
int BPF_PROG(cordon_task_setnice, struct task_struct *p, int nice)
{
	return cordon_other_task(p, CORDON_EV_TAMPER_SCHED, (__u32)nice);
}

SEC("lsm/task_setioprio")
int BPF_PROG(cordon_task_setioprio, struct task_struct *p, int ioprio)
{
	return cordon_other_task(p, CORDON_EV_TAMPER_SCHED, (__u32)ioprio);
}

/* prlimit(2) and setrlimit(2) writes (task_prlimit carries only the two
 * credentials, not the target task: reading another process's limits is not
 * judged). arg = the resource. */
SEC("lsm/task_setrlimit")
int BPF_PROG(cordon_task_setrlimit, struct task_struct *p, unsigned int resource, struct rlimit *new_rlim)
{
	return cordon_other_task(p, CORDON_EV_TAMPER_RLIMIT, resource);
}

/* ---- the kernel log --------------------------------------------------------- */

SEC("lsm/syslog")
int BPF_PROG(cordon_syslog, int type)
{
	const struct cordon_lsm_sandbox *sb = cordon_current_sandbox();
	if (!sb)
		return 0;
	return cordon_host_tamper(sb, CORDON_EV_TAMPER_SYSLOG, CORDON_REASON_FORBIDDEN, NULL, NULL, 0, (__u32)type, 0);
}

/* ---- keyrings ----------------------------------------------------------------- */

SEC("lsm/key_alloc")
int BPF_PROG(cordon_key_alloc, struct key *key, const struct cred *cred, unsigned long flags)
{
	const struct cordon_lsm_sandbox *sb = cordon_current_sandbox();
	if (!sb || (sb->flags & CORDON_LSM_F_KEYRINGS))
		return 0;
	return cordon_host_tamper(sb, CORDON_EV_TAMPER_KEYRING, CORDON_REASON_FORBIDDEN, NULL, NULL, 0,
				  BPF_CORE_READ(key, serial), 0);
}

/* key_ref_t points to an opaque (forward-declared) type, which the verifier
 * does not let a program read: only the credentials and need_perm are read
 * (arg2 = need_perm). */
SEC("lsm/key_permission")
int cordon_key_permission(unsigned long long *ctx)
{
	__u32 need_perm = (__u32)ctx[2];
	const struct cordon_lsm_sandbox *sb = cordon_current_sandbox();
	if (!sb || (sb->flags & CORDON_LSM_F_KEYRINGS))
		return 0;
	return cordon_host_tamper(sb, CORDON_EV_TAMPER_KEYRING, CORDON_REASON_FORBIDDEN, NULL, NULL, 0, 0, need_perm);
}

/* ---- System V IPC and POSIX message queues ----------------------------------- */

/* Which sandbox created an IPC object (key: its kern_ipc_perm, or for a
 * message queue its inode). Written when the object is allocated: by a
 * sandboxed task, its sandbox; by anyone else, the entry is removed, so a
 * reused address never inherits a sandbox's stamp. An object whose entry is
 * missing (created outside, or evicted) is refused: fails closed. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, __u64);
} ipc_owner SEC(".maps");

static __always_inline void cordon_ipc_stamp(void *object)
{
	__u64 key = (__u64)object;
	const struct cordon_lsm_sandbox *sb = cordon_current_sandbox();
	if (sb) {
		__u64 id = sb->sandbox_id;
		bpf_map_update_elem(&ipc_owner, &key, &id, BPF_ANY);
	} else {
		bpf_map_delete_elem(&ipc_owner, &key);
	}
}

static __always_inline int cordon_ipc_owned(const struct cordon_lsm_sandbox *sb, void *object)
{
	__u64 key = (__u64)object;
	__u64 *owner = bpf_map_lookup_elem(&ipc_owner, &key);
	return owner && *owner == sb->sandbox_id;
}

/* arg = the object's IPC id, arg2 = what was asked (flag, cmd). */
static __always_inline int cordon_ipc_check(struct kern_ipc_perm *perm, __u32 what)
{
	if (!perm)
		return 0; /* IPC_INFO and the like: no object */
	const struct cordon_lsm_sandbox *sb = cordon_current_sandbox();
	if (!sb || cordon_ipc_owned(sb, perm))
		return 0;
	return cordon_host_tamper(sb, CORDON_EV_TAMPER_IPC, CORDON_REASON_OUTSIDE_SANDBOX, NULL, NULL, 0,
				  (__u32)BPF_CORE_READ(perm, id), what);
}

SEC("lsm/shm_alloc_security")
int BPF_PROG(cordon_shm_alloc, struct kern_ipc_perm *perm)
{
	cordon_ipc_stamp(perm);
	return 0;
}

SEC("lsm/sem_alloc_security")
int BPF_PROG(cordon_sem_alloc, struct kern_ipc_perm *perm)
{
	cordon_ipc_stamp(perm);
	return 0;
}

SEC("lsm/msg_queue_alloc_security")
int BPF_PROG(cordon_msg_queue_alloc, struct kern_ipc_perm *perm)
{
	cordon_ipc_stamp(perm);
	return 0;
}

/* Every shmat, semop, semctl, msgsnd, msgrcv and IPC_STAT permission check. */
SEC("lsm/ipc_permission")
int BPF_PROG(cordon_ipc_permission, struct kern_ipc_perm *ipcp, short flag)
{
	return cordon_ipc_check(ipcp, (__u32)(__u16)flag);
}

/* shmget/semget/msgget of an existing key. */
SEC("lsm/shm_associate")
int BPF_PROG(cordon_shm_associate, struct kern_ipc_perm *perm, int shmflg)
{
	return cordon_ipc_check(perm, (__u32)shmflg);
}

SEC("lsm/sem_associate")
int BPF_PROG(cordon_sem_associate, struct kern_ipc_perm *perm, int semflg)
{
	return cordon_ipc_check(perm, (__u32)semflg);
}

SEC("lsm/msg_queue_associate")
int BPF_PROG(cordon_msg_queue_associate, struct kern_ipc_perm *perm, int msqflg)
{
	return cordon_ipc_check(perm, (__u32)msqflg);
}

/* IPC_RMID, IPC_SET, SHM_LOCK ...: the owner checks of these do not go
 * through ipc_permission. */
SEC("lsm/shm_shmctl")
int BPF_PROG(cordon_shm_shmctl, struct kern_ipc_perm *perm, int cmd)
{
	return cordon_ipc_check(perm, (__u32)cmd);
}

SEC("lsm/sem_semctl")
int BPF_PROG(cordon_sem_semctl, struct kern_ipc_perm *perm, int cmd)
{
	return cordon_ipc_check(perm, (__u32)cmd);
}

SEC("lsm/msg_queue_msgctl")
int BPF_PROG(cordon_msg_queue_msgctl, struct kern_ipc_perm *perm, int cmd)
{
	return cordon_ipc_check(perm, (__u32)cmd);
}

/* POSIX message queues live on the IPC namespace's internal mqueue mount,
 * which file rules never see (an internal mount): a queue's inode is stamped
 * when it is allocated, and opening or unlinking it is judged by that. */
SEC("lsm/inode_alloc_security")
int BPF_PROG(cordon_inode_alloc, struct inode *inode)
{
	if (inode->i_sb->s_magic != MQUEUE_MAGIC) /* every inode on the host: direct loads */
		return 0;
	cordon_ipc_stamp(inode);
	return 0;
}

static __always_inline int cordon_mqueue_check(struct inode *inode, struct dentry *dentry, struct vfsmount *mnt,
					       __u32 what)
{
	const struct cordon_lsm_sandbox *sb = cordon_current_sandbox();
	if (!sb || !inode || cordon_ipc_owned(sb, inode))
		return 0;
	return cordon_host_tamper(sb, CORDON_EV_TAMPER_IPC, CORDON_REASON_OUTSIDE_SANDBOX, dentry, mnt, 0,
				  (__u32)BPF_CORE_READ(inode, i_ino), what);
}

SEC("lsm/file_open")
int BPF_PROG(cordon_mqueue_open, struct file *file)
{
	struct inode *inode = file->f_inode;
	if (!inode || inode->i_sb->s_magic != MQUEUE_MAGIC)
		return 0;
	/* The mqueue root itself (an mqueue filesystem mounted by the host, e.g.
	 * /dev/mqueue, is judged by the file rules like any path). */
	struct vfsmount *mnt = BPF_CORE_READ(file, f_path.mnt);
	if (!cordon_is_anonymous(mnt) || BPF_CORE_READ(inode, i_sb, s_root, d_inode) == inode)
		return 0;
	return cordon_mqueue_check(inode, BPF_CORE_READ(file, f_path.dentry), mnt, BPF_CORE_READ(file, f_mode));
}

SEC("lsm/inode_unlink")
int BPF_PROG(cordon_mqueue_unlink, struct inode *dir, struct dentry *dentry)
{
	if (dir->i_sb->s_magic != MQUEUE_MAGIC)
		return 0;
	return cordon_mqueue_check(BPF_CORE_READ(dentry, d_inode), dentry, NULL, 0);
}

/* ---- filesystem notifications -------------------------------------------------- */

/* A mark on an inode needs read on it; one on a mount, read on the mount's
 * root; a filesystem-wide mark sees every file of the filesystem, whatever
 * the path it was placed through: never. arg = the mask's low 32 bits,
 * arg2 = the object type. */
SEC("lsm/path_notify")
int BPF_PROG(cordon_path_notify, const struct path *path, __u64 mask, unsigned int obj_type)
{
	const struct cordon_lsm_sandbox *sb = cordon_file_sandbox();
	if (!sb)
		return 0;
	struct dentry *dentry = BPF_CORE_READ(path, dentry);
	struct vfsmount *mnt = BPF_CORE_READ(path, mnt);
	if (obj_type != FSNOTIFY_OBJ_INODE && obj_type != FSNOTIFY_OBJ_VFSMOUNT)
		return cordon_host_tamper(sb, CORDON_EV_TAMPER_NOTIFY, CORDON_REASON_FORBIDDEN, dentry, mnt, 0,
					  (__u32)mask, obj_type);
	if (obj_type == FSNOTIFY_OBJ_VFSMOUNT)
		dentry = BPF_CORE_READ(mnt, mnt_root);
	struct cordon_walk w;
	cordon_walk(&w, sb, dentry, mnt, CORDON_FILE_READ);
	if (w.granted & CORDON_FILE_READ)
		return 0;
	return cordon_lsm_report(sb, CORDON_EV_TAMPER_NOTIFY,
				 w.complete ? CORDON_REASON_FILE_RULE : CORDON_REASON_PATH_TOO_DEEP, CORDON_FILE_READ,
				 w.granted, w.rule, dentry, mnt, 0, (__u32)mask, obj_type, CORDON_CNT_DENIED_TAMPER,
				 CORDON_CNT_AUDITED_TAMPER);
}

/* ---- abstract unix names ---------------------------------------------------------- */

/* Reports a denial whose object is a name rather than a dentry: `name`
 * (kernel memory, `len` bytes) is shown after `prefix`. */
static __always_inline int cordon_report_name(const struct cordon_lsm_sandbox *sb, __u16 kind, __u8 reason,
					      __u32 access, char prefix, const void *name, __u32 len,
					      __u32 denied_counter, __u32 audited_counter)
{
	int audit = sb->mode == CORDON_MODE_AUDIT;
	__u8 verdict = audit ? CORDON_VERDICT_AUDITED : CORDON_VERDICT_DENIED;
	__u64 sandbox_id = sb->sandbox_id;
	cordon_lsm_count(sandbox_id, audit ? audited_counter : denied_counter);
	__u32 zero = 0;
	struct cordon_lsm_scratch *s = bpf_map_lookup_elem(&lsm_scratch, &zero);
	void *ring = bpf_map_lookup_elem(&sandbox_events, &sandbox_id);
	if (!s || !ring) {
		cordon_lsm_count(sandbox_id, CORDON_CNT_EVENTS_DROPPED);
		return audit ? 0 : -EPERM;
	}
	struct cordon_object_event *e = &s->ev;
	__builtin_memset(e, 0, sizeof(*e));
	cordon_event_header(&e->hdr, CORDON_EVL_OBJECT, CORDON_LSM_LAYER, kind, verdict, reason, sandbox_id);
	e->access = access;
	__u32 n = len;
	if (n > 107)
		n = 107;
	asm volatile("%0 &= 127" : "+r"(n)); /* bounded in the verifier's eyes too */
	s->path[0] = prefix;
	bpf_probe_read_kernel(s->path + 1, n, name);
	__u32 path_len = n + 1;
	e->path_len = path_len;
	e->hdr.size = sizeof(*e) + path_len;
	cordon_lsm_output(sandbox_id, ring, &e->hdr, sizeof(*e) + path_len);
	return audit ? 0 : -EPERM;
}

SEC("lsm/socket_bind")
int BPF_PROG(cordon_socket_bind, struct socket *sock, struct sockaddr *address, int addrlen)
{
	/* Abstract: sun_path starts with a NUL and has a name after it
	 * (addrlen == sizeof(sa_family_t) asks for an autobind name). */
	if (addrlen <= 2 || BPF_CORE_READ(sock, sk, __sk_common.skc_family) != AF_UNIX)
		return 0;
	struct sockaddr_un *sun = (struct sockaddr_un *)address;
	char first = 1;
	bpf_probe_read_kernel(&first, 1, &sun->sun_path[0]);
	if (first != 0)
		return 0;
	const struct cordon_lsm_sandbox *sb = cordon_current_sandbox();
	if (!sb || (sb->flags & CORDON_LSM_F_ABSTRACT_UNIX))
		return 0;
	return cordon_report_name(sb, CORDON_EV_NET_BIND, CORDON_REASON_ABSTRACT_UNIX, 0, '@', &sun->sun_path[1],
				  (__u32)addrlen - 3, CORDON_CNT_DENIED_LSM_NET, CORDON_CNT_AUDITED_LSM_NET);
}

/* ---- using a file descriptor ----------------------------------------------------- */

/* The rights of an open file's path, remembered per struct file so that
 * reads and writes do not walk each time. Valid while nothing it was computed
 * from has changed: the sandbox and its policy version, and the dentry tree
 * (the host-wide epoch of bpf/lib/dir_cache.bpf.h, bumped after every move
 * or directory removal). The file pins its dentry and mount, so neither can
 * be freed and reused while it is open, and the entry is deleted when the
 * file is freed (file_free_security), so a reused struct file never meets
 * it. Entries carry a checksum (the LRU map reuses freed elements at once: a
 * reader racing with a writer sees a mismatch, never a mix). */
struct cordon_file_verdict {
	__u64 sandbox_id;
	__u64 epoch;
	__u32 version;
	__u32 granted;
	__u32 rule;
	__u32 complete;
	__u64 check;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct cordon_file_verdict);
} file_verdicts SEC(".maps");

static __always_inline __u64 cordon_verdict_check(const struct cordon_file_verdict *v, __u64 key)
{
	__u64 h = 0x6A09E667F3BCC908ULL;
	h = cordon_dir_mix(h, key);
	h = cordon_dir_mix(h, v->sandbox_id);
	h = cordon_dir_mix(h, v->epoch);
	h = cordon_dir_mix(h, ((__u64)v->version << 32) | v->granted);
	h = cordon_dir_mix(h, ((__u64)v->rule << 32) | v->complete);
	return h;
}

/* Terminals (tty, console, serial, pty slaves: majors 4, 5, 136-143) are
 * channels the invoker hands over, like pipes: not judged through an fd. */
static __always_inline int cordon_is_terminal(struct inode *inode)
{
	if ((inode->i_mode & S_IFMT) != S_IFCHR)
		return 0;
	__u32 major = inode->i_rdev >> 20;
	return major == 4 || major == 5 || (major >= 136 && major <= 143);
}

/* Judges `want` on an open file. kind: the event reported on a denial.
 * `file` is a pointer the verifier knows the type of (a hook argument, or a
 * field of one): its inode's fields are read directly, without a helper call
 * each (this runs for every read and write). */
static __always_inline int cordon_check_file(struct file *file, __u32 want, __u16 kind)
{
	struct vfsmount *mnt = BPF_CORE_READ(file, f_path.mnt);
	/* Pipes, sockets, memfd, anonymous inodes: no path a rule can name. */
	if (cordon_is_anonymous(mnt))
		return 0;
	const struct cordon_lsm_sandbox *sb = cordon_file_sandbox();
	if (!sb)
		return 0;
	struct inode *inode = file->f_inode;
	if (!inode || cordon_is_terminal(inode))
		return 0;
	struct dentry *dentry = BPF_CORE_READ(file, f_path.dentry);
	/* Contained: refused, and nothing cached (the verdicts are keyed by the
	 * policy version, which containment does not change). */
	if (cordon_lsm_contained(sb))
		return cordon_lsm_report(sb, kind, CORDON_REASON_CONTAINED, want, 0, 0, dentry, mnt, 0, 0, 0,
					 CORDON_CNT_DENIED_FILE, CORDON_CNT_AUDITED_FILE);
	__u64 key = (__u64)file;
	__u64 epoch = cordon_dir_epoch();
	/* procfs: the task's own /proc/<pid> is granted by pid, so the answer
	 * depends on who asks; always walked (short). */
	int cacheable = epoch != ~0ULL && inode->i_sb->s_magic != PROC_SUPER_MAGIC;
	struct cordon_file_verdict v;
	if (cacheable) {
		struct cordon_file_verdict *stored = bpf_map_lookup_elem(&file_verdicts, &key);
		if (stored) {
			__builtin_memcpy(&v, stored, sizeof(v));
			asm volatile("" ::: "memory"); /* judge the copy only */
			if (v.check == cordon_verdict_check(&v, key) && v.sandbox_id == sb->sandbox_id &&
			    v.version == sb->version && v.epoch == epoch) {
				if ((v.granted & want) == want)
					return 0;
				goto deny;
			}
		}
	}
	{
		struct cordon_walk w;
		cordon_walk(&w, sb, dentry, mnt, CORDON_FILE_READ | CORDON_FILE_WRITE);
		v.sandbox_id = sb->sandbox_id;
		v.epoch = epoch;
		v.version = sb->version;
		v.granted = w.granted;
		v.rule = w.rule;
		v.complete = w.complete;
	}
	if (cacheable) {
		v.check = cordon_verdict_check(&v, key);
		bpf_map_update_elem(&file_verdicts, &key, &v, BPF_ANY);
	}
	if ((v.granted & want) == want)
		return 0;
deny:
	/* Audit mode: reads and writes of a file whose open was audited were
	 * reported with the open (struct cordon_audited_open). */
	if (cordon_lsm_verdict(sb) == CORDON_VERDICT_AUDITED) {
		struct cordon_audited_open *a = bpf_map_lookup_elem(&audited_opens, &key);
		if (a && a->sandbox_id == sb->sandbox_id && a->version == sb->version && (a->rights & want) == want)
			return 0;
	}
	/* One event per refused operation (reads are not reported when allowed). */
	return cordon_lsm_report(sb, kind, v.complete ? CORDON_REASON_FILE_RULE : CORDON_REASON_PATH_TOO_DEEP, want,
				 v.granted, v.rule, dentry, mnt, 0, 0, 0, CORDON_CNT_DENIED_FILE,
				 CORDON_CNT_AUDITED_FILE);
}

/* read/write/readv/splice/sendfile/copy_file_range/fallocate/getdents and
 * io_uring reads and writes all come here (rw_verify_area, iterate_dir). */
SEC("lsm/file_permission")
int BPF_PROG(cordon_file_permission, struct file *file, int mask)
{
	__u32 want = 0;
	if (mask & MAY_READ)
		want |= CORDON_FILE_READ;
	if (mask & (MAY_WRITE | MAY_APPEND))
		want |= CORDON_FILE_WRITE;
	if (!want)
		return 0;
	return cordon_check_file(file, want, CORDON_EV_FILE_OPEN);
}

/* A mapping reads the file; a shared writable one writes it. (PROT_EXEC is
 * exec.bpf.c's.) */
SEC("lsm/mmap_file")
int BPF_PROG(cordon_mmap_file_rw, struct file *file, unsigned long reqprot, unsigned long prot, unsigned long flags)
{
	if (!file)
		return 0;
	__u32 want = CORDON_FILE_READ;
	__u32 type = flags & 0x0f;
	if ((prot & PROT_WRITE) && (type == MAP_SHARED || type == MAP_SHARED_VALIDATE))
		want |= CORDON_FILE_WRITE;
	return cordon_check_file(file, want, CORDON_EV_FILE_OPEN);
}

SEC("lsm/file_mprotect")
int BPF_PROG(cordon_file_mprotect_rw, struct vm_area_struct *vma, unsigned long reqprot, unsigned long prot)
{
	if (!(prot & PROT_WRITE) || !(BPF_CORE_READ(vma, vm_flags) & VM_SHARED))
		return 0;
	struct file *file = vma->vm_file;
	if (!file)
		return 0;
	return cordon_check_file(file, CORDON_FILE_READ | CORDON_FILE_WRITE, CORDON_EV_FILE_OPEN);
}

SEC("lsm/file_free_security")
int BPF_PROG(cordon_file_free, struct file *file)
{
	__u64 key = (__u64)file;
	if (bpf_map_lookup_elem(&file_verdicts, &key))
		bpf_map_delete_elem(&file_verdicts, &key);
	return 0;
}
