// Restart survival of one tenant (README "Restart with tenants alive"): what it
// keeps with the supervisor, its journal entry, and its adoption by a new neurond.
#include "fd_store.h"
#include "log.h"
#include "state_journal.h"
#include "tenant.h"
#include "text.h"

#include <algorithm>
#include <cstring>
#include <shared_mutex>
#include <sys/mman.h>
#include <unistd.h>

namespace neuron::daemon {

using backend::QueueKind;

namespace {

std::string ring_name(uint64_t queue) { return "ring." + std::to_string(queue); }
std::string undo_name(uint64_t queue) { return "undo." + std::to_string(queue); }
std::string file_name(uint64_t tenant, uint32_t device)
{
	return "accel." + std::to_string(tenant) + "." + std::to_string(device);
}

} // namespace

void Tenant::keep_in(FdStore *store, StateJournal *journal)
{
	store_ = store;
	journal_ = journal;
	keep_files();
}

// The context's files (kmd: the tenant's driver file per device, which holds its
// BOs and dies with its last descriptor) go to the supervisor before any request
// is answered: whatever the tenant allocates from here on outlives neurond.
void Tenant::keep_files()
{
	if (!store_ || !ctx_)
		return;
	const std::vector<int> fds = ctx_->kept_files();
	file_kept_.resize(std::max(file_kept_.size(), fds.size()), false);
	for (uint32_t d = 0; d < fds.size(); ++d) {
		if (file_kept_[d] || fds[d] < 0)
			continue;
		if (auto err = store_->store(file_name(id_, d), fds[d]); !err.empty()) {
			NLOG_WARN("state.keep_failed", log_fields() + " what=driver_file device=" + std::to_string(d) +
							       " error=" + quoted(err));
			continue;
		}
		file_kept_[d] = true;
	}
}

void Tenant::forget_kept_files()
{
	if (!store_)
		return;
	for (uint32_t d = 0; d < file_kept_.size(); ++d)
		if (file_kept_[d])
			store_->remove(file_name(id_, d));
	file_kept_.clear();
}

std::string Tenant::keep_queue(backend::Queue &q)
{
	uint32_t slot = 0;
	backend::QueueProgress *progress = journal_->claim_progress(&slot);
	if (!progress)
		return "neurond keeps progress for at most " + std::to_string(StateJournal::kProgressSlots) +
		       " queues across restarts, and all are taken";
	const int undo = memfd_create("neuron-undo", MFD_CLOEXEC);
	std::string err = undo < 0 ? std::string("memfd_create: ") + std::strerror(errno) : "";
	if (err.empty())
		err = store_->store(ring_name(q.id()), q.memfd());
	if (err.empty())
		err = store_->store(undo_name(q.id()), undo);
	if (!err.empty()) {
		if (undo >= 0)
			close(undo);
		journal_->release_progress(slot);
		return "cannot keep the queue's state with neurond's supervisor: " + err;
	}
	StateJournal *journal = journal_;
	q.keep(progress, undo, [journal, slot] { journal->release_progress(slot); });
	progress_slot_[q.id()] = slot;
	return {};
}

int Tenant::ring_fd(uint64_t queue_id) const
{
	auto it = queues_.find(queue_id);
	return it == queues_.end() ? -1 : it->second->memfd();
}

void Tenant::save(state::Tenant *out) const
{
	out->set_id(id_);
	out->set_resume_token(resume_token);
	out->set_pid(static_cast<uint32_t>(peer_.pid));
	out->set_uid(peer_.uid);
	out->set_gid(peer_.gid);
	out->set_command(peer_.command);
	out->set_client_name(client_name);
	out->set_kind(kind);
	out->set_weight(weight);
	out->set_admin(admin);
	out->set_used_cores(used_cores);
	out->set_next_host_handle(next_host_handle_);
	out->set_last_request_id(last_request_id);
	out->set_last_response(last_response);
	if (ctx_) {
		const backend::TenantMemory &m = ctx_->memory();
		std::shared_lock lock(m.mutex);
		for (const auto &[device, allocs] : m.device_allocations())
			for (const auto &[address, a] : allocs) {
				if (a.program) // kept with their program (save_programs); a deregistered one's go
					continue;
				auto *s = out->add_allocations();
				s->set_device(device);
				s->set_address(address);
				s->set_size(a.size);
				s->set_handle(a.handle);
			}
		for (const auto &[handle, bytes] : host_sizes_) {
			auto *h = out->add_host_buffers();
			h->set_handle(handle);
			h->set_size(bytes);
			if (const backend::HostRegion *r = m.host(handle))
				for (uint32_t import : r->handles)
					h->add_imports(import);
		}
	}
	save_programs(out);
	for (const auto &[id, q] : queues_) {
		auto it = progress_slot_.find(id);
		if (it == progress_slot_.end())
			continue;
		auto *s = out->add_queues();
		s->set_id(id);
		s->set_kind(q->kind() == QueueKind::Dma ? 2 : 1);
		s->set_device(q->device());
		s->set_core(q->core());
		s->set_slot_count(q->slot_count());
		s->set_progress_slot(it->second);
	}
}

std::unique_ptr<Tenant> Tenant::adopt(const state::Tenant &s, backend::DeviceBackend &devices, FdStore &store,
				      StateJournal &journal, std::string *problems)
{
	Peer peer;
	peer.pid = static_cast<pid_t>(s.pid());
	peer.uid = s.uid();
	peer.gid = s.gid();
	peer.command = s.command();
	// Its backend context on the files the earlier neurond kept (kmd: its driver
	// files, holding its BOs); a file not kept is opened anew (and kept below).
	std::vector<int> files(devices.device_count(), -1);
	bool any_file = false;
	for (uint32_t d = 0; d < files.size(); ++d) {
		files[d] = store.take(file_name(s.id(), d));
		any_file |= files[d] >= 0;
	}
	auto t = std::make_unique<Tenant>(s.id(), peer, devices, any_file ? files : std::vector<int>{});
	t->file_kept_.resize(files.size(), false);
	for (uint32_t d = 0; d < files.size(); ++d)
		t->file_kept_[d] = files[d] >= 0; // already in the store
	t->keep_in(&store, &journal);
	t->resume_token = s.resume_token();
	t->client_name = s.client_name();
	t->kind = s.kind() == api::TENANT_KIND_INFERENCE ? api::TENANT_KIND_INFERENCE : api::TENANT_KIND_TRAINING;
	t->weight = s.weight() ? s.weight() : 1;
	t->admin = s.admin();
	t->used_cores = s.used_cores();
	t->greeted = true;
	t->last_request_id = s.last_request_id();
	t->last_response = s.last_response();
	t->next_host_handle_ = s.next_host_handle();
	if (!t->ctx_) {
		*problems += "no backend context: " + t->ctx_error_ + "; ";
		return t;
	}
	for (const auto &a : s.allocations()) {
		if (auto r = t->ctx_->adopt_allocation(a.device(), a.address(), a.size(), a.handle())) {
			*problems += "allocation " + std::to_string(a.address()) + ": " + r->message + "; ";
			continue;
		}
		t->hbm_held_[a.device()] += a.size();
	}
	for (const auto &h : s.host_buffers()) {
		const int fd = store.take("host." + std::to_string(s.id()) + "." + std::to_string(h.handle()));
		if (fd < 0) {
			*problems += "host buffer " + std::to_string(h.handle()) + " was not kept; ";
			continue;
		}
		const std::vector<uint32_t> earlier(h.imports().begin(), h.imports().end());
		auto r = t->ctx_->adopt_host(fd, h.size(), h.handle(), earlier);
		close(fd); // the backend mapped it; the supervisor keeps its copy
		if (r) {
			*problems += "host buffer " + std::to_string(h.handle()) + ": " + r->message + "; ";
			continue;
		}
		t->host_sizes_[h.handle()] = h.size();
		++t->host_count_;
		t->host_bytes_ += h.size();
	}
	// Programs before queues: a queued EXEC_PROGRAM runs as soon as its queue is
	// attached.
	t->ctx_->programs().reserve(s.next_program_id());
	for (const auto &p : s.programs())
		t->adopt_program(p, store, problems);
	// Before the first queue runs (and makes buffers of its own): the kept files'
	// buffers that nothing above claimed were the old neurond's, made an instant
	// before it died, or its commands' chain state.
	if (const std::string closed = t->ctx_->close_unclaimed(); !closed.empty())
		NLOG_INFO("state.unclaimed_closed", t->log_fields() + " closed=" + quoted(closed));
	for (const auto &q : s.queues())
		t->adopt_queue(q, store, journal, problems);
	return t;
}

void Tenant::adopt_queue(const state::Queue &s, FdStore &store, StateJournal &journal, std::string *problems)
{
	const std::string what = "queue " + std::to_string(s.id()) + ": ";
	const int ring = store.take(ring_name(s.id()));
	const int undo = store.take(undo_name(s.id()));
	backend::QueueProgress *progress = journal.progress(s.progress_slot());
	if (ring < 0 || !progress || progress->queue_id != s.id() || s.device() >= devices_.device_count() ||
	    !ring::valid_slot_count(s.slot_count())) {
		*problems += what + "its ring or progress was not kept; ";
		if (ring >= 0)
			close(ring);
		if (undo >= 0)
			close(undo);
		return;
	}
	// The old neurond's buffer for the command it was running (kmd: chain state)
	// went with the unclaimed ones (Tenant::adopt); the command runs again from its
	// start with a new one.
	if (progress->scratch) {
		NLOG_INFO("state.scratch_closed", log_fields() + " queue=" + std::to_string(s.id()) +
							  " handle=" + std::to_string(progress->scratch));
		progress->scratch = 0;
	}
	const QueueKind kind = s.kind() == 2 ? QueueKind::Dma : QueueKind::Core;
	std::shared_ptr<backend::Queue> q;
	try {
		q = std::make_shared<backend::Queue>(s.id(), kind, s.device(), s.core(), s.slot_count(), ring, progress, undo,
						     ctx_, directory_);
	} catch (const std::exception &e) {
		*problems += what + e.what() + "; ";
		return;
	}
	const uint32_t slot = s.progress_slot();
	q->on_destroy([j = &journal, slot] { j->release_progress(slot); });
	progress_slot_[s.id()] = slot;
	// A command that was running: its written operands back as they were before
	// it, then it runs again from its start (backend/queue_keep.h).
	if (const uint64_t seq = q->interrupted(); seq && !q->faulted()) {
		std::string why;
		switch (q->undo()->restore(seq, s.device(), *ctx_, &why)) {
		case backend::UndoLog::Restore::Restored:
			NLOG_INFO("state.undo", log_fields() + " queue=" + std::to_string(s.id()) + " seq=" + std::to_string(seq) +
							" outcome=restored_then_rerun");
			break;
		case backend::UndoLog::Restore::NoRecord:
			NLOG_INFO("state.undo", log_fields() + " queue=" + std::to_string(s.id()) + " seq=" + std::to_string(seq) +
							" outcome=pure_rerun");
			break;
		case backend::UndoLog::Restore::Failed:
			q->fault(NEURON_FAULT_EXEC, seq, 0,
				 "command " + std::to_string(seq) + " was running when neurond restarted and cannot be run "
				 "again exactly: " + why);
			break;
		}
	}
	if (auto r = ctx_->attach_queue(*q)) {
		*problems += what + r->message + "; ";
		return;
	}
	directory_->add(q->id(), q);
	queues_[q->id()] = q;
	sched::CoreScheduler &sched = kind == QueueKind::Dma ? devices_.dma(s.device()) : devices_.cores(s.device());
	auto l = sched.attach(id_, kind == QueueKind::Dma ? 0 : s.core(), pool(), weight);
	queue_core_[q->id()] = l;
	sched.add_queue(*l, q);
}

} // namespace neuron::daemon
