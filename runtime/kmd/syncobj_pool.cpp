#include "syncobj_pool.h"

#include "kmd.h"

#include <xf86drm.h>

#include <algorithm>
#include <cerrno>

namespace neuron::kmd {

uint32_t SyncobjPool::take(const std::string &what)
{
	if (!free_.empty()) {
		const uint32_t h = free_.back();
		free_.pop_back();
		return h;
	}
	uint32_t h = 0;
	if (drmSyncobjCreate(fd_, 0, &h))
		throw Error(errno, "creating a syncobj for " + what);
	created_ = std::max(created_, h);
	return h;
}

void SyncobjPool::give_back(uint32_t handle)
{
	// Reset cannot fail on a handle of this file; if it did, the syncobj would
	// carry an old fence into its next job, so it is left out of the pool.
	if (drmSyncobjReset(fd_, &handle, 1) == 0)
		free_.push_back(handle);
}

uint32_t SyncobjPool::reclaim_kept()
{
	uint32_t found = 0;
	for (uint32_t h = 1;; ++h) {
		uint64_t point = 0;
		if (drmSyncobjQuery(fd_, &h, &point, 1) != 0)
			break; // ENOENT: past the last one (they are dense, see the header)
		++found;
	}
	// Handed out lowest first, as a fresh file's would be.
	for (uint32_t h = found; h >= 1; --h)
		give_back(h);
	created_ = std::max(created_, found);
	return found;
}

} // namespace neuron::kmd
