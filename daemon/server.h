// The control-plane server: a Unix socket acceptor and the live sessions. Every
// member is touched only on the io_context thread.
#pragma once

#include "capacity.h"
#include "collective_groups.h"
#include "config.h"
#include "events.h"
#include "leases.h"
#include "tenant_limits.h"
#include "policy.h"
#include "unix_listener.h"

#include <backend/device_backend.h>

#include <utility> // before Asio: Boost 1.74 awaitable.hpp uses std::exchange without it
#include <boost/asio.hpp>

#include <map>
#include <memory>
#include <string>

namespace neuron::daemon {

class FdStore;
class Session;
class StateJournal;
class Tenant;


class Server {
public:
	// Throws std::runtime_error if the socket cannot be set up.
	Server(boost::asio::io_context &io, backend::DeviceBackend &devices, const Config &config);
	~Server();

	void stop();
	backend::DeviceBackend &devices() { return devices_; }
	Leases &leases() { return leases_; }
	EventBus &events() { return events_; }
	Capacity &capacity() { return capacity_; }
	Policy &policy() { return policy_; }
	CollectiveGroups &collectives() { return *collectives_; }
	const Limits &limits() const { return limits_; }
	// Host buffers all tenants hold, and how many neurond maps at most (half of
	// vm.max_map_count: the mappings its rings and HBM need must stay possible).
	size_t host_buffers() const;
	size_t max_host_buffers() const { return max_host_buffers_; }
	const Config &config() const { return config_; }
	// Greeted, non-observer tenants.
	std::vector<const Tenant *> tenants() const;
	// A tenant left: its pool may have no work left where it borrowed cores.
	void tenant_gone();
	void forget(uint64_t session_id) { sessions_.erase(session_id); }
	const std::map<uint64_t, std::shared_ptr<Session>> &sessions() const { return sessions_; }
	const std::string &socket_path() const { return path_; }

	// Restart survival (README "Restart with tenants alive"; server_restart.cpp).
	// Keep state with the supervisor from now on (before any session).
	void keep_state(FdStore &store, StateJournal &journal);
	FdStore *fd_store() const { return store_; }
	StateJournal *journal() const { return journal_; }
	// Adopts the tenants the earlier neurond's journal names (before the engines
	// start): they wait for their libneuron to re-attach (claim_orphan) for
	// --reattach-grace-ms, their queued commands running meanwhile. Returns how many.
	size_t adopt_state();
	// Writes the journal (after every change a tenant depends on, before its reply).
	void save_state();
	// A resuming Hello: the adopted tenant `id` if `token` matches and `uid` is its
	// owner's; null with *why.
	std::unique_ptr<Tenant> claim_orphan(uint64_t id, const std::string &token, uid_t uid, std::string *why);
	// A session that took over an adopted tenant is known by the tenant's id.
	void rekey(uint64_t old_id, uint64_t new_id);

private:
	// Run-time capacity settings across a restart (settings_keep.cpp).
	void save_settings(state::Daemon *out) const;
	void adopt_settings(const state::Daemon &d);

	void accept();

	boost::asio::io_context &io_;
	backend::DeviceBackend &devices_;
	Config config_;
	EventBus events_;
	Leases leases_;
	Capacity capacity_;
	Policy policy_;
	// What the flags and config file set (SetPolicy and SetPool change them at run
	// time): a restart keeps a run-time change only while these stay the same.
	api::PolicyConfig started_policy_;
	PoolLimits started_pools_[sched::kPoolCount];
	Limits limits_;
	size_t max_host_buffers_;
	boost::asio::steady_timer telemetry_timer_;
	void roll_telemetry();
	std::string path_;
	boost::asio::local::stream_protocol::acceptor acceptor_;
	std::map<uint64_t, std::shared_ptr<Session>> sessions_;
	uint64_t next_session_ = 1;
	bool stopped_ = false;
	// We bound the socket file (no socket activation), so stop() removes it; systemd's
	// socket file outlives us and must stay for the next neurond and its clients.
	bool owns_socket_file_ = false;
	void reap_orphans();
	void release_orphan(std::map<uint64_t, std::unique_ptr<Tenant>>::iterator it, const std::string &reason);
	FdStore *store_ = nullptr;
	StateJournal *journal_ = nullptr;
	std::map<uint64_t, std::unique_ptr<Tenant>> orphans_; // adopted, not re-attached yet
	std::chrono::steady_clock::time_point orphan_deadline_;
	boost::asio::steady_timer orphan_timer_;
	// Last: its runner thread stops before the sessions and devices go.
	std::unique_ptr<CollectiveGroups> collectives_;
};

} // namespace neuron::daemon
