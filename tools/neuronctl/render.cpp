#include "render.h"

#include <capacity_json.h>

#include <cstdarg>
#include <cstdio>
#include <ctime>
#include <string>

using namespace neuron;
using neuron::tools::pool_name;

namespace {

std::string fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char *f, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, f);
	std::vsnprintf(buf, sizeof(buf), f, ap);
	va_end(ap);
	return buf;
}

std::string us(uint64_t ns) { return ns == 0 ? "-" : fmt("%.1fus", double(ns) / 1000.0); }

std::string clock_of(int64_t unix_ms)
{
	if (unix_ms == 0)
		return "-";
	std::time_t t = unix_ms / 1000;
	std::tm tm{};
	localtime_r(&t, &tm);
	char buf[32];
	std::strftime(buf, sizeof(buf), "%H:%M:%S", &tm);
	return fmt("%s.%03d", buf, int(unix_ms % 1000));
}

} // namespace

void print_pools(std::ostream &out, const api::CapacityReply &cap)
{
	out << fmt("%-10s %5s %5s %6s %6s %6s %9s %8s %7s %10s\n", "POOL", "MIN", "MAX", "HOME", "HELD", "LENT",
		   "BORROWED", "TENANTS", "DEPTH", "P99");
	for (const auto &p : cap.pools())
		out << fmt("%-10s %5u %5s %6u %6u %6u %9u %8u %7llu %10s\n", p.name().c_str(), p.min_cores(),
			   p.max_cores() ? std::to_string(p.max_cores()).c_str() : "all", p.home_cores(), p.held_cores(),
			   p.lent_cores(), p.borrowed_cores(), p.tenants(), (unsigned long long)p.queue_depth(),
			   us(p.latency_p99_ns()).c_str());
	// Tile times: p99 (wall) and the longest in CPU time are the tiling's bound; the
	// longest in wall time adds whatever else the host ran meanwhile.
	out << "\n" << fmt("%-6s %-4s %-10s %-10s %-11s %12s %10s %8s %10s %12s %12s\n", "DEVICE", "CORE", "HOME",
			   "HOLDER", "LEASE", "LAST-TENANT", "TILES", "LOAN", "TILE-P99", "MAX-TILE-CPU", "MAX-TILE");
	for (const auto &c : cap.cores())
		out << fmt("%-6u %-4u %-10s %-10s %-11s %12llu %10llu %8s %10s %12s %12s\n", c.device(), c.core(),
			   pool_name(c.home()), pool_name(c.holder()), c.lease_state().c_str(),
			   (unsigned long long)c.last_tenant(), (unsigned long long)c.tiles(),
			   c.loan_id() ? std::to_string(c.loan_id()).c_str() : "-", us(c.tile_p99_ns()).c_str(),
			   us(c.max_tile_cpu_ns()).c_str(), us(c.max_tile_ns()).c_str());
	out << "\npolicy: " << cap.policy().mode() << "\n";
	print_limits(out, cap);
}

static std::string limit_value(const api::ResourceLimit &l)
{
	if (l.unlimited())
		return "unlimited";
	const bool size = l.resource() == "hbm_bytes" || l.resource() == "host_bytes";
	return size ? fmt("%.1fMi", double(l.limit()) / 1048576.0) : std::to_string(l.limit());
}

void print_limits(std::ostream &out, const api::CapacityReply &cap)
{
	out << "\nper-tenant limits (neurond --limit SCOPE.RESOURCE=VALUE):\n";
	out << fmt("%-16s %-13s %14s  %s\n", "CLASS", "RESOURCE", "LIMIT", "FROM");
	for (const auto &p : cap.pools())
		for (const auto &l : p.limits())
			out << fmt("%-16s %-13s %14s  %s\n", p.name().c_str(), l.resource().c_str(), limit_value(l).c_str(),
				   l.source().c_str());
	for (const auto &c : cap.limit_classes())
		for (const auto &l : c.limits())
			out << fmt("%-16s %-13s %14s  %s\n", c.name().c_str(), l.resource().c_str(), limit_value(l).c_str(),
				   l.source().c_str());
}

void print_loan_line(std::ostream &out, const api::LoanInfo &l, bool lent)
{
	if (lent)
		out << fmt("loan %llu: device %u core %u lent by %s to %s\n", (unsigned long long)l.loan_id(), l.device(),
			   l.core(), pool_name(l.lender()), pool_name(l.borrower()));
	else
		out << fmt("loan %llu: device %u core %u back to %s in %s (deadline %u ms%s)\n",
			   (unsigned long long)l.loan_id(), l.device(), l.core(), pool_name(l.lender()),
			   us(l.reclaim_latency_ns()).c_str(), l.deadline_ms(), l.late() ? ", LATE" : ", met");
}

void print_loans(std::ostream &out, const api::CapacityReply &cap)
{
	out << fmt("%-6s %-6s %-4s %-10s %-10s %-11s %-13s %-13s %12s %9s %s\n", "LOAN", "DEVICE", "CORE", "LENDER",
		   "BORROWER", "STATE", "LENT", "RETURNED", "RECLAIM", "DEADLINE", "REASON");
	for (const auto &l : cap.loans())
		out << fmt("%-6llu %-6u %-4u %-10s %-10s %-11s %-13s %-13s %12s %7ums %s%s\n",
			   (unsigned long long)l.loan_id(), l.device(), l.core(), pool_name(l.lender()),
			   pool_name(l.borrower()), l.state().c_str(), clock_of(l.lent_unix_ms()).c_str(),
			   clock_of(l.returned_unix_ms()).c_str(), us(l.reclaim_latency_ns()).c_str(), l.deadline_ms(),
			   l.reason().c_str(), l.late() ? " LATE" : "");
}

void print_policy(std::ostream &out, const api::PolicyConfig &p)
{
	out << "mode: " << p.mode() << "\n";
	for (const auto &w : p.windows())
		out << "window: " << w.start() << "-" << w.end() << " lend "
		    << (w.cores() ? std::to_string(w.cores()) : std::string("all lendable")) << " inference core(s)\n";
	const auto &a = p.auto_();
	out << fmt("auto: reclaim at depth >= %llu or p99 >= %s; lend at depth <= %llu and p99 <= %s for %u ms\n",
		   (unsigned long long)a.reclaim_depth(),
		   a.reclaim_p99_us() ? (std::to_string(a.reclaim_p99_us()) + "us").c_str() : "(off)",
		   (unsigned long long)a.lend_depth(),
		   a.lend_p99_us() ? (std::to_string(a.lend_p99_us()) + "us").c_str() : "(any)", a.hold_ms());
	out << "reclaim deadline: " << p.reclaim_deadline_ms() << " ms\n";
}

void print_tenants(std::ostream &out, const api::ListTenantsReply &t)
{
	out << fmt("%-6s %-10s %-8s %-16s %-6s %10s %10s %9s %9s %6s  %s\n", "ID", "KIND", "PID", "NAME", "CORES",
		   "MEMORY", "COMMANDS", "P50", "P99", "DEPTH", "COMMAND");
	for (const auto &x : t.tenants()) {
		uint64_t mem = 0, cmds = 0;
		std::string cores;
		for (const auto &u : x.usage()) {
			mem += u.memory_bytes();
			cmds += u.commands_completed();
			for (uint32_t c : u.cores())
				cores += (cores.empty() ? "" : ",") + std::to_string(u.device()) + ":" + std::to_string(c);
		}
		out << fmt("%-6llu %-10s %-8u %-16.16s %-6s %8.1fMi %10llu %9s %9s %6llu  %.40s\n",
			   (unsigned long long)x.tenant_id(), x.kind() == api::TENANT_KIND_INFERENCE ? "inference" : "training",
			   x.pid(), x.redacted() ? "(hidden)" : x.client_name().c_str(), cores.empty() ? "-" : cores.c_str(),
			   double(mem) / 1048576.0, (unsigned long long)cmds, us(x.latency_p50_ns()).c_str(),
			   us(x.latency_p99_ns()).c_str(), (unsigned long long)x.queue_depth(),
			   x.redacted() ? ("(another user's: uid " + std::to_string(x.uid()) + ")").c_str() : x.command().c_str());
	}
}

void print_event(std::ostream &out, const api::Event &e)
{
	out << fmt("%s #%llu %-17s device %u%s%s%s  %s\n", clock_of(e.unix_ms()).c_str(), (unsigned long long)e.seq(),
		   e.type().c_str(), e.device(), e.core() >= 0 ? (" core " + std::to_string(e.core())).c_str() : "",
		   e.tenant_id() ? (" tenant " + std::to_string(e.tenant_id())).c_str() : "",
		   e.latency_ns() ? (" latency " + us(e.latency_ns())).c_str() : "",
		   (e.message() + (e.client_name().empty() ? "" : " \"" + e.client_name() + "\"")).c_str())
	    << std::flush;
}
