#include "util/fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>

#include "util/fd.h"
#include "util/text.h"

namespace cordon {

Result<std::string> ReadFile(const std::string& path, size_t max_bytes) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return SysError("open " + path);
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return SysError("read " + path);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max_bytes) return Error{path + " is larger than " + std::to_string(max_bytes) + " bytes"};
  }
  return out;
}

Status WriteFile(const std::string& path, const std::string& data) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd.valid()) return SysError("open " + path);
  ssize_t n = ::write(fd.get(), data.data(), data.size());
  if (n < 0) return SysError("write " + path);
  if (static_cast<size_t>(n) != data.size()) return Error{"short write to " + path};
  return {};
}

Status MakeDirs(const std::string& path, unsigned mode) {
  if (path.empty()) return {};
  std::string cur;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    cur = path.substr(0, pos);
    if (cur.empty()) continue;
    if (::mkdir(cur.c_str(), mode) != 0 && errno != EEXIST) return SysError("mkdir " + cur);
  }
  return {};
}

Result<std::vector<std::string>> ListDir(const std::string& path) {
  DIR* dir = ::opendir(path.c_str());
  if (!dir) return SysError("opendir " + path);
  std::vector<std::string> names;
  while (struct dirent* ent = ::readdir(dir)) {
    std::string name = ent->d_name;
    if (name == "." || name == "..") continue;
    names.push_back(std::move(name));
  }
  ::closedir(dir);
  return names;
}

std::string JoinPath(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  if (a.back() == '/') return b.front() == '/' ? a + b.substr(1) : a + b;
  return b.front() == '/' ? a + b : a + "/" + b;
}

bool IsRoot() { return ::geteuid() == 0; }

Status WriteAll(int fd, const unsigned char* data, size_t size, const std::string& path) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return SysError("write " + path);
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return {};
}

Status SyncDir(const std::string& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid() || ::fsync(fd.get()) != 0) return SysError("fsync " + dir);
  return {};
}

std::string PolicyStoreDir() {
  const char* env = std::getenv("CORDON_POLICY_STORE");
  return env && *env ? env : kPolicyStoreDir;
}

bool PathAtOrBelow(const std::string& path, const std::string& dir) {
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/');
}

std::vector<std::string> CordonOwnStateDirs() {
  std::vector<std::string> out;
  std::vector<std::string> wanted = {kVarStateDir};
  if (const std::string store = PolicyStoreDir(); !PathAtOrBelow(store, kVarStateDir)) wanted.push_back(store);
  for (const std::string& dir : wanted) {
    (void)::mkdir(dir.c_str(), 0700);
    char real[PATH_MAX];
    if (!::realpath(dir.c_str(), real)) continue;  // cannot exist here: nothing kept there either
    if (std::find(out.begin(), out.end(), real) == out.end()) out.push_back(real);
  }
  return out;
}

Status RandomBytes(void* out, size_t size) {
  // At most 256 bytes: getrandom() then returns them whole once the pool is ready.
  if (size > 256 || ::getrandom(out, size, 0) != static_cast<ssize_t>(size)) return SysError("getrandom");
  return {};
}

Result<std::string> WriteTemp(const std::string& dir, const std::string& name, const unsigned char* data, size_t size,
                              mode_t mode) {
  unsigned char random[8];
  CORDON_TRY(RandomBytes(random, sizeof random));
  static constexpr char kHex[] = "0123456789abcdef";
  std::string suffix;
  for (unsigned char b : random) {
    suffix += kHex[b >> 4];
    suffix += kHex[b & 15];
  }
  const std::string tmp = JoinPath(dir, "." + name + ".tmp-" + suffix);
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return SysError("create " + tmp);
  Status st = WriteAll(fd.get(), data, size, tmp);
  if (st.ok() && ::fchmod(fd.get(), mode) != 0) st = SysError("chmod " + tmp);  // past the umask, e.g. 0644
  if (st.ok() && ::fsync(fd.get()) != 0) st = SysError("fsync " + tmp);
  if (st.ok() && ::close(fd.release()) != 0) st = SysError("close " + tmp);
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st.error();
  }
  return tmp;
}

Status WriteFileAtomic(const std::string& dir, const std::string& name, const std::string& data, mode_t mode) {
  auto tmp = WriteTemp(dir, name, reinterpret_cast<const unsigned char*>(data.data()), data.size(), mode);
  if (!tmp.ok()) return tmp.error();
  const std::string path = JoinPath(dir, name);
  if (::rename(tmp->c_str(), path.c_str()) != 0) {
    Error e = SysError("rename " + *tmp + " to " + path);
    ::unlink(tmp->c_str());
    return e;
  }
  return SyncDir(dir);
}

// Who holds the flock on `st`'s inode, from /proc/locks ("1: FLOCK ADVISORY
// WRITE <pid> <major>:<minor>:<inode> 0 EOF"): "pid N (comm)", or "" if
// not found. Only the pid and its comm: a command line may hold secrets.
std::string FlockHolder(const struct stat& st) {
  auto text = ReadFile("/proc/locks", 1 << 20);
  if (!text) return "";
  char id[64];
  std::snprintf(id, sizeof id, " %02x:%02x:%llu ", major(st.st_dev), minor(st.st_dev),
                static_cast<unsigned long long>(st.st_ino));
  size_t at = text->find(id);
  if (at == std::string::npos) return "";
  size_t start = text->rfind('\n', at);
  start = start == std::string::npos ? 0 : start + 1;
  std::string line = text->substr(start, at - start);
  if (line.find("->") != std::string::npos || line.find("FLOCK") == std::string::npos) return "";
  size_t pid_at = line.find_last_of(' ');
  if (pid_at == std::string::npos) return "";
  std::string pid = line.substr(pid_at + 1);
  auto comm = ReadFile("/proc/" + pid + "/comm", 64);
  std::string name = comm ? *comm : std::string();
  while (!name.empty() && name.back() == '\n') name.pop_back();
  return "pid " + pid + (name.empty() ? "" : " (" + DisplayText(EscapeWorkloadBytes(name)) + ")");
}

}  // namespace cordon
