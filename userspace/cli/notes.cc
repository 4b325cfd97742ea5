#include "cli/notes.h"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <set>

#include "util/fd.h"
#include "util/fs.h"

namespace cordon::cli {
namespace {

// The start time (field 22 of /proc/<pid>/stat) of a process, or "" when it is gone.
std::string StartTime(pid_t pid) {
  auto stat = ReadFile("/proc/" + std::to_string(pid) + "/stat", 4096);
  if (!stat) return "";
  const size_t paren = stat->rfind(')');
  if (paren == std::string::npos) return "";
  size_t at = paren + 2;  // field 3 starts here
  for (int field = 3; field < 22 && at < stat->size(); ++field) {
    at = stat->find(' ', at);
    if (at == std::string::npos) return "";
    ++at;
  }
  return stat->substr(at, stat->find(' ', at) - at);
}

std::string Hash(const std::string& text) {
  unsigned char sha[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(text.data(), text.size(), sha, &len, EVP_sha256(), nullptr) != 1) return text.substr(0, 32);
  static const char* const kHex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < 8 && i < len; ++i) {
    out += kHex[sha[i] >> 4];
    out += kHex[sha[i] & 15];
  }
  return out;
}

// Files of sessions that have ended (their leader gone, or another process
// with its pid), removed within the directory `dir` (never through a path).
void RemoveEnded(int dir, const std::string& keep) {
  UniqueFd listing(::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  DIR* d = listing.valid() ? ::fdopendir(listing.get()) : nullptr;
  if (!d) return;
  (void)listing.release();  // closedir closes it
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == ".." || name == keep) continue;
    unsigned long rdev = 0, sid = 0;
    char start[32] = {};
    if (std::sscanf(name.c_str(), "%lu-%lu-%31s", &rdev, &sid, start) == 3 &&
        StartTime(static_cast<pid_t>(sid)) == start)
      continue;
    ::unlinkat(dir, name.c_str(), 0);  // a file or a link in the directory itself, nothing it points to
  }
  ::closedir(d);
}

// The directory of the notes shown, opened without following a link and only
// if it is root's and nobody else may write it: it is under /run, which a
// sandboxed root workload may be granted, and files are removed in it.
UniqueFd OpenNotesDir() {
  if (::mkdir("/run/cordon", 0755) != 0 && errno != EEXIST) return UniqueFd();
  if (::mkdir(kNotesSeenDir, 0700) != 0 && errno != EEXIST) return UniqueFd();
  UniqueFd dir(::open(kNotesSeenDir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  struct stat st;
  if (!dir.valid() || ::fstat(dir.get(), &st) != 0 || st.st_uid != 0 || (st.st_mode & 022)) return UniqueFd();
  return dir;
}

}  // namespace

std::vector<std::string> NotesToShow(const std::vector<std::string>& notes, bool verbose) {
  struct stat tty;
  if (notes.empty() || !::isatty(STDERR_FILENO) || ::fstat(STDERR_FILENO, &tty) != 0) return notes;
  const pid_t sid = ::getsid(0);
  const std::string start = sid > 0 ? StartTime(sid) : "";
  UniqueFd dir = start.empty() ? UniqueFd() : OpenNotesDir();
  if (!dir.valid()) return notes;  // nothing to remember them by: said every time
  const std::string key = std::to_string(tty.st_rdev) + "-" + std::to_string(sid) + "-" + start;
  std::set<std::string> seen;
  {
    UniqueFd file(::openat(dir.get(), key.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    std::string text;
    char buf[4096];
    for (ssize_t n; file.valid() && text.size() < (1u << 20) && (n = ::read(file.get(), buf, sizeof buf)) > 0;)
      text.append(buf, static_cast<size_t>(n));
    size_t at = 0;
    for (size_t nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1) seen.insert(text.substr(at, nl - at));
  }
  std::vector<std::string> show;
  std::string added;
  for (const auto& note : notes) {
    const std::string h = Hash(note);
    if (seen.insert(h).second) added += h + "\n";
    else if (!verbose) continue;
    show.push_back(note);
  }
  if (!added.empty()) {
    UniqueFd fd(::openat(dir.get(), key.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (fd.valid()) (void)!::write(fd.get(), added.data(), added.size());
    RemoveEnded(dir.get(), key);
  }
  return show;
}

}  // namespace cordon::cli
