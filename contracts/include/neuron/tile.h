/* SPDX-License-Identifier: MIT */
/*
 * Tile programs: kernels over a NeuronCore's on-chip memory, as data (version 1.1; 1.1
 * added ACTIVATION_REDUCE, the wire form is unchanged).
 *
 * A tile program is what a kernel written in a tile language (torch_neuron.kernels,
 * NKI-style) becomes once traced: a list of fixed-size instructions over tiles of
 * the core's state buffer (SBUF) and accumulation buffer (PSUM) and over the
 * kernel's HBM arguments, with loops of static trip counts. No Python and no native
 * code: neurond validates the whole program once (every access inside its buffer
 * or argument for every loop iteration, the partition and matmul limits of the
 * chip profile, bounded work) and then interprets it on the simulated engines.
 *
 * Memories (the chip profile gives the sizes; runtime/chip/profile.h):
 *   SBUF: 128 partitions x sbuf_partition_bytes; PSUM: 128 partitions x 16 KiB in
 *   8 banks of 2 KiB. On-chip operands are 2-D and up: dim 0 is the partition dim
 *   (`partition` is its first partition, size <= 128, one partition per index:
 *   partition strides are not allowed), the other dims address bytes inside each
 *   partition from `offset` (bytes) with element strides. HBM operands address
 *   elements of kernel argument `arg` from `offset` (elements) with element strides.
 *
 * Loops: LOOP_BEGIN (i[0] = trip count >= 1) .. LOOP_END, nested at most
 *   NEURON_TILE_MAX_LOOPS deep. Loop l's induction variable iv[l] (l = 0 the
 *   outermost open loop) runs 0 .. trip-1. Offsets, iota bases and mask starts are
 *   affine in the open loops' variables: base + sum_l step[l] * iv[l] (steps of loops
 *   not open at the instruction must be zero). A kernel is preemptible at every loop
 *   iteration boundary (its on-chip state is kept for it meanwhile).
 *
 * Masks: an instruction may restrict the iteration space (the shape of its operand
 *   0; of operand 1 for REDUCE) along up to two dims: index i along `dim` is active
 *   iff start + i < limit (NKI's `mask=`), so the active region is a box from the
 *   tile's origin. Inactive elements of the destination are left untouched (for
 *   REDUCE: inactive inputs are not reduced). MATMUL and TRANSPOSE take no mask.
 *
 * Arithmetic: the vector and scalar engines compute in f32 whatever the tile
 * dtypes (as the hardware); the tensor engine multiplies bf16/f16/f32 operands and
 * accumulates in f32 in PSUM.
 *
 * Wire form: struct neuron_tile_program_header, then num_args uint64_t argument
 * sizes in bytes, then num_insns struct neuron_tile_insn. Little-endian.
 */
#ifndef NEURON_TILE_H
#define NEURON_TILE_H

#include <neuron/cmd.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NEURON_TILE_MAGIC 0x4c49544eu /* "NTIL" */
#define NEURON_TILE_VERSION 1

#define NEURON_TILE_MAX_DIMS 4      /* dims of an operand (on chip: partition + 3 free) */
#define NEURON_TILE_MAX_LOOPS 4     /* loop nesting depth */
#define NEURON_TILE_MAX_OPERANDS 4
#define NEURON_TILE_MAX_MASKS 2
#define NEURON_TILE_MAX_ARGS NEURON_MAX_OPERANDS /* HBM arguments of one kernel */
#define NEURON_TILE_MAX_INSNS 65536
#define NEURON_TILE_MAX_TRIP (1 << 20) /* trip count of one loop */
/* Work (elements touched, multiply-adds for MATMUL) of the whole kernel, and of the
 * instructions between two loop-iteration boundaries (the longest the core cannot
 * switch tenants): a kernel past either is refused. */
#define NEURON_TILE_MAX_WORK (1ull << 42)
#define NEURON_TILE_MAX_STEP_WORK (1ull << 30)

enum neuron_tile_space {
	NEURON_TILE_NONE = 0,
	NEURON_TILE_HBM = 1,  /* a kernel argument */
	NEURON_TILE_SBUF = 2,
	NEURON_TILE_PSUM = 3,
};

enum neuron_tile_op {
	NEURON_TILE_OP_INVALID = 0,
	/* i[0] = trip count; flags NEURON_TILE_SEQUENTIAL marks a loop-carried
	 * dependency (affine_range vs sequential_range; both run in order here). */
	NEURON_TILE_OP_LOOP_BEGIN = 1,
	NEURON_TILE_OP_LOOP_END = 2,
	/* DMA (out, in): HBM -> SBUF, SBUF -> HBM or SBUF -> SBUF; one dtype, one shape.
	 * The DMA engines never read or write PSUM (copy it to SBUF first). */
	NEURON_TILE_OP_DMA = 3,
	/* MATMUL (out, stationary, moving), tensor engine: out[M, N] (PSUM, f32)
	 * (+)= stationary[K, M]^T @ moving[K, N]. stationary and moving in SBUF, one dtype
	 * (bf16, f16 or f32), K on the partitions (<= 128), M <= 128, N <= the profile's
	 * moving limit; out inside one PSUM bank (unless N needs more: trn3). flags
	 * NEURON_TILE_ACCUMULATE adds into out, else out is overwritten. 2-D operands. */
	NEURON_TILE_OP_MATMUL = 4,
	/* TRANSPOSE (out, in), tensor engine: out[F, P] (PSUM, f32) = in[P, F] (SBUF)^T;
	 * P, F <= 128. 2-D operands. */
	NEURON_TILE_OP_TRANSPOSE = 5,
	/* TENSOR_COPY (out, in): SBUF/PSUM -> SBUF/PSUM with a dtype cast. */
	NEURON_TILE_OP_TENSOR_COPY = 6,
	/* ACTIVATION (out, in [, bias]), scalar engine: out = fn(in * f[0] + bias + f[1]),
	 * fn a unary enum neuron_pw_fn or 0 (identity); bias [P, 1] per partition
	 * (broadcast along the free dims) or absent. */
	NEURON_TILE_OP_ACTIVATION = 7,
	/* TENSOR_TENSOR (out, a, b), vector engine: out = fn(a, b), fn a binary
	 * enum neuron_pw_fn. b may broadcast a [P, 1] tile along the free dims. */
	NEURON_TILE_OP_TENSOR_TENSOR = 8,
	/* TENSOR_SCALAR (out, a): out = fn(a, f[0]) (binary enum neuron_pw_fn);
	 * flags NEURON_TILE_REVERSE: fn(f[0], a). */
	NEURON_TILE_OP_TENSOR_SCALAR = 9,
	/* COMPARE (out, a [, b]): out = (a cmp b) ? 1 : 0, cmp an enum neuron_compare_fn;
	 * without b, compares with f[0]. b may broadcast [P, 1]. */
	NEURON_TILE_OP_COMPARE = 10,
	/* SELECT (out, cond, a [, b]): out = cond != 0 ? a : b (f[0] without b). */
	NEURON_TILE_OP_SELECT = 11,
	/* REDUCE (out, in): out[P, 1...] = reduce over every free dim of in[P, ...];
	 * fn NEURON_PW_ADD (sum), NEURON_PW_MAXIMUM or NEURON_PW_MINIMUM. flags
	 * NEURON_TILE_ACCUMULATE combines with out's old value. */
	NEURON_TILE_OP_REDUCE = 12,
	/* IOTA (out): out[p, a, b, c] = base + i[0] * p + i[1] * a + i[2] * b + i[3] * c
	 * (base: the instruction's affine `base`, so a tile's global index is easy). */
	NEURON_TILE_OP_IOTA = 13,
	/* MEMSET (out): out = f[0]. */
	NEURON_TILE_OP_MEMSET = 14,
	/* ACTIVATION_REDUCE (out, sum, in [, bias]), scalar engine (1.1): out as ACTIVATION
	 * (out, in [, bias]) and sum[P, 1...] = the sum over every free dim of the active
	 * results, as computed in f32 (before out's cast); partitions outside the mask keep
	 * their sum. sum: out's partitions, 1 along every free dim, sharing no byte with
	 * another operand. NKI's activation_reduce: an online softmax's exp and row sum in
	 * one pass over the tile. */
	NEURON_TILE_OP_ACTIVATION_REDUCE = 15,
	NEURON_TILE_OP_COUNT_ = 16,
};

/* flags */
#define NEURON_TILE_ACCUMULATE 1 /* MATMUL, REDUCE */
#define NEURON_TILE_REVERSE 2    /* TENSOR_SCALAR */
#define NEURON_TILE_SEQUENTIAL 4 /* LOOP_BEGIN */

/* base + sum over open loops l of step[l] * iv[l] */
struct neuron_tile_affine {
	int64_t base;
	int64_t step[NEURON_TILE_MAX_LOOPS];
};

struct neuron_tile_mask {
	struct neuron_tile_affine start; /* index i along dim is active iff start + i < limit */
	int64_t limit;
	uint8_t enabled; /* 0: no mask (every other field zero) */
	uint8_t dim;     /* dim of the iteration space */
	uint8_t reserved[6];
};

struct neuron_tile_ap {
	uint8_t space;      /* enum neuron_tile_space */
	uint8_t dtype;      /* NEURON_DTYPE_F32, BF16, F16 or I32 */
	uint8_t ndim;       /* 1..NEURON_TILE_MAX_DIMS; on chip >= 2 */
	uint8_t reserved0;
	uint32_t arg;       /* HBM: the kernel argument; on chip 0 */
	uint32_t partition; /* on chip: the first partition; HBM 0 */
	uint32_t reserved1;
	struct neuron_tile_affine offset; /* HBM: elements; on chip: bytes inside a partition */
	int64_t sizes[NEURON_TILE_MAX_DIMS];   /* >= 1 up to ndim, zero past it */
	int64_t strides[NEURON_TILE_MAX_DIMS]; /* elements, >= 0; on chip strides[0] = 1 (partitions) */
};

struct neuron_tile_insn {
	uint16_t op;          /* enum neuron_tile_op */
	uint8_t num_operands;
	uint8_t flags;
	uint32_t fn;          /* enum neuron_pw_fn or neuron_compare_fn, per op */
	uint32_t line;        /* the kernel's source line it came from (errors name it), 0 if none */
	uint32_t reserved;    /* must be zero */
	double f[2];
	int64_t i[4];
	struct neuron_tile_affine base; /* IOTA's start value; zero elsewhere */
	struct neuron_tile_mask masks[NEURON_TILE_MAX_MASKS];
	struct neuron_tile_ap operands[NEURON_TILE_MAX_OPERANDS];
};

struct neuron_tile_program_header {
	uint32_t magic;     /* NEURON_TILE_MAGIC */
	uint16_t version;   /* NEURON_TILE_VERSION */
	uint16_t num_args;  /* <= NEURON_TILE_MAX_ARGS */
	uint32_t num_insns; /* 1..NEURON_TILE_MAX_INSNS */
	uint32_t reserved;  /* must be zero */
};

#ifdef __cplusplus
}

static_assert(sizeof(neuron_tile_affine) == 40, "affine layout");
static_assert(sizeof(neuron_tile_mask) == 56, "mask layout");
static_assert(sizeof(neuron_tile_ap) == 120, "access pattern layout");
static_assert(sizeof(neuron_tile_insn) == 16 + 16 + 32 + 40 + 2 * 56 + 4 * 120, "instruction layout");
static_assert(sizeof(neuron_tile_program_header) == 16, "header layout");
#endif

#endif /* NEURON_TILE_H */
