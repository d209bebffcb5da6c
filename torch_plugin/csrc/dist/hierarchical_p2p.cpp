// ProcessGroupHierarchical's point-to-point: send and recv (alone or in a
// coalesced batch, batch_isend_irecv), and recv from any source on a rank alone
// on its host. Between ranks of a host through their
// neurond group (as on one host); between hosts through the gloo group of every
// rank, on host staging copies. See hierarchical.h and hierarchical_work.h.
#include "hierarchical.h"
#include "hierarchical_staging.h"

#include "../runtime.h"

#include <c10/util/Exception.h>

namespace torch_neuron::dist {

void ProcessGroupHierarchical::p2p_between_hosts(const c10::intrusive_ptr<StagedWork> &work, const at::Tensor &t,
						  const at::Tensor &h, bool send, int peer, int tag)
{
	std::vector<at::Tensor> hv{h};
	c10::intrusive_ptr<c10d::Work> part;
	between_hosts(send ? "send" : "recv", false,
		      [&] { part = send ? everyone_->send(hv, peer, tag) : everyone_->recv(hv, peer, tag); });
	work->add_part(part);
	if (!send)
		work->add_landing([t, h] { copy_from_host(t, h); });
}

void ProcessGroupHierarchical::post_p2p(const c10::intrusive_ptr<StagedWork> &work, const at::Tensor &t,
					const char *name, std::function<void()> start)
{
	const bool batched = coalescing_; // endCoalescing's job says the batch is started
	queue_->post(
		t.device(), name,
		[work, start = std::move(start), batched] {
			start();
			if (!batched)
				work->started();
		},
		[work](std::exception_ptr error) { work->started(error); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::point_to_point(std::vector<at::Tensor> &tensors, bool send,
									  int peer, int tag)
{
	const char *name = send ? "send" : "recv";
	const at::Tensor t = one_neuron(tensors, name);
	TORCH_CHECK(peer >= 0 && peer < size_, "neuron backend: ", send ? "send to" : "recv from", " rank ", peer,
		    ", which is not a rank of this group of ", size_);
	TORCH_CHECK(peer != rank_, "neuron backend: rank ", rank_, " cannot ", send ? "send to" : "recv from", " itself");
	c10::intrusive_ptr<StagedWork> work =
		coalescing_ ? batch_ : c10::make_intrusive<StagedWork>(rank_, send ? c10d::OpType::SEND : c10d::OpType::RECV);
	work->add_outputs({t});
	if (host_of_[peer] != host_) {
		// The send's host copy is taken now (the caller may reuse its tensor after
		// the call, as after NCCL's once the stream passed it); the recv's lands at wait().
		const at::Tensor h = send ? host_copy(t) : at::empty(t.sizes(), t.options().device(at::kCPU));
		post_p2p(work, t, name, [this, work, t, h, send, peer, tag] { p2p_between_hosts(work, t, h, send, peer, tag); });
		return work;
	}
	// Within the host: neurond moves a contiguous buffer (made on the caller's
	// stream now); a recv into a tensor that is not contiguous lands at wait().
	const at::Tensor buf = send || t.is_contiguous() ? t.contiguous() : at::empty(t.sizes(), t.options());
	const bool batched = coalescing_; // the part is the neurond batch's, added at endCoalescing
	const int local = local_of_[peer];
	post_p2p(work, t, name, [this, work, t, buf, send, local, tag, batched] {
		std::vector<at::Tensor> v{buf};
		auto part = send ? intra_->send(v, local, tag) : intra_->recv(v, local, tag);
		if (!batched)
			work->add_part(part);
		if (!send && !buf.is_same(t))
			work->add_landing([t, buf] { t.copy_(buf); });
	});
	return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::send(std::vector<at::Tensor> &tensors, int dst, int tag)
{
	return point_to_point(tensors, true, dst, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::recv(std::vector<at::Tensor> &tensors, int src, int tag)
{
	return point_to_point(tensors, false, src, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::recvAnysource(std::vector<at::Tensor> &tensors, int tag)
{
	// A rank alone on its host hears only from other hosts, all through gloo:
	// gloo's own receive from any rank, which says whose send it took. With
	// ranks beside it, a send from one of them would come through neurond and one
	// from another host through gloo, and a receive posted to one cannot be taken
	// back when the other matches first (a neurond receive left posted would time
	// out and break the group): refused, naming the ranks.
	const at::Tensor t = one_neuron(tensors, "recv");
	if (hosts_[host_].size() > 1) {
		std::string beside;
		for (int64_t r : hosts_[host_])
			if (r != rank_)
				beside += (beside.empty() ? "" : ", ") + std::to_string(r);
		C10_THROW_ERROR(DistBackendError,
				"neuron backend: rank " + std::to_string(rank_) +
					": recv from any source (src=None) across hosts is supported only on a rank alone "
					"on its host (neurond); rank(s) " + beside +
					" share this one, and their sends come through neurond while other hosts' come "
					"through gloo; name the source rank");
	}
	c10::intrusive_ptr<StagedWork> work =
		coalescing_ ? batch_ : c10::make_intrusive<StagedWork>(rank_, c10d::OpType::RECVANYSOURCE);
	work->add_outputs({t});
	const at::Tensor h = at::empty(t.sizes(), t.options().device(at::kCPU));
	StagedWork *landing_on = work.get(); // its landings run inside its wait(): alive
	post_p2p(work, t, "recv", [this, work, landing_on, t, h, tag] {
		std::vector<at::Tensor> hv{h};
		c10::intrusive_ptr<c10d::Work> part;
		between_hosts("recv", false, [&] { part = everyone_->recvAnysource(hv, tag); });
		work->add_part(part);
		work->add_landing([landing_on, part, t, h] {
			copy_from_host(t, h);
			landing_on->set_source_rank(part->sourceRank());
		});
	});
	return work;
}

void ProcessGroupHierarchical::startCoalescing()
{
	TORCH_CHECK(!coalescing_, "neuron backend: startCoalescing while already coalescing");
	auto batch = c10::make_intrusive<StagedWork>(rank_, c10d::OpType::COALESCED);
	queue_->post(
		c10::Device(c10::DeviceType::PrivateUse1, current_device()), "batch_isend_irecv",
		[this] { intra_->startCoalescing(); }, [batch](std::exception_ptr error) { batch->started(error); });
	coalescing_ = true;
	batch_ = batch;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHierarchical::endCoalescing()
{
	TORCH_CHECK(coalescing_, "neuron backend: endCoalescing without startCoalescing");
	coalescing_ = false;
	auto work = std::move(batch_);
	batch_.reset();
	queue_->post(
		c10::Device(c10::DeviceType::PrivateUse1, current_device()), "batch_isend_irecv",
		[this, work] {
			work->add_part(intra_->endCoalescing()); // the host's sends and receives, one neurond batch
			work->started();
		},
		[work](std::exception_ptr error) { work->started(error); });
	return work;
}

} // namespace torch_neuron::dist
