// What only the kmd backend does, checked against the kernel's own view (sysfs and
// /proc) rather than the daemon's: one open driver file per tenant, HBM accounting
// that is the driver's, and large commands cut into tiles that reach the kernel as
// several bounded compute jobs. Runs in
// the QEMU suite (tests/driver/daemon-suite.sh) where $NEURON_DAEMON is neurond
// --backend kmd; on an emu daemon every test is skipped.
#include "daemon_backend.h"
#include "daemon_test.h"

#include <dirent.h>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>

using namespace dt;

TestSuite(kmd_backend, .init = daemon_up, .fini = daemon_down, .timeout = 120);

namespace {

const char *kSysfs = "/sys/class/accel/accel0/device/";

std::vector<uint64_t> sysfs_values(const std::string &name)
{
	std::ifstream in(kSysfs + name);
	cr_assert(in, "cannot read %s%s", kSysfs, name.c_str());
	std::vector<uint64_t> v;
	uint64_t x;
	while (in >> x)
		v.push_back(x);
	cr_assert(!v.empty(), "%s%s is empty", kSysfs, name.c_str());
	return v;
}

// Compute jobs the driver completed on every core of accel0 (physical cores are the
// scheduler's choice).
uint64_t jobs_completed_on_all_cores()
{
	uint64_t n = 0;
	for (uint64_t j : sysfs_values("core_jobs_completed"))
		n += j;
	return n;
}

// Files of /dev/accel/accel0 the daemon process has open.
int accel0_files(pid_t pid)
{
	const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
	DIR *d = opendir(dir.c_str());
	cr_assert(d, "cannot list %s", dir.c_str());
	int n = 0;
	while (struct dirent *e = readdir(d)) {
		char target[256] = {};
		const std::string link = dir + "/" + e->d_name;
		const ssize_t len = readlink(link.c_str(), target, sizeof(target) - 1);
		if (len > 0 && std::string(target, static_cast<size_t>(len)) == "/dev/accel/accel0")
			++n;
	}
	closedir(d);
	return n;
}

int wait_accel0_files(pid_t pid, int expected)
{
	int n = accel0_files(pid);
	for (int i = 0; i < 200 && n != expected; ++i) {
		sleep_ms(10);
		n = accel0_files(pid);
	}
	return n;
}

} // namespace

DAEMON_TEST(kmd_backend, one_driver_file_per_tenant)
{
	neuron_client *probe = connect("probe");
	if (!neuron::test::daemon_runs_kmd(probe)) {
		neuron_disconnect(probe);
		cr_skip("neurond runs the emu backend (the QEMU suite runs this with --backend kmd)");
	}
	const pid_t pid = g_daemon->pid();
	const int with_probe = accel0_files(pid);
	// The controller, the engine and the probe's context at least.
	cr_assert(with_probe >= 3, "neurond has %d files of accel0 open, expected controller + engine + probe",
		  with_probe);
	neuron_client *a = connect("a");
	cr_assert_eq(wait_accel0_files(pid, with_probe + 1), with_probe + 1, "a new tenant did not get its own file");
	neuron_client *b = connect("b");
	cr_assert_eq(wait_accel0_files(pid, with_probe + 2), with_probe + 2, "a second tenant did not get its own file");
	neuron_disconnect(a);
	cr_assert_eq(wait_accel0_files(pid, with_probe + 1), with_probe + 1, "a gone tenant's file stayed open");
	neuron_disconnect(b);
	neuron_disconnect(probe);
	cr_assert_eq(wait_accel0_files(pid, with_probe - 1), with_probe - 1, "files stayed open after disconnects");
}

DAEMON_TEST(kmd_backend, hbm_accounting_is_the_drivers)
{
	neuron_client *c = connect("hbm");
	if (!neuron::test::daemon_runs_kmd(c)) {
		neuron_disconnect(c);
		cr_skip("neurond runs the emu backend (the QEMU suite runs this with --backend kmd)");
	}
	const uint64_t before = sysfs_values("hbm_used_bytes")[0];
	cr_assert_eq(hbm_used(c), before, "neuron_device_info and sysfs disagree on HBM in use");
	const uint64_t size = (1 << 20) + 10; // not a page multiple: the BO is rounded up
	const uint64_t addr = dev_alloc(c, size);
	const uint64_t during = sysfs_values("hbm_used_bytes")[0];
	cr_assert_eq(during - before, (size + 4095) / 4096 * 4096, "sysfs hbm_used grew by %llu for a %llu-byte allocation",
		     (unsigned long long)(during - before), (unsigned long long)size);
	cr_assert_eq(hbm_used(c), during, "neuron_device_info does not report the driver's HBM in use");
	NEURON_OK_OR_FAIL(neuron_free(c, 0, addr));
	cr_assert_eq(wait_hbm_used(c, 0, before, 2000), before, "the freed BO did not go back to the driver");
	cr_assert_eq(sysfs_values("hbm_used_bytes")[0], before);
	neuron_disconnect(c);
}

DAEMON_TEST(kmd_backend, large_matmul_runs_as_several_bounded_jobs)
{
	Tenant t;
	t.open("tiles", 0, 1);
	if (!neuron::test::daemon_runs_kmd(t.client)) {
		t.close();
		cr_skip("neurond runs the emu backend (the QEMU suite runs this with --backend kmd)");
	}
	// 2^25 multiply-adds: 8 tiles of 128x128x256 under neurond's default tile
	// budget (2^24), which go to the kernel a few at a time (one per host thread).
	constexpr int M = 512, K = 256, N = 256;
	std::vector<float> a(M * K), b(K * N);
	for (int i = 0; i < M * K; ++i)
		a[i] = static_cast<float>((i * 7) % 13) / 13.0f - 0.5f;
	for (int i = 0; i < K * N; ++i)
		b[i] = static_cast<float>((i * 5) % 11) / 11.0f - 0.5f;
	const uint64_t da = dev_alloc(t.client, a.size() * 4), db = dev_alloc(t.client, b.size() * 4),
		       dc = dev_alloc(t.client, M * N * 4);
	upload_f32(t.dma, da, a);
	upload_f32(t.dma, db, b);
	const uint64_t jobs_before = jobs_completed_on_all_cores();
	run(t.core, make_matmul(desc(dc, NEURON_DTYPE_F32, {M, N}), desc(da, NEURON_DTYPE_F32, {M, K}),
				desc(db, NEURON_DTYPE_F32, {K, N})));
	// Physical cores are the scheduler's choice: count the jobs of every core.
	const uint64_t jobs = jobs_completed_on_all_cores() - jobs_before;
	cr_assert(jobs >= 2, "the 2^25-MAC matmul ran as %llu job(s), expected its 8 tiles in several",
		  (unsigned long long)jobs);
	std::vector<double> ref(M * N);
	for (int i = 0; i < M; ++i)
		for (int j = 0; j < N; ++j) {
			double s = 0;
			for (int k = 0; k < K; ++k)
				s += double(a[i * K + k]) * b[k * N + j];
			ref[i * N + j] = s;
		}
	expect_close(download_f32(t.dma, dc, M * N), ref, 1e-4, 1e-4, "tiled matmul");
	t.close();
}

// A program (<neuron/program.h>) replays through the driver: its nodes reach the
// kernel as compute jobs (counted in sysfs), in order, and the result is the
// CPU's. Two nodes that depend on each other: fill arg 0 with 1.5, then
// arg 1 = arg 0 @ arg 0 (16 x 16: every element 16 * 2.25 = 36).
DAEMON_TEST(kmd_backend, programs_replay_as_driver_jobs)
{
	Tenant t;
	t.open("programs", 0, 1);
	if (!neuron::test::daemon_runs_kmd(t.client)) {
		t.close();
		cr_skip("neurond runs the emu backend (the QEMU suite runs this with --backend kmd)");
	}
	constexpr int64_t N = 16;
	auto arg = [](uint32_t index) {
		neuron_tensor_desc d = desc(0, NEURON_DTYPE_F32, {N, N});
		d.mem_space = NEURON_MEM_PROGRAM_ARG;
		d.host_buffer = index;
		return d;
	};
	uint64_t arg_bytes[2] = {N * N * 4, N * N * 4};
	neuron_program_node nodes[2]{};
	nodes[0].cmd = make_fill_f32(arg(0), 1.5);
	nodes[0].label = "fill";
	nodes[1].cmd = make_matmul(arg(1), arg(0), arg(0));
	nodes[1].label = "square";
	const uint32_t dep = 0;
	nodes[1].deps = &dep;
	nodes[1].dep_count = 1;
	neuron_program_desc d{};
	d.arg_count = 2;
	d.arg_bytes = arg_bytes;
	d.node_count = 2;
	d.nodes = nodes;
	uint64_t id = 0;
	NEURON_OK_OR_FAIL(neuron_program_register(t.client, &d, &id));
	const uint64_t a = dev_alloc(t.client, N * N * 4), out = dev_alloc(t.client, N * N * 4);
	const uint64_t jobs_before = jobs_completed_on_all_cores();
	const uint64_t bindings[2] = {a, out};
	uint64_t seq = 0;
	NEURON_OK_OR_FAIL(neuron_submit_program(t.core, id, bindings, 2, nullptr, &seq));
	sync(t.core);
	const uint64_t jobs = jobs_completed_on_all_cores() - jobs_before;
	cr_assert(jobs >= 2, "the replay of 2 nodes ran as %llu compute job(s) in the driver", (unsigned long long)jobs);
	expect_close(download_f32(t.dma, out, N * N), std::vector<double>(N * N, 36.0), 0, 0, "replayed fill + square");
	NEURON_OK_OR_FAIL(neuron_program_release(t.client, id));
	t.close();
}
