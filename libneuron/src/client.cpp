// Connection to neurond: connect + Hello, and blocking request/response calls.
#include "internal.h"

#include <neuron/socket_path.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace neuron::client {

namespace {

neuron_status status_of(api::ErrorCode code)
{
	switch (code) {
	case api::ERROR_INVALID_ARGUMENT: return NEURON_ERR_INVALID;
	case api::ERROR_OUT_OF_MEMORY: return NEURON_ERR_NO_MEMORY;
	case api::ERROR_RESOURCE_EXHAUSTED: return NEURON_ERR_NO_MEMORY;
	case api::ERROR_NOT_FOUND: return NEURON_ERR_NOT_FOUND;
	case api::ERROR_PERMISSION_DENIED: return NEURON_ERR_PERMISSION;
	case api::ERROR_VERSION_MISMATCH: return NEURON_ERR_VERSION;
	case api::ERROR_PROTOCOL: return NEURON_ERR_PROTOCOL;
	case api::ERROR_DEADLINE_EXCEEDED: return NEURON_ERR_TIMEOUT;
	case api::ERROR_ABORTED: return NEURON_ERR_ABORTED;
	default: return NEURON_ERR_INTERNAL;
	}
}

std::string own_command_line()
{
	std::ifstream f("/proc/self/cmdline", std::ios::binary);
	std::string raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
	for (char &ch : raw)
		if (ch == '\0')
			ch = ' ';
	while (!raw.empty() && raw.back() == ' ')
		raw.pop_back();
	return raw.substr(0, 63);
}

neuron_status lost(neuron_client *c, const std::string &what)
{
	c->lost.store(true);
	return fail(NEURON_ERR_DAEMON_LOST, "lost the connection to neurond (" + what +
						    "): the daemon stopped or restarted; reconnect after it is back");
}

} // namespace

bool daemon_gone(neuron_client *c)
{
	if (c->lost.load())
		return true;
	struct pollfd p = {c->sock, POLLRDHUP, 0};
	if (poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) {
		c->lost.store(true);
		return true;
	}
	return false;
}

neuron_status call(neuron_client *c, api::Request &req, api::Response *resp, int send_fd, int *recv_fd)
{
	std::lock_guard lock(c->rpc_mutex);
	if (c->lost.load())
		return fail(NEURON_ERR_DAEMON_LOST, "the connection to neurond was lost earlier; reconnect");
	req.set_request_id(c->next_request++);
	if (int err = wire::send_frame(c->sock, wire::encode_frame(req), send_fd, false))
		return lost(c, std::string("send: ") + std::strerror(err));
	std::vector<int> fds; // sent with the reply
	for (;;) {
		std::string payload, error;
		auto st = c->decoder.next(&payload, &error, &fds);
		if (st == wire::FrameDecoder::Status::Error)
			return lost(c, "malformed reply frame: " + error);
		if (st == wire::FrameDecoder::Status::Frame) {
			if (!resp->ParseFromString(payload))
				return lost(c, "unparsable reply");
			if (resp->request_id() != req.request_id() && !resp->has_error())
				return lost(c, "reply to another request");
			break;
		}
		long n = wire::receive_some(c->sock, c->decoder, false);
		if (n == 0)
			return lost(c, "connection closed");
		if (n < 0)
			return lost(c, std::string("receive: ") + std::strerror(static_cast<int>(-n)));
	}
	if (recv_fd) {
		*recv_fd = fds.empty() ? -1 : fds.front();
		if (!fds.empty())
			fds.erase(fds.begin());
	}
	for (int fd : fds) // descriptors nobody asked for
		close(fd);
	if (resp->has_error())
		return fail(status_of(resp->error().code()), resp->error().message());
	return NEURON_OK;
}

} // namespace neuron::client

using namespace neuron;
using neuron::client::call;
using neuron::client::fail;

extern "C" const char *neuron_default_socket_path(void)
{
	static thread_local std::string path;
	path = detail::default_socket_path();
	return path.c_str();
}

extern "C" neuron_status neuron_connect(const struct neuron_connect_options *opts, neuron_client **out)
{
	if (!out)
		return fail(NEURON_ERR_INVALID, "neuron_connect: out is NULL");
	*out = nullptr;
	const std::string path = opts && opts->socket_path ? opts->socket_path : detail::default_socket_path();
	struct sockaddr_un addr = {};
	addr.sun_family = AF_UNIX;
	if (path.size() >= sizeof(addr.sun_path))
		return fail(NEURON_ERR_INVALID, "socket path " + path + " is too long");
	path.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
	int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sock < 0)
		return fail(NEURON_ERR_INTERNAL, std::string("socket: ") + std::strerror(errno));
	if (connect(sock, reinterpret_cast<struct sockaddr *>(&addr), sizeof(addr)) != 0) {
		const int e = errno;
		close(sock);
		if (e == EACCES || e == EPERM)
			return fail(NEURON_ERR_PERMISSION, "permission denied on " + path +
								   ": add your user to the 'neuron' group (then log in again)");
		return fail(NEURON_ERR_DAEMON_LOST, "neurond is not running (no daemon at " + path + ": " +
							    std::strerror(e) + "). Start it with `neurond` (or "
							    "`systemctl start neurond`), or point NEURON_SOCKET at its socket");
	}
	auto *c = new neuron_client;
	c->sock = sock;
	api::Request req;
	auto *h = req.mutable_hello();
	h->set_api_major(NEURON_API_MAJOR);
	h->set_api_minor(NEURON_API_MINOR);
	h->set_client_name(opts && opts->client_name ? opts->client_name : client::own_command_line());
	h->set_kind(opts && opts->kind == NEURON_TENANT_INFERENCE ? api::TENANT_KIND_INFERENCE
								  : api::TENANT_KIND_TRAINING);
	h->set_observer(opts && opts->observer);
	api::Response resp;
	if (neuron_status s = call(c, req, &resp); s != NEURON_OK) {
		close(sock);
		delete c;
		return s;
	}
	if (!resp.has_hello() || resp.hello().cmd_abi_major() != NEURON_CMD_ABI_MAJOR) {
		close(sock);
		delete c;
		return fail(NEURON_ERR_VERSION, "neurond uses command format " +
							std::to_string(resp.hello().cmd_abi_major()) + ".x, this libneuron " +
							std::to_string(NEURON_CMD_ABI_MAJOR) + ".x");
	}
	c->tenant_id = resp.hello().tenant_id();
	*out = c;
	return NEURON_OK;
}

extern "C" void neuron_disconnect(neuron_client *c)
{
	if (!c)
		return;
	if (c->staging)
		neuron_host_free(c->staging);
	close(c->sock);
	delete c;
}

extern "C" uint64_t neuron_tenant_id(const neuron_client *c) { return c ? c->tenant_id : 0; }

extern "C" neuron_status neuron_alloc(neuron_client *c, uint32_t device, uint64_t size, uint64_t alignment,
				      uint64_t *address)
{
	if (!c || !address)
		return fail(NEURON_ERR_INVALID, "neuron_alloc: client and address must not be NULL");
	api::Request req;
	auto *a = req.mutable_alloc_device();
	a->set_device(device);
	a->set_size(size);
	a->set_alignment(alignment);
	api::Response resp;
	if (neuron_status s = call(c, req, &resp); s != NEURON_OK)
		return s;
	*address = resp.alloc_device().address();
	return NEURON_OK;
}

extern "C" neuron_status neuron_free(neuron_client *c, uint32_t device, uint64_t address)
{
	if (!c)
		return fail(NEURON_ERR_INVALID, "neuron_free: client is NULL");
	api::Request req;
	req.mutable_free_device()->set_device(device);
	req.mutable_free_device()->set_address(address);
	api::Response resp;
	return call(c, req, &resp);
}

extern "C" neuron_status neuron_set_weight(neuron_client *c, uint32_t weight)
{
	if (!c)
		return fail(NEURON_ERR_INVALID, "neuron_set_weight: client is NULL");
	api::Request req;
	req.mutable_set_weight()->set_weight(weight);
	api::Response resp;
	return call(c, req, &resp); // the daemon validates the range and says why
}
