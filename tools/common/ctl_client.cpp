#include "ctl_client.h"

#include <neuron/socket_path.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <thread>
#include <unistd.h>

namespace neuron::tools {

CtlClient::~CtlClient()
{
	if (fd_ >= 0)
		close(fd_);
}

std::string describe_error(const api::Error &e) { return api::ErrorCode_Name(e.code()) + ": " + e.message(); }

bool CtlClient::connect(const std::string &path, const std::string &name, std::string *error)
{
	path_ = path.empty() ? detail::default_socket_path() : path;
	name_ = name;
	fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un addr = {};
	addr.sun_family = AF_UNIX;
	path_.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
	if (fd_ < 0 || ::connect(fd_, reinterpret_cast<struct sockaddr *>(&addr), sizeof(addr)) != 0) {
		const int e = errno;
		*error = "cannot connect to neurond at " + path_ + ": " + std::strerror(e) +
			 (e == ENOENT || e == ECONNREFUSED ? " (is neurond running? set $NEURON_SOCKET or --socket)"
			  : e == EACCES ? " (the socket is mode 0660: join its group, or use sudo)"
					: "");
		return false;
	}
	api::Request req;
	auto *h = req.mutable_hello();
	h->set_api_major(1);
	h->set_api_minor(1);
	h->set_client_name(name);
	h->set_observer(true);
	api::Response resp;
	if (!call(req, &resp, error))
		return false;
	if (resp.has_error()) {
		*error = "neurond refused the connection: " + describe_error(resp.error());
		return false;
	}
	return true;
}

bool CtlClient::call(api::Request &req, api::Response *resp, std::string *error)
{
	req.set_request_id(next_id_++);
	if (int err = wire::send_frame(fd_, wire::encode_frame(req), -1, false)) {
		*error = std::string("lost the connection to neurond: ") + std::strerror(err);
		return false;
	}
	// Skip pushed events that may precede the answer.
	in_call_ = true;
	for (;;) {
		if (!receive(resp, 30000, error)) {
			in_call_ = false;
			if (error->empty())
				*error = "neurond did not answer within 30 s";
			return false;
		}
		if (resp->request_id() == req.request_id()) {
			in_call_ = false;
			if (req.has_subscribe_events() && resp->has_ok())
				subscribed_ = true;
			return true;
		}
	}
}

namespace {

int reconnect_timeout_ms()
{
	const char *v = std::getenv("NEURON_RECONNECT_TIMEOUT_MS");
	return v && *v ? std::atoi(v) : 60000;
}

} // namespace

bool CtlClient::resubscribe(api::Response *marker, std::string *error)
{
	const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(reconnect_timeout_ms());
	int backoff_ms = 10;
	for (;;) {
		if (fd_ >= 0)
			close(fd_);
		fd_ = -1;
		decoder_ = wire::FrameDecoder();
		subscribed_ = false;
		std::string why;
		api::Request req;
		req.mutable_subscribe_events()->set_replay(true);
		api::Response resp;
		if (connect(path_, name_, &why) && call(req, &resp, &why)) {
			if (resp.has_error()) {
				*error = "neurond restarted and refused the new subscription: " + describe_error(resp.error());
				return false;
			}
			break;
		}
		if (stop_ && stop_()) {
			*error = "lost the connection to neurond (stopped waiting for it)";
			return false;
		}
		if (std::chrono::steady_clock::now() >= deadline) {
			*error = "lost the connection to neurond and it did not come back within " +
				 std::to_string(reconnect_timeout_ms()) + " ms ($NEURON_RECONNECT_TIMEOUT_MS): " + why;
			return false;
		}
		std::this_thread::sleep_for(std::chrono::milliseconds(backoff_ms));
		backoff_ms = std::min(backoff_ms * 2, 500);
	}
	marker->Clear();
	api::Event *ev = marker->mutable_event();
	ev->set_type("events.lost");
	ev->set_core(-1);
	ev->set_lost(0);
	ev->set_unix_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
				std::chrono::system_clock::now().time_since_epoch())
				.count());
	ev->set_message("events may have been lost: the connection to neurond broke (neurond restarted) and the "
			"subscription was made again; the events after this one are the new neurond's (its seq "
			"numbers start again)");
	return true;
}

bool CtlClient::list_tenants(api::ListTenantsReply *out, std::string *error)
{
	out->Clear();
	uint64_t after = 0;
	do {
		api::Request req;
		req.mutable_list_tenants()->set_start_after(after);
		api::Response resp;
		if (!call(req, &resp, error))
			return false;
		if (resp.has_error()) {
			*error = describe_error(resp.error());
			return false;
		}
		for (const auto &t : resp.list_tenants().tenants())
			*out->add_tenants() = t;
		after = resp.list_tenants().next_start_after();
	} while (after != 0);
	return true;
}

bool CtlClient::receive(api::Response *resp, int timeout_ms, std::string *error)
{
	error->clear();
	for (;;) {
		std::string payload, why;
		auto st = decoder_.next(&payload, &why);
		if (st == wire::FrameDecoder::Status::Error) {
			*error = "malformed frame from neurond: " + why;
			return false;
		}
		if (st == wire::FrameDecoder::Status::Frame) {
			if (!resp->ParseFromString(payload)) {
				*error = "unparsable message from neurond";
				return false;
			}
			return true;
		}
		struct pollfd p = {fd_, POLLIN, 0};
		const int r = poll(&p, 1, timeout_ms);
		if (r == 0)
			return false;
		if (r < 0 && errno == EINTR)
			continue;
		const long n = wire::receive_some(fd_, decoder_, false);
		if (n <= 0) {
			if (subscribed_ && !in_call_)
				return resubscribe(resp, error);
			*error = "neurond closed the connection";
			return false;
		}
	}
}

} // namespace neuron::tools
