// Restart with tenants alive, the capacity settings (issue 12; daemon/README.md):
// a policy set with SetPolicy and pool limits set with SetPool outlive kill -9s of
// neurond under --supervise, unless the flags or config file changed the same
// setting in between (then the config file wins: an operator who edits it and
// restarts neurond means it).
#include "daemon_test.h"
#include "restart_admin.h"
#include "restart_test.h"

#include <google/protobuf/util/message_differencer.h>

#include <cstdlib>
#include <fstream>

using namespace dt;
using neuron::api::POOL_INFERENCE;
using neuron::api::POOL_TRAINING;

namespace {

// An auto policy that never acts in a test's time (an hour of low load before a
// loan) and differs from neurond's defaults in every field.
neuron::api::PolicyConfig patient_auto_policy()
{
	neuron::api::PolicyConfig p;
	p.set_mode("auto");
	p.set_reclaim_deadline_ms(4321);
	auto *a = p.mutable_auto_();
	a->set_reclaim_depth(9);
	a->set_lend_depth(2);
	a->set_reclaim_p99_us(7000);
	a->set_lend_p99_us(3000);
	a->set_hold_ms(3600000);
	return p;
}

void set_policy(const neuron::api::PolicyConfig &p)
{
	neuron::api::Request req;
	*req.mutable_set_policy()->mutable_policy() = p;
	const neuron::api::Response r = admin(req);
	cr_assert(r.has_ok(), "SetPolicy: %s", r.has_error() ? r.error().message().c_str() : "no reply");
}

void set_pool(neuron::api::PoolKind pool, uint32_t min, uint32_t max)
{
	neuron::api::Request req;
	req.mutable_set_pool()->set_pool(pool);
	req.mutable_set_pool()->set_min_cores(min);
	req.mutable_set_pool()->set_max_cores(max);
	const neuron::api::Response r = admin(req);
	cr_assert(r.has_ok(), "SetPool: %s", r.has_error() ? r.error().message().c_str() : "no reply");
}

void expect_policy(const neuron::api::CapacityReply &cap, const neuron::api::PolicyConfig &want, const char *when)
{
	cr_assert(google::protobuf::util::MessageDifferencer::Equals(cap.policy(), want),
		  "policy %s:\n%s\nwanted:\n%s", when, cap.policy().DebugString().c_str(), want.DebugString().c_str());
}

void expect_pool(const neuron::api::CapacityReply &cap, neuron::api::PoolKind pool, uint32_t min, uint32_t max,
		 const char *when)
{
	for (const auto &p : cap.pools())
		if (p.pool() == pool) {
			cr_assert(p.min_cores() == min && p.max_cores() == max, "pool %s %s: min %u max %u, wanted %u %u",
				  p.name().c_str(), when, p.min_cores(), p.max_cores(), min, max);
			return;
		}
	cr_assert_fail("pool %d is not listed %s", int(pool));
}

std::string g_config_path;

void write_config(int hold_ms)
{
	std::ofstream f(g_config_path, std::ios::trunc);
	f << "# neurond config of the restart-settings suite\nauto-hold-ms = " << hold_ms << "\n";
	cr_assert(f.good(), "cannot write %s", g_config_path.c_str());
}

void supervised_with_config_file()
{
	char path[] = "/tmp/neurond-settings-XXXXXX";
	const int fd = mkstemp(path);
	cr_assert(fd >= 0);
	close(fd);
	g_config_path = path;
	write_config(500000);
	daemon_up_with({"--supervise", "--config", g_config_path});
}

void down_and_remove_config()
{
	daemon_down();
	unlink(g_config_path.c_str());
}

} // namespace

TestSuite(restart_settings, .init = supervised_with_config_file, .fini = down_and_remove_config, .timeout = 240);

// SetPolicy and SetPool before two kill -9s: after each restart GetCapacity
// reports them as set (before the change both went back to the flags' values).
DAEMON_TEST(restart_settings, policy_and_pool_limits_survive_kill9)
{
	const neuron::api::PolicyConfig policy = patient_auto_policy();
	set_policy(policy);
	set_pool(POOL_TRAINING, 0, 1);
	set_pool(POOL_INFERENCE, 1, 0);
	for (int round = 0; round < 2; ++round) {
		kill_neurond();
		const neuron::api::CapacityReply cap = capacity();
		expect_policy(cap, policy, "after the restart");
		expect_pool(cap, POOL_TRAINING, 0, 1, "after the restart");
		expect_pool(cap, POOL_INFERENCE, 1, 0, "after the restart");
	}
	cr_assert_eq(count_in_log("state.adopt_policy"), 2u, "%s", g_daemon->log_tail().c_str());
	cr_assert_eq(count_in_log("state.adopt_pool"), 4u, "%s", g_daemon->log_tail().c_str());
}

// The config file changes the policy between SetPolicy and the restart: the new
// neurond runs the config file's policy and says why it dropped the kept one;
// the pool limits, which the config file left alone, are kept.
DAEMON_TEST(restart_settings, config_file_changed_since_wins)
{
	const neuron::api::CapacityReply started = capacity();
	cr_assert_eq(started.policy().auto_().hold_ms(), 500000u, "the config file was not read");
	set_policy(patient_auto_policy());
	set_pool(POOL_TRAINING, 0, 1);
	write_config(400000);
	kill_neurond();
	const neuron::api::CapacityReply cap = capacity();
	neuron::api::PolicyConfig from_file = started.policy();
	from_file.mutable_auto_()->set_hold_ms(400000);
	expect_policy(cap, from_file, "after the config file changed");
	expect_pool(cap, POOL_TRAINING, 0, 1, "after the config file changed");
	cr_assert_eq(count_in_log("state.policy_dropped"), 1u, "%s", g_daemon->log_tail().c_str());
	cr_assert_eq(count_in_log("state.adopt_policy"), 0u, "%s", g_daemon->log_tail().c_str());
}

// Settings set back to the flags' values leave nothing to keep: a restart after
// them runs what the flags say and adopts nothing.
DAEMON_TEST(restart_settings, settings_set_back_are_not_kept)
{
	const neuron::api::CapacityReply started = capacity();
	set_policy(patient_auto_policy());
	set_policy(started.policy());
	kill_neurond();
	expect_policy(capacity(), started.policy(), "after the restart");
	cr_assert_eq(count_in_log("state.adopt_policy"), 0u, "%s", g_daemon->log_tail().c_str());
	cr_assert_eq(count_in_log("state.policy_dropped"), 0u, "%s", g_daemon->log_tail().c_str());
}
