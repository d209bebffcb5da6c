// Restart survival on the client's side (daemon/README.md, "Restart with tenants
// alive"): when neurond goes away, connect again and re-attach to the same tenant
// with its resume token. Rings and host buffers stay mapped meanwhile (the memfds
// belong to this process and to the supervisor that kept neurond's copies), so
// waiters simply keep waiting and submitters keep submitting into the ring.
#include "internal.h"

#include <neuron/futex.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sys/socket.h>
#include <sys/un.h>
#include <thread>
#include <unistd.h>

namespace neuron::client {

namespace {

int64_t reconnect_timeout_ms()
{
	const char *v = std::getenv("NEURON_RECONNECT_TIMEOUT_MS");
	return v && *v ? std::strtoll(v, nullptr, 10) : 60000;
}

// One attempt: a connection and the resuming (or, for an observer, a fresh) Hello.
// 1: attached; 0: neurond is not there yet (try again); -1: it answered that the
// tenant's state is gone (give up).
int attach_once(neuron_client *c, uint64_t *last_id, api::Response *last, int *last_fd)
{
	neuron_status status = NEURON_OK;
	const int sock = connect_socket(c->socket_path, &status);
	if (sock < 0)
		return status == NEURON_ERR_PERMISSION ? -1 : 0;
	api::Request req;
	*req.mutable_hello() = c->hello;
	if (!c->observer) {
		req.mutable_hello()->set_resume_tenant_id(c->tenant_id);
		req.mutable_hello()->set_resume_token(c->resume_token);
	}
	req.set_request_id(c->next_request++);
	c->decoder = wire::FrameDecoder(); // nothing of the old stream is still to come
	api::Response resp;
	std::string why;
	int fd = -1;
	const neuron_status s = exchange(c, sock, req, &resp, -1, &fd, &why);
	if (s != NEURON_OK) {
		close(sock);
		if (fd >= 0)
			close(fd);
		return s == NEURON_ERR_DAEMON_LOST ? 0 : -1; // e.g. NOT_FOUND: the state is gone
	}
	close(c->sock);
	c->sock = sock;
	if (c->observer)
		c->tenant_id = resp.hello().tenant_id();
	if (last_id)
		*last_id = resp.hello().last_request_id();
	if (last && !last->ParseFromString(resp.hello().last_response()))
		last->Clear();
	if (last_fd)
		*last_fd = fd;
	else if (fd >= 0)
		close(fd);
	return 1;
}

} // namespace

int connect_socket(const std::string &path, neuron_status *status)
{
	struct sockaddr_un addr = {};
	addr.sun_family = AF_UNIX;
	if (path.size() >= sizeof(addr.sun_path)) {
		*status = fail(NEURON_ERR_INVALID, "socket path " + path + " is too long");
		return -1;
	}
	path.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
	const int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sock < 0) {
		*status = fail(NEURON_ERR_INTERNAL, std::string("socket: ") + std::strerror(errno));
		return -1;
	}
	if (connect(sock, reinterpret_cast<struct sockaddr *>(&addr), sizeof(addr)) != 0) {
		const int e = errno;
		close(sock);
		if (e == EACCES || e == EPERM)
			*status = fail(NEURON_ERR_PERMISSION, "permission denied on " + path +
								      ": add your user to the 'neuron' group (then log in again)");
		else
			*status = fail(NEURON_ERR_DAEMON_LOST, "neurond is not running (no daemon at " + path + ": " +
								       std::strerror(e) + "). Start it with `neurond` (or "
								       "`systemctl start neurond`), or point NEURON_SOCKET at its socket");
		return -1;
	}
	return sock;
}

bool reattach(neuron_client *c, uint64_t *last_id, api::Response *last, int *last_fd)
{
	if (c->resume_token.empty() && !c->observer) {
		fail(NEURON_ERR_DAEMON_LOST, "neurond went away, and it keeps no state for this tenant to re-attach to "
					     "(it runs without --supervise or systemd's fd store)");
		return false;
	}
	const uint64_t deadline = detail::monotonic_ns() + uint64_t(reconnect_timeout_ms()) * 1'000'000ull;
	int pause_ms = 10;
	for (;;) {
		const int r = attach_once(c, last_id, last, last_fd);
		if (r == 1) {
			c->lost.store(false);
			return true;
		}
		if (r < 0) {
			fail(NEURON_ERR_DAEMON_LOST, "neurond restarted without this tenant's state: " +
							     std::string(neuron_last_error()));
			return false;
		}
		if (detail::monotonic_ns() >= deadline) {
			fail(NEURON_ERR_DAEMON_LOST, "neurond did not come back within " + std::to_string(reconnect_timeout_ms()) +
							     " ms ($NEURON_RECONNECT_TIMEOUT_MS)");
			return false;
		}
		std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
		pause_ms = std::min(pause_ms * 2, 200);
	}
}

} // namespace neuron::client
