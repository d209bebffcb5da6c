// What one tenant may touch: its device allocations and its host buffers.
//
// Lock protocol: `mutex` is taken shared by an engine thread while it resolves and
// runs one tile of the tenant's commands, and exclusively (lock_exclusive) by the
// control thread to add or remove memory. So memory never disappears under a running
// tile. glibc's rwlock prefers readers, and a core's threads run tiles that overlap,
// so the shared lock may never be free between them: a writer announces itself in
// writers_waiting_ first, and engines stop taking tiles while one waits (a free
// waits for at most the tiles in flight).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
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

	// The exclusive lock, announced to the engines while it is awaited.
	std::unique_lock<std::shared_mutex> lock_exclusive()
	{
		writers_waiting_.fetch_add(1, std::memory_order_seq_cst);
		std::unique_lock lock(mutex);
		writers_waiting_.fetch_sub(1, std::memory_order_relaxed);
		return lock;
	}
	// Any thread: a writer waits for the lock (engines then yield between tiles).
	bool writer_waiting() const { return writers_waiting_.load(std::memory_order_relaxed) != 0; }

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
	std::atomic<int> writers_waiting_{0};
	std::map<uint32_t, std::map<uint64_t, uint64_t>> device_; // device -> address -> size
	std::map<uint32_t, HostBuffer> host_;
};

} // namespace neuron::chip
