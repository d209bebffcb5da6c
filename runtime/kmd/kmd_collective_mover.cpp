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

// How long a wait for one of the collective's jobs may take: far above any chunk's
// time, so only a wedged device hits it (the driver's own job timeout comes first).
constexpr int64_t kJobTimeoutMs = 120'000;

bool overlap(uint64_t a, uint64_t b, uint64_t bytes) { return a < b + bytes && b < a + bytes; }

// The core whose job queue takes the collective's reductions on a device. The
// driver runs a core's jobs in order, so a reduction queued on a core that serves
// inference would hold inference commands back: a core training owns and holds,
// else one training holds (on loan), else the last one.
uint32_t reduce_core(const sched::CoreScheduler &cores)
{
	std::optional<uint32_t> borrowed;
	for (uint32_t c = cores.cores(); c-- > 0;) {
		const sched::CorePools p = cores.pools(c);
		if (p.holder != sched::Pool::Training)
			continue;
		if (p.home == sched::Pool::Training)
			return c;
		borrowed = borrowed.value_or(c);
	}
	return borrowed.value_or(cores.cores() - 1);
}

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

KmdCollectiveMover::Lane &KmdCollectiveMover::lane(uint32_t device)
{
	auto it = lanes_.find(device);
	if (it == lanes_.end()) {
		KmdContext &file = backend_.slot(device).collective_context();
		it = lanes_.emplace(device, Lane{}).first;
		it->second.device = device;
		it->second.file = &file;
		it->second.core = reduce_core(backend_.cores(device));
	}
	return it->second;
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
	try {
		Lane &l = lane(r.device);
		KmdContext &owner = tenant->context(r.device);
		auto key = std::make_pair(owner.fd(), a->handle);
		auto it = l.imports.find(key);
		if (it == l.imports.end()) {
			const int dmabuf = owner.export_device(a->handle);
			uint32_t h = 0;
			try {
				h = l.file->import_buffer(dmabuf);
			} catch (...) {
				::close(dmabuf);
				throw;
			}
			::close(dmabuf); // the import holds the BO
			it = l.imports.emplace(key, h).first;
		}
		*id = static_cast<int>(regions_.size());
		regions_.push_back({r.device, it->second, r.address - a->handle_base, r.address});
	} catch (const Error &e) {
		return std::string("sharing it with neurond's collective file failed: ") + e.what();
	}
	return {};
}

void KmdCollectiveMover::enter(Lane &l)
{
	if (current_ == &l)
		return;
	flush_copies();
	if (current_ && current_->last.valid() && error_.empty())
		if (auto why = wait(*current_, current_->last, current_->last_compute); !why.empty())
			fail(why);
	current_ = &l;
}

void KmdCollectiveMover::flush_copies()
{
	if (pending_.empty() || !error_.empty()) {
		pending_.clear();
		pending_bytes_ = 0;
		return;
	}
	Lane &l = *current_;
	try {
		const Fence waits[1] = {l.last};
		l.last = l.file->dma(0, pending_, l.last.valid() ? std::span<const Fence>(waits) : std::span<const Fence>());
		l.last_compute = false;
	} catch (const Error &e) {
		fail(std::string("a DMA job of the collective: ") + e.what());
	}
	pending_.clear();
	pending_bytes_ = 0;
}

void KmdCollectiveMover::queue_copy(Lane &l, const DmaCopy &c)
{
	enter(l);
	if (pending_.size() == DRM_NEURON_MAX_DMA_COPIES || pending_bytes_ + c.size > 64 * kChunkBytes)
		flush_copies();
	pending_.push_back(c);
	pending_bytes_ += c.size;
}

uint32_t KmdCollectiveMover::scratch(Lane &l)
{
	if (!l.scratch)
		l.scratch = l.file->alloc_device(kChunkBytes);
	return l.scratch->handle;
}

const DeviceBuffer &KmdCollectiveMover::gather(Lane &l, size_t i)
{
	while (l.gather.size() <= i)
		l.gather.push_back(l.file->alloc_device(kChunkBytes));
	return l.gather[i];
}

KmdCollectiveMover::Stage &KmdCollectiveMover::stage(Lane &from, Lane &to)
{
	const auto key = std::make_pair(from.device, to.device);
	auto it = stages_.find(key);
	if (it != stages_.end())
		return it->second;
	Stage s;
	s.host = from.file->create_host(kChunkBytes);
	try {
		const int dmabuf = from.file->export_fd(s.host);
		try {
			s.imported = to.file->import_buffer(dmabuf);
		} catch (...) {
			::close(dmabuf);
			throw;
		}
		::close(dmabuf);
	} catch (...) {
		from.file->free(s.host);
		throw;
	}
	return stages_.emplace(key, s).first->second;
}

void KmdCollectiveMover::copy_across(Lane &dl, uint32_t dst_bo, uint64_t to, Lane &sl, uint32_t src_bo,
				     uint64_t from, uint64_t bytes)
{
	Stage &s = stage(sl, dl);
	// One stage per pair of devices: each half waits for the other (enter), so
	// the source never overwrites bytes the destination has not read yet.
	for (uint64_t done = 0; done < bytes && error_.empty(); done += kChunkBytes) {
		const uint64_t n = std::min(kChunkBytes, bytes - done);
		queue_copy(sl, {src_bo, from + done, s.host.handle, 0, n});
		queue_copy(dl, {s.imported, 0, dst_bo, to + done, n});
	}
}

void KmdCollectiveMover::copy(int dst, uint64_t dst_offset, int src, uint64_t src_offset, uint64_t bytes)
{
	if (!error_.empty() || bytes == 0)
		return;
	const Region &d = regions_.at(dst), &s = regions_.at(src);
	const uint64_t from = s.bo_offset + src_offset, to = d.bo_offset + dst_offset;
	try {
		Lane &dl = lane(d.device);
		if (d.device != s.device)
			return copy_across(dl, d.bo, to, lane(s.device), s.bo, from, bytes);
		if (d.bo == s.bo && from == to)
			return;
		if (d.bo != s.bo || !overlap(from, to, bytes))
			return queue_copy(dl, {s.bo, from, d.bo, to, bytes});
		// The driver refuses a copy whose ranges overlap within one BO: bounce
		// through the scratch BO, a chunk at a time in memmove's order.
		const uint32_t tmp = scratch(dl);
		const bool backward = to > from;
		for (uint64_t done = 0; done < bytes; done += kChunkBytes) {
			const uint64_t n = std::min(kChunkBytes, bytes - done);
			const uint64_t at = backward ? bytes - done - n : done;
			queue_copy(dl, {s.bo, from + at, tmp, 0, n});
			flush_copies(); // the scratch is reused: one job per half
			queue_copy(dl, {tmp, 0, d.bo, to + at, n});
			flush_copies();
		}
	} catch (const Error &e) {
		fail(std::string("the collective's staging or scratch buffer: ") + e.what());
	}
}

void KmdCollectiveMover::submit_reduce(Lane &l, uint32_t dst_bo, uint64_t dst_address,
				       std::span<const uint32_t> src_bos, std::span<const uint64_t> src_addresses,
				       uint64_t count, uint8_t dtype, kernels::CollectiveReduce op)
{
	enter(l);
	flush_copies(); // copies issued before it run before it
	if (!error_.empty())
		return;
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
	for (uint32_t bo : src_bos)
		add(bo, false);
	add(dst_bo, true);
	const Fence waits[1] = {l.last};
	l.last = l.file->compute(l.core, collective_job_bytes(h, src_addresses), bos,
				 l.last.valid() ? std::span<const Fence>(waits) : std::span<const Fence>());
	l.last_compute = true;
}

void KmdCollectiveMover::reduce(int dst, uint64_t dst_offset, std::span<const int> srcs, uint64_t src_offset,
				uint64_t count, uint8_t dtype, kernels::CollectiveReduce op)
{
	if (!error_.empty() || count == 0)
		return;
	if (srcs.size() > kMaxCollectiveSources)
		return fail("a reduction over " + std::to_string(srcs.size()) + " members: a device job takes at most " +
			    std::to_string(kMaxCollectiveSources) + " sources (the driver's BO list holds 256)");
	const uint64_t bytes = count * kernels::collective_element_bytes(dtype);
	const Region &d = regions_.at(dst);
	const uint64_t dst_address = d.address + dst_offset;
	try {
		Lane &dl = lane(d.device);
		std::vector<uint32_t> bos;
		std::vector<uint64_t> addresses;
		bool aliased = false; // dst overlaps a source the kernel reads after writing dst
		size_t gathered = 0;
		for (size_t i = 0; i < srcs.size(); ++i) {
			const Region &s = regions_.at(srcs[i]);
			if (s.device == d.device) {
				bos.push_back(s.bo);
				addresses.push_back(s.address + src_offset);
			} else {
				// Brought onto dst's device first: the reduction job reads only its own HBM.
				if (bytes > kChunkBytes)
					return fail("a reduction of " + std::to_string(bytes) + " bytes across devices is "
						    "longer than a chunk (" + std::to_string(kChunkBytes) + ")");
				const DeviceBuffer &g = gather(dl, gathered++);
				copy_across(dl, g.handle, 0, lane(s.device), s.bo, s.bo_offset + src_offset, bytes);
				bos.push_back(g.handle);
				addresses.push_back(KmdTenant::address_of(g));
			}
			if (!(i == 0 && addresses.back() == dst_address) && overlap(addresses.back(), dst_address, bytes))
				aliased = true;
		}
		if (!aliased)
			return submit_reduce(dl, d.bo, dst_address, bos, addresses, count, dtype, op);
		// Into the scratch BO, then copied over dst (bytes <= one chunk).
		if (bytes > kChunkBytes)
			return fail("a reduction of " + std::to_string(bytes) + " bytes onto one of its sources is longer "
				    "than a chunk (" + std::to_string(kChunkBytes) + ")");
		const uint32_t tmp = scratch(dl);
		submit_reduce(dl, tmp, KmdTenant::address_of(*dl.scratch), bos, addresses, count, dtype, op);
		queue_copy(dl, {tmp, 0, d.bo, d.bo_offset + dst_offset, bytes});
		flush_copies();
	} catch (const Error &e) {
		fail(std::string("a reduction job of the collective: ") + e.what());
	}
}

std::string KmdCollectiveMover::wait(Lane &l, const Fence &f, bool compute)
{
	const int rc = l.file->wait(f, deadline_after_ms(kJobTimeoutMs));
	if (rc == 0)
		return {};
	std::string why = std::string(compute ? "a reduction job" : "a DMA job") + " of the collective on device " +
			  std::to_string(l.device) + " failed: " +
			  (rc == -ETIME ? std::string("not done after ") + std::to_string(kJobTimeoutMs / 1000) + " s"
					: std::string(strerror(-rc)));
	if (compute)
		if (auto fault = backend_.slot(l.device).take_fault(l.file->client_id(), l.core, f.job_seq))
			why += " (" + fault->reason + ")";
	return why;
}

void KmdCollectiveMover::step_done()
{
	flush_copies();
	// At most the previous step and this one queued: the pacer's yields act
	// within a step of being asked.
	if (step_lane_ && step_fence_.valid() && error_.empty())
		if (auto why = wait(*step_lane_, step_fence_, step_compute_); !why.empty())
			fail(why);
	step_lane_ = current_;
	if (current_) {
		step_fence_ = current_->last;
		step_compute_ = current_->last_compute;
	}
}

void KmdCollectiveMover::release(Lane &l)
{
	for (const auto &[key, handle] : l.imports)
		l.file->close_handle(handle);
	l.imports.clear();
	if (l.scratch)
		l.file->free(*l.scratch);
	l.scratch.reset();
	for (const DeviceBuffer &g : l.gather)
		l.file->free(g);
	l.gather.clear();
}

std::string KmdCollectiveMover::finish()
{
	if (finished_)
		return error_;
	finished_ = true;
	flush_copies();
	// Every lane's last job is waited for even after a failure: the imports and
	// stages below must outlive every job.
	for (auto &[device, l] : lanes_)
		if (l.last.valid())
			if (auto why = wait(l, l.last, l.last_compute); !why.empty())
				fail(why);
	try {
		for (auto &[key, s] : stages_) {
			lanes_.at(key.second).file->close_handle(s.imported);
			lanes_.at(key.first).file->free(s.host);
		}
		stages_.clear();
		for (auto &[device, l] : lanes_)
			release(l);
	} catch (const Error &e) {
		fail(std::string("closing the collective's imports: ") + e.what());
	}
	return error_;
}

} // namespace neuron::kmd
