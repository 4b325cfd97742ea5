/* SPDX-License-Identifier: Apache-2.0 */
/*
 * connect() and sendto() to unix sockets, for kernels without usable BPF LSM
 * (cgroup/connect_unix and cgroup/sendmsg_unix, kernel 6.7+). The loader
 * gives them the attach types BPF_CGROUP_UNIX_CONNECT / _SENDMSG (libbpf 1.1
 * does not know these section names) and leaves them out on older kernels.
 *
 * These hooks see the address as the caller wrote it, before the kernel
 * resolves it: a pathname socket is allowed when the string lies under a
 * rule granting write (the rule's own path, or below it), which the same
 * policy's BPF LSM check requires of the resolved inode. A relative path or
 * one with a ".." component cannot be judged by its string and is refused. A
 * symlink inside a writable directory still aliases a forbidden socket: the
 * detect layer (syscall exit, inode rules) reports such a connect, and kills
 * with onViolation: kill. Abstract sockets need network.abstractUnix.
 */
#include "lib/file_event.bpf.h"

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym __weak;

#define SUN_PATH_OFFSET 2 /* offsetof(struct sockaddr_un, sun_path) */

struct cordon_unix_addr {
	struct cordon_unix_key key;
	__u8 slack[24]; /* path[i & 127] stays inside the struct (verifier bound) */
	__u32 n;        /* bytes given after sun_family */
	__u32 len;      /* bytes of the name: before its NUL / the address end */
	int ended;
	int dotdot;     /* a ".." component */
};

/* One byte of a pathname (bpf_loop: verified once, not per iteration). */
static long cordon_unix_byte(__u32 i, void *data)
{
	struct cordon_unix_addr *a = data;
	if (i >= CORDON_UNIX_PATH_MAX)
		return 1;
	/* Keep the verifier's bound on the index through clang's rewrites. */
	__u64 idx = i;
	asm volatile("%0 &= 127" : "+r"(idx));
	i = idx;
	if (!a->ended && (i >= a->n || a->key.path[i] == 0)) {
		a->ended = 1;
		a->len = i;
	}
	if (a->ended) {
		a->key.path[i] = 0;
		return 0;
	}
	if (a->key.path[i] != '.' || (i > 0 && a->key.path[(i - 1) & 127] != '/'))
		return 0;
	__u32 j = i + 1, k = i + 2;
	if (j >= a->n || j >= CORDON_UNIX_PATH_MAX || a->key.path[j & 127] != '.')
		return 0;
	if (k >= a->n || k >= CORDON_UNIX_PATH_MAX || a->key.path[k & 127] == '/' || a->key.path[k & 127] == 0)
		a->dotdot = 1;
	return 0;
}

static __always_inline void cordon_unix_read(struct bpf_sock_addr *ctx, struct cordon_unix_addr *a)
{
	struct bpf_sock_addr_kern *kctx = bpf_cast_to_kern_ctx(ctx);
	struct sockaddr *uaddr = BPF_CORE_READ(kctx, uaddr);
	__u32 addrlen = BPF_CORE_READ(kctx, uaddrlen);
	__u32 n = addrlen > SUN_PATH_OFFSET ? addrlen - SUN_PATH_OFFSET : 0;
	if (n > CORDON_UNIX_PATH_MAX)
		n = CORDON_UNIX_PATH_MAX;
	if (n)
		bpf_probe_read_kernel(a->key.path, n & 0xff, (char *)uaddr + SUN_PATH_OFFSET);
	a->n = n;
	a->len = n;
	if (n == 0 || a->key.path[0] == 0)
		return; /* unnamed, or abstract: the name is every byte given */
	/* A pathname ends at its first NUL or at the address end; the rest is
	 * zeroed so that "P\0" rules match exactly. */
	bpf_loop(CORDON_UNIX_PATH_MAX, cordon_unix_byte, a, 0);
}

static __always_inline int cordon_unix_decide(struct bpf_sock_addr *ctx, __u16 counter_denied, __u16 counter_audited)
{
	const struct cordon_sandbox_cfg *cfg = cordon_cfg();
	if (!cfg)
		return 0;
	int contained = cordon_contained();
	if (!contained && !(cfg->unix_flags & CORDON_UNIX_F_ENFORCE))
		return 1;
	struct cordon_unix_addr a = {};
	cordon_unix_read(ctx, &a);
	__u8 reason;
	if (contained) {
		reason = CORDON_REASON_CONTAINED;
	} else if (a.len == 0 || a.key.path[0] == 0) {
		if (a.len == 0 || (cfg->unix_flags & CORDON_UNIX_F_ABSTRACT))
			return 1; /* unnamed, or abstract allowed */
		reason = CORDON_REASON_ABSTRACT_UNIX;
	} else {
		if (!(cfg->unix_flags & CORDON_UNIX_F_PATHS))
			return 1;
		if (a.key.path[0] != '/' || a.dotdot) {
			reason = CORDON_REASON_UNIX_UNCHECKABLE;
		} else {
			a.key.prefixlen = CORDON_UNIX_PATH_MAX * 8;
			struct cordon_unix_value *v = bpf_map_lookup_elem(&unix_rules, &a.key);
			if (v)
				return 1;
			reason = CORDON_REASON_UNIX_PATH;
		}
	}
	int audit = cfg->mode == CORDON_MODE_AUDIT && !contained;
	cordon_count(audit ? counter_audited : counter_denied);
	if (!audit && !contained)
		cordon_violation(cfg, CORDON_EV_NET_UNIX);
	cordon_object_event_emit(cfg, CORDON_EV_NET_UNIX, audit ? CORDON_VERDICT_AUDITED : CORDON_VERDICT_DENIED,
				 reason, CORDON_FILE_WRITE, 0, 0, (const char *)a.key.path, a.len, CORDON_UNIX_PATH_MAX,
				 CORDON_PATH_F_AS_WRITTEN);
	return audit;
}

/* Loaded with expected_attach_type BPF_CGROUP_UNIX_CONNECT by the loader. */
SEC("cgroup/connect4")
int cordon_connect_unix(struct bpf_sock_addr *ctx)
{
	return cordon_unix_decide(ctx, CORDON_CNT_DENIED_LSM_NET, CORDON_CNT_AUDITED_LSM_NET);
}

/* Loaded with expected_attach_type BPF_CGROUP_UNIX_SENDMSG by the loader. */
SEC("cgroup/sendmsg4")
int cordon_sendmsg_unix(struct bpf_sock_addr *ctx)
{
	return cordon_unix_decide(ctx, CORDON_CNT_DENIED_LSM_NET, CORDON_CNT_AUDITED_LSM_NET);
}
