#include "kmd_pump.h"

#include "kmd_dma_run.h"
#include "kmd_fault_text.h"
#include "log.h"

#include <geometry.h>
#include <kernels.h>
#include <neuron/futex.h>

#include <drm/neuron_accel.h>

#include <cstring>
#include <shared_mutex>

namespace neuron::daemon {

using kernels::Fault;
using namespace kmd_fault_text;

namespace {

// The work limits every backend applies (kernels/geometry.h).
std::optional<Fault> check_work(const neuron_cmd &cmd)
{
	for (int k = 0; k < cmd.num_operands; ++k)
		if (kernels::numel(cmd.operands[k]) > kernels::kMaxElementsPerOperand)
			return make_fault(NEURON_FAULT_BAD_OPERAND,
					  "operand " + std::to_string(k) + " has more than 2^32 elements; split the work");
	if (kernels::command_work(cmd) > kernels::kMaxCommandWork)
		return make_fault(NEURON_FAULT_BAD_OPERAND,
				  "command needs more than 2^37 element operations; split it (e.g. a matmul into blocks)");
	return std::nullopt;
}

} // namespace

// --- pump -------------------------------------------------------------------------

KmdPump::KmdPump(std::shared_ptr<chip::Queue> queue, std::shared_ptr<KmdMemory> memory, KmdChip &chip,
		 std::shared_ptr<KmdPumpDirectory> peers, KmdFaultHook on_fault)
	: queue_(std::move(queue)), memory_(std::move(memory)), chip_(chip), peers_(std::move(peers)),
	  on_fault_(std::move(on_fault))
{
	client_id_ = context().client_id();
	thread_ = std::thread([this] { run(); });
}

KmdPump::~KmdPump() { stop(); }

void KmdPump::stop()
{
	stop_.store(true, std::memory_order_release);
	if (thread_.joinable())
		thread_.join();
}

KmdPump::Await KmdPump::fence_for(uint64_t value, kmd::Fence *fence) const
{
	if (queue_->completed() >= value)
		return Await::Done;
	std::lock_guard lock(mutex_);
	for (const Job &j : inflight_)
		if (j.commands && j.first_seq <= value && value < j.first_seq + j.commands && j.fence.valid()) {
			*fence = j.fence;
			return Await::InFlight;
		}
	return queue_->completed() >= value ? Await::Done : Await::NotYet;
}

void KmdPump::push(Job j)
{
	std::lock_guard lock(mutex_);
	inflight_.push_back(std::move(j));
}

void KmdPump::run()
{
	while (!stop_.load(std::memory_order_acquire) && !queue_->retired()) {
		try {
			bool progress = reap();
			progress |= feed();
			if (!progress)
				sleep_for_work();
		} catch (const kmd::Error &e) {
			// An ioctl the pump relies on failed: this queue cannot go on; the
			// daemon and other queues do. The first command not completed carries it.
			if (e.code() == ECANCELED)
				raise(NEURON_FAULT_RESET, queue_->completed() + 1, 0,
				      std::string("this tenant's driver context is banned after a job overran the job "
						  "timeout; reconnect to get a new one (") + e.what() + ")");
			else
				raise(NEURON_FAULT_EXEC, queue_->completed() + 1, 0, std::string("kmd backend: ") + e.what());
		} catch (const std::exception &e) {
			raise(NEURON_FAULT_EXEC, queue_->completed() + 1, 0, std::string("kmd backend: ") + e.what());
		}
	}
}

void KmdPump::sleep_for_work()
{
	kmd::Fence oldest;
	{
		std::lock_guard lock(mutex_);
		for (const Job &j : inflight_)
			if (j.fence.valid()) {
				oldest = j.fence;
				break;
			}
	}
	if (oldest.valid()) {
		// A job in flight: its completion is the next event (new ring commands
		// are picked up within the slice).
		context().wait(oldest, kmd::deadline_after_ms(2));
		return;
	}
	if (stop_.load(std::memory_order_acquire))
		return;
	// Bounded: stop() and a held wait (another queue's progress) are noticed
	// within it. Halted or held, new commands are no reason to wake.
	const struct timespec slice = {0, held_ ? 1'000'000 : 5'000'000};
	queue_->ring().sleep_for_commands(halted_ || held_ ? UINT64_MAX : submitted_, slice);
}

void KmdPump::raise(uint32_t code, uint64_t seq, uint64_t tag, const std::string &reason)
{
	halted_ = true;
	{
		std::lock_guard lock(mutex_);
		inflight_.clear(); // later jobs' completions are not published after a fault
	}
	if (queue_->faulted())
		return;
	queue_->fault(code, seq, tag, reason);
	NLOG_WARN("queue.fault", "queue=" + std::to_string(queue_->id()) + " device=" + std::to_string(queue_->device()) +
					 " core=" + std::to_string(queue_->core()) + " backend=kmd code=" +
					 std::to_string(code) + " seq=" + std::to_string(seq) + " reason=\"" + reason + "\"");
	if (on_fault_)
		on_fault_(*queue_, code, seq, reason);
}

bool KmdPump::reap()
{
	bool progress = false;
	for (;;) {
		Job j;
		{
			std::lock_guard lock(mutex_);
			if (inflight_.empty())
				return progress;
			j = inflight_.front();
		}
		if (j.fault) {
			raise(j.fault->code, j.seqs.at(0), j.tags.at(0), j.fault->message);
			return true;
		}
		if (j.fence.valid()) {
			const int r = context().poll(j.fence);
			if (r == 0)
				return progress;
			if (r < 0) {
				uint32_t code = kmd::errno_to_fault(r);
				uint32_t index = 0;
				std::string reason;
				std::optional<kmd::EngineJobFault> ef;
				if (j.kernel_queue >= 0)
					ef = chip_.take_fault(client_id_, static_cast<uint32_t>(j.kernel_queue), j.fence.job_seq);
				if (ef) {
					code = ef->code;
					index = ef->cmd_index;
					reason = ef->reason;
				} else if (-r == ETIMEDOUT) {
					code = NEURON_FAULT_RESET;
					reason = "the job overran the driver's job timeout (" +
						 std::to_string(chip_.info().job_timeout_ms) +
						 " ms): the kernel reset the core and banned this tenant's context";
				} else if (-r == ECANCELED) {
					code = NEURON_FAULT_RESET;
					reason = "the driver cancelled the job: this tenant's context is banned after a job timeout";
				} else {
					reason = std::string(j.kernel_queue >= 0 ? "compute" : "DMA") + " job failed in the driver: " +
						 std::strerror(-r);
				}
				if (index >= j.seqs.size())
					index = 0;
				raise(code, j.seqs.at(index), j.tags.at(index), reason);
				return true;
			}
		}
		{
			// Staged host buffers: the DMA wrote the daemon's copy; hand it to the tenant.
			std::shared_lock lock(memory_->mutex);
			for (const StageOut &s : j.stage_out)
				if (auto it = memory_->host.find(s.handle); it != memory_->host.end())
					context().stage_out(it->second.per_device.at(queue_->device()), s.offset, s.size);
		}
		{
			std::lock_guard lock(mutex_);
			inflight_.pop_front();
		}
		chip::CoreCounters &k = j.kernel_queue >= 0 ? chip_.core_counters(static_cast<uint32_t>(j.kernel_queue))
							    : chip_.dma_counters();
		k.commands.fetch_add(j.commands, std::memory_order_relaxed);
		for (uint32_t i = 0; i < j.commands; ++i)
			queue_->complete_one();
		progress = true;
	}
}

std::optional<Fault> KmdPump::resolve_core(const neuron_cmd &cmd, std::vector<kmd::JobBo> *bos)
{
	const KmdMemory &m = *memory_;
	std::array<kernels::ByteRange, NEURON_MAX_OPERANDS> ranges{};
	const int written = kernels::written_operands(cmd.opcode); // operands [0, written) are outputs
	for (int k = 0; k < cmd.num_operands; ++k) {
		const neuron_tensor_desc &d = cmd.operands[k];
		if (d.mem_space == NEURON_MEM_HOST)
			return make_fault(NEURON_FAULT_BAD_OPERAND, who(k) + ": host memory can only be named on a DMA queue");
		if (d.mem_space != NEURON_MEM_DEVICE)
			return make_fault(NEURON_FAULT_BAD_OPERAND,
					  who(k) + ": mem_space " + std::to_string(d.mem_space) + " is unknown");
		if (d.host_buffer != 0)
			return make_fault(NEURON_FAULT_BAD_OPERAND, who(k) + ": host_buffer must be 0 for device memory");
		const auto extent = kernels::byte_extent(d);
		if (!extent)
			return make_fault(NEURON_FAULT_OUT_OF_BOUNDS, who(k) + ": sizes and strides reach past 2^62 bytes");
		if (*extent == 0)
			continue;
		const KmdAllocation *a = m.find(queue_->device(), d.addr, *extent);
		if (!a)
			return make_fault(NEURON_FAULT_OUT_OF_BOUNDS,
					  who(k) + ": bytes [" + hex(d.addr) + ", +" + std::to_string(*extent) + ") on device " +
						  std::to_string(queue_->device()) +
						  " are not inside one allocation of this tenant");
		ranges[k] = {d.addr, *extent};
		// The job's BO list says how it uses each BO (outputs WRITE, inputs READ);
		// the engine holds every operand to it.
		const bool out = k < written;
		bool merged = false;
		for (kmd::JobBo &b : *bos)
			if (b.handle == a->buffer.handle) {
				b.read |= !out;
				b.write |= out;
				merged = true;
			}
		if (!merged)
			bos->push_back({a->buffer.handle, !out, out});
	}
	return kernels::check_output_overlap(cmd, std::span(ranges.data(), size_t(cmd.num_operands)));
}

std::optional<Fault> KmdPump::submit_dma(const neuron_cmd &cmd, uint64_t seq)
{
	Job j;
	j.seqs = {seq};
	j.tags = {cmd.user_tag};
	j.first_seq = seq;
	j.commands = 1;
	if (cmd.opcode == NEURON_OP_NOP) {
		push(std::move(j));
		return std::nullopt;
	}
	if (cmd.opcode != NEURON_OP_COPY)
		return make_fault(NEURON_FAULT_BAD_OPCODE, "opcode " + std::to_string(cmd.opcode) +
								   " is not a DMA operation: DMA queues run COPY and NOP only");
	KmdDmaRuns runs;
	if (auto f = build_dma_runs(cmd, *memory_, queue_->device(), &runs))
		return f;
	if (runs.copies.empty()) {
		push(std::move(j)); // nothing to move
		return std::nullopt;
	}
	const std::vector<kmd::DmaCopy> &copies = runs.copies;
	kmd::KmdContext &ctx = context();
	if (runs.stage_in)
		ctx.stage_in(*runs.stage_in->buffer, runs.stage_in->offset, runs.stage_in->size);
	const uint32_t kq = static_cast<uint32_t>(queue_->id() % std::max<uint32_t>(chip_.info().num_dma_queues, 1));
	for (size_t off = 0; off < copies.size(); off += DRM_NEURON_MAX_DMA_COPIES) {
		const size_t cnt = std::min<size_t>(DRM_NEURON_MAX_DMA_COPIES, copies.size() - off);
		const bool last = off + cnt == copies.size();
		Job part;
		part.seqs = {seq};
		part.tags = {cmd.user_tag};
		part.first_seq = seq;
		part.commands = last ? 1 : 0;
		part.fence = ctx.dma(kq, std::span(copies.data() + off, cnt));
		if (last && runs.stage_out)
			part.stage_out.push_back({runs.stage_out->host_buffer, runs.stage_out->offset, runs.stage_out->size});
		push(std::move(part));
	}
	return std::nullopt;
}

size_t KmdPump::jobs_in_flight() const
{
	std::lock_guard lock(mutex_);
	return inflight_.size();
}

bool KmdPump::feed()
{
	if (halted_ || jobs_in_flight() >= kMaxJobsInFlight)
		return false;
	chip::Queue &q = *queue_;
	const uint64_t tail = q.ring().tail();
	if (tail <= submitted_ && !tiling_)
		return false;
	if (tail > submitted_ && q.ring().overrun(tail, q.completed())) {
		Job j;
		j.seqs = {q.completed() + 1};
		j.tags = {0};
		j.fault = make_fault(NEURON_FAULT_RING, "ring protocol violated: tail " + std::to_string(tail) +
								" is more than " + std::to_string(q.slot_count()) +
								" slots ahead of completed " + std::to_string(q.completed()));
		submitted_ = tail;
		tiling_.reset();
		push(std::move(j));
		halted_ = true;
		return true;
	}
	const bool dma = q.kind() == chip::QueueKind::Dma;
	const uint32_t max_cmds = chip_.max_cmds_per_job();
	// A tile's work: far below the job timeout, and short enough that a stop or
	// another tenant on the core waits little behind it.
	chip::TileBudget budget;
	budget.matmul_macs = kJobWorkBudget;
	budget.elements = kJobWorkBudget / 8;
	budget.transcendental_elements = kJobWorkBudget / 32;
	budget.chain_partials = false; // each tile is a job of its own: nothing holds partials between them

	Job batch;
	batch.kernel_queue = dma ? -1 : static_cast<int>(q.core());
	std::vector<neuron_cmd> cmds;
	std::vector<kmd::JobBo> bos;
	std::vector<kmd::Fence> waits;
	uint64_t work = 0;
	bool progress = false;

	auto flush = [&] {
		if (cmds.empty())
			return;
		batch.fence = context().compute(q.core(), cmds, bos, waits);
		push(std::move(batch));
		batch = Job{};
		batch.kernel_queue = static_cast<int>(q.core());
		cmds.clear();
		bos.clear();
		waits.clear();
		work = 0;
		progress = true;
	};
	auto room = [&] { return jobs_in_flight() < kMaxJobsInFlight; };
	auto fail = [&](uint64_t seq, uint64_t tag, Fault f) {
		flush();
		Job j;
		j.seqs = {seq};
		j.tags = {tag};
		j.fault = std::move(f);
		submitted_ = seq;
		tiling_.reset();
		push(std::move(j));
		halted_ = true;
		progress = true;
	};
	// Adds one command (a whole command or a tile) to the batch; flushes when full.
	auto add = [&](const neuron_cmd &c, uint64_t seq, bool completes) -> bool {
		if (auto f = resolve_core(c, &bos)) {
			fail(seq, c.user_tag, std::move(*f));
			return false;
		}
		cmds.push_back(c);
		batch.seqs.push_back(seq);
		batch.tags.push_back(c.user_tag);
		if (completes) {
			if (!batch.commands)
				batch.first_seq = seq;
			batch.commands++;
		}
		work += kernels::command_work(c);
		if (cmds.size() >= max_cmds || work >= kJobWorkBudget || waits.size() >= 32 ||
		    bos.size() + NEURON_MAX_OPERANDS > DRM_NEURON_MAX_SUBMIT_BOS)
			flush();
		return true;
	};

	held_ = false;
	std::shared_lock lock(memory_->mutex);
	for (;;) {
		if (halted_ || !room())
			break;
		if (tiling_) {
			// Tiles of a command already checked whole; each is checked again
			// against the tenant's memory as it goes (the tenant may free meanwhile).
			Tiling &t = *tiling_;
			neuron_cmd tile = t.cmd;
			chip::OperandViews none{};
			chip::narrow_to_tile(t.plan, t.next, tile, none);
			const bool last = ++t.next == t.plan.tiles;
			const uint64_t seq = t.seq;
			if (last)
				tiling_.reset();
			if (!add(tile, seq, last))
				break;
			continue;
		}
		if (submitted_ >= tail)
			break;
		const uint64_t seq = submitted_ + 1;
		// Private copy first: the tenant can still write the shared slot.
		neuron_cmd cmd;
		q.ring().read(seq, &cmd);

		kmd::Fence in_fence;
		if (cmd.wait.queue_id != 0) {
			std::shared_ptr<chip::Queue> other = q.peers().find(cmd.wait.queue_id);
			if (!other || (other.get() == &q && cmd.wait.value >= seq)) {
				fail(seq, cmd.user_tag,
				     make_fault(NEURON_FAULT_BAD_WAIT, "command waits on queue " + std::to_string(cmd.wait.queue_id) +
									   (other ? " for a value it can never reach"
										  : ", which this tenant does not own")));
				break;
			}
			if (other.get() != &q && other->completed() < cmd.wait.value) {
				if (other->faulted() || other->retired()) {
					fail(seq, cmd.user_tag,
					     make_fault(NEURON_FAULT_BAD_WAIT,
							"command waits on queue " + std::to_string(cmd.wait.queue_id) +
								", which faulted or was destroyed before reaching " +
								std::to_string(cmd.wait.value)));
					break;
				}
				auto pump = peers_->find(cmd.wait.queue_id);
				Await a = Await::NotYet;
				if (pump && pump->device() == q.device())
					a = pump->fence_for(cmd.wait.value, &in_fence);
				if (a == Await::NotYet) {
					held_ = true; // until the other queue gets there (host-side wait)
					break;
				}
				if (a == Await::InFlight && dma) {
					// DMA jobs are short: wait host-side, keep one submission path.
					if (context().wait(in_fence, kmd::deadline_after_ms(1)) == -ETIME) {
						held_ = true;
						break;
					}
					in_fence = {};
				}
			}
		}
		if (auto f = kernels::check_semantics(cmd)) {
			fail(seq, cmd.user_tag, std::move(*f));
			break;
		}
		if (auto f = check_work(cmd)) {
			fail(seq, cmd.user_tag, std::move(*f));
			break;
		}
		if (dma) {
			if (auto f = submit_dma(cmd, seq)) {
				fail(seq, cmd.user_tag, std::move(*f));
				break;
			}
			submitted_ = seq;
			progress = true;
			continue;
		}
		if (in_fence.valid()) {
			flush(); // the fence orders this command's job, not the ones before
			if (!room()) {
				held_ = true;
				break;
			}
			waits.push_back(in_fence);
		}
		submitted_ = seq;
		chip::TilePlan plan = chip::plan_tiles(cmd, budget, 1);
		if (plan.tiles > 1) {
			// Validate the whole command first (as the emu engine does before its
			// first tile), then feed its tiles.
			std::vector<kmd::JobBo> probe;
			if (auto f = resolve_core(cmd, &probe)) {
				fail(seq, cmd.user_tag, std::move(*f));
				break;
			}
			tiling_ = Tiling{cmd, seq, plan, 0};
			continue;
		}
		if (!add(cmd, seq, true))
			break;
	}
	flush();
	return progress;
}

} // namespace neuron::daemon
