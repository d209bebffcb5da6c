// One connected client. Owned by its Session on the control thread; the parts that
// engines read (its backend context with its memory, queue directory, queues) are
// shared_ptrs with their own locks. It sees the devices only through the backend
// interface (runtime/backend/device_backend.h): whichever backend runs, the same code.
#pragma once

#include "tenant_limits.h"

#include <backend/device_backend.h>
#include <backend/queue.h>
#include <program/validate.h>
#include <sched/logical_core.h>

#include <neuron.pb.h>
#include <state.pb.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace neuron::daemon {

class FdStore;
class StateJournal;

struct Peer {
	pid_t pid = 0;
	uid_t uid = 0;
	gid_t gid = 0;
	std::string command;
};

class Tenant {
public:
	// A backend that cannot give it a context (the driver refused to open a file
	// for it) leaves every device request failing with the reason.
	// kept_files: a tenant of the earlier neurond (adopt()): its backend context
	// built on these (DeviceBackend::adopt_tenant).
	Tenant(uint64_t id, Peer peer, backend::DeviceBackend &devices, std::vector<int> kept_files = {});
	~Tenant();

	uint64_t id() const { return id_; }
	const Peer &peer() const { return peer_; }
	std::string log_fields() const;

	// Restart survival (README "Restart with tenants alive"; tenant_restart.cpp).
	// Where its descriptors and progress are kept (null: not kept; set before any
	// request). Its backend context's files (kmd: its driver files) go to the
	// store here, as keep.accel.<tenant>.<device>.
	void keep_in(FdStore *store, StateJournal *journal);
	// What its libneuron presents to re-attach after a restart (set by Hello).
	std::string resume_token;
	// The last request that changed state, and its reply (a retry after a restart
	// gets this reply instead of running again).
	uint64_t last_request_id = 0;
	std::string last_response;
	void save(state::Tenant *out) const;
	// A tenant of the earlier neurond rebuilt from its journal entry: memory,
	// host buffers, queues (attached to the scheduler, so its queued commands run
	// on before it re-attaches). What could not be adopted is in *problems.
	static std::unique_ptr<Tenant> adopt(const state::Tenant &s, backend::DeviceBackend &devices, FdStore &store,
					     StateJournal &journal, std::string *problems);
	// A resuming connection (its credentials) takes over this tenant.
	void reattach(const Peer &peer) { peer_.pid = peer.pid; }
	// The ring of one of its queues, for a retried CreateQueue's reply (-1: none).
	int ring_fd(uint64_t queue_id) const;

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
	// Its limits (set by Hello from its pool and credentials; tenant_limits.h).
	LimitSet limits;
	std::string limit_class;
	size_t host_buffer_count() const { return host_count_; }

	sched::Pool pool() const { return kind == api::TENANT_KIND_INFERENCE ? sched::Pool::Inference : sched::Pool::Training; }
	// Commands published and not completed, over its core queues on `device`.
	uint64_t queue_depth(uint32_t device) const;
	// Recent command latency percentiles over all its logical cores (control thread:
	// rolls the window used for them).
	void latency(uint64_t *p50, uint64_t *p99) const;
	void roll_latency_window();

	// Control-plane operations; each returns an empty string or the error text.
	std::string alloc(uint32_t device, uint64_t size, uint64_t alignment, uint64_t *address, api::ErrorCode *code);
	std::string free(uint32_t device, uint64_t address, api::ErrorCode *code);
	std::string register_host(int fd, uint64_t size, uint32_t *handle, api::ErrorCode *code);
	std::string unregister_host(uint32_t handle, api::ErrorCode *code);
	std::string create_queue(uint32_t device, api::QueueKind kind, uint32_t core, uint32_t slots,
				 std::shared_ptr<backend::Queue> *out, api::ErrorCode *code);
	std::string destroy_queue(uint64_t id);
	// Programs (<neuron/program.h>; tenant_programs.cpp). fd: the memfd that came
	// with the request (-1 if none; the caller closes it).
	std::string register_program(const api::RegisterProgram &req, int fd, api::RegisterProgramReply *reply,
				     api::ErrorCode *code);
	std::string deregister_program(uint64_t id, api::ErrorCode *code);
	// Frees the buffers of deregistered programs that no replay holds any more
	// (the telemetry timer calls it every second; registration too).
	void reap_programs();

	// Everything the tenant holds goes back: queues stop, memory is zeroed and freed.
	// Runs once (later calls do nothing).
	void release_all();
	void fill_info(api::TenantInfo *info) const;
	// Its backend context (null if the backend refused one): collective groups hold
	// it while a collective uses the tenant's memory.
	std::shared_ptr<backend::TenantContext> context() const { return ctx_; }

private:
	// "" or the API code and message of a backend's refusal.
	std::string refused(const backend::Result &r, api::ErrorCode *code) const;
	// "" or why this tenant has no backend context.
	std::string unready(api::ErrorCode *code) const;
	// "" or why `device` is not one (NOT_FOUND).
	std::string no_device(uint32_t device, api::ErrorCode *code) const;
	// "" or the refusal of a limit (RESOURCE_EXHAUSTED).
	std::string over_limit(Resource r, uint64_t held, uint64_t more, api::ErrorCode *code,
			       const std::string &where = {}) const;

	uint64_t id_;
	Peer peer_;
	backend::DeviceBackend &devices_;
	std::shared_ptr<backend::TenantContext> ctx_; // null if the backend refused (ctx_error_)
	std::string ctx_error_;
	std::shared_ptr<backend::QueueDirectory> directory_ = std::make_shared<backend::QueueDirectory>();
	std::map<uint64_t, std::shared_ptr<backend::Queue>> queues_;
	// The logical core each queue belongs to (core queues: its device's NeuronCore
	// scheduler; DMA queues: the device's DMA scheduler).
	std::map<uint64_t, std::shared_ptr<sched::LogicalCore>> queue_core_;
	// Latency window: cumulative histograms at the last roll, per logical core.
	std::map<const sched::LogicalCore *, sched::LatencyHistogram::Counts> window_base_;
	std::map<const sched::LogicalCore *, sched::LatencyHistogram::Counts> window_prev_;
	uint32_t next_host_handle_ = 1;
	// What it holds, for its limits (control thread).
	std::map<uint32_t, uint64_t> hbm_held_; // device -> bytes
	size_t host_count_ = 0;
	uint64_t host_bytes_ = 0;
	std::map<uint32_t, uint64_t> host_sizes_; // handle -> bytes
	bool released_ = false;
	std::map<uint64_t, uint32_t> progress_slot_; // queue -> its kept progress record
	// Devices whose context file is in the store (TenantContext::kept_files()).
	std::vector<bool> file_kept_;
	void keep_files();
	void forget_kept_files();
	FdStore *store_ = nullptr;
	StateJournal *journal_ = nullptr;
	// Restart survival of a new queue: its ring and undo log kept, a progress
	// record claimed. "" or why not.
	std::string keep_queue(backend::Queue &q);
	void adopt_queue(const state::Queue &s, FdStore &store, StateJournal &journal, std::string *problems);
	// Deregistered programs whose buffers wait for the replays still holding them.
	std::vector<std::shared_ptr<const program::Program>> retired_programs_;
	uint64_t program_validation_ns_ = 0;
	void free_program_buffers(const program::Program &p);
	// Decodes and validates a Program message (registration; adoption).
	std::string build_program(const api::Program &source, program::Description *desc, program::Program *out) const;
	// Restart survival of programs (tenant_programs.cpp).
	void keep_program(uint64_t id, const api::Program &source);
	void forget_kept_programs();
	void save_programs(state::Tenant *out) const;
	void adopt_program(const state::Program &s, FdStore &store, std::string *problems);
};

// Queue ids are unique across the daemon's life (and across restarts that keep
// state), so a stale id never names a new queue.
uint64_t next_queue_id();
uint64_t peek_queue_id();
// After a restart: ids continue from the earlier neurond's.
void reserve_queue_ids(uint64_t next);

} // namespace neuron::daemon
