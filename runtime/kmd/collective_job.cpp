#include "collective_job.h"

#include <cstring>

namespace neuron::kmd {

std::vector<std::byte> collective_job_bytes(const CollectiveJobHeader &h, std::span<const uint64_t> srcs)
{
	std::vector<std::byte> out(sizeof(h) + srcs.size_bytes());
	CollectiveJobHeader head = h;
	head.magic = kCollectiveJobMagic;
	head.sources = static_cast<uint16_t>(srcs.size());
	std::memcpy(out.data(), &head, sizeof(head));
	if (!srcs.empty())
		std::memcpy(out.data() + sizeof(head), srcs.data(), srcs.size_bytes());
	return out;
}

bool is_collective_job(std::span<const std::byte> payload)
{
	uint32_t magic = 0;
	if (payload.size() >= sizeof(magic))
		std::memcpy(&magic, payload.data(), sizeof(magic));
	return magic == kCollectiveJobMagic;
}

bool read_collective_job(std::span<const std::byte> payload, CollectiveJobHeader *h, std::vector<uint64_t> *srcs,
			 std::string *why)
{
	if (payload.size() < sizeof(*h)) {
		*why = "collective job payload of " + std::to_string(payload.size()) + " bytes is shorter than its header";
		return false;
	}
	std::memcpy(h, payload.data(), sizeof(*h));
	if (h->sources < 1 || h->sources > kMaxCollectiveSources ||
	    payload.size() != sizeof(*h) + size_t(h->sources) * sizeof(uint64_t)) {
		*why = "collective job header says " + std::to_string(h->sources) + " sources (1.." +
		       std::to_string(kMaxCollectiveSources) + "), the payload holds " +
		       std::to_string(payload.size() - sizeof(*h)) + " bytes of addresses";
		return false;
	}
	const uint64_t es = kernels::collective_element_bytes(h->dtype);
	if (es == 0) {
		*why = "collective job dtype " + std::to_string(h->dtype) + " is not one collectives take";
		return false;
	}
	if (h->op > static_cast<uint8_t>(kernels::CollectiveReduce::Product)) {
		*why = "collective job reduce op " + std::to_string(h->op) + " is unknown";
		return false;
	}
	if (h->count == 0 || h->count > (uint64_t(1) << 40)) {
		*why = "collective job count " + std::to_string(h->count) + " is outside 1..2^40";
		return false;
	}
	srcs->resize(h->sources);
	std::memcpy(srcs->data(), payload.data() + sizeof(*h), size_t(h->sources) * sizeof(uint64_t));
	// The kernel reads every source of an element before it writes it only for
	// half types; otherwise it folds into dst source by source, so dst may be the
	// first source (it is read first) and must not overlap any other.
	const uint64_t bytes = h->count * es;
	for (uint32_t i = 0; i < h->sources; ++i) {
		const uint64_t s = (*srcs)[i];
		if (i == 0 && s == h->dst)
			continue;
		if (s < h->dst + bytes && h->dst < s + bytes && s + bytes > s && h->dst + bytes > h->dst) {
			*why = "collective job destination overlaps source " + std::to_string(i) +
			       " (only the first source may be the destination, at the same address)";
			return false;
		}
	}
	return true;
}

} // namespace neuron::kmd
