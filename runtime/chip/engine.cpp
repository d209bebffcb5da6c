#include "engine.h"

#include "device.h"
#include "operands.h"
#include "tenant_memory.h"

#include <geometry.h>
#include <neuron/futex.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>
#include <shared_mutex>

namespace neuron::chip {

using detail::atomic_u32;
using detail::monotonic_ns;

namespace {

// A logical core that was idle does not get to bank credit: it rejoins at most this
// far (virtual ns) behind its class's clock.
constexpr uint64_t kMaxLag = 4'000'000ull * 1024;

uint64_t thread_cpu_ns()
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return uint64_t(t.tv_sec) * 1000000000ull + uint64_t(t.tv_nsec);
}

} // namespace

Engine::Engine(Device &device, int core, CoreScheduler &sched, uint32_t sched_core, EngineOptions options)
	: device_(device), core_(core), sched_(sched), sched_core_(sched_core), options_(std::move(options)),
	  counters_(core < 0 ? device.dma_counters() : device.core_counters(static_cast<uint32_t>(core)))
{
	thread_ = std::thread([this] { run(); });
}

Engine::~Engine() { stop(); }

std::string Engine::name() const
{
	return "nd" + std::to_string(device_.index()) + (core_ < 0 ? "/dma" : "/nc" + std::to_string(core_));
}

void Engine::stop()
{
	if (stop_.exchange(true))
		return;
	sched_.wake(sched_core_);
	if (thread_.joinable())
		thread_.join();
}

void Engine::refresh()
{
	sched_.eligible(sched_core_, &eligible_, &generation_);
	watched_.clear();
	for (const auto &l : eligible_)
		for (auto &q : l->queues_snapshot())
			watched_.push_back(std::move(q));
}

void Engine::run()
{
	uint64_t last_work = monotonic_ns();
	while (!stop_.load(std::memory_order_acquire)) {
		if (sched_.generation() != generation_)
			refresh();
		// Between tiles, with the new eligible set in hand: a pending reclaim is done,
		// the borrower gets nothing more here.
		if (sched_.reclaim_pending(sched_core_)) {
			refresh();
			sched_.complete_reclaim(sched_core_);
		}
		if (run_one()) {
			last_work = monotonic_ns();
			continue;
		}
		if (monotonic_ns() - last_work < options_.spin_ns) {
			for (int i = 0; i < 32; ++i)
				detail::cpu_relax();
			continue;
		}
		// Not reset after waking: an engine woken for work a sibling already took
		// goes straight back to sleep instead of spinning beside it.
		sleep_until_doorbell();
	}
	eligible_.clear();
	watched_.clear();
}

bool Engine::run_one()
{
	candidates_.clear();
	for (const auto &l : eligible_)
		if (l->claimed_by() < 0 && l->runnable())
			candidates_.push_back(l.get());
	if (candidates_.empty())
		return false;
	const bool pooled = sched_.pooled();
	auto key = [&](LogicalCore *l) {
		const uint64_t clock = sched_.class_clock(l->pool()).load(std::memory_order_relaxed);
		const uint64_t v = std::max(l->vtime.load(std::memory_order_relaxed), clock > kMaxLag ? clock - kMaxLag : 0);
		return std::pair<int, uint64_t>(pooled ? static_cast<int>(l->pool()) : 0, v);
	};
	if (candidates_.size() > 1)
		std::sort(candidates_.begin(), candidates_.end(), [&](LogicalCore *a, LogicalCore *b) { return key(a) < key(b); });
	for (LogicalCore *l : candidates_) {
		if (!l->try_claim(static_cast<int>(sched_core_)))
			continue;
		const uint64_t v = key(l).second;
		if (l->vtime.load(std::memory_order_relaxed) < v)
			l->vtime.store(v, std::memory_order_relaxed);
		const Step s = step(*l);
		l->release();
		if (s == Step::Progress)
			return true;
	}
	return false;
}

void Engine::fault(Queue &q, uint32_t code, uint64_t seq, uint64_t user_tag, const std::string &reason)
{
	q.fault(code, seq, user_tag, reason);
	if (options_.on_fault)
		options_.on_fault(q, code, seq, reason);
}

Engine::Step Engine::start_command(LogicalCore &l, const std::shared_ptr<Queue> &qp)
{
	Queue &q = *qp;
	if (q.faulted() || q.retired())
		return Step::Idle;
	const uint64_t tail = q.ring().tail();
	const uint64_t seq = q.next_seq();
	if (tail < seq)
		return Step::Idle;
	if (q.ring().overrun(tail, seq - 1)) {
		// The tenant published more commands than the ring holds: a broken or
		// hostile client. Fault its queue; nothing else is affected.
		fault(q, NEURON_FAULT_RING, seq, 0,
		      "ring protocol violated: tail " + std::to_string(tail) + " is more than " +
			      std::to_string(q.slot_count()) + " slots ahead of completed " + std::to_string(seq - 1));
		return Step::Progress;
	}
	// Private copy first: the tenant can still write the shared slot.
	LogicalCore::InFlight &f = l.inflight;
	q.ring().read(seq, &f.cmd);
	const neuron_cmd &cmd = f.cmd;

	if (cmd.wait.queue_id != 0) {
		std::shared_ptr<Queue> other = q.peers().find(cmd.wait.queue_id);
		if (!other || (other.get() == &q && cmd.wait.value >= seq)) {
			fault(q, NEURON_FAULT_BAD_WAIT, seq, cmd.user_tag,
			      "command waits on queue " + std::to_string(cmd.wait.queue_id) +
				      (other ? " for a value it can never reach" : ", which this tenant does not own"));
			return Step::Progress;
		}
		if (other->completed() < cmd.wait.value) {
			if (other->faulted() || other->retired()) {
				fault(q, NEURON_FAULT_BAD_WAIT, seq, cmd.user_tag,
				      "command waits on queue " + std::to_string(cmd.wait.queue_id) +
					      ", which faulted or was destroyed before reaching " +
					      std::to_string(cmd.wait.value));
				return Step::Progress;
			}
			return Step::Idle; // not ready: try the other queues
		}
	}
	if (auto flt = kernels::check_semantics(cmd)) {
		fault(q, flt->code, seq, cmd.user_tag, flt->message);
		return Step::Progress;
	}
	std::byte *out_data = nullptr; // the output's host address, for f.prefault
	{
		// Validation before execution: the whole command, before its first tile.
		std::shared_lock lock(q.memory().mutex);
		if (q.retired())
			return Step::Idle;
		OperandViews views{};
		if (auto flt = resolve_operands(cmd, q.kind(), device_, q.memory(), views)) {
			fault(q, flt->code, seq, cmd.user_tag, flt->message);
			return Step::Progress;
		}
		out_data = views[0].data;
	}
	f.queue = qp;
	f.seq = seq;
	// Tiles of one thread's budget: run_tiles gives each its own thread.
	f.plan = options_.tiling ? plan_tiles(cmd, options_.tile_budget, 1) : TilePlan{};
	f.tiles.reset(f.plan.tiles, chain_length(f.plan));
	try {
		f.packs.reserve(pack_floats(cmd, f.plan)); // 0 unless a tiled matmul
	} catch (const std::bad_alloc &) {
		f.packs.clear(); // no arena: blocks get buffers of their own, or none
	}
	const size_t out_bytes = f.plan.tiles > 1 ? kernels::byte_extent(cmd.operands[0]).value_or(0) : 0;
	f.prefault.reset({out_data, out_bytes}, {f.packs.arena(), f.packs.arena_bytes()});
	l.active.store(true, std::memory_order_release);
	return Step::Progress;
}

void Engine::finish_command(LogicalCore &l)
{
	l.inflight.queue.reset();
	l.inflight.packs.clear(); // no tile runs now; the memory goes back at once
	l.inflight.partials.clear();
	l.active.store(false, std::memory_order_release);
}

Engine::Step Engine::step(LogicalCore &l)
{
	if (!l.active.load(std::memory_order_relaxed)) {
		auto queues = l.queues_snapshot();
		const size_t n = queues.size();
		bool started = false;
		for (size_t i = 0; i < n && !started; ++i) {
			const size_t k = (l.rr + i) % n;
			if (start_command(l, queues[k]) == Step::Progress) {
				l.rr = (k + 1) % n;
				if (!l.active.load(std::memory_order_relaxed))
					return Step::Progress; // a fault: progress of a kind
				started = true;
			}
		}
		if (!started)
			return Step::Idle;
	}
	LogicalCore::InFlight &f = l.inflight;
	// A reference of our own: ending the command resets f.queue, and the queue may
	// be retired by then.
	const std::shared_ptr<Queue> keep = f.queue;
	Queue &q = *keep;
	const Outcome out = f.plan.tiles > 1 ? run_tiles(l, f, q) : run_whole(l, f, q);
	if (out.kind != Outcome::Done) {
		if (out.kind == Outcome::Fault)
			fault(q, out.code, f.seq, f.cmd.user_tag, out.reason);
		if (out.kind != Outcome::Preempted)
			finish_command(l);
		return Step::Progress;
	}
	counters_.commands.fetch_add(1, std::memory_order_relaxed);
	l.commands.fetch_add(1, std::memory_order_relaxed);
	const uint64_t end = monotonic_ns();
	const uint64_t since = l.pending_since_ns.load(std::memory_order_relaxed);
	l.latency.record(since && since < end ? end - since : f.last_tile_ns);
	q.complete_one();
	finish_command(l);
	// The next command of this logical core (if any) starts its clock now.
	l.pending_since_ns.store(0, std::memory_order_relaxed);
	return Step::Progress;
}

bool Engine::someone_waiting(const LogicalCore &self, const Queue &q) const
{
	if (stop_.load(std::memory_order_relaxed) || sched_.generation() != generation_ ||
	    sched_.reclaim_pending(sched_core_) || q.memory().writer_waiting())
		return true;
	for (const auto &l : eligible_)
		if (l.get() != &self && l->claimed_by() < 0 && l->runnable())
			return true;
	return false;
}

namespace {

void store_max(std::atomic<uint64_t> &m, uint64_t v)
{
	uint64_t cur = m.load(std::memory_order_relaxed);
	while (cur < v && !m.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
	}
}

} // namespace

// Runs tile `index` of the in-flight command on the calling thread with `threads`
// host threads. Any engine worker thread may call it; it touches only the command
// (read), the tenant's memory (shared lock) and atomic counters.
Engine::Outcome Engine::run_tile(LogicalCore &l, const LogicalCore::InFlight &f, Queue &q, uint64_t index,
				 int threads, uint64_t &wall_ns)
{
	// CPU time only for tiles of tiled commands: it is a system call (~1 us here),
	// too dear for every small command.
	const bool tiled = f.plan.tiles > 1;
	const uint64_t cpu_start = tiled ? thread_cpu_ns() : 0;
	const uint64_t start = monotonic_ns();
	{
		std::shared_lock lock(q.memory().mutex);
		if (q.retired())
			return Outcome::of(Outcome::Ended);
		// Again per tile: the memory lock was dropped since the last one, and the
		// tenant may have freed an operand in between.
		OperandViews views{};
		if (auto flt = resolve_operands(f.cmd, q.kind(), device_, q.memory(), views))
			return Outcome::fault(flt->code, flt->message);
		neuron_cmd tile = f.cmd;
		if (tiled)
			narrow_to_tile(f.plan, index, tile, views);
		const auto flt = execute_tile(f.partials, f.plan, index, tile, views, threads, &f.packs);
		if (flt)
			return Outcome::fault(flt->code, flt->message);
	}
	wall_ns = monotonic_ns() - start;
	counters_.tiles.fetch_add(1, std::memory_order_relaxed);
	l.tiles.fetch_add(1, std::memory_order_relaxed);
	store_max(counters_.max_tile_ns, wall_ns);
	if (tiled)
		record_tile(wall_ns, thread_cpu_ns() - cpu_start);
	return Outcome::of(Outcome::Done);
}

// One step of backing a tiled command's pages (prefault.h); false when the chunk
// is done. Timed like a tile: the core cannot change tenants during it either.
bool Engine::run_prefault_step(Prefault::Chunk &chunk, uint64_t &wall_ns)
{
	const uint64_t cpu_start = thread_cpu_ns();
	const uint64_t start = monotonic_ns();
	if (!chunk.step())
		return false;
	wall_ns = monotonic_ns() - start;
	store_max(counters_.max_tile_ns, wall_ns);
	record_tile(wall_ns, thread_cpu_ns() - cpu_start);
	return true;
}

// Telemetry of one unit of a tiled command (a tile or a prefault step).
void Engine::record_tile(uint64_t wall_ns, uint64_t cpu_ns)
{
	counters_.tile_ns.record(wall_ns);
	counters_.tile_cpu_ns.record(cpu_ns);
	store_max(counters_.max_tile_cpu_ns, cpu_ns);
	if (cpu_ns > 1'000'000)
		counters_.tiles_over_1ms_cpu.fetch_add(1, std::memory_order_relaxed);
}

// Charges `wall_ns` of this core's time to l: utilisation and fair share.
void Engine::charge(LogicalCore &l, uint64_t wall_ns)
{
	counters_.busy_ns.fetch_add(wall_ns, std::memory_order_relaxed);
	counters_.last_tenant.store(l.tenant(), std::memory_order_relaxed);
	counters_.last_pool.store(static_cast<uint8_t>(l.pool()), std::memory_order_relaxed);
	l.busy_ns.fetch_add(wall_ns, std::memory_order_relaxed);
	const uint64_t v = l.vtime.load(std::memory_order_relaxed) + wall_ns * 1024 / l.weight();
	l.vtime.store(v, std::memory_order_relaxed);
	store_max(sched_.class_clock(l.pool()), v);
}

// A command that is one tile: run whole, on all of the core's host threads.
Engine::Outcome Engine::run_whole(LogicalCore &l, LogicalCore::InFlight &f, Queue &q)
{
	uint64_t dt = 0;
	const Outcome out = run_tile(l, f, q, 0, options_.threads, dt);
	if (out.kind == Outcome::Done) {
		charge(l, dt);
		f.last_tile_ns = dt;
	}
	return out;
}

// A tiled command: the core's host threads each run whole tiles, one thread per
// tile (tile_cursor.h), until the command is done or someone else waits for the
// core. Adaptive: while nobody waits, tile follows tile with no trip through the
// scheduler, so a tenant alone runs its op as if untiled; once someone waits, every
// thread stops after its running tile, so the core is theirs within one tile.
Engine::Outcome Engine::run_tiles(LogicalCore &l, LogicalCore::InFlight &f, Queue &q)
{
	std::mutex mutex; // guards first_error
	Outcome first_error;
	std::atomic<bool> stop{false};
	std::atomic<uint64_t> longest{0};
	auto worker = [&] {
		try {
			// The pages the tiles will write first, so that no tile pays their faults.
			while (!stop.load(std::memory_order_relaxed)) {
				const auto range = f.prefault.claim();
				if (!range)
					break;
				Prefault::Chunk chunk(*range);
				uint64_t dt = 0;
				while (!stop.load(std::memory_order_relaxed) && run_prefault_step(chunk, dt)) {
					store_max(longest, dt);
					if (someone_waiting(l, q))
						stop.store(true, std::memory_order_relaxed);
				}
				f.prefault.give_back(chunk.rest());
			}
			std::optional<TileCursor::Claim> c;
			while (!stop.load(std::memory_order_relaxed)) {
				if (!c && !(c = f.tiles.claim()))
					break; // every chain is claimed or done
				uint64_t dt = 0;
				const Outcome out = run_tile(l, f, q, f.tiles.tile_index(*c), 1, dt);
				if (out.kind != Outcome::Done) {
					std::lock_guard lock(mutex);
					if (first_error.kind == Outcome::Done)
						first_error = out;
					stop.store(true, std::memory_order_relaxed);
					break;
				}
				store_max(longest, dt);
				if (++c->next == f.tiles.chain_length()) {
					f.tiles.finish();
					c.reset();
				}
				if (someone_waiting(l, q))
					stop.store(true, std::memory_order_relaxed);
			}
			if (c)
				f.tiles.park(*c);
		} catch (...) {
			// Nothing in a tile should throw (kernels report faults); if something
			// does, the queue faults instead of the daemon dying.
			std::lock_guard lock(mutex);
			if (first_error.kind == Outcome::Done)
				first_error = Outcome::fault(NEURON_FAULT_EXEC, "internal error while running a tile");
			stop.store(true, std::memory_order_relaxed);
		}
	};
	const int threads =
		static_cast<int>(std::clamp<uint64_t>(f.tiles.claimable(), 1, static_cast<uint64_t>(options_.threads)));
	const uint64_t start = monotonic_ns();
	if (threads == 1) {
		worker();
	} else {
#pragma omp parallel num_threads(threads)
		worker();
	}
	// The core's time is the group's wall time, however many threads it used (the
	// same charge a multi-threaded whole command pays).
	charge(l, monotonic_ns() - start);
	f.last_tile_ns = longest.load(std::memory_order_relaxed);
	if (first_error.kind != Outcome::Done)
		return first_error;
	return Outcome::of(f.tiles.done() ? Outcome::Done : Outcome::Preempted);
}

void Engine::sleep_until_doorbell()
{
	// At most 127 rings and blockers plus the wake word; with more than that the
	// engine sleeps in 1 ms slices instead (still correct, only slower to react).
	constexpr unsigned kMax = 128;
	struct futex_waitv waiters[kMax];
	unsigned n = 0;
	uint32_t *wake_word = sched_.wake_word(sched_core_);
	const uint32_t wake_seen = atomic_u32(*wake_word).load(std::memory_order_seq_cst);
	// Shared (not PRIVATE) key: CoreScheduler::wake uses the shared FUTEX_WAKE.
	waiters[n++] = {wake_seen, reinterpret_cast<uintptr_t>(wake_word), FUTEX_32, 0};
	unsigned announced = 0;
	bool truncated = false; // some ring or blocker is not watched: sleep in slices
	for (const auto &q : watched_) {
		if (n == kMax) {
			truncated = true;
			break;
		}
		// A count, not a flag: several engines may sleep on one ring.
		const uint32_t bell = q->ring().announce_sleep();
		++announced;
		waiters[n++] = {bell, reinterpret_cast<uintptr_t>(q->ring().doorbell_word()), FUTEX_32, 0};
	}
	// A next command blocked on another queue: also wake when that queue completes
	// one (its word first, then the announcement; the re-check below closes the race).
	blockers_.clear();
	for (const auto &q : watched_) {
		if (n == kMax) {
			truncated = true;
			break;
		}
		std::shared_ptr<Queue> peer = q->blocking_peer();
		if (!peer)
			continue;
		const uint32_t word = peer->ring().announce_waiter();
		waiters[n++] = {word, reinterpret_cast<uintptr_t>(peer->completed_word()), FUTEX_32, 0};
		blockers_.push_back(std::move(peer));
	}
	// Re-check after announcing sleep: a tenant that published before it could see
	// the announcement has its command seen here.
	bool pending = false;
	for (const auto &l : eligible_)
		if (l->claimed_by() < 0 && l->runnable()) {
			pending = true;
			break;
		}
	if (!pending && sched_.generation() == generation_ && !sched_.reclaim_pending(sched_core_) &&
	    !stop_.load(std::memory_order_acquire)) {
		struct timespec deadline;
		clock_gettime(CLOCK_MONOTONIC, &deadline);
		deadline.tv_nsec += truncated ? 1000000 : 0;
		deadline.tv_sec += truncated ? 0 : 1; // periodic wake keeps a lost wake-up cheap
		if (deadline.tv_nsec >= 1000000000) {
			deadline.tv_sec += 1;
			deadline.tv_nsec -= 1000000000;
		}
		detail::futex_wait_any(waiters, n, &deadline);
	}
	for (unsigned i = 0; i < announced; ++i)
		watched_[i]->ring().withdraw_sleep();
	for (const auto &peer : blockers_)
		peer->ring().withdraw_waiter();
	blockers_.clear();
}

} // namespace neuron::chip
