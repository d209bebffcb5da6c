// A tenant whose every result is checked against the CPU: the fault-injection
// tests (tests/daemon/test_faults.cpp) and the soak benchmark (tests/bench/
// bench_soak.cpp) run it to tell a tenant that was hit from one whose results
// stayed exact. One round: upload fresh random A (m x k) and B (k x n) through the
// DMA queue, out = relu(A @ B) on the core queue (a matmul then a relu), download
// out and compare every element with the same computed on the CPU in double.
//
// No Criterion here (it runs in threads and in a benchmark): every failure is
// recorded in the result, never asserted. Threads: one object per thread.
#pragma once

#include <neuron/neuron.h>

#include <cstdint>
#include <string>
#include <vector>

namespace neuron::test {

struct CheckedWorkSpec {
	uint32_t device = 0;
	uint32_t core = 0;  // the logical core index of the core queue
	int kind = NEURON_TENANT_TRAINING;
	int m = 32, k = 64, n = 32;
	uint32_t seed = 1;
};

struct CheckedWorkResult {
	uint64_t rounds = 0;    // rounds whose results were compared
	uint64_t elements = 0;  // elements compared
	uint64_t wrong = 0;     // elements that differed from the CPU beyond rounding
	std::string first_wrong; // what the first wrong element was
	bool faulted = false;   // a queue of the tenant faulted
	neuron_fault fault{};   // ... with this fault
	std::string fault_queue; // "dma" or "core"
	std::string error;      // any other failure (connect, alloc, a timeout), or ""
	std::vector<uint64_t> round_ns; // wall time of each round (latency of a request)
};

class CheckedTenant {
public:
	CheckedTenant() = default;
	~CheckedTenant() { close(); }
	CheckedTenant(const CheckedTenant &) = delete;
	CheckedTenant &operator=(const CheckedTenant &) = delete;

	// Connects to `socket` as `name`, creates a DMA and a core queue, allocates.
	// False (reason in r->error) on failure.
	bool open(const std::string &socket, const std::string &name, const CheckedWorkSpec &spec, CheckedWorkResult *r);
	// One round (see above). False once the tenant is faulted or failed (recorded
	// in r); a wrong result is counted and the round still returns true.
	bool round(CheckedWorkResult *r, int64_t timeout_ns);
	void close();

	neuron_client *client() const { return client_; }
	neuron_queue *core_queue() const { return core_; }

private:
	bool failed(neuron_status s, neuron_queue *q, const char *what, CheckedWorkResult *r);
	void compare(CheckedWorkResult *r);

	CheckedWorkSpec spec_;
	neuron_client *client_ = nullptr;
	neuron_queue *dma_ = nullptr;
	neuron_queue *core_ = nullptr;
	uint64_t a_ = 0, b_ = 0, out_ = 0;
	uint32_t rng_ = 1;
	std::vector<float> ha_, hb_, hout_;
};

// Runs `rounds` rounds (or until the tenant is hit); for threads.
CheckedWorkResult run_checked_tenant(const std::string &socket, const std::string &name, const CheckedWorkSpec &spec,
				     int rounds, int64_t timeout_ns);

} // namespace neuron::test
