// Order statistics for the benchmark programs.
#pragma once

#include <algorithm>
#include <vector>

namespace bench {

inline double percentile(std::vector<double> v, double q)
{
	if (v.empty())
		return 0.0;
	std::sort(v.begin(), v.end());
	const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * double(v.size() - 1) + 0.5));
	return v[i];
}

inline double median(const std::vector<double> &v) { return percentile(v, 0.5); }

} // namespace bench
