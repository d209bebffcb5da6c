// A tenant of the kmd backend: one open file of each device's node (DESIGN.md
// section 6), so the kernel keeps its handles, accounting (fdinfo) and bans apart
// from every other tenant's. Its HBM allocations are device BOs of that file, its
// host buffers the tenant's memfds imported into every file; TenantMemory records
// each as the BO handle behind the tenant's address, for the runners' job BO lists.
//
// Core masks: a file starts with no core. The engine of physical core c grants c
// (from the controller file) before it submits the tenant's first job there
// (allow_core); when c leaves the tenant's pool, the backend takes it back
// (revoke_core) once c's engine confirmed it runs nothing of that pool any more.
// So the kernel refuses a job of this tenant on any core the scheduler would not
// run it on.
//
// Threads: the control thread calls TenantContext's methods; engine threads call
// context(), host_import(), read_device() and write_device() with the TenantMemory lock held (release() takes it
// exclusively before it closes the files), and allow_core(), revoke_core(),
// enforced_core_mask() and the scratch calls, which take files_mutex_: it guards
// the masks and, against release(), the files themselves.
#pragma once

#include "kmd.h"

#include <backend/tenant_context.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace neuron::kmd {

class KmdBackend;

class KmdTenant final : public backend::TenantContext {
public:
	// Opens its files; throws kmd::Error if the driver refuses.
	KmdTenant(uint64_t tenant_id, pid_t pid, KmdBackend &backend);
	// Restart survival: a tenant of the neurond before this one, on the files it
	// kept (by device, owned from here on; -1: a new file is opened). Each kept
	// file's core mask is set to none, as a new file's: the engines grant cores
	// again as they schedule the tenant. Throws kmd::Error (the fds closed).
	KmdTenant(uint64_t tenant_id, pid_t pid, KmdBackend &backend, std::vector<int> kept_files);
	~KmdTenant() override; // release()

	backend::Result alloc(uint32_t device, uint64_t size, uint64_t alignment, uint64_t *address) override;
	// The BO `handle` of the kept file, checked against what the journal says
	// (it must hold [address, address + size)).
	backend::Result adopt_allocation(uint32_t device, uint64_t address, uint64_t size, uint32_t handle) override;
	std::vector<int> kept_files() const override;
	// The chain-state BO `handle` of a command the restart interrupted (never one
	// of the tenant's allocations).
	std::string close_unclaimed() override;
	backend::Result adopt_host(int memfd, uint64_t size, uint32_t handle, const std::vector<uint32_t> &earlier) override;
	backend::Result free(uint32_t device, uint64_t address) override;
	backend::Result register_host(int memfd, uint64_t size, uint32_t handle) override;
	backend::Result unregister_host(uint32_t handle) override;
	// The undo log's copies through the device's DMA (kmd_undo_copy.cpp).
	backend::Result read_device(uint32_t device, std::span<const DeviceBytes> ranges) override;
	backend::Result write_device(uint32_t device, std::span<const DeviceBytes> ranges) override;
	backend::Result attach_queue(backend::Queue &q) override;
	void detach_queue(backend::Queue &q) override;
	void release() override;

	// ---- engine threads ----
	// The tenant's file on `device` (valid until release()).
	KmdContext &context(uint32_t device) { return *contexts_.at(device); }
	// Lets the tenant's jobs run on physical core `core` of `device` (kernel mask).
	void allow_core(uint32_t device, uint32_t core);
	// Takes it back; no-op when not granted.
	void revoke_core(uint32_t device, uint32_t core);
	// The kernel's mask of the tenant's file, read back from the driver.
	std::optional<uint64_t> enforced_core_mask(uint32_t device) const override;
	// The import of host buffer `handle` into device's file, with TenantMemory's
	// lock held; nullptr if there is none.
	const HostBuffer *host_import(uint32_t handle, uint32_t device) const;
	// A device buffer the daemon needs for one command of this tenant (chain state):
	// charged to the tenant's file, not visible as an allocation. Throws kmd::Error
	// (ENODEV once the tenant is released).
	DeviceBuffer alloc_scratch(uint32_t device, uint64_t size);
	// Its first bytes.size() bytes, by DMA (kmd_scratch_fill.cpp); with the
	// TenantMemory lock held, as context(). Throws kmd::Error.
	void fill_scratch(uint32_t device, const DeviceBuffer &b, std::span<const std::byte> bytes);
	// No-op once the tenant is released (closing its files freed the buffer).
	void free_scratch(uint32_t device, const DeviceBuffer &b);
	// Tenant-visible address of a BO's first byte (the emu layout: 0 is never valid).
	static uint64_t address_of(const DeviceBuffer &b);

private:
	KmdBackend &backend_;
	std::vector<std::unique_ptr<KmdContext>> contexts_; // by device; fixed until release()
	std::map<uint32_t, std::vector<HostBuffer>> hosts_; // handle -> import per device (TenantMemory lock)
	mutable std::mutex files_mutex_;
	std::vector<uint64_t> masks_; // by device, as last set in the kernel
	bool released_ = false;
};

} // namespace neuron::kmd
