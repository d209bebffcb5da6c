/* SPDX-License-Identifier: MIT */
/*
 * The simulated NeuronCore's command format ("ISA"), version 1.7.
 *
 * Shared by neurond (which validates and executes commands) and libneuron (whose
 * tenants encode them). Everything here is plain C so the public C API can expose it.
 *
 * A command is one fixed-size slot (NEURON_CMD_SLOT_SIZE bytes) in a queue's
 * shared-memory ring (<neuron/ring.h>). Layout rules: little-endian, natural alignment, explicit
 * reserved fields that must be zero, no implicit padding (static_asserts below).
 *
 * Tensor operands are descriptors (address, dtype, up to 8 dims of sizes and
 * element strides). Broadcasting is expressed by the encoder with stride 0: every
 * input of an elementwise op has exactly the output's shape. Strides are never
 * negative. Operand 0 is always the output, except for NOP (no operands).
 *
 * Compatibility: a new opcode or a new meaning for a reserved field bumps
 * NEURON_CMD_ABI_MINOR; a change to an existing layout bumps NEURON_CMD_ABI_MAJOR.
 */
#ifndef NEURON_CMD_H
#define NEURON_CMD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NEURON_CMD_ABI_MAJOR 1
#define NEURON_CMD_ABI_MINOR 8

#define NEURON_MAX_DIMS 8
#define NEURON_MAX_OPERANDS 6
#define NEURON_MAX_SCALARS 4
#define NEURON_CMD_SLOT_SIZE 1024

/* Element types. Values are stable ABI. */
enum neuron_dtype {
	NEURON_DTYPE_INVALID = 0,
	NEURON_DTYPE_F32 = 1,
	NEURON_DTYPE_BF16 = 2,
	NEURON_DTYPE_F16 = 3,
	NEURON_DTYPE_I32 = 4,
	NEURON_DTYPE_I64 = 5,
	NEURON_DTYPE_BOOL = 6,
	NEURON_DTYPE_U8 = 7,
	NEURON_DTYPE_COUNT_ = 8,
};

/*
 * Opcodes. Operand lists name operand 0 first. "scalars.f[k]" / "scalars.i[k]" are
 * the op's scalar arguments; unused scalars must be zero.
 */
enum neuron_opcode {
	NEURON_OP_INVALID = 0,
	/* No operands. Completes in order; used for events and round-trip timing. */
	NEURON_OP_NOP = 1,
	/* out = f[0] (floating dtypes) or i[0] (integer and bool dtypes). */
	NEURON_OP_FILL = 2,
	/* out = cast(in). Strided, any dtype pair. On DMA queues either side may be a
	 * host buffer; on core queues both are device memory. */
	NEURON_OP_COPY = 3,
	/* out = a + f[0] * b (f[0] is alpha; encoders pass 1.0 for plain add). */
	NEURON_OP_ADD = 4,
	/* out = a - f[0] * b */
	NEURON_OP_SUB = 5,
	NEURON_OP_MUL = 6, /* out = a * b */
	NEURON_OP_DIV = 7, /* out = a / b (true division in out's dtype) */
	/* Scalar forms: out = a (op) s with s = f[0]; i[0] = 1 reverses the operands
	 * (s - a, s / a). Integer outputs take s as i[1] to keep 64-bit precision. */
	NEURON_OP_ADD_SCALAR = 8,
	NEURON_OP_SUB_SCALAR = 9,
	NEURON_OP_MUL_SCALAR = 10,
	NEURON_OP_DIV_SCALAR = 11,
	/*
	 * out[..., M, N] = f[0] * a[..., M, K] @ b[..., K, N] + f[1] * out.
	 * ndim 2 (matmul) or 3 (batched; batch may be broadcast with stride 0 on a/b).
	 * With f[1] == 0 the old contents of out are ignored (NaNs included).
	 * Floating dtypes only; a, b and out share one dtype.
	 */
	NEURON_OP_MATMUL = 12,
	/* Reductions: out = reduce(in) over the dims set in bitmask i[0]. out has
	 * in's ndim with reduced dims of size 1 (keepdim).
	 * ISA 1.3: i[1] = NEURON_REDUCE_ACCUMULATE combines the result with out's old
	 * value instead of replacing it (SUM, MEAN: out += result; AMAX: out =
	 * max(out, result), NaN kept); i[2] > 0 makes MEAN divide by i[2] instead of
	 * the reduced element count (MEAN only). The chip uses both to cut a long
	 * reduction into tiles along a reduced dim; any tenant may use them too. */
	NEURON_OP_SUM = 13,
	NEURON_OP_MEAN = 14,
	NEURON_OP_AMAX = 15,
	/* Unary elementwise: out = f(in). Floating dtypes (RELU also integers). */
	NEURON_OP_RELU = 16,
	NEURON_OP_GELU = 17, /* i[0] = 0: erf form; 1: tanh approximation */
	NEURON_OP_SILU = 18,
	NEURON_OP_TANH = 19,
	NEURON_OP_EXP = 20,
	/* out = softmax(in) along dim i[0]. Floating dtypes; out and in same shape. */
	NEURON_OP_SOFTMAX = 21,

	/* ---- ISA 1.1 (math, comparisons, selection, log-softmax, indexing) ---- */
	/*
	 * out = f(in), f chosen by i[0] (enum neuron_unary_fn); floating dtypes, same
	 * shape. POW uses f[0] (exponent); CLAMP uses f[0] (min) if i[1] bit 0 and f[1]
	 * (max) if i[1] bit 1. Other functions take no further scalars.
	 */
	NEURON_OP_UNARY_MATH = 22,
	/*
	 * out = f(a, b), f chosen by i[0] (enum neuron_binary_fn). MAXIMUM/MINIMUM:
	 * any dtype but bool; the others floating. GELU_BACKWARD: out = a * gelu'(b)
	 * with i[1] = 0 (erf) or 1 (tanh). THRESHOLD_BACKWARD: out = b > f[0] ? a : 0.
	 */
	NEURON_OP_BINARY_MATH = 23,
	/* out (bool) = a (cmp) b, cmp chosen by i[0] (enum neuron_compare_fn); a and b
	 * any dtype, compared as double. */
	NEURON_OP_COMPARE = 24,
	/* out (bool) = a (cmp) f[0], i[0] as for COMPARE. */
	NEURON_OP_COMPARE_SCALAR = 25,
	/* out = cond ? a : b. cond bool; a and b have out's dtype. */
	NEURON_OP_WHERE = 26,
	/* out = log_softmax(in) along dim i[0]; as SOFTMAX. */
	NEURON_OP_LOG_SOFTMAX = 27,
	/*
	 * Indexing along dim i[0]; index tensors are i32 or i64 and every index must
	 * lie in [0, size of that dim) (an index outside faults the command; a
	 * command the chip cuts into tiles stops at the first tile that has one, and
	 * the tiles before it have written, as a device-side assert on a GPU).
	 * INDEX_SELECT (out, in, index[1-d]): out[.., j, ..] = in[.., index[j], ..]
	 * INDEX_ADD    (out, index[1-d], src): out[.., index[j], ..] += src[.., j, ..]
	 * GATHER       (out, in, index):  out[i][j] = in[i][index[i][j]] (dim 1), index has out's shape
	 * SCATTER_ADD  (out, index, src): out[i][index[i][j]] += src[i][j] (dim 1), index has src's shape
	 * out and in/src share one dtype (not bool for the adds).
	 */
	NEURON_OP_INDEX_SELECT = 28,
	NEURON_OP_INDEX_ADD = 29,
	NEURON_OP_GATHER = 30,
	NEURON_OP_SCATTER_ADD = 31,

	/* ---- ISA 1.2 (fused optimizer step, arg reductions) ---- */
	/*
	 * ADAM_STEP (param, exp_avg, exp_avg_sq, grad, step): one Adam or AdamW step of
	 * one parameter, as torch.optim's fused kernels compute it. param, exp_avg,
	 * exp_avg_sq and grad have one shape (floating dtypes; the math runs in f32);
	 * param, exp_avg and exp_avg_sq are read and written, grad is read; no two
	 * operands may overlap. step is one element (any dtype but bool): the step
	 * number t >= 1, read on the device so the host never waits for it.
	 *   g = maximize ? -grad : grad
	 *   Adam:  g += weight_decay * param      AdamW: param -= lr * weight_decay * param
	 *   exp_avg    = beta1 * exp_avg + (1 - beta1) * g
	 *   exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * g * g
	 *   param     -= lr / (1 - beta1^t) * exp_avg / (sqrt(exp_avg_sq) / sqrt(1 - beta2^t) + eps)
	 * f[0] lr, f[1] beta1, f[2] beta2, f[3] eps; i[0] flags (bit 0: AdamW's decoupled
	 * weight decay, bit 1: maximize); i[1] the IEEE-754 bits of weight_decay (a double).
	 * lr, eps and weight_decay are finite and >= 0, betas in [0, 1).
	 */
	NEURON_OP_ADAM_STEP = 32,
	/*
	 * ARG_REDUCE (out, in): out (i64) = index of the largest (i[1] = 0, argmax) or
	 * smallest (i[1] = 1, argmin) element of in along dim i[0]; the first one on
	 * ties, and the first NaN if the row has one (as PyTorch). out has in's ndim
	 * with size 1 along dim (keepdim); in is any dtype but bool, compared as double;
	 * the dim must not be empty.
	 */
	NEURON_OP_ARG_REDUCE = 33,

	/* ---- ISA 1.3 (indexed writes without accumulation) ---- */
	/*
	 * The copying forms of INDEX_ADD and SCATTER_ADD, same operands, shapes and
	 * index rules (dim i[0]; an index outside the dim faults the command before
	 * the tile that holds it writes anything); any dtype, bool included.
	 * INDEX_COPY (out, index[1-d], src): out[.., index[j], ..] = src[.., j, ..]
	 * SCATTER    (out, index, src):      out[i][index[i][j]] = src[i][j] (dim 1)
	 * Writes run in index order (j ascending; SCATTER: src's elements in row-major
	 * order), so with duplicate indices the last one wins, deterministically.
	 * (PyTorch's index_put_(accumulate=False), index_copy_ and scatter_.)
	 */
	NEURON_OP_INDEX_COPY = 34,
	NEURON_OP_SCATTER = 35,

	/* ==== ISA 1.4, block 36..63: scans, sorting, fused attention ==== */
	/*
	 * SCAN (out, in, init): the inclusive scan along dim i[0] with the function
	 * i[1] (enum neuron_scan_fn), starting from init:
	 *   out[.., j, ..] = init[.., 0, ..] (op) in[.., 0, ..] (op) ... (op) in[.., j, ..]
	 * out and in have one shape; init has it too except size 1 along the dim (the
	 * value each row starts from; broadcast it with stride 0: a zero for SUM, one
	 * for PROD, -inf for MAX/LOGSUMEXP, +inf for MIN). out is any dtype but bool
	 * (LOGSUMEXP: floating); in and init any dtype. Floating scans accumulate in
	 * double, integer ones in int64 (wrapping as PyTorch's do). MAX/MIN propagate
	 * NaN. (cumsum, cumprod, cummax/cummin values, logcumsumexp.)
	 */
	NEURON_OP_SCAN = 36,
	/*
	 * SORT (values, indices, in): each row of in along dim i[0], sorted ascending
	 * (i[1] = 0) or descending (i[1] = 1); values and indices (i64, the positions
	 * in the row) receive the first k entries, k = their size along the dim
	 * (k <= the row's length; k = length is a full sort, k < length a top-k).
	 * values and indices have in's shape except along the dim. The sort is stable
	 * (equal elements keep their order); NaN sorts above every number, as in
	 * PyTorch. values has in's dtype (any but bool is compared as double; bool as
	 * 0/1). A row is sorted whole: tiles split the rows, never one row.
	 */
	NEURON_OP_SORT = 37,
	/*
	 * ATTENTION (out, lse, q, k, v, mask): fused scaled dot-product attention.
	 *   q [..., L, E], k [..., S, E], v [..., S, Ev], out [..., L, Ev], lse [..., L]
	 *   mask [..., L, S]; the leading dims ("...", 0 to 6 of them) are out's and
	 *   every operand has them (broadcast with stride 0, e.g. one key head shared
	 *   by a group of query heads).
	 *   s = f[0] * q @ k^T + mask (bool mask: false = -inf); with i[0] bit 0
	 *   (causal), also -inf where key j > row i + i[1].
	 *   out = softmax(s) @ v; lse = logsumexp(s) per row (f32; -inf for a row
	 *   that sees no key, whose out is 0, as PyTorch's math path).
	 * q, k, v, out and a floating mask share one floating dtype (the math runs in
	 * f32 with one pass over the keys, the online softmax of flash attention);
	 * lse is f32; mask may be bool. Without a mask, pass one zero element
	 * broadcast with stride 0. f[0] is finite.
	 */
	NEURON_OP_ATTENTION = 38,
	/*
	 * Dense linear algebra on batches of matrices (LAPACK's algorithms in f32; the
	 * leading dims "..." are a batch, every operand has them, inputs may broadcast
	 * them with stride 0; each matrix of a tile is factored whole). a is read only.
	 * Operands are floating (one dtype) unless named i32 / i64.
	 * LU (lu, pivots, info, a): a [..., M, N] = P L U with partial pivoting; lu
	 *   holds L (unit diagonal, below) and U; pivots i32 [..., min(M, N)] the
	 *   1-based row swapped with each row in turn; info i32 [...] is 0, or the
	 *   1-based index of the first zero on U's diagonal (the matrix is singular).
	 * PERMUTATION (perm, pivots): perm i64 [..., M] is the row order those swaps
	 *   make of 0..M-1 (a[perm] = L U); pivots as LU's (each in [1, M]).
	 * CHOLESKY (l, info, a): a [..., N, N] symmetric positive definite, only its
	 *   lower (i[0] = 0; or upper, i[0] = 1) triangle read; l the factor L
	 *   (A = L L^T; upper: U, A = U^T U), the other triangle zero; info i32 [...]
	 *   0, or the order of the first leading minor that is not positive definite.
	 * TRIANGULAR_SOLVE (x, a, b): i[0] flags NEURON_TRSM_*: x = op(a)^-1 b (LEFT)
	 *   or b op(a)^-1, a [..., N, N] triangular (UPPER or lower; UNIT: its
	 *   diagonal taken as ones), op(a) = a^T with TRANSPOSE; b and x [..., N, K]
	 *   (left) or [..., K, N].
	 * GEQRF (packed, tau, a): the Householder QR of a [..., M, N]: packed
	 *   [..., M, N] holds R on and above the diagonal and the reflectors below,
	 *   tau [..., min(M, N)] their scales (LAPACK's geqrf).
	 * ORGQR (q, packed, tau): the first K columns of Q = H(1) ... H(k) for packed
	 *   [..., M, N] and tau [..., k], k <= N; q [..., M, K], k <= K <= M.
	 * EIGH (w, v, a): eigenvalues w [..., N] ascending and orthonormal
	 *   eigenvectors v [..., N, N] (columns) of the symmetric a (lower triangle read,
	 *   or upper with i[0] = 1).
	 * SVD (u, s, vh, a): a [..., M, N] = u diag(s) vh, s [..., K] descending,
	 *   K = min(M, N); u [..., M, K] and vh [..., K, N] (reduced) or u [..., M, M]
	 *   and vh [..., N, N] (full).
	 * A matrix that makes LAPACK fail to converge (EIGH, SVD) faults the command.
	 */
	NEURON_OP_LU = 39,
	NEURON_OP_PERMUTATION = 40,
	NEURON_OP_CHOLESKY = 41,
	NEURON_OP_TRIANGULAR_SOLVE = 42,
	NEURON_OP_GEQRF = 43,
	NEURON_OP_ORGQR = 44,
	NEURON_OP_EIGH = 45,
	NEURON_OP_SVD = 46,
	/* 47..63: reserved for this block (unknown opcodes until defined). */
	/* ==== end of ISA 1.4 block 36..63 ==== */

	/* ==== ISA 1.4, block 64..71: device RNG, timestamps, AMP grad scaling ==== */
	/*
	 * Random numbers come from Philox4x32-10 (Salmon et al., "Parallel random
	 * numbers: as easy as 1, 2, 3", SC 2011; the generator CUDA's curand and
	 * PyTorch's CUDA backend use), counter-based: the numbers an element gets
	 * depend only on the key, its counter and the element's position, never on
	 * how the chip cuts the command into tiles or how many threads run it.
	 *   key     (k0, k1) = (low, high 32 bits of i[1], the seed)
	 *   counter (c0, c1, c2, c3) = (low, high 32 bits of the position P,
	 *                               low, high 32 bits of i[2], the offset)
	 * Position P of an output element is its index in row-major order of
	 * operand 0's sizes (whatever its strides), except where an op says
	 * otherwise. A tenant's generator keeps (seed, offset) and advances the
	 * offset by one per command, so no two commands share a counter.
	 * fscalars.bits[2], bits[3] = [begin, end) of the positions the command
	 * writes (end 0: to the last); a tenant passes 0 and 0, the chip's tiles
	 * narrow the range. Each Philox call gives four 32-bit words w0..w3:
	 *   u32  = w0 * 2^-32 in [0, 1);  u24 = (w0 >> 8) * 2^-24 in [0, 1)
	 */
	/*
	 * RNG (out): out = a sample of distribution i[0] (enum neuron_rng_dist):
	 *   UNIFORM:   f[0] + (f[1] - f[0]) * u24, floating out; a value that rounds
	 *              to f[1] in out's dtype is stored as f[0] (the range is
	 *              half-open, as torch.Tensor.uniform_); f[0] <= f[1], finite
	 *   NORMAL:    f[0] + f[1] * sqrt(-2 ln(1 - u32)) * cos(2 pi w1 2^-32)
	 *              (Box-Muller), floating out; f[1] >= 0, both finite
	 *   BERNOULLI: u32 < f[0] ? 1 : 0, any dtype; 0 <= f[0] <= 1
	 *   INTEGER:   from + (w0 | w1 << 32) mod range, from = (int64) bits[0],
	 *              range = bits[1] (0: 2^64, every 64-bit value), any dtype
	 *              but bool (torch.Tensor.random_)
	 * i[1] seed, i[2] offset, i[3] zero.
	 */
	NEURON_OP_RNG = 64,
	/*
	 * DROPOUT (out, mask, in): keep = u32 < f[1] (the same draw as BERNOULLI
	 * with p = f[1]); mask (bool) = keep; out = keep ? in * f[0] : 0.
	 * out and in floating, one dtype; all three one shape; f[0] (scale) finite,
	 * 0 <= f[1] <= 1; i[1] seed, i[2] offset. Writes out and mask, which must be
	 * disjoint from every operand.
	 */
	NEURON_OP_DROPOUT = 65,
	/*
	 * RANDPERM (out[n]): a uniformly random permutation of 0..n-1 (i32, i64 or
	 * f32), by the inside-out Fisher-Yates shuffle: for P = 0..n-1 in order,
	 * j = (P + 1) * (w0 | w1 << 32) / 2^64 (so 0 <= j <= P) with the words of
	 * position P; out[P] = out[j]; out[j] = P. The range [begin, end) of P
	 * must be run in order; out's old contents are not read before they are
	 * written. n <= 2^24 for f32. i[1] seed, i[2] offset.
	 */
	NEURON_OP_RANDPERM = 66,
	/*
	 * MULTINOMIAL (out, probs): out[r][s] (i64) = category drawn for sample s of
	 * row r from the unnormalized weights probs[r][:] (floating; 1-d probs and
	 * out are one row). i[0] = 1: with replacement: u = u32 of position
	 * r * S + s (S = samples per row), the first category whose running sum of
	 * weights exceeds u times the row's sum. i[0] = 0: without replacement
	 * (S <= categories with a positive weight): the S categories with the
	 * largest w / e, e = -ln(1 - u32) of position r * C + c (C = categories),
	 * largest first (Efraimidis-Spirakis; the order of sequential draws).
	 * Positions for bits[2..3] are rows. A row with a negative, infinite or NaN
	 * weight, a zero sum, or (without replacement) too few positive weights
	 * faults the command. i[1] seed, i[2] offset.
	 */
	NEURON_OP_MULTINOMIAL = 67,
	/*
	 * TIMESTAMP (out): out (i64, one element) = the device clock in
	 * nanoseconds when the engine reaches the command in queue order: after
	 * every earlier command of the queue completed and the command's wait is
	 * satisfied (a CUDA event's timestamp). The clock is monotonic per device;
	 * its epoch is the device's (on the simulated chip: the host's
	 * CLOCK_MONOTONIC). No scalars.
	 */
	NEURON_OP_TIMESTAMP = 68,
	/*
	 * AMP_UNSCALE (grad, found_inf, inv_scale): torch's
	 * _amp_foreach_non_finite_check_and_unscale_ for one tensor: found_inf
	 * (f32, one element) = 1 if any element of grad is infinite or NaN (else
	 * left as it was); grad *= inv_scale (f32, one element; unchanged if it is
	 * 1). grad floating, math in f32. Writes grad and found_inf.
	 */
	NEURON_OP_AMP_UNSCALE = 69,
	/*
	 * AMP_UPDATE_SCALE (scale, growth_tracker, found_inf): torch's
	 * _amp_update_scale_: if found_inf (f32) is nonzero, scale *= f[1]
	 * (backoff) and growth_tracker (i32) = 0; else growth_tracker += 1, and when
	 * it reaches i[0] (growth interval, >= 1) scale *= f[0] (growth) unless
	 * that overflows f32, and growth_tracker = 0. One element each; scale f32.
	 * f[0] and f[1] finite and > 0. Writes scale and growth_tracker.
	 */
	NEURON_OP_AMP_UPDATE_SCALE = 70,
	/* 71: reserved for this block. */
	/* ==== end of ISA 1.4 block 64..71 ==== */

	/* ==== ISA 1.5, block 72..79: programs and fused ops ==== */
	/*
	 * EXEC_PROGRAM: runs a program the tenant registered with neurond
	 * (RegisterProgram, <neuron/program.h>) as ONE command of its queue: its
	 * nodes run one after another on the queue's logical core, scheduled in
	 * tiles like any command (preemptible between tiles and between nodes);
	 * the queue's timeline advances once, when the last node completed. A
	 * node's fault faults the queue with the program, node index, opcode and
	 * label in its reason. Core queues only; never a node of a program.
	 * The slot is laid out as struct neuron_exec_slot (program.h): i[0] the
	 * program id, i[1] the number of argument bindings (the program's
	 * argument count), i[2]/i[3] the seed and offset random nodes take when
	 * flags has NEURON_EXEC_RNG (else they run with the ones they were
	 * registered with); num_operands 0; the bindings (one device address per
	 * argument) fill the rest of the slot and, past 116, the slots that
	 * follow it in the ring (128 per slot), all published at once. Its
	 * timeline value is that of its last slot.
	 */
	NEURON_OP_EXEC_PROGRAM = 72,
	/*
	 * POINTWISE (out, in1 [, in2 .. in5]): a chain of up to 16 pointwise steps
	 * computed per element in f32 with no intermediate stored (what a compiler
	 * fuses from a chain of elementwise ops). out floating; 1..5 inputs of
	 * out's shape (broadcast with stride 0), any dtype but bool, read as f32.
	 * Values: 0..4 the inputs, 5 + s the result of step s, 21..24 the
	 * constants f[0..3]. Step s is the 16-bit field s % 4 of i[s / 4]
	 * (bits 16*(s%4) ..): bits 0-5 the function (enum neuron_pw_fn; 0 ends
	 * the chain), 6-10 operand a, 11-15 operand b (0 for unary functions).
	 * A step reads only inputs, constants and earlier steps; out is the last
	 * step's value. Each function computes what the unfused opcode computes
	 * in f32, so an f32 chain gives the unfused ops' bits.
	 */
	NEURON_OP_POINTWISE = 73,
	/*
	 * MATMUL_EPILOGUE (out, a, b, bias): out = act(f[0] * a @ b + f[1] * bias),
	 * a matmul with its bias and activation fused (a linear layer). Shapes
	 * and dtypes as MATMUL (ndim 2 or 3); bias has out's shape (broadcast with
	 * stride 0) and dtype; f32 output only. i[0] the activation (enum
	 * neuron_epilogue_act). i[1] flags the chip's tiling sets on the tiles of
	 * a K split (a tenant passes 0): NEURON_EPILOGUE_NO_BIAS (a later K tile:
	 * out already holds the partial sum, f[1] is then 1 and scales it) and
	 * NEURON_EPILOGUE_NO_ACT (not the last K tile). Computes exactly COPY
	 * (out <- bias), MATMUL (beta f[1]), then the activation in place.
	 */
	NEURON_OP_MATMUL_EPILOGUE = 74,
	/* ---- ISA 1.6 ---- */
	/*
	 * TILE_KERNEL (args...): runs tile program i[0] of the program this node
	 * belongs to (the tile programs registered with it, <neuron/tile.h>: a
	 * kernel over the core's SBUF and PSUM) with its HBM arguments as the
	 * operands, in the tile program's order: each u8, 1-D, contiguous, exactly
	 * as many bytes as the tile program declares for it. Operands [0, i[1]) are
	 * the ones the kernel may write (1 <= i[1] <= num_operands; the tile
	 * program writes no other). The kernel runs in steps, one per loop
	 * iteration, each a tile of the scheduler (preemptible between any two
	 * iterations). i[2] and i[3] are zero (neurond keeps the step count in
	 * i[2]). Only a node of a program: on a ring it faults BAD_OPCODE.
	 */
	NEURON_OP_TILE_KERNEL = 75,
	/* ---- ISA 1.8 ---- */
	/*
	 * Layer norm of the rows along dim D = i[0] (a row: D at one index of the
	 * other dims; PyTorch's normalized dims flattened into one). mean and rstd
	 * are f32 with in's shape but size 1 at D; weight and bias are 1-D, the
	 * row's length, any floating dtype (read as f32). Statistics in double:
	 * mean, the biased variance of (x - mean), rstd = 1 / sqrt(var + f[0])
	 * (eps, finite, >= 0).
	 * LAYER_NORM (out, mean, rstd, in[, weight[, bias]]): out = (in - mean) *
	 *   rstd [* weight] [+ bias] in f32, rounded to out's dtype; out and in one
	 *   floating dtype and one shape; mean and rstd are written.
	 * LAYER_NORM_BACKWARD (dx, go, in, mean, rstd[, weight]): with xhat =
	 *   (in - mean) * rstd and g = go [* weight], dx = (g - mean(g) - xhat *
	 *   mean(g * xhat)) * rstd (the row means in double); dx, go and in one
	 *   floating dtype and one shape. No scalars but i[0].
	 * LAYER_NORM_PARAM_GRAD (dw, db, go, in, mean, rstd): the affine
	 *   parameters' gradients, sums over the rows: dw = sum of go * xhat (the
	 *   product in f32), db = sum of go, in double, rounded to f32 once; dw and
	 *   db f32, 1-D of the row's length; go and in one floating dtype and one
	 *   shape. i[1] = NEURON_LN_ACCUMULATE adds the sums to dw and db instead
	 *   (the chip's tiling sets it on a command's later tiles of rows; a tenant
	 *   passes 0 or 1).
	 */
	NEURON_OP_LAYER_NORM = 76,
	NEURON_OP_LAYER_NORM_BACKWARD = 77,
	NEURON_OP_LAYER_NORM_PARAM_GRAD = 78,
	/* 79: reserved for this block. */
	/* ==== end of ISA 1.5 block 72..79 ==== */
	NEURON_OP_COUNT_ = 79,
};

/* Functions of NEURON_OP_POINTWISE steps (6 bits). b: the second operand. */
enum neuron_pw_fn {
	NEURON_PW_END = 0,
	NEURON_PW_ADD = 1,        /* a + b */
	NEURON_PW_SUB = 2,        /* a - b */
	NEURON_PW_MUL = 3,        /* a * b */
	NEURON_PW_DIV = 4,        /* a / b */
	NEURON_PW_MAXIMUM = 5,    /* NaN propagates */
	NEURON_PW_MINIMUM = 6,
	NEURON_PW_POW = 7,        /* a ^ b */
	NEURON_PW_RELU = 8,
	NEURON_PW_GELU = 9,       /* erf form */
	NEURON_PW_GELU_TANH = 10,
	NEURON_PW_SILU = 11,
	NEURON_PW_TANH = 12,
	NEURON_PW_EXP = 13,
	NEURON_PW_LOG = 14,
	NEURON_PW_SQRT = 15,
	NEURON_PW_RSQRT = 16,
	NEURON_PW_ABS = 17,
	NEURON_PW_SIGMOID = 18,
	NEURON_PW_ERF = 19,
	NEURON_PW_RECIPROCAL = 20,
	NEURON_PW_NEG = 21,
	NEURON_PW_THRESHOLD_BACKWARD = 22, /* b > 0 ? a : 0 (relu's backward) */
	NEURON_PW_GELU_BACKWARD = 23,      /* a * gelu'(b), erf form */
	NEURON_PW_FN_COUNT_ = 24,
};
/* The step functions that read operand b; the others take b = 0. */
#define NEURON_PW_FN_IS_BINARY(fn)                                                                      \
	(((fn) >= NEURON_PW_ADD && (fn) <= NEURON_PW_POW) || (fn) == NEURON_PW_THRESHOLD_BACKWARD || \
	 (fn) == NEURON_PW_GELU_BACKWARD)
#define NEURON_PW_MAX_STEPS 16
#define NEURON_PW_MAX_INPUTS 5
#define NEURON_PW_VALUE_STEP0 5
#define NEURON_PW_VALUE_CONST0 21

/* Activations of NEURON_OP_MATMUL_EPILOGUE (i[0]). */
enum neuron_epilogue_act {
	NEURON_ACT_NONE = 0,
	NEURON_ACT_RELU = 1,
	NEURON_ACT_GELU = 2,      /* erf form */
	NEURON_ACT_GELU_TANH = 3,
	NEURON_ACT_SILU = 4,
	NEURON_ACT_TANH = 5,
	NEURON_ACT_COUNT_ = 6,
};
/* i[1] of NEURON_OP_MATMUL_EPILOGUE: set by the chip's tiling only. */
#define NEURON_EPILOGUE_NO_BIAS 1
#define NEURON_EPILOGUE_NO_ACT 2

/* Distributions of NEURON_OP_RNG (i[0]). */
enum neuron_rng_dist {
	NEURON_RNG_UNIFORM = 0,
	NEURON_RNG_NORMAL = 1,
	NEURON_RNG_BERNOULLI = 2,
	NEURON_RNG_INTEGER = 3,
	NEURON_RNG_DIST_COUNT_ = 4,
};

/* Functions of NEURON_OP_SCAN (i[1]). */
enum neuron_scan_fn {
	NEURON_SCAN_SUM = 0,
	NEURON_SCAN_PROD = 1,
	NEURON_SCAN_MAX = 2,
	NEURON_SCAN_MIN = 3,
	NEURON_SCAN_LOGSUMEXP = 4,
	NEURON_SCAN_COUNT_ = 5,
};

/* Flags of NEURON_OP_ATTENTION (i[0]). */
#define NEURON_ATTENTION_CAUSAL 1

/* Flags of NEURON_OP_TRIANGULAR_SOLVE (i[0]). */
enum neuron_trsm_flags {
	NEURON_TRSM_UPPER = 1,
	NEURON_TRSM_LEFT = 2,
	NEURON_TRSM_UNIT = 4,
	NEURON_TRSM_TRANSPOSE = 8,
};

/*
 * ISA 1.4: i[1] of INDEX_ADD and SCATTER_ADD chooses how src combines into out
 * (0, SUM, is the ISA 1.1 add); AMAX/AMIN propagate NaN. Integer outputs combine
 * in double, as the adds do.
 */
enum neuron_index_reduce {
	NEURON_INDEX_REDUCE_SUM = 0,
	NEURON_INDEX_REDUCE_PROD = 1,
	NEURON_INDEX_REDUCE_AMAX = 2,
	NEURON_INDEX_REDUCE_AMIN = 3,
	NEURON_INDEX_REDUCE_COUNT_ = 4,
};

/* i[1] of NEURON_OP_SUM / MEAN / AMAX (ISA 1.3). */
#define NEURON_REDUCE_ACCUMULATE 1
/* LAYER_NORM_PARAM_GRAD, i[1]: add to dw and db (ISA 1.8). */
#define NEURON_LN_ACCUMULATE 1

/* Flags of NEURON_OP_ADAM_STEP (i[0]). */
enum neuron_adam_flags {
	NEURON_ADAM_DECOUPLED = 1, /* AdamW */
	NEURON_ADAM_MAXIMIZE = 2,
};

/* Functions of NEURON_OP_UNARY_MATH (i[0]). */
enum neuron_unary_fn {
	NEURON_UNARY_LOG = 0,
	NEURON_UNARY_SQRT = 1,
	NEURON_UNARY_RSQRT = 2,
	NEURON_UNARY_ABS = 3,
	NEURON_UNARY_SIGMOID = 4,
	NEURON_UNARY_ERF = 5,
	NEURON_UNARY_RECIPROCAL = 6,
	NEURON_UNARY_POW = 7,
	NEURON_UNARY_CLAMP = 8,
	NEURON_UNARY_NEG = 9,
	/* ISA 1.4. ROUND is half-to-even (torch.round); SIGN gives 0 for NaN and
	 * +-0 (torch.sign). Scalars: LEAKY_RELU f[0] the negative slope;
	 * SOFTPLUS f[0] beta, f[1] threshold (x * beta above it is returned as x);
	 * ELU f[0] alpha, f[1] scale, f[2] input scale (scale * (x > 0 ? x :
	 * alpha * (exp(x * input_scale) - 1)); selu and celu are ELUs); LOGIT
	 * clamps x to [f[0], 1 - f[0]] first if i[1] = 1; ROUND_DECIMALS with
	 * f[0] = 10^|decimals| rounds x * f[0] half-to-even and divides by f[0], or
	 * (i[1] = 1, negative decimals) rounds x / f[0] and multiplies by f[0]. */
	NEURON_UNARY_SIN = 10,
	NEURON_UNARY_COS = 11,
	NEURON_UNARY_TAN = 12,
	NEURON_UNARY_ASIN = 13,
	NEURON_UNARY_ACOS = 14,
	NEURON_UNARY_ATAN = 15,
	NEURON_UNARY_SINH = 16,
	NEURON_UNARY_COSH = 17,
	NEURON_UNARY_ASINH = 18,
	NEURON_UNARY_ACOSH = 19,
	NEURON_UNARY_ATANH = 20,
	NEURON_UNARY_LOG1P = 21,
	NEURON_UNARY_EXPM1 = 22,
	NEURON_UNARY_LOG2 = 23,
	NEURON_UNARY_LOG10 = 24,
	NEURON_UNARY_EXP2 = 25,
	NEURON_UNARY_FLOOR = 26,
	NEURON_UNARY_CEIL = 27,
	NEURON_UNARY_ROUND = 28,
	NEURON_UNARY_TRUNC = 29,
	NEURON_UNARY_FRAC = 30,
	NEURON_UNARY_SIGN = 31,
	NEURON_UNARY_LGAMMA = 32,
	NEURON_UNARY_DIGAMMA = 33,
	NEURON_UNARY_ERFC = 34,
	NEURON_UNARY_ERFINV = 35,
	NEURON_UNARY_LEAKY_RELU = 36,
	NEURON_UNARY_SOFTPLUS = 37,
	NEURON_UNARY_ELU = 38,
	NEURON_UNARY_HARDSIGMOID = 39,
	NEURON_UNARY_HARDSWISH = 40,
	NEURON_UNARY_MISH = 41,
	NEURON_UNARY_LOGIT = 42,
	NEURON_UNARY_I0 = 43,
	NEURON_UNARY_ROUND_DECIMALS = 44,
	NEURON_UNARY_SINC = 45,
	/* Special functions (torch.special; Bessel functions of the first / second
	 * kind, modified, exponentially scaled; the normal distribution's CDF, its log
	 * and inverse; Airy Ai; entr = -x ln x). POLYGAMMA takes n in f[0] (an integer
	 * in [0, 1e6]). */
	NEURON_UNARY_BESSEL_J0 = 46,
	NEURON_UNARY_BESSEL_J1 = 47,
	NEURON_UNARY_BESSEL_Y0 = 48,
	NEURON_UNARY_BESSEL_Y1 = 49,
	NEURON_UNARY_MODIFIED_BESSEL_I1 = 50,
	NEURON_UNARY_MODIFIED_BESSEL_K0 = 51,
	NEURON_UNARY_MODIFIED_BESSEL_K1 = 52,
	NEURON_UNARY_SCALED_MODIFIED_BESSEL_K0 = 53,
	NEURON_UNARY_SCALED_MODIFIED_BESSEL_K1 = 54,
	NEURON_UNARY_SPHERICAL_BESSEL_J0 = 55,
	NEURON_UNARY_AIRY_AI = 56,
	NEURON_UNARY_ENTR = 57,
	NEURON_UNARY_ERFCX = 58,
	NEURON_UNARY_I0E = 59,
	NEURON_UNARY_I1E = 60,
	NEURON_UNARY_NDTR = 61,
	NEURON_UNARY_LOG_NDTR = 62,
	NEURON_UNARY_NDTRI = 63,
	NEURON_UNARY_POLYGAMMA = 64,
	NEURON_UNARY_COUNT_ = 65,
};

/* Functions of NEURON_OP_BINARY_MATH (i[0]). */
enum neuron_binary_fn {
	NEURON_BINARY_MAXIMUM = 0,
	NEURON_BINARY_MINIMUM = 1,
	NEURON_BINARY_POW = 2,
	NEURON_BINARY_GELU_BACKWARD = 3,
	NEURON_BINARY_THRESHOLD_BACKWARD = 4,
	/* ISA 1.4: out = f(a, b), floating, PyTorch's definitions (REMAINDER takes
	 * the divisor's sign, FMOD the dividend's; FLOOR_DIVIDE rounds the quotient
	 * down, these three also for integer outputs, exactly in int64, where a zero
	 * divisor faults the command; XLOGY is 0 where a is 0 unless b is NaN). The backward functions take
	 * a = the incoming gradient and b = the forward input x (ELU: the forward
	 * output when i[1] = 1), and the forward op's scalars: LEAKY_RELU f[0];
	 * SOFTPLUS f[0], f[1]; ELU f[0..2]; HARDTANH f[0] min, f[1] max (gradient
	 * passes strictly inside); LOGIT f[0] eps if i[1] = 1 (zero outside). */
	NEURON_BINARY_ATAN2 = 5,
	NEURON_BINARY_FMOD = 6,
	NEURON_BINARY_REMAINDER = 7,
	NEURON_BINARY_HYPOT = 8,
	NEURON_BINARY_COPYSIGN = 9,
	NEURON_BINARY_LOGADDEXP = 10,
	NEURON_BINARY_XLOGY = 11,
	NEURON_BINARY_NEXTAFTER = 12,
	NEURON_BINARY_FLOOR_DIVIDE = 13,
	NEURON_BINARY_LOGADDEXP2 = 14,
	NEURON_BINARY_LEAKY_RELU_BACKWARD = 15,
	NEURON_BINARY_SOFTPLUS_BACKWARD = 16,
	NEURON_BINARY_ELU_BACKWARD = 17,
	NEURON_BINARY_HARDTANH_BACKWARD = 18,
	NEURON_BINARY_HARDSIGMOID_BACKWARD = 19,
	NEURON_BINARY_HARDSWISH_BACKWARD = 20,
	NEURON_BINARY_MISH_BACKWARD = 21,
	NEURON_BINARY_LOGIT_BACKWARD = 22,
	/* Special functions of two tensors: x log1p(y); the Hurwitz zeta(x, q); the
	 * regularized incomplete gamma functions P(a, x) and Q(a, x); and the
	 * orthogonal polynomials of degree n = (int64) b at x = a (negative n gives 0),
	 * each as torch.special defines it. */
	NEURON_BINARY_XLOG1PY = 23,
	NEURON_BINARY_ZETA = 24,
	NEURON_BINARY_IGAMMA = 25,
	NEURON_BINARY_IGAMMAC = 26,
	NEURON_BINARY_CHEBYSHEV_T = 27,
	NEURON_BINARY_CHEBYSHEV_U = 28,
	NEURON_BINARY_CHEBYSHEV_V = 29,
	NEURON_BINARY_CHEBYSHEV_W = 30,
	NEURON_BINARY_SHIFTED_CHEBYSHEV_T = 31,
	NEURON_BINARY_SHIFTED_CHEBYSHEV_U = 32,
	NEURON_BINARY_SHIFTED_CHEBYSHEV_V = 33,
	NEURON_BINARY_SHIFTED_CHEBYSHEV_W = 34,
	NEURON_BINARY_HERMITE_H = 35,
	NEURON_BINARY_HERMITE_HE = 36,
	NEURON_BINARY_LAGUERRE_L = 37,
	NEURON_BINARY_LEGENDRE_P = 38,
	NEURON_BINARY_COUNT_ = 39,
};

/* Comparisons of NEURON_OP_COMPARE / COMPARE_SCALAR (i[0]). */
enum neuron_compare_fn {
	NEURON_CMP_EQ = 0,
	NEURON_CMP_NE = 1,
	NEURON_CMP_LT = 2,
	NEURON_CMP_LE = 3,
	NEURON_CMP_GT = 4,
	NEURON_CMP_GE = 5,
	NEURON_CMP_COUNT_ = 6,
};

/* Where a tensor descriptor's address points. */
enum neuron_mem_space {
	NEURON_MEM_DEVICE = 0, /* addr is a byte address in the queue's device HBM */
	NEURON_MEM_HOST = 1,   /* addr is a byte offset into host buffer `host_buffer` */
	/* Only in the nodes of a program (<neuron/program.h>): addr is a byte
	 * offset into argument `host_buffer` (bound by each EXEC_PROGRAM) or into
	 * the program's own buffer `host_buffer` (allocated by neurond). */
	NEURON_MEM_PROGRAM_ARG = 2,
	NEURON_MEM_PROGRAM_BUFFER = 3,
};

struct neuron_tensor_desc {
	uint64_t addr;          /* byte address (device) or byte offset (host buffer) */
	uint32_t host_buffer;   /* host buffer handle when mem_space is HOST, else 0 */
	uint8_t mem_space;      /* enum neuron_mem_space */
	uint8_t dtype;          /* enum neuron_dtype */
	uint8_t ndim;           /* 0..NEURON_MAX_DIMS; 0 is a scalar (one element) */
	uint8_t reserved;       /* must be zero */
	int64_t sizes[NEURON_MAX_DIMS];   /* >= 0; entries past ndim must be zero */
	int64_t strides[NEURON_MAX_DIMS]; /* in elements, >= 0; past ndim zero */
};

/*
 * Cross-queue dependency: the command does not start before queue `queue_id`
 * (a queue of the same tenant) has completed `value` commands. queue_id 0 = none.
 */
struct neuron_wait {
	uint64_t queue_id;
	uint64_t value;
};

struct neuron_cmd {
	uint16_t opcode;        /* enum neuron_opcode */
	uint8_t num_operands;   /* must equal the opcode's arity */
	uint8_t flags;          /* NEURON_CMD_F_* (EXEC_PROGRAM: its own, program.h) */
	uint32_t reserved0;     /* must be zero */
	uint64_t user_tag;      /* opaque to the device; echoed in fault reports */
	struct neuron_wait wait;
	union {
		double f[NEURON_MAX_SCALARS];
		uint64_t bits[NEURON_MAX_SCALARS];
	} fscalars;
	int64_t iscalars[NEURON_MAX_SCALARS];
	struct neuron_tensor_desc operands[NEURON_MAX_OPERANDS];
};

/*
 * ISA 1.7: flags of a ring command (every opcode but EXEC_PROGRAM, whose flags
 * are program.h's; never in a program's nodes).
 *
 * NEURON_CMD_F_STAMP: the chip records when the command ran, without a command
 * of its own (a profiler's per-command device times; TIMESTAMP pairs around
 * each command doubled the commands a traced program ran). The LAST operand,
 * operands[num_operands - 1], is then the stamp, not one of the op's: an i64
 * tensor of 2 contiguous elements (ndim 1, size 2, stride 1) in device memory,
 * disjoint from the command's other operands; num_operands is the op's arity
 * plus one (an op of NEURON_MAX_OPERANDS operands cannot carry it). The engine
 * writes there the device clock (TIMESTAMP's) when the command starts (in queue
 * order: every earlier command of the queue completed and its wait satisfied)
 * and when its last tile ended, before its completion is published. A command
 * that faults leaves the stamp unwritten. Offered where the queue's ring says
 * NEURON_RING_F_CMD_STAMP (<neuron/ring.h>).
 */
#define NEURON_CMD_F_STAMP 0x1u

/* Longest fault reason a queue reports, NUL included. */
#define NEURON_FAULT_REASON_LEN 256

enum neuron_fault_code {
	NEURON_FAULT_NONE = 0,
	NEURON_FAULT_BAD_OPCODE = 1,
	NEURON_FAULT_BAD_OPERAND = 2,   /* dtype, shape, arity, reserved fields */
	NEURON_FAULT_OUT_OF_BOUNDS = 3, /* operand outside the tenant's memory */
	NEURON_FAULT_OVERLAP = 4,       /* output overlaps an input or itself */
	NEURON_FAULT_BAD_WAIT = 5,      /* wait on an unknown queue */
	NEURON_FAULT_RING = 6,          /* ring protocol violated (tail too far) */
	NEURON_FAULT_EXEC = 7,          /* the engine failed executing the command */
	NEURON_FAULT_RESET = 8,         /* the core was reset (watchdog) */
};

#ifdef __cplusplus
}

static_assert(sizeof(neuron_tensor_desc) == 144, "tensor descriptor layout");
static_assert(sizeof(neuron_cmd) == 8 + 8 + 16 + 32 + 32 + 6 * 144, "command layout");
static_assert(sizeof(neuron_cmd) <= NEURON_CMD_SLOT_SIZE, "command fits a slot");
#endif

#endif /* NEURON_CMD_H */
