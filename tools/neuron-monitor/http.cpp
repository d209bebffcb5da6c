#include "http.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

namespace neuron::monitor {

namespace {

constexpr size_t kMaxRequest = 8192;

void send_all(int fd, const std::string &data)
{
	size_t off = 0;
	while (off < data.size()) {
		const ssize_t n = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
		if (n <= 0)
			return;
		off += static_cast<size_t>(n);
	}
}

void respond(int fd, const std::string &status, const std::string &type, const std::string &body, bool head)
{
	std::string out = "HTTP/1.1 " + status + "\r\nContent-Type: " + type +
			  "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
	if (!head)
		out += body;
	send_all(fd, out);
}

// Reads the request head (up to the blank line); false if it is too long, slow or cut.
bool read_head(int fd, std::string *head)
{
	char buf[1024];
	while (head->find("\r\n\r\n") == std::string::npos) {
		if (head->size() > kMaxRequest)
			return false;
		const ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n <= 0)
			return false;
		head->append(buf, static_cast<size_t>(n));
	}
	return true;
}

void handle(int fd, const std::function<std::string()> &metrics)
{
	struct timeval tv = {5, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	std::string head;
	if (!read_head(fd, &head)) {
		respond(fd, "400 Bad Request", "text/plain", "incomplete or oversized request\n", false);
		return;
	}
	const std::string line = head.substr(0, head.find("\r\n"));
	const auto sp1 = line.find(' ');
	const auto sp2 = line.find(' ', sp1 == std::string::npos ? 0 : sp1 + 1);
	if (sp1 == std::string::npos || sp2 == std::string::npos) {
		respond(fd, "400 Bad Request", "text/plain", "malformed request line\n", false);
		return;
	}
	const std::string method = line.substr(0, sp1);
	std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
	target = target.substr(0, target.find('?'));
	const bool head_only = method == "HEAD";
	if (method != "GET" && !head_only) {
		respond(fd, "405 Method Not Allowed", "text/plain", "only GET and HEAD\n", false);
	} else if (target == "/metrics") {
		respond(fd, "200 OK", "text/plain; version=0.0.4; charset=utf-8", metrics(), head_only);
	} else if (target == "/") {
		respond(fd, "200 OK", "text/plain; charset=utf-8",
			"neuron-monitor: Prometheus metrics of neurond at /metrics\n", head_only);
	} else {
		respond(fd, "404 Not Found", "text/plain", "no such page; metrics are at /metrics\n", head_only);
	}
}

} // namespace

int listen_tcp(const std::string &address, std::string *error)
{
	const auto colon = address.rfind(':');
	if (colon == std::string::npos || colon + 1 == address.size()) {
		*error = "--listen " + address + ": expected HOST:PORT (e.g. 127.0.0.1:9641)";
		return -1;
	}
	std::string host = address.substr(0, colon);
	const std::string port = address.substr(colon + 1);
	if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
		host = host.substr(1, host.size() - 2);
	struct addrinfo hints = {}, *res = nullptr;
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	if (const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &res); rc != 0) {
		*error = "--listen " + address + ": " + gai_strerror(rc);
		return -1;
	}
	int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	const int one = 1;
	if (fd >= 0)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 || bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 16) != 0) {
		*error = "cannot listen on " + address + ": " + std::strerror(errno);
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	return fd;
}

void serve_http(int listen_fd, const std::function<std::string()> &metrics)
{
	for (;;) {
		const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE)
				continue;
			return;
		}
		handle(fd, metrics);
		close(fd);
	}
}

} // namespace neuron::monitor
