// What one tenant may touch: its device allocations and its host buffers.
//
// Lock protocol: `mutex` is taken shared by an engine while it resolves and runs one
// of the tenant's commands, and exclusively by the control thread to add or remove
// memory. So memory never disappears under a running command, and a free waits at
// most for the command in flight.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <shared_mutex>
#include <string>

namespace neuron::chip {

struct HostBuffer {
	std::byte *ptr = nullptr;
	uint64_t size = 0;
};

class TenantMemory {
public:
	mutable std::shared_mutex mutex;

	// Both called with `mutex` held exclusively.
	void add_device(uint32_t device, uint64_t address, uint64_t size) { device_[device][address] = size; }
	bool remove_device(uint32_t device, uint64_t address);
	void add_host(uint32_t handle, HostBuffer buffer) { host_[handle] = buffer; }
	std::optional<HostBuffer> remove_host(uint32_t handle);

	// With `mutex` held (either way): true if [address, address + bytes) lies in
	// one allocation on `device`.
	bool owns_device_range(uint32_t device, uint64_t address, uint64_t bytes) const;
	// The host buffer behind `handle`, or nullptr.
	const HostBuffer *host_buffer(uint32_t handle) const;

	// With `mutex` held exclusively, after the caller released what was inside.
	void clear()
	{
		device_.clear();
		host_.clear();
	}

	uint64_t device_bytes(uint32_t device) const;
	const std::map<uint32_t, std::map<uint64_t, uint64_t>> &device_allocations() const { return device_; }
	const std::map<uint32_t, HostBuffer> &host_buffers() const { return host_; }

private:
	std::map<uint32_t, std::map<uint64_t, uint64_t>> device_; // device -> address -> size
	std::map<uint32_t, HostBuffer> host_;
};

} // namespace neuron::chip
