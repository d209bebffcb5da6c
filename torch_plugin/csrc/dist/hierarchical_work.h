// The Works of the hierarchical backend (hierarchical.h).
//
// DoneWork: a collective that ran in the call (it returns complete).
//
// StagedWork: a point-to-point call's (or a coalesced batch's):
// the parts that run on (each a Work of this host's neurond group, or of gloo on
// host staging copies between hosts) and what lands on the device after them
// (a received staging copy, copied into the caller's tensor).
//
// The call returns as soon as its parts are started, so a rank may post a send
// and then a recv (batch_isend_irecv, a ring) without waiting for its peer.
// wait() waits for every part, then runs the landings on the caller's current
// stream (once): a received tensor holds its data for work queued after wait(),
// as after NCCL's. is_completed() says whether every part is done; the data of a
// recv between hosts lands only at wait().
//
// Threads: the caller's (one Work is not shared between threads while unfinished).
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <functional>
#include <vector>

namespace torch_neuron::dist {

class DoneWork : public c10d::Work {
public:
	DoneWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs);
	c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
	std::vector<at::Tensor> result() override { return outputs_; }

private:
	std::vector<at::Tensor> outputs_;
	c10::intrusive_ptr<c10::ivalue::Future> future_;
};

inline c10::intrusive_ptr<c10d::Work> done_work(int rank, c10d::OpType type, std::vector<at::Tensor> outputs)
{
	return c10::make_intrusive<DoneWork>(rank, type, std::move(outputs));
}

class StagedWork : public c10d::Work {
public:
	StagedWork(int rank, c10d::OpType type) : c10d::Work(rank, type) {}
	// Before wait(): a part to wait for, and what to do after the parts (with the
	// host copy it reads, held until then).
	void add_part(c10::intrusive_ptr<c10d::Work> part) { parts_.push_back(std::move(part)); }
	void add_landing(std::function<void()> landing) { landings_.push_back(std::move(landing)); }
	void add_outputs(const std::vector<at::Tensor> &ts) { outputs_.insert(outputs_.end(), ts.begin(), ts.end()); }

	bool isCompleted() override;
	bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
	std::vector<at::Tensor> result() override { return outputs_; }

private:
	std::vector<c10::intrusive_ptr<c10d::Work>> parts_;
	std::vector<std::function<void()>> landings_;
	std::vector<at::Tensor> outputs_;
	bool landed_ = false;
};

} // namespace torch_neuron::dist
