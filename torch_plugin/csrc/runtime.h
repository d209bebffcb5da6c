// The plugin's view of neurond: one client connection per process, devices, and
// streams. A stream is a pair of queues on one device: a core queue (compute and
// device-to-device copies) and a DMA queue (host<->device copies). Work on one
// stream is ordered: DMA work waits for earlier core work and the next core command
// waits for earlier DMA work, through the command's cross-queue wait field.
#pragma once

#include <neuron/neuron.h>

#include <c10/core/Allocator.h>
#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

namespace torch_neuron {

// Raises a Python-visible error for a failed libneuron call (OutOfMemoryError for
// NEURON_ERR_NO_MEMORY, RuntimeError otherwise) with libneuron's message.
[[noreturn]] void throw_status(neuron_status s, const std::string &what);
inline void check(neuron_status s, const char *what)
{
	if (s != NEURON_OK)
		throw_status(s, what);
}

// The connection, made on first use. Throws with instructions if neurond is absent.
neuron_client *client();
bool connected() noexcept;
// 0 when neurond cannot be reached (never throws).
int device_count() noexcept;
uint32_t core_count(int device);

int current_device();
void set_current_device(int device);
void check_device(int device);

struct AdaptiveStream; // adaptive_eager.cpp

struct StreamQueues {
	int device = 0;
	int64_t id = 0;
	neuron_queue *core = nullptr;
	neuron_queue *dma = nullptr;
	uint64_t dma_pending = 0;      // last DMA seq the core queue has not waited for yet
	uint64_t core_waited_dma = 0;
	uint64_t dma_waited_core = 0;  // last core seq the DMA queue already waits for
	std::mutex mu;
	AdaptiveStream *adaptive = nullptr; // adaptive eager's recording and replay (under mu)
};

constexpr int kStreamPoolSize = 8;
// A stream pool_stream never hands out (id after the pool's): the hierarchical
// backend's worker runs collectives' device stages there, so it is never a
// caller's stream (a caller's device-side wait for a collective, queued ahead of
// that collective's own stages on one stream, would wait for ever).
constexpr int kCollectiveStream = kStreamPoolSize + 1;

c10::Stream current_stream(int device);
c10::Stream default_stream(int device);
c10::Stream pool_stream(int device);
c10::Stream collective_stream(int device);
void set_current_stream(const c10::Stream &s);
StreamQueues &stream_queues(const c10::Stream &s);
StreamQueues &current_queues(int device);

// Submit a compute command on a stream's core queue; returns its seq.
uint64_t submit_core(StreamQueues &sq, neuron_cmd &cmd);
// Replay a registered program on a stream's core queue (one submission, ordered
// after the stream's earlier work); returns the seq at which it is complete.
uint64_t submit_program(StreamQueues &sq, uint64_t program, const uint64_t *bindings, uint32_t count);
// Make the stream's DMA queue wait for its core work; call with sq.mu held.
void dma_after_core_locked(StreamQueues &sq);
// Record a DMA command the core queue must wait for; call with sq.mu held.
void core_after_dma_locked(StreamQueues &sq, uint64_t dma_seq);
// Fold pending DMA work into the core timeline (for events / sync); returns the
// core queue's last submitted seq.
uint64_t stream_point(StreamQueues &sq);
void sync_stream(StreamQueues &sq);
bool query_stream(StreamQueues &sq);
void sync_device(int device);
// Raise the error of a failed call on a stream; recreates its queues after a fault
// so that later work can run.
[[noreturn]] void stream_failed(StreamQueues &sq, neuron_status s, const char *what);

// Events: a point on one stream's core timeline.
// With timing on (torch.Event(enable_timing=True)), recording also submits a
// TIMESTAMP command (cmd.h) into `stamp`, 8 bytes of device memory, so
// elapsed_time is the chip's clock between the two points, as CUDA's events.
struct Event {
	StreamQueues *sq = nullptr;
	neuron_queue *queue = nullptr;
	uint64_t queue_id = 0;
	uint64_t value = 0;
	int64_t done_ns = -1;
	c10::DataPtr stamp;
};
uint64_t now_ns();

// Op accounting for the Python side. note_fallback() raises in strict mode, warns
// once per op name, and counts.
void note_fallback(const char *op);
struct NativeCounter {
	explicit NativeCounter(const char *name);
	const char *name;
	std::atomic<int64_t> n{0};
	NativeCounter *next = nullptr;
};
NativeCounter *&native_counters();
// The native op running on this thread (innermost), for adaptive eager's program
// labels: a fault in a replayed program names the op that issued the command.
extern thread_local const char *tl_native_op;
struct NativeScope {
	explicit NativeScope(const char *op) : prev(tl_native_op) { tl_native_op = op; }
	~NativeScope() { tl_native_op = prev; }
	NativeScope(const NativeScope &) = delete;
	NativeScope &operator=(const NativeScope &) = delete;
	const char *prev;
};
#define NEURON_NATIVE_CAT2(a, b) a##b
#define NEURON_NATIVE_CAT(a, b) NEURON_NATIVE_CAT2(a, b)
#define NEURON_NATIVE(opname)                                                                              \
	static ::torch_neuron::NativeCounter NEURON_NATIVE_CAT(neuron_native_c_, __LINE__)(opname);        \
	NEURON_NATIVE_CAT(neuron_native_c_, __LINE__).n.fetch_add(1, std::memory_order_relaxed);            \
	::torch_neuron::NativeScope NEURON_NATIVE_CAT(neuron_native_s_, __LINE__)(opname)

} // namespace torch_neuron
