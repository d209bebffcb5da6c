#include "report.h"

#include <cstdio>
#include <unistd.h>

namespace neuron::ls {

bool gather(neuron_client *client, Report *report, std::string *error)
{
	uint32_t count = 0;
	if (neuron_device_count(client, &count) != NEURON_OK) {
		*error = neuron_last_error();
		return false;
	}
	report->devices.resize(count);
	for (uint32_t d = 0; d < count; ++d) {
		if (neuron_device_info(client, d, &report->devices[d]) != NEURON_OK) {
			*error = neuron_last_error();
			return false;
		}
	}
	uint32_t tenants = 0;
	for (;;) {
		// The list can grow between the two calls: retry until it fits.
		report->tenants.resize(tenants);
		uint32_t now = 0;
		if (neuron_list_tenants(client, report->tenants.data(), tenants, &now) != NEURON_OK) {
			*error = neuron_last_error();
			return false;
		}
		if (now <= tenants) {
			report->tenants.resize(now);
			return true;
		}
		tenants = now;
	}
}

std::string core_ranges(uint32_t mask)
{
	std::string out;
	for (int c = 0; c < 32;) {
		if (!(mask & (1u << c))) {
			++c;
			continue;
		}
		int end = c;
		while (end + 1 < 32 && (mask & (1u << (end + 1))))
			++end;
		if (!out.empty())
			out += ",";
		out += end == c ? std::to_string(c) : std::to_string(c) + "-" + std::to_string(end);
		c = end + 1;
	}
	return out;
}

std::string memory_size(uint64_t bytes)
{
	char buf[32];
	const double gib = static_cast<double>(bytes) / double(1ull << 30);
	if (bytes % (1ull << 30) == 0)
		std::snprintf(buf, sizeof(buf), "%llu GB", static_cast<unsigned long long>(bytes >> 30));
	else if (gib >= 1.0)
		std::snprintf(buf, sizeof(buf), "%.1f GB", gib);
	else
		std::snprintf(buf, sizeof(buf), "%.1f MB", static_cast<double>(bytes) / double(1 << 20));
	return buf;
}

nlohmann::json to_json(const Report &r)
{
	using nlohmann::json;
	json devices = json::array();
	for (const auto &d : r.devices) {
		json ids = json::array();
		for (uint32_t c = 0; c < d.core_count; ++c)
			ids.push_back(c);
		json connected = json::array();
		for (uint32_t i = 0; i < d.connected_count; ++i)
			connected.push_back(d.connected[i]);
		json procs = json::array();
		for (const auto &t : r.tenants) {
			for (uint32_t k = 0; k < t.device_count; ++k) {
				if (t.devices[k] != d.index)
					continue;
				json cores = json::array();
				for (int c = 0; c < 32; ++c)
					if (t.core_mask[k] & (1u << c))
						cores.push_back(c);
				procs.push_back({{"pid", t.pid},
						 {"uid", t.uid},
						 {"command", t.command},
						 // another user's tenant: neurond withholds the command line
						 {"command_hidden", !t.command[0] && t.uid != getuid()},
						 {"tenant_id", t.tenant_id},
						 {"kind", t.kind == NEURON_TENANT_INFERENCE ? "inference" : "training"},
						 {"neuroncore_ids", cores},
						 {"memory_used", t.memory_bytes[k]}});
			}
		}
		devices.push_back({{"neuron_device", d.index},
				   {"bdf", d.pci_bdf},
				   {"numa_node", d.numa_node},
				   {"connected_to", connected},
				   {"nc_count", d.core_count},
				   {"neuroncore_ids", ids},
				   {"memory_size", d.hbm_bytes},
				   {"memory_used", d.hbm_used_bytes},
				   {"profile", d.profile},
				   {"backend", d.backend},
				   {"neuron_processes", procs}});
	}
	return {{"schema_version", 1}, {"neuron_devices", devices}};
}

} // namespace neuron::ls
