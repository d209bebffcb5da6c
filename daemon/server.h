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

#include <backend/device_backend.h>

#include <utility> // before Asio: Boost 1.74 awaitable.hpp uses std::exchange without it
#include <boost/asio.hpp>

#include <map>
#include <memory>
#include <string>

namespace neuron::daemon {

class Session;
class Tenant;

// True if something answers on the Unix socket at path (another neurond).
bool socket_alive(const std::string &path);

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

private:
	void accept();

	boost::asio::io_context &io_;
	backend::DeviceBackend &devices_;
	Config config_;
	EventBus events_;
	Leases leases_;
	Capacity capacity_;
	Policy policy_;
	Limits limits_;
	size_t max_host_buffers_;
	boost::asio::steady_timer telemetry_timer_;
	void roll_telemetry();
	std::string path_;
	boost::asio::local::stream_protocol::acceptor acceptor_;
	std::map<uint64_t, std::shared_ptr<Session>> sessions_;
	uint64_t next_session_ = 1;
	bool stopped_ = false;
	// Last: its runner thread stops before the sessions and devices go.
	std::unique_ptr<CollectiveGroups> collectives_;
};

} // namespace neuron::daemon
