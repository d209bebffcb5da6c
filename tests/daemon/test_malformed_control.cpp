// Malformed control-plane traffic on raw sockets (contracts/neuron.proto framing). After
// each abuse the daemon is alive and a libneuron tenant that connected before it
// still works: "the daemon keeps serving others".
#include "daemon_test.h"
#include "raw_client.h"

#include <cstring>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

using namespace dt;
using neuron::test::RawClient;
namespace api = neuron::api;

namespace {

Tenant g_witness;
uint64_t g_witness_buf = 0;

void close_witness()
{
	if (g_witness.client)
		g_witness.close();
}

void setup()
{
	daemon_up();
	g_before_stop = close_witness;
	g_witness.open("witness");
	g_witness_buf = dev_alloc(g_witness.client, 4096);
}

RawClient g_raw;

RawClient &raw()
{
	cr_assert(g_raw.connect(g_daemon->socket_path()), "raw connect to %s failed", g_daemon->socket_path().c_str());
	return g_raw;
}

int raw_tenants_listed()
{
	neuron_tenant_info list[16];
	uint32_t count = 0;
	NEURON_OK_OR_FAIL(neuron_list_tenants(g_witness.client, list, 16, &count));
	int n = 0;
	for (uint32_t i = 0; i < count && i < 16; ++i)
		n += std::strcmp(list[i].client_name, "raw-test-client") == 0;
	return n;
}

// The daemon is alive, the witness (connected before the abuse) can still compute
// and copy, a new client can connect, and the abusive session is gone once closed.
void witness_works(float value)
{
	cr_assert(g_daemon->running(), "neurond died; its log:\n%s", g_daemon->log_tail().c_str());
	run(g_witness.core, make_fill_f32(desc(g_witness_buf, NEURON_DTYPE_F32, {1024}), value));
	const auto v = download_f32(g_witness.dma, g_witness_buf, 1024);
	for (float x : v)
		cr_assert(x == value, "the witness tenant read %g after a fill with %g", x, value);
}

void expect_still_serving(float value)
{
	cr_assert(g_daemon->running(), "neurond died; its log:\n%s", g_daemon->log_tail().c_str());
	g_raw.close();
	int left = raw_tenants_listed();
	for (int i = 0; i < 500 && left; ++i) {
		sleep_ms(10);
		left = raw_tenants_listed();
	}
	cr_assert(left == 0, "the abusive session is still listed as a tenant 5 s after it closed");
	witness_works(value);
	neuron_client *fresh = connect("after-abuse");
	uint32_t count = 0;
	NEURON_OK_OR_FAIL(neuron_device_count(fresh, &count));
	cr_assert(count == 2, "a new client sees %u devices, the daemon was started with 2", count);
	neuron_disconnect(fresh);
}

// The daemon answers with an Error of `code`, then closes the connection.
void expect_error_then_close(RawClient &c, api::ErrorCode code)
{
	api::Response resp;
	std::string why;
	cr_assert(c.receive(&resp, 5000, nullptr, &why), "no error reply: %s", why.c_str());
	cr_assert(resp.has_error(), "the reply is not an Error (body case %d)", static_cast<int>(resp.body_case()));
	cr_assert(resp.error().code() == code, "error code %s, expected %s (message: %s)",
		  api::ErrorCode_Name(resp.error().code()).c_str(), api::ErrorCode_Name(code).c_str(),
		  resp.error().message().c_str());
	cr_assert(!resp.error().message().empty(), "the error has no message");
	cr_assert(c.wait_eof(5000), "the daemon kept the connection open after %s", api::ErrorCode_Name(code).c_str());
}

std::string frame_of(const api::Request &req) { return neuron::wire::encode_frame(req); }

} // namespace

TestSuite(malformed_control, .init = setup, .fini = daemon_down, .timeout = 100);

DAEMON_TEST(malformed_control, truncated_frame_then_close)
{
	RawClient &c = raw();
	cr_assert(c.hello());
	// Announce 100 bytes, send 10 (a request_id field and filler), hang up.
	cr_assert(c.send_bytes(RawClient::length_prefix(100) + std::string("\x08\x05") + std::string(8, '\0')));
	expect_still_serving(1.0f);
}

DAEMON_TEST(malformed_control, zero_length_frame)
{
	RawClient &c = raw();
	cr_assert(c.send_bytes(RawClient::length_prefix(0)));
	expect_error_then_close(c, api::ERROR_PROTOCOL);
	expect_still_serving(2.0f);
}

DAEMON_TEST(malformed_control, frame_longer_than_1_MiB)
{
	RawClient &c = raw();
	cr_assert(c.hello());
	// Only the prefix: the daemon must refuse from the length alone, not buffer 2 MiB.
	cr_assert(c.send_bytes(RawClient::length_prefix((1u << 20) + 1)));
	expect_error_then_close(c, api::ERROR_PROTOCOL);
	expect_still_serving(3.0f);
}

DAEMON_TEST(malformed_control, hello_with_unknown_api_major)
{
	RawClient &c = raw();
	api::Request req;
	req.set_request_id(1);
	req.mutable_hello()->set_api_major(2);
	req.mutable_hello()->set_client_name("from-the-future");
	cr_assert(c.send(req));
	expect_error_then_close(c, api::ERROR_VERSION_MISMATCH);
	expect_still_serving(4.0f);
}

DAEMON_TEST(malformed_control, garbage_that_is_not_a_protobuf)
{
	RawClient &c = raw();
	cr_assert(c.hello());
	// 0xff... is a varint that never ends: no protobuf parser accepts it.
	const std::string junk(24, '\xff');
	cr_assert(c.send_bytes(RawClient::length_prefix(junk.size()) + junk));
	expect_error_then_close(c, api::ERROR_PROTOCOL);
	expect_still_serving(5.0f);
}

DAEMON_TEST(malformed_control, request_before_hello)
{
	const uint64_t used = hbm_used(g_witness.client);
	RawClient &c = raw();
	api::Request req;
	req.set_request_id(1);
	req.mutable_alloc_device()->set_device(0);
	req.mutable_alloc_device()->set_size(1 << 20);
	cr_assert(c.send(req));
	expect_error_then_close(c, api::ERROR_PROTOCOL);
	cr_assert(hbm_used(g_witness.client) == used, "an AllocDevice sent before Hello allocated memory");
	expect_still_serving(6.0f);
}

DAEMON_TEST(malformed_control, request_with_no_body_keeps_the_connection)
{
	RawClient &c = raw();
	cr_assert(c.hello());
	api::Request empty;
	empty.set_request_id(77);
	api::Response resp;
	std::string why;
	cr_assert(c.call(empty, &resp, 5000, nullptr, &why), "no reply to a request with no body: %s", why.c_str());
	cr_assert(resp.has_error(), "a request with no body was not answered with an Error");
	cr_assert(resp.request_id() == 77, "the error answers request %llu, not 77", (unsigned long long)resp.request_id());
	cr_assert(resp.error().code() != api::ERROR_NONE && !resp.error().message().empty());
	// Still usable.
	api::Request ping;
	ping.set_request_id(78);
	ping.mutable_ping();
	cr_assert(c.call(ping, &resp, 5000, nullptr, &why), "no reply to Ping after the error: %s", why.c_str());
	cr_assert(resp.has_pong() && resp.request_id() == 78, "Ping after the error got body %d for request %llu",
		  static_cast<int>(resp.body_case()), (unsigned long long)resp.request_id());
	expect_still_serving(7.0f);
}

DAEMON_TEST(malformed_control, hello_twice)
{
	RawClient &c = raw();
	cr_assert(c.hello());
	api::Request req;
	req.set_request_id(9);
	req.mutable_hello()->set_api_major(1);
	cr_assert(c.send(req));
	expect_error_then_close(c, api::ERROR_PROTOCOL);
	expect_still_serving(8.0f);
}

DAEMON_TEST(malformed_control, client_that_never_reads_its_replies)
{
	RawClient &c = raw();
	cr_assert(c.hello());
	// Pings back to back without reading a reply: the daemon must not block on this
	// client (it may drop it once its replies no longer fit).
	api::Request ping;
	ping.set_request_id(1);
	ping.mutable_ping();
	std::string burst;
	for (int i = 0; i < 2000; ++i)
		burst += frame_of(ping);
	for (int round = 0; round < 100; ++round)
		if (send(c.fd(), burst.data(), burst.size(), MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
			break; // our side is full too (or the daemon hung up): enough
	// The abuser is still connected with its replies unread: others are served.
	witness_works(8.5f);
	expect_still_serving(9.0f);
}

DAEMON_TEST(malformed_control, descriptors_without_requests_that_take_them)
{
	RawClient &c = raw();
	cr_assert(c.hello());
	const int fd = memfd_create("flood", MFD_CLOEXEC);
	cr_assert(fd >= 0);
	api::Request ping;
	ping.mutable_ping();
	bool closed = false;
	for (int i = 0; i < 40 && !closed; ++i) {
		ping.set_request_id(100 + i);
		api::Response resp;
		if (!c.send(ping, fd) || !c.receive(&resp, 5000)) {
			closed = true;
			break;
		}
		if (resp.has_error()) {
			cr_assert(resp.error().code() == api::ERROR_PROTOCOL, "unexpected error %s",
				  api::ErrorCode_Name(resp.error().code()).c_str());
			cr_assert(c.wait_eof(5000), "the daemon kept a connection flooding it with descriptors");
			closed = true;
		}
	}
	close(fd);
	cr_assert(closed, "the daemon accepted 40 unclaimed descriptors without complaint");
	expect_still_serving(10.0f);
}
