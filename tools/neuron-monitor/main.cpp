// neuron-monitor: a Prometheus text endpoint for neurond. Each scrape of /metrics
// asks neurond (as an observer: it is never a tenant) for devices, cores, pools,
// loans and tenants; a background connection counts faults, resets and reclaims
// from neurond's event stream. Under systemd it takes its listening socket from
// neuron-monitor.socket (socket activation); by hand it listens on --listen.
//
//   neuron-monitor [--listen 127.0.0.1:9641] [--socket PATH]
//   neuron-monitor --once        print one scrape on stdout and exit
#include "http.h"
#include "scrape.h"

#include <listen_fds.h>

#include <CLI/CLI.hpp>

#include <csignal>
#include <iostream>

using namespace neuron::monitor;

int main(int argc, char **argv)
{
	CLI::App app{"neuron-monitor: Prometheus metrics of neurond (devices, cores, pools, loans, tenants, faults)"};
	app.set_version_flag("--version", std::string("neuron-monitor ") + NEURON_VERSION);
	std::string listen = "127.0.0.1:9641", socket;
	bool once = false;
	app.add_option("--listen", listen,
		       "HOST:PORT to serve http://HOST:PORT/metrics on when systemd passes no socket "
		       "(default 127.0.0.1:9641)");
	app.add_option("--socket", socket, "neurond socket (default: $NEURON_SOCKET or the system socket)");
	app.add_flag("--once", once, "print one scrape on stdout and exit (0 when neurond answered, 1 if not)");
	CLI11_PARSE(app, argc, argv);
	std::signal(SIGPIPE, SIG_IGN);

	if (once) {
		EventCounters events(socket);
		Scraper scraper(socket, events);
		const std::string text = scraper.scrape();
		std::cout << text;
		return text.find("\nneuron_up 1\n") != std::string::npos ? 0 : 1;
	}
	int fd = neuron::daemon::inherited_tcp_listener();
	if (fd < 0) {
		std::string error;
		fd = listen_tcp(listen, &error);
		if (fd < 0) {
			std::cerr << "neuron-monitor: " << error << "\n";
			return 1;
		}
		std::cerr << "neuron-monitor: serving http://" << listen << "/metrics\n";
	} else {
		std::cerr << "neuron-monitor: serving /metrics on the socket systemd passed\n";
	}
	EventCounters events(socket);
	Scraper scraper(socket, events);
	serve_http(fd, [&scraper] { return scraper.scrape(); });
	return 1;
}
