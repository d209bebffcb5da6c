// A tenant killed with SIGKILL mid-stream: its memory goes back within 100 ms
// (DESIGN.md section 3, "reclaim on exit ... at once"), another tenant's stream runs
// on with correct results, and the dead tenant disappears from neuron_list_tenants.
#include "daemon_test.h"

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <signal.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace dt;

TestSuite(kill9, .init = daemon_up, .fini = daemon_down, .timeout = 100);

namespace {

constexpr uint64_t kChildBytes = 64ull << 20;
constexpr uint64_t kReclaimBoundNs = 100'000'000; // the spec's bound

// The bound applies at host speed. The QEMU suite (tests/driver/daemon-suite.sh)
// runs this under TCG, where the CPU is 10-50x slower and a command already
// running when the tenant dies takes that much longer to end; it sets
// NEURON_TEST_RECLAIM_BOUND_MS to scale the bound, and says so in its output.
uint64_t reclaim_bound_ns()
{
	const char *v = getenv("NEURON_TEST_RECLAIM_BOUND_MS");
	return v && *v ? strtoull(v, nullptr, 10) * 1'000'000ull : kReclaimBoundNs;
}

struct Ready {
	int ok;
	char error[200];
	uint64_t tenant_id;
};

void write_all(int fd, const void *data, size_t n)
{
	const char *p = static_cast<const char *>(data);
	while (n) {
		const ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			_exit(3);
		p += w;
		n -= static_cast<size_t>(w);
	}
}

// Child: a tenant with 64 MiB of touched device memory that streams work until it is
// killed. Reports readiness once, then never returns.
[[noreturn]] void doomed_tenant(const Child &me, const std::string &socket, bool dma_stream)
{
	Ready r;
	std::memset(&r, 0, sizeof(r));
	auto fail = [&](const char *what, neuron_status s) {
		std::snprintf(r.error, sizeof(r.error), "%s: %s: %s", what, neuron_status_name(s), neuron_last_error());
		write_all(me.write_fd, &r, sizeof(r));
		_exit(2);
	};
	struct neuron_connect_options o = {};
	o.socket_path = socket.c_str();
	o.client_name = "doomed";
	neuron_client *c = nullptr;
	neuron_status s;
	if ((s = neuron_connect(&o, &c)) != NEURON_OK)
		fail("connect", s);
	neuron_queue *core = nullptr, *dma = nullptr;
	if ((s = neuron_queue_create(c, 0, NEURON_QUEUE_CORE, 0, 0, &core)) != NEURON_OK)
		fail("core queue", s);
	if ((s = neuron_queue_create(c, 0, NEURON_QUEUE_DMA, 0, 0, &dma)) != NEURON_OK)
		fail("dma queue", s);
	uint64_t big = 0;
	if ((s = neuron_alloc(c, 0, kChildBytes, 0, &big)) != NEURON_OK)
		fail("alloc 64 MiB", s);
	// Touch all of it so the daemon really has pages to zero and give back.
	neuron_cmd fill = make_fill_f32(desc(big, NEURON_DTYPE_F32, {int64_t(kChildBytes / 4)}), 1.0);
	uint64_t seq = 0;
	if ((s = neuron_submit(core, &fill, &seq)) != NEURON_OK || (s = neuron_queue_wait(core, seq, kWaitNs)) != NEURON_OK)
		fail("fill", s);
	neuron_host_buffer *hb = nullptr;
	if ((s = neuron_host_alloc(c, 4 << 20, &hb)) != NEURON_OK)
		fail("host buffer", s);
	r.ok = 1;
	r.tenant_id = neuron_tenant_id(c);
	write_all(me.write_fd, &r, sizeof(r));
	const int S = 192;
	neuron_cmd mm = make_matmul(desc(big, NEURON_DTYPE_F32, {S, S}), desc(big + (1 << 20), NEURON_DTYPE_F32, {S, S}),
				    desc(big + (2 << 20), NEURON_DTYPE_F32, {S, S}));
	for (uint64_t i = 0;; ++i) {
		if (dma_stream) {
			const uint64_t off = (i % 8) * (4 << 20);
			if (neuron_copy_h2d_async(dma, big + off, hb, 0, 4 << 20, nullptr) != NEURON_OK ||
			    neuron_copy_d2h_async(dma, hb, 0, big + off, 4 << 20, nullptr) != NEURON_OK)
				_exit(4);
		} else if (neuron_submit(core, &mm, nullptr) != NEURON_OK) {
			_exit(4);
		}
	}
}

bool lists_tenant(neuron_client *c, uint64_t tenant_id, pid_t pid)
{
	neuron_tenant_info list[64];
	uint32_t count = 0;
	NEURON_OK_OR_FAIL(neuron_list_tenants(c, list, 64, &count));
	for (uint32_t i = 0; i < count && i < 64; ++i)
		if (list[i].tenant_id == tenant_id || list[i].pid == static_cast<uint32_t>(pid))
			return true;
	return false;
}

// The survivor's stream: matmuls out_k = a_k @ b on its own core queue, in a thread,
// until told to stop. Any error is recorded, never asserted off the main thread.
struct Survivor {
	static constexpr int kSlices = 6, M = 40, K = 33, N = 27;
	Tenant t;
	uint64_t da = 0, db = 0, dout = 0;
	std::vector<float> a, b;
	std::atomic<bool> stop{false};
	std::atomic<int> error{NEURON_OK};
	std::atomic<uint64_t> rounds{0};
	std::thread thread;

	void open(uint32_t core)
	{
		t.open("survivor", 0, core);
		a = random_f32(kSlices * M * K, 31);
		b = random_f32(K * N, 32);
		da = dev_alloc(t.client, a.size() * 4);
		db = dev_alloc(t.client, b.size() * 4);
		dout = dev_alloc(t.client, kSlices * M * N * 4);
		upload_f32(t.dma, da, a);
		upload_f32(t.dma, db, b);
	}

	void start()
	{
		thread = std::thread([this] {
			while (!stop.load()) {
				for (int k = 0; k < kSlices; ++k) {
					neuron_cmd mm = make_matmul(desc(dout + k * M * N * 4, NEURON_DTYPE_F32, {M, N}),
								    desc(da + k * M * K * 4, NEURON_DTYPE_F32, {M, K}),
								    desc(db, NEURON_DTYPE_F32, {K, N}));
					neuron_status s = neuron_submit(t.core, &mm, nullptr);
					if (s == NEURON_OK)
						s = neuron_queue_sync(t.core, kWaitNs);
					if (s != NEURON_OK) {
						error.store(s);
						return;
					}
				}
				rounds.fetch_add(1);
			}
		});
	}

	void join()
	{
		stop.store(true);
		if (thread.joinable())
			thread.join();
	}

	void check()
	{
		cr_assert(error.load() == NEURON_OK, "the surviving tenant's stream failed: %s",
			  neuron_status_name(static_cast<neuron_status>(error.load())));
		cr_assert(rounds.load() > 0, "the surviving tenant's stream never completed a round");
		const auto got = download_f32(t.dma, dout, kSlices * M * N);
		std::vector<double> ref(got.size());
		for (int k = 0; k < kSlices; ++k)
			for (int i = 0; i < M; ++i)
				for (int j = 0; j < N; ++j) {
					double s = 0;
					for (int x = 0; x < K; ++x)
						s += static_cast<double>(a[(k * M + i) * K + x]) * b[x * N + j];
					ref[(k * M + i) * N + j] = s;
				}
		expect_close(got, ref, 1e-5, 1e-5, "survivor's matmuls");
	}
};

void kill_mid_stream(bool dma_stream, uint32_t survivor_core)
{
	Survivor p;
	p.open(survivor_core);
	const uint64_t own = hbm_used(p.t.client);

	const std::string socket = g_daemon->socket_path();
	Child child = fork_child();
	if (child.pid == 0)
		doomed_tenant(child, socket, dma_stream);
	Ready ready;
	std::memset(&ready, 0, sizeof(ready));
	const bool got = read_report(child, &ready, sizeof(ready), 60000);
	if (!got || !ready.ok)
		reap_child(child, 1000);
	cr_assert(got, "the doomed tenant never reported ready");
	cr_assert(ready.ok, "the doomed tenant could not set up: %s", ready.error);

	// Sanity: the measurement below can fail (the child's 64 MiB is visible).
	const uint64_t with_child = hbm_used(p.t.client);
	cr_assert(with_child >= own + kChildBytes, "HBM in use is %llu with the child, expected >= %llu",
		  (unsigned long long)with_child, (unsigned long long)(own + kChildBytes));
	cr_assert(lists_tenant(p.t.client, ready.tenant_id, child.pid), "neuron_list_tenants does not list the child");

	p.start();
	sleep_ms(60); // both streams running
	const pid_t victim = child.pid;
	const int kill_rc = kill(victim, SIGKILL);
	const uint64_t t0 = now_ns();
	const uint64_t used = wait_hbm_used(p.t.client, 0, own, 5000);
	const uint64_t elapsed = now_ns() - t0;
	const int status = reap_child(child, 5000);
	// The survivor's stream goes on after the reclaim.
	const uint64_t rounds_at_reclaim = p.rounds.load();
	for (int i = 0; i < 1000 && p.rounds.load() <= rounds_at_reclaim && p.error.load() == NEURON_OK; ++i)
		sleep_ms(5);
	p.join(); // before any assert: never leave the thread running
	cr_assert(kill_rc == 0, "kill(SIGKILL) of the child failed");
	cr_assert(p.rounds.load() > rounds_at_reclaim, "the survivor's stream made no progress after the reclaim (%s)",
		  neuron_status_name(static_cast<neuron_status>(p.error.load())));
	cr_assert(status >= 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
		  "the child was not killed by SIGKILL (status %d): it ended early", status);
	cr_assert(used == own, "HBM in use is %llu bytes 5 s after the kill, the survivor holds %llu",
		  (unsigned long long)used, (unsigned long long)own);
	cr_log_info("reclaim after SIGKILL took %.2f ms", elapsed / 1e6);
	cr_assert(elapsed < reclaim_bound_ns(), "reclaim took %.2f ms, the bound is %.0f ms", elapsed / 1e6,
		  reclaim_bound_ns() / 1e6);

	p.check();
	cr_assert(!lists_tenant(p.t.client, ready.tenant_id, victim), "neuron_list_tenants still lists the killed tenant");
	cr_assert(lists_tenant(p.t.client, neuron_tenant_id(p.t.client), getpid()),
		  "neuron_list_tenants does not list the survivor");
	p.t.close();
}

} // namespace

DAEMON_TEST(kill9, killed_during_matmul_stream_on_a_shared_core)
{
	kill_mid_stream(false, 0);
}

DAEMON_TEST(kill9, killed_during_matmul_stream_other_core)
{
	kill_mid_stream(false, 1);
}

DAEMON_TEST(kill9, killed_during_dma_stream)
{
	kill_mid_stream(true, 0);
}
