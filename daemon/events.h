// The event stream: lease changes, faults, resets, tenant arrivals and exits, policy
// changes. Each event gets a sequence number and a timestamp, is logged, kept in a
// bounded backlog (for replay) and pushed to every subscribed session.
//
// Threads: everything runs on the control (io_context) thread. Engine threads report
// through post(), which hops onto it.
#pragma once

#include <neuron.pb.h>

#include <utility> // before Asio: Boost 1.74 awaitable.hpp uses std::exchange without it
#include <boost/asio.hpp>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>

namespace neuron::daemon {

class EventBus {
public:
	explicit EventBus(boost::asio::io_context &io) : io_(io) {}

	// Control thread.
	void publish(api::Event ev);
	// Any thread: publishes on the control thread.
	void post(api::Event ev);

	using Sink = std::function<void(const api::Event &)>;
	void subscribe(uint64_t session, Sink sink) { sinks_[session] = std::move(sink); }
	void unsubscribe(uint64_t session) { sinks_.erase(session); }
	const std::deque<api::Event> &recent() const { return recent_; }

	static api::Event make(const std::string &type, uint32_t device = 0, int32_t core = -1,
			       const std::string &message = {});

private:
	static constexpr size_t kBacklog = 1000;
	boost::asio::io_context &io_;
	uint64_t next_seq_ = 1;
	std::deque<api::Event> recent_;
	std::map<uint64_t, Sink> sinks_;
};

} // namespace neuron::daemon
