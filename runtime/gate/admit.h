// The one command gate: a ring slot becomes a validated command, or a fault with
// one wording, whoever runs it. Every place that runs tenant commands goes through
// it: the scheduler's engines (sched/engine.cpp) at admission and again per tile
// (the tenant may free memory between tiles), neuron.ko's compute engine on the
// jobs it fetches (kmd/kmd_engine.cpp, against the job's BO list), and the
// command fuzzer (tests/fuzz). No other file checks a tenant's command.
//
// Two stages, because the second depends on memory the tenant can change:
//  1. admit_next(): the ring protocol (tail within the ring), the command's wait
//     on another queue, the per-op semantics (kernels::check_semantics) and the
//     work limits (kernels/geometry.h) — on a private copy of the slot;
//  2. resolve(): where each operand points (device memory of the tenant, host
//     buffers on DMA queues only), bounds, and the output-overlap rules, against a
//     MemorySpace (memory_space.h) that says what the caller may touch.
//
// Pure functions over what they are given; callers hold the locks those objects
// require (resolve: the tenant memory's lock, shared or exclusive).
#pragma once

#include "memory_space.h"

#include <program/program.h>

#include <fault.h>
#include <kernels.h>
#include <neuron/cmd.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace neuron::backend {
class Queue;
enum class QueueKind;
} // namespace neuron::backend

namespace neuron::gate {

struct Admission {
	enum Kind {
		Empty,   // nothing published past what completed
		Blocked, // the next command waits on another queue that has not got there
		Fault,   // the next command (seq) faults: fault says why
		Ready,   // the next command (seq) passed stage 1; *cmd is its private copy
	} kind = Empty;
	uint64_t seq = 0;
	uint64_t user_tag = 0; // of the faulting command (0 for a ring fault)
	uint32_t slots = 1;    // ring slots the command occupies (EXEC_PROGRAM: its bindings)
	// NEURON_CMD_F_STAMP: where the engine writes the command's start and end
	// times (16 bytes of device memory, resolved by resolve_stamp). The flag and
	// its operand are taken off *cmd, so nothing past the gate sees them.
	bool stamped = false;
	uint64_t stamp_addr = 0;
	kernels::Fault fault{};
};

// The bytes a NEURON_CMD_F_STAMP stamp takes: two i64 (start, end).
constexpr uint64_t kStampBytes = 16;

// Stage 1 for the next command of q (seq = q.next_seq()), copied into *cmd. An
// EXEC_PROGRAM (<neuron/program.h>) is admitted whole, its bindings and seed
// copied into *exec (its nodes were checked at registration; bind_program is its
// stage 2).
Admission admit_next(const backend::Queue &q, neuron_cmd *cmd, program::Exec *exec);

// The memory-free checks of stage 1 (semantics, work limits), for commands that
// did not come from a ring slot just now (a job a kernel engine fetched).
std::optional<kernels::Fault> check_command(const neuron_cmd &cmd);

// Stage 1 of NEURON_CMD_F_STAMP (cmd.h): a command with the flag has its stamp
// operand checked and taken off with the flag (*stamped true, its address in
// *stamp_addr); the command continues as the op's own. admit_next calls it.
std::optional<kernels::Fault> take_stamp(neuron_cmd *cmd, bool *stamped, uint64_t *stamp_addr);

// Each operand resolved: a view the kernels can run on (data is null where the
// MemorySpace has no host address for it) and where it lies.
struct Operands {
	std::array<kernels::View, NEURON_MAX_OPERANDS> views{};
	std::array<Placement, NEURON_MAX_OPERANDS> where{};
	std::array<uint64_t, NEURON_MAX_OPERANDS> bytes{}; // each operand's byte extent from its first byte
};

// Stage 2. `dma`: the command runs on a DMA queue (COPY and NOP only; host
// buffers allowed). The command must have passed stage 1.
std::optional<kernels::Fault> resolve(const neuron_cmd &cmd, bool dma, const MemorySpace &memory, Operands *out);

// Stage 2 of a command's stamp (Admission::stamp_addr): writable device memory
// disjoint from the command's operands (`ops`, resolved by resolve()), where
// *out says it lies.
std::optional<kernels::Fault> resolve_stamp(uint64_t address, const neuron_cmd &cmd, const Operands &ops,
					    const MemorySpace &memory, Placement *out);

// Stage 2 of an EXEC_PROGRAM: the replay's bindings against the tenant's memory,
// once per replay. Each argument must lie inside the memory for its declared
// size (written where the program writes it), and an argument the program
// writes may overlap no other argument (registration checked the nodes on
// disjoint arguments).
std::optional<kernels::Fault> bind_program(const program::Program &p, const program::Exec &exec,
					   const MemorySpace &memory);

// One wording for what the gate and the memory spaces say.
std::string hex(uint64_t v);
// "operand K (output)" or "operand K (input)", by the opcode's written operands.
std::string operand_name(const neuron_cmd &cmd, int k);

} // namespace neuron::gate
