// Collective groups' data movement on kmd (backend/collective_mover.h). Members'
// device memory lies in BOs of their own driver files, which neurond never maps.
// So for each collective the mover shares every member BO it needs into a file of
// neurond's own on that device (PRIME: the driver lets device BOs go only to files
// of the same device), and moves the bytes with that file's jobs: copies as DMA
// jobs, reductions as compute jobs of collective_job.h form, which neurond's engine
// checks against the job's BO list like any job. The jobs run in the order issued
// (each waits for the one before); a copy within one BO whose ranges overlap, and
// a reduction whose destination overlaps a later source, go through a scratch BO.
// The imports are closed when the collective ends, so a member that frees its
// memory afterwards gets it back.
//
// Owner: the collective runner's thread (one collective at a time, so the
// device's collective file, KmdDeviceSlot::collective_context, is its alone).
#pragma once

#include "kmd.h"

#include <backend/collective_mover.h>

#include <map>
#include <optional>
#include <utility>
#include <vector>

namespace neuron::kmd {

class KmdBackend;

class KmdCollectiveMover final : public backend::CollectiveMover {
public:
	explicit KmdCollectiveMover(KmdBackend &backend) : backend_(backend) {}
	~KmdCollectiveMover() override; // finish() if not called

	std::string bind(const backend::MemberRegion &r, int *id) override;
	uint64_t chunk_bytes() const override { return kChunkBytes; }
	void copy(int dst, uint64_t dst_offset, int src, uint64_t src_offset, uint64_t bytes) override;
	void reduce(int dst, uint64_t dst_offset, std::span<const int> srcs, uint64_t src_offset, uint64_t count,
		    uint8_t dtype, kernels::CollectiveReduce op) override;
	void step_done() override;
	std::string finish() override;

private:
	// One job's worth: long enough that a job's fixed cost is small, short next to
	// an inference command's wait for the core.
	static constexpr uint64_t kChunkBytes = 1 << 20;
	struct Region {
		uint32_t bo = 0;       // the import's handle in the collective file
		uint64_t bo_offset = 0; // of the region's first byte in that BO
		uint64_t address = 0;   // tenant-visible device address (the same in every file)
	};
	void flush_copies();
	void submit_reduce(uint32_t dst_bo, uint64_t dst_address, std::span<const Region> srcs,
			   std::span<const uint64_t> src_addresses, uint64_t count, uint8_t dtype,
			   kernels::CollectiveReduce op);
	uint32_t scratch(); // a chunk-sized device BO of the collective file
	void fail(const std::string &why);
	std::string wait(const Fence &f, bool compute);

	KmdBackend &backend_;
	std::optional<uint32_t> device_;
	KmdContext *files_ = nullptr; // the device's collective file
	uint32_t core_ = 0;           // where its reductions run
	std::map<std::pair<int, uint32_t>, uint32_t> imports_; // (member file fd, BO handle) -> handle here
	std::vector<Region> regions_;
	std::vector<DmaCopy> pending_; // copies not yet submitted
	uint64_t pending_bytes_ = 0;
	std::optional<DeviceBuffer> scratch_;
	Fence last_;          // the latest job: the next one waits for it
	bool last_compute_ = false;
	Fence step_fence_;    // the latest job of the previous step
	bool step_compute_ = false;
	std::string error_;   // the first failure; nothing is issued after it
	bool finished_ = false;
};

} // namespace neuron::kmd
