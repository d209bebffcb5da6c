// Shared pieces of the neurond + libneuron integration suites: a daemon per test
// (Criterion .init/.fini), connections, device buffers, command builders and result
// checks. Every helper asserts (cr_assert) on failure, naming what it was doing.
#pragma once

#include "neurond_process.h"
#include "test_time.h"

#include <criterion/criterion.h>
#include <neuron/neuron.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace dt {

// Generous: the machine is a loaded 2-core box (scaled in a TCG guest: test_time.h).
inline const int64_t kWaitNs = neuron::test::wait_ns(30'000'000'000);

// The daemon of the running test (started by daemon_up).
extern neuron::test::NeurondProcess *g_daemon;

// Criterion fixtures. daemon_up starts a fresh neurond with the small default
// settings. daemon_down only cleans up (Criterion ignores failures in .fini):
// the check that the daemon survived the test and exits 0 on SIGTERM is
// daemon_finish(), which DAEMON_TEST runs at the end of every test body.
void daemon_up();
// daemon_up with these flags after the default settings.
void daemon_up_with(const std::vector<std::string> &extra_flags);
void daemon_down();
// Runs g_before_stop (closes a suite's shared tenants), then asserts the daemon is
// still running unless the test ended it on purpose, stops it with SIGTERM and
// asserts exit code 0 within 5 s.
void daemon_finish();
extern void (*g_before_stop)();
// Another daemon object for the test (e.g. on the same socket), owned by the
// fixture so that it is cleaned up even when an assertion ends the test early.
neuron::test::NeurondProcess *extra_daemon(const std::string &socket_path);

// Monotonic clock in nanoseconds.
uint64_t now_ns();
void sleep_ms(int ms);

neuron_client *connect(const char *name, const std::string &socket = {});

// A tenant with one DMA queue and one core queue (device 0, given core).
struct Tenant {
	neuron_client *client = nullptr;
	neuron_queue *dma = nullptr;
	neuron_queue *core = nullptr;
	void open(const char *name, uint32_t device = 0, uint32_t core_index = 0);
	void close();
};

uint64_t dev_alloc(neuron_client *c, uint64_t bytes, uint32_t device = 0);
void h2d(neuron_queue *dma, uint64_t dst, const void *src, uint64_t bytes);
void d2h(neuron_queue *dma, void *dst, uint64_t src, uint64_t bytes);
std::vector<float> download_f32(neuron_queue *dma, uint64_t src, size_t count);
void upload_f32(neuron_queue *dma, uint64_t dst, const std::vector<float> &v);

neuron_tensor_desc desc(uint64_t addr, int dtype, std::initializer_list<int64_t> sizes);
neuron_tensor_desc desc_strided(uint64_t addr, int dtype, std::initializer_list<int64_t> sizes,
				std::initializer_list<int64_t> strides);

neuron_cmd make_cmd(int opcode, std::initializer_list<neuron_tensor_desc> operands);
// out = a @ b (f[0] = 1, f[1] = 0).
neuron_cmd make_matmul(const neuron_tensor_desc &out, const neuron_tensor_desc &a, const neuron_tensor_desc &b);
neuron_cmd make_fill_f32(const neuron_tensor_desc &out, double value);

// Submits and returns the sequence number (asserts NEURON_OK).
uint64_t submit(neuron_queue *q, const neuron_cmd &cmd);
// Submits, waits, asserts success (reports the queue's fault reason otherwise).
void run(neuron_queue *q, const neuron_cmd &cmd);
void sync(neuron_queue *q);

neuron_fault fault_of(const neuron_queue *q);
uint64_t hbm_used(neuron_client *c, uint32_t device = 0);
// Polls neuron_device_info until hbm_used_bytes == expected or timeout_ms passed;
// returns the last value seen.
uint64_t wait_hbm_used(neuron_client *c, uint32_t device, uint64_t expected, int timeout_ms);
std::string describe(neuron_status s); // "NEURON_ERR_FAULT: <last error>"

// Deterministic values in [lo, hi).
std::vector<float> random_f32(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f);
std::vector<uint8_t> random_bytes(size_t n, uint32_t seed);

// Asserts |got - ref| <= atol + rtol * |ref| element-wise; names the first mismatch.
void expect_close(const std::vector<float> &got, const std::vector<double> &ref, double rtol, double atol,
		  const char *what);

// A fork()ed child that reports through a pipe; the child must end in _exit.
struct Child {
	pid_t pid = -1;
	int read_fd = -1;  // parent side
	int write_fd = -1; // child side
};
Child fork_child();
// Child side: writes the whole object and _exits(0).
void child_report_and_exit(const Child &child, const void *data, size_t bytes);
// Parent side: reads exactly `bytes` (false on EOF/timeout).
bool read_report(const Child &child, void *data, size_t bytes, int timeout_ms);
// Parent side: waits for the child; returns its wait status, or -1 after timeout_ms
// (then it is killed).
int reap_child(Child &child, int timeout_ms);

} // namespace dt

// Shorthand for asserting a libneuron call succeeded.
#define NEURON_OK_OR_FAIL(call)                                                                           \
	do {                                                                                              \
		const neuron_status st_ = (call);                                                         \
		cr_assert(st_ == NEURON_OK, "%s failed: %s", #call, dt::describe(st_).c_str());          \
	} while (0)

// A Criterion test whose body is followed by dt::daemon_finish().
#define DAEMON_TEST(suite, name)                                                                          \
	static void suite##_##name##_body(void);                                                          \
	Test(suite, name)                                                                                 \
	{                                                                                                 \
		suite##_##name##_body();                                                                  \
		dt::daemon_finish();                                                                      \
	}                                                                                                 \
	static void suite##_##name##_body(void)
