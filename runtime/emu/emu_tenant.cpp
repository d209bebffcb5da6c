#include "emu_tenant.h"

#include <bit>
#include <cerrno>
#include <cstring>
#include <sys/mman.h>

namespace neuron::emu {

using backend::Refusal;

EmuTenant::EmuTenant(uint64_t tenant_id, std::vector<chip::Device *> devices)
	: TenantContext(tenant_id), devices_(std::move(devices))
{
}

EmuTenant::~EmuTenant() { release(); }

backend::Result EmuTenant::alloc(uint32_t device, uint64_t size, uint64_t alignment, uint64_t *address)
{
	chip::Device &d = *devices_.at(device);
	std::string why;
	auto addr = d.allocate(size, alignment, &why);
	if (!addr) {
		const bool memory_full = size != 0 && (alignment == 0 || std::has_single_bit(alignment));
		return Refusal{memory_full ? Refusal::OutOfMemory : Refusal::InvalidArgument, why};
	}
	auto lock = memory_.lock_exclusive();
	memory_.add_device(device, *addr, backend::DeviceAllocation{size, d.host_address(*addr), 0, *addr});
	*address = *addr;
	return std::nullopt;
}

backend::Result EmuTenant::adopt_allocation(uint32_t device, uint64_t address, uint64_t size, uint32_t)
{
	if (device >= devices_.size())
		return Refusal{Refusal::NotFound, "device " + std::to_string(device) + " does not exist"};
	chip::Device &d = *devices_[device];
	std::string why;
	if (!d.reserve(address, size, &why))
		return Refusal{Refusal::InvalidArgument, "cannot adopt the allocation: " + why};
	auto lock = memory_.lock_exclusive();
	memory_.add_device(device, address, backend::DeviceAllocation{size, d.host_address(address), 0, address});
	return std::nullopt;
}

backend::Result EmuTenant::free(uint32_t device, uint64_t address)
{
	// Exclusive: waits for a command of this tenant that may be using the memory.
	auto lock = memory_.lock_exclusive();
	if (!memory_.remove_device(device, address))
		return Refusal{Refusal::NotFound, "no allocation of this tenant starts at device address " +
							  std::to_string(address) + " on device " + std::to_string(device)};
	devices_.at(device)->release(address);
	return std::nullopt;
}

backend::Result EmuTenant::register_host(int memfd, uint64_t size, uint32_t handle)
{
	void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	if (p == MAP_FAILED)
		return Refusal{Refusal::InvalidArgument, std::string("cannot map the host buffer: ") + std::strerror(errno)};
	auto lock = memory_.lock_exclusive();
	memory_.add_host(handle, backend::HostRegion{size, static_cast<std::byte *>(p), {}});
	return std::nullopt;
}

backend::Result EmuTenant::unregister_host(uint32_t handle)
{
	auto lock = memory_.lock_exclusive();
	auto r = memory_.remove_host(handle);
	if (!r)
		return Refusal{Refusal::NotFound, "host buffer " + std::to_string(handle) + " is not registered by this tenant"};
	munmap(r->host, r->size);
	return std::nullopt;
}

void EmuTenant::release()
{
	if (released_)
		return;
	released_ = true;
	// Exclusive lock: any command still running on an engine finishes first.
	auto lock = memory_.lock_exclusive();
	for (const auto &[device, allocs] : memory_.device_allocations())
		for (const auto &[address, a] : allocs)
			devices_.at(device)->release(address);
	for (const auto &[handle, r] : memory_.host_buffers())
		munmap(r.host, r.size);
	memory_.clear();
}

} // namespace neuron::emu
