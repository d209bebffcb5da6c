// Framing of the control plane: a 4-byte little-endian length, then a serialized
// protobuf message, with file descriptors riding along as SCM_RIGHTS.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include <sys/types.h> // ssize_t

namespace google::protobuf { class MessageLite; }

namespace neuron::wire {

inline constexpr size_t kMaxFrame = 1 << 20;

// Splits a byte stream into frames, and binds the file descriptors that arrive
// (SCM_RIGHTS) to the frame they were sent with. A sender attaches a frame's
// descriptors to its first byte (one sendmsg per frame, send_frame); the kernel
// hands them out with the first read that touches that sendmsg's bytes and ends
// that read there, so descriptors that arrive with the bytes [a, b) of a read
// belong to the last frame that starts in [a, b). A reader that never reads past
// the frame it is receiving (receive_some with one_frame, as neurond does) makes
// the binding exact: descriptors sent with a frame are never taken by a later one,
// even when the sender put several frames in the sendmsg that carried them.
// Descriptors with no frame starting in their read arrived in the middle of one:
// a protocol error. Once it reports an error it stays broken: the stream cannot be
// resynchronised and the connection must be closed. It owns the descriptors it has
// not handed out and closes them when it goes.
class FrameDecoder {
public:
	enum class Status { NeedMore, Frame, Error };
	FrameDecoder() = default;
	~FrameDecoder();
	FrameDecoder(FrameDecoder &&other) noexcept;
	FrameDecoder &operator=(FrameDecoder &&other) noexcept;
	FrameDecoder(const FrameDecoder &) = delete;
	FrameDecoder &operator=(const FrameDecoder &) = delete;

	// Bytes read from the stream, and the descriptors that came with them.
	void feed(const void *data, size_t len, std::vector<int> fds = {});
	// On Frame, *payload holds one message and *fds (if given) the descriptors sent
	// with it (the caller owns them; without fds they are closed). On Error, *error
	// says why.
	Status next(std::string *payload, std::string *error, std::vector<int> *fds = nullptr);
	// Bytes still to come before the frame being received is complete (its length
	// prefix first); 0 when a whole frame is already buffered.
	size_t wanted() const;

private:
	struct Batch {
		uint64_t begin = 0, end = 0; // stream offsets of the read that carried them
		std::vector<int> fds;
	};
	void close_all();
	Status fail(std::string reason, std::string *error);

	std::string buffer_;
	size_t offset_ = 0;
	uint64_t stream_offset_ = 0; // of buffer_[offset_]
	std::deque<Batch> batches_;
	bool broken_ = false;
	std::string broken_reason_;
};

std::string encode_frame(const google::protobuf::MessageLite &msg);

// Sends a whole frame, attaching `fd` (if >= 0) to its first byte. Blocking unless
// the socket is non-blocking; with dontwait, EAGAIN is an error. Returns 0 or errno.
int send_frame(int sock, const std::string &frame, int fd, bool dontwait);
// One sendmsg of [data, data + size) with descriptor fd (if >= 0) on its first
// byte: what send_frame repeats, for senders that keep their own progress (the
// daemon's per-connection outbox). Returns sendmsg's result (errno set).
ssize_t send_part(int sock, const char *data, size_t size, int fd, bool dontwait);

// Reads what is available (one recvmsg) into the decoder, with the descriptors
// that came along. With one_frame, never past the end of the frame being received
// (decoder.wanted()), which binds descriptors exactly (see FrameDecoder). Returns
// bytes read, 0 on EOF, -errno on error.
long receive_some(int sock, FrameDecoder &decoder, bool dontwait, bool one_frame = false);

} // namespace neuron::wire
