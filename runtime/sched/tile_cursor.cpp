#include "tile_cursor.h"

#include <algorithm>

namespace neuron::sched {

void TileCursor::reset(uint64_t tiles, uint64_t chain_length)
{
	std::lock_guard lock(mutex_);
	chain_length_ = std::max<uint64_t>(chain_length, 1);
	chains_ = tiles / chain_length_;
	next_chain_ = 0;
	finished_ = 0;
	parked_.clear();
}

std::optional<TileCursor::Claim> TileCursor::claim()
{
	std::lock_guard lock(mutex_);
	if (!parked_.empty()) {
		// Lowest chain first: chains then finish roughly in output order.
		auto it = std::min_element(parked_.begin(), parked_.end(),
					   [](const Claim &a, const Claim &b) { return a.chain < b.chain; });
		const Claim c = *it;
		parked_.erase(it);
		return c;
	}
	if (next_chain_ < chains_)
		return Claim{next_chain_++, 0};
	return std::nullopt;
}

void TileCursor::park(const Claim &c)
{
	std::lock_guard lock(mutex_);
	parked_.push_back(c);
}

void TileCursor::finish()
{
	std::lock_guard lock(mutex_);
	++finished_;
}

bool TileCursor::done() const
{
	std::lock_guard lock(mutex_);
	return finished_ == chains_;
}

uint64_t TileCursor::claimable() const
{
	std::lock_guard lock(mutex_);
	return parked_.size() + (chains_ - next_chain_);
}

} // namespace neuron::sched
