#include "emu_runner.h"

#include <backend/queue.h>
#include <backend/tenant_context.h>
#include <chip/prefault.h>
#include <gate/admit.h>
#include <sched/chain_partials.h>
#include <sched/thread_priority.h>
#include <tile/execution.h>

#include <gemm_packs.h>
#include <geometry.h>
#include <neuron/futex.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <shared_mutex>

namespace neuron::emu {

using detail::monotonic_ns;
using sched::InFlight;
using sched::LogicalCore;
using sched::Outcome;
using sched::RunContext;

namespace {

// What the tiles of one command share, in host memory: a matmul's packed operand
// blocks, the chains' partial results, and the pages to back before they run.
struct EmuState final : sched::RunnerState {
	kernels::GemmPacks packs;
	sched::ChainPartials partials;
	chip::Prefault prefault;
	// A TILE_KERNEL node: where its tile program stands and its on-chip memory,
	// kept across its steps (and across preemptions, as the core's state).
	std::unique_ptr<tile::Execution> kernel;
};

EmuState &state(const InFlight &f) { return static_cast<EmuState &>(*f.state); }

uint64_t thread_cpu_ns()
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return uint64_t(t.tv_sec) * 1000000000ull + uint64_t(t.tv_nsec);
}

void store_max(std::atomic<uint64_t> &m, uint64_t v)
{
	uint64_t cur = m.load(std::memory_order_relaxed);
	while (cur < v && !m.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
	}
}

// Tile `index` of a TILE_KERNEL node: its next step (one loop iteration of the
// kernel) over the node's operands, which are the kernel's HBM arguments. The
// chain runs in order, so the tile is always the step the kernel stands at.
Outcome run_kernel_step(tile::Execution &kernel, uint64_t index, const gate::Operands &ops)
{
	if (index != kernel.steps_run() || kernel.done())
		return Outcome::fault(NEURON_FAULT_EXEC, "internal error: tile kernel step " + std::to_string(index) +
								 " run out of order (at step " +
								 std::to_string(kernel.steps_run()) + ")");
	std::byte *args[NEURON_MAX_OPERANDS];
	for (int k = 0; k < NEURON_MAX_OPERANDS; ++k)
		args[k] = ops.views[k].data;
	kernel.step(std::span(args, kernel.arg_count()));
	return Outcome::of(Outcome::Done);
}

// Runs tile `index` of the in-flight command on the calling thread with `threads`
// host threads. Any tile thread may call it; it touches only the command (read),
// the tenant's memory (shared lock) and the shared EmuState (thread-safe).
Outcome run_tile(const InFlight &f, const RunContext &ctx, uint64_t index, int threads, uint64_t *wall_ns)
{
	// CPU time only for tiles of tiled commands: it is a system call (~1 us here),
	// too dear for every small command.
	const bool tiled = f.plan.tiles > 1;
	const uint64_t cpu_start = tiled ? thread_cpu_ns() : 0;
	const uint64_t start = monotonic_ns();
	{
		backend::Queue &q = ctx.queue;
		backend::TenantMemory &m = q.tenant().memory();
		std::shared_lock lock(m.mutex);
		if (q.retired())
			return Outcome::of(Outcome::Ended);
		// Again per tile: the memory lock was dropped since the last one, and the
		// tenant may have freed an operand in between.
		gate::Operands ops;
		if (auto flt = gate::resolve(f.cmd, q.kind() == backend::QueueKind::Dma, m.space(q.device()), &ops))
			return Outcome::fault(std::move(*flt));
		EmuState &s = state(f);
		if (s.kernel) {
			if (auto out = run_kernel_step(*s.kernel, index, ops); out.kind != Outcome::Done)
				return out;
		} else {
			neuron_cmd tile = f.cmd;
			if (tiled)
				sched::narrow_to_tile(f.plan, index, tile, ops.views);
			if (auto flt = sched::execute_tile(s.partials, f.plan, index, tile, ops.views, threads, &s.packs))
				return Outcome::fault(std::move(*flt));
		}
	}
	*wall_ns = monotonic_ns() - start;
	if (tiled)
		ctx.record_tile(*wall_ns, thread_cpu_ns() - cpu_start);
	return Outcome::of(Outcome::Done);
}

// One step of a TILE_KERNEL node on the calling thread, under the tenant's memory
// lock (its operands resolved again: the tenant may have freed one since the last
// step): the kernel's next step (lane < 0) or the next step of one of its lanes
// (*lane_done: that lane has no iteration left). Timed as a tile.
Outcome kernel_step(const InFlight &f, const RunContext &ctx, tile::Execution &kernel, int lane, bool *lane_done,
		    uint64_t *wall_ns)
{
	const uint64_t cpu_start = thread_cpu_ns();
	const uint64_t start = monotonic_ns();
	{
		backend::Queue &q = ctx.queue;
		backend::TenantMemory &m = q.tenant().memory();
		std::shared_lock lock(m.mutex);
		if (q.retired())
			return Outcome::of(Outcome::Ended);
		gate::Operands ops;
		if (auto flt = gate::resolve(f.cmd, q.kind() == backend::QueueKind::Dma, m.space(q.device()), &ops))
			return Outcome::fault(std::move(*flt));
		std::byte *args[NEURON_MAX_OPERANDS];
		for (int k = 0; k < NEURON_MAX_OPERANDS; ++k)
			args[k] = ops.views[k].data;
		const std::span<std::byte *const> a(args, kernel.arg_count());
		if (lane < 0)
			kernel.step(a);
		else
			*lane_done = kernel.step_lane(static_cast<size_t>(lane), a);
	}
	*wall_ns = monotonic_ns() - start;
	ctx.record_tile(*wall_ns, thread_cpu_ns() - cpu_start);
	return Outcome::of(Outcome::Done);
}

// One step of backing a tiled command's pages (prefault.h); false when the chunk
// is done. Timed like a tile: the core cannot change tenants during it either.
bool run_prefault_step(chip::Prefault::Chunk &chunk, const RunContext &ctx, uint64_t *wall_ns)
{
	const uint64_t cpu_start = thread_cpu_ns();
	const uint64_t start = monotonic_ns();
	if (!chunk.step())
		return false;
	*wall_ns = monotonic_ns() - start;
	ctx.record_tile(*wall_ns, thread_cpu_ns() - cpu_start, false);
	return true;
}

} // namespace

std::optional<kernels::Fault> EmuRunner::begin(LogicalCore &, InFlight &f, const RunContext &ctx)
{
	auto s = std::make_unique<EmuState>();
	if (f.cmd.opcode == NEURON_OP_TILE_KERNEL) {
		const uint64_t t = static_cast<uint64_t>(f.cmd.iscalars[0]);
		if (!f.program || t >= f.program->tiles.size())
			return kernels::Fault{NEURON_FAULT_BAD_OPCODE, "tile_kernel runs only as a node of a program"};
		try {
			// Lanes (one per host thread) only for a kernel of several steps: a
			// one-tile command runs whole (run_whole), never forked.
			const int lanes = f.plan.tiles > 1 ? ctx.threads : 1;
			s->kernel = std::make_unique<tile::Execution>(f.program->tiles[t], lanes);
		} catch (const std::bad_alloc &) {
			return kernels::Fault{NEURON_FAULT_EXEC, "no host memory for the kernel's on-chip memory"};
		}
		f.state = std::move(s);
		return std::nullopt;
	}
	try {
		s->packs.reserve(sched::pack_floats(f.cmd, f.plan)); // 0 unless a tiled matmul
	} catch (const std::bad_alloc &) {
		s->packs.clear(); // no arena: blocks get buffers of their own, or none
	}
	if (f.plan.tiles > 1) {
		// The output's host address, for the pages to back before the tiles.
		backend::TenantMemory &m = ctx.queue.tenant().memory();
		std::shared_lock lock(m.mutex);
		gate::Operands ops;
		if (!gate::resolve(f.cmd, ctx.queue.kind() == backend::QueueKind::Dma, m.space(ctx.queue.device()), &ops)) {
			const size_t out_bytes = kernels::byte_extent(f.cmd.operands[0]).value_or(0);
			s->prefault.reset({ops.views[0].data, out_bytes}, {s->packs.arena(), s->packs.arena_bytes()});
		}
	}
	f.state = std::move(s);
	return std::nullopt;
}

// A command that is one tile: run whole, on all of the core's host threads.
Outcome EmuRunner::run_whole(LogicalCore &, InFlight &f, const RunContext &ctx, uint64_t *wall_ns)
{
	return run_tile(f, ctx, 0, ctx.threads, wall_ns);
}

// A tiled command: the core's host threads each run whole tiles, one thread per
// tile (tile_cursor.h), until the command is done or someone else waits for the
// core. Adaptive: while nobody waits, tile follows tile with no trip through the
// scheduler, so a tenant alone runs its op as if untiled; once someone waits, every
// thread stops after its running tile, so the core is theirs within one tile.
namespace {

// The lanes of a forked kernel loop on up to ctx.threads host threads: each thread
// claims a lane nobody runs and runs its steps until the lane is done (then claims
// another) or someone waits for the core (*stop; the lanes keep their place for the
// next turn, on any threads).
Outcome run_kernel_lanes(const InFlight &f, const RunContext &ctx, tile::Execution &kernel, std::atomic<bool> &stop,
			 std::atomic<uint64_t> &longest)
{
	const size_t lanes = kernel.lanes();
	std::vector<std::atomic<bool>> taken(lanes);
	size_t open = 0;
	for (size_t k = 0; k < lanes; ++k)
		open += !kernel.lane_done(k);
	std::mutex mutex; // guards first_error
	Outcome first_error;
	auto worker = [&] {
		try {
			for (size_t k = 0; k < lanes && !stop.load(std::memory_order_relaxed); ++k) {
				if (taken[k].exchange(true) || kernel.lane_done(k))
					continue;
				bool done = false;
				while (!done && !stop.load(std::memory_order_relaxed)) {
					uint64_t dt = 0;
					const Outcome out = kernel_step(f, ctx, kernel, static_cast<int>(k), &done, &dt);
					if (out.kind != Outcome::Done) {
						std::lock_guard lock(mutex);
						if (first_error.kind == Outcome::Done)
							first_error = out;
						stop.store(true, std::memory_order_relaxed);
						break;
					}
					store_max(longest, dt);
					if (ctx.yield())
						stop.store(true, std::memory_order_relaxed);
				}
			}
		} catch (...) {
			std::lock_guard lock(mutex);
			if (first_error.kind == Outcome::Done)
				first_error = Outcome::fault(NEURON_FAULT_EXEC, "internal error while running a tile");
			stop.store(true, std::memory_order_relaxed);
		}
	};
	const int threads = static_cast<int>(std::clamp<uint64_t>(open, 1, static_cast<uint64_t>(ctx.threads)));
	if (threads == 1) {
		worker();
	} else {
#pragma omp parallel num_threads(threads)
		{
			sched::set_thread_nice(ctx.nice);
			worker();
		}
	}
	return first_error;
}

// A TILE_KERNEL node's steps (its one chain of tiles): in order on this thread, and
// a forked loop's lanes on the core's host threads, until the kernel ends or
// someone waits for the core (then the chain is parked at the steps run so far).
Outcome run_kernel_tiles(InFlight &f, const RunContext &ctx, tile::Execution &kernel, uint64_t *longest_ns)
{
	std::optional<sched::TileCursor::Claim> c = f.tiles.claim();
	if (!c)
		return Outcome::of(f.tiles.done() ? Outcome::Done : Outcome::Preempted);
	std::atomic<bool> stop{false};
	std::atomic<uint64_t> longest{0};
	Outcome out;
	while (!stop.load(std::memory_order_relaxed) && !kernel.done()) {
		if (kernel.forked()) {
			out = run_kernel_lanes(f, ctx, kernel, stop, longest);
			if (out.kind != Outcome::Done)
				break;
			bool all = true;
			for (size_t k = 0; k < kernel.lanes(); ++k)
				all = all && kernel.lane_done(k);
			if (all)
				kernel.join();
			continue;
		}
		uint64_t dt = 0;
		try {
			out = kernel_step(f, ctx, kernel, -1, nullptr, &dt);
		} catch (...) { // nothing should throw; if something does, the queue faults
			out = Outcome::fault(NEURON_FAULT_EXEC, "internal error while running a tile");
		}
		if (out.kind != Outcome::Done)
			break;
		store_max(longest, dt);
		if (ctx.yield())
			stop.store(true, std::memory_order_relaxed);
	}
	*longest_ns = longest.load(std::memory_order_relaxed);
	if (out.kind == Outcome::Done && kernel.done()) {
		f.tiles.finish();
		return out;
	}
	c->next = std::min<uint64_t>(kernel.steps_run(), f.tiles.chain_length() - 1);
	f.tiles.park(*c);
	return out.kind == Outcome::Done ? Outcome::of(Outcome::Preempted) : out;
}

} // namespace

Outcome EmuRunner::run_tiles(LogicalCore &, InFlight &f, const RunContext &ctx, uint64_t *longest_ns)
{
	if (EmuState &ks = state(f); ks.kernel)
		return run_kernel_tiles(f, ctx, *ks.kernel, longest_ns);
	std::mutex mutex; // guards first_error
	Outcome first_error;
	std::atomic<bool> stop{false};
	std::atomic<uint64_t> longest{0};
	EmuState &s = state(f);
	auto worker = [&] {
		try {
			// The pages the tiles will write first, so that no tile pays their faults.
			while (!stop.load(std::memory_order_relaxed)) {
				const auto range = s.prefault.claim();
				if (!range)
					break;
				chip::Prefault::Chunk chunk(*range);
				uint64_t dt = 0;
				while (!stop.load(std::memory_order_relaxed) && run_prefault_step(chunk, ctx, &dt)) {
					store_max(longest, dt);
					if (ctx.yield())
						stop.store(true, std::memory_order_relaxed);
				}
				s.prefault.give_back(chunk.rest());
			}
			std::optional<sched::TileCursor::Claim> c;
			while (!stop.load(std::memory_order_relaxed)) {
				if (!c && !(c = f.tiles.claim()))
					break; // every chain is claimed or done
				uint64_t dt = 0;
				const Outcome out = run_tile(f, ctx, f.tiles.tile_index(*c), 1, &dt);
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
				if (ctx.yield())
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
		static_cast<int>(std::clamp<uint64_t>(f.tiles.claimable(), 1, static_cast<uint64_t>(ctx.threads)));
	if (threads == 1) {
		worker();
	} else {
#pragma omp parallel num_threads(threads)
		{
			sched::set_thread_nice(ctx.nice); // the pool's threads follow the engine's
			worker();
		}
	}
	*longest_ns = longest.load(std::memory_order_relaxed);
	if (first_error.kind != Outcome::Done)
		return first_error;
	return Outcome::of(f.tiles.done() ? Outcome::Done : Outcome::Preempted);
}

} // namespace neuron::emu
