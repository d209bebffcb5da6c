// TILE_KERNEL entries of a tile job (tile_job.h), on the engine's side. The
// engine keeps nothing of a kernel between jobs: between two steps the scheduler
// may run another tenant on the core, and the kernel may resume on another
// physical core. So, as a real core's context switch does, a job carries all a
// step needs: the kernel's tile program (its wire form in the command's BO,
// validated here for the device's profile: neurond's pointers are never trusted),
// the HBM arguments (the command's operands, through the gate like any), which
// step, and the kernel's state (cursor and the SBUF/PSUM bytes it uses,
// tile::Execution::save) in the same BO. A step loads the state, runs, and stores
// it back.
#pragma once

#include "tile_job.h"

#include <gate/admit.h>
#include <tile/program.h>

#include <deque>
#include <memory>
#include <mutex>
#include <optional>

namespace neuron::kmd {

// Validated programs by content, so a kernel's steps validate its program once:
// a hit compares the whole wire form (a hash only finds the candidate), so a
// program is never run for bytes it was not validated from. Bounded. One per
// engine, so for one profile.
class TileProgramCache {
public:
	std::shared_ptr<const tile::TileProgram> get(std::span<const std::byte> wire, const chip::OnChip &onchip,
						     std::string *why);

private:
	struct Entry {
		size_t hash;
		std::vector<std::byte> wire;
		std::shared_ptr<const tile::TileProgram> program;
	};
	std::mutex mutex_;
	std::deque<Entry> entries_; // the most recent last
};

struct CheckedKernel {
	std::shared_ptr<const tile::TileProgram> program;
	std::byte *state = nullptr; // null: the kernel is one step, run whole
	uint64_t state_bytes = 0;
};

// The entry's program and state placed in the job's BOs (program readable, state
// writable), the program validated for `onchip` (null: the device's profile is
// unknown, kernels are refused), the node's operands matching its arguments, the
// step inside the kernel. The operands themselves went through the gate before.
std::optional<kernels::Fault> check_kernel(const TileJobEntry &e, const gate::MemorySpace &space,
					   const chip::OnChip *onchip, TileProgramCache &cache, CheckedKernel *out);
// Runs the step over `ops` (the command's operands, resolved: the kernel's HBM
// arguments): state loaded (unless step 0), one loop iteration, state stored
// (unless the kernel ended). Lanes: none (the step runs in order on one thread).
std::optional<kernels::Fault> run_kernel(const TileJobEntry &e, const CheckedKernel &k, const gate::Operands &ops);

} // namespace neuron::kmd
