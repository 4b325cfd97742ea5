/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The directory-rights cache's maps and the programs that invalidate it (see
 * bpf/lib/dir_cache.bpf.h): every dentry move, directory removal and new
 * superblock on the host bumps the epoch, after the change (fexit), so a walk
 * that overlapped it stored its result under an epoch that is already gone.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#define CORDON_DIR_CACHE_DEFINE 1
#include "lib/dir_cache.bpf.h"

const volatile __u32 cordon_dir_cache_on = 1;

static __always_inline void cordon_dir_bump(void)
{
	__u32 zero = 0;
	__u64 *epoch = bpf_map_lookup_elem(&dir_epoch, &zero);
	if (epoch)
		__sync_fetch_and_add(epoch, 1);
}

/* d_move, d_exchange and d_splice_alias all end in __d_move. */
SEC("fexit/__d_move")
int BPF_PROG(cordon_dentry_moved)
{
	cordon_dir_bump();
	return 0;
}

SEC("fexit/vfs_rmdir")
int BPF_PROG(cordon_dir_removed)
{
	cordon_dir_bump();
	return 0;
}

/* Before the new superblock gets its device number (sget assigns it after). */
SEC("fexit/security_sb_alloc")
int BPF_PROG(cordon_sb_allocated)
{
	cordon_dir_bump();
	return 0;
}
