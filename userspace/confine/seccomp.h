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
//  - x32 syscalls (nr with bit 0x40000000) and i386 syscalls (int 0x80 from a
//    64-bit process, arch AUDIT_ARCH_I386), so no check can be bypassed
//    through another ABI's numbers (any other arch, impossible on x86_64, kills);
//  - what a sandboxed workload has no business doing to the host, where BPF
//    LSM may not be there to refuse it: pidfd_getfd, process_madvise, kcmp;
//    vhangup; fanotify_init; syslog; acct; keyrings (add_key, request_key,
//    keyctl) unless spec.allowKeyrings;
//  - with some arguments only: prlimit64, sched_setparam, sched_setscheduler,
//    sched_setattr, sched_setaffinity, migrate_pages, move_pages on a pid
//    other than 0 (self), setpriority and ioprio_set on a who other than 0;
//    ioctl TIOCSTI, TIOCLINUX, TIOCCONS, TIOCSCTTY, TIOCVHANGUP, TIOCSETD,
//    FIOSETOWN, SIOCSPGRP, FS_IOC_SETFLAGS, FS_IOC32_SETFLAGS,
//    FS_IOC_FSSETXATTR, FIOASYNC on any fd (seccomp cannot tell what the fd is);
//    fcntl F_SETOWN to anyone but 0, F_SETOWN_EX, F_SETSIG, F_SETFL with
//    O_ASYNC; personality with
//    ADDR_NO_RANDOMIZE, MMAP_PAGE_ZERO, ADDR_COMPAT_LAYOUT or
//    READ_IMPLIES_EXEC; memfd_create without MFD_NOEXEC_SEAL unless
//    spec.files.allowMemfdExec; open and openat with access mode 3
//    (O_ACCMODE), and openat2 with ENOSYS (its flags are in memory).
// bpf/detect/detect.bpf.c (cordon_seccomp_kind) reports each refusal; its
// conditions must stay those of PrepareSeccomp.
// Everything else is allowed. seccomp can neither read memory arguments nor
// tell who a signal or a mount is for, and it reports nothing to cordon.
#pragma once

#include <linux/filter.h>

#include <cstdint>

#include <optional>
#include <string>
#include <vector>

#include "policy/compiler.h"

namespace cordon {

struct SeccompPlan {
  std::vector<sock_filter> program;
  std::vector<std::string> refused;  // human names of what it refuses, one entry per group
};

// The filter's refusals as data, from the tables PrepareSeccomp compiles, for
// tests that walk every one of them (tests/lsm/run_escapes_test.cc,
// RunEscapes.EverySeccompRefusalIsReportedOnce): the syscalls refused whatever
// their arguments (keyrings included: refused unless spec.allowKeyrings), those
// refused on a process other than the caller (pid or who not 0), and the ioctl
// commands refused on any descriptor (nr = the command).
struct SeccompRefusal {
  uint32_t nr;
  std::string name;
};
struct SeccompRefusals {
  std::vector<SeccompRefusal> syscalls;
  std::vector<SeccompRefusal> on_other_processes;
  std::vector<SeccompRefusal> ioctls;
};
SeccompRefusals SeccompRefusalTable();

// One refused call made so that it changes nothing whether or not the filter
// refuses it: the arguments the filter judges as given, every other argument
// one the kernel itself rejects when the call is let through (-1: a bad
// descriptor, pointer, flag or clock), on pid (or who) 1 where the filter
// refuses a process other than the caller. The walk of every refusal
// (tests/lsm/run_escapes_test.cc, run unconfined on the host as its control)
// and `cordon regress`'s probe of a recorded refusal (ops/regress_probe.cc)
// make these. `argument` is what an event of the refusal shows as target.arg2:
// the ioctl command, fcntl's command (F_SETOWN: the owner), personality's
// persona, memfd_create's flags, unshare's and clone's flags (made with the
// namespace flags only, clone's with SIGCHLD and no stack, so that a child
// it makes is a copy that exits at once), an open's flags (access mode 3 is
// refused whatever the path: made on /dev/null); ignored for the others.
// clone3 is refused with ENOSYS (`refusal`). nullopt, with *why, for a call
// no such making exists for: openat2 (refused with ENOSYS and not
// reported), unshare and clone recorded without namespace flags (events
// before 2026-12 did not record them), socket and socketpair (net.socket: the
// family), and calls the filter does not refuse.
struct SeccompCall {
  long nr = 0;
  long args[6] = {-1, -1, -1, -1, -1, -1};
  bool judged_argument = false;  // args carry `argument` where the filter judges it (events show it again)
  int refusal = 1;               // the errno of the filter's refusal: EPERM, or ENOSYS (clone3)
};
std::optional<SeccompCall> SeccompCallFor(uint32_t nr, uint32_t argument, std::string* why);

// Pure: builds the filter for policy.families and policy.lsm_flags (USERNS).
SeccompPlan PrepareSeccomp(const policy::CompiledPolicy& policy);

// In the child between clone and exec: prctl(PR_SET_NO_NEW_PRIVS) and
// seccomp(SECCOMP_SET_MODE_FILTER, 0, program). Async-signal-safe (no
// allocation). Returns 0 or an errno (EINVAL for an empty program).
int ApplySeccompInChild(const SeccompPlan& plan);

}  // namespace cordon
