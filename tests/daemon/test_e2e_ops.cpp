// End to end through neurond: ops on a core queue and copies on a DMA queue, each
// result checked against a naive double-precision CPU computation in this file.
#include "daemon_test.h"

#include <cmath>
#include <cstring>

using namespace dt;

TestSuite(e2e_ops, .init = daemon_up, .fini = daemon_down, .timeout = 100);

namespace {

// out[bt][m][n] = sum_k a[bt or 0][m][k] * b[bt or 0][k][n]
std::vector<double> ref_matmul(const std::vector<float> &a, const std::vector<float> &b, int batch, int m, int k,
			       int n, bool a_bcast = false, bool b_bcast = false)
{
	std::vector<double> out(static_cast<size_t>(batch) * m * n);
	for (int t = 0; t < batch; ++t) {
		const float *pa = a.data() + (a_bcast ? 0 : static_cast<size_t>(t) * m * k);
		const float *pb = b.data() + (b_bcast ? 0 : static_cast<size_t>(t) * k * n);
		for (int i = 0; i < m; ++i)
			for (int j = 0; j < n; ++j) {
				double s = 0;
				for (int x = 0; x < k; ++x)
					s += static_cast<double>(pa[i * k + x]) * pb[x * n + j];
				out[(static_cast<size_t>(t) * m + i) * n + j] = s;
			}
	}
	return out;
}

} // namespace

DAEMON_TEST(e2e_ops, matmul_37x53_by_53x29)
{
	Tenant t;
	t.open("e2e-matmul");
	const int M = 37, K = 53, N = 29;
	const auto a = random_f32(M * K, 1), b = random_f32(K * N, 2);
	const uint64_t da = dev_alloc(t.client, a.size() * 4), db = dev_alloc(t.client, b.size() * 4),
		       dout = dev_alloc(t.client, M * N * 4);
	upload_f32(t.dma, da, a);
	upload_f32(t.dma, db, b);
	run(t.core, make_matmul(desc(dout, NEURON_DTYPE_F32, {M, N}), desc(da, NEURON_DTYPE_F32, {M, K}),
				desc(db, NEURON_DTYPE_F32, {K, N})));
	expect_close(download_f32(t.dma, dout, M * N), ref_matmul(a, b, 1, M, K, N), 1e-5, 1e-5, "matmul 37x53x29");
	t.close();
}

DAEMON_TEST(e2e_ops, matmul_alpha_beta_accumulates)
{
	// out = 0.5 * a @ b + 2 * out, with out pre-filled with 3.
	Tenant t;
	t.open("e2e-matmul-beta");
	const int M = 16, K = 9, N = 12;
	const auto a = random_f32(M * K, 3), b = random_f32(K * N, 4);
	const uint64_t da = dev_alloc(t.client, a.size() * 4), db = dev_alloc(t.client, b.size() * 4),
		       dout = dev_alloc(t.client, M * N * 4);
	upload_f32(t.dma, da, a);
	upload_f32(t.dma, db, b);
	const auto od = desc(dout, NEURON_DTYPE_F32, {M, N});
	run(t.core, make_fill_f32(od, 3.0));
	neuron_cmd mm = make_matmul(od, desc(da, NEURON_DTYPE_F32, {M, K}), desc(db, NEURON_DTYPE_F32, {K, N}));
	mm.fscalars.f[0] = 0.5;
	mm.fscalars.f[1] = 2.0;
	run(t.core, mm);
	auto ref = ref_matmul(a, b, 1, M, K, N);
	for (auto &x : ref)
		x = 0.5 * x + 6.0;
	expect_close(download_f32(t.dma, dout, M * N), ref, 1e-5, 1e-5, "matmul alpha/beta");
	t.close();
}

DAEMON_TEST(e2e_ops, batched_matmul_and_broadcast_batch)
{
	Tenant t;
	t.open("e2e-bmm");
	const int B = 5, M = 17, K = 23, N = 11;
	const auto a = random_f32(B * M * K, 5), b = random_f32(B * K * N, 6);
	const uint64_t da = dev_alloc(t.client, a.size() * 4), db = dev_alloc(t.client, b.size() * 4),
		       dout = dev_alloc(t.client, B * M * N * 4);
	upload_f32(t.dma, da, a);
	upload_f32(t.dma, db, b);
	const auto od = desc(dout, NEURON_DTYPE_F32, {B, M, N});
	run(t.core, make_matmul(od, desc(da, NEURON_DTYPE_F32, {B, M, K}), desc(db, NEURON_DTYPE_F32, {B, K, N})));
	expect_close(download_f32(t.dma, dout, B * M * N), ref_matmul(a, b, B, M, K, N), 1e-5, 1e-5, "bmm");

	// The same b matrix (batch 0) for every batch: stride 0 on the batch dim.
	run(t.core, make_matmul(od, desc(da, NEURON_DTYPE_F32, {B, M, K}),
				desc_strided(db, NEURON_DTYPE_F32, {B, K, N}, {0, N, 1})));
	expect_close(download_f32(t.dma, dout, B * M * N), ref_matmul(a, b, B, M, K, N, false, true), 1e-5, 1e-5,
		     "bmm with broadcast b");
	t.close();
}

DAEMON_TEST(e2e_ops, add_with_broadcast_operand)
{
	Tenant t;
	t.open("e2e-add");
	const int R = 19, C = 33;
	const auto a = random_f32(R * C, 7), row = random_f32(C, 8), col = random_f32(R, 9);
	const uint64_t da = dev_alloc(t.client, a.size() * 4), drow = dev_alloc(t.client, C * 4),
		       dcol = dev_alloc(t.client, R * 4), dout = dev_alloc(t.client, R * C * 4);
	upload_f32(t.dma, da, a);
	upload_f32(t.dma, drow, row);
	upload_f32(t.dma, dcol, col);
	const auto od = desc(dout, NEURON_DTYPE_F32, {R, C});

	// out = a + 1.0 * row (row broadcast down the rows: stride 0 on dim 0)
	neuron_cmd add = make_cmd(NEURON_OP_ADD, {od, desc(da, NEURON_DTYPE_F32, {R, C}),
						  desc_strided(drow, NEURON_DTYPE_F32, {R, C}, {0, 1})});
	add.fscalars.f[0] = 1.0;
	run(t.core, add);
	std::vector<double> ref(R * C);
	for (int i = 0; i < R; ++i)
		for (int j = 0; j < C; ++j)
			ref[i * C + j] = static_cast<double>(a[i * C + j]) + row[j];
	expect_close(download_f32(t.dma, dout, R * C), ref, 1e-6, 1e-6, "a + row");

	// out = a + (-2.5) * col (column broadcast: stride 0 on dim 1)
	add = make_cmd(NEURON_OP_ADD, {od, desc(da, NEURON_DTYPE_F32, {R, C}),
				       desc_strided(dcol, NEURON_DTYPE_F32, {R, C}, {1, 0})});
	add.fscalars.f[0] = -2.5;
	run(t.core, add);
	for (int i = 0; i < R; ++i)
		for (int j = 0; j < C; ++j)
			ref[i * C + j] = static_cast<double>(a[i * C + j]) - 2.5 * col[i];
	expect_close(download_f32(t.dma, dout, R * C), ref, 1e-6, 1e-6, "a - 2.5 * col");
	t.close();
}

DAEMON_TEST(e2e_ops, mul_scalar_and_reverse_sub_scalar)
{
	Tenant t;
	t.open("e2e-scalar");
	const int n = 1000;
	const auto a = random_f32(n, 10, -4, 4);
	const uint64_t da = dev_alloc(t.client, n * 4), dout = dev_alloc(t.client, n * 4);
	upload_f32(t.dma, da, a);
	neuron_cmd mul = make_cmd(NEURON_OP_MUL_SCALAR, {desc(dout, NEURON_DTYPE_F32, {n}), desc(da, NEURON_DTYPE_F32, {n})});
	mul.fscalars.f[0] = -1.75;
	run(t.core, mul);
	std::vector<double> ref(n);
	for (int i = 0; i < n; ++i)
		ref[i] = -1.75 * a[i];
	expect_close(download_f32(t.dma, dout, n), ref, 1e-6, 0, "a * -1.75");

	// i[0] = 1 reverses: out = 10 - a.
	neuron_cmd sub = make_cmd(NEURON_OP_SUB_SCALAR, {desc(dout, NEURON_DTYPE_F32, {n}), desc(da, NEURON_DTYPE_F32, {n})});
	sub.fscalars.f[0] = 10.0;
	sub.iscalars[0] = 1;
	run(t.core, sub);
	for (int i = 0; i < n; ++i)
		ref[i] = 10.0 - a[i];
	expect_close(download_f32(t.dma, dout, n), ref, 1e-6, 1e-6, "10 - a");
	t.close();
}

DAEMON_TEST(e2e_ops, relu_and_exp)
{
	Tenant t;
	t.open("e2e-unary");
	const int n = 4097;
	const auto a = random_f32(n, 11, -5, 5);
	const uint64_t da = dev_alloc(t.client, n * 4), dout = dev_alloc(t.client, n * 4);
	upload_f32(t.dma, da, a);
	const auto od = desc(dout, NEURON_DTYPE_F32, {n}), ad = desc(da, NEURON_DTYPE_F32, {n});
	run(t.core, make_cmd(NEURON_OP_RELU, {od, ad}));
	std::vector<double> ref(n);
	for (int i = 0; i < n; ++i)
		ref[i] = a[i] > 0 ? a[i] : 0.0;
	expect_close(download_f32(t.dma, dout, n), ref, 0, 0, "relu");
	run(t.core, make_cmd(NEURON_OP_EXP, {od, ad}));
	for (int i = 0; i < n; ++i)
		ref[i] = std::exp(static_cast<double>(a[i]));
	expect_close(download_f32(t.dma, dout, n), ref, 2e-6, 0, "exp");
	// In place (an exact alias is allowed for elementwise ops): relu(a) into a.
	run(t.core, make_cmd(NEURON_OP_RELU, {ad, ad}));
	for (int i = 0; i < n; ++i)
		ref[i] = a[i] > 0 ? a[i] : 0.0;
	expect_close(download_f32(t.dma, da, n), ref, 0, 0, "in-place relu");
	t.close();
}

DAEMON_TEST(e2e_ops, sum_over_one_dim)
{
	Tenant t;
	t.open("e2e-sum");
	const int R = 31, C = 45;
	const auto a = random_f32(R * C, 12);
	const uint64_t da = dev_alloc(t.client, R * C * 4), drows = dev_alloc(t.client, R * 4),
		       dcols = dev_alloc(t.client, C * 4);
	upload_f32(t.dma, da, a);
	const auto ad = desc(da, NEURON_DTYPE_F32, {R, C});
	neuron_cmd sum = make_cmd(NEURON_OP_SUM, {desc(drows, NEURON_DTYPE_F32, {R, 1}), ad});
	sum.iscalars[0] = 1 << 1; // over dim 1: one sum per row
	run(t.core, sum);
	std::vector<double> rows(R, 0.0), cols(C, 0.0);
	for (int i = 0; i < R; ++i)
		for (int j = 0; j < C; ++j) {
			rows[i] += a[i * C + j];
			cols[j] += a[i * C + j];
		}
	expect_close(download_f32(t.dma, drows, R), rows, 1e-5, 1e-5, "sum over dim 1");
	sum = make_cmd(NEURON_OP_SUM, {desc(dcols, NEURON_DTYPE_F32, {1, C}), ad});
	sum.iscalars[0] = 1 << 0;
	run(t.core, sum);
	expect_close(download_f32(t.dma, dcols, C), cols, 1e-5, 1e-5, "sum over dim 0");
	t.close();
}

DAEMON_TEST(e2e_ops, softmax_along_last_dim)
{
	Tenant t;
	t.open("e2e-softmax");
	const int R = 13, C = 70;
	const auto a = random_f32(R * C, 13, -8, 8);
	const uint64_t da = dev_alloc(t.client, R * C * 4), dout = dev_alloc(t.client, R * C * 4);
	upload_f32(t.dma, da, a);
	neuron_cmd sm = make_cmd(NEURON_OP_SOFTMAX, {desc(dout, NEURON_DTYPE_F32, {R, C}), desc(da, NEURON_DTYPE_F32, {R, C})});
	sm.iscalars[0] = 1;
	run(t.core, sm);
	std::vector<double> ref(R * C);
	for (int i = 0; i < R; ++i) {
		double mx = -INFINITY, s = 0;
		for (int j = 0; j < C; ++j)
			mx = std::fmax(mx, a[i * C + j]);
		for (int j = 0; j < C; ++j)
			s += std::exp(a[i * C + j] - mx);
		for (int j = 0; j < C; ++j)
			ref[i * C + j] = std::exp(a[i * C + j] - mx) / s;
	}
	expect_close(download_f32(t.dma, dout, R * C), ref, 1e-5, 1e-7, "softmax dim 1");
	t.close();
}

DAEMON_TEST(e2e_ops, copies_of_many_sizes_and_offsets)
{
	Tenant t;
	t.open("e2e-copies");
	// 9 MiB exceeds libneuron's 8 MiB staging buffer: the blocking copies chunk.
	const uint64_t sizes[] = {1, 4095, 1 << 20, 9 << 20};
	const uint64_t offsets[] = {0, 1, 4097};
	const uint64_t cap = (9 << 20) + 8192;
	const uint64_t src = dev_alloc(t.client, cap), dst = dev_alloc(t.client, cap);
	uint32_t seed = 100;
	for (uint64_t size : sizes)
		for (uint64_t off : offsets) {
			const auto data = random_bytes(size, seed++);
			h2d(t.dma, src + off, data.data(), size);
			// D2D to a different offset in the other buffer.
			const uint64_t doff = (off * 3 + 5) % 4096;
			uint64_t seq = 0;
			NEURON_OK_OR_FAIL(neuron_copy_d2d_async(t.dma, dst + doff, src + off, size, &seq));
			NEURON_OK_OR_FAIL(neuron_queue_wait(t.dma, seq, kWaitNs));
			std::vector<uint8_t> back(size + 2, 0xAB);
			d2h(t.dma, back.data() + 1, dst + doff, size);
			cr_assert(back[0] == 0xAB && back[size + 1] == 0xAB, "d2h of %llu bytes wrote outside its destination",
				  (unsigned long long)size);
			cr_assert(std::memcmp(back.data() + 1, data.data(), size) == 0,
				  "H2D -> D2D -> D2H of %llu bytes at offsets %llu/%llu changed the data",
				  (unsigned long long)size, (unsigned long long)off, (unsigned long long)doff);
		}
	// The copies wrote exactly their ranges: a 1-byte copy into a fresh zeroed buffer.
	const uint64_t fresh = dev_alloc(t.client, 64);
	const uint8_t one = 0x5A;
	h2d(t.dma, fresh + 10, &one, 1);
	uint8_t all[64];
	d2h(t.dma, all, fresh, 64);
	for (int i = 0; i < 64; ++i)
		cr_assert(all[i] == (i == 10 ? 0x5A : 0), "byte %d of a buffer after a 1-byte copy at 10 is 0x%02x", i,
			  all[i]);
	t.close();
}

DAEMON_TEST(e2e_ops, pinned_async_copies_with_host_offsets)
{
	Tenant t;
	t.open("e2e-pinned");
	const uint64_t n = 3 << 20;
	neuron_host_buffer *in = nullptr, *out = nullptr;
	NEURON_OK_OR_FAIL(neuron_host_alloc(t.client, n + 4096, &in));
	NEURON_OK_OR_FAIL(neuron_host_alloc(t.client, n + 4096, &out));
	const auto data = random_bytes(n, 55);
	std::memcpy(static_cast<char *>(neuron_host_ptr(in)) + 123, data.data(), n);
	std::memset(neuron_host_ptr(out), 0xEE, n + 4096);
	const uint64_t dev = dev_alloc(t.client, n);
	uint64_t s1 = 0, s2 = 0;
	NEURON_OK_OR_FAIL(neuron_copy_h2d_async(t.dma, dev, in, 123, n, &s1));
	// Same queue: copies run in order, so the D2H sees the H2D's data without a wait.
	NEURON_OK_OR_FAIL(neuron_copy_d2h_async(t.dma, out, 777, dev, n, &s2));
	cr_assert(s2 > s1, "sequence numbers do not increase (%llu then %llu)", (unsigned long long)s1,
		  (unsigned long long)s2);
	NEURON_OK_OR_FAIL(neuron_queue_wait(t.dma, s2, kWaitNs));
	const auto *o = static_cast<const uint8_t *>(neuron_host_ptr(out));
	cr_assert(std::memcmp(o + 777, data.data(), n) == 0, "pinned H2D then D2H changed the data");
	cr_assert(o[776] == 0xEE && o[777 + n] == 0xEE, "the D2H wrote outside [777, 777 + n)");
	NEURON_OK_OR_FAIL(neuron_host_free(in));
	NEURON_OK_OR_FAIL(neuron_host_free(out));
	t.close();
}

DAEMON_TEST(e2e_ops, event_orders_a_copy_after_compute)
{
	Tenant t;
	t.open("e2e-events");
	// Queue A (core) runs a long chain, then the result's matmul; queue B (DMA) waits
	// on A's event device-side and then copies the result out.
	const int S = 256, M = 24, K = 31, N = 17;
	const auto big = random_f32(S * S, 20);
	const auto a = random_f32(M * K, 21), b = random_f32(K * N, 22);
	const uint64_t dbig = dev_alloc(t.client, S * S * 4), dscratch = dev_alloc(t.client, S * S * 4);
	const uint64_t da = dev_alloc(t.client, M * K * 4), db = dev_alloc(t.client, K * N * 4),
		       dout = dev_alloc(t.client, M * N * 4);
	upload_f32(t.dma, dbig, big);
	upload_f32(t.dma, da, a);
	upload_f32(t.dma, db, b);
	neuron_host_buffer *hb = nullptr;
	NEURON_OK_OR_FAIL(neuron_host_alloc(t.client, M * N * 4, &hb));
	std::memset(neuron_host_ptr(hb), 0xFF, M * N * 4); // NaNs until the copy lands

	const auto bigd = desc(dbig, NEURON_DTYPE_F32, {S, S}), scd = desc(dscratch, NEURON_DTYPE_F32, {S, S});
	for (int i = 0; i < 40; ++i)
		submit(t.core, make_matmul(scd, bigd, bigd));
	submit(t.core, make_matmul(desc(dout, NEURON_DTYPE_F32, {M, N}), desc(da, NEURON_DTYPE_F32, {M, K}),
				   desc(db, NEURON_DTYPE_F32, {K, N})));
	neuron_event ev;
	NEURON_OK_OR_FAIL(neuron_event_record(t.core, &ev));
	cr_assert(ev.queue_id == neuron_queue_id(t.core) && ev.value == 41, "event = {queue %llu, value %llu}",
		  (unsigned long long)ev.queue_id, (unsigned long long)ev.value);
	NEURON_OK_OR_FAIL(neuron_queue_wait_event(t.dma, &ev));
	uint64_t seq = 0;
	NEURON_OK_OR_FAIL(neuron_copy_d2h_async(t.dma, hb, 0, dout, M * N * 4, &seq));
	NEURON_OK_OR_FAIL(neuron_queue_wait(t.dma, seq, kWaitNs));
	// B finished, so A must have reached the event.
	cr_assert(neuron_queue_completed(t.core) >= ev.value,
		  "the DMA queue completed its copy while the core queue had completed %llu of %llu",
		  (unsigned long long)neuron_queue_completed(t.core), (unsigned long long)ev.value);
	std::vector<float> got(M * N);
	std::memcpy(got.data(), neuron_host_ptr(hb), M * N * 4);
	expect_close(got, ref_matmul(a, b, 1, M, K, N), 1e-5, 1e-5, "result copied after the event");
	NEURON_OK_OR_FAIL(neuron_event_wait(t.core, &ev, kWaitNs));
	NEURON_OK_OR_FAIL(neuron_host_free(hb));
	t.close();
}

DAEMON_TEST(e2e_ops, fresh_allocations_read_zero)
{
	Tenant t;
	t.open("e2e-zero");
	const uint64_t n = 2 << 20;
	// Dirty a range, free it, allocate again: the new allocation reads zero.
	const uint64_t first = dev_alloc(t.client, n);
	std::vector<uint8_t> pattern(n, 0xC3);
	h2d(t.dma, first, pattern.data(), n);
	NEURON_OK_OR_FAIL(neuron_free(t.client, 0, first));
	const uint64_t again = dev_alloc(t.client, n);
	std::vector<uint8_t> back(n, 0x11);
	d2h(t.dma, back.data(), again, n);
	for (uint64_t i = 0; i < n; ++i)
		cr_assert(back[i] == 0, "byte %llu of a fresh allocation is 0x%02x (the range was reused: %s)",
			  (unsigned long long)i, back[i], again == first ? "yes" : "no");
	t.close();
}

DAEMON_TEST(e2e_ops, memory_freed_by_one_tenant_reads_zero_for_the_next)
{
	Tenant a, b;
	a.open("e2e-tenant-a", 1);
	b.open("e2e-tenant-b", 1);
	const uint64_t n = 1 << 20;
	const uint64_t addr_a = dev_alloc(a.client, n, 1);
	std::vector<uint8_t> pattern = random_bytes(n, 77);
	for (auto &x : pattern)
		x |= 1; // never zero
	h2d(a.dma, addr_a, pattern.data(), n);
	NEURON_OK_OR_FAIL(neuron_free(a.client, 1, addr_a));
	const uint64_t addr_b = dev_alloc(b.client, n, 1);
	// Device 1 holds nothing else: the allocator hands B the same range, which is
	// what makes this test meaningful.
	cr_assert(addr_b == addr_a, "B got 0x%llx, not A's freed range 0x%llx", (unsigned long long)addr_b,
		  (unsigned long long)addr_a);
	std::vector<uint8_t> back(n, 0x11);
	d2h(b.dma, back.data(), addr_b, n);
	for (uint64_t i = 0; i < n; ++i)
		cr_assert(back[i] == 0, "byte %llu of B's allocation holds 0x%02x: A's data leaked", (unsigned long long)i,
			  back[i]);
	a.close();
	b.close();
}

// ISA 1.7, NEURON_CMD_F_STAMP: the chip writes when each command started and
// ended (its last operand), on the device clock, which on this chip is the
// host's CLOCK_MONOTONIC: every stamp lies between the host's readings before
// the submit and after the wait, in queue order, and the commands compute
// what they compute unstamped.
DAEMON_TEST(e2e_ops, stamped_commands_record_when_they_ran)
{
	Tenant t;
	t.open("e2e-stamp");
	cr_assert(neuron_queue_features(t.core) & NEURON_RING_F_CMD_STAMP, "the ring does not offer command stamps");
	const int n = 4097, M = 256;
	const auto a = random_f32(n, 31, -3, 3), ma = random_f32(M * M, 32), mb = random_f32(M * M, 33);
	const uint64_t da = dev_alloc(t.client, n * 4), drelu = dev_alloc(t.client, n * 4),
		       dexp = dev_alloc(t.client, n * 4), dma_ = dev_alloc(t.client, M * M * 4),
		       dmb = dev_alloc(t.client, M * M * 4), dmm = dev_alloc(t.client, M * M * 4),
		       dstamps = dev_alloc(t.client, 80);
	upload_f32(t.dma, da, a);
	upload_f32(t.dma, dma_, ma);
	upload_f32(t.dma, dmb, mb);
	// 0x55 everywhere first: a stamp the chip did not write, or a write beside
	// one, shows.
	std::vector<uint8_t> pattern(80, 0x55);
	h2d(t.dma, dstamps, pattern.data(), pattern.size());
	auto stamped = [&](neuron_cmd cmd, int k) {
		cmd.flags |= NEURON_CMD_F_STAMP;
		cmd.operands[cmd.num_operands++] = desc(dstamps + 16 * k, NEURON_DTYPE_I64, {2});
		return cmd;
	};
	neuron_cmd nop;
	neuron_cmd_init(&nop, NEURON_OP_NOP, 0);
	const auto ad = desc(da, NEURON_DTYPE_F32, {n});
	const uint64_t before = now_ns();
	submit(t.core, stamped(make_cmd(NEURON_OP_RELU, {desc(drelu, NEURON_DTYPE_F32, {n}), ad}), 0));
	submit(t.core, stamped(make_cmd(NEURON_OP_EXP, {desc(dexp, NEURON_DTYPE_F32, {n}), ad}), 1));
	// Big enough for the chip to cut into tiles: the stamps span all of them.
	submit(t.core, stamped(make_matmul(desc(dmm, NEURON_DTYPE_F32, {M, M}), desc(dma_, NEURON_DTYPE_F32, {M, M}),
					   desc(dmb, NEURON_DTYPE_F32, {M, M})),
			       2));
	run(t.core, stamped(nop, 3));
	const uint64_t after = now_ns();

	std::vector<double> relu(n), ex(n);
	for (int i = 0; i < n; ++i) {
		relu[i] = a[i] > 0 ? a[i] : 0.0;
		ex[i] = std::exp(static_cast<double>(a[i]));
	}
	expect_close(download_f32(t.dma, drelu, n), relu, 0, 0, "stamped relu");
	expect_close(download_f32(t.dma, dexp, n), ex, 2e-6, 0, "stamped exp");
	expect_close(download_f32(t.dma, dmm, M * M), ref_matmul(ma, mb, 1, M, M, M), 1e-5, 1e-5, "stamped matmul");

	int64_t s[10];
	d2h(t.dma, s, dstamps, sizeof(s));
	uint64_t prev_end = before;
	for (int k = 0; k < 4; ++k) {
		const uint64_t start = static_cast<uint64_t>(s[2 * k]), end = static_cast<uint64_t>(s[2 * k + 1]);
		cr_assert(start >= prev_end && start <= end && end <= after,
			  "command %d stamped [%llu, %llu]: expected prev end %llu <= start <= end <= %llu", k,
			  (unsigned long long)start, (unsigned long long)end, (unsigned long long)prev_end,
			  (unsigned long long)after);
		prev_end = end;
	}
	const uint8_t *guard = reinterpret_cast<const uint8_t *>(&s[8]);
	for (int i = 0; i < 16; ++i)
		cr_assert(guard[i] == 0x55, "byte %d after the last stamp was written (0x%02x)", 64 + i, guard[i]);
	t.close();
}
