// The kmd backend's ring pump: one thread per tenant queue that reads the queue's
// shared ring (the same protocol libneuron speaks to the emu engines, cmd.h),
// validates every command against the tenant's own memory as the emu engines do,
// and turns commands into driver jobs:
//  - core queue: up to max_cmds_per_job commands per compute job (fewer when
//    their work adds up past kJobWorkBudget, so a job stays far below the kernel's
//    job timeout), run by the KmdEngine neurond attached to the device;
//  - DMA queue: one DMA job per COPY (its contiguous runs as the job's copies,
//    kmd_dma_run.h), run by the kernel.
// A command's wait on another queue of the tenant on the same device, whose
// awaited command is in a job in flight, becomes that job's syncobj point: an
// in-fence of the compute job (a DMA command waits for it host-side); otherwise
// the command is held back until that queue's `completed` reaches the value. Jobs complete
// in order per kernel queue; the pump publishes `completed` in ring order. A
// failed job puts the queue into the ring's sticky fault state with the engine's
// reason (or the kernel's, e.g. a timeout), and the pump takes no more commands
// from it, as an emu queue stops at its first fault.
//
// Threads: the pump thread owns everything except inflight_ (guarded by mutex_,
// also read by the pumps of the tenant's other queues through fence_for) and
// stop_ (atomic).
#pragma once

#include "kmd_chip.h"
#include "kmd_memory.h"

#include <fault.h>
#include <queue.h>
#include <tiling.h>
#include <weak_directory.h>

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace neuron::daemon {

class KmdPump;

// A tenant's pumps by queue id, for cross-queue waits (weak_directory.h: the
// directory does not own them, the KmdTenant does; own mutex). The control
// thread adds and removes, pump threads find when a command carries a wait.
using KmdPumpDirectory = chip::WeakDirectory<KmdPump>;

using KmdFaultHook = std::function<void(const chip::Queue &, uint32_t code, uint64_t seq, const std::string &reason)>;

class KmdPump {
public:
	// Element operations one compute job may add up to (one command may exceed it
	// alone; larger ones are cut into tiles of about this much). 2^22 is a few ms
	// on a host core and tens of ms under QEMU's TCG: far below the driver's job
	// timeout, and what a stop or a killed tenant's running job costs at most.
	static constexpr uint64_t kJobWorkBudget = 1ull << 22;
	// Jobs a queue may have in the kernel at once. Few: the kernel runs a job it
	// queued even after its tenant is gone, and runs jobs of one core in FIFO
	// order, so this bounds both how long a killed tenant's memory stays in use
	// and how long another tenant on the same core waits behind it.
	static constexpr size_t kMaxJobsInFlight = 2;

	KmdPump(std::shared_ptr<chip::Queue> queue, std::shared_ptr<KmdMemory> memory, KmdChip &chip,
		std::shared_ptr<KmdPumpDirectory> peers, KmdFaultHook on_fault);
	~KmdPump(); // stop()
	KmdPump(const KmdPump &) = delete;
	KmdPump &operator=(const KmdPump &) = delete;

	// Joins the thread. Jobs already submitted still run in the kernel (it holds
	// their BOs); their completions are no longer published.
	void stop();
	uint32_t device() const { return queue_->device(); }

	// For a command of another queue waiting until this queue completed `value`
	// commands: Done (no fence needed), InFlight (*fence is the job that completes
	// command `value`) or NotYet (not submitted yet: try again later).
	enum class Await { Done, InFlight, NotYet };
	Await fence_for(uint64_t value, kmd::Fence *fence) const;

private:
	struct StageOut {
		uint32_t handle; // host buffer of the tenant
		uint64_t offset, size;
	};
	// One entry per driver job, or per ring command that needs none (NOP) or
	// that faulted before it became a job. Entries complete in order.
	struct Job {
		std::vector<uint64_t> seqs;    // ring seq of each command (tile) of the job
		std::vector<uint64_t> tags;    // and its user_tag
		uint64_t first_seq = 0;        // first ring command this job completes ...
		uint32_t commands = 0;         // ... and how many (0: a middle part of a split command)
		kmd::Fence fence;              // invalid: nothing to wait for
		int kernel_queue = -1;         // core (compute) or -1 (DMA)
		std::vector<StageOut> stage_out;
		// A fault found before submission: raised when the entry reaches the front.
		std::optional<kernels::Fault> fault;
	};
	// A core command being cut into tiles (chip/tiling.h) across jobs.
	struct Tiling {
		neuron_cmd cmd;
		uint64_t seq = 0;
		chip::TilePlan plan;
		uint64_t next = 0;
	};

	void run();
	bool feed();
	bool reap();
	void sleep_for_work();
	// Queues the job(s) of one DMA command (a COPY's runs from kmd_dma_run.h), or
	// returns its fault. Called with the memory lock held shared.
	std::optional<kernels::Fault> submit_dma(const neuron_cmd &cmd, uint64_t seq);
	std::optional<kernels::Fault> resolve_core(const neuron_cmd &cmd, std::vector<kmd::JobBo> *bos);
	void push(Job j);
	size_t jobs_in_flight() const;
	void raise(uint32_t code, uint64_t seq, uint64_t tag, const std::string &reason);
	kmd::KmdContext &context() const { return *memory_->contexts.at(queue_->device()); }

	std::shared_ptr<chip::Queue> queue_;
	std::shared_ptr<KmdMemory> memory_;
	KmdChip &chip_;
	std::shared_ptr<KmdPumpDirectory> peers_;
	KmdFaultHook on_fault_;
	uint64_t client_id_ = 0;

	// pump thread
	uint64_t submitted_ = 0; // last ring seq handed to a job (or to a fault entry)
	bool halted_ = false;    // faulted: takes nothing more
	bool held_ = false;      // the next command waits for another queue to get further
	std::optional<Tiling> tiling_; // a command whose tiles are not all submitted yet
	std::atomic<bool> stop_{false};

	mutable std::mutex mutex_; // guards inflight_
	std::deque<Job> inflight_;
	std::thread thread_;
};

} // namespace neuron::daemon
