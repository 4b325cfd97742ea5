/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The directory-rights cache of the BPF LSM walk (not in the detect object).
 *
 * A file check unions the rights of every rule object on the way from the
 * target up to the real root (cordon_walk in lsm_common.bpf.h). Most of that
 * way is the same for every file of a directory, so for a directory D the
 * part inside D's mount (D up to the mount's root dentry) is remembered per
 * sandbox: the rights and the deepest rule met there. A later walk that
 * reaches D takes them at once and continues at the mountpoint, so the part
 * above the mount (where mounts can move) is always walked live.
 *
 * An entry is used only while nothing it was computed from can have changed:
 *  - the rules: the sandbox's policy version is part of the entry (a version
 *    names one immutable rule set: versions are never reused for a cgroup,
 *    see AddSandbox in userspace/loader/lsm.cc);
 *  - the dentry tree: every rename, exchange or splice of a dentry anywhere
 *    on the host goes through __d_move, and every directory removal through
 *    vfs_rmdir (an inode number can be reused once the directory is gone);
 *    both bump the host-wide epoch when they are done, and an entry is valid
 *    only for the epoch read before its part of the walk began (a move during
 *    that part leaves it under an epoch already gone). A new superblock bumps it
 *    too (a device number can be reused by a new filesystem);
 *  - the mount: the entry records the ino of the mount root it stopped at, so
 *    a bind mount of a subdirectory does not reuse a whole-filesystem entry.
 * Only local filesystems whose (device, inode) names one directory for as long
 * as it exists are cached (ext2/3/4, xfs, tmpfs); others (overlayfs and btrfs,
 * whose inode numbers repeat across layers or subvolumes of one superblock,
 * network and FUSE filesystems, whose trees change behind the kernel, procfs)
 * are always walked.
 * Entries are written whole by bpf_map_update_elem and carry a checksum, so a
 * reader racing with a writer or with the reuse of an evicted entry sees a
 * mismatch (a miss), never a mix of two entries.
 */
#ifndef CORDON_BPF_DIR_CACHE_H
#define CORDON_BPF_DIR_CACHE_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#define EXT4_SUPER_MAGIC 0xEF53
#define XFS_SUPER_MAGIC 0x58465342
#define CORDON_TMPFS_MAGIC 0x01021994
#define CORDON_S_IFMT 00170000
#define CORDON_S_IFDIR 0040000

struct cordon_dir_key {
	__u64 sandbox_id;
	__u64 ino;
	__u32 dev;
	__u32 pad;
};

struct cordon_dir_entry {
	__u64 sandbox_id;
	__u64 ino;
	__u64 epoch;
	__u64 root_ino;
	__u32 dev;
	__u32 version;
	__u32 granted;
	__u32 rule;
	__u64 check;
};

/* Set by the loader: 0 where the epoch programs cannot be attached. */
extern const volatile __u32 cordon_dir_cache_on;

#define CORDON_DIR_CACHE_MAPS(storage)                                         \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_LRU_HASH);                           \
		__uint(max_entries, 16384);                                    \
		__type(key, struct cordon_dir_key);                            \
		__type(value, struct cordon_dir_entry);                        \
	} dir_cache SEC(".maps");                                              \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_ARRAY);                              \
		__uint(max_entries, 1);                                        \
		__type(key, __u32);                                            \
		__type(value, __u64);                                          \
	} dir_epoch SEC(".maps")

#ifdef CORDON_DIR_CACHE_DEFINE /* bpf/lsm/cache.bpf.c */
CORDON_DIR_CACHE_MAPS();
#else
CORDON_DIR_CACHE_MAPS(extern);
#endif

static __always_inline __u64 cordon_dir_mix(__u64 h, __u64 v)
{
	h ^= v;
	h *= 0x9E3779B97F4A7C15ULL;
	return h ^ (h >> 29);
}

static __always_inline __u64 cordon_dir_check(const struct cordon_dir_entry *e)
{
	__u64 h = 0x2545F4914F6CDD1DULL;
	h = cordon_dir_mix(h, e->sandbox_id);
	h = cordon_dir_mix(h, e->ino);
	h = cordon_dir_mix(h, e->epoch);
	h = cordon_dir_mix(h, e->root_ino);
	h = cordon_dir_mix(h, ((__u64)e->dev << 32) | e->version);
	h = cordon_dir_mix(h, ((__u64)e->granted << 32) | e->rule);
	return h;
}

/* The host-wide epoch, or ~0 when the cache is off (never stored). */
static __always_inline __u64 cordon_dir_epoch(void)
{
	if (!cordon_dir_cache_on)
		return ~0ULL;
	__u32 zero = 0;
	__u64 *epoch = bpf_map_lookup_elem(&dir_epoch, &zero);
	return epoch ? *epoch : ~0ULL;
}

static __always_inline int cordon_dir_cacheable(struct inode *inode, struct super_block *sb)
{
	if ((BPF_CORE_READ(inode, i_mode) & CORDON_S_IFMT) != CORDON_S_IFDIR)
		return 0;
	unsigned long magic = BPF_CORE_READ(sb, s_magic);
	return magic == EXT4_SUPER_MAGIC || magic == XFS_SUPER_MAGIC || magic == CORDON_TMPFS_MAGIC;
}

#endif
