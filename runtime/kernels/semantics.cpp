// check_semantics(): everything about a command that can be decided from the
// command alone (no memory ownership). The chip runs it on its private copy of a
// slot before resolving addresses, so execute() can trust shapes, dtypes and
// scalars. Every rejection names the operand, the field and what was expected.
#include "semantics_checks.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace neuron::kernels {

namespace semantics {

namespace {

// Indexed by opcode, ISA 1.0-1.3 (opcodes 0..35).
const OpInfo kOps[] = {
	{"invalid", -1, {}},
	{"nop", 0, {}},
	{"fill", 1, {"out"}},
	{"copy", 2, {"out", "in"}},
	{"add", 3, {"out", "a", "b"}},
	{"sub", 3, {"out", "a", "b"}},
	{"mul", 3, {"out", "a", "b"}},
	{"div", 3, {"out", "a", "b"}},
	{"add_scalar", 2, {"out", "a"}},
	{"sub_scalar", 2, {"out", "a"}},
	{"mul_scalar", 2, {"out", "a"}},
	{"div_scalar", 2, {"out", "a"}},
	{"matmul", 3, {"out", "a", "b"}},
	{"sum", 2, {"out", "in"}},
	{"mean", 2, {"out", "in"}},
	{"amax", 2, {"out", "in"}},
	{"relu", 2, {"out", "in"}},
	{"gelu", 2, {"out", "in"}},
	{"silu", 2, {"out", "in"}},
	{"tanh", 2, {"out", "in"}},
	{"exp", 2, {"out", "in"}},
	{"softmax", 2, {"out", "in"}},
	// ISA 1.1
	{"unary_math", 2, {"out", "in"}},
	{"binary_math", 3, {"out", "a", "b"}},
	{"compare", 3, {"out", "a", "b"}},
	{"compare_scalar", 2, {"out", "a"}},
	{"where", 4, {"out", "cond", "a", "b"}},
	{"log_softmax", 2, {"out", "in"}},
	{"index_select", 3, {"out", "in", "index"}},
	{"index_add", 3, {"out", "index", "src"}},
	{"gather", 3, {"out", "in", "index"}},
	{"scatter_add", 3, {"out", "index", "src"}},
	// ISA 1.2
	{"adam_step", 5, {"param", "exp_avg", "exp_avg_sq", "grad", "step"}},
	{"arg_reduce", 2, {"out", "in"}},
	// ISA 1.3
	{"index_copy", 3, {"out", "index", "src"}},
	{"scatter", 3, {"out", "index", "src"}},
	// ISA 1.4
	{"scan", 3, {"out", "in", "init"}},
	{"sort", 3, {"values", "indices", "in"}},
	{"attention", 6, {"out", "lse", "q", "k", "v", "mask"}},
	{"lu", 4, {"lu", "pivots", "info", "a"}},
	{"permutation", 2, {"perm", "pivots"}},
	{"cholesky", 3, {"l", "info", "a"}},
	{"triangular_solve", 3, {"x", "a", "b"}},
	{"geqrf", 3, {"packed", "tau", "a"}},
	{"orgqr", 3, {"q", "packed", "tau"}},
	{"eigh", 3, {"w", "v", "a"}},
	{"svd", 4, {"u", "s", "vh", "a"}},
};
static_assert(std::size(kOps) == NEURON_OP_SVD + 1, "one kOps entry per opcode of 1..35 and block 36..63");

// The scalars each function of UNARY_MATH / BINARY_MATH reads (bit k of f: f[k];
// of i: i[k]; i[0] is the function itself). Indexed by the function.
struct FnScalars {
	unsigned f, i;
};
constexpr FnScalars kUnaryScalars[NEURON_UNARY_COUNT_] = {
	{0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, // log .. reciprocal
	{0x1, 0x1},                                             // pow: f[0] exponent
	{0x3, 0x3},                                             // clamp (checked apart)
	{0, 1},                                                 // neg
	// ISA 1.4: sin .. erfinv take no scalars
	{0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1},
	{0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1},
	{0x1, 0x1},             // leaky_relu: slope
	{0x3, 0x1},             // softplus: beta, threshold
	{0x7, 0x1},             // elu: alpha, scale, input scale
	{0, 1}, {0, 1}, {0, 1}, // hardsigmoid, hardswish, mish
	{0x1, 0x3},             // logit (checked apart)
	{0, 1},                 // i0
	{0x1, 0x3},             // round_decimals
	{0, 1},                 // sinc
	// special functions: bessel_j0 .. ndtri take no scalars
	{0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1},
	{0, 1}, {0, 1}, {0, 1}, {0, 1},
	{0x1, 0x1}, // polygamma: n
};
constexpr FnScalars kBinaryScalars[NEURON_BINARY_COUNT_] = {
	{0, 1}, {0, 1}, {0, 1}, // maximum, minimum, pow
	{0, 0x3},               // gelu_backward: i[1] form
	{0x1, 0x1},             // threshold_backward: f[0]
	// ISA 1.4: atan2 .. logaddexp2 take no scalars
	{0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1},
	{0x1, 0x1}, // leaky_relu_backward
	{0x3, 0x1}, // softplus_backward
	{0x7, 0x3}, // elu_backward (+ i[1] is_result)
	{0x3, 0x1}, // hardtanh_backward
	{0, 1}, {0, 1}, {0, 1}, // hardsigmoid, hardswish, mish backward
	{0x1, 0x3},             // logit_backward (checked apart)
	// special functions of two tensors: no scalars
	{0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1},
	{0, 1}, {0, 1},
};
// Aggregate initialisation zero-fills missing entries: the last ones must be there.
static_assert(kUnaryScalars[NEURON_UNARY_SINC].i == 1 && kUnaryScalars[NEURON_UNARY_ROUND_DECIMALS].i == 3 &&
	      kUnaryScalars[NEURON_UNARY_NDTRI].i == 1 && kUnaryScalars[NEURON_UNARY_POLYGAMMA].f == 1);
static_assert(kBinaryScalars[NEURON_BINARY_LOGIT_BACKWARD].i == 3 && kBinaryScalars[NEURON_BINARY_LEGENDRE_P].i == 1);

// ISA 1.4, the block from opcode 64 (cmd.h).
constexpr uint16_t kIsa14First = NEURON_OP_RNG;
const OpInfo kIsa14Ops[] = {
	{"rng", 1, {"out"}},
	{"dropout", 3, {"out", "mask", "in"}},
	{"randperm", 1, {"out"}},
	{"multinomial", 2, {"out", "probs"}},
	{"timestamp", 1, {"out"}},
	{"amp_unscale", 3, {"grad", "found_inf", "inv_scale"}},
	{"amp_update_scale", 3, {"scale", "growth_tracker", "found_inf"}},
};
static_assert(kIsa14First + std::size(kIsa14Ops) == NEURON_OP_AMP_UPDATE_SCALE + 1, "one entry per ISA 1.4 opcode");

// ISA 1.5, the block from opcode 72 (cmd.h): programs and fused ops.
constexpr uint16_t kIsa15First = NEURON_OP_EXEC_PROGRAM;
const OpInfo kIsa15Ops[] = {
	{"exec_program", 0, {}},
	{"pointwise", 6, {"out", "in1", "in2", "in3", "in4", "in5"}, true},
	{"matmul_epilogue", 4, {"out", "a", "b", "bias"}},
	{"tile_kernel", 6, {"arg0", "arg1", "arg2", "arg3", "arg4", "arg5"}, true},
	// ISA 1.8 (variadic: weight and bias may be left out; the least is checked apart)
	{"layer_norm", 6, {"out", "mean", "rstd", "in", "weight", "bias"}, true},
	{"layer_norm_backward", 6, {"dx", "go", "in", "mean", "rstd", "weight"}, true},
	{"layer_norm_param_grad", 6, {"dw", "db", "go", "in", "mean", "rstd"}},
};
static_assert(kIsa15First + std::size(kIsa15Ops) == NEURON_OP_COUNT_, "one entry per ISA 1.5..1.8 opcode");

} // namespace

const OpInfo *op_info(uint16_t opcode)
{
	if (opcode > NEURON_OP_INVALID && opcode < std::size(kOps))
		return &kOps[opcode];
	if (opcode >= kIsa14First && opcode < kIsa14First + std::size(kIsa14Ops))
		return &kIsa14Ops[opcode - kIsa14First];
	if (opcode >= kIsa15First && opcode < kIsa15First + std::size(kIsa15Ops))
		return &kIsa15Ops[opcode - kIsa15First];
	return nullptr;
}

namespace {

struct Checker : CheckBase {
	std::optional<Fault> elementwise() const
	{
		const uint8_t odt = d(0).dtype;
		const bool fl = is_floating(odt);
		const uint16_t opc = cmd.opcode;
		std::optional<Fault> f;
		switch (opc) {
		case NEURON_OP_SUB:
		case NEURON_OP_SUB_SCALAR:
			f = dtype_is(0, odt != NEURON_DTYPE_BOOL, "any dtype but bool (as in PyTorch)");
			break;
		case NEURON_OP_DIV:
		case NEURON_OP_DIV_SCALAR:
			f = dtype_is(0, fl, "f32, bf16 or f16: true division needs a floating output");
			break;
		case NEURON_OP_RELU:
			f = dtype_is(0, odt != NEURON_DTYPE_BOOL, "a floating or integer dtype");
			break;
		case NEURON_OP_GELU:
		case NEURON_OP_SILU:
		case NEURON_OP_TANH:
		case NEURON_OP_EXP:
			f = dtype_is(0, fl, "f32, bf16 or f16");
			break;
		default:
			break;
		}
		if (f)
			return f;
		for (int k = 1; k < op.arity; ++k)
			if ((f = same_shape(k)))
				return f;
		// Scalars.
		if (opc == NEURON_OP_ADD || opc == NEURON_OP_SUB) {
			const double alpha = cmd.fscalars.f[0];
			// Integer outputs compute in int64, so alpha must be an int64 value.
			const bool integral = alpha >= -9223372036854775808.0 && alpha < 9223372036854775808.0 &&
					      std::trunc(alpha) == alpha;
			if (!fl && !integral)
				return bad(fmt("scalars f[0]=%g (alpha) must be an integer for %s output", alpha,
					       dtype_name(odt)));
			return unused_scalars(0x1, 0x0);
		}
		if (opc >= NEURON_OP_ADD_SCALAR && opc <= NEURON_OP_DIV_SCALAR) {
			if (cmd.iscalars[0] != 0 && cmd.iscalars[0] != 1)
				return bad(fmt("scalars i[0]=%" PRId64 " (reverse) must be 0 or 1", cmd.iscalars[0]));
			// The scalar is f[0] for floating outputs, i[1] for integer outputs.
			return fl ? unused_scalars(0x1, 0x1) : unused_scalars(0x0, 0x3);
		}
		if (opc == NEURON_OP_GELU) {
			if (cmd.iscalars[0] != 0 && cmd.iscalars[0] != 1)
				return bad(fmt("scalars i[0]=%" PRId64 " must be 0 (erf) or 1 (tanh)", cmd.iscalars[0]));
			return unused_scalars(0x0, 0x1);
		}
		return unused_scalars(0x0, 0x0);
	}

	std::optional<Fault> matmul() const
	{
		if (auto f = matmul_shapes())
			return f;
		return unused_scalars(0x3, 0x0);
	}

	// MATMUL's operands (0..2) as MATMUL_EPILOGUE shares them; then its bias and
	// activation (semantics_isa15.cpp).
	std::optional<Fault> matmul_epilogue() const
	{
		if (auto f = matmul_shapes())
			return f;
		return check_epilogue_extras(*this);
	}

	std::optional<Fault> matmul_shapes() const
	{
		const neuron_tensor_desc &o = d(0), &a = d(1), &b = d(2);
		std::optional<Fault> f;
		if ((f = dtype_is(0, is_floating(o.dtype), "f32, bf16 or f16")))
			return f;
		for (int k = 1; k < 3; ++k)
			if (d(k).dtype != o.dtype)
				return bad(who(k) + fmt(": dtype %s does not match out dtype %s (matmul takes one dtype)",
							dtype_name(d(k).dtype), dtype_name(o.dtype)));
		if (o.ndim != 2 && o.ndim != 3)
			return bad(who(0) + fmt(": ndim=%u, matmul takes 2 (matmul) or 3 (batched)", o.ndim));
		for (int k = 1; k < 3; ++k)
			if (d(k).ndim != o.ndim)
				return bad(who(k) + fmt(": ndim=%u does not match out ndim=%u", d(k).ndim, o.ndim));
		const int m = o.ndim - 2; // index of the M dim
		if (o.ndim == 3)
			for (int k = 1; k < 3; ++k)
				if (d(k).sizes[0] != o.sizes[0])
					return bad(who(k) + fmt(": sizes[0]=%" PRId64 " (batch) does not match out sizes[0]=%" PRId64
								" (broadcast a batch with stride 0)",
								d(k).sizes[0], o.sizes[0]));
		if (a.sizes[m] != o.sizes[m])
			return bad(who(1) + fmt(": sizes[%d]=%" PRId64 " (M) does not match out sizes[%d]=%" PRId64, m,
						a.sizes[m], m, o.sizes[m]));
		if (b.sizes[m + 1] != o.sizes[m + 1])
			return bad(who(2) + fmt(": sizes[%d]=%" PRId64 " (N) does not match out sizes[%d]=%" PRId64, m + 1,
						b.sizes[m + 1], m + 1, o.sizes[m + 1]));
		if (b.sizes[m] != a.sizes[m + 1])
			return bad(who(2) + fmt(": sizes[%d]=%" PRId64 " (K) does not match a sizes[%d]=%" PRId64, m,
						b.sizes[m], m + 1, a.sizes[m + 1]));
		return std::nullopt;
	}

	std::optional<Fault> reduction() const
	{
		const neuron_tensor_desc &o = d(0), &in = d(1);
		std::optional<Fault> f;
		if (cmd.opcode == NEURON_OP_SUM)
			f = dtype_is(0, o.dtype != NEURON_DTYPE_BOOL, "any dtype but bool");
		else if (cmd.opcode == NEURON_OP_MEAN)
			f = dtype_is(0, is_floating(o.dtype), "f32, bf16 or f16");
		else if (in.dtype != o.dtype)
			f = bad(who(1) + fmt(": dtype %s does not match out dtype %s (amax keeps the dtype)",
					     dtype_name(in.dtype), dtype_name(o.dtype)));
		if (f)
			return f;
		const int64_t mask = cmd.iscalars[0];
		if (mask < 0 || (mask >> in.ndim) != 0)
			return bad(fmt("scalars i[0]=0x%" PRIx64 " (dim mask) names dims >= in ndim=%u",
				       static_cast<uint64_t>(mask), in.ndim));
		if (o.ndim != in.ndim)
			return bad(who(0) + fmt(": ndim=%u must equal in ndim=%u (keepdim)", o.ndim, in.ndim));
		bool reduces_empty = false, out_empty = false;
		for (int i = 0; i < in.ndim; ++i) {
			const bool red = (mask >> i) & 1;
			const int64_t want = red ? 1 : in.sizes[i];
			if (o.sizes[i] != want)
				return bad(who(0) + fmt(": sizes[%d]=%" PRId64 " should be %" PRId64 " (%s)", i, o.sizes[i], want,
							red ? "reduced dim, keepdim" : "in sizes"));
			reduces_empty = reduces_empty || (red && in.sizes[i] == 0);
			out_empty = out_empty || o.sizes[i] == 0;
		}
		if (cmd.opcode == NEURON_OP_AMAX && reduces_empty && !out_empty)
			return bad("amax over an empty dim has no identity (operand 1 (in) has a reduced dim of size 0)");
		if (cmd.iscalars[1] != 0 && cmd.iscalars[1] != NEURON_REDUCE_ACCUMULATE)
			return bad(fmt("scalars i[1]=%" PRId64 " (flags) must be 0 or %d (NEURON_REDUCE_ACCUMULATE)",
				       cmd.iscalars[1], NEURON_REDUCE_ACCUMULATE));
		if (cmd.iscalars[2] < 0)
			return bad(fmt("scalars i[2]=%" PRId64 " (mean divisor) must not be negative", cmd.iscalars[2]));
		return unused_scalars(0x0, cmd.opcode == NEURON_OP_MEAN ? 0x7 : 0x3);
	}

	std::optional<Fault> softmax() const
	{
		std::optional<Fault> f;
		if ((f = dtype_is(0, is_floating(d(0).dtype), "f32, bf16 or f16")) ||
		    (f = dtype_is(1, is_floating(d(1).dtype), "f32, bf16 or f16")) || (f = same_shape(1)))
			return f;
		const int64_t dim = cmd.iscalars[0];
		// A 0-d tensor has one implicit dim of size 1 (PyTorch accepts dim 0 there).
		if (dim < 0 || dim >= std::max<int64_t>(d(0).ndim, 1))
			return bad(fmt("scalars i[0]=%" PRId64 " (dim) must be in [0, %u)", dim,
				       std::max<unsigned>(d(0).ndim, 1)));
		return unused_scalars(0x0, 0x1);
	}

	// ---- ISA 1.1 ----

	// Flag scalar i[1] of a function: must be 0 or 1.
	std::optional<Fault> flag_i1(const char *what) const
	{
		if (cmd.iscalars[1] != 0 && cmd.iscalars[1] != 1)
			return bad(fmt("scalars i[1]=%" PRId64 " (%s) must be 0 or 1", cmd.iscalars[1], what));
		return std::nullopt;
	}

	std::optional<Fault> unary_math() const
	{
		std::optional<Fault> f;
		if ((f = selector(NEURON_UNARY_COUNT_, "unary function")) ||
		    (f = dtype_is(0, is_floating(d(0).dtype), "f32, bf16 or f16")) || (f = same_shape(1)))
			return f;
		const FnScalars &use = kUnaryScalars[cmd.iscalars[0]];
		switch (cmd.iscalars[0]) {
		case NEURON_UNARY_CLAMP:
			if (cmd.iscalars[1] < 0 || cmd.iscalars[1] > 3)
				return bad(fmt("scalars i[1]=%" PRId64 " (clamp bounds: bit 0 min, bit 1 max) must be 0..3",
					       cmd.iscalars[1]));
			return unused_scalars((cmd.iscalars[1] & 1 ? 0x1 : 0) | (cmd.iscalars[1] & 2 ? 0x2 : 0), 0x3);
		case NEURON_UNARY_LOGIT:
			if ((f = flag_i1("eps given")))
				return f;
			return unused_scalars(cmd.iscalars[1] ? 0x1 : 0x0, 0x3);
		case NEURON_UNARY_POLYGAMMA: {
			const double n = cmd.fscalars.f[0];
			if (!(n >= 0) || n > 1e6 || n != std::trunc(n))
				return bad(fmt("scalars f[0]=%g (n) must be an integer in [0, 1e6]", n));
			break;
		}
		case NEURON_UNARY_ROUND_DECIMALS:
			if ((f = flag_i1("negative decimals")))
				return f;
			if (!(cmd.fscalars.f[0] >= 1) || !std::isfinite(cmd.fscalars.f[0]))
				return bad(fmt("scalars f[0]=%g (10^|decimals|) must be finite and >= 1", cmd.fscalars.f[0]));
			break;
		default:
			break;
		}
		return unused_scalars(use.f, use.i);
	}

	std::optional<Fault> binary_math() const
	{
		std::optional<Fault> f;
		if ((f = selector(NEURON_BINARY_COUNT_, "binary function")) || (f = same_shape(1)) || (f = same_shape(2)))
			return f;
		const int64_t fn = cmd.iscalars[0];
		if (fn == NEURON_BINARY_MAXIMUM || fn == NEURON_BINARY_MINIMUM || fn == NEURON_BINARY_FMOD ||
		    fn == NEURON_BINARY_REMAINDER || fn == NEURON_BINARY_FLOOR_DIVIDE)
			f = dtype_is(0, d(0).dtype != NEURON_DTYPE_BOOL, "any dtype but bool");
		else
			f = dtype_is(0, is_floating(d(0).dtype), "f32, bf16 or f16");
		if (f)
			return f;
		if (fn == NEURON_BINARY_GELU_BACKWARD && cmd.iscalars[1] != 0 && cmd.iscalars[1] != 1)
			return bad(fmt("scalars i[1]=%" PRId64 " must be 0 (erf) or 1 (tanh)", cmd.iscalars[1]));
		if ((fn == NEURON_BINARY_ELU_BACKWARD || fn == NEURON_BINARY_LOGIT_BACKWARD) &&
		    (f = flag_i1(fn == NEURON_BINARY_ELU_BACKWARD ? "b is the result" : "eps given")))
			return f;
		const FnScalars &use = kBinaryScalars[fn];
		if (fn == NEURON_BINARY_LOGIT_BACKWARD)
			return unused_scalars(cmd.iscalars[1] ? 0x1 : 0x0, 0x3);
		return unused_scalars(use.f, use.i);
	}

	std::optional<Fault> compare() const
	{
		std::optional<Fault> f;
		if ((f = selector(NEURON_CMP_COUNT_, "comparison")) ||
		    (f = dtype_is(0, d(0).dtype == NEURON_DTYPE_BOOL, "bool")))
			return f;
		for (int k = 1; k < op.arity; ++k)
			if ((f = same_shape(k)))
				return f;
		return cmd.opcode == NEURON_OP_COMPARE_SCALAR ? unused_scalars(0x1, 0x1) : unused_scalars(0x0, 0x1);
	}

	std::optional<Fault> where() const
	{
		std::optional<Fault> f;
		if ((f = dtype_is(1, d(1).dtype == NEURON_DTYPE_BOOL, "bool")))
			return f;
		for (int k = 1; k < 4; ++k)
			if ((f = same_shape(k)))
				return f;
		for (int k = 2; k < 4; ++k)
			if (d(k).dtype != d(0).dtype)
				return bad(who(k) + fmt(": dtype %s does not match out dtype %s (where moves elements; cast first)",
							dtype_name(d(k).dtype), dtype_name(d(0).dtype)));
		return unused_scalars(0x0, 0x0);
	}

	std::optional<Fault> index_dtype(int k) const
	{
		return dtype_is(k, d(k).dtype == NEURON_DTYPE_I32 || d(k).dtype == NEURON_DTYPE_I64, "i32 or i64");
	}

	// a and b have one rank and equal sizes except along dim, where a has `len`.
	std::optional<Fault> sizes_but_dim(int a, int b, int64_t len) const
	{
		const int64_t dim = cmd.iscalars[0];
		if (d(a).ndim != d(b).ndim)
			return bad(who(a) + fmt(": ndim=%u does not match %s ndim=%u", d(a).ndim, op.operands[b], d(b).ndim));
		for (int i = 0; i < d(a).ndim; ++i) {
			const int64_t want = i == dim ? len : d(b).sizes[i];
			if (d(a).sizes[i] != want)
				return bad(who(a) + fmt(": sizes[%d]=%" PRId64 " should be %" PRId64, i, d(a).sizes[i], want));
		}
		return std::nullopt;
	}

	std::optional<Fault> indexing() const
	{
		std::optional<Fault> f;
		const uint16_t opc = cmd.opcode;
		// The writes (INDEX_ADD, SCATTER_ADD and their copying forms INDEX_COPY,
		// SCATTER) take (out, index, src); the reads (out, in, index).
		const bool add = opc == NEURON_OP_INDEX_ADD || opc == NEURON_OP_SCATTER_ADD;
		const bool write = add || opc == NEURON_OP_INDEX_COPY || opc == NEURON_OP_SCATTER;
		const int data = write ? 2 : 1, index = write ? 1 : 2;
		if ((f = index_dtype(index)) || (f = same_dtype(data)) || (f = dim_of(0)) || (f = dim_of(data)))
			return f;
		if (add && (f = dtype_is(0, d(0).dtype != NEURON_DTYPE_BOOL, "any dtype but bool")))
			return f;
		// ISA 1.4: the adds' combining function.
		if (add && (cmd.iscalars[1] < 0 || cmd.iscalars[1] >= NEURON_INDEX_REDUCE_COUNT_))
			return bad(fmt("scalars i[1]=%" PRId64 " is not a valid combining function (0..%d)", cmd.iscalars[1],
				       NEURON_INDEX_REDUCE_COUNT_ - 1));
		const unsigned used_i = add ? 0x3 : 0x1;
		if (opc == NEURON_OP_INDEX_SELECT || opc == NEURON_OP_INDEX_ADD || opc == NEURON_OP_INDEX_COPY) {
			if (d(index).ndim != 1)
				return bad(who(index) + fmt(": ndim=%u, the index must be 1-d", d(index).ndim));
			const int64_t len = d(index).sizes[0];
			const int big = write ? 0 : 1, small = write ? 2 : 0;
			if (d(0).ndim == 0 && d(data).ndim == 0) {
				if (len != 1)
					return bad(who(index) + ": a 0-d operand takes exactly one index");
			} else if ((f = sizes_but_dim(small, big, len))) {
				return f;
			}
			return unused_scalars(0x0, used_i);
		}
		// GATHER / SCATTER(_ADD): index has out's (gather) or src's (scatter) shape; the
		// other operand is at least as large in every dim but dim.
		const int shaped = opc == NEURON_OP_GATHER ? 0 : 2, other = opc == NEURON_OP_GATHER ? 1 : 0;
		if (d(index).ndim != d(shaped).ndim || d(other).ndim != d(shaped).ndim)
			return bad(fmt("operands must have one rank (out ndim=%u, index ndim=%u, %s ndim=%u)", d(0).ndim,
				       d(index).ndim, op.operands[data], d(data).ndim));
		for (int i = 0; i < d(shaped).ndim; ++i) {
			if (d(index).sizes[i] != d(shaped).sizes[i])
				return bad(who(index) + fmt(": sizes[%d]=%" PRId64 " does not match %s sizes[%d]=%" PRId64, i,
							d(index).sizes[i], op.operands[shaped], i, d(shaped).sizes[i]));
			if (i != cmd.iscalars[0] && d(shaped).sizes[i] > d(other).sizes[i])
				return bad(who(other) + fmt(": sizes[%d]=%" PRId64 " is smaller than the index's %" PRId64, i,
							d(other).sizes[i], d(shaped).sizes[i]));
		}
		return unused_scalars(0x0, used_i);
	}

	std::optional<Fault> adam_step() const
	{
		std::optional<Fault> f;
		for (int k = 0; k < 4; ++k)
			if ((f = dtype_is(k, is_floating(d(k).dtype), "f32, bf16 or f16")) || (f = same_shape(k)))
				return f;
		const neuron_tensor_desc &step = d(4);
		int64_t n = 1;
		for (int i = 0; i < step.ndim; ++i)
			n *= step.sizes[i];
		if (n != 1)
			return bad(who(4) + fmt(": has %" PRId64 " elements; the step count is one element", n));
		if ((f = dtype_is(4, step.dtype != NEURON_DTYPE_BOOL, "any dtype but bool")))
			return f;
		const double lr = cmd.fscalars.f[0], beta1 = cmd.fscalars.f[1], beta2 = cmd.fscalars.f[2],
			     eps = cmd.fscalars.f[3];
		double wd;
		std::memcpy(&wd, &cmd.iscalars[1], sizeof(wd));
		const struct {
			const char *name;
			double v;
			bool beta;
		} args[] = {{"f[0] (lr)", lr, false}, {"f[1] (beta1)", beta1, true}, {"f[2] (beta2)", beta2, true},
			    {"f[3] (eps)", eps, false}, {"i[1] (weight_decay bits)", wd, false}};
		for (const auto &a : args) {
			if (!std::isfinite(a.v) || a.v < 0 || (a.beta && a.v >= 1))
				return bad(fmt("scalars %s=%g must be %s", a.name, a.v,
					       a.beta ? "in [0, 1)" : "finite and >= 0"));
		}
		if (cmd.iscalars[0] & ~int64_t{NEURON_ADAM_DECOUPLED | NEURON_ADAM_MAXIMIZE})
			return bad(fmt("scalars i[0]=0x%" PRIx64 " has flags other than decoupled (1) and maximize (2)",
				       static_cast<uint64_t>(cmd.iscalars[0])));
		return unused_scalars(0xf, 0x3);
	}

	std::optional<Fault> arg_reduce() const
	{
		std::optional<Fault> f;
		if ((f = dtype_is(0, d(0).dtype == NEURON_DTYPE_I64, "i64")) ||
		    (f = dtype_is(1, d(1).dtype != NEURON_DTYPE_BOOL, "any dtype but bool")) || (f = dim_of(1)))
			return f;
		if (cmd.iscalars[1] != 0 && cmd.iscalars[1] != 1)
			return bad(fmt("scalars i[1]=%" PRId64 " must be 0 (argmax) or 1 (argmin)", cmd.iscalars[1]));
		const int64_t dim = cmd.iscalars[0];
		if (d(1).ndim > 0) {
			if (d(1).sizes[dim] == 0)
				return bad(who(1) + fmt(": dim %" PRId64 " is empty; an empty dim has no arg max/min", dim));
			if ((f = sizes_but_dim(0, 1, 1)))
				return f;
		} else if (d(0).ndim != 0) {
			return bad(who(0) + fmt(": ndim=%u, a 0-d input gives a 0-d index", d(0).ndim));
		}
		return unused_scalars(0x0, 0x3);
	}

	// ---- ISA 1.4 ----

	std::optional<Fault> scan() const
	{
		std::optional<Fault> f;
		const int64_t fn = cmd.iscalars[1];
		if (fn < 0 || fn >= NEURON_SCAN_COUNT_)
			return bad(fmt("scalars i[1]=%" PRId64 " is not a valid scan function (0..%d)", fn,
				       NEURON_SCAN_COUNT_ - 1));
		if ((f = dim_of(0)) || (f = same_shape(1)) || (f = dtype_is(0, d(0).dtype != NEURON_DTYPE_BOOL, "any dtype but bool")))
			return f;
		if (fn == NEURON_SCAN_LOGSUMEXP && (f = dtype_is(0, is_floating(d(0).dtype), "f32, bf16 or f16")))
			return f;
		if (d(0).ndim == 0) {
			if (d(2).ndim != 0)
				return bad(who(2) + fmt(": ndim=%u, a 0-d scan starts from a 0-d init", d(2).ndim));
		} else if ((f = sizes_but_dim(2, 0, 1))) {
			return f;
		}
		return unused_scalars(0x0, 0x3);
	}

	std::optional<Fault> sort() const
	{
		std::optional<Fault> f;
		if ((f = dim_of(2)) || (f = dtype_is(1, d(1).dtype == NEURON_DTYPE_I64, "i64")) || (f = same_dtype(2)) ||
		    (f = same_shape(1)) || (f = flag_i1("descending")))
			return f;
		const int64_t dim = cmd.iscalars[0];
		if (d(2).ndim == 0) {
			if (d(0).ndim != 0)
				return bad(who(0) + ": a 0-d input sorts into 0-d outputs");
		} else {
			const int64_t k = d(0).ndim == d(2).ndim ? d(0).sizes[dim] : 0;
			if (k > d(2).sizes[dim])
				return bad(who(0) + fmt(": sizes[%" PRId64 "]=%" PRId64 " (k) exceeds the row length %" PRId64,
							dim, k, d(2).sizes[dim]));
			if ((f = sizes_but_dim(0, 2, k)))
				return f;
		}
		return unused_scalars(0x0, 0x3);
	}

	std::optional<Fault> attention() const
	{
		std::optional<Fault> f;
		const neuron_tensor_desc &o = d(0), &lse = d(1), &q = d(2), &k = d(3), &m = d(5);
		if ((f = dtype_is(0, is_floating(o.dtype), "f32, bf16 or f16")) ||
		    (f = dtype_is(1, lse.dtype == NEURON_DTYPE_F32, "f32")) ||
		    (f = dtype_is(5, m.dtype == NEURON_DTYPE_BOOL || m.dtype == o.dtype, "bool or out's dtype")))
			return f;
		for (int i = 2; i < 5; ++i)
			if ((f = same_dtype(i)))
				return f;
		const int n = o.ndim;
		if (n < 2)
			return bad(who(0) + fmt(": ndim=%u, attention takes [..., L, Ev] (at least 2 dims)", o.ndim));
		for (int i = 1; i < 6; ++i) {
			const int want = i == 1 ? n - 1 : n;
			if (d(i).ndim != want)
				return bad(who(i) + fmt(": ndim=%u should be %d", d(i).ndim, want));
			for (int j = 0; j < n - 2; ++j)
				if (d(i).sizes[j] != o.sizes[j])
					return bad(who(i) + fmt(": sizes[%d]=%" PRId64 " does not match out's %" PRId64
								" (broadcast with stride 0)", j, d(i).sizes[j], o.sizes[j]));
		}
		const int64_t L = o.sizes[n - 2], Ev = o.sizes[n - 1], E = q.sizes[n - 1], S = k.sizes[n - 2];
		const struct {
			int operand, dim;
			int64_t want;
			const char *what;
		} shape[] = {{1, n - 2, L, "L"}, {2, n - 2, L, "L"}, {3, n - 1, E, "E (q's last dim)"}, {4, n - 2, S, "S (k's rows)"},
			     {4, n - 1, Ev, "Ev (out's last dim)"}, {5, n - 2, L, "L"}, {5, n - 1, S, "S"}};
		for (const auto &c : shape)
			if (d(c.operand).sizes[c.dim] != c.want)
				return bad(who(c.operand) + fmt(": sizes[%d]=%" PRId64 " should be %" PRId64 " (%s)", c.dim,
								d(c.operand).sizes[c.dim], c.want, c.what));
		if (cmd.iscalars[0] & ~int64_t{NEURON_ATTENTION_CAUSAL})
			return bad(fmt("scalars i[0]=0x%" PRIx64 " has flags other than causal (1)",
				       static_cast<uint64_t>(cmd.iscalars[0])));
		if (!std::isfinite(cmd.fscalars.f[0]))
			return bad(fmt("scalars f[0]=%g (scale) must be finite", cmd.fscalars.f[0]));
		return unused_scalars(0x1, cmd.iscalars[0] & NEURON_ATTENTION_CAUSAL ? 0x3 : 0x1);
	}

	// ---- ISA 1.4 linear algebra ----

	// Operand k has the batch dims `lead` of operand 0 and then `tail` (its shape
	// must be the batch followed by exactly these sizes); dtype check by `kind`:
	// 'f' floating like the op's matrix dtype, 'i' i32, 'l' i64.
	std::optional<Fault> batched_shape(int k, int lead, std::initializer_list<int64_t> tail, char kind, uint8_t fdt) const
	{
		const neuron_tensor_desc &t = d(k);
		if (t.ndim != lead + static_cast<int>(tail.size()))
			return bad(who(k) + fmt(": ndim=%u, expected %d batch dims and %zu more", t.ndim, lead, tail.size()));
		for (int i = 0; i < lead; ++i)
			if (t.sizes[i] != d(0).sizes[i])
				return bad(who(k) + fmt(": sizes[%d]=%" PRId64 " does not match the batch's %" PRId64
							" (broadcast with stride 0)", i, t.sizes[i], d(0).sizes[i]));
		int i = lead;
		for (int64_t want : tail) {
			if (t.sizes[i] != want)
				return bad(who(k) + fmt(": sizes[%d]=%" PRId64 " should be %" PRId64, i, t.sizes[i], want));
			++i;
		}
		if (kind == 'i')
			return dtype_is(k, t.dtype == NEURON_DTYPE_I32, "i32");
		if (kind == 'l')
			return dtype_is(k, t.dtype == NEURON_DTYPE_I64, "i64");
		if (t.dtype != fdt)
			return bad(who(k) + fmt(": dtype %s must be the matrices' %s (f32, bf16 or f16)", dtype_name(t.dtype),
						dtype_name(fdt)));
		return std::nullopt;
	}

	std::optional<Fault> linalg() const
	{
		// The input matrix (PERMUTATION has none: its pivots stand in).
		int mat = 2;
		if (cmd.opcode == NEURON_OP_LU || cmd.opcode == NEURON_OP_SVD)
			mat = 3;
		else if (cmd.opcode == NEURON_OP_ORGQR || cmd.opcode == NEURON_OP_TRIANGULAR_SOLVE ||
			 cmd.opcode == NEURON_OP_PERMUTATION)
			mat = 1;
		const bool perm = cmd.opcode == NEURON_OP_PERMUTATION;
		const neuron_tensor_desc &a = d(mat);
		std::optional<Fault> f;
		if (!perm) {
			if ((f = dtype_is(mat, is_floating(a.dtype), "f32, bf16 or f16")))
				return f;
			if (a.ndim < 2)
				return bad(who(mat) + fmt(": ndim=%u, a matrix has 2 dims", a.ndim));
		}
		const int lead = perm ? d(0).ndim - 1 : a.ndim - 2;
		if (lead < 0)
			return bad(who(0) + ": needs at least one dim");
		const int64_t M = perm ? 0 : a.sizes[lead], N = perm ? 0 : a.sizes[lead + 1];
		const int64_t K = std::min(M, N);
		const uint8_t fdt = a.dtype;
		unsigned used_i = 0x0;
		switch (cmd.opcode) {
		case NEURON_OP_LU:
			if ((f = batched_shape(0, lead, {M, N}, 'f', fdt)) || (f = batched_shape(1, lead, {K}, 'i', fdt)) ||
			    (f = batched_shape(2, lead, {}, 'i', fdt)) || (f = batched_shape(3, lead, {M, N}, 'f', fdt)))
				return f;
			break;
		case NEURON_OP_PERMUTATION: {
			const int64_t m = d(0).sizes[lead], k = d(1).ndim ? d(1).sizes[d(1).ndim - 1] : -1;
			if ((f = batched_shape(0, lead, {m}, 'l', fdt)) || (f = dtype_is(1, d(1).dtype == NEURON_DTYPE_I32 ||
										  d(1).dtype == NEURON_DTYPE_I64, "i32 or i64")))
				return f;
			if (k < 0 || k > m)
				return bad(who(1) + fmt(": %" PRId64 " pivots for %" PRId64 " rows", k, m));
			if ((f = batched_shape(1, lead, {k}, d(1).dtype == NEURON_DTYPE_I32 ? 'i' : 'l', fdt)))
				return f;
			break;
		}
		case NEURON_OP_CHOLESKY:
		case NEURON_OP_EIGH:
			if (M != N)
				return bad(who(mat) + fmt(": %" PRId64 "x%" PRId64 " is not square", M, N));
			if (cmd.opcode == NEURON_OP_CHOLESKY
				    ? ((f = batched_shape(0, lead, {N, N}, 'f', fdt)) || (f = batched_shape(1, lead, {}, 'i', fdt)))
				    : ((f = batched_shape(0, lead, {N}, 'f', fdt)) || (f = batched_shape(1, lead, {N, N}, 'f', fdt))))
				return f;
			if ((f = flag_i1_at(0, "upper")))
				return f;
			used_i = 0x1;
			break;
		case NEURON_OP_TRIANGULAR_SOLVE: {
			const int64_t fl = cmd.iscalars[0];
			if (fl & ~int64_t{15})
				return bad(fmt("scalars i[0]=0x%" PRIx64 " has flags other than upper, left, unit, transpose",
					       static_cast<uint64_t>(fl)));
			if (M != N)
				return bad(who(1) + fmt(": %" PRId64 "x%" PRId64 " is not square", M, N));
			const neuron_tensor_desc &x = d(0);
			if (x.ndim != lead + 2)
				return bad(who(0) + fmt(": ndim=%u should be %d", x.ndim, lead + 2));
			const int64_t r = x.sizes[lead], c = x.sizes[lead + 1];
			if ((fl & NEURON_TRSM_LEFT ? r : c) != N)
				return bad(who(0) + fmt(": its %s dim is %" PRId64 ", a is %" PRId64 "x%" PRId64,
							fl & NEURON_TRSM_LEFT ? "row" : "column", fl & NEURON_TRSM_LEFT ? r : c, N, N));
			if ((f = batched_shape(0, lead, {r, c}, 'f', fdt)) || (f = batched_shape(2, lead, {r, c}, 'f', fdt)))
				return f;
			used_i = 0x1;
			break;
		}
		case NEURON_OP_GEQRF:
			if ((f = batched_shape(0, lead, {M, N}, 'f', fdt)) || (f = batched_shape(1, lead, {K}, 'f', fdt)))
				return f;
			break;
		case NEURON_OP_ORGQR: {
			const neuron_tensor_desc &q = d(0), &tau = d(2);
			const int64_t k = tau.ndim ? tau.sizes[tau.ndim - 1] : -1, kq = q.ndim == lead + 2 ? q.sizes[lead + 1] : -1;
			if (k < 0 || k > N || k > M || kq < k || kq > M)
				return bad(fmt("orgqr: %" PRId64 " reflectors of %" PRId64 "x%" PRId64 " for %" PRId64
					       " columns of Q (needs k <= columns <= rows, k <= reflector columns)", k, M, N, kq));
			if ((f = batched_shape(0, lead, {M, kq}, 'f', fdt)) || (f = batched_shape(2, lead, {k}, 'f', fdt)))
				return f;
			break;
		}
		case NEURON_OP_SVD: {
			const neuron_tensor_desc &u = d(0), &vh = d(2);
			const int64_t ku = u.ndim == lead + 2 ? u.sizes[lead + 1] : -1, kv = vh.ndim == lead + 2 ? vh.sizes[lead] : -1;
			const bool reduced = ku == K && kv == K, full = ku == M && kv == N;
			if (!reduced && !full)
				return bad(fmt("svd: u has %" PRId64 " columns and vh %" PRId64 " rows; expected %" PRId64
					       " and %" PRId64 " (reduced) or %" PRId64 " and %" PRId64 " (full)", ku, kv, K, K, M, N));
			if ((f = batched_shape(0, lead, {M, ku}, 'f', fdt)) || (f = batched_shape(1, lead, {K}, 'f', fdt)) ||
			    (f = batched_shape(2, lead, {kv, N}, 'f', fdt)))
				return f;
			break;
		}
		default:
			break;
		}
		// The input matrix has the batch too (each case above checked the outputs'
		// batch dims against operand 0's; an input of batch 0 against outputs of
		// batch 2 reached the kernel with no bytes to read: the fuzzer's crash).
		if (!perm)
			for (int i = 0; i < lead; ++i)
				if (a.sizes[i] != d(0).sizes[i])
					return bad(who(mat) + fmt(": sizes[%d]=%" PRId64 " does not match the batch's %" PRId64
								  " (broadcast with stride 0)", i, a.sizes[i], d(0).sizes[i]));
		return unused_scalars(0x0, used_i);
	}

	std::optional<Fault> flag_i1_at(int i, const char *what) const
	{
		if (cmd.iscalars[i] != 0 && cmd.iscalars[i] != 1)
			return bad(fmt("scalars i[%d]=%" PRId64 " (%s) must be 0 or 1", i, cmd.iscalars[i], what));
		return std::nullopt;
	}

	std::optional<Fault> run() const
	{
		if (cmd.flags != 0)
			return bad(fmt("flags=0x%x must be zero (a ring command may set NEURON_CMD_F_STAMP, 0x1, with "
				       "its stamp operand; a program's node none)", cmd.flags));
		if (cmd.reserved0 != 0)
			return bad(fmt("reserved0=0x%x must be zero", cmd.reserved0));
		if (op.variadic ? cmd.num_operands < 2 || cmd.num_operands > op.arity : cmd.num_operands != op.arity)
			return bad(op.variadic ? fmt("num_operands=%u but %s takes 2 to %d", cmd.num_operands, op.name, op.arity)
					       : fmt("num_operands=%u but %s takes %d", cmd.num_operands, op.name, op.arity));
		static const neuron_tensor_desc zero{};
		for (int k = cmd.num_operands; k < NEURON_MAX_OPERANDS; ++k)
			if (std::memcmp(&cmd.operands[k], &zero, sizeof(zero)) != 0)
				return bad(fmt("operand %d: unused by %s (%u operands) but not all zero", k, op.name,
					       cmd.num_operands));
		for (int k = 0; k < cmd.num_operands; ++k)
			if (auto f = descriptor(k))
				return f;
		switch (cmd.opcode) {
		case NEURON_OP_NOP:
			return unused_scalars(0, 0);
		case NEURON_OP_FILL:
			// The value is f[0] for floating outputs, i[0] for integer and bool.
			return is_floating(d(0).dtype) ? unused_scalars(0x1, 0x0) : unused_scalars(0x0, 0x1);
		case NEURON_OP_COPY:
			if (auto f = same_shape(1))
				return f;
			return unused_scalars(0, 0);
		case NEURON_OP_MATMUL:
			return matmul();
		case NEURON_OP_SUM:
		case NEURON_OP_MEAN:
		case NEURON_OP_AMAX:
			return reduction();
		case NEURON_OP_SOFTMAX:
		case NEURON_OP_LOG_SOFTMAX:
			return softmax();
		case NEURON_OP_UNARY_MATH:
			return unary_math();
		case NEURON_OP_BINARY_MATH:
			return binary_math();
		case NEURON_OP_COMPARE:
		case NEURON_OP_COMPARE_SCALAR:
			return compare();
		case NEURON_OP_WHERE:
			return where();
		case NEURON_OP_INDEX_SELECT:
		case NEURON_OP_INDEX_ADD:
		case NEURON_OP_GATHER:
		case NEURON_OP_SCATTER_ADD:
		case NEURON_OP_INDEX_COPY:
		case NEURON_OP_SCATTER:
			return indexing();
		case NEURON_OP_ADAM_STEP:
			return adam_step();
		case NEURON_OP_ARG_REDUCE:
			return arg_reduce();
		case NEURON_OP_SCAN:
			return scan();
		case NEURON_OP_SORT:
			return sort();
		case NEURON_OP_ATTENTION:
			return attention();
		case NEURON_OP_LU:
		case NEURON_OP_PERMUTATION:
		case NEURON_OP_CHOLESKY:
		case NEURON_OP_TRIANGULAR_SOLVE:
		case NEURON_OP_GEQRF:
		case NEURON_OP_ORGQR:
		case NEURON_OP_EIGH:
		case NEURON_OP_SVD:
			return linalg();
		case NEURON_OP_MATMUL_EPILOGUE:
			return matmul_epilogue();
		default:
			if (cmd.opcode >= kIsa15First)
				return check_isa15(*this);
			if (cmd.opcode >= kIsa14First)
				return check_isa14(*this);
			return elementwise();
		}
	}
};

} // namespace

} // namespace semantics

int op_arity(uint16_t opcode)
{
	const semantics::OpInfo *op = semantics::op_info(opcode);
	return op ? op->arity : -1;
}

const char *op_name(uint16_t opcode)
{
	const semantics::OpInfo *op = semantics::op_info(opcode);
	return op ? op->name : "invalid";
}

std::optional<Fault> check_semantics(const neuron_cmd &cmd)
{
	const semantics::OpInfo *op = semantics::op_info(cmd.opcode);
	if (!op)
		return Fault{NEURON_FAULT_BAD_OPCODE,
			     semantics::fmt("opcode %u is unknown (this chip implements 1..%d, %d..%d and %d..%d, ISA %d.%d)",
					    cmd.opcode, NEURON_OP_SVD, NEURON_OP_RNG, NEURON_OP_AMP_UPDATE_SCALE,
					    NEURON_OP_EXEC_PROGRAM, NEURON_OP_COUNT_ - 1, NEURON_CMD_ABI_MAJOR,
					    NEURON_CMD_ABI_MINOR)};
	return semantics::Checker{{cmd, *op}}.run();
}

} // namespace neuron::kernels
