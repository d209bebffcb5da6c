// The compute engine: attach, map HBM, fetch jobs, check and execute their
// commands with the op kernels, complete them.
//
// A job's payload is an array of struct neuron_cmd (<neuron/cmd.h>). The kernel
// hands it over as a private copy together with the job's BO list (HBM address,
// size, declared access). Every command must pass kernels::check_semantics, and
// every byte an operand can reach must lie inside one device BO of the job's
// list that the job declared readable (inputs) or writable (the output): that
// is the only memory of the submitting file the engine may touch. The output
// must not overlap an input except exactly in place for elementwise ops, nor
// itself. All commands are checked before the first one runs, so a bad job
// changes nothing.
#include "kmd.h"

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

using kernels::byte_extent;
using kernels::command_work;
using kernels::kMaxCommandWork;
using kernels::kMaxElementsPerOperand;
using kernels::numel;

std::string hex(uint64_t v)
{
	char buf[32];
	std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
	return buf;
}

using Views = std::array<kernels::View, NEURON_MAX_OPERANDS>;

// Resolves one command's operands to views into the mapped HBM.
std::optional<kernels::Fault> resolve(const neuron_cmd &cmd, std::span<const EngineBo> bos, std::byte *hbm,
				      uint64_t hbm_size, uint64_t base, Views &views)
{
	auto fault = [](uint32_t code, std::string m) { return kernels::Fault{code, std::move(m)}; };
	const int n = cmd.num_operands;
	if (cmd.wait.queue_id != 0 || cmd.wait.value != 0)
		return fault(NEURON_FAULT_BAD_WAIT, "wait.queue_id/value must be 0 on the kmd backend: order jobs "
						    "with syncobjs (the job's in-fences)");
	for (int k = 0; k < n; ++k)
		if (numel(cmd.operands[k]) > kMaxElementsPerOperand)
			return fault(NEURON_FAULT_BAD_OPERAND,
				     "operand " + std::to_string(k) + " has more than 2^32 elements; split the work");
	if (command_work(cmd) > kMaxCommandWork)
		return fault(NEURON_FAULT_BAD_OPERAND, "command needs more than 2^37 element operations; split it");

	std::array<kernels::ByteRange, NEURON_MAX_OPERANDS> ranges{}; // HBM offset, length
	const int written = kernels::written_operands(cmd.opcode); // operands [0, written) are outputs
	for (int k = 0; k < n; ++k) {
		const neuron_tensor_desc &d = cmd.operands[k];
		const bool out = k < written;
		const std::string who = "operand " + std::to_string(k) + (out ? " (output)" : " (input)");
		if (d.mem_space != NEURON_MEM_DEVICE || d.host_buffer != 0)
			return fault(NEURON_FAULT_BAD_OPERAND,
				     who + ": compute jobs name device memory only (mem_space 0, host_buffer 0)");
		const auto extent = byte_extent(d);
		if (!extent)
			return fault(NEURON_FAULT_OUT_OF_BOUNDS, who + ": sizes and strides reach past 2^62 bytes");
		kernels::View &v = views[k];
		v.data = nullptr;
		v.dtype = static_cast<neuron_dtype>(d.dtype);
		v.ndim = d.ndim;
		std::copy(std::begin(d.sizes), std::end(d.sizes), v.sizes);
		std::copy(std::begin(d.strides), std::end(d.strides), v.strides);
		if (*extent == 0)
			continue;
		if (d.addr < base)
			return fault(NEURON_FAULT_OUT_OF_BOUNDS, who + ": address " + hex(d.addr) +
									 " is below the device address base " + hex(base));
		const uint64_t a = d.addr - base;
		const uint32_t need = out ? DRM_NEURON_BO_ACCESS_WRITE : DRM_NEURON_BO_ACCESS_READ;
		bool inside = false, access = false;
		for (const EngineBo &b : bos) {
			if (!(b.bo_flags & DRM_NEURON_BO_DEVICE) || b.device_addr > hbm_size ||
			    b.size > hbm_size - b.device_addr)
				continue;
			if (a >= b.device_addr && *extent <= b.size && a - b.device_addr <= b.size - *extent) {
				inside = true;
				if (b.access & need) {
					access = true;
					break;
				}
			}
		}
		if (!inside)
			return fault(NEURON_FAULT_OUT_OF_BOUNDS,
				     who + ": bytes [" + hex(d.addr) + ", +" + std::to_string(*extent) +
					     ") are not inside one device BO of the job's BO list");
		if (!access)
			return fault(NEURON_FAULT_OUT_OF_BOUNDS,
				     who + ": the job declared its BO without " + (out ? "WRITE" : "READ") + " access");
		v.data = hbm + a;
		ranges[k] = {a, *extent};
	}
	return kernels::check_output_overlap(cmd, std::span(ranges.data(), size_t(n)));
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

KmdEngine::KmdEngine(const std::string &path, KmdEngineOptions options) : path_(path), opt_(std::move(options))
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
					  : err == EPERM ? " (needs CAP_SYS_ADMIN)" : ""));
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
		if (mask)
			workers_.emplace_back([this, w, mask] { worker(w, mask); });
	}
}

KmdEngine::~KmdEngine() { stop(); }

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
	if (payload.empty() || payload.size() % sizeof(neuron_cmd))
		return fail(0, 0,
			    {NEURON_FAULT_BAD_OPERAND, "job payload of " + std::to_string(payload.size()) +
							       " bytes is not a whole number of " +
							       std::to_string(sizeof(neuron_cmd)) + "-byte commands"});
	const size_t n = payload.size() / sizeof(neuron_cmd);
	std::vector<neuron_cmd> cmds(n);
	std::memcpy(cmds.data(), payload.data(), payload.size());
	std::vector<Views> views(n);
	for (size_t i = 0; i < n; ++i) {
		if (auto f = kernels::check_semantics(cmds[i]))
			return fail(static_cast<uint32_t>(i), cmds[i].user_tag, std::move(*f));
		if (auto f = resolve(cmds[i], bos, hbm_, hbm_size_, opt_.address_base, views[i]))
			return fail(static_cast<uint32_t>(i), cmds[i].user_tag, std::move(*f));
	}
	for (size_t i = 0; i < n; ++i) {
		if (cmds[i].opcode == NEURON_OP_NOP)
			continue;
		std::span<const kernels::View> v(views[i].data(), cmds[i].num_operands);
		if (auto f = kernels::execute(cmds[i], v, std::max(1, opt_.threads_per_job)))
			return fail(static_cast<uint32_t>(i), cmds[i].user_tag, std::move(*f));
	}
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
		drm_neuron_engine_complete c{};
		c.job_id = f.job_id;
		c.status = status;
		bool late = false;
		if (drmIoctl(fd_, DRM_IOCTL_NEURON_ENGINE_COMPLETE, &c)) {
			if (errno == ENOENT)
				late = true; // the kernel timed it out meanwhile
			else
				note(Error(errno, "ENGINE_COMPLETE of job " + std::to_string(f.job_id)).what());
		}
		{
			std::lock_guard lock(mutex_);
			stats_.jobs++;
			stats_.commands += f.cmd_size / sizeof(neuron_cmd);
			stats_.failed += status != 0;
			stats_.late += late;
		}
	}
}

} // namespace neuron::kmd
