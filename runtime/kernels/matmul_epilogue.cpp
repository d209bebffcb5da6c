// MATMUL_EPILOGUE (cmd.h, ISA 1.5): a linear layer's matmul with its bias and
// activation, as one command. It runs exactly the unfused sequence's kernels on
// the same block (COPY of the bias into out, MATMUL with beta, the activation in
// place), so the result is the unfused ops' bits; what it saves is the commands
// and a pass of the activation over memory the matmul just wrote. A tile of a K
// split carries flags (cmd.h): only the first copies the bias, only the last
// applies the activation.
#include "ops.h"

namespace neuron::kernels::detail {

namespace {

// The activation as the unfused opcode encodes it (opcode, i[0]).
void activation_cmd(int64_t act, neuron_cmd *c)
{
	switch (act) {
	case NEURON_ACT_RELU: c->opcode = NEURON_OP_RELU; break;
	case NEURON_ACT_GELU: c->opcode = NEURON_OP_GELU; break;
	case NEURON_ACT_GELU_TANH: c->opcode = NEURON_OP_GELU; c->iscalars[0] = 1; break;
	case NEURON_ACT_SILU: c->opcode = NEURON_OP_SILU; break;
	default: c->opcode = NEURON_OP_TANH; break;
	}
}

} // namespace

Result run_matmul_epilogue(const neuron_cmd &cmd, std::span<const View> v, int max_threads, GemmPacks *packs)
{
	const int64_t act = cmd.iscalars[0], flags = cmd.iscalars[1];
	if (!(flags & NEURON_EPILOGUE_NO_BIAS))
		if (auto f = run_copy(v[0], v[3], max_threads))
			return f;
	neuron_cmd mm{};
	mm.opcode = NEURON_OP_MATMUL;
	mm.num_operands = 3;
	mm.fscalars.f[0] = cmd.fscalars.f[0];
	mm.fscalars.f[1] = cmd.fscalars.f[1];
	for (int k = 0; k < 3; ++k)
		mm.operands[k] = cmd.operands[k];
	if (auto f = run_matmul(mm, v.subspan(0, 3), max_threads, packs))
		return f;
	if (act == NEURON_ACT_NONE || (flags & NEURON_EPILOGUE_NO_ACT))
		return std::nullopt;
	neuron_cmd a{};
	activation_cmd(act, &a);
	a.num_operands = 2;
	a.operands[0] = a.operands[1] = cmd.operands[0];
	const View inplace[2] = {v[0], v[0]};
	return run_elementwise(a, inplace, max_threads);
}

} // namespace neuron::kernels::detail
