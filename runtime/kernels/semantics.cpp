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
};

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
static_assert(kIsa14First + std::size(kIsa14Ops) == NEURON_OP_COUNT_, "one entry per ISA 1.4 opcode");

} // namespace

const OpInfo *op_info(uint16_t opcode)
{
	if (opcode > NEURON_OP_INVALID && opcode < std::size(kOps))
		return &kOps[opcode];
	if (opcode >= kIsa14First && opcode < kIsa14First + std::size(kIsa14Ops))
		return &kIsa14Ops[opcode - kIsa14First];
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
		return unused_scalars(0x3, 0x0);
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

	std::optional<Fault> unary_math() const
	{
		std::optional<Fault> f;
		if ((f = selector(NEURON_UNARY_COUNT_, "unary function")) ||
		    (f = dtype_is(0, is_floating(d(0).dtype), "f32, bf16 or f16")) || (f = same_shape(1)))
			return f;
		switch (cmd.iscalars[0]) {
		case NEURON_UNARY_POW:
			return unused_scalars(0x1, 0x1);
		case NEURON_UNARY_CLAMP:
			if (cmd.iscalars[1] < 0 || cmd.iscalars[1] > 3)
				return bad(fmt("scalars i[1]=%" PRId64 " (clamp bounds: bit 0 min, bit 1 max) must be 0..3",
					       cmd.iscalars[1]));
			return unused_scalars((cmd.iscalars[1] & 1 ? 0x1 : 0) | (cmd.iscalars[1] & 2 ? 0x2 : 0), 0x3);
		default:
			return unused_scalars(0x0, 0x1);
		}
	}

	std::optional<Fault> binary_math() const
	{
		std::optional<Fault> f;
		if ((f = selector(NEURON_BINARY_COUNT_, "binary function")) || (f = same_shape(1)) || (f = same_shape(2)))
			return f;
		const int64_t fn = cmd.iscalars[0];
		if (fn == NEURON_BINARY_MAXIMUM || fn == NEURON_BINARY_MINIMUM)
			f = dtype_is(0, d(0).dtype != NEURON_DTYPE_BOOL, "any dtype but bool");
		else
			f = dtype_is(0, is_floating(d(0).dtype), "f32, bf16 or f16");
		if (f)
			return f;
		if (fn == NEURON_BINARY_GELU_BACKWARD) {
			if (cmd.iscalars[1] != 0 && cmd.iscalars[1] != 1)
				return bad(fmt("scalars i[1]=%" PRId64 " must be 0 (erf) or 1 (tanh)", cmd.iscalars[1]));
			return unused_scalars(0x0, 0x3);
		}
		if (fn == NEURON_BINARY_THRESHOLD_BACKWARD)
			return unused_scalars(0x1, 0x1);
		return unused_scalars(0x0, 0x1);
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
			return unused_scalars(0x0, 0x1);
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
		return unused_scalars(0x0, 0x1);
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

	std::optional<Fault> run() const
	{
		if (cmd.flags != 0)
			return bad(fmt("flags=0x%x must be zero (no flags are defined)", cmd.flags));
		if (cmd.reserved0 != 0)
			return bad(fmt("reserved0=0x%x must be zero", cmd.reserved0));
		if (cmd.num_operands != op.arity)
			return bad(fmt("num_operands=%u but %s takes %d", cmd.num_operands, op.name, op.arity));
		static const neuron_tensor_desc zero{};
		for (int k = op.arity; k < NEURON_MAX_OPERANDS; ++k)
			if (std::memcmp(&cmd.operands[k], &zero, sizeof(zero)) != 0)
				return bad(fmt("operand %d: unused by %s (arity %d) but not all zero", k, op.name, op.arity));
		for (int k = 0; k < op.arity; ++k)
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
		default:
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
			     semantics::fmt("opcode %u is unknown (this chip implements 1..%d and %d..%d, ISA %d.%d)",
					    cmd.opcode, NEURON_OP_SCATTER, NEURON_OP_RNG, NEURON_OP_COUNT_ - 1,
					    NEURON_CMD_ABI_MAJOR, NEURON_CMD_ABI_MINOR)};
	return semantics::Checker{{cmd, *op}}.run();
}

} // namespace neuron::kernels
