// The kmd backend's DMA runs: a DMA queue's COPY, already admitted and resolved
// by the gate (gate/admit.h), cut into contiguous runs, one kmd::DmaCopy each,
// for the driver's DMA jobs (KmdDmaRunner queues them). This file only decides
// what moves where.
#pragma once

#include "kmd.h"

#include <gate/admit.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace neuron::kmd {

// Contiguous runs a strided DMA COPY may need: past it the command faults (copy
// into a dense tensor on a core queue first) rather than fill many jobs.
inline constexpr uint64_t kMaxDmaRuns = 1ull << 16;

// The runs of `cmd` (a COPY) whose operands `ops` placed in driver buffers
// (Placement::handle, handle_offset); empty when a side has no bytes. Or the
// fault the command raises.
std::optional<kernels::Fault> build_dma_runs(const neuron_cmd &cmd, const gate::Operands &ops,
					     std::vector<DmaCopy> *copies);

} // namespace neuron::kmd
