// One client connection on the control thread: framing, the hello handshake, and
// dispatch of requests to its Tenant. A protocol violation closes this connection
// only; other sessions never notice.
#pragma once

#include "tenant.h"

#include <wire.h>

#include <utility> // before Asio: Boost 1.74 awaitable.hpp uses std::exchange without it
#include <boost/asio.hpp>

#include <deque>
#include <memory>

namespace neuron::daemon {

class Server;

class Session : public std::enable_shared_from_this<Session> {
public:
	Session(boost::asio::local::stream_protocol::socket socket, Server &server, uint64_t id);
	~Session();

	void start();
	// Ends the session: the tenant's queues and memory go back at once.
	void close(const std::string &reason);
	const Tenant &tenant() const { return *tenant_; }
	void roll_latency_window() { tenant_->roll_latency_window(); }

private:
	void read_more();
	bool process_frames();
	// Returns false to close the connection after replying.
	bool dispatch(const api::Request &req, api::Response *resp, int *reply_fd);
	void reply(const api::Response &resp, int fd);
	void fail(api::Response *resp, api::ErrorCode code, const std::string &message);
	// The capacity requests (session_capacity.cpp); same contract as dispatch.
	bool dispatch_capacity(const api::Request &req, api::Response *resp);
	bool require_admin(const std::string &what, api::Response *resp);
	void push_event(const api::Event &ev);

	boost::asio::local::stream_protocol::socket socket_;
	Server &server_;
	std::unique_ptr<Tenant> tenant_;
	wire::FrameDecoder decoder_;
	std::deque<int> fds_;
	bool closed_ = false;
	bool subscribed_ = false;
};

} // namespace neuron::daemon
