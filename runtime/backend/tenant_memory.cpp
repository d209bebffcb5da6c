#include "tenant_memory.h"

#include <gate/admit.h>

namespace neuron::backend {

std::optional<DeviceAllocation> TenantMemory::remove_device(uint32_t device, uint64_t address)
{
	auto d = device_.find(device);
	if (d == device_.end())
		return std::nullopt;
	auto it = d->second.find(address);
	if (it == d->second.end())
		return std::nullopt;
	DeviceAllocation a = it->second;
	d->second.erase(it);
	return a;
}

std::optional<HostRegion> TenantMemory::remove_host(uint32_t handle)
{
	auto h = host_.find(handle);
	if (h == host_.end())
		return std::nullopt;
	HostRegion r = std::move(h->second);
	host_.erase(h);
	return r;
}

const DeviceAllocation *TenantMemory::find_device(uint32_t device, uint64_t address, uint64_t bytes,
						  uint64_t *start) const
{
	auto d = device_.find(device);
	if (d == device_.end())
		return nullptr;
	auto it = d->second.upper_bound(address);
	if (it == d->second.begin())
		return nullptr;
	--it;
	const uint64_t first = it->first, size = it->second.size;
	if (address < first || bytes > size || address - first > size - bytes)
		return nullptr;
	*start = first;
	return &it->second;
}

bool TenantMemory::set_program(uint32_t device, uint64_t address, uint64_t program)
{
	auto d = device_.find(device);
	if (d == device_.end())
		return false;
	auto it = d->second.find(address);
	if (it == d->second.end())
		return false;
	it->second.program = program;
	return true;
}

uint64_t TenantMemory::program_of(uint32_t device, uint64_t address) const
{
	auto d = device_.find(device);
	if (d == device_.end())
		return 0;
	auto it = d->second.find(address);
	return it == d->second.end() ? 0 : it->second.program;
}

const HostRegion *TenantMemory::host(uint32_t handle) const
{
	auto h = host_.find(handle);
	return h == host_.end() ? nullptr : &h->second;
}

uint64_t TenantMemory::device_bytes(uint32_t device) const
{
	uint64_t total = 0;
	if (auto d = device_.find(device); d != device_.end())
		for (const auto &[addr, a] : d->second)
			total += a.size;
	return total;
}

uint64_t TenantMemory::host_bytes() const
{
	uint64_t total = 0;
	for (const auto &[handle, r] : host_)
		total += r.size;
	return total;
}

bool TenantMemory::Space::place_device(uint64_t address, uint64_t bytes, bool, gate::Placement *out,
				       std::string *why) const
{
	uint64_t start = 0;
	const DeviceAllocation *a = m_.find_device(device_, address, bytes, &start);
	if (!a) {
		*why = "bytes [" + gate::hex(address) + ", +" + std::to_string(bytes) + ") on device " +
		       std::to_string(device_) + " are not inside one allocation of this tenant";
		return false;
	}
	out->data = a->host ? a->host + (address - start) : nullptr;
	out->handle = a->handle;
	out->handle_offset = address - a->handle_base;
	out->key = out->data ? reinterpret_cast<uintptr_t>(out->data) : address;
	return true;
}

bool TenantMemory::Space::place_host(uint32_t handle, uint64_t offset, uint64_t bytes, bool, gate::Placement *out,
				     std::string *why) const
{
	const HostRegion *r = m_.host(handle);
	if (!r) {
		*why = "host buffer " + std::to_string(handle) + " is not registered by this tenant";
		return false;
	}
	if (offset > r->size || bytes > r->size - offset) {
		*why = "bytes [" + std::to_string(offset) + ", +" + std::to_string(bytes) + ") run past host buffer " +
		       std::to_string(handle) + " of " + std::to_string(r->size) + " bytes";
		return false;
	}
	out->data = r->host ? r->host + offset : nullptr;
	out->handle = device_ < r->handles.size() ? r->handles[device_] : 0;
	out->handle_offset = offset;
	// One space for the overlap rules: this process's addresses where the bytes
	// are mapped here; else tenant device addresses (below 2^63) and, above them, a
	// 2^32-byte window per host buffer.
	out->key = out->data ? reinterpret_cast<uintptr_t>(out->data) : (1ull << 63) + (uint64_t(handle) << 32) + offset;
	return true;
}

} // namespace neuron::backend
