// The capacity part of a session's dispatch: pools, loans, policy and the event
// stream (contracts/neuron.proto, "Capacity sharing"). Split from session.cpp to keep
// one concept per file.
#include "admin.h"
#include "log.h"
#include "server.h"
#include "session.h"

namespace neuron::daemon {

namespace {
// Same cap as Hello.weight (session.cpp): a 1000:1 share is already starvation.
constexpr uint32_t kMaxWeight = 1000;
} // namespace

bool Session::require_admin(const std::string &what, api::Response *resp)
{
	if (tenant_->admin)
		return true;
	fail(resp, api::ERROR_PERMISSION_DENIED, admin_refusal(what, tenant_->peer(), server_.config().admin_group));
	NLOG_WARN("admin.refused", tenant_->log_fields() + " uid=" + std::to_string(tenant_->peer().uid) +
					   " request=" + what);
	return false;
}

bool Session::dispatch_capacity(const api::Request &req, api::Response *resp)
{
	Capacity &cap = server_.capacity();
	switch (req.body_case()) {
	case api::Request::kGetCapacity: {
		auto *r = resp->mutable_capacity();
		cap.fill(r, server_.tenants());
		*r->mutable_policy() = server_.policy().config();
		for (auto &p : *r->mutable_pools())
			if (auto pool = from_api(p.pool()))
				server_.limits().fill(&p, *pool);
		server_.limits().fill_classes(r);
		return true;
	}
	case api::Request::kLend: {
		if (!require_admin("Lend", resp))
			return true;
		const auto &l = req.lend();
		auto from = from_api(l.from());
		if (!from) {
			fail(resp, api::ERROR_INVALID_ARGUMENT, "Lend.from must name a pool: inference or training");
			return true;
		}
		std::vector<Loan> loans;
		std::optional<uint32_t> device;
		if (l.has_device())
			device = l.device();
		if (auto err = cap.lend(*from, l.count(), device, "manual", &loans); !err.empty()) {
			fail(resp, api::ERROR_RESOURCE_EXHAUSTED, err);
			return true;
		}
		auto *r = resp->mutable_loans();
		for (const Loan &x : loans)
			Capacity::fill_loan(x, r->add_loans());
		return true;
	}
	case api::Request::kReclaim: {
		if (!require_admin("Reclaim", resp))
			return true;
		const auto &c = req.reclaim();
		auto pool = from_api(c.pool());
		if (!pool) {
			fail(resp, api::ERROR_INVALID_ARGUMENT, "Reclaim.pool must name the lender: inference or training");
			return true;
		}
		if (c.deadline_ms() > 60000) {
			fail(resp, api::ERROR_INVALID_ARGUMENT, "Reclaim.deadline_ms must be at most 60000");
			return true;
		}
		std::vector<Loan> loans;
		std::optional<uint32_t> device;
		if (c.has_device())
			device = c.device();
		const std::string err = cap.reclaim(*pool, c.count(), device, c.deadline_ms(), "manual", &loans);
		if (!err.empty() && loans.empty()) {
			fail(resp, api::ERROR_NOT_FOUND, err);
			return true;
		}
		if (!err.empty()) {
			fail(resp, api::ERROR_INTERNAL, err);
			return true;
		}
		auto *r = resp->mutable_loans();
		for (const Loan &x : loans)
			Capacity::fill_loan(x, r->add_loans());
		return true;
	}
	case api::Request::kSetPolicy: {
		if (!require_admin("SetPolicy", resp))
			return true;
		if (auto err = server_.policy().set(req.set_policy().policy()); !err.empty()) {
			fail(resp, api::ERROR_INVALID_ARGUMENT, err);
		} else {
			server_.save_state(); // a restart keeps it (settings_keep.cpp)
			resp->mutable_ok();
		}
		return true;
	}
	case api::Request::kSetPool: {
		if (!require_admin("SetPool", resp))
			return true;
		const auto &p = req.set_pool();
		auto pool = from_api(p.pool());
		if (!pool) {
			fail(resp, api::ERROR_INVALID_ARGUMENT, "SetPool.pool must be inference or training");
			return true;
		}
		if (auto err = cap.set_limits(*pool, p.min_cores(), p.max_cores()); !err.empty()) {
			fail(resp, api::ERROR_INVALID_ARGUMENT, err);
		} else {
			server_.save_state();
			resp->mutable_ok();
		}
		return true;
	}
	case api::Request::kSetWeight: {
		// A tenant's own weight, like Hello.weight: no admin right needed. It only
		// orders the tenant against others of its class; inference still goes first.
		const uint32_t w = req.set_weight().weight();
		if (w < 1 || w > kMaxWeight) {
			fail(resp, api::ERROR_INVALID_ARGUMENT,
			     "SetWeight.weight must be 1.." + std::to_string(kMaxWeight) + ", got " + std::to_string(w));
			return true;
		}
		tenant_->weight = w;
		backend::DeviceBackend &devices = server_.devices();
		for (uint32_t d = 0; d < devices.device_count(); ++d)
			for (const auto &l : devices.cores(d).logical_cores())
				if (l->tenant() == tenant_->id())
					l->set_weight(w);
		NLOG_INFO("tenant.weight", tenant_->log_fields() + " weight=" + std::to_string(w));
		resp->mutable_ok();
		return true;
	}
	case api::Request::kSubscribeEvents: {
		resp->mutable_ok();
		if (subscribed_)
			return true;
		subscribed_ = true;
		// The reply goes first; replay and live events follow it on this connection.
		auto self = shared_from_this();
		const bool replay = req.subscribe_events().replay();
		boost::asio::post(socket_.get_executor(), [self, replay] {
			if (self->closed_)
				return;
			if (replay)
				for (const auto &ev : self->server_.events().recent())
					self->push_event(ev);
			std::weak_ptr<Session> weak = self;
			self->server_.events().subscribe(self->tenant_->id(), [weak](const api::Event &ev) {
				if (auto s = weak.lock(); s && !s->closed_)
					s->push_event(ev);
			});
		});
		return true;
	}
	default:
		break;
	}
	fail(resp, api::ERROR_INTERNAL, "capacity dispatch got a request it does not handle");
	return true;
}

} // namespace neuron::daemon
