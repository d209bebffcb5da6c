// systemd's readiness protocol without libsystemd (sd_notify(3), "NOTES"): one
// datagram of KEY=VALUE lines to the AF_UNIX socket named by $NOTIFY_SOCKET. The
// protocol is the stable interface; the library is only a convenience we do not need.
#pragma once

#include <string>

namespace neuron::daemon {

// Sends state (e.g. "READY=1", "STOPPING=1", "STATUS=...") when neurond runs under
// systemd with Type=notify; a no-op (true) without $NOTIFY_SOCKET. False with
// *error when the socket is named but the message could not be sent.
bool sd_notify_state(const std::string &state, std::string *error = nullptr);

// The same with one descriptor attached (SCM_RIGHTS): FDSTORE=1 (fd_store.h).
bool sd_notify_with_fd(const std::string &state, int fd, std::string *error = nullptr);

} // namespace neuron::daemon
