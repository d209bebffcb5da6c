// The Work of the hierarchical backend's point-to-point calls (hierarchical.h;
// its collectives' is a NeuronWork, hierarchical_queue.h).
//
// StagedWork: a point-to-point call's (or a coalesced batch's):
// the parts that run on (each a Work of this host's neurond group, or of gloo on
// host staging copies between hosts) and what lands on the device after them
// (a received staging copy, copied into the caller's tensor).
//
// The group's worker (hierarchical_queue.h) starts the parts in issue order and
// then says the Work is started; it does not wait for them, so a rank may post a
// send and then a recv (batch_isend_irecv, a ring) without waiting for its peer.
// wait() waits (on the host) until it is started, then for every part, then runs
// the landings on the caller's current stream (once): a received tensor holds its
// data for work queued after wait(), as after NCCL's. is_completed() says whether
// every part is done; the data of a recv between hosts lands only at wait(). A
// recv from any source has its source rank set by its landing (sourceRank()
// waits like wait()).
//
// Threads: add_part/add_landing/add_outputs/started on the worker, before
// started() (under mu_); wait() and the rest on the caller's thread (one Work is
// not shared between threads while unfinished).
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <vector>

namespace torch_neuron::dist {

class StagedWork : public c10d::Work {
public:
	StagedWork(int rank, c10d::OpType type) : c10d::Work(rank, type) {}
	// Before started(): a part to wait for, and what to do after the parts (with the
	// host copy it reads, held until then).
	void add_part(c10::intrusive_ptr<c10d::Work> part);
	void add_landing(std::function<void()> landing);
	void add_outputs(const std::vector<at::Tensor> &ts);
	// Every part is started (error: starting one failed; wait() rethrows it).
	void started(std::exception_ptr error = nullptr);
	// A landing's: the rank a recv from any source received from.
	void set_source_rank(int rank) { source_rank_ = rank; }

	bool isCompleted() override;
	bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
	int sourceRank() const override;
	std::vector<at::Tensor> result() override { return outputs_; }

private:
	std::mutex mu_;
	std::condition_variable started_cv_;
	bool started_ = false;
	std::exception_ptr start_error_;
	std::vector<c10::intrusive_ptr<c10d::Work>> parts_;
	std::vector<std::function<void()>> landings_;
	std::vector<at::Tensor> outputs_;
	bool landed_ = false;
	int source_rank_ = -1;
};

} // namespace torch_neuron::dist
