#include "agent/control_socket.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <cstring>

#include "agent/control.h"
#include "agent/log.h"
#include "sys/cgroup.h"
#include "util/clock.h"

namespace cordon::agent {

Result<UniqueFd> ListenOnControlSocket(const std::string& path, ino_t* ino) {
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return Error{"socket path too long: " + path};
  std::memcpy(addr.sun_path, path.data(), path.size());
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return SysError("socket");
  // We hold the lock: whatever is at the path was left by a dead agent.
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return Error{path + " exists and is not a socket; refusing to replace it"};
    ::unlink(path.c_str());
  }
  mode_t old = ::umask(0177);
  int bound = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ::umask(old);
  if (bound != 0) return SysError("bind " + path);
  ::chmod(path.c_str(), 0600);
  if (::stat(path.c_str(), &st) == 0) *ino = st.st_ino;
  if (::listen(fd.get(), 64) != 0) return SysError("listen on " + path);
  return fd;
}

void AcceptControlClients(int listen_fd, const std::string& cgroup_mount, const std::string& pin_root,
                          size_t max_clients, TailServer& clients) {
  for (;;) {
    UniqueFd fd(::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd.valid()) return;
    struct ucred cred = {};
    socklen_t len = sizeof cred;
    auto refuse = [&](const std::string& why) {
      cordon::v1::Response r;
      r.set_error(why);
      std::string frame = EncodeFrame(r);
      (void)!::send(fd.get(), frame.data(), frame.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    };
    if (::getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != 0) {
      refuse("only root may use the agent's control socket");
      continue;
    }
    // A sandboxed root is still root: a peer inside any sandbox is refused
    // whatever its uid (it could replace its own policy), and so is one
    // whose cgroup cannot be established.
    if (auto sandbox = SandboxOfPeer(fd.get(), cgroup_mount, pin_root); !sandbox || *sandbox != 0) {
      refuse(sandbox ? "the agent refuses requests from inside a sandbox (sandbox " + std::to_string(*sandbox) + ")"
                     : "the agent refuses this peer: " + sandbox.error().ToString());
      // Logged at most every 10 s: a sandbox can connect in a loop.
      static int64_t last_logged_ns = 0;
      static uint64_t unlogged = 0;
      if (MonoNs() - last_logged_ns >= 10'000'000'000LL) {
        Log("refused a control connection from pid " + std::to_string(cred.pid) +
            (sandbox ? " inside sandbox " + std::to_string(*sandbox) : ": " + sandbox.error().ToString()) +
            (unlogged ? " (and " + std::to_string(unlogged) + " more since the last report)" : ""));
        last_logged_ns = MonoNs();
        unlogged = 0;
      } else {
        ++unlogged;
      }
      continue;
    }
    size_t open = 0;
    for (const auto& [key, c] : clients.clients()) open += c->dead ? 0 : 1;
    if (open >= max_clients) {
      clients.CountBusy();
      // Said before the client writes anything: the CLI reads it even when
      // its request then fails to go out (the socket is closed), and says
      // "agent busy" instead of "Broken pipe".
      refuse(std::string(kAgentBusy) + "all " + std::to_string(max_clients) +
             " control connections in use (tail.maxClients); try again later");
      static LogLimiter busy_log;
      busy_log.Log("refused a control connection from pid " + std::to_string(cred.pid) + ": all " +
                   std::to_string(max_clients) + " control connections in use");
      continue;
    }
    clients.Add(std::move(fd), static_cast<uint32_t>(cred.pid));
  }
}

}  // namespace cordon::agent
