// The core watchdog: a thread that resets any engine whose running tile group has
// made no progress (no tile ended) for `timeout_ns` (neurond --core-watchdog-ms).
// A reset faults only the command that was on the core, with NEURON_FAULT_RESET and
// a reason naming the core and the time; the core then serves the other tenants
// again (engine.h, request_reset). On emu a tile is host code that cannot be
// interrupted, so a reset takes effect when the running tile returns; an injected
// stall (fault_injection.h) returns at once. The kmd backend has none: the driver's
// job timeout is the device's watchdog.
//
// Threads: its own; it reads the engines' counters and calls request_reset, both
// thread-safe. The engines outlive it (the backend stops it first).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace neuron::sched {

class Engine;

class Watchdog {
public:
	Watchdog(std::vector<Engine *> engines, uint64_t timeout_ns);
	~Watchdog();
	Watchdog(const Watchdog &) = delete;
	Watchdog &operator=(const Watchdog &) = delete;

private:
	void run();
	void check(uint64_t now_ns);

	std::vector<Engine *> engines_;
	uint64_t timeout_ns_;
	std::mutex mutex_; // guards stop_
	std::condition_variable wake_;
	bool stop_ = false;
	std::thread thread_;
};

} // namespace neuron::sched
