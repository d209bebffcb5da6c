// The ring's targeted waits (<neuron/ring.h>, "Targeted waits"): a sleeper that
// waits for completed >= T registers T in wake_at, the consumer wakes sleepers only
// when a completion reaches it (and on faults), and no wake-up is lost when
// sleepers with different targets come and go while commands complete.
#include <neuron/ring.hpp>

#include <criterion/criterion.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <thread>
#include <vector>

using neuron::ring::Consumer;
using neuron::ring::Producer;

namespace {

constexpr uint32_t kSlots = 16;
// Long enough that a sleeper still asleep at the end of a slice means its wake-up
// was lost (still_there() runs only then).
constexpr int64_t kSlice = 10'000'000'000;

struct Ring {
	std::unique_ptr<std::byte[]> mem{new std::byte[neuron::ring::bytes_for(kSlots)]()};
	Consumer consumer{mem.get(), kSlots};
	Producer producer{mem.get(), kSlots};
	neuron_ring_header *h = consumer.header();
	Ring() { consumer.init(7); }
	uint32_t target_waiters() const { return std::atomic_ref<uint32_t>(h->target_waiters).load(); }
	uint32_t waiters() const { return std::atomic_ref<uint32_t>(h->waiters).load(); }
	uint64_t wake_at() const { return std::atomic_ref<uint64_t>(h->wake_at).load(); }
};

// Polls until cond() holds (the criterion test timeout bounds it).
template <class Cond>
void until(Cond cond)
{
	while (!cond())
		std::this_thread::sleep_for(std::chrono::microseconds(200));
}

struct Sleeper {
	std::atomic<bool> done{false}, slice_expired{false};
	Producer::Wait result{};
	std::thread t;
	Sleeper(const Producer &p, uint64_t target)
		: t([this, &p, target] {
			  result = p.wait(target, -1, 0, kSlice, [this] {
				  slice_expired = true;
				  return true;
			  });
			  done = true;
		  })
	{
	}
	void join()
	{
		t.join();
		cr_assert_not(slice_expired.load(), "the sleeper's wake-up was lost (its slice expired)");
	}
};

} // namespace

Test(ring_wait, a_fresh_ring_offers_targeted_waits_with_none_registered)
{
	Ring r;
	cr_assert(r.producer.has_targeted_waits());
	cr_assert_eq(r.wake_at(), UINT64_MAX);
	cr_assert_eq(r.target_waiters(), 0u);
}

Test(ring_wait, a_sleeper_is_woken_at_its_target_not_before, .timeout = 60)
{
	Ring r;
	Sleeper s(r.producer, 10);
	until([&] { return r.target_waiters() == 1 && r.wake_at() == 10; });
	for (uint64_t d = 1; d < 10; ++d) {
		r.consumer.publish_completed(d);
		// Not reached: the registration stays (a wake-up would have reset it to none).
		cr_assert_eq(r.wake_at(), 10u, "completion %llu reset the target", (unsigned long long)d);
		cr_assert_not(s.done.load());
	}
	r.consumer.publish_completed(10);
	s.join();
	cr_assert_eq(s.result, Producer::Wait::Reached);
	cr_assert_eq(r.wake_at(), UINT64_MAX);
	cr_assert_eq(r.target_waiters(), 0u);
	cr_assert_eq(r.waiters(), 0u);
}

Test(ring_wait, two_sleepers_each_woken_at_their_own_target, .timeout = 60)
{
	Ring r;
	Sleeper late(r.producer, 12);
	until([&] { return r.wake_at() == 12; });
	Sleeper early(r.producer, 5);
	until([&] { return r.target_waiters() == 2 && r.wake_at() == 5; });
	for (uint64_t d = 1; d <= 5; ++d)
		r.consumer.publish_completed(d);
	early.join();
	cr_assert_eq(early.result, Producer::Wait::Reached);
	// The later sleeper was woken too and registered its own target again.
	until([&] { return r.target_waiters() == 1 && r.wake_at() == 12; });
	cr_assert_not(late.done.load());
	for (uint64_t d = 6; d <= 12; ++d)
		r.consumer.publish_completed(d);
	late.join();
	cr_assert_eq(late.result, Producer::Wait::Reached);
}

Test(ring_wait, a_fault_wakes_targeted_sleepers, .timeout = 60)
{
	Ring r;
	Sleeper s(r.producer, 100);
	until([&] { return r.target_waiters() == 1; });
	r.consumer.publish_completed(2);
	r.consumer.publish_fault(NEURON_FAULT_BAD_OPERAND, 3, 0, "test fault");
	s.join();
	cr_assert_eq(s.result, Producer::Wait::Faulted);
}

// A daemon without targeted waits (features 0): the sleeper counts itself in
// waiters, which the consumer wakes at every completion.
Test(ring_wait, without_the_feature_a_sleeper_waits_as_before, .timeout = 60)
{
	Ring r;
	r.h->features = 0;
	Sleeper s(r.producer, 3);
	until([&] { return r.waiters() == 1; });
	cr_assert_eq(r.target_waiters(), 0u);
	cr_assert_eq(r.wake_at(), UINT64_MAX);
	for (uint64_t d = 1; d <= 3; ++d)
		r.consumer.publish_completed(d);
	s.join();
	cr_assert_eq(s.result, Producer::Wait::Reached);
	cr_assert_eq(r.waiters(), 0u);
}

// Sleepers with targets a few commands ahead, registering and leaving while the
// consumer completes commands as fast as it can: every wait returns with its
// target reached, none sleeps through its slice (a lost wake-up).
Test(ring_wait, no_wake_up_is_lost_under_concurrent_completions, .timeout = 120)
{
	Ring r;
	constexpr int kSleepers = 3, kWaits = 3000;
	std::atomic<int> finished{0};
	std::atomic<bool> lost{false}, early{false};
	std::vector<std::thread> sleepers;
	for (int i = 0; i < kSleepers; ++i)
		sleepers.emplace_back([&, i] {
			std::mt19937 rng(i + 1);
			for (int w = 0; w < kWaits; ++w) {
				const uint64_t target = r.producer.completed() + 1 + rng() % 8;
				const auto res = r.producer.wait(target, -1, rng() % 2 ? 0 : 2000, kSlice, [&] {
					lost = true;
					return true;
				});
				if (res != Producer::Wait::Reached || r.producer.completed() < target)
					early = true;
			}
			finished.fetch_add(1);
		});
	std::thread consumer([&] {
		uint64_t done = 0;
		while (finished.load() < kSleepers) {
			r.consumer.publish_completed(++done);
			if (done % 4 == 0)
				std::this_thread::yield();
		}
	});
	for (auto &t : sleepers)
		t.join();
	consumer.join();
	cr_assert_not(lost.load(), "a sleeper slept through its slice: a wake-up was lost");
	cr_assert_not(early.load(), "a wait returned before its target");
	cr_assert_eq(r.target_waiters(), 0u);
}
