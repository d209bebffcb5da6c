#include "device_trace.h"

#include "memory.h"

#include <c10/util/Exception.h>

#include <ctime>
#include <limits>
#include <algorithm>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace torch_neuron {

std::atomic<bool> g_trace_active{false};

namespace {

// Traced submissions between trace_take_slots and the end of trace_submit_locked:
// trace_stop waits for them, so none writes into buffers it frees.
std::atomic<int> g_in_flight{0};

struct InFlight {
	~InFlight() { g_in_flight.fetch_sub(1); }
};

constexpr int kMaxDev = 16;
constexpr size_t kChunkSlots = 1 << 15; // 256 KiB of i64 stamps per chunk
constexpr size_t kNoSlot = std::numeric_limits<size_t>::max();

const char *opcode_name(uint16_t op)
{
	static const char *const names[] = {
		"invalid", "nop", "fill", "copy", "add", "sub", "mul", "div", "add_scalar", "sub_scalar", "mul_scalar",
		"div_scalar", "matmul", "sum", "mean", "amax", "relu", "gelu", "silu", "tanh", "exp", "softmax",
		"unary_math", "binary_math", "compare", "compare_scalar", "where", "log_softmax", "index_select",
		"index_add", "gather", "scatter_add", "adam_step", "arg_reduce", "index_copy", "scatter",
		// ISA 1.4 block 36..63
		"scan", "sort", "attention", "lu", "permutation", "cholesky", "triangular_solve", "geqrf", "orgqr", "eigh",
		"svd"};
	static_assert(std::size(names) == NEURON_OP_SVD + 1);
	static const char *const isa14[] = {"rng", "dropout", "randperm", "multinomial", "timestamp", "amp_unscale",
					    "amp_update_scale"};
	if (op < std::size(names))
		return names[op];
	// ISA 1.5 block 72..79 (1.6: tile_kernel, 1.8: the layer norm's)
	static const char *const isa15[] = {"exec_program",	  "pointwise",		 "matmul_epilogue",
					    "tile_kernel",	  "layer_norm",		 "layer_norm_backward",
					    "layer_norm_param_grad"};
	static_assert(NEURON_OP_EXEC_PROGRAM + std::size(isa15) == NEURON_OP_COUNT_);
	if (op >= NEURON_OP_RNG && op < NEURON_OP_RNG + std::size(isa14))
		return isa14[op - NEURON_OP_RNG];
	if (op >= NEURON_OP_EXEC_PROGRAM && op < NEURON_OP_COUNT_)
		return isa15[op - NEURON_OP_EXEC_PROGRAM];
	return "op";
}

struct Chunk {
	c10::DataPtr mem;
	int device;
};

struct Pending {
	DeviceRecord rec;
	size_t start = kNoSlot, end = kNoSlot; // slot indexes on rec.device
};

struct State {
	std::mutex mu;
	std::vector<Chunk> chunks[kMaxDev]; // slot i of a device: chunks[i / kChunkSlots], i % kChunkSlots
	size_t next_slot[kMaxDev] = {};
	std::vector<Pending> pending;
	// A queue's last end stamp: its slot and the stamp command's seq.
	std::unordered_map<const neuron_queue *, std::pair<size_t, uint64_t>> last_end;
	std::vector<StreamQueues *> streams;
};

State &state()
{
	static auto *s = new State;
	return *s;
}

thread_local std::vector<uint64_t> tl_correlation;

uint64_t slot_addr(State &s, int dev, size_t index)
{
	return dev_addr(s.chunks[dev][index / kChunkSlots].mem.get()) + 8 * (index % kChunkSlots);
}

uint64_t realtime_ns()
{
	timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void timestamp_cmd(neuron_cmd &ts, uint64_t addr)
{
	neuron_cmd_init(&ts, NEURON_OP_TIMESTAMP, 1);
	const int64_t one[1] = {1};
	ts.operands[0] = neuron_desc_contiguous(addr, NEURON_DTYPE_I64, 1, one);
}

uint64_t submit_or_fail(StreamQueues &sq, neuron_cmd &cmd)
{
	uint64_t seq = 0;
	neuron_status s = neuron_submit(sq.core, &cmd, &seq);
	if (s != NEURON_OK)
		stream_failed(sq, s, "submitting a command");
	return seq;
}

// Device clock -> CLOCK_REALTIME: a stamp taken between two host readings lies
// within their interval; the shortest of a few round trips bounds the error by
// half of it.
int64_t calibrate(int dev, uint64_t addr)
{
	StreamQueues &sq = current_queues(dev);
	int64_t best_rtt = std::numeric_limits<int64_t>::max(), offset = 0;
	for (int i = 0; i < 5; ++i) {
		neuron_cmd ts;
		timestamp_cmd(ts, addr);
		const uint64_t t0 = realtime_ns();
		uint64_t seq;
		{
			std::lock_guard lock(sq.mu);
			seq = submit_or_fail(sq, ts);
		}
		check(neuron_queue_wait(sq.core, seq, -1), "calibrating the device clock");
		const uint64_t t1 = realtime_ns();
		int64_t stamp = 0;
		check(neuron_memcpy_d2h(sq.dma, &stamp, addr, sizeof(stamp)), "reading a device timestamp");
		const int64_t rtt = static_cast<int64_t>(t1 - t0);
		if (rtt < best_rtt) {
			best_rtt = rtt;
			offset = static_cast<int64_t>(t0 + rtt / 2) - stamp;
		}
	}
	return offset;
}

} // namespace

void trace_push_correlation(uint64_t id) { tl_correlation.push_back(id); }
void trace_pop_correlation()
{
	if (!tl_correlation.empty())
		tl_correlation.pop_back();
}

void trace_start()
{
	State &s = state();
	std::lock_guard lock(s.mu);
	s.pending.clear();
	s.last_end.clear();
	s.streams.clear();
	g_trace_active.store(true);
}

TraceSlots trace_take_slots(int dev)
{
	State &s = state();
	TraceSlots slots;
	if (dev < 0 || dev >= kMaxDev)
		return slots;
	g_in_flight.fetch_add(1);
	for (;;) {
		{
			std::lock_guard lock(s.mu);
			if (!trace_active()) {
				g_in_flight.fetch_sub(1);
				return slots;
			}
			const size_t i = s.next_slot[dev];
			if (i + 2 <= s.chunks[dev].size() * kChunkSlots && (i + 1) / kChunkSlots == i / kChunkSlots) {
				slots = {slot_addr(s, dev, i), slot_addr(s, dev, i + 1), i, i + 1, true};
				s.next_slot[dev] = i + 2;
				return slots;
			}
			if (i + 2 <= s.chunks[dev].size() * kChunkSlots) { // the pair would straddle two chunks
				s.next_slot[dev] = (i / kChunkSlots + 1) * kChunkSlots;
				continue;
			}
		}
		// A new chunk, allocated without the trace lock (an allocation may sync
		// streams, whose submitters take the trace lock).
		const int old = current_device();
		set_current_device(dev);
		c10::DataPtr mem;
		try {
			mem = device_allocator()->allocate(kChunkSlots * 8);
		} catch (...) {
			set_current_device(old);
			g_in_flight.fetch_sub(1);
			throw;
		}
		set_current_device(old);
		std::lock_guard lock(s.mu);
		s.chunks[dev].push_back(Chunk{std::move(mem), dev});
	}
}

namespace {

// The chip stamps the command itself (cmd.h NEURON_CMD_F_STAMP): no TIMESTAMP
// commands around it. Not for a program's replay (its slot holds bindings), an
// op with every operand slot taken, or a daemon that does not offer it.
bool chip_stamps(const StreamQueues &sq, const neuron_cmd &cmd)
{
	return cmd.flags == 0 && cmd.opcode != NEURON_OP_EXEC_PROGRAM && cmd.num_operands < NEURON_MAX_OPERANDS &&
	       (neuron_queue_features(sq.core) & NEURON_RING_F_CMD_STAMP) != 0;
}

DeviceRecord record_of(const StreamQueues &sq, const neuron_cmd &cmd, uint64_t seq)
{
	int64_t elements = 1;
	for (int i = 0; i < cmd.operands[0].ndim; ++i)
		elements *= cmd.operands[0].sizes[i];
	return DeviceRecord{opcode_name(cmd.opcode), tl_correlation.empty() ? 0 : tl_correlation.back(), sq.device,
			    sq.id, seq, cmd.num_operands ? elements : 0, 0, 0};
}

// A traced command's record, kept until trace_stop; end_seq: the command that
// writes its end stamp, which the queue's next command may start from.
void remember(State &s, StreamQueues &sq, Pending p, uint64_t end_seq)
{
	std::lock_guard lock(s.mu);
	s.last_end[sq.core] = {p.end, end_seq};
	if (std::find(s.streams.begin(), s.streams.end(), &sq) == s.streams.end())
		s.streams.push_back(&sq);
	s.pending.push_back(std::move(p));
}

} // namespace

uint64_t trace_submit_locked(StreamQueues &sq, neuron_cmd &cmd, const TraceSlots &slots)
{
	InFlight done;
	State &s = state();
	if (chip_stamps(sq, cmd)) {
		// The pair of slots is two adjacent i64 of one chunk (trace_take_slots).
		neuron_cmd stamped = cmd;
		const int64_t two[1] = {2};
		stamped.flags |= NEURON_CMD_F_STAMP;
		stamped.operands[stamped.num_operands++] = neuron_desc_contiguous(slots.start_addr, NEURON_DTYPE_I64, 1, two);
		const uint64_t seq = submit_or_fail(sq, stamped);
		// Its end stamp is written when it completes, where a TIMESTAMP after it
		// would have been.
		remember(s, sq, Pending{record_of(sq, cmd, seq), slots.start_index, slots.end_index}, seq);
		return seq;
	}
	neuron_event last{};
	neuron_event_record(sq.core, &last);
	const bool idle = neuron_queue_completed(sq.core) >= last.value;
	size_t prev_end = kNoSlot;
	{
		std::lock_guard lock(s.mu);
		// Only if the stamp is the queue's last command: an event wait submitted
		// since (guard.cpp) may hold the queue after it.
		if (auto it = s.last_end.find(sq.core); it != s.last_end.end() && it->second.second == last.value)
			prev_end = it->second.first;
	}
	Pending p;
	if (idle || cmd.wait.queue_id != 0 || prev_end == kNoSlot) {
		// The engine may start this command later than the last one ended: stamp it.
		neuron_cmd ts;
		timestamp_cmd(ts, slots.start_addr);
		ts.wait = cmd.wait;
		cmd.wait = {};
		submit_or_fail(sq, ts);
		p.start = slots.start_index;
	} else {
		p.start = prev_end;
	}
	const uint64_t seq = submit_or_fail(sq, cmd);
	neuron_cmd ts;
	timestamp_cmd(ts, slots.end_addr);
	const uint64_t end_seq = submit_or_fail(sq, ts);
	p.end = slots.end_index;
	p.rec = record_of(sq, cmd, seq);
	remember(s, sq, std::move(p), end_seq);
	return seq;
}

std::vector<DeviceRecord> trace_stop()
{
	State &s = state();
	if (!g_trace_active.exchange(false))
		return {};
	while (g_in_flight.load() != 0)
		std::this_thread::yield();
	std::vector<StreamQueues *> streams;
	std::vector<Pending> pending;
	std::vector<Chunk> chunks[kMaxDev];
	{
		std::lock_guard lock(s.mu);
		streams.swap(s.streams);
		pending.swap(s.pending);
		s.last_end.clear();
		for (int dev = 0; dev < kMaxDev; ++dev) {
			chunks[dev].swap(s.chunks[dev]);
			s.next_slot[dev] = 0;
		}
	}
	for (StreamQueues *sq : streams)
		sync_stream(*sq);
	std::vector<int64_t> stamps[kMaxDev];
	int64_t offset[kMaxDev] = {};
	for (int dev = 0; dev < kMaxDev; ++dev) {
		if (chunks[dev].empty())
			continue;
		stamps[dev].resize(chunks[dev].size() * kChunkSlots);
		for (size_t c = 0; c < chunks[dev].size(); ++c)
			check(neuron_memcpy_d2h(current_queues(dev).dma, stamps[dev].data() + c * kChunkSlots,
						dev_addr(chunks[dev][c].mem.get()), kChunkSlots * 8),
			      "reading device timestamps");
		offset[dev] = calibrate(dev, dev_addr(chunks[dev][0].mem.get()));
	}
	std::vector<DeviceRecord> out;
	out.reserve(pending.size());
	for (Pending &p : pending) {
		const int dev = p.rec.device;
		p.rec.start_ns = stamps[dev][p.start] + offset[dev];
		p.rec.end_ns = stamps[dev][p.end] + offset[dev];
		out.push_back(std::move(p.rec));
	}
	return out;
}

} // namespace torch_neuron
