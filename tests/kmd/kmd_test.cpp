// kmd_test: the kmd backend library (runtime/kmd) against the real neuron.ko,
// run inside the QEMU guest by tests/driver/run-qemu-suite.sh (as root, the
// device nodes chmod 0666 so a dropped-privilege child can open them).
//
// usage: kmd_test [name-prefix...]
// Each test runs in a forked child. Prints "PASS: kmd_<name>" / "FAIL: kmd_<name>"
// (reasons on "# " lines) and finally "# kmd_test: N passed, N failed".
#include <collective_job.h>
#include <kmd.h>
#include <tile_job.h>

#include <tile/execution.h>
#include <tile/program.h>

#include "../tile/canonical_kernels.h"

#include <xf86drm.h>
#include <drm/neuron_accel.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <memory>
#include <grp.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace neuron::kmd;

namespace {

struct Test {
	const char *name;
	void (*fn)();
};
std::vector<Test> &registry()
{
	static std::vector<Test> r;
	return r;
}
struct Reg {
	Reg(const char *n, void (*f)()) { registry().push_back({n, f}); }
};
#define TEST(n)                            \
	static void n();                   \
	static Reg reg_##n(#n, n);         \
	static void n()

[[noreturn]] void failf(const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	std::printf("# %s:%d: ", file, line);
	va_start(ap, fmt);
	std::vprintf(fmt, ap);
	va_end(ap);
	std::printf("\n");
	std::fflush(stdout);
	_exit(1);
}
#define CHECK(c, ...) \
	do { if (!(c)) failf(__FILE__, __LINE__, "check failed: " #c " " __VA_ARGS__); } while (0)
// A call expected to throw kmd::Error with errno e.
#define EXPECT_ERRNO(e, call)                                                                       \
	do {                                                                                        \
		int got_ = 0;                                                                       \
		try { call; } catch (const Error &x_) { got_ = x_.code();                            \
			std::printf("#   (expected) %s\n", x_.what()); }                           \
		if (got_ != (e))                                                                    \
			failf(__FILE__, __LINE__, "%s: got %s, want %s", #call,                      \
			      got_ ? std::strerror(got_) : "success", std::strerror(e));            \
	} while (0)

constexpr int kMinor = 0;
const char *kPath = "/dev/accel/accel0";
constexpr int64_t kWaitMs = 20000;

// --- command encoding -----------------------------------------------------------

neuron_tensor_desc desc(uint64_t addr, std::initializer_list<int64_t> sizes, uint8_t dtype = NEURON_DTYPE_F32)
{
	neuron_tensor_desc d{};
	d.addr = addr;
	d.mem_space = NEURON_MEM_DEVICE;
	d.dtype = dtype;
	d.ndim = static_cast<uint8_t>(sizes.size());
	int i = 0;
	for (int64_t s : sizes)
		d.sizes[i++] = s;
	int64_t stride = 1;
	for (int k = d.ndim - 1; k >= 0; --k) {
		d.strides[k] = stride;
		stride *= d.sizes[k];
	}
	return d;
}

neuron_cmd cmd(uint16_t op, std::initializer_list<neuron_tensor_desc> ops, uint64_t tag = 0)
{
	neuron_cmd c{};
	c.opcode = op;
	c.num_operands = static_cast<uint8_t>(ops.size());
	c.user_tag = tag;
	int i = 0;
	for (const auto &d : ops)
		c.operands[i++] = d;
	return c;
}

neuron_cmd fill(uint64_t addr, int64_t n, double v)
{
	neuron_cmd c = cmd(NEURON_OP_FILL, {desc(addr, {n})});
	c.fscalars.f[0] = v;
	return c;
}

neuron_cmd add(uint64_t out, uint64_t a, uint64_t b, int64_t n, double alpha = 1.0)
{
	neuron_cmd c = cmd(NEURON_OP_ADD, {desc(out, {n}), desc(a, {n}), desc(b, {n})});
	c.fscalars.f[0] = alpha;
	return c;
}

neuron_cmd matmul(uint64_t out, uint64_t a, uint64_t b, int64_t m, int64_t k, int64_t n)
{
	neuron_cmd c = cmd(NEURON_OP_MATMUL, {desc(out, {m, n}), desc(a, {m, k}), desc(b, {k, n})});
	c.fscalars.f[0] = 1.0;
	c.fscalars.f[1] = 0.0;
	return c;
}

// --- helpers --------------------------------------------------------------------

struct Tenant {
	std::unique_ptr<KmdContext> ctx;
	HostBuffer staging;
};

void upload(KmdContext &ctx, const DeviceBuffer &dst, const void *src, uint64_t size, uint64_t dst_off = 0)
{
	HostBuffer h = ctx.create_host(size);
	std::memcpy(h.data(), src, size);
	DmaCopy c{h.handle, 0, dst.handle, dst_off, size};
	int r = ctx.wait(ctx.dma(0, std::span(&c, 1)), deadline_after_ms(kWaitMs));
	CHECK(r == 0, "upload DMA: %s", std::strerror(-r));
	ctx.free(h);
}

std::vector<std::byte> download(KmdContext &ctx, const DeviceBuffer &src, uint64_t size, uint64_t src_off = 0)
{
	HostBuffer h = ctx.create_host(size);
	DmaCopy c{src.handle, src_off, h.handle, 0, size};
	int r = ctx.wait(ctx.dma(1, std::span(&c, 1)), deadline_after_ms(kWaitMs));
	CHECK(r == 0, "download DMA: %s", std::strerror(-r));
	std::vector<std::byte> out(size);
	std::memcpy(out.data(), h.data(), size);
	ctx.free(h);
	return out;
}

std::vector<float> download_f32(KmdContext &ctx, const DeviceBuffer &src, size_t n, uint64_t off = 0)
{
	auto b = download(ctx, src, n * 4, off);
	std::vector<float> f(n);
	std::memcpy(f.data(), b.data(), n * 4);
	return f;
}

void pattern(std::byte *p, uint64_t n, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 1;
	for (uint64_t i = 0; i < n; ++i) {
		x = x * 1664525u + 1013904223u;
		p[i] = static_cast<std::byte>(x >> 24);
	}
}

std::vector<float> randf(size_t n, uint32_t seed)
{
	std::vector<float> v(n);
	uint32_t x = seed;
	for (auto &f : v) {
		x = x * 1664525u + 1013904223u;
		f = static_cast<float>((x >> 8) % 2001) / 1000.0f - 1.0f;
	}
	return v;
}

bool near(float got, float want, float tol = 1e-4f)
{
	return std::fabs(got - want) <= tol * std::max(1.0f, std::fabs(want));
}

// --- tests ------------------------------------------------------------------------

TEST(discover_finds_neuron_nodes)
{
	std::vector<std::string> skipped;
	auto nodes = discover(&skipped);
	for (const auto &s : skipped)
		std::printf("#   skipped: %s\n", s.c_str());
	CHECK(nodes.size() == 2, "found %zu nodes, the guest loads devices=2", nodes.size());
	CHECK(nodes[0].minor == 0 && nodes[0].path == "/dev/accel/accel0");
	CHECK(nodes[1].minor == 1);
	EXPECT_ERRNO(ENOENT, KmdDevice("/dev/accel/accel9"));
	EXPECT_ERRNO(ENODEV, KmdDevice("/dev/null"));
}

TEST(device_info_and_hbm_accounting)
{
	KmdDevice dev(kMinor);
	const DeviceInfo &i = dev.info();
	std::printf("#   %s: %s %s, %u cores, %u DMA queues, HBM %llu MiB, uAPI %u.%u, max %u cmds/job\n",
		    dev.path().c_str(), i.platform_name.c_str(), i.profile_name.c_str(), i.num_cores,
		    i.num_dma_queues, static_cast<unsigned long long>(i.hbm_size >> 20), i.api_major, i.api_minor,
		    i.max_cmds_per_job());
	CHECK(i.platform == DRM_NEURON_PLATFORM_SIMULATED && i.platform_name == "simulated");
	CHECK(i.profile == DRM_NEURON_PROFILE_TRN2 && i.profile_name == "trn2");
	CHECK(i.num_cores == 8 && i.num_dma_queues == 2);
	CHECK(i.hbm_size == 256ull << 20);
	const uint64_t need = DRM_NEURON_CAP_DEVICE_BO | DRM_NEURON_CAP_TIMELINE_SYNCOBJ | DRM_NEURON_CAP_DMA_QUEUES |
			      DRM_NEURON_CAP_ENGINE;
	CHECK((i.capabilities & need) == need);
	CHECK(i.max_cmds_per_job() >= 16);
	auto ctx = dev.create_context("t", 0);
	const uint64_t used0 = dev.hbm_used();
	DeviceBuffer b = ctx->alloc_device(3 << 20);
	CHECK(b.size == 3u << 20);
	CHECK(dev.hbm_used() == used0 + b.size, "used %llu", static_cast<unsigned long long>(dev.hbm_used()));
	CHECK(dev.refresh_info().hbm_used == used0 + b.size);
	ctx->free(b);
	CHECK(dev.hbm_used() == used0);
	EXPECT_ERRNO(ENOSPC, ctx->alloc_device(1ull << 30));
}

TEST(dma_roundtrip_sizes)
{
	KmdDevice dev(kMinor);
	auto ctx = dev.create_context("dma", 0);
	const uint64_t sizes[] = {1, 7, 4095, 4096, 65537, (1 << 20) + 3, 8 << 20};
	for (uint64_t n : sizes) {
		DeviceBuffer d = ctx->alloc_device(n + 8192);
		HostBuffer in = ctx->create_host(n), out = ctx->create_host(n);
		pattern(in.data(), n, static_cast<uint32_t>(n));
		const uint64_t off = n % 4096 ? 4097 : 0; // odd HBM offsets too
		DmaCopy up{in.handle, 0, d.handle, off, n};
		Fence f1 = ctx->dma(0, std::span(&up, 1));
		DmaCopy down{d.handle, off, out.handle, 0, n};
		Fence f2 = ctx->dma(1, std::span(&down, 1), std::span(&f1, 1)); // other queue, waits on f1
		CHECK(ctx->wait(f2, deadline_after_ms(kWaitMs)) == 0);
		CHECK(ctx->poll(f1) == 1);
		CHECK(std::memcmp(in.data(), out.data(), n) == 0, "size %llu", static_cast<unsigned long long>(n));
		ctx->free(in);
		ctx->free(out);
		ctx->free(d);
	}
	// HBM -> HBM, several copies in one job, then back.
	const uint64_t n = 300000;
	DeviceBuffer a = ctx->alloc_device(n), b = ctx->alloc_device(2 * n);
	std::vector<std::byte> src(n);
	pattern(src.data(), n, 99);
	upload(*ctx, a, src.data(), n);
	DmaCopy cs[2] = {{a.handle, 0, b.handle, n, n / 2}, {a.handle, n / 2, b.handle, n + n / 2, n - n / 2}};
	CHECK(ctx->wait(ctx->dma(1, cs), deadline_after_ms(kWaitMs)) == 0);
	auto back = download(*ctx, b, n, n);
	CHECK(std::memcmp(back.data(), src.data(), n) == 0);
	// A bad copy is refused at submit with a clear error.
	DmaCopy bad{a.handle, a.size - 1, b.handle, 0, 2};
	EXPECT_ERRNO(EINVAL, ctx->dma(0, std::span(&bad, 1)));
}

TEST(host_buffers_export_and_memfd_import)
{
	KmdDevice dev(kMinor);
	auto ctx = dev.create_context("host", 0);
	DeviceBuffer d = ctx->alloc_device(1 << 20);
	const uint64_t n = 256 * 1024;

	// Native: the tenant gets a dma-buf fd and maps it.
	HostBuffer nat = ctx->create_host(n);
	int dfd = ctx->export_fd(nat);
	auto *tenant = static_cast<std::byte *>(mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, dfd, 0));
	CHECK(tenant != MAP_FAILED, "mmap of the exported dma-buf: %s", std::strerror(errno));
	pattern(tenant, n, 5);
	DmaCopy c1{nat.handle, 0, d.handle, 0, n};
	CHECK(ctx->wait(ctx->dma(0, std::span(&c1, 1)), deadline_after_ms(kWaitMs)) == 0);
	std::memset(tenant, 0, n);
	DmaCopy c2{d.handle, 0, nat.handle, 0, n};
	CHECK(ctx->wait(ctx->dma(0, std::span(&c2, 1)), deadline_after_ms(kWaitMs)) == 0);
	std::vector<std::byte> want(n);
	pattern(want.data(), n, 5);
	CHECK(std::memcmp(tenant, want.data(), n) == 0, "through the dma-buf mapping");
	munmap(tenant, n);
	close(dfd);

	// A tenant memfd (as libneuron creates them), imported both ways.
	for (ImportMode mode : {ImportMode::UdmabufOnly, ImportMode::StagedOnly, ImportMode::Auto}) {
		int mfd = memfd_create("tenant", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		CHECK(mfd >= 0 && ftruncate(mfd, n) == 0);
		auto *tm = static_cast<std::byte *>(mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0));
		CHECK(tm != MAP_FAILED);
		pattern(tm, n, 11 + static_cast<int>(mode));
		HostBuffer hb = ctx->import_memfd(mfd, n, mode);
		const char *kind = hb.kind == HostKind::Udmabuf ? "udmabuf" : hb.kind == HostKind::Staged ? "staged" : "?";
		std::printf("#   import mode %d -> %s\n", static_cast<int>(mode), kind);
		if (mode == ImportMode::StagedOnly)
			CHECK(hb.kind == HostKind::Staged);
		else
			CHECK(hb.kind == HostKind::Udmabuf, "udmabuf import fell back to %s", kind);
		ctx->stage_in(hb, 0, n);
		DmaCopy up{hb.handle, 0, d.handle, 0, n};
		CHECK(ctx->wait(ctx->dma(0, std::span(&up, 1)), deadline_after_ms(kWaitMs)) == 0);
		std::memset(tm, 0xee, n);
		ctx->stage_in(hb, 0, n);
		DmaCopy down{d.handle, 0, hb.handle, 0, n};
		CHECK(ctx->wait(ctx->dma(1, std::span(&down, 1)), deadline_after_ms(kWaitMs)) == 0);
		ctx->stage_out(hb, 0, n);
		pattern(want.data(), n, 11 + static_cast<int>(mode));
		CHECK(std::memcmp(tm, want.data(), n) == 0, "tenant memfd sees the data (%s)", kind);
		ctx->free(hb);
		munmap(tm, n);
		close(mfd);
	}
	// A memfd that cannot be sealed is still importable (staged).
	int mfd = memfd_create("unsealable", MFD_CLOEXEC);
	CHECK(mfd >= 0 && ftruncate(mfd, 8192) == 0);
	HostBuffer hb = ctx->import_memfd(mfd, 8192);
	CHECK(hb.kind == HostKind::Staged);
	EXPECT_ERRNO(EOPNOTSUPP, ctx->import_memfd(mfd, 8192, ImportMode::UdmabufOnly));
	EXPECT_ERRNO(EINVAL, ctx->import_memfd(mfd, 8193));
	ctx->free(hb);
	close(mfd);
}

TEST(compute_fill_add_matmul)
{
	KmdDevice dev(kMinor);
	std::atomic<int> faults{0};
	KmdEngineOptions eo;
	eo.on_fault = [&](const EngineJobFault &) { faults++; };
	KmdEngine engine(kPath, eo); // its own workers = "the engine in another thread"
	CHECK(dev.refresh_info().engine_attached);
	auto ctx = dev.create_context("tenant", 0);

	// FILL + ADD in one job (two commands), inputs uploaded by DMA first.
	const int64_t n = 10000;
	DeviceBuffer a = ctx->alloc_device(n * 4), b = ctx->alloc_device(n * 4), o = ctx->alloc_device(n * 4);
	auto bv = randf(n, 1);
	HostBuffer h = ctx->create_host(n * 4);
	std::memcpy(h.data(), bv.data(), n * 4);
	DmaCopy up{h.handle, 0, b.handle, 0, static_cast<uint64_t>(n * 4)};
	Fence fu = ctx->dma(0, std::span(&up, 1));
	neuron_cmd job1[2] = {fill(a.device_addr, n, 1.5), add(o.device_addr, a.device_addr, b.device_addr, n, 2.0)};
	JobBo bos1[3] = {{a.handle, true, true}, {b.handle, true, false}, {o.handle, false, true}};
	Fence fc = ctx->compute(3, job1, bos1, std::span(&fu, 1));
	CHECK(ctx->wait(fc, deadline_after_ms(kWaitMs)) == 0);
	auto got = download_f32(*ctx, o, n);
	for (int64_t i = 0; i < n; ++i)
		CHECK(near(got[i], 1.5f + 2.0f * bv[i]), "add[%lld] = %g, want %g", static_cast<long long>(i), got[i],
		      1.5f + 2.0f * bv[i]);

	// MATMUL on every core, checked against a CPU reference.
	const int64_t M = 37, K = 48, N = 29;
	auto av = randf(M * K, 7), bm = randf(K * N, 8);
	std::vector<float> ref(M * N, 0.0f);
	for (int64_t i = 0; i < M; ++i)
		for (int64_t j = 0; j < N; ++j) {
			double s = 0;
			for (int64_t k = 0; k < K; ++k)
				s += static_cast<double>(av[i * K + k]) * bm[k * N + j];
			ref[i * N + j] = static_cast<float>(s);
		}
	DeviceBuffer ma = ctx->alloc_device(M * K * 4), mb = ctx->alloc_device(K * N * 4);
	upload(*ctx, ma, av.data(), M * K * 4);
	upload(*ctx, mb, bm.data(), K * N * 4);
	const uint32_t cores = dev.info().num_cores;
	std::vector<DeviceBuffer> outs;
	std::vector<Fence> fences;
	for (uint32_t c = 0; c < cores; ++c) {
		outs.push_back(ctx->alloc_device(M * N * 4));
		neuron_cmd mm = matmul(outs.back().device_addr, ma.device_addr, mb.device_addr, M, K, N);
		JobBo jb[3] = {{outs.back().handle, false, true}, {ma.handle, true, false}, {mb.handle, true, false}};
		fences.push_back(ctx->compute(c, std::span(&mm, 1), jb));
	}
	for (uint32_t c = 0; c < cores; ++c) {
		CHECK(ctx->wait(fences[c], deadline_after_ms(kWaitMs)) == 0, "core %u", c);
		auto mo = download_f32(*ctx, outs[c], M * N);
		for (int64_t i = 0; i < M * N; ++i)
			CHECK(near(mo[i], ref[i], 1e-4f), "core %u matmul[%lld] = %g, want %g", c,
			      static_cast<long long>(i), mo[i], ref[i]);
	}
	// A chain on one core: 20 jobs each adding 1 in place, in order.
	DeviceBuffer acc = ctx->alloc_device(4096), one = ctx->alloc_device(4096);
	neuron_cmd init[2] = {fill(acc.device_addr, 1024, 0.0), fill(one.device_addr, 1024, 1.0)};
	JobBo ib[2] = {{acc.handle, false, true}, {one.handle, false, true}};
	Fence last = ctx->compute(5, init, ib);
	for (int i = 0; i < 20; ++i) {
		neuron_cmd inc = add(acc.device_addr, acc.device_addr, one.device_addr, 1024);
		JobBo jb[2] = {{acc.handle, true, true}, {one.handle, true, false}};
		last = ctx->compute(5, std::span(&inc, 1), jb);
	}
	CHECK(ctx->wait(last, deadline_after_ms(kWaitMs)) == 0);
	auto av2 = download_f32(*ctx, acc, 1024);
	for (float v : av2)
		CHECK(v == 20.0f, "chained adds: %g", v);
	EngineStats st = engine.stats();
	std::printf("#   engine: %llu jobs, %llu commands, %llu failed\n", static_cast<unsigned long long>(st.jobs),
		    static_cast<unsigned long long>(st.commands), static_cast<unsigned long long>(st.failed));
	CHECK(st.jobs == 1 + cores + 21 && st.failed == 0 && faults == 0);
	CHECK(engine.last_error().empty(), "%s", engine.last_error().c_str());
}

TEST(compute_faults_are_job_errors)
{
	KmdDevice dev(kMinor);
	std::vector<EngineJobFault> seen;
	std::mutex mu;
	KmdEngineOptions eo;
	eo.on_fault = [&](const EngineJobFault &f) {
		std::lock_guard l(mu);
		seen.push_back(f);
	};
	KmdEngine engine(kPath, eo);
	auto ctx = dev.create_context("faulty", 0);
	DeviceBuffer a = ctx->alloc_device(4096), b = ctx->alloc_device(4096), ro = ctx->alloc_device(4096);
	auto run = [&](neuron_cmd c, std::vector<JobBo> bos) {
		return ctx->wait(ctx->compute(1, std::span(&c, 1), bos), deadline_after_ms(kWaitMs));
	};
	// Past the end of its BO.
	CHECK(run(fill(a.device_addr, 1025, 1.0), {{a.handle, false, true}}) == -EFAULT);
	// A BO the job did not list.
	CHECK(run(fill(b.device_addr, 16, 1.0), {{a.handle, false, true}}) == -EFAULT);
	// Output into a BO declared read-only.
	CHECK(run(fill(ro.device_addr, 16, 1.0), {{ro.handle, true, false}}) == -EFAULT);
	// Unknown opcode, bad operand, overlap, cross-queue wait.
	neuron_cmd bad = fill(a.device_addr, 16, 1.0);
	bad.opcode = 200;
	CHECK(run(bad, {{a.handle, false, true}}) == -EOPNOTSUPP);
	bad = fill(a.device_addr, 16, 1.0);
	bad.reserved0 = 1;
	CHECK(run(bad, {{a.handle, false, true}}) == -EINVAL);
	neuron_cmd ov = matmul(a.device_addr, a.device_addr + 32, b.device_addr, 4, 4, 4);
	CHECK(run(ov, {{a.handle, true, true}, {b.handle, true, false}}) == -EADDRINUSE);
	bad = fill(a.device_addr, 16, 1.0);
	bad.wait.queue_id = 3;
	bad.wait.value = 1;
	CHECK(run(bad, {{a.handle, false, true}}) == -ENOMSG);
	// A job is checked whole before it runs: the good first command did not run.
	neuron_cmd two[2] = {fill(a.device_addr, 16, 7.0), fill(a.device_addr, 2000, 1.0)};
	CHECK(ctx->wait(ctx->compute(1, two, std::vector<JobBo>{{a.handle, false, true}}),
			deadline_after_ms(kWaitMs)) == -EFAULT);
	auto v = download_f32(*ctx, a, 16);
	CHECK(v[0] == 0.0f, "first command of a rejected job ran: %g", v[0]);
	// The queue still works afterwards (the kernel does not stop it).
	CHECK(run(fill(a.device_addr, 16, 3.0), {{a.handle, false, true}}) == 0);
	v = download_f32(*ctx, a, 16);
	CHECK(v[15] == 3.0f);
	std::lock_guard l(mu);
	CHECK(seen.size() == 8, "%zu faults reported", seen.size());
	CHECK(seen[0].code == NEURON_FAULT_OUT_OF_BOUNDS && seen[0].core == 1);
	CHECK(seen[3].code == NEURON_FAULT_BAD_OPCODE && seen[5].code == NEURON_FAULT_OVERLAP);
	CHECK(seen[7].cmd_index == 1, "cmd index %u", seen[7].cmd_index);
	for (const auto &f : seen)
		std::printf("#   fault %u (job %llu cmd %u): %s\n", f.code, static_cast<unsigned long long>(f.job_seq),
			    f.cmd_index, f.reason.c_str());
	CHECK(errno_to_fault(-EFAULT) == NEURON_FAULT_OUT_OF_BOUNDS && errno_to_fault(ENODEV) == NEURON_FAULT_EXEC);
}

TEST(full_jobs_address_base_and_completed)
{
	KmdDevice dev(kMinor);
	constexpr uint64_t base = 1ull << 44; // emu-style tenant addresses
	KmdEngineOptions eo;
	eo.address_base = base;
	eo.workers = 2;
	KmdEngine engine(kPath, eo);
	auto ctx = dev.create_context("big", 0);
	const uint32_t max = dev.info().max_cmds_per_job();
	DeviceBuffer buf = ctx->alloc_device(max * 64);
	// A job of the largest size: each command fills its own 16 floats.
	std::vector<neuron_cmd> cmds;
	for (uint32_t i = 0; i < max; ++i)
		cmds.push_back(fill(base + buf.device_addr + i * 64, 16, static_cast<double>(i)));
	JobBo jb{buf.handle, false, true};
	Fence f = ctx->compute(4, cmds, std::span(&jb, 1));
	CHECK(ctx->wait(f, deadline_after_ms(kWaitMs)) == 0);
	auto v = download_f32(*ctx, buf, max * 16);
	for (uint32_t i = 0; i < max; ++i)
		CHECK(v[i * 16] == static_cast<float>(i) && v[i * 16 + 15] == static_cast<float>(i), "cmd %u", i);
	// One command more is refused by the kernel at submit.
	cmds.push_back(cmds.back());
	EXPECT_ERRNO(EINVAL, ctx->compute(4, cmds, std::span(&jb, 1)));
	// Addresses without the base are below it: out of bounds.
	neuron_cmd raw = fill(buf.device_addr, 16, 1.0);
	Fence bad = ctx->compute(4, std::span(&raw, 1), std::span(&jb, 1));
	CHECK(ctx->wait(bad, deadline_after_ms(kWaitMs)) == -EFAULT);
	// The queue timeline's completed point follows the jobs.
	for (int i = 0; i < 5; ++i) {
		neuron_cmd ok = fill(base + buf.device_addr, 16, 2.0);
		f = ctx->compute(4, std::span(&ok, 1), std::span(&jb, 1));
	}
	CHECK(ctx->wait(f, deadline_after_ms(kWaitMs)) == 0);
	CHECK(ctx->completed(f.syncobj) == f.point && f.point == 7, "completed %llu, point %llu",
	      static_cast<unsigned long long>(ctx->completed(f.syncobj)), static_cast<unsigned long long>(f.point));
	CHECK(ctx->poll(bad) == -EFAULT, "status of a reaped failed job is kept");
	CHECK(ctx->wait_bo(buf.handle, deadline_after_ms(kWaitMs)));
	CHECK(!ctx->banned());
}

TEST(compute_without_engine_fails_fast)
{
	KmdDevice dev(kMinor);
	CHECK(!dev.refresh_info().engine_attached);
	auto ctx = dev.create_context("lonely", 0);
	DeviceBuffer a = ctx->alloc_device(4096);
	neuron_cmd c = fill(a.device_addr, 16, 1.0);
	JobBo jb{a.handle, false, true};
	const int64_t t0 = now_ns();
	CHECK(ctx->wait(ctx->compute(0, std::span(&c, 1), std::span(&jb, 1)), deadline_after_ms(kWaitMs)) == -ENODEV);
	CHECK(now_ns() - t0 < 1000000000, "took %lld ms", static_cast<long long>((now_ns() - t0) / 1000000));
	// A second engine is refused while one is attached.
	KmdEngine e1(kPath);
	EXPECT_ERRNO(EBUSY, KmdEngine{kPath});
}

TEST(core_mask_enforced_per_tenant)
{
	KmdDevice dev(kMinor);
	KmdEngine engine(kPath);
	auto t1 = dev.create_context("inference", 0x3);
	auto t2 = dev.create_context("training", 0xf0);
	CHECK(t1->core_mask() == 0x3 && t2->core_mask() == 0xf0);
	DeviceBuffer a = t1->alloc_device(4096), b = t2->alloc_device(4096);
	neuron_cmd ca = fill(a.device_addr, 16, 1.0), cb = fill(b.device_addr, 16, 2.0);
	JobBo ja{a.handle, false, true}, jb{b.handle, false, true};
	EXPECT_ERRNO(EACCES, t1->compute(2, std::span(&ca, 1), std::span(&ja, 1)));
	EXPECT_ERRNO(EACCES, t2->compute(0, std::span(&cb, 1), std::span(&jb, 1)));
	CHECK(t1->wait(t1->compute(1, std::span(&ca, 1), std::span(&ja, 1)), deadline_after_ms(kWaitMs)) == 0);
	CHECK(t2->wait(t2->compute(7, std::span(&cb, 1), std::span(&jb, 1)), deadline_after_ms(kWaitMs)) == 0);
	// The controller moves a tenant's cores.
	dev.set_core_mask(*t1, 0x4);
	EXPECT_ERRNO(EACCES, t1->compute(1, std::span(&ca, 1), std::span(&ja, 1)));
	CHECK(t1->wait(t1->compute(2, std::span(&ca, 1), std::span(&ja, 1)), deadline_after_ms(kWaitMs)) == 0);
	EXPECT_ERRNO(EINVAL, dev.set_core_mask(*t1, 1ull << 8)); // no core 8
	// Two tenants at once on their own cores.
	auto hammer = [&](KmdContext &ctx, uint32_t core, const DeviceBuffer &buf, float *result) {
		neuron_cmd init = fill(buf.device_addr, 256, 0.0);
		JobBo j{buf.handle, true, true};
		DeviceBuffer one = ctx.alloc_device(4096);
		neuron_cmd f1 = fill(one.device_addr, 256, 1.0);
		JobBo jo{one.handle, false, true};
		ctx.compute(core, std::span(&init, 1), std::span(&j, 1));
		ctx.compute(core, std::span(&f1, 1), std::span(&jo, 1));
		Fence last{};
		for (int i = 0; i < 30; ++i) {
			neuron_cmd inc = add(buf.device_addr, buf.device_addr, one.device_addr, 256);
			JobBo js[2] = {{buf.handle, true, true}, {one.handle, true, false}};
			last = ctx.compute(core, std::span(&inc, 1), js);
		}
		*result = ctx.wait(last, deadline_after_ms(kWaitMs)) == 0 ? download_f32(ctx, buf, 256)[255] : -1.0f;
	};
	float r1 = 0, r2 = 0;
	std::thread th1([&] { hammer(*t1, 2, a, &r1); });
	std::thread th2([&] { hammer(*t2, 6, b, &r2); });
	th1.join();
	th2.join();
	CHECK(r1 == 30.0f && r2 == 30.0f, "r1 %g r2 %g", r1, r2);
}

// Restart survival: a tenant's file outlives the neurond that made it (the
// supervisor keeps a descriptor), the next neurond adopts it. Its memory is there
// under the same handles and addresses, its core mask as the kernel holds it; a
// job the old neurond had queued (waiting for a DMA job) ends with the old engine
// (ENODEV) and never runs on the new one; new jobs run on the new engine. The old
// engine runs in a child killed with SIGKILL, as neurond's dies in a crash (a
// KmdEngine that stops cleanly first runs what it can fetch).
TEST(context_adopted_after_engine_restart)
{
	const int64_t n = 1024;
	const uint64_t big = 32ull << 20;
	int kept = -1, ready[2];
	DeviceBuffer a, b;
	uint64_t mask = 0;
	CHECK(pipe(ready) == 0);
	const pid_t old_engine = fork();
	CHECK(old_engine >= 0);
	if (old_engine == 0) {
		KmdEngine e(kPath);
		char c = 'r';
		if (write(ready[1], &c, 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	char c = 0;
	CHECK(read(ready[0], &c, 1) == 1, "the old engine did not attach");
	{
		KmdDevice dev(kMinor);
		auto ctx = dev.create_context("kept", 0x0c);
		mask = ctx->core_mask();
		a = ctx->alloc_device(n * 4);
		b = ctx->alloc_device(n * 4);
		neuron_cmd f = fill(a.device_addr, n, 3.0);
		JobBo ja{a.handle, false, true};
		CHECK(ctx->wait(ctx->compute(2, std::span(&f, 1), std::span(&ja, 1)), deadline_after_ms(kWaitMs)) == 0);
		auto bv = randf(n, 5);
		upload(*ctx, b, bv.data(), n * 4);
		// In flight at the crash: a long DMA job, and a compute job behind it.
		HostBuffer s = ctx->create_host(big), d = ctx->create_host(big);
		DmaCopy cp{s.handle, 0, d.handle, 0, big};
		Fence slow = ctx->dma(0, std::span(&cp, 1));
		neuron_cmd f7 = fill(a.device_addr, n, 7.0);
		ctx->compute(3, std::span(&f7, 1), std::span(&ja, 1), std::span(&slow, 1));
		kill(old_engine, SIGKILL); // neurond dies: its engine detaches
		int st = 0;
		CHECK(waitpid(old_engine, &st, 0) == old_engine && WIFSIGNALED(st));
		kept = dup(ctx->fd()); // what the supervisor holds
		CHECK(kept >= 0);
	} // the old neurond's context and controller file close
	KmdDevice dev(kMinor);
	KmdEngine engine(kPath);
	EXPECT_ERRNO(EINVAL, dev.adopt_context(open("/dev/null", O_RDWR | O_CLOEXEC), "not a device file"));
	auto ctx = dev.adopt_context(kept, "adopted");
	CHECK(ctx->core_mask() == mask, "mask %#llx, was %#llx", static_cast<unsigned long long>(ctx->core_mask()),
	      static_cast<unsigned long long>(mask));
	DeviceBuffer a2 = ctx->find_device(a.handle), b2 = ctx->find_device(b.handle);
	CHECK(a2.device_addr == a.device_addr && a2.size == a.size);
	CHECK(b2.device_addr == b.device_addr && b2.size == b.size);
	EXPECT_ERRNO(ENOENT, ctx->find_device(b.handle + 1000));
	// Every job on a, the old engine's included, is over; none wrote 7.
	CHECK(ctx->wait_bo(a.handle, deadline_after_ms(kWaitMs)));
	auto got = download_f32(*ctx, a2, n);
	for (int64_t i = 0; i < n; ++i)
		CHECK(got[i] == 3.0f, "a[%lld] = %g after the restart, want 3", static_cast<long long>(i), got[i]);
	auto bv = randf(n, 5);
	auto gb = download_f32(*ctx, b2, n);
	CHECK(std::memcmp(gb.data(), bv.data(), n * 4) == 0, "b changed across the restart");
	// The new engine runs the adopted file's new jobs, on its cores only.
	neuron_cmd sum = add(a2.device_addr, a2.device_addr, b2.device_addr, n);
	JobBo jb[2] = {{a2.handle, true, true}, {b2.handle, true, false}};
	EXPECT_ERRNO(EACCES, ctx->compute(0, std::span(&sum, 1), jb));
	CHECK(ctx->wait(ctx->compute(3, std::span(&sum, 1), jb), deadline_after_ms(kWaitMs)) == 0);
	got = download_f32(*ctx, a2, n);
	for (int64_t i = 0; i < n; ++i)
		CHECK(got[i] == 3.0f + bv[i], "a[%lld] = %g, want %g", static_cast<long long>(i), got[i], 3.0f + bv[i]);
}

TEST(tenants_cannot_name_each_others_buffers)
{
	KmdDevice dev(kMinor);
	KmdEngine engine(kPath);
	auto alice = dev.create_context("alice", 0);
	auto bob = dev.create_context("bob", 0);
	for (int i = 0; i < 3; ++i)
		alice->alloc_device(4096); // so that Alice's handle numbers run past Bob's
	DeviceBuffer secret = alice->alloc_device(4096);
	std::vector<float> s(1024, 42.0f);
	upload(*alice, secret, s.data(), 4096);
	// Bob's file has no BO with Alice's handle: ENOENT at submit (DMA and compute).
	HostBuffer bh = bob->create_host(4096); // Bob's only BO
	CHECK(bh.handle != secret.handle, "handles %u %u", bh.handle, secret.handle);
	DmaCopy steal{secret.handle, 0, bh.handle, 0, 4096};
	EXPECT_ERRNO(ENOENT, bob->dma(0, std::span(&steal, 1)));
	neuron_cmd c = fill(secret.device_addr, 16, 0.0);
	JobBo jb{steal.src, false, true};
	EXPECT_ERRNO(ENOENT, bob->compute(0, std::span(&c, 1), std::span(&jb, 1)));
	EXPECT_ERRNO(ENOENT, bob->wait_bo(steal.src, deadline_after_ms(100)));
	// Bob names Alice's HBM address from a job listing only his own BO: the engine refuses.
	DeviceBuffer mine = bob->alloc_device(4096);
	JobBo own{mine.handle, true, true};
	CHECK(bob->wait(bob->compute(0, std::span(&c, 1), std::span(&own, 1)), deadline_after_ms(kWaitMs)) == -EFAULT);
	neuron_cmd cp = cmd(NEURON_OP_COPY, {desc(mine.device_addr, {1024}), desc(secret.device_addr, {1024})});
	CHECK(bob->wait(bob->compute(0, std::span(&cp, 1), std::span(&own, 1)), deadline_after_ms(kWaitMs)) == -EFAULT);
	auto v = download_f32(*alice, secret, 1024);
	CHECK(v[0] == 42.0f && v[1023] == 42.0f, "alice's data changed");
	auto m = download_f32(*bob, mine, 1024);
	CHECK(m[0] == 0.0f, "bob read alice's data");
}

TEST(unprivileged_controller_refused)
{
	KmdDevice dev(kMinor);
	auto ctx = dev.create_context("x", 0); // opened and granted while root
	gid_t g = 1000;
	CHECK(setgroups(1, &g) == 0 && setgid(1000) == 0 && setuid(1000) == 0);
	KmdDevice user(kMinor); // the node is 0666 in the guest
	// Only CAP_SYS_ADMIN grants queues (DRM_ROOT_ONLY: EACCES), its own
	// file's included: a file it opens has none.
	EXPECT_ERRNO(EACCES, user.create_context("u", 0));
	EXPECT_ERRNO(EACCES, user.set_core_mask(*ctx, 1));
	EXPECT_ERRNO(EACCES, KmdEngine{kPath});
	CHECK(get_param(user.controller_fd(), DRM_NEURON_PARAM_CORE_MASK) == 0);
	CHECK(get_param(user.controller_fd(), DRM_NEURON_PARAM_DMA_MASK) == 0);
	// A context root granted keeps working after the privileges are gone.
	DeviceBuffer b = ctx->alloc_device(4096);
	std::vector<float> s(1024, 3.0f);
	upload(*ctx, b, s.data(), 4096);
	CHECK(download_f32(*ctx, b, 1024)[7] == 3.0f);
}

// A tile kernel through the engine one step per job (kernel_job.h): its program
// and its saved state (cursor, SBUF/PSUM) in one BO, nothing kept by the engine
// between jobs (each step on another core), the result the bits of the program
// run whole in this process; and the contract's refusals: a corrupted program, a
// step the saved state is not at, a multi-step kernel asked to run whole.
TEST(tile_kernel_steps_through_saved_state)
{
	KmdDevice dev(kMinor);
	KmdEngineOptions eo;
	eo.onchip = neuron::chip::find_profile("trn2")->onchip;
	eo.on_fault = [](const EngineJobFault &f) { std::printf("#   fault %u: %s\n", f.code, f.reason.c_str()); };
	KmdEngine engine(kPath, eo);
	auto ctx = dev.create_context("kernel", 0);
	const int64_t M = 128 + 5, K = 256, N = 64;
	const std::vector<uint64_t> arg_bytes{M * N * 4, M * K * 4, K * N * 4};
	const auto insns = tk::matmul(NEURON_DTYPE_F32, M, K, N);
	auto p = std::make_shared<neuron::tile::TileProgram>();
	CHECK(neuron::tile::validate(*eo.onchip, arg_bytes, insns, p.get()).empty());
	CHECK(p->steps > 2, "%llu steps", static_cast<unsigned long long>(p->steps));
	const std::vector<std::byte> wire = neuron::tile::serialize(arg_bytes, insns);
	const uint64_t state_off = (wire.size() + 63) & ~uint64_t{63};
	const uint64_t state_bytes = neuron::tile::Execution::state_bytes(*p);
	DeviceBuffer bo = ctx->alloc_device(state_off + state_bytes);
	upload(*ctx, bo, wire.data(), wire.size());
	auto a = randf(M * K, 3), b = randf(K * N, 4);
	DeviceBuffer dc = ctx->alloc_device(arg_bytes[0]), da = ctx->alloc_device(arg_bytes[1]),
		     db = ctx->alloc_device(arg_bytes[2]);
	upload(*ctx, da, a.data(), arg_bytes[1]);
	upload(*ctx, db, b.data(), arg_bytes[2]);
	TileJobEntry e{};
	neuron_cmd &c = e.cmd;
	c.opcode = NEURON_OP_TILE_KERNEL;
	c.num_operands = 3;
	const uint64_t addr[3] = {dc.device_addr, da.device_addr, db.device_addr};
	for (int k = 0; k < 3; ++k)
		c.operands[k] = desc(addr[k], {static_cast<int64_t>(arg_bytes[k])}, NEURON_DTYPE_U8);
	c.iscalars[1] = 1;
	c.iscalars[2] = static_cast<int64_t>(p->steps);
	e.flags = kTileKernel;
	e.program_address = bo.device_addr;
	e.program_bytes = wire.size();
	e.state_address = bo.device_addr + state_off;
	e.state_slot_bytes = state_bytes;
	e.state_chains = 1;
	const std::vector<JobBo> bos{{dc.handle, false, true}, {da.handle, true, false}, {db.handle, true, false},
				     {bo.handle, true, true}};
	const uint32_t cores = dev.info().num_cores;
	auto run = [&](TileJobEntry entry, uint32_t core) {
		TileJobWriter w(1);
		w.add(entry);
		const std::vector<std::byte> payload = w.bytes();
		return ctx->wait(ctx->compute(core, std::span<const std::byte>(payload), bos), deadline_after_ms(kWaitMs));
	};
	for (uint64_t s = 0; s < p->steps; ++s) {
		e.tile = s;
		const int r = run(e, static_cast<uint32_t>(s % cores));
		CHECK(r == 0, "step %llu: %s", static_cast<unsigned long long>(s), std::strerror(-r));
	}
	std::vector<float> want(M * N);
	std::byte *args[3] = {reinterpret_cast<std::byte *>(want.data()), reinterpret_cast<std::byte *>(a.data()),
			      reinterpret_cast<std::byte *>(b.data())};
	neuron::tile::run(p, std::span<std::byte *const>(args, 3));
	const auto got = download_f32(*ctx, dc, M * N);
	CHECK(std::memcmp(got.data(), want.data(), want.size() * 4) == 0, "the stepped kernel differs from one run");
	std::printf("#   %llu steps, %llu state bytes per step, %zu program bytes\n",
		    static_cast<unsigned long long>(p->steps), static_cast<unsigned long long>(state_bytes), wire.size());

	// The saved state stands after the last step's predecessor: asking step 1 now
	// (a state of step steps-1) fails, and nothing runs.
	e.tile = 1;
	CHECK(run(e, 0) == -EIO);
	// Multi-step kernels never run whole.
	TileJobEntry whole = e;
	whole.tile = kWholeCommand;
	CHECK(run(whole, 0) == -EINVAL);
	// A corrupted program (one instruction's operand count) is refused by validation.
	std::vector<std::byte> broken = wire;
	broken[sizeof(neuron_tile_program_header) + 3 * 8 + 2] = std::byte{9};
	upload(*ctx, bo, broken.data(), broken.size());
	e.tile = 0;
	CHECK(run(e, 0) == -EINVAL);
	CHECK(engine.last_error().empty(), "%s", engine.last_error().c_str());
}

} // namespace

// A collective group's reduction across tenants' files (collective_job.h): two
// tenants' device BOs shared into a third file through PRIME (device BOs go only
// to files of the same device), reduced there by one compute job, with the
// engine's refusals of a job that names more than its BO list holds.
TEST(collective_reduce_across_files)
{
	KmdDevice dev(kMinor);
	KmdEngine engine(kPath);
	auto a = dev.create_context("rank0", 0), b = dev.create_context("rank1", 0), c = dev.create_context("neurond", 0);
	const size_t n = 1000;
	const auto va = randf(n, 1), vb = randf(n, 2);
	DeviceBuffer da = a->alloc_device(n * 4), db = b->alloc_device(n * 4);
	upload(*a, da, va.data(), n * 4);
	upload(*b, db, vb.data(), n * 4);
	auto share = [&](KmdContext &from, const DeviceBuffer &buf) {
		const int fd = from.export_device(buf.handle);
		const uint32_t h = c->import_buffer(fd);
		::close(fd);
		return h;
	};
	const uint32_t ia = share(*a, da), ib = share(*b, db);
	auto reduce = [&](uint64_t dst, std::vector<uint64_t> srcs, uint64_t count, std::vector<JobBo> bos,
			  uint8_t dtype = NEURON_DTYPE_F32) {
		CollectiveJobHeader h;
		h.dtype = dtype;
		h.op = static_cast<uint8_t>(neuron::kernels::CollectiveReduce::Sum);
		h.count = count;
		h.dst = dst;
		return c->wait(c->compute(0, collective_job_bytes(h, srcs), bos), deadline_after_ms(kWaitMs));
	};
	// In place on rank 0's buffer: its import in c has rank 0's HBM address.
	CHECK(reduce(da.device_addr, {da.device_addr, db.device_addr}, n, {{ia, true, true}, {ib, true, false}}) == 0);
	auto got = download_f32(*a, da, n);
	for (size_t i = 0; i < n; ++i)
		CHECK(got[i] == va[i] + vb[i], "element %zu: %g, want %g", i, got[i], va[i] + vb[i]);
	// Refused before any byte moves: a source the job did not list, the
	// destination read-only, the destination on a later source, a bad dtype.
	CHECK(reduce(da.device_addr, {da.device_addr, db.device_addr}, n, {{ia, true, true}}) == -EFAULT);
	CHECK(reduce(da.device_addr, {db.device_addr, da.device_addr}, n, {{ia, true, false}, {ib, true, false}}) ==
	      -EINVAL);
	CHECK(reduce(da.device_addr, {da.device_addr, db.device_addr}, n, {{ia, true, false}, {ib, true, false}}) ==
	      -EFAULT);
	CHECK(reduce(da.device_addr, {da.device_addr, db.device_addr}, n, {{ia, true, true}, {ib, true, false}}, 99) ==
	      -EINVAL);
	got = download_f32(*a, da, n);
	CHECK(got[0] == va[0] + vb[0], "a refused job wrote: %g", got[0]);
	// Rank 0's file still owns its BO: closing the import leaves it whole.
	c->close_handle(ia);
	c->close_handle(ib);
	got = download_f32(*a, da, n);
	CHECK(got[n - 1] == va[n - 1] + vb[n - 1]);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, nullptr, _IOLBF, 0);
	int passed = 0, failed = 0;
	for (const Test &t : registry()) {
		bool sel = argc < 2;
		for (int i = 1; i < argc; ++i)
			sel |= std::strncmp(t.name, argv[i], std::strlen(argv[i])) == 0;
		if (!sel)
			continue;
		std::fflush(stdout);
		const int64_t t0 = now_ns();
		pid_t pid = fork();
		if (pid == 0) {
			try {
				t.fn();
			} catch (const std::exception &e) {
				std::printf("# unexpected exception: %s\n", e.what());
				std::fflush(stdout);
				_exit(1);
			}
			std::fflush(stdout);
			_exit(0);
		}
		int st = 0;
		waitpid(pid, &st, 0);
		const bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
		if (!ok && WIFSIGNALED(st))
			std::printf("# killed by signal %d\n", WTERMSIG(st));
		std::printf("%s: kmd_%s (%lld ms)\n", ok ? "PASS" : "FAIL", t.name,
			    static_cast<long long>((now_ns() - t0) / 1000000));
		(ok ? passed : failed)++;
	}
	std::printf("# kmd_test: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
