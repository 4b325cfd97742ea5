// The agent's control socket: a unix stream socket that only root outside
// every sandbox may use (created 0600; SO_PEERCRED uid 0; the peer's cgroup
// within no sandbox). Accepted connections become TailServer clients.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>

#include "agent/tail_server.h"
#include "util/fd.h"
#include "util/result.h"

namespace cordon::agent {

// Binds and listens on `path`. Whatever socket is there was left by a dead
// agent (the caller holds the agent lock) and is replaced; anything else is
// refused. *ino: the socket's inode, so that shutdown removes only its own.
Result<UniqueFd> ListenOnControlSocket(const std::string& path, ino_t* ino);

// Accepts every pending connection. A refused one is told why (one Response
// frame) and closed; so is one beyond max_clients.
void AcceptControlClients(int listen_fd, const std::string& cgroup_mount, const std::string& pin_root,
                          size_t max_clients, TailServer& clients);

}  // namespace cordon::agent
