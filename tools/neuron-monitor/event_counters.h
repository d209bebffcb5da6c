// Counters of neurond's events (faults, core resets, loans, reclaims with their
// latencies) since neuron-monitor started: a thread holds an observer connection
// subscribed to the event stream and reconnects when neurond restarts. Owner: the
// thread writes, scrapes read; one mutex guards everything.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace neuron::monitor {

struct EventSnapshot {
	// (device, core) -> count; core -1 for queue faults not tied to a core (DMA).
	std::map<std::pair<uint32_t, int32_t>, uint64_t> faults, resets;
	uint64_t loans = 0, reclaims = 0, late_reclaims = 0;
	uint64_t events_lost = 0; // events neurond dropped for this subscriber (events.lost)
	// Reclaim latency histogram: cumulative counts per upper bound (seconds).
	std::vector<double> bounds;
	std::vector<uint64_t> bucket_counts; // non-cumulative, one per bound, last is +Inf
	double reclaim_seconds_sum = 0;
	bool connected = false;
};

class EventCounters {
public:
	explicit EventCounters(std::string socket);
	~EventCounters();
	EventSnapshot snapshot() const;

private:
	void run();
	void count(const std::string &type, uint32_t device, int32_t core, uint64_t latency_ns, const std::string &message);

	std::string socket_;
	mutable std::mutex mu_;
	EventSnapshot counts_;
	std::atomic<bool> stop_{false};
	std::thread thread_;
};

} // namespace neuron::monitor
