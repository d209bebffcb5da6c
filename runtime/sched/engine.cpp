#include "engine.h"

#include "cpu_placement.h"

#include <backend/tenant_context.h>
#include <gate/admit.h>

#include <neuron/futex.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <shared_mutex>

#include <pthread.h>

namespace neuron::sched {

using detail::atomic_u32;
using detail::monotonic_ns;

namespace {

// A logical core that was idle does not get to bank credit: it rejoins at most this
// far (virtual ns) behind its class's clock; and at least a few turns' worth, or
// weights could not act where a turn is longer than that (slow hosts, a TCG guest).
constexpr uint64_t kMaxLag = 4'000'000ull * 1024;
constexpr uint64_t kLagTurns = 8;

void store_max(std::atomic<uint64_t> &m, uint64_t v)
{
	uint64_t cur = m.load(std::memory_order_relaxed);
	while (cur < v && !m.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
	}
}

} // namespace

Engine::Engine(CoreScheduler &sched, uint32_t sched_core, std::string name, CoreCounters &counters,
	       std::unique_ptr<TileRunner> runner, EngineOptions options)
	: sched_(sched), sched_core_(sched_core), name_(std::move(name)), counters_(counters),
	  runner_(std::move(runner)), options_(std::move(options)), injector_(options_.faults)
{
	thread_ = std::thread([this] { run(); });
}

Engine::~Engine() { stop(); }

bool Engine::pin(const std::vector<int> &cpus) { return pin_thread(thread_, cpus); }

void Engine::stop()
{
	if (stop_.exchange(true))
		return;
	sched_.wake(sched_core_);
	atomic_u32(reset_word_).fetch_add(1);
	detail::futex_wake_all(&reset_word_); // an injected stall
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
	// Named as in the logs ("nd0/nc3"), for top -H, perf and /proc/PID/task.
	pthread_setname_np(pthread_self(), name_.substr(0, 15).c_str());
	uint64_t last_work = monotonic_ns();
	while (!stop_.load(std::memory_order_acquire)) {
		if (sched_.generation() != generation_)
			refresh();
		// Between tiles, with the new eligible set in hand: a pending switch is done,
		// the pool that lost the core gets nothing more here.
		if (sched_.switch_pending(sched_core_)) {
			refresh();
			sched_.complete_switch(sched_core_);
		}
		if (run_one()) {
			last_work = monotonic_ns();
			continue;
		}
		if (monotonic_ns() - last_work < options_.spin_ns) {
			detail::spin_pause();
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
	const uint64_t lag = std::max(kMaxLag, kLagTurns * 1024 * sched_.typical_turn_ns());
	auto key = [&](LogicalCore *l) {
		const uint64_t clock = sched_.class_clock(l->pool()).load(std::memory_order_relaxed);
		const uint64_t v = std::max(l->vtime.load(std::memory_order_relaxed), clock > lag ? clock - lag : 0);
		return std::pair<int, uint64_t>(pooled ? static_cast<int>(l->pool()) : 0, v);
	};
	// Sorted by keys taken once: other engines move the clocks and virtual times
	// while we sort, and a comparator that reads them live is no strict weak order
	// (std::sort then ran past the vector's end: ASan caught it in bench-soak).
	// One per engine thread, kept between calls (this runs between every two tiles).
	static thread_local std::vector<std::pair<std::pair<int, uint64_t>, LogicalCore *>> ranked_;
	ranked_.clear();
	for (LogicalCore *l : candidates_)
		ranked_.emplace_back(key(l), l);
	if (ranked_.size() > 1)
		std::sort(ranked_.begin(), ranked_.end(),
			  [](const auto &a, const auto &b) { return a.first < b.first; });
	for (const auto &ranked : ranked_) {
		LogicalCore *l = ranked.second;
		if (!l->try_claim(static_cast<int>(sched_core_)))
			continue;
		const uint64_t v = key(l).second;
		if (l->vtime.load(std::memory_order_relaxed) < v)
			l->vtime.store(v, std::memory_order_relaxed);
		nice_ = pooled && l->pool() == Pool::Training ? options_.training_nice : 0;
		set_thread_nice(nice_);
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

RunContext Engine::context(LogicalCore &l, Queue &q) const
{
	return RunContext{sched_core_, options_.threads, counters_, options_.tile_budget, *this, l, q, nice_};
}

Engine::Step Engine::start_command(LogicalCore &l, const std::shared_ptr<Queue> &qp)
{
	Queue &q = *qp;
	if (q.faulted() || q.retired())
		return Step::Idle;
	InFlight &f = l.inflight;
	const gate::Admission a = gate::admit_next(q, &f.cmd, &f.exec);
	switch (a.kind) {
	case gate::Admission::Empty:
	case gate::Admission::Blocked: // not ready: try the other queues
		return Step::Idle;
	case gate::Admission::Fault:
		fault(q, a.fault.code, a.seq, a.user_tag, a.fault.message);
		return Step::Progress;
	case gate::Admission::Ready:
		break;
	}
	f.user_tag = f.cmd.user_tag;
	f.slots = a.slots;
	f.stamped = a.stamped;
	f.stamp_addr = a.stamp_addr;
	f.started_ns = monotonic_ns();
	if (f.cmd.opcode == NEURON_OP_EXEC_PROGRAM)
		return start_program(l, qp, a.seq);
	{
		// Validation before execution: the whole command, before its first tile.
		backend::TenantMemory &m = q.tenant().memory();
		std::shared_lock lock(m.mutex);
		if (q.retired())
			return Step::Idle;
		gate::Operands ops;
		if (auto flt = gate::resolve(f.cmd, q.kind() == backend::QueueKind::Dma, m.space(q.device()), &ops)) {
			fault(q, flt->code, a.seq, f.cmd.user_tag, flt->message);
			return Step::Progress;
		}
		gate::Placement stamp;
		if (f.stamped)
			if (auto flt = gate::resolve_stamp(f.stamp_addr, f.cmd, ops, m.space(q.device()), &stamp)) {
				fault(q, flt->code, a.seq, f.cmd.user_tag, flt->message);
				return Step::Progress;
			}
		if (!keep_before_start(q, a.seq, f.cmd, ops))
			return Step::Progress;
	}
	if (!injector_.empty() && inject_at_start(q, a.seq, f.cmd.user_tag))
		return Step::Progress;
	f.queue = qp;
	f.seq = a.seq;
	if (begin_current(l, q))
		l.active.store(true, std::memory_order_release);
	return Step::Progress;
}

// Restart survival (backend/queue_keep.h), with the tenant's memory locked: the
// undo record of a command that could not simply run again, then the mark that
// its tiles begin. False if it faulted.
bool Engine::keep_before_start(Queue &q, uint64_t seq, const neuron_cmd &cmd, const gate::Operands &ops)
{
	if (!q.progress())
		return true;
	if (!backend::rerun_is_exact(cmd, ops))
		if (auto err = q.undo()->save(seq, cmd, ops, q.tenant(), q.device()); !err.empty()) {
			fault(q, NEURON_FAULT_EXEC, seq, cmd.user_tag,
			      "neurond could not save the command's undo record (needed to survive a restart): " + err);
			return false;
		}
	q.mark_started(seq);
	return true;
}

// Restart survival of a replay (programs are kept across restarts): what it may
// read before it overwrites it saved in the undo record before its first node, so
// a replay a restart interrupts runs again from its start exactly once. False
// if it faulted.
bool Engine::keep_program_before_start(Queue &q, uint64_t seq, const program::Program &p,
				       const program::Exec &exec, const backend::TenantMemory &m)
{
	if (!q.progress())
		return true;
	std::vector<backend::UndoLog::DeviceRange> ranges;
	auto add = [&](uint64_t addr, uint64_t bytes) {
		uint64_t start = 0;
		const backend::DeviceAllocation *a = m.find_device(q.device(), addr, bytes, &start);
		ranges.push_back({addr, bytes, a && a->host ? a->host + (addr - start) : nullptr});
	};
	// Only what the replay may read before it overwrites it (rerun_reads.h): its
	// scratch buffers and pure outputs need no copy.
	const size_t args = p.arg_bytes.size();
	auto restore = [&](size_t r) { return r < p.restore_on_rerun.size() && p.restore_on_rerun[r]; };
	for (size_t i = 0; i < args && i < exec.bindings.size(); ++i)
		if (restore(i))
			add(exec.bindings[i], p.arg_bytes[i]);
	for (size_t b = 0; b < p.buffer_address.size(); ++b)
		if (restore(args + b))
			add(p.buffer_address[b], p.buffer_bytes[b]);
	if (auto err = q.undo()->save_device(seq, ranges, q.tenant(), q.device()); !err.empty()) {
		fault(q, NEURON_FAULT_EXEC, seq, 0,
		      "neurond could not save the replay's undo record (needed to survive a restart): " + err);
		return false;
	}
	q.mark_started(seq);
	return true;
}

// An EXEC_PROGRAM passed stage 1: its program, its bindings against the tenant's
// memory (once per replay), then its first node.
Engine::Step Engine::start_program(LogicalCore &l, const std::shared_ptr<Queue> &qp, uint64_t seq)
{
	Queue &q = *qp;
	InFlight &f = l.inflight;
	const uint64_t id = static_cast<uint64_t>(f.cmd.iscalars[0]);
	std::shared_ptr<const program::Program> p = q.tenant().programs().find(id);
	if (!p || p->device != q.device()) {
		fault(q, NEURON_FAULT_BAD_OPERAND, seq, f.user_tag,
		      "EXEC_PROGRAM names program " + std::to_string(id) +
			      (p ? ", which was registered for device " + std::to_string(p->device) + ", not this queue's"
				 : ", which this tenant has not registered (or has deregistered)"));
		return Step::Progress;
	}
	{
		backend::TenantMemory &m = q.tenant().memory();
		std::shared_lock lock(m.mutex);
		if (q.retired())
			return Step::Idle;
		if (auto flt = gate::bind_program(*p, f.exec, m.space(q.device()))) {
			fault(q, flt->code, seq, f.user_tag, flt->message);
			return Step::Progress;
		}
		if (!keep_program_before_start(q, seq, *p, f.exec, m))
			return Step::Progress;
	}
	f.program = std::move(p);
	f.node = 0;
	f.queue = qp;
	f.seq = seq;
	program::materialise(*f.program, 0, f.exec, &f.cmd);
	if (begin_current(l, q))
		l.active.store(true, std::memory_order_release);
	return Step::Progress;
}

// The program's next node: the one before completed, the logical core keeps the
// command (and the core goes back to the scheduler, which may run someone else
// first: a replay is preemptible between its nodes as between tiles).
Engine::Step Engine::next_node(LogicalCore &l, Queue &q)
{
	InFlight &f = l.inflight;
	runner_->end(f);
	++f.node;
	program::materialise(*f.program, f.node, f.exec, &f.cmd);
	begin_current(l, q);
	return Step::Progress;
}

// Plans the tiles of f.cmd (a command, or a program's node) and lets the runner
// take what they share. False if the runner faulted it (the command ended).
bool Engine::begin_current(LogicalCore &l, Queue &q)
{
	InFlight &f = l.inflight;
	// Tiles of one thread's budget: runners give each tile its own thread.
	f.plan = options_.tiling ? plan_tiles(f.cmd, options_.tile_budget, 1) : TilePlan{};
	f.tiles.reset(f.plan.tiles, chain_length(f.plan));
	if (auto flt = runner_->begin(l, f, context(l, q))) {
		stall_next_ = nullptr; // an injected stall was for this command
		fault_inflight(l, q, flt->code, flt->message);
		finish_command(l);
		return false;
	}
	return true;
}

void Engine::finish_command(LogicalCore &l)
{
	runner_->end(l.inflight); // no tile runs now; what they shared goes back at once
	l.inflight.queue.reset();
	l.inflight.program.reset(); // a deregistered program's buffers may go now
	l.active.store(false, std::memory_order_release);
}

// The in-flight command faults; a program's node is named (program, node,
// opcode, label), with the node's own tag if it has one.
void Engine::fault_inflight(LogicalCore &l, Queue &q, uint32_t code, const std::string &reason)
{
	InFlight &f = l.inflight;
	if (!f.program) {
		fault(q, code, f.seq, f.cmd.user_tag, reason);
		return;
	}
	fault(q, code, f.seq, f.cmd.user_tag ? f.cmd.user_tag : f.user_tag,
	      program::node_name(*f.program, f.node) + ": " + reason);
}

// NEURON_CMD_F_STAMP: the command's start and end on the device clock, written
// before its completion is published. The tenant may have freed the memory since
// admission: placed again under its lock. False if that faulted the command.
bool Engine::write_stamp(LogicalCore &l, Queue &q, uint64_t end_ns)
{
	InFlight &f = l.inflight;
	int64_t times[2] = {static_cast<int64_t>(f.started_ns), static_cast<int64_t>(end_ns)};
	backend::TenantMemory &m = q.tenant().memory();
	std::shared_lock lock(m.mutex);
	gate::Placement p;
	std::string why;
	if (!m.space(q.device()).place_device(f.stamp_addr, gate::kStampBytes, true, &p, &why)) {
		fault_inflight(l, q, NEURON_FAULT_OUT_OF_BOUNDS, "the stamp (flags NEURON_CMD_F_STAMP): " + why);
		finish_command(l);
		return false;
	}
	if (p.data) {
		std::memcpy(p.data, times, sizeof(times));
		return true;
	}
	// No host address here (kmd: the bytes lie in a driver BO): through the
	// device's DMA engine, as the undo log's copies.
	const backend::TenantContext::DeviceBytes range{f.stamp_addr, sizeof(times), reinterpret_cast<std::byte *>(times)};
	if (auto refused = q.tenant().write_device(q.device(), std::span(&range, 1))) {
		fault_inflight(l, q, NEURON_FAULT_EXEC, "writing the stamp (flags NEURON_CMD_F_STAMP): " + refused->message);
		finish_command(l);
		return false;
	}
	return true;
}

void Engine::complete_command(LogicalCore &l, Queue &q)
{
	InFlight &f = l.inflight;
	if (f.stamped && !write_stamp(l, q, monotonic_ns()))
		return;
	counters_.commands.fetch_add(1, std::memory_order_relaxed);
	l.commands.fetch_add(1, std::memory_order_relaxed);
	const uint64_t end = monotonic_ns();
	const uint64_t since = l.pending_since_ns.load(std::memory_order_relaxed);
	l.latency.record(since && since < end ? end - since : f.last_tile_ns);
	q.complete(f.slots);
	finish_command(l);
	// The next command of this logical core (if any) starts its clock now.
	l.pending_since_ns.store(0, std::memory_order_relaxed);
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
	InFlight &f = l.inflight;
	// A reference of our own: ending the command resets f.queue, and the queue may
	// be retired by then.
	const std::shared_ptr<Queue> keep = f.queue;
	Queue &q = *keep;
	const RunContext ctx = context(l, q);
	const uint64_t start = monotonic_ns();
	progress_ns_.store(start, std::memory_order_relaxed);
	counters_.running_since_ns.store(start, std::memory_order_release);
	uint64_t longest = 0;
	const bool tiled = f.plan.tiles > 1;
	Outcome out;
	if (stall_next_)
		out = stall(start);
	else
		out = tiled ? runner_->run_tiles(l, f, ctx, &longest) : runner_->run_whole(l, f, ctx, &longest);
	if (!injector_.empty())
		slow_down(q, monotonic_ns() - start);
	// A reset asked for while the group ran: the command did not finish, so its
	// work on this core is lost (a finished one stands; the reset found nothing).
	if (auto reason = take_reset(start); reason && out.kind == Outcome::Preempted) {
		out = Outcome::fault(NEURON_FAULT_RESET, std::move(*reason));
		counters_.resets.fetch_add(1, std::memory_order_relaxed);
	}
	// The core's time is the group's wall time, however many threads it used;
	// its end is taken inside busy_seq's odd window (counters.h, busy_now).
	counters_.busy_seq.fetch_add(1);
	charge(l, monotonic_ns() - start);
	counters_.busy_seq.fetch_add(1);
	f.last_tile_ns = longest;
	if (!tiled && out.kind == Outcome::Done)
		count_tile(l, longest);
	if (out.kind == Outcome::Done) {
		if (f.program && f.node + 1 < f.program->nodes.size())
			return next_node(l, q);
		complete_command(l, q);
		return Step::Progress;
	}
	if (out.kind == Outcome::Fault)
		fault_inflight(l, q, out.code, out.reason);
	if (out.kind != Outcome::Preempted)
		finish_command(l);
	return Step::Progress;
}

bool Engine::should_yield(const LogicalCore &self, const Queue &q) const
{
	if (stop_.load(std::memory_order_relaxed) || reset_pending_.load(std::memory_order_relaxed) ||
	    sched_.generation() != generation_ ||
	    sched_.switch_pending(sched_core_) || q.tenant().memory().writer_waiting())
		return true;
	for (const auto &l : eligible_)
		if (l.get() != &self && l->claimed_by() < 0 && l->runnable())
			return true;
	return false;
}

void Engine::count_tile(LogicalCore &l, uint64_t wall_ns) const
{
	progress_ns_.store(monotonic_ns(), std::memory_order_relaxed);
	counters_.tiles.fetch_add(1, std::memory_order_relaxed);
	l.tiles.fetch_add(1, std::memory_order_relaxed);
	store_max(counters_.max_tile_ns, wall_ns);
}

// Telemetry of one unit of a tiled command (a tile, a tile group, a prefault
// step): the tile-bound histograms are for tiled commands only.
void Engine::record_tile(LogicalCore &l, uint64_t wall_ns, uint64_t cpu_ns, bool is_tile) const
{
	if (is_tile) {
		count_tile(l, wall_ns);
	} else {
		progress_ns_.store(monotonic_ns(), std::memory_order_relaxed);
		store_max(counters_.max_tile_ns, wall_ns);
	}
	counters_.tile_ns.record(wall_ns);
	counters_.tile_cpu_ns.record(cpu_ns);
	store_max(counters_.max_tile_cpu_ns, cpu_ns);
	if (cpu_ns > 1'000'000)
		counters_.tiles_over_1ms_cpu.fetch_add(1, std::memory_order_relaxed);
}

// Charges `wall_ns` of this core's time to l: utilisation and fair share.
void Engine::charge(LogicalCore &l, uint64_t wall_ns)
{
	counters_.busy_ns.fetch_add(wall_ns);
	counters_.running_since_ns.store(0);
	sched_.record_turn(wall_ns);
	counters_.last_tenant.store(l.tenant(), std::memory_order_relaxed);
	counters_.last_pool.store(static_cast<uint8_t>(l.pool()), std::memory_order_relaxed);
	l.busy_ns.fetch_add(wall_ns, std::memory_order_relaxed);
	const uint64_t v = l.vtime.load(std::memory_order_relaxed) + wall_ns * 1024 / l.weight();
	l.vtime.store(v, std::memory_order_relaxed);
	store_max(sched_.class_clock(l.pool()), v);
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
	// A next command blocked on another queue: also wake when that queue reaches
	// the value the command waits for (a targeted waiter, ring.h: not at every one
	// of its completions; a D2H copy queued behind a hundred kernels woke the DMA
	// engine a hundred times). The re-check below closes the race.
	blockers_.clear();
	bool pending = false;
	for (const auto &q : watched_) {
		if (n == kMax) {
			truncated = true;
			break;
		}
		uint64_t value = 0;
		std::shared_ptr<Queue> peer = q->blocking_peer(&value);
		if (!peer)
			continue;
		const uint32_t word = peer->ring().announce_waiter(value);
		waiters[n++] = {word, reinterpret_cast<uintptr_t>(peer->completed_word()), FUTEX_32, 0};
		blockers_.push_back(std::move(peer));
		// Reset by a wake-up for an earlier value since: do not sleep on it, the
		// next pass registers again.
		if (!blockers_.back()->ring().target_registered(value))
			pending = true;
	}
	// Re-check after announcing sleep: a tenant that published before it could see
	// the announcement has its command seen here.
	for (const auto &l : eligible_)
		if (l->claimed_by() < 0 && l->runnable()) {
			pending = true;
			break;
		}
	if (!pending && sched_.generation() == generation_ && !sched_.switch_pending(sched_core_) &&
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

} // namespace neuron::sched
