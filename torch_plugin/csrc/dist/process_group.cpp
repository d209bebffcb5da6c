#include "process_group.h"
#include "split_sizes.h"

#include "../runtime.h"

#include <neuron/p2p_sources.h>

#include <ATen/ATen.h>
#include <c10/core/StreamGuard.h>
#include <c10/util/Exception.h>

#include <Python.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sys/random.h>
#include <unistd.h>

namespace torch_neuron::dist {

namespace {

constexpr size_t kSecretBytes = 32, kNonceBytes = 16;
constexpr int64_t kMaxTimeoutMs = 3'600'000; // neurond's limit (CollectiveJoin)
// Tags of the sends and receives all_to_all is made of: above every user tag (an
// int), so they never match a user's send or recv.
constexpr uint64_t kAllToAllTag = uint64_t(1) << 32;
constexpr uint64_t kHopTag = kAllToAllTag + 1; // hop(): the hierarchical backend's own
constexpr int kAnySource = -1; // point_to_point's peer for recvAnysource

const char *op_name(uint32_t op)
{
	switch (op) {
	case NEURON_COLL_ALL_REDUCE: return "all_reduce";
	case NEURON_COLL_BROADCAST: return "broadcast";
	case NEURON_COLL_ALL_GATHER: return "all_gather";
	case NEURON_COLL_REDUCE_SCATTER: return "reduce_scatter";
	case NEURON_COLL_BARRIER: return "barrier";
	case NEURON_COLL_REDUCE: return "reduce";
	case NEURON_COLL_GATHER: return "gather";
	case NEURON_COLL_SCATTER: return "scatter";
	case NEURON_COLL_ALL_TO_ALL: return "all_to_all";
	default: return "collective";
	}
}

uint32_t reduce_of(const c10d::ReduceOp &op)
{
	switch (op.op_) {
	case c10d::ReduceOp::SUM: return NEURON_REDUCE_SUM;
	case c10d::ReduceOp::AVG: return NEURON_REDUCE_AVG;
	case c10d::ReduceOp::MAX: return NEURON_REDUCE_MAX;
	case c10d::ReduceOp::MIN: return NEURON_REDUCE_MIN;
	case c10d::ReduceOp::PRODUCT: return NEURON_REDUCE_PRODUCT;
	default:
		TORCH_CHECK(false, "neuron backend: reduce op ", static_cast<int>(op.op_),
			    " is not supported (SUM, AVG, MAX, MIN and PRODUCT are)");
	}
}

uint32_t dtype_of(const at::Tensor &t, bool reducing)
{
	switch (t.scalar_type()) {
	case c10::kFloat: return NEURON_DTYPE_F32;
	case c10::kBFloat16: return NEURON_DTYPE_BF16;
	case c10::kHalf: return NEURON_DTYPE_F16;
	case c10::kInt: return NEURON_DTYPE_I32;
	case c10::kLong: return NEURON_DTYPE_I64;
	case c10::kByte: return NEURON_DTYPE_U8;
	case c10::kBool:
		// A byte per element: moved as u8, but sums of bools are not bools.
		TORCH_CHECK(!reducing, "neuron backend: reductions of bool tensors are not supported");
		return NEURON_DTYPE_U8;
	default:
		TORCH_CHECK(false, "neuron backend: dtype ", t.scalar_type(),
			    " is not supported (float32, bfloat16, float16, int32, int64, uint8, bool)");
	}
}

at::Tensor single(const std::vector<at::Tensor> &tensors, const char *what)
{
	TORCH_CHECK(tensors.size() == 1, "neuron backend: ", what, " takes one tensor per rank, got ", tensors.size());
	at::Tensor t = tensors[0];
	TORCH_CHECK(t.device().is_privateuseone(), "neuron backend: ", what, " needs neuron tensors, got one on ",
		    t.device(), " (use the gloo backend for CPU tensors, e.g. init_process_group(\"cpu:gloo,neuron:neuron\"))");
	return t;
}

void same_kind(const at::Tensor &a, const at::Tensor &b, const char *what)
{
	TORCH_CHECK(b.device() == a.device(), "neuron backend: ", what, ": tensors on ", a.device(), " and ", b.device());
	TORCH_CHECK(b.scalar_type() == a.scalar_type(), "neuron backend: ", what, ": dtypes ", a.scalar_type(), " and ",
		    b.scalar_type(), " differ");
}

uint64_t address(const at::Tensor &t) { return t.defined() ? reinterpret_cast<uint64_t>(t.data_ptr()) : 0; }

// A contiguous tensor to write into `out`, and the copy that puts it back (none if
// `out` is contiguous already).
at::Tensor writable(const at::Tensor &out, std::function<void()> *copy_back)
{
	if (out.is_contiguous())
		return out;
	at::Tensor tmp = at::empty(out.sizes(), out.options());
	*copy_back = [out, tmp]() mutable { out.copy_(tmp); };
	return tmp;
}

std::string random_bytes(size_t n)
{
	std::string out(n, '\0');
	size_t got = 0;
	while (got < n) {
		const ssize_t r = getrandom(out.data() + got, n - got, 0);
		TORCH_CHECK(r > 0 || errno == EINTR, "neuron backend: getrandom failed: ", std::strerror(errno));
		if (r > 0)
			got += static_cast<size_t>(r);
	}
	return out;
}

std::string hex(const std::string &bytes)
{
	static const char *digits = "0123456789abcdef";
	std::string out;
	for (unsigned char c : bytes) {
		out += digits[c >> 4];
		out += digits[c & 15];
	}
	return out;
}

} // namespace

NeuronWork::NeuronWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs, c10::Device device)
	: c10d::Work(rank, type), outputs_(std::move(outputs)),
	  future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
							  std::vector<c10::Device>{device}))
{
}

void NeuronWork::set_signal(std::shared_ptr<StreamSignal> signal, uint64_t value, bool blocking)
{
	signal_ = std::move(signal);
	signal_value_ = value;
	blocking_ = blocking || opType_ == c10d::OpType::BARRIER; // a barrier is for the host
}

bool NeuronWork::wait(std::chrono::milliseconds timeout)
{
	if (blocking_)
		c10d::Work::wait(timeout); // the host waits for the end; rethrows a failure
	else if (isCompleted() && exception())
		std::rethrow_exception(exception());
	synchronize();
	return true;
}

void NeuronWork::synchronize()
{
	if (!signal_)
		return;
	signal_->order(current_stream(signal_->device()), signal_value_);
}

int NeuronWork::sourceRank() const
{
	// c10d reads it right after wait(), which only orders the stream: the host
	// waits here for the match to be known (and rethrows a failure).
	const_cast<NeuronWork *>(this)->c10d::Work::wait();
	TORCH_CHECK(source_rank_ >= 0, "neuron backend: source_rank() is for a recv from any source (src=None)");
	return source_rank_;
}

void NeuronWork::complete(std::exception_ptr error)
{
	finish(error); // c10d::Work: wait() returns or rethrows from now on
	if (error)
		future_->setError(error);
	else
		future_->markCompleted(c10::IValue(outputs_));
}

ProcessGroupNeuron::ProcessGroupNeuron(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
				       std::chrono::milliseconds timeout, RankNames names)
	: c10d::Backend(rank, size), timeout_(std::clamp<int64_t>(timeout.count(), 1, kMaxTimeoutMs)),
	  names_(std::move(names))
{
	const char *blocking = std::getenv("NEURON_BLOCKING_WAIT");
	blocking_wait_ = blocking && std::string(blocking) == "1";
	join_group(store);
	thread_ = std::thread([this] { worker(); });
}

ProcessGroupNeuron::~ProcessGroupNeuron()
{
	// Destroyed from Python (the holder's dealloc at destroy_process_group or a
	// frame's end) the GIL is held, and the worker may need it to finish: dropping
	// the last reference to a tensor whose Python object is gone decrefs that
	// object. Joining it with the GIL held deadlocked (1 run in ~30 of
	// test_dist_two_hosts' torchrun: a rank hung at exit, its torchrun with it).
	PyThreadState *python = Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr;
	{
		std::lock_guard lock(mu_);
		stopping_ = true;
	}
	wake_.notify_all();
	if (thread_.joinable())
		thread_.join();
	signals_.clear(); // waits for the device's streams to pass their waits
	if (channel_)
		neuron_disconnect(channel_); // neurond: this rank left the group
	if (python)
		PyEval_RestoreThread(python);
}

std::string daemon_location()
{
	char host[256] = {};
	gethostname(host, sizeof host - 1);
	return std::string(host) + ":" + neuron_default_socket_path();
}

void ProcessGroupNeuron::check_one_daemon(const c10::intrusive_ptr<c10d::Store> &store)
{
	// A collective group lives in one neurond: ranks of another neurond (another
	// host, or another socket here) would wait in their own daemon until the
	// timeout. torch_neuron/_distributed.py gives such groups the hierarchical
	// backend (hierarchical.h); a group made here all the same is refused at once.
	const std::string mine = daemon_location();
	store->set("neuron/daemon/" + std::to_string(rank_), std::vector<uint8_t>(mine.begin(), mine.end()));
	std::map<std::string, std::vector<int>> ranks_of;
	for (int r = 0; r < size_; ++r) {
		const std::vector<uint8_t> v = store->get("neuron/daemon/" + std::to_string(r));
		ranks_of[std::string(v.begin(), v.end())].push_back(r);
	}
	if (ranks_of.size() == 1)
		return;
	std::string where;
	for (const auto &[daemon, ranks] : ranks_of) {
		where += where.empty() ? "" : "; ";
		where += "rank(s)";
		for (int r : ranks)
			where += " " + std::to_string(r);
		where += " use neurond at " + daemon;
	}
	C10_THROW_ERROR(DistBackendError,
			"neuron backend: the ranks do not share one neurond (" + where +
				"): a ProcessGroupNeuron spans one neurond; create the group through "
				"torch.distributed (backend \"neuron\"), which runs it across hosts hierarchically");
}

void ProcessGroupNeuron::join_group(const c10::intrusive_ptr<c10d::Store> &store)
{
	// The rendezvous: rank 0 draws the group's secret and a name; the others read
	// them from the c10d store, which only this job's processes reach.
	const std::string key = "neuron/collective_group";
	std::string blob;
	if (rank_ == 0) {
		blob = random_bytes(kSecretBytes + kNonceBytes);
		store->set(key, std::vector<uint8_t>(blob.begin(), blob.end()));
	} else {
		const std::vector<uint8_t> got = store->get(key);
		blob.assign(got.begin(), got.end());
		TORCH_CHECK(blob.size() == kSecretBytes + kNonceBytes, "neuron backend: malformed group key in the store");
	}
	check_one_daemon(store);
	const std::string secret = blob.substr(0, kSecretBytes);
	const std::string name = "torch-" + hex(blob.substr(kSecretBytes));
	neuron_client *main = client(); // connects (and raises with instructions) if needed
	const std::string client_name = "torch.distributed rank " + std::to_string(rank_) + " channel";
	neuron_connect_options opts{nullptr, client_name.c_str(), 0, 1};
	check(neuron_connect(&opts, &channel_), "connecting the collective channel to neurond");
	const neuron_status s = neuron_group_join(channel_, neuron_tenant_id(main), name.c_str(), secret.data(),
						  secret.size(), static_cast<uint32_t>(rank_), static_cast<uint32_t>(size_),
						  static_cast<uint32_t>(timeout_.count()), &group_id_);
	if (s != NEURON_OK) {
		const std::string why = names_.translate(neuron_last_error());
		neuron_disconnect(channel_);
		channel_ = nullptr;
		C10_THROW_ERROR(DistBackendError, "neuron backend: rank " + std::to_string(names_.of(rank_)) +
							  " could not join the collective group in neurond: " + why);
	}
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::enqueue(c10d::OpType type, uint32_t op, const at::Tensor &input,
							   const at::Tensor &output, uint64_t count, uint32_t reduce,
							   uint32_t root, std::vector<at::Tensor> results,
							   std::function<void()> copy_back)
{
	const at::Tensor &any = input.defined() ? input : output;
	const c10::Device device = any.defined() ? any.device()
						 : c10::Device(c10::DeviceType::PrivateUse1, current_device());
	Job job;
	job.spec.op = op;
	job.spec.reduce = reduce;
	job.spec.dtype = any.defined() ? dtype_of(any, op == NEURON_COLL_ALL_REDUCE || op == NEURON_COLL_REDUCE ||
							  op == NEURON_COLL_REDUCE_SCATTER)
				       : NEURON_DTYPE_U8;
	job.spec.root = root;
	job.spec.device = static_cast<uint32_t>(device.index());
	job.spec.count = count;
	job.spec.input = address(input);
	job.spec.output = address(output);
	job.input = input;
	job.output = output;
	job.copy_back = std::move(copy_back);
	job.stream = current_stream(device.index());
	job.after = stream_point(stream_queues(job.stream));
	job.work = c10::make_intrusive<NeuronWork>(rank_, type, std::move(results), device);
	auto work = job.work;
	submit(std::move(job));
	return work;
}

void ProcessGroupNeuron::submit(Job job)
{
	const int device = job.stream.device_index();
	std::function<void()> back = std::move(job.copy_back);
	job.copy_back = nullptr;
	std::shared_ptr<StreamSignal> signal;
	uint64_t value;
	const c10::Stream stream = job.stream;
	{
		// Reserved and queued under one lock, so the worker signals the values in
		// the order they were reserved, whichever thread calls.
		std::lock_guard lock(mu_);
		auto &slot = signals_[device];
		if (!slot)
			slot = std::make_shared<StreamSignal>(device);
		signal = slot;
		value = signal->reserve();
		job.work->set_signal(signal, value, blocking_wait_);
		job.signal = signal;
		queue_.push_back(std::move(job));
	}
	wake_.notify_one();
	if (back) {
		// Later work on the stream sees the output whole: the copy waits for the end.
		signal->order(stream, value);
		c10::StreamGuard guard(stream);
		back();
	}
}

void ProcessGroupNeuron::worker()
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
			job.signal->signal(); // the stream's waits for it may pass
		} catch (...) {
			error = std::current_exception();
		}
		if (error) {
			// Streams waiting for it (or, the group being broken, for any later
			// one) fault and report why, instead of waiting for ever.
			std::string why = "collective failed";
			try {
				std::rethrow_exception(error);
			} catch (const c10::Error &e) {
				why = e.what_without_backtrace(); // the streams' fault message: no C++ frames
			} catch (const std::exception &e) {
				why = e.what();
			} catch (...) {
			}
			job.signal->fail(why);
		}
		c10::StreamGuard guard(job.stream); // the future's events go on the caller's stream
		job.work->complete(error);
	}
}

void ProcessGroupNeuron::run(Job &job)
{
	StreamQueues &sq = stream_queues(job.stream);
	const int64_t timeout_ns = timeout_.count() * 1'000'000;
	neuron_status s = neuron_queue_wait(sq.core, job.after, timeout_ns);
	if (s != NEURON_OK)
		C10_THROW_ERROR(DistBackendError, std::string("neuron backend: rank ") + std::to_string(names_.of(rank_)) +
							  ": " + (job.name ? job.name : op_name(job.spec.op)) +
							  ": waiting for its inputs on the stream: " +
							  names_.translate(neuron_last_error()));
	if (job.marker)
		s = NEURON_OK; // orders only: everything queued before it has run
	else if (job.is_p2p) {
		std::vector<uint32_t> sources(job.p2p.size());
		s = neuron_group_p2p_sources(channel_, group_id_, job.p2p.data(), job.p2p.size(), sources.data());
		for (size_t i = 0; s == NEURON_OK && i < job.p2p.size(); ++i)
			if (!job.p2p[i].send && job.p2p[i].peer == NEURON_P2P_ANY_SOURCE)
				job.work->set_source_rank(static_cast<int>(sources[i]));
	}
	else
		s = neuron_group_run(channel_, group_id_, seq_++, &job.spec);
	if (s != NEURON_OK)
		C10_THROW_ERROR(DistBackendError, std::string("neuron backend: rank ") + std::to_string(names_.of(rank_)) +
							  ": " + (job.name ? job.name : op_name(job.spec.op)) +
							  " failed: " + names_.translate(neuron_last_error()));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::allreduce(std::vector<at::Tensor> &tensors,
							     const c10d::AllreduceOptions &opts)
{
	const at::Tensor t = single(tensors, "all_reduce");
	std::function<void()> back;
	at::Tensor buf = writable(t, &back);
	if (back)
		buf.copy_(t);
	return enqueue(c10d::OpType::ALLREDUCE, NEURON_COLL_ALL_REDUCE, buf, buf, t.numel(), reduce_of(opts.reduceOp), 0,
		       {t}, std::move(back));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::allreduce_coalesced(std::vector<at::Tensor> &tensors,
								       const c10d::AllreduceCoalescedOptions &opts)
{
	// In order on one worker: the last Work completes after all of them; a failure
	// of any breaks the group, so the last one reports it too.
	TORCH_CHECK(!tensors.empty(), "neuron backend: allreduce_coalesced of no tensors");
	c10::intrusive_ptr<c10d::Work> last;
	for (auto &t : tensors) {
		std::vector<at::Tensor> one{t};
		c10d::AllreduceOptions o;
		o.reduceOp = opts.reduceOp;
		last = allreduce(one, o);
	}
	return last;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::broadcast(std::vector<at::Tensor> &tensors,
							     const c10d::BroadcastOptions &opts)
{
	const at::Tensor t = single(tensors, "broadcast");
	TORCH_CHECK(opts.rootTensor == 0, "neuron backend: broadcast takes one tensor per rank");
	std::function<void()> back;
	at::Tensor buf = writable(t, &back);
	if (back && rank_ == opts.rootRank)
		buf.copy_(t);
	return enqueue(c10d::OpType::BROADCAST, NEURON_COLL_BROADCAST, buf, buf, t.numel(), NEURON_REDUCE_SUM,
		       static_cast<uint32_t>(opts.rootRank), {t}, std::move(back));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::reduce(std::vector<at::Tensor> &tensors,
							  const c10d::ReduceOptions &opts)
{
	const at::Tensor t = single(tensors, "reduce");
	// In place on the root (its input is its output); the others' tensors stay as
	// they are.
	std::function<void()> back;
	at::Tensor in = t.contiguous();
	at::Tensor out;
	if (rank_ == opts.rootRank) {
		out = in;
		if (!t.is_contiguous())
			back = [t, in]() mutable { t.copy_(in); };
	}
	return enqueue(c10d::OpType::REDUCE, NEURON_COLL_REDUCE, in, out, t.numel(), reduce_of(opts.reduceOp),
		       static_cast<uint32_t>(opts.rootRank), {t}, std::move(back));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::_allgather_base(at::Tensor &output, at::Tensor &input,
								   const c10d::AllgatherOptions &)
{
	const at::Tensor in_t = single({input}, "all_gather_into_tensor");
	same_kind(in_t, output, "all_gather_into_tensor");
	TORCH_CHECK(output.numel() == in_t.numel() * size_, "neuron backend: all_gather_into_tensor: output has ",
		    output.numel(), " elements, expected world_size * input = ", in_t.numel() * size_);
	std::function<void()> back;
	at::Tensor out = writable(output, &back);
	return enqueue(c10d::OpType::_ALLGATHER_BASE, NEURON_COLL_ALL_GATHER, in_t.contiguous(), out, in_t.numel(),
		       NEURON_REDUCE_SUM, 0, {output}, std::move(back));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::allgather(std::vector<std::vector<at::Tensor>> &outputs,
							     std::vector<at::Tensor> &inputs,
							     const c10d::AllgatherOptions &)
{
	const at::Tensor in_t = single(inputs, "all_gather");
	TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == static_cast<size_t>(size_),
		    "neuron backend: all_gather takes one list of world_size output tensors");
	const int64_t n = in_t.numel();
	for (const auto &o : outputs[0]) {
		same_kind(in_t, o, "all_gather");
		TORCH_CHECK(o.numel() == n, "neuron backend: all_gather with outputs of different sizes is not supported "
					   "(input has ", n, " elements, an output ", o.numel(), ")");
	}
	at::Tensor flat = at::empty({n * size_}, in_t.options());
	std::vector<at::Tensor> outs = outputs[0];
	auto back = [outs, flat, n]() mutable {
		for (size_t i = 0; i < outs.size(); ++i)
			outs[i].copy_(flat.narrow(0, static_cast<int64_t>(i) * n, n).view(outs[i].sizes()));
	};
	return enqueue(c10d::OpType::ALLGATHER, NEURON_COLL_ALL_GATHER, in_t.contiguous(), flat, n, NEURON_REDUCE_SUM, 0,
		       outs, back);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::allgather_into_tensor_coalesced(std::vector<at::Tensor> &outputs,
										   std::vector<at::Tensor> &inputs,
										   const c10d::AllgatherOptions &opts)
{
	TORCH_CHECK(!inputs.empty() && inputs.size() == outputs.size(),
		    "neuron backend: allgather_into_tensor_coalesced needs as many outputs as inputs");
	c10::intrusive_ptr<c10d::Work> last;
	for (size_t i = 0; i < inputs.size(); ++i)
		last = _allgather_base(outputs[i], inputs[i], opts);
	return last;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::_reduce_scatter_base(at::Tensor &output, at::Tensor &input,
									const c10d::ReduceScatterOptions &opts)
{
	const at::Tensor in_t = single({input}, "reduce_scatter_tensor");
	same_kind(in_t, output, "reduce_scatter_tensor");
	TORCH_CHECK(in_t.numel() == output.numel() * size_, "neuron backend: reduce_scatter_tensor: input has ",
		    in_t.numel(), " elements, expected world_size * output = ", output.numel() * size_);
	std::function<void()> back;
	at::Tensor out = writable(output, &back);
	return enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, NEURON_COLL_REDUCE_SCATTER, in_t.contiguous(), out,
		       output.numel(), reduce_of(opts.reduceOp), 0, {output}, std::move(back));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::reduce_scatter(std::vector<at::Tensor> &outputs,
								  std::vector<std::vector<at::Tensor>> &inputs,
								  const c10d::ReduceScatterOptions &opts)
{
	const at::Tensor out_t = single(outputs, "reduce_scatter");
	TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == static_cast<size_t>(size_),
		    "neuron backend: reduce_scatter takes one list of world_size input tensors");
	std::vector<at::Tensor> flat;
	for (const auto &i : inputs[0]) {
		same_kind(out_t, i, "reduce_scatter");
		TORCH_CHECK(i.numel() == out_t.numel(), "neuron backend: reduce_scatter inputs must match the output's size");
		flat.push_back(i.reshape({-1}));
	}
	at::Tensor in = at::cat(flat);
	at::Tensor out = out_t;
	return _reduce_scatter_base(out, in, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::reduce_scatter_tensor_coalesced(std::vector<at::Tensor> &outputs,
										   std::vector<at::Tensor> &inputs,
										   const c10d::ReduceScatterOptions &opts)
{
	TORCH_CHECK(!inputs.empty() && inputs.size() == outputs.size(),
		    "neuron backend: reduce_scatter_tensor_coalesced needs as many outputs as inputs");
	c10::intrusive_ptr<c10d::Work> last;
	for (size_t i = 0; i < inputs.size(); ++i)
		last = _reduce_scatter_base(outputs[i], inputs[i], opts);
	return last;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::gather(std::vector<std::vector<at::Tensor>> &outputs,
							  std::vector<at::Tensor> &inputs, const c10d::GatherOptions &opts)
{
	const at::Tensor in_t = single(inputs, "gather");
	const int64_t n = in_t.numel();
	at::Tensor flat;
	std::function<void()> back;
	std::vector<at::Tensor> outs;
	if (rank_ == opts.rootRank) {
		TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == static_cast<size_t>(size_),
			    "neuron backend: gather on the root takes one list of world_size output tensors");
		outs = outputs[0];
		for (const auto &o : outs) {
			same_kind(in_t, o, "gather");
			TORCH_CHECK(o.numel() == n, "neuron backend: gather outputs must match the input's size");
		}
		flat = at::empty({n * size_}, in_t.options());
		back = [outs, flat, n]() mutable {
			for (size_t i = 0; i < outs.size(); ++i)
				outs[i].copy_(flat.narrow(0, static_cast<int64_t>(i) * n, n).view(outs[i].sizes()));
		};
	}
	return enqueue(c10d::OpType::GATHER, NEURON_COLL_GATHER, in_t.contiguous(), flat, n, NEURON_REDUCE_SUM,
		       static_cast<uint32_t>(opts.rootRank), outs, std::move(back));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::scatter(std::vector<at::Tensor> &outputs,
							   std::vector<std::vector<at::Tensor>> &inputs,
							   const c10d::ScatterOptions &opts)
{
	const at::Tensor out_t = single(outputs, "scatter");
	at::Tensor in;
	if (rank_ == opts.rootRank) {
		TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == static_cast<size_t>(size_),
			    "neuron backend: scatter on the root takes one list of world_size input tensors");
		std::vector<at::Tensor> flat;
		for (const auto &i : inputs[0]) {
			same_kind(out_t, i, "scatter");
			TORCH_CHECK(i.numel() == out_t.numel(), "neuron backend: scatter inputs must match the output's size");
			flat.push_back(i.reshape({-1}));
		}
		in = at::cat(flat);
	}
	std::function<void()> back;
	at::Tensor out = writable(out_t, &back);
	return enqueue(c10d::OpType::SCATTER, NEURON_COLL_SCATTER, in, out, out_t.numel(), NEURON_REDUCE_SUM,
		       static_cast<uint32_t>(opts.rootRank), {out_t}, std::move(back));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::alltoall_base(at::Tensor &output, at::Tensor &input,
								 std::vector<int64_t> &output_splits,
								 std::vector<int64_t> &input_splits,
								 const c10d::AllToAllOptions &)
{
	const at::Tensor in_t = single({input}, "all_to_all_single");
	same_kind(in_t, output, "all_to_all_single");
	// Equal blocks are one collective in neurond; other split sizes a batch of
	// sends and receives (alltoall_uneven).
	bool even = in_t.numel() == output.numel() && in_t.dim() > 0 && in_t.size(0) % size_ == 0;
	const int64_t rows = even ? in_t.size(0) / size_ : 0;
	for (const auto *splits : {&output_splits, &input_splits})
		for (int64_t s : *splits)
			even = even && s == rows;
	if (!even)
		return alltoall_uneven(output, in_t, output_splits, input_splits);
	std::function<void()> back;
	at::Tensor out = writable(output, &back);
	return enqueue(c10d::OpType::ALLTOALL_BASE, NEURON_COLL_ALL_TO_ALL, in_t.contiguous(), out,
		       static_cast<uint64_t>(in_t.numel() / size_), NEURON_REDUCE_SUM, 0, {output}, std::move(back));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::alltoall_uneven(at::Tensor &output, const at::Tensor &in_t,
								   const std::vector<int64_t> &output_splits,
								   const std::vector<int64_t> &input_splits)
{
	// A batch of one send and one recv per peer, each a slice of rows; the
	// block for this rank itself is a device copy on the caller's stream.
	TORCH_CHECK(in_t.dim() > 0 && output.dim() > 0 && in_t.sizes().slice(1) == output.sizes().slice(1),
		    "neuron backend: all_to_all_single: input ", in_t.sizes(), " and output ", output.sizes(),
		    " must agree in every dimension but the first");
	const std::vector<int64_t> ins = splits_of(input_splits, in_t.size(0), size_, "input");
	const std::vector<int64_t> outs = splits_of(output_splits, output.size(0), size_, "output");
	TORCH_CHECK(ins[rank_] == outs[rank_], "neuron backend: all_to_all_single: rank ", rank_, " sends ", ins[rank_],
		    " rows to itself but expects ", outs[rank_]);
	at::Tensor in_c = in_t.contiguous();
	P2PBatch b;
	b.type = c10d::OpType::ALLTOALL_BASE;
	std::function<void()> back;
	at::Tensor out = writable(output, &back);
	if (back)
		b.copy_backs.push_back(back);
	int64_t io = 0, oo = 0;
	for (int j = 0; j < size_; ++j) {
		if (j == rank_)
			out.narrow(0, oo, outs[j]).copy_(in_c.narrow(0, io, ins[j]));
		else {
			add_p2p(b, true, in_c.narrow(0, io, ins[j]), j, kAllToAllTag);
			add_p2p(b, false, out.narrow(0, oo, outs[j]), j, kAllToAllTag);
		}
		io += ins[j];
		oo += outs[j];
	}
	b.results = {output};
	return enqueue_p2p(std::move(b), in_t.device(), "all_to_all_single");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::alltoall(std::vector<at::Tensor> &outputs,
							    std::vector<at::Tensor> &inputs, const c10d::AllToAllOptions &)
{
	TORCH_CHECK(inputs.size() == static_cast<size_t>(size_) && outputs.size() == static_cast<size_t>(size_),
		    "neuron backend: all_to_all takes world_size (", size_, ") input and output tensors, got ",
		    inputs.size(), " and ", outputs.size());
	const at::Tensor first = single({inputs[0]}, "all_to_all");
	P2PBatch b;
	b.type = c10d::OpType::ALLTOALL;
	for (int j = 0; j < size_; ++j) {
		same_kind(first, inputs[j], "all_to_all");
		same_kind(first, outputs[j], "all_to_all");
		if (j == rank_) {
			TORCH_CHECK(inputs[j].numel() == outputs[j].numel(), "neuron backend: all_to_all: rank ", rank_,
				    " sends ", inputs[j].numel(), " elements to itself but its output ", j, " holds ",
				    outputs[j].numel());
			outputs[j].copy_(inputs[j].reshape(outputs[j].sizes()));
			continue;
		}
		add_p2p(b, true, inputs[j].contiguous(), j, kAllToAllTag);
		std::function<void()> back;
		at::Tensor out = writable(outputs[j], &back);
		if (back)
			b.copy_backs.push_back(back);
		add_p2p(b, false, out, j, kAllToAllTag);
	}
	b.results = outputs;
	return enqueue_p2p(std::move(b), first.device(), "all_to_all");
}

void ProcessGroupNeuron::add_p2p(P2PBatch &b, bool send, const at::Tensor &t, int peer, uint64_t tag)
{
	const bool any = !send && peer == kAnySource;
	TORCH_CHECK(any || (peer >= 0 && peer < size_), "neuron backend: ", send ? "send to" : "recv from", " rank ", peer,
		    ", which is not a rank of this group of ", size_);
	TORCH_CHECK(any || peer != rank_, "neuron backend: rank ", rank_, " cannot ", send ? "send to" : "recv from", " itself");
	neuron_p2p_op op{};
	op.send = send ? 1 : 0;
	op.peer = any ? NEURON_P2P_ANY_SOURCE : static_cast<uint32_t>(peer);
	op.dtype = dtype_of(t, false);
	op.device = static_cast<uint32_t>(t.device().index());
	op.tag = tag;
	op.count = static_cast<uint64_t>(t.numel());
	op.address = t.numel() ? address(t) : 0;
	b.ops.push_back(op);
	b.keep.push_back(t);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::enqueue_p2p(P2PBatch b, const c10::Device &device, const char *name,
							       c10::intrusive_ptr<NeuronWork> work)
{
	Job job;
	job.name = name;
	job.is_p2p = !b.ops.empty();
	job.marker = b.ops.empty();
	job.p2p = std::move(b.ops);
	job.keep = std::move(b.keep);
	auto backs = std::move(b.copy_backs);
	if (!backs.empty())
		job.copy_back = [backs]() {
			for (const auto &f : backs)
				f();
		};
	job.stream = current_stream(device.index());
	job.after = stream_point(stream_queues(job.stream));
	if (work)
		work->set_outputs(b.results);
	else
		work = c10::make_intrusive<NeuronWork>(rank_, b.type, b.results, device);
	job.work = work;
	submit(std::move(job));
	return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::point_to_point(std::vector<at::Tensor> &tensors, bool send, int peer,
								  int tag)
{
	const at::Tensor t = single(tensors, send ? "send" : "recv");
	// Tags are ints; as unsigned 32-bit values they stay below kAllToAllTag.
	const uint64_t tag64 = static_cast<uint32_t>(tag);
	P2PBatch one;
	P2PBatch &b = coalescing_ ? coalesced_ : one;
	if (send) {
		add_p2p(b, true, t.contiguous(), peer, tag64);
	} else {
		std::function<void()> back;
		at::Tensor out = writable(t, &back);
		add_p2p(b, false, out, peer, tag64);
		if (back)
			b.copy_backs.push_back(back);
	}
	b.type = send ? c10d::OpType::SEND : c10d::OpType::RECV;
	b.results.push_back(t);
	if (coalescing_) {
		// The batch goes at endCoalescing; every op of it answers with its Work.
		if (!coalesced_work_)
			coalesced_work_ = c10::make_intrusive<NeuronWork>(rank_, c10d::OpType::COALESCED, std::vector<at::Tensor>{},
									  t.device());
		return coalesced_work_;
	}
	return enqueue_p2p(std::move(one), t.device(), send ? "send" : "recv");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::send(std::vector<at::Tensor> &tensors, int dst, int tag)
{
	return point_to_point(tensors, true, dst, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::recv(std::vector<at::Tensor> &tensors, int src, int tag)
{
	return point_to_point(tensors, false, src, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::recvAnysource(std::vector<at::Tensor> &tensors, int tag)
{
	// neurond matches it with the oldest send to this rank with the tag, from any
	// rank, and says which (the Work's source_rank()).
	return point_to_point(tensors, false, kAnySource, tag);
}

void ProcessGroupNeuron::startCoalescing()
{
	TORCH_CHECK(!coalescing_, "neuron backend: startCoalescing while already coalescing");
	coalescing_ = true;
	coalesced_ = P2PBatch{};
	coalesced_work_.reset();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::endCoalescing()
{
	TORCH_CHECK(coalescing_, "neuron backend: endCoalescing without startCoalescing");
	coalescing_ = false;
	P2PBatch b = std::move(coalesced_);
	coalesced_ = P2PBatch{};
	auto work = std::move(coalesced_work_);
	coalesced_work_.reset();
	// No point-to-point in it (collectives inside were queued as they came): a
	// marker whose Work completes after all of them.
	const c10::Device device = b.keep.empty() ? c10::Device(c10::DeviceType::PrivateUse1, current_device())
						 : b.keep.front().device();
	return enqueue_p2p(std::move(b), device, "batch_isend_irecv", work);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::hop(bool send, const at::Tensor &t, int peer)
{
	TORCH_CHECK(!coalescing_, "neuron backend: a hop between a host's ranks inside a coalesced batch");
	TORCH_CHECK(t.is_contiguous(), "neuron backend: a hop needs a contiguous tensor");
	P2PBatch b;
	add_p2p(b, send, t, peer, kHopTag);
	b.type = send ? c10d::OpType::SEND : c10d::OpType::RECV;
	b.results = {t};
	return enqueue_p2p(std::move(b), t.device(), send ? "send (between hosts' stages)" : "recv (between hosts' stages)");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::barrier(const c10d::BarrierOptions &)
{
	return enqueue(c10d::OpType::BARRIER, NEURON_COLL_BARRIER, at::Tensor(), at::Tensor(), 0, NEURON_REDUCE_SUM, 0,
		       {});
}

c10::intrusive_ptr<ProcessGroupNeuron> create_process_group(const c10::intrusive_ptr<c10d::Store> &store, int rank,
							    int size, std::chrono::milliseconds timeout,
							    std::vector<int64_t> global_ranks)
{
	TORCH_CHECK(global_ranks.empty() || global_ranks.size() == static_cast<size_t>(size),
		    "neuron backend: ", global_ranks.size(), " global ranks for a group of ", size);
	return c10::make_intrusive<ProcessGroupNeuron>(store, rank, size, timeout, RankNames(std::move(global_ranks)));
}

} // namespace torch_neuron::dist
