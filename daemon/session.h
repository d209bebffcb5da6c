// One client connection on the control thread: framing, the hello handshake, and
// dispatch of requests to its Tenant. A protocol violation closes this connection
// only; other sessions never notice.
//
// Sending never blocks and never drops a reply: frames wait in the connection's
// Outbox (outbox.h) until the socket takes them, and while too many reply bytes
// wait the session stops reading requests (flow control). An event subscriber has
// a bounded event queue with an explicit "events.lost" marker instead.
#pragma once

#include "outbox.h"
#include "tenant.h"

#include <wire.h>

#include <utility> // before Asio: Boost 1.74 awaitable.hpp uses std::exchange without it
#include <boost/asio.hpp>

#include <functional>
#include <memory>
#include <vector>

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
	// Sends a response later to request `request_id` (control thread; nothing if
	// the session closed meanwhile). dispatch() leaves the response's body unset
	// for a request answered this way.
	std::function<void(api::Response &)> deferred_reply(uint64_t request_id);
	// Once a second (the server's telemetry timer): latency windows roll, and the
	// buffers of deregistered programs whose last replay ended go back.
	void roll_latency_window()
	{
		tenant_->roll_latency_window();
		tenant_->reap_programs();
	}

private:
	// Reading: wait for the socket, read, then pump().
	void read_more();
	// Handles decoded frames while the outbox has room, reading (a frame at a time)
	// when they run out, until the socket is empty or kReadsPerTurn reads were made.
	void pump();
	// pump() again after the other connections had their turn.
	void pump_later();
	static constexpr int kReadsPerTurn = 64;
	// One frame: false once the connection is closed.
	bool handle_frame(const std::string &payload, std::vector<int> fds);
	// Returns false to close the connection after replying.
	bool dispatch(const api::Request &req, std::vector<int> &fds, api::Response *resp, int *reply_fd);
	void reply(api::Response &resp, int fd);
	void flush();
	// Sends what is queued (the error that ends the session), then closes; at most
	// 2 s for a client that does not read.
	void close_after_flush(const std::string &reason);
	void fail(api::Response *resp, api::ErrorCode code, const std::string &message);
	// The tenant-facing requests (session_requests.cpp); same contract as dispatch.
	bool hello(const api::Request &req, api::Response *resp, int *reply_fd);
	// A Hello with resume_tenant_id: takes over the adopted tenant (restart survival).
	bool resume(const api::Hello &h, api::Response *resp, int *reply_fd);
	static bool changes_state(const api::Request &req);
	void journal_request(const api::Request &req, const api::Response &resp);
	void list_devices(api::Response *resp);
	void list_tenants(const api::ListTenants &req, api::Response *resp);
	bool register_host(const api::Request &req, std::vector<int> &fds, api::Response *resp);
	bool register_program(const api::Request &req, std::vector<int> &fds, api::Response *resp);
	void create_queue(const api::CreateQueue &c, api::Response *resp, int *reply_fd);
	// True (after failing resp) if this tenant is an observer, which may only query.
	bool refuse_observer(const char *what, api::Response *resp);
	// The capacity requests (session_capacity.cpp); same contract as dispatch.
	bool dispatch_capacity(const api::Request &req, api::Response *resp);
	bool require_admin(const std::string &what, api::Response *resp);
	void push_event(const api::Event &ev);
	// Whether this session may see another tenant's names and command line.
	bool may_see(const Tenant &other) const;
	bool may_see_id(uint64_t tenant_id) const;

	boost::asio::local::stream_protocol::socket socket_;
	Server &server_;
	std::unique_ptr<Tenant> tenant_;
	wire::FrameDecoder decoder_;
	Outbox outbox_;
	bool reading_ = false;  // an async wait for input is pending
	bool writing_ = false;  // an async wait for output room is pending
	bool in_pump_ = false;  // pump() is on the stack (a reply must not re-enter it)
	bool pump_posted_ = false; // pump_later() is pending
	bool paused_ = false;      // pump() stopped reading: too many reply bytes waiting
	bool draining_ = false; // closing once the outbox is sent (close_after_flush)
	std::string drain_reason_;
	boost::asio::steady_timer drain_timer_;
	bool closed_ = false;
	bool subscribed_ = false;
};

} // namespace neuron::daemon
