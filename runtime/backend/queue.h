// The daemon's side of one tenant queue: the shared ring (a sealed memfd the tenant
// maps), its authoritative completion count and sticky fault, the same on every
// backend.
//
// Ownership: created by the control thread (daemon), shared (shared_ptr) with the
// scheduler's logical core that runs it; at most one engine works on it at a time
// (the logical core's claim). The shared ring header is never trusted (ring.hpp).
#pragma once

#include "queue_keep.h"
#include "weak_directory.h"

#include <neuron/ring.hpp>

#include <atomic>
#include <functional>
#include <cstdint>
#include <memory>
#include <string>

namespace neuron::backend {

class TenantContext;
class Queue;

// A tenant's queues by id, for cross-queue waits (weak_directory.h: the
// directory does not own them; own mutex). The control thread adds and removes,
// engines find when a command carries a wait.
using QueueDirectory = WeakDirectory<Queue>;

enum class QueueKind { Core, Dma };

class Queue {
public:
	// Creates the ring in a new memfd. Throws std::system_error on failure.
	// core: the logical core index the tenant named (0 for DMA queues).
	Queue(uint64_t id, QueueKind kind, uint32_t device, uint32_t core, uint32_t slot_count,
	      std::shared_ptr<TenantContext> tenant, std::shared_ptr<QueueDirectory> peers);
	// Restart survival (queue_keep.h): the queue of an earlier neurond, continued.
	// ring_fd: its ring memfd (taken over); progress: its kept record; undo_fd: its
	// undo memfd or -1. Throws std::runtime_error if the ring is not one of ours.
	Queue(uint64_t id, QueueKind kind, uint32_t device, uint32_t core, uint32_t slot_count, int ring_fd,
	      QueueProgress *progress, int undo_fd, std::shared_ptr<TenantContext> tenant,
	      std::shared_ptr<QueueDirectory> peers);
	~Queue();
	Queue(const Queue &) = delete;
	Queue &operator=(const Queue &) = delete;

	uint64_t id() const { return id_; }
	QueueKind kind() const { return kind_; }
	uint32_t device() const { return device_; }
	uint32_t core() const { return core_; }
	uint32_t slot_count() const { return slot_count_; }
	int memfd() const { return memfd_; }
	uint64_t ring_bytes() const { return ring_bytes_; }
	// The ring's consumer side (<neuron/ring.hpp>).
	const ring::Consumer &ring() const { return ring_; }

	// The tenant the queue belongs to (its memory, its backend state).
	TenantContext &tenant() const { return *tenant_; }
	QueueDirectory &peers() const { return *peers_; }

	uint64_t completed() const { return completed_.load(std::memory_order_acquire); }
	bool faulted() const { return faulted_.load(std::memory_order_acquire); }
	// Set by the control thread when the queue or its tenant goes away: the
	// engine stops taking commands from it.
	void retire() { retired_.store(true, std::memory_order_release); }
	bool retired() const { return retired_.load(std::memory_order_acquire); }

	// Restart survival: where its progress is kept (the record is the caller's;
	// `released` runs when the queue is destroyed, when no engine can write the
	// record any more), and its undo log (fd -1: none).
	void keep(QueueProgress *progress, int undo_fd, std::function<void()> released);
	// The same for an adopted queue (its record and undo log came with it).
	void on_destroy(std::function<void()> released) { released_ = std::move(released); }
	QueueProgress *progress() const { return progress_; }
	UndoLog *undo() const { return undo_.get(); }
	// Adoption: the command that was running when the earlier neurond stopped (its
	// first slot), or 0.
	uint64_t interrupted() const { return interrupted_; }
	// Engine: command `seq` passed the gate and its tiles begin (after its undo
	// record, if it needs one, was saved).
	void mark_started(uint64_t seq)
	{
		if (progress_)
			std::atomic_ref<uint64_t>(progress_->started).store(seq, std::memory_order_release);
	}

	// Engine side.
	uint64_t next_seq() const { return completed_.load(std::memory_order_relaxed) + 1; }
	// The queue this queue's next command waits on (its wait field), while that
	// queue has not reached the value yet; nullptr if the next command is absent,
	// waits on nothing or may start. A hint read from the tenant's slot, so that
	// engines sleep instead of polling a blocked command: start_command re-reads
	// the command and re-checks (and faults a bad wait). Any thread. `value`, when
	// given: the count of the peer's completed commands the command waits for.
	std::shared_ptr<Queue> blocking_peer(uint64_t *value = nullptr) const;
	// The word complete_one() bumps after every command: engines blocked on this
	// queue sleep on it as targeted waiters (ring().announce_waiter).
	uint32_t *completed_word() const { return ring_.completed_word(); }
	void complete_one() { complete(1); }
	// A command of `slots` ring slots completed (EXEC_PROGRAM with its bindings).
	void complete(uint32_t slots);
	void fault(uint32_t code, uint64_t seq, uint64_t user_tag, const std::string &reason);

private:
	uint64_t id_;
	QueueKind kind_;
	uint32_t device_;
	uint32_t core_;
	uint32_t slot_count_;
	int memfd_ = -1;
	uint64_t ring_bytes_ = 0;
	ring::Consumer ring_;
	std::shared_ptr<TenantContext> tenant_;
	std::shared_ptr<QueueDirectory> peers_;
	std::atomic<uint64_t> completed_{0};   // authoritative timeline value
	std::atomic<bool> faulted_{false};
	std::atomic<bool> retired_{false};
	QueueProgress *progress_ = nullptr;
	std::unique_ptr<UndoLog> undo_;
	std::function<void()> released_;
	uint64_t interrupted_ = 0;
};

} // namespace neuron::backend
