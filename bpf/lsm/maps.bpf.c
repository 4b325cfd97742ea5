/* SPDX-License-Identifier: Apache-2.0 */
/* The one definition of the LSM maps (see bpf/lib/lsm_maps.bpf.h). */
#include "lib/lsm_maps.bpf.h"

CORDON_LSM_MAPS_DECLARE();

/* The repeats target hash's key (lib/repeats.bpf.h): the loader sets it
 * from getrandom() before the load. */
const volatile __u64 cordon_repeat_seed[2] = {0, 0};

char LICENSE[] SEC("license") = "GPL";
