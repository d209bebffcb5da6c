// Which of a program's arguments and buffers a replay interrupted by a restart
// needs put back before it runs again (daemon/README.md "Restart with tenants
// alive", programs). A rerun from the first node is exact if every byte the replay
// reads before writing it holds what it held when the replay began; bytes the
// replay overwrites before any read of them need no copy. torch.compile programs
// keep their intermediates in buffers that each replay writes before it reads
// them, so most of their bytes need none.
#pragma once

#include <cstdint>
#include <vector>

namespace neuron::program {

// One node's access to an argument or buffer, as validation records it.
struct RegionAccess {
	uint64_t lo, hi; // bytes [lo, hi) of the region
	uint32_t pos;    // the node's position in execution order
	bool write;      // the node writes these bytes
	bool read;       // it reads them (an input, or an output it reads or accumulates into)
	bool covers;     // it overwrites every byte of [lo, hi) without reading them first
};

// Per region (accesses[r] in execution order): 1 if some node writes it and some
// node may read a byte of it that no earlier node overwrote. Relies on validation's
// memory-plan rule: every two overlapping accesses of different nodes, one of them
// a write, are ordered by the dependency edges, so "earlier in execution order" is
// "happens before" for every pair that matters.
std::vector<uint8_t> read_before_written(const std::vector<std::vector<RegionAccess>> &accesses);

} // namespace neuron::program
