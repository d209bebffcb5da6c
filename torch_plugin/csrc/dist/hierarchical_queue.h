// The issue queue of the hierarchical backend (hierarchical.h): every call of a
// ProcessGroupHierarchical runs its stages (neurond within the host, gloo between
// hosts) on one worker thread per group, in the order the calls were made, so a
// collective returns at once and the host's neurond group and the gloo groups see
// every rank's operations in issue order (as one NCCL stream would).
//
// A job first waits (on the worker, on the host) until the caller's stream has
// produced the job's inputs (the point it was at when the call was made), then
// runs with the worker's stream of that device current (runtime.h's
// collective_stream, never a caller's: the device stages never queue behind
// work the caller issued after the call, such as its wait for this very job). A
// collective's Work is a NeuronWork (process_group.h) on a StreamSignal of this
// queue: once the job's device stages are done the worker signals it, and
// Work.wait() makes the caller's current stream wait for that value on the
// device, without blocking the host; a job that fails makes every stream
// waiting on the signal fault with its message (which names the ranks), and
// the Work's wait() rethrows it once known. A point-to-point job only starts its
// transfers (hierarchical_work.h, StagedWork), so a rank may post a send and a
// recv before its peer does.
//
// Threads: issue()/post() on any caller thread (under mu_), the jobs on the
// worker. The destructor runs the jobs left, then joins the worker with the GIL
// released (a job's last tensor reference, or a future's Python callback, may
// need the GIL).
#pragma once

#include "process_group.h"
#include "stream_signal.h"

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

namespace torch_neuron::dist {

class IssueQueue {
public:
	// rank: for errors; timeout: how long a job waits for its inputs on the stream.
	IssueQueue(int rank, std::chrono::milliseconds timeout);
	~IssueQueue();
	IssueQueue(const IssueQueue &) = delete;
	IssueQueue &operator=(const IssueQueue &) = delete;

	// A collective: `body` runs the stages (synchronously, on the worker); the
	// Work is ordered on the caller's stream as above.
	c10::intrusive_ptr<c10d::Work> issue(c10d::OpType type, const c10::Device &device, std::vector<at::Tensor> outputs,
					     const char *name, std::function<void()> body);
	// A job whose Work is its own (point-to-point: `body` starts the transfers and
	// tells its StagedWork; an exception from it goes to `failed`).
	void post(const c10::Device &device, const char *name, std::function<void()> body,
		  std::function<void(std::exception_ptr)> failed);

private:
	struct Job {
		std::function<void()> body;
		std::function<void(std::exception_ptr)> failed; // post(): the body's error
		const char *name = nullptr;
		c10::Stream caller{c10::Stream::DEFAULT, c10::Device(c10::DeviceType::PrivateUse1, 0)};
		uint64_t after = 0; // the caller's stream's point the inputs are ready at
		c10::intrusive_ptr<NeuronWork> work; // issue() only
		std::shared_ptr<StreamSignal> signal;
	};
	Job job_on(const c10::Device &device, const char *name);
	void push(Job job);
	void worker();
	void run(Job &job);
	// Ends a collective's job: signal (or fail) the streams, complete the Work.
	void finish(Job &job, std::exception_ptr error);

	int rank_;
	std::chrono::milliseconds timeout_;
	bool blocking_wait_ = false; // NEURON_BLOCKING_WAIT=1: wait() blocks the host too
	std::mutex mu_;              // guards queue_, signals_ and stopping_
	std::map<int, std::shared_ptr<StreamSignal>> signals_; // by device
	std::map<int, c10::Stream> streams_;                    // collective_stream by device (worker only)
	std::condition_variable wake_;
	std::deque<Job> queue_;
	bool stopping_ = false;
	std::thread thread_;
};

} // namespace torch_neuron::dist
