#include "operands.h"

#include "device.h"
#include "tenant_memory.h"

#include <geometry.h>

#include <algorithm>
#include <cstdio>
#include <string>

namespace neuron::chip {

using kernels::byte_extent;
using kernels::command_work;
using kernels::kMaxCommandWork;
using kernels::kMaxElementsPerOperand;
using kernels::numel;

namespace {

const char *operand_role(int k) { return k == 0 ? "output" : "input"; }

std::string hex(uint64_t v)
{
	char buf[32];
	std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
	return buf;
}

kernels::Fault make_fault(uint32_t code, std::string msg) { return kernels::Fault{code, std::move(msg)}; }

} // namespace


std::optional<kernels::Fault> resolve_operands(const neuron_cmd &cmd, QueueKind kind, Device &device,
					       const TenantMemory &memory, OperandViews &views)
{
	const int n = cmd.num_operands;
	std::array<kernels::ByteRange, NEURON_MAX_OPERANDS> ranges{};

	if (kind == QueueKind::Dma && cmd.opcode != NEURON_OP_COPY && cmd.opcode != NEURON_OP_NOP)
		return make_fault(NEURON_FAULT_BAD_OPCODE,
				  "opcode " + std::to_string(cmd.opcode) +
					  " is not a DMA operation: DMA queues run COPY and NOP only");

	for (int k = 0; k < n; ++k)
		if (numel(cmd.operands[k]) > kMaxElementsPerOperand)
			return make_fault(NEURON_FAULT_BAD_OPERAND,
					  "operand " + std::to_string(k) + " has more than 2^32 elements; split the work");
	if (command_work(cmd) > kMaxCommandWork)
		return make_fault(NEURON_FAULT_BAD_OPERAND,
				  "command needs more than 2^37 element operations; split it (e.g. a matmul into blocks)");

	for (int k = 0; k < n; ++k) {
		const neuron_tensor_desc &d = cmd.operands[k];
		const std::string who = "operand " + std::to_string(k) + " (" + operand_role(k) + ")";
		const auto extent = byte_extent(d);
		if (!extent)
			return make_fault(NEURON_FAULT_OUT_OF_BOUNDS, who + ": sizes and strides reach past 2^62 bytes");
		std::byte *base = nullptr;
		if (d.mem_space == NEURON_MEM_DEVICE) {
			if (d.host_buffer != 0)
				return make_fault(NEURON_FAULT_BAD_OPERAND, who + ": host_buffer must be 0 for device memory");
			if (*extent > 0 && !memory.owns_device_range(device.index(), d.addr, *extent))
				return make_fault(NEURON_FAULT_OUT_OF_BOUNDS,
						  who + ": bytes [" + hex(d.addr) + ", +" + std::to_string(*extent) +
							  ") on device " + std::to_string(device.index()) +
							  " are not inside one allocation of this tenant");
			base = *extent > 0 ? device.host_address(d.addr) : nullptr;
		} else if (d.mem_space == NEURON_MEM_HOST) {
			if (kind != QueueKind::Dma)
				return make_fault(NEURON_FAULT_BAD_OPERAND,
						  who + ": host memory can only be named on a DMA queue");
			const HostBuffer *hb = memory.host_buffer(d.host_buffer);
			if (!hb)
				return make_fault(NEURON_FAULT_OUT_OF_BOUNDS,
						  who + ": host buffer " + std::to_string(d.host_buffer) +
							  " is not registered by this tenant");
			if (d.addr > hb->size || *extent > hb->size - d.addr)
				return make_fault(NEURON_FAULT_OUT_OF_BOUNDS,
						  who + ": bytes [" + std::to_string(d.addr) + ", +" +
							  std::to_string(*extent) + ") run past host buffer " +
							  std::to_string(d.host_buffer) + " of " +
							  std::to_string(hb->size) + " bytes");
			base = hb->ptr + d.addr;
		} else {
			return make_fault(NEURON_FAULT_BAD_OPERAND,
					  who + ": mem_space " + std::to_string(d.mem_space) + " is unknown");
		}
		kernels::View &v = views[k];
		v.data = base;
		v.dtype = static_cast<neuron_dtype>(d.dtype);
		v.ndim = d.ndim;
		std::copy(std::begin(d.sizes), std::end(d.sizes), v.sizes);
		std::copy(std::begin(d.strides), std::end(d.strides), v.strides);
		ranges[k] = {reinterpret_cast<uintptr_t>(base), *extent};
	}

	return kernels::check_output_overlap(cmd, std::span(ranges.data(), size_t(n)));
}

} // namespace neuron::chip
