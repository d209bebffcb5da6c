// The smallest HTTP/1.1 server Prometheus needs: GET /metrics answers with the
// exposition text, GET / with a pointer to it; anything else gets 404 or 405.
// One connection at a time (scrapes are seconds apart), each bounded: 5 s to send
// a request of at most 8 KiB, then the answer and close.
#pragma once

#include <functional>
#include <string>

namespace neuron::monitor {

// A listening TCP socket on "HOST:PORT" ("[v6]:PORT" for IPv6); -1 and *error.
int listen_tcp(const std::string &address, std::string *error);

// Serves requests on listen_fd until the process is signalled.
void serve_http(int listen_fd, const std::function<std::string()> &metrics);

} // namespace neuron::monitor
