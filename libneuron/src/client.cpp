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
						    "): the daemon stopped or restarted without keeping this tenant's state; "
						    "reconnect after it is back");
}

bool daemon_gone(neuron_client *c)
{
	if (!c->lost.load()) {
		struct pollfd p = {c->sock, POLLRDHUP, 0};
		if (!(poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR))))
			return false;
	}
	// Whoever holds the connection now (a call, or another waiter re-attaching)
	// finds out for itself: this waiter keeps waiting.
	std::unique_lock lock(c->rpc_mutex, std::try_to_lock);
	if (!lock.owns_lock())
		return false;
	c->lost.store(true);
	return !reattach(c);
}

neuron_status exchange(neuron_client *c, int sock, api::Request &req, api::Response *resp, int send_fd, int *recv_fd,
		       std::string *why)
{
	if (int err = wire::send_frame(sock, wire::encode_frame(req), send_fd, false)) {
		*why = std::string("send: ") + std::strerror(err);
		return NEURON_ERR_DAEMON_LOST;
	}
	std::vector<int> fds; // sent with the reply
	for (;;) {
		std::string payload, error;
		auto st = c->decoder.next(&payload, &error, &fds);
		if (st == wire::FrameDecoder::Status::Error) {
			*why = "malformed reply frame: " + error;
			return NEURON_ERR_DAEMON_LOST;
		}
		if (st == wire::FrameDecoder::Status::Frame) {
			if (!resp->ParseFromString(payload)) {
				*why = "unparsable reply";
				return NEURON_ERR_DAEMON_LOST;
			}
			if (resp->request_id() != req.request_id() && !resp->has_error()) {
				*why = "reply to another request";
				return NEURON_ERR_DAEMON_LOST;
			}
			break;
		}
		long n = wire::receive_some(sock, c->decoder, false);
		if (n == 0) {
			*why = "connection closed";
			return NEURON_ERR_DAEMON_LOST;
		}
		if (n < 0) {
			*why = std::string("receive: ") + std::strerror(static_cast<int>(-n));
			return NEURON_ERR_DAEMON_LOST;
		}
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

neuron_status call(neuron_client *c, api::Request &req, api::Response *resp, int send_fd, int *recv_fd)
{
	std::lock_guard lock(c->rpc_mutex);
	if (c->lost.load() && !reattach(c))
		return fail(NEURON_ERR_DAEMON_LOST, "the connection to neurond was lost earlier and could not be "
						    "re-attached: " + std::string(neuron_last_error()));
	req.set_request_id(c->next_request++);
	for (;;) {
		std::string why;
		const neuron_status s = exchange(c, c->sock, req, resp, send_fd, recv_fd, &why);
		if (s != NEURON_ERR_DAEMON_LOST || why.empty())
			return s;
		// The daemon went away mid-request. If it comes back with this tenant's
		// state, the request either ran (its reply was kept) or is sent again.
		c->lost.store(true);
		uint64_t last_id = 0;
		api::Response last;
		int last_fd = -1;
		if (c->resume_token.empty() || !reattach(c, &last_id, &last, &last_fd))
			return lost(c, why);
		if (last_id == req.request_id()) {
			*resp = last;
			if (recv_fd)
				*recv_fd = last_fd;
			else if (last_fd >= 0)
				close(last_fd);
			if (resp->has_error())
				return fail(status_of(resp->error().code()), resp->error().message());
			return NEURON_OK;
		}
		if (last_fd >= 0)
			close(last_fd);
	}
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
	neuron_status status = NEURON_OK;
	const int sock = client::connect_socket(path, &status);
	if (sock < 0)
		return status;
	auto *c = new neuron_client;
	c->sock = sock;
	c->socket_path = path;
	api::Hello *h = &c->hello;
	h->set_api_major(NEURON_API_MAJOR);
	h->set_api_minor(NEURON_API_MINOR);
	h->set_client_name(opts && opts->client_name ? opts->client_name : client::own_command_line());
	h->set_kind(opts && opts->kind == NEURON_TENANT_INFERENCE ? api::TENANT_KIND_INFERENCE
								  : api::TENANT_KIND_TRAINING);
	h->set_observer(opts && opts->observer);
	c->observer = h->observer();
	api::Request req;
	*req.mutable_hello() = *h;
	api::Response resp;
	if (neuron_status s = call(c, req, &resp); s != NEURON_OK) {
		close(c->sock);
		delete c;
		return s;
	}
	if (!resp.has_hello() || resp.hello().cmd_abi_major() != NEURON_CMD_ABI_MAJOR) {
		close(c->sock);
		delete c;
		return fail(NEURON_ERR_VERSION, "neurond uses command format " +
							std::to_string(resp.hello().cmd_abi_major()) + ".x, this libneuron " +
							std::to_string(NEURON_CMD_ABI_MAJOR) + ".x");
	}
	c->tenant_id = resp.hello().tenant_id();
	c->resume_token = resp.hello().resume_token();
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
