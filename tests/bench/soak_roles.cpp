#include "soak_roles.h"

#include "checked_work.h"
#include "raw_client.h"

#include <neuron/futex.h>
#include <neuron/neuron.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

namespace soak {

namespace {

using neuron::detail::monotonic_ns;
using neuron::test::CheckedTenant;
using neuron::test::CheckedWorkResult;
using neuron::test::CheckedWorkSpec;

constexpr int64_t kWaitNs = 60'000'000'000; // a round never takes a minute, even at the worst of a soak

void write_report(const std::string &path, const CheckedWorkResult &r, bool latencies, uint64_t polls)
{
	const std::string tmp = path + ".tmp";
	std::ofstream out(tmp);
	const bool bad = r.faulted || !r.error.empty();
	out << "rounds " << r.rounds << "\nwrong " << r.wrong << "\nerrors " << (bad ? 1 : 0) << "\npolls " << polls << "\n";
	if (bad)
		out << "error " << (r.faulted ? std::string("fault on the ") + r.fault_queue + " queue: " + r.fault.reason : r.error)
		    << "\n";
	else if (r.wrong)
		out << "error wrong result: " << r.first_wrong << "\n";
	if (latencies)
		for (uint64_t ns : r.round_ns)
			out << "lat " << ns << "\n";
	out.close();
	std::rename(tmp.c_str(), path.c_str()); // whole or absent
}

CheckedWorkSpec spec_for(const RoleArgs &a)
{
	CheckedWorkSpec s;
	s.device = a.device;
	s.seed = a.seed;
	if (a.role == "inference") {
		// A small request: a 16-row batch through a 64 x 16 layer.
		s.kind = NEURON_TENANT_INFERENCE;
		s.m = 16, s.k = 64, s.n = 16;
	} else {
		s.kind = NEURON_TENANT_TRAINING;
		s.m = 64, s.k = 128, s.n = 64;
	}
	return s;
}

// A tenant: rounds until the deadline (or `rounds` of them); inference paces its
// requests (a request stream, not a flood) and records each one's latency.
int run_tenant(const RoleArgs &a)
{
	CheckedWorkResult r;
	CheckedTenant t;
	const CheckedWorkSpec spec = spec_for(a);
	if (t.open(a.socket, "soak-" + a.role + "-" + std::to_string(a.seed), spec, &r)) {
		for (int i = 0; a.rounds == 0 || i < a.rounds; ++i) {
			if (a.rounds == 0 && monotonic_ns() >= a.until_ns)
				break;
			if (!t.round(&r, kWaitNs))
				break;
			if (a.role == "inference")
				std::this_thread::sleep_for(std::chrono::milliseconds(5));
		}
	}
	t.close();
	write_report(a.out, r, a.role == "inference", 0);
	return 0;
}

// A monitoring tool: ListTenants through libneuron (an observer) and GetCapacity
// by hand, every 100 ms.
int run_tool(const RoleArgs &a)
{
	CheckedWorkResult r;
	uint64_t polls = 0;
	struct neuron_connect_options o = {};
	o.socket_path = a.socket.c_str();
	o.client_name = "soak-tool";
	o.observer = 1;
	neuron_client *c = nullptr;
	neuron::test::RawClient raw;
	if (neuron_connect(&o, &c) != NEURON_OK)
		r.error = std::string("neuron_connect (observer): ") + neuron_last_error();
	else if (!connect_observer(raw, a.socket))
		r.error = "raw connect/hello failed";
	std::vector<neuron_tenant_info> list(4096);
	while (r.error.empty() && monotonic_ns() < a.until_ns) {
		uint32_t n = 0;
		if (neuron_list_tenants(c, list.data(), static_cast<uint32_t>(list.size()), &n) != NEURON_OK) {
			r.error = std::string("ListTenants: ") + neuron_last_error();
			break;
		}
		neuron::api::Request req;
		req.mutable_get_capacity();
		neuron::api::Response resp;
		std::string why;
		if (!raw.call(req, &resp, 30000, nullptr, &why) || !resp.has_capacity()) {
			r.error = "GetCapacity: " + (why.empty() ? resp.DebugString() : why);
			break;
		}
		++polls;
		std::this_thread::sleep_for(std::chrono::milliseconds(100));
	}
	if (c)
		neuron_disconnect(c);
	write_report(a.out, r, false, polls);
	return 0;
}

} // namespace

int run_role(const RoleArgs &a)
{
	if (a.role == "tool")
		return run_tool(a);
	if (a.role == "training" || a.role == "inference" || a.role == "short" || a.role == "victim")
		return run_tenant(a);
	std::fprintf(stderr, "bench-soak: unknown role %s\n", a.role.c_str());
	return 2;
}

bool connect_observer(neuron::test::RawClient &c, const std::string &socket)
{
	if (!c.connect(socket))
		return false;
	neuron::api::Request req;
	req.mutable_hello()->set_api_major(1);
	req.mutable_hello()->set_observer(true);
	req.mutable_hello()->set_client_name("soak-tool");
	neuron::api::Response resp;
	return c.call(req, &resp) && resp.has_hello();
}

RoleReport read_report(const std::string &path)
{
	RoleReport rep;
	std::ifstream in(path);
	if (!in)
		return rep;
	rep.present = true;
	std::string key;
	while (in >> key) {
		if (key == "error") {
			std::getline(in, rep.error);
			continue;
		}
		uint64_t v = 0;
		in >> v;
		if (key == "rounds")
			rep.rounds = v;
		else if (key == "wrong")
			rep.wrong = v;
		else if (key == "errors")
			rep.errors = v;
		else if (key == "polls")
			rep.polls = v;
		else if (key == "lat")
			rep.latency_ns.push_back(v);
	}
	return rep;
}

} // namespace soak
