// Weighted fair share within a class, set from libneuron (neuron_set_weight): two
// training tenants saturating the one training core with equal commands get core
// time in the ratio of their weights. The reference is the weights themselves; the
// tolerance is wide (a loaded 2-CPU CI box), yet 1:1 (weights ignored) fails it.
#include "sharing_test.h"

#include <cstdio>

using namespace neuron;
using namespace sh;

static void down() { stop_daemon(); }

static uint64_t busy_of(const api::ListTenantsReply &list, uint64_t id, uint32_t *weight)
{
	for (const auto &t : list.tenants())
		if (t.tenant_id() == id) {
			*weight = t.weight();
			return t.busy_ns();
		}
	cr_assert_fail("tenant %llu not listed", (unsigned long long)id);
	return 0;
}

Test(weight, three_to_one_weights_give_three_to_one_core_time, .fini = down, .timeout = 300)
{
	start_daemon({"--cores", "2", "--inference-cores", "1"});
	Tenant heavy, light;
	heavy.open("heavy", NEURON_TENANT_TRAINING, 1);
	light.open("light", NEURON_TENANT_TRAINING, 1);
	// After the queues exist: the weight must reach logical cores already attached.
	cr_assert(neuron_set_weight(heavy.client, 3) == NEURON_OK, "set_weight 3: %s", neuron_last_error());
	Saturator lh, ll;
	lh.start(heavy, 384);
	ll.start(light, 384);
	sleep_ms(300); // both queues deep before the window opens
	wait_for_tiles(16);
	api::ListTenantsReply before = tenants();
	uint32_t wh = 0, wl = 0;
	const uint64_t h0 = busy_of(before, neuron_tenant_id(heavy.client), &wh);
	const uint64_t l0 = busy_of(before, neuron_tenant_id(light.client), &wl);
	// Many turns of each: 2 s on a host, 60 tiles where tiles are slow.
	sleep_ms(static_cast<int>(scaled_ms(2000, 60)));
	api::ListTenantsReply after = tenants();
	const uint64_t h1 = busy_of(after, neuron_tenant_id(heavy.client), &wh);
	const uint64_t l1 = busy_of(after, neuron_tenant_id(light.client), &wl);
	lh.stop();
	ll.stop();
	cr_assert_eq(wh, 3u, "ListTenants shows the weight set");
	cr_assert_eq(wl, 1u, "the default weight is 1");
	const double ratio = double(h1 - h0) / double(std::max<uint64_t>(l1 - l0, 1));
	std::printf("weights 3:1 on one core: busy %.0f ms vs %.0f ms (ratio %.2f)\n", (h1 - h0) / 1e6,
		    (l1 - l0) / 1e6, ratio);
	cr_assert(ratio > 2.2 && ratio < 4.0, "weights 3:1 gave core time %.2f:1", ratio);
	heavy.close();
	light.close();
}

Test(weight, out_of_range_weights_are_refused, .fini = down, .timeout = 60)
{
	start_daemon({"--cores", "2", "--inference-cores", "1"});
	Tenant t;
	t.open("weights", NEURON_TENANT_TRAINING, 1);
	cr_assert(neuron_set_weight(t.client, 0) == NEURON_ERR_INVALID, "weight 0 refused");
	cr_assert(std::string(neuron_last_error()).find("1..1000") != std::string::npos, "message: %s",
		  neuron_last_error());
	cr_assert(neuron_set_weight(t.client, 1001) == NEURON_ERR_INVALID, "weight 1001 refused");
	cr_assert(neuron_set_weight(t.client, 1000) == NEURON_OK, "weight 1000 accepted: %s", neuron_last_error());
	cr_assert(neuron_set_weight(nullptr, 2) == NEURON_ERR_INVALID, "NULL client refused");
	// The client is still usable after a refusal.
	uint32_t w = 0;
	busy_of(tenants(), neuron_tenant_id(t.client), &w);
	cr_assert_eq(w, 1000u);
	t.close();
}
