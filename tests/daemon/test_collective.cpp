// Collective groups in neurond (issue 16, contracts/neuron.proto CollectiveJoin):
// the rendezvous checks the secret and the member's identity, collectives move and
// reduce device memory between tenants, and a missing or departed rank is named in
// the error the others get by the timeout. The ranks here are tenants of this one
// process (threads), each with its own channel connection.
#include "daemon_test.h"

#include <neuron/p2p_sources.h>

#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using namespace dt;

namespace {

const char kSecret[] = "0123456789abcdef-secret";
constexpr uint32_t kTimeoutMs = 2000;

struct Rank {
	Tenant t;
	neuron_client *channel = nullptr;
	uint64_t group = 0;
	void open(const char *name, uint32_t device = 0)
	{
		t.open(name, device);
		neuron_connect_options o{g_daemon->socket_path().c_str(), "channel", 0, 1};
		NEURON_OK_OR_FAIL(neuron_connect(&o, &channel));
	}
	void close()
	{
		if (channel)
			neuron_disconnect(channel);
		channel = nullptr;
		t.close();
	}
};

neuron_status join(Rank &r, const char *group, const char *secret, uint32_t rank, uint32_t world)
{
	return neuron_group_join(r.channel, neuron_tenant_id(r.t.client), group, secret, std::strlen(secret), rank,
				 world, kTimeoutMs, &r.group);
}

// Both ranks join group `name` (rank 1 on a thread: a join waits for the other).
void join_both(Rank &a, Rank &b, const char *name)
{
	neuron_status sb = NEURON_OK;
	std::string eb;
	std::thread other([&] {
		sb = join(b, name, kSecret, 1, 2);
		eb = neuron_last_error();
	});
	NEURON_OK_OR_FAIL(join(a, name, kSecret, 0, 2));
	other.join();
	cr_assert(sb == NEURON_OK, "rank 1's join: %s", eb.c_str());
	cr_assert(a.group == b.group);
}

neuron_collective all_reduce(uint64_t buf, uint64_t count, uint32_t reduce = NEURON_REDUCE_SUM)
{
	neuron_collective c{};
	c.op = NEURON_COLL_ALL_REDUCE;
	c.reduce = reduce;
	c.dtype = NEURON_DTYPE_F32;
	c.count = count;
	c.input = c.output = buf;
	return c;
}

} // namespace

TestSuite(collective, .init = daemon_up, .fini = daemon_down, .timeout = 120);

DAEMON_TEST(collective, all_reduce_and_all_gather_move_device_memory)
{
	Rank a, b;
	a.open("rank0");
	b.open("rank1");
	join_both(a, b, "g-sum");
	const size_t n = 1000;
	const auto va = random_f32(n, 1), vb = random_f32(n, 2);
	const uint64_t da = dev_alloc(a.t.client, n * 4), db = dev_alloc(b.t.client, n * 4);
	upload_f32(a.t.dma, da, va);
	upload_f32(b.t.dma, db, vb);
	neuron_status sb = NEURON_OK;
	std::thread other([&] {
		auto c = all_reduce(db, n, NEURON_REDUCE_MAX);
		sb = neuron_group_run(b.channel, b.group, 0, &c);
	});
	auto c = all_reduce(da, n, NEURON_REDUCE_MAX);
	NEURON_OK_OR_FAIL(neuron_group_run(a.channel, a.group, 0, &c));
	other.join();
	cr_assert(sb == NEURON_OK);
	std::vector<double> ref(n);
	for (size_t i = 0; i < n; ++i)
		ref[i] = std::max(va[i], vb[i]);
	expect_close(download_f32(a.t.dma, da, n), ref, 0, 0, "rank 0 max");
	expect_close(download_f32(b.t.dma, db, n), ref, 0, 0, "rank 1 max");

	// all_gather into a buffer twice the size, at seq 1.
	const uint64_t ga = dev_alloc(a.t.client, 2 * n * 4), gb = dev_alloc(b.t.client, 2 * n * 4);
	std::thread other2([&] {
		neuron_collective g{NEURON_COLL_ALL_GATHER, 0, NEURON_DTYPE_F32, 0, 0, 0, n, db, gb};
		sb = neuron_group_run(b.channel, b.group, 1, &g);
	});
	neuron_collective g{NEURON_COLL_ALL_GATHER, 0, NEURON_DTYPE_F32, 0, 0, 0, n, da, ga};
	NEURON_OK_OR_FAIL(neuron_group_run(a.channel, a.group, 1, &g));
	other2.join();
	cr_assert(sb == NEURON_OK);
	std::vector<double> both(ref.begin(), ref.end());
	both.insert(both.end(), ref.begin(), ref.end());
	expect_close(download_f32(b.t.dma, gb, 2 * n), both, 0, 0, "rank 1 all_gather");
	a.close();
	b.close();
}

// An all_reduce of several 256 KiB chunks (neurond copies each reduced chunk to the
// other ranks' outputs at once): rank 0 in place, rank 1 into an output that overlaps
// its own input 16 elements further on (each chunk copied at once would overwrite
// input rank 1 has not sent yet: neurond must copy after the whole reduction).
DAEMON_TEST(collective, multi_chunk_all_reduce_in_place_and_overlapping)
{
	Rank a, b;
	a.open("rank0");
	b.open("rank1");
	join_both(a, b, "g-chunks");
	const size_t n = 200'000, shift = 16;
	const auto va = random_f32(n, 3), vb = random_f32(n, 4);
	const uint64_t da = dev_alloc(a.t.client, n * 4), db = dev_alloc(b.t.client, (n + shift) * 4);
	upload_f32(a.t.dma, da, va);
	upload_f32(b.t.dma, db, vb);
	neuron_status sb = NEURON_OK;
	std::thread other([&] {
		auto c = all_reduce(db, n);
		c.output = db + shift * 4;
		sb = neuron_group_run(b.channel, b.group, 0, &c);
	});
	auto c = all_reduce(da, n);
	NEURON_OK_OR_FAIL(neuron_group_run(a.channel, a.group, 0, &c));
	other.join();
	cr_assert(sb == NEURON_OK, "rank 1: %s", describe(sb).c_str());
	std::vector<double> ref(n);
	for (size_t i = 0; i < n; ++i)
		ref[i] = static_cast<double>(va[i] + vb[i]); // one f32 add, as the chip's
	expect_close(download_f32(a.t.dma, da, n), ref, 0, 0, "rank 0, in place");
	expect_close(download_f32(b.t.dma, db + shift * 4, n), ref, 0, 0, "rank 1, overlapping output");
	a.close();
	b.close();
}

DAEMON_TEST(collective, wrong_secret_is_refused)
{
	Rank a, b;
	a.open("rank0");
	b.open("rank1");
	neuron_status sa = NEURON_OK;
	std::thread first([&] { sa = join(a, "g-secret", kSecret, 0, 2); });
	sleep_ms(200);
	const neuron_status sb = join(b, "g-secret", "another-secret-of-16+", 1, 2);
	cr_assert(sb == NEURON_ERR_PERMISSION, "a wrong secret gave %s", describe(sb).c_str());
	cr_assert(std::strstr(neuron_last_error(), "wrong secret"), "%s", neuron_last_error());
	first.join(); // rank 0 times out: rank 1 never joined
	cr_assert(sa == NEURON_ERR_TIMEOUT, "rank 0's join gave %s", describe(sa).c_str());
	a.close();
	b.close();
}

DAEMON_TEST(collective, joining_for_another_tenant_is_refused)
{
	Rank a;
	a.open("rank0");
	// An id that is not a tenant of this process (the channel's own id is an observer).
	const neuron_status s = neuron_group_join(a.channel, neuron_tenant_id(a.channel), "g-id", kSecret,
						  std::strlen(kSecret), 0, 1, kTimeoutMs, &a.group);
	cr_assert(s == NEURON_ERR_INVALID, "%s", describe(s).c_str());
	cr_assert(std::strstr(neuron_last_error(), "not a tenant of the calling process"), "%s", neuron_last_error());
	a.close();
}

DAEMON_TEST(collective, timeout_names_the_missing_rank)
{
	Rank a, b;
	a.open("rank0");
	b.open("rank1");
	join_both(a, b, "g-late");
	const uint64_t da = dev_alloc(a.t.client, 64);
	auto c = all_reduce(da, 16);
	const uint64_t t0 = now_ns();
	const neuron_status s = neuron_group_run(a.channel, a.group, 0, &c);
	cr_assert(s == NEURON_ERR_TIMEOUT, "%s", describe(s).c_str());
	cr_assert(std::strstr(neuron_last_error(), "rank(s) 1 did not arrive"), "%s", neuron_last_error());
	cr_assert(now_ns() - t0 < 20'000'000'000ull);
	// The group is broken now: rank 1 hears why at once.
	const uint64_t db = dev_alloc(b.t.client, 64);
	c = all_reduce(db, 16);
	const neuron_status s1 = neuron_group_run(b.channel, b.group, 0, &c);
	cr_assert(s1 == NEURON_ERR_ABORTED, "%s", describe(s1).c_str());
	a.close();
	b.close();
}

DAEMON_TEST(collective, a_member_that_leaves_is_named)
{
	Rank a, b;
	a.open("rank0");
	b.open("rank1");
	join_both(a, b, "g-exit");
	const uint64_t da = dev_alloc(a.t.client, 64);
	neuron_status s = NEURON_OK;
	std::string msg;
	std::thread waiter([&] {
		auto c = all_reduce(da, 16);
		s = neuron_group_run(a.channel, a.group, 0, &c);
		msg = neuron_last_error();
	});
	sleep_ms(200);
	b.close(); // as a process exit would
	waiter.join();
	cr_assert(s == NEURON_ERR_ABORTED, "%s", describe(s).c_str());
	cr_assert(msg.find("rank 1") != std::string::npos && msg.find("left") != std::string::npos, "%s", msg.c_str());
	a.close();
	// Once no member is connected, neurond frees the group (and says so in its log).
	bool freed = false;
	for (int i = 0; i < 100 && !freed; ++i, sleep_ms(50))
		freed = g_daemon->log().find("collective.free") != std::string::npos;
	cr_assert(freed, "the group was not freed; log tail:\n%s", g_daemon->log_tail().c_str());
}

DAEMON_TEST(collective, bad_operands_and_mismatches_are_refused)
{
	Rank a, b;
	a.open("rank0");
	b.open("rank1");
	join_both(a, b, "g-bad");
	const uint64_t da = dev_alloc(a.t.client, 64), db = dev_alloc(b.t.client, 64);
	// Rank 1 names more bytes than its allocation holds: nobody's data moves.
	neuron_status sb = NEURON_OK;
	std::string eb;
	std::thread other([&] {
		auto c = all_reduce(db + 32, 16);
		sb = neuron_group_run(b.channel, b.group, 0, &c);
		eb = neuron_last_error();
	});
	auto c = all_reduce(da, 16);
	const neuron_status sa = neuron_group_run(a.channel, a.group, 0, &c);
	other.join();
	cr_assert(sa == NEURON_ERR_INVALID && sb == NEURON_ERR_INVALID, "%s / %s", describe(sa).c_str(), eb.c_str());
	cr_assert(eb.find("not inside one allocation") != std::string::npos, "%s", eb.c_str());
	// Different counts at seq 1 break the group, naming both calls.
	std::thread other2([&] {
		auto c2 = all_reduce(db, 8);
		sb = neuron_group_run(b.channel, b.group, 1, &c2);
	});
	c = all_reduce(da, 16);
	const neuron_status s2 = neuron_group_run(a.channel, a.group, 1, &c);
	other2.join();
	cr_assert(s2 == NEURON_ERR_ABORTED && sb == NEURON_ERR_ABORTED, "%s", describe(s2).c_str());
	a.close();
	b.close();
}

// Point-to-point (CollectiveP2P): a batch that sends and receives at once (both
// ranks send first: no deadlock), tags pick the match whatever the posting order,
// and the bytes are the sender's.
DAEMON_TEST(collective, p2p_batches_match_by_tag)
{
	Rank a, b;
	a.open("rank0");
	b.open("rank1");
	join_both(a, b, "g-p2p");
	const size_t n = 300, m = 40;
	const auto va = random_f32(n, 3), vb = random_f32(n, 4), vt = random_f32(m, 5);
	const uint64_t sa = dev_alloc(a.t.client, n * 4), ra = dev_alloc(a.t.client, n * 4);
	const uint64_t sb = dev_alloc(b.t.client, n * 4), rb = dev_alloc(b.t.client, n * 4);
	const uint64_t ta = dev_alloc(a.t.client, m * 4), tb = dev_alloc(b.t.client, m * 4);
	upload_f32(a.t.dma, sa, va);
	upload_f32(b.t.dma, sb, vb);
	upload_f32(a.t.dma, ta, vt);
	neuron_status s1 = NEURON_OK;
	std::string e1;
	std::thread other([&] {
		// Rank 1 posts the tag-9 recv before the tag-0 one; rank 0 sends tag 0 first.
		const neuron_p2p_op ops[] = {{0, 0, NEURON_DTYPE_F32, 0, 9, m, tb},
					     {1, 0, NEURON_DTYPE_F32, 0, 0, n, sb},
					     {0, 0, NEURON_DTYPE_F32, 0, 0, n, rb}};
		s1 = neuron_group_p2p(b.channel, b.group, ops, 3);
		e1 = neuron_last_error();
	});
	const neuron_p2p_op ops[] = {{1, 1, NEURON_DTYPE_F32, 0, 0, n, sa},
				     {0, 1, NEURON_DTYPE_F32, 0, 0, n, ra},
				     {1, 1, NEURON_DTYPE_F32, 0, 9, m, ta}};
	NEURON_OK_OR_FAIL(neuron_group_p2p(a.channel, a.group, ops, 3));
	other.join();
	cr_assert(s1 == NEURON_OK, "rank 1: %s", e1.c_str());
	std::vector<double> da(va.begin(), va.end()), db(vb.begin(), vb.end()), dtag(vt.begin(), vt.end());
	expect_close(download_f32(b.t.dma, rb, n), da, 0, 0, "rank 1 got rank 0's");
	expect_close(download_f32(a.t.dma, ra, n), db, 0, 0, "rank 0 got rank 1's");
	expect_close(download_f32(b.t.dma, tb, m), dtag, 0, 0, "tag 9");
	a.close();
	b.close();
}

// A recv from any source (NEURON_P2P_ANY_SOURCE) takes the send to its rank with
// its tag whoever posted it, and neuron_group_p2p_sources names the sender; a send
// must name its receiver.
DAEMON_TEST(collective, p2p_recv_from_any_source_names_the_sender)
{
	Rank a, b;
	a.open("rank0");
	b.open("rank1");
	join_both(a, b, "g-p2p-any");
	const size_t n = 50;
	const auto va = random_f32(n, 6);
	const uint64_t sa = dev_alloc(a.t.client, n * 4), rb = dev_alloc(b.t.client, n * 4);
	upload_f32(a.t.dma, sa, va);
	neuron_status s1 = NEURON_OK;
	std::string e1;
	uint32_t source = 99;
	std::thread other([&] {
		const neuron_p2p_op r{0, NEURON_P2P_ANY_SOURCE, NEURON_DTYPE_F32, 0, 4, n, rb};
		s1 = neuron_group_p2p_sources(b.channel, b.group, &r, 1, &source);
		e1 = neuron_last_error();
	});
	const neuron_p2p_op send{1, 1, NEURON_DTYPE_F32, 0, 4, n, sa};
	NEURON_OK_OR_FAIL(neuron_group_p2p(a.channel, a.group, &send, 1));
	other.join();
	cr_assert(s1 == NEURON_OK, "rank 1: %s", e1.c_str());
	cr_assert(source == 0, "the any-source recv reports sender %u, expected 0", source);
	std::vector<double> da(va.begin(), va.end());
	expect_close(download_f32(b.t.dma, rb, n), da, 0, 0, "rank 1 got rank 0's");
	const neuron_p2p_op bad{1, NEURON_P2P_ANY_SOURCE, NEURON_DTYPE_F32, 0, 4, n, sa};
	cr_assert(neuron_group_p2p(a.channel, a.group, &bad, 1) == NEURON_ERR_INVALID, "a send to any rank was taken");
	a.close();
	b.close();
}

DAEMON_TEST(collective, p2p_size_mismatch_and_missing_peer_are_named)
{
	Rank a, b;
	a.open("rank0");
	b.open("rank1");
	join_both(a, b, "g-p2p-bad");
	const uint64_t da = dev_alloc(a.t.client, 64), db = dev_alloc(b.t.client, 64);
	neuron_status s1 = NEURON_OK;
	std::string e1;
	std::thread other([&] {
		const neuron_p2p_op r{0, 0, NEURON_DTYPE_F32, 0, 0, 16, db};
		s1 = neuron_group_p2p(b.channel, b.group, &r, 1);
		e1 = neuron_last_error();
	});
	const neuron_p2p_op s{1, 1, NEURON_DTYPE_F32, 0, 0, 8, da};
	const neuron_status s0 = neuron_group_p2p(a.channel, a.group, &s, 1);
	const std::string e0 = neuron_last_error();
	other.join();
	cr_assert(s0 == NEURON_ERR_INVALID && s1 == NEURON_ERR_INVALID, "%s / %s", e0.c_str(), e1.c_str());
	for (const std::string *e : {&e0, static_cast<const std::string *>(&e1)})
		cr_assert(e->find("expects 16 elements of f32") != std::string::npos &&
				  e->find("send has 8 elements of f32") != std::string::npos,
			  "%s", e->c_str());
	a.close();
	b.close();

	// A send nobody receives: the timeout names the peer.
	Rank c, d;
	c.open("rank0");
	d.open("rank1");
	join_both(c, d, "g-p2p-late");
	const uint64_t dc = dev_alloc(c.t.client, 64);
	const neuron_p2p_op late{1, 1, NEURON_DTYPE_F32, 0, 4, 16, dc};
	const neuron_status st = neuron_group_p2p(c.channel, c.group, &late, 1);
	cr_assert(st == NEURON_ERR_TIMEOUT, "%s", describe(st).c_str());
	cr_assert(std::strstr(neuron_last_error(), "rank 1 did not post the recv"), "%s", neuron_last_error());
	c.close();
	d.close();
}

namespace {

// `world` ranks join group `name` at once (each join waits for the others).
void join_all(std::vector<Rank> &ranks, const char *name)
{
	const uint32_t world = static_cast<uint32_t>(ranks.size());
	std::vector<neuron_status> st(world, NEURON_OK);
	std::vector<std::thread> threads;
	for (uint32_t r = 1; r < world; ++r)
		threads.emplace_back([&, r] { st[r] = join(ranks[r], name, kSecret, r, world); });
	st[0] = join(ranks[0], name, kSecret, 0, world);
	for (auto &t : threads)
		t.join();
	for (uint32_t r = 0; r < world; ++r)
		cr_assert(st[r] == NEURON_OK, "rank %u's join: %s", r, describe(st[r]).c_str());
}

// Every rank runs collective `c[r]` at `seq`; all must succeed.
void run_all(std::vector<Rank> &ranks, uint64_t seq, const std::vector<neuron_collective> &c)
{
	std::vector<neuron_status> st(ranks.size(), NEURON_OK);
	std::vector<std::string> why(ranks.size());
	std::vector<std::thread> threads;
	for (size_t r = 0; r < ranks.size(); ++r)
		threads.emplace_back([&, r] {
			st[r] = neuron_group_run(ranks[r].channel, ranks[r].group, seq, &c[r]);
			why[r] = neuron_last_error();
		});
	for (auto &t : threads)
		t.join();
	for (size_t r = 0; r < ranks.size(); ++r)
		cr_assert(st[r] == NEURON_OK, "rank %zu: %s", r, why[r].c_str());
}

} // namespace

// reduce_scatter in place, as NCCL allows it: each rank's output is its own block of
// its input. neurond folds the ranks' blocks into the output one after the other, so
// rank 2's output (its input's block 2) would be overwritten by the partial sum of
// ranks 0 and 1 before rank 2's own block is read; it must reduce elsewhere first.
// Blocks of 300,000 floats (1.2 MB) span several chunks on both backends.
DAEMON_TEST(collective, reduce_scatter_in_place_onto_each_ranks_block)
{
	const uint32_t world = 3;
	const size_t n = 300'000;
	std::vector<Rank> ranks(world);
	std::vector<std::vector<float>> in(world);
	std::vector<uint64_t> buf(world);
	std::vector<neuron_collective> c(world);
	for (uint32_t r = 0; r < world; ++r) {
		ranks[r].open(("rank" + std::to_string(r)).c_str());
		in[r] = random_f32(world * n, 10 + r);
		buf[r] = dev_alloc(ranks[r].t.client, world * n * 4);
		upload_f32(ranks[r].t.dma, buf[r], in[r]);
		c[r] = neuron_collective{NEURON_COLL_REDUCE_SCATTER, NEURON_REDUCE_SUM, NEURON_DTYPE_F32, 0, 0, 0, n,
					 buf[r], buf[r] + r * n * 4};
	}
	join_all(ranks, "g-rs-in-place");
	run_all(ranks, 0, c);
	for (uint32_t r = 0; r < world; ++r) {
		std::vector<double> ref(n);
		for (size_t i = 0; i < n; ++i) // f32 adds in rank order, as gloo's
			ref[i] = static_cast<double>((in[0][r * n + i] + in[1][r * n + i]) + in[2][r * n + i]);
		expect_close(download_f32(ranks[r].t.dma, buf[r] + r * n * 4, n), ref, 0, 0,
			     ("rank " + std::to_string(r) + "'s block").c_str());
	}
	for (auto &r : ranks)
		r.close();
}

// After a collective its members' memory is theirs alone again: freed, it goes back
// to the device at once (on kmd neurond shares each member's buffer into a file of
// its own for the collective's jobs, and must close those imports when it ends).
DAEMON_TEST(collective, members_memory_is_freed_after_a_collective)
{
	std::vector<Rank> ranks(2);
	ranks[0].open("rank0");
	ranks[1].open("rank1");
	join_all(ranks, "g-free");
	const uint64_t before = hbm_used(ranks[0].t.client);
	const size_t n = 600'000; // 2.4 MB: several chunks
	std::vector<std::vector<float>> in;
	std::vector<uint64_t> buf;
	std::vector<neuron_collective> c;
	for (uint32_t r = 0; r < 2; ++r) {
		in.push_back(random_f32(n, 21 + r));
		buf.push_back(dev_alloc(ranks[r].t.client, n * 4));
		upload_f32(ranks[r].t.dma, buf[r], in[r]);
		c.push_back(all_reduce(buf[r], n));
	}
	run_all(ranks, 0, c);
	std::vector<double> ref(n);
	for (size_t i = 0; i < n; ++i)
		ref[i] = static_cast<double>(in[0][i] + in[1][i]);
	expect_close(download_f32(ranks[1].t.dma, buf[1], n), ref, 0, 0, "rank 1's sum");
	for (uint32_t r = 0; r < 2; ++r)
		NEURON_OK_OR_FAIL(neuron_free(ranks[r].t.client, 0, buf[r]));
	const uint64_t after = wait_hbm_used(ranks[0].t.client, 0, before, 5000);
	cr_assert(after == before, "HBM in use: %llu bytes before the buffers, %llu after they were freed",
		  static_cast<unsigned long long>(before), static_cast<unsigned long long>(after));
	for (auto &r : ranks)
		r.close();
}

// Ranks on different devices of the host (ranks 0 and 2 on device 0, rank 1 on
// device 1). On kmd a device's DMA engine reaches its own HBM and host memory only:
// neurond carries the bytes through a host buffer both devices' DMA engines share,
// and brings a reduction's sources from the other device next to it first. Results
// must be the CPU's in rank order, as on one device; afterwards both devices' HBM is
// back to what it was (the collective's staging and gather buffers are freed too).
DAEMON_TEST(collective, ranks_on_two_devices_reduce_gather_and_exchange)
{
	const uint32_t world = 3;
	const uint32_t device_of[world] = {0, 1, 0};
	const size_t n = 400'000; // 1.6 MB per rank: several chunks
	std::vector<Rank> ranks(world);
	for (uint32_t r = 0; r < world; ++r)
		ranks[r].open(("rank" + std::to_string(r)).c_str(), device_of[r]);
	const uint64_t before[2] = {hbm_used(ranks[0].t.client, 0), hbm_used(ranks[0].t.client, 1)};
	join_all(ranks, "g-two-devices");
	std::vector<std::vector<float>> in(world);
	std::vector<uint64_t> buf(world), out(world);
	std::vector<neuron_collective> c(world);
	for (uint32_t r = 0; r < world; ++r) {
		in[r] = random_f32(world * n, 40 + r);
		buf[r] = dev_alloc(ranks[r].t.client, world * n * 4, device_of[r]);
		out[r] = dev_alloc(ranks[r].t.client, world * n * 4, device_of[r]);
		upload_f32(ranks[r].t.dma, buf[r], in[r]);
	}
	auto rank_sum = [&](size_t i) { // f32 adds in rank order, as gloo's
		return static_cast<double>((in[0][i] + in[1][i]) + in[2][i]);
	};

	// seq 0: all_reduce (sum) in place over all world * n elements.
	for (uint32_t r = 0; r < world; ++r) {
		c[r] = all_reduce(buf[r], world * n);
		c[r].device = device_of[r];
	}
	run_all(ranks, 0, c);
	std::vector<double> sum(world * n);
	for (size_t i = 0; i < world * n; ++i)
		sum[i] = rank_sum(i);
	for (uint32_t r = 0; r < world; ++r)
		expect_close(download_f32(ranks[r].t.dma, buf[r], world * n), sum, 0, 0,
			     ("rank " + std::to_string(r) + "'s all_reduce").c_str());

	// seq 1: reduce_scatter (max) of the original inputs, each rank's output its own block.
	for (uint32_t r = 0; r < world; ++r) {
		upload_f32(ranks[r].t.dma, buf[r], in[r]);
		c[r] = neuron_collective{NEURON_COLL_REDUCE_SCATTER, NEURON_REDUCE_MAX, NEURON_DTYPE_F32, 0, device_of[r],
					 0, n, buf[r], buf[r] + r * n * 4};
	}
	run_all(ranks, 1, c);
	for (uint32_t r = 0; r < world; ++r) {
		std::vector<double> ref(n);
		for (size_t i = 0; i < n; ++i)
			ref[i] = std::max({in[0][r * n + i], in[1][r * n + i], in[2][r * n + i]});
		expect_close(download_f32(ranks[r].t.dma, buf[r] + r * n * 4, n), ref, 0, 0,
			     ("rank " + std::to_string(r) + "'s reduce_scatter block").c_str());
	}

	// seq 2: all_gather of each rank's first n inputs into out.
	for (uint32_t r = 0; r < world; ++r) {
		upload_f32(ranks[r].t.dma, buf[r], in[r]);
		c[r] = neuron_collective{NEURON_COLL_ALL_GATHER, 0, NEURON_DTYPE_F32, 0, device_of[r], 0, n, buf[r], out[r]};
	}
	run_all(ranks, 2, c);
	std::vector<double> gathered;
	for (uint32_t r = 0; r < world; ++r)
		gathered.insert(gathered.end(), in[r].begin(), in[r].begin() + n);
	for (uint32_t r = 0; r < world; ++r)
		expect_close(download_f32(ranks[r].t.dma, out[r], world * n), gathered, 0, 0,
			     ("rank " + std::to_string(r) + "'s all_gather").c_str());

	// A send from device 1 to device 0 (rank 1 to rank 2).
	neuron_status s1 = NEURON_OK;
	std::string e1;
	std::thread sender([&] {
		const neuron_p2p_op send{1, 2, NEURON_DTYPE_F32, 1, 7, world * n, buf[1]};
		s1 = neuron_group_p2p(ranks[1].channel, ranks[1].group, &send, 1);
		e1 = neuron_last_error();
	});
	const neuron_p2p_op recv{0, 1, NEURON_DTYPE_F32, 0, 7, world * n, out[2]};
	NEURON_OK_OR_FAIL(neuron_group_p2p(ranks[2].channel, ranks[2].group, &recv, 1));
	sender.join();
	cr_assert(s1 == NEURON_OK, "rank 1's send: %s", e1.c_str());
	expect_close(download_f32(ranks[2].t.dma, out[2], world * n), std::vector<double>(in[1].begin(), in[1].end()),
		     0, 0, "rank 2 got rank 1's buffer");

	for (uint32_t r = 0; r < world; ++r) {
		NEURON_OK_OR_FAIL(neuron_free(ranks[r].t.client, device_of[r], buf[r]));
		NEURON_OK_OR_FAIL(neuron_free(ranks[r].t.client, device_of[r], out[r]));
	}
	for (uint32_t d = 0; d < 2; ++d) {
		const uint64_t after = wait_hbm_used(ranks[0].t.client, d, before[d], 5000);
		cr_assert(after == before[d], "device %u: HBM in use %llu bytes before the collectives, %llu after", d,
			  static_cast<unsigned long long>(before[d]), static_cast<unsigned long long>(after));
	}
	for (auto &r : ranks)
		r.close();
}
