// Compile-time checks of the ABI shared with the BPF programs: sizes and
// offsets must not change silently (a change needs CORDON_LAYOUT_VERSION++).
#include <cstddef>

#include "abi/cordon_common.h"
#include "abi/cordon_event.h"
#include "abi/cordon_file.h"
#include "abi/cordon_net.h"
#include "abi/cordon_pins.h"

static_assert(sizeof(struct cordon_sandbox_cfg) == 32);
static_assert(sizeof(struct cordon_unix_key) == 112);
static_assert(sizeof(struct cordon_addr_key) == 20);
static_assert(sizeof(struct cordon_addr_value) == 8);
static_assert(sizeof(struct cordon_port_key) == 12);
static_assert(offsetof(struct cordon_port_key, port_set) == 4);
static_assert(offsetof(struct cordon_port_key, proto) == 8);
static_assert(offsetof(struct cordon_port_key, port) == 9);
static_assert(sizeof(struct cordon_port_value) == 4);
static_assert(sizeof(struct cordon_event) == 96);
static_assert(offsetof(struct cordon_event, comm) == 56);
static_assert(offsetof(struct cordon_event, addr) == 72);
static_assert(sizeof(struct cordon_sandbox_info) == 4136);
static_assert(CORDON_CNT_MAX >= 9);
static_assert(sizeof(struct cordon_lsm_sandbox) == 40);
static_assert(offsetof(struct cordon_lsm_sandbox, capabilities) == 32);
static_assert(sizeof(struct cordon_file_event) == 136);
static_assert(sizeof(struct cordon_lsm_net_key) == 16);
