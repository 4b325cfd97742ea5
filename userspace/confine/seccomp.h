// seccomp: the syscall layer of `cordon run` on kernels without usable BPF
// LSM. A classic-BPF filter installed by the child between clone and exec; it
// is inherited by everything the command starts and cannot be removed.
//
// It refuses (errno EPERM unless noted):
//  - socket()/socketpair() whose family (arg0) the policy does not allow
//    (cgroup/sock_create sees only inet/inet6; this covers unix, netlink,
//    packet, vsock and every other family);
//  - bpf(); perf_event_open();
//  - mount, umount2, pivot_root, move_mount, fsopen, fsconfig, fsmount,
//    fspick, open_tree, open_tree_attr, mount_setattr;
//  - init_module, finit_module, delete_module; kexec_load, kexec_file_load;
//  - ptrace, process_vm_readv, process_vm_writev;
//  - unshare() and clone() with any CLONE_NEW* flag (CLONE_NEWUSER allowed
//    when spec.allowUserNamespaces); setns(); clone3() with ENOSYS (its flags
//    are in memory, out of seccomp's reach; glibc then falls back to clone);
//  - clock_settime, settimeofday, clock_adjtime, adjtimex (reads through
//    adjtimex/clock_adjtime are refused too: the mode is in memory);
//  - reboot;
//  - io_uring_setup, io_uring_enter, io_uring_register (io_uring submissions
//    would bypass every syscall-level check);
//  - x32 syscalls (nr with bit 0x40000000); any other syscall ABI (i386 via
//    int 0x80) kills the process, so no filter can be bypassed through it.
// Everything else is allowed. seccomp can neither read memory arguments nor
// tell who a signal or a mount is for, and it reports nothing to cordon.
#pragma once

#include <linux/filter.h>

#include <string>
#include <vector>

#include "policy/compiler.h"

namespace cordon {

struct SeccompPlan {
  std::vector<sock_filter> program;
  std::vector<std::string> refused;  // human names of what it refuses, one entry per group
};

// Pure: builds the filter for policy.families and policy.lsm_flags (USERNS).
SeccompPlan PrepareSeccomp(const policy::CompiledPolicy& policy);

// In the child between clone and exec: prctl(PR_SET_NO_NEW_PRIVS) and
// seccomp(SECCOMP_SET_MODE_FILTER, 0, program). Async-signal-safe (no
// allocation). Returns 0 or an errno (EINVAL for an empty program).
int ApplySeccompInChild(const SeccompPlan& plan);

}  // namespace cordon
