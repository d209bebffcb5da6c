// neuron-ls: lists the Neuron devices neurond drives, in the AWS tool's layout.
#include "report.h"
#include "table.h"

#include <CLI/CLI.hpp>

#include <unistd.h>

#include <iostream>

using namespace neuron::ls;

int main(int argc, char **argv)
{
	CLI::App app{"neuron-ls: list Neuron devices, their cores and memory, and the processes using them"};
	bool wide = false, json = false;
	std::string socket;
	app.add_flag("-w,--wide", wide, "also list the processes (tenants) on each device");
	app.add_flag("-j,--json-output", json, "print a JSON document (schema_version 1) instead of a table");
	app.add_option("--socket", socket, "neurond socket (default: $NEURON_SOCKET or the system socket)");
	CLI11_PARSE(app, argc, argv);

	neuron_connect_options opts = {};
	opts.socket_path = socket.empty() ? nullptr : socket.c_str();
	opts.client_name = "neuron-ls";
	opts.observer = 1;
	neuron_client *client = nullptr;
	if (neuron_connect(&opts, &client) != NEURON_OK) {
		std::cerr << "neuron-ls: cannot read device information: " << neuron_last_error() << "\n";
		return 1;
	}
	Report report;
	std::string error;
	const bool ok = gather(client, &report, &error);
	neuron_disconnect(client);
	if (!ok) {
		std::cerr << "neuron-ls: " << error << "\n";
		return 1;
	}
	if (json) {
		std::cout << to_json(report).dump(2) << "\n";
		return 0;
	}

	std::vector<std::vector<std::string>> headers = {
		{"NEURON", "DEVICE"}, {"NEURON", "CORES"}, {"NEURON", "CORE IDS"}, {"NEURON", "MEMORY"},
		{"CONNECTED", "DEVICES"}, {"PCI", "BDF"}, {"NUMA", "NODE"}};
	if (wide) {
		headers.push_back({"PID"});
		headers.push_back({"COMMAND"});
		headers.push_back({"TENANT", "CORES"});
		headers.push_back({"TENANT", "MEMORY"});
	}
	Table table(headers);
	for (const auto &d : report.devices) {
		std::string connected;
		for (uint32_t i = 0; i < d.connected_count; ++i)
			connected += (i ? ", " : "") + std::to_string(d.connected[i]);
		const uint32_t all = d.core_count >= 32 ? ~0u : (1u << d.core_count) - 1;
		table.add_row({std::to_string(d.index), std::to_string(d.core_count), core_ranges(all),
			       memory_size(d.hbm_bytes), connected, d.pci_bdf, std::to_string(d.numa_node)});
		if (!wide)
			continue;
		for (const auto &t : report.tenants) {
			for (uint32_t k = 0; k < t.device_count; ++k) {
				if (t.devices[k] != d.index)
					continue;
				// Another user's tenant, for a caller who is not an admin: the
				// daemon withholds its command line (like hidepid).
				std::string command = t.command[0] || t.uid == getuid() ? std::string(t.command)
											 : "(hidden: uid " + std::to_string(t.uid) + ")";
				if (command.size() > 40)
					command = command.substr(0, 37) + "...";
				table.add_row({"", "", "", "", "", "", "", std::to_string(t.pid), command,
					       core_ranges(t.core_mask[k]), memory_size(t.memory_bytes[k])});
			}
		}
	}
	const std::string backend = report.devices.empty() ? "none" : report.devices[0].backend;
	std::cout << "instance-type: simulated (" << (report.devices.empty() ? "no devices" : report.devices[0].profile)
		  << ", backend " << backend << ")\n";
	std::cout << table.render();
	return 0;
}
