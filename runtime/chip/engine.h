// An engine: one host thread that plays one NeuronCore (or a device's DMA engine),
// taking commands from the queues bound to it, in order per queue.
//
// Threads and locks: queues_mutex_ guards the bound-queue list (control thread adds
// and removes); the engine thread works from a snapshot it refreshes when
// generation_ changes. It spins briefly after work (a sleeping engine costs every
// command a futex wake-up, ~30 us on these machines) and then sleeps on all its
// queues' doorbells at once with futex_waitv.
#pragma once

#include "queue.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace neuron::chip {

class Device;
struct CoreCounters;

struct EngineOptions {
	int threads = 1;            // host threads one command may use
	uint64_t spin_ns = 50000;   // how long to poll after the last command before sleeping
	// Called on the engine thread when a queue faults (the daemon logs it).
	std::function<void(const Queue &, uint32_t code, uint64_t seq, const std::string &reason)> on_fault;
};

class Engine {
public:
	// core < 0: the device's DMA engine.
	Engine(Device &device, int core, EngineOptions options);
	~Engine();
	Engine(const Engine &) = delete;
	Engine &operator=(const Engine &) = delete;

	void add_queue(std::shared_ptr<Queue> q);
	// After this returns the engine no longer starts commands from q (one that is
	// running may finish: callers wait for it through the tenant's memory lock).
	void remove_queue(const Queue *q);
	void stop();

	std::string name() const;

private:
	void run();
	bool refresh_snapshot();
	// Runs at most one command of q; true if it made progress.
	bool service(Queue &q);
	void fault(Queue &q, uint32_t code, uint64_t seq, uint64_t user_tag, const std::string &reason);
	void sleep_until_doorbell();
	void wake();

	Device &device_;
	int core_;
	EngineOptions options_;
	CoreCounters &counters_;
	std::mutex queues_mutex_;
	std::vector<std::shared_ptr<Queue>> queues_;
	std::atomic<uint64_t> generation_{0};
	uint32_t wake_word_ = 0;            // futex: bumped on add/remove/stop
	std::atomic<bool> stop_{false};
	std::vector<std::shared_ptr<Queue>> snapshot_; // engine thread only
	uint64_t snapshot_generation_ = ~0ull;
	std::thread thread_;
};

} // namespace neuron::chip
