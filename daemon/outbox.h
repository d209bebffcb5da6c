// What a connection still has to send: replies (with a descriptor each, at most)
// and, for an event subscriber, a bounded queue of events. Replies are never
// dropped: while they pile up the session stops reading requests from that client
// (flow control), so a client that does not read its replies only stalls itself.
// Events are: a subscriber that falls more than kMaxEvents behind loses the
// oldest, and the next event it gets is an "events.lost" marker saying how many
// (never a silent disconnect).
//
// Threads: owned by its Session on the control thread.
#pragma once

#include <neuron.pb.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>

namespace neuron::daemon {

class Outbox {
public:
	// Events queued per subscriber before the oldest are dropped.
	static constexpr size_t kMaxEvents = 4096;
	// Reply bytes queued before the session stops reading requests.
	static constexpr size_t kReadPauseBytes = 1u << 20;

	Outbox() = default;
	~Outbox();
	Outbox(const Outbox &) = delete;
	Outbox &operator=(const Outbox &) = delete;

	// A reply frame, with `fd` (dup'ed here: the original may close before the
	// frame goes out) attached to its first byte when fd >= 0.
	void push_reply(std::string frame, int fd);
	void push_event(const api::Event &ev);

	enum class Flush { Done, WouldBlock, Error };
	// Writes what the socket takes (non-blocking): replies first, then events.
	// Error: *err holds the errno.
	Flush flush(int sock, int *err);

	bool empty() const { return frames_.empty() && events_.empty() && lost_ == 0; }
	size_t reply_bytes() const { return reply_bytes_; }
	uint64_t events_lost() const { return lost_total_; }

	// The marker that replaces lost events (type "events.lost").
	static api::Event lost_marker(uint64_t lost);

private:
	struct Frame {
		std::string bytes;
		int fd = -1;
		bool reply = false;
	};
	// Moves the next event (or the lost marker) into frames_.
	bool stage_event();

	std::deque<Frame> frames_;
	size_t sent_ = 0; // bytes of frames_.front() already written
	size_t reply_bytes_ = 0;
	std::deque<api::Event> events_;
	uint64_t lost_ = 0;       // dropped since the last marker
	uint64_t lost_total_ = 0; // dropped since the subscription began
};

} // namespace neuron::daemon
