#include "tile_job.h"

#include <cstring>
#include <string>

namespace neuron::kmd {

sched::TileBudget TileJobEntry::budget() const
{
	sched::TileBudget b;
	b.matmul_macs = matmul_macs;
	b.elements = elements;
	b.transcendental_elements = transcendental_elements;
	b.chain_partials = (flags & kChainPartials) != 0;
	return b;
}

std::vector<std::byte> TileJobWriter::bytes() const
{
	TileJobHeader h = header_;
	h.count = static_cast<uint32_t>(entries_.size());
	std::vector<std::byte> out(sizeof(h) + entries_.size() * sizeof(TileJobEntry));
	std::memcpy(out.data(), &h, sizeof(h));
	if (!entries_.empty())
		std::memcpy(out.data() + sizeof(h), entries_.data(), entries_.size() * sizeof(TileJobEntry));
	return out;
}

bool read_tile_job(std::span<const std::byte> payload, TileJobHeader *header, std::vector<TileJobEntry> *entries,
		   std::string *why)
{
	entries->clear();
	uint32_t magic = 0;
	if (payload.size() >= sizeof(magic))
		std::memcpy(&magic, payload.data(), sizeof(magic));
	if (magic == kTileJobMagic) {
		if (payload.size() < sizeof(TileJobHeader)) {
			*why = "tile job payload of " + std::to_string(payload.size()) + " bytes is shorter than its header";
			return false;
		}
		std::memcpy(header, payload.data(), sizeof(*header));
		const size_t body = payload.size() - sizeof(TileJobHeader);
		if (header->count == 0 || header->reserved != 0 || body != size_t(header->count) * sizeof(TileJobEntry)) {
			*why = "tile job header says " + std::to_string(header->count) + " entries, the payload holds " +
			       std::to_string(body) + " bytes after it (" + std::to_string(sizeof(TileJobEntry)) +
			       " per entry; reserved must be 0)";
			return false;
		}
		entries->resize(header->count);
		std::memcpy(entries->data(), payload.data() + sizeof(TileJobHeader), body);
		return true;
	}
	if (payload.empty() || payload.size() % sizeof(neuron_cmd)) {
		*why = "job payload of " + std::to_string(payload.size()) + " bytes is neither a tile job nor a whole number of " +
		       std::to_string(sizeof(neuron_cmd)) + "-byte commands";
		return false;
	}
	*header = TileJobHeader{};
	const size_t n = payload.size() / sizeof(neuron_cmd);
	entries->resize(n);
	for (size_t i = 0; i < n; ++i)
		std::memcpy(&(*entries)[i].cmd, payload.data() + i * sizeof(neuron_cmd), sizeof(neuron_cmd));
	return true;
}

} // namespace neuron::kmd
