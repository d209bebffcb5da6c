#include "model.h"

#include <neuron/futex.h>

namespace neuron::top {

bool Model::refresh(tools::CtlClient &client, std::string *error)
{
	Sample s;
	api::Request req;
	api::Response resp;
	req.mutable_list_devices();
	if (!client.call(req, &resp, error))
		return false;
	s.devices = resp.list_devices();
	req.Clear();
	req.mutable_get_capacity();
	if (!client.call(req, &resp, error))
		return false;
	if (resp.has_error()) {
		*error = tools::describe_error(resp.error());
		return false;
	}
	s.capacity = resp.capacity();
	if (!client.list_tenants(&s.tenants, error))
		return false;
	s.at_ns = detail::monotonic_ns();
	if (cur.at_ns) {
		prev = std::move(cur);
		have_prev = true;
	}
	cur = std::move(s);
	return true;
}

double Model::utilisation(uint32_t device, uint32_t core) const
{
	if (!have_prev)
		return 0;
	auto busy = [&](const Sample &s) -> uint64_t {
		for (const auto &c : s.capacity.cores())
			if (c.device() == device && c.core() == core)
				return c.busy_ns();
		return 0;
	};
	const double dt = double(cur.at_ns - prev.at_ns);
	const double u = dt > 0 ? double(busy(cur) - busy(prev)) / dt : 0;
	return u < 0 ? 0 : u > 1 ? 1 : u;
}

uint64_t Model::commands(const api::TenantInfo &t)
{
	uint64_t n = 0;
	for (const auto &u : t.usage())
		n += u.commands_completed();
	return n;
}

uint64_t Model::memory(const api::TenantInfo &t)
{
	uint64_t n = 0;
	for (const auto &u : t.usage())
		n += u.memory_bytes();
	return n;
}

const api::TenantInfo *Model::tenant(uint64_t id) const
{
	for (const auto &t : cur.tenants.tenants())
		if (t.tenant_id() == id)
			return &t;
	return nullptr;
}

double Model::ops_per_s(uint64_t id) const
{
	if (!have_prev)
		return 0;
	const api::TenantInfo *now = tenant(id);
	const api::TenantInfo *before = nullptr;
	for (const auto &t : prev.tenants.tenants())
		if (t.tenant_id() == id)
			before = &t;
	if (!now || !before)
		return 0;
	const double dt = double(cur.at_ns - prev.at_ns) / 1e9;
	return dt > 0 ? double(commands(*now) - commands(*before)) / dt : 0;
}

} // namespace neuron::top
