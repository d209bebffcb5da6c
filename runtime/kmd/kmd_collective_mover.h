// Collective groups' data movement on kmd (backend/collective_mover.h). Members'
// device memory lies in BOs of their own driver files, which neurond never maps.
// So for each collective the mover shares every member BO it needs into a file of
// neurond's own on that BO's device (PRIME: the driver lets device BOs go only to
// files of the same device), and moves the bytes with those files' jobs: copies as
// DMA jobs, reductions as compute jobs of collective_job.h form, which neurond's
// engine checks against the job's BO list like any job. A copy within one BO whose
// ranges overlap, and a reduction whose destination overlaps a later source, go
// through a scratch BO.
//
// Members on different devices of the host: a device's DMA engine reaches its own
// HBM and host memory, not another device's HBM (the driver has no peer DMA). So
// bytes cross devices through a chunk-sized host BO of neurond's, shared by PRIME
// between the two devices' collective files: the source device's DMA writes it, the
// destination device's DMA reads it (as NCCL's shared-memory transport when GPUs
// have no peer access); the CPU copies nothing. A reduction's sources from other
// devices are first brought that way into gather BOs on the destination's device.
//
// Order: every job runs after the one issued before it. Within a device a job waits
// for the previous one of that device's file in the kernel; when the next job goes
// to another device the mover waits for the last one on the host first (a fence of
// one file cannot be waited for by another's job).
// The imports are closed when the collective ends, so a member that frees its
// memory afterwards gets it back.
//
// Owner: the collective runner's thread (one collective at a time, so each
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

	// One device's part of the collective: neurond's collective file there and
	// what the collective made in it.
	struct Lane {
		uint32_t device = 0;
		KmdContext *file = nullptr;
		uint32_t core = 0; // where its reductions run (reduce_core: not an inference core)
		std::map<std::pair<int, uint32_t>, uint32_t> imports; // (member file fd, BO handle) -> handle here
		std::optional<DeviceBuffer> scratch;                  // bounce for overlapping copies
		std::vector<DeviceBuffer> gather; // other devices' reduction sources, one chunk each
		Fence last;                       // the latest job here: the next one here waits for it
		bool last_compute = false;
	};
	// A host BO carrying bytes from device `from` to `to`: made in from's file,
	// imported into to's.
	struct Stage {
		HostBuffer host;
		uint32_t imported = 0; // its handle in the destination lane's file
	};
	struct Region {
		uint32_t device = 0;
		uint32_t bo = 0;        // the import's handle in that device's collective file
		uint64_t bo_offset = 0; // of the region's first byte in that BO
		uint64_t address = 0;   // tenant-visible device address (the same in every file)
	};

	Lane &lane(uint32_t device);
	// Makes `l` the lane of the next job: submits the copies queued for another
	// lane and waits on the host for its last job.
	void enter(Lane &l);
	void flush_copies();
	void queue_copy(Lane &l, const DmaCopy &c);
	// [src BO + from, +bytes) on one device to [dst BO + to, +bytes) on another,
	// a chunk at a time through their stage.
	void copy_across(Lane &dl, uint32_t dst_bo, uint64_t to, Lane &sl, uint32_t src_bo, uint64_t from,
			 uint64_t bytes);
	Stage &stage(Lane &from, Lane &to);
	void submit_reduce(Lane &l, uint32_t dst_bo, uint64_t dst_address, std::span<const uint32_t> src_bos,
			   std::span<const uint64_t> src_addresses, uint64_t count, uint8_t dtype,
			   kernels::CollectiveReduce op);
	uint32_t scratch(Lane &l);
	const DeviceBuffer &gather(Lane &l, size_t i);
	void fail(const std::string &why);
	std::string wait(Lane &l, const Fence &f, bool compute);
	void release(Lane &l);

	KmdBackend &backend_;
	std::map<uint32_t, Lane> lanes_; // by device
	std::map<std::pair<uint32_t, uint32_t>, Stage> stages_; // (from device, to device)
	std::vector<Region> regions_;
	Lane *current_ = nullptr;      // the lane of the latest job (and of pending_)
	std::vector<DmaCopy> pending_; // copies of current_ not yet submitted
	uint64_t pending_bytes_ = 0;
	Lane *step_lane_ = nullptr;    // the latest job of the previous step, on that lane
	Fence step_fence_;
	bool step_compute_ = false;
	std::string error_; // the first failure; nothing is issued after it
	bool finished_ = false;
};

} // namespace neuron::kmd
