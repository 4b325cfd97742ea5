#include "confine/pty.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>

namespace cordon {
namespace {

constexpr size_t kMaxPending = 64 * 1024;

void WriteAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;  // the caller's terminal went away: nothing to show it
    data += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

Result<std::unique_ptr<PtyRelay>> PtyRelay::OpenIfTerminal() {
  std::unique_ptr<PtyRelay> relay(new PtyRelay());
  for (int fd = 0; fd < 3; ++fd) {
    relay->stdio_[fd] = ::isatty(fd) == 1;
    if (relay->stdio_[fd] && relay->tty_fd_ < 0) relay->tty_fd_ = fd;
  }
  if (relay->tty_fd_ < 0) return std::unique_ptr<PtyRelay>();
  relay->master_ = UniqueFd(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!relay->master_.valid()) return SysError("open a pty for the command (posix_openpt)");
  if (::grantpt(relay->master_.get()) != 0 || ::unlockpt(relay->master_.get()) != 0)
    return SysError("prepare the command's pty");
  char name[128];
  if (::ptsname_r(relay->master_.get(), name, sizeof name) != 0) return SysError("ptsname");
  relay->slave_ = UniqueFd(::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!relay->slave_.valid()) return SysError(std::string("open ") + name);
  // The pty starts as the caller's terminal is: modes and size.
  struct termios modes;
  if (::tcgetattr(relay->tty_fd_, &modes) == 0) (void)::tcsetattr(relay->slave_.get(), TCSANOW, &modes);
  relay->Resize();
  int flags = ::fcntl(relay->master_.get(), F_GETFL);
  (void)::fcntl(relay->master_.get(), F_SETFL, flags | O_NONBLOCK);
  return relay;
}

PtyRelay::~PtyRelay() { Restore(); }

Status PtyRelay::Start() {
  if (!stdio_[0]) return {};
  if (::tcgetattr(0, &saved_) != 0) return SysError("read the terminal's modes");
  struct termios raw = saved_;
  ::cfmakeraw(&raw);
  if (::tcsetattr(0, TCSADRAIN, &raw) != 0) return SysError("set the terminal to raw mode");
  raw_ = true;
  return {};
}

void PtyRelay::Restore() {
  if (raw_) {
    (void)::tcsetattr(0, TCSADRAIN, &saved_);
    raw_ = false;
  }
}

void PtyRelay::Resize() {
  struct winsize ws;
  if (tty_fd_ >= 0 && ::ioctl(tty_fd_, TIOCGWINSZ, &ws) == 0) {
    int target = slave_.valid() ? slave_.get() : master_.get();
    (void)::ioctl(target, TIOCSWINSZ, &ws);
  }
}

void PtyRelay::FromCaller() {
  if (!input_open_ || pending_.size() >= kMaxPending) return;
  char buf[4096];
  ssize_t n = ::read(0, buf, sizeof buf);
  if (n > 0) pending_.append(buf, static_cast<size_t>(n));
  else if (n == 0 || (errno != EAGAIN && errno != EINTR)) input_open_ = false;
  FlushToCommand();
}

void PtyRelay::FlushToCommand() {
  while (!pending_.empty()) {
    ssize_t w = ::write(master_.get(), pending_.data(), pending_.size());
    if (w <= 0) return;  // EAGAIN: the command has not read yet; retried when writable
    pending_.erase(0, static_cast<size_t>(w));
  }
}

bool PtyRelay::FromCommand() {
  char buf[16384];
  for (;;) {
    ssize_t n = ::read(master_.get(), buf, sizeof buf);
    if (n > 0) {
      WriteAll(stdio_[1] ? 1 : (stdio_[2] ? 2 : 1), buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    return false;  // EIO: every slave is closed
  }
}

}  // namespace cordon
