// Per-tenant limits (issue 12, item 2): one tenant cannot exhaust the daemon or the
// devices. Built-in defaults protect the others (host buffers, HBM); neurond's
// --limit sets them per pool, per class (group:NAME, uid:N) or by default; each
// refusal is RESOURCE_EXHAUSTED naming the limit; GetCapacity (neuronctl pools)
// shows them.
#include "daemon_test.h"
#include "raw_client.h"

#include <cstdlib>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

using namespace dt;
using neuron::test::RawClient;
namespace api = neuron::api;

namespace {

// A sealed 4 KiB memfd registered as a host buffer on c (raw protocol, so the test
// controls every request). Returns the daemon's answer.
api::Response register_4k(RawClient &c)
{
	const int fd = memfd_create("limit-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	cr_assert(fd >= 0);
	cr_assert(ftruncate(fd, 4096) == 0 && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) == 0);
	api::Request req;
	static uint64_t id = 1;
	req.set_request_id(id++);
	req.mutable_register_host_buffer()->set_size(4096);
	cr_assert(c.send(req, fd));
	close(fd);
	api::Response resp;
	std::string why;
	cr_assert(c.receive(&resp, 10000, nullptr, &why), "RegisterHostBuffer not answered: %s", why.c_str());
	return resp;
}

void expect_exhausted(const api::Response &r, const char *resource, const char *what)
{
	cr_assert(r.has_error(), "%s was not refused", what);
	cr_assert(r.error().code() == api::ERROR_RESOURCE_EXHAUSTED, "%s: code %s (%s), expected RESOURCE_EXHAUSTED",
		  what, api::ErrorCode_Name(r.error().code()).c_str(), r.error().message().c_str());
	cr_assert(r.error().message().find(resource) != std::string::npos, "%s: the refusal does not name %s: %s", what,
		  resource, r.error().message().c_str());
}

const api::ResourceLimit *find_limit(const google::protobuf::RepeatedPtrField<api::ResourceLimit> &ls,
				     const std::string &resource)
{
	for (const auto &l : ls)
		if (l.resource() == resource)
			return &l;
	return nullptr;
}

} // namespace

TestSuite(limits, .fini = daemon_down, .timeout = 240);

// The attack of the issue: 4 KiB host buffers in a loop. The tenant stops at the
// built-in limit (4096), and another tenant can still create queues and register
// buffers.
Test(limits, host_buffer_flood_stops_at_the_default, .init = daemon_up)
{
	RawClient flood;
	cr_assert(flood.connect(g_daemon->socket_path()) && flood.hello());
	int registered = 0;
	api::Response r;
	for (; registered < 70000; ++registered) {
		r = register_4k(flood);
		if (r.has_error())
			break;
	}
	expect_exhausted(r, "host_buffers", "host buffer 4097");
	cr_assert(registered == 4096, "the flood registered %d host buffers before the refusal, the default is 4096",
		  registered);
	Tenant other;
	other.open("bystander");
	neuron_host_buffer *hb = nullptr;
	NEURON_OK_OR_FAIL(neuron_host_alloc(other.client, 4096, &hb));
	NEURON_OK_OR_FAIL(neuron_host_free(hb));
	other.close();
	daemon_finish();
}

// One tenant cannot take all HBM: it stops at 90% of a device (built-in) with a
// refusal naming hbm_bytes and the device, on each device, and the next tenant still
// gets memory on the same device.
Test(limits, one_tenant_cannot_take_all_hbm, .init = daemon_up)
{
	neuron_client *greedy = connect("greedy");
	const uint64_t device_bytes = 256ull << 20, chunk = 16ull << 20;
	for (uint32_t device = 0; device < 2; ++device) {
		uint64_t taken = 0, addr = 0;
		neuron_status s = NEURON_OK;
		for (int i = 0; i < 32 && s == NEURON_OK; ++i) {
			s = neuron_alloc(greedy, device, chunk, 0, &addr);
			if (s == NEURON_OK)
				taken += chunk;
		}
		cr_assert(s == NEURON_ERR_NO_MEMORY, "the greedy tenant was never refused on device %u (%s)", device,
			  describe(s).c_str());
		const std::string why = neuron_last_error();
		cr_assert(why.find("hbm_bytes") != std::string::npos && why.find("device " + std::to_string(device)) != std::string::npos,
			  "the refusal does not name the hbm_bytes limit and device %u: %s", device, why.c_str());
		cr_assert(taken <= device_bytes / 10 * 9 && taken + chunk > device_bytes / 10 * 9,
			  "the tenant took %llu MiB of device %u's 256, the limit is 90%%", (unsigned long long)(taken >> 20),
			  device);
		neuron_client *next = connect("next");
		NEURON_OK_OR_FAIL(neuron_alloc(next, device, chunk, 0, &addr));
		neuron_disconnect(next);
	}
	neuron_disconnect(greedy);
	daemon_finish();
}

static void up_with_limits()
{
	daemon_up_with({"--limit", "default.queues=8", "--limit", "training.hbm_bytes=64M", "--limit",
			"inference.host_buffers=3", "--limit", "uid:" + std::to_string(getuid()) + ".host_bytes=1M"});
}

// Configured limits apply, per pool and per class, and each refusal names its limit
// and where it comes from.
Test(limits, configured_limits_apply, .init = up_with_limits)
{
	RawClient c;
	cr_assert(c.connect(g_daemon->socket_path()) && c.hello());
	api::Response r;
	for (int i = 0; i < 9; ++i) {
		api::Request q;
		q.mutable_create_queue()->set_device(0);
		q.mutable_create_queue()->set_kind(api::QUEUE_KIND_DMA);
		cr_assert(c.call(q, &r));
		if (i < 8)
			cr_assert(r.has_create_queue(), "queue %d refused: %s", i, r.error().message().c_str());
	}
	expect_exhausted(r, "queues", "the 9th queue");
	cr_assert(r.error().message().find("default.queues=8") != std::string::npos,
		  "the refusal does not say which entry set the limit: %s", r.error().message().c_str());
	api::Request a;
	a.mutable_alloc_device()->set_device(1);
	a.mutable_alloc_device()->set_size(65ull << 20);
	cr_assert(c.call(a, &r));
	expect_exhausted(r, "hbm_bytes", "65 MiB for a training tenant limited to 64 MiB");
	// The uid class limits host bytes to 1 MiB: 256 buffers of 4 KiB, then no more.
	for (int i = 0; i < 256; ++i)
		cr_assert(!register_4k(c).has_error(), "host buffer %d refused below 1 MiB", i);
	expect_exhausted(register_4k(c), "host_bytes", "host bytes above the uid class's 1 MiB");
	// GetCapacity shows them (neuronctl pools).
	api::Request g;
	g.mutable_get_capacity();
	cr_assert(c.call(g, &r) && r.has_capacity());
	bool training = false, inference = false;
	for (const auto &p : r.capacity().pools()) {
		const auto *q = find_limit(p.limits(), "queues");
		cr_assert(q && !q->unlimited() && q->limit() == 8, "pool %s shows no queues limit of 8", p.name().c_str());
		if (p.pool() == api::POOL_TRAINING) {
			const auto *h = find_limit(p.limits(), "hbm_bytes");
			training = h && h->limit() == (64ull << 20);
		}
		if (p.pool() == api::POOL_INFERENCE) {
			const auto *h = find_limit(p.limits(), "host_buffers");
			inference = h && h->limit() == 3;
		}
	}
	cr_assert(training && inference, "GetCapacity does not show the pools' configured limits");
	cr_assert(r.capacity().limit_classes_size() == 1 &&
			  r.capacity().limit_classes(0).name() == "uid:" + std::to_string(getuid()),
		  "GetCapacity does not show the uid class");
	daemon_finish();
}

static std::string g_config_path;

static void up_with_config_file()
{
	char path[] = "/tmp/neurond-limits-XXXXXX";
	const int fd = mkstemp(path);
	cr_assert(fd >= 0);
	const std::string text = "# neurond config: per-tenant limits per pool and per class\n"
				 "limit = [\"inference.queues=2\", \"training.queues=3\", \"uid:" +
				 std::to_string(getuid() + 1) + ".queues=unlimited\"]\n";
	cr_assert(write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
	close(fd);
	g_config_path = path;
	daemon_up_with({"--config", g_config_path});
}

// The limits can live in neurond's config file (--config), per pool and per class.
Test(limits, limits_from_the_config_file, .init = up_with_config_file)
{
	for (const auto kind : {api::TENANT_KIND_INFERENCE, api::TENANT_KIND_TRAINING}) {
		RawClient c;
		cr_assert(c.connect(g_daemon->socket_path()));
		api::Request h;
		h.mutable_hello()->set_api_major(1);
		h.mutable_hello()->set_kind(kind);
		api::Response r;
		cr_assert(c.call(h, &r) && r.has_hello());
		const int allowed = kind == api::TENANT_KIND_INFERENCE ? 2 : 3;
		for (int i = 0; i <= allowed; ++i) {
			api::Request q;
			q.mutable_create_queue()->set_kind(api::QUEUE_KIND_DMA);
			cr_assert(c.call(q, &r));
			if (i < allowed)
				cr_assert(r.has_create_queue(), "queue %d refused: %s", i, r.error().message().c_str());
		}
		expect_exhausted(r, "queues", "one queue above the config file's limit");
		cr_assert(r.error().message().find(kind == api::TENANT_KIND_INFERENCE ? "inference.queues=2" : "training.queues=3") !=
				  std::string::npos,
			  "the refusal does not name the config entry: %s", r.error().message().c_str());
	}
	api::Request g;
	g.mutable_get_capacity();
	RawClient c;
	cr_assert(c.connect(g_daemon->socket_path()) && c.hello());
	api::Response r;
	cr_assert(c.call(g, &r) && r.has_capacity());
	cr_assert(r.capacity().limit_classes_size() == 1, "the uid class of the config file is not shown");
	unlink(g_config_path.c_str());
	daemon_finish();
}

// A bad --limit stops neurond at start with the reason.
Test(limits, bad_limit_is_refused_at_start)
{
	for (const char *bad : {"training.hbm_bytes=lots", "everyone.queues=4", "default.cores=4", "default.queues=4G",
				"group:no-such-group-here.queues=1"}) {
		auto settings = neuron::test::NeurondProcess::default_settings();
		settings.insert(settings.end(), {"--limit", bad});
		neuron::test::NeurondProcess d({}, settings);
		std::string error;
		cr_assert(d.spawn(&error), "%s", error.c_str());
		const auto e = d.wait_exit(10000);
		cr_assert(e.exited && !e.signaled && e.code != 0, "--limit %s: neurond did not fail (%s)", bad,
			  e.describe().c_str());
		cr_assert(d.log().find("limit '") != std::string::npos, "--limit %s: no reason in the log:\n%s", bad,
			  d.log_tail().c_str());
	}
}
