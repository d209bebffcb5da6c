// The compute job of a collective group's reduction on kmd (backend/collective_mover.h):
// dst = srcs[0] op srcs[1] op ... op srcs[n-1], element-wise, as kernels/collective.h
// computes it on emu (the same function, so the same bits). neurond submits it on a
// file of its own into which it imported every member's buffer (PRIME); the engine
// checks every range against the job's BO list before it touches a byte, as it
// checks tile jobs (kmd_engine.cpp).
//
// Told apart from the other payloads (tile_job.h) by its first four bytes.
#pragma once

#include <kernels/collective.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace neuron::kmd {

inline constexpr uint32_t kCollectiveJobMagic = 0x31524e43; // "CNR1" (little-endian)
// Most sources one job reduces: the driver's BO list (256) holds them and the destination.
inline constexpr uint32_t kMaxCollectiveSources = 255;

struct CollectiveJobHeader {
	uint32_t magic = kCollectiveJobMagic;
	uint8_t dtype = 0;     // enum neuron_dtype, kernels::is_collective_dtype
	uint8_t op = 0;        // kernels::CollectiveReduce
	uint16_t sources = 0;  // 1..kMaxCollectiveSources addresses follow
	uint64_t count = 0;    // elements
	uint64_t dst = 0;      // tenant-visible device addresses (kernel HBM address + base)
};

std::vector<std::byte> collective_job_bytes(const CollectiveJobHeader &h, std::span<const uint64_t> srcs);

// True if the payload is a collective job (its magic), whatever else it holds.
bool is_collective_job(std::span<const std::byte> payload);

// Reads one back: false with *why if it is malformed (length, source count, dtype,
// op, count, or dst overlapping a source other than at the first source's address).
bool read_collective_job(std::span<const std::byte> payload, CollectiveJobHeader *h, std::vector<uint64_t> *srcs,
			 std::string *why);

} // namespace neuron::kmd
