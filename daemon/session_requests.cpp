// A session's dispatch of tenant requests: hello, devices, memory, host buffers,
// queues, tenants (contracts/neuron.proto). The capacity requests are in
// session_capacity.cpp; the connection mechanics in session.cpp.
#include "log.h"
#include "server.h"
#include "session.h"
#include "text.h"

#include <algorithm>
#include <neuron/cmd.h>

#include <sys/random.h>
#include <unistd.h>

namespace neuron::daemon {

namespace {

constexpr uint32_t kApiMajor = 1;
// 1: capacity sharing (pools, loans, policy, events). 2: ListTenants paging, limits,
// redaction, events.lost. 3: programs (RegisterProgram, DeregisterProgram).
// 4: re-attach after a restart (Hello.resume_*, HelloReply.resume_token ...).
// 5: tile programs in a Program (TILE_KERNEL nodes, cmd ABI 1.6).
constexpr uint32_t kApiMinor = 5;
// A ListTenants page stays this far below the frame size.
constexpr size_t kPageMargin = 64 * 1024;

} // namespace

bool Session::refuse_observer(const char *what, api::Response *resp)
{
	if (!tenant_->observer)
		return false;
	fail(resp, api::ERROR_PERMISSION_DENIED,
	     std::string(what) + ": an observer (Hello.observer) only queries; it may not hold device memory, host "
				 "buffers or queues (connect as a tenant for that)");
	return true;
}

bool Session::dispatch(const api::Request &req, std::vector<int> &fds, api::Response *resp, int *reply_fd)
{
	Tenant &t = *tenant_;
	if (!t.greeted && !req.has_hello()) {
		fail(resp, api::ERROR_PROTOCOL, "the first request must be Hello");
		return false;
	}
	// Descriptors are bound to the frame they arrive with (contracts/neuron.proto).
	const bool takes_fd =
		req.has_register_host_buffer() || (req.has_register_program() && req.register_program().in_memfd());
	if (!fds.empty() && !takes_fd) {
		fail(resp, api::ERROR_PROTOCOL,
		     std::to_string(fds.size()) + " file descriptor(s) came with a request that takes none (only "
						  "RegisterHostBuffer and RegisterProgram with in_memfd take one, on "
						  "their own frame)");
		return false;
	}
	switch (req.body_case()) {
	case api::Request::kHello:
		return hello(req, resp, reply_fd);
	case api::Request::kPing:
		resp->mutable_pong();
		return true;
	case api::Request::kCollectiveJoin:
		// Answered when the group formed (or failed): the body stays unset now.
		server_.collectives().join(t, req.collective_join(), deferred_reply(req.request_id()));
		return true;
	case api::Request::kCollectiveRun:
		server_.collectives().run(t, req.collective_run(), deferred_reply(req.request_id()));
		return true;
	case api::Request::kCollectiveP2P:
		server_.collectives().p2p(t, req.collective_p2p(), deferred_reply(req.request_id()));
		return true;
	case api::Request::kListDevices:
		list_devices(resp);
		return true;
	case api::Request::kListTenants:
		list_tenants(req.list_tenants(), resp);
		return true;
	case api::Request::kAllocDevice: {
		if (refuse_observer("AllocDevice", resp))
			return true;
		const auto &a = req.alloc_device();
		uint64_t address = 0;
		api::ErrorCode code;
		if (auto err = t.alloc(a.device(), a.size(), a.alignment(), &address, &code); !err.empty()) {
			fail(resp, code, err);
			return true;
		}
		resp->mutable_alloc_device()->set_address(address);
		resp->mutable_alloc_device()->set_size(a.size());
		NLOG_DEBUG("memory.alloc", t.log_fields() + " device=" + std::to_string(a.device()) +
						   " bytes=" + std::to_string(a.size()));
		return true;
	}
	case api::Request::kFreeDevice: {
		const auto &f = req.free_device();
		api::ErrorCode code;
		if (auto err = t.free(f.device(), f.address(), &code); !err.empty())
			fail(resp, code, err);
		else
			resp->mutable_ok();
		return true;
	}
	case api::Request::kRegisterHostBuffer:
		return register_host(req, fds, resp);
	case api::Request::kUnregisterHostBuffer: {
		api::ErrorCode code;
		if (auto err = t.unregister_host(req.unregister_host_buffer().handle(), &code); !err.empty())
			fail(resp, code, err);
		else
			resp->mutable_ok();
		return true;
	}
	case api::Request::kCreateQueue:
		if (!refuse_observer("CreateQueue", resp))
			create_queue(req.create_queue(), resp, reply_fd);
		return true;
	case api::Request::kDestroyQueue:
		if (auto err = t.destroy_queue(req.destroy_queue().queue_id()); !err.empty())
			fail(resp, api::ERROR_NOT_FOUND, err);
		else
			resp->mutable_ok();
		return true;
	case api::Request::kRegisterProgram:
		return register_program(req, fds, resp);
	case api::Request::kDeregisterProgram: {
		api::ErrorCode code;
		if (auto err = t.deregister_program(req.deregister_program().program_id(), &code); !err.empty())
			fail(resp, code, err);
		else
			resp->mutable_ok();
		return true;
	}
	case api::Request::kGetCapacity:
	case api::Request::kLend:
	case api::Request::kReclaim:
	case api::Request::kSetPolicy:
	case api::Request::kSetPool:
	case api::Request::kSubscribeEvents:
	case api::Request::kSetWeight:
		return dispatch_capacity(req, resp);
	case api::Request::BODY_NOT_SET:
		break;
	}
	// Unknown to this daemon (a newer client's additive request): say so, carry on.
	fail(resp, api::ERROR_INVALID_ARGUMENT, "request type not supported by this neurond (API " +
							std::to_string(kApiMajor) + "." + std::to_string(kApiMinor) + ")");
	return true;
}

namespace {

void fill_hello_reply(const Tenant &t, api::HelloReply *r)
{
	r->set_api_major(kApiMajor);
	r->set_api_minor(kApiMinor);
	r->set_daemon_version(NEURON_VERSION);
	r->set_tenant_id(t.id());
	r->set_cmd_abi_major(NEURON_CMD_ABI_MAJOR);
	r->set_cmd_abi_minor(NEURON_CMD_ABI_MINOR);
	r->set_resume_token(t.resume_token);
}

std::string random_token()
{
	std::string token(16, '\0');
	size_t got = 0;
	while (got < token.size()) {
		const ssize_t n = getrandom(token.data() + got, token.size() - got, 0);
		if (n <= 0)
			return {}; // no token: this tenant cannot resume (never a guessable one)
		got += size_t(n);
	}
	return token;
}

} // namespace

bool Session::resume(const api::Hello &h, api::Response *resp, int *reply_fd)
{
	const uint64_t old_id = tenant_->id();
	std::string why;
	std::unique_ptr<Tenant> t = server_.claim_orphan(h.resume_tenant_id(), h.resume_token(), tenant_->peer().uid, &why);
	if (!t) {
		fail(resp, api::ERROR_NOT_FOUND, why);
		return false;
	}
	t->reattach(tenant_->peer());
	tenant_ = std::move(t);
	server_.rekey(old_id, tenant_->id());
	auto *r = resp->mutable_hello();
	fill_hello_reply(*tenant_, r);
	r->set_resumed(true);
	r->set_last_request_id(tenant_->last_request_id);
	r->set_last_response(tenant_->last_response);
	api::Response last;
	if (last.ParseFromString(tenant_->last_response) && last.has_create_queue())
		*reply_fd = tenant_->ring_fd(last.create_queue().queue_id());
	NLOG_INFO("tenant.resume", tenant_->log_fields() + " name=" + quoted_escaped(tenant_->client_name) +
					   " last_request=" + std::to_string(tenant_->last_request_id));
	server_.save_state();
	return true;
}

bool Session::hello(const api::Request &req, api::Response *resp, int *reply_fd)
{
	Tenant &t = *tenant_;
	const auto &h = req.hello();
	if (t.greeted) {
		fail(resp, api::ERROR_PROTOCOL, "Hello sent twice");
		return false;
	}
	if (h.api_major() != kApiMajor) {
		fail(resp, api::ERROR_VERSION_MISMATCH,
		     "client speaks API " + std::to_string(h.api_major()) + ".x, this neurond speaks " +
			     std::to_string(kApiMajor) + ".x: install matching libneuron and neurond versions");
		return false;
	}
	if (h.resume_tenant_id() != 0)
		return resume(h, resp, reply_fd);
	t.greeted = true;
	t.client_name = escape_text(h.client_name(), 63);
	t.kind = h.kind() == api::TENANT_KIND_INFERENCE ? api::TENANT_KIND_INFERENCE : api::TENANT_KIND_TRAINING;
	t.observer = h.observer();
	t.weight = h.weight() == 0 ? 1 : std::min<uint32_t>(h.weight(), 1000);
	t.limits = server_.limits().for_tenant(t.peer(), t.pool(), &t.limit_class);
	if (server_.journal() && !t.observer)
		t.resume_token = random_token();
	fill_hello_reply(t, resp->mutable_hello());
	NLOG_INFO("tenant.hello", t.log_fields() + " name=" + quoted_escaped(t.client_name) + " kind=" +
					  api::TenantKind_Name(t.kind) + (t.observer ? " observer=1" : "") +
					  " limits=" + t.limit_class);
	if (!t.observer) {
		api::Event ev = EventBus::make("tenant.connect", 0, -1,
					       std::string(sched::pool_name(t.pool())) + " pid " + std::to_string(t.peer().pid));
		ev.set_tenant_id(t.id());
		ev.set_client_name(t.client_name);
		server_.events().publish(ev);
		server_.save_state();
	}
	return true;
}

void Session::list_devices(api::Response *resp)
{
	auto *r = resp->mutable_list_devices();
	backend::DeviceBackend &devices = server_.devices();
	const uint32_t n = devices.device_count();
	for (uint32_t i = 0; i < n; ++i) {
		backend::DeviceInfo d;
		try {
			d = devices.describe(i);
		} catch (const std::exception &e) {
			fail(resp, api::ERROR_INTERNAL, "cannot describe device " + std::to_string(i) + ": " + e.what());
			return;
		}
		auto *info = r->add_devices();
		info->set_index(d.index);
		info->set_profile(d.profile);
		info->set_core_count(d.cores);
		info->set_hbm_bytes(d.hbm_bytes);
		info->set_hbm_used_bytes(d.hbm_used_bytes);
		info->set_hbm_largest_free_bytes(d.hbm_largest_free_bytes);
		info->set_pci_bdf(d.pci_bdf);
		info->set_numa_node(d.numa_node);
		info->set_backend(devices.name());
		// The simulated devices form a ring, as NeuronLink neighbours do.
		if (n > 1) {
			info->add_connected_devices((i + n - 1) % n);
			if (n > 2)
				info->add_connected_devices((i + 1) % n);
		}
	}
}

void Session::list_tenants(const api::ListTenants &req, api::Response *resp)
{
	auto *r = resp->mutable_list_tenants();
	size_t bytes = 0, count = 0;
	const auto &sessions = server_.sessions();
	for (auto it = sessions.upper_bound(req.start_after()); it != sessions.end(); ++it) {
		const Tenant &other = it->second->tenant();
		if (!other.greeted || other.observer)
			continue;
		api::TenantInfo info;
		other.fill_info(&info);
		if (!may_see(other)) {
			info.clear_command();
			info.clear_client_name();
			info.set_redacted(true);
		}
		const size_t more = info.ByteSizeLong() + 8;
		if ((req.max_tenants() && count == req.max_tenants()) || bytes + more > wire::kMaxFrame - kPageMargin) {
			r->set_next_start_after(r->tenants(r->tenants_size() - 1).tenant_id());
			return;
		}
		*r->add_tenants() = std::move(info);
		bytes += more;
		++count;
	}
}

bool Session::register_host(const api::Request &req, std::vector<int> &fds, api::Response *resp)
{
	if (refuse_observer("RegisterHostBuffer", resp))
		return true;
	if (fds.size() > 1) {
		fail(resp, api::ERROR_PROTOCOL, "RegisterHostBuffer takes one file descriptor, " +
							std::to_string(fds.size()) + " came with it");
		return false;
	}
	const int fd = fds.empty() ? -1 : fds.front();
	const size_t total = server_.host_buffers();
	if (total >= server_.max_host_buffers()) {
		fail(resp, api::ERROR_RESOURCE_EXHAUSTED,
		     "neurond maps " + std::to_string(total) + " host buffers, its limit for all tenants together (half "
		     "of vm.max_map_count): free some, or raise vm.max_map_count");
		return true;
	}
	uint32_t handle = 0;
	api::ErrorCode code;
	const std::string err = tenant_->register_host(fd, req.register_host_buffer().size(), &handle, &code);
	if (!err.empty())
		fail(resp, code, err);
	else
		resp->mutable_register_host_buffer()->set_handle(handle);
	return true; // the caller closes fd: the backend mapped or imported what it needs
}

bool Session::register_program(const api::Request &req, std::vector<int> &fds, api::Response *resp)
{
	if (refuse_observer("RegisterProgram", resp))
		return true;
	if (fds.size() > 1) {
		fail(resp, api::ERROR_PROTOCOL, "RegisterProgram takes at most one file descriptor, " +
							std::to_string(fds.size()) + " came with it");
		return false;
	}
	api::ErrorCode code;
	api::RegisterProgramReply reply;
	const int fd = fds.empty() ? -1 : fds.front();
	if (auto err = tenant_->register_program(req.register_program(), fd, &reply, &code); !err.empty())
		fail(resp, code, err);
	else
		*resp->mutable_register_program() = reply;
	return true; // the caller closes fd
}

void Session::create_queue(const api::CreateQueue &c, api::Response *resp, int *reply_fd)
{
	Tenant &t = *tenant_;
	std::shared_ptr<backend::Queue> q;
	api::ErrorCode code;
	if (auto err = t.create_queue(c.device(), c.kind(), c.core(), c.slot_count(), &q, &code); !err.empty()) {
		fail(resp, code, err);
		return;
	}
	auto *r = resp->mutable_create_queue();
	r->set_queue_id(q->id());
	r->set_slot_count(q->slot_count());
	r->set_ring_bytes(q->ring_bytes());
	*reply_fd = q->memfd();
	NLOG_INFO("queue.create", t.log_fields() + " queue=" + std::to_string(q->id()) + " device=" +
					  std::to_string(q->device()) +
					  (q->kind() == backend::QueueKind::Dma ? " engine=dma" : " core=" + std::to_string(q->core())));
}

} // namespace neuron::daemon
