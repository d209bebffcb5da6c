#include "hbm_memory.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <stdexcept>
#include <system_error>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace neuron::chip {

HbmMemory::HbmMemory(uint64_t bytes) : bytes_(bytes) { map(MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE); }

HbmMemory::HbmMemory(uint64_t bytes, int fd, const char *name) : bytes_(bytes), fd_(fd)
{
	if (fd_ < 0) {
		fd_ = memfd_create(name, MFD_CLOEXEC);
		if (fd_ < 0)
			throw std::system_error(errno, std::generic_category(), "memfd_create for simulated HBM");
		// Sparse: the size costs nothing until pages are written.
		if (ftruncate(fd_, static_cast<off_t>(bytes)) != 0) {
			const int e = errno;
			close(fd_);
			throw std::system_error(e, std::generic_category(),
						"cannot size the simulated HBM memfd to " + std::to_string(bytes) + " bytes");
		}
	} else {
		struct stat st;
		if (fstat(fd_, &st) != 0 || static_cast<uint64_t>(st.st_size) != bytes) {
			const uint64_t had = fstat(fd_, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
			close(fd_);
			throw std::runtime_error("the kept HBM " + std::string(name) + " holds " + std::to_string(had) +
						 " bytes, this configuration has " + std::to_string(bytes) +
						 ": start with the same --profile/--hbm-mib, or clear the kept state");
		}
	}
	try {
		map(MAP_SHARED | MAP_NORESERVE);
	} catch (...) {
		close(fd_);
		throw;
	}
}

void HbmMemory::map(int flags)
{
	void *p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, flags, fd_, 0);
	if (p == MAP_FAILED)
		throw std::system_error(errno, std::generic_category(),
					"cannot reserve " + std::to_string(bytes_) + " bytes of simulated HBM");
	base_ = static_cast<std::byte *>(p);
}

HbmMemory::~HbmMemory()
{
	munmap(base_, bytes_);
	if (fd_ >= 0)
		close(fd_);
}

bool HbmMemory::drop_pages(uint64_t offset, uint64_t len)
{
	// Private anonymous memory: the next touch maps the zero page. A memfd: the
	// pages must leave the file itself (MADV_DONTNEED would only unmap them here
	// and they would read back with their old bytes).
	if (fd_ < 0)
		return madvise(at(offset), len, MADV_DONTNEED) == 0;
	return fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
			 static_cast<off_t>(len)) == 0;
}

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
	if (!drop_pages(first_page, last_page - first_page))
		std::memset(at(first_page), 0, last_page - first_page);
	std::memset(at(last_page), 0, end - last_page);
}

} // namespace neuron::chip
