#include "session.h"

#include "admin.h"
#include "log.h"
#include "server.h"
#include "text.h"

#include <cstring>
#include <fstream>
#include <sys/socket.h>
#include <unistd.h>

namespace neuron::daemon {

namespace {

Peer peer_of(int fd)
{
	Peer p;
	struct ucred cred = {};
	socklen_t len = sizeof(cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
		p.pid = cred.pid;
		p.uid = cred.uid;
		p.gid = cred.gid;
	}
	std::ifstream cmdline("/proc/" + std::to_string(p.pid) + "/cmdline", std::ios::binary);
	std::string raw((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
	for (char &ch : raw)
		if (ch == '\0')
			ch = ' ';
	while (!raw.empty() && raw.back() == ' ')
		raw.pop_back();
	// Shown by neuron-ls and logged: escaped, so argv cannot forge lines or bytes.
	p.command = escape_text(raw, 255);
	return p;
}

} // namespace

Session::Session(boost::asio::local::stream_protocol::socket socket, Server &server, uint64_t id)
	: socket_(std::move(socket)), server_(server),
	  tenant_(std::make_unique<Tenant>(id, peer_of(socket_.native_handle()), server.devices())),
	  drain_timer_(socket_.get_executor())
{
	socket_.non_blocking(true);
	tenant_->admin = peer_is_admin(tenant_->peer(), server.config().admin_group);
	tenant_->keep_in(server.fd_store(), server.journal());
}

Session::~Session() = default;

void Session::start()
{
	NLOG_INFO("tenant.connect", tenant_->log_fields() + " uid=" + std::to_string(tenant_->peer().uid) +
					    " command=" + quoted_escaped(tenant_->peer().command));
	pump();
}

void Session::close(const std::string &reason)
{
	if (closed_)
		return;
	closed_ = true;
	if (subscribed_)
		server_.events().unsubscribe(tenant_->id());
	boost::system::error_code ignored;
	socket_.close(ignored);
	// Its collective groups break first (a collective still moving its data keeps
	// its memory locked until done; release_all waits for that).
	server_.collectives().session_gone(tenant_->id());
	tenant_->release_all();
	if (tenant_->greeted && !tenant_->observer)
		server_.save_state();
	NLOG_INFO("tenant.disconnect", tenant_->log_fields() + " reason=" + quoted(reason));
	if (tenant_->greeted && !tenant_->observer) {
		api::Event ev = EventBus::make("tenant.exit", 0, -1,
					       "pid " + std::to_string(tenant_->peer().pid) + " (" + reason + ")");
		ev.set_tenant_id(tenant_->id());
		server_.events().publish(ev);
		// Its cores are free at once; loans to a pool left without work go home.
		if (tenant_->used_cores)
			server_.tenant_gone();
	}
	server_.forget(tenant_->id()); // may destroy *this: nothing after this line
}

void Session::read_more()
{
	if (reading_ || closed_ || draining_)
		return;
	reading_ = true;
	auto self = shared_from_this();
	socket_.async_wait(boost::asio::socket_base::wait_read, [self](const boost::system::error_code &ec) {
		self->reading_ = false;
		if (self->closed_ || self->draining_)
			return;
		if (ec) {
			self->close("socket error: " + ec.message());
			return;
		}
		self->pump();
	});
}

void Session::pump_later()
{
	if (pump_posted_ || closed_)
		return;
	pump_posted_ = true;
	boost::asio::post(socket_.get_executor(), [self = shared_from_this()] {
		self->pump_posted_ = false;
		self->pump();
	});
}

void Session::pump()
{
	if (in_pump_)
		return;
	in_pump_ = true;
	auto self = shared_from_this(); // close() may drop the server's reference
	// While replies pile up unread, requests wait in the socket: the client stalls,
	// the daemon's memory does not grow.
	int reads_left = kReadsPerTurn;
	while (!closed_ && !draining_ && outbox_.reply_bytes() < Outbox::kReadPauseBytes) {
		std::string payload, error;
		std::vector<int> fds;
		const auto status = decoder_.next(&payload, &error, &fds);
		if (status == wire::FrameDecoder::Status::NeedMore) {
			// Read until the socket is empty (the reactor reports only new data), one
			// frame at a time: descriptors then arrive with the read of the frame
			// whose first byte carried them, never a later one (wire.h).
			if (reads_left-- == 0) {
				pump_later(); // the other connections' turn
				break;
			}
			const long n = wire::receive_some(socket_.native_handle(), decoder_, true, true);
			if (n == -EAGAIN || n == -EWOULDBLOCK) {
				read_more();
				break;
			}
			if (n == 0) {
				close("peer closed the connection");
				break;
			}
			if (n < 0) {
				close("receive failed: " + std::string(std::strerror(static_cast<int>(-n))));
				break;
			}
			continue;
		}
		if (status == wire::FrameDecoder::Status::Error) {
			// No request was parsed, so there is no request_id to echo: 0.
			api::Response resp;
			fail(&resp, api::ERROR_PROTOCOL, "malformed frame: " + error);
			reply(resp, -1);
			close_after_flush("protocol error: " + error);
			break;
		}
		if (!handle_frame(payload, std::move(fds)))
			break;
	}
	paused_ = !closed_ && !draining_ && outbox_.reply_bytes() >= Outbox::kReadPauseBytes;
	in_pump_ = false;
}

bool Session::handle_frame(const std::string &payload, std::vector<int> fds)
{
	api::Request req;
	api::Response resp;
	if (!req.ParseFromString(payload)) {
		for (int fd : fds)
			::close(fd);
		fail(&resp, api::ERROR_PROTOCOL, "frame does not hold a valid Request message");
		reply(resp, -1);
		close_after_flush("protocol error: unparsable request");
		return false;
	}
	resp.set_request_id(req.request_id());
	int reply_fd = -1;
	const bool keep = dispatch(req, fds, &resp, &reply_fd);
	for (int fd : fds) // descriptors the request did not take
		::close(fd);
	if (keep && changes_state(req))
		journal_request(req, resp);
	if (resp.body_case() == api::Response::BODY_NOT_SET && keep)
		return !closed_; // deferred: a collective answers later (deferred_reply)
	reply(resp, reply_fd);
	if (!keep) {
		close_after_flush(resp.has_error() ? resp.error().message() : "closed");
		return false;
	}
	return !closed_;
}

bool Session::changes_state(const api::Request &req)
{
	switch (req.body_case()) {
	case api::Request::kAllocDevice:
	case api::Request::kFreeDevice:
	case api::Request::kRegisterHostBuffer:
	case api::Request::kUnregisterHostBuffer:
	case api::Request::kCreateQueue:
	case api::Request::kDestroyQueue:
	case api::Request::kRegisterProgram:
	case api::Request::kDeregisterProgram:
	case api::Request::kSetWeight:
		return true;
	default:
		return false;
	}
}

// Restart survival: the journal knows the change before the reply announces it,
// and the reply itself, for a request retried after a restart (server_restart.cpp).
void Session::journal_request(const api::Request &req, const api::Response &resp)
{
	if (!server_.journal() || tenant_->observer)
		return;
	tenant_->last_request_id = req.request_id();
	resp.SerializeToString(&tenant_->last_response);
	server_.save_state();
}

std::function<void(api::Response &)> Session::deferred_reply(uint64_t request_id)
{
	// Posted: the answer may come from inside another session's close() or the
	// registry's loops, which must not re-enter this session's pump.
	return [weak = weak_from_this(), request_id](api::Response &resp) {
		auto self = weak.lock();
		if (!self || self->closed_)
			return;
		resp.set_request_id(request_id);
		boost::asio::post(self->socket_.get_executor(), [self, resp]() mutable { self->reply(resp, -1); });
	};
}

void Session::fail(api::Response *resp, api::ErrorCode code, const std::string &message)
{
	resp->mutable_error()->set_code(code);
	resp->mutable_error()->set_message(message);
	if (code != api::ERROR_NONE)
		NLOG_DEBUG("request.error", tenant_->log_fields() + " code=" + api::ErrorCode_Name(code) +
						    " message=" + quoted(message));
}

void Session::reply(api::Response &resp, int fd)
{
	if (closed_)
		return;
	std::string frame = wire::encode_frame(resp);
	if (frame.size() - 4 > wire::kMaxFrame) {
		// Never cut a frame off: say what happened instead (requests that can grow
		// past a frame are paged or refused when set, so this is a last resort).
		const size_t bytes = frame.size() - 4;
		api::Response r;
		r.set_request_id(resp.request_id());
		fail(&r, api::ERROR_RESOURCE_EXHAUSTED,
		     "the reply would be " + std::to_string(bytes) + " bytes, more than one frame (" +
			     std::to_string(wire::kMaxFrame) + " bytes) holds");
		frame = wire::encode_frame(r);
		fd = -1;
	}
	outbox_.push_reply(std::move(frame), fd);
	flush();
}

void Session::push_event(const api::Event &ev)
{
	if (closed_ || draining_)
		return;
	if (!ev.client_name().empty() && ev.tenant_id() && !may_see_id(ev.tenant_id())) {
		api::Event redacted = ev;
		redacted.clear_client_name();
		outbox_.push_event(redacted);
	} else {
		outbox_.push_event(ev);
	}
	flush();
}

void Session::flush()
{
	if (writing_ || closed_)
		return;
	int err = 0;
	switch (outbox_.flush(socket_.native_handle(), &err)) {
	case Outbox::Flush::Done:
		if (draining_)
			close(drain_reason_);
		else
			pump(); // requests may have waited for room
		return;
	case Outbox::Flush::WouldBlock: {
		// Replies went out but events still wait (a subscriber): serve requests again.
		if (paused_ && outbox_.reply_bytes() < Outbox::kReadPauseBytes)
			pump_later();
		writing_ = true;
		auto self = shared_from_this();
		socket_.async_wait(boost::asio::socket_base::wait_write, [self](const boost::system::error_code &ec) {
			self->writing_ = false;
			if (self->closed_)
				return;
			if (ec) {
				self->close("socket error: " + ec.message());
				return;
			}
			self->flush();
		});
		return;
	}
	case Outbox::Flush::Error:
		close("cannot send: " + std::string(std::strerror(err)));
		return;
	}
}

void Session::close_after_flush(const std::string &reason)
{
	if (closed_ || draining_)
		return;
	draining_ = true;
	drain_reason_ = reason;
	// A client that never reads the error must not hold the session: at most 2 s.
	auto self = shared_from_this();
	drain_timer_.expires_after(std::chrono::seconds(2));
	drain_timer_.async_wait([self](const boost::system::error_code &ec) {
		if (!ec)
			self->close(self->drain_reason_);
	});
	flush();
}

bool Session::may_see(const Tenant &other) const
{
	return tenant_->admin || other.peer().uid == tenant_->peer().uid;
}

bool Session::may_see_id(uint64_t tenant_id) const
{
	if (tenant_->admin)
		return true;
	auto it = server_.sessions().find(tenant_id);
	return it != server_.sessions().end() && may_see(it->second->tenant());
}

} // namespace neuron::daemon
