// Landlock: the file and scoping layer of `cordon run` on kernels
// without usable BPF LSM. Unlike the BPF programs it is not attached to a
// cgroup: it is a property of the process, applied by the child between clone
// and exec and inherited by everything the command starts. It cannot be
// lifted, also not by root.
//
// Split in two so that nothing can fail half-way in the child:
//  - PrepareLandlock (parent, before the child exists) opens every rule path
//    and builds the ruleset; every error is reported there;
//  - ApplyLandlockInChild (child) only sets no_new_privs and restricts itself.
//
// Landlock only denies (EACCES for files and TCP, EPERM for scoped signals and
// abstract sockets) and reports nothing to cordon: a policy in audit mode
// should not be applied through it.
#pragma once

#include <string>
#include <vector>

#include "policy/compiler.h"
#include "util/fd.h"
#include "util/result.h"

namespace cordon {

struct LandlockSupport {
  int abi = 0;         // 0 = unavailable
  std::string detail;  // why unavailable (empty when abi > 0)
};

// landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION). Not cached.
LandlockSupport ProbeLandlock();

struct LandlockPlan {
  UniqueFd ruleset;  // ready to apply (O_CLOEXEC); invalid when there is nothing to enforce (see notes)
  int abi = 0;
  bool files = false;   // file rules enforced by this ruleset
  bool scoped = false;  // abstract unix + signal scoping (ABI >= 6)
  std::vector<std::string> notes;  // what it cannot express, one sentence each
};

// All fallible work happens here, in the parent, before the child exists:
// opens every rule path O_PATH (following symlinks: a rule names an object),
// builds the ruleset. Errors: Landlock unavailable (support.abi == 0), a
// missing required path (naming the rule's origin), a refused syscall.
// Missing profile paths (FileRule::required == false) are skipped.
//
// Mapping (only the rights support.abi knows; rights on a non-directory are
// limited to those Landlock accepts on files):
//   files (policy.has_files): every filesystem right the ABI knows is handled;
//     READ -> READ_FILE|READ_DIR; WRITE -> WRITE_FILE|TRUNCATE|IOCTL_DEV;
//     CREATE -> MAKE_REG|MAKE_DIR|MAKE_SYM|MAKE_SOCK|MAKE_FIFO|REMOVE_FILE|
//     REMOVE_DIR|REFER (never MAKE_CHAR/MAKE_BLOCK); EXEC -> EXECUTE;
//     MAP_EXEC -> nothing (Landlock does not mediate mmap), except that the
//     dynamic loader gets EXECUTE when a MAP_EXEC rule covers it (the kernel
//     checks exec on the ELF interpreter of every dynamic program).
//   network: not handled. Landlock's TCP rules (ABI >= 4) name ports only
//     and refuse with EACCES before the cgroup egress programs see the
//     connect, so no event would be reported; the cgroup programs judge
//     every destination instead (and see TCP Fast Open, which Landlock's
//     connect check misses on some kernels).
//   scoping (ABI >= 6): signals only to processes in the same Landlock domain
//     (or nested ones); abstract unix sockets only to servers in the domain,
//     unless spec.network.abstractUnix.
Result<LandlockPlan> PrepareLandlock(const policy::CompiledPolicy& policy, const LandlockSupport& support);

// In the child between clone and exec: prctl(PR_SET_NO_NEW_PRIVS) and
// landlock_restrict_self(ruleset_fd). Async-signal-safe (no allocation).
// Returns 0 or an errno (EBADF for an invalid ruleset_fd).
// proc_self: first allow reading the child's own /proc/<pid> (profile
// runtime-minimal), resolved in the child. This adds a rule to the ruleset
// itself (best effort: a failure only leaves /proc/<pid> unreadable), so use
// the plan for one child. Aliases gain nothing: /proc/<pid>/root/... and
// /proc/<pid>/fd/N are checked where they lead.
int ApplyLandlockInChild(int ruleset_fd, bool proc_self = false);

}  // namespace cordon
