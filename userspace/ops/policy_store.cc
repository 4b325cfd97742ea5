#include "ops/policy_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "policy/compiler.h"
#include "policy/parser.h"
#include "util/fd.h"
#include "util/fs.h"
#include "util/text.h"

namespace cordon::ops {

std::string PolicyStoreName(const std::string& digest) {
  if (digest.rfind("sha256:", 0) != 0 || digest.size() != 7 + 64 ||
      digest.find_first_not_of("0123456789abcdef", 7) != std::string::npos)
    return "";
  return "sha256-" + digest.substr(7) + ".yaml";
}

namespace {

std::string OctalMode(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

// The store, opened: a directory (not a symlink to one) of cordon's user that
// nobody else may write. Its entries are then named through the descriptor
// (/proc/self/fd/N/NAME): the directory checked is the one used.
Result<UniqueFd> OpenStore(const std::string& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return SysError("open the policy store " + dir);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return SysError("stat the policy store " + dir);
  if (st.st_uid != ::geteuid() || (st.st_mode & 022))
    return Error{"the policy store " + dir + " is not trusted: it must be a directory of uid " +
                 std::to_string(::geteuid()) + " that nobody else may write (it is uid " + std::to_string(st.st_uid) +
                 ", mode " + OctalMode(st.st_mode) + ")"};
  return fd;
}

std::string Through(const UniqueFd& dir) { return "/proc/self/fd/" + std::to_string(dir.get()); }

// An entry's text: a regular file, opened without following a symlink or
// waiting on a fifo, at most `max` bytes (more: an error).
Result<std::string> ReadEntry(const UniqueFd& dir, const std::string& name, const std::string& path, size_t max) {
  UniqueFd fd(::openat(dir.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) return SysError("open " + path);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return SysError("stat " + path);
  if (!S_ISREG(st.st_mode)) return Error{path + " is not a regular file: not used"};
  if (static_cast<uint64_t>(st.st_size) > max) return Error{path + " is larger than any policy: not used"};
  std::string text;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return SysError("read " + path);
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > max) return Error{path + " is larger than any policy: not used"};
  }
  return text;
}

}  // namespace

cordon::Status KeepPolicyText(const std::string& text, const std::string& digest, const std::string& dir) {
  const std::string name = PolicyStoreName(digest);
  if (name.empty()) return {};  // builtin:default: cordon's own text
  if (policy::TextDigest(text) != digest) return Error{"the policy text given is not the policy " + digest};
  if (Status made = MakeDirs(dir, 0700); !made.ok()) return made;
  auto store = OpenStore(dir);
  if (!store) return store.error();
  auto kept = ReadEntry(*store, name, JoinPath(dir, name), text.size());
  if (kept && *kept == text) return {};
  // Missing, changed, or not a file: written anew (renamed over what is there).
  return WriteFileAtomic(Through(*store), name, text, 0600);
}

Result<std::string> KeptPolicyText(const std::string& digest, const std::string& dir) {
  if (digest == "builtin:default") return std::string(policy::DefaultPolicyYaml());
  const std::string name = PolicyStoreName(digest);
  if (name.empty()) return Error{"not a policy digest: " + Quoted(DisplayText(EscapeWorkloadBytes(digest)))};
  const std::string path = JoinPath(dir, name);
  auto store = OpenStore(dir);
  if (!store && store.error().err != ENOENT) return store.error();
  auto text = store ? ReadEntry(*store, name, path, 16u << 20) : Result<std::string>(store.error());
  if (!text) {
    if (text.error().err == ENOENT)
      return Error{"no policy text is kept for " + digest + " (" + path +
                   " does not exist: it was attached by a cordon that kept none, on another host, or the entry was "
                   "removed)"};
    return text.error();
  }
  if (policy::TextDigest(*text) != digest)
    return Error{path + " does not hold the policy " + digest + " (its text has digest " + policy::TextDigest(*text) +
                 "): it was changed after cordon kept it; not used"};
  return std::move(*text);
}

}  // namespace cordon::ops
