#include "tenant.h"

#include "fd_store.h"
#include "log.h"
#include "state_journal.h"
#include "text.h"

#include <neuron/ring.hpp>

#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <algorithm>
#include <sys/stat.h>
#include <unistd.h>

namespace neuron::daemon {

using backend::QueueKind;

namespace {
std::atomic<uint64_t> g_next_queue{1};
}

uint64_t next_queue_id() { return g_next_queue.fetch_add(1); }
uint64_t peek_queue_id() { return g_next_queue.load(); }

void reserve_queue_ids(uint64_t next)
{
	uint64_t cur = g_next_queue.load();
	while (cur < next && !g_next_queue.compare_exchange_weak(cur, next)) {
	}
}

Tenant::Tenant(uint64_t id, Peer peer, backend::DeviceBackend &devices, std::vector<int> kept_files)
	: id_(id), peer_(std::move(peer)), devices_(devices)
{
	try {
		ctx_ = kept_files.empty() ? devices.open_tenant(id, peer_.pid)
					  : devices.adopt_tenant(id, peer_.pid, std::move(kept_files));
	} catch (const std::exception &e) {
		ctx_error_ = e.what();
		NLOG_ERROR("tenant.context", log_fields() + " backend=" + devices.name() + " error=" + quoted(ctx_error_));
	}
}

Tenant::~Tenant() { release_all(); }

std::string Tenant::log_fields() const
{
	return "tenant=" + std::to_string(id_) + " pid=" + std::to_string(peer_.pid);
}

namespace {

// Largest AllocDevice.alignment (contracts/neuron.proto): the same on every backend.
constexpr uint64_t kMaxAlignment = 1ull << 30;

std::string bad_device(uint32_t device, size_t count)
{
	return "device " + std::to_string(device) + " does not exist (this host has " + std::to_string(count) +
	       (count == 1 ? " device)" : " devices)");
}

api::ErrorCode to_api(backend::Refusal::Code c)
{
	switch (c) {
	case backend::Refusal::InvalidArgument: return api::ERROR_INVALID_ARGUMENT;
	case backend::Refusal::OutOfMemory: return api::ERROR_OUT_OF_MEMORY;
	case backend::Refusal::NotFound: return api::ERROR_NOT_FOUND;
	case backend::Refusal::ResourceExhausted: return api::ERROR_RESOURCE_EXHAUSTED;
	case backend::Refusal::Unavailable: return api::ERROR_INTERNAL;
	}
	return api::ERROR_INTERNAL;
}

} // namespace

std::string Tenant::refused(const backend::Result &r, api::ErrorCode *code) const
{
	if (!r)
		return {};
	*code = to_api(r->code);
	return r->message;
}

std::string Tenant::unready(api::ErrorCode *code) const
{
	if (ctx_)
		return {};
	*code = api::ERROR_INTERNAL;
	return "neurond could not open the " + std::string(devices_.name()) + " device backend for this tenant: " +
	       ctx_error_;
}

std::string Tenant::no_device(uint32_t device, api::ErrorCode *code) const
{
	if (device < devices_.device_count())
		return {};
	*code = api::ERROR_NOT_FOUND;
	return bad_device(device, devices_.device_count());
}

std::string Tenant::over_limit(Resource r, uint64_t held, uint64_t more, api::ErrorCode *code,
			       const std::string &where) const
{
	std::string err = Limits::check(limits, r, held, more, limit_class, where);
	if (!err.empty())
		*code = api::ERROR_RESOURCE_EXHAUSTED;
	return err;
}

std::string Tenant::alloc(uint32_t device, uint64_t size, uint64_t alignment, uint64_t *address, api::ErrorCode *code)
{
	*code = api::ERROR_INVALID_ARGUMENT;
	if (auto err = unready(code); !err.empty())
		return err;
	if (auto err = no_device(device, code); !err.empty())
		return err;
	if (size == 0)
		return "allocation size is zero";
	if (alignment != 0 && !std::has_single_bit(alignment))
		return "alignment " + std::to_string(alignment) + " is not a power of two";
	if (alignment > kMaxAlignment)
		return "alignment " + std::to_string(alignment) + " is above the maximum of " +
		       std::to_string(kMaxAlignment) + " bytes (1 GiB)";
	// hbm_bytes is per device: a tenant may not take (nearly) all of any one device.
	if (auto err = over_limit(Resource::HbmBytes, hbm_held_[device], size, code, "on device " + std::to_string(device));
	    !err.empty())
		return err;
	if (auto err = refused(ctx_->alloc(device, size, alignment, address), code); !err.empty())
		return err;
	hbm_held_[device] += size;
	return {};
}

std::string Tenant::free(uint32_t device, uint64_t address, api::ErrorCode *code)
{
	*code = api::ERROR_NOT_FOUND;
	if (auto err = unready(code); !err.empty())
		return err;
	if (auto err = no_device(device, code); !err.empty())
		return err;
	uint64_t size = 0, owner = 0;
	{
		const backend::TenantMemory &m = ctx_->memory();
		std::shared_lock lock(m.mutex);
		uint64_t start = 0;
		if (const auto *a = m.find_device(device, address, 1, &start); a && start == address)
			size = a->size;
		owner = m.program_of(device, address);
	}
	if (owner != 0) {
		*code = api::ERROR_INVALID_ARGUMENT;
		return "device address " + std::to_string(address) + " is a buffer of program " + std::to_string(owner) +
		       ": it is freed with the program (DeregisterProgram)";
	}
	if (auto err = refused(ctx_->free(device, address), code); !err.empty())
		return err;
	hbm_held_[device] -= std::min(hbm_held_[device], size);
	return {};
}

std::string Tenant::register_host(int fd, uint64_t size, uint32_t *handle, api::ErrorCode *code)
{
	*code = api::ERROR_INVALID_ARGUMENT;
	if (auto err = unready(code); !err.empty())
		return err;
	if (fd < 0)
		return "RegisterHostBuffer needs a memfd passed with SCM_RIGHTS on its own frame, and none arrived";
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
	if (auto err = over_limit(Resource::HostBuffers, host_count_, 1, code); !err.empty())
		return err;
	if (auto err = over_limit(Resource::HostBytes, host_bytes_, size, code); !err.empty())
		return err;
	if (auto err = refused(ctx_->register_host(fd, size, next_host_handle_), code); !err.empty())
		return err;
	if (store_)
		if (auto err = store_->store("host." + std::to_string(id_) + "." + std::to_string(next_host_handle_), fd);
		    !err.empty())
			NLOG_WARN("state.keep_failed", log_fields() + " what=host_buffer error=" + quoted(err));
	*handle = next_host_handle_++;
	host_sizes_[*handle] = size;
	++host_count_;
	host_bytes_ += size;
	return {};
}

std::string Tenant::unregister_host(uint32_t handle, api::ErrorCode *code)
{
	*code = api::ERROR_NOT_FOUND;
	if (auto err = unready(code); !err.empty())
		return err;
	if (auto err = refused(ctx_->unregister_host(handle), code); !err.empty())
		return err;
	if (store_)
		store_->remove("host." + std::to_string(id_) + "." + std::to_string(handle));
	if (auto it = host_sizes_.find(handle); it != host_sizes_.end()) {
		host_bytes_ -= it->second;
		--host_count_;
		host_sizes_.erase(it);
	}
	return {};
}

std::string Tenant::create_queue(uint32_t device, api::QueueKind kind, uint32_t core, uint32_t slots,
				 std::shared_ptr<backend::Queue> *out, api::ErrorCode *code)
{
	*code = api::ERROR_INVALID_ARGUMENT;
	if (auto err = unready(code); !err.empty())
		return err;
	if (auto err = no_device(device, code); !err.empty())
		return err;
	if (kind != api::QUEUE_KIND_CORE && kind != api::QUEUE_KIND_DMA)
		return "queue kind must be CORE or DMA";
	const uint32_t cores = devices_.core_count(device);
	if (kind == api::QUEUE_KIND_CORE && core >= cores) {
		*code = api::ERROR_NOT_FOUND;
		return "core " + std::to_string(core) + " does not exist on device " + std::to_string(device) +
		       " (it has " + std::to_string(cores) + " cores)";
	}
	if (slots == 0)
		slots = 256;
	if (!ring::valid_slot_count(slots))
		return "slot_count " + std::to_string(slots) + " must be a power of two in 2..65536";
	if (auto err = over_limit(Resource::Queues, queues_.size(), 1, code); !err.empty())
		return err;
	const auto qkind = kind == api::QUEUE_KIND_DMA ? QueueKind::Dma : QueueKind::Core;
	std::shared_ptr<backend::Queue> q;
	try {
		q = std::make_shared<backend::Queue>(next_queue_id(), qkind, device, qkind == QueueKind::Dma ? 0 : core,
						     slots, ctx_, directory_);
	} catch (const std::exception &e) {
		*code = api::ERROR_RESOURCE_EXHAUSTED;
		return std::string("cannot create the queue's ring: ") + e.what();
	}
	if (journal_)
		if (auto err = keep_queue(*q); !err.empty()) {
			*code = api::ERROR_RESOURCE_EXHAUSTED;
			return err;
		}
	if (auto r = ctx_->attach_queue(*q))
		return refused(r, code);
	directory_->add(q->id(), q);
	queues_[q->id()] = q;
	// `core` names a logical core: the scheduler runs it on whichever physical cores
	// the tenant's pool may use, and moves it between tiles.
	sched::CoreScheduler &sched = qkind == QueueKind::Dma ? devices_.dma(device) : devices_.cores(device);
	auto l = sched.attach(id_, qkind == QueueKind::Dma ? 0 : core, pool(), weight);
	queue_core_[q->id()] = l;
	used_cores |= qkind == QueueKind::Core;
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
	sched::CoreScheduler &sched = q->kind() == QueueKind::Dma ? devices_.dma(q->device()) : devices_.cores(q->device());
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
	progress_slot_.erase(id);
	ctx_->detach_queue(*q);
	if (store_) {
		store_->remove("ring." + std::to_string(id));
		store_->remove("undo." + std::to_string(id));
	}
	return {};
}

void Tenant::release_all()
{
	if (released_)
		return;
	released_ = true;
	while (!queues_.empty())
		destroy_queue(queues_.begin()->first);
	if (store_)
		for (const auto &[handle, bytes] : host_sizes_)
			store_->remove("host." + std::to_string(id_) + "." + std::to_string(handle));
	forget_kept_programs();
	forget_kept_files();
	// Waits for any command still running on an engine, then frees everything
	// (programs' buffers too: they are the tenant's memory).
	if (ctx_) {
		ctx_->programs().take_all();
		retired_programs_.clear();
		ctx_->release();
	}
}

uint64_t Tenant::queue_depth(uint32_t device) const
{
	std::set<const sched::LogicalCore *> seen;
	uint64_t d = 0;
	for (const auto &[id, l] : queue_core_)
		if (l->device() == device && queues_.at(id)->kind() == QueueKind::Core && seen.insert(l.get()).second)
			d += l->depth();
	return d;
}

void Tenant::roll_latency_window()
{
	std::set<const sched::LogicalCore *> seen;
	for (const auto &[id, l] : queue_core_) {
		if (!seen.insert(l.get()).second)
			continue;
		auto now = l->latency.snapshot();
		auto it = window_base_.find(l.get());
		window_prev_[l.get()] = it == window_base_.end() ? sched::LatencyHistogram::Counts{} : it->second;
		window_base_[l.get()] = now;
	}
}

void Tenant::latency(uint64_t *p50, uint64_t *p99) const
{
	// Commands completed since the roll before last: a window of one to two roll
	// periods, so the figures follow the load instead of averaging the whole life.
	sched::LatencyHistogram::Counts sum{};
	std::set<const sched::LogicalCore *> seen;
	for (const auto &[id, l] : queue_core_) {
		if (queues_.at(id)->kind() != QueueKind::Core || !seen.insert(l.get()).second)
			continue;
		const auto now = l->latency.snapshot();
		auto it = window_prev_.find(l.get());
		for (int i = 0; i < sched::LatencyHistogram::kBuckets; ++i)
			sum[i] += now[i] - (it == window_prev_.end() ? 0 : it->second[i]);
	}
	*p50 = sched::LatencyHistogram::percentile(sum, 0.5);
	*p99 = sched::LatencyHistogram::percentile(sum, 0.99);
}

void Tenant::fill_info(api::TenantInfo *info) const
{
	info->set_tenant_id(id_);
	info->set_pool(pool() == sched::Pool::Inference ? api::POOL_INFERENCE : api::POOL_TRAINING);
	info->set_weight(weight);
	uint64_t p50 = 0, p99 = 0;
	latency(&p50, &p99);
	info->set_latency_p50_ns(p50);
	info->set_latency_p99_ns(p99);
	{
		std::set<const sched::LogicalCore *> seen;
		uint64_t busy = 0, tiles = 0, depth = 0;
		for (const auto &[id, l] : queue_core_)
			if (queues_.at(id)->kind() == QueueKind::Core && seen.insert(l.get()).second) {
				busy += l->busy_ns.load(std::memory_order_relaxed);
				tiles += l->tiles.load(std::memory_order_relaxed);
				depth += l->depth();
			}
		info->set_busy_ns(busy);
		info->set_tiles(tiles);
		info->set_queue_depth(depth);
	}
	if (ctx_) {
		uint64_t bytes = 0;
		auto programs = ctx_->programs().snapshot();
		for (const auto &p : programs)
			for (uint64_t b : p->buffer_bytes)
				bytes += b;
		for (const auto &p : retired_programs_)
			for (uint64_t b : p->buffer_bytes)
				bytes += b;
		info->set_programs(programs.size());
		info->set_program_buffer_bytes(bytes);
		info->set_program_validation_ns(program_validation_ns_);
	}
	info->set_pid(static_cast<uint32_t>(peer_.pid));
	info->set_uid(peer_.uid);
	info->set_command(peer_.command);
	info->set_client_name(client_name);
	info->set_kind(kind);
	Limits::fill(limits, info->mutable_limits());
	info->set_limit_class(limit_class);
	if (!ctx_)
		return;
	const backend::TenantMemory &m = ctx_->memory();
	std::shared_lock lock(m.mutex);
	std::map<uint32_t, api::DeviceUsage *> by_device;
	auto usage = [&](uint32_t d) {
		auto &u = by_device[d];
		if (!u) {
			u = info->add_usage();
			u->set_device(d);
		}
		return u;
	};
	for (const auto &[device, allocs] : m.device_allocations())
		if (!allocs.empty())
			usage(device)->set_memory_bytes(m.device_bytes(device));
	for (const auto &[id, q] : queues_) {
		api::DeviceUsage *u = usage(q->device());
		u->set_commands_completed(u->commands_completed() + q->completed());
		if (q->kind() == QueueKind::Core) {
			bool seen = false;
			for (uint32_t c : u->cores())
				seen |= c == q->core();
			if (!seen)
				u->add_cores(q->core());
		}
	}
	lock.unlock();
	for (uint32_t d = 0; d < devices_.device_count(); ++d) {
		if (!by_device.count(d))
			continue;
		std::optional<uint64_t> mask = ctx_->enforced_core_mask(d);
		if (!mask) { // the scheduler's rule alone: the cores its pool may use
			mask = 0;
			for (uint32_t c = 0; c < devices_.core_count(d); ++c)
				*mask |= uint64_t(devices_.cores(d).allows(c, pool())) << c;
		}
		usage(d)->set_physical_core_mask(*mask);
	}
}

} // namespace neuron::daemon
