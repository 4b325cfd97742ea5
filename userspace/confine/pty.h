// The terminal of `cordon run`: the command never gets the caller's. When
// stdin, stdout or stderr is a terminal, the command gets a pty of its own
// instead (like sudo's use_pty): cordon relays bytes between the caller's
// terminal and the pty's master, keeps the caller's terminal in raw mode
// while the command runs (its line discipline, signals included, is the
// pty's), copies the window size on SIGWINCH and restores everything at the
// end. TIOCSTI and TIOCLINUX on the pty then reach only the command's own
// input, and the caller's terminal is no longer reachable: not inherited,
// not the controlling terminal (the command runs in a session of its own).
#pragma once

#include <termios.h>

#include <memory>
#include <string>

#include "util/fd.h"
#include "util/result.h"

namespace cordon {

class PtyRelay {
 public:
  // A pty when one of fds 0-2 is a terminal, else nullptr.
  static Result<std::unique_ptr<PtyRelay>> OpenIfTerminal();
  ~PtyRelay();  // restores the caller's terminal

  int slave() const { return slave_.get(); }
  bool replaces(int stdio_fd) const { return stdio_[stdio_fd]; }
  int master() const { return master_.get(); }
  int input() const { return stdio_[0] ? 0 : -1; }  // the caller's terminal, read for the command

  // The caller's terminal to raw mode (if stdin is a terminal). After the
  // child holds the slave, the parent's copy is closed.
  Status Start();
  void CloseSlave() { slave_.Reset(); }
  // Moves what is readable: caller -> pty (buffered, never blocking the
  // relay), pty -> caller. False once the pty is gone (every slave closed).
  void FromCaller();
  bool FromCommand();
  void FlushToCommand();
  bool WantsMasterWritable() const { return !pending_.empty(); }
  // Copies the caller's window size to the pty (the kernel tells the command).
  void Resize();
  void Restore();

 private:
  PtyRelay() = default;
  UniqueFd master_;
  UniqueFd slave_;
  bool stdio_[3] = {false, false, false};
  int tty_fd_ = -1;  // a caller fd that is a terminal (window size, modes)
  bool raw_ = false;
  bool input_open_ = true;
  struct termios saved_ = {};
  std::string pending_;  // caller input not yet taken by the pty
};

}  // namespace cordon
