#include "event_counters.h"

#include <ctl_client.h>

#include <chrono>

namespace neuron::monitor {

namespace {

// Reclaims are meant to finish within milliseconds (DESIGN.md section 3).
const std::vector<double> kReclaimBounds = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
					    0.025,  0.05,    0.1,    0.25,  0.5,    1.0};

} // namespace

EventCounters::EventCounters(std::string socket) : socket_(std::move(socket))
{
	counts_.bounds = kReclaimBounds;
	counts_.bucket_counts.assign(kReclaimBounds.size() + 1, 0);
	thread_ = std::thread([this] { run(); });
}

EventCounters::~EventCounters()
{
	stop_ = true;
	thread_.join();
}

EventSnapshot EventCounters::snapshot() const
{
	std::lock_guard lock(mu_);
	return counts_;
}

void EventCounters::count(const std::string &type, uint32_t device, int32_t core, uint64_t latency_ns,
			  const std::string &message)
{
	std::lock_guard lock(mu_);
	if (type == "queue.fault")
		++counts_.faults[{device, core}];
	else if (type == "core.reset")
		++counts_.resets[{device, core}];
	else if (type == "lease.lent")
		++counts_.loans;
	else if (type == "lease.reclaimed") {
		++counts_.reclaims;
		const double s = static_cast<double>(latency_ns) / 1e9;
		counts_.reclaim_seconds_sum += s;
		size_t i = 0;
		while (i < counts_.bounds.size() && s > counts_.bounds[i])
			++i;
		++counts_.bucket_counts[i];
		if (message.find("after the deadline") != std::string::npos)
			++counts_.late_reclaims;
	}
}

void EventCounters::run()
{
	while (!stop_) {
		tools::CtlClient client;
		client.stop_when([this] { return stop_.load(); });
		std::string error;
		api::Request req;
		api::Response resp;
		req.mutable_subscribe_events()->set_replay(false);
		if (client.connect(socket_, "neuron-monitor events", &error) && client.call(req, &resp, &error) &&
		    !resp.has_error()) {
			{
				std::lock_guard lock(mu_);
				counts_.connected = true;
			}
			// Short receive timeouts so that the destructor's stop is seen.
			while (!stop_) {
				api::Response ev;
				if (!client.receive(&ev, 200, &error)) {
					if (!error.empty())
						break; // lost neurond: reconnect
					continue;
				}
				if (ev.has_event() && ev.event().type() == "events.lost") {
					std::lock_guard lock(mu_);
					counts_.events_lost += ev.event().lost();
				} else if (ev.has_event())
					count(ev.event().type(), ev.event().device(), ev.event().core(), ev.event().latency_ns(),
					      ev.event().message());
			}
		}
		{
			std::lock_guard lock(mu_);
			counts_.connected = false;
		}
		for (int i = 0; i < 10 && !stop_; ++i)
			std::this_thread::sleep_for(std::chrono::milliseconds(100));
	}
}

} // namespace neuron::monitor
