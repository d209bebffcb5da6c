// c10d backend "neuron": torch.distributed collectives on neuron tensors, done by
// neurond in device memory (a collective group of the ranks' tenants; see
// contracts/neuron.proto, CollectiveJoin). The ranks must share one neurond (one
// host); a group across hosts is a ProcessGroupHierarchical (hierarchical.h) made
// of one of these per host and gloo between them.
//
// Each collective is queued, in call order, to this backend's worker thread with
// the point its inputs were produced at on the caller's stream; the call returns
// at once. The worker waits for that point, asks neurond to run it (over the
// rank's channel connection, so the main connection stays free), signals its end
// on the device (stream_signal.h) and completes the Work and its future.
// Work.wait() orders the caller's current stream after the collective on the
// device and returns without waiting for it, as NCCL's does (the host blocks only
// for a barrier, or with NEURON_BLOCKING_WAIT=1); is_completed() polls. An output
// that is not contiguous is written through a contiguous buffer whose copy back
// is queued on the caller's stream at the call, after a device-side wait for
// the collective.
//
// Threads: the caller's thread enqueues; one worker thread per backend runs the
// queue (queue_ and signals_ under mu_); a Work's state is c10d::Work's own (its
// mutex).
#pragma once

#include "rank_names.h"
#include "stream_signal.h"

#include <neuron/neuron.h>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

namespace torch_neuron::dist {

class NeuronWork : public c10d::Work {
public:
	NeuronWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs, c10::Device device);
	c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
	std::vector<at::Tensor> result() override { return outputs_; }
	// Before it is queued (a coalesced batch learns its tensors as they come).
	void set_outputs(std::vector<at::Tensor> outputs) { outputs_ = std::move(outputs); }
	// Before it is queued: where the device learns that it ended.
	void set_signal(std::shared_ptr<StreamSignal> signal, uint64_t value, bool blocking);
	// Worker thread: the collective ended (error: null if it succeeded).
	void complete(std::exception_ptr error);
	// The current stream of the work's device waits (on the device) for the
	// collective; the host waits too only if blocking. Rethrows a failure known by now.
	bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
	// The current stream waits for the collective (host: no wait).
	void synchronize() override;
	// A recv from any source: the rank it received from (the host waits for it).
	int sourceRank() const override;
	// Worker thread, before complete().
	void set_source_rank(int rank) { source_rank_ = rank; }

private:
	std::vector<at::Tensor> outputs_;
	c10::intrusive_ptr<c10::ivalue::Future> future_;
	std::shared_ptr<StreamSignal> signal_;
	uint64_t signal_value_ = 0;
	bool blocking_ = false;
	int source_rank_ = -1; // written before finish(), read after a wait for it
};

class ProcessGroupNeuron : public c10d::Backend {
public:
	// names: how errors name the ranks (a host's part of a hierarchical group
	// names them by their rank in the whole group; rank_names.h).
	ProcessGroupNeuron(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
			   std::chrono::milliseconds timeout, RankNames names = {});
	~ProcessGroupNeuron() override;

	const std::string getBackendName() const override { return "neuron"; }
	// The group's timeout (init_process_group's, within neurond's limit).
	std::chrono::milliseconds timeout() const { return timeout_; }

	c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &tensors, const c10d::BroadcastOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &tensors, const c10d::AllreduceOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor> &tensors,
							   const c10d::AllreduceCoalescedOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &tensors, const c10d::ReduceOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &outputs,
						 std::vector<at::Tensor> &inputs, const c10d::AllgatherOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &output, at::Tensor &input,
						       const c10d::AllgatherOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor> &outputs,
								       std::vector<at::Tensor> &inputs,
								       const c10d::AllgatherOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>> &outputs,
					      std::vector<at::Tensor> &inputs, const c10d::GatherOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor> &outputs,
					       std::vector<std::vector<at::Tensor>> &inputs,
					       const c10d::ScatterOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor> &outputs,
						      std::vector<std::vector<at::Tensor>> &inputs,
						      const c10d::ReduceScatterOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor &output, at::Tensor &input,
							    const c10d::ReduceScatterOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor> &outputs,
								       std::vector<at::Tensor> &inputs,
								       const c10d::ReduceScatterOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &output, at::Tensor &input,
						     std::vector<int64_t> &output_splits,
						     std::vector<int64_t> &input_splits,
						     const c10d::AllToAllOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
						const c10d::AllToAllOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors, int dst, int tag) override;
	c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors, int src, int tag) override;
	c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor> &tensors, int tag) override;
	// batch_isend_irecv: the sends and receives between start and end go to
	// neurond as one batch, so a ring exchange (every rank sends, then receives)
	// cannot deadlock on the in-order worker.
	bool supportsCoalescing() const override { return true; }
	void startCoalescing() override;
	c10::intrusive_ptr<c10d::Work> endCoalescing() override;
	// The hierarchical backend's hops inside this host (hierarchical.h): t (contiguous,
	// neuron) sent to or received from peer, with a tag no torch.distributed call can
	// give, so a hop never matches a user's send or recv. Not while coalescing.
	c10::intrusive_ptr<c10d::Work> hop(bool send, const at::Tensor &t, int peer);

private:
	// One collective as the worker runs it: the spec neurond gets (device, input
	// and output addresses filled from the tensors), the contiguous tensors it
	// reads and writes, and what to copy back into the caller's tensors after.
	struct Job {
		neuron_collective spec{};
		at::Tensor input, output;          // contiguous (may be undefined: no buffer)
		std::function<void()> copy_back;   // queued on the caller's stream by submit()
		// Instead of spec: a point-to-point batch (CollectiveP2P) over the
		// buffers `keep` holds; or neither (a marker that orders only).
		bool is_p2p = false, marker = false;
		const char *name = nullptr; // for errors (else the spec's op)
		std::vector<neuron_p2p_op> p2p;
		std::vector<at::Tensor> keep;
		c10::Stream stream{c10::Stream::DEFAULT, c10::Device(c10::DeviceType::PrivateUse1, 0)};
		uint64_t after = 0;                // the stream's point the inputs are ready at
		c10::intrusive_ptr<NeuronWork> work;
		std::shared_ptr<StreamSignal> signal;
	};
	// Caller: queues the job to the worker (its Work learns its signal), then
	// queues its copy back on the caller's stream after a device-side wait.
	void submit(Job job);

	c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, uint32_t op, const at::Tensor &input,
					       const at::Tensor &output, uint64_t count, uint32_t reduce, uint32_t root,
					       std::vector<at::Tensor> results, std::function<void()> copy_back = {});
	// A point-to-point batch under construction (one call, or a coalesced group).
	struct P2PBatch {
		std::vector<neuron_p2p_op> ops;
		std::vector<at::Tensor> keep, results;
		std::vector<std::function<void()>> copy_backs;
		c10d::OpType type = c10d::OpType::SEND;
	};
	// t: contiguous, neuron; held by the batch until the run ends.
	void add_p2p(P2PBatch &b, bool send, const at::Tensor &t, int peer, uint64_t tag);
	c10::intrusive_ptr<c10d::Work> enqueue_p2p(P2PBatch b, const c10::Device &device, const char *name,
						   c10::intrusive_ptr<NeuronWork> work = {});
	c10::intrusive_ptr<c10d::Work> alltoall_uneven(at::Tensor &output, const at::Tensor &input,
						       const std::vector<int64_t> &output_splits,
						       const std::vector<int64_t> &input_splits);
	c10::intrusive_ptr<c10d::Work> point_to_point(std::vector<at::Tensor> &tensors, bool send, int peer, int tag);
	void worker();
	void run(Job &job);
	void join_group(const c10::intrusive_ptr<c10d::Store> &store);
	// Raises, naming them, if the ranks' neurond instances differ.
	void check_one_daemon(const c10::intrusive_ptr<c10d::Store> &store);

	std::chrono::milliseconds timeout_;
	RankNames names_;
	neuron_client *channel_ = nullptr; // this rank's second connection (observer)
	uint64_t group_id_ = 0;
	uint64_t seq_ = 0;                 // worker thread only
	bool coalescing_ = false;          // caller's thread: between start/endCoalescing
	P2PBatch coalesced_;
	c10::intrusive_ptr<NeuronWork> coalesced_work_; // what the batch's ops return
	bool blocking_wait_ = false;       // NEURON_BLOCKING_WAIT=1: wait() blocks the host too
	std::mutex mu_;                    // guards queue_, signals_ and stopping_
	std::map<int, std::shared_ptr<StreamSignal>> signals_; // by device
	std::condition_variable wake_;
	std::deque<Job> queue_;
	bool stopping_ = false;
	std::thread thread_;
};

// Where this process's neurond is: "<host name>:<socket path>" (a host, for the
// hierarchical backend).
std::string daemon_location();

// global_ranks: empty, or this group's ranks' ranks in the hierarchical group it is a part of.
c10::intrusive_ptr<ProcessGroupNeuron> create_process_group(const c10::intrusive_ptr<c10d::Store> &store, int rank,
							    int size, std::chrono::milliseconds timeout,
							    std::vector<int64_t> global_ranks = {});

} // namespace torch_neuron::dist
