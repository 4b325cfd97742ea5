/* SPDX-License-Identifier: Apache-2.0 */
/* clang-format off */
/*
 * Host-facing controls that need no BPF LSM: socket options, device nodes,
 * sysctls. Each refusal is EPERM and an event; audit mode allows and reports.
 *
 * cgroup/setsockopt refuses (net.sockopt, arg = level, arg2 = optname):
 *  SO_REUSEPORT (value != 0)   share a port with a host service's reuseport group and take part of its connections
 *  SO_ATTACH_REUSEPORT_CBPF/EBPF  steer a reuseport group's traffic
 *  SO_MARK                     pick the host's firewall/routing marks: escape or impersonate nftables/ip rule policy
 *  SO_BINDTODEVICE, SO_BINDTOIFINDEX  leave the host's routing decision (send out any interface, a VRF's)
 *  SO_SNDBUFFORCE, SO_RCVBUFFORCE     exceed net.core.[rw]mem_max: pin host memory
 *  SO_PRIORITY (value < 0 or > 6)     the privileged qdisc bands (TC_PRIO_CONTROL ...): starve host traffic
 *  IP_TRANSPARENT, IPV6_TRANSPARENT (value != 0)  bind/receive foreign addresses: intercept (TPROXY) traffic
 *  IP_FREEBIND, IPV6_FREEBIND (value != 0)        bind addresses the host does not have yet (claim a VIP before its service)
 *  IP_IPSEC_POLICY, IP_XFRM_POLICY, IPV6_IPSEC_POLICY, IPV6_XFRM_POLICY  per-socket IPsec policy: bypass the host's (send in clear)
 *  TCP_REPAIR (value != 0)     forge connection state (sequence numbers, any 4-tuple) without a handshake
 *  IP_OPTIONS, IPV6_RTHDR, IPV6_HOPOPTS, IPV6_DSTOPTS, IPV6_RTHDRDSTOPTS and their RFC 2292 forms
 *                              a source route sends the packet to its first hop, not to the destination
 *                              the egress rules judged (the other option headers carry nothing a sandbox
 *                              needs); a source route given per message (IP_RETOPTS, IPV6_RTHDR control
 *                              messages) never passes this hook: cgroup_skb/egress drops such packets
 *                              (bpf/net/inbound.bpf.c)
 * Judged by the socket's cgroup (like every cgroup socket hook): a socket made
 * outside the sandbox and passed in is the outside cgroup's business.
 *
 * cgroup/dev (tamper.device, arg = major << 20 | minor, arg2 = BPF_DEVCG_ACC_*):
 * open() and mknod() of device nodes are refused except the safe set
 *  c 1:3 null, 1:5 zero, 1:7 full, 1:8 random, 1:9 urandom (any access, mknod too),
 *  c 5:0 tty (the caller's own controlling terminal), c 5:2 ptmx (a new pty pair) (read/write),
 * and the devices the loader adds per sandbox (dev_rules: AttachOptions::allowed_devices,
 * e.g. `cordon run`'s own pty slave 136:N). Other pts (136:*) are not safe: a
 * root workload could open the operator's terminal. The kernel asks at open()
 * and mknod() only: a device file already open (inherited, or passed over
 * SCM_RIGHTS) keeps working.
 *
 * cgroup/sysctl (tamper.sysctl, path = name, arg = 1 for a write): no writes to
 * /proc/sys at all, and reads only of the names in sysctl_safe (the loader's
 * constant set, userspace/loader/sandbox.cc kSafeSysctls).
 */
/* clang-format on */
#include "lib/file_event.bpf.h"

#define SOL_SOCKET 1
#define SOL_IP 0
#define SOL_IPV6 41
#define SOL_TCP 6

#define SO_PRIORITY 12
#define SO_REUSEPORT 15
#define SO_BINDTODEVICE 25
#define SO_SNDBUFFORCE 32
#define SO_RCVBUFFORCE 33
#define SO_MARK 36
#define SO_ATTACH_REUSEPORT_CBPF 51
#define SO_ATTACH_REUSEPORT_EBPF 52
#define SO_BINDTOIFINDEX 62
#define IP_OPTIONS 4
#define IP_FREEBIND 15
#define IP_IPSEC_POLICY 16
#define IP_XFRM_POLICY 17
#define IP_TRANSPARENT 19
#define IPV6_2292HOPOPTS 3
#define IPV6_2292DSTOPTS 4
#define IPV6_2292RTHDR 5
#define IPV6_2292PKTOPTIONS 6
#define IPV6_IPSEC_POLICY 34
#define IPV6_HOPOPTS 54
#define IPV6_RTHDRDSTOPTS 55
#define IPV6_RTHDR 57
#define IPV6_DSTOPTS 59
#define IPV6_XFRM_POLICY 35
#define IPV6_TRANSPARENT 75
#define IPV6_FREEBIND 78
#define TCP_REPAIR 19

#define BPF_DEVCG_ACC_MKNOD_ (1 << 0)
#define BPF_DEVCG_DEV_CHAR_ 2

/* The option's value as the kernel reads it: an int, or (IP options) a
 * single byte when shorter. 0 when absent. */
static __always_inline int cordon_opt_value(struct bpf_sockopt *ctx)
{
	void *p = ctx->optval;
	void *end = ctx->optval_end;
	if (p + sizeof(int) <= end)
		return *(int *)p;
	if (p + 1 <= end)
		return *(__u8 *)p;
	return 0;
}

static __always_inline int cordon_sockopt_refused(struct bpf_sockopt *ctx)
{
	int level = ctx->level;
	int name = ctx->optname;
	if (level == SOL_SOCKET) {
		switch (name) {
		case SO_REUSEPORT:
			return cordon_opt_value(ctx) != 0;
		case SO_PRIORITY: {
			int v = cordon_opt_value(ctx);
			return v < 0 || v > 6;
		}
		case SO_MARK:
		case SO_BINDTODEVICE:
		case SO_BINDTOIFINDEX:
		case SO_SNDBUFFORCE:
		case SO_RCVBUFFORCE:
		case SO_ATTACH_REUSEPORT_CBPF:
		case SO_ATTACH_REUSEPORT_EBPF:
			return 1;
		}
		return 0;
	}
	if (level == SOL_IP) {
		switch (name) {
		case IP_TRANSPARENT:
		case IP_FREEBIND:
			return cordon_opt_value(ctx) != 0;
		case IP_IPSEC_POLICY:
		case IP_XFRM_POLICY:
		case IP_OPTIONS:
			return 1;
		}
		return 0;
	}
	if (level == SOL_IPV6) {
		switch (name) {
		case IPV6_TRANSPARENT:
		case IPV6_FREEBIND:
			return cordon_opt_value(ctx) != 0;
		case IPV6_IPSEC_POLICY:
		case IPV6_XFRM_POLICY:
		case IPV6_2292HOPOPTS:
		case IPV6_2292DSTOPTS:
		case IPV6_2292RTHDR:
		case IPV6_2292PKTOPTIONS:
		case IPV6_HOPOPTS:
		case IPV6_RTHDRDSTOPTS:
		case IPV6_RTHDR:
		case IPV6_DSTOPTS:
			return 1;
		}
		return 0;
	}
	if (level == SOL_TCP && name == TCP_REPAIR)
		return cordon_opt_value(ctx) != 0;
	return 0;
}

/* A contained sandbox's operation on one of these hooks: refused, with an
 * event (reason CORDON_REASON_CONTAINED). */
static __always_inline int cordon_refuse_contained_object(const struct cordon_sandbox_cfg *cfg, __u16 kind, __u32 arg,
							  __u32 arg2)
{
	cordon_count(CORDON_CNT_DENIED_TAMPER);
	cordon_object_event_emit(cfg, kind, CORDON_VERDICT_DENIED, CORDON_REASON_CONTAINED, 0, arg, arg2, NULL, 0, 0,
				 0);
	return 0;
}

SEC("cgroup/setsockopt")
int cordon_setsockopt(struct bpf_sockopt *ctx)
{
	if (cordon_contained()) {
		const struct cordon_sandbox_cfg *cfg = cordon_cfg();
		if (!cfg)
			return 0;
		return cordon_refuse_contained_object(cfg, CORDON_EV_NET_SOCKOPT, (__u32)ctx->level,
						      (__u32)ctx->optname);
	}
	if (!cordon_sockopt_refused(ctx))
		return 1;
	const struct cordon_sandbox_cfg *cfg = cordon_cfg();
	if (!cfg)
		return 0;
	int audit = cfg->mode == CORDON_MODE_AUDIT;
	cordon_count(audit ? CORDON_CNT_AUDITED_TAMPER : CORDON_CNT_DENIED_TAMPER);
	if (!audit)
		cordon_violation(cfg, CORDON_EV_NET_SOCKOPT);
	cordon_object_event_emit(cfg, CORDON_EV_NET_SOCKOPT, audit ? CORDON_VERDICT_AUDITED : CORDON_VERDICT_DENIED,
				 CORDON_REASON_NOT_SAFE, 0, (__u32)ctx->level, (__u32)ctx->optname, NULL, 0, 0, 0);
	return audit;
}

SEC("cgroup/dev")
int cordon_dev(struct bpf_cgroup_dev_ctx *ctx)
{
	__u32 type = ctx->access_type & 0xffff;
	__u32 access = ctx->access_type >> 16;
	__u32 major = ctx->major;
	__u32 minor = ctx->minor;
	if (cordon_contained()) {
		const struct cordon_sandbox_cfg *cfg = cordon_cfg();
		if (!cfg)
			return 0;
		return cordon_refuse_contained_object(cfg, CORDON_EV_TAMPER_DEVICE, major << 20 | (minor & 0xfffff),
						      access | type << 16);
	}
	if (type == BPF_DEVCG_DEV_CHAR_) {
		if (major == 1 && (minor == 3 || minor == 5 || minor == 7 || minor == 8 || minor == 9))
			return 1;
		if (major == 5 && (minor == 0 || minor == 2) && !(access & BPF_DEVCG_ACC_MKNOD_))
			return 1;
	}
	struct cordon_dev_key key = { .type = type, .major = major, .minor = minor };
	__u32 *allowed = bpf_map_lookup_elem(&dev_rules, &key);
	if (allowed && !(access & ~*allowed))
		return 1;
	key.minor = CORDON_DEV_MINOR_ANY;
	allowed = bpf_map_lookup_elem(&dev_rules, &key);
	if (allowed && !(access & ~*allowed))
		return 1;
	const struct cordon_sandbox_cfg *cfg = cordon_cfg();
	if (!cfg)
		return 0;
	int audit = cfg->mode == CORDON_MODE_AUDIT;
	cordon_count(audit ? CORDON_CNT_AUDITED_TAMPER : CORDON_CNT_DENIED_TAMPER);
	if (!audit)
		cordon_violation(cfg, CORDON_EV_TAMPER_DEVICE);
	cordon_object_event_emit(cfg, CORDON_EV_TAMPER_DEVICE, audit ? CORDON_VERDICT_AUDITED : CORDON_VERDICT_DENIED,
				 CORDON_REASON_NOT_SAFE, 0, major << 20 | (minor & 0xfffff), access | type << 16, NULL,
				 0, 0, 0);
	return audit;
}

SEC("cgroup/sysctl")
int cordon_sysctl(struct bpf_sysctl *ctx)
{
	struct cordon_sysctl_key key = {};
	long n = bpf_sysctl_get_name(ctx, key.name, sizeof(key.name), 0);
	__u32 write = ctx->write;
	int contained = cordon_contained();
	if (!contained && !write && n >= 0 && bpf_map_lookup_elem(&sysctl_safe, &key))
		return 1;
	const struct cordon_sandbox_cfg *cfg = cordon_cfg();
	if (!cfg)
		return 0;
	int audit = cfg->mode == CORDON_MODE_AUDIT && !contained;
	cordon_count(audit ? CORDON_CNT_AUDITED_TAMPER : CORDON_CNT_DENIED_TAMPER);
	if (!audit && !contained)
		cordon_violation(cfg, CORDON_EV_TAMPER_SYSCTL);
	__u32 len = n >= 0 ? (__u32)n : CORDON_SYSCTL_NAME_MAX - 1;
	cordon_object_event_emit(cfg, CORDON_EV_TAMPER_SYSCTL, audit ? CORDON_VERDICT_AUDITED : CORDON_VERDICT_DENIED,
				 contained ? CORDON_REASON_CONTAINED : CORDON_REASON_NOT_SAFE, 0, write ? 1 : 0, 0,
				 key.name, len, CORDON_SYSCTL_NAME_MAX, n >= 0 ? 0 : CORDON_PATH_F_TRUNCATED);
	return audit;
}
