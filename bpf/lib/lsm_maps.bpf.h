/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Maps of the host-wide BPF LSM object. Unlike the network programs (one
 * instance per sandbox, attached to its cgroup), LSM programs are global:
 * lsm_cgroup allows only 10 hooks system-wide, and cordon needs ~30. Each
 * program first finds the calling task's sandbox (cgroup_cache, then the
 * cgroup ancestry) and returns at once for tasks outside every sandbox.
 */
#ifndef CORDON_BPF_LSM_MAPS_H
#define CORDON_BPF_LSM_MAPS_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "abi/cordon_common.h"
#include "abi/cordon_event.h"
#include "abi/cordon_file.h"
#include "abi/cordon_net.h"

/* Per-CPU scratch for building a file event: header, then the path. */
struct cordon_lsm_scratch {
	struct cordon_object_event ev;
	char path[CORDON_PATH_MAX];      /* directly after ev: what is sent */
	char build[CORDON_PATH_MAX + 256]; /* assembled right to left */
	__u32 build_pos;                   /* where the assembled path starts in build */
	__u32 _pad;
	struct cordon_repeat_value repeat; /* to open a repeats entry (lib/repeats.bpf.h) */
	/* Map keys kept here, not on the stack: a hook's frame and the path
	 * walk's bpf_loop callback share 512 bytes. */
	struct cordon_repeat_key repeat_key;
	struct cordon_lsm_net_key cfg_key;
};

#define CORDON_LSM_MAPS_DECLARE(storage)                                       \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_HASH);                               \
		__uint(max_entries, 16384);                                    \
		__type(key, __u64);                                            \
		__type(value, struct cordon_lsm_sandbox);                      \
	} lsm_sandboxes SEC(".maps");                                          \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_LRU_HASH);                           \
		__uint(max_entries, 65536);                                    \
		__type(key, __u64);                                            \
		__type(value, struct cordon_cgroup_cache);                     \
	} cgroup_cache SEC(".maps");                                           \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_ARRAY);                              \
		__uint(max_entries, 1);                                        \
		__type(key, __u32);                                            \
		__type(value, struct cordon_lsm_state);                        \
	} lsm_state SEC(".maps");                                              \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_HASH);                               \
		__uint(max_entries, 1 << 20);                                  \
		__uint(map_flags, BPF_F_NO_PREALLOC);                          \
		__type(key, struct cordon_inode_key);                          \
		__type(value, struct cordon_inode_rule);                       \
	} file_rules SEC(".maps");                                             \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);                       \
		__uint(max_entries, 16384);                                    \
		__type(key, __u64);                                            \
		__array(values, struct {                                       \
			__uint(type, BPF_MAP_TYPE_RINGBUF);                    \
			__uint(max_entries, 256 * 1024);                       \
		});                                                            \
	} sandbox_events SEC(".maps");                                         \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);                       \
		__uint(max_entries, 16384);                                    \
		__type(key, __u64);                                            \
		__array(values, struct {                                       \
			__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);               \
			__uint(max_entries, CORDON_CNT_MAX);                   \
			__type(key, __u32);                                    \
			__type(value, __u64);                                  \
		});                                                            \
	} sandbox_counters SEC(".maps");                                       \
	/* The sandboxes' record sequence counters (their `seq` maps). */     \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);                       \
		__uint(max_entries, 16384);                                    \
		__type(key, __u64);                                            \
		__array(values, struct {                                       \
			__uint(type, BPF_MAP_TYPE_ARRAY);                      \
			__uint(max_entries, 1);                                \
			__type(key, __u32);                                    \
			__type(value, __u64);                                  \
		});                                                            \
	} sandbox_seqs SEC(".maps");                                           \
	/* The sandboxes' repeats maps (lib/repeats.bpf.h); an object         \
	 * pinned by a cordon without it writes every record. The inner       \
	 * template is the network object's `repeats` map. */                 \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);                       \
		__uint(max_entries, 16384);                                    \
		__type(key, __u64);                                            \
		__array(values, struct {                                       \
			__uint(type, BPF_MAP_TYPE_HASH);                       \
			__uint(max_entries, CORDON_REPEATS_MAX);               \
			__type(key, struct cordon_repeat_key);                 \
			__type(value, struct cordon_repeat_value);             \
		});                                                            \
	} sandbox_repeats SEC(".maps");                                        \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);                       \
		__uint(max_entries, 1);                                        \
		__type(key, __u32);                                            \
		__type(value, struct cordon_lsm_scratch);                      \
	} lsm_scratch SEC(".maps")

/* clang 14 emits only a forward declaration for a struct named this deep in
 * a map definition (see CORDON_LSM_EGRESS_MAPS): this makes sandbox_repeats'
 * key whole in each object file (its value is, as a field of the scratch). */
static const volatile struct cordon_repeat_key cordon_repeat_key_btf_type __attribute__((used));

/* The sandboxes' egress tries (see struct cordon_lsm_net_key). Defined by
 * bpf/lsm/socket.bpf.c only: the detect object has no socket programs. The
 * inner maps are the network objects' own tries: same type, key, value and
 * flags (BPF_F_INNER_MAP is neither needed nor allowed: only arrays compare
 * max_entries when an inner map is inserted, and LPM tries refuse the flag).
 * The inner templates carry the same BTF types as the network object's
 * tries: 6.1 compares timer_off, which a map has as -ENOENT with a BTF value
 * type and -EINVAL without one. clang 14 emits only a forward declaration for
 * a struct named this deep in a map definition (libbpf cannot size it), so
 * the one definition site also defines cordon_egress_btf_types, a global
 * that makes clang emit the structs whole. */
#define CORDON_LSM_EGRESS_MAPS(storage)                                        \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);                       \
		__uint(max_entries, 16384);                                    \
		__type(key, struct cordon_lsm_net_key);                        \
		__array(values, struct {                                       \
			__uint(type, BPF_MAP_TYPE_LPM_TRIE);                   \
			__uint(max_entries, 1);                                \
			__uint(map_flags, BPF_F_NO_PREALLOC);                  \
			__type(key, struct cordon_addr_key);                   \
			__type(value, struct cordon_addr_value);               \
		});                                                            \
	} sandbox_egress_addr SEC(".maps");                                    \
	storage struct {                                                       \
		__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);                       \
		__uint(max_entries, 16384);                                    \
		__type(key, struct cordon_lsm_net_key);                        \
		__array(values, struct {                                       \
			__uint(type, BPF_MAP_TYPE_LPM_TRIE);                   \
			__uint(max_entries, 1);                                \
			__uint(map_flags, BPF_F_NO_PREALLOC);                  \
			__type(key, struct cordon_port_key);                   \
			__type(value, struct cordon_port_value);               \
		});                                                            \
	} sandbox_egress_port SEC(".maps");                                    \
	storage const volatile struct {                                        \
		struct cordon_addr_key addr_key;                               \
		struct cordon_addr_value addr_value;                           \
		struct cordon_port_key port_key;                               \
		struct cordon_port_value port_value;                           \
	} cordon_egress_btf_types = {}

#endif
