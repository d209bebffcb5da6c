#include "wire.h"

#include <google/protobuf/message_lite.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sys/socket.h>
#include <unistd.h>

namespace neuron::wire {

FrameDecoder::~FrameDecoder() { close_all(); }

FrameDecoder::FrameDecoder(FrameDecoder &&o) noexcept
	: buffer_(std::move(o.buffer_)), offset_(o.offset_), stream_offset_(o.stream_offset_),
	  batches_(std::move(o.batches_)), broken_(o.broken_), broken_reason_(std::move(o.broken_reason_))
{
	o.batches_.clear();
}

FrameDecoder &FrameDecoder::operator=(FrameDecoder &&o) noexcept
{
	if (this != &o) {
		close_all();
		buffer_ = std::move(o.buffer_);
		offset_ = o.offset_;
		stream_offset_ = o.stream_offset_;
		batches_ = std::move(o.batches_);
		o.batches_.clear();
		broken_ = o.broken_;
		broken_reason_ = std::move(o.broken_reason_);
	}
	return *this;
}

void FrameDecoder::close_all()
{
	for (auto &b : batches_)
		for (int fd : b.fds)
			::close(fd);
	batches_.clear();
}

FrameDecoder::Status FrameDecoder::fail(std::string reason, std::string *error)
{
	broken_ = true;
	broken_reason_ = std::move(reason);
	*error = broken_reason_;
	close_all();
	return Status::Error;
}

void FrameDecoder::feed(const void *data, size_t len, std::vector<int> fds)
{
	if (broken_) {
		for (int fd : fds)
			::close(fd);
		return;
	}
	const uint64_t begin = stream_offset_ + (buffer_.size() - offset_);
	if (!fds.empty())
		batches_.push_back(Batch{begin, begin + len, std::move(fds)});
	// Compact once the consumed prefix dominates, keeping appends amortised O(1).
	if (offset_ > 4096 && offset_ * 2 > buffer_.size()) {
		buffer_.erase(0, offset_);
		offset_ = 0;
	}
	buffer_.append(static_cast<const char *>(data), len);
}

FrameDecoder::Status FrameDecoder::next(std::string *payload, std::string *error, std::vector<int> *fds)
{
	if (fds)
		fds->clear();
	if (broken_) {
		*error = broken_reason_;
		return Status::Error;
	}
	const size_t avail = buffer_.size() - offset_;
	if (avail < 4)
		return Status::NeedMore;
	const auto *p = reinterpret_cast<const unsigned char *>(buffer_.data() + offset_);
	const uint32_t len = uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
	if (len == 0 || len > kMaxFrame)
		return fail("frame length " + std::to_string(len) + " is outside 1.." + std::to_string(kMaxFrame), error);
	if (avail - 4 < len)
		return Status::NeedMore;
	const uint64_t start = stream_offset_, end = start + 4 + len;
	std::vector<int> mine;
	while (!batches_.empty()) {
		Batch &b = batches_.front();
		if (b.begin > start)
			break; // a later frame's
		if (b.end <= start)
			return fail("file descriptors arrived in the middle of a frame (attach them to a frame's first "
				    "byte)", error);
		if (end < b.end)
			break; // another frame starts later in that read: the last one takes them
		mine.insert(mine.end(), b.fds.begin(), b.fds.end());
		batches_.pop_front();
	}
	payload->assign(buffer_, offset_ + 4, len);
	offset_ += 4 + len;
	stream_offset_ = end;
	if (fds)
		*fds = std::move(mine);
	else
		for (int fd : mine)
			::close(fd);
	return Status::Frame;
}

size_t FrameDecoder::wanted() const
{
	const size_t avail = buffer_.size() - offset_;
	if (avail < 4)
		return 4 - avail;
	const auto *p = reinterpret_cast<const unsigned char *>(buffer_.data() + offset_);
	const uint64_t len = uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
	if (len == 0 || len > kMaxFrame)
		return 0; // next() reports the error
	return avail >= 4 + len ? 0 : static_cast<size_t>(4 + len - avail);
}

std::string encode_frame(const google::protobuf::MessageLite &msg)
{
	std::string out(4, '\0');
	msg.AppendToString(&out);
	const size_t len = out.size() - 4;
	for (int i = 0; i < 4; ++i)
		out[i] = static_cast<char>((len >> (8 * i)) & 0xff);
	return out;
}

ssize_t send_part(int sock, const char *data, size_t size, int fd, bool dontwait)
{
	struct iovec iov = {const_cast<char *>(data), size};
	struct msghdr msg = {};
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int))];
	if (fd >= 0) {
		std::memset(control, 0, sizeof(control));
		msg.msg_control = control;
		msg.msg_controllen = sizeof(control);
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	return sendmsg(sock, &msg, MSG_NOSIGNAL | (dontwait ? MSG_DONTWAIT : 0));
}

int send_frame(int sock, const std::string &frame, int fd, bool dontwait)
{
	size_t sent = 0;
	while (sent < frame.size()) {
		const ssize_t n = send_part(sock, frame.data() + sent, frame.size() - sent, sent == 0 ? fd : -1, dontwait);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		sent += static_cast<size_t>(n);
	}
	return 0;
}

long receive_some(int sock, FrameDecoder &decoder, bool dontwait, bool one_frame)
{
	char buf[16384];
	alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int) * 8)];
	size_t want = sizeof(buf);
	if (one_frame) {
		const size_t w = decoder.wanted();
		want = std::min(want, w ? w : size_t(4));
	}
	for (;;) {
		struct iovec iov = {buf, want};
		struct msghdr msg = {};
		msg.msg_iov = &iov;
		msg.msg_iovlen = 1;
		msg.msg_control = control;
		msg.msg_controllen = sizeof(control);
		ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | (dontwait ? MSG_DONTWAIT : 0));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		std::vector<int> fds;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (size_t i = 0; i < count; ++i) {
				int fd;
				std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
				fds.push_back(fd);
			}
		}
		// Descriptors beyond what fits in `control` are dropped by the kernel
		// (MSG_CTRUNC); the frames that wanted them then fail cleanly.
		if (n > 0)
			decoder.feed(buf, static_cast<size_t>(n), std::move(fds));
		else
			for (int fd : fds)
				::close(fd);
		return n;
	}
}

} // namespace neuron::wire
