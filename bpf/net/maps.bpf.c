/* SPDX-License-Identifier: Apache-2.0 */
/* The one definition of the sandbox maps (see bpf/lib/maps.bpf.h). */
#include "lib/maps.bpf.h"

CORDON_MAPS_DECLARE();

char LICENSE[] SEC("license") = "GPL";
