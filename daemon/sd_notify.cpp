#include "sd_notify.h"

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace neuron::daemon {

namespace {

bool notify(const std::string &state, int fd, std::string *error)
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
	const int sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (sock < 0) {
		if (error)
			*error = std::string("socket: ") + std::strerror(errno);
		return false;
	}
	struct iovec iov = {const_cast<char *>(state.data()), state.size()};
	struct msghdr msg = {};
	msg.msg_name = &addr;
	msg.msg_namelen = static_cast<socklen_t>(offsetof(struct sockaddr_un, sun_path) + len);
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
	if (fd >= 0) {
		msg.msg_control = control;
		msg.msg_controllen = sizeof(control);
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	const ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL);
	const int saved = errno;
	close(sock);
	if (n != static_cast<ssize_t>(state.size())) {
		if (error)
			*error = std::string("sendmsg ") + name + ": " + std::strerror(saved);
		return false;
	}
	return true;
}

} // namespace

bool sd_notify_state(const std::string &state, std::string *error) { return notify(state, -1, error); }

bool sd_notify_with_fd(const std::string &state, int fd, std::string *error) { return notify(state, fd, error); }

} // namespace neuron::daemon
