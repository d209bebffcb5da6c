// KmdTenant::fill_scratch: bytes neurond puts into a scratch BO of the tenant's
// file before the command's first job (a tile kernel's program). neurond does
// not map HBM (it is the device's): the bytes go through a host BO it maps and
// the device's DMA engine, as a real host loads a command's data.
#include "kmd_backend.h"
#include "kmd_tenant.h"

#include <neuron/futex.h>

#include <algorithm>
#include <cstring>

namespace neuron::kmd {

void KmdTenant::fill_scratch(uint32_t device, const DeviceBuffer &b, std::span<const std::byte> bytes)
{
	if (bytes.empty())
		return;
	if (bytes.size() > b.size)
		throw Error(EINVAL, "filling a scratch BO of " + std::to_string(b.size) + " bytes with " +
					    std::to_string(bytes.size()));
	KmdContext &ctx = context(device);
	HostBuffer stage = ctx.create_host(bytes.size());
	std::memcpy(stage.bo_map, bytes.data(), bytes.size());
	const DmaCopy copy{stage.handle, 0, b.handle, 0, bytes.size()};
	const KmdDeviceSlot &slot = backend_.slot(device);
	const int64_t deadline = deadline_after_ms(std::max<int64_t>(slot.info().job_timeout_ms, 1000) * 3 + 5000);
	const int r = ctx.wait(ctx.dma(0, std::span(&copy, 1)), deadline);
	ctx.free(stage);
	if (r != 0)
		throw Error(-r, "the DMA job filling a scratch BO failed");
}

} // namespace neuron::kmd
