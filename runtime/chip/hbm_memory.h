// The bytes behind one device's HBM: a sparse mapping, so a 96 GiB device costs
// nothing until written, and zeroing a freed range hands its pages back.
//
// Two kinds: private anonymous memory (neurond without restart survival), or a
// memfd mapped shared, which outlives the process when neurond hands the memfd to
// its supervisor (daemon/README.md, "Restart with tenants alive"): a new neurond
// maps the same memfd and finds every byte where the old one left it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace neuron::chip {

class HbmMemory {
public:
	// Private anonymous memory. Throws std::system_error if the address space
	// cannot be reserved.
	explicit HbmMemory(uint64_t bytes);
	// Memory in a memfd: a new one (fd < 0), or the kept one of an earlier neurond
	// (fd >= 0, taken over: it must hold exactly `bytes`). Throws
	// std::system_error or std::runtime_error (a kept memfd of another size).
	HbmMemory(uint64_t bytes, int fd, const char *name);
	~HbmMemory();
	HbmMemory(const HbmMemory &) = delete;
	HbmMemory &operator=(const HbmMemory &) = delete;

	// Host pointer of HBM offset `offset` (no bounds check: callers validated).
	std::byte *at(uint64_t offset) const { return base_ + offset; }
	uint64_t size() const { return bytes_; }
	// The memfd behind it, or -1 (anonymous).
	int memfd() const { return fd_; }
	// Zeroes [offset, offset + len): whole pages are dropped (they read back as
	// zero and stop costing memory), partial pages are cleared.
	void zero(uint64_t offset, uint64_t len);

private:
	void map(int flags);
	// Drops whole pages [offset, offset + len) (page-aligned): false if the
	// kernel refused (the caller then clears them by hand).
	bool drop_pages(uint64_t offset, uint64_t len);

	std::byte *base_ = nullptr;
	uint64_t bytes_;
	int fd_ = -1;
};

} // namespace neuron::chip
