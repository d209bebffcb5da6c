#include "hierarchical_work.h"

#include <algorithm>

namespace torch_neuron::dist {

namespace {

std::vector<c10::Device> devices_of(const std::vector<at::Tensor> &ts)
{
	std::vector<c10::Device> out;
	for (const auto &t : ts)
		if (!t.is_cpu() && std::find(out.begin(), out.end(), t.device()) == out.end())
			out.push_back(t.device());
	return out;
}

} // namespace

DoneWork::DoneWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs)
	: c10d::Work(rank, type), outputs_(std::move(outputs)),
	  future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
							  devices_of(outputs_)))
{
	finish();
	future_->markCompleted(c10::IValue(outputs_));
}

bool StagedWork::isCompleted()
{
	for (const auto &p : parts_)
		if (!p->isCompleted())
			return false;
	return true;
}

bool StagedWork::wait(std::chrono::milliseconds timeout)
{
	if (landed_)
		return true;
	try {
		for (const auto &p : parts_)
			p->wait(timeout); // rethrows a part's failure
		for (const auto &land : landings_)
			land();
	} catch (...) {
		finish(std::current_exception());
		throw;
	}
	landed_ = true;
	parts_.clear();
	landings_.clear();
	finish();
	return true;
}

} // namespace torch_neuron::dist
