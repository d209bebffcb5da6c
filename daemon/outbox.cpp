#include "outbox.h"

#include <wire.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

namespace neuron::daemon {

Outbox::~Outbox()
{
	for (const Frame &f : frames_)
		if (f.fd >= 0)
			::close(f.fd);
}

void Outbox::push_reply(std::string frame, int fd)
{
	Frame f;
	f.bytes = std::move(frame);
	f.fd = fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 3) : -1;
	f.reply = true;
	reply_bytes_ += f.bytes.size();
	frames_.push_back(std::move(f));
}

void Outbox::push_event(const api::Event &ev)
{
	if (events_.size() >= kMaxEvents) {
		events_.pop_front();
		++lost_;
		++lost_total_;
	}
	events_.push_back(ev);
}

api::Event Outbox::lost_marker(uint64_t lost)
{
	api::Event ev;
	ev.set_type("events.lost");
	ev.set_core(-1);
	ev.set_lost(lost);
	ev.set_message(std::to_string(lost) + " event" + (lost == 1 ? "" : "s") +
		       " lost: this subscriber read more slowly than events arrived (its queue holds " +
		       std::to_string(kMaxEvents) + "); resubscribe with replay for the recent backlog");
	return ev;
}

bool Outbox::stage_event()
{
	if (lost_ == 0 && events_.empty())
		return false;
	api::Response r;
	if (lost_) {
		// Before the events that survived: they are newer than the lost ones.
		*r.mutable_event() = lost_marker(lost_);
		lost_ = 0;
	} else {
		*r.mutable_event() = std::move(events_.front());
		events_.pop_front();
	}
	frames_.push_back(Frame{wire::encode_frame(r), -1, false});
	return true;
}

Outbox::Flush Outbox::flush(int sock, int *err)
{
	for (;;) {
		if (frames_.empty() && !stage_event())
			return Flush::Done;
		Frame &f = frames_.front();
		const ssize_t n = wire::send_part(sock, f.bytes.data() + sent_, f.bytes.size() - sent_,
						  sent_ == 0 ? f.fd : -1, true);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return Flush::WouldBlock;
			*err = errno;
			return Flush::Error;
		}
		if (n > 0 && f.fd >= 0) { // the descriptor went with the first byte
			::close(f.fd);
			f.fd = -1;
		}
		sent_ += static_cast<size_t>(n);
		if (sent_ == f.bytes.size()) {
			if (f.reply)
				reply_bytes_ -= f.bytes.size();
			frames_.pop_front();
			sent_ = 0;
		}
	}
}

} // namespace neuron::daemon
