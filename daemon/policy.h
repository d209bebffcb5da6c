// Capacity policies (DESIGN.md section 3): manual (only admin calls move cores),
// scheduled (inference cores lent to training inside time windows, e.g. 00:00-06:00)
// and automatic (reclaim when inference queue depth or p99 latency rises past a
// threshold, lend when it has stayed low for hold_ms: hysteresis both in the
// thresholds and in time). Configured from neurond's flags/config file and at run
// time with SetPolicy.
//
// Threads: control thread only (a steady timer ticks every 100 ms).
#pragma once

#include "capacity.h"

#include <neuron.pb.h>

#include <utility> // before Asio: Boost 1.74 awaitable.hpp uses std::exchange without it
#include <boost/asio.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace neuron::daemon {

// Parses "HH:MM-HH:MM[/cores],..." into windows; "" or the error.
std::string parse_schedule(const std::string &text, api::PolicyConfig *out);
// Checks a policy for SetPolicy; "" or what is wrong.
std::string validate_policy(const api::PolicyConfig &p);
api::PolicyConfig policy_from_config(const Config &c);

class Policy {
public:
	Policy(boost::asio::io_context &io, backend::DeviceBackend &devices, Leases &leases, Capacity &capacity,
	       EventBus &events, api::PolicyConfig config);

	const api::PolicyConfig &config() const { return config_; }
	std::string set(const api::PolicyConfig &p);
	void stop();

private:
	struct Window {
		std::weak_ptr<sched::LogicalCore> core;
		sched::LatencyHistogram::Counts base{}, prev{};
	};
	void arm();
	void tick();
	void run_scheduled(uint32_t device);
	void run_auto(uint32_t device);
	uint64_t inference_p99(uint32_t device);

	boost::asio::steady_timer timer_;
	backend::DeviceBackend &devices_;
	Leases &leases_;
	Capacity &capacity_;
	EventBus &events_;
	api::PolicyConfig config_;
	std::vector<uint64_t> low_since_;   // per device: when inference load went low (0: not low)
	std::map<const sched::LogicalCore *, Window> windows_;
	uint64_t last_roll_ns_ = 0;
	bool stopped_ = false;
};

} // namespace neuron::daemon
