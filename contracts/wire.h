// Framing of the control plane: a 4-byte little-endian length, then a serialized
// protobuf message, with file descriptors riding along as SCM_RIGHTS.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace google::protobuf { class MessageLite; }

namespace neuron::wire {

inline constexpr size_t kMaxFrame = 1 << 20;

// Splits a byte stream into frames. Once it reports an error it stays broken: the
// stream cannot be resynchronised and the connection must be closed.
class FrameDecoder {
public:
	enum class Status { NeedMore, Frame, Error };
	void feed(const void *data, size_t len);
	// On Frame, *payload holds one message; on Error, *error says why.
	Status next(std::string *payload, std::string *error);

private:
	std::string buffer_;
	size_t offset_ = 0;
	bool broken_ = false;
	std::string broken_reason_;
};

std::string encode_frame(const google::protobuf::MessageLite &msg);

// Sends a whole frame, attaching `fd` (if >= 0) to its first byte. Blocking unless
// the socket is non-blocking; with dontwait, EAGAIN is an error. Returns 0 or errno.
int send_frame(int sock, const std::string &frame, int fd, bool dontwait);

// Reads what is available (one recvmsg) into the decoder; received descriptors are
// appended to *fds. Returns bytes read, 0 on EOF, -errno on error.
long receive_some(int sock, FrameDecoder &decoder, std::deque<int> *fds, bool dontwait);

} // namespace neuron::wire
