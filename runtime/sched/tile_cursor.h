// Hands the tiles of one command to the host threads of a NeuronCore, so each
// thread runs whole tiles on its own (one kernel call per tile, no
// fork/join inside a tile) and the core can switch tenants after any tile.
//
// Tiles come in chains: the K tiles of one matmul output block add into it and must
// run in order (tiling.h); chains are independent of each other, and every other
// op's tiles are chains of one. A thread claims a chain and runs it in order. When
// the core must switch before the chain ends, the thread parks the chain at its next
// tile, and whoever claims next (this core later, or another core that picks up the
// logical core) resumes parked chains first, so a chain never runs on two threads.
//
// Threads and locks: the cursor belongs to the logical core's in-flight command
// (LogicalCore::InFlight, owned by the engine that holds the claim). While that
// engine runs a tile group, its worker threads share the cursor under mutex_, taken
// once per chain, not per tile.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

namespace neuron::sched {

class TileCursor {
public:
	struct Claim {
		uint64_t chain = 0;
		uint64_t next = 0; // the chain's next tile, 0-based within the chain
	};

	// A command of `tiles` tiles in chains of chain_length (which must divide it).
	void reset(uint64_t tiles, uint64_t chain_length);

	uint64_t chain_length() const { return chain_length_; }
	// The command-wide index of a claim's next tile (narrow_to_tile's index).
	uint64_t tile_index(const Claim &c) const { return c.chain * chain_length_ + c.next; }

	// A parked chain if there is one, else the next unstarted chain; nullopt when
	// every chain is claimed or done.
	std::optional<Claim> claim();
	// Gives back a claimed chain that stopped before its end (c.next < chain_length).
	void park(const Claim &c);
	// A claimed chain ran its last tile.
	void finish();

	// Every chain finished (call with no claim outstanding).
	bool done() const;
	// Chains that could start now: parked plus unstarted (how many threads can help).
	uint64_t claimable() const;

private:
	mutable std::mutex mutex_;
	uint64_t chains_ = 0;
	uint64_t chain_length_ = 1;
	uint64_t next_chain_ = 0;
	uint64_t finished_ = 0;
	std::vector<Claim> parked_;
};

} // namespace neuron::sched
