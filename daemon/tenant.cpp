#include "tenant.h"

#include "log.h"

#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <set>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace neuron::daemon {

uint64_t next_queue_id()
{
	static std::atomic<uint64_t> next{1};
	return next.fetch_add(1);
}

Tenant::Tenant(uint64_t id, Peer peer, ChipSet &chips) : id_(id), peer_(std::move(peer)), chips_(chips)
{
	if (chips_.backend() == Backend::Kmd)
		kmd_ = std::make_unique<KmdTenant>(id_, peer_.pid, chips_);
}

Tenant::~Tenant() { release_all(); }

std::string Tenant::log_fields() const
{
	return "tenant=" + std::to_string(id_) + " pid=" + std::to_string(peer_.pid);
}

static std::string bad_device(uint32_t device, size_t count)
{
	return "device " + std::to_string(device) + " does not exist (this host has " + std::to_string(count) +
	       (count == 1 ? " device)" : " devices)");
}

std::string Tenant::alloc(uint32_t device, uint64_t size, uint64_t alignment, uint64_t *address, api::ErrorCode *code)
{
	*code = api::ERROR_INVALID_ARGUMENT;
	if (device >= chips_.size())
		return bad_device(device, chips_.size());
	if (kmd_)
		return kmd_->alloc(device, size, alignment, address, code);
	std::string why;
	auto addr = chips_.slot(device).device->allocate(size, alignment, &why);
	if (!addr) {
		if (size != 0 && (alignment == 0 || std::has_single_bit(alignment)))
			*code = api::ERROR_OUT_OF_MEMORY;
		return why;
	}
	auto lock = memory_->lock_exclusive();
	memory_->add_device(device, *addr, size);
	*address = *addr;
	return {};
}

std::string Tenant::free(uint32_t device, uint64_t address)
{
	if (device >= chips_.size())
		return bad_device(device, chips_.size());
	if (kmd_)
		return kmd_->free(device, address);
	// Exclusive: waits for a command of this tenant that may be using the memory.
	auto lock = memory_->lock_exclusive();
	if (!memory_->remove_device(device, address))
		return "no allocation of this tenant starts at device address " + std::to_string(address) +
		       " on device " + std::to_string(device);
	chips_.slot(device).device->release(address);
	return {};
}

std::string Tenant::register_host(int fd, uint64_t size, uint32_t *handle)
{
	if (fd < 0)
		return "RegisterHostBuffer needs a memfd passed with SCM_RIGHTS, and none arrived";
	if (size == 0)
		return "host buffer size is zero";
	// Only a memfd sealed against shrinking is safe to map: otherwise the tenant could
	// truncate it and make the daemon fault on a DMA.
	const int seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK))
		return "host buffer must be a memfd sealed with F_SEAL_SHRINK";
	struct stat st;
	if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < size)
		return "host buffer memfd is smaller than the " + std::to_string(size) + " bytes declared";
	if (kmd_) {
		if (auto err = kmd_->register_host(fd, size, next_host_handle_); !err.empty())
			return err;
		*handle = next_host_handle_++;
		return {};
	}
	void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return std::string("cannot map the host buffer: ") + std::strerror(errno);
	auto lock = memory_->lock_exclusive();
	*handle = next_host_handle_++;
	memory_->add_host(*handle, chip::HostBuffer{static_cast<std::byte *>(p), size});
	return {};
}

void Tenant::unmap_host(const chip::HostBuffer &b) { munmap(b.ptr, b.size); }

std::string Tenant::unregister_host(uint32_t handle)
{
	if (kmd_)
		return kmd_->unregister_host(handle);
	auto lock = memory_->lock_exclusive();
	auto b = memory_->remove_host(handle);
	if (!b)
		return "host buffer " + std::to_string(handle) + " is not registered by this tenant";
	unmap_host(*b);
	return {};
}

std::string Tenant::create_queue(uint32_t device, api::QueueKind kind, uint32_t core, uint32_t slots,
				 std::shared_ptr<chip::Queue> *out)
{
	if (device >= chips_.size())
		return bad_device(device, chips_.size());
	DeviceSlot &slot = chips_.slot(device);
	if (kind != api::QUEUE_KIND_CORE && kind != api::QUEUE_KIND_DMA)
		return "queue kind must be CORE or DMA";
	if (kind == api::QUEUE_KIND_CORE && core >= slot.core_count)
		return "core " + std::to_string(core) + " does not exist on device " + std::to_string(device) +
		       " (it has " + std::to_string(slot.core_count) + " cores)";
	if (slots == 0)
		slots = 256;
	if (!std::has_single_bit(slots) || slots < 2 || slots > 65536)
		return "slot_count " + std::to_string(slots) + " must be a power of two in 2..65536";
	if (queues_.size() >= 1024)
		return "this tenant already has 1024 queues";
	const auto qkind = kind == api::QUEUE_KIND_DMA ? chip::QueueKind::Dma : chip::QueueKind::Core;
	auto q = std::make_shared<chip::Queue>(next_queue_id(), qkind, device, qkind == chip::QueueKind::Dma ? 0 : core,
					       slots, memory_, directory_);
	directory_->add(q->id(), q);
	if (kmd_) {
		// The kernel schedules the queue's jobs on physical core `core` (no
		// logical-core moves on this backend); a ring pump feeds them.
		if (auto err = kmd_->add_queue(q); !err.empty()) {
			directory_->remove(q->id());
			return err;
		}
		queues_[q->id()] = q;
		used_cores |= qkind == chip::QueueKind::Core;
		*out = q;
		return {};
	}
	queues_[q->id()] = q;
	// `core` names a logical core: the scheduler runs it on whichever physical cores
	// the tenant's pool may use, and moves it between tiles.
	chip::CoreScheduler &sched = qkind == chip::QueueKind::Dma ? *slot.dma_sched : *slot.cores_sched;
	auto l = sched.attach(id_, qkind == chip::QueueKind::Dma ? 0 : core, pool(), weight);
	queue_core_[q->id()] = l;
	used_cores |= qkind == chip::QueueKind::Core;
	sched.add_queue(*l, q);
	*out = q;
	return {};
}

std::string Tenant::destroy_queue(uint64_t id)
{
	auto it = queues_.find(id);
	if (it == queues_.end())
		return "queue " + std::to_string(id) + " is not a queue of this tenant";
	auto q = it->second;
	q->retire();
	if (kmd_) {
		kmd_->remove_queue(id);
		directory_->remove(id);
		queues_.erase(it);
		return {};
	}
	DeviceSlot &slot = chips_.slot(q->device());
	chip::CoreScheduler &sched = q->kind() == chip::QueueKind::Dma ? *slot.dma_sched : *slot.cores_sched;
	if (auto lc = queue_core_.find(id); lc != queue_core_.end()) {
		sched.remove_queue(*lc->second, q.get());
		if (lc->second->queue_count() == 0) {
			window_base_.erase(lc->second.get());
			window_prev_.erase(lc->second.get());
		}
		queue_core_.erase(lc);
	}
	directory_->remove(id);
	queues_.erase(it);
	return {};
}

void Tenant::release_all()
{
	if (released_)
		return;
	released_ = true;
	while (!queues_.empty())
		destroy_queue(queues_.begin()->first);
	if (kmd_)
		kmd_->release_all();
	// Exclusive lock: any command still running on an engine finishes first.
	auto lock = memory_->lock_exclusive();
	for (const auto &[device, allocs] : memory_->device_allocations())
		for (const auto &[address, size] : allocs)
			chips_.slot(device).device->release(address);
	for (const auto &[handle, buffer] : memory_->host_buffers())
		unmap_host(buffer);
	memory_->clear();
}

uint64_t Tenant::queue_depth(uint32_t device) const
{
	std::set<const chip::LogicalCore *> seen;
	uint64_t d = 0;
	for (const auto &[id, l] : queue_core_)
		if (l->device() == device && queues_.at(id)->kind() == chip::QueueKind::Core && seen.insert(l.get()).second)
			d += l->depth();
	return d;
}

void Tenant::roll_latency_window()
{
	std::set<const chip::LogicalCore *> seen;
	for (const auto &[id, l] : queue_core_) {
		if (!seen.insert(l.get()).second)
			continue;
		auto now = l->latency.snapshot();
		auto it = window_base_.find(l.get());
		window_prev_[l.get()] = it == window_base_.end() ? chip::LatencyHistogram::Counts{} : it->second;
		window_base_[l.get()] = now;
	}
}

void Tenant::latency(uint64_t *p50, uint64_t *p99) const
{
	// Commands completed since the roll before last: a window of one to two roll
	// periods, so the figures follow the load instead of averaging the whole life.
	chip::LatencyHistogram::Counts sum{};
	std::set<const chip::LogicalCore *> seen;
	for (const auto &[id, l] : queue_core_) {
		if (queues_.at(id)->kind() != chip::QueueKind::Core || !seen.insert(l.get()).second)
			continue;
		const auto now = l->latency.snapshot();
		auto it = window_prev_.find(l.get());
		for (int i = 0; i < chip::LatencyHistogram::kBuckets; ++i)
			sum[i] += now[i] - (it == window_prev_.end() ? 0 : it->second[i]);
	}
	*p50 = chip::LatencyHistogram::percentile(sum, 0.5);
	*p99 = chip::LatencyHistogram::percentile(sum, 0.99);
}

void Tenant::fill_info(api::TenantInfo *info) const
{
	info->set_tenant_id(id_);
	info->set_pool(pool() == chip::Pool::Inference ? api::POOL_INFERENCE : api::POOL_TRAINING);
	info->set_weight(weight);
	uint64_t p50 = 0, p99 = 0;
	latency(&p50, &p99);
	info->set_latency_p50_ns(p50);
	info->set_latency_p99_ns(p99);
	{
		std::set<const chip::LogicalCore *> seen;
		uint64_t busy = 0, tiles = 0, depth = 0;
		for (const auto &[id, l] : queue_core_)
			if (queues_.at(id)->kind() == chip::QueueKind::Core && seen.insert(l.get()).second) {
				busy += l->busy_ns.load(std::memory_order_relaxed);
				tiles += l->tiles.load(std::memory_order_relaxed);
				depth += l->depth();
			}
		info->set_busy_ns(busy);
		info->set_tiles(tiles);
		info->set_queue_depth(depth);
	}
	info->set_pid(static_cast<uint32_t>(peer_.pid));
	info->set_uid(peer_.uid);
	info->set_command(peer_.command);
	info->set_client_name(client_name);
	info->set_kind(kind);
	std::shared_lock lock(memory_->mutex);
	std::map<uint32_t, api::DeviceUsage *> by_device;
	auto usage = [&](uint32_t d) {
		auto &u = by_device[d];
		if (!u) {
			u = info->add_usage();
			u->set_device(d);
		}
		return u;
	};
	for (const auto &[device, allocs] : memory_->device_allocations())
		if (!allocs.empty())
			usage(device)->set_memory_bytes(memory_->device_bytes(device));
	if (kmd_)
		for (uint32_t d = 0; d < chips_.size(); ++d)
			if (const uint64_t bytes = kmd_->device_bytes(d))
				usage(d)->set_memory_bytes(bytes);
	for (const auto &[id, q] : queues_) {
		api::DeviceUsage *u = usage(q->device());
		u->set_commands_completed(u->commands_completed() + q->completed());
		if (q->kind() == chip::QueueKind::Core) {
			bool seen = false;
			for (uint32_t c : u->cores())
				seen |= c == q->core();
			if (!seen)
				u->add_cores(q->core());
		}
	}
}

} // namespace neuron::daemon
