// A registered program (<neuron/program.h>): nodes that name memory
// symbolically, validated once (validate.h), replayed by EXEC_PROGRAM commands
// that bind its arguments (gate/admit.h, bind_program) and run node after node
// on a logical core (sched/engine.cpp).
//
// Ownership and threads: built and validated on the control thread, then
// immutable and shared (shared_ptr<const Program>) between the tenant's
// ProgramTable (table.h) and any replay in flight, which keeps it alive after a
// DeregisterProgram. Its buffers are device allocations of the tenant (marked
// as the program's, so the tenant cannot free them by hand); the control thread
// frees them once no replay holds the program (daemon/tenant_programs.cpp).
#pragma once

#include <neuron/cmd.h>
#include <neuron/program.h>
#include <tile/program.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace neuron::program {

struct Node {
	neuron_cmd cmd{};    // operands name memory by NEURON_MEM_PROGRAM_ARG / _BUFFER
	std::string label;   // what the node is, for faults
	uint32_t index = 0;  // its index as registered (faults name this one)
	bool random = false; // RNG, DROPOUT, RANDPERM or MULTINOMIAL: takes the replay's seed/offset
};

// What one replay binds (an EXEC_PROGRAM slot, decoded by the gate).
struct Exec {
	uint8_t flags = 0; // NEURON_EXEC_RNG
	uint64_t rng_seed = 0, rng_offset = 0;
	std::vector<uint64_t> bindings; // device address of each argument
};

struct Program {
	uint64_t id = 0;
	uint32_t device = 0;
	std::vector<uint64_t> arg_bytes;   // declared size of each argument
	std::vector<uint8_t> arg_written;  // 1 if some node writes the argument
	// Per argument, then buffer: 1 if a replay writes it and may read bytes of it
	// it did not overwrite first; only those are saved before a replay so that
	// one a restart interrupts can run again exactly (rerun_reads.h).
	std::vector<uint8_t> restore_on_rerun;
	std::vector<uint64_t> buffer_bytes;
	std::vector<uint64_t> buffer_address; // where neurond allocated each buffer
	std::vector<Node> nodes;           // in execution order (a topological order of the edges)
	// The tile programs its TILE_KERNEL nodes run (i[0] indexes this), validated
	// for the device's profile; each replay runs them with on-chip memory of its own.
	std::vector<std::shared_ptr<const tile::TileProgram>> tiles;

	// Host memory the program's description takes in neurond (counted against the tenant).
	uint64_t host_bytes() const;
};

// Node k (in execution order) as a concrete command: arguments bound, buffers
// placed, random nodes given the replay's seed and offset. The result passed
// the gate's memory-free checks at registration; its memory is checked again
// per tile, as every command's (gate::resolve).
void materialise(const Program &p, size_t k, const Exec &exec, neuron_cmd *out);

// "program 3 node 17 (matmul 'aten.addmm linear_1')": how faults name a node.
std::string node_name(const Program &p, size_t k);

// Whether an opcode draws random numbers (takes a seed in i[1] and an offset in i[2]).
bool is_random(uint16_t opcode);

} // namespace neuron::program
