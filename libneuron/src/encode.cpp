// Helpers for building commands (see <neuron/cmd.h> for the format).
#include <neuron/neuron.h>

#include <cstring>

extern "C" struct neuron_tensor_desc neuron_desc_contiguous(uint64_t address, int dtype, int ndim, const int64_t *sizes)
{
	neuron_tensor_desc d;
	std::memset(&d, 0, sizeof(d));
	d.addr = address;
	d.mem_space = NEURON_MEM_DEVICE;
	d.dtype = static_cast<uint8_t>(dtype);
	d.ndim = static_cast<uint8_t>(ndim);
	int64_t stride = 1;
	for (int i = ndim - 1; i >= 0; --i) {
		d.sizes[i] = sizes[i];
		d.strides[i] = stride;
		stride *= sizes[i] > 0 ? sizes[i] : 1;
	}
	return d;
}

extern "C" void neuron_cmd_init(struct neuron_cmd *cmd, int opcode, int num_operands)
{
	std::memset(cmd, 0, sizeof(*cmd));
	cmd->opcode = static_cast<uint16_t>(opcode);
	cmd->num_operands = static_cast<uint8_t>(num_operands);
}
