#include "kmd_tenant.h"

#include "log.h"

#include <bit>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace neuron::daemon {

namespace {
constexpr uint64_t kPage = 4096;
constexpr uint64_t kDefaultAlignment = 256; // the API's default (neuron.proto AllocDevice)
} // namespace

KmdTenant::KmdTenant(uint64_t tenant_id, pid_t pid, ChipSet &chips) : id_(tenant_id), chips_(chips)
{
	// One open file per device for this tenant: the kernel keeps its handles,
	// accounting (fdinfo) and bans apart from every other tenant's.
	try {
		for (size_t d = 0; d < chips_.size(); ++d) {
			KmdChip &chip = *chips_.slot(d).kmd;
			auto ctx = chip.device().create_context("tenant " + std::to_string(tenant_id) + " pid " +
									std::to_string(pid),
								0);
			chip.device().set_core_mask(*ctx, 0); // no core until it has a queue there
			memory_->contexts.push_back(std::move(ctx));
		}
	} catch (const std::exception &e) {
		memory_->contexts.clear();
		memory_->context_error = e.what();
		NLOG_ERROR("kmd.context", "tenant=" + std::to_string(tenant_id) + " error=\"" + e.what() + "\"");
	}
}

KmdTenant::~KmdTenant() { release_all(); }

std::string KmdTenant::ready() const
{
	if (memory_->contexts.size() == chips_.size())
		return {};
	return "the daemon could not open the neuron driver for this tenant: " + memory_->context_error;
}

std::string KmdTenant::alloc(uint32_t device, uint64_t size, uint64_t alignment, uint64_t *address,
			     api::ErrorCode *code)
{
	*code = api::ERROR_INVALID_ARGUMENT;
	if (auto err = ready(); !err.empty())
		return err;
	if (size == 0)
		return "allocation size is zero";
	if (alignment == 0)
		alignment = kDefaultAlignment;
	if (!std::has_single_bit(alignment))
		return "alignment " + std::to_string(alignment) + " is not a power of two";
	if (alignment > (1ull << 30))
		return "alignment " + std::to_string(alignment) + " is above 1 GiB";
	// BOs start on a page; a larger alignment takes the slack from a larger BO.
	const uint64_t slack = alignment > kPage ? alignment - kPage : 0;
	if (size > UINT64_MAX / 2 - slack) {
		*code = api::ERROR_OUT_OF_MEMORY;
		return "cannot allocate " + std::to_string(size) + " bytes";
	}
	kmd::KmdContext &ctx = *memory_->contexts[device];
	KmdAllocation a;
	try {
		a.buffer = ctx.alloc_device(size + slack);
	} catch (const kmd::Error &e) {
		if (e.code() == ENOSPC || e.code() == ENOMEM || e.code() == E2BIG || e.code() == EINVAL)
			*code = api::ERROR_OUT_OF_MEMORY;
		return "cannot allocate " + std::to_string(size) + " bytes of HBM on device " + std::to_string(device) +
		       ": " + e.what();
	}
	const uint64_t bo = a.bo_address();
	a.address = (bo + alignment - 1) & ~(alignment - 1);
	a.size = size;
	std::unique_lock lock(memory_->mutex);
	memory_->device[device][a.address] = a;
	*address = a.address;
	return {};
}

std::string KmdTenant::free(uint32_t device, uint64_t address)
{
	if (auto err = ready(); !err.empty())
		return err;
	// Exclusive: no pump is between checking a command against this BO and
	// submitting it; jobs already submitted keep the BO alive in the kernel.
	std::unique_lock lock(memory_->mutex);
	auto &allocs = memory_->device[device];
	auto it = allocs.find(address);
	if (it == allocs.end())
		return "no allocation of this tenant starts at device address " + std::to_string(address) + " on device " +
		       std::to_string(device);
	memory_->contexts[device]->free(it->second.buffer);
	allocs.erase(it);
	return {};
}

std::string KmdTenant::register_host(int fd, uint64_t size, uint32_t handle)
{
	if (auto err = ready(); !err.empty())
		return err;
	KmdHost h;
	h.size = size;
	try {
		for (auto &ctx : memory_->contexts)
			h.per_device.push_back(ctx->import_memfd(fd, size));
	} catch (const std::exception &e) {
		for (size_t d = 0; d < h.per_device.size(); ++d)
			memory_->contexts[d]->free(h.per_device[d]);
		return std::string("cannot import the host buffer into the driver: ") + e.what();
	}
	std::unique_lock lock(memory_->mutex);
	memory_->host[handle] = std::move(h);
	return {};
}

std::string KmdTenant::unregister_host(uint32_t handle)
{
	std::unique_lock lock(memory_->mutex);
	auto it = memory_->host.find(handle);
	if (it == memory_->host.end())
		return "host buffer " + std::to_string(handle) + " is not registered by this tenant";
	for (size_t d = 0; d < it->second.per_device.size(); ++d)
		memory_->contexts[d]->free(it->second.per_device[d]);
	memory_->host.erase(it);
	return {};
}

void KmdTenant::update_core_mask(uint32_t device)
{
	uint64_t mask = 0;
	for (const auto &[id, e] : queues_)
		if (e.queue->device() == device && e.queue->kind() == chip::QueueKind::Core)
			mask |= 1ull << e.queue->core();
	chips_.slot(device).kmd->device().set_core_mask(*memory_->contexts[device], mask);
}

std::string KmdTenant::add_queue(const std::shared_ptr<chip::Queue> &q)
{
	if (auto err = ready(); !err.empty())
		return err;
	KmdChip &chip = *chips_.slot(q->device()).kmd;
	queues_[q->id()] = {q, nullptr};
	try {
		if (q->kind() == chip::QueueKind::Core)
			update_core_mask(q->device());
		auto pump = std::make_shared<KmdPump>(q, memory_, chip, directory_, chips_.fault_hook);
		queues_[q->id()].pump = pump;
		directory_->add(q->id(), pump);
	} catch (const std::exception &e) {
		queues_.erase(q->id());
		return std::string("cannot start the queue on the driver: ") + e.what();
	}
	return {};
}

void KmdTenant::remove_queue(uint64_t id)
{
	auto it = queues_.find(id);
	if (it == queues_.end())
		return;
	auto q = it->second.queue;
	if (it->second.pump)
		it->second.pump->stop();
	directory_->remove(id);
	queues_.erase(it);
	if (q->kind() == chip::QueueKind::Core && memory_->contexts.size() == chips_.size()) {
		try {
			update_core_mask(q->device());
		} catch (const std::exception &e) {
			NLOG_WARN("kmd.core_mask", "tenant=" + std::to_string(id_) + " error=\"" + e.what() + "\"");
		}
	}
}

void KmdTenant::release_all()
{
	if (released_)
		return;
	released_ = true;
	for (auto &[id, e] : queues_)
		if (e.pump)
			e.pump->stop();
	queues_.clear();
	std::unique_lock lock(memory_->mutex);
	// What the kernel still holds of this tenant is dropped, not run.
	for (size_t d = 0; d < memory_->contexts.size(); ++d) {
		try {
			chips_.slot(d).kmd->cancel_client(memory_->contexts[d]->client_id());
		} catch (const std::exception &e) {
			NLOG_WARN("kmd.release", "tenant=" + std::to_string(id_) + " error=\"" + e.what() + "\"");
		}
	}
	memory_->device.clear();
	for (auto &[handle, h] : memory_->host)
		for (size_t d = 0; d < h.per_device.size() && d < memory_->contexts.size(); ++d)
			memory_->contexts[d]->free(h.per_device[d]); // unmaps it here
	memory_->host.clear();
	// Closing the files frees every BO and syncobj of the tenant; jobs already
	// queued finish first (the kernel holds their BOs).
	memory_->contexts.clear();
	memory_->context_error = "the tenant was released";
}

uint64_t KmdTenant::device_bytes(uint32_t device) const
{
	std::shared_lock lock(memory_->mutex);
	return memory_->device_bytes(device);
}

} // namespace neuron::daemon
