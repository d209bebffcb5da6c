#include "unix_listener.h"

#include <cerrno>
#include <cstring>
#include <grp.h>
#include <stdexcept>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

namespace neuron::daemon {

bool socket_alive(const std::string &path)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	struct sockaddr_un addr = {};
	addr.sun_family = AF_UNIX;
	path.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
	const bool alive = connect(fd, reinterpret_cast<struct sockaddr *>(&addr), sizeof(addr)) == 0;
	close(fd);
	return alive;
}

namespace {

void make_parent_dir(const std::string &path)
{
	const auto slash = path.rfind('/');
	if (slash == std::string::npos || slash == 0)
		return;
	const std::string dir = path.substr(0, slash);
	// Parents first (a user runtime dir may need ".../neuron" under it).
	make_parent_dir(dir);
	if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
		throw std::runtime_error("cannot create " + dir + ": " + std::strerror(errno));
}

} // namespace

int bind_unix_listener(const std::string &path, const std::string &group)
{
	struct sockaddr_un addr = {};
	if (path.size() >= sizeof(addr.sun_path))
		throw std::runtime_error("socket path " + path + " is longer than " +
					 std::to_string(sizeof(addr.sun_path) - 1) + " bytes");
	make_parent_dir(path);
	struct stat st;
	if (lstat(path.c_str(), &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			throw std::runtime_error(path + " exists and is not a socket; remove it or pass --socket");
		if (socket_alive(path))
			throw std::runtime_error("another neurond is already listening on " + path);
		unlink(path.c_str()); // stale socket of a daemon that died
	}
	const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
	addr.sun_family = AF_UNIX;
	path.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
	if (bind(fd, reinterpret_cast<struct sockaddr *>(&addr), sizeof(addr)) != 0) {
		const int e = errno;
		close(fd);
		throw std::runtime_error("cannot bind " + path + ": " + std::strerror(e));
	}
	// Permissions before listen(): once connects succeed, the socket's mode is final
	// (a client, or a test that widens the mode, must never race this). Tenants need
	// the socket group (DESIGN.md section 5); without the group (a developer machine)
	// only the owner can connect.
	if (struct group *g = getgrnam(group.c_str()))
		(void)!chown(path.c_str(), static_cast<uid_t>(-1), g->gr_gid);
	chmod(path.c_str(), 0660);
	if (listen(fd, 512) != 0) {
		const int e = errno;
		close(fd);
		throw std::runtime_error("cannot listen on " + path + ": " + std::strerror(e));
	}
	return fd;
}

} // namespace neuron::daemon
