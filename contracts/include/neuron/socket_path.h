// Where neurond listens when no path is given (shared by daemon, library and tools).
#pragma once

#include <cstdlib>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

namespace neuron::detail {

inline constexpr const char *kSocketEnv = "NEURON_SOCKET";
inline constexpr const char *kSystemSocket = "/run/neuron/neurond.sock";

enum class SocketRole { Client, Daemon };

// $NEURON_SOCKET, else the system socket for root. Otherwise a client takes the
// system socket when it exists (a host where the neuron-runtime package's neurond
// listens: a user outside group neuron then gets a permission error, not "no
// daemon"), and a daemon, or a client on a host without a system neurond, a
// per-user one.
inline std::string default_socket_path(SocketRole role = SocketRole::Client)
{
	if (const char *env = std::getenv(kSocketEnv); env && *env)
		return env;
	if (geteuid() == 0)
		return kSystemSocket;
	struct stat st;
	if (role == SocketRole::Client && lstat(kSystemSocket, &st) == 0 && S_ISSOCK(st.st_mode))
		return kSystemSocket;
	if (const char *xdg = std::getenv("XDG_RUNTIME_DIR"); xdg && *xdg)
		return std::string(xdg) + "/neuron/neurond.sock";
	return "/tmp/neuron-" + std::to_string(geteuid()) + "/neurond.sock";
}

} // namespace neuron::detail
