/* SPDX-License-Identifier: Apache-2.0 */
/*
 * File, exec and tamper policy ABI (BPF LSM).
 *
 * Rules name OBJECTS, not strings: each rule path is resolved by the loader
 * to its (device, inode) and stored in file_rules. A check walks the target's
 * ancestry as the kernel sees it — dentry to parent, and at the root of a
 * mount across to its mountpoint, up to the real root — and unions the rights
 * of every rule object it meets (like Landlock). Hence:
 *  - symlinks, "..", /proc/self/root/..., /proc/self/fd/N and open_by_handle_at
 *    all end at the same dentry, which is what is checked;
 *  - there is no string, so no length limit (256 bytes or 4096) to overflow;
 *  - a renamed rule directory keeps its rights (the rule follows the inode);
 *  - a hardlink or rename may not give an object more rights at its new place
 *    than it had at the old (path_link/path_rename: new rights must be a
 *    subset of the old), so a secret cannot be linked into a writable tree;
 *  - a bind mount is judged by the path through the mount tree; the sandbox
 *    cannot create mounts at all (tamper rules).
 */
#ifndef CORDON_ABI_FILE_H
#define CORDON_ABI_FILE_H

#include "cordon_common.h"

/* Rights a rule grants, unioned along the ancestry. */
#define CORDON_FILE_READ (1u << 0)     /* open for reading, readdir */
#define CORDON_FILE_WRITE (1u << 1)    /* open for writing, truncate, chmod, chown, xattr */
#define CORDON_FILE_CREATE (1u << 2)   /* create, mkdir, mknod, symlink, link, unlink, rmdir, rename (on the directory) */
#define CORDON_FILE_EXEC (1u << 3)     /* execve */
#define CORDON_FILE_MAP_EXEC (1u << 4) /* mmap/mprotect with PROT_EXEC */
/* Not a right: the mark of cordon's own state (/var/lib/cordon: signing
 * keys, kept policy texts), written by the loader for every sandbox. A walk
 * that meets it grants nothing, whatever other rules grant (reason
 * CORDON_REASON_CORDON_STATE); policies may name nothing at or below it. */
#define CORDON_FILE_FORBIDDEN (1u << 31)

/* Policy spellings: read = READ; write = READ|WRITE|CREATE; exec = READ|EXEC|MAP_EXEC.
 * Library directories in profiles get READ|MAP_EXEC. */

/* Per-sandbox flags (cordon_lsm_sandbox.flags). */
#define CORDON_LSM_F_MEMFD_EXEC (1u << 0)    /* spec.files.allowMemfdExec */
#define CORDON_LSM_F_ABSTRACT_UNIX (1u << 1) /* spec.network.abstractUnix */
#define CORDON_LSM_F_USERNS (1u << 2)        /* spec.allowUserNamespaces */
#define CORDON_LSM_F_PROC_SELF (1u << 3)     /* the task's own /proc/<pid> is readable */
#define CORDON_LSM_F_FILES (1u << 4)         /* spec.files present: files are default-deny */
#define CORDON_LSM_F_KILL (1u << 5)          /* spec.onViolation: kill (detect mode) */
#define CORDON_LSM_F_SECCOMP (1u << 6)       /* `cordon run` seccomp filter: report its refusals */
#define CORDON_LSM_F_LANDLOCK (1u << 7)      /* `cordon run` Landlock file rules: report their refusals */
#define CORDON_LSM_F_LANDLOCK_SCOPE (1u << 9) /* `cordon run` Landlock signal/abstract-unix scoping: report it */
#define CORDON_LSM_F_REPORT_ONLY (1u << 8)   /* detect object: only report seccomp/Landlock refusals
					      * (BPF LSM enforces the rest) */
#define CORDON_LSM_F_KEYRINGS (1u << 10)     /* spec.allowKeyrings */
#define CORDON_LSM_F_READ_ONLY_MOUNTS (1u << 11) /* `cordon run` mounts /sys and host /proc files read-only: report EROFS */
/* The sandbox is contained (`cordon contain`, set and cleared by userspace
 * with its network state): every path check refuses (reason
 * CORDON_REASON_CONTAINED), in audit mode too, with or without spec.files. */
#define CORDON_LSM_F_CONTAINED (1u << 12)

/* Value of lsm_sandboxes, keyed by the sandbox root cgroup id. Replaced as a
 * whole on policy change (one hash update: readers see old or new). */
struct cordon_lsm_sandbox {
	__u64 sandbox_id;
	__u32 version;  /* selects this policy's entries in file_rules */
	__u32 mode;     /* enum cordon_mode */
	__u32 flags;    /* CORDON_LSM_F_* */
	__u32 families; /* bits of enum cordon_family allowed for socket() */
	__u32 level;    /* cgroup level of the sandbox root */
	__u32 pad;
	__u64 capabilities; /* bit (1 << CAP_*) set: capability granted (spec.capabilities) */
};
CORDON_ABI_SIZE(struct cordon_lsm_sandbox, 40);
CORDON_ABI_OFFSET(struct cordon_lsm_sandbox, capabilities, 32);

/* Key of sandbox_egress_addr / sandbox_egress_port (BPF LSM object): a
 * sandbox's egress tries (its network object's addr_rules and port_rules,
 * referenced, not copied), for the sockets created outside the sandbox that
 * lsm/socket_connect and lsm/socket_sendmsg judge. Keyed by the policy
 * version of cordon_lsm_sandbox, like file_rules: a replacement inserts the
 * new version's pair first, switches the version, then deletes the old pair,
 * so a check never mixes one policy's addresses with another's ports. */
struct cordon_lsm_net_key {
	__u64 sandbox_id;
	__u32 version;
	__u32 pad;
};
CORDON_ABI_SIZE(struct cordon_lsm_net_key, 16);

/* Value of cred_owners (BPF LSM object only): an inode storage map whose
 * entry marks a credential file (spec.credentials, deliver: file) with the
 * sandbox it belongs to. Userspace sets it through a descriptor of the file
 * (inode storage maps take an fd as key) before the file is renamed into
 * place; it dies with the inode. lsm/file_open refuses every task outside
 * that sandbox but unconfined root. */
struct cordon_cred_owner {
	__u64 sandbox_id; /* cgroup id of the owning sandbox's root */
};
CORDON_ABI_SIZE(struct cordon_cred_owner, 8);

struct cordon_inode_key {
	__u64 sandbox_id;
	__u64 ino;
	__u32 dev;      /* kernel encoding: major << 20 | minor */
	__u32 version;
};
CORDON_ABI_SIZE(struct cordon_inode_key, 24);

struct cordon_inode_rule {
	__u32 rights; /* CORDON_FILE_* */
	__u32 rule;   /* 1-based index into the policy's expanded file rules */
};
CORDON_ABI_SIZE(struct cordon_inode_rule, 8);

/* cgroup_cache value: which sandbox (0 = none) a cgroup belongs to, valid
 * while gen equals lsm_state.generation (bumped on every attach/detach). */
struct cordon_cgroup_cache {
	__u64 sandbox_id;
	__u64 gen;
};
CORDON_ABI_SIZE(struct cordon_cgroup_cache, 16);

struct cordon_lsm_state {
	__u64 generation;
};
CORDON_ABI_SIZE(struct cordon_lsm_state, 8);

#define CORDON_PATH_MAX 4096
#define CORDON_WALK_MAX 1024 /* ancestry levels walked; deeper is denied */

#endif
