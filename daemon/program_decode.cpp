#include "program_decode.h"

namespace neuron::daemon {

namespace {

// One operand of a node into a descriptor (addr: the offset; host_buffer: the index).
std::string decode_operand(const api::ProgramOperand &o, neuron_tensor_desc *d)
{
	if (o.sizes_size() > NEURON_MAX_DIMS || o.strides_size() != o.sizes_size())
		return "has " + std::to_string(o.sizes_size()) + " sizes and " + std::to_string(o.strides_size()) +
		       " strides; give one stride per size, at most " + std::to_string(NEURON_MAX_DIMS);
	if (o.space() > 255 || o.dtype() > 255)
		return "space " + std::to_string(o.space()) + " / dtype " + std::to_string(o.dtype()) + " is out of range";
	*d = neuron_tensor_desc{};
	d->addr = o.offset();
	d->host_buffer = o.index();
	d->mem_space = static_cast<uint8_t>(o.space());
	d->dtype = static_cast<uint8_t>(o.dtype());
	d->ndim = static_cast<uint8_t>(o.sizes_size());
	for (int i = 0; i < o.sizes_size(); ++i) {
		d->sizes[i] = o.sizes(i);
		d->strides[i] = o.strides(i);
	}
	return {};
}

std::string decode_node(const api::ProgramNode &n, uint32_t index, program::NodeSpec *out)
{
	const std::string who = "node " + std::to_string(index);
	if (n.opcode() > 0xffff || n.flags() > 0xff)
		return who + ": opcode " + std::to_string(n.opcode()) + " / flags " + std::to_string(n.flags()) +
		       " out of range";
	if (n.fscalars_size() > NEURON_MAX_SCALARS || n.iscalars_size() > NEURON_MAX_SCALARS)
		return who + ": at most " + std::to_string(NEURON_MAX_SCALARS) + " f and i scalars";
	if (n.operands_size() > NEURON_MAX_OPERANDS)
		return who + ": " + std::to_string(n.operands_size()) + " operands; at most " +
		       std::to_string(NEURON_MAX_OPERANDS);
	neuron_cmd &c = out->cmd;
	c = neuron_cmd{};
	c.opcode = static_cast<uint16_t>(n.opcode());
	c.flags = static_cast<uint8_t>(n.flags());
	c.num_operands = static_cast<uint8_t>(n.operands_size());
	c.user_tag = n.user_tag();
	for (int i = 0; i < n.fscalars_size(); ++i)
		c.fscalars.bits[i] = n.fscalars(i);
	for (int i = 0; i < n.iscalars_size(); ++i)
		c.iscalars[i] = n.iscalars(i);
	for (int k = 0; k < n.operands_size(); ++k)
		if (auto why = decode_operand(n.operands(k), &c.operands[k]); !why.empty())
			return who + ": operand " + std::to_string(k) + " " + why;
	out->deps.assign(n.deps().begin(), n.deps().end());
	out->label = n.label();
	return {};
}

} // namespace

std::string decode_program(const api::Program &p, program::Description *d)
{
	d->device = p.device();
	if (p.tile_programs_size() > NEURON_PROGRAM_MAX_TILE_PROGRAMS)
		return "the program has " + std::to_string(p.tile_programs_size()) + " tile programs; the limit is " +
		       std::to_string(NEURON_PROGRAM_MAX_TILE_PROGRAMS);
	for (const std::string &image : p.tile_programs()) {
		const auto *bytes = reinterpret_cast<const std::byte *>(image.data());
		d->tile_images.emplace_back(bytes, bytes + image.size());
	}
	d->arg_bytes.assign(p.arg_bytes().begin(), p.arg_bytes().end());
	d->buffer_bytes.assign(p.buffer_bytes().begin(), p.buffer_bytes().end());
	if (p.nodes_size() > NEURON_PROGRAM_MAX_NODES)
		return "the program has " + std::to_string(p.nodes_size()) + " nodes; the limit is " +
		       std::to_string(NEURON_PROGRAM_MAX_NODES) + " (split it into several programs)";
	d->nodes.resize(static_cast<size_t>(p.nodes_size()));
	for (int i = 0; i < p.nodes_size(); ++i)
		if (auto why = decode_node(p.nodes(i), static_cast<uint32_t>(i), &d->nodes[i]); !why.empty())
			return why;
	return {};
}

} // namespace neuron::daemon
