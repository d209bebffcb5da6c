/* SPDX-License-Identifier: MIT */
/*
 * The layout of a queue's shared command ring and its protocol (version 1).
 *
 * Shared by neurond (the consumer, on every device backend) and libneuron (the
 * producer). Plain C so the public C API can expose it; the one implementation
 * of both sides is <neuron/ring.hpp>. Layout rules as in <neuron/cmd.h>.
 */
#ifndef NEURON_RING_H
#define NEURON_RING_H

#include <neuron/cmd.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Shared ring of one queue. The daemon creates it (a memfd it passes to the
 * tenant); the first 4 KiB is this header, the slots follow.
 *
 * Protocol (single producer = the tenant, single consumer = the daemon):
 *  - The tenant writes the slot of command seq, then publishes it with a release
 *    store of tail = seq. It may reuse that slot for seq + slot_count once
 *    completed >= seq.
 *  - If engine_sleeping is non-zero (a count of sleeping consumer threads), the
 *    tenant increments doorbell and FUTEX_WAKEs it.
 *  - The daemon copies a slot out before validating it (the tenant can still write
 *    the shared page) and never reads head/completed back from shared memory: its
 *    own copies are authoritative, the shared ones are a report.
 *  - After each command, the daemon stores completed (release), then increments
 *    completed_futex; if waiters is non-zero it FUTEX_WAKEs completed_futex.
 *  - Targeted waits (features & NEURON_RING_F_WAKE_AT, set by the daemon): a
 *    sleeper that waits for completed >= T counts itself in target_waiters and
 *    lowers wake_at to T (a compare-and-swap minimum), then reads completed_futex,
 *    checks that wake_at is still <= T (else it registers again), checks completed
 *    and sleeps on the word it read. After a completion reaches wake_at the
 *    daemon sets wake_at to UINT64_MAX, increments completed_futex and wakes all
 *    sleepers; each registers again for its own target. A sleeper that waits for
 *    a later command than the next one is no longer woken by every completion
 *    before it (a sync behind a hundred queued kernels cost a hundred wake-ups).
 *    waiters stays the count of sleepers that wake at every completion (a
 *    libneuron without targeted waits); faults wake everyone.
 *  - Sequence numbers start at 1: command seq occupies slot (seq - 1) % slot_count,
 *    and the timeline value `completed` counts completed commands, so a wait for
 *    seq is satisfied when completed >= seq.
 *  - A faulting command stores fault_seq, fault_user_tag and fault_reason, then
 *    fault_code (release), bumps completed_futex and wakes waiters. completed stays
 *    below fault_seq and the queue accepts no more work (sticky fault): commands
 *    submitted after the faulting one never run and waits for them fail.
 */
#define NEURON_RING_MAGIC 0x4e52494eu /* "NIRN" */
#define NEURON_RING_HEADER_SIZE 4096

/* features: the daemon honours target_waiters and wake_at (targeted waits). */
#define NEURON_RING_F_WAKE_AT 0x1u
/* features: the daemon runs commands flagged NEURON_CMD_F_STAMP (cmd ABI 1.7). */
#define NEURON_RING_F_CMD_STAMP 0x2u
/* What this version of the daemon offers on every ring it creates or adopts. */
#define NEURON_RING_FEATURES (NEURON_RING_F_WAKE_AT | NEURON_RING_F_CMD_STAMP)

struct neuron_ring_header {
	uint32_t magic;
	uint32_t abi_major;
	uint32_t slot_count;    /* a power of two */
	uint32_t slot_size;     /* NEURON_CMD_SLOT_SIZE */
	uint64_t queue_id;
	uint32_t features;      /* NEURON_RING_F_*, written by the daemon */
	uint8_t pad0[36];
	/* written by the tenant */
	uint64_t tail;
	uint32_t doorbell;
	uint32_t pad1;
	uint8_t pad2[48];
	/* written by the daemon */
	uint64_t completed;
	uint32_t completed_futex;
	uint32_t engine_sleeping;
	uint8_t pad3[48];
	/* sleepers on completed_futex: woken at every completion */
	uint32_t waiters;
	/* sleepers on completed_futex that registered a target in wake_at */
	uint32_t target_waiters;
	/* the lowest completed count a targeted sleeper waits for (UINT64_MAX: none) */
	uint64_t wake_at;
	uint8_t pad5[48];
	/* sticky fault, written once by the daemon */
	uint32_t fault_code;    /* enum neuron_fault_code */
	uint32_t pad6;
	uint64_t fault_seq;     /* sequence number of the faulting command */
	uint64_t fault_user_tag;
	char fault_reason[NEURON_FAULT_REASON_LEN];
};

#ifdef __cplusplus
}

static_assert(sizeof(neuron_ring_header) <= NEURON_RING_HEADER_SIZE, "ring header fits");
static_assert(offsetof(neuron_ring_header, tail) == 64, "producer line");
static_assert(offsetof(neuron_ring_header, completed) == 128, "consumer line");
static_assert(offsetof(neuron_ring_header, waiters) == 192, "waiter line");
static_assert(offsetof(neuron_ring_header, wake_at) == 200, "waiter line");
static_assert(offsetof(neuron_ring_header, fault_code) == 256, "fault line");
#endif

#endif /* NEURON_RING_H */
