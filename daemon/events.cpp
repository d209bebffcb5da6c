#include "events.h"

#include "log.h"
#include "text.h"

#include <chrono>

namespace neuron::daemon {

api::Event EventBus::make(const std::string &type, uint32_t device, int32_t core, const std::string &message)
{
	api::Event ev;
	ev.set_type(type);
	ev.set_device(device);
	ev.set_core(core);
	ev.set_message(message);
	return ev;
}

void EventBus::publish(api::Event ev)
{
	ev.set_seq(next_seq_++);
	ev.set_unix_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
			       std::chrono::system_clock::now().time_since_epoch())
			       .count());
	NLOG_INFO("event", "type=" + ev.type() + " device=" + std::to_string(ev.device()) + " core=" +
				   std::to_string(ev.core()) + " tenant=" + std::to_string(ev.tenant_id()) +
				   (ev.loan_id() ? " loan=" + std::to_string(ev.loan_id()) : "") +
				   (ev.latency_ns() ? " latency_ns=" + std::to_string(ev.latency_ns()) : "") +
				   " message=" + quoted(ev.message()));
	recent_.push_back(ev);
	if (recent_.size() > kBacklog)
		recent_.pop_front();
	// A sink may unsubscribe (its session closes) while we iterate: use a copy.
	auto sinks = sinks_;
	for (auto &[id, sink] : sinks)
		sink(ev);
}

void EventBus::post(api::Event ev)
{
	boost::asio::post(io_, [this, ev = std::move(ev)]() mutable { publish(std::move(ev)); });
}

} // namespace neuron::daemon
