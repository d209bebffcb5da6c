#include "hierarchical.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>

namespace torch_neuron::dist {

namespace {

// A Work that is over when it is returned (the stages ran in the call).
class DoneWork : public c10d::Work {
public:
	DoneWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs)
		: c10d::Work(rank, type), outputs_(std::move(outputs)),
		  future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
								  devices_of(outputs_)))
	{
		finish();
		future_->markCompleted(c10::IValue(outputs_));
	}
	c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
	std::vector<at::Tensor> result() override { return outputs_; }

private:
	static std::vector<c10::Device> devices_of(const std::vector<at::Tensor> &ts)
	{
		std::vector<c10::Device> out;
		for (const auto &t : ts)
			if (!t.is_cpu() && std::find(out.begin(), out.end(), t.device()) == out.end())
				out.push_back(t.device());
		return out;
	}
	std::vector<at::Tensor> outputs_;
	c10::intrusive_ptr<c10::ivalue::Future> future_;
};

c10::intrusive_ptr<c10d::Work> done(int rank, c10d::OpType type, std::vector<at::Tensor> outputs)
{
	return c10::make_intrusive<DoneWork>(rank, type, std::move(outputs));
}

at::Tensor one(const std::vector<at::Tensor> &tensors, const char *what)
{
	TORCH_CHECK(tensors.size() == 1, "neuron backend: ", what, " takes one tensor per rank, got ", tensors.size());
	TORCH_CHECK(tensors[0].device().is_privateuseone(), "neuron backend: ", what, " needs neuron tensors, got one on ",
		    tensors[0].device());
	return tensors[0];
}

// What gloo reads and writes between hosts: a contiguous host copy (the copy
// waits for the device); halves are widened to float32, which gloo reduces in
// every build and which holds them exactly.
at::Tensor staging(const at::Tensor &t)
{
	at::Tensor h = t.to(at::kCPU).contiguous();
	if (h.scalar_type() == at::kHalf || h.scalar_type() == at::kBFloat16)
		h = h.to(at::kFloat);
	return h;
}

void copy_from_host(const at::Tensor &t, const at::Tensor &h) { t.copy_(h.to(t.scalar_type()).view(t.sizes())); }

} // namespace

ProcessGroupHierarchical::ProcessGroupHierarchical(int rank, int size, std::vector<std::vector<int64_t>> hosts,
						   c10::intrusive_ptr<c10d::Backend> intra,
						   c10::intrusive_ptr<c10d::Backend> leaders)
	: c10d::Backend(rank, size), hosts_(std::move(hosts)), host_of_(size, -1), local_of_(size, -1),
	  intra_(std::move(intra)), leaders_(std::move(leaders))
{
	for (size_t h = 0; h < hosts_.size(); ++h)
		for (size_t j = 0; j < hosts_[h].size(); ++j) {
			const int64_t r = hosts_[h][j];
			TORCH_CHECK(r >= 0 && r < size && host_of_[r] < 0, "neuron backend: bad host layout (rank ", r, ")");
			host_of_[r] = static_cast<int>(h);
			local_of_[r] = static_cast<int>(j);
		}
	TORCH_CHECK(std::find(host_of_.begin(), host_of_.end(), -1) == host_of_.end(),
		    "neuron backend: bad host layout (a rank is on no host)");
	host_ = host_of_[rank];
	const bool leader = hosts_[host_][0] == rank;
	TORCH_CHECK(leader == bool(leaders_), "neuron backend: the leaders' gloo group is for each host's first rank");
}

void ProcessGroupHierarchical::allreduce_into(const at::Tensor &t, const c10d::ReduceOp &op)
{
	// AVG is a SUM everywhere, divided once at the end (gloo has no AVG, and the
	// hosts may hold different numbers of ranks).
	const bool avg = op.op_ == c10d::ReduceOp::AVG;
	c10d::AllreduceOptions o;
	o.reduceOp = avg ? c10d::ReduceOp(c10d::ReduceOp::SUM) : op;
	std::vector<at::Tensor> v{t};
	intra_->allreduce(v, o)->wait();
	if (leaders_) {
		at::Tensor h = staging(t);
		std::vector<at::Tensor> hv{h};
		leaders_->allreduce(hv, o)->wait();
		if (avg)
			h = h.is_floating_point() ? h / size_ : at::div(h, size_, "trunc");
		copy_from_host(t, h);
	}
	c10d::BroadcastOptions b;
	b.rootRank = 0; // the leader
	intra_->broadcast(v, b)->wait();
}

void ProcessGroupHierarchical::broadcast_from(const at::Tensor &t, int root)
{
	TORCH_CHECK(root >= 0 && root < size_, "neuron backend: broadcast root ", root, " is not a rank of the group");
	const int root_host = host_of_[root];
	std::vector<at::Tensor> v{t};
	c10d::BroadcastOptions b;
	if (host_ == root_host) { // the root's host first, so its leader has the data
		b.rootRank = local_of_[root];
		intra_->broadcast(v, b)->wait();
	}
	if (leaders_) {
		at::Tensor h = staging(t);
		std::vector<at::Tensor> hv{h};
		b.rootRank = root_host;
		leaders_->broadcast(hv, b)->wait();
		if (host_ != root_host)
			copy_from_host(t, h);
	}
	if (host_ != root_host) {
		b.rootRank = 0;
		intra_->broadcast(v, b)->wait();
	}
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::allreduce(std::vector<at::Tensor> &tensors,
								   const c10d::AllreduceOptions &opts)
{
	allreduce_into(one(tensors, "all_reduce"), opts.reduceOp);
	return done(rank_, c10d::OpType::ALLREDUCE, tensors);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::allreduce_coalesced(std::vector<at::Tensor> &tensors,
									     const c10d::AllreduceCoalescedOptions &opts)
{
	for (const auto &t : tensors)
		allreduce_into(one({t}, "all_reduce_coalesced"), opts.reduceOp);
	return done(rank_, c10d::OpType::ALLREDUCE_COALESCED, tensors);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::broadcast(std::vector<at::Tensor> &tensors,
								   const c10d::BroadcastOptions &opts)
{
	broadcast_from(one(tensors, "broadcast"), static_cast<int>(opts.rootRank));
	return done(rank_, c10d::OpType::BROADCAST, tensors);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::reduce(std::vector<at::Tensor> &tensors,
								const c10d::ReduceOptions &opts)
{
	// An all_reduce into a copy that only the root keeps.
	const at::Tensor t = one(tensors, "reduce");
	const at::Tensor tmp = t.clone();
	allreduce_into(tmp, opts.reduceOp);
	if (rank_ == opts.rootRank)
		t.copy_(tmp);
	return done(rank_, c10d::OpType::REDUCE, tensors);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::barrier(const c10d::BarrierOptions &)
{
	// Every rank of a host is in; every host is in; everyone learns it.
	intra_->barrier()->wait();
	if (leaders_)
		leaders_->barrier()->wait();
	intra_->barrier()->wait();
	return done(rank_, c10d::OpType::BARRIER, {});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::_allgather_base(at::Tensor &output, at::Tensor &input,
									 const c10d::AllgatherOptions &opts)
{
	const at::Tensor in = one({input}, "all_gather_into_tensor");
	const int64_t n = in.numel();
	TORCH_CHECK(output.numel() == n * size_, "neuron backend: all_gather_into_tensor: output has ", output.numel(),
		    " elements, expected world_size * input = ", n * size_);
	TORCH_CHECK(output.scalar_type() == in.scalar_type(), "neuron backend: all_gather_into_tensor: dtypes ",
		    in.scalar_type(), " and ", output.scalar_type(), " differ");
	// This host's inputs, by local rank; then the leaders swap their hosts' blocks
	// (padded to the largest host, as gloo's all_gather wants equal sizes) and
	// put each rank's part where its group rank says.
	const int64_t here = static_cast<int64_t>(hosts_[host_].size());
	at::Tensor local = at::empty({here * n}, in.options());
	intra_->_allgather_base(local, input, opts)->wait();
	if (leaders_) {
		int64_t most = 0;
		for (const auto &h : hosts_)
			most = std::max<int64_t>(most, static_cast<int64_t>(h.size()));
		at::Tensor mine = at::zeros({most * n}, local.options().device(at::kCPU));
		mine.narrow(0, 0, here * n).copy_(local.to(at::kCPU));
		std::vector<std::vector<at::Tensor>> blocks(1);
		for (size_t h = 0; h < hosts_.size(); ++h)
			blocks[0].push_back(at::empty_like(mine));
		std::vector<at::Tensor> mv{mine};
		leaders_->allgather(blocks, mv)->wait();
		at::Tensor full = at::empty({n * size_}, mine.options());
		for (size_t h = 0; h < hosts_.size(); ++h)
			for (size_t j = 0; j < hosts_[h].size(); ++j)
				full.narrow(0, hosts_[h][j] * n, n).copy_(blocks[0][h].narrow(0, static_cast<int64_t>(j) * n, n));
		copy_from_host(output, full);
	}
	std::vector<at::Tensor> ov{output};
	c10d::BroadcastOptions b;
	b.rootRank = 0;
	intra_->broadcast(ov, b)->wait();
	return done(rank_, c10d::OpType::_ALLGATHER_BASE, {output});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::allgather(std::vector<std::vector<at::Tensor>> &outputs,
								   std::vector<at::Tensor> &inputs,
								   const c10d::AllgatherOptions &opts)
{
	at::Tensor in = one(inputs, "all_gather");
	TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == static_cast<size_t>(size_),
		    "neuron backend: all_gather takes one list of world_size output tensors");
	const int64_t n = in.numel();
	for (const auto &o : outputs[0])
		TORCH_CHECK(o.numel() == n, "neuron backend: all_gather with outputs of different sizes is not supported "
					   "(input has ", n, " elements, an output ", o.numel(), ")");
	at::Tensor flat = at::empty({n * size_}, in.options());
	_allgather_base(flat, in, opts);
	for (int r = 0; r < size_; ++r)
		outputs[0][r].copy_(flat.narrow(0, r * n, n).view(outputs[0][r].sizes()));
	return done(rank_, c10d::OpType::ALLGATHER, outputs[0]);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::allgather_into_tensor_coalesced(
	std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs, const c10d::AllgatherOptions &opts)
{
	TORCH_CHECK(outputs.size() == inputs.size(), "neuron backend: all_gather_into_tensor_coalesced: ",
		    outputs.size(), " outputs for ", inputs.size(), " inputs");
	for (size_t i = 0; i < inputs.size(); ++i)
		_allgather_base(outputs[i], inputs[i], opts);
	return done(rank_, c10d::OpType::COALESCED, outputs);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::_reduce_scatter_base(at::Tensor &output, at::Tensor &input,
									      const c10d::ReduceScatterOptions &opts)
{
	// An all_reduce of the whole input, of which each rank keeps its part: the
	// hosts exchange world_size times the output, not once, but it is one path.
	const at::Tensor in = one({input}, "reduce_scatter_tensor");
	const int64_t n = output.numel();
	TORCH_CHECK(in.numel() == n * size_, "neuron backend: reduce_scatter_tensor: input has ", in.numel(),
		    " elements, expected world_size * output = ", n * size_);
	const at::Tensor tmp = in.contiguous().reshape({-1}).clone();
	allreduce_into(tmp, opts.reduceOp);
	output.copy_(tmp.narrow(0, rank_ * n, n).view(output.sizes()));
	return done(rank_, c10d::OpType::_REDUCE_SCATTER_BASE, {output});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::reduce_scatter_tensor_coalesced(
	std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs, const c10d::ReduceScatterOptions &opts)
{
	TORCH_CHECK(outputs.size() == inputs.size(), "neuron backend: reduce_scatter_tensor_coalesced: ",
		    outputs.size(), " outputs for ", inputs.size(), " inputs");
	for (size_t i = 0; i < inputs.size(); ++i)
		_reduce_scatter_base(outputs[i], inputs[i], opts);
	return done(rank_, c10d::OpType::COALESCED, outputs);
}

void ProcessGroupHierarchical::unsupported(const char *op) const
{
	C10_THROW_ERROR(DistBackendError,
			std::string("neuron backend: ") + op + " is not supported across hosts yet (this group's " +
				std::to_string(size_) + " ranks use " + std::to_string(hosts_.size()) +
				" neurond instances); across hosts all_reduce, broadcast, reduce, barrier, all_gather, "
				"all_gather_into_tensor and reduce_scatter_tensor are");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::gather(std::vector<std::vector<at::Tensor>> &,
								std::vector<at::Tensor> &, const c10d::GatherOptions &)
{
	unsupported("gather");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::scatter(std::vector<at::Tensor> &,
								 std::vector<std::vector<at::Tensor>> &,
								 const c10d::ScatterOptions &)
{
	unsupported("scatter");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::reduce_scatter(std::vector<at::Tensor> &,
									std::vector<std::vector<at::Tensor>> &,
									const c10d::ReduceScatterOptions &)
{
	unsupported("reduce_scatter (of a list; reduce_scatter_tensor is supported)");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::alltoall_base(at::Tensor &, at::Tensor &,
								       std::vector<int64_t> &, std::vector<int64_t> &,
								       const c10d::AllToAllOptions &)
{
	unsupported("all_to_all_single");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::alltoall(std::vector<at::Tensor> &, std::vector<at::Tensor> &,
								  const c10d::AllToAllOptions &)
{
	unsupported("all_to_all");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::send(std::vector<at::Tensor> &, int, int)
{
	unsupported("send");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::recv(std::vector<at::Tensor> &, int, int)
{
	unsupported("recv");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::recvAnysource(std::vector<at::Tensor> &, int)
{
	unsupported("recv from any source");
}

void ProcessGroupHierarchical::startCoalescing() { unsupported("coalescing (batch_isend_irecv)"); }

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::endCoalescing()
{
	unsupported("coalescing (batch_isend_irecv)");
}

} // namespace torch_neuron::dist
