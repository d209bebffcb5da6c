// Slow and large readers (issue 12, item 1): neurond writes every reply whole, at the
// pace the client reads, and never drops a connection because its socket buffer is
// full; an event subscriber that falls behind gets an explicit "events.lost" marker;
// a reply that cannot fit one frame is paged (ListTenants) or refused when the state
// that would produce it is set (a policy too large to report).
#include "daemon_test.h"
#include "raw_client.h"

#include <cstring>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <vector>

using namespace dt;
using neuron::test::RawClient;
namespace api = neuron::api;

TestSuite(backpressure, .init = daemon_up, .fini = daemon_down, .timeout = 240);

namespace {

// n tenants that connect, greet and leave: 2 events each (tenant.connect, tenant.exit).
void churn_tenants(int n)
{
	for (int i = 0; i < n; ++i) {
		RawClient c;
		cr_assert(c.connect(g_daemon->socket_path()), "connect %d failed", i);
		cr_assert(c.hello(), "hello %d failed", i);
	}
}

std::unique_ptr<RawClient> subscriber(bool replay)
{
	auto c = std::make_unique<RawClient>();
	cr_assert(c->connect(g_daemon->socket_path()));
	api::Request req;
	auto *h = req.mutable_hello();
	h->set_api_major(1);
	h->set_observer(true);
	h->set_client_name("slow-subscriber");
	api::Response resp;
	cr_assert(c->call(req, &resp) && resp.has_hello());
	api::Request sub;
	sub.mutable_subscribe_events()->set_replay(replay);
	cr_assert(c->call(sub, &resp) && resp.has_ok(), "SubscribeEvents was not answered Ok");
	return c;
}

void raise_fd_limit()
{
	struct rlimit r;
	cr_assert(getrlimit(RLIMIT_NOFILE, &r) == 0);
	r.rlim_cur = r.rlim_max;
	setrlimit(RLIMIT_NOFILE, &r);
}

} // namespace

// `neuronctl events -f` against a daemon holding ~1000 events: the replay and the
// live events all arrive, in order, to a reader slower than the daemon writes.
DAEMON_TEST(backpressure, slow_subscriber_with_replay_gets_every_event)
{
	churn_tenants(600); // 1200 events, more than the 1000 the daemon keeps
	auto sub = subscriber(true);
	churn_tenants(100); // live events while the replay is still unread
	uint64_t last_seq = 0, count = 0;
	for (;;) {
		api::Response r;
		std::string why;
		if (!sub->receive(&r, 3000, nullptr, &why)) {
			cr_assert(why.find("no reply") != std::string::npos, "the subscription ended: %s", why.c_str());
			break;
		}
		cr_assert(r.has_event(), "a non-event frame on the event stream");
		cr_assert(r.event().type() != "events.lost", "events were lost: %s", r.event().message().c_str());
		if (last_seq)
			cr_assert(r.event().seq() == last_seq + 1, "event %llu follows %llu",
				  (unsigned long long)r.event().seq(), (unsigned long long)last_seq);
		last_seq = r.event().seq();
		++count;
		if (count % 64 == 0)
			sleep_ms(1); // slower than the daemon writes
	}
	cr_assert(count >= 1000 + 200, "got %llu events, expected the 1000 replayed and 200 live ones",
		  (unsigned long long)count);
}

// A subscriber that does not read at all while 10000 events happen keeps its
// connection; when it reads, it gets a marker saying how many it lost, then the
// newest events.
DAEMON_TEST(backpressure, stalled_subscriber_gets_a_lost_marker)
{
	auto sub = subscriber(false);
	churn_tenants(5000);
	api::Response r;
	std::string why;
	cr_assert(sub->receive(&r, 5000, nullptr, &why), "the stalled subscriber lost its connection: %s", why.c_str());
	// What fit in the socket before the daemon's queue took over comes first.
	uint64_t first_seq = r.event().seq(), lost = 0, after = 0;
	while (sub->receive(&r, 2000, nullptr, &why)) {
		cr_assert(r.has_event());
		if (r.event().type() == "events.lost") {
			cr_assert(lost == 0, "two lost markers");
			lost = r.event().lost();
			cr_assert(r.event().message().find(std::to_string(lost) + " events lost") != std::string::npos,
				  "the marker does not say how many: %s", r.event().message().c_str());
		} else if (lost) {
			++after;
		}
	}
	cr_assert(why.find("no reply") != std::string::npos, "the stream ended: %s", why.c_str());
	cr_assert(lost > 0, "10000 events to a stalled subscriber and no events.lost marker (first seq %llu)",
		  (unsigned long long)first_seq);
	cr_assert(after >= 4000, "only %llu events after the marker; the queue holds 4096", (unsigned long long)after);
	// Still subscribed: a new event arrives.
	churn_tenants(1);
	cr_assert(sub->receive(&r, 5000, nullptr, &why) && r.has_event(), "no live event after the marker: %s",
		  why.c_str());
}

// A client that pipelines 2000 Pings without reading is not dropped: once it reads,
// every reply is there, whole and in order.
DAEMON_TEST(backpressure, pipelined_requests_are_all_answered)
{
	RawClient c;
	cr_assert(c.connect(g_daemon->socket_path()) && c.hello());
	std::string burst;
	for (int i = 0; i < 2000; ++i) {
		api::Request ping;
		ping.set_request_id(1000 + i);
		ping.mutable_ping();
		burst += neuron::wire::encode_frame(ping);
	}
	// Blocking send: the daemon must keep reading (or pause and resume), not hang up.
	cr_assert(c.send_bytes(burst), "sending 2000 pipelined pings failed");
	for (int i = 0; i < 2000; ++i) {
		api::Response r;
		std::string why;
		cr_assert(c.receive(&r, 10000, nullptr, &why), "reply %d missing: %s", i, why.c_str());
		cr_assert(r.has_pong() && r.request_id() == uint64_t(1000 + i), "reply %d is for request %llu", i,
			  (unsigned long long)r.request_id());
	}
}

// ~2000 tenants connected: neuron-ls's ListTenants (hundreds of KB, more than a
// socket buffer) arrives whole, and every tenant is in it.
DAEMON_TEST(backpressure, list_of_2000_tenants)
{
	raise_fd_limit();
	std::vector<std::unique_ptr<RawClient>> many;
	for (int i = 0; i < 2000; ++i) {
		many.push_back(std::make_unique<RawClient>());
		cr_assert(many.back()->connect(g_daemon->socket_path()), "connect %d: %s", i, strerror(errno));
		api::Request req;
		auto *h = req.mutable_hello();
		h->set_api_major(1);
		h->set_client_name("tenant-with-a-long-enough-name-to-fill-the-list-" + std::to_string(i));
		api::Response resp;
		cr_assert(many.back()->call(req, &resp) && resp.has_hello(), "hello %d failed", i);
	}
	neuron_client *c = connect("lister");
	std::vector<neuron_tenant_info> list(2100);
	uint32_t count = 0;
	NEURON_OK_OR_FAIL(neuron_list_tenants(c, list.data(), static_cast<uint32_t>(list.size()), &count));
	cr_assert(count >= 2001, "ListTenants returned %u tenants, 2001 are connected", count);
	// The paging itself: pages of 100 cover everyone once, in id order.
	RawClient raw;
	cr_assert(raw.connect(g_daemon->socket_path()) && raw.hello());
	uint64_t after = 0, seen = 0, last_id = 0;
	int pages = 0;
	do {
		api::Request req;
		req.mutable_list_tenants()->set_start_after(after);
		req.mutable_list_tenants()->set_max_tenants(100);
		api::Response resp;
		cr_assert(raw.call(req, &resp) && resp.has_list_tenants(), "page %d failed", pages);
		cr_assert(resp.list_tenants().tenants_size() <= 100);
		for (const auto &t : resp.list_tenants().tenants()) {
			cr_assert(t.tenant_id() > last_id, "tenant %llu after %llu", (unsigned long long)t.tenant_id(),
				  (unsigned long long)last_id);
			last_id = t.tenant_id();
			++seen;
		}
		after = resp.list_tenants().next_start_after();
		++pages;
	} while (after);
	cr_assert(seen == count + 1, "paging saw %llu tenants, the list had %u (+ the raw client)",
		  (unsigned long long)seen, count);
	cr_assert(pages >= 20, "%d pages of at most 100 for %llu tenants", pages, (unsigned long long)seen);
	neuron_disconnect(c);
}

// A policy whose report would not fit one frame is refused when set, with the reason;
// GetCapacity keeps working.
DAEMON_TEST(backpressure, policy_too_large_to_report_is_refused)
{
	RawClient c;
	cr_assert(c.connect(g_daemon->socket_path()) && c.hello());
	api::Request set;
	auto *p = set.mutable_set_policy()->mutable_policy();
	p->set_mode("scheduled");
	for (int i = 0; i < 40000; ++i) {
		auto *w = p->add_windows();
		w->set_start("00:00");
		w->set_end("06:00");
		w->set_cores(1);
	}
	api::Response resp;
	std::string why;
	cr_assert(c.call(set, &resp, 10000, nullptr, &why), "no answer to a large SetPolicy: %s", why.c_str());
	cr_assert(resp.has_error() && resp.error().code() == api::ERROR_INVALID_ARGUMENT,
		  "a policy of 40000 windows was not refused (body %d)", static_cast<int>(resp.body_case()));
	cr_assert(resp.error().message().find("windows") != std::string::npos, "the refusal does not say why: %s",
		  resp.error().message().c_str());
	api::Request get;
	get.mutable_get_capacity();
	cr_assert(c.call(get, &resp, 10000, nullptr, &why) && resp.has_capacity(), "GetCapacity failed: %s", why.c_str());
}
