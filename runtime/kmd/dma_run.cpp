#include "dma_run.h"

#include <geometry.h>
#include <kernels.h>

#include <array>
#include <string>

namespace neuron::kmd {

std::optional<kernels::Fault> build_dma_runs(const neuron_cmd &cmd, const gate::Operands &ops,
					     std::vector<DmaCopy> *copies)
{
	copies->clear();
	const neuron_tensor_desc &dst = cmd.operands[0], &src = cmd.operands[1];
	if (dst.dtype != src.dtype)
		return kernels::Fault{NEURON_FAULT_BAD_OPERAND,
				      "COPY on a DMA queue converts dtype " + std::to_string(src.dtype) + " to " +
					      std::to_string(dst.dtype) +
					      ": the kmd backend's DMA engine moves bytes; convert on a core queue"};
	if (kernels::numel(dst) == 0)
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
		return kernels::Fault{NEURON_FAULT_BAD_OPERAND,
				      "strided COPY needs " + std::to_string(count) + " contiguous runs; the kmd backend's DMA "
				      "takes at most " + std::to_string(kMaxDmaRuns) + " per command: copy into a dense "
				      "tensor on a core queue first"};
	const gate::Placement &to = ops.where[0], &from = ops.where[1];
	copies->reserve(count);
	std::array<int64_t, NEURON_MAX_DIMS> idx{};
	for (uint64_t r = 0; r < count; ++r) {
		int64_t od = 0, os = 0;
		for (int i = 0; i < k; ++i) {
			od += idx[i] * dst.strides[i];
			os += idx[i] * src.strides[i];
		}
		copies->push_back({from.handle, from.handle_offset + static_cast<uint64_t>(os) * elem, to.handle,
				   to.handle_offset + static_cast<uint64_t>(od) * elem, run * elem});
		for (int i = k - 1; i >= 0; --i) {
			if (++idx[i] < dst.sizes[i])
				break;
			idx[i] = 0;
		}
	}
	return std::nullopt;
}

} // namespace neuron::kmd
