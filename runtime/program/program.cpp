#include "program.h"

#include <kernels.h>

namespace neuron::program {

bool is_random(uint16_t opcode)
{
	return opcode == NEURON_OP_RNG || opcode == NEURON_OP_DROPOUT || opcode == NEURON_OP_RANDPERM ||
	       opcode == NEURON_OP_MULTINOMIAL;
}

uint64_t Program::host_bytes() const
{
	uint64_t n = sizeof(*this) + nodes.size() * sizeof(Node);
	for (const Node &node : nodes)
		n += node.label.capacity();
	n += (arg_bytes.size() + buffer_bytes.size() * 2) * sizeof(uint64_t) + arg_written.size() + restore_on_rerun.size();
	for (const auto &t : tiles)
		n += sizeof(*t) + t->insns.size() * (sizeof(neuron_tile_insn) + sizeof(uint32_t));
	return n;
}

void materialise(const Program &p, size_t k, const Exec &exec, neuron_cmd *out)
{
	const Node &node = p.nodes[k];
	*out = node.cmd;
	for (int i = 0; i < out->num_operands; ++i) {
		neuron_tensor_desc &d = out->operands[i];
		const uint32_t which = d.host_buffer;
		const uint64_t base = d.mem_space == NEURON_MEM_PROGRAM_ARG ? exec.bindings[which] : p.buffer_address[which];
		d.addr += base;
		d.mem_space = NEURON_MEM_DEVICE;
		d.host_buffer = 0;
	}
	if (node.random && (exec.flags & NEURON_EXEC_RNG)) {
		out->iscalars[1] = static_cast<int64_t>(exec.rng_seed);
		out->iscalars[2] = static_cast<int64_t>(static_cast<uint64_t>(out->iscalars[2]) + exec.rng_offset);
	}
}

std::string node_name(const Program &p, size_t k)
{
	const Node &node = p.nodes[k];
	std::string s = "program " + std::to_string(p.id) + " node " + std::to_string(node.index) + " (" +
			kernels::op_name(node.cmd.opcode);
	if (!node.label.empty())
		s += " '" + node.label + "'";
	return s + ")";
}

} // namespace neuron::program
