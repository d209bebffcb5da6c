// A bare control-plane client for tests that must speak the protocol by hand
// (contracts/neuron.proto framing: 4-byte LE length + protobuf, fds via SCM_RIGHTS):
// hand-built and malformed frames, and access to a queue's ring memfd.
#pragma once

#include <neuron.pb.h>
#include <wire.h>

#include <cstdint>
#include <deque>
#include <string>

namespace neuron::test {

class RawClient {
public:
	RawClient() = default;
	~RawClient();
	RawClient(const RawClient &) = delete;
	RawClient &operator=(const RawClient &) = delete;

	bool connect(const std::string &path);
	int fd() const { return fd_; }
	void close();

	// Sends raw bytes (a whole frame, a part of one, or garbage). False on error.
	bool send_bytes(const std::string &bytes, int pass_fd = -1);
	// Frames and sends a request.
	bool send(const api::Request &req, int pass_fd = -1);
	// Reads one Response within timeout_ms; *passed_fd (if given) receives a
	// descriptor that came with it, or -1. False on EOF, timeout or a bad frame
	// (*why says which).
	bool receive(api::Response *resp, int timeout_ms, int *passed_fd = nullptr, std::string *why = nullptr);
	// send + receive.
	bool call(api::Request &req, api::Response *resp, int timeout_ms = 5000, int *passed_fd = nullptr,
		  std::string *why = nullptr);
	// Hello with the given API major; true if the daemon answered HelloReply.
	bool hello(uint32_t api_major = 1, api::Response *resp = nullptr);
	// True if the daemon closes the connection within timeout_ms (data before the
	// EOF is discarded).
	bool wait_eof(int timeout_ms);

	// A 4-byte little-endian length prefix.
	static std::string length_prefix(uint32_t len);

private:
	int fd_ = -1;
	uint64_t next_id_ = 1;
	wire::FrameDecoder decoder_;
};

} // namespace neuron::test
