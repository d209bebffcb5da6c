#include "engines.h"

#include "vector_rows.h"

#include <block.h>
#include <ops.h>
#include <packed_gemm.h>

#include <cblas.h>
#include <pointwise_steps.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace neuron::tile {

namespace {

using kernels::kBlock;

// An operand resolved for this iteration: a host address, byte strides, sizes.
struct View {
	std::byte *data;
	uint8_t dtype;
	int ndim;
	int64_t sizes[NEURON_TILE_MAX_DIMS];
	int64_t bstride[NEURON_TILE_MAX_DIMS];
	// Every element's address is a multiple of its size. Tiles may sit at any byte
	// of SBUF/PSUM (an f32 tile after an odd number of bf16 elements does), and
	// only aligned ones may be read and written in place as their C++ type.
	bool aligned;
};

size_t esize(uint8_t dt) { return dt == NEURON_DTYPE_BF16 || dt == NEURON_DTYPE_F16 ? 2 : 4; }

View resolve(const neuron_tile_ap &a, const Env &env)
{
	View v{nullptr, a.dtype, a.ndim, {1, 1, 1, 1}, {0, 0, 0, 0}, false};
	const int64_t es = static_cast<int64_t>(esize(a.dtype));
	const int64_t off = evaluate(a.offset, env.iv);
	for (int d = 0; d < a.ndim; ++d) {
		v.sizes[d] = a.sizes[d];
		v.bstride[d] = a.strides[d] * es;
	}
	if (a.space == NEURON_TILE_HBM) {
		v.data = env.args[a.arg] + off * es;
	} else if (a.space == NEURON_TILE_SBUF) {
		v.data = env.mem.sbuf(a.partition, static_cast<uint64_t>(off));
		v.bstride[0] = static_cast<int64_t>(env.mem.sbuf_stride());
	} else {
		v.data = env.mem.psum(a.partition, static_cast<uint64_t>(off));
		v.bstride[0] = static_cast<int64_t>(env.mem.psum_stride());
	}
	// A size-1 dim never moves: stride 0 lets an input broadcast along it.
	for (int d = 0; d < NEURON_TILE_MAX_DIMS; ++d)
		if (v.sizes[d] == 1)
			v.bstride[d] = 0;
	v.aligned = reinterpret_cast<uintptr_t>(v.data) % static_cast<uintptr_t>(es) == 0;
	for (int d = 0; d < NEURON_TILE_MAX_DIMS; ++d)
		v.aligned = v.aligned && v.bstride[d] % es == 0;
	return v;
}

// The iteration space after the masks: each masked dim cut to the indices with
// start + i < limit. False if nothing is active.
bool active_shape(const neuron_tile_insn &in, const neuron_tile_ap &it, const int64_t *iv, int64_t *sizes)
{
	for (int d = 0; d < NEURON_TILE_MAX_DIMS; ++d)
		sizes[d] = d < it.ndim ? it.sizes[d] : 1;
	for (const neuron_tile_mask &m : in.masks) {
		if (!m.enabled)
			continue;
		const int64_t count = m.limit - evaluate(m.start, iv);
		sizes[m.dim] = std::clamp<int64_t>(count, 0, sizes[m.dim]);
	}
	for (int d = 0; d < NEURON_TILE_MAX_DIMS; ++d)
		if (sizes[d] == 0)
			return false;
	return true;
}

// Calls f(p, n) for every row of the last dim of `sizes`: p[k] is operand k's
// address at the row's start, n the row length; rows are walked in order.
template <class F> void for_rows(const int64_t *sizes, int ndim, View *v, int nv, F &&f)
{
	const int last = ndim - 1;
	int64_t idx[NEURON_TILE_MAX_DIMS] = {};
	std::byte *p[NEURON_TILE_MAX_OPERANDS];
	for (;;) {
		for (int k = 0; k < nv; ++k) {
			p[k] = v[k].data;
			for (int d = 0; d < last; ++d)
				p[k] += idx[d] * v[k].bstride[d];
		}
		f(p, sizes[last]);
		int d = last - 1;
		while (d >= 0 && ++idx[d] == sizes[d])
			idx[d--] = 0;
		if (d < 0)
			return;
	}
}

void load(float *dst, const View &v, const std::byte *p, int64_t i, int64_t n)
{
	kernels::load_block<float>(dst, p + i * v.bstride[v.ndim - 1], v.bstride[v.ndim - 1], n, v.dtype);
}
void store(const View &v, std::byte *p, int64_t i, const float *src, int64_t n)
{
	kernels::store_block<float>(p + i * v.bstride[v.ndim - 1], v.bstride[v.ndim - 1], src, n, v.dtype);
}

// An f32 operand with unit stride along its rows: the engines compute on its
// SBUF/PSUM bytes in place (no conversion copy).
// SBUF/PSUM bytes in place (no conversion copy). n: the row length the op walks (a
// size-1 dim has stride 0; with n == 1 only its first element is read).
bool in_place(const View &v, int64_t n)
{
	return v.dtype == NEURON_DTYPE_F32 && v.aligned && (v.bstride[v.ndim - 1] == 4 || n == 1);
}

// Elements [i, i + m) of an input row of n as f32: in place, or converted into buf
// (a broadcast operand, stride 0, is spread over buf).
const float *input(const View &v, const std::byte *p, int64_t i, int64_t m, int64_t n, float *buf)
{
	if (in_place(v, n))
		return reinterpret_cast<const float *>(p) + i;
	if (v.dtype == NEURON_DTYPE_F32 && v.bstride[v.ndim - 1] == 0) {
		std::fill(buf, buf + m, kernels::ld<float>(p));
		return buf;
	}
	load(buf, v, p, i, m);
	return buf;
}

// IOTA over one row: base + step * e, exact for i32 outputs (not through f32).
void iota_row(const neuron_tile_insn &in, const View &o, std::byte *p, const int64_t *sizes, int64_t row,
	      int64_t iota_base, int64_t n)
{
	int64_t coord[NEURON_TILE_MAX_DIMS] = {}; // of the row start
	for (int64_t r = row, d = o.ndim - 2; d >= 0; --d) {
		coord[d] = r % sizes[d];
		r /= sizes[d];
	}
	int64_t base = iota_base + in.i[0] * coord[0];
	for (int d = 1; d + 1 < o.ndim; ++d)
		base += in.i[d] * coord[d];
	const int64_t step = o.ndim > 1 ? in.i[o.ndim - 1] : 0;
	if (o.dtype == NEURON_DTYPE_I32) {
		for (int64_t e = 0; e < n; ++e) {
			const int32_t x = static_cast<int32_t>(base + step * e);
			std::memcpy(p + e * o.bstride[o.ndim - 1], &x, 4);
		}
		return;
	}
	if (in_place(o, n)) {
		rows::iota(reinterpret_cast<float *>(p), base, step, n);
		return;
	}
	float buf[kBlock];
	for (int64_t i = 0; i < n; i += kBlock) {
		const int64_t m = std::min<int64_t>(kBlock, n - i);
		rows::iota(buf, base + step * i, step, m);
		store(o, p, i, buf, m);
	}
}

// A [P, 1] op (an online softmax's statistics: a handful per tile) walked as one
// row of P elements, each operand's partition stride as its element stride: one
// block through the converting path instead of P one-element rows.
void column_as_row(View *v, int nv, int64_t *sizes)
{
	for (int k = 0; k < nv; ++k) {
		v[k].bstride[1] = v[k].bstride[0];
		v[k].bstride[0] = 0;
	}
	sizes[1] = sizes[0];
	sizes[0] = 1;
}

// One block [i, i + m) of one row of a vector/scalar engine op into out.
void block_op(const neuron_tile_insn &in, const View *v, std::byte *const *p, int64_t i, int64_t m, int64_t n,
	      float *out)
{
	float a[kBlock], b[kBlock], c[kBlock];
	const bool more = in.num_operands > 2;
	switch (in.op) {
	case NEURON_TILE_OP_TENSOR_COPY:
		if (in_place(v[1], n))
			std::memmove(out, reinterpret_cast<const float *>(p[1]) + i, static_cast<size_t>(m) * 4);
		else
			load(out, v[1], p[1], i, m);
		return;
	case NEURON_TILE_OP_ACTIVATION:
		rows::activation(in.fn, out, input(v[1], p[1], i, m, n, a), more ? input(v[2], p[2], i, m, n, b) : nullptr,
				 static_cast<float>(in.f[0]), static_cast<float>(in.f[1]), m);
		return;
	case NEURON_TILE_OP_TENSOR_TENSOR:
		kernels::pw_eval(static_cast<uint8_t>(in.fn), out, input(v[1], p[1], i, m, n, a), input(v[2], p[2], i, m, n, b),
				 m);
		return;
	case NEURON_TILE_OP_TENSOR_SCALAR:
		rows::tensor_scalar(in.fn, out, input(v[1], p[1], i, m, n, a), static_cast<float>(in.f[0]),
				    in.flags & NEURON_TILE_REVERSE, m);
		return;
	case NEURON_TILE_OP_COMPARE:
		rows::compare(in.fn, out, input(v[1], p[1], i, m, n, a), more ? input(v[2], p[2], i, m, n, b) : nullptr,
			      static_cast<float>(in.f[0]), m);
		return;
	case NEURON_TILE_OP_SELECT:
		rows::select(out, input(v[1], p[1], i, m, n, c), input(v[2], p[2], i, m, n, a),
			     in.num_operands > 3 ? input(v[3], p[3], i, m, n, b) : nullptr, static_cast<float>(in.f[0]), m);
		return;
	default: // MEMSET
		std::fill(out, out + m, static_cast<float>(in.f[0]));
		return;
	}
}

// The vector/scalar engine ops of one output and up to three inputs of its shape
// (broadcast along free dims), row by row in blocks of floats. An f32 operand with
// unit stride is read and written in place; others convert through a block (the
// engines compute in f32 either way, so both give the same bits). An output shares
// bytes with an input only as the identical tile (validate.cpp), and every op is
// elementwise, so writing in place never clobbers an input element not yet read.
void elementwise(const neuron_tile_insn &in, const Env &env)
{
	View v[NEURON_TILE_MAX_OPERANDS];
	for (int k = 0; k < in.num_operands; ++k)
		v[k] = resolve(in.operands[k], env);
	int64_t sizes[NEURON_TILE_MAX_DIMS];
	if (!active_shape(in, in.operands[0], env.iv, sizes))
		return;
	const int64_t iota_base = evaluate(in.base, env.iv);
	if (in.op != NEURON_TILE_OP_IOTA && v[0].ndim == 2 && sizes[1] == 1)
		column_as_row(v, in.num_operands, sizes);
	int64_t row = 0; // rows walked so far (iota needs the row's coordinates)
	for_rows(sizes, v[0].ndim, v, in.num_operands, [&](std::byte *const *p, int64_t n) {
		if (in.op == NEURON_TILE_OP_IOTA) {
			iota_row(in, v[0], p[0], sizes, row++, iota_base, n);
			return;
		}
		const bool direct = in_place(v[0], n);
		float o[kBlock];
		for (int64_t i = 0; i < n; i += kBlock) {
			const int64_t m = std::min<int64_t>(kBlock, n - i);
			float *out = direct ? reinterpret_cast<float *>(p[0]) + i : o;
			block_op(in, v, p, i, m, n, out);
			if (!direct)
				store(v[0], p[0], i, o, m);
		}
	});
}

// ACTIVATION_REDUCE (out, sum, in [, bias]): the activation row by row as
// elementwise runs it (in place on f32 unit-stride out, else through a block), each
// f32 result also added to its partition's sum (rows::activation_sum: sum_row's
// order and double precision, so a 2-D f32 out in place gives REDUCE's bits over
// it). The sums of the active partitions are stored once, as REDUCE stores.
void activation_reduce(const neuron_tile_insn &in, const Env &env)
{
	View v[NEURON_TILE_MAX_OPERANDS];
	for (int k = 0; k < in.num_operands; ++k)
		v[k] = resolve(in.operands[k], env);
	const View sum = v[1];
	View act[3] = {v[0], v[2], v[3]}; // out, in [, bias]
	const int nact = in.num_operands - 1;
	int64_t sizes[NEURON_TILE_MAX_DIMS];
	const bool any = active_shape(in, in.operands[0], env.iv, sizes);
	if (sizes[0] == 0)
		return; // no partition active
	std::vector<double> lanes(static_cast<size_t>(sizes[0]) * 8, 0.0); // 8 per partition
	if (any) {
		int64_t row = 0, per_partition = 1;
		for (int d = 1; d + 1 < act[0].ndim; ++d)
			per_partition *= sizes[d];
		const float scale = static_cast<float>(in.f[0]), bias = static_cast<float>(in.f[1]);
		for_rows(sizes, act[0].ndim, act, nact, [&](std::byte *const *p, int64_t n) {
			double *l = lanes.data() + row++ / per_partition * 8;
			const bool direct = in_place(act[0], n);
			float o[kBlock], a[kBlock], b[kBlock];
			for (int64_t i = 0; i < n; i += kBlock) {
				const int64_t m = std::min<int64_t>(kBlock, n - i);
				float *out = direct ? reinterpret_cast<float *>(p[0]) + i : o;
				rows::activation_sum(in.fn, out, input(act[1], p[1], i, m, n, a),
						     nact > 2 ? input(act[2], p[2], i, m, n, b) : nullptr, scale, bias, m, l);
				if (!direct)
					store(act[0], p[0], i, o, m);
			}
		});
	}
	for (int64_t q = 0; q < sizes[0]; ++q) {
		const float r = static_cast<float>(rows::lanes_total(lanes.data() + q * 8));
		kernels::store_block<float>(sum.data + q * sum.bstride[0], 0, &r, 1, sum.dtype);
	}
}

// DMA: a byte-exact copy (one dtype on both sides), row by row.
void dma(const neuron_tile_insn &in, const Env &env)
{
	View v[2] = {resolve(in.operands[0], env), resolve(in.operands[1], env)};
	int64_t sizes[NEURON_TILE_MAX_DIMS];
	if (!active_shape(in, in.operands[0], env.iv, sizes))
		return;
	const int64_t es = static_cast<int64_t>(esize(v[0].dtype));
	const int last = v[0].ndim - 1;
	// The stride of a size-1 dim does not matter; a copied element does.
	const int64_t so = v[0].sizes[last] == 1 ? es : v[0].bstride[last];
	const int64_t si = v[1].sizes[last] == 1 ? es : v[1].bstride[last];
	if (so == es && si == es) {
		for_rows(sizes, v[0].ndim, v, 2, [&](std::byte *const *p, int64_t n) {
			std::memmove(p[0], p[1], static_cast<size_t>(n * es));
		});
		return;
	}
	// A transposing load of 4-byte elements (a kernel that reads a^T: one per
	// matmul step): destination rows contiguous, the source's rows one element
	// apart, so dst[r][c] = src[c][r] as rows::transpose32 moves it, in 8 x 8
	// vector blocks (element by element it took 12% of a 1024^3 kernel matmul).
	if (es == 4 && v[0].ndim == 2 && so == es && v[1].bstride[0] == es) {
		rows::transpose32(v[0].data, v[0].bstride[0], v[1].data, si, sizes[1], sizes[0]);
		return;
	}
	// Other walks across rows: fixed-size moves, in 16 x 16 blocks when the view is 2-d, since
	// each row of a transposed HBM tile lies on its own page (so does each SBUF
	// partition) and a block keeps the pages it touches in the TLB.
	const auto copy = [&](auto word) {
		using Word = decltype(word);
		const auto move = [](std::byte *to, const std::byte *from) {
			Word w;
			std::memcpy(&w, from, sizeof w);
			std::memcpy(to, &w, sizeof w);
		};
		if (v[0].ndim == 2) {
			constexpr int64_t kEdge = 16;
			const int64_t R = sizes[0], C = sizes[1], d0 = v[0].bstride[0], s0 = v[1].bstride[0];
			for (int64_t r0 = 0; r0 < R; r0 += kEdge)
				for (int64_t c0 = 0; c0 < C; c0 += kEdge)
					for (int64_t r = r0; r < std::min(R, r0 + kEdge); ++r)
						for (int64_t c = c0; c < std::min(C, c0 + kEdge); ++c)
							move(v[0].data + r * d0 + c * so, v[1].data + r * s0 + c * si);
			return;
		}
		for_rows(sizes, v[0].ndim, v, 2, [&](std::byte *const *p, int64_t n) {
			for (int64_t i = 0; i < n; ++i)
				move(p[0] + i * so, p[1] + i * si);
		});
	};
	if (es == 4)
		copy(uint32_t{});
	else
		copy(uint16_t{});
}

// REDUCE: each partition's active free elements into out[p, 0...]. Sums accumulate
// in double (rows::sum_row), more precise than the hardware's f32 accumulator, so a
// result differs from the engine's only by the f32 rounding the hardware itself
// does; max/min are exact in any order and NaN propagates.
void reduce(const neuron_tile_insn &in, const Env &env)
{
	View o = resolve(in.operands[0], env), x = resolve(in.operands[1], env);
	int64_t sizes[NEURON_TILE_MAX_DIMS];
	const bool any = active_shape(in, in.operands[1], env.iv, sizes);
	if (sizes[0] == 0)
		return; // no partition active
	const bool sum = in.fn == NEURON_PW_ADD, max = in.fn == NEURON_PW_MAXIMUM;
	const double init = sum ? 0.0 : max ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
	const auto fold = [&](double a, double v) {
		return sum ? a + v : (v != v || a != a) ? std::nan("") : max ? std::max(a, v) : std::min(a, v);
	};
	std::vector<double> acc(static_cast<size_t>(sizes[0]), init);
	if (any) {
		int64_t row = 0, per_partition = 1;
		for (int d = 1; d + 1 < x.ndim; ++d)
			per_partition *= sizes[d];
		View vx[1] = {x};
		for_rows(sizes, x.ndim, vx, 1, [&](std::byte *const *p, int64_t n) {
			double &a = acc[static_cast<size_t>(row++ / per_partition)];
			float buf[kBlock];
			const int64_t block = in_place(x, n) ? n : kBlock; // in place: the whole row at once
			for (int64_t i = 0; i < n; i += block) {
				const int64_t m = std::min<int64_t>(block, n - i);
				const float *r = input(x, p[0], i, m, n, buf);
				a = fold(a, sum ? rows::sum_row(r, m) : rows::extreme_row(r, m, max));
			}
		});
	}
	for (int64_t q = 0; q < sizes[0]; ++q) {
		std::byte *at = o.data + q * o.bstride[0];
		float r = static_cast<float>(acc[static_cast<size_t>(q)]);
		if (in.flags & NEURON_TILE_ACCUMULATE) {
			float old;
			kernels::load_block<float>(&old, at, 0, 1, o.dtype);
			r = static_cast<float>(fold(old, r));
		}
		kernels::store_block<float>(at, 0, &r, 1, o.dtype);
	}
}

// Rows x cols of a 2-D view as a dense row-major f32 matrix.
std::vector<float> dense(const View &v)
{
	std::vector<float> m(static_cast<size_t>(v.sizes[0] * v.sizes[1]));
	for (int64_t r = 0; r < v.sizes[0]; ++r)
		kernels::load_block<float>(m.data() + r * v.sizes[1], v.data + r * v.bstride[0], v.bstride[1], v.sizes[1],
					   v.dtype);
	return m;
}

// The leading dimension (in floats) that lets BLAS read a rows x cols view in
// place as a row-major f32 matrix, or 0 if it cannot.
int64_t row_major_f32_ld(const View &v, int64_t rows, int64_t cols)
{
	if (v.dtype != NEURON_DTYPE_F32 || !v.aligned || (cols > 1 && v.bstride[1] != 4))
		return 0;
	if (rows == 1)
		return cols; // the row stride is never used
	return v.bstride[0] % 4 == 0 && v.bstride[0] / 4 >= cols ? v.bstride[0] / 4 : 0;
}

// MATMUL: out[M, N] (+)= st[K, M]^T mv[K, N], f32 accumulation (the PE array
// multiplies the operands exactly and adds in f32). A kernel's 128 x 128 x 512
// step goes through the MATMUL opcode's own multiply: the packed panels on
// AVX-512 or AVX2 + FMA hosts, else OpenBLAS sgemm (with the kernel set
// blas_select.h chose), reading f32 SBUF operands in place; a plain loop here ran
// ~15x slower.
void matmul(const neuron_tile_insn &in, const Env &env)
{
	using kernels::detail::Mat;
	View o = resolve(in.operands[0], env), st = resolve(in.operands[1], env), mv = resolve(in.operands[2], env);
	const int64_t K = st.sizes[0], M = st.sizes[1], N = mv.sizes[1];
	const float beta = (in.flags & NEURON_TILE_ACCUMULATE) ? 1.0f : 0.0f; // 0: old PSUM bytes (NaN too) ignored
	const int64_t ldc = row_major_f32_ld(o, M, N);
	if (ldc && st.aligned && mv.aligned && kernels::detail::packed_gemm_suits(M, N, K)) {
		const auto mat = [](const View &v, int64_t rows, int64_t cols) {
			const int64_t es = static_cast<int64_t>(esize(v.dtype));
			return Mat{v.data, v.dtype, rows, cols, v.bstride[0] / es, v.bstride[1] / es, static_cast<size_t>(es)};
		};
		kernels::detail::packed_gemm(1.0f, mat(st, K, M).t(), mat(mv, K, N), beta,
					     reinterpret_cast<float *>(o.data), ldc, nullptr);
		return;
	}
	kernels::detail::prepare_blas();
	std::vector<float> a_copy, b_copy, c_copy;
	const float *a = reinterpret_cast<const float *>(st.data), *b = reinterpret_cast<const float *>(mv.data);
	int64_t lda = row_major_f32_ld(st, K, M), ldb = row_major_f32_ld(mv, K, N);
	if (!lda) {
		a_copy = dense(st);
		a = a_copy.data();
		lda = M;
	}
	if (!ldb) {
		b_copy = dense(mv);
		b = b_copy.data();
		ldb = N;
	}
	float *c = reinterpret_cast<float *>(o.data);
	if (!ldc) { // a PSUM view with strided columns: through a dense copy
		c_copy = dense(o);
		c = c_copy.data();
	}
	cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(M), static_cast<int>(N), static_cast<int>(K),
		    1.0f, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc ? ldc : N));
	if (!ldc)
		for (int64_t r = 0; r < M; ++r)
			kernels::store_block<float>(o.data + r * o.bstride[0], o.bstride[1], c + r * N, N, o.dtype);
}

// TRANSPOSE: out[F, P] = in[P, F] through the tensor engine (a matmul with the
// identity), exact. An f32 input is read in place, others through a dense f32
// copy; rows contiguous on both sides (the usual case) go in 8 x 8 vector blocks
// (rows::transpose32: ~7% of a flash attention forward went to element moves),
// others in 16 x 16 blocks of moves (each partition is its own page, as in dma).
void transpose(const neuron_tile_insn &in, const Env &env)
{
	View o = resolve(in.operands[0], env), x = resolve(in.operands[1], env);
	const int64_t P = x.sizes[0], F = x.sizes[1];
	std::vector<float> copy;
	const std::byte *src = x.data;
	int64_t s0 = x.bstride[0], s1 = x.bstride[1];
	if (x.dtype != NEURON_DTYPE_F32) {
		copy = dense(x);
		src = reinterpret_cast<const std::byte *>(copy.data());
		s0 = F * 4;
		s1 = 4;
	}
	if ((s1 == 4 || F == 1) && (o.bstride[1] == 4 || P == 1)) { // rows contiguous: 8 x 8 vector blocks
		rows::transpose32(o.data, o.bstride[0], src, s0, P, F);
		return;
	}
	constexpr int64_t kEdge = 16;
	for (int64_t p0 = 0; p0 < P; p0 += kEdge)
		for (int64_t f0 = 0; f0 < F; f0 += kEdge)
			for (int64_t f = f0; f < std::min(F, f0 + kEdge); ++f)
				for (int64_t p = p0; p < std::min(P, p0 + kEdge); ++p)
					std::memcpy(o.data + f * o.bstride[0] + p * o.bstride[1], src + p * s0 + f * s1, 4);
}

} // namespace

int64_t evaluate(const neuron_tile_affine &a, const int64_t *iv)
{
	int64_t v = a.base;
	for (int l = 0; l < NEURON_TILE_MAX_LOOPS; ++l)
		v += a.step[l] * iv[l];
	return v;
}

void execute(const neuron_tile_insn &in, const Env &env)
{
	switch (in.op) {
	case NEURON_TILE_OP_DMA: dma(in, env); return;
	case NEURON_TILE_OP_MATMUL: matmul(in, env); return;
	case NEURON_TILE_OP_TRANSPOSE: transpose(in, env); return;
	case NEURON_TILE_OP_REDUCE: reduce(in, env); return;
	case NEURON_TILE_OP_ACTIVATION_REDUCE: activation_reduce(in, env); return;
	default: elementwise(in, env); return;
	}
}

} // namespace neuron::tile
