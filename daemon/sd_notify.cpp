#include "sd_notify.h"

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace neuron::daemon {

bool sd_notify_state(const std::string &state, std::string *error)
{
	const char *name = std::getenv("NOTIFY_SOCKET");
	if (!name || !*name)
		return true;
	struct sockaddr_un addr = {};
	addr.sun_family = AF_UNIX;
	const size_t len = std::strlen(name);
	// A path, or "@name" for the abstract namespace (its first byte becomes NUL).
	if ((name[0] != '/' && name[0] != '@') || len >= sizeof(addr.sun_path)) {
		if (error)
			*error = std::string("NOTIFY_SOCKET is neither an absolute path nor @abstract: ") + name;
		return false;
	}
	std::memcpy(addr.sun_path, name, len);
	if (addr.sun_path[0] == '@')
		addr.sun_path[0] = '\0';
	const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		if (error)
			*error = std::string("socket: ") + std::strerror(errno);
		return false;
	}
	const socklen_t addr_len = static_cast<socklen_t>(offsetof(struct sockaddr_un, sun_path) + len);
	const ssize_t n = sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
				 reinterpret_cast<const struct sockaddr *>(&addr), addr_len);
	const int saved = errno;
	close(fd);
	if (n != static_cast<ssize_t>(state.size())) {
		if (error)
			*error = std::string("sendto ") + name + ": " + std::strerror(saved);
		return false;
	}
	return true;
}

} // namespace neuron::daemon
