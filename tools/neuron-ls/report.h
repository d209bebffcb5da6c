// What neuron-ls shows, gathered from neurond in one pass.
#pragma once

#include <neuron/neuron.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace neuron::ls {

struct Report {
	std::vector<struct neuron_device_info> devices;
	std::vector<neuron_tenant_info> tenants;
};

// Queries the daemon; on failure returns false with *error set.
bool gather(neuron_client *client, Report *report, std::string *error);

// The JSON document of `neuron-ls -j` (schema in tools/neuron-ls/README.md).
nlohmann::json to_json(const Report &report);

// "0-3", "0,2,5-7": core ids of a mask.
std::string core_ranges(uint32_t mask);
// 96 GB style sizes (GiB, as the AWS tool prints them).
std::string memory_size(uint64_t bytes);

} // namespace neuron::ls
