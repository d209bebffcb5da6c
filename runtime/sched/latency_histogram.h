// A lock-free latency histogram: log-linear buckets (4 per power of two) over
// nanoseconds, so percentiles are within about 19 % anywhere from 1 ns to minutes.
//
// Written by engine threads (record), read by anyone (snapshot): counts are
// relaxed atomics, a snapshot is approximate while records race with it, which is
// fine for telemetry.
#pragma once

#include <array>
#include <atomic>
#include <bit>
#include <cstdint>

namespace neuron::sched {

class LatencyHistogram {
public:
	static constexpr int kBuckets = 64 * 4;
	using Counts = std::array<uint64_t, kBuckets>;

	static int bucket(uint64_t ns)
	{
		if (ns < 4)
			return static_cast<int>(ns);
		const int msb = 63 - std::countl_zero(ns);
		return msb * 4 + static_cast<int>((ns >> (msb - 2)) & 3);
	}
	// A value inside bucket b (its midpoint).
	static uint64_t value(int b)
	{
		if (b < 4)
			return static_cast<uint64_t>(b);
		const int msb = b / 4;
		const uint64_t lo = (1ull << msb) | (uint64_t(b % 4) << (msb - 2));
		return lo + (1ull << (msb - 2)) / 2;
	}

	void record(uint64_t ns) { counts_[bucket(ns)].fetch_add(1, std::memory_order_relaxed); }

	Counts snapshot() const
	{
		Counts c{};
		for (int i = 0; i < kBuckets; ++i)
			c[i] = counts_[i].load(std::memory_order_relaxed);
		return c;
	}

	// Percentile q in [0, 1] of counts (0 when empty).
	static uint64_t percentile(const Counts &c, double q)
	{
		uint64_t total = 0;
		for (uint64_t v : c)
			total += v;
		if (total == 0)
			return 0;
		const uint64_t rank = static_cast<uint64_t>(q * double(total - 1)) + 1;
		uint64_t seen = 0;
		for (int i = 0; i < kBuckets; ++i) {
			seen += c[i];
			if (seen >= rank)
				return value(i);
		}
		return value(kBuckets - 1);
	}

private:
	std::array<std::atomic<uint64_t>, kBuckets> counts_{};
};

} // namespace neuron::sched
