// The ABI shared with the BPF programs, checked by this compiler too: every
// struct's size (and the offsets readers depend on) is asserted where it is
// defined (CORDON_ABI_SIZE in bpf/abi/*.h), which clang -target bpf checks
// when it builds the programs and this translation unit checks for the C++
// side. What is asserted here is what concerns userspace only.
#include "abi/cordon_common.h"
#include "abi/cordon_dns.h"
#include "abi/cordon_event.h"
#include "abi/cordon_file.h"
#include "abi/cordon_net.h"
#include "abi/cordon_oom.h"
#include "abi/cordon_pins.h"

static_assert(CORDON_CNT_MAX >= 9);
static_assert(CORDON_REASON_MAX < 256, "reasons are a __u8 in the event header");
static_assert(sizeof(struct cordon_object_event) % 8 == 0, "the path starts 8-byte aligned");

// cordon and the programs change the containment state's flags with 64-bit
// atomic operations on its first word (CORDON_STATE_FLAGS_WORD): flags and
// violations make up that word, and the element is 8-byte aligned.
static_assert(__builtin_offsetof(struct cordon_sandbox_state, flags) == 0);
static_assert(sizeof(((struct cordon_sandbox_state*)nullptr)->flags) == 4);
static_assert(sizeof(((struct cordon_sandbox_state*)nullptr)->violations) == 4);
static_assert(alignof(struct cordon_sandbox_state) == 8);
