// Socket activation without libsystemd (sd_listen_fds(3)): systemd passes the
// listening sockets of a .socket unit as fds 3.. with LISTEN_PID (must be us) and
// LISTEN_FDS (how many). Used by neurond (its Unix socket, whose owner, group and mode
// the socket unit sets) and neuron-monitor (its TCP port).
#pragma once

#include <string>
#include <vector>

namespace neuron::daemon {

// The fds systemd passed, parsed once: later calls return the same list. The first
// call marks them close-on-exec and unsets LISTEN_PID/LISTEN_FDS/LISTEN_FDNAMES so
// that child processes do not take them for theirs.
const std::vector<int> &listen_fds();
// Their names (LISTEN_FDNAMES: the socket unit's FileDescriptorName=, or the name a
// descriptor was kept under in the fd store), one per fd; "" where none was given.
const std::vector<std::string> &listen_fd_names();

// The passed listening AF_UNIX stream socket bound to path, or -1 when nothing was
// passed. Throws std::runtime_error when sockets were passed but none is bound to
// path (the socket unit and neurond's --socket disagree).
int inherited_unix_listener(const std::string &path);

// The first passed listening TCP socket (IPv4 or IPv6), or -1 when there is none.
int inherited_tcp_listener();

} // namespace neuron::daemon
