#include "kmd_tenant.h"

#include "kmd_backend.h"

#include <chip/device.h> // kDeviceAddressBase: the address layout tenants see on every backend
#include <gate/admit.h>

#include <bit>
#include <cerrno>
#include <set>
#include <shared_mutex>
#include <unistd.h>
#include <utility>

namespace neuron::kmd {

using backend::Refusal;

namespace {
constexpr uint64_t kPage = 4096;
constexpr uint64_t kDefaultAlignment = 256; // the API's default (neuron.proto AllocDevice)
} // namespace

uint64_t KmdTenant::address_of(const DeviceBuffer &b) { return chip::kDeviceAddressBase + b.device_addr; }

KmdTenant::KmdTenant(uint64_t tenant_id, pid_t pid, KmdBackend &backend) : TenantContext(tenant_id), backend_(backend)
{
	// One open file per device for this tenant. A file that is not the controller
	// starts with no core: the engines grant them as they schedule it.
	for (uint32_t d = 0; d < backend.device_count(); ++d) {
		KmdDevice &dev = backend.slot(d).device();
		contexts_.push_back(dev.create_context("tenant " + std::to_string(tenant_id) + " pid " + std::to_string(pid), 0));
		dev.set_core_mask(*contexts_.back(), 0);
		masks_.push_back(0);
	}
}

KmdTenant::KmdTenant(uint64_t tenant_id, pid_t pid, KmdBackend &backend, std::vector<int> kept_files)
	: TenantContext(tenant_id), backend_(backend)
{
	const std::string name = "tenant " + std::to_string(tenant_id) + " pid " + std::to_string(pid);
	uint32_t d = 0;
	try {
		for (; d < backend.device_count(); ++d) {
			KmdDevice &dev = backend.slot(d).device();
			const int fd = d < kept_files.size() ? std::exchange(kept_files[d], -1) : -1;
			contexts_.push_back(fd >= 0 ? dev.adopt_context(fd, name + " (kept)") : dev.create_context(name, 0));
			dev.set_core_mask(*contexts_.back(), 0);
			masks_.push_back(0);
		}
	} catch (...) {
		for (int fd : kept_files)
			if (fd >= 0)
				::close(fd);
		throw;
	}
}

KmdTenant::~KmdTenant() { release(); }

std::vector<int> KmdTenant::kept_files() const
{
	std::vector<int> fds;
	for (const auto &c : contexts_)
		fds.push_back(c->fd());
	return fds;
}

backend::Result KmdTenant::adopt_allocation(uint32_t device, uint64_t address, uint64_t size, uint32_t handle)
{
	if (device >= contexts_.size())
		return Refusal{Refusal::NotFound, "device " + std::to_string(device) + " does not exist"};
	DeviceBuffer bo;
	try {
		bo = context(device).find_device(handle);
	} catch (const Error &e) {
		return Refusal{Refusal::NotFound, "the kept driver file has no device BO " + std::to_string(handle) + ": " +
							  e.what()};
	}
	const uint64_t base = address_of(bo);
	if (address < base || size > bo.size || address - base > bo.size - size)
		return Refusal{Refusal::InvalidArgument, "BO " + std::to_string(handle) + " of the kept driver file holds [" +
								 std::to_string(base) + ", +" + std::to_string(bo.size) +
								 "), not the journal's allocation at " + std::to_string(address) +
								 " of " + std::to_string(size) + " bytes"};
	auto lock = memory_.lock_exclusive();
	memory_.add_device(device, address, backend::DeviceAllocation{size, nullptr, bo.handle, base});
	return std::nullopt;
}

std::string KmdTenant::close_unclaimed()
{
	// What the tenant holds now: its allocations (program buffers among them) and
	// the imports of its host buffers, each a handle in one device's file.
	std::vector<std::set<uint32_t>> claimed(contexts_.size());
	{
		std::shared_lock lock(memory_.mutex);
		for (const auto &[device, allocations] : memory_.device_allocations())
			for (const auto &[address, a] : allocations)
				if (device < claimed.size())
					claimed[device].insert(a.handle);
		for (const auto &[handle, imports] : hosts_)
			for (size_t d = 0; d < imports.size() && d < claimed.size(); ++d)
				claimed[d].insert(imports[d].handle);
	}
	std::string said;
	for (uint32_t d = 0; d < contexts_.size(); ++d) {
		uint64_t bytes = 0;
		std::string handles;
		for (const auto &bo : contexts_[d]->close_unclaimed(claimed[d])) {
			bytes += bo.size;
			handles += (handles.empty() ? "" : ",") + std::to_string(bo.handle) + (bo.device ? "" : "(host)");
		}
		if (!handles.empty())
			said += (said.empty() ? "" : "; ") + std::string("device ") + std::to_string(d) + ": BOs " +
				handles + " (" + std::to_string(bytes) + " bytes)";
	}
	return said;
}

backend::Result KmdTenant::adopt_host(int memfd, uint64_t size, uint32_t handle, const std::vector<uint32_t> &earlier)
{
	// Imported again (this process has no mapping of the old import); the old
	// import's handle would otherwise pin the pages (or a staging BO) in the kept
	// file for as long as the tenant lives.
	if (auto r = register_host(memfd, size, handle))
		return r;
	const std::vector<HostBuffer> &now = hosts_.at(handle);
	for (uint32_t d = 0; d < earlier.size() && d < contexts_.size(); ++d) {
		if (earlier[d] == 0 || earlier[d] == now.at(d).handle)
			continue;
		try {
			contexts_[d]->close_handle(earlier[d]);
		} catch (const Error &) {
			// Not there any more: nothing to leak.
		}
	}
	return std::nullopt;
}

backend::Result KmdTenant::alloc(uint32_t device, uint64_t size, uint64_t alignment, uint64_t *address)
{
	if (size == 0)
		return Refusal{Refusal::InvalidArgument, "allocation size is zero"};
	if (alignment == 0)
		alignment = kDefaultAlignment;
	if (!std::has_single_bit(alignment))
		return Refusal{Refusal::InvalidArgument, "alignment " + std::to_string(alignment) + " is not a power of two"};
	if (alignment > (1ull << 30))
		return Refusal{Refusal::InvalidArgument, "alignment " + std::to_string(alignment) + " is above 1 GiB"};
	// BOs start on a page; a larger alignment takes the slack from a larger BO.
	const uint64_t slack = alignment > kPage ? alignment - kPage : 0;
	if (size > UINT64_MAX / 2 - slack)
		return Refusal{Refusal::OutOfMemory, "cannot allocate " + std::to_string(size) + " bytes"};
	DeviceBuffer bo;
	try {
		bo = context(device).alloc_device(size + slack);
	} catch (const Error &e) {
		const bool full = e.code() == ENOSPC || e.code() == ENOMEM || e.code() == E2BIG || e.code() == EINVAL;
		return Refusal{full ? Refusal::OutOfMemory : Refusal::InvalidArgument,
			       "cannot allocate " + std::to_string(size) + " bytes of HBM on device " + std::to_string(device) +
				       ": " + e.what()};
	}
	const uint64_t base = address_of(bo);
	const uint64_t a = (base + alignment - 1) & ~(alignment - 1);
	auto lock = memory_.lock_exclusive();
	memory_.add_device(device, a, backend::DeviceAllocation{size, nullptr, bo.handle, base});
	*address = a;
	return std::nullopt;
}

backend::Result KmdTenant::free(uint32_t device, uint64_t address)
{
	// Exclusive: no engine is between checking a command against this BO and
	// submitting its job; jobs already submitted keep the BO alive in the kernel.
	auto lock = memory_.lock_exclusive();
	auto a = memory_.remove_device(device, address);
	if (!a)
		return Refusal{Refusal::NotFound, "no allocation of this tenant starts at device address " +
							  std::to_string(address) + " on device " + std::to_string(device)};
	context(device).free(DeviceBuffer{a->handle, a->handle_base - chip::kDeviceAddressBase, 0});
	return std::nullopt;
}

backend::Result KmdTenant::register_host(int memfd, uint64_t size, uint32_t handle)
{
	std::vector<HostBuffer> per_device;
	try {
		for (auto &ctx : contexts_)
			per_device.push_back(ctx->import_memfd(memfd, size));
	} catch (const std::exception &e) {
		for (size_t d = 0; d < per_device.size(); ++d)
			contexts_[d]->free(per_device[d]);
		return Refusal{Refusal::InvalidArgument, std::string("cannot import the host buffer into the driver: ") + e.what()};
	}
	backend::HostRegion r;
	r.size = size;
	for (const HostBuffer &hb : per_device)
		r.handles.push_back(hb.handle);
	auto lock = memory_.lock_exclusive();
	memory_.add_host(handle, std::move(r));
	hosts_[handle] = std::move(per_device);
	return std::nullopt;
}

backend::Result KmdTenant::unregister_host(uint32_t handle)
{
	auto lock = memory_.lock_exclusive();
	auto it = hosts_.find(handle);
	if (!memory_.remove_host(handle) || it == hosts_.end())
		return Refusal{Refusal::NotFound, "host buffer " + std::to_string(handle) + " is not registered by this tenant"};
	for (size_t d = 0; d < it->second.size(); ++d)
		contexts_[d]->free(it->second[d]);
	hosts_.erase(it);
	return std::nullopt;
}

const HostBuffer *KmdTenant::host_import(uint32_t handle, uint32_t device) const
{
	auto it = hosts_.find(handle);
	return it == hosts_.end() || device >= it->second.size() ? nullptr : &it->second[device];
}

backend::Result KmdTenant::attach_queue(backend::Queue &)
{
	if (released_)
		return Refusal{Refusal::Unavailable, "the tenant's driver files are closed"};
	return std::nullopt;
}

void KmdTenant::detach_queue(backend::Queue &) {}

void KmdTenant::allow_core(uint32_t device, uint32_t core)
{
	std::lock_guard lock(files_mutex_);
	if (released_)
		throw Error(ENODEV, "granting a core to a released tenant");
	const uint64_t mask = masks_.at(device) | (1ull << core);
	if (mask == masks_[device])
		return;
	backend_.slot(device).device().set_core_mask(*contexts_.at(device), mask);
	masks_[device] = mask;
}

void KmdTenant::revoke_core(uint32_t device, uint32_t core)
{
	std::lock_guard lock(files_mutex_);
	if (released_ || !(masks_.at(device) >> core & 1))
		return;
	const uint64_t mask = masks_[device] & ~(1ull << core);
	backend_.slot(device).device().set_core_mask(*contexts_.at(device), mask);
	masks_[device] = mask;
}

std::optional<uint64_t> KmdTenant::enforced_core_mask(uint32_t device) const
{
	std::lock_guard lock(files_mutex_);
	if (released_)
		return 0;
	try {
		return contexts_.at(device)->core_mask();
	} catch (const Error &) {
		return masks_.at(device); // what was last set
	}
}

DeviceBuffer KmdTenant::alloc_scratch(uint32_t device, uint64_t size)
{
	std::lock_guard lock(files_mutex_);
	if (released_)
		throw Error(ENODEV, "allocating chain state for a released tenant");
	return contexts_.at(device)->alloc_device(size);
}

void KmdTenant::free_scratch(uint32_t device, const DeviceBuffer &b)
{
	std::lock_guard lock(files_mutex_);
	if (!released_)
		contexts_.at(device)->free(b);
}

void KmdTenant::release()
{
	if (released_)
		return;
	auto lock = memory_.lock_exclusive();
	std::lock_guard files_lock(files_mutex_);
	released_ = true;
	// What the kernel still holds of this tenant is dropped, not run. Failures here
	// cannot stop the release (closing the files below frees everything anyway).
	for (uint32_t d = 0; d < contexts_.size(); ++d) {
		try {
			backend_.slot(d).cancel_client(contexts_[d]->client_id());
		} catch (const std::exception &) {
		}
	}
	for (auto &[handle, per_device] : hosts_)
		for (size_t d = 0; d < per_device.size(); ++d) {
			try {
				contexts_[d]->free(per_device[d]); // unmaps it here
			} catch (const std::exception &) {
			}
		}
	hosts_.clear();
	memory_.clear();
	// Closing the files frees every BO and syncobj of the tenant; jobs already
	// queued finish first (the kernel holds their BOs).
	contexts_.clear();
}

} // namespace neuron::kmd
