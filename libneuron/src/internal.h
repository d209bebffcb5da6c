// libneuron's private structures. Lock protocol:
//  - neuron_client::rpc_mutex serialises request/response pairs on the socket.
//  - neuron_queue::submit_mutex serialises producers of one ring; waiters read the
//    ring's shared words without locks.
#pragma once

#include <neuron/neuron.h>
#include <neuron/ring.hpp>

#include <neuron.pb.h>
#include <wire.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>

struct neuron_client {
	int sock = -1;
	uint64_t tenant_id = 0;
	uint64_t next_request = 1;
	std::mutex rpc_mutex;
	neuron::wire::FrameDecoder decoder;
	std::atomic<bool> lost{false};
	// Staging buffer for blocking copies from pageable memory (lazily created).
	std::mutex staging_mutex;
	neuron_host_buffer *staging = nullptr;
};

struct neuron_host_buffer {
	neuron_client *client;
	void *ptr;
	uint64_t size;
	uint32_t handle;
	int fd;
};

struct neuron_queue {
	neuron_client *client;
	uint64_t id;
	uint32_t device;
	int kind;
	uint32_t slot_count;
	uint64_t ring_bytes;
	neuron::ring::Producer ring; // over the mapping of ring_bytes
	std::mutex submit_mutex;
	uint64_t submitted = 0; // guarded by submit_mutex (also read as an atomic_ref)
};

namespace neuron::client {

// Sets the thread's last error and returns status.
neuron_status fail(neuron_status status, const std::string &message);
// Sends req and waits for its response; *fd receives a passed descriptor (or -1).
neuron_status call(neuron_client *c, api::Request &req, api::Response *resp, int send_fd = -1, int *recv_fd = nullptr);
// True if the daemon side of the connection is gone.
bool daemon_gone(neuron_client *c);

} // namespace neuron::client
