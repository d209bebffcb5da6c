// The packed operand blocks of one matmul command, kept across its tiles.
//
// The simulated Tensor engine multiplies operands laid out in panels (packed_gemm.h).
// A tiled matmul reads every block of a and b once per tile that uses it: a block
// of a rows in every tile of its block row, a block of b in every tile of its block
// column. Packing a block again for each (as a BLAS call per tile must) kept the
// tiled multiply at 0.86-0.91 of one whole-matrix BLAS call at 4096 (bench-runtime,
// before this file); packing it once per command and reusing it does not cost that.
//
// Owner: the chip's in-flight command (LogicalCore::InFlight) holds one, shared by
// the host threads running its tiles. A block is found by its address, dtype,
// extents and strides plus the panel width: within one command these name the same
// bytes, and a matmul's inputs are not written while it runs (its output may not
// overlap them). A tenant that rewrites an input from another queue mid-command
// races with the command, as on any accelerator; it can only see its own data.
//
// Locking: mutex_ guards the map, the byte count and the arena's fill mark; each
// entry is packed once, under its once_flag, by the first thread to need it, and
// is read-only after. reserve() and clear() may only run while no tile of the
// command runs (the engine calls them between commands).
#pragma once

#include "matrix.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace neuron::kernels {

// Host memory the pool of recycled packing buffers keeps for later matmuls.
inline constexpr size_t kPackPoolBytes = size_t{256} << 20;

// A float buffer aligned to a cache line, grown on demand, never shrunk. Its
// memory comes from and goes back to a process-wide pool of recycled buffers (up to
// kPackPoolBytes): a fresh buffer costs a page fault per 4 KiB on first touch,
// and the tiles of the next matmul would pay them all again.
class AlignedFloats {
public:
	AlignedFloats() = default;
	AlignedFloats(const AlignedFloats &) = delete;
	AlignedFloats &operator=(const AlignedFloats &) = delete;
	~AlignedFloats();

	// At least n floats; the old contents are lost. Throws std::bad_alloc.
	float *reserve(size_t n);
	float *data() const { return p_; }
	void release(); // back to the pool

private:
	float *p_ = nullptr;
	size_t n_ = 0;
};

class GemmPacks {
public:
	// Host memory one command's packed blocks may hold; a block past it is packed
	// per tile into the thread's own buffer instead (correct, only slower).
	static constexpr size_t kDefaultByteLimit = size_t{256} << 20;

	explicit GemmPacks(size_t byte_limit = kDefaultByteLimit) : limit_(byte_limit) {}

	// Starts a command: drops every block of the last one and sets aside one arena
	// for `floats` of packed blocks (at most the limit), so that the engine can back
	// its pages in bounded steps (chip/prefault.h) before the first tile instead of
	// a tile paying their faults. Only between commands. Throws std::bad_alloc.
	void reserve(size_t floats);
	std::byte *arena() const { return reinterpret_cast<std::byte *>(arena_.data()); }
	size_t arena_bytes() const { return arena_floats_ * sizeof(float); }

	// The packed copy of `m` in panels of `width` lanes (floats floats long),
	// written by pack() on first use: in the arena while it has room, else in a
	// buffer of its own. nullptr when the copy would pass the limit.
	// Throws std::bad_alloc.
	const float *get(const detail::Mat &m, int width, size_t floats, const std::function<void(float *)> &pack);

	// Drops every block and gives the memory back to the pool. Only between commands.
	void clear();
	size_t bytes() const;

private:
	struct Key {
		const std::byte *p;
		uint8_t dt;
		int width;
		int64_t rows, cols, rs, cs;
		bool operator==(const Key &) const = default;
	};
	struct KeyHash {
		size_t operator()(const Key &k) const;
	};
	struct Entry {
		std::once_flag once;
		float *data = nullptr; // in the arena, or own.data()
		AlignedFloats own;
	};

	const size_t limit_;
	mutable std::mutex mutex_;
	std::unordered_map<Key, std::shared_ptr<Entry>, KeyHash> map_;
	size_t bytes_ = 0;
	AlignedFloats arena_;
	size_t arena_floats_ = 0; // reserved
	size_t arena_used_ = 0;   // handed out, in floats
};

// Floats one packed block of `lanes` rows of a (or columns of b) x K takes at most,
// in either panel width, with its slot rounded to a cache line.
size_t pack_block_floats(int64_t lanes, int64_t K);

// Floats the packed blocks of one M x N x K matmul tile (its a and b blocks) take
// at most, 0 when such a tile is not multiplied from packed panels (packed_gemm.h).
size_t tile_pack_floats(int64_t M, int64_t N, int64_t K);

} // namespace neuron::kernels
