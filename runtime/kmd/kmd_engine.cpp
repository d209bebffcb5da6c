// The compute engine: attach, map HBM, fetch jobs, check and execute their
// commands with the op kernels, complete them.
//
// A job's payload is a tile job or an array of struct neuron_cmd (tile_job.h). The
// kernel hands it over as a private copy together with the job's BO list (HBM
// address, size, declared access). Every command goes through the gate
// (gate/admit.h) against that list: every byte an operand can reach must lie
// inside one device BO the job declared readable (inputs) or writable (outputs),
// the only memory of the submitting file the engine may touch; a tile job's
// chain-state region likewise, writable; a tile kernel's program (readable) and
// saved state (writable), the program validated by the engine (kernel_job.h).
// All commands are checked before the first one runs, so a bad job changes
// nothing. A collective group's reduction (collective_job.h) is a job of its own
// form, checked the same way.
#include "collective_job.h"
#include "kernel_job.h"
#include "kmd.h"
#include "tile_job.h"

#include <gate/admit.h>
#include <sched/cpu_placement.h>
#include <sched/chain_partials.h>

#include <gemm_packs.h>
#include <geometry.h>
#include <kernels.h>

#include <xf86drm.h>
#include <drm/neuron_accel.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace neuron::kmd {

namespace {

// The memory a job may touch, as the gate asks it: the job's device BOs, in the
// tenant's address space (kernel HBM address + address_base), mapped here.
class JobBoSpace final : public gate::MemorySpace {
public:
	JobBoSpace(std::span<const EngineBo> bos, std::byte *hbm, uint64_t hbm_size, uint64_t base)
		: bos_(bos), hbm_(hbm), hbm_size_(hbm_size), base_(base)
	{
	}

	bool place_device(uint64_t address, uint64_t bytes, bool write, gate::Placement *out,
			  std::string *why) const override
	{
		const uint32_t need = write ? DRM_NEURON_BO_ACCESS_WRITE : DRM_NEURON_BO_ACCESS_READ;
		bool inside = false;
		if (address >= base_) {
			const uint64_t a = address - base_;
			for (const EngineBo &b : bos_) {
				if (!(b.bo_flags & DRM_NEURON_BO_DEVICE) || b.device_addr > hbm_size_ ||
				    b.size > hbm_size_ - b.device_addr)
					continue;
				if (a < b.device_addr || bytes > b.size || a - b.device_addr > b.size - bytes)
					continue;
				inside = true;
				if (b.access & need) {
					out->data = hbm_ + a;
					out->key = address;
					return true;
				}
			}
		}
		*why = inside ? std::string("the job declared its BO without ") + (write ? "WRITE" : "READ") + " access"
			      : "bytes [" + gate::hex(address) + ", +" + std::to_string(bytes) +
					") are not inside one device BO of the job's BO list";
		return false;
	}

	bool place_host(uint32_t, uint64_t, uint64_t, bool, gate::Placement *, std::string *why) const override
	{
		*why = "compute jobs name device memory only"; // unreachable: the gate refuses host memory first
		return false;
	}

private:
	std::span<const EngineBo> bos_;
	std::byte *hbm_;
	uint64_t hbm_size_;
	uint64_t base_;
};

// One entry checked: its whole command resolved, its plan, its chain state.
struct CheckedEntry {
	gate::Operands ops;
	sched::TilePlan plan;
	std::byte *state = nullptr;
	CheckedKernel kernel; // a TILE_KERNEL step
};

std::optional<kernels::Fault> check_entry(const TileJobEntry &e, const JobBoSpace &space, const chip::OnChip *onchip,
					  TileProgramCache &programs, CheckedEntry *out)
{
	if (auto f = gate::check_command(e.cmd))
		return f;
	if (e.cmd.wait.queue_id != 0 || e.cmd.wait.value != 0)
		return kernels::Fault{NEURON_FAULT_BAD_WAIT, "wait.queue_id/value must be 0 in a driver job: cross-queue "
							     "order is the scheduler's (or the job's in-fences)"};
	if (auto f = gate::resolve(e.cmd, false, space, &out->ops))
		return f;
	if (e.flags & ~(kChainPartials | kTileKernel))
		return kernels::Fault{NEURON_FAULT_BAD_OPERAND, "tile job entry flags " + gate::hex(e.flags) + " are unknown"};
	if (e.cmd.opcode == NEURON_OP_TILE_KERNEL || (e.flags & kTileKernel))
		return check_kernel(e, space, onchip, programs, &out->kernel);
	if (e.tile == kWholeCommand)
		return std::nullopt;
	out->plan = sched::plan_tiles(e.cmd, e.budget(), 1);
	if (e.tile >= out->plan.tiles)
		return kernels::Fault{NEURON_FAULT_BAD_OPERAND, "tile " + std::to_string(e.tile) + " of a command planned in " +
									std::to_string(out->plan.tiles) + " tiles"};
	const uint64_t need = sched::chain_state_bytes(e.cmd, out->plan);
	if (need == 0)
		return std::nullopt;
	const uint64_t chains = out->plan.tiles / sched::chain_length(out->plan);
	if (e.state_slot_bytes < need || e.state_chains < chains || e.state_slot_bytes > (1ull << 40) ||
	    e.state_chains > (1ull << 32))
		return kernels::Fault{NEURON_FAULT_BAD_OPERAND, "chain state of " + std::to_string(e.state_chains) + " x " +
									std::to_string(e.state_slot_bytes) +
									" bytes, the plan needs " + std::to_string(chains) +
									" x " + std::to_string(need)};
	gate::Placement p;
	std::string why;
	if (!space.place_device(e.state_address, e.state_slot_bytes * e.state_chains, true, &p, &why))
		return kernels::Fault{NEURON_FAULT_OUT_OF_BOUNDS, "chain state: " + why};
	out->state = p.data;
	return std::nullopt;
}

std::optional<kernels::Fault> run_entry(const TileJobEntry &e, const CheckedEntry &c, int threads,
					kernels::GemmPacks *packs)
{
	if (e.cmd.opcode == NEURON_OP_NOP)
		return std::nullopt;
	if (e.flags & kTileKernel)
		return run_kernel(e, c.kernel, c.ops);
	if (e.tile == kWholeCommand)
		return kernels::execute(e.cmd, std::span(c.ops.views.data(), e.cmd.num_operands), threads);
	const uint64_t chains = c.plan.tiles / sched::chain_length(c.plan);
	sched::ChainPartials partials(c.state, e.state_slot_bytes, chains);
	neuron_cmd tile = e.cmd;
	sched::OperandViews views = c.ops.views;
	sched::narrow_to_tile(c.plan, e.tile, tile, views);
	return sched::execute_tile(partials, c.plan, e.tile, tile, views, threads, packs);
}

// A collective group's reduction: every source readable and the destination
// writable in the job's BO list, then kernels::collective_reduce on mapped HBM.
std::optional<kernels::Fault> run_collective_job(std::span<const std::byte> payload, const JobBoSpace &space)
{
	CollectiveJobHeader h;
	std::vector<uint64_t> addresses;
	std::string why;
	if (!read_collective_job(payload, &h, &addresses, &why))
		return kernels::Fault{NEURON_FAULT_BAD_OPERAND, why};
	const uint64_t bytes = h.count * kernels::collective_element_bytes(h.dtype);
	std::vector<const std::byte *> srcs(addresses.size());
	gate::Placement p;
	for (size_t i = 0; i < addresses.size(); ++i) {
		if (!space.place_device(addresses[i], bytes, false, &p, &why))
			return kernels::Fault{NEURON_FAULT_OUT_OF_BOUNDS, "collective source " + std::to_string(i) + ": " + why};
		srcs[i] = p.data;
	}
	if (!space.place_device(h.dst, bytes, true, &p, &why))
		return kernels::Fault{NEURON_FAULT_OUT_OF_BOUNDS, "collective destination: " + why};
	kernels::collective_reduce(p.data, srcs.data(), static_cast<int>(srcs.size()), h.count, h.dtype,
				   static_cast<kernels::CollectiveReduce>(h.op));
	return std::nullopt;
}

} // namespace

int fault_to_errno(uint32_t code)
{
	switch (code) {
	case NEURON_FAULT_NONE: return 0;
	case NEURON_FAULT_BAD_OPCODE: return EOPNOTSUPP;
	case NEURON_FAULT_BAD_OPERAND: return EINVAL;
	case NEURON_FAULT_OUT_OF_BOUNDS: return EFAULT;
	case NEURON_FAULT_OVERLAP: return EADDRINUSE;
	case NEURON_FAULT_BAD_WAIT: return ENOMSG;
	case NEURON_FAULT_RESET: return ETIMEDOUT;
	default: return EIO;
	}
}

uint32_t errno_to_fault(int err)
{
	switch (err < 0 ? -err : err) {
	case 0: return NEURON_FAULT_NONE;
	case EOPNOTSUPP: return NEURON_FAULT_BAD_OPCODE;
	case EINVAL: return NEURON_FAULT_BAD_OPERAND;
	case EFAULT: return NEURON_FAULT_OUT_OF_BOUNDS;
	case EADDRINUSE: return NEURON_FAULT_OVERLAP;
	case ENOMSG: return NEURON_FAULT_BAD_WAIT;
	case ETIMEDOUT: // the kernel timed the job out and reset the core
	case ECANCELED: // the file was banned after such a timeout
		return NEURON_FAULT_RESET;
	default: return NEURON_FAULT_EXEC; // EIO, ENODEV (no engine / engine gone), ...
	}
}

KmdEngine::KmdEngine(const std::string &path, KmdEngineOptions options)
	: path_(path), opt_(std::move(options)), programs_(std::make_unique<TileProgramCache>())
{
	fd_ = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
	if (fd_ < 0)
		throw Error(errno, "opening " + path + " for the compute engine");
	drm_neuron_engine_attach a{};
	if (drmIoctl(fd_, DRM_IOCTL_NEURON_ENGINE_ATTACH, &a)) {
		int err = errno;
		::close(fd_);
		throw Error(err, "ENGINE_ATTACH on " + path +
					 (err == EBUSY ? " (another engine is attached)"
					  : err == EACCES || err == EPERM ? " (needs CAP_SYS_ADMIN)" : ""));
	}
	hbm_size_ = a.hbm_size;
	void *p = mmap(nullptr, hbm_size_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd_,
		       static_cast<off_t>(a.hbm_mmap_offset));
	if (p == MAP_FAILED) {
		int err = errno;
		::close(fd_);
		throw Error(err, "mapping the " + std::to_string(hbm_size_) + "-byte HBM aperture of " + path);
	}
	hbm_ = static_cast<std::byte *>(p);

	uint32_t cores = 0;
	try {
		cores = static_cast<uint32_t>(get_param(fd_, DRM_NEURON_PARAM_NUM_CORES));
	} catch (...) {
		munmap(hbm_, hbm_size_);
		::close(fd_);
		throw;
	}
	const uint64_t all = cores >= 64 ? ~0ull : (1ull << cores) - 1;
	const uint64_t serve = opt_.core_mask ? (opt_.core_mask & all) : all;
	int workers = opt_.workers > 0 ? opt_.workers : static_cast<int>(std::min<uint32_t>(cores, 4));
	workers = std::max(1, std::min(workers, static_cast<int>(cores ? cores : 1)));
	for (int w = 0; w < workers; ++w) {
		uint64_t mask = 0;
		for (uint32_t c = 0; c < cores; ++c)
			if (static_cast<int>(c % workers) == w && (serve >> c & 1))
				mask |= 1ull << c;
		if (mask) {
			worker_masks_.push_back(mask);
			workers_.emplace_back([this, w, mask] { worker(w, mask); });
		}
	}
}

KmdEngine::~KmdEngine() { stop(); }

bool KmdEngine::pin_workers(const std::vector<std::vector<int>> &core_cpus)
{
	int first_error = 0;
	for (size_t w = 0; w < workers_.size(); ++w) {
		std::vector<int> cpus;
		for (size_t c = 0; c < core_cpus.size() && c < 64; ++c)
			if (worker_masks_[w] >> c & 1)
				cpus.insert(cpus.end(), core_cpus[c].begin(), core_cpus[c].end());
		if (!sched::pin_thread(workers_[w], cpus) && !first_error)
			first_error = errno;
	}
	errno = first_error;
	return first_error == 0;
}

void KmdEngine::stop()
{
	stop_ = true;
	for (auto &t : workers_)
		if (t.joinable())
			t.join();
	workers_.clear();
	if (fd_ >= 0) {
		// Closing the file detaches; jobs still held fail with ENODEV.
		munmap(hbm_, hbm_size_);
		::close(fd_);
		fd_ = -1;
		hbm_ = nullptr;
	}
}

EngineStats KmdEngine::stats() const
{
	std::lock_guard lock(mutex_);
	return stats_;
}

std::string KmdEngine::last_error() const
{
	std::lock_guard lock(mutex_);
	return last_error_;
}

int KmdEngine::run_job(std::span<const std::byte> payload, std::span<const EngineBo> bos, EngineJobFault *fault)
{
	auto fail = [&](uint32_t idx, uint64_t tag, kernels::Fault f) {
		if (fault) {
			fault->cmd_index = idx;
			fault->user_tag = tag;
			fault->code = f.code;
			fault->reason = std::move(f.message);
		}
		return -fault_to_errno(f.code);
	};
	const JobBoSpace space(bos, hbm_, hbm_size_, opt_.address_base);
	if (is_collective_job(payload)) {
		auto f = run_collective_job(payload, space);
		return f ? fail(0, 0, std::move(*f)) : 0;
	}
	TileJobHeader header;
	std::vector<TileJobEntry> entries;
	std::string why;
	if (!read_tile_job(payload, &header, &entries, &why))
		return fail(0, 0, {NEURON_FAULT_BAD_OPERAND, why});
	std::vector<CheckedEntry> checked(entries.size());
	const chip::OnChip *onchip = opt_.onchip ? &*opt_.onchip : nullptr;
	for (size_t i = 0; i < entries.size(); ++i)
		if (auto f = check_entry(entries[i], space, onchip, *programs_, &checked[i]))
			return fail(static_cast<uint32_t>(i), entries[i].cmd.user_tag, std::move(*f));
	const int threads = std::max(1, std::min<int>(opt_.threads_per_job, static_cast<int>(header.threads)));
	// The tiles of one job are of different chains (or different commands): they
	// run side by side, one per thread, and share the job's packed operand blocks.
	kernels::GemmPacks packs;
	std::vector<std::optional<kernels::Fault>> faults(entries.size());
	const int n = static_cast<int>(entries.size());
	const bool tiles = n > 1 && entries[0].tile != kWholeCommand;
	if (tiles && threads > 1) {
#pragma omp parallel for num_threads(std::min(threads, n)) schedule(dynamic, 1)
		for (int i = 0; i < n; ++i)
			faults[i] = run_entry(entries[i], checked[i], 1, &packs);
	} else {
		for (int i = 0; i < n && !(i > 0 && faults[i - 1]); ++i)
			faults[i] = run_entry(entries[i], checked[i], tiles ? 1 : threads, &packs);
	}
	for (int i = 0; i < n; ++i)
		if (faults[i])
			return fail(static_cast<uint32_t>(i), entries[i].cmd.user_tag, std::move(*faults[i]));
	return 0;
}

void KmdEngine::worker(int index, uint64_t mask)
{
	std::vector<neuron_cmd> cmd(64 * 1024 / sizeof(neuron_cmd) + 1);
	std::vector<drm_neuron_engine_bo> kbos(DRM_NEURON_MAX_SUBMIT_BOS);
	std::vector<EngineBo> bos;
	auto note = [&](const std::string &e) {
		std::lock_guard lock(mutex_);
		last_error_ = "engine worker " + std::to_string(index) + ": " + e;
	};
	while (!stop_) {
		drm_neuron_engine_fetch f{};
		f.core_mask = mask;
		f.timeout_ns = deadline_after_ms(opt_.fetch_timeout_ms);
		f.cmd = reinterpret_cast<uintptr_t>(cmd.data());
		f.cmd_size = static_cast<uint32_t>(cmd.size() * sizeof(neuron_cmd));
		f.bos = reinterpret_cast<uintptr_t>(kbos.data());
		f.bo_count = static_cast<uint32_t>(kbos.size());
		f.bo_stride = sizeof(drm_neuron_engine_bo);
		// Plain ioctl, not drmIoctl: EINTR should re-check stop_.
		if (ioctl(fd_, DRM_IOCTL_NEURON_ENGINE_FETCH, &f)) {
			const int err = errno;
			if (err == ETIME || err == EINTR || err == EAGAIN)
				continue;
			if (err == EOVERFLOW) { // a bigger job than we have room for
				cmd.resize(f.cmd_size / sizeof(neuron_cmd) + 1);
				kbos.resize(std::max<size_t>(f.bo_count, kbos.size()));
				continue;
			}
			note(Error(err, "ENGINE_FETCH").what());
			if (err == EPERM) // no longer the engine
				return;
			usleep(10000);
			continue;
		}
		bos.clear();
		for (uint32_t i = 0; i < f.bo_count; ++i)
			bos.push_back({kbos[i].device_addr, kbos[i].size, kbos[i].access, kbos[i].bo_flags});
		EngineJobFault jf{};
		int status;
		try {
			if (opt_.cancelled && opt_.cancelled(f.client_id))
				status = -ECANCELED; // its owner is gone: nobody will read the result
			else
				status = run_job(std::span(reinterpret_cast<const std::byte *>(cmd.data()), f.cmd_size), bos,
						 &jf);
		} catch (const std::exception &e) { // e.g. bad_alloc: fail the job, keep the engine
			jf.code = NEURON_FAULT_EXEC;
			jf.reason = std::string("engine exception: ") + e.what();
			status = -EIO;
		}
		// Before the completion: whoever sees the job's fence fail finds the
		// reason already reported.
		if (status != 0 && status != -ECANCELED && opt_.on_fault) {
			jf.client_id = f.client_id;
			jf.core = f.core;
			jf.job_seq = f.job_seq;
			opt_.on_fault(jf);
		}
		// Counted before the completion too: whoever sees the job's fence signal
		// finds it in stats() (kmd_test read them right after its last wait and
		// once saw one job short).
		{
			std::lock_guard lock(mutex_);
			stats_.jobs++;
			stats_.commands += f.cmd_size / sizeof(neuron_cmd); // tiles count about one each
			stats_.failed += status != 0;
		}
		drm_neuron_engine_complete c{};
		c.job_id = f.job_id;
		c.status = status;
		if (drmIoctl(fd_, DRM_IOCTL_NEURON_ENGINE_COMPLETE, &c)) {
			if (errno == ENOENT) { // the kernel timed it out meanwhile
				std::lock_guard lock(mutex_);
				stats_.late++;
			} else {
				note(Error(errno, "ENGINE_COMPLETE of job " + std::to_string(f.job_id)).what());
			}
		}
	}
}

} // namespace neuron::kmd
