/* SPDX-License-Identifier: MIT */
/*
 * Programs: a graph of chip commands registered with neurond once and replayed
 * with one EXEC_PROGRAM command per call (<neuron/cmd.h>, ISA 1.5).
 *
 * A program is data, never code: a list of nodes, each a struct neuron_cmd whose
 * operands name memory symbolically, plus the sizes of its arguments and of its
 * own buffers. An operand with mem_space
 *   NEURON_MEM_PROGRAM_ARG     names bytes [addr, addr + extent) of argument
 *                              `host_buffer`: memory of the tenant that each
 *                              EXEC_PROGRAM binds (a device address per argument);
 *   NEURON_MEM_PROGRAM_BUFFER  names bytes of the program's buffer `host_buffer`:
 *                              device memory neurond allocates for the program in
 *                              the tenant's memory (a memory plan: intermediates
 *                              that share a buffer reuse its bytes over time).
 * Nodes name the nodes they depend on (indices, any order); neurond runs them in
 * a topological order of those edges (the lowest index first among the ready
 * ones, so nodes listed in order with backward edges run as listed).
 *
 * RegisterProgram (control plane) validates the whole program once, with the
 * gate's own checks: every node's semantics and work limits as a ring command
 * would have them, every operand inside its argument's declared size or its
 * buffer, dependency indices, no cycles, and every pair of nodes that touch
 * the same bytes with at least one write ordered by the edges (a memory plan
 * that reuses bytes still in use is refused). It allocates the buffers
 * (counted in the tenant's memory and in its program limits) and answers a
 * program id. Nothing of a refused program runs.
 *
 * EXEC_PROGRAM binds the arguments: each binding must lie inside the tenant's
 * memory for the argument's declared size, and an argument the program writes
 * may not overlap any other argument. DeregisterProgram drops the id (commands
 * already admitted finish; later ones naming it fault); its buffers go back
 * once no replay uses them. Programs also go when the tenant goes.
 */
#ifndef NEURON_PROGRAM_H
#define NEURON_PROGRAM_H

#include <neuron/cmd.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Limits neurond applies (a program past one is refused with the limit named). */
#define NEURON_PROGRAM_MAX_NODES 8192
#define NEURON_PROGRAM_MAX_ARGS 4096
#define NEURON_PROGRAM_MAX_BUFFERS 64
#define NEURON_PROGRAM_MAX_DEPS 65536    /* dependency edges over all nodes */
#define NEURON_PROGRAM_LABEL_LEN 64      /* bytes of a node's label, NUL included */
#define NEURON_PROGRAMS_PER_TENANT 1024
#define NEURON_PROGRAM_MAX_TILE_PROGRAMS 256 /* kernels (<neuron/tile.h>) its TILE_KERNEL nodes run */

/* flags of an EXEC_PROGRAM slot: random nodes (RNG, DROPOUT, RANDPERM,
 * MULTINOMIAL) take the slot's seed as i[1] and add its offset to their i[2]. */
#define NEURON_EXEC_RNG 1

/* Bindings in the EXEC_PROGRAM slot itself, and in each slot that follows. */
#define NEURON_EXEC_INLINE_BINDINGS 116
#define NEURON_EXEC_SLOT_BINDINGS 128

/*
 * An EXEC_PROGRAM ring slot. Its first 64 bytes are a struct neuron_cmd's (the
 * wait field is honoured as for any command).
 */
struct neuron_exec_slot {
	uint16_t opcode;        /* NEURON_OP_EXEC_PROGRAM */
	uint8_t num_operands;   /* 0 */
	uint8_t flags;          /* NEURON_EXEC_RNG or 0 */
	uint32_t reserved0;     /* must be zero */
	uint64_t user_tag;      /* echoed in fault reports (a node's own tag wins if set) */
	struct neuron_wait wait;
	uint64_t reserved1[4];  /* fscalars: must be zero */
	uint64_t program;       /* i[0]: the id RegisterProgram answered */
	uint64_t binding_count; /* i[1]: the program's argument count */
	uint64_t rng_seed;      /* i[2] */
	uint64_t rng_offset;    /* i[3] */
	uint64_t bindings[NEURON_EXEC_INLINE_BINDINGS]; /* device address of argument k */
};

/* How many ring slots an EXEC_PROGRAM with `bindings` arguments occupies. */
static inline uint32_t neuron_exec_slots(uint64_t bindings)
{
	if (bindings <= NEURON_EXEC_INLINE_BINDINGS)
		return 1;
	return 1 + (uint32_t)((bindings - NEURON_EXEC_INLINE_BINDINGS + NEURON_EXEC_SLOT_BINDINGS - 1) /
			      NEURON_EXEC_SLOT_BINDINGS);
}

#ifdef __cplusplus
}

static_assert(sizeof(neuron_exec_slot) == NEURON_CMD_SLOT_SIZE, "an exec slot is one ring slot");
static_assert(offsetof(neuron_exec_slot, wait) == offsetof(neuron_cmd, wait), "wait where a command has it");
static_assert(offsetof(neuron_exec_slot, program) == offsetof(neuron_cmd, iscalars), "i[0] is the program");
static_assert(offsetof(neuron_exec_slot, bindings) == offsetof(neuron_cmd, operands), "bindings start at operands");
#endif

#endif /* NEURON_PROGRAM_H */
