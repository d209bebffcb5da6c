/* SPDX-License-Identifier: MIT */
/*
 * libneuron: the client library of the Neuron stack.
 *
 * A tenant connects to neurond, allocates device (HBM) memory and pinned host
 * buffers, creates queues (one per NeuronCore it uses, plus DMA queues), submits
 * commands (see <neuron/cmd.h>) and waits on their completion. Submission and
 * completion never go through RPC: queues are shared-memory rings.
 *
 * Errors: every function returns a neuron_status; on failure, neuron_last_error()
 * returns a message for the calling thread that says what was wrong. A daemon that
 * goes away turns into NEURON_ERR_DAEMON_LOST, never a hang. A neurond that keeps
 * its tenants' state (under --supervise or systemd's fd store) and restarts is
 * re-attached to transparently: calls and waits go on once it is back (within
 * $NEURON_RECONNECT_TIMEOUT_MS, default 60000), with memory, host buffers and
 * queues as they were; a request interrupted by the restart runs once.
 *
 * Threads: a neuron_client may be used from several threads. A neuron_queue takes
 * submissions from several threads (serialised inside); waits are lock-free.
 */
#ifndef NEURON_NEURON_H
#define NEURON_NEURON_H

#include <stddef.h>
#include <stdint.h>

#include <neuron/cmd.h>
#include <neuron/program.h>
#include <neuron/ring.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with hidden visibility; everything declared here is its ABI. */
#pragma GCC visibility push(default)

#define NEURON_API_MAJOR 1
#define NEURON_API_MINOR 1

typedef enum neuron_status {
	NEURON_OK = 0,
	NEURON_ERR_INVALID = -1,      /* bad argument */
	NEURON_ERR_NO_MEMORY = -2,    /* device or host memory exhausted */
	NEURON_ERR_NOT_FOUND = -3,    /* unknown device, address, handle or queue */
	NEURON_ERR_PERMISSION = -4,   /* socket or API permission */
	NEURON_ERR_VERSION = -5,      /* daemon speaks another API major */
	NEURON_ERR_DAEMON_LOST = -6,  /* no daemon, or the connection dropped */
	NEURON_ERR_TIMEOUT = -7,      /* a wait ran out of time */
	NEURON_ERR_FAULT = -8,        /* the queue faulted (sticky): see neuron_queue_fault */
	NEURON_ERR_PROTOCOL = -9,     /* malformed reply (a bug on one side) */
	NEURON_ERR_INTERNAL = -10,
	NEURON_ERR_ABORTED = -11,     /* a collective group broke (a member left or timed out) */
} neuron_status;

typedef struct neuron_client neuron_client;
typedef struct neuron_queue neuron_queue;
typedef struct neuron_host_buffer neuron_host_buffer;

/* Message of the last failure on this thread (never NULL). */
const char *neuron_last_error(void);
/* Short name of a status, e.g. "NEURON_ERR_FAULT". */
const char *neuron_status_name(neuron_status status);

enum neuron_tenant_kind {
	NEURON_TENANT_TRAINING = 1,
	NEURON_TENANT_INFERENCE = 2,
};

struct neuron_connect_options {
	const char *socket_path;   /* NULL: $NEURON_SOCKET, else the default path */
	const char *client_name;   /* NULL: the program's command line */
	int kind;                  /* enum neuron_tenant_kind; 0 = training */
	int observer;              /* non-zero: a tool that only queries */
};

/* The socket path used when none is given: $NEURON_SOCKET, else
 * /run/neuron/neurond.sock for root, else $XDG_RUNTIME_DIR/neuron/neurond.sock or
 * /tmp/neuron-<uid>/neurond.sock. */
const char *neuron_default_socket_path(void);

neuron_status neuron_connect(const struct neuron_connect_options *opts, neuron_client **out);
void neuron_disconnect(neuron_client *client);
uint64_t neuron_tenant_id(const neuron_client *client);

/* Sets this tenant's fair-share weight, 1..1000 (the default is 1). Where tenants of
 * one kind (class) share a NeuronCore, each gets core time in proportion to its
 * weight: weights 3 and 1 give about 3/4 and 1/4 of the core while both have work.
 * It does not order classes: inference work still goes before training work. Takes
 * effect from the daemon's next tile on, for every queue the tenant has and creates.
 * NEURON_ERR_INVALID for a weight outside 1..1000 (the client stays usable). */
neuron_status neuron_set_weight(neuron_client *client, uint32_t weight);

/* ---- devices ---- */
struct neuron_device_info {
	uint32_t index;
	uint32_t core_count;
	uint64_t hbm_bytes;
	uint64_t hbm_used_bytes;
	uint64_t hbm_largest_free_bytes;
	int32_t numa_node;
	uint32_t connected_count;
	uint32_t connected[16];
	char profile[16];
	char pci_bdf[32];
	char backend[16];
};

neuron_status neuron_device_count(neuron_client *client, uint32_t *count);
neuron_status neuron_device_info(neuron_client *client, uint32_t device,
				 struct neuron_device_info *info);

/* ---- device memory ---- */
/* alignment: a power of two, 0 = 256. Memory comes back zeroed. */
neuron_status neuron_alloc(neuron_client *client, uint32_t device, uint64_t size,
			   uint64_t alignment, uint64_t *address);
neuron_status neuron_free(neuron_client *client, uint32_t device, uint64_t address);

/* ---- pinned host buffers (shared with the daemon; DMA source/destination) ---- */
neuron_status neuron_host_alloc(neuron_client *client, uint64_t size, neuron_host_buffer **out);
void *neuron_host_ptr(const neuron_host_buffer *buffer);
uint64_t neuron_host_size(const neuron_host_buffer *buffer);
uint32_t neuron_host_handle(const neuron_host_buffer *buffer);
neuron_status neuron_host_free(neuron_host_buffer *buffer);

/* ---- queues ---- */
enum neuron_queue_kind {
	NEURON_QUEUE_CORE = 1,
	NEURON_QUEUE_DMA = 2,
};

/* core is ignored for DMA queues. slot_count: power of two, 0 = 256. */
neuron_status neuron_queue_create(neuron_client *client, uint32_t device, int kind,
				  uint32_t core, uint32_t slot_count, neuron_queue **out);
neuron_status neuron_queue_destroy(neuron_queue *queue);
uint64_t neuron_queue_id(const neuron_queue *queue);
/* NEURON_RING_F_* (<neuron/ring.h>): what the daemon running the queue offers,
 * e.g. NEURON_RING_F_CMD_STAMP for commands flagged NEURON_CMD_F_STAMP. Read
 * at each call: a daemon that adopts the queue after a restart may offer more. */
uint32_t neuron_queue_features(const neuron_queue *queue);

/*
 * Enqueues one command; *seq (may be NULL) receives its sequence number: the
 * queue's timeline semaphore reaches seq once the command completed. Blocks while
 * the ring is full. Fails with NEURON_ERR_FAULT once the queue has faulted.
 */
neuron_status neuron_submit(neuron_queue *queue, const struct neuron_cmd *cmd, uint64_t *seq);
/* Timeline value: how many commands of this queue have completed. */
uint64_t neuron_queue_completed(const neuron_queue *queue);
/* Waits until the timeline reaches seq. timeout_ns < 0: no limit. */
neuron_status neuron_queue_wait(neuron_queue *queue, uint64_t seq, int64_t timeout_ns);
/* Waits for everything submitted so far. */
neuron_status neuron_queue_sync(neuron_queue *queue, int64_t timeout_ns);

struct neuron_fault {
	uint32_t code;           /* enum neuron_fault_code */
	uint64_t seq;            /* the faulting command */
	uint64_t user_tag;
	char reason[NEURON_FAULT_REASON_LEN];
};
/* NEURON_OK and code NEURON_FAULT_NONE when the queue is healthy. */
neuron_status neuron_queue_fault(const neuron_queue *queue, struct neuron_fault *fault);

/* ---- events: a point on a queue's timeline ---- */
struct neuron_event {
	uint64_t queue_id;
	uint64_t value;
};
/* Records the queue's last submitted command as an event. */
neuron_status neuron_event_record(neuron_queue *queue, struct neuron_event *event);
/* Makes later work on `queue` wait for `event` (device-side, no host block). */
neuron_status neuron_queue_wait_event(neuron_queue *queue, const struct neuron_event *event);
/* Host wait for an event recorded on `queue`. */
neuron_status neuron_event_wait(neuron_queue *queue, const struct neuron_event *event,
				int64_t timeout_ns);

/* ---- copies ---- */
/* Async copy between a host buffer and device memory on a DMA queue. */
neuron_status neuron_copy_h2d_async(neuron_queue *dma, uint64_t dst, const neuron_host_buffer *src,
				    uint64_t src_offset, uint64_t size, uint64_t *seq);
neuron_status neuron_copy_d2h_async(neuron_queue *dma, neuron_host_buffer *dst, uint64_t dst_offset,
				    uint64_t src, uint64_t size, uint64_t *seq);
neuron_status neuron_copy_d2d_async(neuron_queue *dma, uint64_t dst, uint64_t src, uint64_t size,
				    uint64_t *seq);
/* Blocking copies from pageable memory, staged through an internal pinned buffer. */
neuron_status neuron_memcpy_h2d(neuron_queue *dma, uint64_t dst, const void *src, uint64_t size);
neuron_status neuron_memcpy_d2h(neuron_queue *dma, void *dst, uint64_t src, uint64_t size);

/* ---- programs: a graph of commands registered once, replayed with one submission ---- */
/*
 * See <neuron/program.h>. A node is a command whose operands name memory with
 * mem_space NEURON_MEM_PROGRAM_ARG (host_buffer = argument index, addr = byte
 * offset in it) or NEURON_MEM_PROGRAM_BUFFER (a program buffer neurond
 * allocates); deps lists the nodes it must follow.
 */
struct neuron_program_node {
	struct neuron_cmd cmd;
	const uint32_t *deps;     /* may be NULL when dep_count is 0 */
	uint32_t dep_count;
	const char *label;        /* what the node is, shown in fault reasons; may be NULL */
};

struct neuron_program_desc {
	uint32_t device;
	uint32_t arg_count;
	const uint64_t *arg_bytes;     /* declared size of each argument */
	uint32_t buffer_count;
	const uint64_t *buffer_bytes;  /* size of each buffer neurond allocates for the program */
	uint32_t node_count;
	const struct neuron_program_node *nodes;
};

/* Registers (neurond validates it once; NEURON_ERR_INVALID with the reason if it
 * refuses) and returns its id. Large programs travel in a memfd. */
neuron_status neuron_program_register(neuron_client *client, const struct neuron_program_desc *desc,
				      uint64_t *program);

/* A tile program in its wire form (<neuron/tile.h>): a kernel over the core's
 * SBUF and PSUM that the program's TILE_KERNEL nodes run (i[0] is its index). */
struct neuron_tile_image {
	const void *data;
	uint64_t size;
};
/* neuron_program_register with the tile programs its TILE_KERNEL nodes run
 * (neurond validates each for the device's profile). */
neuron_status neuron_program_register_kernels(neuron_client *client, const struct neuron_program_desc *desc,
					      const struct neuron_tile_image *tiles, uint32_t tile_count,
					      uint64_t *program);
/* Deregisters: replays already submitted finish; the buffers go back after them. */
neuron_status neuron_program_release(neuron_client *client, uint64_t program);

struct neuron_exec_options {
	uint64_t user_tag;
	struct neuron_wait wait;       /* as a command's wait field */
	uint32_t flags;                /* NEURON_EXEC_RNG: random nodes take rng_seed / rng_offset */
	uint64_t rng_seed;
	uint64_t rng_offset;
};
/*
 * Replays a program on a core queue with one submission (one EXEC_PROGRAM command
 * spanning neuron_exec_slots(binding_count) ring slots, published at once):
 * bindings[k] is the device address bound to argument k. *seq receives the
 * timeline value at which the replay is complete. opts may be NULL.
 */
neuron_status neuron_submit_program(neuron_queue *queue, uint64_t program, const uint64_t *bindings,
				    uint32_t binding_count, const struct neuron_exec_options *opts,
				    uint64_t *seq);

/* ---- tenants (what neuron-ls -w shows) ---- */
struct neuron_tenant_info {
	uint64_t tenant_id;
	uint32_t pid;
	uint32_t uid;
	int kind;                 /* enum neuron_tenant_kind */
	uint32_t device_count;    /* entries used in the arrays below */
	uint32_t devices[16];
	uint64_t memory_bytes[16];
	uint32_t core_mask[16];   /* bit c: the tenant has a queue on core c */
	uint64_t commands_completed;
	char command[256];
	char client_name[64];
};
/* Fills up to `capacity` entries; *count receives the number of tenants. */
neuron_status neuron_list_tenants(neuron_client *client, struct neuron_tenant_info *tenants,
				  uint32_t capacity, uint32_t *count);

/* ---- collective groups (the ranks of a distributed job on one host) ----
 *
 * neurond moves and reduces the ranks' device buffers itself, device memory to
 * device memory (contracts/neuron.proto, CollectiveJoin). Each rank opens a second
 * connection of its process, its channel (neuron_connect with observer = 1), and
 * joins the group for its own tenant (neuron_tenant_id of its main client) with a
 * secret the ranks shared through their rendezvous. neuron_group_run blocks the
 * calling thread until every rank arrived and the data moved; the tenant's main
 * client stays usable meanwhile. The caller orders the run after the work that
 * produced the inputs (wait for its queues first). Timeouts give NEURON_ERR_TIMEOUT
 * and a rank that left NEURON_ERR_ABORTED, the message naming the ranks; either
 * breaks the group for good. */
enum neuron_collective_op {
	NEURON_COLL_ALL_REDUCE = 1,     /* in/out: count elements */
	NEURON_COLL_BROADCAST = 2,      /* in/out: count (root's input to every output) */
	NEURON_COLL_ALL_GATHER = 3,     /* in: count; out: world * count */
	NEURON_COLL_REDUCE_SCATTER = 4, /* in: world * count; out: count */
	NEURON_COLL_BARRIER = 5,        /* count 0, no buffers */
	NEURON_COLL_REDUCE = 6,         /* in: count; out (root only): count */
	NEURON_COLL_GATHER = 7,         /* in: count; out (root only): world * count */
	NEURON_COLL_SCATTER = 8,        /* in (root only): world * count; out: count */
	NEURON_COLL_ALL_TO_ALL = 9,     /* in/out: world * count */
};
enum neuron_reduce_op {
	NEURON_REDUCE_SUM = 0,
	NEURON_REDUCE_AVG = 1,
	NEURON_REDUCE_MAX = 2,
	NEURON_REDUCE_MIN = 3,
	NEURON_REDUCE_PRODUCT = 4,
};
struct neuron_collective {
	uint32_t op;      /* enum neuron_collective_op */
	uint32_t reduce;  /* enum neuron_reduce_op */
	uint32_t dtype;   /* enum neuron_dtype */
	uint32_t root;
	uint32_t device;  /* this rank's device holding input and output */
	uint32_t reserved; /* 0 */
	uint64_t count;
	uint64_t input;   /* device addresses of this rank's tenant (may be equal) */
	uint64_t output;
};
/* Blocks until all world_size ranks joined (or timeout_ms ran out). */
neuron_status neuron_group_join(neuron_client *channel, uint64_t tenant_id, const char *group,
				const void *secret, size_t secret_len, uint32_t rank, uint32_t world_size,
				uint32_t timeout_ms, uint64_t *group_id);
/* seq: 0 for the group's first collective, then 1, 2, ... (the same on every rank). */
neuron_status neuron_group_run(neuron_client *channel, uint64_t group_id, uint64_t seq,
			       const struct neuron_collective *coll);
/* Point-to-point (CollectiveP2P in contracts/neuron.proto): a batch of sends and
 * receives of this rank, matched with its peers' by (sender, receiver, tag) in
 * posting order, outside the seq of neuron_group_run. Blocks until every op of
 * the batch moved its data. A send and its recv must agree on dtype and count. */
struct neuron_p2p_op {
	uint32_t send;    /* 1: send the buffer to peer; 0: receive into it from peer */
	uint32_t peer;    /* the other rank */
	uint32_t dtype;   /* enum neuron_dtype */
	uint32_t device;  /* this rank's device holding the buffer */
	uint64_t tag;
	uint64_t count;   /* elements */
	uint64_t address; /* device address of this rank's tenant */
};
neuron_status neuron_group_p2p(neuron_client *channel, uint64_t group_id, const struct neuron_p2p_op *ops,
			       size_t n);

/* ---- command encoding helpers ---- */
/* A contiguous row-major descriptor of device memory. */
struct neuron_tensor_desc neuron_desc_contiguous(uint64_t address, int dtype, int ndim,
						 const int64_t *sizes);
void neuron_cmd_init(struct neuron_cmd *cmd, int opcode, int num_operands);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif /* NEURON_NEURON_H */
