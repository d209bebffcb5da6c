// HBM allocator edge cases, checked against a shadow model of which bytes are used.
#include <chip/hbm_allocator.h>

#include <criterion/criterion.h>

#include <algorithm>
#include <random>
#include <vector>

using neuron::chip::HbmAllocator;

static constexpr uint64_t kBase = 1ull << 44;
static constexpr uint64_t MiB = 1ull << 20;

Test(hbm_allocator, zero_size_is_refused_with_reason)
{
	HbmAllocator a(kBase, 64 * MiB);
	std::string why;
	cr_assert(!a.allocate(0, 0, &why));
	cr_assert(why.find("zero") != std::string::npos, "reason: %s", why.c_str());
}

Test(hbm_allocator, huge_request_is_refused_and_names_sizes)
{
	HbmAllocator a(kBase, 64 * MiB);
	std::string why;
	cr_assert(!a.allocate(~0ull - 4096, 0, &why));
	cr_assert(!a.allocate(64 * MiB + 1, 0, &why));
	cr_assert(why.find("67108864") != std::string::npos, "reason: %s", why.c_str());
	cr_assert_eq(a.stats().used_bytes, 0);
}

Test(hbm_allocator, whole_device_fits_exactly_once)
{
	HbmAllocator a(kBase, 64 * MiB);
	std::string why;
	auto p = a.allocate(64 * MiB, 0, &why);
	cr_assert(p.has_value());
	cr_assert_eq(*p, kBase);
	cr_assert(!a.allocate(1, 0, &why));
	cr_assert(why.find("out of device memory") != std::string::npos);
	cr_assert(a.release(*p));
	cr_assert_eq(a.stats().free_blocks, 1);
}

Test(hbm_allocator, alignment_is_honoured_and_validated)
{
	HbmAllocator a(kBase, 64 * MiB);
	std::string why;
	cr_assert(!a.allocate(100, 3000, &why));
	cr_assert(why.find("power of two") != std::string::npos);
	auto small = a.allocate(100, 0, &why); // occupies the start: the next one must skip ahead
	cr_assert(small.has_value());
	cr_assert_eq(*small % HbmAllocator::kGranule, 0);
	for (uint64_t align : {512ull, 4096ull, 1ull << 20, 16ull << 20}) {
		auto p = a.allocate(1000, align, &why);
		cr_assert(p.has_value(), "align %llu: %s", (unsigned long long)align, why.c_str());
		cr_assert_eq(*p % align, 0, "address %llx not aligned to %llu", (unsigned long long)*p,
			     (unsigned long long)align);
	}
	// Padding created by alignment stays allocatable.
	auto fill = a.allocate(256, 0, &why);
	cr_assert(fill.has_value());
	cr_assert_lt(*fill, kBase + (1ull << 20));
}

Test(hbm_allocator, sizes_round_to_granule)
{
	HbmAllocator a(kBase, 64 * MiB);
	std::string why;
	auto p = a.allocate(1, 0, &why);
	cr_assert_eq(a.allocation_size(*p), HbmAllocator::kGranule);
	cr_assert_eq(a.stats().used_bytes, HbmAllocator::kGranule);
	cr_assert(!a.release(*p + 1), "only the start address frees");
	cr_assert(a.release(*p));
	cr_assert(!a.release(*p), "double free is refused");
}

Test(hbm_allocator, exhaustion_then_recovery)
{
	HbmAllocator a(kBase, 16 * MiB);
	std::string why;
	std::vector<uint64_t> blocks;
	while (auto p = a.allocate(MiB, 0, &why))
		blocks.push_back(*p);
	cr_assert_eq(blocks.size(), 16);
	cr_assert_eq(a.stats().free_bytes, 0);
	for (uint64_t p : blocks)
		cr_assert(a.release(p));
	auto all = a.allocate(16 * MiB, 0, &why);
	cr_assert(all.has_value(), "after freeing everything the whole device is one block again");
}

Test(hbm_allocator, fragmentation_then_coalescing)
{
	HbmAllocator a(kBase, 32 * MiB);
	std::string why;
	std::vector<uint64_t> blocks;
	for (int i = 0; i < 32; ++i)
		blocks.push_back(*a.allocate(MiB, 0, &why));
	for (size_t i = 0; i < blocks.size(); i += 2)
		a.release(blocks[i]);
	auto s = a.stats();
	cr_assert_eq(s.free_bytes, 16 * MiB);
	cr_assert_eq(s.largest_free_bytes, MiB);
	cr_assert_eq(s.free_blocks, 16);
	cr_assert_float_eq(s.fragmentation(), 1.0 - 1.0 / 16, 1e-9);
	cr_assert(!a.allocate(2 * MiB, 0, &why), "16 MiB free but no 2 MiB hole");
	for (size_t i = 1; i < blocks.size(); i += 2)
		a.release(blocks[i]);
	s = a.stats();
	cr_assert_eq(s.free_blocks, 1);
	cr_assert_float_eq(s.fragmentation(), 0.0, 1e-12);
	cr_assert(a.allocate(32 * MiB, 0, &why).has_value());
}

Test(hbm_allocator, best_fit_prefers_the_smallest_hole)
{
	HbmAllocator a(kBase, 32 * MiB);
	std::string why;
	auto a1 = *a.allocate(4 * MiB, 0, &why);
	auto sep1 = *a.allocate(MiB, 0, &why);
	auto a2 = *a.allocate(MiB, 0, &why);
	auto sep2 = *a.allocate(MiB, 0, &why);
	(void)sep1, (void)sep2;
	a.release(a1);
	a.release(a2);
	auto p = a.allocate(MiB, 0, &why);
	cr_assert_eq(*p, a2, "a 1 MiB request goes to the 1 MiB hole, not the 4 MiB one");
}

// Random alloc/free against a byte-level shadow: no two live blocks overlap, all
// stay in range, and the used count matches.
Test(hbm_allocator, random_churn_matches_shadow_model)
{
	const uint64_t size = 8 * MiB;
	HbmAllocator a(kBase, size);
	std::mt19937_64 rng(42);
	std::vector<std::pair<uint64_t, uint64_t>> live;
	std::string why;
	for (int step = 0; step < 20000; ++step) {
		if (live.empty() || rng() % 3 != 0) {
			uint64_t want = 1 + rng() % (256 * 1024);
			uint64_t align = 1ull << (rng() % 14);
			if (auto p = a.allocate(want, align, &why)) {
				cr_assert_eq(*p % std::max<uint64_t>(align, 256), 0);
				cr_assert_geq(*p, kBase);
				cr_assert_leq(*p + want, kBase + size);
				live.push_back({*p, a.allocation_size(*p)});
			}
		} else {
			size_t i = rng() % live.size();
			cr_assert(a.release(live[i].first));
			live[i] = live.back();
			live.pop_back();
		}
	}
	std::sort(live.begin(), live.end());
	uint64_t used = 0;
	for (size_t i = 0; i < live.size(); ++i) {
		used += live[i].second;
		if (i)
			cr_assert_leq(live[i - 1].first + live[i - 1].second, live[i].first, "blocks overlap");
	}
	cr_assert_eq(a.stats().used_bytes, used);
	cr_assert_eq(a.stats().allocations, live.size());
}

// Restart survival: a new neurond reserves the allocations the earlier one made, at
// their addresses; whatever overlaps them, or lies outside, is refused; new
// allocations avoid them; freeing them coalesces as usual.
Test(hbm_allocator, reserve_restores_kept_allocations)
{
	HbmAllocator a(kBase, 64 * MiB);
	std::string why;
	cr_assert(a.reserve(kBase + 8 * MiB, 3 * MiB + 1, &why), "%s", why.c_str());
	cr_assert(a.reserve(kBase, 256, &why), "%s", why.c_str());
	cr_assert_eq(a.allocation_size(kBase + 8 * MiB), 3 * MiB + 256, "rounded to the granule");
	cr_assert(!a.reserve(kBase + 10 * MiB, 4 * MiB, &why), "overlapping a reserved range");
	cr_assert(why.find("not free") != std::string::npos, "reason: %s", why.c_str());
	cr_assert(!a.reserve(kBase + 63 * MiB, 2 * MiB, &why), "past the end");
	cr_assert(!a.reserve(kBase + 100, 256, &why), "not granule-aligned");
	for (int i = 0; i < 40; ++i) {
		auto p = a.allocate(MiB, 0, &why);
		if (!p)
			break;
		cr_assert(*p + MiB <= kBase + 8 * MiB || *p >= kBase + 11 * MiB + 256, "allocation %d at %llu overlaps a reserved one",
			  i, (unsigned long long)(*p - kBase));
		cr_assert(*p >= kBase + 256, "allocation %d overlaps the first reserved granule", i);
	}
	const uint64_t before = a.stats().allocations;
	cr_assert(a.release(kBase + 8 * MiB));
	cr_assert(a.release(kBase));
	cr_assert_eq(a.stats().allocations, before - 2);
}
