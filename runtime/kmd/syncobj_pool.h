// The syncobjs of one driver file, reused instead of destroyed, so that a new
// neurond can find every one an earlier neurond made in a file it adopts.
//
// The driver has no ioctl that lists a file's syncobj handles, and a kept file
// outlives the neurond that made its syncobjs (restart survival, daemon/
// README.md "kmd."). DRM gives a new syncobj the lowest free handle >= 1
// (idr_alloc(..., 1, 0) in drm_syncobj_get_handle), so a file whose syncobjs
// are never destroyed holds exactly handles 1..N: reclaim_kept() finds them by
// querying upwards until the first ENOENT, and the restart leaks none (before,
// every restart left the file's queue timelines and the status syncobjs of the
// jobs not reaped yet in it until the tenant exited).
//
// Not thread-safe: its KmdContext owns it and calls it under the context's mutex.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace neuron::kmd {

class SyncobjPool {
public:
	explicit SyncobjPool(int fd) : fd_(fd) {}

	// A syncobj with no fence (a new one when none is free). Throws Error.
	uint32_t take(const std::string &what);
	// Back to the pool, reset (its fence, if any, is dropped; a job still
	// running signals its own fence, not the syncobj).
	void give_back(uint32_t handle);
	// Adoption of a kept file: every syncobj it holds (handles 1..N) becomes
	// free. Returns N.
	uint32_t reclaim_kept();

	uint32_t created() const { return created_; } // syncobjs of the file (1..created)
	bool empty() const { return free_.empty(); }    // take() would make a new one

private:
	int fd_;
	uint32_t created_ = 0;
	std::vector<uint32_t> free_;
};

} // namespace neuron::kmd
