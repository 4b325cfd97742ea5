// Probes shared by the BPF LSM suites (tests/lsm/*.cc): the system calls of
// the issue 12 escapes, made for real. Each returns 0 on success or an errno
// (io_uring results: the CQE's, negative).
#pragma once

#include <bpf/bpf.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <vector>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>

#include "event.pb.h"
#include "events/decoder.h"
#include "events/json_line.h"

namespace cordon::test {

#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
constexpr unsigned long kFsIocGetflags = 0x80086601;    // FS_IOC_GETFLAGS
constexpr unsigned long kFsIocSetflags = 0x40086602;    // FS_IOC_SETFLAGS
constexpr unsigned long kFsIoc32Setflags = 0x40046602;  // FS_IOC32_SETFLAGS (compat)
constexpr int kFsNoatimeFl = 0x80;                       // FS_NOATIME_FL

inline int OpenTreeClone(const std::string& path) {
  return static_cast<int>(::syscall(SYS_open_tree, AT_FDCWD, path.c_str(), OPEN_TREE_CLONE | O_CLOEXEC));
}

inline int OpenAtErrno(int dirfd, const char* rel, int flags) {
  int fd = ::openat(dirfd, rel, flags | O_CLOEXEC);
  if (fd < 0) return errno;
  ::close(fd);
  return 0;
}

// A minimal io_uring, by system call (no liburing here).
class Uring {
 public:
  explicit Uring(unsigned flags = 0) {
    io_uring_params p = {};
    p.flags = flags;
    p.sq_thread_idle = 50;
    fd_ = static_cast<int>(::syscall(SYS_io_uring_setup, 4, &p));
    if (fd_ < 0) {
      err_ = errno;
      return;
    }
    sq_size_ = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    cq_size_ = p.cq_off.cqes + p.cq_entries * sizeof(io_uring_cqe);
    sq_ = static_cast<char*>(::mmap(nullptr, sq_size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, IORING_OFF_SQ_RING));
    cq_ = static_cast<char*>(::mmap(nullptr, cq_size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, IORING_OFF_CQ_RING));
    sqes_ = static_cast<io_uring_sqe*>(::mmap(nullptr, p.sq_entries * sizeof(io_uring_sqe), PROT_READ | PROT_WRITE,
                                              MAP_SHARED, fd_, IORING_OFF_SQES));
    sqe_size_ = p.sq_entries * sizeof(io_uring_sqe);
    if (sq_ == MAP_FAILED || cq_ == MAP_FAILED || sqes_ == MAP_FAILED) err_ = errno;
    off_ = p;
  }
  ~Uring() {
    if (fd_ < 0) return;
    if (sq_ != MAP_FAILED) ::munmap(sq_, sq_size_);
    if (cq_ != MAP_FAILED) ::munmap(cq_, cq_size_);
    if (sqes_ != MAP_FAILED) ::munmap(sqes_, sqe_size_);
    ::close(fd_);
  }
  Uring(const Uring&) = delete;
  Uring& operator=(const Uring&) = delete;
  int fd() const { return fd_; }
  int error() const { return err_; }  // of io_uring_setup or mmap
  int RegisterPersonality() {
    int id = static_cast<int>(::syscall(SYS_io_uring_register, fd_, IORING_REGISTER_PERSONALITY, nullptr, 0));
    return id < 0 ? -errno : id;
  }
  // One request, filled in by `fill` (zeroed first); returns the CQE's result
  // (or -errno of io_uring_enter, -EAGAIN if no completion came back).
  int Submit(const std::function<void(io_uring_sqe*)>& fill) {
    auto* tail = reinterpret_cast<unsigned*>(sq_ + off_.sq_off.tail);
    unsigned mask = *reinterpret_cast<unsigned*>(sq_ + off_.sq_off.ring_mask);
    auto* array = reinterpret_cast<unsigned*>(sq_ + off_.sq_off.array);
    unsigned t = *tail, idx = t & mask;
    io_uring_sqe* sqe = &sqes_[idx];
    std::memset(sqe, 0, sizeof *sqe);
    fill(sqe);
    array[idx] = idx;
    __atomic_store_n(tail, t + 1, __ATOMIC_RELEASE);
    unsigned enter_flags = IORING_ENTER_GETEVENTS;
    if (off_.flags & IORING_SETUP_SQPOLL) enter_flags |= IORING_ENTER_SQ_WAKEUP;
    if (::syscall(SYS_io_uring_enter, fd_, 1, 1, enter_flags, nullptr, 0) < 0) return -errno;
    auto* head = reinterpret_cast<unsigned*>(cq_ + off_.cq_off.head);
    auto* ctail = reinterpret_cast<unsigned*>(cq_ + off_.cq_off.tail);
    unsigned cmask = *reinterpret_cast<unsigned*>(cq_ + off_.cq_off.ring_mask);
    if (*head == __atomic_load_n(ctail, __ATOMIC_ACQUIRE)) return -EAGAIN;
    auto* cqes = reinterpret_cast<io_uring_cqe*>(cq_ + off_.cq_off.cqes);
    int res = cqes[*head & cmask].res;
    __atomic_store_n(head, *head + 1, __ATOMIC_RELEASE);
    return res;
  }
  // One openat; returns the CQE's result (an fd, closed here, reported as 0; or -errno).
  int OpenAt(const std::string& path, int flags, int personality, bool async) {
    int res = Submit([&](io_uring_sqe* sqe) {
      sqe->opcode = IORING_OP_OPENAT;
      sqe->fd = AT_FDCWD;
      sqe->addr = reinterpret_cast<uint64_t>(path.c_str());
      sqe->open_flags = static_cast<uint32_t>(flags | O_CLOEXEC);
      sqe->personality = static_cast<uint16_t>(personality);
      if (async) sqe->flags |= IOSQE_ASYNC;
    });
    if (res >= 0) {
      ::close(res);
      return 0;
    }
    return res;
  }

 private:
  int fd_ = -1, err_ = 0;
  char* sq_ = static_cast<char*>(MAP_FAILED);
  char* cq_ = static_cast<char*>(MAP_FAILED);
  io_uring_sqe* sqes_ = static_cast<io_uring_sqe*>(MAP_FAILED);
  size_t sq_size_ = 0, cq_size_ = 0, sqe_size_ = 0;
  io_uring_params off_ = {};
};

// Every loaded program: its info (id, type, name).
inline std::vector<bpf_prog_info> LoadedPrograms() {
  std::vector<bpf_prog_info> out;
  uint32_t id = 0;
  while (bpf_prog_get_next_id(id, &id) == 0) {
    int fd = bpf_prog_get_fd_by_id(id);
    if (fd < 0) continue;
    bpf_prog_info info = {};
    uint32_t len = sizeof info;
    if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0) out.push_back(info);
    ::close(fd);
  }
  return out;
}

inline bool Alive(pid_t pid) { return ::waitpid(pid, nullptr, WNOHANG) == 0; }

inline pid_t SpawnSleeper() {
  pid_t pid = ::fork();
  if (pid == 0) {
    for (;;) ::pause();
  }
  return pid;
}

// Arms `rfd` (a pipe's read end) to send `sig` to `owner` when data arrives.
inline int ArmSigio(int rfd, pid_t owner, int sig) {
  if (::fcntl(rfd, F_SETOWN, owner)) return 1000 + errno;
  if (::fcntl(rfd, F_SETSIG, sig)) return 2000 + errno;
  if (::fcntl(rfd, F_SETFL, ::fcntl(rfd, F_GETFL) | O_ASYNC)) return 3000 + errno;
  return 0;
}

// Shared by the LSM test files: writing a fixture file, matching event paths
// by suffix (the test VMs chroot), and events in failure messages (cordon's
// own compact line, as `cordon tail` prints it).
inline void WriteText(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

inline bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

inline std::string Dump(const std::vector<cordon::v1::AuditEvent>& events) {
  std::string out = "events:\n";
  for (const auto& e : events) out += "  " + ToCompactLine(e) + "\n";
  return out;
}

}  // namespace cordon::test
