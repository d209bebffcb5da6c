#include "engine.h"

#include "device.h"
#include "operands.h"
#include "tenant_memory.h"

#include <neuron/detail/futex.h>

#include <cstdio>
#include <cstring>
#include <shared_mutex>

namespace neuron::chip {

using detail::atomic_u32;
using detail::atomic_u64;

Engine::Engine(Device &device, int core, EngineOptions options)
	: device_(device), core_(core), options_(options),
	  counters_(core < 0 ? device.dma_counters() : device.core_counters(static_cast<uint32_t>(core)))
{
	thread_ = std::thread([this] { run(); });
}

Engine::~Engine() { stop(); }

std::string Engine::name() const
{
	return "nd" + std::to_string(device_.index()) + (core_ < 0 ? "/dma" : "/nc" + std::to_string(core_));
}

void Engine::wake()
{
	atomic_u32(wake_word_).fetch_add(1, std::memory_order_seq_cst);
	detail::futex_wake_all(&wake_word_);
}

void Engine::add_queue(std::shared_ptr<Queue> q)
{
	{
		std::lock_guard lock(queues_mutex_);
		queues_.push_back(std::move(q));
		generation_.fetch_add(1, std::memory_order_release);
	}
	wake();
}

void Engine::remove_queue(const Queue *q)
{
	{
		std::lock_guard lock(queues_mutex_);
		std::erase_if(queues_, [q](const auto &p) { return p.get() == q; });
		generation_.fetch_add(1, std::memory_order_release);
	}
	wake();
}

void Engine::stop()
{
	if (stop_.exchange(true))
		return;
	wake();
	if (thread_.joinable())
		thread_.join();
}

bool Engine::refresh_snapshot()
{
	const uint64_t g = generation_.load(std::memory_order_acquire);
	if (g == snapshot_generation_)
		return false;
	std::lock_guard lock(queues_mutex_);
	snapshot_ = queues_;
	snapshot_generation_ = generation_.load(std::memory_order_relaxed);
	return true;
}

void Engine::run()
{
	uint64_t last_work = detail::monotonic_ns();
	while (!stop_.load(std::memory_order_acquire)) {
		refresh_snapshot();
		bool progress = false;
		// One command per queue per pass: queues on a core share it round-robin.
		for (const auto &q : snapshot_)
			progress |= service(*q);
		if (progress) {
			last_work = detail::monotonic_ns();
			continue;
		}
		if (detail::monotonic_ns() - last_work < options_.spin_ns) {
			for (int i = 0; i < 32; ++i)
				detail::cpu_relax();
			continue;
		}
		sleep_until_doorbell();
		last_work = detail::monotonic_ns();
	}
	// Drop the snapshot's references on this thread so queues die promptly.
	snapshot_.clear();
}

void Engine::sleep_until_doorbell()
{
	// At most 127 rings plus the wake word; with more queues than that the engine
	// sleeps in 1 ms slices instead (still correct, only slower to react).
	constexpr unsigned kMax = 128;
	struct futex_waitv waiters[kMax];
	unsigned n = 0;
	const uint32_t wake_seen = atomic_u32(wake_word_).load(std::memory_order_seq_cst);
	waiters[n++] = {wake_seen, reinterpret_cast<uintptr_t>(&wake_word_), FUTEX_32 | FUTEX_PRIVATE_FLAG, 0};
	bool pending = false;
	for (const auto &q : snapshot_) {
		if (n == kMax)
			break;
		neuron_ring_header *h = q->header();
		atomic_u32(h->engine_sleeping).store(1, std::memory_order_seq_cst);
		const uint32_t bell = atomic_u32(h->doorbell).load(std::memory_order_seq_cst);
		// Re-check after announcing sleep: a tenant that published before it
		// could see the flag has its command seen here.
		if (!q->faulted() && !q->retired() &&
		    atomic_u64(h->tail).load(std::memory_order_seq_cst) != q->completed())
			pending = true;
		waiters[n++] = {bell, reinterpret_cast<uintptr_t>(&h->doorbell), FUTEX_32, 0};
	}
	if (!pending && generation_.load(std::memory_order_acquire) == snapshot_generation_ &&
	    !stop_.load(std::memory_order_acquire)) {
		struct timespec deadline;
		clock_gettime(CLOCK_MONOTONIC, &deadline);
		const bool sliced = snapshot_.size() + 1 > kMax;
		deadline.tv_nsec += sliced ? 1000000 : 0;
		deadline.tv_sec += sliced ? 0 : 1; // periodic wake keeps a lost wake-up cheap
		if (deadline.tv_nsec >= 1000000000) {
			deadline.tv_sec += 1;
			deadline.tv_nsec -= 1000000000;
		}
		detail::futex_wait_any(waiters, n, &deadline);
	}
	for (const auto &q : snapshot_)
		atomic_u32(q->header()->engine_sleeping).store(0, std::memory_order_relaxed);
}

void Engine::fault(Queue &q, uint32_t code, uint64_t seq, uint64_t user_tag, const std::string &reason)
{
	q.fault(code, seq, user_tag, reason);
	if (options_.on_fault)
		options_.on_fault(q, code, seq, reason);
}

bool Engine::service(Queue &q)
{
	if (q.faulted() || q.retired())
		return false;
	neuron_ring_header *h = q.header();
	const uint64_t tail = atomic_u64(h->tail).load(std::memory_order_acquire);
	const uint64_t seq = q.next_seq();
	if (tail < seq)
		return false;
	if (tail - (seq - 1) > q.slot_count()) {
		// The tenant published more commands than the ring holds: a broken or
		// hostile client. Fault its queue; nothing else is affected.
		fault(q, NEURON_FAULT_RING, seq, 0,
			"ring protocol violated: tail " + std::to_string(tail) + " is more than " +
				std::to_string(q.slot_count()) + " slots ahead of completed " +
				std::to_string(seq - 1));
		return true;
	}
	// Private copy first: the tenant can still write the shared slot.
	neuron_cmd cmd;
	std::memcpy(&cmd, q.slot(seq), sizeof(cmd));

	if (cmd.wait.queue_id != 0) {
		std::shared_ptr<Queue> other = q.peers().find(cmd.wait.queue_id);
		if (!other || (other.get() == &q && cmd.wait.value >= seq)) {
			fault(q, NEURON_FAULT_BAD_WAIT, seq, cmd.user_tag,
				"command waits on queue " + std::to_string(cmd.wait.queue_id) +
					(other ? " for a value it can never reach" : ", which this tenant does not own"));
			return true;
		}
		if (other->completed() < cmd.wait.value) {
			if (other->faulted() || other->retired()) {
				fault(q, NEURON_FAULT_BAD_WAIT, seq, cmd.user_tag,
					"command waits on queue " + std::to_string(cmd.wait.queue_id) +
						", which faulted or was destroyed before reaching " +
						std::to_string(cmd.wait.value));
				return true;
			}
			return false; // not ready: try the other queues
		}
	}

	if (auto f = kernels::check_semantics(cmd)) {
		fault(q, f->code, seq, cmd.user_tag, f->message);
		return true;
	}

	const uint64_t start = detail::monotonic_ns();
	{
		std::shared_lock lock(q.memory().mutex);
		if (q.retired())
			return false;
		OperandViews views{};
		if (auto f = resolve_operands(cmd, q.kind(), device_, q.memory(), views)) {
			fault(q, f->code, seq, cmd.user_tag, f->message);
			return true;
		}
		if (auto f = kernels::execute(cmd, std::span(views.data(), cmd.num_operands), options_.threads)) {
			fault(q, f->code, seq, cmd.user_tag, f->message);
			return true;
		}
	}
	counters_.busy_ns.fetch_add(detail::monotonic_ns() - start, std::memory_order_relaxed);
	counters_.commands.fetch_add(1, std::memory_order_relaxed);
	q.complete_one();
	return true;
}

} // namespace neuron::chip
