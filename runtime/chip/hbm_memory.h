// The bytes behind one device's HBM: a sparse anonymous mapping, so a 96 GiB device
// costs nothing until written, and zeroing a freed range hands its pages back.
#pragma once

#include <cstddef>
#include <cstdint>

namespace neuron::chip {

class HbmMemory {
public:
	// Throws std::system_error if the address space cannot be reserved.
	explicit HbmMemory(uint64_t bytes);
	~HbmMemory();
	HbmMemory(const HbmMemory &) = delete;
	HbmMemory &operator=(const HbmMemory &) = delete;

	// Host pointer of HBM offset `offset` (no bounds check: callers validated).
	std::byte *at(uint64_t offset) const { return base_ + offset; }
	uint64_t size() const { return bytes_; }
	// Zeroes [offset, offset + len): whole pages are dropped (they read back as
	// zero and stop costing memory), partial pages are cleared.
	void zero(uint64_t offset, uint64_t len);

private:
	std::byte *base_;
	uint64_t bytes_;
};

} // namespace neuron::chip
