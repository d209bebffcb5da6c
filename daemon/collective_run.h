// The data movement of one collective of a group (collective_groups.h), planned by
// one neurond thread off the control thread: it binds every member's operands in
// that member's own memory (TenantMemory, under its shared lock, so nothing is
// freed under it) and has the backend's mover (backend/collective_mover.h) copy
// and reduce device memory to device memory in chunks. Buffers stay where they
// are: on emu the mover works on the HBM neurond holds in this process, on kmd it
// shares the members' BOs into neurond's own driver file and moves the bytes with
// the device's DMA and compute jobs.
//
// Scheduling against inference: the runner's thread is not a NeuronCore engine,
// but it yields like one. While an inference tenant has a core on a device a
// training job's collective touches, the thread runs that collective at nice 10
// (as an engine runs training tiles with --training-nice), so a waking inference
// thread (the tenant about to submit, the engine it wakes) takes the CPU from it
// at once; and between chunks of 256 KiB it waits while that tenant has commands
// pending (up to 2 ms per chunk, so the collective still progresses under a
// saturating inference load). Without inference tenants it runs at nice 0.
//
// On kmd the chunks are device jobs: the thread waits for the chunk before the one
// just issued at each step, so the pacer's waits hold the device's work back too.
//
// Threads: submit() from the control thread; the job runs on the runner's thread;
// its `done` is posted back to the control thread's io_context. InferenceLoadOf
// is called on the runner's thread (it must be safe there).
#pragma once

#include <backend/device_backend.h>
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
	// Control thread, after the run: bad_rank -1 and error "" when it moved; the
	// rank whose operands were refused (nothing moved then) and why; or -1 and why
	// the device failed to move it (some bytes may have moved).
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

// Inference work on a device: no inference tenant has a core there, one has but
// nothing pending, or commands are pending.
enum class InferenceLoad { None, Idle, Pending };
using InferenceLoadOf = std::function<InferenceLoad(uint32_t device)>; // null: always None

class CollectiveRunner {
public:
	CollectiveRunner(boost::asio::io_context &io, backend::DeviceBackend &devices, InferenceLoadOf inference);
	~CollectiveRunner(); // finishes the queued jobs, then joins
	void submit(CollectiveJob job);

private:
	void loop();
	bool beside_inference(const CollectiveJob &job) const;
	boost::asio::io_context &io_;
	backend::DeviceBackend &devices_; // collective_mover() on this thread
	InferenceLoadOf inference_;
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

// Runs the job's data movement on the calling thread: CollectiveJob::done's
// arguments.
std::pair<int, std::string> run_collective(backend::DeviceBackend &devices, const CollectiveJob &job,
					   const InferenceLoadOf &inference = {});

} // namespace neuron::daemon
