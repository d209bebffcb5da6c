#include "tenant_memory.h"

namespace neuron::chip {

bool TenantMemory::remove_device(uint32_t device, uint64_t address)
{
	auto d = device_.find(device);
	return d != device_.end() && d->second.erase(address) == 1;
}

std::optional<HostBuffer> TenantMemory::remove_host(uint32_t handle)
{
	auto h = host_.find(handle);
	if (h == host_.end())
		return std::nullopt;
	HostBuffer b = h->second;
	host_.erase(h);
	return b;
}

bool TenantMemory::owns_device_range(uint32_t device, uint64_t address, uint64_t bytes) const
{
	auto d = device_.find(device);
	if (d == device_.end())
		return false;
	auto it = d->second.upper_bound(address);
	if (it == d->second.begin())
		return false;
	--it;
	const uint64_t start = it->first, size = it->second;
	return address >= start && bytes <= size && address - start <= size - bytes;
}

const HostBuffer *TenantMemory::host_buffer(uint32_t handle) const
{
	auto h = host_.find(handle);
	return h == host_.end() ? nullptr : &h->second;
}

uint64_t TenantMemory::device_bytes(uint32_t device) const
{
	uint64_t total = 0;
	auto d = device_.find(device);
	if (d != device_.end())
		for (const auto &[addr, size] : d->second)
			total += size;
	return total;
}

} // namespace neuron::chip
