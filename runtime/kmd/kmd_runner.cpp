#include "kmd_runner.h"

#include "dma_run.h"
#include "kmd_backend.h"
#include "kmd_tenant.h"
#include "tile_job.h"

#include <backend/queue.h>
#include <gate/admit.h>
#include <sched/chain_partials.h>
#include <program/program.h>
#include <tile/execution.h>

#include <geometry.h>
#include <neuron/futex.h>

#include <drm/neuron_accel.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <shared_mutex>

namespace neuron::kmd {

using sched::InFlight;
using sched::LogicalCore;
using sched::Outcome;
using sched::RunContext;

namespace {

// What a command's jobs share on this backend: the device memory that holds its
// chains' state between jobs (none for commands whose chains carry nothing), or
// a tile kernel's program and saved state (kernel_job.h).
struct KmdState final : sched::RunnerState {
	KmdTenant *tenant = nullptr;
	uint32_t device = 0;
	DeviceBuffer scratch; // handle 0: none
	uint64_t slot_bytes = 0, chains = 0;
	bool kernel = false;                         // TILE_KERNEL: scratch = program, then state
	uint64_t program_bytes = 0, kernel_state_offset = 0, kernel_state_bytes = 0;
	backend::QueueProgress *progress = nullptr; // the queue's kept record (restart survival), or null
	~KmdState() override
	{
		if (tenant && scratch.handle) {
			// Forgotten by the record first: a new neurond must never close a
			// handle the driver may have given to a later BO.
			if (progress)
				std::atomic_ref<uint32_t>(progress->scratch).store(0, std::memory_order_release);
			try {
				tenant->free_scratch(device, scratch);
			} catch (const Error &) {
				// The file may be closed already (tenant gone): the kernel freed it.
			}
		}
	}
};

KmdTenant &tenant_of(const backend::Queue &q) { return static_cast<KmdTenant &>(q.tenant()); }

// How long a job may take before the engine gives up on it: the kernel's job
// timeout resets the core long before (this guards against a lost completion).
int64_t job_deadline(const KmdDeviceSlot &slot)
{
	return deadline_after_ms(std::max<int64_t>(slot.info().job_timeout_ms, 1000) * 3 + 5000);
}

// A job ended with -errno r: the fault its command raises.
Outcome job_failure(int r, KmdDeviceSlot &slot, const KmdContext &ctx, int core, const Fence &fence)
{
	if (r == -ETIME)
		return Outcome::fault(NEURON_FAULT_EXEC, "the driver did not complete the job in time");
	if (core >= 0)
		if (auto ef = slot.take_fault(ctx.client_id(), static_cast<uint32_t>(core), fence.job_seq))
			return Outcome::fault(ef->code, ef->reason);
	if (r == -ETIMEDOUT)
		return Outcome::fault(NEURON_FAULT_RESET, "the job overran the driver's job timeout (" +
								  std::to_string(slot.info().job_timeout_ms) +
								  " ms): the kernel reset the core and banned this tenant's context");
	if (r == -ECANCELED)
		return Outcome::fault(NEURON_FAULT_RESET,
				      "the driver cancelled the job: this tenant's context is banned after a job timeout");
	return Outcome::fault(errno_to_fault(r), std::string(core >= 0 ? "compute" : "DMA") +
							 " job failed in the driver: " + std::strerror(-r));
}

// An ioctl the runner relies on failed: the command cannot go on (its queue faults).
Outcome driver_error(const Error &e)
{
	if (e.code() == ECANCELED)
		return Outcome::fault(NEURON_FAULT_RESET, std::string("this tenant's driver context is banned after a job "
								      "overran the job timeout; reconnect to get a new one (") +
								  e.what() + ")");
	return Outcome::fault(NEURON_FAULT_EXEC, std::string("kmd backend: ") + e.what());
}

// The job's BO list: every operand's buffer with how the command uses it.
void add_bos(const neuron_cmd &cmd, const gate::Operands &ops, std::vector<JobBo> *bos)
{
	const int written = kernels::written_operands(cmd);
	for (int k = 0; k < cmd.num_operands; ++k) {
		const uint32_t h = ops.where[k].handle;
		if (!h)
			continue; // no bytes
		const bool out = k < written;
		auto it = std::find_if(bos->begin(), bos->end(), [&](const JobBo &b) { return b.handle == h; });
		if (it == bos->end()) {
			bos->push_back({h, !out, out});
			continue;
		}
		it->read |= !out;
		it->write |= out;
	}
}

} // namespace

// --- NeuronCore ------------------------------------------------------------------

namespace {

// A TILE_KERNEL node: one BO of the tenant's file holds its tile program (the
// wire form, which the engine validates) and, for a kernel of several steps,
// the state it saves between them (cursor, SBUF/PSUM bytes it uses). The program
// goes in once, by DMA, before the first job.
std::optional<kernels::Fault> begin_kernel(KmdState &s, const InFlight &f, const RunContext &ctx)
{
	const uint64_t t = static_cast<uint64_t>(f.cmd.iscalars[0]);
	if (!f.program || t >= f.program->tiles.size())
		return kernels::Fault{NEURON_FAULT_BAD_OPCODE, "tile_kernel runs only as a node of a program"};
	const tile::TileProgram &tp = *f.program->tiles[t];
	const std::vector<std::byte> wire = tile::serialize(tp.arg_bytes, tp.insns);
	s.kernel = true;
	s.program_bytes = wire.size();
	s.kernel_state_offset = (wire.size() + 63) & ~uint64_t{63};
	s.kernel_state_bytes = f.plan.tiles > 1 ? tile::Execution::state_bytes(tp) : 0;
	const uint64_t total = s.kernel_state_offset + s.kernel_state_bytes;
	KmdTenant &tenant = *s.tenant;
	try {
		s.scratch = tenant.alloc_scratch(s.device, total);
		// Restart survival, as for chain state: the record names the BO at once.
		s.progress = ctx.queue.progress();
		if (s.progress)
			std::atomic_ref<uint32_t>(s.progress->scratch).store(s.scratch.handle, std::memory_order_release);
		std::shared_lock lock(tenant.memory().mutex);
		if (ctx.queue.retired())
			return std::nullopt; // its first job ends it
		tenant.fill_scratch(s.device, s.scratch, wire);
	} catch (const Error &e) {
		return kernels::Fault{NEURON_FAULT_EXEC, "cannot place the tile kernel's program and state (" +
								 std::to_string(total) + " bytes) in device memory: " +
								 e.what()};
	}
	return std::nullopt;
}

} // namespace

std::optional<kernels::Fault> KmdCoreRunner::begin(LogicalCore &, InFlight &f, const RunContext &ctx)
{
	auto s = std::make_unique<KmdState>();
	s->tenant = &tenant_of(ctx.queue);
	s->device = device_;
	if (f.cmd.opcode == NEURON_OP_TILE_KERNEL) {
		auto flt = begin_kernel(*s, f, ctx);
		f.state = std::move(s); // its BO, if any, is freed with it
		return flt;
	}
	const uint64_t slot = f.plan.tiles > 1 ? sched::chain_state_bytes(f.cmd, f.plan) : 0;
	if (slot) {
		s->slot_bytes = slot;
		s->chains = f.plan.tiles / sched::chain_length(f.plan);
		try {
			s->scratch = s->tenant->alloc_scratch(device_, slot * s->chains);
		} catch (const Error &e) {
			return kernels::Fault{NEURON_FAULT_EXEC, "cannot allocate " + std::to_string(slot * s->chains) +
									 " bytes of device memory for the command's chain state: " +
									 e.what()};
		}
		// Restart survival: the kept file would hold this BO after a kill; the
		// record names it so that the next neurond frees it.
		s->progress = ctx.queue.progress();
		if (s->progress)
			std::atomic_ref<uint32_t>(s->progress->scratch).store(s->scratch.handle, std::memory_order_release);
	}
	f.state = std::move(s);
	return std::nullopt;
}

void KmdCoreRunner::end(InFlight &f) { f.state.reset(); }

namespace {

// Submits `entries` (of the in-flight command) as one compute job on `core` and
// waits for it, holding the tenant's memory lock shared throughout.
Outcome run_job(KmdBackend &backend, uint32_t device, uint32_t core, const InFlight &f, const RunContext &ctx,
		std::vector<TileJobEntry> &entries, uint32_t threads, uint64_t *wall_ns)
{
	const uint64_t start = detail::monotonic_ns();
	backend::Queue &q = ctx.queue;
	KmdTenant &t = tenant_of(q);
	const KmdState &s = static_cast<const KmdState &>(*f.state);
	std::shared_lock lock(t.memory().mutex);
	if (q.retired())
		return Outcome::of(Outcome::Ended);
	// Again per job: the lock was dropped since the last one, and the tenant may
	// have freed an operand in between.
	gate::Operands ops;
	if (auto flt = gate::resolve(f.cmd, false, t.memory().space(device), &ops))
		return Outcome::fault(std::move(*flt));
	std::vector<JobBo> bos;
	add_bos(f.cmd, ops, &bos);
	if (s.scratch.handle)
		bos.push_back({s.scratch.handle, true, true});
	TileJobWriter job(threads);
	for (TileJobEntry &e : entries) {
		e.cmd.wait = {}; // honoured by the gate at admission
		if (s.kernel) {
			const uint64_t at = KmdTenant::address_of(s.scratch);
			e.flags |= kTileKernel;
			e.program_address = at;
			e.program_bytes = s.program_bytes;
			if (s.kernel_state_bytes) {
				e.state_address = at + s.kernel_state_offset;
				e.state_slot_bytes = s.kernel_state_bytes;
				e.state_chains = 1;
			}
		} else if (s.scratch.handle) {
			e.state_address = KmdTenant::address_of(s.scratch);
			e.state_slot_bytes = s.slot_bytes;
			e.state_chains = s.chains;
		}
		job.add(e);
	}
	KmdDeviceSlot &slot = backend.slot(device);
	try {
		t.allow_core(device, core);
		KmdContext &kctx = t.context(device);
		const std::vector<std::byte> payload = job.bytes();
		const Fence fence = kctx.compute(core, std::span<const std::byte>(payload), bos);
		const int r = kctx.wait(fence, job_deadline(slot));
		*wall_ns = detail::monotonic_ns() - start;
		if (r != 0)
			return job_failure(r, slot, kctx, static_cast<int>(core), fence);
	} catch (const Error &e) {
		return driver_error(e);
	}
	return Outcome::of(Outcome::Done);
}

TileJobEntry entry_for(const InFlight &f, const RunContext &ctx, uint64_t tile)
{
	TileJobEntry e{};
	e.cmd = f.cmd;
	e.tile = tile;
	e.matmul_macs = ctx.budget.matmul_macs;
	e.elements = ctx.budget.elements;
	e.transcendental_elements = ctx.budget.transcendental_elements;
	e.flags = ctx.budget.chain_partials ? kChainPartials : 0;
	return e;
}

} // namespace

Outcome KmdCoreRunner::run_whole(LogicalCore &, InFlight &f, const RunContext &ctx, uint64_t *wall_ns)
{
	std::vector<TileJobEntry> entries{entry_for(f, ctx, kWholeCommand)};
	return run_job(backend_, device_, core_, f, ctx, entries, static_cast<uint32_t>(ctx.threads), wall_ns);
}

// A tiled command: groups of tiles, one per host thread and each of its own chain,
// go out as one job after another until the command is done or someone else
// waits for the core. The claimed chains carry on in the next group (their tiles
// run in order); on a switch they are parked for whoever resumes the command.
Outcome KmdCoreRunner::run_tiles(LogicalCore &, InFlight &f, const RunContext &ctx, uint64_t *longest_ns)
{
	std::vector<sched::TileCursor::Claim> claims;
	Outcome out = Outcome::of(Outcome::Done);
	for (;;) {
		while (claims.size() < static_cast<size_t>(std::max(ctx.threads, 1)))
			if (auto c = f.tiles.claim())
				claims.push_back(*c);
			else
				break;
		if (claims.empty())
			break; // every chain is done
		std::vector<TileJobEntry> entries;
		for (const auto &c : claims)
			entries.push_back(entry_for(f, ctx, f.tiles.tile_index(c)));
		uint64_t wall = 0;
		out = run_job(backend_, device_, core_, f, ctx, entries, static_cast<uint32_t>(ctx.threads), &wall);
		if (out.kind != Outcome::Done)
			return out; // the command ends: its claims with it
		*longest_ns = std::max(*longest_ns, wall);
		// The job's tiles ran side by side: each took the job's wall time, which is
		// also the CPU time the engine spent on it (its threads are the device's).
		for (size_t i = 0; i < entries.size(); ++i)
			ctx.record_tile(wall, wall);
		std::erase_if(claims, [&](sched::TileCursor::Claim &c) {
			if (++c.next < f.tiles.chain_length())
				return false;
			f.tiles.finish();
			return true;
		});
		if (ctx.yield())
			break;
	}
	for (const auto &c : claims)
		f.tiles.park(c);
	return Outcome::of(f.tiles.done() ? Outcome::Done : Outcome::Preempted);
}

// --- DMA -------------------------------------------------------------------------

Outcome KmdDmaRunner::run_whole(LogicalCore &, InFlight &f, const RunContext &ctx, uint64_t *wall_ns)
{
	const uint64_t start = detail::monotonic_ns();
	backend::Queue &q = ctx.queue;
	KmdTenant &t = tenant_of(q);
	std::shared_lock lock(t.memory().mutex);
	if (q.retired())
		return Outcome::of(Outcome::Ended);
	if (f.cmd.opcode == NEURON_OP_NOP) {
		*wall_ns = detail::monotonic_ns() - start;
		return Outcome::of(Outcome::Done);
	}
	gate::Operands ops;
	if (auto flt = gate::resolve(f.cmd, true, t.memory().space(device_), &ops))
		return Outcome::fault(std::move(*flt));
	std::vector<DmaCopy> copies;
	if (auto flt = build_dma_runs(f.cmd, ops, &copies))
		return Outcome::fault(std::move(*flt));
	// Host buffers the driver holds a copy of (staged): in before, out after.
	auto staged = [&](int k) -> const HostBuffer * {
		const neuron_tensor_desc &d = f.cmd.operands[k];
		if (d.mem_space != NEURON_MEM_HOST)
			return nullptr;
		const HostBuffer *hb = t.host_import(d.host_buffer, device_);
		return hb && hb->kind == HostKind::Staged ? hb : nullptr;
	};
	KmdDeviceSlot &slot = backend_.slot(device_);
	try {
		KmdContext &kctx = t.context(device_);
		const uint64_t out_bytes = kernels::byte_extent(f.cmd.operands[0]).value_or(0);
		const uint64_t in_bytes = kernels::byte_extent(f.cmd.operands[1]).value_or(0);
		if (const HostBuffer *in = staged(1); in && in_bytes)
			kctx.stage_in(*in, f.cmd.operands[1].addr, in_bytes);
		const uint32_t queues = std::max<uint32_t>(slot.info().num_dma_queues, 1);
		const uint32_t kq = static_cast<uint32_t>(q.id() % queues);
		for (size_t off = 0; off < copies.size(); off += DRM_NEURON_MAX_DMA_COPIES) {
			const size_t n = std::min<size_t>(DRM_NEURON_MAX_DMA_COPIES, copies.size() - off);
			const Fence fence = kctx.dma(kq, std::span(copies.data() + off, n));
			if (const int r = kctx.wait(fence, job_deadline(slot)); r != 0)
				return job_failure(r, slot, kctx, -1, fence);
		}
		if (const HostBuffer *out = staged(0); out && out_bytes)
			kctx.stage_out(*out, f.cmd.operands[0].addr, out_bytes);
	} catch (const Error &e) {
		return driver_error(e);
	}
	*wall_ns = detail::monotonic_ns() - start;
	return Outcome::of(Outcome::Done);
}

Outcome KmdDmaRunner::run_tiles(LogicalCore &, InFlight &, const RunContext &, uint64_t *)
{
	return Outcome::fault(NEURON_FAULT_EXEC, "internal error: a DMA command was cut into tiles");
}

} // namespace neuron::kmd
