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
	// Restart survival (reconnect.cpp): how to reach neurond again and re-attach
	// to the same tenant after it restarted. Guarded by rpc_mutex.
	std::string socket_path;
	std::string resume_token; // empty: neurond keeps no state; a restart loses the tenant
	bool observer = false;
	neuron::api::Hello hello; // the first Hello (an observer's reconnect repeats it)
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
// True if the daemon side of the connection is gone and could not be re-attached
// (a restarted neurond that kept the tenant's state is re-attached to at once).
bool daemon_gone(neuron_client *c);

// reconnect.cpp. A connected socket to path, or -1 with *status set (and the
// thread's error).
int connect_socket(const std::string &path, neuron_status *status);
// One request/response exchange on `sock` (no reconnect). NEURON_OK, or
// NEURON_ERR_DAEMON_LOST with *why (the connection broke), or the reply's error.
neuron_status exchange(neuron_client *c, int sock, api::Request &req, api::Response *resp, int send_fd, int *recv_fd,
		       std::string *why);
// With rpc_mutex held: after the connection broke, connects again and re-attaches
// to the tenant (Hello with its resume token), waiting up to
// $NEURON_RECONNECT_TIMEOUT_MS (default 60000) for neurond to come back. On
// success the client uses the new connection; *last_id and *last (if given)
// receive the last state-changing request neurond ran and its reply (with *last_fd
// the descriptor attached to it, or -1). False with the thread's error set.
bool reattach(neuron_client *c, uint64_t *last_id = nullptr, api::Response *last = nullptr, int *last_fd = nullptr);

} // namespace neuron::client
