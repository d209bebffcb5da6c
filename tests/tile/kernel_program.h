// A program of one TILE_KERNEL node as a tenant registers it with neurond
// (neuron_program_register_kernels): the kernel's wire form, its arguments (u8
// views of exactly their declared sizes, bound at each replay), the first
// `outputs` of them written. For the daemon and sharing suites that run kernels
// through neurond.
#pragma once

#include <neuron/neuron.h>
#include <tile/program.h>

#include <cstdint>
#include <vector>

namespace th {

struct KernelProgram {
	std::vector<uint64_t> bytes;
	std::vector<std::byte> image;
	neuron_tile_image tile{};
	neuron_program_node node{};
	neuron_program_desc desc{};

	KernelProgram(std::vector<uint64_t> arg_bytes, const std::vector<neuron_tile_insn> &insns, int outputs = 1)
		: bytes(std::move(arg_bytes)), image(neuron::tile::serialize(bytes, insns))
	{
		tile = {image.data(), image.size()};
		neuron_cmd &c = node.cmd;
		c.opcode = NEURON_OP_TILE_KERNEL;
		c.num_operands = static_cast<uint8_t>(bytes.size());
		for (size_t k = 0; k < bytes.size(); ++k) {
			const int64_t size = static_cast<int64_t>(bytes[k]);
			c.operands[k] = neuron_desc_contiguous(0, NEURON_DTYPE_U8, 1, &size);
			c.operands[k].mem_space = NEURON_MEM_PROGRAM_ARG;
			c.operands[k].host_buffer = static_cast<uint32_t>(k);
		}
		c.iscalars[1] = outputs;
		node.label = "kernel";
		desc.arg_count = static_cast<uint32_t>(bytes.size());
		desc.arg_bytes = bytes.data();
		desc.node_count = 1;
		desc.nodes = &node;
	}
	// desc and tile point into this object.
	KernelProgram(const KernelProgram &) = delete;
	KernelProgram &operator=(const KernelProgram &) = delete;

	neuron_status enrol(neuron_client *c, uint64_t *id) const
	{
		return neuron_program_register_kernels(c, &desc, &tile, 1, id);
	}
};

} // namespace th
