/* SPDX-License-Identifier: Apache-2.0 */
/* The one definition of the LSM maps (see bpf/lib/lsm_maps.bpf.h). */
#include "lib/lsm_maps.bpf.h"

CORDON_LSM_MAPS_DECLARE();

char LICENSE[] SEC("license") = "GPL";
