// The data movement of collective groups (daemon/collective_run.h) between
// tenants' device memory, on whichever backend holds it. The daemon plans a
// collective as chunk-sized copies and reductions between its members' operand
// regions; a mover carries them out where the memory lies:
//  - emu: in this process (memmove, kernels::collective_reduce on HBM neurond maps);
//  - kmd: as jobs of the device: each member's buffer is shared into a file of
//    neurond's own through PRIME, copies are DMA jobs and reductions compute jobs
//    of that file (runtime/kmd/collective_job.h), so bytes move HBM to HBM by the
//    device (between two devices through a host buffer both DMA engines reach)
//    and the CPU copies none of them.
//
// A mover serves one collective: bind its regions, issue work, finish. Calls may
// be queued and run later (kmd) but always in the order issued; finish() waits
// for all of them. Owner: the collective runner's thread, with every bound
// member's TenantMemory lock held shared from bind() to finish() (so no region
// is freed meanwhile).
#pragma once

#include "tenant_context.h"

#include <kernels/collective.h>

#include <cstdint>
#include <span>
#include <string>

namespace neuron::backend {

// Bytes [address, address + bytes) of one member's device memory on `device`.
struct MemberRegion {
	TenantContext *ctx = nullptr;
	uint32_t device = 0;
	uint64_t address = 0;
	uint64_t bytes = 0;
};

class CollectiveMover {
public:
	virtual ~CollectiveMover() = default;
	// Makes `r` usable as region *id; "" or why not (not inside one allocation
	// of that tenant, or on memory this backend cannot reach from the others).
	// A region of 0 bytes binds to nothing and must not be used.
	virtual std::string bind(const MemberRegion &r, int *id) = 0;
	// Bytes moved per step between the pacer's checks (collective_run.cpp): a
	// step should stay short next to an inference command.
	virtual uint64_t chunk_bytes() const = 0;
	// [src + src_offset, +bytes) to [dst + dst_offset, +bytes); the two may
	// overlap (as memmove).
	virtual void copy(int dst, uint64_t dst_offset, int src, uint64_t src_offset, uint64_t bytes) = 0;
	// dst[i] = srcs[0][i] op ... op srcs[n-1][i] for `count` elements of `dtype`,
	// each source read at src_offset, dst written at dst_offset; dst may be one
	// of the sources at the same offset (kernels/collective.h).
	virtual void reduce(int dst, uint64_t dst_offset, std::span<const int> srcs, uint64_t src_offset,
			    uint64_t count, uint8_t dtype, kernels::CollectiveReduce op) = 0;
	// Between chunks: issued work may run on; waits only so that little is
	// queued ahead (the pacer's yields then act soon).
	virtual void step_done() {}
	// Waits for all issued work; "" or why it failed (some bytes may have moved).
	virtual std::string finish() = 0;
};

} // namespace neuron::backend
