#include "scrape.h"

#include "prom_text.h"

#include <ctl_client.h>

namespace neuron::monitor {

namespace {

double seconds(uint64_t ns) { return static_cast<double>(ns) / 1e9; }
std::string str(uint64_t v) { return std::to_string(v); }

std::string pool_name(api::PoolKind p)
{
	return p == api::POOL_INFERENCE ? "inference" : p == api::POOL_TRAINING ? "training" : "none";
}

std::string kind_name(api::TenantKind k) { return k == api::TENANT_KIND_INFERENCE ? "inference" : "training"; }

// One request; false (and *error) on a transport or daemon error.
bool ask(tools::CtlClient &c, api::Request req, api::Response *resp, std::string *error)
{
	if (!c.call(req, resp, error))
		return false;
	if (resp->has_error()) {
		*error = tools::describe_error(resp->error());
		return false;
	}
	return true;
}

void devices(PromText &p, const api::ListDevicesReply &d)
{
	p.family("neuron_device_info", "gauge", "A Neuron device neurond serves (value 1): profile, backend (kmd: neuron.ko, emu: simulated in neurond), PCI address");
	for (const auto &dev : d.devices())
		p.sample("neuron_device_info", {{"device", str(dev.index())}, {"profile", dev.profile()}, {"backend", dev.backend()}, {"bdf", dev.pci_bdf()}}, 1);
	p.family("neuron_device_cores", "gauge", "NeuronCores of the device");
	for (const auto &dev : d.devices())
		p.sample("neuron_device_cores", {{"device", str(dev.index())}}, dev.core_count());
	p.family("neuron_device_hbm_bytes", "gauge", "HBM size of the device in bytes");
	for (const auto &dev : d.devices())
		p.sample("neuron_device_hbm_bytes", {{"device", str(dev.index())}}, static_cast<double>(dev.hbm_bytes()));
	p.family("neuron_device_hbm_used_bytes", "gauge", "HBM allocated by tenants, in bytes");
	for (const auto &dev : d.devices())
		p.sample("neuron_device_hbm_used_bytes", {{"device", str(dev.index())}}, static_cast<double>(dev.hbm_used_bytes()));
	p.family("neuron_device_hbm_largest_free_bytes", "gauge", "Largest free HBM block in bytes (fragmentation)");
	for (const auto &dev : d.devices())
		p.sample("neuron_device_hbm_largest_free_bytes", {{"device", str(dev.index())}}, static_cast<double>(dev.hbm_largest_free_bytes()));
}

Labels core_labels(const api::CoreInfo &c) { return {{"device", str(c.device())}, {"core", str(c.core())}}; }

void cores(PromText &p, const api::CapacityReply &cap)
{
	p.family("neuron_core_busy_seconds_total", "counter", "Time the core ran tiles since neurond started; rate() is its utilisation");
	for (const auto &c : cap.cores())
		p.sample("neuron_core_busy_seconds_total", core_labels(c), seconds(c.busy_ns()));
	p.family("neuron_core_commands_total", "counter", "Commands the core completed since neurond started");
	for (const auto &c : cap.cores())
		p.sample("neuron_core_commands_total", core_labels(c), static_cast<double>(c.commands()));
	p.family("neuron_core_tiles_total", "counter", "Tiles the core ran since neurond started");
	for (const auto &c : cap.cores())
		p.sample("neuron_core_tiles_total", core_labels(c), static_cast<double>(c.tiles()));
	p.family("neuron_core_lease_info", "gauge", "The core's home pool, the pool holding it and its lease state (owned, lent, reclaiming); value 1");
	for (const auto &c : cap.cores()) {
		Labels l = core_labels(c);
		l.insert(l.end(), {{"home", pool_name(c.home())}, {"holder", pool_name(c.holder())}, {"state", c.lease_state()}});
		p.sample("neuron_core_lease_info", l, 1);
	}
	p.family("neuron_core_tile_seconds", "gauge", "Wall time of the core's tiles since neurond started, at the given quantile (the preemption granularity)");
	for (const auto &c : cap.cores()) {
		Labels l = core_labels(c);
		l.emplace_back("quantile", "0.99");
		p.sample("neuron_core_tile_seconds", l, seconds(c.tile_p99_ns()));
		l.back().second = "0.999";
		p.sample("neuron_core_tile_seconds", l, seconds(c.tile_p999_ns()));
		l.back().second = "1";
		p.sample("neuron_core_tile_seconds", l, seconds(c.max_tile_ns()));
	}
	p.family("neuron_core_last_reclaim_seconds", "gauge", "Latency of the core's latest reclaim (0: never reclaimed)");
	for (const auto &c : cap.cores())
		p.sample("neuron_core_last_reclaim_seconds", core_labels(c), seconds(c.last_reclaim_ns()));
}

void pools(PromText &p, const api::CapacityReply &cap)
{
	p.family("neuron_pool_cores", "gauge", "Cores of the pool summed over devices: home, held (home - lent + borrowed), lent, borrowed");
	for (const auto &pl : cap.pools()) {
		const std::string n = pool_name(pl.pool());
		p.sample("neuron_pool_cores", {{"pool", n}, {"state", "home"}}, pl.home_cores());
		p.sample("neuron_pool_cores", {{"pool", n}, {"state", "held"}}, pl.held_cores());
		p.sample("neuron_pool_cores", {{"pool", n}, {"state", "lent"}}, pl.lent_cores());
		p.sample("neuron_pool_cores", {{"pool", n}, {"state", "borrowed"}}, pl.borrowed_cores());
	}
	p.family("neuron_pool_limit_cores", "gauge", "The pool's guaranteed minimum and its maximum, per device (max 0: no limit)");
	for (const auto &pl : cap.pools()) {
		p.sample("neuron_pool_limit_cores", {{"pool", pool_name(pl.pool())}, {"limit", "min"}}, pl.min_cores());
		p.sample("neuron_pool_limit_cores", {{"pool", pool_name(pl.pool())}, {"limit", "max"}}, pl.max_cores());
	}
	p.family("neuron_pool_tenants", "gauge", "Tenants whose work runs in the pool");
	for (const auto &pl : cap.pools())
		p.sample("neuron_pool_tenants", {{"pool", pool_name(pl.pool())}}, pl.tenants());
	p.family("neuron_pool_queue_depth", "gauge", "Commands published by the pool's tenants and not completed");
	for (const auto &pl : cap.pools())
		p.sample("neuron_pool_queue_depth", {{"pool", pool_name(pl.pool())}}, static_cast<double>(pl.queue_depth()));
	p.family("neuron_pool_latency_p99_seconds", "gauge", "Worst command-latency p99 of the pool's tenants over the last seconds");
	for (const auto &pl : cap.pools())
		p.sample("neuron_pool_latency_p99_seconds", {{"pool", pool_name(pl.pool())}}, seconds(pl.latency_p99_ns()));
	std::map<std::string, int> states = {{"active", 0}, {"reclaiming", 0}};
	for (const auto &l : cap.loans())
		if (l.state() != "returned")
			++states[l.state()];
	p.family("neuron_loans_open", "gauge", "Loans of cores between the pools that are not returned, by state");
	for (const auto &[state, n] : states)
		p.sample("neuron_loans_open", {{"state", state}}, n);
}

void tenants(PromText &p, const api::ListTenantsReply &t)
{
	auto who = [](const api::TenantInfo &ti) {
		return Labels{{"tenant", str(ti.tenant_id())}, {"pid", str(ti.pid())}, {"kind", kind_name(ti.kind())}, {"name", ti.client_name()}};
	};
	p.family("neuron_tenant_busy_seconds_total", "counter", "Core time the tenant's tiles used since it connected");
	for (const auto &ti : t.tenants())
		p.sample("neuron_tenant_busy_seconds_total", who(ti), seconds(ti.busy_ns()));
	p.family("neuron_tenant_latency_seconds", "gauge", "The tenant's command latency (submit to completion) over the last seconds, at the given quantile");
	for (const auto &ti : t.tenants()) {
		Labels l = who(ti);
		l.emplace_back("quantile", "0.5");
		p.sample("neuron_tenant_latency_seconds", l, seconds(ti.latency_p50_ns()));
		l.back().second = "0.99";
		p.sample("neuron_tenant_latency_seconds", l, seconds(ti.latency_p99_ns()));
	}
	p.family("neuron_tenant_queue_depth", "gauge", "Commands the tenant published and that did not complete yet");
	for (const auto &ti : t.tenants())
		p.sample("neuron_tenant_queue_depth", who(ti), static_cast<double>(ti.queue_depth()));
	p.family("neuron_tenant_hbm_used_bytes", "gauge", "HBM the tenant allocated on the device, in bytes");
	for (const auto &ti : t.tenants())
		for (const auto &u : ti.usage()) {
			Labels l = who(ti);
			l.emplace_back("device", str(u.device()));
			p.sample("neuron_tenant_hbm_used_bytes", l, static_cast<double>(u.memory_bytes()));
		}
	p.family("neuron_tenant_commands_total", "counter", "Commands of the tenant completed on the device");
	for (const auto &ti : t.tenants())
		for (const auto &u : ti.usage()) {
			Labels l = who(ti);
			l.emplace_back("device", str(u.device()));
			p.sample("neuron_tenant_commands_total", l, static_cast<double>(u.commands_completed()));
		}
}

void events(PromText &p, const EventSnapshot &e)
{
	auto per_core = [&p](const std::string &name, const std::string &help, const auto &counts) {
		p.family(name, "counter", help);
		for (const auto &[where, n] : counts)
			p.sample(name, {{"device", str(where.first)}, {"core", std::to_string(where.second)}}, static_cast<double>(n));
	};
	per_core("neuron_faults_total", "Commands that faulted (sticky queue faults) since neuron-monitor started; core -1: a DMA queue", e.faults);
	per_core("neuron_core_resets_total", "Core resets (watchdog, driver) since neuron-monitor started", e.resets);
	p.family("neuron_loans_total", "counter", "Cores lent from one pool to the other since neuron-monitor started");
	p.sample("neuron_loans_total", {}, static_cast<double>(e.loans));
	p.family("neuron_reclaim_seconds", "histogram", "Time from a reclaim request until the lender had the core back, since neuron-monitor started");
	uint64_t cumulative = 0;
	for (size_t i = 0; i <= e.bounds.size(); ++i) {
		cumulative += e.bucket_counts[i];
		char le[32];
		if (i < e.bounds.size())
			std::snprintf(le, sizeof(le), "%g", e.bounds[i]);
		p.sample("neuron_reclaim_seconds_bucket", {{"le", i < e.bounds.size() ? le : "+Inf"}}, static_cast<double>(cumulative));
	}
	p.sample("neuron_reclaim_seconds_sum", {}, e.reclaim_seconds_sum);
	p.sample("neuron_reclaim_seconds_count", {}, static_cast<double>(e.reclaims));
	p.family("neuron_reclaims_late_total", "counter", "Reclaims that finished after their deadline since neuron-monitor started");
	p.sample("neuron_reclaims_late_total", {}, static_cast<double>(e.late_reclaims));
	p.family("neuron_monitor_events_lost_total", "counter", "Events neurond dropped because neuron-monitor read them too slowly (the counters above miss them)");
	p.sample("neuron_monitor_events_lost_total", {}, static_cast<double>(e.events_lost));
}

} // namespace

std::string Scraper::scrape()
{
	const auto start = std::chrono::steady_clock::now();
	PromText p;
	tools::CtlClient client;
	std::string error;
	api::Response d, cap;
	api::ListTenantsReply t;
	const bool up = client.connect(socket_, "neuron-monitor", &error) && [&] {
		api::Request r1, r2;
		r1.mutable_list_devices();
		r2.mutable_get_capacity();
		// ListTenants is paged by neurond: list_tenants asks for every page.
		return ask(client, r1, &d, &error) && ask(client, r2, &cap, &error) && client.list_tenants(&t, &error);
	}();
	p.family("neuron_up", "gauge", "1 when neurond answered this scrape, else 0 (the error is in neuron-monitor's log)");
	p.sample("neuron_up", {}, up ? 1 : 0);
	if (up) {
		devices(p, d.list_devices());
		cores(p, cap.capacity());
		// Utilisation since the previous scrape, for dashboards without rate().
		const double window = std::chrono::duration<double>(start - last_scrape_).count();
		p.family("neuron_core_utilization_ratio", "gauge", "Fraction of the time since the previous scrape the core ran tiles (0 on the first scrape)");
		std::map<uint32_t, std::pair<double, int>> per_device;
		for (const auto &c : cap.capacity().cores()) {
			const auto key = std::make_pair(c.device(), c.core());
			const auto it = last_busy_ns_.find(key);
			double u = 0;
			if (it != last_busy_ns_.end() && c.busy_ns() >= it->second && window > 0)
				u = std::min(1.0, seconds(c.busy_ns() - it->second) / window);
			last_busy_ns_[key] = c.busy_ns();
			p.sample("neuron_core_utilization_ratio", core_labels(c), u);
			per_device[c.device()].first += u;
			per_device[c.device()].second += 1;
		}
		p.family("neuron_device_utilization_ratio", "gauge", "Mean utilisation of the device's cores since the previous scrape");
		for (const auto &[dev, sum] : per_device)
			p.sample("neuron_device_utilization_ratio", {{"device", str(dev)}}, sum.first / sum.second);
		pools(p, cap.capacity());
		tenants(p, t);
	} else {
		std::fprintf(stderr, "neuron-monitor: neurond unreachable: %s\n", error.c_str());
	}
	last_scrape_ = start;
	events(p, events_.snapshot());
	p.family("neuron_monitor_scrape_seconds", "gauge", "How long neuron-monitor took to collect this scrape");
	p.sample("neuron_monitor_scrape_seconds", {}, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
	return p.text();
}

} // namespace neuron::monitor
