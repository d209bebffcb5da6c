// The kmd backend's DMA-run builder: a DMA queue's COPY command checked against
// its tenant's memory (as the emu DMA engine checks it) and cut into contiguous
// runs, one kmd::DmaCopy each, for the driver's DMA jobs. KmdPump::submit_dma
// queues the runs as jobs; this file only decides what moves where.
#pragma once

#include "kmd_memory.h"

#include <fault.h>
#include <kmd.h>
#include <neuron/cmd.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace neuron::daemon {

// Contiguous runs a strided DMA COPY may need: past it the command faults (copy
// into a dense tensor on a core queue first) rather than fill many jobs.
inline constexpr uint64_t kMaxDmaRuns = 1ull << 16;

// Bytes of a staged host buffer (kmd::HostKind::Staged): the DMA reads and writes
// the daemon's copy of it, so they are copied in before the job that reads them
// (KmdContext::stage_in) and out after the job that writes them (stage_out).
struct KmdStagedBytes {
	uint32_t host_buffer = 0;                // the tenant's handle (neuron_tensor_desc::host_buffer)
	const kmd::HostBuffer *buffer = nullptr; // its import into the queue's device context
	uint64_t offset = 0, size = 0;
};

struct KmdDmaRuns {
	std::vector<kmd::DmaCopy> copies;        // in order; empty: a side has no bytes, nothing to move
	std::optional<KmdStagedBytes> stage_in;  // the source, when it is a staged host buffer
	std::optional<KmdStagedBytes> stage_out; // the destination, when it is a staged host buffer
};

// Fills *runs for `cmd`, a COPY that passed kernels::check_semantics, on a DMA
// queue of `device`; or returns the fault the command raises. Called with
// memory.mutex held shared: the buffers *runs points to stay valid while it is.
std::optional<kernels::Fault> build_dma_runs(const neuron_cmd &cmd, const KmdMemory &memory, uint32_t device,
					     KmdDmaRuns *runs);

} // namespace neuron::daemon
