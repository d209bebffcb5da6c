// c10d backend "neuron" for a group whose ranks span several neurond instances
// (hosts; a host is one neurond, named by host name and socket path): issue 16
// item 3. torch_neuron/_distributed.py builds it when the ranks' neurond differ.
//
// Each collective runs in stages: within each host through that host's
// ProcessGroupNeuron (neurond, in device memory), and between hosts through
// PyTorch's gloo on host staging copies: among one leader per host (its lowest
// rank) for the collectives that reduce or spread, directly between the ranks
// concerned otherwise. all_reduce: reduce within the host, leaders all_reduce
// over gloo, broadcast within the host; broadcast, barrier, reduce and
// all_gather(_into_tensor) are built the same way. reduce_scatter(_tensor):
// reduce within the host to the leader, the leaders swap only each host's ranks'
// parts (one gloo all_to_all) and reduce what they got, the leader scatters
// within the host. gather: within each host to its leader (to the root on the root's host),
// leaders gather to the root's leader over gloo, which hands the other hosts'
// part to the root; scatter is its mirror. all_to_all(_single) (any splits): the
// blocks between ranks of a host through their neurond, the others in one gloo
// all_to_all of every rank. send/recv: through neurond between ranks of a host,
// through gloo (every rank's group) between hosts; recv from any source through
// gloo's on a rank alone on its host, refused beside other ranks (their sends
// come through neurond, which cannot take back a receive posted to it).
//
// Errors name ranks by their rank in this group (rank_names.h; neurond numbers
// them within its host), and a failed stage between hosts says which ranks it
// was between.
//
// As the one-host backend, a call returns at once: its stages run on the group's
// worker thread in issue order (hierarchical_queue.h), the device stages on a
// stream of the worker's, after the caller's stream produced the inputs; the
// worker waits on the host for the device data before gloo reads it, and for
// each stage's gloo part. A collective's Work is ordered on the caller's stream:
// wait() makes the caller's current stream wait (on the device) for the last
// device stage, and does not block the host (unless NEURON_BLOCKING_WAIT=1, or a
// barrier). Point-to-point calls return once queued; the worker starts their
// transfers without waiting for them (hierarchical_work.h, StagedWork), so a rank
// can post a send and a recv before its peer does; batch_isend_irecv is one
// neurond batch for the ranks of a host.
#pragma once

#include "hierarchical_queue.h"
#include "hierarchical_work.h"
#include "process_group.h"

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <functional>
#include <memory>
#include <vector>

namespace torch_neuron::dist {

class ProcessGroupHierarchical : public c10d::Backend {
public:
	// hosts: the group ranks on each neurond, each list ascending, the lists in
	// the order of their first rank. intra: this rank's host's group (its
	// ranks in that order). leaders: the gloo group of every host's first rank
	// (host index = its rank there); null on the other ranks. everyone: a gloo
	// group of every rank (same ranks as this group).
	ProcessGroupHierarchical(int rank, int size, std::vector<std::vector<int64_t>> hosts,
				 c10::intrusive_ptr<ProcessGroupNeuron> intra, c10::intrusive_ptr<c10d::Backend> leaders,
				 c10::intrusive_ptr<c10d::Backend> everyone);
	// Runs the calls queued so far, then stops the worker (GIL released).
	~ProcessGroupHierarchical() override;

	const std::string getBackendName() const override { return "neuron"; }

	c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &tensors, const c10d::AllreduceOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor> &tensors,
							   const c10d::AllreduceCoalescedOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &tensors, const c10d::BroadcastOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &tensors, const c10d::ReduceOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &output, at::Tensor &input,
						       const c10d::AllgatherOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &outputs,
						 std::vector<at::Tensor> &inputs, const c10d::AllgatherOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor> &outputs,
								       std::vector<at::Tensor> &inputs,
								       const c10d::AllgatherOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor &output, at::Tensor &input,
							    const c10d::ReduceScatterOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor> &outputs,
								       std::vector<at::Tensor> &inputs,
								       const c10d::ReduceScatterOptions &opts) override;

	c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>> &outputs,
					      std::vector<at::Tensor> &inputs, const c10d::GatherOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor> &outputs,
					       std::vector<std::vector<at::Tensor>> &inputs,
					       const c10d::ScatterOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor> &outputs,
						      std::vector<std::vector<at::Tensor>> &inputs,
						      const c10d::ReduceScatterOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &output, at::Tensor &input,
						     std::vector<int64_t> &output_splits,
						     std::vector<int64_t> &input_splits,
						     const c10d::AllToAllOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
						const c10d::AllToAllOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors, int dst, int tag) override;
	c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors, int src, int tag) override;
	// From any rank of the group: see hierarchical_p2p.cpp.
	c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor> &tensors, int tag) override;
	// batch_isend_irecv: the sends and receives within a host go to neurond as one
	// batch (as on one host); those between hosts start as they come.
	bool supportsCoalescing() const override { return true; }
	void startCoalescing() override;
	c10::intrusive_ptr<c10d::Work> endCoalescing() override;

private:
	// Queues a collective's stages (body, run on the worker) after the caller's
	// stream's work so far; its Work is ordered on the caller's stream.
	c10::intrusive_ptr<c10d::Work> issue(c10d::OpType type, const at::Tensor &any, std::vector<at::Tensor> outputs,
					     const char *name, std::function<void()> body);
	// The synchronous stages of the collectives (on the worker, its stream current).
	// t (neuron) becomes the reduction over every rank of the group.
	void allreduce_into(const at::Tensor &t, const c10d::ReduceOp &op);
	// Every rank's t becomes root's.
	void broadcast_from(const at::Tensor &t, int root);
	void barrier_now();
	// output (flat, world_size * input's elements) takes every rank's input.
	void allgather_into(const at::Tensor &output, const at::Tensor &input);
	// output takes this rank's part of the reduction of every rank's input (flat).
	void reduce_scatter_into(const at::Tensor &output, const at::Tensor &input, const c10d::ReduceOp &op);
	void gather_now(const std::vector<at::Tensor> &outputs, const at::Tensor &in, int root);
	void scatter_now(const at::Tensor &out, const std::vector<at::Tensor> &inputs, int root);
	void alltoall_now(const at::Tensor &output, const at::Tensor &in, const std::vector<int64_t> &ins,
			  const std::vector<int64_t> &outs, const c10d::AllToAllOptions &opts);
	// Runs a stage between hosts (gloo); its failure is raised naming this rank,
	// the op and the ranks the stage was between (between: "the hosts' first
	// ranks" or "every rank").
	void between_hosts(const char *op, bool leaders_only, const std::function<void()> &stage) const;
	// The largest number of ranks on one host.
	int64_t most_per_host() const;
	// Worker: starts a send or recv between hosts (gloo, on the host copy h) into work.
	void p2p_between_hosts(const c10::intrusive_ptr<StagedWork> &work, const at::Tensor &t, const at::Tensor &h,
			       bool send, int peer, int tag);
	c10::intrusive_ptr<c10d::Work> point_to_point(std::vector<at::Tensor> &tensors, bool send, int peer, int tag);
	// Queues `start` (which adds work's parts) to the worker; work is started after
	// it unless the batch is coalescing (endCoalescing starts it).
	void post_p2p(const c10::intrusive_ptr<StagedWork> &work, const at::Tensor &t, const char *name,
		      std::function<void()> start);

	std::vector<std::vector<int64_t>> hosts_;
	std::vector<int> host_of_, local_of_; // by group rank
	int host_ = 0;                        // this rank's host
	c10::intrusive_ptr<ProcessGroupNeuron> intra_;
	c10::intrusive_ptr<c10d::Backend> leaders_, everyone_;
	bool coalescing_ = false;                // caller's thread: between start/endCoalescing
	c10::intrusive_ptr<StagedWork> batch_;   // the coalesced batch's Work
	std::unique_ptr<IssueQueue> queue_;      // last: stopped before the groups it uses go
};

} // namespace torch_neuron::dist
