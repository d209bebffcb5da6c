// Graph capture for torch.compile (torch_neuron/compiler.py): while the backend
// runs a captured FX graph the first time, every command the eager kernels submit
// is also recorded (as CUDA graphs record a stream), with the FX node that made
// it and the device memory it names. The recording then becomes a chip program
// (<neuron/program.h>): operands in the graph's inputs and outputs become program
// arguments, the intermediates a memory plan inside one program buffer that
// reuses bytes whose tensors died. neurond validates it once; each later call is
// one EXEC_PROGRAM submission (graph_program.cpp).
//
// Device constants the kernels keep for the process (a pooling geometry's table,
// pool_common.cpp's cached_table) are made outside the recording (CapturePause)
// and recorded as constants: the program names them as arguments bound to the
// same tensors at every replay, which the program keeps alive.
//
// A recording that cannot be replayed says why (a host read in the middle of the
// graph, a host<->device copy, random numbers, memory from outside the graph) and
// the backend keeps running that graph op by op.
//
// Threads: one capture at a time in the process (g_capture_active); the recording
// thread is the one that began it. Allocations are recorded only on that thread,
// frees from any thread (a deleter may run in the GC) under the capture's lock.
#pragma once

#include "runtime.h"

#include <ATen/core/Tensor.h>

#include <neuron/cmd.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace torch_neuron {

inline constexpr size_t kAlive = std::numeric_limits<size_t>::max();

// A device allocation made during the capture, alive for the commands
// [born, died) (died kAlive: still alive at the end).
struct CapturedAlloc {
	uint64_t addr = 0, bytes = 0;
	size_t born = 0, died = kAlive;
};

struct RecordedCmd {
	neuron_cmd cmd{};
	std::string label; // the FX node that submitted it
	// The allocation (index in Recording::allocs) each operand lies in, found
	// while the recording's lifetimes are exact (resolve_owners); -1: none (an
	// input of the graph, or memory from outside it).
	std::array<int32_t, NEURON_MAX_OPERANDS> owner{-1, -1, -1, -1, -1, -1};
};

struct Recording {
	std::vector<RecordedCmd> cmds;
	std::vector<CapturedAlloc> allocs;
	// The tile programs (<neuron/tile.h>) of the TILE_KERNEL commands recorded
	// (their i[0] indexes this), one per kernel however often the graph calls it.
	std::vector<std::shared_ptr<const std::vector<uint8_t>>> tile_images;
	std::vector<int64_t> tile_keys; // the kernel each image came from (tile_kernel.cpp's handle)
	std::vector<at::Tensor> constants; // device constants the graph read (capture_constant)
	std::string taint; // why it cannot be replayed ("" if it can)
};

extern std::atomic<bool> g_capture_active;
inline bool capture_active() { return g_capture_active.load(std::memory_order_relaxed); }

// Hooks for runtime.cpp and device_allocator.cpp (each cheap when no capture runs).
void capture_command(StreamQueues &sq, const neuron_cmd &cmd); // a command submitted on a core queue
void capture_alloc(uint64_t addr, uint64_t bytes);  // a device allocation
void capture_free(uint64_t addr);                   // a device block went back
void capture_taint(const char *why);                // something a program cannot hold
// A device tensor the graph reads that lives outside it, for the process (not
// an input): the program binds it at every replay and keeps it alive.
void capture_constant(const at::Tensor &t);
// While one lives on the capture thread, nothing that thread does is recorded:
// it makes a process-wide constant (eagerly, once), not part of the graph.
class CapturePause {
public:
	CapturePause();
	~CapturePause();
	CapturePause(const CapturePause &) = delete;
	CapturePause &operator=(const CapturePause &) = delete;
};
// A tile kernel run (tile_kernel.cpp: eagerly it is a program of its own, which
// the recording cannot hold): recorded as a TILE_KERNEL command whose operands
// are the arguments' device bytes; i[0] becomes the index of its image.
void capture_tile_kernel(StreamQueues &sq, const neuron_cmd &cmd, int64_t key,
			 std::shared_ptr<const std::vector<uint8_t>> image);

// The backend's calls (graph_program.cpp): begin on the stream the graph runs on,
// name the FX node that runs next, and take the recording at the end.
void capture_begin(int device, StreamQueues &sq);
void capture_label(const std::string &label);
Recording capture_finish();

} // namespace torch_neuron
