// A tenant's side of a device backend: its device memory, its host buffers, and
// whatever the backend keeps per tenant (kmd: one open driver file per device).
// The daemon's Tenant (daemon/tenant.h) holds one and never asks which backend it
// is; the backend's engines reach it through the tenant's queues (Queue::tenant()).
//
// Threads: the control thread calls every virtual method but read_device; engines
// read memory() under its lock (tenant_memory.h) and call read_device and
// write_device (a command's stamp).
#pragma once

#include "tenant_memory.h"

#include <program/table.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace neuron::backend {

class Queue;

// Why a backend refused a tenant's request, in terms the API maps onto its codes.
struct Refusal {
	enum Code { InvalidArgument, OutOfMemory, NotFound, ResourceExhausted, Unavailable } code = InvalidArgument;
	std::string message;
};
using Result = std::optional<Refusal>; // nullopt: done

class TenantContext {
public:
	explicit TenantContext(uint64_t tenant_id) : id_(tenant_id) {}
	virtual ~TenantContext() = default;
	TenantContext(const TenantContext &) = delete;
	TenantContext &operator=(const TenantContext &) = delete;

	uint64_t id() const { return id_; }
	TenantMemory &memory() { return memory_; }
	const TenantMemory &memory() const { return memory_; }
	// Its registered programs (<neuron/program.h>): the daemon adds and removes,
	// engines find them when they admit an EXEC_PROGRAM (table.h: own lock).
	program::ProgramTable &programs() { return programs_; }
	const program::ProgramTable &programs() const { return programs_; }

	// Zeroed device memory of `size` bytes on `device` (alignment 0: the API's
	// default of 256); its tenant-visible address in *address.
	virtual Result alloc(uint32_t device, uint64_t size, uint64_t alignment, uint64_t *address) = 0;
	// Restart survival: the allocation [address, address + size) on `device` that
	// the neurond before this one had made for this tenant, with its bytes as they
	// are (DeviceBackend::restart_unsupported() says whether a backend can).
	// `handle`: its DeviceAllocation::handle then (kmd: the BO in the kept file;
	// the driver cannot list a file's handles, so it comes from the journal).
	virtual Result adopt_allocation(uint32_t, uint64_t, uint64_t, uint32_t)
	{
		return Refusal{Refusal::Unavailable, "this backend cannot adopt device memory after a restart"};
	}
	// Restart survival where neurond cannot address the device memory (kmd: it
	// lies in driver BOs): the undo log's bytes (queue_keep.h) go through the
	// device's DMA engine. Each range [addr, +bytes) lies in one of this tenant's
	// allocations on `device`; `host` is where its bytes go (read) or come from
	// (write). Engines call read_device before a command and write_device for a
	// command's stamp (NEURON_CMD_F_STAMP), the control thread write_device at
	// adoption; all with the memory lock held, which they do not take.
	struct DeviceBytes {
		uint64_t addr = 0, bytes = 0;
		std::byte *host = nullptr;
	};
	virtual Result read_device(uint32_t, std::span<const DeviceBytes>)
	{
		return Refusal{Refusal::Unavailable, "this backend cannot copy device memory for the undo log"};
	}
	virtual Result write_device(uint32_t, std::span<const DeviceBytes>)
	{
		return Refusal{Refusal::Unavailable, "this backend cannot copy device memory for the undo log"};
	}
	// Restart survival: the descriptors behind this context that must outlive
	// neurond, by device (kmd: the tenant's open driver file of each device, which
	// holds its BOs), or none (emu: its memory lies in the kept HBM memfd). The
	// context keeps ownership; the daemon hands copies to its supervisor.
	virtual std::vector<int> kept_files() const { return {}; }
	// Restart survival, once the journal's allocations, host buffers and programs
	// are adopted and before any queue is: frees whatever else the kept files hold
	// (kmd: BOs the neurond before made but had not recorded when it died, and the
	// chain-state buffers of the commands it was running) and says what, or "".
	virtual std::string close_unclaimed() { return {}; }
	// Restart survival: host buffer `handle` again from its kept memfd, as
	// register_host; `earlier` are its HostRegion::handles under the neurond before
	// (kmd: its imports into the kept files, closed here once imported again).
	virtual Result adopt_host(int memfd, uint64_t size, uint32_t handle, const std::vector<uint32_t> &)
	{
		return register_host(memfd, size, handle);
	}
	// Waits for the tenant's running tiles, then frees (and zeroes) it.
	virtual Result free(uint32_t device, uint64_t address) = 0;
	// The tenant's memfd (sealed against shrinking, at least `size` bytes; the
	// caller checked both) as host buffer `handle`, usable by DMA queues.
	virtual Result register_host(int memfd, uint64_t size, uint32_t handle) = 0;
	virtual Result unregister_host(uint32_t handle) = 0;
	// A queue of this tenant starts (before the scheduler sees it) or ended (after
	// it was retired and left the scheduler).
	virtual Result attach_queue(Queue &q) = 0;
	virtual void detach_queue(Queue &q) = 0;
	// Physical cores of `device` this tenant's jobs may run on now, as whoever
	// enforces it says (kmd: the kernel's mask of its driver file); nullopt if the
	// backend enforces nothing beyond the scheduler's choice.
	virtual std::optional<uint64_t> enforced_core_mask(uint32_t device) const = 0;
	// Everything goes back (its queues are already detached): memory zeroed and
	// freed, host buffers unmapped, driver files closed. Once.
	virtual void release() = 0;

protected:
	TenantMemory memory_;
	program::ProgramTable programs_;

private:
	uint64_t id_;
};

} // namespace neuron::backend
