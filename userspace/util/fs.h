// Small filesystem helpers returning Result values with context.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

#include "util/result.h"

namespace cordon {

Result<std::string> ReadFile(const std::string& path, size_t max_bytes = 16 << 20);
Status WriteFile(const std::string& path, const std::string& data);  // existing file, no create
Status MakeDirs(const std::string& path, unsigned mode = 0755);       // mkdir -p
Result<std::vector<std::string>> ListDir(const std::string& path);    // names, without . and ..
std::string JoinPath(const std::string& a, const std::string& b);
bool IsRoot();
// Who holds the flock on `st`'s inode, from /proc/locks: "pid N (comm)", or
// "" if not found. Only the pid and its comm: a command line may hold secrets.
std::string FlockHolder(const struct stat& st);

// cordon's own state on disk: the agent's signing keys (oidc.keyDir's
// default), the policy texts it keeps by digest. BPF LSM refuses every access
// of every sandbox below it, whatever its policy (README "cordon's own
// state"), and no policy may name a path there.
constexpr const char* kVarStateDir = "/var/lib/cordon";
constexpr const char* kPolicyStoreDir = "/var/lib/cordon/policies";
// Where the kept policy texts are: $CORDON_POLICY_STORE if set (the test
// suites' own directory, refused to sandboxes as kVarStateDir is), else
// kPolicyStoreDir.
std::string PolicyStoreDir();
// The state directories as they are now (canonical paths), made if missing
// (0700; their parents must exist): kVarStateDir, and PolicyStoreDir() where
// $CORDON_POLICY_STORE puts it elsewhere. One that cannot exist is left out.
std::vector<std::string> CordonOwnStateDirs();
// Whether `path` is `dir` or below it (both canonical).
bool PathAtOrBelow(const std::string& path, const std::string& dir);

// `size` (<= 256) bytes from the kernel's random pool (getrandom).
Status RandomBytes(void* out, size_t size);

// Writes all of `data` to `fd` (retrying short writes); errors name `path`.
Status WriteAll(int fd, const unsigned char* data, size_t size, const std::string& path);
// Makes a rename or link in `dir` durable.
Status SyncDir(const std::string& dir);
// A new file in `dir` holding `data` with `mode`, flushed to disk, under a
// temporary name (".NAME.tmp-<random>") the caller renames (or links) into
// place. Created O_EXCL so it is never someone else's file, and with the
// final mode from the start so a key is never readable by others, not even
// for a moment. Removed again on an error.
Result<std::string> WriteTemp(const std::string& dir, const std::string& name, const unsigned char* data, size_t size,
                              mode_t mode);
// `data` as dir/name, whole or not at all: WriteTemp, rename, SyncDir.
Status WriteFileAtomic(const std::string& dir, const std::string& name, const std::string& data, mode_t mode);

}  // namespace cordon
