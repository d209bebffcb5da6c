// Backing the pages a tiled command will write before its tiles run, in bounded
// chunks between which the core can change tenants.
//
// Simulated HBM is host memory backed lazily (hbm_memory.h), and so is a fresh
// packing arena (gemm_packs.h): the first write to each page takes a page fault,
// dearer still for memory the VM itself has not touched yet. A matmul tile's
// output block at a 16 KiB row stride touches a page per row, so a tile writing a
// fresh output paid hundreds of faults on top of its multiply (bench-runtime's
// longest tile was 1.0-1.5 ms before this file). Backing the output and the arena
// first moves that cost out of the
// tiles, into steps of at most kStepPages faults each, between which the core can
// change tenants like between tiles.
//
// A thread claims a chunk of kChunkBytes, asks mincore which of its pages are
// backed (one cheap call: a training step reuses its buffers, so usually all),
// and backs the others kStepPages at a time. A thread that stops for a waiting
// tenant gives the rest of its chunk back, for whoever resumes the command.
//
// Backing never changes memory contents, so it needs no lock: if the tenant frees
// the buffer meanwhile, pages of the HBM mapping are backed for nothing.
//
// Owner: LogicalCore::InFlight. reset() by the engine that starts the command,
// claim() and give_back() by any thread running it (an atomic counter over the
// ranges; mutex_ guards the chunks given back); a Chunk belongs to the thread that
// claimed it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

namespace neuron::chip {

class Prefault {
public:
	static constexpr size_t kChunkBytes = size_t{1} << 20; // 256 pages
	static constexpr size_t kStepPages = 8;

	struct Range {
		std::byte *p = nullptr;
		size_t len = 0;
	};

	// One claimed chunk and how far backing it has got.
	class Chunk {
	public:
		explicit Chunk(Range r);
		// Backs the next (at most kStepPages) pages that are not backed yet; false
		// when none are left.
		bool step();
		// The part not stepped through yet (empty when done).
		Range rest() const;

	private:
		Range r_;
		size_t pages_ = 0, next_ = 0;
		unsigned char resident_[kChunkBytes / 4096];
	};

	// The ranges to back (the output, the packing arena), widened to whole pages.
	// A range under kStepPages pages is skipped: a tile faults that in quickly.
	void reset(Range output, Range arena);

	// The next chunk, or nullopt when all are claimed.
	std::optional<Range> claim();
	// A claimed chunk's rest, left for the next claim.
	void give_back(Range rest);

private:
	std::mutex mutex_;
	std::vector<Range> returned_;
	Range ranges_[2];
	size_t total_ = 0; // both ranges, each rounded up to whole chunks
	std::atomic<size_t> next_{0};
};

} // namespace neuron::chip
