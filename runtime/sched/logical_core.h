// A logical NeuronCore: what a tenant names as (device, core) when it creates a
// queue. It is a stream of work (the tenant's queues on that index, each in order),
// not a piece of silicon: the device's CoreScheduler lets any physical core its pool
// may use run it, one tile at a time, so capacity moves between tiles without the
// tenant noticing (its memory and rings stay where they are).
//
// Threads and locks:
//  - queues_mutex_ guards queues_ (control thread adds/removes; engines read).
//  - claim_: at most one engine works on a logical core at a time (CAS -1 -> core);
//    that engine alone touches the "claimed" state below (the in-flight command),
//    which is what keeps commands in order however often the core is rebound.
//  - the counters and weight_ are relaxed atomics (weight_: written by the control
//    thread, read by engines at every tile; a stale read costs one tile's accuracy).
#pragma once

#include "latency_histogram.h"
#include "tile_cursor.h"
#include "tiling.h"

#include <backend/queue.h>
#include <program/program.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace neuron::sched {

using backend::Queue;

// Capacity pools (DESIGN.md section 3). Inference work goes first at tile boundaries.
enum class Pool : uint8_t { Inference = 0, Training = 1 };
inline constexpr int kPoolCount = 2;
const char *pool_name(Pool p);

// What a TileRunner (tile_runner.h) keeps for the command it runs across its
// tiles: packed operand blocks and chain partials in host memory (emu), chain
// state in device memory (kmd). Made by TileRunner::begin, dropped at the end of
// the command; tiles running side by side share it (it is thread-safe).
class RunnerState {
public:
	virtual ~RunnerState() = default;
};

// The command a logical core is running: it outlives any one engine's turn, so a
// command preempted on one physical core resumes on another where it stopped.
// For an EXEC_PROGRAM, `cmd` is the node running now (materialised from the
// program) and everything else describes that node; the queue's timeline
// advances by `slots` when the last node completes.
struct InFlight {
	std::shared_ptr<Queue> queue;
	neuron_cmd cmd;
	TilePlan plan;
	TileCursor tiles; // which tiles are left, when plan.tiles > 1
	std::unique_ptr<RunnerState> state;
	uint64_t seq = 0;
	uint64_t last_tile_ns = 0;
	// An EXEC_PROGRAM in flight: the program (kept alive by this replay), what the
	// replay binds, and the position of `cmd` in its nodes; null otherwise.
	std::shared_ptr<const program::Program> program;
	program::Exec exec;
	size_t node = 0;
	uint32_t slots = 1;    // ring slots the command took
	uint64_t user_tag = 0; // the ring command's
	// NEURON_CMD_F_STAMP (gate::Admission): where its times go, and when it started.
	bool stamped = false;
	uint64_t stamp_addr = 0;
	uint64_t started_ns = 0;
};

class LogicalCore {
public:
	LogicalCore(uint64_t tenant, uint32_t device, uint32_t index, Pool pool, uint32_t weight)
		: tenant_(tenant), device_(device), index_(index), pool_(pool), weight_(weight ? weight : 1)
	{
	}

	uint64_t tenant() const { return tenant_; }
	uint32_t device() const { return device_; }
	uint32_t index() const { return index_; }
	Pool pool() const { return pool_; }
	uint32_t weight() const { return weight_.load(std::memory_order_relaxed); }
	// Any thread (the control thread on SetWeight); engines read it per tile.
	void set_weight(uint32_t w) { weight_.store(w ? w : 1, std::memory_order_relaxed); }

	// Control thread.
	void add_queue(std::shared_ptr<Queue> q);
	void remove_queue(const Queue *q);
	size_t queue_count() const;

	// Any thread: true if some queue has a command that can start (not blocked on
	// another queue, Queue::blocking_peer), or a command is half done. Cheap: reads
	// the rings' tails. Also stamps when pending work was first noticed, the start
	// of its latency.
	bool runnable();
	// Commands published but not completed, summed over the queues (policy input).
	uint64_t depth() const;

	bool try_claim(int core)
	{
		int expected = -1;
		return claim_.compare_exchange_strong(expected, core, std::memory_order_acquire);
	}
	void release() { claim_.store(-1, std::memory_order_release); }
	int claimed_by() const { return claim_.load(std::memory_order_relaxed); }

	// Fair share: weighted virtual time, in ns of tile time * 1024 / weight.
	std::atomic<uint64_t> vtime{0};

	// Telemetry.
	std::atomic<uint64_t> commands{0};
	std::atomic<uint64_t> tiles{0};
	std::atomic<uint64_t> busy_ns{0};
	LatencyHistogram latency;

	// ---- claimed state: only the engine holding the claim touches these ----
	InFlight inflight;
	std::atomic<bool> active{false}; // inflight holds a command (read by runnable())
	size_t rr = 0;                   // round-robin position over queues_
	// Snapshot of the queues taken under the lock by the claiming engine.
	std::vector<std::shared_ptr<Queue>> queues_snapshot();

	std::atomic<uint64_t> pending_since_ns{0}; // 0: nothing pending noticed yet

private:
	uint64_t tenant_;
	uint32_t device_;
	uint32_t index_;
	Pool pool_;
	std::atomic<uint32_t> weight_;
	std::atomic<int> claim_{-1};
	mutable std::mutex queues_mutex_;
	std::vector<std::shared_ptr<Queue>> queues_;
};

} // namespace neuron::sched
