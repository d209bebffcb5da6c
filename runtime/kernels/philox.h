// Philox4x32-10, the counter-based generator of ISA 1.4's random ops (cmd.h):
// Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy as 1, 2, 3"
// (SC 2011), the generator of Random123, curand and PyTorch's CUDA backend.
// Ten rounds of two 32x32->64 multiplies with a Weyl-sequence key schedule;
// tests/kernels/test_rng.cpp checks it against the paper's published
// known-answer vectors.
#pragma once

#include <array>
#include <cstdint>

namespace neuron::kernels {

using PhiloxWords = std::array<uint32_t, 4>;

inline PhiloxWords philox4x32_10(PhiloxWords ctr, uint32_t k0, uint32_t k1)
{
	constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
	constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
	for (int round = 0; round < 10; ++round) {
		const uint64_t p0 = uint64_t{kMul0} * ctr[0], p1 = uint64_t{kMul1} * ctr[2];
		const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
		const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
		ctr = {hi1 ^ ctr[1] ^ k0, lo1, hi0 ^ ctr[3] ^ k1, lo0};
		k0 += kWeyl0;
		k1 += kWeyl1;
	}
	return ctr;
}

// The words of position `pos` of a command with seed i[1] and offset i[2].
inline PhiloxWords philox_at(uint64_t seed, uint64_t offset, uint64_t pos)
{
	return philox4x32_10({static_cast<uint32_t>(pos), static_cast<uint32_t>(pos >> 32), static_cast<uint32_t>(offset),
			      static_cast<uint32_t>(offset >> 32)},
			     static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// [0, 1) from one word (32 bits: every value a multiple of 2^-32).
inline double unit_u32(uint32_t w) { return w * 0x1p-32; }
// [0, 1) with 24 bits, exact in f32.
inline float unit_u24(uint32_t w) { return static_cast<float>(w >> 8) * 0x1p-24f; }

} // namespace neuron::kernels
