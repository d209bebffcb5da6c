// One scrape: asks neurond for devices, capacity (cores, pools, loans) and tenants
// over an observer connection and renders them, with the event counters, in the
// Prometheus text format. The metrics are listed in the README ("Metrics").
#pragma once

#include "event_counters.h"

#include <chrono>
#include <map>
#include <string>

namespace neuron::monitor {

class Scraper {
public:
	Scraper(std::string socket, const EventCounters &events) : socket_(std::move(socket)), events_(events) {}
	// The exposition text; neuron_up is 0 (and little else is there) when neurond
	// cannot be reached. Not thread-safe: one scrape at a time.
	std::string scrape();

private:
	std::string socket_;
	const EventCounters &events_;
	// Busy time per (device, core) at the previous scrape, for utilisation gauges.
	std::map<std::pair<uint32_t, uint32_t>, uint64_t> last_busy_ns_;
	std::chrono::steady_clock::time_point last_scrape_{};
};

} // namespace neuron::monitor
