#include "kmd_dma_run.h"

#include "kmd_fault_text.h"

#include <geometry.h>
#include <kernels.h>

#include <array>
#include <span>
#include <string>

namespace neuron::daemon {

using kernels::Fault;
using namespace kmd_fault_text;

std::optional<Fault> build_dma_runs(const neuron_cmd &cmd, const KmdMemory &m, uint32_t dev, KmdDmaRuns *runs)
{
	struct Side {
		uint32_t handle = 0;
		int64_t bo_offset = 0; // of the descriptor's addr inside the BO
		const kmd::HostBuffer *host = nullptr;
		uint64_t extent = 0;
	} side[2];
	std::array<kernels::ByteRange, NEURON_MAX_OPERANDS> ranges{};
	for (int k = 0; k < 2; ++k) {
		const neuron_tensor_desc &d = cmd.operands[k];
		const auto extent = kernels::byte_extent(d);
		if (!extent)
			return make_fault(NEURON_FAULT_OUT_OF_BOUNDS, who(k) + ": sizes and strides reach past 2^62 bytes");
		side[k].extent = *extent;
		if (d.mem_space == NEURON_MEM_DEVICE) {
			if (d.host_buffer != 0)
				return make_fault(NEURON_FAULT_BAD_OPERAND, who(k) + ": host_buffer must be 0 for device memory");
			if (*extent == 0)
				continue;
			const KmdAllocation *a = m.find(dev, d.addr, *extent);
			if (!a)
				return make_fault(NEURON_FAULT_OUT_OF_BOUNDS,
						  who(k) + ": bytes [" + hex(d.addr) + ", +" + std::to_string(*extent) +
							  ") on device " + std::to_string(dev) +
							  " are not inside one allocation of this tenant");
			side[k].handle = a->buffer.handle;
			side[k].bo_offset = static_cast<int64_t>(d.addr - a->bo_address());
			// Device and host ranges never overlap: keep them apart in one space.
			ranges[k] = {d.addr, *extent};
		} else if (d.mem_space == NEURON_MEM_HOST) {
			auto it = m.host.find(d.host_buffer);
			if (it == m.host.end())
				return make_fault(NEURON_FAULT_OUT_OF_BOUNDS, who(k) + ": host buffer " +
										      std::to_string(d.host_buffer) +
										      " is not registered by this tenant");
			const uint64_t size = it->second.size;
			if (d.addr > size || *extent > size - d.addr)
				return make_fault(NEURON_FAULT_OUT_OF_BOUNDS,
						  who(k) + ": bytes [" + std::to_string(d.addr) + ", +" + std::to_string(*extent) +
							  ") run past host buffer " + std::to_string(d.host_buffer) + " of " +
							  std::to_string(size) + " bytes");
			side[k].host = &it->second.per_device.at(dev);
			side[k].handle = side[k].host->handle;
			side[k].bo_offset = static_cast<int64_t>(d.addr);
			// Host buffers live below kDeviceAddressBase in this space, one
			// 2^32-byte window each (their size is far below).
			ranges[k] = {(uint64_t(d.host_buffer) << 32) + d.addr, *extent};
		} else {
			return make_fault(NEURON_FAULT_BAD_OPERAND,
					  who(k) + ": mem_space " + std::to_string(d.mem_space) + " is unknown");
		}
	}
	if (auto f = kernels::check_output_overlap(cmd, std::span(ranges.data(), size_t(cmd.num_operands))))
		return f;
	const neuron_tensor_desc &dst = cmd.operands[0], &src = cmd.operands[1];
	if (dst.dtype != src.dtype)
		return make_fault(NEURON_FAULT_BAD_OPERAND,
				  "COPY on a DMA queue converts dtype " + std::to_string(src.dtype) + " to " +
					  std::to_string(dst.dtype) +
					  ": the kmd backend's DMA engine moves bytes; convert on a core queue");
	if (side[0].extent == 0 || side[1].extent == 0)
		return std::nullopt; // nothing to move
	// Contiguous runs: merge the innermost dims that are dense in both.
	const uint64_t elem = kernels::dtype_size(dst.dtype);
	const int n = dst.ndim;
	int k = n;
	uint64_t run = 1; // elements
	while (k > 0 && dst.strides[k - 1] == static_cast<int64_t>(run) && src.strides[k - 1] == static_cast<int64_t>(run)) {
		run *= static_cast<uint64_t>(dst.sizes[k - 1]);
		--k;
	}
	uint64_t count = 1;
	for (int i = 0; i < k; ++i)
		count *= static_cast<uint64_t>(dst.sizes[i]);
	if (count > kMaxDmaRuns)
		return make_fault(NEURON_FAULT_BAD_OPERAND,
				  "strided COPY needs " + std::to_string(count) + " contiguous runs; the kmd backend's DMA "
				  "takes at most " + std::to_string(kMaxDmaRuns) + " per command: copy into a dense "
				  "tensor on a core queue first");
	std::vector<kmd::DmaCopy> &copies = runs->copies;
	copies.reserve(count);
	std::array<int64_t, NEURON_MAX_DIMS> idx{};
	for (uint64_t r = 0; r < count; ++r) {
		int64_t od = 0, os = 0;
		for (int i = 0; i < k; ++i) {
			od += idx[i] * dst.strides[i];
			os += idx[i] * src.strides[i];
		}
		copies.push_back({side[1].handle, static_cast<uint64_t>(side[1].bo_offset + os * int64_t(elem)),
				  side[0].handle, static_cast<uint64_t>(side[0].bo_offset + od * int64_t(elem)), run * elem});
		for (int i = k - 1; i >= 0; --i) {
			if (++idx[i] < dst.sizes[i])
				break;
			idx[i] = 0;
		}
	}
	if (side[1].host && side[1].host->kind == kmd::HostKind::Staged)
		runs->stage_in = KmdStagedBytes{src.host_buffer, side[1].host, src.addr, side[1].extent};
	if (side[0].host && side[0].host->kind == kmd::HostKind::Staged)
		runs->stage_out = KmdStagedBytes{dst.host_buffer, side[0].host, dst.addr, side[0].extent};
	return std::nullopt;
}

} // namespace neuron::daemon
