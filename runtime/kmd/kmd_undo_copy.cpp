// The undo log's copies on the kmd backend (backend/queue_keep.h): the bytes a
// command may overwrite lie in the tenant's device BOs, which neurond does not
// map (HBM is the device's). They go through the device's own DMA engine into a
// host BO of the tenant's file that neurond maps, and from there into the kept
// undo memfd; a restore runs the same path backwards. A real device saves and
// restores the same way: device-to-host DMA, no CPU access to its HBM.
#include "kmd_backend.h"
#include "kmd_tenant.h"

#include <neuron/futex.h>

#include <drm/neuron_accel.h>

#include <algorithm>
#include <cstring>

namespace neuron::kmd {

namespace {

enum class Direction { FromDevice, ToDevice };

// One DMA copy per range between its BO and its place in `stage`, in jobs of at
// most the driver's limit, each waited for.
backend::Result copy_through_stage(KmdContext &ctx, const KmdDeviceSlot &slot, const backend::TenantMemory &memory,
				   uint32_t device, std::span<const backend::TenantContext::DeviceBytes> ranges,
				   const HostBuffer &stage, Direction dir)
{
	std::vector<DmaCopy> copies;
	uint64_t at = 0;
	for (const auto &r : ranges) {
		uint64_t start = 0;
		const backend::DeviceAllocation *a = memory.find_device(device, r.addr, r.bytes, &start);
		if (!a || !a->handle)
			return backend::Refusal{backend::Refusal::NotFound,
						"device range at " + std::to_string(r.addr) + " of " + std::to_string(r.bytes) +
							" bytes is not in one of the tenant's allocations"};
		const uint64_t in_bo = r.addr - a->handle_base;
		if (dir == Direction::FromDevice)
			copies.push_back({a->handle, in_bo, stage.handle, at, r.bytes});
		else
			copies.push_back({stage.handle, at, a->handle, in_bo, r.bytes});
		at += r.bytes;
	}
	const int64_t deadline = deadline_after_ms(std::max<int64_t>(slot.info().job_timeout_ms, 1000) * 3 + 5000);
	for (size_t off = 0; off < copies.size(); off += DRM_NEURON_MAX_DMA_COPIES) {
		const size_t n = std::min<size_t>(DRM_NEURON_MAX_DMA_COPIES, copies.size() - off);
		if (const int r = ctx.wait(ctx.dma(0, std::span(copies.data() + off, n)), deadline); r != 0)
			return backend::Refusal{backend::Refusal::Unavailable,
						std::string("the DMA job failed: ") + std::strerror(-r)};
	}
	return std::nullopt;
}

backend::Result copy(KmdTenant &t, KmdBackend &backend, uint32_t device,
		     std::span<const backend::TenantContext::DeviceBytes> ranges, Direction dir)
{
	uint64_t total = 0;
	for (const auto &r : ranges)
		total += r.bytes;
	if (total == 0)
		return std::nullopt;
	try {
		KmdContext &ctx = t.context(device);
		HostBuffer stage = ctx.create_host(total);
		if (dir == Direction::ToDevice) {
			uint64_t at = 0;
			for (const auto &r : ranges) {
				std::memcpy(stage.bo_map + at, r.host, r.bytes);
				at += r.bytes;
			}
		}
		auto refused = copy_through_stage(ctx, backend.slot(device), t.memory(), device, ranges, stage, dir);
		if (!refused && dir == Direction::FromDevice) {
			uint64_t at = 0;
			for (const auto &r : ranges) {
				std::memcpy(r.host, stage.bo_map + at, r.bytes);
				at += r.bytes;
			}
		}
		ctx.free(stage);
		return refused;
	} catch (const Error &e) {
		return backend::Refusal{backend::Refusal::Unavailable, e.what()};
	}
}

} // namespace

backend::Result KmdTenant::read_device(uint32_t device, std::span<const DeviceBytes> ranges)
{
	if (device >= contexts_.size())
		return backend::Refusal{backend::Refusal::NotFound, "device " + std::to_string(device) + " does not exist"};
	return copy(*this, backend_, device, ranges, Direction::FromDevice);
}

backend::Result KmdTenant::write_device(uint32_t device, std::span<const DeviceBytes> ranges)
{
	if (device >= contexts_.size())
		return backend::Refusal{backend::Refusal::NotFound, "device " + std::to_string(device) + " does not exist"};
	return copy(*this, backend_, device, ranges, Direction::ToDevice);
}

} // namespace neuron::kmd
