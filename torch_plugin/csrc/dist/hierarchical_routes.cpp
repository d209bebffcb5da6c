// ProcessGroupHierarchical's collectives that route each rank's own data rather
// than reduce or spread it: gather, scatter, all_to_all(_single), and
// reduce_scatter of a list (a reduce_scatter_tensor). See hierarchical.h.
#include "hierarchical.h"
#include "hierarchical_staging.h"
#include "split_sizes.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <numeric>

namespace torch_neuron::dist {

namespace {

// Where each rank's rows start in a tensor split by `splits`.
std::vector<int64_t> offsets_of(const std::vector<int64_t> &splits)
{
	std::vector<int64_t> out(splits.size() + 1, 0);
	for (size_t j = 0; j < splits.size(); ++j)
		out[j + 1] = out[j] + splits[j];
	return out;
}

// The rows of t for the ranks `which` (in that order), one tensor.
at::Tensor rows_for(const at::Tensor &t, const std::vector<int64_t> &splits, const std::vector<int64_t> &at_,
		    const std::vector<int64_t> &which)
{
	std::vector<at::Tensor> parts;
	for (int64_t j : which)
		parts.push_back(t.narrow(0, at_[j], splits[j]));
	return parts.empty() ? t.narrow(0, 0, 0).contiguous() : at::cat(parts);
}

// out's rows for the ranks `which` take `from`'s rows (in that order).
void put_rows(const at::Tensor &out, const std::vector<int64_t> &splits, const std::vector<int64_t> &at_,
	      const std::vector<int64_t> &which, const at::Tensor &from)
{
	int64_t o = 0;
	for (int64_t j : which) {
		if (splits[j])
			out.narrow(0, at_[j], splits[j]).copy_(from.narrow(0, o, splits[j]));
		o += splits[j];
	}
}

std::vector<int64_t> pick(const std::vector<int64_t> &splits, const std::vector<int64_t> &which)
{
	std::vector<int64_t> out;
	for (int64_t j : which)
		out.push_back(splits[j]);
	return out;
}

} // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::gather(std::vector<std::vector<at::Tensor>> &outputs,
								std::vector<at::Tensor> &inputs,
								const c10d::GatherOptions &opts)
{
	const at::Tensor in = one_neuron(inputs, "gather");
	const int root = static_cast<int>(opts.rootRank);
	TORCH_CHECK(root >= 0 && root < size_, "neuron backend: gather root ", root, " is not a rank of the group");
	std::vector<at::Tensor> outs;
	if (rank_ == root) {
		TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == static_cast<size_t>(size_),
			    "neuron backend: gather on the root takes one list of world_size output tensors");
		for (const auto &o : outputs[0]) {
			same_kind_as(in, o, "gather");
			TORCH_CHECK(o.numel() == in.numel(), "neuron backend: gather outputs must match the input's size");
		}
		outs = outputs[0];
	}
	return issue(c10d::OpType::GATHER, in, outs, "gather", [this, outs, in, root] { gather_now(outs, in, root); });
}

void ProcessGroupHierarchical::gather_now(const std::vector<at::Tensor> &outputs, const at::Tensor &input, int root)
{
	at::Tensor in = input;
	const int64_t n = in.numel();
	const int root_host = host_of_[root];
	const int64_t here = static_cast<int64_t>(hosts_[host_].size()), most = most_per_host();
	const int nhosts = static_cast<int>(hosts_.size());
	// 1. Within each host, to the root on its host, to the leader on the others.
	const int local_root = host_ == root_host ? local_of_[root] : 0;
	at::Tensor block = at::empty({most * n}, in.options());
	std::vector<std::vector<at::Tensor>> parts(1);
	if (local_of_[rank_] == local_root)
		for (int64_t j = 0; j < here; ++j)
			parts[0].push_back(block.narrow(0, j * n, n));
	std::vector<at::Tensor> iv{in};
	c10d::GatherOptions g;
	g.rootRank = local_root;
	intra_->gather(parts, iv, g)->wait();
	// 2. The leaders gather every host's block (padded to the largest host) to the
	// root's leader; 3. which hands them to the root if it is not the root.
	at::Tensor all; // [nhosts * most * n] on the root's leader, then on the root
	if (leaders_) {
		at::Tensor mine = host_copy(block);
		std::vector<std::vector<at::Tensor>> blocks(host_ == root_host ? 1 : 0); // gloo: none off the root
		for (size_t h = 0; h < blocks.size() * nhosts; ++h)
			blocks[0].push_back(at::empty_like(mine));
		std::vector<at::Tensor> mv{mine};
		c10d::GatherOptions lg;
		lg.rootRank = root_host;
		between_hosts("gather", true, [&] { leaders_->gather(blocks, mv, lg)->wait(); });
		if (host_ == root_host)
			all = at::cat(blocks[0]).to(in.device());
	}
	const int leader = static_cast<int>(hosts_[root_host][0]);
	if (root != leader && (rank_ == root || rank_ == leader)) {
		if (rank_ == root)
			all = at::empty({nhosts * most * n}, in.options());
		intra_->hop(rank_ == leader, all, local_of_[rank_ == leader ? root : leader])->wait();
	}
	if (rank_ != root)
		return;
	for (int r = 0; r < size_; ++r) {
		const at::Tensor &src = host_of_[r] == root_host ? block : all.narrow(0, host_of_[r] * most * n, most * n);
		outputs[r].copy_(src.narrow(0, local_of_[r] * n, n).view(outputs[r].sizes()));
	}
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::scatter(std::vector<at::Tensor> &outputs,
								 std::vector<std::vector<at::Tensor>> &inputs,
								 const c10d::ScatterOptions &opts)
{
	const at::Tensor out = one_neuron(outputs, "scatter");
	const int root = static_cast<int>(opts.rootRank);
	TORCH_CHECK(root >= 0 && root < size_, "neuron backend: scatter root ", root, " is not a rank of the group");
	std::vector<at::Tensor> ins;
	if (rank_ == root) {
		TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == static_cast<size_t>(size_),
			    "neuron backend: scatter on the root takes one list of world_size input tensors");
		for (const auto &i : inputs[0]) {
			same_kind_as(out, i, "scatter");
			TORCH_CHECK(i.numel() == out.numel(), "neuron backend: scatter inputs must match the output's size");
		}
		ins = inputs[0];
	}
	return issue(c10d::OpType::SCATTER, out, {out}, "scatter", [this, out, ins, root] { scatter_now(out, ins, root); });
}

void ProcessGroupHierarchical::scatter_now(const at::Tensor &out, const std::vector<at::Tensor> &inputs, int root)
{
	const int64_t n = out.numel();
	const int root_host = host_of_[root];
	const int64_t most = most_per_host();
	const int nhosts = static_cast<int>(hosts_.size());
	const int leader = static_cast<int>(hosts_[root_host][0]);
	// 1. The root lays every rank's chunk out by host (padded to the largest host)
	// and hands that to its leader if it is not the leader.
	at::Tensor all; // [nhosts * most * n] on the root and the root's leader
	if (rank_ == root) {
		all = at::zeros({nhosts * most * n}, out.options());
		for (int r = 0; r < size_; ++r)
			all.narrow(0, (host_of_[r] * most + local_of_[r]) * n, n).copy_(inputs[r].reshape({-1}));
	}
	if (root != leader && (rank_ == root || rank_ == leader)) {
		if (rank_ == leader)
			all = at::empty({nhosts * most * n}, out.options());
		intra_->hop(rank_ == root, all, local_of_[rank_ == root ? leader : root])->wait();
	}
	// 2. The leaders scatter the hosts' blocks from the root's leader.
	at::Tensor block; // this host's chunks, on the rank that scatters them within the host
	if (host_ == root_host && rank_ == root)
		block = all.narrow(0, root_host * most * n, most * n);
	if (leaders_ && host_ != root_host) {
		at::Tensor mine = at::empty({most * n}, out.options().device(at::kCPU));
		std::vector<at::Tensor> mv{mine};
		std::vector<std::vector<at::Tensor>> blocks; // gloo: none off the root
		c10d::ScatterOptions ls;
		ls.rootRank = root_host;
		between_hosts("scatter", true, [&] { leaders_->scatter(mv, blocks, ls)->wait(); });
		block = mine.to(out.device());
	} else if (leaders_) {
		at::Tensor h = host_copy(all);
		std::vector<at::Tensor> mv{at::empty({most * n}, h.options())};
		std::vector<std::vector<at::Tensor>> blocks(1);
		for (int h2 = 0; h2 < nhosts; ++h2)
			blocks[0].push_back(h.narrow(0, h2 * most * n, most * n));
		c10d::ScatterOptions ls;
		ls.rootRank = root_host;
		between_hosts("scatter", true, [&] { leaders_->scatter(mv, blocks, ls)->wait(); });
	}
	// 3. Within each host, from the root on its host, from the leader on the others.
	const int local_root = host_ == root_host ? local_of_[root] : 0;
	std::vector<std::vector<at::Tensor>> chunks(1);
	if (local_of_[rank_] == local_root)
		for (size_t j = 0; j < hosts_[host_].size(); ++j)
			chunks[0].push_back(block.narrow(0, static_cast<int64_t>(j) * n, n).view(out.sizes()));
	std::vector<at::Tensor> ov{out};
	c10d::ScatterOptions s;
	s.rootRank = local_root;
	intra_->scatter(ov, chunks, s)->wait();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::reduce_scatter(std::vector<at::Tensor> &outputs,
									std::vector<std::vector<at::Tensor>> &inputs,
									const c10d::ReduceScatterOptions &opts)
{
	at::Tensor out = one_neuron(outputs, "reduce_scatter");
	TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == static_cast<size_t>(size_),
		    "neuron backend: reduce_scatter takes one list of world_size input tensors");
	std::vector<at::Tensor> flat;
	for (const auto &i : inputs[0]) {
		same_kind_as(out, i, "reduce_scatter");
		TORCH_CHECK(i.numel() == out.numel(), "neuron backend: reduce_scatter inputs must match the output's size");
		flat.push_back(i.reshape({-1}));
	}
	check_reducible(out, opts.reduceOp, "reduce_scatter");
	at::Tensor in = at::cat(flat); // on the caller's stream, before the call's point
	return issue(c10d::OpType::REDUCE_SCATTER, out, {out}, "reduce_scatter",
		     [this, out, in, op = opts.reduceOp] { reduce_scatter_into(out, in, op); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::alltoall_base(at::Tensor &output, at::Tensor &input,
								       std::vector<int64_t> &output_splits,
								       std::vector<int64_t> &input_splits,
								       const c10d::AllToAllOptions &opts)
{
	const at::Tensor in = one_neuron({input}, "all_to_all_single");
	same_kind_as(in, output, "all_to_all_single");
	TORCH_CHECK(in.dim() > 0 && output.dim() > 0 && in.sizes().slice(1) == output.sizes().slice(1),
		    "neuron backend: all_to_all_single: input ", in.sizes(), " and output ", output.sizes(),
		    " must agree in every dimension but the first");
	const std::vector<int64_t> ins = splits_of(input_splits, in.size(0), size_, "input");
	const std::vector<int64_t> outs = splits_of(output_splits, output.size(0), size_, "output");
	return issue(c10d::OpType::ALLTOALL_BASE, in, {output}, "all_to_all_single",
		     [this, output, in, ins, outs, opts] { alltoall_now(output, in, ins, outs, opts); });
}

void ProcessGroupHierarchical::alltoall_now(const at::Tensor &output, const at::Tensor &in,
					    const std::vector<int64_t> &ins, const std::vector<int64_t> &outs,
					    const c10d::AllToAllOptions &opts)
{
	const std::vector<int64_t> in_at = offsets_of(ins), out_at = offsets_of(outs);
	std::vector<int64_t> local, remote; // peers on this host (in its order), on the others
	for (int j = 0; j < size_; ++j)
		(host_of_[j] == host_ ? local : remote).push_back(j);
	// Within the host: one all_to_all of this host's group over its ranks' rows
	// (queued on the device; the host goes on at once).
	std::vector<int64_t> lin_s = pick(ins, local), lout_s = pick(outs, local);
	at::Tensor lin = rows_for(in, ins, in_at, local);
	std::vector<int64_t> row_shape(output.sizes().begin(), output.sizes().end());
	row_shape[0] = std::accumulate(lout_s.begin(), lout_s.end(), int64_t(0));
	at::Tensor lout = at::empty(row_shape, output.options());
	c10d::AllToAllOptions o = opts;
	intra_->alltoall_base(lout, lin, lout_s, lin_s, o)->wait();
	// Between hosts: one gloo all_to_all of every rank, each sending only the rows
	// for ranks on other hosts (none to its own host).
	std::vector<int64_t> hin_s(size_, 0), hout_s(size_, 0);
	for (int64_t j : remote) {
		hin_s[j] = ins[j];
		hout_s[j] = outs[j];
	}
	at::Tensor hin = host_copy(rows_for(in, ins, in_at, remote));
	row_shape[0] = std::accumulate(hout_s.begin(), hout_s.end(), int64_t(0));
	at::Tensor hout = at::empty(row_shape, hin.options());
	between_hosts("all_to_all", false, [&] { everyone_->alltoall_base(hout, hin, hout_s, hin_s, o)->wait(); });
	put_rows(output, outs, out_at, local, lout);
	put_rows(output, outs, out_at, remote, hout.to(output.device()));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::alltoall(std::vector<at::Tensor> &outputs,
								  std::vector<at::Tensor> &inputs,
								  const c10d::AllToAllOptions &opts)
{
	// An all_to_all_single of the tensors' elements, one split per tensor.
	TORCH_CHECK(inputs.size() == static_cast<size_t>(size_) && outputs.size() == static_cast<size_t>(size_),
		    "neuron backend: all_to_all takes world_size (", size_, ") input and output tensors, got ",
		    inputs.size(), " and ", outputs.size());
	const at::Tensor first = one_neuron({inputs[0]}, "all_to_all");
	std::vector<at::Tensor> flat;
	std::vector<int64_t> in_s, out_s;
	for (int j = 0; j < size_; ++j) {
		same_kind_as(first, inputs[j], "all_to_all");
		same_kind_as(first, outputs[j], "all_to_all");
		flat.push_back(inputs[j].reshape({-1}));
		in_s.push_back(inputs[j].numel());
		out_s.push_back(outputs[j].numel());
	}
	at::Tensor in = at::cat(flat); // on the caller's stream, before the call's point
	return issue(c10d::OpType::ALLTOALL, first, outputs, "all_to_all", [this, in, outputs, in_s, out_s, opts] {
		at::Tensor out = at::empty({std::accumulate(out_s.begin(), out_s.end(), int64_t(0))}, in.options());
		alltoall_now(out, in, in_s, out_s, opts);
		int64_t o = 0;
		for (int j = 0; j < size_; ++j) {
			outputs[j].copy_(out.narrow(0, o, out_s[j]).view(outputs[j].sizes()));
			o += out_s[j];
		}
	});
}

} // namespace torch_neuron::dist
