// The data movement of one collective of a group (collective_groups.h), run by one
// neurond thread off the control thread: it resolves every member's operands in
// that member's own memory (TenantMemory, under its shared lock, so nothing is
// freed under it) and copies and reduces device memory to device memory. Buffers
// stay where they are: the emu backend keeps every tenant's HBM in this process,
// so a member's device address resolves to bytes neurond addresses directly.
//
// Scheduling against inference: the runner's thread is not a NeuronCore engine,
// but it yields like one. Between chunks of 256 KiB it asks whether an inference
// tenant has work pending on a device the collective touches (InferenceWaiting)
// and, while one has, waits (up to 2 ms per chunk, so a training job's collective
// still progresses under a saturating inference load): an inference command waits
// for at most one chunk, as it waits for at most one training tile on its core.
//
// Threads: submit() from the control thread; the job runs on the runner's thread;
// its `done` is posted back to the control thread's io_context. InferenceWaiting
// is called on the runner's thread (it must be safe there).
#pragma once

#include <backend/tenant_context.h>
#include <neuron.pb.h>

#include <utility> // before Asio: Boost 1.74 awaitable.hpp uses std::exchange without it
#include <boost/asio.hpp>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace neuron::daemon {

struct CollectiveOperand {
	std::shared_ptr<backend::TenantContext> ctx; // the member tenant's memory
	uint32_t device = 0;
	uint64_t input = 0;
	uint64_t output = 0;
};

// One matched send/recv pair of a CollectiveP2P: bytes from the sender's input
// to the receiver's output.
struct CollectiveCopy {
	CollectiveOperand from, to; // input of `from`, output of `to`
	uint32_t from_rank = 0, to_rank = 0;
	uint64_t bytes = 0;
};

struct CollectiveJob {
	api::CollectiveRun spec;                 // op, reduce, dtype, count, root (rank 0's)
	std::vector<CollectiveOperand> members;  // by rank
	// Instead of spec: point-to-point copies (members unused).
	std::vector<CollectiveCopy> copies;
	// Training work, which yields to inference (false: a member is an inference
	// tenant, so the collective is inference work itself).
	bool yields = true;
	// Control thread, after the run: "" per rank, or why that rank's operands were
	// refused (nothing moved then) in *bad_rank / *error.
	std::function<void(int bad_rank, const std::string &error)> done;
};

// Why a run spec is malformed ("" if it is not): op, dtype, count, root.
std::string check_collective_spec(const api::CollectiveRun &spec, uint32_t world_size);
// Why a point-to-point op is malformed ("" if it is not): peer, dtype, count.
std::string check_p2p_op(const api::P2POp &op, uint32_t rank, uint32_t world_size);
// Bytes per element of a collective dtype.
uint64_t collective_element_size(uint32_t dtype);
// Short name of an op, for messages ("all_reduce").
const char *collective_name(api::CollectiveOp op);

// Whether an inference tenant has commands pending on `device` (null: never).
using InferenceWaiting = std::function<bool(uint32_t device)>;

class CollectiveRunner {
public:
	CollectiveRunner(boost::asio::io_context &io, InferenceWaiting inference_waiting);
	~CollectiveRunner(); // finishes the queued jobs, then joins
	void submit(CollectiveJob job);

private:
	void loop();
	boost::asio::io_context &io_;
	InferenceWaiting inference_waiting_;
	// Whether the thread may go back to nice 0 after a training collective (else
	// it stays at 0: an inference group's collective must not run niced).
	bool may_renice_;
	static constexpr int kTrainingCollectiveNice = 10;
	std::mutex mutex_; // guards queue_ and stopping_
	std::condition_variable wake_;
	std::deque<CollectiveJob> queue_;
	bool stopping_ = false;
	std::thread thread_;
};

// Runs the job's data movement on the calling thread; -1 and "" when it moved,
// else the rank whose operands were refused and why.
std::pair<int, std::string> run_collective(const CollectiveJob &job, const InferenceWaiting &inference_waiting = {});

} // namespace neuron::daemon
