// check_semantics() for ISA 1.5's block (opcodes 72..79, cmd.h): EXEC_PROGRAM,
// TILE_KERNEL's form (its tile program is checked with the program it is a node of),
// which the kernels never run (the gate admits it and the engine runs the
// program's nodes), POINTWISE's step program, and MATMUL_EPILOGUE's bias and
// activation (its matmul operands are checked as MATMUL's, semantics.cpp).
#include "pointwise_steps.h"
#include "semantics_checks.h"

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
