/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Ownership bookkeeping for the other programs (see bpf/lib/lsm_common.bpf.h):
 * which credentials were prepared inside a sandbox (so that a check made
 * while the kernel overrides a sandboxed task's credentials can tell the
 * task's own from overlayfs's creator credentials), and which files a
 * sandboxed task made the owner of (F_SETOWN), so that SIGIO/SIGURG sent
 * for such a file obeys the sandbox's signal rule whoever triggers it.
 * Every entry is removed when its object is freed.
 */
#define CORDON_OWNER_MAPS_DEFINE 1
#include "lib/lsm_common.bpf.h"

#define ENOMEM 12

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
}
