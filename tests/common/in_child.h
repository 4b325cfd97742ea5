// Runs a test body in a forked child and returns its report: the way to
// test things that change the calling process for good (seccomp, Landlock).
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <functional>
#include <string>

namespace cordon::test {

// Runs `body` in a forked child; returns what it wrote (empty = every check
// passed), or a description of how the child died.
inline std::string InChild(const std::function<std::string()>& body) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return "pipe failed";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    std::string out = body();
    size_t off = 0;
    while (off < out.size()) {
      ssize_t n = ::write(fds[1], out.data() + off, out.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    _exit(0);
  }
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) out += "child killed by signal " + std::to_string(WTERMSIG(status));
  else if (WEXITSTATUS(status) != 0) out += "child exited " + std::to_string(WEXITSTATUS(status));
  return out;
}

}  // namespace cordon::test
