// The payload of the compute jobs neurond submits to neuron.ko: the tiles its
// scheduler picked for one physical core, for the engine neurond attached to run.
// The kernel treats it as opaque bytes (at most the driver's MAX_CMD_SIZE); it is
// the contract between the scheduler and the device, as a command stream is on
// hardware, and both sides of it live in this directory.
//
// Two forms, told apart by the first four bytes:
//  - tile jobs (magic "NTJ1"): a header, then entries. Each entry carries a whole
//    command as the gate admitted it, the tile budget the scheduler planned it with
//    (sched/tiling.h: the engine plans the same tiles from the same inputs), which
//    tile to run (or the whole command), and where the chain's state lies in
//    device memory (sched/chain_partials.h), so chains that carry partial results
//    across tiles split on this backend exactly as in process;
//    A TILE_KERNEL entry (kTileKernel) runs one step of a tile kernel (a loop
//    iteration; tile = the step) with the kernel's program and its saved state
//    (cursor, SBUF/PSUM) in a per-command BO (kernel_job.h);
//  - a plain array of struct neuron_cmd, each run whole (tests/kmd and other
//    simple clients of the driver).
// Either way every command is checked by the gate against the job's BO list
// before the first one runs (kmd_engine.cpp), so a bad job changes nothing.
#pragma once

#include <sched/tiling.h>

#include <neuron/cmd.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace neuron::kmd {

inline constexpr uint32_t kTileJobMagic = 0x314a544e; // "NTJ1" (little-endian)
inline constexpr uint64_t kWholeCommand = ~0ull;
inline constexpr uint64_t kChainPartials = 1; // TileJobEntry::flags
inline constexpr uint64_t kTileKernel = 2;    // a TILE_KERNEL step: program_* and state_* name its BO

struct TileJobHeader {
	uint32_t magic = kTileJobMagic;
	uint32_t count = 0;   // entries that follow
	uint32_t threads = 1; // host threads the engine may use for the job
	uint32_t reserved = 0;
};

struct TileJobEntry {
	neuron_cmd cmd;                     // wait fields zero: the scheduler honoured them
	uint64_t tile = kWholeCommand;      // index in sched::plan_tiles(cmd, budget, 1)
	uint64_t matmul_macs = 0;           // the budget it was planned with
	uint64_t elements = 0;
	uint64_t transcendental_elements = 0;
	uint64_t flags = 0;                 // kChainPartials: the plan keeps partials per chain
	uint64_t state_address = 0;         // chain-state region (tenant device address), 0: none
	uint64_t state_slot_bytes = 0;      // per chain
	uint64_t state_chains = 0;
	uint64_t program_address = 0;       // kTileKernel: the tile program's wire form (tenant device address)
	uint64_t program_bytes = 0;

	sched::TileBudget budget() const;
};

// Builds a tile job's payload.
class TileJobWriter {
public:
	explicit TileJobWriter(uint32_t threads) { header_.threads = threads; }
	void add(const TileJobEntry &e) { entries_.push_back(e); }
	size_t size() const { return entries_.size(); }
	// Header and entries, contiguous.
	std::vector<std::byte> bytes() const;

private:
	TileJobHeader header_;
	std::vector<TileJobEntry> entries_;
};

// A payload read back: entries (plain commands become whole-command entries).
// False with *why if it is neither form or is cut short.
bool read_tile_job(std::span<const std::byte> payload, TileJobHeader *header, std::vector<TileJobEntry> *entries,
		   std::string *why);

} // namespace neuron::kmd
