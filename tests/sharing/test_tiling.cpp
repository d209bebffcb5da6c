// Tiles are exact, and every opcode is preemptible (issue 5: a reclaim always meets
// its deadline). A neurond with the smallest tiles cuts each command below into many;
// results are checked against host references computed here, in double. Then a
// saturating load of the ops that used to run as one tile (log-softmax, the
// indexing ops, comparisons) must not delay a reclaim past its deadline.
#include "sharing_test.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <functional>

using namespace neuron;
using namespace sh;

static void down() { stop_daemon(); }

namespace {

neuron_tensor_desc desc(uint64_t addr, int dtype, std::vector<int64_t> sizes)
{
	return neuron_desc_contiguous(addr, dtype, int(sizes.size()), sizes.data());
}

template <typename T> uint64_t put(Tenant &t, const std::vector<T> &v)
{
	const uint64_t a = t.alloc(v.size() * sizeof(T));
	upload(t.dma, a, v.data(), v.size() * sizeof(T));
	return a;
}

template <typename T> std::vector<T> get(Tenant &t, uint64_t addr, size_t n)
{
	std::vector<T> v(n);
	download(t.dma, v.data(), addr, n * sizeof(T));
	return v;
}

void run(Tenant &t, const neuron_cmd &c, const char *what)
{
	uint64_t seq;
	cr_assert(neuron_submit(t.cores[0], &c, &seq) == NEURON_OK, "%s: %s", what, neuron_last_error());
	cr_assert(neuron_queue_wait(t.cores[0], seq, test::wait_ns(60'000'000'000)) == NEURON_OK, "%s: %s", what, neuron_last_error());
}

std::vector<float> ramp(size_t n, int mul, int mod)
{
	std::vector<float> v(n);
	for (size_t i = 0; i < n; ++i)
		v[i] = float(int64_t(i * mul) % mod) / 4.0f - 2.0f;
	return v;
}

void expect_close(const std::vector<float> &got, const std::vector<double> &ref, double tol, const char *what)
{
	cr_assert_eq(got.size(), ref.size());
	for (size_t i = 0; i < ref.size(); ++i)
		cr_assert(std::fabs(got[i] - ref[i]) <= tol * (1.0 + std::fabs(ref[i])), "%s[%zu] = %.6f, expected %.6f",
			  what, i, double(got[i]), ref[i]);
}

uint64_t tiles_so_far()
{
	uint64_t n = 0;
	const api::CapacityReply cap = capacity();
	for (const auto &c : cap.cores())
		n += c.tiles();
	return n;
}

// Runs c and asserts it was cut into at least `min_tiles` tiles.
void run_tiled(Tenant &t, const neuron_cmd &c, uint64_t min_tiles, const char *what)
{
	const uint64_t before = tiles_so_far();
	run(t, c, what);
	const uint64_t n = tiles_so_far() - before;
	cr_assert(n >= min_tiles, "%s ran as %llu tiles, expected at least %llu", what, (unsigned long long)n,
		  (unsigned long long)min_tiles);
}

} // namespace

namespace {

// out = 0.5 * a @ b - 2 * out for a 96x80x200 matmul whose b is a transposed view, on
// logical core 0 of t. Returns the command; `ref` gets the expected output (double).
struct KSplitMatmul {
	static constexpr int64_t M = 96, N = 80, K = 200;
	std::vector<float> A = ramp(size_t(M * K), 7, 13), Bt = ramp(size_t(N * K), 5, 11), C0 = ramp(size_t(M * N), 3, 7);
	uint64_t dc = 0;
	neuron_cmd cmd;

	explicit KSplitMatmul(Tenant &t)
	{
		const uint64_t da = put(t, A), db = put(t, Bt);
		dc = put(t, C0);
		neuron_cmd_init(&cmd, NEURON_OP_MATMUL, 3);
		cmd.operands[0] = desc(dc, NEURON_DTYPE_F32, {M, N});
		cmd.operands[1] = desc(da, NEURON_DTYPE_F32, {M, K});
		// b = Bt^T: a transposed view, K x N with strides (1, K).
		cmd.operands[2] = desc(db, NEURON_DTYPE_F32, {K, N});
		cmd.operands[2].strides[0] = 1;
		cmd.operands[2].strides[1] = K;
		cmd.fscalars.f[0] = 0.5;  // alpha
		cmd.fscalars.f[1] = -2.0; // beta: only the first K tile of each block may apply it
	}

	// The output after the command ran `times` times (each run feeds the last output back).
	std::vector<double> expected(int times) const
	{
		std::vector<double> c(C0.begin(), C0.end());
		for (int r = 0; r < times; ++r)
			for (int64_t i = 0; i < M; ++i)
				for (int64_t j = 0; j < N; ++j) {
					double s = 0;
					for (int64_t k = 0; k < K; ++k)
						s += double(A[size_t(i * K + k)]) * double(Bt[size_t(j * K + k)]);
					c[size_t(i * N + j)] = 0.5 * s - 2.0 * c[size_t(i * N + j)];
				}
		return c;
	}
};

} // namespace

Test(tiling, matmul_split_along_k_accumulates_exactly, .fini = down, .timeout = 120)
{
	// 2^10 multiply-adds per tile: 96x80x200 is ~1500 tiles, K cut in ~20 pieces.
	start_daemon({"--tile-macs", "1024"});
	Tenant t;
	t.open("tiles", NEURON_TENANT_TRAINING, 1);
	KSplitMatmul mm(t);
	run_tiled(t, mm.cmd, 100, "matmul");
	expect_close(get<float>(t, mm.dc, size_t(mm.M * mm.N)), mm.expected(1), 1e-4, "matmul");
	t.close();
}

// A core's host threads run tiles side by side (tile_cursor.h): the K tiles of one
// output block stay in order on one thread at a time, also when two tenants take
// turns on a single core and every switch parks chains halfway (3 threads on this
// 2-CPU host: threads get descheduled mid-chain too).
Test(tiling, k_chains_on_three_threads_with_tenants_taking_turns_are_exact, .fini = down, .timeout = 120)
{
	start_daemon({"--cores", "1", "--inference-cores", "0", "--threads-per-core", "3", "--tile-macs", "4096"});
	Tenant a, b;
	a.open("tiles-a", NEURON_TENANT_TRAINING, 1);
	b.open("tiles-b", NEURON_TENANT_TRAINING, 1);
	KSplitMatmul ma(a), mb(b);
	const int runs = 4;
	const uint64_t before = tiles_so_far();
	uint64_t sa = 0, sb = 0;
	for (int r = 0; r < runs; ++r) {
		cr_assert(neuron_submit(a.cores[0], &ma.cmd, &sa) == NEURON_OK, "%s", neuron_last_error());
		cr_assert(neuron_submit(b.cores[0], &mb.cmd, &sb) == NEURON_OK, "%s", neuron_last_error());
	}
	cr_assert(neuron_queue_wait(a.cores[0], sa, test::wait_ns(60'000'000'000)) == NEURON_OK, "%s", neuron_last_error());
	cr_assert(neuron_queue_wait(b.cores[0], sb, test::wait_ns(60'000'000'000)) == NEURON_OK, "%s", neuron_last_error());
	const uint64_t tiles = tiles_so_far() - before;
	cr_assert(tiles >= 2 * runs * 300, "the matmuls ran as %llu tiles", (unsigned long long)tiles);
	const std::vector<double> ref = ma.expected(runs);
	expect_close(get<float>(a, ma.dc, ref.size()), ref, 1e-4, "tenant a's matmul");
	expect_close(get<float>(b, mb.dc, ref.size()), ref, 1e-4, "tenant b's matmul");
	a.close();
	b.close();
}

// Tiles big enough for the packed multiply (runtime/kernels/packed_gemm.h): each
// block of a and b is packed once per command and shared by the tiles and threads
// that use it (gemm_packs.h), also across a tenant switch that parks a chain. The
// packs must not outlive the command: the second matmul of each tenant runs on the
// same addresses after a has been overwritten, and must see the new a.
Test(tiling, packed_blocks_are_shared_by_tiles_and_dropped_between_commands, .fini = down, .timeout = 120)
{
	// 2^20 multiply-adds per tile: 128x128x64 blocks, with ragged edges in every dim.
	start_daemon({"--cores", "1", "--inference-cores", "0", "--threads-per-core", "3", "--tile-macs", "1048576"});
	constexpr int64_t M = 203, N = 192, K = 650;
	struct Run {
		Tenant t;
		std::vector<float> A, B;
		uint64_t da = 0, db = 0, dc = 0;
		neuron_cmd cmd;
		std::vector<double> expected() const
		{
			std::vector<double> c(size_t(M * N));
			for (int64_t i = 0; i < M; ++i)
				for (int64_t j = 0; j < N; ++j) {
					double s = 0;
					for (int64_t k = 0; k < K; ++k)
						s += double(A[size_t(i * K + k)]) * double(B[size_t(k * N + j)]);
					c[size_t(i * N + j)] = 2.0 * s;
				}
			return c;
		}
	} runs[2];
	for (int r = 0; r < 2; ++r) {
		Run &x = runs[r];
		x.t.open(r ? "packed-b" : "packed-a", NEURON_TENANT_TRAINING, 1);
		x.A = ramp(size_t(M * K), 7 + r, 13);
		x.B = ramp(size_t(K * N), 5, 11 + r);
		x.da = put(x.t, x.A);
		x.db = put(x.t, x.B);
		x.dc = x.t.alloc(uint64_t(M * N) * sizeof(float));
		neuron_cmd_init(&x.cmd, NEURON_OP_MATMUL, 3);
		x.cmd.operands[0] = desc(x.dc, NEURON_DTYPE_F32, {M, N});
		x.cmd.operands[1] = desc(x.da, NEURON_DTYPE_F32, {M, K});
		x.cmd.operands[2] = desc(x.db, NEURON_DTYPE_F32, {K, N});
		x.cmd.fscalars.f[0] = 2.0;
	}
	for (int round = 0; round < 2; ++round) {
		const uint64_t before = tiles_so_far();
		uint64_t seq[2];
		for (int r = 0; r < 2; ++r)
			cr_assert(neuron_submit(runs[r].t.cores[0], &runs[r].cmd, &seq[r]) == NEURON_OK, "%s",
				  neuron_last_error());
		for (int r = 0; r < 2; ++r)
			cr_assert(neuron_queue_wait(runs[r].t.cores[0], seq[r], test::wait_ns(60'000'000'000)) == NEURON_OK, "%s",
				  neuron_last_error());
		cr_assert(tiles_so_far() - before >= 2 * 40, "round %d ran as %llu tiles", round,
			  (unsigned long long)(tiles_so_far() - before));
		for (int r = 0; r < 2; ++r) {
			const std::string what = "round " + std::to_string(round) + ", tenant " + std::to_string(r);
			expect_close(get<float>(runs[r].t, runs[r].dc, size_t(M * N)), runs[r].expected(), 1e-5,
				     what.c_str());
			// New a, same address: stale packs would give the old product.
			runs[r].A = ramp(size_t(M * K), 3 + r, 17);
			upload(runs[r].t.dma, runs[r].da, runs[r].A.data(), runs[r].A.size() * sizeof(float));
		}
	}
	for (Run &x : runs)
		x.t.close();
}

namespace {

// Round to nearest even, as the chip's conversions do.
uint16_t to_half_bits(float f, int dtype)
{
	if (dtype == NEURON_DTYPE_BF16) {
		uint32_t u;
		std::memcpy(&u, &f, 4);
		return uint16_t((u + 0x7fff + ((u >> 16) & 1)) >> 16);
	}
	_Float16 h = static_cast<_Float16>(f);
	uint16_t b;
	std::memcpy(&b, &h, 2);
	return b;
}

double from_half_bits(uint16_t b, int dtype)
{
	if (dtype == NEURON_DTYPE_BF16) {
		const uint32_t u = uint32_t(b) << 16;
		float f;
		std::memcpy(&f, &u, 4);
		return f;
	}
	_Float16 h;
	std::memcpy(&h, &b, 2);
	return double(h);
}

// The distance between want and its neighbours in `dtype`: one unit in the last place.
double half_ulp_at(double want, int dtype)
{
	const int mantissa = dtype == NEURON_DTYPE_BF16 ? 7 : 10;
	return std::ldexp(1.0, std::ilogb(want) - mantissa);
}

} // namespace

// A bf16/f16 sum of everything and a bf16 matmul with a long K are cut along the
// reduced dim and K like f32 ones; their partial results stay in f32 per chain
// (runtime/chip/chain_partials.h) and are rounded once, so the result is the whole
// op's: within one unit in the last place of the exact value, where rounding each
// tile's partial result would drift by several (300 + 0.3 * 1960 in 256-element
// tiles loses ~0.8 per tile to bf16 rounding). Two tenants take turns on one core
// with 3 threads, so chains are parked with their partials and resumed.
Test(tiling, bf16_and_f16_sums_and_matmuls_keep_f32_partials, .fini = down, .timeout = 120)
{
	start_daemon({"--cores", "1", "--inference-cores", "0", "--threads-per-core", "3", "--tile-elements", "256",
		      "--tile-macs", "4096"});
	Tenant t[2];
	t[0].open("partials-a", NEURON_TENANT_TRAINING, 1);
	t[1].open("partials-b", NEURON_TENANT_TRAINING, 1);
	for (int dt : {NEURON_DTYPE_BF16, NEURON_DTYPE_F16}) {
		const char *name = dt == NEURON_DTYPE_BF16 ? "bf16 sum" : "f16 sum";
		std::vector<uint16_t> x(1961, to_half_bits(0.3f, dt));
		x[0] = to_half_bits(300.0f, dt);
		double exact = 0;
		for (uint16_t v : x)
			exact += from_half_bits(v, dt);
		const uint64_t dx = put(t[0], x), dout = put(t[0], std::vector<uint16_t>{0});
		neuron_cmd c;
		neuron_cmd_init(&c, NEURON_OP_SUM, 2);
		c.operands[0] = desc(dout, dt, {1});
		c.operands[1] = desc(dx, dt, {1961});
		c.iscalars[0] = 1;
		run_tiled(t[0], c, 6, name);
		const double got = from_half_bits(get<uint16_t>(t[0], dout, 1)[0], dt);
		cr_expect(std::fabs(got - exact) <= half_ulp_at(exact, dt), "%s = %.4f, exact %.4f", name, got, exact);
	}
	// out = 0.5 * a @ b - 2 * out, bf16, K = 600 in tiles of 16.
	constexpr int64_t M = 24, N = 24, K = 600;
	std::vector<uint16_t> A(size_t(M * K)), B(size_t(K * N)), C0(size_t(M * N));
	const std::vector<float> ra = ramp(A.size(), 7, 13), rb = ramp(B.size(), 5, 11), rc = ramp(C0.size(), 3, 7);
	for (size_t i = 0; i < A.size(); ++i)
		A[i] = to_half_bits(ra[i], NEURON_DTYPE_BF16);
	for (size_t i = 0; i < B.size(); ++i)
		B[i] = to_half_bits(rb[i], NEURON_DTYPE_BF16);
	for (size_t i = 0; i < C0.size(); ++i)
		C0[i] = to_half_bits(rc[i], NEURON_DTYPE_BF16);
	std::vector<double> want(C0.size());
	for (int64_t i = 0; i < M; ++i)
		for (int64_t j = 0; j < N; ++j) {
			double acc = 0;
			for (int64_t k = 0; k < K; ++k)
				acc += from_half_bits(A[size_t(i * K + k)], NEURON_DTYPE_BF16) *
				       from_half_bits(B[size_t(k * N + j)], NEURON_DTYPE_BF16);
			want[size_t(i * N + j)] = 0.5 * acc - 2.0 * from_half_bits(C0[size_t(i * N + j)], NEURON_DTYPE_BF16);
		}
	uint64_t dc[2], seq[2];
	neuron_cmd mm[2];
	for (int r = 0; r < 2; ++r) {
		const uint64_t da = put(t[r], A), db = put(t[r], B);
		dc[r] = put(t[r], C0);
		neuron_cmd_init(&mm[r], NEURON_OP_MATMUL, 3);
		mm[r].operands[0] = desc(dc[r], NEURON_DTYPE_BF16, {M, N});
		mm[r].operands[1] = desc(da, NEURON_DTYPE_BF16, {M, K});
		mm[r].operands[2] = desc(db, NEURON_DTYPE_BF16, {K, N});
		mm[r].fscalars.f[0] = 0.5;
		mm[r].fscalars.f[1] = -2.0;
	}
	const uint64_t before = tiles_so_far();
	for (int r = 0; r < 2; ++r)
		cr_assert(neuron_submit(t[r].cores[0], &mm[r], &seq[r]) == NEURON_OK, "%s", neuron_last_error());
	for (int r = 0; r < 2; ++r)
		cr_assert(neuron_queue_wait(t[r].cores[0], seq[r], test::wait_ns(60'000'000'000)) == NEURON_OK, "%s", neuron_last_error());
	cr_assert(tiles_so_far() - before >= 2 * 100, "the bf16 matmuls ran as %llu tiles",
		  (unsigned long long)(tiles_so_far() - before));
	for (int r = 0; r < 2; ++r) {
		const std::vector<uint16_t> got = get<uint16_t>(t[r], dc[r], want.size());
		for (size_t i = 0; i < want.size(); ++i) {
			const double g = from_half_bits(got[i], NEURON_DTYPE_BF16);
			cr_assert(std::fabs(g - want[i]) <= half_ulp_at(want[i], NEURON_DTYPE_BF16),
				  "tenant %d: bf16 matmul[%zu] = %.4f, expected %.4f", r, i, g, want[i]);
		}
	}
	t[0].close();
	t[1].close();
}

// Softmax and log-softmax rows longer than a tile are cut along the row; each block
// of rows runs its chunks twice, first gathering every row's max and sum of
// exponentials, then writing (kernels::gather_row_stats). Checked against double
// references, with rows along a strided dim too, a NaN row and a row of -inf (NaN
// rows, as the whole-row kernels and PyTorch give), and bf16 in and out.
Test(tiling, long_softmax_rows_run_in_two_passes, .fini = down, .timeout = 120)
{
	// 64 elements per softmax tile: a 700-element row is 11 chunks, 22 tiles.
	start_daemon({"--tile-elements", "256"});
	Tenant t;
	t.open("rows", NEURON_TENANT_TRAINING, 1);
	constexpr int64_t R = 4, L = 700;
	std::vector<float> x = ramp(size_t(R * L), 13, 29);
	for (int64_t j = 0; j < L; ++j) {
		x[size_t(1 * L + j)] = float(j % 97) * 0.25f - 9.0f + (j == 500 ? 30.0f : 0.0f); // a late max
		x[size_t(2 * L + j)] = j == 333 ? NAN : x[size_t(2 * L + j)];
		x[size_t(3 * L + j)] = -INFINITY;
	}
	// reference(x row) for softmax or log-softmax, in double.
	auto reference = [&](const std::vector<float> &v, int64_t row, int64_t stride, int64_t step, bool log) {
		std::vector<double> y(static_cast<size_t>(L));
		double m = -INFINITY;
		bool nan = false;
		for (int64_t j = 0; j < L; ++j) {
			const double e = v[size_t(row * stride + j * step)];
			nan = nan || std::isnan(e);
			m = std::max(m, e);
		}
		double sum = 0;
		for (int64_t j = 0; j < L; ++j)
			sum += std::exp(double(v[size_t(row * stride + j * step)]) - m);
		for (int64_t j = 0; j < L; ++j) {
			const double e = v[size_t(row * stride + j * step)];
			y[size_t(j)] = (nan || std::isinf(m)) ? NAN : log ? e - m - std::log(sum) : std::exp(e - m) / sum;
		}
		return y;
	};
	auto check = [&](const std::vector<float> &got, const std::vector<double> &want, const char *what) {
		for (size_t i = 0; i < want.size(); ++i) {
			if (std::isnan(want[i]) || std::isinf(want[i])) {
				cr_assert(std::isnan(want[i]) ? std::isnan(got[i]) : double(got[i]) == want[i],
					  "%s[%zu] = %g, expected %g", what, i, double(got[i]), want[i]);
				continue;
			}
			cr_assert(std::fabs(got[i] - want[i]) <= 1e-5 * (1.0 + std::fabs(want[i])), "%s[%zu] = %.7g, expected %.7g",
				  what, i, double(got[i]), want[i]);
		}
	};
	const uint64_t dx = put(t, x), dy = t.alloc(x.size() * sizeof(float));
	for (bool log : {false, true}) {
		const char *what = log ? "log_softmax rows" : "softmax rows";
		neuron_cmd c;
		neuron_cmd_init(&c, log ? NEURON_OP_LOG_SOFTMAX : NEURON_OP_SOFTMAX, 2);
		c.operands[0] = desc(dy, NEURON_DTYPE_F32, {R, L});
		c.operands[1] = desc(dx, NEURON_DTYPE_F32, {R, L});
		c.iscalars[0] = 1;
		run_tiled(t, c, R * 22, what);
		std::vector<double> want;
		for (int64_t r = 0; r < R; ++r) {
			const auto y = reference(x, r, L, 1, log);
			want.insert(want.end(), y.begin(), y.end());
		}
		check(get<float>(t, dy, x.size()), want, what);
		// The same data read as L x R, softmax along dim 0: rows with stride R.
		c.operands[0] = desc(dy, NEURON_DTYPE_F32, {L, R});
		c.operands[1] = desc(dx, NEURON_DTYPE_F32, {L, R});
		c.iscalars[0] = 0;
		run_tiled(t, c, R * 22, what);
		const std::vector<float> got = get<float>(t, dy, x.size());
		for (int64_t r = 0; r < R; ++r) {
			const auto y = reference(x, r, 1, R, log);
			std::vector<float> col(static_cast<size_t>(L));
			for (int64_t j = 0; j < L; ++j)
				col[size_t(j)] = got[size_t(j * R + r)];
			check(col, y, what);
		}
	}
	// bf16 in and out: one rounding of the f32 result.
	std::vector<uint16_t> xb(static_cast<size_t>(L));
	std::vector<float> xr(static_cast<size_t>(L));
	for (int64_t j = 0; j < L; ++j) {
		xb[size_t(j)] = to_half_bits(x[size_t(L + j)], NEURON_DTYPE_BF16);
		xr[size_t(j)] = float(from_half_bits(xb[size_t(j)], NEURON_DTYPE_BF16));
	}
	const uint64_t dxb = put(t, xb), dyb = t.alloc(size_t(L) * 2);
	neuron_cmd c;
	neuron_cmd_init(&c, NEURON_OP_SOFTMAX, 2);
	c.operands[0] = desc(dyb, NEURON_DTYPE_BF16, {L});
	c.operands[1] = desc(dxb, NEURON_DTYPE_BF16, {L});
	c.iscalars[0] = 0;
	run_tiled(t, c, 22, "bf16 softmax row");
	const std::vector<double> want = reference(xr, 0, L, 1, false);
	const std::vector<uint16_t> got = get<uint16_t>(t, dyb, size_t(L));
	for (int64_t j = 0; j < L; ++j) {
		const double g = from_half_bits(got[size_t(j)], NEURON_DTYPE_BF16);
		cr_assert(std::fabs(g - want[size_t(j)]) <= half_ulp_at(want[size_t(j)], NEURON_DTYPE_BF16) + 1e-30,
			  "bf16 softmax[%lld] = %g, expected %g", (long long)j, g, want[size_t(j)]);
	}
	t.close();
}

// LAYER_NORM and its backward are cut into blocks of whole rows (the weight and
// bias whole in every tile), the parameter gradients' later tiles adding to the
// sums; rows along dim 0 (strided) too. Results against the layer norm computed
// here in double.
Test(tiling, layer_norm_rows_are_tiled_and_exact, .fini = down, .timeout = 120)
{
	start_daemon({"--tile-elements", "256"});
	Tenant t;
	t.open("lnrows", NEURON_TENANT_TRAINING, 1);
	constexpr int64_t R = 48, L = 40;
	const std::vector<float> x = ramp(size_t(R * L), 13, 29), go = ramp(size_t(R * L), 7, 23);
	const uint64_t dx = put(t, x), dgo = put(t, go);
	const uint64_t dout = t.alloc(x.size() * 4), dmean = t.alloc(size_t(R) * 4), drstd = t.alloc(size_t(R) * 4);
	const uint64_t dgrad = t.alloc(x.size() * 4), ddw = t.alloc(size_t(L) * 4), ddb = t.alloc(size_t(L) * 4);
	for (int along : {1, 0}) {
		// R rows of L along dim 1 of [R, L], or along dim 0 of [L, R] (stride R).
		const int64_t rows = R, len = L; // row r, element j at r * L + j or at j * R + r
		const std::vector<int64_t> shape = along == 1 ? std::vector<int64_t>{R, L} : std::vector<int64_t>{L, R};
		std::vector<int64_t> sshape = shape;
		sshape[size_t(along)] = 1;
		auto at = [&](int64_t r, int64_t j) { return size_t(along == 1 ? r * L + j : j * R + r); };
		const std::vector<float> wl = ramp(size_t(len), 5, 11);
		const uint64_t dwl = put(t, wl);
		neuron_cmd c;
		neuron_cmd_init(&c, NEURON_OP_LAYER_NORM, 5);
		c.operands[0] = desc(dout, NEURON_DTYPE_F32, shape);
		c.operands[1] = desc(dmean, NEURON_DTYPE_F32, sshape);
		c.operands[2] = desc(drstd, NEURON_DTYPE_F32, sshape);
		c.operands[3] = desc(dx, NEURON_DTYPE_F32, shape);
		c.operands[4] = desc(dwl, NEURON_DTYPE_F32, {len});
		c.iscalars[0] = along;
		c.fscalars.f[0] = 1e-5;
		run_tiled(t, c, uint64_t(R * L / 256), "layer_norm");
		neuron_cmd b;
		neuron_cmd_init(&b, NEURON_OP_LAYER_NORM_BACKWARD, 6);
		b.operands[0] = desc(dgrad, NEURON_DTYPE_F32, shape);
		b.operands[1] = desc(dgo, NEURON_DTYPE_F32, shape);
		b.operands[2] = desc(dx, NEURON_DTYPE_F32, shape);
		b.operands[3] = desc(dmean, NEURON_DTYPE_F32, sshape);
		b.operands[4] = desc(drstd, NEURON_DTYPE_F32, sshape);
		b.operands[5] = desc(dwl, NEURON_DTYPE_F32, {len});
		b.iscalars[0] = along;
		run_tiled(t, b, uint64_t(R * L / 256), "layer_norm_backward");
		// The weight and bias gradients: every tile after the first adds to them.
		neuron_cmd pg;
		neuron_cmd_init(&pg, NEURON_OP_LAYER_NORM_PARAM_GRAD, 6);
		pg.operands[0] = desc(ddw, NEURON_DTYPE_F32, {len});
		pg.operands[1] = desc(ddb, NEURON_DTYPE_F32, {len});
		pg.operands[2] = desc(dgo, NEURON_DTYPE_F32, shape);
		pg.operands[3] = desc(dx, NEURON_DTYPE_F32, shape);
		pg.operands[4] = desc(dmean, NEURON_DTYPE_F32, sshape);
		pg.operands[5] = desc(drstd, NEURON_DTYPE_F32, sshape);
		pg.iscalars[0] = along;
		run_tiled(t, pg, uint64_t(R * L / 256), "layer_norm_param_grad");
		const std::vector<float> out = get<float>(t, dout, x.size()), grad = get<float>(t, dgrad, x.size());
		std::vector<double> want_out(x.size()), want_grad(x.size()), want_dw(static_cast<size_t>(len)), want_db(static_cast<size_t>(len));
		std::vector<float> got_out(x.size()), got_grad(x.size());
		for (int64_t r = 0; r < rows; ++r) {
			double m = 0, v = 0, s1 = 0, s2 = 0;
			for (int64_t j = 0; j < len; ++j)
				m += x[at(r, j)];
			m /= double(len);
			for (int64_t j = 0; j < len; ++j)
				v += (x[at(r, j)] - m) * (x[at(r, j)] - m);
			const double rstd = 1.0 / std::sqrt(v / double(len) + 1e-5);
			for (int64_t j = 0; j < len; ++j) {
				const double g = go[at(r, j)] * wl[size_t(j)], xh = (x[at(r, j)] - m) * rstd;
				s1 += g;
				s2 += g * xh;
			}
			for (int64_t j = 0; j < len; ++j) {
				const size_t i = size_t(r * len + j);
				const double g = go[at(r, j)] * wl[size_t(j)], xh = (x[at(r, j)] - m) * rstd;
				want_out[i] = xh * wl[size_t(j)];
				want_dw[size_t(j)] += go[at(r, j)] * xh;
				want_db[size_t(j)] += go[at(r, j)];
				want_grad[i] = (g - s1 / double(len) - xh * s2 / double(len)) * rstd;
				got_out[i] = out[at(r, j)];
				got_grad[i] = grad[at(r, j)];
			}
		}
		expect_close(got_out, want_out, 1e-5, along == 1 ? "layer_norm rows" : "layer_norm columns");
		expect_close(got_grad, want_grad, 1e-4, along == 1 ? "layer_norm_backward rows" : "layer_norm_backward columns");
		expect_close(get<float>(t, ddw, size_t(len)), want_dw, 1e-4, "layer_norm_param_grad dw");
		expect_close(get<float>(t, ddb, size_t(len)), want_db, 1e-5, "layer_norm_param_grad db");
	}
	t.close();
}

// Arg-reduce rows longer than a tile are cut along the row; each chain carries its
// rows' best element so far. PyTorch's rules hold across chunk boundaries: the
// first index wins a tie (the max appears in several chunks), the first NaN wins
// (one NaN in an early chunk, one later); rows along a strided dim; int32 too.
Test(tiling, long_arg_reduce_rows_carry_the_best_so_far, .fini = down, .timeout = 120)
{
	// 256 elements per tile: 1000-element rows are 4 chunks.
	start_daemon({"--tile-elements", "256"});
	Tenant t;
	t.open("argrows", NEURON_TENANT_TRAINING, 1);
	constexpr int64_t R = 3, L = 1000;
	std::vector<float> x = ramp(size_t(R * L), 17, 31);
	x[size_t(0 * L + 300)] = 50.0f; // row 0: ties for the max in chunks 1 and 3
	x[size_t(0 * L + 900)] = 50.0f;
	x[size_t(0 * L + 10)] = -50.0f; // and for the min in chunks 0 and 2
	x[size_t(0 * L + 600)] = -50.0f;
	x[size_t(1 * L + 700)] = NAN; // row 1: two NaNs, the first in chunk 2
	x[size_t(1 * L + 999)] = NAN;
	x[size_t(2 * L + 999)] = 99.0f; // row 2: the max in the last element
	auto reference = [&](int64_t row, int64_t stride, int64_t step, bool min) {
		int64_t best = 0;
		for (int64_t j = 0; j < L; ++j) {
			const float v = x[size_t(row * stride + j * step)], b = x[size_t(row * stride + best * step)];
			if (std::isnan(b))
				break;
			if (std::isnan(v) || (min ? v < b : v > b))
				best = j;
		}
		return best;
	};
	const uint64_t dx = put(t, x), dout = t.alloc(R * sizeof(int64_t));
	for (bool min : {false, true}) {
		const char *what = min ? "argmin rows" : "argmax rows";
		neuron_cmd c;
		neuron_cmd_init(&c, NEURON_OP_ARG_REDUCE, 2);
		c.operands[0] = desc(dout, NEURON_DTYPE_I64, {R, 1});
		c.operands[1] = desc(dx, NEURON_DTYPE_F32, {R, L});
		c.iscalars[0] = 1;
		c.iscalars[1] = min ? 1 : 0;
		run_tiled(t, c, R * 4, what);
		const std::vector<int64_t> got = get<int64_t>(t, dout, R);
		for (int64_t r = 0; r < R; ++r)
			cr_assert_eq(got[size_t(r)], reference(r, L, 1, min), "%s[%lld] = %lld, expected %lld", what,
				     (long long)r, (long long)got[size_t(r)], (long long)reference(r, L, 1, min));
		// The same data as L x R, reduced along dim 0: rows with stride R.
		c.operands[0] = desc(dout, NEURON_DTYPE_I64, {1, R});
		c.operands[1] = desc(dx, NEURON_DTYPE_F32, {L, R});
		c.iscalars[0] = 0;
		run_tiled(t, c, R * 4, what);
		const std::vector<int64_t> col = get<int64_t>(t, dout, R);
		for (int64_t r = 0; r < R; ++r)
			cr_assert_eq(col[size_t(r)], reference(r, 1, R, min), "%s along dim 0 [%lld] = %lld, expected %lld",
				     what, (long long)r, (long long)col[size_t(r)], (long long)reference(r, 1, R, min));
	}
	std::vector<int32_t> xi(static_cast<size_t>(L));
	for (int64_t j = 0; j < L; ++j)
		xi[size_t(j)] = int32_t((j * 7919) % 1009);
	xi[size_t(L - 1)] = 5000;
	const uint64_t dxi = put(t, xi);
	neuron_cmd c;
	neuron_cmd_init(&c, NEURON_OP_ARG_REDUCE, 2);
	c.operands[0] = desc(dout, NEURON_DTYPE_I64, {1});
	c.operands[1] = desc(dxi, NEURON_DTYPE_I32, {L});
	run_tiled(t, c, 4, "int32 argmax");
	cr_assert_eq(get<int64_t>(t, dout, 1)[0], L - 1, "int32 argmax");
	t.close();
}

// Indexing ops whose only long dim is the indexed one are cut along the index
// positions j, as one ordered chain: adds sum in the whole op's order (f32 results
// equal to a sequential host loop, bit for bit), copies let the last duplicate win
// across chunks, selects and gathers read anywhere in their input. An index out of
// range in a late chunk faults the command and names it.
Test(tiling, one_dim_indexing_runs_as_an_ordered_chain, .fini = down, .timeout = 120)
{
	// 1000 positions: 4 chunks, on 3 host threads (only the chain keeps them in order).
	start_daemon({"--tile-elements", "256", "--threads-per-core", "3"});
	Tenant t;
	t.open("ix1d", NEURON_TENANT_TRAINING, 1);
	constexpr int64_t N = 1000, M = 37; // positions, out/in extent
	std::vector<int64_t> idx(static_cast<size_t>(N));
	for (int64_t j = 0; j < N; ++j)
		idx[size_t(j)] = (j * 11 + j / 7) % M; // every slot many times, across chunks
	const std::vector<float> src = ramp(size_t(N), 7, 23), in = ramp(size_t(M), 5, 13);
	const std::vector<float> out0 = ramp(size_t(M), 3, 11);
	const uint64_t didx = put(t, idx), dsrc = put(t, src), din = put(t, in);
	auto op = [&](uint16_t code, uint64_t out, int64_t out_n, uint64_t a, int64_t a_n, uint64_t b, int64_t b_n,
		      int b_dtype) {
		neuron_cmd c;
		neuron_cmd_init(&c, code, 3);
		c.operands[0] = desc(out, NEURON_DTYPE_F32, {out_n});
		c.operands[1] = desc(a, code == NEURON_OP_INDEX_SELECT || code == NEURON_OP_GATHER ? NEURON_DTYPE_F32 : NEURON_DTYPE_I64, {a_n});
		c.operands[2] = desc(b, b_dtype, {b_n});
		c.iscalars[0] = 0;
		return c;
	};
	{ // index_add and scatter_add: out[idx[j]] += src[j]
		for (uint16_t code : {NEURON_OP_INDEX_ADD, NEURON_OP_SCATTER_ADD}) {
			const uint64_t dout = put(t, out0);
			run_tiled(t, op(code, dout, M, didx, N, dsrc, N, NEURON_DTYPE_F32), 4, "1-d add");
			std::vector<float> want = out0;
			for (int64_t j = 0; j < N; ++j) // the kernel adds in double and rounds each add
				want[size_t(idx[size_t(j)])] = float(double(want[size_t(idx[size_t(j)])]) + double(src[size_t(j)]));
			const std::vector<float> got = get<float>(t, dout, size_t(M));
			for (int64_t k = 0; k < M; ++k)
				cr_assert_eq(got[size_t(k)], want[size_t(k)], "%s[%lld] = %.9g, expected %.9g",
					     code == NEURON_OP_INDEX_ADD ? "index_add" : "scatter_add", (long long)k,
					     double(got[size_t(k)]), double(want[size_t(k)]));
		}
	}
	{ // index_copy and scatter: out[idx[j]] = src[j], the last j wins
		for (uint16_t code : {NEURON_OP_INDEX_COPY, NEURON_OP_SCATTER}) {
			const uint64_t dout = put(t, out0);
			run_tiled(t, op(code, dout, M, didx, N, dsrc, N, NEURON_DTYPE_F32), 4, "1-d copy");
			std::vector<float> want = out0;
			for (int64_t j = 0; j < N; ++j)
				want[size_t(idx[size_t(j)])] = src[size_t(j)];
			const std::vector<float> got = get<float>(t, dout, size_t(M));
			for (int64_t k = 0; k < M; ++k)
				cr_assert_eq(got[size_t(k)], want[size_t(k)], "1-d copy[%lld]", (long long)k);
		}
	}
	{ // index_select and gather: out[j] = in[idx[j]]
		for (uint16_t code : {NEURON_OP_INDEX_SELECT, NEURON_OP_GATHER}) {
			const uint64_t dout = t.alloc(uint64_t(N) * 4);
			run_tiled(t, op(code, dout, N, din, M, didx, N, NEURON_DTYPE_I64), 4, "1-d select");
			const std::vector<float> got = get<float>(t, dout, size_t(N));
			for (int64_t j = 0; j < N; ++j)
				cr_assert_eq(got[size_t(j)], in[size_t(idx[size_t(j)])], "1-d select[%lld]", (long long)j);
		}
	}
	{ // an index out of range in the last chunk
		std::vector<int64_t> bad = idx;
		bad[size_t(N - 3)] = M + 5;
		const uint64_t dbad = put(t, bad), dout = put(t, out0);
		const neuron_cmd c = op(NEURON_OP_INDEX_ADD, dout, M, dbad, N, dsrc, N, NEURON_DTYPE_F32);
		uint64_t seq;
		cr_assert(neuron_submit(t.cores[0], &c, &seq) == NEURON_OK, "%s", neuron_last_error());
		cr_assert(neuron_queue_wait(t.cores[0], seq, test::wait_ns(60'000'000'000)) == NEURON_ERR_FAULT,
			  "a bad index in the last chunk did not fault the command");
		neuron_fault f;
		cr_assert(neuron_queue_fault(t.cores[0], &f) == NEURON_OK);
		cr_assert(std::strstr(f.reason, std::to_string(M + 5).c_str()) != nullptr, "the fault does not name the index: %s",
			  f.reason);
	}
	t.close();
}

// Reductions with no kept dim to split (a sum of everything), or too few outputs,
// are cut along a reduced dim too: later tiles add into (max with) the output.
Test(tiling, reductions_of_everything_are_tiled_and_exact, .fini = down, .timeout = 120)
{
	start_daemon({"--tile-elements", "256"});
	Tenant t;
	t.open("tiles", NEURON_TENANT_TRAINING, 1);
	const int64_t R = 37, C = 53;
	std::vector<float> x = ramp(size_t(R * C), 7, 19);
	x[size_t(R * C / 2)] = 9.5f; // the max, mid-tensor
	const uint64_t dx = put(t, x);
	std::vector<int32_t> xi(x.size());
	for (size_t i = 0; i < x.size(); ++i)
		xi[i] = int32_t(i * 2654435761u % 100000) - 50000;
	const uint64_t dxi = put(t, xi);
	double sum = 0, isum = 0;
	for (float v : x)
		sum += v;
	for (int32_t v : xi)
		isum += v;
	const uint64_t dout = put(t, std::vector<float>{123.0f}); // overwritten, not added to
	const uint64_t dlong = put(t, std::vector<int64_t>{77});
	struct Case {
		uint16_t op;
		const char *what;
		double want;
	} cases[] = {{NEURON_OP_SUM, "sum", sum}, {NEURON_OP_MEAN, "mean", sum / double(R * C)}, {NEURON_OP_AMAX, "amax", 9.5}};
	for (const Case &k : cases) {
		neuron_cmd c;
		neuron_cmd_init(&c, k.op, 2);
		c.operands[0] = desc(dout, NEURON_DTYPE_F32, {1, 1});
		c.operands[1] = desc(dx, NEURON_DTYPE_F32, {R, C});
		c.iscalars[0] = 3;
		run_tiled(t, c, 6, k.what);
		expect_close(get<float>(t, dout, 1), {k.want}, 1e-5, k.what);
	}
	neuron_cmd c;
	neuron_cmd_init(&c, NEURON_OP_SUM, 2);
	c.operands[0] = desc(dlong, NEURON_DTYPE_I64, {1, 1});
	c.operands[1] = desc(dxi, NEURON_DTYPE_I32, {R, C});
	c.iscalars[0] = 3;
	run_tiled(t, c, 6, "int32 sum");
	cr_assert_eq(get<int64_t>(t, dlong, 1)[0], int64_t(isum), "int32 sum of everything");
	// Three long rows: three outputs, each cut along the row.
	const uint64_t drows = put(t, std::vector<float>(3, 0.0f));
	neuron_cmd m;
	neuron_cmd_init(&m, NEURON_OP_MEAN, 2);
	m.operands[0] = desc(drows, NEURON_DTYPE_F32, {3, 1});
	m.operands[1] = desc(dx, NEURON_DTYPE_F32, {3, 600});
	m.iscalars[0] = 2;
	run_tiled(t, m, 6, "mean of rows");
	std::vector<double> rows(3, 0.0);
	for (int r = 0; r < 3; ++r) {
		for (int j = 0; j < 600; ++j)
			rows[size_t(r)] += x[size_t(r * 600 + j)];
		rows[size_t(r)] /= 600.0;
	}
	expect_close(get<float>(t, drows, 3), rows, 1e-5, "mean of rows");
	t.close();
}

Test(tiling, log_softmax_compare_and_indexing_are_tiled_and_exact, .fini = down, .timeout = 120)
{
	start_daemon({"--tile-elements", "256"});
	Tenant t;
	t.open("tiles", NEURON_TENANT_TRAINING, 1);

	{ // log_softmax along dim 1 of [64, 100]: tiles of rows.
		const int64_t R = 64, C = 100;
		const auto x = ramp(size_t(R * C), 11, 29);
		const uint64_t dx = put(t, x), dy = t.alloc(uint64_t(R * C * 4));
		neuron_cmd c;
		neuron_cmd_init(&c, NEURON_OP_LOG_SOFTMAX, 2);
		c.operands[0] = desc(dy, NEURON_DTYPE_F32, {R, C});
		c.operands[1] = desc(dx, NEURON_DTYPE_F32, {R, C});
		c.iscalars[0] = 1;
		run_tiled(t, c, 8, "log_softmax");
		std::vector<double> ref(x.size());
		for (int64_t r = 0; r < R; ++r) {
			double m = -1e30, s = 0;
			for (int64_t j = 0; j < C; ++j)
				m = std::max(m, double(x[size_t(r * C + j)]));
			for (int64_t j = 0; j < C; ++j)
				s += std::exp(double(x[size_t(r * C + j)]) - m);
			for (int64_t j = 0; j < C; ++j)
				ref[size_t(r * C + j)] = double(x[size_t(r * C + j)]) - m - std::log(s);
		}
		expect_close(get<float>(t, dy, ref.size()), ref, 1e-5, "log_softmax");
	}
	{ // compare a < b over 4096 elements (bool output).
		const int64_t n = 4096;
		const auto a = ramp(size_t(n), 7, 17), b = ramp(size_t(n), 5, 13);
		const uint64_t da = put(t, a), db = put(t, b), dout = t.alloc(uint64_t(n));
		neuron_cmd c;
		neuron_cmd_init(&c, NEURON_OP_COMPARE, 3);
		c.operands[0] = desc(dout, NEURON_DTYPE_BOOL, {n});
		c.operands[1] = desc(da, NEURON_DTYPE_F32, {n});
		c.operands[2] = desc(db, NEURON_DTYPE_F32, {n});
		c.iscalars[0] = NEURON_CMP_LT;
		run_tiled(t, c, 8, "compare");
		const auto got = get<uint8_t>(t, dout, size_t(n));
		for (int64_t i = 0; i < n; ++i)
			cr_assert_eq(got[size_t(i)] != 0, a[size_t(i)] < b[size_t(i)], "compare[%lld]", (long long)i);
	}
	{ // index_select along dim 0: out[30, 40] = in[index[j], :] with in [50, 40].
		const int64_t rows = 50, cols = 40, picks = 30;
		const auto in = ramp(size_t(rows * cols), 3, 31);
		std::vector<int64_t> idx(static_cast<size_t>(picks));
		for (int64_t j = 0; j < picks; ++j)
			idx[size_t(j)] = (j * 17) % rows;
		const uint64_t din = put(t, in), didx = put(t, idx), dout = t.alloc(uint64_t(picks * cols * 4));
		neuron_cmd c;
		neuron_cmd_init(&c, NEURON_OP_INDEX_SELECT, 3);
		c.operands[0] = desc(dout, NEURON_DTYPE_F32, {picks, cols});
		c.operands[1] = desc(din, NEURON_DTYPE_F32, {rows, cols});
		c.operands[2] = desc(didx, NEURON_DTYPE_I64, {picks});
		c.iscalars[0] = 0;
		run_tiled(t, c, 4, "index_select");
		std::vector<double> ref(size_t(picks * cols));
		for (int64_t j = 0; j < picks; ++j)
			for (int64_t k = 0; k < cols; ++k)
				ref[size_t(j * cols + k)] = in[size_t(idx[size_t(j)] * cols + k)];
		expect_close(get<float>(t, dout, ref.size()), ref, 0, "index_select");
	}
	{ // gather along dim 1: out[40, 20] = in[i, index[i][j]] with in [40, 30].
		const int64_t rows = 40, cols = 30, take = 20;
		const auto in = ramp(size_t(rows * cols), 5, 37);
		std::vector<int64_t> idx(size_t(rows * take));
		for (size_t i = 0; i < idx.size(); ++i)
			idx[i] = int64_t(i * 7) % cols;
		const uint64_t din = put(t, in), didx = put(t, idx), dout = t.alloc(uint64_t(rows * take * 4));
		neuron_cmd c;
		neuron_cmd_init(&c, NEURON_OP_GATHER, 3);
		c.operands[0] = desc(dout, NEURON_DTYPE_F32, {rows, take});
		c.operands[1] = desc(din, NEURON_DTYPE_F32, {rows, cols});
		c.operands[2] = desc(didx, NEURON_DTYPE_I64, {rows, take});
		c.iscalars[0] = 1;
		run_tiled(t, c, 3, "gather");
		std::vector<double> ref(size_t(rows * take));
		for (int64_t i = 0; i < rows; ++i)
			for (int64_t j = 0; j < take; ++j)
				ref[size_t(i * take + j)] = in[size_t(i * cols + idx[size_t(i * take + j)])];
		expect_close(get<float>(t, dout, ref.size()), ref, 0, "gather");
	}
	{ // index_add along dim 0: out[20, 64] += src[j, :] at row index[j], src [50, 64].
		const int64_t rows = 20, cols = 64, n = 50;
		const auto out0 = ramp(size_t(rows * cols), 3, 5), src = ramp(size_t(n * cols), 9, 23);
		std::vector<int64_t> idx(static_cast<size_t>(n));
		for (int64_t j = 0; j < n; ++j)
			idx[size_t(j)] = (j * 13) % rows;
		const uint64_t dout = put(t, out0), didx = put(t, idx), dsrc = put(t, src);
		neuron_cmd c;
		neuron_cmd_init(&c, NEURON_OP_INDEX_ADD, 3);
		c.operands[0] = desc(dout, NEURON_DTYPE_F32, {rows, cols});
		c.operands[1] = desc(didx, NEURON_DTYPE_I64, {n});
		c.operands[2] = desc(dsrc, NEURON_DTYPE_F32, {n, cols});
		c.iscalars[0] = 0;
		run_tiled(t, c, 8, "index_add");
		std::vector<double> ref(out0.begin(), out0.end());
		for (int64_t j = 0; j < n; ++j)
			for (int64_t k = 0; k < cols; ++k)
				ref[size_t(idx[size_t(j)] * cols + k)] += src[size_t(j * cols + k)];
		expect_close(get<float>(t, dout, ref.size()), ref, 1e-6, "index_add");
	}
	{ // scatter_add along dim 1: out[32, 16][i][index[i][j]] += src[i][j], src [32, 40].
		const int64_t rows = 32, cols = 16, n = 40;
		const auto out0 = ramp(size_t(rows * cols), 3, 5), src = ramp(size_t(rows * n), 9, 23);
		std::vector<int64_t> idx(size_t(rows * n));
		for (size_t i = 0; i < idx.size(); ++i)
			idx[i] = int64_t(i * 5) % cols;
		const uint64_t dout = put(t, out0), didx = put(t, idx), dsrc = put(t, src);
		neuron_cmd c;
		neuron_cmd_init(&c, NEURON_OP_SCATTER_ADD, 3);
		c.operands[0] = desc(dout, NEURON_DTYPE_F32, {rows, cols});
		c.operands[1] = desc(didx, NEURON_DTYPE_I64, {rows, n});
		c.operands[2] = desc(dsrc, NEURON_DTYPE_F32, {rows, n});
		c.iscalars[0] = 1;
		run_tiled(t, c, 4, "scatter_add");
		std::vector<double> ref(out0.begin(), out0.end());
		for (int64_t i = 0; i < rows; ++i)
			for (int64_t j = 0; j < n; ++j)
				ref[size_t(i * cols + idx[size_t(i * n + j)])] += src[size_t(i * n + j)];
		expect_close(get<float>(t, dout, ref.size()), ref, 1e-6, "scatter_add");
	}
	t.close();
}

// The ISA 1.2 ops, Adam step and arg-reduce: with the smallest tiles they give the
// same bits as the same commands run whole (a daemon whose tiles hold any command),
// and arg-reduce matches a host argmax.
namespace {
struct Isa12Result {
	std::vector<float> param, avg, avg_sq;
	std::vector<int64_t> argmax;
	uint64_t tiles = 0;
};

Isa12Result run_isa12(std::vector<std::string> flags)
{
	start_daemon(std::move(flags));
	Tenant t;
	t.open("isa12", NEURON_TENANT_TRAINING, 1);
	const int64_t R = 48, C = 100;
	Isa12Result res;
	const auto p0 = ramp(size_t(R * C), 7, 19), g = ramp(size_t(R * C), 5, 23);
	std::vector<float> zeros(size_t(R * C), 0.0f);
	const std::vector<int64_t> step = {3};
	const uint64_t dp = put(t, p0), da = put(t, zeros), ds = put(t, zeros), dg = put(t, g), dstep = put(t, step);
	neuron_cmd adam;
	neuron_cmd_init(&adam, NEURON_OP_ADAM_STEP, 5);
	adam.operands[0] = desc(dp, NEURON_DTYPE_F32, {R, C});
	adam.operands[1] = desc(da, NEURON_DTYPE_F32, {R, C});
	adam.operands[2] = desc(ds, NEURON_DTYPE_F32, {R, C});
	adam.operands[3] = desc(dg, NEURON_DTYPE_F32, {R, C});
	adam.operands[4] = desc(dstep, NEURON_DTYPE_I64, {1});
	adam.fscalars.f[0] = 0.01;
	adam.fscalars.f[1] = 0.9;
	adam.fscalars.f[2] = 0.999;
	adam.fscalars.f[3] = 1e-8;
	adam.iscalars[0] = NEURON_ADAM_DECOUPLED;
	const double wd = 0.1;
	std::memcpy(&adam.iscalars[1], &wd, sizeof(wd));
	const uint64_t before = tiles_so_far();
	run(t, adam, "adam_step");
	run(t, adam, "adam_step"); // twice: the moments feed back
	const uint64_t dout = t.alloc(uint64_t(R * 8));
	neuron_cmd arg;
	neuron_cmd_init(&arg, NEURON_OP_ARG_REDUCE, 2);
	arg.operands[0] = desc(dout, NEURON_DTYPE_I64, {R, 1});
	arg.operands[1] = desc(dg, NEURON_DTYPE_F32, {R, C});
	arg.iscalars[0] = 1;
	arg.iscalars[1] = 0; // argmax
	run(t, arg, "arg_reduce");
	res.tiles = tiles_so_far() - before;
	res.param = get<float>(t, dp, size_t(R * C));
	res.avg = get<float>(t, da, size_t(R * C));
	res.avg_sq = get<float>(t, ds, size_t(R * C));
	res.argmax = get<int64_t>(t, dout, size_t(R));
	t.close();
	stop_daemon();
	for (int64_t r = 0; r < R; ++r) {
		int64_t best = 0;
		for (int64_t j = 1; j < C; ++j)
			if (g[size_t(r * C + j)] > g[size_t(r * C + best)])
				best = j;
		cr_assert_eq(res.argmax[size_t(r)], best, "argmax of row %lld", (long long)r);
	}
	return res;
}
} // namespace

Test(tiling, adam_step_and_arg_reduce_tiles_match_whole_ops, .fini = down, .timeout = 120)
{
	const Isa12Result tiled = run_isa12({"--tile-elements", "256"});
	const Isa12Result whole = run_isa12({"--tile-elements", "1099511627776"});
	cr_assert(tiled.tiles >= 3 * 8, "the ops were cut into tiles (%llu tiles)", (unsigned long long)tiled.tiles);
	cr_assert_eq(whole.tiles, 3u, "one tile per command with huge tiles (%llu)", (unsigned long long)whole.tiles);
	cr_assert(tiled.param == whole.param, "Adam step: param differs between tiled and whole");
	cr_assert(tiled.avg == whole.avg, "Adam step: exp_avg differs");
	cr_assert(tiled.avg_sq == whole.avg_sq, "Adam step: exp_avg_sq differs");
	cr_assert(tiled.param != std::vector<float>(ramp(tiled.param.size(), 7, 19)), "the step changed param");
}

// The ops that used to run as one tile, each large (2^23 elements), keep the lent
// core busy; reclaims still finish by their deadline. The deadline (50 ms) is generous
// for a loaded CI box, yet one of these log-softmaxes untiled takes longer than it.
Test(tiling, reclaim_under_formerly_untiled_ops_meets_deadline, .fini = down, .timeout = 300)
{
	start_daemon({"--cores", "2"});
	Tenant train;
	train.open("untiled-ops", NEURON_TENANT_TRAINING, 2);
	const int64_t R = 4096, C = 2048;
	std::vector<neuron_cmd> ops;
	for (uint32_t q = 0; q < 2; ++q) {
		const uint64_t x = train.alloc(uint64_t(R * C * 4)), y = train.alloc(uint64_t(R * C * 4));
		const uint64_t idx = train.alloc(uint64_t(R * 8)); // zeros: row 0, always in range
		neuron_cmd ls;
		neuron_cmd_init(&ls, NEURON_OP_LOG_SOFTMAX, 2);
		ls.operands[0] = desc(y, NEURON_DTYPE_F32, {R, C});
		ls.operands[1] = desc(x, NEURON_DTYPE_F32, {R, C});
		ls.iscalars[0] = 1;
		neuron_cmd sel;
		neuron_cmd_init(&sel, NEURON_OP_INDEX_SELECT, 3);
		sel.operands[0] = desc(y, NEURON_DTYPE_F32, {R, C});
		sel.operands[1] = desc(x, NEURON_DTYPE_F32, {R, C});
		sel.operands[2] = desc(idx, NEURON_DTYPE_I64, {R});
		sel.iscalars[0] = 0;
		ops.push_back(ls);
		ops.push_back(sel);
	}
	std::atomic<bool> stop{false};
	std::vector<std::thread> feeders;
	for (uint32_t q = 0; q < 2; ++q)
		feeders.emplace_back([&, q] {
			uint64_t seq = 0;
			for (uint64_t i = 0; !stop.load(); ++i) {
				if (neuron_submit(train.cores[q], &ops[q * 2 + i % 2], &seq) != NEURON_OK)
					return;
				if (seq > 2 && neuron_queue_wait(train.cores[q], seq - 2, test::wait_ns(60'000'000'000)) != NEURON_OK)
					return;
			}
			neuron_queue_wait(train.cores[q], seq, test::wait_ns(60'000'000'000));
		});
	wait_for_tiles(16);
	std::vector<double> ms;
	int late = 0;
	const uint32_t deadline_ms = scaled_ms(50, 3);
	for (int i = 0; i < 15; ++i) {
		api::Response r = lend(api::POOL_INFERENCE, 1);
		cr_assert(r.has_loans(), "lend %d: %s", i, r.has_error() ? r.error().message().c_str() : "?");
		sleep_ms(static_cast<int>(scaled_ms(30, 2))); // the borrower is on the core
		r = reclaim(api::POOL_INFERENCE, deadline_ms);
		cr_assert(r.has_loans(), "reclaim %d: %s", i, r.has_error() ? r.error().message().c_str() : "?");
		late += r.loans().loans(0).late();
		ms.push_back(double(r.loans().loans(0).reclaim_latency_ns()) / 1e6);
	}
	stop.store(true);
	for (auto &f : feeders)
		f.join();
	const auto cap = capacity();
	uint64_t tiles = 0, commands = 0;
	for (const auto &c : cap.cores()) {
		tiles += c.tiles();
		commands += c.commands();
	}
	std::printf("reclaim under log_softmax/index_select load (%u ms deadline): p50 %.3f ms, max %.3f ms, late %d "
		    "of %zu; %.1f tiles per command\n",
		    deadline_ms, percentile(ms, 0.5), percentile(ms, 1.0), late, ms.size(),
		    double(tiles) / double(std::max<uint64_t>(commands, 1)));
	cr_assert(tiles >= 4 * commands, "the ops were cut into tiles (%llu tiles, %llu commands)",
		  (unsigned long long)tiles, (unsigned long long)commands);
	cr_assert_eq(late, 0, "every reclaim finished by its deadline");
	train.close();
}

// ISA 1.4 (device RNG, AMP): the random ops cut along their positions give the
// same bits as whole commands (Philox numbers depend on the position, never on
// the tile), RANDPERM's ordered chain included; AMP_UNSCALE's tiles all set the
// one found_inf flag.
namespace {
struct Isa14Result {
	std::vector<float> normal, dropout_out, grad, found;
	std::vector<uint8_t> mask;
	std::vector<int64_t> perm, draws;
	uint64_t tiles = 0;
};

neuron_cmd rng14(int op, int n_operands, uint64_t seed, uint64_t offset)
{
	neuron_cmd c;
	neuron_cmd_init(&c, op, n_operands);
	c.iscalars[1] = int64_t(seed);
	c.iscalars[2] = int64_t(offset);
	return c;
}

Isa14Result run_isa14(std::vector<std::string> flags)
{
	start_daemon(std::move(flags));
	Tenant t;
	t.open("isa14", NEURON_TENANT_TRAINING, 1);
	const int64_t R = 40, C = 70, N = 3000, ROWS = 16, CATS = 50, S = 20;
	Isa14Result res;
	const uint64_t dnorm = t.alloc(uint64_t(R * C * 4)), dout = t.alloc(uint64_t(R * C * 4));
	const uint64_t dmask = t.alloc(uint64_t(R * C)), din = put(t, ramp(size_t(R * C), 3, 17));
	const uint64_t dperm = t.alloc(uint64_t(N * 8)), ddraw = t.alloc(uint64_t(ROWS * S * 8));
	const uint64_t dprobs = put(t, std::vector<float>(size_t(ROWS * CATS), 1.0f));
	std::vector<float> grad = ramp(size_t(R * C), 7, 31);
	grad[1234] = INFINITY;
	const uint64_t dgrad = put(t, grad), dfound = put(t, std::vector<float>{0.0f}),
		       dinv = put(t, std::vector<float>{0.5f});
	const uint64_t before = tiles_so_far();
	neuron_cmd normal = rng14(NEURON_OP_RNG, 1, 11, 2);
	normal.operands[0] = desc(dnorm, NEURON_DTYPE_F32, {R, C});
	normal.iscalars[0] = NEURON_RNG_NORMAL;
	normal.fscalars.f[1] = 1.0;
	run(t, normal, "rng normal");
	neuron_cmd drop = rng14(NEURON_OP_DROPOUT, 3, 12, 3);
	drop.operands[0] = desc(dout, NEURON_DTYPE_F32, {R, C});
	drop.operands[1] = desc(dmask, NEURON_DTYPE_BOOL, {R, C});
	drop.operands[2] = desc(din, NEURON_DTYPE_F32, {R, C});
	drop.fscalars.f[0] = 2.0;
	drop.fscalars.f[1] = 0.5;
	run(t, drop, "dropout");
	neuron_cmd perm = rng14(NEURON_OP_RANDPERM, 1, 13, 4);
	perm.operands[0] = desc(dperm, NEURON_DTYPE_I64, {N});
	run(t, perm, "randperm");
	neuron_cmd multi = rng14(NEURON_OP_MULTINOMIAL, 2, 14, 5);
	multi.operands[0] = desc(ddraw, NEURON_DTYPE_I64, {ROWS, S});
	multi.operands[1] = desc(dprobs, NEURON_DTYPE_F32, {ROWS, CATS});
	run(t, multi, "multinomial");
	neuron_cmd unscale;
	neuron_cmd_init(&unscale, NEURON_OP_AMP_UNSCALE, 3);
	unscale.operands[0] = desc(dgrad, NEURON_DTYPE_F32, {R, C});
	unscale.operands[1] = desc(dfound, NEURON_DTYPE_F32, {1});
	unscale.operands[2] = desc(dinv, NEURON_DTYPE_F32, {1});
	run(t, unscale, "amp_unscale");
	res.tiles = tiles_so_far() - before;
	res.normal = get<float>(t, dnorm, size_t(R * C));
	res.dropout_out = get<float>(t, dout, size_t(R * C));
	res.mask = get<uint8_t>(t, dmask, size_t(R * C));
	res.perm = get<int64_t>(t, dperm, size_t(N));
	res.draws = get<int64_t>(t, ddraw, size_t(ROWS * S));
	res.grad = get<float>(t, dgrad, size_t(R * C));
	res.found = get<float>(t, dfound, 1);
	t.close();
	stop_daemon();
	return res;
}
} // namespace

Test(tiling, isa14_random_ops_are_tiled_along_positions_and_exact, .fini = down, .timeout = 120)
{
	const Isa14Result tiled = run_isa14({"--tile-elements", "256"});
	const Isa14Result whole = run_isa14({"--tile-elements", "1099511627776"});
	cr_assert(tiled.tiles >= 5 * 4, "the ops were cut into tiles (%llu tiles)", (unsigned long long)tiled.tiles);
	cr_assert_eq(whole.tiles, 5u, "one tile per command with huge tiles (%llu)", (unsigned long long)whole.tiles);
	cr_assert(tiled.normal == whole.normal, "normal samples differ between tiled and whole");
	cr_assert(tiled.dropout_out == whole.dropout_out && tiled.mask == whole.mask, "dropout differs");
	cr_assert(tiled.perm == whole.perm, "randperm differs");
	cr_assert(tiled.draws == whole.draws, "multinomial differs");
	cr_assert(tiled.grad == whole.grad && tiled.found == whole.found, "amp_unscale differs");
	std::vector<int64_t> sorted = tiled.perm;
	std::sort(sorted.begin(), sorted.end());
	for (size_t i = 0; i < sorted.size(); ++i)
		cr_assert_eq(sorted[i], int64_t(i), "randperm is a permutation");
	cr_assert_eq(tiled.found[0], 1.0f, "the infinity set found_inf");
	size_t kept = 0;
	for (uint8_t m : tiled.mask)
		kept += m;
	cr_assert(kept > tiled.mask.size() / 3 && kept < 2 * tiled.mask.size() / 3, "dropout kept %zu", kept);
}

// ISA 1.4 with the smallest tiles: a scan row longer than a tile is an ordered
// chain whose later tiles start from the last element the tile before wrote (f32
// and exact i64 sums, a max, along a strided dim too); a sort is cut into blocks
// of whole rows; attention into batch and row blocks, the causal diagonal moving
// with each block's first row. All against host references in double.
Test(tiling, isa14_scan_sort_attention_linalg_tiles_are_exact, .fini = down, .timeout = 120)
{
	start_daemon({"--tile-elements", "256", "--tile-macs", "4096"});
	Tenant t;
	t.open("isa14", NEURON_TENANT_TRAINING, 1);
	{ // cumsum / cummax of [3, 1000] along dim 1 (4 chunks a row), then as [1000, 3] along dim 0
		const int64_t R = 3, L = 1000;
		const auto x = ramp(size_t(R * L), 7, 41);
		const std::vector<float> zero = {0.0f}, ninf = {-INFINITY};
		const uint64_t dx = put(t, x), dy = t.alloc(uint64_t(R * L * 4)), dz = put(t, zero), dn = put(t, ninf);
		for (int fn : {NEURON_SCAN_SUM, NEURON_SCAN_MAX})
			for (int along : {1, 0}) {
				neuron_cmd c;
				neuron_cmd_init(&c, NEURON_OP_SCAN, 3);
				const std::vector<int64_t> shape = along ? std::vector<int64_t>{R, L} : std::vector<int64_t>{L, R};
				c.operands[0] = desc(dy, NEURON_DTYPE_F32, shape);
				c.operands[1] = desc(dx, NEURON_DTYPE_F32, shape);
				std::vector<int64_t> ishape = shape;
				ishape[size_t(along)] = 1;
				c.operands[2] = neuron_desc_contiguous(fn == NEURON_SCAN_SUM ? dz : dn, NEURON_DTYPE_F32, 2, ishape.data());
				c.operands[2].strides[0] = c.operands[2].strides[1] = 0; // one element broadcast
				c.iscalars[0] = along;
				c.iscalars[1] = fn;
				run_tiled(t, c, 2 * R, "scan");
				std::vector<double> ref(x.size());
				for (int64_t r = 0; r < R; ++r) {
					double acc = fn == NEURON_SCAN_SUM ? 0 : -INFINITY;
					for (int64_t j = 0; j < L; ++j) {
						const size_t at = along ? size_t(r * L + j) : size_t(j * R + r);
						acc = fn == NEURON_SCAN_SUM ? acc + x[at] : std::max(acc, double(x[at]));
						ref[at] = acc;
					}
				}
				expect_close(get<float>(t, dy, ref.size()), ref, 1e-5, "scan");
			}
		// int64 sums are exact across tiles
		std::vector<int64_t> xi(static_cast<size_t>(L));
		for (int64_t j = 0; j < L; ++j)
			xi[size_t(j)] = (int64_t{1} << 40) + j * 977;
		const std::vector<int64_t> izero = {0};
		const uint64_t dxi = put(t, xi), dyi = t.alloc(uint64_t(L * 8)), diz = put(t, izero);
		neuron_cmd c;
		neuron_cmd_init(&c, NEURON_OP_SCAN, 3);
		c.operands[0] = desc(dyi, NEURON_DTYPE_I64, {L});
		c.operands[1] = desc(dxi, NEURON_DTYPE_I64, {L});
		c.operands[2] = desc(diz, NEURON_DTYPE_I64, {1});
		run_tiled(t, c, 3, "i64 scan");
		const auto got = get<int64_t>(t, dyi, size_t(L));
		int64_t acc = 0;
		for (int64_t j = 0; j < L; ++j) {
			acc += xi[size_t(j)];
			cr_assert_eq(got[size_t(j)], acc, "i64 cumsum[%lld]", (long long)j);
		}
	}
	{ // sort [64, 50] descending along dim 1, and its top-3
		const int64_t R = 64, L = 50;
		const auto x = ramp(size_t(R * L), 13, 53);
		const uint64_t dx = put(t, x), dv = t.alloc(uint64_t(R * L * 4)), di = t.alloc(uint64_t(R * L * 8));
		for (int64_t k : {L, int64_t{3}}) {
			neuron_cmd c;
			neuron_cmd_init(&c, NEURON_OP_SORT, 3);
			c.operands[0] = desc(dv, NEURON_DTYPE_F32, {R, k});
			c.operands[1] = desc(di, NEURON_DTYPE_I64, {R, k});
			c.operands[2] = desc(dx, NEURON_DTYPE_F32, {R, L});
			c.iscalars[0] = 1;
			c.iscalars[1] = 1;
			run_tiled(t, c, 4, "sort");
			const auto vals = get<float>(t, dv, size_t(R * k));
			const auto idx = get<int64_t>(t, di, size_t(R * k));
			for (int64_t r = 0; r < R; ++r) {
				std::vector<int64_t> order(static_cast<size_t>(L));
				for (int64_t j = 0; j < L; ++j)
					order[size_t(j)] = j;
				std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
					return x[size_t(r * L + a)] > x[size_t(r * L + b)];
				});
				for (int64_t j = 0; j < k; ++j) {
					cr_assert_eq(idx[size_t(r * k + j)], order[size_t(j)], "sort index [%lld, %lld]", (long long)r,
						     (long long)j);
					cr_assert_eq(vals[size_t(r * k + j)], x[size_t(r * L + order[size_t(j)])]);
				}
			}
		}
	}
	{ // causal attention [2, 3, 40, 8] with keys [2, 3, 40, 8]: many blocks of rows
		const int64_t B = 2, H = 3, L = 40, E = 8;
		const auto q = ramp(size_t(B * H * L * E), 7, 17), k = ramp(size_t(B * H * L * E), 5, 19),
			   v = ramp(size_t(B * H * L * E), 3, 23);
		const std::vector<float> zero = {0.0f};
		const uint64_t dq = put(t, q), dk = put(t, k), dv = put(t, v), dm = put(t, zero);
		const uint64_t dout = t.alloc(uint64_t(B * H * L * E * 4)), dlse = t.alloc(uint64_t(B * H * L * 4));
		neuron_cmd c;
		neuron_cmd_init(&c, NEURON_OP_ATTENTION, 6);
		c.operands[0] = desc(dout, NEURON_DTYPE_F32, {B, H, L, E});
		c.operands[1] = desc(dlse, NEURON_DTYPE_F32, {B, H, L});
		c.operands[2] = desc(dq, NEURON_DTYPE_F32, {B, H, L, E});
		c.operands[3] = desc(dk, NEURON_DTYPE_F32, {B, H, L, E});
		c.operands[4] = desc(dv, NEURON_DTYPE_F32, {B, H, L, E});
		c.operands[5] = desc(dm, NEURON_DTYPE_F32, {B, H, L, L});
		for (int i = 0; i < 4; ++i)
			c.operands[5].strides[i] = 0;
		const double scale = 0.3;
		c.fscalars.f[0] = scale;
		c.iscalars[0] = NEURON_ATTENTION_CAUSAL;
		run_tiled(t, c, 8, "attention");
		const auto out = get<float>(t, dout, size_t(B * H * L * E));
		std::vector<double> ref(out.size());
		for (int64_t bh = 0; bh < B * H; ++bh)
			for (int64_t i = 0; i < L; ++i) {
				std::vector<double> s(size_t(i + 1));
				double m = -INFINITY, sum = 0;
				for (int64_t j = 0; j <= i; ++j) {
					double dot = 0;
					for (int64_t e = 0; e < E; ++e)
						dot += double(q[size_t((bh * L + i) * E + e)]) * k[size_t((bh * L + j) * E + e)];
					s[size_t(j)] = scale * dot;
					m = std::max(m, s[size_t(j)]);
				}
				for (int64_t j = 0; j <= i; ++j)
					sum += std::exp(s[size_t(j)] - m);
				for (int64_t e = 0; e < E; ++e) {
					double acc = 0;
					for (int64_t j = 0; j <= i; ++j)
						acc += std::exp(s[size_t(j)] - m) / sum * v[size_t((bh * L + j) * E + e)];
					ref[size_t((bh * L + i) * E + e)] = acc;
				}
			}
		expect_close(out, ref, 1e-4, "attention");
	}
	{ // Cholesky of 12 SPD 16x16 matrices, then L^-1 b: blocks of whole matrices
		const int64_t Bn = 12, N = 16, K = 3;
		std::vector<float> a(size_t(Bn * N * N));
		const auto g = ramp(size_t(Bn * N * N), 7, 29), b = ramp(size_t(Bn * N * K), 5, 31);
		for (int64_t m = 0; m < Bn; ++m) // a = g g^T + N I
			for (int64_t i = 0; i < N; ++i)
				for (int64_t j = 0; j < N; ++j) {
					double acc = i == j ? double(N) : 0.0;
					for (int64_t e = 0; e < N; ++e)
						acc += double(g[size_t((m * N + i) * N + e)]) * g[size_t((m * N + j) * N + e)];
					a[size_t((m * N + i) * N + j)] = float(acc);
				}
		const uint64_t da = put(t, a), db = put(t, b), dl = t.alloc(uint64_t(Bn * N * N * 4)),
			       dinfo = t.alloc(uint64_t(Bn * 4)), dx = t.alloc(uint64_t(Bn * N * K * 4));
		neuron_cmd c;
		neuron_cmd_init(&c, NEURON_OP_CHOLESKY, 3);
		c.operands[0] = desc(dl, NEURON_DTYPE_F32, {Bn, N, N});
		c.operands[1] = desc(dinfo, NEURON_DTYPE_I32, {Bn});
		c.operands[2] = desc(da, NEURON_DTYPE_F32, {Bn, N, N});
		run_tiled(t, c, 3, "cholesky");
		neuron_cmd_init(&c, NEURON_OP_TRIANGULAR_SOLVE, 3);
		c.operands[0] = desc(dx, NEURON_DTYPE_F32, {Bn, N, K});
		c.operands[1] = desc(dl, NEURON_DTYPE_F32, {Bn, N, N});
		c.operands[2] = desc(db, NEURON_DTYPE_F32, {Bn, N, K});
		c.iscalars[0] = NEURON_TRSM_LEFT;
		run_tiled(t, c, 2, "triangular solve");
		const auto l = get<float>(t, dl, a.size());
		const auto info = get<int32_t>(t, dinfo, size_t(Bn));
		const auto x = get<float>(t, dx, b.size());
		std::vector<double> lt(a.size()), bx(b.size());
		for (int64_t m = 0; m < Bn; ++m) {
			cr_assert_eq(info[size_t(m)], 0);
			for (int64_t i = 0; i < N; ++i)
				for (int64_t j = 0; j < N; ++j) {
					double acc = 0; // (L L^T)[i, j]
					for (int64_t e = 0; e < N; ++e)
						acc += double(l[size_t((m * N + i) * N + e)]) * l[size_t((m * N + j) * N + e)];
					lt[size_t((m * N + i) * N + j)] = acc;
				}
			for (int64_t i = 0; i < N; ++i)
				for (int64_t k = 0; k < K; ++k) {
					double acc = 0; // (L x)[i, k]
					for (int64_t e = 0; e <= i; ++e)
						acc += double(l[size_t((m * N + i) * N + e)]) * x[size_t((m * N + e) * K + k)];
					bx[size_t((m * N + i) * K + k)] = acc;
				}
		}
		expect_close(a, lt, 1e-4, "L L^T");
		expect_close(b, bx, 1e-4, "L x");
	}
	t.close();
}
