#include "confine/acl.h"

#include <sys/stat.h>
#include <sys/xattr.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace cordon {
namespace {

// The kernel's POSIX ACL xattr format (include/uapi/linux/posix_acl_xattr.h):
// a little-endian header and entries sorted by tag, then id.
constexpr const char* kAccessAcl = "system.posix_acl_access";
constexpr uint32_t kAclVersion = 2;
constexpr uint16_t kUserObj = 0x01, kUser = 0x02, kGroupObj = 0x04, kGroup = 0x08, kMask = 0x10, kOther = 0x20;
constexpr uint32_t kUndefinedId = 0xffffffff;

struct Entry {
  uint16_t tag;
  uint16_t perm;
  uint32_t id;
};

bool Decode(const std::string& blob, std::vector<Entry>* out) {
  if (blob.size() < 4 || (blob.size() - 4) % 8 != 0) return false;
  uint32_t version;
  std::memcpy(&version, blob.data(), 4);
  if (version != kAclVersion) return false;
  for (size_t off = 4; off < blob.size(); off += 8) {
    Entry e;
    std::memcpy(&e.tag, blob.data() + off, 2);
    std::memcpy(&e.perm, blob.data() + off + 2, 2);
    std::memcpy(&e.id, blob.data() + off + 4, 4);
    out->push_back(e);
  }
  return true;
}

std::string Encode(std::vector<Entry> entries) {
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.tag != b.tag ? a.tag < b.tag : a.id < b.id; });
  std::string blob(4 + 8 * entries.size(), '\0');
  std::memcpy(blob.data(), &kAclVersion, 4);
  for (size_t i = 0; i < entries.size(); ++i) {
    std::memcpy(blob.data() + 4 + 8 * i, &entries[i].tag, 2);
    std::memcpy(blob.data() + 4 + 8 * i + 2, &entries[i].perm, 2);
    std::memcpy(blob.data() + 4 + 8 * i + 4, &entries[i].id, 4);
  }
  return blob;
}

Result<std::string> ReadAcl(const std::string& path, bool* present) {
  *present = false;
  ssize_t n = ::getxattr(path.c_str(), kAccessAcl, nullptr, 0);
  if (n < 0) {
    if (errno == ENODATA) return std::string();
    return SysError("read the ACL of " + path);
  }
  std::string blob(static_cast<size_t>(n), '\0');
  n = ::getxattr(path.c_str(), kAccessAcl, blob.data(), blob.size());
  if (n < 0) return SysError("read the ACL of " + path);
  blob.resize(static_cast<size_t>(n));
  *present = true;
  return blob;
}

}  // namespace

Result<AclGrants> AclGrants::Grant(uid_t uid, const std::vector<std::string>& paths) {
  AclGrants grants;
  for (const auto& path : paths) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return SysError("write path " + path);
    if (st.st_uid == uid) continue;  // already the owner
    Saved saved;
    saved.path = path;
    saved.mode = st.st_mode & 07777;
    auto blob = ReadAcl(path, &saved.had_acl);
    if (!blob) return blob.error();
    saved.acl = *blob;
    std::vector<Entry> entries;
    if (saved.had_acl) {
      if (!Decode(saved.acl, &entries)) return Error{"the ACL of " + path + " is in an unknown format"};
    } else {
      entries = {{kUserObj, static_cast<uint16_t>((st.st_mode >> 6) & 7), kUndefinedId},
                 {kGroupObj, static_cast<uint16_t>((st.st_mode >> 3) & 7), kUndefinedId},
                 {kOther, static_cast<uint16_t>(st.st_mode & 7), kUndefinedId}};
    }
    const uint16_t perm = S_ISDIR(st.st_mode) ? 7 : 6;
    entries.erase(std::remove_if(entries.begin(), entries.end(),
                                 [&](const Entry& e) { return (e.tag == kUser && e.id == uid) || e.tag == kMask; }),
                  entries.end());
    entries.push_back({kUser, perm, uid});
    // The mask is the union of the group class (as setfacl computes it): it
    // lets the new entry take effect and grants no group more than before.
    uint16_t mask = 0;
    for (const auto& e : entries)
      if (e.tag == kUser || e.tag == kGroupObj || e.tag == kGroup) mask |= e.perm;
    entries.push_back({kMask, mask, kUndefinedId});
    std::string next = Encode(entries);
    if (::setxattr(path.c_str(), kAccessAcl, next.data(), next.size(), 0) != 0) {
      int err = errno;
      return Error{"grant uid " + std::to_string(uid) + " write access to " + path +
                       (err == EOPNOTSUPP ? std::string(": the filesystem has no POSIX ACLs (run with --user root, or "
                                                        "make the directory writable by that uid)")
                                          : std::string(": ") + std::strerror(err)),
                   err};
    }
    grants.saved_.push_back(std::move(saved));
  }
  return grants;
}

void AclGrants::Undo() {
  for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
    if (it->had_acl) {
      if (::setxattr(it->path.c_str(), kAccessAcl, it->acl.data(), it->acl.size(), 0) != 0)
        std::fprintf(stderr, "cordon: restore the ACL of %s: %s\n", it->path.c_str(), std::strerror(errno));
    } else {
      (void)::removexattr(it->path.c_str(), kAccessAcl);
      if (::chmod(it->path.c_str(), it->mode) != 0)
        std::fprintf(stderr, "cordon: restore the mode of %s: %s\n", it->path.c_str(), std::strerror(errno));
    }
  }
  saved_.clear();
}

std::vector<std::string> UnreachableFor(uid_t uid, gid_t gid, const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const auto& path : paths) {
    std::string dir = path;
    for (;;) {
      size_t slash = dir.rfind('/');
      if (slash == std::string::npos || slash == 0) break;
      dir.resize(slash);
      struct stat st;
      if (::stat(dir.c_str(), &st) != 0) break;
      bool ok = st.st_uid == uid ? (st.st_mode & S_IXUSR) : st.st_gid == gid ? (st.st_mode & S_IXGRP) : (st.st_mode & S_IXOTH);
      if (!ok) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", st.st_mode & 07777);
        out.push_back(path + " (" + dir + " is mode " + mode + ")");
        break;
      }
    }
  }
  return out;
}

}  // namespace cordon
