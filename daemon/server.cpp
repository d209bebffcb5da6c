#include "server.h"

#include "listen_fds.h"
#include "unix_listener.h"
#include "log.h"
#include "text.h"
#include "session.h"

#include <neuron/cmd.h>

#include <algorithm>
#include <fstream>
#include <grp.h>
#include <stdexcept>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

namespace neuron::daemon {

namespace {

using boost::asio::local::stream_protocol;

// Cores each device homes in the inference pool (--inference-cores; -1: half).
uint32_t inference_cores(const backend::DeviceBackend &devices, const Config &config)
{
	const uint32_t cores = devices.device_count() ? devices.core_count(0) : 0;
	return config.inference_cores < 0 ? cores / 2 : std::min<uint32_t>(uint32_t(config.inference_cores), cores);
}

Limits::Totals limit_totals(const backend::DeviceBackend &devices)
{
	Limits::Totals t;
	// hbm_bytes limits what a tenant holds on each device: percentages are of one
	// device's HBM (the smallest, should they differ).
	for (uint32_t d = 0; d < devices.device_count(); ++d) {
		const uint64_t b = devices.describe(d).hbm_bytes;
		t.hbm_bytes = d == 0 ? b : std::min(t.hbm_bytes, b);
	}
	t.host_ram = host_ram_bytes();
	return t;
}

size_t max_map_count()
{
	std::ifstream f("/proc/sys/vm/max_map_count");
	size_t n = 0;
	return f >> n && n > 0 ? n : 65530;
}

} // namespace

Server::Server(boost::asio::io_context &io, backend::DeviceBackend &devices, const Config &config)
	: io_(io), devices_(devices), config_(config), events_(io), leases_(devices, inference_cores(devices, config)),
	  capacity_(devices, leases_, events_, config),
	  policy_(io, devices, leases_, capacity_, events_, policy_from_config(config)),
	  limits_(limit_totals(devices)), max_host_buffers_(max_map_count() / 2), telemetry_timer_(io),
	  path_(config.socket_path), acceptor_(io), orphan_timer_(io)
{
	// What the collective runner yields to (collective_run.h); called on its
	// thread: the scheduler's logical-core list and depths are safe there.
	auto inference_load = [this](uint32_t device) {
		InferenceLoad load = InferenceLoad::None;
		if (device >= devices_.device_count())
			return load;
		for (const auto &l : devices_.cores(device).logical_cores())
			if (l->pool() == Pool::Inference) {
				if (l->depth() > 0)
					return InferenceLoad::Pending;
				load = InferenceLoad::Idle;
			}
		return load;
	};
	collectives_ = std::make_unique<CollectiveGroups>(
		io, devices_,
		[this](uint64_t id) -> const Tenant * {
			auto it = sessions_.find(id);
			return it == sessions_.end() || !it->second->tenant().greeted ? nullptr : &it->second->tenant();
		},
		inference_load);
	if (auto err = limits_.parse(config.limits); !err.empty())
		throw std::runtime_error("bad --limit: " + err);
	if (auto err = validate_policy(policy_.config()); !err.empty())
		throw std::runtime_error("bad capacity policy: " + err);
	if (!config.schedule.empty()) {
		api::PolicyConfig p = policy_.config();
		if (auto err = parse_schedule(config.schedule, &p); !err.empty())
			throw std::runtime_error("bad --schedule: " + err);
		policy_.set(p);
	}
	started_policy_ = policy_.config();
	for (int p = 0; p < sched::kPoolCount; ++p)
		started_pools_[p] = capacity_.limits(static_cast<Pool>(p));
	// Engine threads report through the event bus, which hops onto this thread.
	devices_.on_fault = [this](const backend::Queue &q, uint32_t code, uint64_t seq, const std::string &reason) {
		NLOG_WARN("queue.fault", "tenant=" + std::to_string(q.tenant().id()) + " queue=" + std::to_string(q.id()) + " device=" + std::to_string(q.device()) +
						 " core=" + std::to_string(q.core()) + " backend=" + devices_.name() +
						 " code=" + std::to_string(code) + " seq=" + std::to_string(seq) + " reason=" +
						 quoted(reason));
		api::Event ev = EventBus::make(code == NEURON_FAULT_RESET ? "core.reset" : "queue.fault", q.device(),
					       q.kind() == backend::QueueKind::Core ? static_cast<int32_t>(q.core()) : -1,
					       "queue " + std::to_string(q.id()) + " seq " + std::to_string(seq) + " code " +
						       std::to_string(code) + ": " + reason);
		ev.set_tenant_id(q.tenant().id()); // whose queue faulted
		events_.post(std::move(ev));
	};
	// Test only (--inject-fault): which tenant an injected fault hit, said once here;
	// its effect (a fault, a reset) is reported as any other.
	devices_.on_injected = [this](const backend::Queue &q, const std::string &what) {
		NLOG_WARN("fault.injected", "tenant=" + std::to_string(q.tenant().id()) + " queue=" + std::to_string(q.id()) +
						    " device=" + std::to_string(q.device()) + " what=" + quoted(what));
		api::Event ev = EventBus::make("fault.injected", q.device(),
					       q.kind() == backend::QueueKind::Core ? static_cast<int32_t>(q.core()) : -1, what);
		ev.set_tenant_id(q.tenant().id());
		events_.post(std::move(ev));
	};
	devices_.on_switched = [this](uint32_t device, uint32_t core) { leases_.switched(device, core); };
	leases_.on_reclaimed = [this](const ReclaimDone &r) {
		boost::asio::post(io_, [this, r] { capacity_.on_reclaimed(r); });
	};
	roll_telemetry();
	if (const int fd = inherited_unix_listener(path_); fd >= 0) {
		// Socket activation: systemd bound it, with the unit's owner, group and mode.
		acceptor_.assign(stream_protocol(), fd);
		NLOG_INFO("server.listen", "socket=" + path_ + " from=" + (getenv("NEURON_SUPERVISED") ? "supervisor" : "systemd"));
		accept();
		return;
	}
	acceptor_.assign(stream_protocol(), bind_unix_listener(path_, config.socket_group));
	owns_socket_file_ = true;
	NLOG_INFO("server.listen", "socket=" + path_);
	accept();
}

Server::~Server()
{
	stop();
	// The engines call this server's hooks: they stop before it goes.
	devices_.stop();
}

void Server::accept()
{
	acceptor_.async_accept([this](const boost::system::error_code &ec, stream_protocol::socket sock) {
		if (stopped_)
			return;
		if (!ec) {
			const uint64_t id = next_session_++;
			auto s = std::make_shared<Session>(std::move(sock), *this, id);
			sessions_[id] = s;
			s->start();
		} else {
			NLOG_WARN("server.accept_failed", "error=" + quoted(ec.message()));
		}
		accept();
	});
}

std::vector<const Tenant *> Server::tenants() const
{
	std::vector<const Tenant *> out;
	for (const auto &[id, s] : sessions_)
		if (s->tenant().greeted && !s->tenant().observer)
			out.push_back(&s->tenant());
	return out;
}

size_t Server::host_buffers() const
{
	size_t n = 0;
	for (const auto &[id, s] : sessions_)
		n += s->tenant().host_buffer_count();
	return n;
}

void Server::tenant_gone() { capacity_.return_orphaned_loans(); }

void Server::roll_telemetry()
{
	// Latency percentiles cover the last one to two seconds (Tenant::latency).
	for (auto &[id, s] : sessions_)
		s->roll_latency_window();
	telemetry_timer_.expires_after(std::chrono::seconds(1));
	telemetry_timer_.async_wait([this](const boost::system::error_code &ec) {
		if (!ec && !stopped_)
			roll_telemetry();
	});
}

void Server::stop()
{
	if (stopped_)
		return;
	stopped_ = true;
	policy_.stop();
	telemetry_timer_.cancel();
	orphan_timer_.cancel();
	boost::system::error_code ignored;
	acceptor_.close(ignored);
	// close() removes the session from the map: iterate over a copy.
	auto sessions = sessions_;
	for (auto &[id, s] : sessions)
		s->close("daemon shutting down");
	while (!orphans_.empty())
		release_orphan(orphans_.begin(), "daemon shutting down");
	// Not inherited_unix_listener() here: the acceptor (the inherited descriptor) is
	// closed by now, so it would no longer see systemd's socket and remove its file.
	if (owns_socket_file_)
		unlink(path_.c_str());
}

} // namespace neuron::daemon
