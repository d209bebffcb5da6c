// What one tenant may touch: its device allocations and its host buffers, with
// where each lies for the backend that made it (a host address for the emu
// backend's in-process engines; a driver buffer handle for the kmd backend). The
// gate (gate/admit.h) checks every operand against it through space().
//
// Lock protocol: `mutex` is taken shared by an engine thread while it resolves and
// runs (or submits) one tile of the tenant's commands, and exclusively
// (lock_exclusive) by the control thread to add or remove memory. So memory never
// disappears under a running tile. glibc's rwlock prefers readers, and a core's
// threads run tiles that overlap, so the shared lock may never be free between
// them: a writer announces itself in writers_waiting_ first, and engines stop
// taking tiles while one waits (a free waits for at most the tiles in flight).
#pragma once

#include <gate/memory_space.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

namespace neuron::backend {

struct DeviceAllocation {
	uint64_t size = 0;          // what the tenant asked for, from its address
	std::byte *host = nullptr;  // the first byte's host address (emu), or null
	uint32_t handle = 0;        // the backend's buffer behind it (kmd: the BO), or 0
	uint64_t handle_base = 0;   // tenant address of the buffer's first byte
	uint64_t program = 0;       // a program's buffer (<neuron/program.h>): freed with it, not by hand
};

struct HostRegion {
	uint64_t size = 0;
	std::byte *host = nullptr;     // the daemon's mapping of the tenant's memory (emu)
	std::vector<uint32_t> handles; // per device: the backend's buffer for it (kmd), or empty
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

	// With `mutex` held exclusively.
	void add_device(uint32_t device, uint64_t address, DeviceAllocation a) { device_[device][address] = a; }
	std::optional<DeviceAllocation> remove_device(uint32_t device, uint64_t address);
	void add_host(uint32_t handle, HostRegion r) { host_[handle] = std::move(r); }
	std::optional<HostRegion> remove_host(uint32_t handle);
	// Marks the allocation at `address` as program `program`'s buffer; false if none starts there.
	bool set_program(uint32_t device, uint64_t address, uint64_t program);
	void clear()
	{
		device_.clear();
		host_.clear();
	}

	// With `mutex` held (either way).
	// The allocation holding all of [address, address + bytes) on `device`, and
	// its start (*start); nullptr if none does.
	const DeviceAllocation *find_device(uint32_t device, uint64_t address, uint64_t bytes, uint64_t *start) const;
	const HostRegion *host(uint32_t handle) const;
	// The program whose buffer starts at `address` (0: none, or the tenant's own memory).
	uint64_t program_of(uint32_t device, uint64_t address) const;
	uint64_t device_bytes(uint32_t device) const;
	uint64_t host_bytes() const;
	const std::map<uint32_t, std::map<uint64_t, DeviceAllocation>> &device_allocations() const { return device_; }
	const std::map<uint32_t, HostRegion> &host_buffers() const { return host_; }

	// The gate's view of this memory for commands of a queue on `device` (with
	// `mutex` held while it is used).
	class Space : public gate::MemorySpace {
	public:
		Space(const TenantMemory &m, uint32_t device) : m_(m), device_(device) {}
		bool place_device(uint64_t address, uint64_t bytes, bool write, gate::Placement *out,
				  std::string *why) const override;
		bool place_host(uint32_t handle, uint64_t offset, uint64_t bytes, bool write, gate::Placement *out,
				std::string *why) const override;

	private:
		const TenantMemory &m_;
		uint32_t device_;
	};
	Space space(uint32_t device) const { return Space(*this, device); }

private:
	std::atomic<int> writers_waiting_{0};
	std::map<uint32_t, std::map<uint64_t, DeviceAllocation>> device_; // device -> address -> allocation
	std::map<uint32_t, HostRegion> host_;                              // handle -> buffer
};

} // namespace neuron::backend
