#include "hierarchical_queue.h"

#include "../runtime.h"

#include <c10/core/StreamGuard.h>
#include <c10/util/Exception.h>

#include <Python.h>

#include <cstdlib>
#include <string>

namespace torch_neuron::dist {

namespace {

// The message a stream that waited for a failed job reports (no C++ frames).
std::string message_of(std::exception_ptr error)
{
	try {
		std::rethrow_exception(error);
	} catch (const c10::Error &e) {
		return e.what_without_backtrace();
	} catch (const std::exception &e) {
		return e.what();
	} catch (...) {
	}
	return "collective failed";
}

} // namespace

IssueQueue::IssueQueue(int rank, std::chrono::milliseconds timeout) : rank_(rank), timeout_(timeout)
{
	const char *blocking = std::getenv("NEURON_BLOCKING_WAIT");
	blocking_wait_ = blocking && std::string(blocking) == "1";
	thread_ = std::thread([this] { worker(); });
}

IssueQueue::~IssueQueue()
{
	// As ~ProcessGroupNeuron: the worker may need the GIL to finish its jobs.
	PyThreadState *python = Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr;
	{
		std::lock_guard lock(mu_);
		stopping_ = true;
	}
	wake_.notify_all();
	if (thread_.joinable())
		thread_.join();
	signals_.clear(); // waits for the devices' streams to pass their waits
	if (python)
		PyEval_RestoreThread(python);
}

IssueQueue::Job IssueQueue::job_on(const c10::Device &device, const char *name)
{
	Job job;
	job.name = name;
	job.caller = current_stream(device.index());
	job.after = stream_point(stream_queues(job.caller));
	return job;
}

c10::intrusive_ptr<c10d::Work> IssueQueue::issue(c10d::OpType type, const c10::Device &device,
						 std::vector<at::Tensor> outputs, const char *name,
						 std::function<void()> body)
{
	Job job = job_on(device, name);
	job.body = std::move(body);
	job.work = c10::make_intrusive<NeuronWork>(rank_, type, std::move(outputs), device);
	auto work = job.work;
	{
		// Reserved and queued under one lock: the worker signals the values in the
		// order they were reserved.
		std::lock_guard lock(mu_);
		auto &slot = signals_[device.index()];
		if (!slot)
			slot = std::make_shared<StreamSignal>(device.index());
		job.signal = slot;
		work->set_signal(slot, slot->reserve(), blocking_wait_);
		queue_.push_back(std::move(job));
	}
	wake_.notify_one();
	return work;
}

void IssueQueue::post(const c10::Device &device, const char *name, std::function<void()> body,
		      std::function<void(std::exception_ptr)> failed)
{
	Job job = job_on(device, name);
	job.body = std::move(body);
	job.failed = std::move(failed);
	push(std::move(job));
}

void IssueQueue::push(Job job)
{
	{
		std::lock_guard lock(mu_);
		queue_.push_back(std::move(job));
	}
	wake_.notify_one();
}

void IssueQueue::worker()
{
	for (;;) {
		Job job;
		{
			std::unique_lock lock(mu_);
			wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
			if (queue_.empty())
				return;
			job = std::move(queue_.front());
			queue_.pop_front();
		}
		std::exception_ptr error;
		try {
			run(job);
		} catch (...) {
			error = std::current_exception();
		}
		if (job.work)
			finish(job, error);
		else if (error && job.failed)
			job.failed(error);
	}
}

void IssueQueue::run(Job &job)
{
	StreamQueues &caller = stream_queues(job.caller);
	const neuron_status s = neuron_queue_wait(caller.core, job.after, timeout_.count() * 1'000'000);
	if (s != NEURON_OK)
		C10_THROW_ERROR(DistBackendError, "neuron backend: rank " + std::to_string(rank_) + ": " + job.name +
							  ": waiting for its inputs on the stream: " + neuron_last_error());
	const int device = job.caller.device_index();
	auto it = streams_.find(device);
	if (it == streams_.end())
		it = streams_.emplace(device, collective_stream(device)).first;
	c10::StreamGuard guard(it->second);
	job.body();
	if (job.work)
		sync_stream(stream_queues(it->second)); // the device stages are done (or raise here)
}

void IssueQueue::finish(Job &job, std::exception_ptr error)
{
	if (!error) {
		try {
			job.signal->signal(); // the streams' waits for it may pass
		} catch (...) {
			error = std::current_exception();
		}
	}
	if (error)
		job.signal->fail(message_of(error)); // streams waiting for it fault, naming the cause
	c10::StreamGuard guard(job.caller); // the future's events go on the caller's stream
	job.work->complete(error);
}

} // namespace torch_neuron::dist
