// What a stranger writing a client from neuron.proto alone, or a hostile tenant,
// hit (issue 12, items 3-5): log and event injection through tenant strings, who
// may see whose command line, and the contract gaps (descriptors bound to their
// frame, queue.fault events naming the tenant, observers that hold nothing,
// consistent error codes).
#include "daemon_test.h"
#include "raw_client.h"

#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sstream>

using namespace dt;
using neuron::test::RawClient;
namespace api = neuron::api;

TestSuite(contract, .init = daemon_up, .fini = daemon_down, .timeout = 120);

namespace {

api::Response call_ok(RawClient &c, api::Request &req)
{
	api::Response r;
	std::string why;
	cr_assert(c.call(req, &r, 10000, nullptr, &why), "no answer: %s", why.c_str());
	return r;
}

void expect_code(const api::Response &r, api::ErrorCode code, const char *what)
{
	cr_assert(r.has_error() && r.error().code() == code, "%s: got %s (%s), expected %s", what,
		  r.has_error() ? api::ErrorCode_Name(r.error().code()).c_str() : "no error",
		  r.has_error() ? r.error().message().c_str() : "", api::ErrorCode_Name(code).c_str());
}

// Lines of the daemon's log that start a record (an ISO timestamp).
std::vector<std::string> log_lines()
{
	std::vector<std::string> out;
	std::istringstream in(g_daemon->log());
	for (std::string line; std::getline(in, line);)
		out.push_back(line);
	return out;
}

} // namespace

// A newline in client_name cannot forge a log line or an event line.
DAEMON_TEST(contract, client_name_cannot_forge_log_lines)
{
	RawClient c;
	cr_assert(c.connect(g_daemon->socket_path()));
	api::Request req;
	auto *h = req.mutable_hello();
	h->set_api_major(1);
	h->set_client_name("x\n2030-01-01T00:00:00.000Z error daemon.fatal forged=1\x1b[2J");
	api::Response r = call_ok(c, req);
	cr_assert(r.has_hello());
	sleep_ms(100);
	for (const auto &line : log_lines())
		cr_assert(line.rfind("2030-01-01", 0) != 0, "a tenant forged a log line: %s", line.c_str());
	const std::string log = g_daemon->log();
	cr_assert(log.find("x\\n2030-01-01") != std::string::npos, "the name is not in the log, escaped:\n%s",
		  g_daemon->log_tail().c_str());
	cr_assert(log.find('\x1b') == std::string::npos, "a terminal escape reached the log");
	// What ListTenants and the events carry is escaped too.
	neuron_client *viewer = connect("viewer");
	neuron_tenant_info list[8];
	uint32_t n = 0;
	NEURON_OK_OR_FAIL(neuron_list_tenants(viewer, list, 8, &n));
	bool found = false;
	for (uint32_t i = 0; i < n && i < 8; ++i) {
		const std::string name = list[i].client_name;
		cr_assert(name.find('\n') == std::string::npos && name.find('\x1b') == std::string::npos,
			  "ListTenants carries a raw control character");
		found |= name.rfind("x\\n2030", 0) == 0;
	}
	cr_assert(found, "the escaped name is not listed");
	neuron_disconnect(viewer);
}

// A command line with a newline and bytes that are not UTF-8 is escaped: the log has
// no forged line and ListTenants stays parsable for everyone (proto3 strings must be
// UTF-8: one bad byte would make every client's parse fail).
DAEMON_TEST(contract, command_line_with_newline_and_bad_utf8)
{
	// A tenant whose argv is hostile: python3 -c SCRIPT with a newline and 0xff in
	// its arguments, speaking the protocol by hand.
	const std::string script =
		"import socket,sys\n"
		"s=socket.socket(socket.AF_UNIX);s.connect(sys.argv[1])\n"
		"h=bytes([8,1])\n"
		"req=bytes([8,1,0x52,len(h)])+h\n"
		"s.sendall(len(req).to_bytes(4,'little')+req)\n"
		"s.recv(4096);sys.stdout.write('ready\\n');sys.stdout.flush();sys.stdin.read()\n";
	int to_child[2], from_child[2];
	// Close-on-exec: the child must not hold the write end of its own stdin (it
	// would never see EOF).
	cr_assert(pipe2(to_child, O_CLOEXEC) == 0 && pipe2(from_child, O_CLOEXEC) == 0);
	const pid_t pid = fork();
	if (pid == 0) {
		dup2(to_child[0], 0);
		dup2(from_child[1], 1);
		// The script comes through the environment: the command line (which neurond
		// keeps to 255 bytes) is then short and ends with the hostile arguments.
		setenv("NEURON_TEST_SCRIPT", script.c_str(), 1);
		execlp("python3", "python3", "-c", "import os;exec(os.environ['NEURON_TEST_SCRIPT'])",
		       g_daemon->socket_path().c_str(),
		       "\n2030-01-01T00:00:00.000Z error daemon.fatal forged=2", "\xff\xfe bad utf-8", (char *)nullptr);
		_exit(127);
	}
	close(to_child[0]);
	close(from_child[1]);
	char buf[16] = {};
	cr_assert(read(from_child[0], buf, sizeof(buf) - 1) > 0 && std::string(buf).rfind("ready", 0) == 0,
		  "the python tenant did not connect (is python3 installed?)");
	neuron_client *viewer = connect("viewer");
	neuron_tenant_info list[8];
	uint32_t n = 0;
	const neuron_status s = neuron_list_tenants(viewer, list, 8, &n);
	close(to_child[1]);
	int status = 0;
	waitpid(pid, &status, 0);
	close(from_child[0]);
	cr_assert(s == NEURON_OK, "ListTenants failed with a hostile command line connected: %s", describe(s).c_str());
	bool found = false;
	for (uint32_t i = 0; i < n && i < 8; ++i) {
		const std::string cmd = list[i].command;
		if (cmd.find("python3") == std::string::npos)
			continue;
		found = true;
		cr_assert(cmd.find('\n') == std::string::npos, "a raw newline in a listed command line");
		cr_assert(cmd.find("\\xff\\xfe") != std::string::npos, "bad UTF-8 is not escaped: %s", cmd.c_str());
	}
	cr_assert(found, "the python tenant is not listed");
	for (const auto &line : log_lines())
		cr_assert(line.rfind("2030-01-01", 0) != 0, "a command line forged a log line: %s", line.c_str());
	neuron_disconnect(viewer);
}

// A descriptor belongs to the frame it was sent with: one sent with a Ping is refused
// (and never taken by a later RegisterHostBuffer).
DAEMON_TEST(contract, descriptor_sent_with_a_ping_is_refused)
{
	RawClient c;
	cr_assert(c.connect(g_daemon->socket_path()) && c.hello());
	const int fd = memfd_create("stray", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	cr_assert(fd >= 0 && ftruncate(fd, 4096) == 0 && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) == 0);
	api::Request ping;
	ping.set_request_id(5);
	ping.mutable_ping();
	cr_assert(c.send(ping, fd));
	close(fd);
	api::Response r;
	std::string why;
	cr_assert(c.receive(&r, 5000, nullptr, &why), "no answer: %s", why.c_str());
	expect_code(r, api::ERROR_PROTOCOL, "a Ping carrying a descriptor");
	cr_assert(r.request_id() == 5, "the refusal answers request %llu, not 5", (unsigned long long)r.request_id());
}

// A RegisterHostBuffer whose descriptor came with an earlier frame gets none.
DAEMON_TEST(contract, descriptor_is_not_carried_to_a_later_frame)
{
	RawClient c;
	cr_assert(c.connect(g_daemon->socket_path()) && c.hello());
	const int fd = memfd_create("early", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	cr_assert(fd >= 0 && ftruncate(fd, 4096) == 0 && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) == 0);
	// One send: a Ping with the descriptor, then a RegisterHostBuffer without one.
	api::Request ping, reg;
	ping.set_request_id(1);
	ping.mutable_ping();
	reg.set_request_id(2);
	reg.mutable_register_host_buffer()->set_size(4096);
	cr_assert(c.send_bytes(neuron::wire::encode_frame(ping) + neuron::wire::encode_frame(reg), fd));
	close(fd);
	api::Response r;
	cr_assert(c.receive(&r, 5000));
	cr_assert(!(r.has_pong()), "a Ping carrying a descriptor was answered Pong");
	api::Response r2;
	if (c.receive(&r2, 2000))
		cr_assert(!r2.has_register_host_buffer(), "RegisterHostBuffer took the descriptor of the Ping before it");
}

// A malformed frame is answered with request_id 0 (no request was parsed).
DAEMON_TEST(contract, frame_errors_answer_request_0)
{
	RawClient c;
	cr_assert(c.connect(g_daemon->socket_path()) && c.hello());
	cr_assert(c.send_bytes(RawClient::length_prefix(0)));
	api::Response r;
	cr_assert(c.receive(&r, 5000));
	expect_code(r, api::ERROR_PROTOCOL, "a zero-length frame");
	cr_assert(r.request_id() == 0);
}

// queue.fault events say whose queue faulted.
DAEMON_TEST(contract, fault_events_name_the_tenant)
{
	RawClient sub;
	cr_assert(sub.connect(g_daemon->socket_path()) && sub.hello());
	api::Request s;
	s.mutable_subscribe_events();
	api::Response r = call_ok(sub, s);
	cr_assert(r.has_ok());
	Tenant t;
	t.open("faulty");
	// A relu on memory the tenant does not own faults.
	const int64_t n = 16;
	neuron_cmd cmd = make_cmd(NEURON_OP_RELU, {desc(1ull << 44, NEURON_DTYPE_F32, {n}), desc(1ull << 44, NEURON_DTYPE_F32, {n})});
	const uint64_t seq = submit(t.core, cmd);
	cr_assert(neuron_queue_wait(t.core, seq, kWaitNs) == NEURON_ERR_FAULT);
	bool seen = false;
	for (int i = 0; i < 50 && !seen; ++i) {
		api::Response ev;
		if (!sub.receive(&ev, 200))
			continue;
		if (ev.has_event() && ev.event().type() == "queue.fault") {
			cr_assert(ev.event().tenant_id() == neuron_tenant_id(t.client), "queue.fault names tenant %llu, not %llu",
				  (unsigned long long)ev.event().tenant_id(), (unsigned long long)neuron_tenant_id(t.client));
			seen = true;
		}
	}
	cr_assert(seen, "no queue.fault event");
	t.close();
}

// An observer only queries: it is never listed, so it may not hold anything either.
DAEMON_TEST(contract, observers_hold_nothing)
{
	RawClient c;
	cr_assert(c.connect(g_daemon->socket_path()));
	api::Request h;
	h.mutable_hello()->set_api_major(1);
	h.mutable_hello()->set_observer(true);
	cr_assert(call_ok(c, h).has_hello());
	neuron_client *before = connect("witness");
	const uint64_t used = hbm_used(before);
	neuron_disconnect(before);
	api::Request a;
	a.mutable_alloc_device()->set_size(1 << 20);
	expect_code(call_ok(c, a), api::ERROR_PERMISSION_DENIED, "AllocDevice from an observer");
	api::Request q;
	q.mutable_create_queue()->set_kind(api::QUEUE_KIND_DMA);
	expect_code(call_ok(c, q), api::ERROR_PERMISSION_DENIED, "CreateQueue from an observer");
	neuron_client *w = connect("witness2");
	cr_assert(hbm_used(w) == used, "an observer's allocation went through");
	neuron_disconnect(w);
}

// The same mistake gets the same code on every request.
DAEMON_TEST(contract, consistent_error_codes)
{
	RawClient c;
	cr_assert(c.connect(g_daemon->socket_path()) && c.hello());
	api::Request a;
	a.mutable_alloc_device()->set_device(99);
	a.mutable_alloc_device()->set_size(4096);
	expect_code(call_ok(c, a), api::ERROR_NOT_FOUND, "AllocDevice on device 99");
	api::Request f;
	f.mutable_free_device()->set_device(99);
	f.mutable_free_device()->set_address(1ull << 44);
	expect_code(call_ok(c, f), api::ERROR_NOT_FOUND, "FreeDevice on device 99");
	api::Request q;
	q.mutable_create_queue()->set_device(99);
	q.mutable_create_queue()->set_kind(api::QUEUE_KIND_DMA);
	expect_code(call_ok(c, q), api::ERROR_NOT_FOUND, "CreateQueue on device 99");
	api::Request big;
	big.mutable_alloc_device()->set_size(4096);
	big.mutable_alloc_device()->set_alignment(1ull << 40);
	const api::Response r = call_ok(c, big);
	expect_code(r, api::ERROR_INVALID_ARGUMENT, "an alignment of 2^40");
	cr_assert(r.error().message().find("alignment") != std::string::npos, "the refusal does not name the alignment: %s",
		  r.error().message().c_str());
	// More queues than a tenant may have: RESOURCE_EXHAUSTED, like every limit.
	api::Response last;
	for (int i = 0; i < 300; ++i) {
		api::Request cq;
		cq.mutable_create_queue()->set_kind(api::QUEUE_KIND_DMA);
		cq.mutable_create_queue()->set_slot_count(2);
		last = call_ok(c, cq);
		if (last.has_error())
			break;
	}
	expect_code(last, api::ERROR_RESOURCE_EXHAUSTED, "one queue too many");
}

namespace {

// A child that becomes uid/gid 65534 (nobody), connects as tenant `name` and, when
// told, lists the tenants; reports what it saw of the tenant named `other`.
struct Seen {
	int ok = 0;
	int redacted = 0;
	char command[256] = {};
	char client_name[64] = {};
	char error[200] = {};
};

Seen list_as_nobody(const std::string &other)
{
	Child ch = fork_child();
	if (ch.pid == 0) {
		Seen s;
		if (setgid(65534) != 0 || setuid(65534) != 0) {
			std::snprintf(s.error, sizeof(s.error), "setuid: %s", strerror(errno));
			child_report_and_exit(ch, &s, sizeof(s));
		}
		neuron_connect_options o = {};
		const std::string path = g_daemon->socket_path();
		o.socket_path = path.c_str();
		o.client_name = "nobody's";
		neuron_client *c = nullptr;
		if (neuron_connect(&o, &c) != NEURON_OK) {
			std::snprintf(s.error, sizeof(s.error), "connect: %s", neuron_last_error());
			child_report_and_exit(ch, &s, sizeof(s));
		}
		neuron_tenant_info list[16];
		uint32_t n = 0;
		if (neuron_list_tenants(c, list, 16, &n) == NEURON_OK) {
			for (uint32_t i = 0; i < n && i < 16; ++i)
				if (list[i].uid == 0 && list[i].pid == static_cast<uint32_t>(getppid())) {
					s.ok = 1;
					std::memcpy(s.command, list[i].command, sizeof(s.command));
					std::memcpy(s.client_name, list[i].client_name, sizeof(s.client_name));
				}
		}
		child_report_and_exit(ch, &s, sizeof(s));
	}
	Seen s;
	cr_assert(read_report(ch, &s, sizeof(s), 20000), "the uid-65534 child did not report");
	reap_child(ch, 5000);
	cr_assert(!s.error[0], "child: %s", s.error);
	(void)other;
	return s;
}

} // namespace

// A user who is neither root nor an admin sees another user's tenants without their
// command line or name (like hidepid); root sees everything.
DAEMON_TEST(contract, non_admins_do_not_see_others_command_lines)
{
	// Let uid 65534 reach the test's socket.
	const std::string dir = g_daemon->dir();
	cr_assert(chmod(dir.c_str(), 0711) == 0 && chmod(g_daemon->socket_path().c_str(), 0666) == 0);
	neuron_client *mine = connect("root-secret-name");
	const Seen s = list_as_nobody("root-secret-name");
	cr_assert(s.ok, "uid 65534 does not see root's tenant at all (only its command line should be hidden)");
	cr_assert(!s.command[0], "uid 65534 sees root's command line: %s", s.command);
	cr_assert(std::string(s.client_name).find("secret") == std::string::npos, "uid 65534 sees root's client name: %s",
		  s.client_name);
	// Root, an admin, sees the child's entry in full (the child has left by now, so
	// check root's own view of itself: full).
	neuron_tenant_info list[16];
	uint32_t n = 0;
	NEURON_OK_OR_FAIL(neuron_list_tenants(mine, list, 16, &n));
	bool full = false;
	for (uint32_t i = 0; i < n && i < 16; ++i)
		full |= std::string(list[i].client_name) == "root-secret-name" && list[i].command[0];
	cr_assert(full, "root does not see its own tenant in full");
	neuron_disconnect(mine);
}

// RegisterHostBuffer takes a memfd sealed with F_SEAL_SHRINK (neuron.proto says so):
// an unsealed one is refused with the reason, a sealed one is accepted.
DAEMON_TEST(contract, host_buffer_must_be_sealed_against_shrinking)
{
	RawClient c;
	cr_assert(c.connect(g_daemon->socket_path()) && c.hello());
	for (const bool sealed : {false, true}) {
		const int fd = memfd_create("seal", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		cr_assert(fd >= 0 && ftruncate(fd, 4096) == 0);
		if (sealed)
			cr_assert(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) == 0);
		api::Request req;
		req.set_request_id(sealed ? 2 : 1);
		req.mutable_register_host_buffer()->set_size(4096);
		cr_assert(c.send(req, fd));
		close(fd);
		api::Response r;
		cr_assert(c.receive(&r, 5000));
		if (sealed) {
			cr_assert(r.has_register_host_buffer(), "a sealed memfd was refused: %s", r.error().message().c_str());
		} else {
			expect_code(r, api::ERROR_INVALID_ARGUMENT, "an unsealed memfd");
			cr_assert(r.error().message().find("F_SEAL_SHRINK") != std::string::npos,
				  "the refusal does not name F_SEAL_SHRINK: %s", r.error().message().c_str());
		}
	}
}

// slot_count: 0 (the default, 256) or a power of two in 2..65536; anything else is
// INVALID_ARGUMENT.
DAEMON_TEST(contract, slot_count_bounds)
{
	RawClient c;
	cr_assert(c.connect(g_daemon->socket_path()) && c.hello());
	const struct {
		uint32_t slots;
		uint32_t expect; // 0: refused
	} cases[] = {{0, 256}, {2, 2}, {65536, 65536}, {1, 0}, {3, 0}, {131072, 0}, {0x80000000u, 0}};
	for (const auto &k : cases) {
		api::Request q;
		q.mutable_create_queue()->set_kind(api::QUEUE_KIND_DMA);
		q.mutable_create_queue()->set_slot_count(k.slots);
		const api::Response r = call_ok(c, q);
		if (k.expect) {
			cr_assert(r.has_create_queue() && r.create_queue().slot_count() == k.expect,
				  "slot_count %u: %s", k.slots, r.has_error() ? r.error().message().c_str() : "wrong count");
			api::Request d;
			d.mutable_destroy_queue()->set_queue_id(r.create_queue().queue_id());
			cr_assert(call_ok(c, d).has_ok());
		} else {
			const std::string what = "slot_count " + std::to_string(k.slots);
			expect_code(r, api::ERROR_INVALID_ARGUMENT, what.c_str());
		}
	}
}

// A frame holds 1 .. 1 MiB bytes: exactly 1 MiB is served, one byte more is refused
// (request_id 0) and closes the connection.
DAEMON_TEST(contract, frame_size_bounds)
{
	RawClient c;
	cr_assert(c.connect(g_daemon->socket_path()) && c.hello());
	// A Ping padded with an unknown field (number 1000, bytes) to exactly 1 MiB.
	api::Request ping;
	ping.set_request_id(9);
	ping.mutable_ping();
	std::string payload = ping.SerializeAsString();
	const std::string tag = "\xc2\x3e"; // field 1000, wire type 2
	size_t fill = neuron::wire::kMaxFrame - payload.size() - tag.size() - 3; // 3-byte varint length
	std::string varint;
	for (size_t v = fill; ; v >>= 7) {
		varint += static_cast<char>((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
		if (v < 0x80)
			break;
	}
	cr_assert(varint.size() == 3);
	payload += tag + varint + std::string(fill, 'x');
	cr_assert(payload.size() == neuron::wire::kMaxFrame);
	cr_assert(c.send_bytes(RawClient::length_prefix(payload.size()) + payload));
	api::Response r;
	std::string why;
	cr_assert(c.receive(&r, 10000, nullptr, &why), "a 1 MiB frame was not answered: %s", why.c_str());
	cr_assert(r.has_pong() && r.request_id() == 9, "a frame of exactly 1 MiB was not served (body %d)",
		  static_cast<int>(r.body_case()));
	cr_assert(c.send_bytes(RawClient::length_prefix(neuron::wire::kMaxFrame + 1)));
	cr_assert(c.receive(&r, 5000));
	expect_code(r, api::ERROR_PROTOCOL, "a frame of 1 MiB + 1");
	cr_assert(r.request_id() == 0);
	cr_assert(c.wait_eof(5000), "the connection stayed open after a frame too large");
}

// Events carry tenant text escaped (tenant.connect's client_name).
DAEMON_TEST(contract, events_carry_escaped_names)
{
	RawClient sub;
	cr_assert(sub.connect(g_daemon->socket_path()) && sub.hello());
	api::Request s;
	s.mutable_subscribe_events();
	cr_assert(call_ok(sub, s).has_ok());
	RawClient c;
	cr_assert(c.connect(g_daemon->socket_path()));
	api::Request h;
	h.mutable_hello()->set_api_major(1);
	h.mutable_hello()->set_client_name("evil\nname\x1b[2J");
	const api::Response hr = call_ok(c, h);
	cr_assert(hr.has_hello());
	bool seen = false;
	for (int i = 0; i < 20 && !seen; ++i) {
		api::Response ev;
		if (!sub.receive(&ev, 200) || !ev.has_event() || ev.event().type() != "tenant.connect" ||
		    ev.event().tenant_id() != hr.hello().tenant_id())
			continue;
		cr_assert(ev.event().client_name() == "evil\\nname\\x1b[2J", "tenant.connect carries '%s'",
			  ev.event().client_name().c_str());
		seen = true;
	}
	cr_assert(seen, "no tenant.connect event with the name");
}
