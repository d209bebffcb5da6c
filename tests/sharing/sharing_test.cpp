#include "sharing_test.h"

#include <neuron/futex.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <memory>
#include <time.h>

namespace sh {

using namespace neuron;

namespace {
std::unique_ptr<test::NeurondProcess> g_daemon;
const int64_t kWaitNs = test::wait_ns(60'000'000'000);
} // namespace

std::vector<std::string> settings(std::vector<std::string> extra)
{
	std::vector<std::string> s = {"--profile", "trn2", "--devices", "1", "--cores", "2", "--hbm-mib", "512",
				      "--spin-us", "20", "--threads-per-core", "1", "--log-level", "info"};
	// A flag given in extra replaces the default's value.
	for (size_t i = 0; i + 1 < extra.size(); i += 2) {
		auto it = std::find(s.begin(), s.end(), extra[i]);
		if (it != s.end() && it + 1 != s.end())
			*(it + 1) = extra[i + 1];
		else {
			s.push_back(extra[i]);
			s.push_back(extra[i + 1]);
		}
	}
	return s;
}

void start_daemon(std::vector<std::string> extra)
{
	// A daemon that closes a connection must fail the call, not kill the test.
	std::signal(SIGPIPE, SIG_IGN);
	g_daemon = std::make_unique<test::NeurondProcess>(std::string(), settings(std::move(extra)));
	std::string error;
	cr_assert(g_daemon->start(&error), "cannot start neurond: %s", error.c_str());
}

void stop_daemon()
{
	if (!g_daemon)
		return;
	auto exit = g_daemon->stop(10000);
	const std::string log = g_daemon->log_tail(3000);
	g_daemon.reset();
	cr_assert(exit.exited && exit.code == 0, "neurond did not exit cleanly (%s); log:\n%s", exit.describe().c_str(),
		  log.c_str());
}

const std::string &socket() { return g_daemon->socket_path(); }
std::string daemon_log() { return g_daemon ? g_daemon->log_tail(4000) : std::string(); }

uint64_t now_ns() { return detail::monotonic_ns(); }

void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, nullptr);
}

api::Response admin_call(api::Request &req)
{
	test::RawClient c;
	cr_assert(c.connect(socket()), "connect to %s", socket().c_str());
	// As an observer, like the admin tools: not counted as a tenant.
	api::Request hello;
	hello.mutable_hello()->set_api_major(1);
	hello.mutable_hello()->set_observer(true);
	hello.mutable_hello()->set_client_name("sharing-test-admin");
	api::Response resp;
	std::string why;
	cr_assert(c.call(hello, &resp, 30000, nullptr, &why) && resp.has_hello(), "hello: %s", why.c_str());
	cr_assert(c.call(req, &resp, 30000, nullptr, &why), "admin call failed: %s", why.c_str());
	return resp;
}

api::CapacityReply capacity()
{
	api::Request req;
	req.mutable_get_capacity();
	api::Response r = admin_call(req);
	cr_assert(r.has_capacity(), "GetCapacity: %s", r.has_error() ? r.error().message().c_str() : "no reply");
	return r.capacity();
}

api::Response lend(api::PoolKind from, uint32_t count)
{
	api::Request req;
	req.mutable_lend()->set_from(from);
	req.mutable_lend()->set_count(count);
	return admin_call(req);
}

api::Response reclaim(api::PoolKind lender, uint32_t deadline_ms, uint32_t count)
{
	api::Request req;
	req.mutable_reclaim()->set_pool(lender);
	req.mutable_reclaim()->set_deadline_ms(deadline_ms);
	req.mutable_reclaim()->set_count(count);
	return admin_call(req);
}

api::ListTenantsReply tenants()
{
	api::Request req;
	req.mutable_list_tenants();
	api::Response r = admin_call(req);
	cr_assert(r.has_list_tenants(), "ListTenants failed");
	return r.list_tenants();
}

const api::CoreInfo &core_info(const api::CapacityReply &cap, uint32_t device, uint32_t core)
{
	for (const auto &c : cap.cores())
		if (c.device() == device && c.core() == core)
			return c;
	cr_assert_fail("no core %u on device %u in GetCapacity", core, device);
	return cap.cores(0);
}

const api::PoolInfo &pool_info(const api::CapacityReply &cap, api::PoolKind p)
{
	for (const auto &x : cap.pools())
		if (x.pool() == p)
			return x;
	cr_assert_fail("no pool %d in GetCapacity", int(p));
	return cap.pools(0);
}

void Tenant::open(const char *name, int kind, uint32_t logical_cores, uint32_t)
{
	neuron_connect_options o = {};
	o.socket_path = socket().c_str();
	o.client_name = name;
	o.kind = kind;
	neuron_status s = neuron_connect(&o, &client);
	cr_assert(s == NEURON_OK, "connect %s: %s", name, neuron_last_error());
	s = neuron_queue_create(client, 0, NEURON_QUEUE_DMA, 0, 0, &dma);
	cr_assert(s == NEURON_OK, "dma queue: %s", neuron_last_error());
	for (uint32_t c = 0; c < logical_cores; ++c) {
		neuron_queue *q = nullptr;
		s = neuron_queue_create(client, 0, NEURON_QUEUE_CORE, c, 0, &q);
		cr_assert(s == NEURON_OK, "core queue %u: %s", c, neuron_last_error());
		cores.push_back(q);
	}
}

void Tenant::close()
{
	for (auto *q : cores)
		neuron_queue_destroy(q);
	cores.clear();
	if (dma)
		neuron_queue_destroy(dma);
	dma = nullptr;
	if (client)
		neuron_disconnect(client);
	client = nullptr;
}

uint64_t Tenant::alloc(uint64_t bytes)
{
	uint64_t a = 0;
	neuron_status s = neuron_alloc(client, 0, bytes, 0, &a);
	cr_assert(s == NEURON_OK, "alloc %llu: %s", (unsigned long long)bytes, neuron_last_error());
	return a;
}

neuron_cmd matmul_cmd(uint64_t out, uint64_t a, uint64_t b, int64_t n)
{
	neuron_cmd c;
	neuron_cmd_init(&c, NEURON_OP_MATMUL, 3);
	const int64_t sz[2] = {n, n};
	c.operands[0] = neuron_desc_contiguous(out, NEURON_DTYPE_F32, 2, sz);
	c.operands[1] = neuron_desc_contiguous(a, NEURON_DTYPE_F32, 2, sz);
	c.operands[2] = neuron_desc_contiguous(b, NEURON_DTYPE_F32, 2, sz);
	c.fscalars.f[0] = 1.0;
	return c;
}

neuron_cmd fill_cmd(uint64_t out, int64_t count, double value)
{
	neuron_cmd c;
	neuron_cmd_init(&c, NEURON_OP_FILL, 1);
	c.operands[0] = neuron_desc_contiguous(out, NEURON_DTYPE_F32, 1, &count);
	c.fscalars.f[0] = value;
	return c;
}

neuron_cmd add_scalar_cmd(uint64_t inout, int64_t count, double value)
{
	neuron_cmd c;
	neuron_cmd_init(&c, NEURON_OP_ADD_SCALAR, 2);
	c.operands[0] = neuron_desc_contiguous(inout, NEURON_DTYPE_F32, 1, &count);
	c.operands[1] = c.operands[0];
	c.fscalars.f[0] = value;
	return c;
}

void upload(neuron_queue *dma, uint64_t dst, const void *src, uint64_t bytes)
{
	neuron_status s = neuron_memcpy_h2d(dma, dst, src, bytes);
	cr_assert(s == NEURON_OK, "h2d: %s", neuron_last_error());
}

void download(neuron_queue *dma, void *dst, uint64_t src, uint64_t bytes)
{
	neuron_status s = neuron_memcpy_d2h(dma, dst, src, bytes);
	cr_assert(s == NEURON_OK, "d2h: %s", neuron_last_error());
}

void Saturator::start(Tenant &t, int64_t n, int depth)
{
	const uint64_t bytes = uint64_t(n) * uint64_t(n) * 4;
	for (neuron_queue *q : t.cores) {
		const uint64_t a = t.alloc(bytes), out = t.alloc(bytes);
		threads_.emplace_back([this, q, a, out, n, depth] {
			const neuron_cmd mm = matmul_cmd(out, a, a, n);
			uint64_t last = 0;
			while (!stop_.load()) {
				uint64_t seq;
				if (neuron_submit(q, &mm, &seq) != NEURON_OK)
					return;
				last = seq;
				// Keep `depth` commands queued: always work waiting.
				if (seq > uint64_t(depth) && neuron_queue_wait(q, seq - depth, kWaitNs) != NEURON_OK)
					return;
				completed_.fetch_add(1);
			}
			neuron_queue_wait(q, last, kWaitNs);
		});
	}
}

void Saturator::stop()
{
	stop_.store(true);
	for (auto &t : threads_)
		t.join();
	threads_.clear();
}

double percentile(std::vector<double> v, double q)
{
	if (v.empty())
		return 0;
	std::sort(v.begin(), v.end());
	return v[std::min(v.size() - 1, size_t(q * double(v.size() - 1) + 0.5))];
}

} // namespace sh

namespace sh {

double tile_p99_ms()
{
	uint64_t p99 = 0;
	const api::CapacityReply cap = capacity();
	for (const auto &c : cap.cores())
		p99 = std::max<uint64_t>(p99, c.tile_p99_ns());
	return double(p99) / 1e6;
}

uint32_t scaled_ms(uint32_t host_ms, double tiles)
{
	return std::max<uint32_t>(host_ms, static_cast<uint32_t>(tiles * tile_p99_ms() + 0.5));
}

void wait_for_tiles(uint64_t count)
{
	for (int i = 0; i < 6000; ++i) {
		uint64_t tiles = 0;
		const api::CapacityReply cap = capacity();
		for (const auto &c : cap.cores())
			tiles += c.tiles();
		if (tiles >= count)
			return;
		sleep_ms(10);
	}
	cr_assert_fail("the daemon ran fewer than %llu tiles in 60 s", (unsigned long long)count);
}

} // namespace sh
