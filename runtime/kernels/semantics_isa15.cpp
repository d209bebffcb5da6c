// check_semantics() for ISA 1.5's block (opcodes 72..79, cmd.h): EXEC_PROGRAM,
// TILE_KERNEL's form (its tile program is checked with the program it is a node of),
// which the kernels never run (the gate admits it and the engine runs the
// program's nodes), POINTWISE's step program, and MATMUL_EPILOGUE's bias and
// activation (its matmul operands are checked as MATMUL's, semantics.cpp), and
// ISA 1.8's LAYER_NORM, LAYER_NORM_BACKWARD and LAYER_NORM_PARAM_GRAD.
#include "pointwise_steps.h"
#include "semantics_checks.h"

#include <cmath>

namespace neuron::kernels::semantics {

namespace {

struct Isa15 : CheckBase {
	std::optional<Fault> pointwise() const
	{
		std::optional<Fault> f;
		if ((f = dtype_is(0, is_floating(d(0).dtype), "f32, bf16 or f16")))
			return f;
		for (int k = 1; k < cmd.num_operands; ++k) {
			if ((f = same_shape(k)) || (f = dtype_is(k, d(k).dtype != NEURON_DTYPE_BOOL, "any dtype but bool")))
				return f;
		}
		const int inputs = cmd.num_operands - 1;
		PointwiseSteps steps;
		if (auto why = decode_steps(cmd, inputs, &steps); !why.empty())
			return bad(why);
		return std::nullopt;
	}

	// The kernel's HBM arguments as bytes; which tile program and how many
	// outputs (the program's validation checks them against the tile program).
	std::optional<Fault> tile_kernel() const
	{
		for (int k = 0; k < cmd.num_operands; ++k)
			if (d(k).dtype != NEURON_DTYPE_U8 || d(k).ndim != 1 || (d(k).strides[0] != 1 && d(k).sizes[0] > 1))
				return bad(who(k) + ": a tile kernel's argument is its bytes: u8, 1-D, contiguous");
		if (cmd.iscalars[0] < 0)
			return bad(fmt("scalars i[0]=%" PRId64 " is not a tile program index", cmd.iscalars[0]));
		if (cmd.iscalars[1] < 1 || cmd.iscalars[1] > cmd.num_operands)
			return bad(fmt("scalars i[1]=%" PRId64 " outputs: 1..%u (the operands the kernel writes come first)",
				       cmd.iscalars[1], cmd.num_operands));
		if (cmd.iscalars[2] < 0)
			return bad("scalars i[2] (the step count) is negative");
		return unused_scalars(0, 0x7);
	}

	// Operand k: f32 statistics of the rows, the rows' shape (operand ref's) with
	// size 1 at dim D.
	std::optional<Fault> row_stats(int k, int64_t D, int ref = 0) const
	{
		const char *of = op.operands[ref];
		if (d(k).dtype != NEURON_DTYPE_F32)
			return bad(who(k) + fmt(": dtype %s; the row statistics are f32", dtype_name(d(k).dtype)));
		if (d(k).ndim != d(ref).ndim)
			return bad(who(k) + fmt(": ndim=%u does not match %s ndim=%u", d(k).ndim, of, d(ref).ndim));
		for (int i = 0; i < d(k).ndim; ++i) {
			const int64_t want = i == D ? 1 : d(ref).sizes[i];
			if (d(k).sizes[i] != want)
				return bad(who(k) + fmt(": sizes[%d]=%" PRId64 " but must be %" PRId64
							" (%s's shape, 1 along the normalized dim %" PRId64 ")",
							i, d(k).sizes[i], want, of, D));
		}
		return std::nullopt;
	}

	// Operand k: an affine parameter, 1-D of the row's length, floating.
	std::optional<Fault> row_parameter(int k, int64_t D) const
	{
		if (auto f = dtype_is(k, is_floating(d(k).dtype), "f32, bf16 or f16"))
			return f;
		if (d(k).ndim != 1 || d(k).sizes[0] != d(0).sizes[D])
			return bad(who(k) + fmt(": must be 1-D of the row's length %" PRId64 " (out's dim %" PRId64 ")",
						d(0).sizes[D], D));
		return std::nullopt;
	}

	// LAYER_NORM (first 4..6 operands) and LAYER_NORM_BACKWARD (5..6): which
	// operands are full rows, which statistics, which parameters.
	std::optional<Fault> layer_norm(bool backward) const
	{
		const int least = backward ? 5 : 4;
		if (cmd.num_operands < least)
			return bad(fmt("num_operands=%u but %s takes %d to 6", cmd.num_operands, op.name, least));
		std::optional<Fault> f;
		if ((f = dtype_is(0, is_floating(d(0).dtype), "f32, bf16 or f16")))
			return f;
		if (d(0).ndim == 0)
			return bad(who(0) + ": a layer norm needs at least one dim");
		if ((f = dim_of(0)))
			return f;
		const int64_t D = cmd.iscalars[0];
		const int rows_end = backward ? 3 : 4; // operands holding whole rows (besides 0)
		for (int k = backward ? 1 : 3; k < rows_end; ++k)
			if ((f = same_shape(k)) || (f = same_dtype(k)))
				return f;
		const int stats = backward ? 3 : 1; // mean, then rstd
		for (int k = stats; k < stats + 2; ++k)
			if ((f = row_stats(k, D)))
				return f;
		for (int k = least; k < cmd.num_operands; ++k)
			if ((f = row_parameter(k, D)))
				return f;
		if (backward)
			return unused_scalars(0x0, 0x1);
		const double eps = cmd.fscalars.f[0];
		if (!(eps >= 0) || !std::isfinite(eps))
			return bad(fmt("scalars f[0]=%g (eps) must be finite and >= 0", eps));
		return unused_scalars(0x1, 0x1);
	}

	// LAYER_NORM_PARAM_GRAD: go and in whole rows (in's shape is the reference
	// here, operand 0 being the 1-D dw), the statistics, f32 dw and db.
	std::optional<Fault> layer_norm_param_grad() const
	{
		const neuron_tensor_desc &in = d(3);
		std::optional<Fault> f;
		if ((f = dtype_is(3, is_floating(in.dtype), "f32, bf16 or f16")))
			return f;
		if (in.ndim == 0)
			return bad(who(3) + ": a layer norm needs at least one dim");
		const int64_t D = cmd.iscalars[0];
		if (D < 0 || D >= in.ndim)
			return bad(fmt("scalars i[0]=%" PRId64 " (dim) must be in [0, %u)", D, in.ndim));
		if (d(2).dtype != in.dtype || d(2).ndim != in.ndim)
			return bad(who(2) + ": must have in's dtype and rank");
		for (int i = 0; i < in.ndim; ++i)
			if (d(2).sizes[i] != in.sizes[i])
				return bad(who(2) + fmt(": sizes[%d]=%" PRId64 " does not match in sizes[%d]=%" PRId64, i,
							d(2).sizes[i], i, in.sizes[i]));
		for (int k = 4; k < 6; ++k)
			if ((f = row_stats(k, D, 3)))
				return f;
		for (int k = 0; k < 2; ++k) {
			if (d(k).dtype != NEURON_DTYPE_F32)
				return bad(who(k) + fmt(": dtype %s; the parameter gradients are f32", dtype_name(d(k).dtype)));
			if (d(k).ndim != 1 || d(k).sizes[0] != in.sizes[D])
				return bad(who(k) + fmt(": must be 1-D of the row's length %" PRId64 " (in's dim %" PRId64 ")",
							in.sizes[D], D));
		}
		if (cmd.iscalars[1] & ~int64_t{NEURON_LN_ACCUMULATE})
			return bad(fmt("scalars i[1]=%" PRId64 " holds unknown flags (ACCUMULATE 1)", cmd.iscalars[1]));
		return unused_scalars(0x0, 0x3);
	}
};

} // namespace

std::optional<Fault> check_isa15(const CheckBase &base)
{
	const Isa15 c{base};
	switch (base.cmd.opcode) {
	case NEURON_OP_EXEC_PROGRAM:
		return bad("exec_program is a ring command of a core queue (it runs a registered program); it cannot be a "
			   "program's node or a driver job's command");
	case NEURON_OP_POINTWISE:
		return c.pointwise();
	case NEURON_OP_TILE_KERNEL:
		return c.tile_kernel();
	case NEURON_OP_LAYER_NORM:
		return c.layer_norm(false);
	case NEURON_OP_LAYER_NORM_BACKWARD:
		return c.layer_norm(true);
	case NEURON_OP_LAYER_NORM_PARAM_GRAD:
		return c.layer_norm_param_grad();
	default:
		return bad(fmt("opcode %u has no checks", base.cmd.opcode));
	}
}

std::optional<Fault> check_epilogue_extras(const CheckBase &c)
{
	std::optional<Fault> f;
	if ((f = c.dtype_is(0, c.d(0).dtype == NEURON_DTYPE_F32, "f32 (bf16/f16 matmuls are not fused)")) ||
	    (f = c.same_shape(3)) || (f = c.same_dtype(3)))
		return f;
	if (c.cmd.iscalars[0] < 0 || c.cmd.iscalars[0] >= NEURON_ACT_COUNT_)
		return bad(fmt("scalars i[0]=%" PRId64 " is not a valid activation (0..%d)", c.cmd.iscalars[0],
			       NEURON_ACT_COUNT_ - 1));
	const int64_t flags = c.cmd.iscalars[1];
	if (flags & ~int64_t{NEURON_EPILOGUE_NO_BIAS | NEURON_EPILOGUE_NO_ACT})
		return bad(fmt("scalars i[1]=%" PRId64 " holds unknown flags (NO_BIAS 1, NO_ACT 2)", flags));
	return c.unused_scalars(0x3, 0x3);
}

} // namespace neuron::kernels::semantics
