#include "session.h"

#include "admin.h"
#include "log.h"
#include "server.h"

#include <neuron/cmd.h>

#include <algorithm>
#include <fstream>
#include <sys/socket.h>
#include <unistd.h>

namespace neuron::daemon {

namespace {

constexpr uint32_t kApiMajor = 1;
constexpr uint32_t kApiMinor = 1; // 1: capacity sharing (pools, loans, policy, events)
constexpr size_t kMaxPendingFds = 16;

Peer peer_of(int fd)
{
	Peer p;
	struct ucred cred = {};
	socklen_t len = sizeof(cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
		p.pid = cred.pid;
		p.uid = cred.uid;
		p.gid = cred.gid;
	}
	std::ifstream cmdline("/proc/" + std::to_string(p.pid) + "/cmdline", std::ios::binary);
	std::string raw((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
	for (char &ch : raw)
		if (ch == '\0')
			ch = ' ';
	while (!raw.empty() && raw.back() == ' ')
		raw.pop_back();
	p.command = raw.substr(0, 255);
	return p;
}

} // namespace

Session::Session(boost::asio::local::stream_protocol::socket socket, Server &server, uint64_t id)
	: socket_(std::move(socket)), server_(server),
	  tenant_(std::make_unique<Tenant>(id, peer_of(socket_.native_handle()), server.devices()))
{
	socket_.non_blocking(true);
	tenant_->admin = peer_is_admin(tenant_->peer(), server.config().admin_group);
}

Session::~Session()
{
	for (int fd : fds_)
		::close(fd);
}

void Session::start()
{
	NLOG_INFO("tenant.connect", tenant_->log_fields() + " uid=" + std::to_string(tenant_->peer().uid) +
					    " command=\"" + tenant_->peer().command + "\"");
	read_more();
}

void Session::close(const std::string &reason)
{
	if (closed_)
		return;
	closed_ = true;
	if (subscribed_)
		server_.events().unsubscribe(tenant_->id());
	boost::system::error_code ignored;
	socket_.close(ignored);
	tenant_->release_all();
	NLOG_INFO("tenant.disconnect", tenant_->log_fields() + " reason=\"" + reason + "\"");
	if (tenant_->greeted && !tenant_->observer) {
		api::Event ev = EventBus::make("tenant.exit", 0, -1,
					       "pid " + std::to_string(tenant_->peer().pid) + " (" + reason + ")");
		ev.set_tenant_id(tenant_->id());
		server_.events().publish(ev);
		// Its cores are free at once; loans to a pool left without work go home.
		if (tenant_->used_cores)
			server_.tenant_gone();
	}
	server_.forget(tenant_->id()); // may destroy *this: nothing after this line
}

void Session::read_more()
{
	auto self = shared_from_this();
	socket_.async_wait(boost::asio::socket_base::wait_read, [self](const boost::system::error_code &ec) {
		if (self->closed_)
			return;
		if (ec) {
			self->close("socket error: " + ec.message());
			return;
		}
		const long n = wire::receive_some(self->socket_.native_handle(), self->decoder_, &self->fds_, true);
		if (n == 0) {
			self->close("peer closed the connection");
			return;
		}
		if (n < 0 && n != -EAGAIN) {
			self->close("receive failed: " + std::string(std::strerror(static_cast<int>(-n))));
			return;
		}
		if (self->process_frames())
			self->read_more();
	});
}

bool Session::process_frames()
{
	for (;;) {
		std::string payload, error;
		const auto status = decoder_.next(&payload, &error);
		if (status == wire::FrameDecoder::Status::NeedMore)
			return true;
		api::Response resp;
		if (status == wire::FrameDecoder::Status::Error) {
			fail(&resp, api::ERROR_PROTOCOL, "malformed frame: " + error);
			reply(resp, -1);
			close("protocol error: " + error);
			return false;
		}
		api::Request req;
		if (!req.ParseFromString(payload)) {
			fail(&resp, api::ERROR_PROTOCOL, "frame does not hold a valid Request message");
			reply(resp, -1);
			close("protocol error: unparsable request");
			return false;
		}
		if (fds_.size() > kMaxPendingFds) {
			fail(&resp, api::ERROR_PROTOCOL, "too many file descriptors sent without a request that takes them");
			reply(resp, -1);
			close("protocol error: descriptor flood");
			return false;
		}
		resp.set_request_id(req.request_id());
		int reply_fd = -1;
		const bool keep = dispatch(req, &resp, &reply_fd);
		reply(resp, reply_fd);
		if (!keep || closed_) {
			close(resp.has_error() ? resp.error().message() : "closed");
			return false;
		}
	}
}

void Session::fail(api::Response *resp, api::ErrorCode code, const std::string &message)
{
	resp->mutable_error()->set_code(code);
	resp->mutable_error()->set_message(message);
	if (code != api::ERROR_NONE)
		NLOG_DEBUG("request.error", tenant_->log_fields() + " code=" + api::ErrorCode_Name(code) +
						    " message=\"" + message + "\"");
}

void Session::reply(const api::Response &resp, int fd)
{
	if (closed_)
		return;
	const int err = wire::send_frame(socket_.native_handle(), wire::encode_frame(resp), fd, true);
	// A client that does not read its replies fills the socket buffer; it is broken,
	// and the daemon will not block on it.
	if (err != 0)
		close("cannot send reply: " + std::string(std::strerror(err)));
}

bool Session::dispatch(const api::Request &req, api::Response *resp, int *reply_fd)
{
	Tenant &t = *tenant_;
	if (!t.greeted && !req.has_hello()) {
		fail(resp, api::ERROR_PROTOCOL, "the first request must be Hello");
		return false;
	}
	switch (req.body_case()) {
	case api::Request::kHello: {
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
		t.greeted = true;
		t.client_name = h.client_name().substr(0, 63);
		t.kind = h.kind() == api::TENANT_KIND_INFERENCE ? api::TENANT_KIND_INFERENCE : api::TENANT_KIND_TRAINING;
		t.observer = h.observer();
		t.weight = h.weight() == 0 ? 1 : std::min<uint32_t>(h.weight(), 1000);
		auto *r = resp->mutable_hello();
		r->set_api_major(kApiMajor);
		r->set_api_minor(kApiMinor);
		r->set_daemon_version(NEURON_VERSION);
		r->set_tenant_id(t.id());
		r->set_cmd_abi_major(NEURON_CMD_ABI_MAJOR);
		r->set_cmd_abi_minor(NEURON_CMD_ABI_MINOR);
		NLOG_INFO("tenant.hello", t.log_fields() + " name=\"" + t.client_name + "\" kind=" +
						  api::TenantKind_Name(t.kind) + (t.observer ? " observer=1" : ""));
		if (!t.observer) {
			api::Event ev = EventBus::make("tenant.connect", 0, -1,
						       std::string(sched::pool_name(t.pool())) + " pid " +
							       std::to_string(t.peer().pid) + " \"" + t.client_name + "\"");
			ev.set_tenant_id(t.id());
			server_.events().publish(ev);
		}
		return true;
	}
	case api::Request::kPing:
		resp->mutable_pong();
		return true;
	case api::Request::kListDevices: {
		auto *r = resp->mutable_list_devices();
		backend::DeviceBackend &devices = server_.devices();
		const uint32_t n = devices.device_count();
		for (uint32_t i = 0; i < n; ++i) {
			backend::DeviceInfo d;
			try {
				d = devices.describe(i);
			} catch (const std::exception &e) {
				fail(resp, api::ERROR_INTERNAL, "cannot describe device " + std::to_string(i) + ": " + e.what());
				return true;
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
		return true;
	}
	case api::Request::kListTenants: {
		auto *r = resp->mutable_list_tenants();
		for (const auto &[id, s] : server_.sessions())
			if (s->tenant_->greeted && !s->tenant_->observer)
				s->tenant_->fill_info(r->add_tenants());
		return true;
	}
	case api::Request::kAllocDevice: {
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
	case api::Request::kRegisterHostBuffer: {
		int fd = -1;
		if (!fds_.empty()) {
			fd = fds_.front();
			fds_.pop_front();
		}
		uint32_t handle = 0;
		api::ErrorCode code;
		const std::string err = t.register_host(fd, req.register_host_buffer().size(), &handle, &code);
		if (fd >= 0)
			::close(fd);
		if (!err.empty())
			fail(resp, code, err);
		else
			resp->mutable_register_host_buffer()->set_handle(handle);
		return true;
	}
	case api::Request::kUnregisterHostBuffer: {
		api::ErrorCode code;
		if (auto err = t.unregister_host(req.unregister_host_buffer().handle(), &code); !err.empty())
			fail(resp, code, err);
		else
			resp->mutable_ok();
		return true;
	}
	case api::Request::kCreateQueue: {
		const auto &c = req.create_queue();
		std::shared_ptr<backend::Queue> q;
		std::string err;
		try {
			err = t.create_queue(c.device(), c.kind(), c.core(), c.slot_count(), &q);
		} catch (const std::exception &e) {
			fail(resp, api::ERROR_RESOURCE_EXHAUSTED, std::string("cannot create the queue: ") + e.what());
			return true;
		}
		if (!err.empty()) {
			fail(resp, api::ERROR_INVALID_ARGUMENT, err);
			return true;
		}
		auto *r = resp->mutable_create_queue();
		r->set_queue_id(q->id());
		r->set_slot_count(q->slot_count());
		r->set_ring_bytes(q->ring_bytes());
		*reply_fd = q->memfd();
		NLOG_INFO("queue.create", t.log_fields() + " queue=" + std::to_string(q->id()) + " device=" +
						  std::to_string(q->device()) +
						  (q->kind() == backend::QueueKind::Dma ? " engine=dma" : " core=" + std::to_string(q->core())));
		return true;
	}
	case api::Request::kDestroyQueue:
		if (auto err = t.destroy_queue(req.destroy_queue().queue_id()); !err.empty())
			fail(resp, api::ERROR_NOT_FOUND, err);
		else
			resp->mutable_ok();
		return true;
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

} // namespace neuron::daemon
