#include "capacity.h"

#include "log.h"
#include "text.h"
#include "tenant.h"

#include <neuron/futex.h>

#include <algorithm>
#include <chrono>

namespace neuron::daemon {

namespace {

int64_t unix_ms()
{
	return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
		.count();
}

} // namespace

api::PoolKind to_api(Pool p) { return p == Pool::Inference ? api::POOL_INFERENCE : api::POOL_TRAINING; }

std::optional<Pool> from_api(api::PoolKind p)
{
	if (p == api::POOL_INFERENCE)
		return Pool::Inference;
	if (p == api::POOL_TRAINING)
		return Pool::Training;
	return std::nullopt;
}

Capacity::Capacity(backend::DeviceBackend &devices, Leases &leases, EventBus &events, const Config &config)
	: devices_(devices), leases_(leases), events_(events), default_deadline_ms_(config.reclaim_deadline_ms)
{
	limits_[0] = {config.inference_min, config.inference_max};
	limits_[1] = {config.training_min, config.training_max};
}

uint32_t Capacity::max_of(Pool p, uint32_t cores) const
{
	const uint32_t m = limits_[static_cast<int>(p)].max;
	return m == 0 ? cores : std::min(m, cores);
}

std::string Capacity::set_limits(Pool pool, uint32_t min, uint32_t max)
{
	if (max != 0 && min > max)
		return "min_cores " + std::to_string(min) + " is above max_cores " + std::to_string(max);
	limits_[static_cast<int>(pool)] = {min, max};
	api::Event ev = EventBus::make("pool.set", 0, -1,
				       std::string(sched::pool_name(pool)) + " min=" + std::to_string(min) +
					       " max=" + std::to_string(max));
	events_.publish(ev);
	return {};
}

bool Capacity::pool_in_use(Pool pool, uint32_t device) const
{
	for (const auto &l : devices_.cores(device).logical_cores())
		if (l->pool() == pool)
			return true;
	return false;
}

uint32_t Capacity::active_loans(Pool lender, uint32_t device, const std::string &reason) const
{
	uint32_t n = 0;
	for (const Loan &l : ledger_)
		if (l.lender == lender && l.device == device && l.state == "active" && (reason.empty() || l.reason == reason))
			++n;
	return n;
}

std::string Capacity::lend(Pool from, uint32_t count, std::optional<uint32_t> device, const std::string &reason,
			   std::vector<Loan> *out)
{
	if (device && *device >= devices_.device_count())
		return "device " + std::to_string(*device) + " does not exist (this host has " +
		       std::to_string(devices_.device_count()) + ")";
	const Pool to = other_pool(from);
	std::string why;
	for (uint32_t d = device.value_or(0); d < (device ? *device + 1 : devices_.device_count()); ++d) {
		const uint32_t cores = devices_.core_count(d);
		uint32_t made = 0;
		while (count == 0 || made < count) {
			const auto leases = leases_.of(d);
			const uint32_t held_from = leases_.held(d, from), held_to = leases_.held(d, to);
			if (held_from <= limits(from).min) {
				why = std::string(sched::pool_name(from)) + " holds " + std::to_string(held_from) +
				      " core(s) on device " + std::to_string(d) + ", its guaranteed minimum is " +
				      std::to_string(limits(from).min);
				break;
			}
			if (held_to >= max_of(to, cores)) {
				why = std::string(sched::pool_name(to)) + " already holds its maximum of " +
				      std::to_string(max_of(to, cores)) + " core(s) on device " + std::to_string(d);
				break;
			}
			// The highest-numbered core the lender owns outright.
			int pick = -1;
			for (int c = static_cast<int>(leases.size()) - 1; c >= 0 && pick < 0; --c)
				if (leases[c].home == from && leases[c].state == LeaseState::Owned)
					pick = c;
			if (pick < 0) {
				why = std::string(sched::pool_name(from)) + " owns no core on device " + std::to_string(d) +
				      " that is not already lent or being reclaimed";
				break;
			}
			if (auto err = leases_.lend(d, static_cast<uint32_t>(pick)); !err.empty()) {
				why = err;
				break;
			}
			Loan loan;
			loan.id = next_loan_++;
			loan.device = d;
			loan.core = static_cast<uint32_t>(pick);
			loan.lender = from;
			loan.borrower = to;
			loan.lent_unix_ms = unix_ms();
			loan.reason = reason;
			ledger_.push_back(loan);
			out->push_back(loan);
			++made;
			api::Event ev = EventBus::make("lease.lent", d, pick,
						       std::string(sched::pool_name(from)) + " lent core to " + sched::pool_name(to) +
							       " (" + reason + ")");
			ev.set_loan_id(loan.id);
			events_.publish(ev);
		}
	}
	if (out->empty())
		return "no core was lent: " + (why.empty() ? std::string("nothing to lend") : why);
	if (on_change)
		on_change();
	return {};
}

Loan *Capacity::find_open(uint32_t device, uint32_t core)
{
	for (auto it = ledger_.rbegin(); it != ledger_.rend(); ++it)
		if (it->device == device && it->core == core && !it->reclaimed_event_sent && it->state != "active")
			return &*it;
	return nullptr;
}

std::string Capacity::reclaim(Pool lender, uint32_t count, std::optional<uint32_t> device, uint32_t deadline_ms,
			      const std::string &reason, std::vector<Loan> *out)
{
	if (device && *device >= devices_.device_count())
		return "device " + std::to_string(*device) + " does not exist (this host has " +
		       std::to_string(devices_.device_count()) + ")";
	if (deadline_ms == 0)
		deadline_ms = default_deadline_ms_;
	const uint64_t start = detail::monotonic_ns();
	const uint64_t deadline = start + uint64_t(deadline_ms) * 1000000ull;
	std::vector<Loan *> taken;
	// Most recent loans first.
	for (auto it = ledger_.rbegin(); it != ledger_.rend(); ++it) {
		if (count != 0 && taken.size() >= count)
			break;
		if (it->lender != lender || it->state != "active" || (device && it->device != *device))
			continue;
		if (auto err = leases_.begin_reclaim(it->device, it->core, deadline); !err.empty()) {
			NLOG_WARN("lease.reclaim_refused", "device=" + std::to_string(it->device) + " core=" +
								   std::to_string(it->core) + " error=" + quoted(err));
			continue;
		}
		it->state = "reclaiming";
		it->deadline_ms = deadline_ms;
		if (it->reason != reason)
			it->reason += "; reclaimed: " + reason;
		taken.push_back(&*it);
		api::Event ev = EventBus::make("lease.reclaiming", it->device, static_cast<int32_t>(it->core),
					       std::string(sched::pool_name(lender)) + " reclaims core, deadline " +
						       std::to_string(deadline_ms) + " ms (" + reason + ")");
		ev.set_loan_id(it->id);
		events_.publish(ev);
	}
	if (taken.empty())
		return std::string("no core was reclaimed: ") + sched::pool_name(lender) + " has no active loan" +
		       (device ? " on device " + std::to_string(*device) : "");
	if (on_change)
		on_change();
	std::string err;
	for (Loan *l : taken) {
		if (leases_.wait_reclaimed(l->device, l->core, deadline)) {
			l->state = "returned";
			l->returned_unix_ms = unix_ms();
			l->reclaim_latency_ns = leases_.of(l->device)[l->core].last_reclaim_ns;
			l->late = l->reclaim_latency_ns > uint64_t(deadline_ms) * 1000000ull;
		} else {
			l->late = true;
			err = "reclaim of core " + std::to_string(l->core) + " on device " + std::to_string(l->device) +
			      " missed its " + std::to_string(deadline_ms) + " ms deadline (a command that cannot be tiled is running)";
		}
		out->push_back(*l);
	}
	while (ledger_.size() > kKeep && ledger_.front().state == "returned")
		ledger_.pop_front();
	return err;
}

void Capacity::on_reclaimed(const ReclaimDone &r)
{
	Loan *l = find_open(r.device, r.core);
	api::Event ev = EventBus::make("lease.reclaimed", r.device, static_cast<int32_t>(r.core),
				       std::string(sched::pool_name(r.lender)) + " has its core back from " +
					       sched::pool_name(r.borrower) + (r.late ? " (after the deadline)" : ""));
	ev.set_latency_ns(r.latency_ns);
	if (l) {
		if (l->state != "returned") {
			l->state = "returned";
			l->returned_unix_ms = unix_ms();
			l->reclaim_latency_ns = r.latency_ns;
		}
		l->late = l->late || r.late;
		l->reclaimed_event_sent = true;
		ev.set_loan_id(l->id);
	}
	events_.publish(ev);
}

void Capacity::return_orphaned_loans()
{
	for (uint32_t d = 0; d < devices_.device_count(); ++d)
		for (Pool borrower : {Pool::Inference, Pool::Training}) {
			const Pool lender = other_pool(borrower);
			if (active_loans(lender, d) == 0 || pool_in_use(borrower, d))
				continue;
			std::vector<Loan> done;
			reclaim(lender, 0, d, default_deadline_ms_, "borrower-gone", &done);
		}
}

void Capacity::save(state::Daemon *out) const
{
	out->set_next_loan_id(next_loan_);
	for (const Loan &l : ledger_) {
		if (l.state != "active")
			continue;
		auto *s = out->add_loans();
		s->set_id(l.id);
		s->set_device(l.device);
		s->set_core(l.core);
		s->set_lender(static_cast<uint32_t>(to_api(l.lender)));
		s->set_lent_unix_ms(l.lent_unix_ms);
		s->set_reason(l.reason);
	}
}

std::string Capacity::adopt(const state::Daemon &d)
{
	next_loan_ = std::max(next_loan_, d.next_loan_id());
	std::string problems;
	for (const auto &s : d.loans()) {
		const std::optional<Pool> lender = from_api(static_cast<api::PoolKind>(s.lender()));
		const std::string what = "loan " + std::to_string(s.id()) + " (device " + std::to_string(s.device()) +
					 " core " + std::to_string(s.core()) + "): ";
		if (!lender || s.device() >= devices_.device_count() || s.core() >= devices_.core_count(s.device())) {
			problems += what + "no such core or pool; ";
			continue;
		}
		const CoreLease lease = leases_.of(s.device())[s.core()];
		if (lease.home != *lender || lease.state != LeaseState::Owned) {
			problems += what + "the core is not its lender's to lend; ";
			continue;
		}
		if (auto err = leases_.lend(s.device(), s.core()); !err.empty()) {
			problems += what + err + "; ";
			continue;
		}
		Loan loan;
		loan.id = s.id();
		loan.device = s.device();
		loan.core = s.core();
		loan.lender = *lender;
		loan.borrower = other_pool(*lender);
		loan.lent_unix_ms = s.lent_unix_ms();
		loan.reason = s.reason();
		ledger_.push_back(loan);
		next_loan_ = std::max(next_loan_, s.id() + 1);
		NLOG_INFO("state.adopt_loan", "loan=" + std::to_string(loan.id) + " device=" + std::to_string(loan.device) +
						      " core=" + std::to_string(loan.core) + " lender=" +
						      sched::pool_name(loan.lender) + " borrower=" + sched::pool_name(loan.borrower));
	}
	return problems;
}

void Capacity::fill_loan(const Loan &l, api::LoanInfo *o)
{
	o->set_loan_id(l.id);
	o->set_device(l.device);
	o->set_core(l.core);
	o->set_lender(to_api(l.lender));
	o->set_borrower(to_api(l.borrower));
	o->set_state(l.state);
	o->set_lent_unix_ms(l.lent_unix_ms);
	o->set_returned_unix_ms(l.returned_unix_ms);
	o->set_reclaim_latency_ns(l.reclaim_latency_ns);
	o->set_deadline_ms(l.deadline_ms);
	o->set_late(l.late);
	o->set_reason(l.reason);
}

void Capacity::fill(api::CapacityReply *r, const std::vector<const Tenant *> &tenants) const
{
	api::PoolInfo pools[sched::kPoolCount];
	for (int p = 0; p < sched::kPoolCount; ++p) {
		const Pool pool = static_cast<Pool>(p);
		pools[p].set_pool(to_api(pool));
		pools[p].set_name(sched::pool_name(pool));
		pools[p].set_min_cores(limits_[p].min);
		pools[p].set_max_cores(limits_[p].max);
	}
	std::map<std::pair<uint32_t, uint32_t>, uint64_t> active_loan;
	for (const Loan &l : ledger_)
		if (l.state != "returned")
			active_loan[{l.device, l.core}] = l.id;
	for (uint32_t d = 0; d < devices_.device_count(); ++d) {
		const auto leases = leases_.of(d);
		for (uint32_t c = 0; c < leases.size(); ++c) {
			const CoreLease &l = leases[c];
			const sched::CoreCounters &k = devices_.core_counters(d, c);
			auto *ci = r->add_cores();
			ci->set_device(d);
			ci->set_core(c);
			ci->set_home(to_api(l.home));
			ci->set_holder(to_api(l.holder));
			ci->set_lease_state(lease_state_name(l.state));
			ci->set_busy_ns(sched::busy_now(k));
			ci->set_commands(k.commands.load(std::memory_order_relaxed));
			ci->set_tiles(k.tiles.load(std::memory_order_relaxed));
			ci->set_last_tenant(k.last_tenant.load(std::memory_order_relaxed));
			ci->set_max_tile_ns(k.max_tile_ns.load(std::memory_order_relaxed));
			ci->set_max_tile_cpu_ns(k.max_tile_cpu_ns.load(std::memory_order_relaxed));
			const auto tiles = k.tile_ns.snapshot();
			ci->set_tile_p99_ns(sched::LatencyHistogram::percentile(tiles, 0.99));
			ci->set_tile_p999_ns(sched::LatencyHistogram::percentile(tiles, 0.999));
			ci->set_tile_cpu_p999_ns(sched::LatencyHistogram::percentile(k.tile_cpu_ns.snapshot(), 0.999));
			ci->set_tiles_over_1ms_cpu(k.tiles_over_1ms_cpu.load(std::memory_order_relaxed));
			ci->set_last_reclaim_ns(l.last_reclaim_ns);
			if (auto it = active_loan.find({d, c}); it != active_loan.end())
				ci->set_loan_id(it->second);
			auto &home = pools[static_cast<int>(l.home)];
			auto &holder = pools[static_cast<int>(l.holder)];
			home.set_home_cores(home.home_cores() + 1);
			holder.set_held_cores(holder.held_cores() + 1);
			if (l.state == LeaseState::Lent) {
				home.set_lent_cores(home.lent_cores() + 1);
				holder.set_borrowed_cores(holder.borrowed_cores() + 1);
			}
		}
	}
	for (const Tenant *t : tenants) {
		auto &p = pools[static_cast<int>(t->pool())];
		p.set_tenants(p.tenants() + 1);
		for (uint32_t d = 0; d < devices_.device_count(); ++d)
			p.set_queue_depth(p.queue_depth() + t->queue_depth(d));
		uint64_t p50, p99;
		t->latency(&p50, &p99);
		p.set_latency_p99_ns(std::max<uint64_t>(p.latency_p99_ns(), p99));
	}
	for (auto &p : pools)
		*r->add_pools() = p;
	// Open loans first, then the latest returned ones.
	for (const Loan &l : ledger_)
		if (l.state != "returned")
			fill_loan(l, r->add_loans());
	int shown = 0;
	for (auto it = ledger_.rbegin(); it != ledger_.rend() && shown < 50; ++it)
		if (it->state == "returned") {
			fill_loan(*it, r->add_loans());
			++shown;
		}
}

} // namespace neuron::daemon
