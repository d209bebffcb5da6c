// Daemon lifecycle as tenants see it: no daemon, a daemon killed under a blocked
// waiter, a clean SIGTERM with tenants connected, a second daemon on a busy socket,
// a restart over the stale socket a killed daemon leaves behind, and the
// instruction-set cap checked at start.
#include "daemon_test.h"
#include "raw_client.h"

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <thread>
#include <unistd.h>

using namespace dt;
using neuron::test::NeurondProcess;

TestSuite(lifecycle, .init = daemon_up, .fini = daemon_down, .timeout = 100);

namespace {

std::string lower(std::string s)
{
	for (char &c : s)
		c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
	return s;
}

bool exists(const std::string &path)
{
	struct stat st;
	return lstat(path.c_str(), &st) == 0;
}

void expect_daemon_lost_with_hint(const std::string &path)
{
	struct neuron_connect_options o = {};
	o.socket_path = path.c_str();
	neuron_client *c = reinterpret_cast<neuron_client *>(1);
	const neuron_status s = neuron_connect(&o, &c);
	cr_assert(s == NEURON_ERR_DAEMON_LOST, "connect to %s with no daemon returned %s", path.c_str(),
		  describe(s).c_str());
	cr_assert(c == nullptr, "a failed connect left *out non-NULL");
	const std::string msg = neuron_last_error();
	cr_assert(msg.find(path) != std::string::npos, "the message does not name the socket: %s", msg.c_str());
	cr_assert(lower(msg).find("start") != std::string::npos && msg.find("neurond") != std::string::npos,
		  "the message does not say how to start neurond: %s", msg.c_str());
}

// Big enough that 128 of them keep a core busy for many seconds.
constexpr int kBig = 1024;

struct BusyTenant {
	Tenant t;
	uint64_t buf = 0;
	uint64_t last = 0;

	void open_and_load(int commands)
	{
		t.open("busy");
		const uint64_t bytes = uint64_t(kBig) * kBig * 4;
		buf = dev_alloc(t.client, 3 * bytes);
		const auto m = desc(buf, NEURON_DTYPE_F32, {kBig, kBig});
		neuron_cmd mm = make_matmul(desc(buf + 2 * bytes, NEURON_DTYPE_F32, {kBig, kBig}), m,
					    desc(buf + bytes, NEURON_DTYPE_F32, {kBig, kBig}));
		for (int i = 0; i < commands; ++i)
			last = submit(t.core, mm);
	}
};

} // namespace

DAEMON_TEST(lifecycle, connect_without_a_daemon_says_how_to_start_it)
{
	// Nothing at the path.
	expect_daemon_lost_with_hint(g_daemon->dir() + "/nobody.sock");
	// A stale socket file nobody listens on.
	const std::string stale = g_daemon->dir() + "/stale.sock";
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un addr = {};
	addr.sun_family = AF_UNIX;
	stale.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
	cr_assert(bind(fd, reinterpret_cast<struct sockaddr *>(&addr), sizeof(addr)) == 0);
	close(fd);
	expect_daemon_lost_with_hint(stale);
	unlink(stale.c_str());
}

DAEMON_TEST(lifecycle, NEURON_SOCKET_selects_the_daemon)
{
	setenv("NEURON_SOCKET", g_daemon->socket_path().c_str(), 1);
	cr_assert(g_daemon->socket_path() == neuron_default_socket_path(), "default path %s ignores NEURON_SOCKET",
		  neuron_default_socket_path());
	neuron_client *c = nullptr;
	NEURON_OK_OR_FAIL(neuron_connect(nullptr, &c));
	uint32_t n = 0;
	NEURON_OK_OR_FAIL(neuron_device_count(c, &n));
	cr_assert(n == 2, "%u devices", n);
	neuron_disconnect(c);
	unsetenv("NEURON_SOCKET");
}

DAEMON_TEST(lifecycle, blocked_waiter_returns_when_the_daemon_is_killed)
{
	BusyTenant b;
	b.open_and_load(128);
	// A second, tiny ring that is full: its first command waits for all of the busy
	// queue's work, so a third submit blocks for as long.
	neuron_queue *small = nullptr;
	NEURON_OK_OR_FAIL(neuron_queue_create(b.t.client, 0, NEURON_QUEUE_CORE, 1, 2, &small));
	neuron_cmd nop;
	neuron_cmd_init(&nop, NEURON_OP_NOP, 0);
	neuron_cmd gated = nop;
	gated.wait.queue_id = neuron_queue_id(b.t.core);
	gated.wait.value = b.last;
	submit(small, gated);
	submit(small, nop);

	std::atomic<int> wait_status{1}, submit_status{1};
	std::atomic<uint64_t> wait_done{0}, submit_done{0};
	std::thread waiter([&] {
		wait_status = neuron_queue_wait(b.t.core, b.last, -1);
		wait_done = now_ns();
	});
	std::thread submitter([&] {
		submit_status = neuron_submit(small, &nop, nullptr); // 3rd command on a 2-slot ring
		submit_done = now_ns();
	});
	sleep_ms(300);
	const bool still_busy = neuron_queue_completed(b.t.core) < b.last;
	// kill9() sends the signal and reaps the daemon; a client can see it die before
	// that returns. Calls must return after the signal went out, and within the
	// bound of the daemon being gone (the reaping can take long in QEMU's TCG).
	const uint64_t signalled = now_ns();
	g_daemon->kill9();
	const uint64_t killed = now_ns();
	// Bounded join: a thread stuck forever would hang the test, so poll first.
	while ((!wait_done.load() || !submit_done.load()) && now_ns() - killed < 10'000'000'000ull)
		sleep_ms(5);
	const bool returned = wait_done.load() && submit_done.load();
	if (!returned) {
		cr_log_error("a libneuron call still blocks 10 s after the daemon died");
		std::_Exit(1); // cannot join a hung thread
	}
	waiter.join();
	submitter.join();
	cr_assert(still_busy, "the engine finished all work before the kill: the test proves nothing (make it bigger)");
	const double wait_ms = (static_cast<int64_t>(wait_done.load()) - static_cast<int64_t>(killed)) / 1e6;
	const double submit_ms = (static_cast<int64_t>(submit_done.load()) - static_cast<int64_t>(killed)) / 1e6;
	cr_assert(wait_done.load() > signalled && submit_done.load() > signalled,
		  "a call returned before the kill (wait %.1f ms, submit %.1f ms after the daemon was reaped)", wait_ms,
		  submit_ms);
	cr_assert(wait_status == NEURON_ERR_DAEMON_LOST || wait_status == NEURON_OK,
		  "the blocked wait returned %s", neuron_status_name(static_cast<neuron_status>(wait_status.load())));
	cr_assert(submit_status == NEURON_ERR_DAEMON_LOST || submit_status == NEURON_OK,
		  "the blocked submit returned %s", neuron_status_name(static_cast<neuron_status>(submit_status.load())));
	cr_assert(wait_ms < 1000.0, "the blocked wait returned %.1f ms after the kill (bound 1 s)", wait_ms);
	cr_assert(submit_ms < 1000.0, "the blocked submit returned %.1f ms after the kill (bound 1 s)", submit_ms);
	// Later calls fail fast with DAEMON_LOST.
	uint32_t n = 0;
	const neuron_status s = neuron_device_count(b.t.client, &n);
	cr_assert(s == NEURON_ERR_DAEMON_LOST, "an RPC after the daemon died returned %s", describe(s).c_str());
	const uint64_t t0 = now_ns();
	const neuron_status w = neuron_queue_wait(b.t.core, b.last, -1);
	cr_assert(w == NEURON_ERR_DAEMON_LOST, "a new wait after the daemon died returned %s", describe(w).c_str());
	cr_assert(now_ns() - t0 < 1'000'000'000ull, "a new wait took %.1f ms to notice the daemon is gone",
		  (now_ns() - t0) / 1e6);
	neuron_queue_destroy(small);
	b.t.close();
}

DAEMON_TEST(lifecycle, sigterm_with_tenants_connected_exits_zero)
{
	BusyTenant b;
	b.open_and_load(16);
	Tenant idle;
	idle.open("idle");
	dev_alloc(idle.client, 1 << 20, 1);
	neuron::test::RawClient half; // connected, never said Hello
	cr_assert(half.connect(g_daemon->socket_path()));
	const std::string socket = g_daemon->socket_path();

	const auto e = g_daemon->stop(5000);
	cr_assert(e.exited && !e.signaled && e.code == 0, "neurond with 3 connections did not exit 0 on SIGTERM: %s\n%s",
		  e.describe().c_str(), g_daemon->log_tail().c_str());
	cr_assert(!exists(socket), "neurond left its socket %s behind after a clean exit", socket.c_str());
	const uint64_t t0 = now_ns();
	const neuron_status w = neuron_queue_wait(b.t.core, b.last, -1);
	cr_assert(w == NEURON_ERR_DAEMON_LOST || w == NEURON_OK, "a wait after shutdown returned %s", describe(w).c_str());
	cr_assert(now_ns() - t0 < 1'000'000'000ull, "a wait after shutdown took %.1f ms", (now_ns() - t0) / 1e6);
	uint32_t n = 0;
	const neuron_status s = neuron_device_count(idle.client, &n);
	cr_assert(s == NEURON_ERR_DAEMON_LOST, "an RPC after shutdown returned %s", describe(s).c_str());
	cr_assert(half.wait_eof(1000), "the un-greeted connection was not closed");
	b.t.close();
	idle.close();
}

DAEMON_TEST(lifecycle, second_daemon_on_the_same_socket_refuses_to_start)
{
	Tenant t;
	t.open("before-second");
	NeurondProcess &second = *extra_daemon(g_daemon->socket_path());
	std::string error;
	cr_assert(second.spawn(&error), "%s", error.c_str());
	const auto e = second.wait_exit(10000);
	cr_assert(e.exited, "a second neurond on a busy socket is still running after 10 s");
	cr_assert(!e.signaled && e.code != 0, "the second neurond ended with %s, expected a non-zero exit",
		  e.describe().c_str());
	const std::string log = second.log();
	cr_assert(log.find("already") != std::string::npos && log.find(g_daemon->socket_path()) != std::string::npos,
		  "the second neurond did not say the socket is taken:\n%s", log.c_str());
	// The first one is untouched: its socket is still there and serves old and new clients.
	cr_assert(g_daemon->running(), "the first neurond died");
	cr_assert(exists(g_daemon->socket_path()), "the second neurond removed the first one's socket");
	const uint64_t buf = dev_alloc(t.client, 1024);
	run(t.core, make_fill_f32(desc(buf, NEURON_DTYPE_F32, {256}), 3.0));
	for (float x : download_f32(t.dma, buf, 256))
		cr_assert(x == 3.0f, "the first neurond computed %g after the second one's attempt", x);
	neuron_disconnect(connect("after-second"));
	t.close();
}

// NEURON_MAX_CPU_ISA (kernels/blas_select.h) caps the instruction set of the
// chip's kernels. neurond refuses a value it does not know before it takes a
// device or a socket; under "avx2" on an AVX-512 host its blas= line says that it
// runs the AVX2 kernels, and a matmul over several tiles and ragged register blocks
// equals a double product on the CPU.
DAEMON_TEST(lifecycle, cpu_isa_cap_is_checked_and_applied)
{
	setenv("NEURON_MAX_CPU_ISA", "avx-512", 1);
	NeurondProcess &bad = *extra_daemon("");
	std::string error;
	cr_assert(bad.spawn(&error), "%s", error.c_str());
	const auto e = bad.wait_exit(10000);
	cr_assert(e.exited && !e.signaled && e.code == 2, "neurond with NEURON_MAX_CPU_ISA=avx-512 ended with %s",
		  e.describe().c_str());
	cr_assert(bad.log().find("NEURON_MAX_CPU_ISA='avx-512': expected avx512") != std::string::npos,
		  "neurond did not say what is wrong with the value:\n%s", bad.log_tail().c_str());

	// On the kmd backend one daemon holds the device at a time: the capped daemon
	// takes the first one's place rather than being refused the device.
	const auto first = g_daemon->stop(5000);
	cr_assert(first.exited && !first.signaled && first.code == 0, "the first neurond did not stop cleanly (%s)",
		  first.describe().c_str());
	setenv("NEURON_MAX_CPU_ISA", "avx2", 1);
	NeurondProcess &capped = *extra_daemon("");
	const bool started = capped.start(&error);
	unsetenv("NEURON_MAX_CPU_ISA");
	cr_assert(started, "neurond under NEURON_MAX_CPU_ISA=avx2: %s", error.c_str());
	const std::string log = capped.log();
	cr_assert(log.find("blas=") != std::string::npos, "no blas= line:\n%s", capped.log_tail().c_str());
	cr_assert(log.find("packed AVX-512") == std::string::npos, "AVX-512 kernels under the cap:\n%s",
		  capped.log_tail().c_str());
	const std::string flags = [] {
		std::ifstream in("/proc/cpuinfo");
		for (std::string line; std::getline(in, line);)
			if (line.rfind("flags", 0) == 0)
				return line + " ";
		return std::string();
	}();
	const auto has = [&](const char *f) { return flags.find(std::string(" ") + f + " ") != std::string::npos; };
	if (has("avx512f") && has("avx512cd") && has("avx512bw") && has("avx512dq") && has("avx512vl"))
		cr_assert(log.find("capped at avx2") != std::string::npos, "the cap is not in the blas= line:\n%s",
			  capped.log_tail().c_str());
	if (has("avx2") && has("fma"))
		cr_assert(log.find("packed AVX2 GEMM") != std::string::npos, "not the AVX2 kernel:\n%s",
			  capped.log_tail().c_str());

	Tenant t;
	t.client = connect("isa-cap", capped.socket_path());
	NEURON_OK_OR_FAIL(neuron_queue_create(t.client, 0, NEURON_QUEUE_DMA, 0, 0, &t.dma));
	NEURON_OK_OR_FAIL(neuron_queue_create(t.client, 0, NEURON_QUEUE_CORE, 0, 0, &t.core));
	const int M = 203, K = 601, N = 150; // M % 6, M % 8, N % 16 and K % 256 != 0; several tiles
	const auto a = random_f32(M * K, 11), b = random_f32(K * N, 12);
	const uint64_t da = dev_alloc(t.client, a.size() * 4), db = dev_alloc(t.client, b.size() * 4),
		       dout = dev_alloc(t.client, M * N * 4);
	upload_f32(t.dma, da, a);
	upload_f32(t.dma, db, b);
	run(t.core, make_matmul(desc(dout, NEURON_DTYPE_F32, {M, N}), desc(da, NEURON_DTYPE_F32, {M, K}),
				desc(db, NEURON_DTYPE_F32, {K, N})));
	std::vector<double> ref(static_cast<size_t>(M) * N);
	for (int i = 0; i < M; ++i)
		for (int k = 0; k < K; ++k)
			for (int j = 0; j < N; ++j)
				ref[i * N + j] += double(a[i * K + k]) * double(b[k * N + j]);
	expect_close(download_f32(t.dma, dout, ref.size()), ref, 1e-4, 1e-4, "matmul under NEURON_MAX_CPU_ISA=avx2");
	t.close();
}

DAEMON_TEST(lifecycle, restart_over_the_socket_of_a_killed_daemon)
{
	const std::string socket = g_daemon->socket_path();
	g_daemon->kill9();
	cr_assert(exists(socket), "test premise: a killed daemon leaves its socket file");
	NeurondProcess &again = *extra_daemon(socket);
	std::string error;
	cr_assert(again.start(&error), "neurond did not start over a stale socket: %s", error.c_str());
	Tenant t;
	t.client = connect("after-restart", socket);
	NEURON_OK_OR_FAIL(neuron_queue_create(t.client, 0, NEURON_QUEUE_DMA, 0, 0, &t.dma));
	NEURON_OK_OR_FAIL(neuron_queue_create(t.client, 0, NEURON_QUEUE_CORE, 0, 0, &t.core));
	const uint64_t buf = dev_alloc(t.client, 1024);
	run(t.core, make_fill_f32(desc(buf, NEURON_DTYPE_F32, {256}), 4.0));
	for (float x : download_f32(t.dma, buf, 256))
		cr_assert(x == 4.0f, "the restarted daemon computed %g", x);
	t.close();
	const auto e = again.stop(5000);
	cr_assert(e.exited && !e.signaled && e.code == 0, "the restarted neurond: %s", e.describe().c_str());
}

// Socket activation (the packages' neurond.socket): systemd binds the socket and
// keeps it across restarts, so clients never see it vanish. A neurond stopping
// must leave that socket file alone (it removed it once: the install test's
// `systemctl restart neurond` left clients with "no daemon at ...").
Test(lifecycle, socket_activation_keeps_the_socket_file_across_restarts)
{
	// One neurond per device, as on a host: the suite's daemon goes first. (On kmd a
	// second neurond cannot attach to the driver's engine while the first holds it; the
	// test used to start beside it and timed out in the QEMU guest.)
	const auto down = g_daemon->stop(5000);
	cr_assert(down.exited && down.code == 0, "the suite's neurond: %s", down.describe().c_str());
	NeurondProcess first;
	const std::string &path = first.socket_path();
	const int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert(listener >= 0);
	struct sockaddr_un addr = {};
	addr.sun_family = AF_UNIX;
	path.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
	cr_assert(bind(listener, reinterpret_cast<struct sockaddr *>(&addr), sizeof(addr)) == 0 && listen(listener, 16) == 0,
		  "binding %s: %s", path.c_str(), strerror(errno));

	std::string err;
	first.inherit_listener(listener);
	cr_assert(first.start(&err), "%s", err.c_str());
	neuron_client *c = connect("activated", path);
	neuron_disconnect(c);
	cr_assert(first.log().find("from=systemd") != std::string::npos, "neurond did not take the passed socket:\n%s",
		  first.log_tail().c_str());
	auto e = first.stop(5000);
	cr_assert(e.exited && !e.signaled && e.code == 0, "neurond: %s", e.describe().c_str());
	cr_assert(exists(path), "neurond removed the socket file systemd owns (%s) when it stopped", path.c_str());

	// The restarted daemon gets the same socket; a client connecting by path gets it.
	NeurondProcess second(path);
	second.inherit_listener(listener);
	cr_assert(second.start(&err), "%s", err.c_str());
	c = connect("after restart", path);
	neuron_disconnect(c);
	e = second.stop(5000);
	cr_assert(e.exited && !e.signaled && e.code == 0, "the restarted neurond: %s", e.describe().c_str());
	cr_assert(exists(path));
	close(listener);
}
