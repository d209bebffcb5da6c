// Device timestamps for the profiler: while a trace is on, every command the
// plugin submits to a core queue gets the start and end time the chip recorded,
// in a trace buffer on the device. Where the daemon offers it (ring feature
// NEURON_RING_F_CMD_STAMP) the chip stamps the command itself (cmd.h
// NEURON_CMD_F_STAMP, ISA 1.7: its last operand names the two stamps), so a traced
// program runs no command more than an untraced one. Elsewhere (an older daemon,
// an op that uses all six operands) TIMESTAMP commands (ISA 1.4) bracket it; a
// command that follows another still queued starts when the previous one ends,
// so it reuses that one's end stamp. Each record names the launching op by the
// profiler's correlation id. DMA queues are not stamped: host<->device copies are
// not in the device trace.
//
// Owner: one mutex (trace_mu) for the records and buffers; submit paths read the
// `active` flag without it and take it only while a trace is on.
#pragma once

#include "runtime.h"

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace torch_neuron {

// A command as the chip ran it, in host CLOCK_REALTIME nanoseconds (the profiler's
// clock), converted from the device clock by a round-trip calibration.
struct DeviceRecord {
	std::string name;      // the opcode's name ("matmul")
	uint64_t correlation;  // the launching op's profiler correlation id (0: none)
	int device;
	int64_t stream;
	uint64_t queue_seq;    // the command's sequence number on its core queue
	int64_t elements;      // of operand 0
	int64_t start_ns, end_ns;
};

// Turns bracketing on for all devices (allocating trace buffers lazily).
void trace_start();
// Turns it off, waits for the traced work, reads the stamps back and returns the
// records (oldest first). Empty if no trace was on.
std::vector<DeviceRecord> trace_stop();

extern std::atomic<bool> g_trace_active;
inline bool trace_active() { return g_trace_active.load(std::memory_order_relaxed); }

// The two stamp slots one traced command may use, taken before the stream's lock
// (taking them may allocate device memory, which may sync streams).
struct TraceSlots {
	uint64_t start_addr = 0, end_addr = 0;
	size_t start_index = 0, end_index = 0;
	bool valid = false;
};
TraceSlots trace_take_slots(int device);
// Submits cmd stamped (or between TIMESTAMPs) and records it; call with sq.mu
// held, in place of neuron_submit. Returns cmd's seq.
uint64_t trace_submit_locked(StreamQueues &sq, neuron_cmd &cmd, const TraceSlots &slots);

// The profiler's correlation ids of the ops running on this thread (innermost
// last), pushed and popped by the Kineto session.
void trace_push_correlation(uint64_t id);
void trace_pop_correlation();

} // namespace torch_neuron
