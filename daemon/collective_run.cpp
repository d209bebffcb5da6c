#include "collective_run.h"

#include <kernels/collective.h>

#include <neuron/futex.h>
#include <sched/thread_priority.h>

#include <algorithm>
#include <chrono>
#include <shared_mutex>
#include <thread>

namespace neuron::daemon {

namespace {

using kernels::CollectiveReduce;

// Far above any HBM; keeps count * world_size * element size clear of overflow.
constexpr uint64_t kMaxCount = uint64_t(1) << 40;

uint64_t element_size(uint32_t dtype) { return collective_element_size(dtype); }

// Yields to inference between chunks (collective_run.h): while an inference
// tenant has work pending on one of the collective's devices, waits, at most
// kMaxYieldNs per chunk. The mover's queued work goes on meanwhile (kmd: at most
// the chunk before), so the device's cores and DMA serve the inference command.
class Pacer {
public:
	Pacer(const InferenceLoadOf &load, std::vector<uint32_t> devices, backend::CollectiveMover &mover)
		: load_(load), devices_(std::move(devices)), mover_(mover)
	{
		std::sort(devices_.begin(), devices_.end());
		devices_.erase(std::unique(devices_.begin(), devices_.end()), devices_.end());
	}

	void between_chunks() const
	{
		mover_.step_done();
		if (!load_)
			return;
		const uint64_t start = detail::monotonic_ns();
		while (inference_pending() && detail::monotonic_ns() - start < kMaxYieldNs)
			std::this_thread::sleep_for(std::chrono::microseconds(20));
	}

private:
	static constexpr uint64_t kMaxYieldNs = 2'000'000;
	bool inference_pending() const
	{
		for (uint32_t d : devices_)
			if (load_(d) == InferenceLoad::Pending)
				return true;
		return false;
	}
	const InferenceLoadOf &load_;
	std::vector<uint32_t> devices_;
	backend::CollectiveMover &mover_;
};

// One operand region of one member, bound in the mover.
struct Side {
	int id = -1;
	const backend::TenantContext *ctx = nullptr;
	uint32_t device = 0;
	uint64_t address = 0;
	// Whether [address + a, +n) and other's [address + b, +n) may share bytes.
	bool same_memory(const Side &other) const { return ctx == other.ctx && device == other.device; }
};

// A copy in chunks with the pacer between them; back to front when the
// destination overlaps the source from above (as memmove itself would).
void copy_paced(backend::CollectiveMover &mover, const Side &dst, uint64_t dst_offset, const Side &src,
		uint64_t src_offset, uint64_t n, const Pacer &pacer)
{
	const uint64_t to = dst.address + dst_offset, from = src.address + src_offset;
	if (n == 0 || (dst.same_memory(src) && to == from))
		return;
	const bool backward = dst.same_memory(src) && to > from && to < from + n;
	const uint64_t chunk = mover.chunk_bytes();
	for (uint64_t done = 0; done < n; done += chunk) {
		const uint64_t c = std::min(chunk, n - done);
		const uint64_t at = backward ? n - done - c : done;
		mover.copy(dst.id, dst_offset + at, src.id, src_offset + at, c);
		pacer.between_chunks();
	}
}

} // namespace

uint64_t collective_element_size(uint32_t dtype)
{
	return dtype > 255 ? 1 : std::max<uint64_t>(1, kernels::collective_element_bytes(static_cast<uint8_t>(dtype)));
}

namespace {

CollectiveReduce reduce_of(api::ReduceOp op)
{
	switch (op) {
	case api::REDUCE_AVG: return CollectiveReduce::Avg;
	case api::REDUCE_MAX: return CollectiveReduce::Max;
	case api::REDUCE_MIN: return CollectiveReduce::Min;
	case api::REDUCE_PRODUCT: return CollectiveReduce::Product;
	default: return CollectiveReduce::Sum;
	}
}

// Elements rank `rank` reads from its input and writes to its output.
void extents(const api::CollectiveRun &s, uint32_t world, uint32_t rank, uint64_t *in, uint64_t *out)
{
	const uint64_t n = s.count(), wn = n * world;
	const bool root = rank == s.root();
	switch (s.op()) {
	case api::COLLECTIVE_ALL_REDUCE: *in = n, *out = n; return;
	case api::COLLECTIVE_BROADCAST: *in = root ? n : 0, *out = n; return;
	case api::COLLECTIVE_ALL_GATHER: *in = n, *out = wn; return;
	case api::COLLECTIVE_REDUCE_SCATTER: *in = wn, *out = n; return;
	case api::COLLECTIVE_REDUCE: *in = n, *out = root ? n : 0; return;
	case api::COLLECTIVE_GATHER: *in = n, *out = root ? wn : 0; return;
	case api::COLLECTIVE_SCATTER: *in = root ? wn : 0, *out = n; return;
	case api::COLLECTIVE_ALL_TO_ALL: *in = wn, *out = wn; return;
	default: *in = 0, *out = 0; return;
	}
}

struct Resolved {
	Side in, out;
};

// Binds one member's region in the mover; "" or why it was refused.
std::string bind(backend::CollectiveMover &mover, const CollectiveOperand &m, uint64_t address, uint64_t bytes,
		 const char *what, Side *side)
{
	side->ctx = m.ctx.get();
	side->device = m.device;
	side->address = address;
	if (bytes == 0)
		return {};
	if (auto why = mover.bind({m.ctx.get(), m.device, address, bytes}, &side->id); !why.empty())
		return std::string(what) + " " + why;
	return {};
}

void move_data(const api::CollectiveRun &s, uint32_t world, const std::vector<Resolved> &r,
	       backend::CollectiveMover &mover, const Pacer &pacer)
{
	const uint64_t es = element_size(s.dtype()), n = s.count(), nb = n * es;
	const uint8_t dt = static_cast<uint8_t>(s.dtype());
	const CollectiveReduce red = reduce_of(s.reduce());
	const uint32_t root = s.root();
	std::vector<int> srcs(world);
	for (uint32_t k = 0; k < world; ++k)
		srcs[k] = r[k].in.id;
	// out = reduce over ranks of (in_i + offset), in chunks; with copies_to_all,
	// each reduced chunk is also copied to every other rank's output while it is
	// still in cache (one pass over memory instead of two: the reduced bytes are
	// not read back from DRAM).
	auto reduce_to = [&](const Side &out, uint64_t in_offset, bool copies_to_all = false) {
		const uint64_t step = std::max<uint64_t>(1, mover.chunk_bytes() / es);
		for (uint64_t i = 0; i < n; i += step) {
			const uint64_t c = std::min(step, n - i);
			mover.reduce(out.id, i * es, srcs, in_offset + i * es, c, dt, red);
			for (uint32_t k = 1; copies_to_all && k < world; ++k)
				mover.copy(r[k].out.id, i * es, out.id, i * es, c * es);
			pacer.between_chunks();
		}
	};
	switch (s.op()) {
	case api::COLLECTIVE_ALL_REDUCE: {
		// Copying chunk by chunk is safe when no rank's output overlaps an input
		// except at the same offset (in place: that chunk has been read already);
		// a rank's memory never overlaps another's.
		bool chunkwise = true;
		for (uint32_t k = 1; k < world; ++k) {
			const uint64_t o = r[k].out.address, i = r[k].in.address;
			chunkwise = chunkwise && (o == i || o + nb <= i || i + nb <= o);
		}
		reduce_to(r[0].out, 0, chunkwise);
		for (uint32_t k = 1; !chunkwise && k < world; ++k)
			copy_paced(mover, r[k].out, 0, r[0].out, 0, nb, pacer);
		return;
	}
	case api::COLLECTIVE_REDUCE:
		return reduce_to(r[root].out, 0);
	case api::COLLECTIVE_BROADCAST:
		for (uint32_t k = 0; k < world; ++k)
			copy_paced(mover, r[k].out, 0, r[root].in, 0, nb, pacer);
		return;
	case api::COLLECTIVE_ALL_GATHER:
		for (uint32_t k = 0; k < world; ++k)
			for (uint32_t i = 0; i < world; ++i)
				copy_paced(mover, r[k].out, i * nb, r[i].in, 0, nb, pacer);
		return;
	case api::COLLECTIVE_REDUCE_SCATTER:
		for (uint32_t k = 0; k < world; ++k)
			reduce_to(r[k].out, k * nb);
		return;
	case api::COLLECTIVE_GATHER:
		for (uint32_t i = 0; i < world; ++i)
			copy_paced(mover, r[root].out, i * nb, r[i].in, 0, nb, pacer);
		return;
	case api::COLLECTIVE_SCATTER:
		for (uint32_t k = 0; k < world; ++k)
			copy_paced(mover, r[k].out, 0, r[root].in, k * nb, nb, pacer);
		return;
	case api::COLLECTIVE_ALL_TO_ALL:
		for (uint32_t k = 0; k < world; ++k)
			for (uint32_t i = 0; i < world; ++i)
				copy_paced(mover, r[k].out, i * nb, r[i].in, k * nb, nb, pacer);
		return;
	default:
		return;
	}
}

} // namespace

const char *collective_name(api::CollectiveOp op)
{
	switch (op) {
	case api::COLLECTIVE_ALL_REDUCE: return "all_reduce";
	case api::COLLECTIVE_BROADCAST: return "broadcast";
	case api::COLLECTIVE_ALL_GATHER: return "all_gather";
	case api::COLLECTIVE_REDUCE_SCATTER: return "reduce_scatter";
	case api::COLLECTIVE_BARRIER: return "barrier";
	case api::COLLECTIVE_REDUCE: return "reduce";
	case api::COLLECTIVE_GATHER: return "gather";
	case api::COLLECTIVE_SCATTER: return "scatter";
	case api::COLLECTIVE_ALL_TO_ALL: return "all_to_all";
	default: return "unknown collective";
	}
}

std::string check_collective_spec(const api::CollectiveRun &s, uint32_t world)
{
	if (s.op() == api::COLLECTIVE_UNSPECIFIED || !api::CollectiveOp_IsValid(s.op()))
		return "op " + std::to_string(s.op()) + " is not a CollectiveOp";
	if (!api::ReduceOp_IsValid(s.reduce()))
		return "reduce " + std::to_string(s.reduce()) + " is not a ReduceOp";
	if (s.op() == api::COLLECTIVE_BARRIER)
		return s.count() == 0 ? "" : "a barrier moves no data: count must be 0";
	if (!kernels::is_collective_dtype(static_cast<uint8_t>(s.dtype())) || s.dtype() > 255)
		return "dtype " + std::to_string(s.dtype()) + " is not one collectives take (f32, bf16, f16, i32, i64, u8)";
	if (s.count() > kMaxCount)
		return "count " + std::to_string(s.count()) + " is above the limit of 2^40 elements";
	if (s.root() >= world)
		return "root " + std::to_string(s.root()) + " is not a rank of this group of " + std::to_string(world);
	return {};
}

std::string check_p2p_op(const api::P2POp &op, uint32_t rank, uint32_t world)
{
	if (op.any_source()) {
		if (op.send())
			return "a send names its receiver (any_source is for a recv)";
	} else if (op.peer() >= world)
		return "peer " + std::to_string(op.peer()) + " is not a rank of this group of " + std::to_string(world);
	if (!op.any_source() && op.peer() == rank)
		return std::string(op.send() ? "send to" : "recv from") + " rank " + std::to_string(rank) +
		       " is this member itself (copy the tensor instead)";
	if (!kernels::is_collective_dtype(static_cast<uint8_t>(op.dtype())) || op.dtype() > 255)
		return "dtype " + std::to_string(op.dtype()) + " is not one collectives take (f32, bf16, f16, i32, i64, u8)";
	if (op.count() > kMaxCount)
		return "count " + std::to_string(op.count()) + " is above the limit of 2^40 elements";
	return {};
}

namespace {

// The matched pairs of a CollectiveP2P; the rank whose buffer was refused and why.
std::pair<int, std::string> run_copies(backend::DeviceBackend &devices, const std::vector<CollectiveCopy> &copies,
				       const InferenceLoadOf &load)
{
	for (const auto &c : copies) {
		if (c.bytes == 0)
			continue;
		// Both members' memory stays put while the bytes move; one lock if both
		// ranks are one tenant's (a group may hold a tenant once, but be safe).
		std::shared_lock a(c.from.ctx->memory().mutex);
		std::shared_lock<std::shared_mutex> b;
		if (c.to.ctx != c.from.ctx)
			b = std::shared_lock(c.to.ctx->memory().mutex);
		auto mover = devices.collective_mover();
		Resolved r;
		if (auto why = bind(*mover, c.from, c.from.input, c.bytes, "send buffer", &r.in); !why.empty())
			return {static_cast<int>(c.from_rank), why};
		if (auto why = bind(*mover, c.to, c.to.output, c.bytes, "recv buffer", &r.out); !why.empty())
			return {static_cast<int>(c.to_rank), why};
		copy_paced(*mover, r.out, 0, r.in, 0, c.bytes, Pacer(load, {c.from.device, c.to.device}, *mover));
		if (auto why = mover->finish(); !why.empty())
			return {-1, why};
	}
	return {-1, {}};
}

} // namespace

std::pair<int, std::string> run_collective(backend::DeviceBackend &devices, const CollectiveJob &job,
					   const InferenceLoadOf &inference)
{
	const InferenceLoadOf none;
	const InferenceLoadOf &load = job.yields ? inference : none;
	if (!job.copies.empty())
		return run_copies(devices, job.copies, load);
	const auto &s = job.spec;
	const uint32_t world = static_cast<uint32_t>(job.members.size());
	if (s.op() == api::COLLECTIVE_BARRIER)
		return {-1, {}};
	const uint64_t es = element_size(s.dtype());
	// Every member's memory stays put while its bytes are used (shared locks; the
	// control thread frees under the exclusive one).
	std::vector<std::shared_lock<std::shared_mutex>> locks;
	locks.reserve(world);
	for (const auto &m : job.members)
		locks.emplace_back(m.ctx->memory().mutex);
	auto mover = devices.collective_mover();
	std::vector<Resolved> r(world);
	for (uint32_t k = 0; k < world; ++k) {
		uint64_t in = 0, out = 0;
		extents(s, world, k, &in, &out);
		const auto &m = job.members[k];
		std::string why = bind(*mover, m, m.input, in * es, "input", &r[k].in);
		if (why.empty())
			why = bind(*mover, m, m.output, out * es, "output", &r[k].out);
		if (why.empty() && s.op() == api::COLLECTIVE_ALL_TO_ALL && m.input < m.output + out * es &&
		    m.output < m.input + in * es)
			why = "all_to_all cannot run in place: its input and output overlap";
		if (!why.empty())
			return {static_cast<int>(k), why};
	}
	std::vector<uint32_t> devices_used;
	for (const auto &m : job.members)
		devices_used.push_back(m.device);
	move_data(s, world, r, *mover, Pacer(load, std::move(devices_used), *mover));
	return {-1, mover->finish()};
}

CollectiveRunner::CollectiveRunner(boost::asio::io_context &io, backend::DeviceBackend &devices,
				   InferenceLoadOf inference)
	: io_(io), devices_(devices), inference_(std::move(inference)), may_renice_(sched::can_restore_priority()),
	  thread_([this] { loop(); })
{
}

CollectiveRunner::~CollectiveRunner()
{
	{
		std::lock_guard lock(mutex_);
		stopping_ = true;
	}
	wake_.notify_all();
	thread_.join();
}

void CollectiveRunner::submit(CollectiveJob job)
{
	{
		std::lock_guard lock(mutex_);
		queue_.push_back(std::move(job));
	}
	wake_.notify_one();
}

bool CollectiveRunner::beside_inference(const CollectiveJob &job) const
{
	if (!inference_)
		return false;
	auto any = [&](uint32_t device) { return inference_(device) != InferenceLoad::None; };
	for (const auto &m : job.members)
		if (any(m.device))
			return true;
	for (const auto &c : job.copies)
		if (any(c.from.device) || any(c.to.device))
			return true;
	return false;
}

void CollectiveRunner::loop()
{
	for (;;) {
		CollectiveJob job;
		{
			std::unique_lock lock(mutex_);
			wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
			if (queue_.empty())
				return;
			job = std::move(queue_.front());
			queue_.pop_front();
		}
		// A training job's collective beside an inference tenant runs niced
		// (collective_run.h).
		if (may_renice_)
			sched::set_thread_nice(job.yields && beside_inference(job) ? kTrainingCollectiveNice : 0);
		std::pair<int, std::string> outcome;
		try {
			outcome = run_collective(devices_, job, inference_);
		} catch (const std::exception &e) { // e.g. bad_alloc: this collective fails, the runner goes on
			outcome = {-1, std::string("neurond could not run it: ") + e.what()};
		}
		auto [bad_rank, error] = std::move(outcome);
		// The members' contexts are released on the control thread with the reply.
		boost::asio::post(io_, [job = std::move(job), bad_rank, error]() mutable { job.done(bad_rank, error); });
	}
}

} // namespace neuron::daemon
