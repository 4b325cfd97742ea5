/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tamper resistance: a sandboxed task, even root with every capability,
 * cannot switch cordon off or leave its sandbox. It cannot call bpf() (so it
 * cannot open or detach cordon's pins or links), signal or ptrace tasks
 * outside its sandbox (the agent included), move tasks to a cgroup outside
 * its subtree (cgroup.procs writes, clone3 CLONE_INTO_CGROUP), mount or
 * unmount anything, load modules or kexec images, create user namespaces
 * (unless allowed), set the clock or reboot, use a capability the policy
 * does not grant, inject terminal input, or signal outside through SIGIO.
 */
#include "lib/lsm_common.bpf.h"

#define MAY_WRITE 0x2
#define S_IFMT 00170000
#define S_IFDIR 0040000
#define CAP_SYS_MODULE 16
#define CAP_SYS_PACCT 20
#define CAP_SYS_BOOT 22
#define CAP_SYS_TIME 25

static __always_inline int cordon_tamper(const struct cordon_lsm_sandbox *sb, __u16 kind, __u8 reason,
					 struct dentry *dentry, struct vfsmount *mnt, __u32 target_pid, __u32 arg)
{
	return cordon_lsm_report(sb, kind, reason, 0, 0, 0, dentry, mnt, target_pid, arg, 0,
				 CORDON_CNT_DENIED_TAMPER, CORDON_CNT_AUDITED_TAMPER);
}

SEC("lsm/bpf")
int BPF_PROG(cordon_bpf, int cmd)
{
	const struct cordon_lsm_sandbox *sb = cordon_current_sandbox();
	if (!sb)
		return 0;
	return cordon_tamper(sb, CORDON_EV_TAMPER_BPF, CORDON_REASON_FORBIDDEN, NULL, NULL, 0, cmd);
}

SEC("lsm/task_kill")
int BPF_PROG(cordon_task_kill, struct task_struct *p, struct kernel_siginfo *info, int sig)
{
	const struct cordon_lsm_sandbox *sb = cordon_current_sandbox();
	if (!sb || cordon_task_in_sandbox(p, sb))
		return 0;
	return cordon_tamper(sb, CORDON_EV_TAMPER_SIGNAL, CORDON_REASON_OUTSIDE_SANDBOX, NULL, NULL,
			     BPF_CORE_READ(p, tgid), sig);
}

SEC("lsm/ptrace_access_check")
int BPF_PROG(cordon_ptrace_access_check, struct task_struct *child, unsigned int mode)
{
	const struct cordon_lsm_sandbox *sb = cordon_current_sandbox();
	if (!sb || cordon_task_in_sandbox(child, sb))
		return 0;
	return cordon_tamper(sb, CORDON_EV_TAMPER_PTRACE, CORDON_REASON_OUTSIDE_SANDBOX, NULL, NULL,
			     BPF_CORE_READ(child, tgid), mode);
}

SEC("lsm/ptrace_traceme")
int BPF_PROG(cordon_ptrace_traceme, struct task_struct *parent)
{
	const struct cordon_lsm_sandbox *sb = cordon_current_sandbox();
	if (!sb || cordon_task_in_sandbox(parent, sb))
		return 0;
	return cordon_tamper(sb, CORDON_EV_TAMPER_PTRACE, CORDON_REASON_OUTSIDE_SANDBOX, NULL, NULL,
			     BPF_CORE_READ(parent, tgid), 0);
}

SEC("lsm/sb_mount")
int BPF_PROG(cordon_sb_mount, const char *dev_name, const struct path *path, const char *type, unsigned long flags)
{
	const struct cordon_lsm_sandbox *sb = cordon_current_sandbox();
	if (!sb)
		return 0;
	return cordon_tamper(sb, CORDON_EV_TAMPER_MOUNT, CORDON_REASON_FORBIDDEN, BPF_CORE_READ(path, dentry),
			     BPF_CORE_READ(path, mnt), 0, (__u32)flags);
}

SEC("lsm/sb_umount")
int BPF_PROG(cordon_sb_umount, struct vfsmount *mnt, int flags)
{
	const struct cordon_lsm_sandbox *sb = cordon_current_sandbox();
	if (!sb)
		return 0;
	return cordon_tamper(sb, CORDON_EV_TAMPER_MOUNT, CORDON_REASON_FORBIDDEN, BPF_CORE_READ(mnt, mnt_root), mnt,
			     0, flags);
}

SEC("lsm/sb_pivotroot")
int BPF_PROG(cordon_sb_pivotroot, const struct path *old_path, const struct path *new_path)
{
	const struct cordon_lsm_sandbox *sb = cordon_current_sandbox();
	if (!sb)
		return 0;
	return cordon_tamper(sb, CORDON_EV_TAMPER_MOUNT, CORDON_REASON_FORBIDDEN, BPF_CORE_READ(new_path, dentry),
			     BPF_CORE_READ(new_path, mnt), 0, 0);
}

SEC("lsm/move_mount")
int BPF_PROG(cordon_move_mount, const struct path *from_path, const struct path *to_path)
{
	const struct cordon_lsm_sandbox *sb = cordon_current_sandbox();
	if (!sb)
		return 0;
	return cordon_tamper(sb, CORDON_EV_TAMPER_MOUNT, CORDON_REASON_FORBIDDEN, BPF_CORE_READ(to_path, dentry),
			     BPF_CORE_READ(to_path, mnt), 0, 0);
}

SEC("lsm/kernel_read_file")
int BPF_PROG(cordon_kernel_read_file, struct file *file, enum kernel_read_file_id id)
{
	if (id != READING_MODULE && id != READING_KEXEC_IMAGE && id != READING_KEXEC_INITRAMFS)
		return 0;
	const struct cordon_lsm_sandbox *sb = cordon_current_sandbox();
	if (!sb)
		return 0;
	return cordon_tamper(sb, CORDON_EV_TAMPER_MODULE, CORDON_REASON_FORBIDDEN, BPF_CORE_READ(file, f_path.dentry),
			     BPF_CORE_READ(file, f_path.mnt), 0, id);
}

SEC("lsm/kernel_load_data")
int BPF_PROG(cordon_kernel_load_data, enum kernel_load_data_id id)
{
	if (id != LOADING_MODULE && id != LOADING_KEXEC_IMAGE && id != LOADING_KEXEC_INITRAMFS)
		return 0;
	const struct cordon_lsm_sandbox *sb = cordon_current_sandbox();
	if (!sb)
		return 0;
	return cordon_tamper(sb, CORDON_EV_TAMPER_MODULE, CORDON_REASON_FORBIDDEN, NULL, NULL, 0, id);
}

SEC("lsm/userns_create")
int BPF_PROG(cordon_userns_create, const struct cred *cred)
{
	const struct cordon_lsm_sandbox *sb = cordon_current_sandbox();
	if (!sb || (sb->flags & CORDON_LSM_F_USERNS))
		return 0;
	return cordon_tamper(sb, CORDON_EV_TAMPER_USERNS, CORDON_REASON_FORBIDDEN, NULL, NULL, 0, 0);
}

SEC("lsm/settime")
int BPF_PROG(cordon_settime, const struct timespec64 *ts, const struct timezone *tz)
{
	const struct cordon_lsm_sandbox *sb = cordon_current_sandbox();
	if (!sb)
		return 0;
	return cordon_tamper(sb, CORDON_EV_TAMPER_CLOCK, CORDON_REASON_FORBIDDEN, NULL, NULL, 0, 0);
}

#define CAP_OPT_NOAUDIT (1u << 1) /* include/linux/security.h (5.1+) */

/* Every capability the policy does not grant (spec.capabilities) is refused,
 * root or not: mount(2)'s relatives without an LSM hook of their own on 6.1
 * (open_tree(OPEN_TREE_CLONE), fsopen/fsmount/fspick, unshare(CLONE_NEWNS),
 * setns), raw I/O, DAC overrides, ... all start with a capability check.
 * CAP_SYS_BOOT, CAP_SYS_TIME, CAP_SYS_MODULE and CAP_SYS_PACCT (acct():
 * accounting records of every process on the host, into a file the sandbox
 * may read) are never granted and keep their own event kinds. Checks the kernel makes without auditing
 * (CAP_OPT_NOAUDIT: probing what a task could do, e.g. ptrace_may_access,
 * has_capability_noaudit) are refused too, without an event, so that they
 * cannot flood the ring buffer. Checks against a user namespace other than
 * the initial one (the workload's own) are the kernel's business when the
 * policy allows user namespaces. Checks with credentials not the sandbox's
 * (see cordon_cred_judged) are not judged. */
SEC("lsm/capable")
int BPF_PROG(cordon_capable, const struct cred *cred, struct user_namespace *ns, int cap, unsigned int opts)
{
	const struct cordon_lsm_sandbox *sb = cordon_current_sandbox();
	if (!sb)
		return 0;
	__u16 kind = CORDON_EV_TAMPER_CAPABILITY;
	__u8 reason = CORDON_REASON_CAPABILITY;
	switch (cap) {
	case CAP_SYS_BOOT: kind = CORDON_EV_TAMPER_REBOOT; reason = CORDON_REASON_FORBIDDEN; break;
	case CAP_SYS_TIME: kind = CORDON_EV_TAMPER_CLOCK; reason = CORDON_REASON_FORBIDDEN; break;
	case CAP_SYS_MODULE: kind = CORDON_EV_TAMPER_MODULE; reason = CORDON_REASON_FORBIDDEN; break;
	case CAP_SYS_PACCT: kind = CORDON_EV_TAMPER_ACCT; reason = CORDON_REASON_FORBIDDEN; break;
	default:
		if (cap >= 0 && cap < 64 && (sb->capabilities & (1ull << cap)))
			return 0;
		if ((sb->flags & CORDON_LSM_F_USERNS) && BPF_CORE_READ(ns, level) > 0)
			return 0;
	}
	if (!cordon_cred_judged(cred))
		return 0;
	if (opts & CAP_OPT_NOAUDIT)
		return sb->mode == CORDON_MODE_AUDIT ? 0 : -EPERM;
	return cordon_tamper(sb, kind, reason, NULL, NULL, 0, cap);
}

/* io_uring: requests run with the credentials of a registered personality,
 * and SQPOLL rings submit from a kernel thread with the creator's
 * credentials (which may predate the sandbox): both would run with
 * credentials the file rules cannot attribute, so a sandboxed task may use
 * neither. Plain rings stay usable: their requests run in the task's context
 * or in io-wq workers of the task, and are judged like system calls.
 * uring_cmd passes commands straight to a driver or socket, like an ioctl
 * without the file_ioctl hook: refused too. */
SEC("lsm/uring_override_creds")
int BPF_PROG(cordon_uring_override_creds, const struct cred *new)
{
	const struct cordon_lsm_sandbox *sb = cordon_current_sandbox();
	if (!sb)
		return 0;
	return cordon_tamper(sb, CORDON_EV_TAMPER_IO_URING, CORDON_REASON_FORBIDDEN, NULL, NULL, 0, 1);
}

SEC("lsm/uring_sqpoll")
int BPF_PROG(cordon_uring_sqpoll)
{
	const struct cordon_lsm_sandbox *sb = cordon_current_sandbox();
	if (!sb)
		return 0;
	return cordon_tamper(sb, CORDON_EV_TAMPER_IO_URING, CORDON_REASON_FORBIDDEN, NULL, NULL, 0, 2);
}

SEC("lsm/uring_cmd")
int BPF_PROG(cordon_uring_cmd, struct io_uring_cmd *ioucmd)
{
	const struct cordon_lsm_sandbox *sb = cordon_current_sandbox();
	if (!sb)
		return 0;
	struct file *file = BPF_CORE_READ(ioucmd, file);
	return cordon_lsm_report(sb, CORDON_EV_TAMPER_IO_URING, CORDON_REASON_FORBIDDEN, 0, 0, 0,
				 BPF_CORE_READ(file, f_path.dentry), BPF_CORE_READ(file, f_path.mnt), 0, 3,
				 BPF_CORE_READ(ioucmd, cmd_op), CORDON_CNT_DENIED_TAMPER, CORDON_CNT_AUDITED_TAMPER);
}

/* fown_struct was embedded in struct file before 6.12 (which allocates it
 * and points back to the file). */
struct file___fown_embedded {
	struct fown_struct f_owner;
} __attribute__((preserve_access_index));

#define SIGIO 29

static __always_inline int cordon_sigio_refused(const struct cordon_lsm_sandbox *sb, struct task_struct *tsk, int sig)
{
	return cordon_tamper(sb, CORDON_EV_TAMPER_SIGNAL, CORDON_REASON_OUTSIDE_SANDBOX, NULL, NULL,
			     BPF_CORE_READ(tsk, tgid), sig ? sig : SIGIO);
}

/* SIGIO/SIGURG (or the F_SETSIG signal, SIGKILL included) sent to a file's
 * owner: the same rule as kill(). It runs in the context of whoever made the
 * I/O happen (a writer on either side, or softirq for sockets), so it is
 * judged twice: a sandboxed task may not trigger it towards a task outside
 * its sandbox (even for an owner set outside: the signal is the sandbox's
 * doing), and an owner a sandboxed task set (fown_sandbox) may not receive
 * it outside that sandbox, whoever triggers it. */
SEC("lsm/file_send_sigiotask")
int BPF_PROG(cordon_file_send_sigiotask, struct task_struct *tsk, struct fown_struct *fown, int sig)
{
	const struct cordon_lsm_sandbox *sb = cordon_current_sandbox();
	if (sb && !cordon_task_in_sandbox(tsk, sb))
		return cordon_sigio_refused(sb, tsk, sig);
	struct file *file;
	if (bpf_core_field_exists(fown->file))
		file = BPF_CORE_READ(fown, file);
	else
		file = (struct file *)((void *)fown - bpf_core_field_offset(struct file___fown_embedded, f_owner));
	__u64 key = (__u64)file;
	__u64 *owner = bpf_map_lookup_elem(&fown_sandbox, &key);
	if (!owner)
		return 0;
	__u64 id = *owner;
	const struct cordon_lsm_sandbox *setter = bpf_map_lookup_elem(&lsm_sandboxes, &id);
	if (!setter || cordon_task_in_sandbox(tsk, setter))
		return 0;
	return cordon_sigio_refused(setter, tsk, sig);
}

/* kernfs renamed kernfs_node::parent to __parent (6.15). */
struct kernfs_node___old {
	struct kernfs_node *parent;
} __attribute__((preserve_access_index));

static __always_inline struct kernfs_node *cordon_kn_parent(struct kernfs_node *kn)
{
	if (bpf_core_field_exists(kn->__parent))
		return BPF_CORE_READ(kn, __parent);
	return BPF_CORE_READ((struct kernfs_node___old *)kn, parent);
}

/* Whether `name` (a kernfs node's name, read into 24 bytes) is `lit`. */
static __always_inline int cordon_name_is(const char name[24], const char *lit, int len)
{
#pragma unroll
	for (int i = 0; i < 24; i++) {
		if (i > len)
			break;
		if (name[i] != lit[i])
			return 0;
	}
	return 1;
}

/* The sandbox root's own files that its tasks may write: moving tasks within
 * the subtree (cgroup.procs, cgroup.threads; the kernel also asks for write
 * access to the common ancestor's, which for a move inside the sandbox is at
 * most the root's), enabling controllers for its children, freezing or
 * killing itself. Its limits (memory.max, pids.max, cpu.max,
 * cgroup.max.descendants, ...) belong to whoever created the sandbox. */
static __always_inline int cordon_root_file_writable(struct kernfs_node *kn)
{
	char name[24] = {};
	if (bpf_probe_read_kernel_str(name, sizeof(name), BPF_CORE_READ(kn, name)) < 0)
		return 0;
	return cordon_name_is(name, "cgroup.procs", 12) || cordon_name_is(name, "cgroup.threads", 14) ||
	       cordon_name_is(name, "cgroup.subtree_control", 22) || cordon_name_is(name, "cgroup.freeze", 13) ||
	       cordon_name_is(name, "cgroup.kill", 11);
}

/* Writing a cgroup's files or creating cgroups is allowed only within the
 * sandbox's own subtree, and of the root's own files only those above. This
 * hook sees migrations through already-open fds and clone3 CLONE_INTO_CGROUP
 * too: both check write permission on the target's cgroup.procs, and on the
 * common ancestor's (what keeps a sandbox from pulling an outside task in). */
SEC("lsm/inode_permission")
int BPF_PROG(cordon_inode_permission, struct inode *inode, int mask)
{
	if (!(mask & MAY_WRITE))
		return 0;
	if (BPF_CORE_READ(inode, i_sb, s_magic) != CGROUP2_SUPER_MAGIC)
		return 0;
	const struct cordon_lsm_sandbox *sb = cordon_current_sandbox();
	if (!sb)
		return 0;
	struct kernfs_node *file = BPF_CORE_READ(inode, i_private);
	struct kernfs_node *kn = file;
	if (!kn)
		return 0;
	int is_file = (BPF_CORE_READ(inode, i_mode) & S_IFMT) != S_IFDIR;
	if (is_file)
		kn = cordon_kn_parent(kn);
	struct cgroup *cgrp = BPF_CORE_READ(kn, priv);
	if (cgrp) {
		int level = BPF_CORE_READ(cgrp, level);
		if (level >= (int)sb->level && sb->level < MAX_CGROUP_LEVELS) {
			struct cgroup *anc = NULL;
			__u32 idx = sb->level & (MAX_CGROUP_LEVELS - 1);
			bpf_core_read(&anc, sizeof(anc), &cgrp->ancestors[idx]);
			if (BPF_CORE_READ(anc, kn, id) == sb->sandbox_id &&
			    (level > (int)sb->level || !is_file || cordon_root_file_writable(file)))
				return 0;
		}
	}
	return cordon_tamper(sb, CORDON_EV_TAMPER_CGROUP, CORDON_REASON_OUTSIDE_SANDBOX, NULL, NULL, 0,
			     (__u32)BPF_CORE_READ(kn, id));
}
