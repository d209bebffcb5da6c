// Tile programs of two canonical kernels, built as the tile language's tracer
// would emit them (shared/notes/kernels.md section 3): a tiled matmul (NKI's
// matmul tutorial: m over 128, n over 512, k over 128 accumulating in one PSUM
// bank) and RMSNorm (rows on the partitions, 128 per iteration). Shapes need not
// divide the tiles: loads zero-fill and masks cut the tails.
#pragma once

#include "builder.h"

#include <vector>

namespace tk {

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// C[M, N] (f32) = A[M, K] @ B[K, N] (dtype dt); args: 0 = C, 1 = A, 2 = B.
inline std::vector<neuron_tile_insn> matmul(uint8_t dt, int64_t M, int64_t K, int64_t N)
{
	using namespace tb;
	const int64_t es = dt == NEURON_DTYPE_F32 ? 4 : 2;
	const int64_t TM = 128, TK = 128, TN = 512;
	// SBUF: A^T tile [TK, TM] at 0, B tile [TK, TN] after it, C tile [TM, TN] f32 after that.
	const neuron_tile_ap at = sbuf(dt, TK, TM), bt = sbuf(dt, TK, TN, {TM * es}),
			     ct = sbuf(NEURON_DTYPE_F32, TM, TN, {(TM + TN) * es}), acc = psum(TM, TN);
	std::vector<neuron_tile_insn> p;
	p.push_back(loop(ceil_div(M, TM)));  // mi: loop 0
	p.push_back(loop(ceil_div(N, TN)));  // ni: loop 1
	neuron_tile_insn zero = insn(NEURON_TILE_OP_MEMSET, {acc});
	p.push_back(zero);
	p.push_back(loop(ceil_div(K, TK)));  // ki: loop 2
	neuron_tile_insn z1 = insn(NEURON_TILE_OP_MEMSET, {at}), z2 = insn(NEURON_TILE_OP_MEMSET, {bt});
	p.push_back(z1);
	p.push_back(z2);
	// A^T tile: element (k, m) = A[mi*TM + m, ki*TK + k]: a strided DMA does the transpose.
	neuron_tile_insn la = insn(NEURON_TILE_OP_DMA,
				   {at, ap(NEURON_TILE_HBM, dt, 1, 0, {0, {TM * K, 0, TK}}, {TK, TM}, {1, K})});
	la = masked(masked(la, 0, {0, {0, 0, TK}}, K, 0), 1, {0, {TM}}, M, 1);
	p.push_back(la);
	neuron_tile_insn lb = insn(NEURON_TILE_OP_DMA, {bt, hbm(dt, 2, TK, TN, N, {0, {0, TN, TK * N}})});
	lb = masked(masked(lb, 0, {0, {0, 0, TK}}, K, 0), 1, {0, {0, TN}}, N, 1);
	p.push_back(lb);
	p.push_back(insn(NEURON_TILE_OP_MATMUL, {acc, at, bt}, 0, NEURON_TILE_ACCUMULATE));
	p.push_back(end_loop());
	p.push_back(insn(NEURON_TILE_OP_TENSOR_COPY, {ct, acc}));
	neuron_tile_insn st = insn(NEURON_TILE_OP_DMA, {hbm(NEURON_DTYPE_F32, 0, TM, TN, N, {0, {TM * N, TN}}), ct});
	st = masked(masked(st, 0, {0, {TM}}, M, 0), 1, {0, {0, TN}}, N, 1);
	p.push_back(st);
	p.push_back(end_loop());
	p.push_back(end_loop());
	return p;
}

// out[R, H] = x * rsqrt(mean(x^2) + eps) * gamma, x and out of dtype dt, gamma [H];
// args: 0 = out, 1 = x, 2 = gamma.
inline std::vector<neuron_tile_insn> rmsnorm(uint8_t dt, int64_t R, int64_t H, double eps)
{
	using namespace tb;
	const int64_t P = 128;
	const uint8_t f32 = NEURON_DTYPE_F32;
	const int64_t es = dt == f32 ? 4 : 2;
	// SBUF per partition: x [H] (dt), gamma [H] f32, sq [H] f32, ss [1], rstd [1], y [H] (dt).
	int64_t at = 0;
	const neuron_tile_ap x = sbuf(dt, P, H, {at});
	const neuron_tile_ap g = sbuf(f32, P, H, {at += H * es});
	const neuron_tile_ap sq = sbuf(f32, P, H, {at += H * 4});
	const neuron_tile_ap ss = sbuf(f32, P, 1, {at += H * 4});
	const neuron_tile_ap rstd = sbuf(f32, P, 1, {at += 4});
	const neuron_tile_ap y = sbuf(dt, P, H, {at += 4});
	std::vector<neuron_tile_insn> p;
	// gamma on every partition: the DMA reads the same HBM row 128 times (stride 0).
	p.push_back(insn(NEURON_TILE_OP_DMA, {g, ap(NEURON_TILE_HBM, f32, 2, 0, {}, {P, H}, {0, 1})}));
	p.push_back(loop(ceil_div(R, P)));
	auto rows = [&](neuron_tile_insn in) { return masked(in, 0, {0, {P}}, R); };
	p.push_back(rows(insn(NEURON_TILE_OP_DMA, {x, hbm(dt, 1, P, H, H, {0, {P * H}})})));
	p.push_back(rows(insn(NEURON_TILE_OP_TENSOR_TENSOR, {sq, x, x}, NEURON_PW_MUL)));
	p.push_back(rows(insn(NEURON_TILE_OP_REDUCE, {ss, sq}, NEURON_PW_ADD)));
	neuron_tile_insn r = rows(insn(NEURON_TILE_OP_ACTIVATION, {rstd, ss}, NEURON_PW_RSQRT));
	r.f[0] = 1.0 / double(H);
	r.f[1] = eps;
	p.push_back(r);
	p.push_back(rows(insn(NEURON_TILE_OP_TENSOR_TENSOR, {sq, x, rstd}, NEURON_PW_MUL)));
	p.push_back(rows(insn(NEURON_TILE_OP_TENSOR_TENSOR, {y, sq, g}, NEURON_PW_MUL)));
	p.push_back(rows(insn(NEURON_TILE_OP_DMA, {hbm(dt, 0, P, H, H, {0, {P * H}}), y})));
	p.push_back(end_loop());
	return p;
}

} // namespace tk
