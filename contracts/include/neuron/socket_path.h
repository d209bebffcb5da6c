// Where neurond listens when no path is given (shared by daemon, library and tools).
#pragma once

#include <cstdlib>
#include <string>
#include <unistd.h>

namespace neuron::detail {

inline constexpr const char *kSocketEnv = "NEURON_SOCKET";
inline constexpr const char *kSystemSocket = "/run/neuron/neurond.sock";

// $NEURON_SOCKET, else the system socket for root, else a per-user one.
inline std::string default_socket_path()
{
	if (const char *env = std::getenv(kSocketEnv); env && *env)
		return env;
	if (geteuid() == 0)
		return kSystemSocket;
	if (const char *xdg = std::getenv("XDG_RUNTIME_DIR"); xdg && *xdg)
		return std::string(xdg) + "/neuron/neurond.sock";
	return "/tmp/neuron-" + std::to_string(geteuid()) + "/neurond.sock";
}

} // namespace neuron::detail
