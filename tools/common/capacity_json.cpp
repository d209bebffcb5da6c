#include "capacity_json.h"

namespace neuron::tools {

using nlohmann::json;

const char *pool_name(api::PoolKind p)
{
	return p == api::POOL_INFERENCE ? "inference" : p == api::POOL_TRAINING ? "training" : "none";
}

json to_json(const api::PoolInfo &p)
{
	return {{"pool", pool_name(p.pool())},       {"min_cores", p.min_cores()},
		{"max_cores", p.max_cores()},         {"home_cores", p.home_cores()},
		{"held_cores", p.held_cores()},       {"lent_cores", p.lent_cores()},
		{"borrowed_cores", p.borrowed_cores()}, {"tenants", p.tenants()},
		{"queue_depth", p.queue_depth()},     {"latency_p99_ns", p.latency_p99_ns()},
		{"tenant_limits", to_json(p.limits())}};
}

json to_json(const api::CoreInfo &c)
{
	return {{"device", c.device()},           {"core", c.core()},
		{"home", pool_name(c.home())},     {"holder", pool_name(c.holder())},
		{"lease_state", c.lease_state()},  {"busy_ns", c.busy_ns()},
		{"commands", c.commands()},        {"tiles", c.tiles()},
		{"last_tenant", c.last_tenant()},  {"max_tile_ns", c.max_tile_ns()}, {"max_tile_cpu_ns", c.max_tile_cpu_ns()},
		{"tile_p99_ns", c.tile_p99_ns()}, {"tile_p999_ns", c.tile_p999_ns()},
		{"last_reclaim_ns", c.last_reclaim_ns()}, {"loan_id", c.loan_id()}};
}

json to_json(const api::LoanInfo &l)
{
	return {{"loan_id", l.loan_id()},
		{"device", l.device()},
		{"core", l.core()},
		{"lender", pool_name(l.lender())},
		{"borrower", pool_name(l.borrower())},
		{"state", l.state()},
		{"lent_unix_ms", l.lent_unix_ms()},
		{"returned_unix_ms", l.returned_unix_ms()},
		{"reclaim_latency_ns", l.reclaim_latency_ns()},
		{"deadline_ms", l.deadline_ms()},
		{"late", l.late()},
		{"reason", l.reason()}};
}

json to_json(const api::PolicyConfig &p)
{
	json windows = json::array();
	for (const auto &w : p.windows())
		windows.push_back({{"start", w.start()}, {"end", w.end()}, {"cores", w.cores()}});
	const auto &a = p.auto_();
	return {{"mode", p.mode()},
		{"windows", windows},
		{"auto",
		 {{"reclaim_depth", a.reclaim_depth()},
		  {"lend_depth", a.lend_depth()},
		  {"reclaim_p99_us", a.reclaim_p99_us()},
		  {"lend_p99_us", a.lend_p99_us()},
		  {"hold_ms", a.hold_ms()}}},
		{"reclaim_deadline_ms", p.reclaim_deadline_ms()}};
}

json to_json(const api::TenantInfo &t)
{
	json usage = json::array();
	uint64_t memory = 0, commands = 0;
	for (const auto &u : t.usage()) {
		json cores = json::array();
		for (uint32_t c : u.cores())
			cores.push_back(c);
		usage.push_back({{"device", u.device()},
				 {"memory_bytes", u.memory_bytes()},
				 {"logical_cores", cores},
				 {"commands_completed", u.commands_completed()}});
		memory += u.memory_bytes();
		commands += u.commands_completed();
	}
	return {{"tenant_id", t.tenant_id()},
		{"pid", t.pid()},
		{"uid", t.uid()},
		{"command", t.command()},
		{"client_name", t.client_name()},
		{"kind", t.kind() == api::TENANT_KIND_INFERENCE ? "inference" : "training"},
		{"pool", pool_name(t.pool())},
		{"weight", t.weight()},
		{"memory_bytes", memory},
		{"commands_completed", commands},
		{"latency_p50_ns", t.latency_p50_ns()},
		{"latency_p99_ns", t.latency_p99_ns()},
		{"busy_ns", t.busy_ns()},
		{"tiles", t.tiles()},
		{"queue_depth", t.queue_depth()},
		{"devices", usage},
		{"redacted", t.redacted()},
		{"limit_class", t.limit_class()},
		{"limits", to_json(t.limits())}};
}

json to_json(const google::protobuf::RepeatedPtrField<api::ResourceLimit> &limits)
{
	json out = json::object();
	for (const auto &l : limits)
		out[l.resource()] = {{"limit", l.unlimited() ? json(nullptr) : json(l.limit())}, {"source", l.source()}};
	return out;
}

json to_json(const api::Event &e)
{
	return {{"seq", e.seq()},           {"unix_ms", e.unix_ms()}, {"type", e.type()},
		{"device", e.device()},     {"core", e.core()},       {"tenant_id", e.tenant_id()},
		{"loan_id", e.loan_id()},   {"latency_ns", e.latency_ns()}, {"message", e.message()},
		{"lost", e.lost()},         {"client_name", e.client_name()}};
}

json to_json(const api::CapacityReply &r)
{
	json pools = json::array(), cores = json::array(), loans = json::array();
	for (const auto &p : r.pools())
		pools.push_back(to_json(p));
	for (const auto &c : r.cores())
		cores.push_back(to_json(c));
	for (const auto &l : r.loans())
		loans.push_back(to_json(l));
	json classes = json::array();
	for (const auto &c : r.limit_classes())
		classes.push_back({{"name", c.name()}, {"limits", to_json(c.limits())}});
	return {{"schema", kSchema}, {"pools", pools}, {"cores", cores}, {"loans", loans}, {"policy", to_json(r.policy())},
		{"limit_classes", classes}};
}

} // namespace neuron::tools
