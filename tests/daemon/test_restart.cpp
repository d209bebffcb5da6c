// Restart with tenants alive (issue 12; daemon/README.md): neurond runs under its
// own supervisor (--supervise) and is killed with SIGKILL while tenants hold device
// memory, host buffers and queues, and while their commands run. The supervisor
// restarts it; the new neurond adopts the kept state; libneuron re-attaches on its
// own. Every result is checked against the CPU: device memory intact, queues
// continuing, and every command run exactly once (in-place commands included, which
// a second run or a lost run would change).
#include "daemon_backend.h"
#include "daemon_test.h"
#include "restart_test.h"

#include "../tile/canonical_kernels.h"
#include "../tile/harness.h"
#include "../tile/kernel_program.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <xf86drm.h>

#include <drm/neuron_accel.h>

using namespace dt;

namespace {

neuron_cmd add_scalar_in_place(uint64_t addr, int64_t n, double s)
{
	const neuron_tensor_desc x = desc(addr, NEURON_DTYPE_F32, {n});
	neuron_cmd cmd = make_cmd(NEURON_OP_ADD_SCALAR, {x, x});
	cmd.fscalars.f[0] = s;
	return cmd;
}

std::vector<double> matmul_ref(const std::vector<float> &a, const std::vector<float> &b, int M, int K, int N)
{
	std::vector<double> ref(size_t(M) * N);
	for (int i = 0; i < M; ++i)
		for (int j = 0; j < N; ++j) {
			double s = 0;
			for (int x = 0; x < K; ++x)
				s += double(a[size_t(i) * K + x]) * b[size_t(x) * N + j];
			ref[size_t(i) * N + j] = s;
		}
	return ref;
}

std::vector<double> widen(const std::vector<float> &v) { return std::vector<double>(v.begin(), v.end()); }

} // namespace

TestSuite(restart, .init = supervised_up, .fini = daemon_down, .timeout = 240);

// Three tenants with data in device memory, host buffers and queues; neurond is
// killed with SIGKILL twice. Each tenant keeps its id, its memory holds what it
// held, and its queues run on: later results match the CPU.
DAEMON_TEST(restart, state_survives_kill9)
{
	constexpr int kTenants = 3, M = 48, K = 40, N = 36;
	struct Data {
		Tenant t;
		uint64_t id = 0, da = 0, db = 0, dc = 0;
		std::vector<float> a, b;
	} ts[kTenants];
	for (int i = 0; i < kTenants; ++i) {
		Data &d = ts[i];
		d.t.open(("restart-" + std::to_string(i)).c_str(), uint32_t(i % 2), 0);
		d.id = neuron_tenant_id(d.t.client);
		d.a = random_f32(size_t(M) * K, 100 + i);
		d.b = random_f32(size_t(K) * N, 200 + i);
		d.da = dev_alloc(d.t.client, d.a.size() * 4, uint32_t(i % 2));
		d.db = dev_alloc(d.t.client, d.b.size() * 4, uint32_t(i % 2));
		d.dc = dev_alloc(d.t.client, size_t(M) * N * 4, uint32_t(i % 2));
		upload_f32(d.t.dma, d.da, d.a);
		upload_f32(d.t.dma, d.db, d.b);
		run(d.t.core, make_matmul(desc(d.dc, NEURON_DTYPE_F32, {M, N}), desc(d.da, NEURON_DTYPE_F32, {M, K}),
					  desc(d.db, NEURON_DTYPE_F32, {K, N})));
	}
	for (int round = 0; round < 2; ++round) {
		kill_neurond();
		for (int i = 0; i < kTenants; ++i) {
			Data &d = ts[i];
			// The first call after the kill re-attaches (libneuron, transparently).
			expect_close(download_f32(d.t.dma, d.da, d.a.size()), widen(d.a), 0, 0, "A kept in device memory");
			expect_close(download_f32(d.t.dma, d.dc, size_t(M) * N), matmul_ref(d.a, d.b, M, K, N), 1e-5, 1e-5,
				     "C = A @ B computed before the kill");
			cr_assert_eq(neuron_tenant_id(d.t.client), d.id, "tenant %d changed id", i);
			// A control request (rings alone need no connection): it re-attaches, and
			// the new neurond's allocator knows what this tenant holds.
			const uint64_t more = dev_alloc(d.t.client, 1 << 20, uint32_t(i % 2));
			const uint64_t kept[3][2] = {{d.da, d.a.size() * 4}, {d.db, d.b.size() * 4}, {d.dc, size_t(M) * N * 4}};
			for (const auto &k : kept)
				cr_assert(more + (1 << 20) <= k[0] || k[0] + k[1] <= more,
					  "a new allocation overlaps one the tenant held before the restart");
			NEURON_OK_OR_FAIL(neuron_free(d.t.client, uint32_t(i % 2), more));
			// Work after the restart, on the same queues: B doubled in place, C again.
			run(d.t.core, add_scalar_in_place(d.db, int64_t(d.b.size()), 0.0));
			neuron_cmd twice = make_cmd(NEURON_OP_ADD, {desc(d.db, NEURON_DTYPE_F32, {int64_t(d.b.size())}),
								   desc(d.db, NEURON_DTYPE_F32, {int64_t(d.b.size())}),
								   desc(d.db, NEURON_DTYPE_F32, {int64_t(d.b.size())})});
			twice.fscalars.f[0] = 1.0;
			run(d.t.core, twice);
			for (float &v : d.b)
				v *= 2;
			run(d.t.core, make_matmul(desc(d.dc, NEURON_DTYPE_F32, {M, N}), desc(d.da, NEURON_DTYPE_F32, {M, K}),
						  desc(d.db, NEURON_DTYPE_F32, {K, N})));
			expect_close(download_f32(d.t.dma, d.dc, size_t(M) * N), matmul_ref(d.a, d.b, M, K, N), 1e-5, 1e-5,
				     "C = A @ 2B computed after the restart");
		}
	}
	// The tenant table came back too: each tenant listed once, under its own id.
	neuron_tenant_info list[16];
	uint32_t count = 0;
	NEURON_OK_OR_FAIL(neuron_list_tenants(ts[0].t.client, list, 16, &count));
	cr_assert_eq(count, uint32_t(kTenants), "%u tenants listed after the restarts, %d connected", count, kTenants);
	for (int i = 0; i < kTenants; ++i)
		ts[i].t.close();
	cr_assert_eq(count_in_log("supervise.restart"), 2u, "%s", g_daemon->log_tail().c_str());
	// Each restart adopted the three tenants, and each of them re-attached.
	cr_assert_eq(count_in_log("state.adopt"), 6u, "%s", g_daemon->log_tail().c_str());
	cr_assert_eq(count_in_log("tenant.resume"), 6u, "%s", g_daemon->log_tail().c_str());
}

// Commands in flight when neurond dies: a stream of in-place adds (x += 1 over
// 2 Mi elements, tiled, so kills land inside commands) and of pure matmuls, with
// neurond killed five times while they run. Each command runs exactly once: x ends
// at exactly the number of adds (a lost one would leave it lower, one run twice
// higher), and the matmuls match the CPU. On kmd (smaller, for the QEMU guest) the
// adds' undo records are copied through the device's DMA
// (kmd_interrupted_in_place_command_runs_exactly_once makes a kill land inside one).
DAEMON_TEST(restart, inflight_commands_run_exactly_once)
{
	constexpr int M = 64, K = 64, N = 64;
	Tenant t;
	t.open("inflight", 0, 0);
	const bool kmd = neuron::test::daemon_runs_kmd(t.client);
	const int64_t kElems = kmd ? 256 << 10 : 2 << 20;
	const int kAdds = kmd ? 64 : 200; // at least 64: the matmuls fill 64 outputs
	neuron_queue *core2 = nullptr;
	NEURON_OK_OR_FAIL(neuron_queue_create(t.client, 0, NEURON_QUEUE_CORE, 1, 0, &core2));
	const uint64_t x = dev_alloc(t.client, kElems * 4);
	run(t.core, make_fill_f32(desc(x, NEURON_DTYPE_F32, {kElems}), 0.0));
	const auto a = random_f32(size_t(M) * K, 7), b = random_f32(size_t(K) * N, 8);
	const uint64_t da = dev_alloc(t.client, a.size() * 4), db = dev_alloc(t.client, b.size() * 4),
		       dc = dev_alloc(t.client, 64ull * M * N * 4);
	upload_f32(t.dma, da, a);
	upload_f32(t.dma, db, b);

	std::atomic<int> error{NEURON_OK};
	std::thread submitter([&] {
		for (int i = 0; i < kAdds; ++i) {
			neuron_cmd add = add_scalar_in_place(x, kElems, 1.0);
			neuron_cmd mm = make_matmul(desc(dc + uint64_t(i % 64) * M * N * 4, NEURON_DTYPE_F32, {M, N}),
						    desc(da, NEURON_DTYPE_F32, {M, K}), desc(db, NEURON_DTYPE_F32, {K, N}));
			neuron_status s = neuron_submit(t.core, &add, nullptr);
			if (s == NEURON_OK)
				s = neuron_submit(core2, &mm, nullptr);
			if (s != NEURON_OK) {
				error.store(s);
				return;
			}
		}
	});
	for (int kill = 0; kill < 5; ++kill) {
		sleep_ms(150 + 70 * kill);
		kill_neurond();
	}
	submitter.join();
	cr_assert_eq(error.load(), NEURON_OK, "submitting failed: %s", neuron_last_error());
	NEURON_OK_OR_FAIL(neuron_queue_sync(t.core, kWaitNs));
	NEURON_OK_OR_FAIL(neuron_queue_sync(core2, kWaitNs));
	expect_close(download_f32(t.dma, x, kElems), std::vector<double>(size_t(kElems), double(kAdds)), 0, 0,
		     "x after as many in-place adds of 1 as were submitted (each exactly once)");
	expect_close(download_f32(t.dma, dc, size_t(64) * M * N),
		     [&] {
			     std::vector<double> ref;
			     const auto one = matmul_ref(a, b, M, K, N);
			     for (int i = 0; i < 64; ++i)
				     ref.insert(ref.end(), one.begin(), one.end());
			     return ref;
		     }(),
		     1e-5, 1e-5, "matmuls run across the restarts");
	cr_log_info("restarts: %zu; interrupted commands restored from their undo record then run again: %zu; "
		    "interrupted pure commands run again: %zu",
		    count_in_log("supervise.restart"), count_in_log("outcome=restored_then_rerun"),
		    count_in_log("outcome=pure_rerun"));
	neuron_queue_destroy(core2);
	t.close();
}

namespace {

// What the driver files neurond holds (its tenants' kept files, its controller and
// engine files) hold, in KiB: the driver's fdinfo keys drm-memory-host and
// drm-memory-hbm (BOs each file holds handles to), summed over them.
struct DriverMemory {
	uint64_t host_kib = 0, hbm_kib = 0;
};

std::vector<std::string> fdinfo_files(pid_t pid)
{
	std::vector<std::string> out;
	std::error_code ec;
	for (const auto &e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fdinfo", ec))
		out.push_back(e.path().string());
	return out;
}

DriverMemory driver_memory_of(pid_t pid)
{
	DriverMemory m;
	for (const std::string &path : fdinfo_files(pid)) {
		std::ifstream f(path);
		std::string key;
		uint64_t kib = 0;
		while (f >> key) {
			if (key == "drm-memory-host:" && f >> kib)
				m.host_kib += kib;
			else if (key == "drm-memory-hbm:" && f >> kib)
				m.hbm_kib += kib;
		}
	}
	return m;
}

// Calls fn with each driver file neurond holds, taken from it (pidfd_getfd: the
// same open file, so what fn does there is done in neurond's file).
template <typename Fn> void for_each_driver_file(pid_t pid, Fn fn)
{
	// syscall(2): glibc 2.36's <sys/pidfd.h> lacks extern "C" (its wrappers do
	// not link from C++).
	const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
	cr_assert(pidfd >= 0, "pidfd_open(%d): %s", (int)pid, strerror(errno));
	for (const std::string &path : fdinfo_files(pid)) {
		std::ifstream f(path);
		const std::string info((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
		if (info.find("drm-driver:\tneuron") == std::string::npos)
			continue;
		const int fd = static_cast<int>(
			syscall(SYS_pidfd_getfd, pidfd, std::stoi(std::filesystem::path(path).filename().string()), 0));
		if (fd < 0)
			continue; // closed since the listing
		fn(fd);
		::close(fd);
	}
	::close(pidfd);
}

// The syncobjs in the driver files neurond holds: each file's handles are queried
// upwards from 1 (DRM hands out the lowest free handle, so a file's syncobjs sit
// low; 256 misses in a row end the scan).
uint64_t driver_syncobjs_of(pid_t pid)
{
	uint64_t count = 0;
	for_each_driver_file(pid, [&](int fd) {
		for (uint32_t h = 1, misses = 0; misses < 256; ++h) {
			uint64_t point = 0;
			if (drmSyncobjQuery(fd, &h, &point, 1) == 0) {
				++count;
				misses = 0;
			} else {
				++misses;
			}
		}
	});
	return count;
}

// A device BO and a host BO made in every driver file neurond holds, as neurond
// makes them, without its knowing: what a kill leaves behind when it lands between
// a BO's creation and its journal entry. Returns the files.
int plant_unrecorded_bos(pid_t pid, uint64_t device_bytes, uint64_t host_bytes)
{
	int files = 0;
	for_each_driver_file(pid, [&](int fd) {
		drm_neuron_bo_create dev{};
		dev.size = device_bytes;
		dev.flags = DRM_NEURON_BO_DEVICE;
		drm_neuron_bo_create host{};
		host.size = host_bytes;
		cr_assert(drmIoctl(fd, DRM_IOCTL_NEURON_BO_CREATE, &dev) == 0, "BO_CREATE (HBM): %s", strerror(errno));
		cr_assert(drmIoctl(fd, DRM_IOCTL_NEURON_BO_CREATE, &host) == 0, "BO_CREATE (host): %s", strerror(errno));
		++files;
	});
	return files;
}

// How long the compute jobs of the driver files neurond holds have run, in ns: the
// sum of the driver's fdinfo keys drm-engine-core<N> (it grows as each job ends).
// DMA queues are left out: an in-place command's undo record is copied by a DMA
// job before its first compute job.
uint64_t driver_compute_busy_ns(pid_t pid)
{
	uint64_t ns = 0;
	for (const std::string &path : fdinfo_files(pid)) {
		std::ifstream f(path);
		std::string key;
		uint64_t v = 0;
		while (f >> key)
			if (key.rfind("drm-engine-core", 0) == 0 && f >> v)
				ns += v;
	}
	return ns;
}

} // namespace

// Commands in flight on kmd (daemon/README.md "kmd."): before the first job of an
// in-place command (x += 1 over 8 Mi elements, 64 jobs) the undo log saves what it
// writes from the driver's BOs through the device's DMA (runtime/kmd/
// kmd_undo_copy.cpp); when a kill of neurond interrupts it, the next neurond puts
// those bytes back the same way and runs it again from its start: x = 1 exactly
// (run again without the undo, x = 2 where its first jobs had run). A pure
// command (a matmul on another queue) runs again and is exact.
DAEMON_TEST(restart, kmd_interrupted_in_place_command_runs_exactly_once)
{
	constexpr int64_t kElems = 8 << 20;
	constexpr int M = 32, K = 32, N = 32;
	Tenant t;
	t.open("interrupted", 0, 0);
	if (!neuron::test::daemon_runs_kmd(t.client)) {
		t.close();
		cr_skip_test("emu restores and reruns interrupted commands (inflight_commands_run_exactly_once)");
	}
	neuron_queue *core2 = nullptr;
	NEURON_OK_OR_FAIL(neuron_queue_create(t.client, 0, NEURON_QUEUE_CORE, 1, 0, &core2));
	const auto a = random_f32(size_t(M) * K, 17), b = random_f32(size_t(K) * N, 18);
	const uint64_t da = dev_alloc(t.client, a.size() * 4), db = dev_alloc(t.client, b.size() * 4),
		       dc = dev_alloc(t.client, size_t(M) * N * 4);
	upload_f32(t.dma, da, a);
	upload_f32(t.dma, db, b);
	bool interrupted = false;
	// neurond is killed as soon as the add's first job ended (the driver's busy
	// time of neurond's files grew): its other jobs are still to run. Should the
	// add end first all the same, it ran once, and the next attempt tries again.
	for (int attempt = 0; attempt < 4 && !interrupted; ++attempt) {
		neuron_queue *q = nullptr;
		NEURON_OK_OR_FAIL(neuron_queue_create(t.client, 0, NEURON_QUEUE_CORE, 0, 0, &q));
		const uint64_t x = dev_alloc(t.client, kElems * 4);
		run(q, make_fill_f32(desc(x, NEURON_DTYPE_F32, {kElems}), 0.0));
		const pid_t daemon = wait_child(-1, 10000);
		const uint64_t busy = driver_compute_busy_ns(daemon);
		const uint64_t seq = submit(q, add_scalar_in_place(x, kElems, 1.0));
		for (int waited = 0; waited < 20000 && driver_compute_busy_ns(daemon) == busy; ++waited)
			sleep_ms(1);
		submit(core2, make_matmul(desc(dc, NEURON_DTYPE_F32, {M, N}), desc(da, NEURON_DTYPE_F32, {M, K}),
					  desc(db, NEURON_DTYPE_F32, {K, N})));
		const size_t restored_before = count_in_log("outcome=restored_then_rerun");
		kill_neurond();
		NEURON_OK_OR_FAIL(neuron_queue_sync(q, kWaitNs));
		cr_assert_eq(neuron_queue_completed(q), seq, "the add's queue completed %llu, the add is %llu",
			     (unsigned long long)neuron_queue_completed(q), (unsigned long long)seq);
		expect_close(download_f32(t.dma, x, kElems), std::vector<double>(size_t(kElems), 1.0), 0, 0,
			     "x after one add, interrupted by the kill or not (exactly once)");
		interrupted = count_in_log("outcome=restored_then_rerun") > restored_before;
		if (interrupted)
			cr_log_info("attempt %d: the add was interrupted, restored and run again", attempt);
		NEURON_OK_OR_FAIL(neuron_queue_sync(core2, kWaitNs));
		expect_close(download_f32(t.dma, dc, size_t(M) * N), matmul_ref(a, b, M, K, N), 1e-5, 1e-5,
			     "a pure matmul across the restart");
		neuron_queue_destroy(q);
		NEURON_OK_OR_FAIL(neuron_free(t.client, 0, x));
	}
	cr_assert(interrupted, "no kill landed inside the add in 4 attempts; the log says:\n%s",
		  lines_in_log({"supervise.", "state.", "warn", "error"}).c_str());
	neuron_queue_destroy(core2);
	t.close();
}


// kmd: a host buffer's import into the tenant's kept driver files is made again
// by each new neurond (it has no mapping of the old one) and the old import is
// closed (its handle is in the journal): the files hold no more host memory after
// two restarts than before, and no more HBM (the chain-state BO of a command a
// kill interrupted is freed too, and so are BOs made but not recorded when the
// kill came), and no more syncobjs than the jobs in flight at once need (the new
// neurond reuses the kept files' ones). Without closing the imports the files held
// 73728 KiB of host BOs after two restarts instead of 24576; without freeing the
// chain-state BOs, 8 KiB more HBM.
DAEMON_TEST(restart, kmd_kept_files_hold_no_stale_handles)
{
	constexpr uint64_t kBytes = 4 << 20;
	constexpr uint64_t kSyncobjSlack = 3; // see the assertion
	constexpr uint64_t kPlantedDevice = 1 << 20, kPlantedHost = 256 << 10;
	Tenant t;
	t.open("kept-files", 0, 0);
	if (!neuron::test::daemon_runs_kmd(t.client)) {
		t.close();
		cr_skip_test("emu keeps no driver files");
	}
	neuron_host_buffer *hb = nullptr;
	NEURON_OK_OR_FAIL(neuron_host_alloc(t.client, kBytes, &hb));
	const auto pattern = random_bytes(kBytes, 5);
	const uint64_t x = dev_alloc(t.client, kBytes);
	// The same requests before each measurement (libneuron's own staging included).
	auto use = [&](const char *when) {
		std::memcpy(neuron_host_ptr(hb), pattern.data(), kBytes);
		NEURON_OK_OR_FAIL(neuron_copy_h2d_async(t.dma, x, hb, 0, kBytes, nullptr));
		NEURON_OK_OR_FAIL(neuron_queue_sync(t.dma, kWaitNs));
		std::memset(neuron_host_ptr(hb), 0, kBytes);
		NEURON_OK_OR_FAIL(neuron_copy_d2h_async(t.dma, hb, 0, x, kBytes, nullptr));
		NEURON_OK_OR_FAIL(neuron_queue_sync(t.dma, kWaitNs));
		cr_assert(std::memcmp(neuron_host_ptr(hb), pattern.data(), kBytes) == 0,
			  "the bytes did not round-trip through the host buffer %s", when);
		upload_f32(t.dma, x, std::vector<float>(16, 1.0f));
		cr_assert_eq(download_f32(t.dma, x, 16)[0], 1.0f);
	};
	// A softmax over rows longer than a tile (32 chunks per row at the guest's tile
	// budget): its jobs carry each row's statistics in a chain-state BO of the
	// tenant's file. Each kill lands inside it, and the new neurond frees the old
	// one's BO (QueueProgress::scratch).
	constexpr int64_t R = 4, L = 1 << 20;
	const uint64_t dx = dev_alloc(t.client, uint64_t(R * L) * 4), dy = dev_alloc(t.client, uint64_t(R * L) * 4);
	upload_f32(t.dma, dx, random_f32(size_t(R * L), 3, -4, 4));
	neuron_cmd sm = make_cmd(NEURON_OP_SOFTMAX, {desc(dy, NEURON_DTYPE_F32, {R, L}), desc(dx, NEURON_DTYPE_F32, {R, L})});
	sm.iscalars[0] = 1;
	run(t.core, sm);
	use("before the restarts");
	const DriverMemory before = driver_memory_of(neurond_child());
	const uint64_t syncobjs_before = driver_syncobjs_of(neurond_child());
	cr_assert(before.host_kib >= kBytes / 1024, "fdinfo shows %llu KiB of host BOs, the buffer alone is %llu",
		  (unsigned long long)before.host_kib, (unsigned long long)(kBytes / 1024));
	for (int round = 0; round < 2; ++round) {
		// Killed once its first job ended (the driver's busy time grew).
		const pid_t daemon = wait_child(-1, 10000);
		const uint64_t busy = driver_compute_busy_ns(daemon);
		submit(t.core, sm);
		for (int waited = 0; waited < 20000 && driver_compute_busy_ns(daemon) == busy; ++waited)
			sleep_ms(1);
		// Before the second kill, BOs neurond made but never recorded (as a kill
		// between a BO's creation and its journal entry leaves them), in each of
		// its files: the next neurond closes those of the kept files (the others
		// close with the dying neurond).
		if (round == 1)
			cr_assert(plant_unrecorded_bos(daemon, kPlantedDevice, kPlantedHost) >= 2,
				  "neurond holds no tenant driver file");
		kill_neurond();
		use("after a restart");
		sync(t.core);
	}
	// Each kill landed inside the softmax (it ran again from its start).
	cr_assert_eq(count_in_log("outcome=pure_rerun"), 2u, "%s", g_daemon->log_tail().c_str());
	// The engine frees the last softmax's chain-state BO just after its completion
	// is visible to the tenant: give it a moment (a leaked BO never goes).
	DriverMemory after = driver_memory_of(neurond_child());
	for (int waited = 0; waited < 2000 && (after.host_kib != before.host_kib || after.hbm_kib != before.hbm_kib);
	     ++waited) {
		sleep_ms(1);
		after = driver_memory_of(neurond_child());
	}
	cr_log_info("driver files of neurond: host %llu -> %llu KiB, hbm %llu -> %llu KiB",
		    (unsigned long long)before.host_kib, (unsigned long long)after.host_kib,
		    (unsigned long long)before.hbm_kib, (unsigned long long)after.hbm_kib);
	cr_assert_eq(after.host_kib, before.host_kib, "host BOs in neurond's driver files: %llu KiB before, %llu after",
		     (unsigned long long)before.host_kib, (unsigned long long)after.host_kib);
	cr_assert_eq(after.hbm_kib, before.hbm_kib, "HBM BOs in neurond's driver files: %llu KiB before, %llu after",
		     (unsigned long long)before.hbm_kib, (unsigned long long)after.hbm_kib);
	// Both restarts closed what nothing claimed: the chain-state BO, and the
	// planted BOs in the second.
	cr_assert(count_in_log("state.unclaimed_closed") >= 2, "no restart closed unclaimed BOs:\n%s",
		  lines_in_log({"state.", "warn", "error"}).c_str());
	// Syncobjs: each new neurond takes over the ones of the kept files
	// (runtime/kmd/syncobj_pool.h) instead of making its own beside them.
	// Without that, each kill left the files' queue timelines (at least 2: a
	// core's and a DMA queue's) and the status syncobjs of the softmax's
	// unreaped jobs behind: 4 before, 14 after, under TCG. With it, the files
	// hold a few more only when the jobs in flight at once after a restart
	// outnumber those before (the pool grows to the most in flight): 6 -> 7.
	// The slack (3) stays below the 4 that two restarts' timelines alone leak.
	const uint64_t syncobjs_after = driver_syncobjs_of(neurond_child());
	cr_log_info("syncobjs in neurond's driver files: %llu -> %llu", (unsigned long long)syncobjs_before,
		    (unsigned long long)syncobjs_after);
	cr_assert(syncobjs_after <= syncobjs_before + kSyncobjSlack,
		  "syncobjs in neurond's driver files: %llu before two restarts, %llu after",
		  (unsigned long long)syncobjs_before, (unsigned long long)syncobjs_after);
	NEURON_OK_OR_FAIL(neuron_host_free(hb));
	t.close();
}

// kmd: a tile kernel a kill interrupts between its steps (each a compute job, its
// state in a BO of the tenant's file, runtime/kmd/README.md "Tile kernels") runs
// again from its start in the new neurond and gives the bits of the program run
// whole in this process; the interrupted run's BO (program and saved state) is
// freed (QueueProgress::scratch): the files hold no more HBM afterwards.
DAEMON_TEST(restart, kmd_interrupted_tile_kernel_runs_again_with_its_bits)
{
	Tenant t;
	t.open("kernel-kill", 0, 0);
	if (!neuron::test::daemon_runs_kmd(t.client)) {
		t.close();
		cr_skip_test("emu keeps a kernel's state in neurond (inflight_commands_run_exactly_once covers programs)");
	}
	// 2 x 32 steps of a 128 x 128 x 256 matmul each.
	constexpr int64_t M = 256, K = 4096, N = 256;
	std::vector<th::Arg> args{th::Arg(NEURON_DTYPE_F32, M * N), th::Arg(NEURON_DTYPE_F32, M * K),
				  th::Arg(NEURON_DTYPE_F32, K * N)};
	const auto a = random_f32(M * K, 21), b = random_f32(K * N, 22);
	std::memcpy(args[1].bytes.data(), a.data(), a.size() * 4);
	std::memcpy(args[2].bytes.data(), b.data(), b.size() * 4);
	const auto insns = tk::matmul(NEURON_DTYPE_F32, M, K, N);
	const th::KernelProgram kernel(th::sizes_of(args), insns);
	const std::vector<uint64_t> &bytes = kernel.bytes;
	uint64_t id = 0;
	NEURON_OK_OR_FAIL(kernel.enrol(t.client, &id));
	const uint64_t dc = dev_alloc(t.client, bytes[0]), da = dev_alloc(t.client, bytes[1]),
		       db = dev_alloc(t.client, bytes[2]);
	upload_f32(t.dma, da, a);
	upload_f32(t.dma, db, b);
	const uint64_t bindings[3] = {dc, da, db};
	const DriverMemory before = driver_memory_of(neurond_child());
	// Killed once the kernel's first job ended (the driver's busy time grew).
	const pid_t daemon = wait_child(-1, 10000);
	const uint64_t busy = driver_compute_busy_ns(daemon);
	// A replay's outputs are saved before its first job (backend/queue_keep.h): it
	// is restored, then run again.
	auto reruns = [] { return count_in_log("outcome=pure_rerun") + count_in_log("outcome=restored_then_rerun"); };
	const size_t reruns_before = reruns();
	uint64_t seq = 0;
	NEURON_OK_OR_FAIL(neuron_submit_program(t.core, id, bindings, 3, nullptr, &seq));
	for (int waited = 0; waited < 20000 && driver_compute_busy_ns(daemon) == busy; ++waited)
		sleep_ms(1);
	kill_neurond();
	NEURON_OK_OR_FAIL(neuron_queue_sync(t.core, kWaitNs));
	cr_assert_eq(reruns(), reruns_before + 1, "the kill did not land inside the kernel: %s",
		     g_daemon->log_tail().c_str());
	auto ptrs = th::pointers(args);
	neuron::tile::run(th::validated(insns, args), ptrs);
	const std::vector<float> got = download_f32(t.dma, dc, M * N);
	cr_assert(std::memcmp(got.data(), args[0].bytes.data(), bytes[0]) == 0,
		  "the kernel run again after the kill differs from the interpreter's bits");
	// The last run's BO is freed just after its completion is visible: a moment.
	DriverMemory after = driver_memory_of(neurond_child());
	for (int waited = 0; waited < 2000 && after.hbm_kib != before.hbm_kib; ++waited) {
		sleep_ms(1);
		after = driver_memory_of(neurond_child());
	}
	cr_assert_eq(after.hbm_kib, before.hbm_kib, "HBM BOs in neurond's driver files: %llu KiB before, %llu after",
		     (unsigned long long)before.hbm_kib, (unsigned long long)after.hbm_kib);
	NEURON_OK_OR_FAIL(neuron_program_release(t.client, id));
	t.close();
}

// Without a supervisor that keeps state, a restart loses the tenant, and libneuron
// says so (it does not hang, and it does not pretend).
Test(restart_unkept, plain_neurond_loses_the_tenant_clearly, .init = daemon_up, .fini = daemon_down, .timeout = 60)
{
	Tenant t;
	t.open("unkept", 0, 0);
	const uint64_t x = dev_alloc(t.client, 4096);
	g_daemon->kill9();
	uint64_t y = 0;
	const neuron_status s = neuron_alloc(t.client, 0, 4096, 0, &y);
	cr_assert_eq(s, NEURON_ERR_DAEMON_LOST, "alloc after the daemon died: %s", describe(s).c_str());
	cr_assert(std::strstr(neuron_last_error(), "without") != nullptr, "the error should say the state is not kept: %s",
		  neuron_last_error());
	(void)x;
	t.close();
}
