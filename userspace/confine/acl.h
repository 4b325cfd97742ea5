// Write access for `cordon run`'s identity to the policy's write paths.
// A command that does not run as root cannot write root's directories
// whatever the policy says: for the time of the run, cordon adds one POSIX
// ACL entry (user:<uid>:rwx on a directory, rw- on a file) to each write path
// and restores the path's ACL (or, where it had none, its mode) afterwards.
// Only the path itself: files that already exist below it keep their own
// permissions (new ones belong to the command's uid). The path's ancestors
// must be traversable by others (x): cordon does not change them and says so.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "util/result.h"

namespace cordon {

class AclGrants {
 public:
  AclGrants() = default;
  AclGrants(AclGrants&& o) noexcept : saved_(std::move(o.saved_)) { o.saved_.clear(); }
  AclGrants& operator=(AclGrants&& o) noexcept {
    if (this != &o) {
      Undo();
      saved_ = std::move(o.saved_);
      o.saved_.clear();
    }
    return *this;
  }
  AclGrants(const AclGrants&) = delete;
  ~AclGrants() { Undo(); }

  // Grants `uid` on each path (existing files or directories). On error
  // nothing stays granted; the error names the path (e.g. a filesystem
  // without POSIX ACLs).
  static Result<AclGrants> Grant(uid_t uid, const std::vector<std::string>& paths);
  // Restores every path (also done by the destructor).
  void Undo();

 private:
  struct Saved {
    std::string path;
    bool had_acl = false;
    std::string acl;  // the original system.posix_acl_access value
    mode_t mode = 0;  // the original permission bits
  };
  std::vector<Saved> saved_;
};

// Paths among `paths` that `uid` (not root, in no supplementary group)
// cannot reach because an ancestor directory grants others no search (x)
// right: "PATH (DIR is mode 0700)". For notes.
std::vector<std::string> UnreachableFor(uid_t uid, gid_t gid, const std::vector<std::string>& paths);

}  // namespace cordon
