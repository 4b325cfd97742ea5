/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Maps of one sandbox instance. Defined once in bpf/net/maps.bpf.c and
 * declared extern here, so every program file linked into the object by
 * `bpftool gen object` shares them.
 *
 * One instance (this whole object) is loaded per sandbox: its programs are
 * attached to the sandbox cgroup and, by cgroup inheritance, judge every
 * descendant cgroup too. Sandboxes never share a rule map, so one sandbox's
 * policy cannot leak into another's.
 */
#ifndef CORDON_BPF_MAPS_H
#define CORDON_BPF_MAPS_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "abi/cordon_common.h"
#include "abi/cordon_event.h"
#include "abi/cordon_net.h"
#include "abi/cordon_dns.h"

/* Slots of the instance's IPv4 allow cache (see egress_match.bpf.h). */
#define CORDON_ALLOW_CACHE_SLOTS 256

/* Room to build an object record of the cgroup programs before it is
 * written or counted (lib/file_event.bpf.h): the longest path they report
 * is a unix socket's (108 bytes), rounded up to whole words. */
#define CORDON_OBJECT_PATH_MAX 112
struct cordon_object_record {
	struct cordon_object_event e;
	char path[CORDON_OBJECT_PATH_MAX];
};

#define CORDON_MAPS_DECLARE(storage)                                           \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_ARRAY);                              \
		__uint(max_entries, 1);                                        \
		__type(key, __u32);                                            \
		__type(value, struct cordon_sandbox_cfg);                      \
	} sandbox_cfg SEC(".maps");                                            \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_LPM_TRIE);                           \
		__uint(max_entries, 1); /* resized by the loader */            \
		__uint(map_flags, BPF_F_NO_PREALLOC);                          \
		__type(key, struct cordon_addr_key);                           \
		__type(value, struct cordon_addr_value);                       \
	} addr_rules SEC(".maps");                                             \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_LPM_TRIE);                           \
		__uint(max_entries, 1); /* resized by the loader */            \
		__uint(map_flags, BPF_F_NO_PREALLOC);                          \
		__type(key, struct cordon_port_key);                           \
		__type(value, struct cordon_port_value);                       \
	} port_rules SEC(".maps");                                             \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_LPM_TRIE);                           \
		__uint(max_entries, 1); /* resized by the loader */            \
		__uint(map_flags, BPF_F_NO_PREALLOC);                          \
		__type(key, struct cordon_unix_key);                           \
		__type(value, struct cordon_unix_value);                       \
	} unix_rules SEC(".maps");                                             \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_LPM_TRIE);                           \
		__uint(max_entries, 1); /* resized by the loader */            \
		__uint(map_flags, BPF_F_NO_PREALLOC);                          \
		__type(key, struct cordon_addr_key);                           \
		__type(value, struct cordon_addr_value);                       \
	} listen_addr_rules SEC(".maps");                                      \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_LPM_TRIE);                           \
		__uint(max_entries, 1); /* resized by the loader */            \
		__uint(map_flags, BPF_F_NO_PREALLOC);                          \
		__type(key, struct cordon_port_key);                           \
		__type(value, struct cordon_port_value);                       \
	} listen_port_rules SEC(".maps");                                      \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_HASH);                               \
		__uint(max_entries, CORDON_DEV_RULES_MAX);                     \
		__type(key, struct cordon_dev_key);                            \
		__type(value, __u32);                                          \
	} dev_rules SEC(".maps");                                              \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_HASH);                               \
		__uint(max_entries, CORDON_SYSCTL_SAFE_MAX);                   \
		__type(key, struct cordon_sysctl_key);                         \
		__type(value, __u32);                                          \
	} sysctl_safe SEC(".maps");                                            \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_LRU_HASH);                           \
		__uint(max_entries, CORDON_SYN_REPORTED_MAX);                  \
		__type(key, __u32);                                            \
		__type(value, __u64);                                          \
	} syn_reported SEC(".maps");                                           \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_ARRAY);                              \
		__uint(max_entries, CORDON_ALLOW_CACHE_SLOTS);                 \
		__type(key, __u32);                                            \
		__type(value, __u64);                                          \
	} allow_cache SEC(".maps");                                            \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);                       \
		__uint(max_entries, CORDON_CNT_MAX);                           \
		__type(key, __u32);                                            \
		__type(value, __u64);                                          \
	} counters SEC(".maps");                                               \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_ARRAY);                              \
		__uint(max_entries, 1);                                        \
		__uint(map_flags, BPF_F_MMAPABLE); /* userspace: atomics */    \
		__type(key, __u32);                                            \
		__type(value, struct cordon_sandbox_state);                    \
	} sandbox_state SEC(".maps");                                          \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_ARRAY);                              \
		__uint(max_entries, 1);                                        \
		__type(key, __u32);                                            \
		__type(value, __u64);                                          \
	} seq SEC(".maps");                                                    \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_HASH);                               \
		__uint(max_entries, CORDON_REPEATS_MAX);                       \
		__type(key, struct cordon_repeat_key);                         \
		__type(value, struct cordon_repeat_value);                     \
	} repeats SEC(".maps");                                                \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);                       \
		__uint(max_entries, 1);                                        \
		__type(key, __u32);                                            \
		__type(value, struct cordon_repeat_value);                     \
	} repeat_scratch SEC(".maps");                                         \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);                       \
		__uint(max_entries, 1);                                        \
		__type(key, __u32);                                            \
		__type(value, struct cordon_object_record);                    \
	} obj_scratch SEC(".maps");                                            \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_ARRAY);                              \
		__uint(max_entries, 1);                                        \
		__type(key, __u32);                                            \
		__type(value, struct cordon_egress_budget);                    \
	} egress_budget SEC(".maps");                                          \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_ARRAY);                              \
		__uint(max_entries, 1);                                        \
		__type(key, __u32);                                            \
		__type(value, struct cordon_egress_usage);                     \
	} egress_usage SEC(".maps");                                           \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_LRU_HASH);                           \
		__uint(max_entries, CORDON_EGRESS_DESTS_MAX);                  \
		__type(key, struct cordon_egress_dest_key);                    \
		__type(value, __u64);                                          \
	} egress_dests SEC(".maps");                                           \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_HASH);                               \
		__uint(max_entries, CORDON_GRANTS_MAX);                        \
		__uint(map_flags, BPF_F_NO_PREALLOC);                          \
		__type(key, struct cordon_grant_key);                          \
		__type(value, struct cordon_grant_value);                      \
	} grants SEC(".maps");                                                 \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_ARRAY);                              \
		__uint(max_entries, 1);                                        \
		__type(key, __u32);                                            \
		__type(value, struct cordon_resolver);                         \
	} resolver SEC(".maps");                                               \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_SK_STORAGE);                         \
		__uint(map_flags, BPF_F_NO_PREALLOC);                          \
		__type(key, int);                                              \
		__type(value, struct cordon_dns_origin);                       \
	} dns_origin SEC(".maps");                                             \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_RINGBUF);                            \
		__uint(max_entries, 256 * 1024); /* resized by the loader */   \
	} events SEC(".maps")

#endif
