// Helpers of the capacity-sharing suites (tests/sharing): a neurond per test with
// pool settings, admin calls over the raw protocol, tenants of either kind, and
// load generators. Helpers assert (cr_assert) and name what they were doing.
#pragma once

#include "neurond_process.h"
#include "raw_client.h"
#include "test_time.h"

#include <criterion/criterion.h>
#include <neuron/neuron.h>
#include <neuron.pb.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace sh {

// Small devices, one host thread per command (the box has 2 CPUs shared by all).
std::vector<std::string> settings(std::vector<std::string> extra);
// Starts a daemon (asserts); stop_daemon() checks it exits cleanly.
void start_daemon(std::vector<std::string> extra);
void stop_daemon();
const std::string &socket();
std::string daemon_log();

uint64_t now_ns();
void sleep_ms(int ms);

// One admin request (the test runs as root); returns the response.
neuron::api::Response admin_call(neuron::api::Request &req);
neuron::api::CapacityReply capacity();
neuron::api::Response lend(neuron::api::PoolKind from, uint32_t count);
neuron::api::Response reclaim(neuron::api::PoolKind lender, uint32_t deadline_ms, uint32_t count = 0);
neuron::api::ListTenantsReply tenants();
const neuron::api::CoreInfo &core_info(const neuron::api::CapacityReply &cap, uint32_t device, uint32_t core);
const neuron::api::PoolInfo &pool_info(const neuron::api::CapacityReply &cap, neuron::api::PoolKind p);

struct Tenant {
	neuron_client *client = nullptr;
	neuron_queue *dma = nullptr;
	std::vector<neuron_queue *> cores; // one queue per logical core
	void open(const char *name, int kind, uint32_t logical_cores, uint32_t weight_unused = 1);
	void close();
	uint64_t alloc(uint64_t bytes);
};

neuron_cmd matmul_cmd(uint64_t out, uint64_t a, uint64_t b, int64_t n);
neuron_cmd fill_cmd(uint64_t out, int64_t count, double value);
neuron_cmd add_scalar_cmd(uint64_t inout, int64_t count, double value);
void upload(neuron_queue *dma, uint64_t dst, const void *src, uint64_t bytes);
void download(neuron_queue *dma, void *dst, uint64_t src, uint64_t bytes);

// Keeps every queue of a tenant busy with n x n matmuls (each many tiles) until
// stopped: a saturating training load.
class Saturator {
public:
	void start(Tenant &t, int64_t n, int depth = 4);
	void stop();
	uint64_t completed() const { return completed_.load(); }

private:
	std::atomic<bool> stop_{false};
	std::atomic<uint64_t> completed_{0};
	std::vector<std::thread> threads_;
};

double percentile(std::vector<double> v, double q);

// How long a tile takes on this machine now: the largest p99 of tile wall time over
// the cores (from GetCapacity), in ms; 0 before any tiled command ran. Where tiles
// are slow (the kmd backend in a TCG guest, tens of ms each), the suites' timing
// goals are stated in tiles: the bound the tiling promises is "a few tiles".
double tile_p99_ms();
// The larger of host_ms and `tiles` tile times (tile_p99_ms): a deadline or window
// that holds on a host and scales to slow tiles.
uint32_t scaled_ms(uint32_t host_ms, double tiles);
// Waits (up to 60 s) until the daemon has run `count` tiles in all, so tile_p99_ms
// means something.
void wait_for_tiles(uint64_t count);

} // namespace sh
