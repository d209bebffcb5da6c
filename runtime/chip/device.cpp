#include "device.h"

namespace neuron::chip {

Device::Device(uint32_t index, Profile profile)
	: index_(index), profile_(std::move(profile)), hbm_(profile_.hbm_bytes),
	  allocator_(kDeviceAddressBase, profile_.hbm_bytes)
{
}

Device::Device(uint32_t index, Profile profile, int kept_fd)
	: index_(index), profile_(std::move(profile)),
	  hbm_(profile_.hbm_bytes, kept_fd, ("neuron-hbm-" + std::to_string(index)).c_str()),
	  allocator_(kDeviceAddressBase, profile_.hbm_bytes)
{
}

bool Device::reserve(uint64_t address, uint64_t size, std::string *why)
{
	std::lock_guard lock(memory_mutex_);
	return allocator_.reserve(address, size, why);
}

void Device::zero_free()
{
	std::lock_guard lock(memory_mutex_);
	for (const auto &[address, size] : allocator_.free_blocks())
		hbm_.zero(address - kDeviceAddressBase, size);
}

std::optional<uint64_t> Device::allocate(uint64_t size, uint64_t alignment, std::string *why)
{
	std::lock_guard lock(memory_mutex_);
	return allocator_.allocate(size, alignment, why);
}

bool Device::release(uint64_t address)
{
	std::lock_guard lock(memory_mutex_);
	const uint64_t size = allocator_.allocation_size(address);
	if (size == 0)
		return false;
	// Zero before the range can be handed to anyone else.
	hbm_.zero(address - kDeviceAddressBase, size);
	return allocator_.release(address);
}

HbmStats Device::stats() const
{
	std::lock_guard lock(memory_mutex_);
	return allocator_.stats();
}

} // namespace neuron::chip
