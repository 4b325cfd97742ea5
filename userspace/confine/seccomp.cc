#include "confine/seccomp.h"

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "policy/describe.h"

#if !defined(__x86_64__)
#error "the seccomp filter is written for x86_64 syscall numbers"
#endif

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif

namespace cordon {
namespace {

// x86_64 syscall numbers (arch/x86/entry/syscalls/syscall_64.tbl). Written
// out so that syscalls newer than the build's headers are covered too.
constexpr uint32_t kNrSocket = 41;
constexpr uint32_t kNrSocketpair = 53;
constexpr uint32_t kNrClone = 56;
constexpr uint32_t kNrUnshare = 272;
constexpr uint32_t kNrClone3 = 435;
constexpr uint32_t kX32SyscallBit = 0x40000000;

struct NamedSyscall {
  uint32_t nr;
  const char* name;
};
struct SyscallGroup {
  const char* what;  // prefix of the human description
  std::vector<NamedSyscall> calls;
  const char* why;   // appended, may be empty
};

const std::vector<SyscallGroup>& RefusedGroups() {
  static const std::vector<SyscallGroup> groups = {
      {"BPF programs and maps", {{321, "bpf"}}, ""},
      {"mounts",
       {{165, "mount"},
        {166, "umount2"},
        {155, "pivot_root"},
        {429, "move_mount"},
        {430, "fsopen"},
        {431, "fsconfig"},
        {432, "fsmount"},
        {433, "fspick"},
        {428, "open_tree"},
        {467, "open_tree_attr"},
        {442, "mount_setattr"}},
       ""},
      {"kernel modules", {{175, "init_module"}, {313, "finit_module"}, {176, "delete_module"}}, ""},
      {"kexec", {{246, "kexec_load"}, {320, "kexec_file_load"}}, ""},
      {"tracing other processes", {{101, "ptrace"}, {310, "process_vm_readv"}, {311, "process_vm_writev"}}, ""},
      {"joining namespaces", {{308, "setns"}}, ""},
      {"clock changes",
       {{227, "clock_settime"}, {164, "settimeofday"}, {305, "clock_adjtime"}, {159, "adjtimex"}},
       " (reads through adjtimex and clock_adjtime too: their mode is in memory, out of seccomp's reach)"},
      {"rebooting", {{169, "reboot"}}, ""},
      {"io_uring",
       {{425, "io_uring_setup"}, {426, "io_uring_enter"}, {427, "io_uring_register"}},
       " (its submissions would bypass every syscall-level check)"},
      {"perf events", {{298, "perf_event_open"}}, ""},
      {"reaching into other processes", {{438, "pidfd_getfd"}, {440, "process_madvise"}, {312, "kcmp"}}, ""},
      {"hanging up the terminal", {{153, "vhangup"}}, ""},
      {"host-wide file watches", {{300, "fanotify_init"}}, " (fanotify marks can deny or watch host processes' access)"},
      {"the kernel log", {{103, "syslog"}}, " (readable with syslog(2) even where /dev/kmsg is not)"},
      {"process accounting", {{163, "acct"}}, ""},
  };
  return groups;
}

// Syscalls refused only with some arguments: {nr, name, what is refused}.
// The conditions are spelled out in PrepareSeccomp below and again in
// bpf/detect/detect.bpf.c (cordon_seccomp_refused), which reports the refusals.
constexpr uint32_t kNrIoctl = 16, kNrFcntl = 72, kNrPersonality = 135, kNrMemfdCreate = 319;
constexpr uint32_t kNrOpen = 2, kNrOpenat = 257, kNrOpenat2 = 437, kNrOpenByHandleAt = 304;
constexpr NamedSyscall kArg0NotSelf[] = {
    {302, "prlimit64"},         {142, "sched_setparam"}, {144, "sched_setscheduler"}, {314, "sched_setattr"},
    {203, "sched_setaffinity"}, {256, "migrate_pages"},  {279, "move_pages"}};
constexpr NamedSyscall kArg1NotSelf[] = {{141, "setpriority"}, {251, "ioprio_set"}};
constexpr NamedSyscall kKeyringCalls[] = {{248, "add_key"}, {249, "request_key"}, {250, "keyctl"}};

// ioctl commands refused on any fd (seccomp cannot tell what the fd is).
struct NamedIoctl {
  uint32_t cmd;
  const char* name;
};
constexpr NamedIoctl kRefusedIoctls[] = {
    {0x5412, "TIOCSTI"},           {0x541C, "TIOCLINUX"},        {0x541D, "TIOCCONS"},
    {0x540E, "TIOCSCTTY"},         {0x5437, "TIOCVHANGUP"},      {0x5423, "TIOCSETD"},
    {0x8901, "FIOSETOWN"},         {0x8902, "SIOCSPGRP"},        {0x40086602, "FS_IOC_SETFLAGS"},
    {0x40046602, "FS_IOC32_SETFLAGS"}, {0x401c5820, "FS_IOC_FSSETXATTR"}, {0x5452, "FIOASYNC"},
};
constexpr uint32_t kFcntlSetFl = 4, kFcntlSetOwn = 8, kFcntlSetSig = 10, kFcntlSetOwnEx = 15;
constexpr uint32_t kOAsync = 020000;  // O_ASYNC (FASYNC)
// personality(2) flags that weaken ASLR or W^X: ADDR_NO_RANDOMIZE,
// MMAP_PAGE_ZERO, ADDR_COMPAT_LAYOUT, READ_IMPLIES_EXEC.
constexpr uint32_t kPersonalityWeakening = 0x0040000 | 0x0100000 | 0x0200000 | 0x0400000;
constexpr uint32_t kMfdNoexecSeal = 0x0008;

static_assert(__NR_socket == kNrSocket && __NR_socketpair == kNrSocketpair && __NR_clone == kNrClone &&
              __NR_unshare == kNrUnshare && __NR_bpf == 321 && __NR_mount == 165 && __NR_ptrace == 101);
#ifdef __NR_clone3
static_assert(__NR_clone3 == kNrClone3 && __NR_open_tree == 428 && __NR_mount_setattr == 442 &&
              __NR_io_uring_setup == 425);
#endif

constexpr uint32_t kNamespaceFlags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC |
                                     CLONE_NEWUTS | CLONE_NEWCGROUP | CLONE_NEWTIME;

// Families with a CORDON_FAM_* bit of their own; any other is CORDON_FAM_OTHER.
struct FamilyBit {
  uint32_t af;
  int bit;
};
constexpr FamilyBit kFamilies[] = {
    {AF_UNIX, CORDON_FAM_UNIX},       {AF_INET, CORDON_FAM_INET},     {AF_INET6, CORDON_FAM_INET6},
    {AF_NETLINK, CORDON_FAM_NETLINK}, {AF_PACKET, CORDON_FAM_PACKET}, {AF_VSOCK, CORDON_FAM_VSOCK},
};
static_assert(AF_UNIX == 1 && AF_INET == 2 && AF_INET6 == 10 && AF_NETLINK == 16 && AF_PACKET == 17 &&
              AF_VSOCK == 40);

constexpr uint32_t kRetAllow = SECCOMP_RET_ALLOW;
constexpr uint32_t kRetEperm = SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA);
constexpr uint32_t kRetEnosys = SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA);
constexpr uint32_t kRetKill = SECCOMP_RET_KILL_PROCESS;

constexpr uint32_t kOffArch = offsetof(struct seccomp_data, arch);
constexpr uint32_t kOffNr = offsetof(struct seccomp_data, nr);
// Low 32 bits of args[0] (little endian): the int/unsigned the kernel uses
// for socket()'s family and clone()/unshare()'s flags.
constexpr uint32_t kOffArg0Low = offsetof(struct seccomp_data, args[0]);
constexpr uint32_t kOffArg1Low = offsetof(struct seccomp_data, args[1]);
constexpr uint32_t kOffArg2Low = offsetof(struct seccomp_data, args[2]);

// A tiny classic-BPF assembler: jumps name labels, resolved by Finish().
class Assembler {
 public:
  static constexpr int kNext = -1;  // fall through

  int NewLabel() {
    labels_.push_back(-1);
    return static_cast<int>(labels_.size()) - 1;
  }
  void Bind(int label) { labels_[label] = static_cast<int>(code_.size()); }
  void Load(uint32_t offset) { Emit(BPF_LD | BPF_W | BPF_ABS, offset); }
  void Ret(uint32_t value) { Emit(BPF_RET | BPF_K, value); }
  void Jeq(uint32_t k, int jt, int jf) { Emit(BPF_JMP | BPF_JEQ | BPF_K, k, jt, jf); }
  void Jge(uint32_t k, int jt, int jf) { Emit(BPF_JMP | BPF_JGE | BPF_K, k, jt, jf); }
  void Jset(uint32_t k, int jt, int jf) { Emit(BPF_JMP | BPF_JSET | BPF_K, k, jt, jf); }

  // Resolves labels. Jumps are forward only with 8-bit offsets; anything else
  // is a bug in this file, caught by the unit tests.
  std::vector<sock_filter> Finish() const {
    std::vector<sock_filter> out;
    out.reserve(code_.size());
    for (size_t i = 0; i < code_.size(); ++i) {
      sock_filter f = code_[i].f;
      if (BPF_CLASS(f.code) == BPF_JMP) {
        f.jt = Offset(i, code_[i].jt);
        f.jf = Offset(i, code_[i].jf);
      }
      out.push_back(f);
    }
    return out;
  }

 private:
  struct Insn {
    sock_filter f;
    int jt = kNext;
    int jf = kNext;
  };
  void Emit(uint16_t code, uint32_t k, int jt = kNext, int jf = kNext) {
    code_.push_back(Insn{sock_filter{code, 0, 0, k}, jt, jf});
  }
  uint8_t Offset(size_t from, int label) const {
    if (label == kNext) return 0;
    int target = labels_.at(static_cast<size_t>(label));
    long distance = static_cast<long>(target) - static_cast<long>(from) - 1;
    if (target < 0 || distance < 0 || distance > 255) {
      std::fprintf(stderr, "cordon: seccomp program: unresolvable jump from %zu to label %d\n", from, label);
      std::abort();
    }
    return static_cast<uint8_t>(distance);
  }

  std::vector<Insn> code_;
  std::vector<int> labels_;
};

std::string Join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

}  // namespace

SeccompRefusals SeccompRefusalTable() {
  SeccompRefusals out;
  for (const auto& group : RefusedGroups())
    for (const auto& call : group.calls) out.syscalls.push_back({call.nr, call.name});
  for (const auto& call : kKeyringCalls) out.syscalls.push_back({call.nr, call.name});
  for (const auto& call : kArg0NotSelf) out.on_other_processes.push_back({call.nr, call.name});
  for (const auto& call : kArg1NotSelf) out.on_other_processes.push_back({call.nr, call.name});
  for (const auto& ioctl : kRefusedIoctls) out.ioctls.push_back({ioctl.cmd, ioctl.name});
  return out;
}

std::optional<SeccompCall> SeccompCallFor(uint32_t nr, uint32_t argument, std::string* why) {
  static const char kMemfdName[] = "cordon-probe";
  SeccompCall call;
  call.nr = nr;
  for (const auto& group : RefusedGroups())
    for (const auto& c : group.calls)
      if (c.nr == nr) {
        // init_module: an empty image (ENOEXEC), not a huge length to allocate.
        if (nr == 175) call.args[0] = call.args[1] = call.args[2] = 0;
        return call;
      }
  for (const auto& c : kKeyringCalls)
    if (c.nr == nr) return call;
  for (const auto& c : kArg0NotSelf)
    if (c.nr == nr) return call.args[0] = 1, call;
  for (const auto& c : kArg1NotSelf)
    if (c.nr == nr) return call.args[1] = 1, call;
  call.judged_argument = true;
  switch (nr) {
    case kNrIoctl:
      call.args[1] = static_cast<long>(argument);
      call.args[2] = 0;
      return call;
    case kNrFcntl:
      // Events show F_SETOWN's owner, or the command of the others.
      {
        const long a = static_cast<long>(argument);
        const bool command = a == F_SETOWN_EX || a == F_SETSIG || a == F_SETFL;
        call.args[1] = command ? a : F_SETOWN;
        call.args[2] = a == F_SETFL ? O_ASYNC : a == F_SETOWN_EX ? 0 : a == F_SETSIG ? 1 : a;
        return call;
      }
    case kNrPersonality:
      call.args[0] = static_cast<long>(argument);
      call.args[1] = call.args[2] = 0;
      return call;
    case kNrMemfdCreate:
      call.args[0] = reinterpret_cast<long>(kMemfdName);
      call.args[1] = static_cast<long>(argument);
      return call;
    case kNrOpen:
    case kNrOpenat:
    case kNrOpenByHandleAt: {
      // Access mode 3 is refused whatever the path: /dev/null, which an open
      // let through changes nothing on (open_by_handle_at: a bad descriptor).
      static const char kNull[] = "/dev/null";
      if ((argument & O_ACCMODE) != O_ACCMODE) break;
      call.args[nr == kNrOpen ? 0 : 1] = nr == kNrOpenByHandleAt ? 0 : reinterpret_cast<long>(kNull);
      if (nr == kNrOpenat) call.args[0] = AT_FDCWD;
      call.args[nr == kNrOpen ? 1 : 2] = O_ACCMODE | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;
      call.judged_argument = false;  // the flags made carry O_CLOEXEC and the rest beside the mode
      return call;
    }
    case kNrClone3:
      // Refused with ENOSYS (its flags are in memory): the probe expects that.
      call.args[0] = -1, call.args[1] = 64;
      call.judged_argument = false;
      call.refusal = ENOSYS;
      return call;
    case kNrUnshare:
    case kNrClone: {
      // The namespace flags the filter judges, nothing else (a recorded
      // CLONE_VM or CLONE_SETTLS would make the probe's child share or
      // corrupt its memory); clone's child is a copy that exits at once.
      const uint32_t ns =
          argument & (nr == kNrClone ? kNamespaceFlags & ~static_cast<uint32_t>(CSIGNAL) : kNamespaceFlags);
      if (!ns) break;
      call.judged_argument = false;  // the event shows the flags made, not the ones recorded
      call.args[0] = nr == kNrClone ? static_cast<long>(ns | SIGCHLD) : static_cast<long>(ns);
      for (int i = 1; i < 6; ++i) call.args[i] = 0;
      return call;
    }
  }
  if (nr == kNrOpenat2)
    *why = "refused with ENOSYS (its arguments are in memory, out of seccomp's reach), and not reported";
  else if (nr == kNrClone || nr == kNrUnshare)
    *why =
        "the event does not record which namespace flags were asked for (recorded by a cordon before 2026-12: "
        "capture it again)";
  else if (nr == 41 || nr == 53)
    *why = "a socket family: probed as net.socket";
  else if (nr == kNrOpen || nr == kNrOpenat || nr == kNrOpenByHandleAt)
    *why = "an open recorded without access mode 3: not a refusal of the filter";
  else
    *why = "not a call cordon run's seccomp filter refuses";
  return std::nullopt;
}

SeccompPlan PrepareSeccomp(const policy::CompiledPolicy& policy) {
  SeccompPlan plan;
  // inet and inet6 are left to the cgroup sock_create program, which refuses
  // them just as well and reports each attempt as an event (seccomp, running
  // first, would refuse silently).
  const uint32_t allowed_families = policy.families | (1u << CORDON_FAM_INET) | (1u << CORDON_FAM_INET6);
  const bool userns = (policy.lsm_flags & CORDON_LSM_F_USERNS) != 0;
  // clone()'s low byte is the exit signal (CSIGNAL): CLONE_NEWTIME (0x80)
  // cannot be requested through clone(), only through unshare() and clone3().
  const uint32_t clone_mask = (kNamespaceFlags & ~static_cast<uint32_t>(CSIGNAL)) & ~(userns ? CLONE_NEWUSER : 0u);
  const uint32_t unshare_mask = kNamespaceFlags & ~(userns ? CLONE_NEWUSER : 0u);

  Assembler a;
  const int l_allow = a.NewLabel(), l_eperm = a.NewLabel(), l_enosys = a.NewLabel(), l_kill = a.NewLabel();
  const int l_socket = a.NewLabel(), l_clone = a.NewLabel(), l_unshare = a.NewLabel();
  const int l_arg0_self = a.NewLabel(), l_arg1_self = a.NewLabel(), l_ioctl = a.NewLabel(), l_fcntl = a.NewLabel(),
            l_fcntl_owner = a.NewLabel(), l_fcntl_setfl = a.NewLabel(), l_personality = a.NewLabel(), l_memfd = a.NewLabel(),
            l_open = a.NewLabel(), l_openat = a.NewLabel(), l_accmode = a.NewLabel();
  const bool memfd_exec = (policy.lsm_flags & CORDON_LSM_F_MEMFD_EXEC) != 0;
  const bool keyrings = (policy.lsm_flags & CORDON_LSM_F_KEYRINGS) != 0;

  // Only the x86_64 syscall ABI. An i386 syscall (int 0x80 from a 64-bit
  // process) has other numbers and would pass every check below: refused
  // (EPERM, so that bpf/detect/detect.bpf.c reports it as tamper.abi, as it
  // does x32). No other arch reaches a filter on x86_64: killed, should one.
  const int l_native = a.NewLabel();
  a.Load(kOffArch);
  a.Jeq(AUDIT_ARCH_X86_64, l_native, Assembler::kNext);
  a.Jeq(AUDIT_ARCH_I386, l_eperm, l_kill);
  a.Bind(l_native);
  a.Load(kOffNr);
  // x32 syscalls share the arch but set bit 30 of the number.
  a.Jge(kX32SyscallBit, l_eperm, Assembler::kNext);
  for (const auto& group : RefusedGroups())
    for (const auto& call : group.calls) a.Jeq(call.nr, l_eperm, Assembler::kNext);
  a.Jeq(kNrSocket, l_socket, Assembler::kNext);
  a.Jeq(kNrSocketpair, l_socket, Assembler::kNext);
  a.Jeq(kNrClone, l_clone, Assembler::kNext);
  a.Jeq(kNrUnshare, l_unshare, Assembler::kNext);
  a.Jeq(kNrClone3, l_enosys, Assembler::kNext);
  if (!keyrings)
    for (const auto& call : kKeyringCalls) a.Jeq(call.nr, l_eperm, Assembler::kNext);
  for (const auto& call : kArg0NotSelf) a.Jeq(call.nr, l_arg0_self, Assembler::kNext);
  for (const auto& call : kArg1NotSelf) a.Jeq(call.nr, l_arg1_self, Assembler::kNext);
  a.Jeq(kNrIoctl, l_ioctl, Assembler::kNext);
  a.Jeq(kNrFcntl, l_fcntl, Assembler::kNext);
  a.Jeq(kNrPersonality, l_personality, Assembler::kNext);
  if (!memfd_exec) a.Jeq(kNrMemfdCreate, l_memfd, Assembler::kNext);
  a.Jeq(kNrOpen, l_open, Assembler::kNext);
  a.Jeq(kNrOpenat, l_openat, Assembler::kNext);
  a.Jeq(kNrOpenByHandleAt, l_openat, Assembler::kNext);  // flags are its third argument too
  a.Jeq(kNrOpenat2, l_enosys, Assembler::kNext);
  a.Ret(kRetAllow);

  // Access mode 3 (O_ACCMODE: neither read nor write, but ioctl-capable):
  // Landlock before ABI 5 and file rules that grant by read/write do not see
  // it. openat2's flags are in memory: ENOSYS, and callers fall back to openat.
  a.Bind(l_open);
  a.Load(kOffArg1Low);
  a.Jset(1, l_accmode, l_allow);
  a.Bind(l_openat);
  a.Load(kOffArg2Low);
  a.Jset(1, l_accmode, l_allow);
  a.Bind(l_accmode);  // O_WRONLY is set; with O_RDWR too it is mode 3
  a.Jset(2, l_eperm, l_allow);

  // Other processes' limits, scheduling, memory placement: only pid 0 (self).
  a.Bind(l_arg0_self);
  a.Load(kOffArg0Low);
  a.Jeq(0, l_allow, l_eperm);
  a.Bind(l_arg1_self);
  a.Load(kOffArg1Low);
  a.Jeq(0, l_allow, l_eperm);

  a.Bind(l_ioctl);
  a.Load(kOffArg1Low);  // the command is an unsigned int: the low word is all the kernel reads
  for (const auto& ioctl : kRefusedIoctls) a.Jeq(ioctl.cmd, l_eperm, Assembler::kNext);
  a.Ret(kRetAllow);

  // F_SETOWN to anyone (signals through file ownership reach any process);
  // F_SETOWN 0 clears the owner and stays allowed. F_SETSIG and O_ASYNC
  // (F_SETFL, FIOASYNC above) too: with F_SETOWN refused they only matter for
  // a kept descriptor whose owner was set outside, where they would let the
  // command pick the signal (SIGKILL) and trigger it towards that owner.
  a.Bind(l_fcntl);
  a.Load(kOffArg1Low);
  a.Jeq(kFcntlSetOwnEx, l_eperm, Assembler::kNext);
  a.Jeq(kFcntlSetSig, l_eperm, Assembler::kNext);
  a.Jeq(kFcntlSetFl, l_fcntl_setfl, Assembler::kNext);
  a.Jeq(kFcntlSetOwn, l_fcntl_owner, l_allow);
  a.Bind(l_fcntl_owner);
  a.Load(kOffArg2Low);
  a.Jeq(0, l_allow, l_eperm);
  a.Bind(l_fcntl_setfl);
  a.Load(kOffArg2Low);
  a.Jset(kOAsync, l_eperm, l_allow);

  a.Bind(l_personality);
  a.Load(kOffArg0Low);
  a.Jeq(0xffffffff, l_allow, Assembler::kNext);  // a query
  a.Jset(kPersonalityWeakening, l_eperm, l_allow);

  // memfd_create only sealed non-executable (MFD_NOEXEC_SEAL, kernel 6.3+),
  // unless spec.files.allowMemfdExec: Landlock does not see anonymous files.
  a.Bind(l_memfd);
  a.Load(kOffArg1Low);
  a.Jset(kMfdNoexecSeal, l_allow, l_eperm);

  a.Bind(l_socket);
  a.Load(kOffArg0Low);
  for (const auto& f : kFamilies)
    a.Jeq(f.af, (allowed_families & (1u << f.bit)) ? l_allow : l_eperm, Assembler::kNext);
  a.Ret((allowed_families & (1u << CORDON_FAM_OTHER)) ? kRetAllow : kRetEperm);

  a.Bind(l_clone);
  a.Load(kOffArg0Low);
  a.Jset(clone_mask, l_eperm, l_allow);

  a.Bind(l_unshare);
  a.Load(kOffArg0Low);
  a.Jset(unshare_mask, l_eperm, l_allow);

  a.Bind(l_allow);
  a.Ret(kRetAllow);
  a.Bind(l_eperm);
  a.Ret(kRetEperm);
  a.Bind(l_enosys);
  a.Ret(kRetEnosys);
  a.Bind(l_kill);
  a.Ret(kRetKill);
  plan.program = a.Finish();

  // ---- what it refuses, for people
  std::vector<std::string> families;
  for (const auto& f : kFamilies)
    if (!(allowed_families & (1u << f.bit))) families.push_back(policy::FamilyName(f.bit));
  if (!(allowed_families & (1u << CORDON_FAM_OTHER))) families.push_back(policy::FamilyName(CORDON_FAM_OTHER));
  if (!families.empty()) plan.refused.push_back("socket() and socketpair() of families " + Join(families));
  for (const auto& group : RefusedGroups()) {
    std::vector<std::string> names;
    for (const auto& call : group.calls) names.push_back(call.name);
    plan.refused.push_back(std::string(group.what) + ": " + Join(names) + group.why);
  }
  if (!keyrings) plan.refused.push_back("keyrings: add_key, request_key, keyctl (spec.allowKeyrings allows them)");
  plan.refused.push_back(
      "other processes' limits, scheduling and memory: prlimit64, sched_setparam, sched_setscheduler, sched_setattr, "
      "sched_setaffinity, migrate_pages, move_pages with a pid other than 0, setpriority and ioprio_set with a who "
      "other than 0");
  {
    std::vector<std::string> names;
    for (const auto& ioctl : kRefusedIoctls) names.push_back(ioctl.name);
    plan.refused.push_back("ioctl commands on any file: " + Join(names) +
                           " (terminal injection and takeover, signal ownership and SIGIO, inode flags)");
  }
  plan.refused.push_back(
      "fcntl F_SETOWN (but 0), F_SETOWN_EX, F_SETSIG and F_SETFL with O_ASYNC: signals through file ownership "
      "(also for an owner set outside on a kept descriptor)");
  plan.refused.push_back(
      "open, openat and open_by_handle_at with access mode 3 (O_ACCMODE: ioctl-capable without read or write); openat2 with ENOSYS "
      "(its flags are in memory; callers fall back to openat)");
  plan.refused.push_back(
      "personality flags ADDR_NO_RANDOMIZE, MMAP_PAGE_ZERO, ADDR_COMPAT_LAYOUT, READ_IMPLIES_EXEC");
  if (!memfd_exec)
    plan.refused.push_back(
        "memfd_create without MFD_NOEXEC_SEAL (executable anonymous files; spec.files.allowMemfdExec allows them)");
  plan.refused.push_back(std::string("new namespaces: unshare() and clone() with CLONE_NEW* flags") +
                         (userns ? " other than CLONE_NEWUSER (allowUserNamespaces)" : " (user namespaces included)"));
  plan.refused.push_back(
      "clone3(), with ENOSYS: its flags are in memory, out of seccomp's reach (glibc falls back to clone)");
  plan.refused.push_back(
      "x32 syscalls and i386 syscalls (int 0x80): other syscall ABIs, whose numbers these checks do not read");
  return plan;
}

int ApplySeccompInChild(const SeccompPlan& plan) {
  if (plan.program.empty() || plan.program.size() > BPF_MAXINSNS) return EINVAL;
  struct sock_fprog prog;
  prog.len = static_cast<unsigned short>(plan.program.size());
  prog.filter = const_cast<sock_filter*>(plan.program.data());
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  if (::syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) return errno;
  return 0;
}

}  // namespace cordon
