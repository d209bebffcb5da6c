// Restart survival on the server's side (README "Restart with tenants alive"):
// the journal of the tenant table, adoption of the earlier neurond's tenants, and
// their re-attachment or, past the grace period, their release.
#include "fd_store.h"
#include "log.h"
#include "server.h"
#include "session.h"
#include "state_journal.h"
#include "tenant.h"
#include "text.h"

#include <csignal>
#include <cerrno>

namespace neuron::daemon {

void Server::keep_state(FdStore &store, StateJournal &journal)
{
	store_ = &store;
	journal_ = &journal;
	capacity_.on_change = [this] { save_state(); };
}

void Server::save_state()
{
	if (!journal_)
		return;
	state::Daemon d;
	d.set_layout(1);
	d.set_backend(devices_.name());
	d.set_devices(devices_.device_count());
	d.set_next_tenant_id(next_session_);
	d.set_next_queue_id(peek_queue_id());
	for (const auto &[id, s] : sessions_)
		if (s->tenant().greeted && !s->tenant().observer)
			s->tenant().save(d.add_tenants());
	for (const auto &[id, t] : orphans_)
		t->save(d.add_tenants());
	capacity_.save(&d);
	save_settings(&d);
	if (auto err = journal_->save(d); !err.empty())
		NLOG_ERROR("state.journal_failed", "error=" + quoted(err));
}

size_t Server::adopt_state()
{
	if (!journal_)
		return 0;
	std::string why;
	std::optional<state::Daemon> d = journal_->load(&why);
	if (!d) {
		if (!why.empty())
			NLOG_ERROR("state.unusable", "error=" + quoted(why) + " outcome=fresh_start");
		return 0;
	}
	if (d->backend() != devices_.name() || d->devices() != devices_.device_count()) {
		NLOG_ERROR("state.mismatch", "kept_backend=" + d->backend() + " kept_devices=" + std::to_string(d->devices()) +
						     " outcome=fresh_start reason=\"the devices changed since the state was kept\"");
		return 0;
	}
	next_session_ = std::max(next_session_, d->next_tenant_id());
	reserve_queue_ids(d->next_queue_id());
	std::vector<uint32_t> slots;
	for (const auto &ts : d->tenants()) {
		std::string problems;
		std::unique_ptr<Tenant> t = Tenant::adopt(ts, devices_, *store_, *journal_, &problems);
		t->limits = limits_.for_tenant(t->peer(), t->pool(), &t->limit_class);
		for (const auto &q : ts.queues())
			slots.push_back(q.progress_slot());
		NLOG_INFO("state.adopt", t->log_fields() + " name=" + quoted_escaped(t->client_name) +
						 " allocations=" + std::to_string(ts.allocations_size()) +
						 " host_buffers=" + std::to_string(ts.host_buffers_size()) +
						 " queues=" + std::to_string(ts.queues_size()) +
						 (problems.empty() ? "" : " problems=" + quoted(problems)));
		next_session_ = std::max(next_session_, t->id() + 1);
		orphans_.emplace(t->id(), std::move(t));
	}
	journal_->adopt_progress(slots);
	adopt_settings(*d);
	// The loans after the tenants: their queues hold the borrowers' logical cores
	// (a loan to a pool with none would go home at the next tenant exit).
	if (auto problems = capacity_.adopt(*d); !problems.empty())
		NLOG_ERROR("state.adopt_loans", "problems=" + quoted(problems) + " outcome=those_cores_stay_home");
	orphan_deadline_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(config_.reattach_grace_ms);
	if (!orphans_.empty())
		reap_orphans();
	save_state();
	return orphans_.size();
}

std::unique_ptr<Tenant> Server::claim_orphan(uint64_t id, const std::string &token, uid_t uid, std::string *why)
{
	auto it = orphans_.find(id);
	if (it == orphans_.end() || it->second->resume_token != token || token.empty() || it->second->peer().uid != uid) {
		*why = "neurond holds no state of tenant " + std::to_string(id) +
		       " for this connection to resume (it restarted without keeping state, the tenant was released "
		       "after --reattach-grace-ms, or the resume token or user differs)";
		return nullptr;
	}
	std::unique_ptr<Tenant> t = std::move(it->second);
	orphans_.erase(it);
	return t;
}

void Server::rekey(uint64_t old_id, uint64_t new_id)
{
	auto it = sessions_.find(old_id);
	if (it == sessions_.end())
		return;
	auto s = it->second;
	sessions_.erase(it);
	sessions_[new_id] = std::move(s);
}

void Server::release_orphan(std::map<uint64_t, std::unique_ptr<Tenant>>::iterator it, const std::string &reason)
{
	std::unique_ptr<Tenant> t = std::move(it->second);
	orphans_.erase(it);
	t->release_all();
	NLOG_INFO("tenant.disconnect", t->log_fields() + " reason=" + quoted(reason));
	api::Event ev = EventBus::make("tenant.exit", 0, -1, "pid " + std::to_string(t->peer().pid) + " (" + reason + ")");
	ev.set_tenant_id(t->id());
	events_.publish(ev);
	if (t->used_cores)
		tenant_gone();
}

// Every 200 ms while tenants wait to re-attach: those whose process is gone, and
// all of them once the grace period passed, are released.
void Server::reap_orphans()
{
	const bool late = std::chrono::steady_clock::now() >= orphan_deadline_;
	bool changed = false;
	for (auto it = orphans_.begin(); it != orphans_.end();) {
		const pid_t pid = it->second->peer().pid;
		const bool gone = pid > 0 && kill(pid, 0) != 0 && errno == ESRCH;
		if (!gone && !late) {
			++it;
			continue;
		}
		auto next = std::next(it);
		release_orphan(it, gone ? "exited while neurond restarted" : "did not re-attach after neurond restarted");
		changed = true;
		it = next;
	}
	if (changed)
		save_state();
	if (orphans_.empty() || stopped_)
		return;
	orphan_timer_.expires_after(std::chrono::milliseconds(200));
	orphan_timer_.async_wait([this](const boost::system::error_code &ec) {
		if (!ec && !stopped_)
			reap_orphans();
	});
}

} // namespace neuron::daemon
