#include "listen_fds.h"

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <stdexcept>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace neuron::daemon {

namespace {

constexpr int kFirstFd = 3; // SD_LISTEN_FDS_START

std::vector<std::string> g_names;

std::vector<std::string> split_names(const char *names)
{
	std::vector<std::string> out;
	if (!names)
		return out;
	std::string cur;
	for (const char *p = names;; ++p) {
		if (*p == ':' || *p == '\0') {
			out.push_back(cur);
			cur.clear();
			if (!*p)
				break;
		} else {
			cur += *p;
		}
	}
	return out;
}

std::vector<int> parse_listen_fds()
{
	std::vector<int> fds;
	const char *pid = std::getenv("LISTEN_PID");
	const char *count = std::getenv("LISTEN_FDS");
	// The variables are for the process systemd started, not for a child of it.
	if (pid && count && std::strtol(pid, nullptr, 10) == getpid()) {
		const long n = std::strtol(count, nullptr, 10);
		const std::vector<std::string> names = split_names(std::getenv("LISTEN_FDNAMES"));
		// Kept state can be many descriptors (a ring per queue): no small cap.
		for (long i = 0; i < n && i < (1 << 20); ++i) {
			const int fd = kFirstFd + static_cast<int>(i);
			if (fcntl(fd, F_SETFD, FD_CLOEXEC) == 0) {
				fds.push_back(fd);
				g_names.push_back(size_t(i) < names.size() ? names[size_t(i)] : std::string());
			}
		}
	}
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	return fds;
}

bool is_listening_stream(int fd, int *family)
{
	int type = 0, listening = 0;
	socklen_t len = sizeof(type);
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM)
		return false;
	len = sizeof(listening);
	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening)
		return false;
	struct sockaddr_storage addr = {};
	len = sizeof(addr);
	if (getsockname(fd, reinterpret_cast<struct sockaddr *>(&addr), &len) != 0)
		return false;
	*family = addr.ss_family;
	return true;
}

std::string unix_path_of(int fd)
{
	struct sockaddr_un addr = {};
	socklen_t len = sizeof(addr);
	if (getsockname(fd, reinterpret_cast<struct sockaddr *>(&addr), &len) != 0 ||
	    len <= offsetof(struct sockaddr_un, sun_path))
		return {};
	return std::string(addr.sun_path, strnlen(addr.sun_path, len - offsetof(struct sockaddr_un, sun_path)));
}

} // namespace

const std::vector<int> &listen_fds()
{
	static const std::vector<int> fds = parse_listen_fds();
	return fds;
}

const std::vector<std::string> &listen_fd_names()
{
	listen_fds();
	return g_names;
}

int inherited_unix_listener(const std::string &path)
{
	if (listen_fds().empty())
		return -1;
	std::string seen;
	bool any_listener = false;
	for (const int fd : listen_fds()) {
		int family = 0;
		if (!is_listening_stream(fd, &family))
			continue;
		any_listener = true;
		if (family != AF_UNIX)
			continue;
		const std::string bound = unix_path_of(fd);
		if (bound == path)
			return fd;
		seen += (seen.empty() ? "" : ", ") + bound;
	}
	if (!any_listener) // only kept state (fd_store.h): neurond binds the socket itself
		return -1;
	throw std::runtime_error("systemd passed listening sockets (" + (seen.empty() ? std::string("none of them a Unix stream socket") : seen) +
				 ") but none is bound to " + path +
				 ": make ListenStream= of the socket unit and neurond's socket setting name the same path");
}

int inherited_tcp_listener()
{
	for (const int fd : listen_fds()) {
		int family = 0;
		if (is_listening_stream(fd, &family) && (family == AF_INET || family == AF_INET6))
			return fd;
	}
	return -1;
}

} // namespace neuron::daemon
