// Capacity settings changed at run time (SetPolicy, SetPool) across a restart
// (README "Restart with tenants alive"). They go into the journal beside what the
// flags and config file gave; a new neurond takes a run-time change back only where
// its own flags and config file still give what they gave when the change was
// made. A crash, kill -9 or package upgrade keeps the operator's SetPolicy; an
// operator who edits the config file and restarts neurond gets the config file.
#include "log.h"
#include "server.h"
#include "text.h"

#include <state.pb.h>

#include <google/protobuf/util/message_differencer.h>

namespace neuron::daemon {

namespace {

using google::protobuf::util::MessageDifferencer;

bool same_limits(const PoolLimits &a, const PoolLimits &b) { return a.min == b.min && a.max == b.max; }

std::string limits_text(uint32_t min, uint32_t max)
{
	return "min=" + std::to_string(min) + " max=" + std::to_string(max);
}

} // namespace

void Server::save_settings(state::Daemon *out) const
{
	const bool policy_changed = !MessageDifferencer::Equals(policy_.config(), started_policy_);
	bool pools_changed = false;
	for (int p = 0; p < sched::kPoolCount; ++p)
		pools_changed |= !same_limits(capacity_.limits(static_cast<Pool>(p)), started_pools_[p]);
	if (!policy_changed && !pools_changed)
		return;
	state::Settings *s = out->mutable_settings();
	started_policy_.SerializeToString(s->mutable_started_policy());
	policy_.config().SerializeToString(s->mutable_policy());
	for (int p = 0; p < sched::kPoolCount; ++p) {
		const PoolLimits &now = capacity_.limits(static_cast<Pool>(p));
		state::PoolLimits *l = s->add_pools();
		l->set_pool(to_api(static_cast<Pool>(p)));
		l->set_started_min(started_pools_[p].min);
		l->set_started_max(started_pools_[p].max);
		l->set_min(now.min);
		l->set_max(now.max);
	}
}

void Server::adopt_settings(const state::Daemon &d)
{
	if (!d.has_settings())
		return;
	const state::Settings &s = d.settings();
	api::PolicyConfig started, kept;
	if (!started.ParseFromString(s.started_policy()) || !kept.ParseFromString(s.policy())) {
		NLOG_ERROR("state.adopt_settings", "outcome=flags_and_config reason=\"the kept policy does not parse\"");
		return;
	}
	if (MessageDifferencer::Equals(kept, started_policy_)) {
		// Nothing to take back.
	} else if (!MessageDifferencer::Equals(started, started_policy_)) {
		NLOG_WARN("state.policy_dropped", "kept_mode=" + quoted(kept.mode()) +
							  " mode=" + quoted(started_policy_.mode()) +
							  " reason=\"the flags or config file changed the policy since SetPolicy\"");
	} else if (auto err = policy_.set(kept); !err.empty()) {
		NLOG_ERROR("state.policy_dropped", "error=" + quoted(err));
	} else {
		NLOG_INFO("state.adopt_policy", "mode=" + quoted(kept.mode()) +
							" windows=" + std::to_string(kept.windows_size()));
	}
	for (const state::PoolLimits &l : s.pools()) {
		const std::optional<Pool> pool = from_api(static_cast<api::PoolKind>(l.pool()));
		if (!pool)
			continue;
		const PoolLimits started_here = started_pools_[static_cast<int>(*pool)];
		const std::string name = sched::pool_name(*pool);
		if (same_limits(started_here, {l.min(), l.max()}))
			continue;
		if (!same_limits(started_here, {l.started_min(), l.started_max()})) {
			NLOG_WARN("state.pool_dropped", "pool=" + name + " kept=\"" + limits_text(l.min(), l.max()) +
								"\" reason=\"the flags or config file changed the pool's limits since SetPool\"");
			continue;
		}
		if (auto err = capacity_.set_limits(*pool, l.min(), l.max()); !err.empty())
			NLOG_ERROR("state.pool_dropped", "pool=" + name + " error=" + quoted(err));
		else
			NLOG_INFO("state.adopt_pool", "pool=" + name + " " + limits_text(l.min(), l.max()));
	}
}

} // namespace neuron::daemon
