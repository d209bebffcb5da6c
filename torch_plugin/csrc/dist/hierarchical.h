// c10d backend "neuron" for a group whose ranks span several neurond instances
// (hosts; a host is one neurond, named by host name and socket path): issue 16
// item 3. torch_neuron/_distributed.py builds it when the ranks' neurond differ.
//
// Each collective runs in stages: within each host through that host's
// ProcessGroupNeuron (neurond, in device memory), and between hosts among one
// leader per host (its lowest rank) through PyTorch's gloo on host staging
// copies. all_reduce: reduce within the host, leaders all_reduce over gloo,
// broadcast within the host. broadcast, barrier, reduce, all_gather(_into_tensor)
// and reduce_scatter_tensor are built the same way; the others raise a
// DistBackendError that names the op.
//
// Unlike the one-host backend, a call here returns when the collective is done
// as far as the host is concerned: the leader waits on the host for its device
// data before gloo reads it, and every rank waits for each stage's gloo part.
// The Work it returns is complete; the caller's current stream is already
// ordered after the last device stage (so a later wait() costs nothing and
// work on another stream must synchronise with this one, as after a blocking
// NCCL call).
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <vector>

namespace torch_neuron::dist {

class ProcessGroupHierarchical : public c10d::Backend {
public:
	// hosts: the group ranks on each neurond, each list ascending, the lists in
	// the order of their first rank. intra: this rank's host's group (its
	// ranks in that order). leaders: the gloo group of every host's first rank
	// (host index = its rank there); null on the other ranks.
	ProcessGroupHierarchical(int rank, int size, std::vector<std::vector<int64_t>> hosts,
				 c10::intrusive_ptr<c10d::Backend> intra, c10::intrusive_ptr<c10d::Backend> leaders);

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

	// Not across hosts yet: each raises a DistBackendError naming the op.
	c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>> &, std::vector<at::Tensor> &,
					      const c10d::GatherOptions &) override;
	c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor> &, std::vector<std::vector<at::Tensor>> &,
					       const c10d::ScatterOptions &) override;
	c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor> &, std::vector<std::vector<at::Tensor>> &,
						      const c10d::ReduceScatterOptions &) override;
	c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &, at::Tensor &, std::vector<int64_t> &,
						     std::vector<int64_t> &, const c10d::AllToAllOptions &) override;
	c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &, std::vector<at::Tensor> &,
						const c10d::AllToAllOptions &) override;
	c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &, int, int) override;
	c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &, int, int) override;
	c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor> &, int) override;
	void startCoalescing() override;
	c10::intrusive_ptr<c10d::Work> endCoalescing() override;

private:
	// t (neuron) becomes the reduction over every rank of the group.
	void allreduce_into(const at::Tensor &t, const c10d::ReduceOp &op);
	// Every rank's t becomes root's.
	void broadcast_from(const at::Tensor &t, int root);
	[[noreturn]] void unsupported(const char *op) const;

	std::vector<std::vector<int64_t>> hosts_;
	std::vector<int> host_of_, local_of_; // by group rank
	int host_ = 0;                        // this rank's host
	c10::intrusive_ptr<c10d::Backend> intra_, leaders_;
};

} // namespace torch_neuron::dist
