// neurond's listening Unix socket, bound by neurond itself (without systemd's
// socket unit) or by its supervisor (supervisor.h), which keeps it across restarts.
#pragma once

#include <string>

namespace neuron::daemon {

// True if something answers on the Unix socket at path (another neurond).
bool socket_alive(const std::string &path);

// Binds and listens on path (mode 0660, group `group` when it exists; parent
// directories made; a stale socket of a dead daemon replaced). Returns the fd
// (close-on-exec). Throws std::runtime_error with the reason.
int bind_unix_listener(const std::string &path, const std::string &group);

} // namespace neuron::daemon
