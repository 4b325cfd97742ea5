#include "events/identity.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "util/clock.h"

namespace cordon {
namespace {

constexpr const char* kClockDir = "/run/cordon";
constexpr const char* kClockFile = "/run/cordon/clock";

std::string BootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

// The offset stored in `file` for `boot_id`, if any: a regular file (not
// through a symlink) of this process's user that nobody else may write.
bool ReadStored(const std::string& file, const std::string& boot_id, int64_t* offset) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  char buf[128] = {};
  const bool trusted = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() &&
                       (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
  const ssize_t n = trusted ? ::read(fd, buf, sizeof buf - 1) : -1;
  ::close(fd);
  if (n <= 0) return false;
  std::istringstream in(std::string(buf, static_cast<size_t>(n)));
  std::string id;
  long long value = 0;
  if (!(in >> id >> value) || id != boot_id) return false;
  *offset = value;
  return true;
}

}  // namespace

int64_t BootClockOffsetNs(const std::string& file, const std::string& boot_id) {
  int64_t offset = 0;
  if (!boot_id.empty() && ReadStored(file, boot_id, &offset)) return offset;
  const int64_t measured = NowNs(CLOCK_REALTIME) - NowNs(CLOCK_BOOTTIME);
  if (boot_id.empty()) return measured;
  // Written whole under another name, then linked into place: a reader sees
  // no file or a whole one, and of two first readers the second uses the
  // first's value. A file of an earlier boot (a /run that is not a tmpfs) is
  // replaced.
  // Created new (O_EXCL), never through a symlink planted at its name.
  const std::string tmp = file + "." + std::to_string(::getpid());
  {
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return measured;
    const std::string line = boot_id + ' ' + std::to_string(measured) + '\n';
    const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
    ::close(fd);
    if (!written) {
      ::unlink(tmp.c_str());
      return measured;
    }
  }
  if (::link(tmp.c_str(), file.c_str()) != 0 && errno == EEXIST && !ReadStored(file, boot_id, &offset))
    (void)::rename(tmp.c_str(), file.c_str());
  ::unlink(tmp.c_str());
  return ReadStored(file, boot_id, &offset) ? offset : measured;
}

int64_t BootClockOffsetNs() {
  static const int64_t offset = [] {
    (void)::mkdir(kClockDir, 0711);  // as the credential store wants it
    return BootClockOffsetNs(kClockFile, BootId());
  }();
  return offset;
}

std::string EventId(uint64_t sandbox_id, uint64_t seq) {
  return std::to_string(sandbox_id) + "-" + std::to_string(seq);
}

bool SequenceTracker::Observe(uint64_t seq) {
  if (seq < next_) return false;
  if (seq > next_) {
    if (!ahead_.insert(seq).second) return false;
    // Over the cap: the lowest gap is taken as lost now rather than held.
    if (ahead_.size() > max_ahead_) SettleBelow(*ahead_.begin(), &forced_);
    return true;
  }
  next_++;
  while (!ahead_.empty() && *ahead_.begin() == next_) {
    ahead_.erase(ahead_.begin());
    next_++;
  }
  return true;
}

void SequenceTracker::SettleBelow(uint64_t limit, std::vector<std::pair<uint64_t, uint64_t>>* gaps) {
  while (!ahead_.empty() && *ahead_.begin() <= limit) {
    const uint64_t seen = *ahead_.begin();
    ahead_.erase(ahead_.begin());
    if (seen > next_) gaps->emplace_back(next_, seen - 1);
    next_ = seen + 1;
  }
  while (!ahead_.empty() && *ahead_.begin() == next_) {
    ahead_.erase(ahead_.begin());
    next_++;
  }
}

std::vector<std::pair<uint64_t, uint64_t>> SequenceTracker::TakeGaps(uint64_t consumed, uint64_t produced) {
  std::vector<std::pair<uint64_t, uint64_t>> gaps = std::move(forced_);
  forced_.clear();
  // The pending checkpoint, once the consumer reached it; then a new one
  // (numbers seen so far, this producer position), settled at once when the
  // ring is empty.
  for (int round = 0; round < 2; ++round) {
    if (checkpoint_ && consumed >= checkpoint_pos_) {
      SettleBelow(checkpoint_, &gaps);
      checkpoint_ = 0;
    }
    if (!checkpoint_ && !ahead_.empty()) {
      checkpoint_ = *ahead_.rbegin();
      checkpoint_pos_ = produced;
    }
  }
  return gaps;
}

}  // namespace cordon
