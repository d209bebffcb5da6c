#include "hierarchical.h"
#include "hierarchical_staging.h"

#include "../runtime.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>

namespace torch_neuron::dist {

ProcessGroupHierarchical::ProcessGroupHierarchical(int rank, int size, std::vector<std::vector<int64_t>> hosts,
						   c10::intrusive_ptr<ProcessGroupNeuron> intra,
						   c10::intrusive_ptr<c10d::Backend> leaders,
						   c10::intrusive_ptr<c10d::Backend> everyone)
	: c10d::Backend(rank, size), hosts_(std::move(hosts)), host_of_(size, -1), local_of_(size, -1),
	  intra_(std::move(intra)), leaders_(std::move(leaders)), everyone_(std::move(everyone))
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
	TORCH_CHECK(intra_ && everyone_ && everyone_->getSize() == size && everyone_->getRank() == rank,
		    "neuron backend: the hierarchical group needs its host's group and a gloo group of every rank");
	queue_ = std::make_unique<IssueQueue>(rank, intra_->timeout());
}

ProcessGroupHierarchical::~ProcessGroupHierarchical()
{
	queue_.reset(); // before the groups its jobs use (releases the GIL while it waits)
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::issue(c10d::OpType type, const at::Tensor &any,
							       std::vector<at::Tensor> outputs, const char *name,
							       std::function<void()> body)
{
	TORCH_CHECK(!coalescing_, "neuron backend: ", name,
		    " inside a coalesced batch across hosts (only sends and receives are batched)");
	const c10::Device device =
		any.defined() ? any.device() : c10::Device(c10::DeviceType::PrivateUse1, current_device());
	return queue_->issue(type, device, std::move(outputs), name, std::move(body));
}

void ProcessGroupHierarchical::between_hosts(const char *op, bool leaders_only,
					     const std::function<void()> &stage) const
{
	try {
		stage();
	} catch (const std::exception &e) {
		const auto *c10 = dynamic_cast<const c10::Error *>(&e);
		const std::string why = c10 ? c10->what_without_backtrace() : e.what();
		std::string among;
		for (size_t h = 0; leaders_only && h < hosts_.size(); ++h)
			among += (h ? ", " : "") + std::to_string(hosts_[h][0]);
		C10_THROW_ERROR(DistBackendError,
				"neuron backend: rank " + std::to_string(rank_) + ": " + op +
					": the exchange between hosts (gloo, " +
					(leaders_only ? "among the hosts' first ranks " + among : std::string("among every rank")) +
					") failed: " + why);
	}
}

int64_t ProcessGroupHierarchical::most_per_host() const
{
	int64_t most = 0;
	for (const auto &h : hosts_)
		most = std::max<int64_t>(most, static_cast<int64_t>(h.size()));
	return most;
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
		at::Tensor h = host_copy_to_reduce(t);
		std::vector<at::Tensor> hv{h};
		between_hosts("all_reduce", true, [&] { leaders_->allreduce(hv, o)->wait(); });
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
		at::Tensor h = host_copy(t);
		std::vector<at::Tensor> hv{h};
		b.rootRank = root_host;
		between_hosts("broadcast", true, [&] { leaders_->broadcast(hv, b)->wait(); });
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
	const at::Tensor t = one_neuron(tensors, "all_reduce");
	check_reducible(t, opts.reduceOp, "all_reduce");
	return issue(c10d::OpType::ALLREDUCE, t, tensors, "all_reduce",
		     [this, t, op = opts.reduceOp] { allreduce_into(t, op); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::allreduce_coalesced(std::vector<at::Tensor> &tensors,
									     const c10d::AllreduceCoalescedOptions &opts)
{
	TORCH_CHECK(!tensors.empty(), "neuron backend: all_reduce_coalesced of no tensors");
	for (const auto &t : tensors)
		check_reducible(one_neuron({t}, "all_reduce_coalesced"), opts.reduceOp, "all_reduce_coalesced");
	return issue(c10d::OpType::ALLREDUCE_COALESCED, tensors[0], tensors, "all_reduce_coalesced",
		     [this, tensors, op = opts.reduceOp] {
			     for (const auto &t : tensors)
				     allreduce_into(t, op);
		     });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::broadcast(std::vector<at::Tensor> &tensors,
								   const c10d::BroadcastOptions &opts)
{
	const at::Tensor t = one_neuron(tensors, "broadcast");
	const int root = static_cast<int>(opts.rootRank);
	TORCH_CHECK(root >= 0 && root < size_, "neuron backend: broadcast root ", root, " is not a rank of the group");
	return issue(c10d::OpType::BROADCAST, t, tensors, "broadcast", [this, t, root] { broadcast_from(t, root); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::reduce(std::vector<at::Tensor> &tensors,
								const c10d::ReduceOptions &opts)
{
	// An all_reduce into a copy that only the root keeps.
	const at::Tensor t = one_neuron(tensors, "reduce");
	check_reducible(t, opts.reduceOp, "reduce");
	const bool root = rank_ == opts.rootRank;
	return issue(c10d::OpType::REDUCE, t, tensors, "reduce", [this, t, root, op = opts.reduceOp] {
		const at::Tensor tmp = t.clone();
		allreduce_into(tmp, op);
		if (root)
			t.copy_(tmp);
	});
}

void ProcessGroupHierarchical::barrier_now()
{
	// Every rank of a host is in; every host is in; everyone learns it.
	intra_->barrier(c10d::BarrierOptions())->wait();
	if (leaders_)
		between_hosts("barrier", true, [&] { leaders_->barrier()->wait(); });
	intra_->barrier(c10d::BarrierOptions())->wait();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::barrier(const c10d::BarrierOptions &)
{
	// Its Work blocks the host at wait() (a barrier is for the host).
	return issue(c10d::OpType::BARRIER, at::Tensor(), {}, "barrier", [this] { barrier_now(); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::_allgather_base(at::Tensor &output, at::Tensor &input,
									 const c10d::AllgatherOptions &)
{
	const at::Tensor in = one_neuron({input}, "all_gather_into_tensor");
	TORCH_CHECK(output.numel() == in.numel() * size_, "neuron backend: all_gather_into_tensor: output has ",
		    output.numel(), " elements, expected world_size * input = ", in.numel() * size_);
	same_kind_as(in, output, "all_gather_into_tensor");
	return issue(c10d::OpType::_ALLGATHER_BASE, in, {output}, "all_gather_into_tensor",
		     [this, output, in] { allgather_into(output, in); });
}

void ProcessGroupHierarchical::allgather_into(const at::Tensor &output, const at::Tensor &input)
{
	const int64_t n = input.numel();
	// This host's inputs, by local rank; then the leaders swap their hosts' blocks
	// (padded to the largest host, as gloo's all_gather wants equal sizes) and
	// put each rank's part where its group rank says.
	const int64_t here = static_cast<int64_t>(hosts_[host_].size());
	at::Tensor local = at::empty({here * n}, input.options());
	at::Tensor in = input;
	intra_->_allgather_base(local, in, c10d::AllgatherOptions())->wait();
	if (leaders_) {
		const int64_t most = most_per_host();
		at::Tensor mine = at::zeros({most * n}, local.options().device(at::kCPU));
		mine.narrow(0, 0, here * n).copy_(local.to(at::kCPU));
		std::vector<std::vector<at::Tensor>> blocks(1);
		for (size_t h = 0; h < hosts_.size(); ++h)
			blocks[0].push_back(at::empty_like(mine));
		std::vector<at::Tensor> mv{mine};
		between_hosts("all_gather", true, [&] { leaders_->allgather(blocks, mv)->wait(); });
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
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::allgather(std::vector<std::vector<at::Tensor>> &outputs,
								   std::vector<at::Tensor> &inputs,
								   const c10d::AllgatherOptions &)
{
	at::Tensor in = one_neuron(inputs, "all_gather");
	TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == static_cast<size_t>(size_),
		    "neuron backend: all_gather takes one list of world_size output tensors");
	const int64_t n = in.numel();
	for (const auto &o : outputs[0]) {
		same_kind_as(in, o, "all_gather");
		TORCH_CHECK(o.numel() == n, "neuron backend: all_gather with outputs of different sizes is not supported "
					   "(input has ", n, " elements, an output ", o.numel(), ")");
	}
	return issue(c10d::OpType::ALLGATHER, in, outputs[0], "all_gather", [this, in, outs = outputs[0], n] {
		at::Tensor flat = at::empty({n * size_}, in.options());
		allgather_into(flat, in);
		for (int r = 0; r < size_; ++r)
			outs[r].copy_(flat.narrow(0, r * n, n).view(outs[r].sizes()));
	});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::allgather_into_tensor_coalesced(
	std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs, const c10d::AllgatherOptions &opts)
{
	TORCH_CHECK(!inputs.empty() && outputs.size() == inputs.size(), "neuron backend: all_gather_into_tensor_coalesced: ",
		    outputs.size(), " outputs for ", inputs.size(), " inputs");
	c10::intrusive_ptr<c10d::Work> last; // the queue runs them in order: the last ends last
	for (size_t i = 0; i < inputs.size(); ++i)
		last = _allgather_base(outputs[i], inputs[i], opts);
	return last;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::_reduce_scatter_base(at::Tensor &output, at::Tensor &input,
									      const c10d::ReduceScatterOptions &opts)
{
	const at::Tensor in = one_neuron({input}, "reduce_scatter_tensor");
	same_kind_as(in, output, "reduce_scatter_tensor");
	check_reducible(in, opts.reduceOp, "reduce_scatter_tensor");
	TORCH_CHECK(in.numel() == output.numel() * size_, "neuron backend: reduce_scatter_tensor: input has ", in.numel(),
		    " elements, expected world_size * output = ", output.numel() * size_);
	return issue(c10d::OpType::_REDUCE_SCATTER_BASE, in, {output}, "reduce_scatter_tensor",
		     [this, output, in, op = opts.reduceOp] { reduce_scatter_into(output, in, op); });
}

namespace {

// The reduction of the rows of parts ([k, m]: k contributions of m elements).
at::Tensor reduce_rows(const at::Tensor &parts, const c10d::ReduceOp &op)
{
	switch (op.op_) {
	case c10d::ReduceOp::PRODUCT: return parts.prod(0);
	case c10d::ReduceOp::MAX: return parts.amax(0);
	case c10d::ReduceOp::MIN: return parts.amin(0);
	default: return parts.sum(0); // SUM (AVG is a SUM divided after)
	}
}

} // namespace

void ProcessGroupHierarchical::reduce_scatter_into(const at::Tensor &output, const at::Tensor &input,
						   const c10d::ReduceOp &op)
{
	// 1. Within the host, the whole input is reduced to the leader (neurond).
	// 2. Between hosts only the parts go: each leader sends every other host's
	// leader that host's ranks' parts (padded to the largest host) in one gloo
	// all_to_all, and reduces what it got for its own host's ranks, so each
	// byte crosses once ((hosts - 1) / hosts of the input per leader, where the
	// all_reduce of the whole input it was sent about twice that).
	// 3. The leader scatters its host's parts within the host (neurond).
	// AVG is a SUM everywhere, divided once at the end.
	const bool avg = op.op_ == c10d::ReduceOp::AVG;
	const c10d::ReduceOp sub = avg ? c10d::ReduceOp(c10d::ReduceOp::SUM) : op;
	const int64_t n = output.numel(), most = most_per_host(), here = static_cast<int64_t>(hosts_[host_].size());
	const int nhosts = static_cast<int>(hosts_.size());
	at::Tensor whole = input.contiguous().reshape({-1});
	if (leaders_)
		whole = whole.clone(); // the reduce lands in place on the leader
	std::vector<at::Tensor> wv{whole};
	c10d::ReduceOptions r;
	r.reduceOp = sub;
	r.rootRank = 0; // the leader
	intra_->reduce(wv, r)->wait();
	at::Tensor mine; // on the leader: its host's ranks' parts, by local rank
	if (leaders_) {
		const at::Tensor h = host_copy_to_reduce(whole);
		at::Tensor send = at::zeros({nhosts * most * n}, h.options());
		for (int hh = 0; hh < nhosts; ++hh)
			for (size_t j = 0; j < hosts_[hh].size(); ++j)
				send.narrow(0, (hh * most + static_cast<int64_t>(j)) * n, n)
					.copy_(h.narrow(0, hosts_[hh][j] * n, n));
		at::Tensor got = at::empty_like(send);
		std::vector<int64_t> equal; // equal splits
		between_hosts("reduce_scatter", true, [&] {
			leaders_->alltoall_base(got, send, equal, equal, c10d::AllToAllOptions())->wait();
		});
		at::Tensor red = reduce_rows(got.view({nhosts, most * n}), sub);
		if (avg)
			red = red.is_floating_point() ? red / size_ : at::div(red, size_, "trunc");
		mine = at::empty({most * n}, output.options());
		copy_from_host(mine, red);
	}
	std::vector<std::vector<at::Tensor>> chunks(1);
	if (leaders_)
		for (int64_t j = 0; j < here; ++j)
			chunks[0].push_back(mine.narrow(0, j * n, n).view(output.sizes()));
	std::vector<at::Tensor> ov{output};
	c10d::ScatterOptions sc;
	sc.rootRank = 0;
	intra_->scatter(ov, chunks, sc)->wait();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::reduce_scatter_tensor_coalesced(
	std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs, const c10d::ReduceScatterOptions &opts)
{
	TORCH_CHECK(!inputs.empty() && outputs.size() == inputs.size(), "neuron backend: reduce_scatter_tensor_coalesced: ",
		    outputs.size(), " outputs for ", inputs.size(), " inputs");
	c10::intrusive_ptr<c10d::Work> last; // the queue runs them in order: the last ends last
	for (size_t i = 0; i < inputs.size(); ++i)
		last = _reduce_scatter_base(outputs[i], inputs[i], opts);
	return last;
}

} // namespace torch_neuron::dist
