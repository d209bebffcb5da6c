#include "hierarchical_work.h"

namespace torch_neuron::dist {

void StagedWork::add_part(c10::intrusive_ptr<c10d::Work> part)
{
	std::lock_guard lock(mu_);
	parts_.push_back(std::move(part));
}

void StagedWork::add_landing(std::function<void()> landing)
{
	std::lock_guard lock(mu_);
	landings_.push_back(std::move(landing));
}

void StagedWork::add_outputs(const std::vector<at::Tensor> &ts)
{
	std::lock_guard lock(mu_);
	outputs_.insert(outputs_.end(), ts.begin(), ts.end());
}

void StagedWork::started(std::exception_ptr error)
{
	{
		std::lock_guard lock(mu_);
		started_ = true;
		if (!start_error_) // a coalesced batch's first failure is its error
			start_error_ = error;
	}
	started_cv_.notify_all();
}

bool StagedWork::isCompleted()
{
	std::lock_guard lock(mu_);
	if (!started_)
		return false;
	if (landed_ || start_error_)
		return true;
	for (const auto &p : parts_)
		if (!p->isCompleted())
			return false;
	return true;
}

bool StagedWork::wait(std::chrono::milliseconds timeout)
{
	{
		std::unique_lock lock(mu_);
		started_cv_.wait(lock, [this] { return started_; });
	}
	if (landed_)
		return true;
	try {
		if (start_error_)
			std::rethrow_exception(start_error_);
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

int StagedWork::sourceRank() const
{
	const_cast<StagedWork *>(this)->wait();
	TORCH_CHECK(source_rank_ >= 0, "neuron backend: source_rank() is for a recv from any source (src=None)");
	return source_rank_;
}

} // namespace torch_neuron::dist
