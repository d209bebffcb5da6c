// neurond: the Neuron runtime daemon. Drives the simulated chip and serves tenants
// over a Unix socket until SIGTERM or SIGINT.
#include "chip_set.h"
#include "config.h"
#include "listen_fds.h"
#include "log.h"
#include "sd_notify.h"
#include "server.h"

#include <neuron/socket_path.h>

#include <utility> // before Asio: Boost 1.74 awaitable.hpp uses std::exchange without it
#include <boost/asio.hpp>

#include <csignal>
#include <exception>
#include <iostream>
#include <stdexcept>

using namespace neuron::daemon;

int main(int argc, char **argv)
{
	Config config;
	int exit_code = 0;
	if (!parse_config(argc, argv, &config, &exit_code))
		return exit_code;
	LogLevel level = LogLevel::Info;
	parse_log_level(config.log_level, &level);
	set_log_level(level);
	if (config.socket_path.empty())
		config.socket_path = neuron::detail::default_socket_path(neuron::detail::SocketRole::Daemon);
	// A tenant that vanishes mid-reply must not kill the daemon.
	std::signal(SIGPIPE, SIG_IGN);

	try {
		// Before the devices: a second daemon must not take the driver's engine
		// (kmd backend) from the first only to find the socket taken.
		// (Not when systemd passed the socket: it is alive because it is ours.)
		if (inherited_unix_listener(config.socket_path) < 0 && socket_alive(config.socket_path))
			throw std::runtime_error("another neurond is already listening on " + config.socket_path);
		ChipSet chips(config);
		boost::asio::io_context io;
		Server server(io, chips, config);
		boost::asio::signal_set signals(io, SIGTERM, SIGINT);
		signals.async_wait([&](const boost::system::error_code &, int sig) {
			NLOG_INFO("daemon.stop", "signal=" + std::to_string(sig));
			sd_notify_state("STOPPING=1");
			server.stop();
			io.stop();
		});
		NLOG_INFO("daemon.ready", "version=" NEURON_VERSION " devices=" + std::to_string(chips.size()));
		if (std::string err; !sd_notify_state("READY=1", &err))
			NLOG_WARN("daemon.notify_failed", "error=\"" + err + "\"");
		io.run();
		server.stop();
		chips.stop();
		NLOG_INFO("daemon.exit", "status=clean");
	} catch (const std::exception &e) {
		NLOG_ERROR("daemon.fatal", std::string("error=\"") + e.what() + "\"");
		std::cerr << "neurond: " << e.what() << "\n";
		return 1;
	}
	return 0;
}
