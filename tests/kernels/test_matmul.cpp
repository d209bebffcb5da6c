// MATMUL (2-d and batched) against a naive double-precision product: f32/bf16/f16,
// row- and column-major operands, layouts that need packing, broadcast batches,
// alpha/beta, empty dims and sizes large enough to split among threads; the packed
// multiply (packed_gemm.h) at its edges, and its packs shared by the tiles of a
// command (gemm_packs.h).
#include "ref.h"

#include <gemm_packs.h>
#include <micro_kernel.h>
#include <packed_gemm.h>

using namespace ref;

namespace {

enum class ML { Row, Col, Strided, Bcast };

const char *mlname(ML l)
{
	static const char *n[] = {"row", "col", "strided", "bcast"};
	return n[static_cast<int>(l)];
}

// A [batch?, r, c] matrix operand with layout l. Bcast: a batched operand with
// batch stride 0 (for 2-d: rows broadcast, which forces packing).
Tensor make_mat(int dt, int64_t batch, int64_t r, int64_t c, ML l)
{
	const bool b = batch >= 0;
	auto shp = [&](int64_t x, int64_t y) { return b ? std::vector<int64_t>{batch, x, y} : std::vector<int64_t>{x, y}; };
	const int o = b ? 1 : 0;
	switch (l) {
	case ML::Col:
		return Tensor::make(dt, shp(c, r)).transpose(o, o + 1);
	case ML::Strided: // every other column of a wider matrix: neither row- nor column-contiguous
		return Tensor::make(dt, shp(r, 2 * c)).slice(o + 1, 0, 2 * c, 2);
	case ML::Bcast:
		if (b)
			return Tensor::make(dt, {1, r, c}).expand(0, batch);
		return Tensor::make(dt, {1, c}).expand(0, r);
	default:
		return Tensor::make(dt, shp(r, c));
	}
}

void mm_case(int dt, int64_t batch, int64_t M, int64_t K, int64_t N, ML la, ML lb, ML lo, double alpha, double beta,
	     bool nan_out = false, int threads = 4)
{
	const Tensor a = make_mat(dt, batch, M, K, la), b = make_mat(dt, batch, K, N, lb);
	const Tensor out = make_mat(dt, batch, M, N, lo == ML::Bcast ? ML::Row : lo);
	a.randomize(1, -2, 2);
	b.randomize(2, -2, 2);
	out.randomize(3, -2, 2);
	if (nan_out)
		out.each([&](const int64_t *i) { out.set(i, NAN); });
	const Tensor old = out.clone();
	auto cmd = make_cmd(NEURON_OP_MATMUL, {&out, &a, &b});
	cmd.fscalars.f[0] = alpha;
	cmd.fscalars.f[1] = beta;
	run(cmd, {&out, &a, &b}, threads);

	const bool bt = batch >= 0;
	const std::string what = std::string("matmul ") + dname(dt) + " b" + std::to_string(batch) + " M" +
				 std::to_string(M) + " K" + std::to_string(K) + " N" + std::to_string(N) + " a:" + mlname(la) +
				 " b:" + mlname(lb) + " out:" + mlname(lo) + " alpha " + std::to_string(alpha) + " beta " +
				 std::to_string(beta);
	// Accumulation is in f32 (bf16/f16 are converted first): the error grows with K
	// relative to the magnitude of the terms, sum |a||b| <= 4K.
	const Tol base = tol_for(dt);
	const double scale = std::fabs(alpha) * 4.0 * static_cast<double>(std::max<int64_t>(K, 1));
	const Tol t{base.rtol, base.atol + (dt == NEURON_DTYPE_F32 ? 1e-6 : base.rtol) * scale +
				       (dt == NEURON_DTYPE_F32 ? 0 : base.rtol) * std::fabs(beta) * 2};
	expect_tensor(
		out,
		[&](const int64_t *i) {
			int64_t ia[3], ib[3], io[3];
			const int m = bt ? 1 : 0;
			if (bt)
				ia[0] = ib[0] = io[0] = i[0];
			double s = 0;
			for (int64_t k = 0; k < K; ++k) {
				ia[m] = i[m];
				ia[m + 1] = k;
				ib[m] = k;
				ib[m + 1] = i[m + 1];
				s += a.get(ia) * b.get(ib);
			}
			io[m] = i[m];
			io[m + 1] = i[m + 1];
			const double prev = beta == 0 ? 0 : to_f32(beta) * old.get(io);
			return to_f32(alpha) * s + prev;
		},
		t, what);
}

const ML kLayouts[] = {ML::Row, ML::Col, ML::Strided, ML::Bcast};

} // namespace

Test(matmul, f32_shapes_and_layouts)
{
	struct S {
		int64_t M, K, N;
	};
	const S shapes[] = {{1, 1, 1}, {3, 4, 5}, {5, 1, 3}, {1, 7, 1}, {17, 33, 9}};
	for (const S &s : shapes)
		for (ML la : kLayouts)
			for (ML lb : kLayouts)
				for (ML lo : {ML::Row, ML::Col, ML::Strided})
					mm_case(NEURON_DTYPE_F32, -1, s.M, s.K, s.N, la, lb, lo, 1.0, 0.0);
}

Test(matmul, alpha_beta)
{
	for (int dt : kFloatDtypes)
		for (ML lo : {ML::Row, ML::Col, ML::Strided}) {
			mm_case(dt, -1, 6, 5, 4, ML::Row, ML::Col, lo, 0.5, 2.0);
			mm_case(dt, -1, 6, 5, 4, ML::Col, ML::Row, lo, -1.0, 1.0);
			mm_case(dt, -1, 6, 5, 4, ML::Row, ML::Row, lo, 0.0, 0.5);
			// beta == 0 ignores the old contents, NaN included.
			mm_case(dt, -1, 6, 5, 4, ML::Row, ML::Row, lo, 1.0, 0.0, true);
			mm_case(dt, 2, 6, 5, 4, ML::Strided, ML::Bcast, lo, 1.0, 0.0, true);
		}
}

Test(matmul, empty_dims)
{
	for (int dt : kFloatDtypes) {
		mm_case(dt, -1, 0, 3, 4, ML::Row, ML::Row, ML::Row, 1.0, 0.0);
		mm_case(dt, -1, 3, 4, 0, ML::Row, ML::Row, ML::Row, 1.0, 0.0);
		// K == 0: out = beta * out (zero when beta == 0).
		mm_case(dt, -1, 3, 0, 4, ML::Row, ML::Row, ML::Row, 1.0, 0.0, true);
		mm_case(dt, -1, 3, 0, 4, ML::Row, ML::Row, ML::Col, 1.0, 3.0);
		mm_case(dt, 0, 3, 2, 4, ML::Row, ML::Row, ML::Row, 1.0, 0.0);
		mm_case(dt, 2, 3, 0, 4, ML::Row, ML::Row, ML::Row, 1.0, 0.5);
	}
}

Test(matmul, half_precision)
{
	for (int dt : {NEURON_DTYPE_BF16, NEURON_DTYPE_F16})
		for (ML la : kLayouts)
			for (ML lb : kLayouts) {
				mm_case(dt, -1, 7, 9, 5, la, lb, ML::Row, 1.0, 0.0);
				mm_case(dt, 3, 4, 6, 5, la, lb, ML::Col, 1.0, 0.0);
			}
}

Test(matmul, batched)
{
	for (ML la : kLayouts)
		for (ML lb : kLayouts)
			for (ML lo : {ML::Row, ML::Col, ML::Strided})
				mm_case(NEURON_DTYPE_F32, 3, 4, 5, 6, la, lb, lo, 1.0, 0.0);
	mm_case(NEURON_DTYPE_F32, 1, 4, 5, 6, ML::Row, ML::Row, ML::Row, 1.0, 0.0);
}

Test(matmul, large_parallel)
{
	// Big enough to be split among threads: by rows, by columns, by batches.
	// (Threads from 2^25 multiply-adds: see run_matmul.)
	mm_case(NEURON_DTYPE_F32, -1, 260, 514, 258, ML::Row, ML::Row, ML::Row, 1.0, 0.0);
	mm_case(NEURON_DTYPE_F32, -1, 66, 800, 640, ML::Col, ML::Col, ML::Col, 0.5, 1.0);
	mm_case(NEURON_DTYPE_F32, -1, 330, 330, 330, ML::Strided, ML::Bcast, ML::Strided, 1.0, 0.0);
	mm_case(NEURON_DTYPE_F32, 8, 170, 170, 170, ML::Row, ML::Bcast, ML::Row, 1.0, 0.0);
	mm_case(NEURON_DTYPE_F32, 3, 260, 200, 220, ML::Col, ML::Strided, ML::Col, 1.0, 0.5);
	mm_case(NEURON_DTYPE_BF16, 3, 230, 230, 230, ML::Col, ML::Row, ML::Row, 1.0, 0.0);
	mm_case(NEURON_DTYPE_F16, -1, 400, 256, 330, ML::Row, ML::Strided, ML::Col, 1.0, 0.0);
	mm_case(NEURON_DTYPE_F32, -1, 260, 514, 258, ML::Row, ML::Col, ML::Row, 1.0, 0.0, false, 1);
}

namespace {

// Runs `cases` once with each register kernel of the packed multiply
// (micro_kernel.h) this host can run, then leaves the host's default in place;
// on a host with none, once (OpenBLAS then does the products the cases check).
template <typename Cases> void with_each_kernel(Cases cases)
{
	int ran = 0;
	for (const char *k : {"AVX-512", "AVX2"})
		if (neuron::kernels::detail::use_micro_kernel(k)) {
			cr_log_info("kernel %s", k);
			cases();
			++ran;
		} else {
			cr_log_info("this host cannot run the %s kernel: its cases are skipped", k);
		}
	neuron::kernels::detail::use_micro_kernel("");
	if (ran == 0)
		cases();
}

// Shapes the packed multiply takes, with one kernel: ragged panels in every dim
// (M % 8, M % 6, N % 32, N % 16, K % 256 != 0, rows of the last panel from 1 to
// mr - 1), K over one pass, every operand layout, every float dtype.
void packed_cases()
{
	struct S {
		int64_t M, K, N;
	};
	const S shapes[] = {{9, 2000, 17}, {64, 64, 64}, {37, 515, 45}, {130, 257, 70}, {128, 512, 128},
			    {61, 300, 40}, {44, 200, 100}, {33, 150, 88}, {31, 256, 48},
			    {41, 100, 72}, {43, 180, 50}, {46, 130, 60}};
	for (const S &s : shapes)
		cr_log_info("%lldx%lldx%lld: %s", (long long)s.M, (long long)s.K, (long long)s.N,
			    neuron::kernels::detail::packed_gemm_suits(s.M, s.N, s.K) ? "packed" : "OpenBLAS");
	for (const S &s : shapes)
		for (ML la : kLayouts)
			for (ML lb : kLayouts)
				mm_case(NEURON_DTYPE_F32, -1, s.M, s.K, s.N, la, lb, ML::Row, 1.0, 0.0);
	for (const S &s : shapes)
		for (ML lo : {ML::Row, ML::Col, ML::Strided}) {
			mm_case(NEURON_DTYPE_F32, -1, s.M, s.K, s.N, ML::Row, ML::Col, lo, 0.5, -2.0);
			mm_case(NEURON_DTYPE_F32, -1, s.M, s.K, s.N, ML::Col, ML::Row, lo, 1.0, 0.0, true);
			mm_case(NEURON_DTYPE_BF16, -1, s.M, s.K, s.N, ML::Strided, ML::Row, lo, 1.0, 1.0);
			mm_case(NEURON_DTYPE_F16, -1, s.M, s.K, s.N, ML::Row, ML::Bcast, lo, 1.0, 0.0, true);
		}
	mm_case(NEURON_DTYPE_F32, 3, 40, 300, 50, ML::Row, ML::Bcast, ML::Row, 1.0, 0.0, false, 1);
}

} // namespace

Test(matmul, packed_panels_edges_and_layouts)
{
	with_each_kernel(packed_cases);
}

namespace {

// out = a @ b cut into tiles as the chip cuts it (tiling.h): blocks of out, the K
// blocks of each in order, the first with beta = 0 and the rest adding in, every
// tile one execute() sharing `packs`. Checked against the double product.
void tiled_with_packs(neuron::kernels::GemmPacks *packs, int64_t mt, int64_t nt, int64_t kt, const char *what)
{
	const int64_t M = 200, K = 600, N = 160;
	const Tensor a = make_mat(NEURON_DTYPE_F32, -1, M, K, ML::Row);
	const Tensor b = make_mat(NEURON_DTYPE_F32, -1, K, N, ML::Col);
	const Tensor out = make_mat(NEURON_DTYPE_F32, -1, M, N, ML::Row);
	a.randomize(11, -2, 2);
	b.randomize(12, -2, 2);
	out.each([&](const int64_t *i) { out.set(i, NAN); });
	for (int64_t i = 0; i < M; i += mt)
		for (int64_t j = 0; j < N; j += nt)
			for (int64_t k = 0; k < K; k += kt) {
				const Tensor ot = out.slice(0, i, std::min(M, i + mt), 1).slice(1, j, std::min(N, j + nt), 1);
				const Tensor at = a.slice(0, i, std::min(M, i + mt), 1).slice(1, k, std::min(K, k + kt), 1);
				const Tensor bt = b.slice(0, k, std::min(K, k + kt), 1).slice(1, j, std::min(N, j + nt), 1);
				auto cmd = make_cmd(NEURON_OP_MATMUL, {&ot, &at, &bt});
				cmd.fscalars.f[0] = 1.0;
				cmd.fscalars.f[1] = k == 0 ? 0.0 : 1.0;
				const View v[3] = {ot.view(), at.view(), bt.view()};
				const auto f = neuron::kernels::execute(cmd, v, 1, packs);
				cr_assert(!f, "%s: %s", what, f ? f->message.c_str() : "");
			}
	expect_tensor(
		out,
		[&](const int64_t *i) {
			double s = 0;
			for (int64_t k = 0; k < K; ++k) {
				const int64_t ia[2] = {i[0], k}, ib[2] = {k, i[1]};
				s += a.get(ia) * b.get(ib);
			}
			return s;
		},
		Tol{1e-5, 1e-6 * 4.0 * K}, what);
}

// The tiles of one command share packed blocks; a block bigger than the limit is
// packed per tile instead; an arena set aside before the first tile holds them.
void packs_cases()
{
	using neuron::kernels::GemmPacks;
	const bool packed = neuron::kernels::detail::packed_gemm_suits(64, 64, 256);
	GemmPacks packs;
	tiled_with_packs(&packs, 64, 64, 256, "shared packs");
	if (packed) {
		// Each block of a and b is packed at most once: at most a and b themselves,
		// their 64-lane blocks (a: 64, 64, 64, 8 rows; b: 64, 64, 32 columns)
		// padded to whole panels, plus a cache line per block (4 x 3 of a, 3 x 3 of b).
		const auto *mk = neuron::kernels::detail::active_micro_kernel();
		const auto pad = [](int64_t lanes, int64_t w) { return (lanes + w - 1) / w * w; };
		const int64_t a_rows = 3 * pad(64, mk->mr) + pad(8, mk->mr), b_cols = 2 * pad(64, mk->nr) + pad(32, mk->nr);
		const size_t bound = size_t((a_rows + b_cols) * 600 + 21 * 16) * sizeof(float);
		cr_expect(packs.bytes() > 0, "no block was kept for the later tiles");
		cr_expect(packs.bytes() <= bound, "%zu bytes of packs (at most %zu): blocks packed twice", packs.bytes(),
			  bound);
	}
	packs.clear();
	cr_expect_eq(packs.bytes(), 0u);

	GemmPacks tiny(4096);
	tiled_with_packs(&tiny, 64, 64, 256, "packs over the limit");
	cr_expect_eq(tiny.bytes(), 0u, "blocks past the limit must not be kept");

	GemmPacks arena;
	arena.reserve(size_t{1} << 20);
	cr_expect_eq(arena.arena_bytes(), (size_t{1} << 20) * sizeof(float));
	tiled_with_packs(&arena, 64, 64, 256, "packs in an arena");
	tiled_with_packs(nullptr, 64, 64, 256, "no packs");
}

} // namespace

Test(matmul, packs_shared_across_the_tiles_of_a_command) { with_each_kernel(packs_cases); }

// Each register kernel's fast packing of a's rows (micro_kernel.h) against its
// definition, panel[k * mr + r] = x[r * ld + k]: every column count around the
// vector widths, and nothing written past the panel.
Test(matmul, pack_rows_matches_its_definition)
{
	using neuron::kernels::detail::MicroKernel;
	int checked = 0;
	for (const MicroKernel *mk :
	     {neuron::kernels::detail::avx512_micro_kernel(), neuron::kernels::detail::avx2_micro_kernel()}) {
		if (!mk || !mk->pack_rows_f32)
			continue;
		for (int64_t kc : {1, 5, 7, 8, 9, 15, 16, 17, 24, 31, 33, 256}) {
			const int64_t ld = kc + 3;
			std::vector<float> x(static_cast<size_t>(mk->mr * ld));
			for (size_t i = 0; i < x.size(); ++i)
				x[i] = static_cast<float>(i) * 0.5f - 7.0f;
			const size_t size = static_cast<size_t>(mk->mr * kc), guard = 64;
			std::vector<float> panel(size + guard, 1234.5f);
			mk->pack_rows_f32(x.data(), ld, kc, panel.data());
			for (int64_t k = 0; k < kc; ++k)
				for (int r = 0; r < mk->mr; ++r)
					cr_assert_eq(panel[k * mk->mr + r], x[r * ld + k], "%.*s kc=%lld: panel[%lld][%d] = %g, expected %g",
						     int(mk->name.size()), mk->name.data(), (long long)kc, (long long)k, r,
						     panel[k * mk->mr + r], x[r * ld + k]);
			for (size_t i = size; i < panel.size(); ++i)
				cr_assert_eq(panel[i], 1234.5f, "%.*s kc=%lld wrote past the panel (float %zu)",
					     int(mk->name.size()), mk->name.data(), (long long)kc, i - size);
		}
		++checked;
	}
	if (checked == 0)
		cr_log_info("this host runs no register kernel with its own packing: nothing to check");
}
