// Pools and loans: the admin operations on core leases (lend, reclaim, pool limits)
// and the ledger of loans with their reclaim latencies. The leases themselves are
// leases.h's; the mechanism (who may run where, a switch at a tile boundary) is the
// scheduler's; this is the bookkeeping and the rules (a pool's guaranteed minimum
// and its maximum).
//
// Threads: control thread only. Engine threads report finished reclaims through
// Leases::on_reclaimed, which the server posts onto the control thread.
#pragma once

#include "config.h"
#include "events.h"
#include "leases.h"

#include <backend/device_backend.h>

#include <neuron.pb.h>
#include <state.pb.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace neuron::daemon {

class Tenant;

struct PoolLimits {
	uint32_t min = 0; // per device: the pool never lends below this many held cores
	uint32_t max = 0; // per device: never holds more (0: no limit)
};

struct Loan {
	uint64_t id = 0;
	uint32_t device = 0;
	uint32_t core = 0;
	Pool lender = Pool::Inference;
	Pool borrower = Pool::Training;
	std::string state = "active"; // active, reclaiming, returned
	int64_t lent_unix_ms = 0;
	int64_t returned_unix_ms = 0;
	uint64_t reclaim_latency_ns = 0;
	uint32_t deadline_ms = 0;
	bool late = false;
	bool reclaimed_event_sent = false;
	std::string reason;
};

api::PoolKind to_api(Pool p);
std::optional<Pool> from_api(api::PoolKind p);

class Capacity {
public:
	Capacity(backend::DeviceBackend &devices, Leases &leases, EventBus &events, const Config &config);

	// Lends up to `count` cores per device (0: as many as the limits allow) of pool
	// `from` to the other pool. Returns "" and the new loans, or why none was made.
	std::string lend(Pool from, uint32_t count, std::optional<uint32_t> device, const std::string &reason,
			 std::vector<Loan> *out);
	// Takes back up to `count` (0: all) of `lender`'s loans and waits (on this thread,
	// at most deadline_ms) until every one is done. "" or what went wrong.
	std::string reclaim(Pool lender, uint32_t count, std::optional<uint32_t> device, uint32_t deadline_ms,
			    const std::string &reason, std::vector<Loan> *out);
	// Loans of a pool that has no logical core left on a device go back home.
	void return_orphaned_loans();
	void on_reclaimed(const ReclaimDone &r);

	std::string set_limits(Pool pool, uint32_t min, uint32_t max);
	const PoolLimits &limits(Pool p) const { return limits_[static_cast<int>(p)]; }
	uint32_t default_deadline_ms() const { return default_deadline_ms_; }
	void set_default_deadline_ms(uint32_t ms) { default_deadline_ms_ = ms; }

	// Active loans of `lender` on `device` (with reason `reason` if non-empty).
	uint32_t active_loans(Pool lender, uint32_t device, const std::string &reason = {}) const;
	// Whether `pool` has any logical core (a tenant with a queue) on `device`.
	bool pool_in_use(Pool pool, uint32_t device) const;

	void fill(api::CapacityReply *r, const std::vector<const Tenant *> &tenants) const;

	// Restart survival (README "Restart with tenants alive"): the active loans go
	// into the journal (a reclaiming one is home after a restart: no engine of the
	// old neurond runs the borrower any more), and a new neurond lends them again
	// under their ids when it adopts the tenants. on_change: after every change of
	// the loans, before the reply or event that announces it (set by the server).
	std::function<void()> on_change;
	void save(state::Daemon *out) const;
	// "" or what could not be restored (a loan whose core is not its lender's to
	// lend any more: the devices or --inference-cores changed).
	std::string adopt(const state::Daemon &d);
	static void fill_loan(const Loan &l, api::LoanInfo *out);

private:
	uint32_t max_of(Pool p, uint32_t cores) const;
	Loan *find_open(uint32_t device, uint32_t core);

	backend::DeviceBackend &devices_;
	Leases &leases_;
	EventBus &events_;
	PoolLimits limits_[sched::kPoolCount];
	uint32_t default_deadline_ms_;
	uint64_t next_loan_ = 1;
	std::deque<Loan> ledger_; // oldest first; returned loans beyond kKeep are dropped
	static constexpr size_t kKeep = 200;
};

} // namespace neuron::daemon
