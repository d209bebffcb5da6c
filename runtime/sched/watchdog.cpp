#include "watchdog.h"

#include "engine.h"

#include <neuron/futex.h>

#include <algorithm>
#include <chrono>

#include <pthread.h>

namespace neuron::sched {

Watchdog::Watchdog(std::vector<Engine *> engines, uint64_t timeout_ns)
	: engines_(std::move(engines)), timeout_ns_(timeout_ns)
{
	thread_ = std::thread([this] { run(); });
}

Watchdog::~Watchdog()
{
	{
		std::lock_guard lock(mutex_);
		stop_ = true;
	}
	wake_.notify_all();
	thread_.join();
}

void Watchdog::run()
{
	pthread_setname_np(pthread_self(), "watchdog");
	// A stall is seen within a quarter of the timeout after it passed.
	const auto period = std::chrono::nanoseconds(std::clamp<uint64_t>(timeout_ns_ / 4, 1'000'000, 1'000'000'000));
	std::unique_lock lock(mutex_);
	while (!wake_.wait_for(lock, period, [this] { return stop_; }))
		check(detail::monotonic_ns());
}

void Watchdog::check(uint64_t now)
{
	for (Engine *e : engines_) {
		uint64_t group = 0;
		const uint64_t stalled = e->stalled_ns(now, &group);
		if (stalled < timeout_ns_)
			continue;
		e->request_reset(group,
				 "core " + e->name() + " was reset by the watchdog: no progress for " +
					 std::to_string(stalled / 1000000) + " ms (--core-watchdog-ms " +
					 std::to_string(timeout_ns_ / 1000000) + ")");
	}
}

} // namespace neuron::sched
