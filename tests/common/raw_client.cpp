#include "raw_client.h"

#include "neurond_process.h"

#include <cerrno>
#include <cstring>
#include <ctime>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace neuron::test {

namespace {

long long now_ms()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

} // namespace

RawClient::~RawClient() { close(); }

bool RawClient::connect(const std::string &path)
{
	close();
	fd_ = connect_unix(path);
	return fd_ >= 0;
}

void RawClient::close()
{
	if (fd_ >= 0)
		::close(fd_);
	fd_ = -1;
	decoder_ = wire::FrameDecoder();
}

std::string RawClient::length_prefix(uint32_t len)
{
	std::string out(4, '\0');
	for (int i = 0; i < 4; ++i)
		out[i] = static_cast<char>((len >> (8 * i)) & 0xff);
	return out;
}

bool RawClient::send_bytes(const std::string &bytes, int pass_fd)
{
	return fd_ >= 0 && wire::send_frame(fd_, bytes, pass_fd, false) == 0;
}

bool RawClient::send(const api::Request &req, int pass_fd) { return send_bytes(wire::encode_frame(req), pass_fd); }

bool RawClient::receive(api::Response *resp, int timeout_ms, int *passed_fd, std::string *why)
{
	std::string ignored;
	if (!why)
		why = &ignored;
	if (passed_fd)
		*passed_fd = -1;
	const long long deadline = now_ms() + timeout_ms;
	for (;;) {
		std::string payload, error;
		std::vector<int> fds;
		const auto st = decoder_.next(&payload, &error, &fds);
		if (st == wire::FrameDecoder::Status::Error) {
			*why = "bad frame from the daemon: " + error;
			return false;
		}
		if (st == wire::FrameDecoder::Status::Frame) {
			if (!resp->ParseFromString(payload)) {
				*why = "unparsable Response";
				return false;
			}
			for (size_t i = 0; i < fds.size(); ++i) {
				if (i == 0 && passed_fd)
					*passed_fd = fds[0];
				else
					::close(fds[i]);
			}
			return true;
		}
		const long long left = deadline - now_ms();
		if (left <= 0) {
			*why = "no reply within " + std::to_string(timeout_ms) + " ms";
			return false;
		}
		struct pollfd p = {fd_, POLLIN, 0};
		const int r = poll(&p, 1, static_cast<int>(left));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			continue; // timeout is handled above
		const long n = wire::receive_some(fd_, decoder_, true);
		if (n == 0) {
			*why = "the daemon closed the connection";
			return false;
		}
		if (n < 0 && n != -EAGAIN) {
			*why = std::string("receive: ") + std::strerror(static_cast<int>(-n));
			return false;
		}
	}
}

bool RawClient::call(api::Request &req, api::Response *resp, int timeout_ms, int *passed_fd, std::string *why)
{
	if (req.request_id() == 0)
		req.set_request_id(next_id_++);
	if (!send(req)) {
		if (why)
			*why = std::string("send: ") + std::strerror(errno);
		return false;
	}
	return receive(resp, timeout_ms, passed_fd, why);
}

bool RawClient::hello(uint32_t api_major, api::Response *out)
{
	api::Request req;
	auto *h = req.mutable_hello();
	h->set_api_major(api_major);
	h->set_api_minor(0);
	h->set_client_name("raw-test-client");
	api::Response resp;
	if (!call(req, &resp))
		return false;
	if (out)
		*out = resp;
	return resp.has_hello();
}

bool RawClient::wait_eof(int timeout_ms)
{
	const long long deadline = now_ms() + timeout_ms;
	char buf[4096];
	for (;;) {
		const long long left = deadline - now_ms();
		if (left <= 0)
			return false;
		struct pollfd p = {fd_, POLLIN, 0};
		const int r = poll(&p, 1, static_cast<int>(left));
		if (r <= 0)
			continue;
		const ssize_t n = recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
		if (n == 0)
			return true;
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return errno == ECONNRESET;
	}
}

} // namespace neuron::test
