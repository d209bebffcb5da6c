#include "kmd_collective_mover.h"

#include "collective_job.h"
#include "kmd_backend.h"
#include "kmd_tenant.h"

#include <drm/neuron_accel.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unistd.h>

namespace neuron::kmd {

namespace {

// How long finish() waits for the collective's last job: far above any chunk's
// time, so only a wedged device hits it (the driver's own job timeout comes first).
constexpr int64_t kFinishTimeoutMs = 120'000;

bool overlap(uint64_t a, uint64_t b, uint64_t bytes) { return a < b + bytes && b < a + bytes; }

} // namespace

KmdCollectiveMover::~KmdCollectiveMover()
{
	if (!finished_)
		finish();
}

void KmdCollectiveMover::fail(const std::string &why)
{
	if (error_.empty())
		error_ = why;
}

std::string KmdCollectiveMover::bind(const backend::MemberRegion &r, int *id)
{
	auto *tenant = dynamic_cast<KmdTenant *>(r.ctx);
	uint64_t start = 0;
	const backend::DeviceAllocation *a =
		tenant ? r.ctx->memory().find_device(r.device, r.address, r.bytes, &start) : nullptr;
	if (!a || !a->handle)
		return "[" + std::to_string(r.address) + ", +" + std::to_string(r.bytes) + ") on device " +
		       std::to_string(r.device) + " is not inside one allocation of this tenant";
	if (device_ && *device_ != r.device)
		return "it lies on device " + std::to_string(r.device) + " and another member's on device " +
		       std::to_string(*device_) + "; on the kmd backend a collective's members share one device "
		       "(its DMA engine moves the bytes)";
	try {
		if (!device_) {
			files_ = &backend_.slot(r.device).collective_context();
			device_ = r.device;
		}
		KmdContext &owner = tenant->context(r.device);
		auto key = std::make_pair(owner.fd(), a->handle);
		auto it = imports_.find(key);
		if (it == imports_.end()) {
			const int dmabuf = owner.export_device(a->handle);
			uint32_t h = 0;
			try {
				h = files_->import_buffer(dmabuf);
			} catch (...) {
				::close(dmabuf);
				throw;
			}
			::close(dmabuf); // the import holds the BO
			it = imports_.emplace(key, h).first;
		}
		*id = static_cast<int>(regions_.size());
		regions_.push_back({it->second, r.address - a->handle_base, r.address});
	} catch (const Error &e) {
		return std::string("sharing it with neurond's collective file failed: ") + e.what();
	}
	return {};
}

void KmdCollectiveMover::flush_copies()
{
	if (pending_.empty() || !error_.empty()) {
		pending_.clear();
		pending_bytes_ = 0;
		return;
	}
	try {
		const Fence waits[1] = {last_};
		last_ = files_->dma(0, pending_, last_.valid() ? std::span<const Fence>(waits) : std::span<const Fence>());
		last_compute_ = false;
	} catch (const Error &e) {
		fail(std::string("a DMA job of the collective: ") + e.what());
	}
	pending_.clear();
	pending_bytes_ = 0;
}

uint32_t KmdCollectiveMover::scratch()
{
	if (!scratch_)
		scratch_ = files_->alloc_device(kChunkBytes);
	return scratch_->handle;
}

void KmdCollectiveMover::copy(int dst, uint64_t dst_offset, int src, uint64_t src_offset, uint64_t bytes)
{
	if (!error_.empty() || bytes == 0)
		return;
	const Region &d = regions_.at(dst), &s = regions_.at(src);
	const uint64_t from = s.bo_offset + src_offset, to = d.bo_offset + dst_offset;
	if (d.bo == s.bo && from == to)
		return;
	try {
		// The driver refuses a copy whose ranges overlap within one BO: bounce
		// through the scratch BO, a chunk at a time in memmove's order.
		if (d.bo == s.bo && overlap(from, to, bytes)) {
			const uint32_t tmp = scratch();
			const bool backward = to > from;
			for (uint64_t done = 0; done < bytes; done += kChunkBytes) {
				const uint64_t n = std::min(kChunkBytes, bytes - done);
				const uint64_t at = backward ? bytes - done - n : done;
				pending_.push_back({s.bo, from + at, tmp, 0, n});
				flush_copies(); // the scratch is reused: one job per half
				pending_.push_back({tmp, 0, d.bo, to + at, n});
				flush_copies();
			}
			return;
		}
	} catch (const Error &e) {
		return fail(std::string("the collective's scratch buffer: ") + e.what());
	}
	if (pending_.size() == DRM_NEURON_MAX_DMA_COPIES || pending_bytes_ + bytes > 64 * kChunkBytes)
		flush_copies();
	pending_.push_back({s.bo, from, d.bo, to, bytes});
	pending_bytes_ += bytes;
}

void KmdCollectiveMover::submit_reduce(uint32_t dst_bo, uint64_t dst_address, std::span<const Region> srcs,
				       std::span<const uint64_t> src_addresses, uint64_t count, uint8_t dtype,
				       kernels::CollectiveReduce op)
{
	CollectiveJobHeader h;
	h.dtype = dtype;
	h.op = static_cast<uint8_t>(op);
	h.count = count;
	h.dst = dst_address;
	std::vector<JobBo> bos;
	auto add = [&](uint32_t handle, bool write) {
		for (auto &b : bos)
			if (b.handle == handle)
				return void(b.write = b.write || write);
		bos.push_back({handle, true, write});
	};
	for (const Region &s : srcs)
		add(s.bo, false);
	add(dst_bo, true);
	const Fence waits[1] = {last_};
	last_ = files_->compute(core_, collective_job_bytes(h, src_addresses), bos,
				last_.valid() ? std::span<const Fence>(waits) : std::span<const Fence>());
	last_compute_ = true;
}

void KmdCollectiveMover::reduce(int dst, uint64_t dst_offset, std::span<const int> srcs, uint64_t src_offset,
				uint64_t count, uint8_t dtype, kernels::CollectiveReduce op)
{
	if (!error_.empty() || count == 0)
		return;
	if (srcs.size() > kMaxCollectiveSources)
		return fail("a reduction over " + std::to_string(srcs.size()) + " members: a device job takes at most " +
			    std::to_string(kMaxCollectiveSources) + " sources (the driver's BO list holds 256)");
	flush_copies(); // copies issued before it run before it
	const uint64_t bytes = count * kernels::collective_element_bytes(dtype);
	const Region &d = regions_.at(dst);
	const uint64_t dst_address = d.address + dst_offset;
	std::vector<Region> sources;
	std::vector<uint64_t> addresses;
	bool aliased = false; // dst overlaps a source the kernel reads after writing dst
	for (size_t i = 0; i < srcs.size(); ++i) {
		sources.push_back(regions_.at(srcs[i]));
		addresses.push_back(sources.back().address + src_offset);
		if (!(i == 0 && addresses.back() == dst_address) && overlap(addresses.back(), dst_address, bytes))
			aliased = true;
	}
	try {
		if (!aliased)
			return submit_reduce(d.bo, dst_address, sources, addresses, count, dtype, op);
		// Into the scratch BO, then copied over dst (bytes <= one chunk).
		if (bytes > kChunkBytes)
			return fail("a reduction of " + std::to_string(bytes) + " bytes onto one of its sources is longer "
				    "than a chunk (" + std::to_string(kChunkBytes) + ")");
		const uint32_t tmp = scratch();
		submit_reduce(tmp, KmdTenant::address_of(*scratch_), sources, addresses, count, dtype, op);
		pending_.push_back({tmp, 0, d.bo, d.bo_offset + dst_offset, bytes});
		flush_copies();
	} catch (const Error &e) {
		fail(std::string("a reduction job of the collective: ") + e.what());
	}
}

std::string KmdCollectiveMover::wait(const Fence &f, bool compute)
{
	const int rc = files_->wait(f, deadline_after_ms(kFinishTimeoutMs));
	if (rc == 0)
		return {};
	std::string why = std::string(compute ? "a reduction job" : "a DMA job") + " of the collective failed: " +
			  (rc == -ETIME ? std::string("not done after ") + std::to_string(kFinishTimeoutMs / 1000) + " s"
					: std::string(strerror(-rc)));
	if (compute)
		if (auto fault = backend_.slot(*device_).take_fault(files_->client_id(), core_, f.job_seq))
			why += " (" + fault->reason + ")";
	return why;
}

void KmdCollectiveMover::step_done()
{
	flush_copies();
	// At most the previous step and this one queued: the pacer's yields act
	// within a step of being asked.
	if (step_fence_.valid() && error_.empty())
		if (auto why = wait(step_fence_, step_compute_); !why.empty())
			fail(why);
	step_fence_ = last_;
	step_compute_ = last_compute_;
}

std::string KmdCollectiveMover::finish()
{
	if (finished_)
		return error_;
	finished_ = true;
	flush_copies();
	if (last_.valid()) {
		// Waited for even after a failure: the imports below must outlive every job.
		if (auto why = wait(last_, last_compute_); !why.empty())
			fail(why);
	}
	try {
		for (const auto &[key, handle] : imports_)
			files_->close_handle(handle);
		if (scratch_)
			files_->free(*scratch_);
	} catch (const Error &e) {
		fail(std::string("closing the collective's imports: ") + e.what());
	}
	imports_.clear();
	scratch_.reset();
	return error_;
}

} // namespace neuron::kmd
