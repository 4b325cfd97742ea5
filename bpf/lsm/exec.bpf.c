/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Exec and executable mappings. bprm_check_security runs for every binary
 * in the chain: a shebang script and then its interpreter are both checked.
 * `ld.so /path/prog` executes ld.so (checked) and then maps prog with
 * PROT_EXEC (checked by mmap_file). memfd_create + fexecve executes a file
 * on an internal mount: denied unless allowMemfdExec.
 */
#include "lib/lsm_common.bpf.h"

#define PROT_EXEC 0x4
#define VM_EXEC 0x4

static __always_inline int cordon_check_exec(struct file *file, __u16 kind, __u32 want)
{
	const struct cordon_lsm_sandbox *sb = cordon_file_sandbox();
	if (!sb)
		return 0;
	struct vfsmount *mnt = BPF_CORE_READ(file, f_path.mnt);
	struct dentry *dentry = BPF_CORE_READ(file, f_path.dentry);
	if (cordon_is_anonymous(mnt)) {
		if (sb->flags & CORDON_LSM_F_MEMFD_EXEC)
			return 0;
		return cordon_lsm_report(sb, kind, CORDON_REASON_MEMFD_EXEC, want, 0, 0, dentry, mnt, 0, 0, 0,
					 CORDON_CNT_DENIED_FILE, CORDON_CNT_AUDITED_FILE);
	}
	return cordon_check_path(sb, kind, dentry, mnt, want);
}

SEC("lsm/bprm_check_security")
int BPF_PROG(cordon_bprm_check, struct linux_binprm *bprm)
{
	return cordon_check_exec(BPF_CORE_READ(bprm, file), CORDON_EV_FILE_EXEC, CORDON_FILE_EXEC);
}

SEC("lsm/mmap_file")
int BPF_PROG(cordon_mmap_file, struct file *file, unsigned long reqprot, unsigned long prot, unsigned long flags)
{
	if (!file || !(prot & PROT_EXEC))
		return 0;
	return cordon_check_exec(file, CORDON_EV_FILE_MMAP_EXEC, CORDON_FILE_MAP_EXEC);
}

SEC("lsm/file_mprotect")
int BPF_PROG(cordon_file_mprotect, struct vm_area_struct *vma, unsigned long reqprot, unsigned long prot)
{
	if (!(prot & PROT_EXEC))
		return 0;
	struct file *file = BPF_CORE_READ(vma, vm_file);
	if (!file)
		return 0; /* anonymous memory (JITs) */
	return cordon_check_exec(file, CORDON_EV_FILE_MMAP_EXEC, CORDON_FILE_MAP_EXEC);
}
