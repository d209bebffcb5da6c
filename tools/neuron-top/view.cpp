#include "view.h"

#include <capacity_json.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <ctime>

namespace neuron::top {

using tools::pool_name;

namespace {

std::string fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char *f, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, f);
	std::vsnprintf(buf, sizeof(buf), f, ap);
	va_end(ap);
	return buf;
}

std::string us(uint64_t ns) { return ns == 0 ? "-" : fmt("%.0fus", double(ns) / 1000.0); }
std::string mib(uint64_t b) { return fmt("%.1fMiB", double(b) / 1048576.0); }

std::string bar(double frac, int width)
{
	const int n = static_cast<int>(frac * width + 0.5);
	return std::string(size_t(n), '#') + std::string(size_t(width - n), '.');
}

// What the core's lease looks like from its holder's side.
std::string lease_word(const api::CoreInfo &c)
{
	if (c.lease_state() == "lent")
		return "borrowed";
	return c.lease_state();
}

std::vector<const api::TenantInfo *> sorted_tenants(const Model &m, SortKey k)
{
	std::vector<const api::TenantInfo *> v;
	for (const auto &t : m.cur.tenants.tenants())
		v.push_back(&t);
	std::stable_sort(v.begin(), v.end(), [&](auto *a, auto *b) {
		switch (k) {
		case SortKey::Ops: return m.ops_per_s(a->tenant_id()) > m.ops_per_s(b->tenant_id());
		case SortKey::Memory: return Model::memory(*a) > Model::memory(*b);
		case SortKey::P99: return a->latency_p99_ns() > b->latency_p99_ns();
		default: return a->tenant_id() < b->tenant_id();
		}
	});
	return v;
}

} // namespace

const char *sort_name(SortKey k)
{
	switch (k) {
	case SortKey::Ops: return "ops/s";
	case SortKey::Memory: return "memory";
	case SortKey::P99: return "p99";
	default: return "id";
	}
}

std::vector<std::string> render(const Model &m, const ViewState &v, const std::string &socket)
{
	std::vector<std::string> out;
	const auto tenants = sorted_tenants(m, SortKey::Id);
	const api::TenantInfo *focus = v.tab > 0 && v.tab <= int(tenants.size()) ? tenants[size_t(v.tab - 1)] : nullptr;
	out.push_back(fmt("neuron-top  %s  %d device(s)  policy %s%s", socket.c_str(), m.cur.devices.devices_size(),
			  m.cur.capacity.policy().mode().c_str(),
			  focus ? fmt("  [tenant %llu]", (unsigned long long)focus->tenant_id()).c_str() : ""));
	if (v.help) {
		out.push_back("");
		out.push_back("Keys:");
		out.push_back("  q        quit");
		out.push_back("  h or ?   this help (any key closes it)");
		out.push_back("  a / d    previous / next tab (all, then one per tenant)");
		out.push_back("  1-9      tab 1 (all) .. 9; tab k>1 is the (k-1)-th tenant by id");
		out.push_back("  s        sort the tenants table: id, ops/s, memory, p99");
		out.push_back("");
		out.push_back("Lease states: owned (home pool holds it), borrowed (lent to the other pool),");
		out.push_back("reclaiming (its lender is taking it back; done at the borrower's next tile).");
		return out;
	}
	// Pane 1: the core grid.
	out.push_back("");
	out.push_back("NeuronCore utilisation, owner and lease");
	for (const auto &d : m.cur.devices.devices()) {
		std::string line = fmt("ND%-2u", d.index());
		for (const auto &c : m.cur.capacity.cores()) {
			if (c.device() != d.index())
				continue;
			const double u = m.utilisation(c.device(), c.core());
			const bool mine = !focus || c.last_tenant() == focus->tenant_id();
			line += fmt(" | NC%u %s %3.0f%% %-9s %-9s t%-3llu", c.core(), bar(mine ? u : 0, 8).c_str(),
				    100.0 * (mine ? u : 0), pool_name(c.holder()), lease_word(c).c_str(),
				    (unsigned long long)c.last_tenant());
			if (line.size() > size_t(v.width) - 60) {
				out.push_back(line);
				line = "    ";
			}
		}
		if (line != "    ")
			out.push_back(line);
	}
	// Pane 2: memory.
	out.push_back("");
	out.push_back("Memory");
	for (const auto &d : m.cur.devices.devices())
		out.push_back(fmt("ND%-2u HBM %s / %s used  %s", d.index(), mib(d.hbm_used_bytes()).c_str(),
				  mib(d.hbm_bytes()).c_str(),
				  bar(d.hbm_bytes() ? double(d.hbm_used_bytes()) / double(d.hbm_bytes()) : 0, 20).c_str()));
	// Pane 3: tenants.
	out.push_back("");
	out.push_back(fmt("Tenants (sort: %s)", sort_name(v.sort)));
	out.push_back(fmt("%-5s %-9s %-7s %-18s %-10s %10s %9s %9s %9s %5s  %s", "ID", "KIND", "PID", "NAME", "CORES",
			  "MEMORY", "OPS/S", "P50", "P99", "DEPTH", "COMMAND"));
	for (const auto *t : sorted_tenants(m, v.sort)) {
		if (focus && t != focus)
			continue;
		std::string cores;
		for (const auto &u : t->usage())
			for (uint32_t c : u.cores())
				cores += (cores.empty() ? "" : ",") + std::to_string(u.device()) + ":" + std::to_string(c);
		out.push_back(fmt("%-5llu %-9s %-7u %-18.18s %-10.10s %10s %9.0f %9s %9s %5llu  %.40s",
				  (unsigned long long)t->tenant_id(),
				  t->kind() == api::TENANT_KIND_INFERENCE ? "inference" : "training", t->pid(),
				  t->redacted() ? "(hidden)" : t->client_name().c_str(), cores.empty() ? "-" : cores.c_str(),
				  mib(Model::memory(*t)).c_str(), m.ops_per_s(t->tenant_id()),
				  us(t->latency_p50_ns()).c_str(), us(t->latency_p99_ns()).c_str(),
				  (unsigned long long)t->queue_depth(),
				  t->redacted() ? ("(another user's: uid " + std::to_string(t->uid()) + ")").c_str()
						: t->command().c_str()));
	}
	if (tenants.empty())
		out.push_back("(no tenants)");
	// Pane 4: loans.
	out.push_back("");
	out.push_back("Loans");
	out.push_back(fmt("%-5s %-7s %-10s %-10s %-11s %10s %9s %s", "LOAN", "CORE", "LENDER", "BORROWER", "STATE",
			  "RECLAIM", "DEADLINE", "REASON"));
	int shown = 0;
	for (const auto &l : m.cur.capacity.loans()) {
		if (shown++ >= 8)
			break;
		out.push_back(fmt("%-5llu %u:%-5u %-10s %-10s %-11s %10s %7ums %s%s", (unsigned long long)l.loan_id(),
				  l.device(), l.core(), pool_name(l.lender()), pool_name(l.borrower()), l.state().c_str(),
				  us(l.reclaim_latency_ns()).c_str(), l.deadline_ms(), l.reason().c_str(),
				  l.late() ? " LATE" : ""));
	}
	if (m.cur.capacity.loans_size() == 0)
		out.push_back("(no loans)");
	// Tab bar and keys.
	out.push_back("");
	std::string tabs = v.tab == 0 ? "[1:all]" : " 1:all ";
	for (size_t i = 0; i < tenants.size(); ++i) {
		const std::string name = fmt("%zu:%s-%llu", i + 2, tenants[i]->kind() == api::TENANT_KIND_INFERENCE ? "inf" : "train",
					     (unsigned long long)tenants[i]->tenant_id());
		tabs += int(i + 1) == v.tab ? " [" + name + "]" : "  " + name + " ";
	}
	out.push_back(tabs);
	out.push_back("q quit  h help  a/d tabs  s sort");
	return out;
}

nlohmann::json snapshot_json(const Model &m)
{
	using nlohmann::json;
	json j = tools::to_json(m.cur.capacity);
	json devices = json::array();
	for (const auto &d : m.cur.devices.devices())
		devices.push_back({{"device", d.index()}, {"profile", d.profile()}, {"cores", d.core_count()},
				   {"hbm_bytes", d.hbm_bytes()}, {"hbm_used_bytes", d.hbm_used_bytes()}});
	j["devices"] = devices;
	for (auto &c : j["cores"])
		c["utilisation"] = m.utilisation(c["device"].get<uint32_t>(), c["core"].get<uint32_t>());
	json tenants = json::array();
	for (const auto &t : m.cur.tenants.tenants()) {
		json x = tools::to_json(t);
		x["ops_per_s"] = m.ops_per_s(t.tenant_id());
		tenants.push_back(x);
	}
	j["tenants"] = tenants;
	j["interval_ms"] = m.have_prev ? double(m.cur.at_ns - m.prev.at_ns) / 1e6 : 0.0;
	return j;
}

} // namespace neuron::top
