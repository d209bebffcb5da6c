// ProcessGroupHierarchical's point-to-point: send and recv (alone or in a
// coalesced batch, batch_isend_irecv). Between ranks of a host through their
// neurond group (as on one host); between hosts through the gloo group of every
// rank, on host staging copies. See hierarchical.h and hierarchical_work.h.
#include "hierarchical.h"
#include "hierarchical_staging.h"

#include <c10/util/Exception.h>

namespace torch_neuron::dist {

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::p2p_between_hosts(const at::Tensor &t, bool send, int peer,
									     int tag)
{
	const char *op = send ? "send" : "recv";
	c10::intrusive_ptr<StagedWork> work =
		coalescing_ ? batch_ : c10::make_intrusive<StagedWork>(rank_, send ? c10d::OpType::SEND : c10d::OpType::RECV);
	// The send's copy is taken now (the caller may reuse its tensor after the call
	// as after NCCL's once the stream passed it); the recv's lands at wait().
	std::vector<at::Tensor> h{send ? host_copy(t) : at::empty(t.sizes(), t.options().device(at::kCPU))};
	c10::intrusive_ptr<c10d::Work> part;
	between_hosts(op, false, [&] { part = send ? everyone_->send(h, peer, tag) : everyone_->recv(h, peer, tag); });
	work->add_part(part);
	if (!send)
		work->add_landing([t, h = h[0]] { copy_from_host(t, h); });
	work->add_outputs({t});
	return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::point_to_point(std::vector<at::Tensor> &tensors, bool send,
									  int peer, int tag)
{
	const at::Tensor t = one_neuron(tensors, send ? "send" : "recv");
	TORCH_CHECK(peer >= 0 && peer < size_, "neuron backend: ", send ? "send to" : "recv from", " rank ", peer,
		    ", which is not a rank of this group of ", size_);
	TORCH_CHECK(peer != rank_, "neuron backend: rank ", rank_, " cannot ", send ? "send to" : "recv from", " itself");
	if (host_of_[peer] != host_)
		return p2p_between_hosts(t, send, peer, tag);
	std::vector<at::Tensor> v{t};
	auto part = send ? intra_->send(v, local_of_[peer], tag) : intra_->recv(v, local_of_[peer], tag);
	if (coalescing_) {
		batch_->add_outputs({t}); // its part is the neurond batch's, added at endCoalescing
		return batch_;
	}
	return part;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::send(std::vector<at::Tensor> &tensors, int dst, int tag)
{
	return point_to_point(tensors, true, dst, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::recv(std::vector<at::Tensor> &tensors, int src, int tag)
{
	return point_to_point(tensors, false, src, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::recvAnysource(std::vector<at::Tensor> &, int)
{
	C10_THROW_ERROR(DistBackendError, "neuron backend: recv from any source (src=None) is not supported across hosts "
					  "(this group's " + std::to_string(size_) + " ranks use " +
					  std::to_string(hosts_.size()) + " neurond instances); name the source rank");
}

void ProcessGroupHierarchical::startCoalescing()
{
	TORCH_CHECK(!coalescing_, "neuron backend: startCoalescing while already coalescing");
	intra_->startCoalescing();
	coalescing_ = true;
	batch_ = c10::make_intrusive<StagedWork>(rank_, c10d::OpType::COALESCED);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::endCoalescing()
{
	TORCH_CHECK(coalescing_, "neuron backend: endCoalescing without startCoalescing");
	coalescing_ = false;
	auto work = std::move(batch_);
	batch_.reset();
	work->add_part(intra_->endCoalescing()); // the host's sends and receives, one neurond batch
	return work;
}

} // namespace torch_neuron::dist
