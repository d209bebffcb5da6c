// One connected client. Owned by its Session on the control thread; the parts that
// engines read (memory, queue directory, queues) are shared_ptrs with their own locks.
#pragma once

#include "chip_set.h"
#include "kmd_tenant.h"

#include <neuron.pb.h>
#include <logical_core.h>
#include <queue.h>
#include <tenant_memory.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace neuron::daemon {

struct Peer {
	pid_t pid = 0;
	uid_t uid = 0;
	gid_t gid = 0;
	std::string command;
};

class Tenant {
public:
	Tenant(uint64_t id, Peer peer, ChipSet &chips);
	~Tenant();

	uint64_t id() const { return id_; }
	const Peer &peer() const { return peer_; }
	std::string log_fields() const;

	// Set by Hello.
	std::string client_name;
	api::TenantKind kind = api::TENANT_KIND_TRAINING;
	uint32_t weight = 1;
	bool observer = false;
	bool greeted = false;
	// Admin calls are allowed (root or the admin group, from SO_PEERCRED at connect).
	bool admin = false;
	// It created a core queue at some point: its exit may leave its pool without work.
	bool used_cores = false;

	chip::Pool pool() const { return kind == api::TENANT_KIND_INFERENCE ? chip::Pool::Inference : chip::Pool::Training; }
	// Commands published and not completed, over its core queues on `device`.
	uint64_t queue_depth(uint32_t device) const;
	// Recent command latency percentiles over all its logical cores (control thread:
	// rolls the window used for them).
	void latency(uint64_t *p50, uint64_t *p99) const;
	void roll_latency_window();

	// Control-plane operations; each returns an empty string or the error text.
	std::string alloc(uint32_t device, uint64_t size, uint64_t alignment, uint64_t *address, api::ErrorCode *code);
	std::string free(uint32_t device, uint64_t address);
	std::string register_host(int fd, uint64_t size, uint32_t *handle);
	std::string unregister_host(uint32_t handle);
	std::string create_queue(uint32_t device, api::QueueKind kind, uint32_t core, uint32_t slots,
				 std::shared_ptr<chip::Queue> *out);
	std::string destroy_queue(uint64_t id);

	// Everything the tenant holds goes back: queues stop, memory is zeroed and freed.
	// Runs once (later calls do nothing).
	void release_all();
	void fill_info(api::TenantInfo *info) const;

private:
	void unmap_host(const chip::HostBuffer &b);

	uint64_t id_;
	Peer peer_;
	ChipSet &chips_;
	std::shared_ptr<chip::TenantMemory> memory_ = std::make_shared<chip::TenantMemory>();
	std::shared_ptr<chip::QueueDirectory> directory_ = std::make_shared<chip::QueueDirectory>();
	std::map<uint64_t, std::shared_ptr<chip::Queue>> queues_;
	// The logical core each queue belongs to (core queues: its device's NeuronCore
	// scheduler; DMA queues: the device's DMA scheduler).
	std::map<uint64_t, std::shared_ptr<chip::LogicalCore>> queue_core_;
	// Latency window: cumulative histograms at the last roll, per logical core.
	std::map<const chip::LogicalCore *, chip::LatencyHistogram::Counts> window_base_;
	std::map<const chip::LogicalCore *, chip::LatencyHistogram::Counts> window_prev_;
	uint32_t next_host_handle_ = 1;
	bool released_ = false;
	// The kmd backend's side of this tenant (null on emu): its driver contexts,
	// BOs and ring pumps. The queues above are still its rings.
	std::unique_ptr<KmdTenant> kmd_;
};

// Queue ids are unique across the daemon's life, so a stale id never names a new queue.
uint64_t next_queue_id();

} // namespace neuron::daemon
