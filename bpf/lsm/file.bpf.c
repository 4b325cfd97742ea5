/* SPDX-License-Identifier: Apache-2.0 */
/*
 * File access: open, create/remove/rename/link within directories, and
 * attribute changes. Path hooks (security_path_*) are used rather than inode
 * hooks because they carry the mount, so the walk follows the mount tree.
 */
#include "lib/lsm_common.bpf.h"

#define FMODE_READ 0x1
#define FMODE_WRITE 0x2
#define FMODE_EXEC 0x20
#define S_IFMT 00170000
#define S_IFCHR 0020000
#define S_IFBLK 0060000
#define RENAME_EXCHANGE (1 << 1)
#define O_ACCMODE 3

/* Credential files (spec.credentials, deliver: file), each marked with the
 * sandbox it belongs to (struct cordon_cred_owner; set by userspace through
 * a descriptor of the file before it is renamed into place, gone with the
 * inode). An open of any other inode finds no storage: one pointer check. */
struct {
	__uint(type, BPF_MAP_TYPE_INODE_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct cordon_cred_owner);
} cred_owners SEC(".maps");

/* Whether the calling task is in the cgroup subtree rooted at `id`. By the
 * task's cgroup ancestry, not by lsm_sandboxes: a credential's own sandbox
 * reads it whatever else its policy says (its file rules decide next). */
static __always_inline int cordon_current_under(__u64 id)
{
	struct task_struct *task = bpf_get_current_task_btf();
	int level = BPF_CORE_READ(task, cgroups, dfl_cgrp, level);
	for (int l = 0; l < MAX_CGROUP_LEVELS; l++) {
		if (l > level)
			break;
		if (bpf_get_current_ancestor_cgroup_id(l) == id)
			return 1;
	}
	return 0;
}

/* An open of a sandbox's credential file: only its own tasks, and host root
 * outside every sandbox (cordon itself, the agent: the host's root is
 * trusted), may open it; a task of another sandbox (root or not) or an
 * unconfined task of any other uid is refused with EPERM (not EACCES: file
 * ownership would allow it, and the errno tells the two apart) and reported
 * as credential.read. The owner's mode decides (audit: reported, allowed).
 * The event goes to the caller's sandbox, else to the owner's, so the owner's
 * trail shows who tried. */
static __always_inline int cordon_credential_open(struct file *file, __u64 owner_id, __u32 want)
{
	if (cordon_current_under(owner_id))
		return 0;
	const struct cordon_lsm_sandbox *sb = cordon_current_sandbox();
	if (!sb) {
		struct task_struct *task = bpf_get_current_task_btf();
		if (BPF_CORE_READ(task, cred, fsuid.val) == 0)
			return 0;
	}
	const struct cordon_lsm_sandbox *owner = bpf_map_lookup_elem(&lsm_sandboxes, &owner_id);
	__u8 verdict = owner ? cordon_lsm_verdict(owner) : CORDON_VERDICT_DENIED;
	struct cordon_lsm_sandbox unregistered = { .sandbox_id = owner_id };
	const struct cordon_lsm_sandbox *to = sb ? sb : (owner ? owner : &unregistered);
	return cordon_lsm_emit(to, verdict, CORDON_EV_CREDENTIAL_READ, CORDON_REASON_OUTSIDE_SANDBOX, want, 0, 0,
			       BPF_CORE_READ(file, f_path.dentry), BPF_CORE_READ(file, f_path.mnt), 0,
			       (__u32)owner_id, (__u32)(owner_id >> 32), CORDON_CNT_DENIED_FILE,
			       CORDON_CNT_AUDITED_FILE);
}

/* cordon's state directory (/run/cordon: the boot clock offset, the
 * containment locks, the agent's socket, ...), set by the loader from the
 * directory it found at load (0: none). */
const volatile __u32 cordon_state_dir_dev = 0;
const volatile __u64 cordon_state_dir_ino = 0;
#define CORDON_STATE_DIR_DEPTH 16

/* Whether `d` is the state directory or below it: by the dentry tree of its
 * superblock, so a bind mount of it (or of a directory in it) elsewhere is
 * below it too. A file cannot be linked or moved out of it (its directory
 * cannot be written), so every name of its files is found. Deeper than
 * CORDON_STATE_DIR_DEPTH is not below it: cordon makes no such tree there,
 * and a sandbox cannot make one. */
static __always_inline int cordon_below(struct dentry *d, __u32 dev, __u64 ino)
{
	if (!ino || !d || BPF_CORE_READ(d, d_sb, s_dev) != dev)
		return 0;
	for (int i = 0; i < CORDON_STATE_DIR_DEPTH; i++) {
		if (BPF_CORE_READ(d, d_inode, i_ino) == ino) /* 0 for a new name's negative dentry */
			return 1;
		struct dentry *parent = BPF_CORE_READ(d, d_parent);
		if (!parent || parent == d)
			return 0;
		d = parent;
	}
	return 0;
}

static __always_inline int cordon_in_state_dir(struct dentry *d)
{
	return cordon_below(d, cordon_state_dir_dev, cordon_state_dir_ino);
}

/* cordon's own state on disk (/var/lib/cordon, and the policy store where a
 * test's $CORDON_POLICY_STORE puts it elsewhere), set by the loader at load
 * (0: none). A sandbox with spec.files meets the loader's marks in its file
 * rules (CORDON_FILE_FORBIDDEN); these guard it from the sandboxes whose
 * files are not restricted. */
const volatile __u32 cordon_own_dev[2] = {};
const volatile __u64 cordon_own_ino[2] = {};

static __noinline int cordon_in_own_state(struct dentry *d)
{
	return cordon_below(d, cordon_own_dev[0], cordon_own_ino[0]) ||
	       cordon_below(d, cordon_own_dev[1], cordon_own_ino[1]);
}

/* The directories above cordon's own state (/var/lib and /var for
 * /var/lib/cordon; "/" never), set by the loader at load. Renaming one moves
 * the state out from under its path: a workload allowed to write /var would
 * rename /var/lib away and make a /var/lib/cordon of its own (its own
 * signing key) for the next agent to find. No sandbox renames them, or
 * renames another directory over them. */
#define CORDON_OWN_ANCESTORS 8
const volatile __u32 cordon_own_anc_dev[CORDON_OWN_ANCESTORS] = {};
const volatile __u64 cordon_own_anc_ino[CORDON_OWN_ANCESTORS] = {};

static __noinline int cordon_own_ancestor(struct dentry *d)
{
	if (!d)
		return 0;
	__u64 ino = BPF_CORE_READ(d, d_inode, i_ino); /* 0 for a negative dentry */
	if (!ino)
		return 0;
	__u32 dev = BPF_CORE_READ(d, d_sb, s_dev);
	for (int i = 0; i < CORDON_OWN_ANCESTORS; i++)
		if (cordon_own_anc_ino[i] == ino && cordon_own_anc_dev[i] == dev)
			return 1;
	return 0;
}

/* An access of a task of `sb` (the caller's sandbox, or NULL), a sandbox
 * without spec.files, to cordon's own state (`other`: a second name, or
 * NULL): refused, reason cordon's own state, reported as `kind`. Returns the
 * hook's verdict (0 for every other task). */
static __always_inline int cordon_own_state_guard(const struct cordon_lsm_sandbox *sb, struct dentry *dentry,
						  struct dentry *other, struct vfsmount *mnt, __u16 kind, __u32 access,
						  __u32 denied_counter, __u32 audited_counter)
{
	if (!sb || (sb->flags & CORDON_LSM_F_FILES))
		return 0;
	struct task_struct *task = bpf_get_current_task_btf();
	if (!cordon_cred_judged(BPF_CORE_READ(task, cred)))
		return 0;
	struct dentry *hit = cordon_in_own_state(dentry) ? dentry : (other && cordon_in_own_state(other) ? other : NULL);
	if (!hit)
		return 0;
	return cordon_lsm_report(sb, kind, CORDON_REASON_CORDON_STATE, access, 0, 0, hit, mnt, 0, 0, 0, denied_counter,
				 audited_counter);
}

/* A write, create, removal, rename or link of (or into) cordon's state
 * directory by a sandboxed task: refused for every sandbox whatever its
 * policy allows (spec.files or none), like its cgroup's limits and cordon's
 * pins: tamper.bpf, reason forbidden. `other` is a second name to check
 * (rename, link), or NULL. Returns the hook's verdict. */
static __always_inline int cordon_state_dir_write(struct dentry *dentry, struct dentry *other, struct vfsmount *mnt,
						  __u32 access)
{
	struct dentry *hit = cordon_in_state_dir(dentry) ? dentry : (cordon_in_state_dir(other) ? other : NULL);
	if (!hit) {
		if (!cordon_own_ino[0] && !cordon_own_ino[1])
			return 0;
		return cordon_own_state_guard(cordon_current_sandbox(), dentry, other, mnt, CORDON_EV_TAMPER_BPF,
					      access, CORDON_CNT_DENIED_TAMPER, CORDON_CNT_AUDITED_TAMPER);
	}
	const struct cordon_lsm_sandbox *sb = cordon_current_sandbox();
	if (!sb)
		return 0;
	return cordon_lsm_report(sb, CORDON_EV_TAMPER_BPF, CORDON_REASON_FORBIDDEN, access, 0, 0, hit, mnt, 0, 0, 0,
				 CORDON_CNT_DENIED_TAMPER, CORDON_CNT_AUDITED_TAMPER);
}

SEC("lsm/file_open")
int BPF_PROG(cordon_file_open, struct file *file)
{
	/* Before the return for tasks outside every sandbox: a credential is
	 * guarded from them too. */
	struct cordon_cred_owner *cred = bpf_inode_storage_get(&cred_owners, file->f_inode, 0, 0);
	if (cred) {
		__u64 owner_id = cred->sandbox_id;
		__u32 fmode = BPF_CORE_READ(file, f_mode);
		__u32 want = (fmode & FMODE_WRITE) ? CORDON_FILE_READ | CORDON_FILE_WRITE : CORDON_FILE_READ;
		int refused = cordon_credential_open(file, owner_id, want);
		if (refused)
			return refused;
	}
	__u32 fmode = BPF_CORE_READ(file, f_mode);
	__u32 fflags = BPF_CORE_READ(file, f_flags);
	/* Access mode 3 (neither O_RDONLY, O_WRONLY nor O_RDWR): the kernel
	 * sets neither FMODE_READ nor FMODE_WRITE, yet the fd takes ioctls
	 * (TIOCSTI, FS_IOC_SETFLAGS, ...): it counts as read and write. */
	if ((fmode & FMODE_WRITE) || (fflags & O_ACCMODE) == O_ACCMODE) {
		int refused = cordon_state_dir_write(BPF_CORE_READ(file, f_path.dentry), NULL,
						     BPF_CORE_READ(file, f_path.mnt), CORDON_FILE_WRITE);
		if (refused)
			return refused;
	}
	/* One lookup of the caller's sandbox for both questions. */
	const struct cordon_lsm_sandbox *any = cordon_current_sandbox();
	const struct cordon_lsm_sandbox *sb = cordon_file_sandbox_of(any);
	if (!sb) {
		/* A read by a sandbox without spec.files (writes: above). */
		if ((fmode & FMODE_WRITE) || (fflags & O_ACCMODE) == O_ACCMODE)
			return 0;
		return cordon_own_state_guard(any, BPF_CORE_READ(file, f_path.dentry), NULL, BPF_CORE_READ(file, f_path.mnt),
					      CORDON_EV_FILE_OPEN, CORDON_FILE_READ, CORDON_CNT_DENIED_FILE,
					      CORDON_CNT_AUDITED_FILE);
	}
	struct vfsmount *mnt = BPF_CORE_READ(file, f_path.mnt);
	/* Re-opening a pipe, socket or memfd through /proc/self/fd: not a file
	 * of any tree a rule can name; exec of memfds is judged at exec/mmap. */
	if (cordon_is_anonymous(mnt))
		return 0;
	__u32 want = 0;
	if (fmode & FMODE_READ)
		want |= CORDON_FILE_READ;
	if (fmode & FMODE_WRITE)
		want |= CORDON_FILE_WRITE;
	if ((fflags & O_ACCMODE) == O_ACCMODE)
		want |= CORDON_FILE_READ | CORDON_FILE_WRITE;
	if (!want)
		return 0;
	/* Opened by execve (the program, a script interpreter, the ELF
	 * interpreter): reading is all this open needs; exec itself is judged
	 * by bprm_check_security and mappings by mmap_file. */
	/* 6.8+ set FMODE_EXEC; older kernels leave only __FMODE_EXEC in f_flags. */
	__u16 kind = ((fmode & FMODE_EXEC) || (fflags & FMODE_EXEC)) ? CORDON_EV_FILE_EXEC : CORDON_EV_FILE_OPEN;
	struct dentry *dentry = BPF_CORE_READ(file, f_path.dentry);
	struct cordon_walk w;
	cordon_walk(&w, sb, dentry, mnt, want);
	if ((w.granted & want) == want)
		return 0;
	int verdict = cordon_lsm_report(sb, kind, cordon_walk_reason(&w), want, w.granted, w.rule, dentry, mnt, 0, 0, 0,
					CORDON_CNT_DENIED_FILE, CORDON_CNT_AUDITED_FILE);
	if (verdict == 0) {
		/* Audited: the file's reads and writes are this refusal's. */
		struct cordon_audited_open a = {.sandbox_id = sb->sandbox_id, .version = sb->version, .rights = want};
		__u64 key = (__u64)file;
		bpf_map_update_elem(&audited_opens, &key, &a, BPF_ANY);
	}
	return verdict;
}

/* Create-type operations need CREATE on the directory; the new name is
 * reported. */
static __always_inline int cordon_dir_op(const struct path *dir, struct dentry *dentry, __u16 kind)
{
	struct vfsmount *mnt = BPF_CORE_READ(dir, mnt);
	int refused = cordon_state_dir_write(dentry, NULL, mnt, CORDON_FILE_CREATE);
	if (refused)
		return refused;
	const struct cordon_lsm_sandbox *sb = cordon_file_sandbox();
	if (!sb)
		return 0;
	struct cordon_walk w;
	cordon_walk(&w, sb, BPF_CORE_READ(dir, dentry), mnt, CORDON_FILE_CREATE);
	if (w.granted & CORDON_FILE_CREATE)
		return 0;
	return cordon_lsm_report(sb, kind, cordon_walk_reason(&w), CORDON_FILE_CREATE, w.granted, w.rule, dentry, mnt, 0, 0, 0,
				 CORDON_CNT_DENIED_FILE, CORDON_CNT_AUDITED_FILE);
}

SEC("lsm/path_mknod")
int BPF_PROG(cordon_path_mknod, const struct path *dir, struct dentry *dentry, umode_t mode, unsigned int dev)
{
	__u32 type = mode & S_IFMT;
	if (type == S_IFCHR || type == S_IFBLK) {
		int refused = cordon_state_dir_write(dentry, NULL, BPF_CORE_READ(dir, mnt), CORDON_FILE_CREATE);
		if (refused)
			return refused;
		/* A device node would reach raw devices behind every rule. */
		const struct cordon_lsm_sandbox *sb = cordon_file_sandbox();
		if (!sb)
			return 0;
		return cordon_lsm_report(sb, CORDON_EV_FILE_CREATE, CORDON_REASON_DEVICE_NODE, CORDON_FILE_CREATE,
					 0, 0, dentry, BPF_CORE_READ(dir, mnt), 0, mode, 0,
					 CORDON_CNT_DENIED_FILE, CORDON_CNT_AUDITED_FILE);
	}
	return cordon_dir_op(dir, dentry, CORDON_EV_FILE_CREATE);
}

SEC("lsm/path_mkdir")
int BPF_PROG(cordon_path_mkdir, const struct path *dir, struct dentry *dentry, umode_t mode)
{
	return cordon_dir_op(dir, dentry, CORDON_EV_FILE_CREATE);
}

SEC("lsm/path_symlink")
int BPF_PROG(cordon_path_symlink, const struct path *dir, struct dentry *dentry, const char *old_name)
{
	return cordon_dir_op(dir, dentry, CORDON_EV_FILE_CREATE);
}

SEC("lsm/path_unlink")
int BPF_PROG(cordon_path_unlink, const struct path *dir, struct dentry *dentry)
{
	return cordon_dir_op(dir, dentry, CORDON_EV_FILE_UNLINK);
}

SEC("lsm/path_rmdir")
int BPF_PROG(cordon_path_rmdir, const struct path *dir, struct dentry *dentry)
{
	return cordon_dir_op(dir, dentry, CORDON_EV_FILE_UNLINK);
}

/* An object moved or linked to `new_dir` must not gain rights there. */
/* `w` is the caller's walk struct, reused: BPF stacks are small. */
static __always_inline int cordon_no_gain(struct cordon_walk *w, const struct cordon_lsm_sandbox *sb, __u16 kind,
					  struct dentry *object, struct vfsmount *object_mnt,
					  const struct path *new_dir, struct dentry *new_dentry)
{
	struct vfsmount *new_mnt = BPF_CORE_READ(new_dir, mnt);
	cordon_walk(w, sb, BPF_CORE_READ(new_dir, dentry), new_mnt, 0);
	__u32 new_granted = w->granted, new_rule = w->rule;
	if (!(new_granted & CORDON_FILE_CREATE))
		return cordon_lsm_report(sb, kind, cordon_walk_reason(w), CORDON_FILE_CREATE, new_granted,
					 new_rule, new_dentry, new_mnt, 0, 0, 0,
					 CORDON_CNT_DENIED_FILE, CORDON_CNT_AUDITED_FILE);
	cordon_walk(w, sb, object, object_mnt, 0);
	if (new_granted & ~w->granted)
		return cordon_lsm_report(sb, kind,
					 (w->granted & CORDON_FILE_FORBIDDEN) ? CORDON_REASON_CORDON_STATE
									      : CORDON_REASON_LINK_GAIN,
					 new_granted, w->granted, new_rule, object, object_mnt, 0, 0, 0,
					 CORDON_CNT_DENIED_FILE, CORDON_CNT_AUDITED_FILE);
	return 0;
}

SEC("lsm/path_link")
int BPF_PROG(cordon_path_link, struct dentry *old_dentry, const struct path *new_dir, struct dentry *new_dentry)
{
	int refused = cordon_state_dir_write(new_dentry, old_dentry, BPF_CORE_READ(new_dir, mnt), CORDON_FILE_CREATE);
	if (refused)
		return refused;
	const struct cordon_lsm_sandbox *sb = cordon_file_sandbox();
	if (!sb)
		return 0;
	/* Hard links never cross mounts: the old name lives on new_dir's mount. */
	struct cordon_walk w;
	return cordon_no_gain(&w, sb, CORDON_EV_FILE_LINK, old_dentry, BPF_CORE_READ(new_dir, mnt), new_dir, new_dentry);
}

SEC("lsm/path_rename")
int BPF_PROG(cordon_path_rename, const struct path *old_dir, struct dentry *old_dentry, const struct path *new_dir,
	     struct dentry *new_dentry, unsigned int flags)
{
	int refused = cordon_state_dir_write(old_dentry, new_dentry, BPF_CORE_READ(new_dir, mnt), CORDON_FILE_CREATE);
	if (refused)
		return refused;
	if (cordon_own_anc_ino[0]) {
		struct dentry *above = cordon_own_ancestor(old_dentry)	 ? old_dentry
				       : cordon_own_ancestor(new_dentry) ? new_dentry
									 : NULL;
		const struct cordon_lsm_sandbox *any = above ? cordon_current_sandbox() : NULL;
		struct task_struct *task = bpf_get_current_task_btf();
		if (any && cordon_cred_judged(BPF_CORE_READ(task, cred)))
			return cordon_lsm_report(any, CORDON_EV_FILE_RENAME, CORDON_REASON_CORDON_STATE,
						 CORDON_FILE_CREATE, 0, 0, above, BPF_CORE_READ(old_dir, mnt), 0, 0, 0,
						 CORDON_CNT_DENIED_FILE, CORDON_CNT_AUDITED_FILE);
	}
	const struct cordon_lsm_sandbox *sb = cordon_file_sandbox();
	if (!sb)
		return 0;
	struct vfsmount *old_mnt = BPF_CORE_READ(old_dir, mnt);
	struct cordon_walk w;
	cordon_walk(&w, sb, BPF_CORE_READ(old_dir, dentry), old_mnt, CORDON_FILE_CREATE);
	if (!(w.granted & CORDON_FILE_CREATE))
		return cordon_lsm_report(sb, CORDON_EV_FILE_RENAME, cordon_walk_reason(&w), CORDON_FILE_CREATE,
					 w.granted, w.rule, old_dentry, old_mnt, 0, 0, 0,
					 CORDON_CNT_DENIED_FILE, CORDON_CNT_AUDITED_FILE);
	int verdict = cordon_no_gain(&w, sb, CORDON_EV_FILE_RENAME, old_dentry, old_mnt, new_dir, new_dentry);
	if (verdict || !(flags & RENAME_EXCHANGE))
		return verdict;
	/* Exchange: the other object moves the opposite way. */
	return cordon_no_gain(&w, sb, CORDON_EV_FILE_RENAME, new_dentry, BPF_CORE_READ(new_dir, mnt), old_dir, old_dentry);
}

static __always_inline int cordon_setattr(const struct path *path)
{
	int refused =
		cordon_state_dir_write(BPF_CORE_READ(path, dentry), NULL, BPF_CORE_READ(path, mnt), CORDON_FILE_WRITE);
	if (refused)
		return refused;
	const struct cordon_lsm_sandbox *sb = cordon_file_sandbox();
	if (!sb)
		return 0;
	return cordon_check_path(sb, CORDON_EV_FILE_SETATTR, BPF_CORE_READ(path, dentry), BPF_CORE_READ(path, mnt),
				 CORDON_FILE_WRITE);
}

SEC("lsm/path_truncate")
int BPF_PROG(cordon_path_truncate, const struct path *path)
{
	return cordon_setattr(path);
}

SEC("lsm/path_chmod")
int BPF_PROG(cordon_path_chmod, const struct path *path, umode_t mode)
{
	return cordon_setattr(path);
}

SEC("lsm/path_chown")
int BPF_PROG(cordon_path_chown, const struct path *path)
{
	return cordon_setattr(path);
}

/* A metadata write the inode hooks see (xattrs, ACLs, timestamps): refused
 * below cordon's state directory for every sandbox, else judged by the
 * sandbox's write rules. These hooks carry no mount: the walk stays inside
 * the filesystem, so only a write rule on the same filesystem allows it
 * (fails closed otherwise). */
static __always_inline int cordon_inode_metadata_write(struct dentry *dentry)
{
	int refused = cordon_state_dir_write(dentry, NULL, NULL, CORDON_FILE_WRITE);
	if (refused)
		return refused;
	const struct cordon_lsm_sandbox *sb = cordon_file_sandbox();
	if (!sb)
		return 0;
	return cordon_check_path(sb, CORDON_EV_FILE_SETATTR, dentry, NULL, CORDON_FILE_WRITE);
}

SEC("lsm/inode_setxattr")
int BPF_PROG(cordon_inode_setxattr, void *idmap, struct dentry *dentry)
{
	return cordon_inode_metadata_write(dentry);
}

SEC("lsm/inode_removexattr")
int BPF_PROG(cordon_inode_removexattr, void *idmap, struct dentry *dentry)
{
	return cordon_inode_metadata_write(dentry);
}

#define TIOCSTI 0x5412
#define TIOCLINUX 0x541C
#define FS_IOC_SETFLAGS 0x40086602
#define FS_IOC32_SETFLAGS 0x40046602
#define FS_IOC_FSSETXATTR 0x401c5820

/* ioctl: injecting input into a terminal (TIOCSTI, TIOCLINUX: the console's
 * selection paste and more) reaches whatever reads that terminal, outside
 * the sandbox: never allowed. Changing inode flags (immutable, append-only,
 * ...) is a metadata write: it needs write rights on the file's path, like
 * chmod. Every other command is judged by the open that made the fd. */
static __always_inline int cordon_ioctl(struct file *file, unsigned int cmd)
{
	if (cmd == TIOCSTI || cmd == TIOCLINUX) {
		const struct cordon_lsm_sandbox *sb = cordon_current_sandbox();
		if (!sb)
			return 0;
		return cordon_lsm_report(sb, CORDON_EV_TAMPER_TERMINAL, CORDON_REASON_FORBIDDEN, 0, 0, 0,
					 BPF_CORE_READ(file, f_path.dentry), BPF_CORE_READ(file, f_path.mnt), 0, cmd, 0,
					 CORDON_CNT_DENIED_TAMPER, CORDON_CNT_AUDITED_TAMPER);
	}
	if (cmd != FS_IOC_SETFLAGS && cmd != FS_IOC32_SETFLAGS && cmd != FS_IOC_FSSETXATTR)
		return 0;
	int refused = cordon_state_dir_write(BPF_CORE_READ(file, f_path.dentry), NULL, BPF_CORE_READ(file, f_path.mnt),
					     CORDON_FILE_WRITE);
	if (refused)
		return refused;
	const struct cordon_lsm_sandbox *sb = cordon_file_sandbox();
	if (!sb)
		return 0;
	struct vfsmount *mnt = BPF_CORE_READ(file, f_path.mnt);
	if (cordon_is_anonymous(mnt))
		return 0;
	struct dentry *dentry = BPF_CORE_READ(file, f_path.dentry);
	struct cordon_walk w;
	cordon_walk(&w, sb, dentry, mnt, CORDON_FILE_WRITE);
	if (w.granted & CORDON_FILE_WRITE)
		return 0;
	return cordon_lsm_report(sb, CORDON_EV_FILE_IOCTL, cordon_walk_reason(&w), CORDON_FILE_WRITE, w.granted,
				 w.rule, dentry, mnt, 0, cmd, 0, CORDON_CNT_DENIED_FILE, CORDON_CNT_AUDITED_FILE);
}

SEC("lsm/file_ioctl")
int BPF_PROG(cordon_file_ioctl, struct file *file, unsigned int cmd, unsigned long arg)
{
	return cordon_ioctl(file, cmd);
}

/* 32-bit tasks' ioctls (6.8+, and backported to 6.1.y). */
SEC("lsm/file_ioctl_compat")
int BPF_PROG(cordon_file_ioctl_compat, struct file *file, unsigned int cmd, unsigned long arg)
{
	return cordon_ioctl(file, cmd);
}

/* POSIX ACLs: since 6.2 set and removed outside the xattr hooks. Loaded only
 * where the kernel has these hooks (the loader checks its BTF). */
SEC("lsm/inode_set_acl")
int BPF_PROG(cordon_inode_set_acl, void *idmap, struct dentry *dentry)
{
	return cordon_inode_metadata_write(dentry);
}

SEC("lsm/inode_remove_acl")
int BPF_PROG(cordon_inode_remove_acl, void *idmap, struct dentry *dentry)
{
	return cordon_inode_metadata_write(dentry);
}

#define ATTR_MODE (1 << 0)
#define ATTR_UID (1 << 1)
#define ATTR_GID (1 << 2)
#define ATTR_SIZE (1 << 3)
#define ATTR_ATIME (1 << 4)
#define ATTR_MTIME (1 << 5)
#define ATTR_KILL_SUID (1 << 11)
#define ATTR_KILL_SGID (1 << 12)
#define ATTR_KILL_PRIV (1 << 14)

/* Timestamps (utimensat, utimes): the one attribute change no path hook
 * sees. Mode, owner and size changes are judged by path_chmod/chown/truncate
 * (with the mount), and the kernel's own clearing of setuid bits follows a
 * write already judged: those pass here. The hook has no mount: the walk
 * stays inside the filesystem, like the xattr hooks. Its signature gained
 * an idmap first argument in 6.3: one program per signature, the loader
 * keeps the one matching the kernel's BTF. */
static __always_inline int cordon_setattr_times(struct dentry *dentry, struct iattr *attr)
{
	unsigned int valid = BPF_CORE_READ(attr, ia_valid);
	if (!(valid & (ATTR_ATIME | ATTR_MTIME)) ||
	    (valid & (ATTR_MODE | ATTR_UID | ATTR_GID | ATTR_SIZE | ATTR_KILL_SUID | ATTR_KILL_SGID | ATTR_KILL_PRIV)))
		return 0;
	return cordon_inode_metadata_write(dentry);
}

SEC("lsm/inode_setattr")
int BPF_PROG(cordon_inode_setattr, void *idmap, struct dentry *dentry, struct iattr *attr)
{
	return cordon_setattr_times(dentry, attr);
}

/* Before 6.3: (struct dentry *, struct iattr *). Same hook, other signature. */
SEC("lsm/inode_setattr")
int BPF_PROG(cordon_inode_setattr_v1, struct dentry *dentry, struct iattr *attr)
{
	return cordon_setattr_times(dentry, attr);
}
