/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Ownership bookkeeping for the other programs (see bpf/lib/lsm_common.bpf.h):
 * which credentials were prepared inside a sandbox (so that a check made
 * while the kernel overrides a sandboxed task's credentials can tell the
 * task's own from overlayfs's creator credentials), and which files a
 * sandboxed task made the owner of (F_SETOWN), so that SIGIO/SIGURG sent
 * for such a file obeys the sandbox's signal rule whoever triggers it.
 * Every entry is removed when its object is freed. cred_prepare also
 * reports the start of a core dump (proc.coredump).
 */
#define CORDON_OWNER_MAPS_DEFINE 1
#include "lib/lsm_common.bpf.h"

#define ENOMEM 12
#define PF_EXITING 0x00000004  /* include/linux/sched.h */
#define PF_SIGNALED 0x00000400
#define RLIMIT_CORE 4
#define CORDON_MIN_COREDUMP 4096 /* binfmt_elf's min_coredump (a page): below it no file is written */

/* get_signal() sets PF_SIGNALED on a task about to die of a signal, then
 * calls do_coredump() for the core-dumping ones, whose first step is
 * prepare_creds() for the dump writer (before PF_EXITING, set by do_exit()).
 * Nothing else prepares credentials in that window. The dump is then written
 * with those credentials (tracked below, so BPF LSM judges them); Landlock,
 * first in the LSM order, refuses a dump where the command may not write and
 * reports nothing: this event is the record of every dump that began.
 * With RLIMIT_CORE below a page no file can be written (a pipe core_pattern
 * hands the dump to the host's own helper): nothing is reported then. */
static __always_inline void cordon_report_coredump(const struct cordon_lsm_sandbox *sb)
{
	struct task_struct *task = bpf_get_current_task_btf();
	unsigned int flags = BPF_CORE_READ(task, flags);
	if (!(flags & PF_SIGNALED) || (flags & PF_EXITING))
		return;
	if (BPF_CORE_READ(task, signal, rlim[RLIMIT_CORE].rlim_cur) < CORDON_MIN_COREDUMP)
		return;
	cordon_lsm_emit(sb, CORDON_VERDICT_DETECTED, CORDON_EV_PROC_COREDUMP, CORDON_REASON_COREDUMP, 0, 0, 0,
			BPF_CORE_READ(task, fs, pwd.dentry), BPF_CORE_READ(task, fs, pwd.mnt), 0, 0, 0,
			CORDON_CNT_NONE, CORDON_CNT_NONE);
}

SEC("lsm/cred_prepare")
int BPF_PROG(cordon_cred_prepare, struct cred *new, const struct cred *old, gfp_t gfp)
{
	const struct cordon_lsm_sandbox *sb = cordon_current_sandbox();
	if (!sb)
		return 0;
	__u64 key = (__u64)new;
	__u64 id = sb->sandbox_id;
	/* Fails closed: untracked credentials of a sandboxed task would be
	 * taken for the kernel's own when used as an override. */
	if (bpf_map_update_elem(&sandbox_creds, &key, &id, BPF_ANY))
		return -ENOMEM;
	cordon_report_coredump(sb);
	return 0;
}

SEC("lsm/cred_free")
void BPF_PROG(cordon_cred_free, struct cred *cred)
{
	__u64 key = (__u64)cred;
	if (bpf_map_lookup_elem(&sandbox_creds, &key))
		bpf_map_delete_elem(&sandbox_creds, &key);
}

/* Runs before the owner is changed (the hook has only the file): whoever
 * sets it last decides. */
SEC("lsm/file_set_fowner")
void BPF_PROG(cordon_file_set_fowner, struct file *file)
{
	__u64 key = (__u64)file;
	const struct cordon_lsm_sandbox *sb = cordon_current_sandbox();
	if (!sb) {
		if (bpf_map_lookup_elem(&fown_sandbox, &key))
			bpf_map_delete_elem(&fown_sandbox, &key);
		return;
	}
	__u64 id = sb->sandbox_id;
	bpf_map_update_elem(&fown_sandbox, &key, &id, BPF_ANY);
}

SEC("lsm/file_free_security")
void BPF_PROG(cordon_file_free_security, struct file *file)
{
	__u64 key = (__u64)file;
	if (bpf_map_lookup_elem(&fown_sandbox, &key))
		bpf_map_delete_elem(&fown_sandbox, &key);
	if (bpf_map_lookup_elem(&audited_opens, &key))
		bpf_map_delete_elem(&audited_opens, &key);
}
