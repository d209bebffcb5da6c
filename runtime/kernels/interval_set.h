// A union of half-open intervals [lo, hi), kept as disjoint, merged intervals
// keyed by their start: what a range of bytes has covered so far. Used where
// validation reasons about which bytes earlier steps wrote (program/rerun_reads,
// tile/independence).
#pragma once

#include <algorithm>
#include <iterator>
#include <map>

namespace neuron::kernels {

template <class T> class IntervalSet {
public:
	void add(T lo, T hi)
	{
		if (!(lo < hi))
			return;
		auto it = spans_.upper_bound(lo);
		if (it != spans_.begin() && std::prev(it)->second >= lo) {
			--it;
			lo = it->first;
			hi = std::max(hi, it->second);
			it = spans_.erase(it);
		}
		while (it != spans_.end() && it->first <= hi) {
			hi = std::max(hi, it->second);
			it = spans_.erase(it);
		}
		spans_.emplace(lo, hi);
	}

	// Every point of [lo, hi) lies in the set (true for an empty range).
	bool contains(T lo, T hi) const
	{
		if (!(lo < hi))
			return true;
		auto it = spans_.upper_bound(lo);
		return it != spans_.begin() && std::prev(it)->second >= hi;
	}

	// Some point of [lo, hi) lies in the set.
	bool meets(T lo, T hi) const
	{
		auto it = spans_.upper_bound(lo);
		if (it != spans_.end() && it->first < hi)
			return true;
		return it != spans_.begin() && std::prev(it)->second > lo;
	}

private:
	std::map<T, T> spans_;
};

} // namespace neuron::kernels
