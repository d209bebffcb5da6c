// TileCursor: chains are handed out whole, parked chains resume where they stopped,
// and with several threads claiming, running and parking at random, every tile runs
// exactly once and each chain's tiles run in order, never on two threads at once.
#include <sched/tile_cursor.h>

#include <criterion/criterion.h>

#include <atomic>
#include <random>
#include <thread>
#include <vector>

using neuron::sched::TileCursor;

Test(tile_cursor, chains_are_claimed_once_and_parked_chains_resume_first)
{
	TileCursor c;
	c.reset(12, 4); // chains 0, 1, 2 of 4 tiles
	cr_assert_eq(c.claimable(), 3u);
	auto a = c.claim(), b = c.claim(), d = c.claim();
	cr_assert(a && b && d);
	cr_assert_eq(a->chain, 0u);
	cr_assert_eq(b->chain, 1u);
	cr_assert_eq(d->chain, 2u);
	cr_assert_eq(c.tile_index(*d), 8u, "chain 2 starts at tile 8");
	cr_assert(!c.claim(), "all chains are out");
	b->next = 2; // chain 1 stopped after two tiles
	c.park(*b);
	cr_assert_eq(c.claimable(), 1u);
	auto r = c.claim();
	cr_assert(r && r->chain == 1 && r->next == 2, "the parked chain resumes at its next tile");
	cr_assert_eq(c.tile_index(*r), 6u);
	c.finish();
	c.finish();
	cr_assert(!c.done(), "one chain still out");
	c.finish();
	cr_assert(c.done());
}

Test(tile_cursor, tiles_without_chains_are_chains_of_one)
{
	TileCursor c;
	c.reset(5, 1);
	for (uint64_t i = 0; i < 5; ++i) {
		auto k = c.claim();
		cr_assert(k && c.tile_index(*k) == i);
		c.finish();
	}
	cr_assert(!c.claim());
	cr_assert(c.done());
}

Test(tile_cursor, concurrent_claims_run_every_tile_once_in_chain_order)
{
	constexpr uint64_t kChains = 64, kLen = 7;
	TileCursor c;
	c.reset(kChains * kLen, kLen);
	std::vector<std::atomic<int>> runs(kChains * kLen);
	std::vector<std::atomic<int>> busy(kChains); // threads inside each chain right now
	std::atomic<bool> bad{false};
	auto worker = [&](unsigned seed) {
		std::mt19937 rng(seed);
		for (;;) {
			auto k = c.claim();
			if (!k)
				return;
			if (busy[k->chain].fetch_add(1) != 0)
				bad = true; // a chain on two threads at once
			// Run a random number of its tiles, then park it or finish it.
			const uint64_t stop = k->next + 1 + rng() % kLen;
			for (; k->next < kLen && k->next < stop; ++k->next) {
				const uint64_t t = c.tile_index(*k);
				if (k->next > 0 && runs[t - 1].load() != 1)
					bad = true; // the tile before it has not run
				runs[t].fetch_add(1);
			}
			busy[k->chain].fetch_sub(1);
			if (k->next == kLen)
				c.finish();
			else
				c.park(*k);
		}
	};
	std::vector<std::thread> threads;
	for (unsigned i = 0; i < 4; ++i)
		threads.emplace_back(worker, i + 1);
	for (auto &t : threads)
		t.join();
	cr_assert(!bad, "a chain ran on two threads at once or out of order");
	for (size_t i = 0; i < runs.size(); ++i)
		cr_assert_eq(runs[i].load(), 1, "tile %zu ran %d times", i, runs[i].load());
	cr_assert(c.done());
}
