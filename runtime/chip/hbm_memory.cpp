#include "hbm_memory.h"

#include <cerrno>
#include <cstring>
#include <system_error>
#include <sys/mman.h>
#include <unistd.h>

namespace neuron::chip {

HbmMemory::HbmMemory(uint64_t bytes) : bytes_(bytes)
{
	void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		throw std::system_error(errno, std::generic_category(),
					"cannot reserve " + std::to_string(bytes) + " bytes of simulated HBM");
	base_ = static_cast<std::byte *>(p);
}

HbmMemory::~HbmMemory() { munmap(base_, bytes_); }

void HbmMemory::zero(uint64_t offset, uint64_t len)
{
	static const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
	uint64_t first_page = (offset + page - 1) & ~(page - 1);
	uint64_t end = offset + len;
	uint64_t last_page = end & ~(page - 1);
	if (first_page >= last_page || last_page - first_page < 4 * page) {
		std::memset(at(offset), 0, len);
		return;
	}
	std::memset(at(offset), 0, first_page - offset);
	// MADV_DONTNEED on a private anonymous mapping: the next touch maps the zero page.
	if (madvise(at(first_page), last_page - first_page, MADV_DONTNEED) != 0)
		std::memset(at(first_page), 0, last_page - first_page);
	std::memset(at(last_page), 0, end - last_page);
}

} // namespace neuron::chip
