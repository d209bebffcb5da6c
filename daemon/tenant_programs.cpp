// A tenant's programs (<neuron/program.h>): RegisterProgram decodes the message,
// has the runtime validate it (program/validate.h), allocates its buffers in the
// tenant's memory and stores it in the tenant's table, where engines find it when
// an EXEC_PROGRAM names it (tile programs, the kernels of its TILE_KERNEL nodes,
// are validated for the device's profile). The CPU time spent validating and the buffers are the
// tenant's (ListTenants reports both); the per-tenant program limit is
// NEURON_PROGRAMS_PER_TENANT. Control thread only.
#include "tenant.h"

#include "fd_store.h"
#include "log.h"
#include "program_decode.h"
#include "text.h"

#include <chip/profile.h>
#include <program/validate.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <shared_mutex>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace neuron::daemon {

namespace {

// A program sent in a memfd is at most this large (serialized).
constexpr uint64_t kMaxProgramImage = 64ull << 20;

uint64_t thread_cpu_ns()
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return uint64_t(t.tv_sec) * 1000000000ull + uint64_t(t.tv_nsec);
}

// The serialized Program in the request's memfd.
std::string read_image(int fd, api::Program *out)
{
	if (fd < 0)
		return "RegisterProgram says the program is in a memfd, and none came with it";
	struct stat st;
	if (fstat(fd, &st) != 0 || st.st_size <= 0)
		return "the program's memfd is empty or unreadable";
	if (static_cast<uint64_t>(st.st_size) > kMaxProgramImage)
		return "the program's memfd holds " + std::to_string(st.st_size) + " bytes; at most " +
		       std::to_string(kMaxProgramImage) + " are accepted";
	std::string bytes(static_cast<size_t>(st.st_size), '\0');
	size_t got = 0;
	while (got < bytes.size()) {
		const ssize_t n = pread(fd, bytes.data() + got, bytes.size() - got, static_cast<off_t>(got));
		if (n <= 0)
			return "cannot read the program's memfd";
		got += static_cast<size_t>(n);
	}
	if (!out->ParseFromString(bytes))
		return "the program's memfd does not hold a serialized Program message";
	return {};
}

std::string program_name(uint64_t tenant, uint64_t id)
{
	return "prog." + std::to_string(tenant) + "." + std::to_string(id);
}

} // namespace

std::string Tenant::build_program(const api::Program &source, program::Description *desc,
				  program::Program *out) const
{
	std::string why = decode_program(source, desc);
	if (why.empty() && desc->device >= devices_.device_count())
		why = "device " + std::to_string(desc->device) + " does not exist (this host has " +
		      std::to_string(devices_.device_count()) + ")";
	if (why.empty()) {
		// Tile programs are checked against the device's on-chip memories.
		const auto profile = chip::find_profile(devices_.describe(desc->device).profile);
		if (profile)
			desc->onchip = profile->onchip;
		why = program::validate(*desc, out);
	}
	return why;
}

std::string Tenant::register_program(const api::RegisterProgram &req, int fd, api::RegisterProgramReply *reply,
				     api::ErrorCode *code)
{
	*code = api::ERROR_INVALID_ARGUMENT;
	if (auto err = unready(code); !err.empty())
		return err;
	reap_programs();
	if (ctx_->programs().size() + retired_programs_.size() >= NEURON_PROGRAMS_PER_TENANT) {
		*code = api::ERROR_RESOURCE_EXHAUSTED;
		return "this tenant has " + std::to_string(NEURON_PROGRAMS_PER_TENANT) +
		       " programs registered (or awaiting their last replay): deregister some first";
	}
	const uint64_t cpu_start = thread_cpu_ns();
	api::Program image;
	const api::Program *source = &req.program();
	if (req.in_memfd()) {
		if (auto why = read_image(fd, &image); !why.empty())
			return why;
		source = &image;
	}
	program::Description desc;
	auto program = std::make_shared<program::Program>();
	const std::string why = build_program(*source, &desc, program.get());
	const uint64_t spent = thread_cpu_ns() - cpu_start;
	program_validation_ns_ += spent;
	if (!why.empty())
		return "program refused: " + why;
	// Its buffers, zeroed, in the tenant's memory (counted there and in its
	// hbm_bytes limit, like any allocation).
	uint64_t total = 0;
	for (uint64_t b : desc.buffer_bytes)
		total += b;
	if (auto err = over_limit(Resource::HbmBytes, hbm_held_[desc.device], total, code,
				  "on device " + std::to_string(desc.device) + " (the program's buffers)");
	    !err.empty())
		return "program refused: " + err;
	for (size_t b = 0; b < desc.buffer_bytes.size(); ++b) {
		uint64_t address = 0;
		if (auto r = ctx_->alloc(desc.device, desc.buffer_bytes[b], 256, &address)) {
			free_program_buffers(*program);
			*code = r->code == backend::Refusal::OutOfMemory ? api::ERROR_OUT_OF_MEMORY : api::ERROR_INVALID_ARGUMENT;
			return "program buffer " + std::to_string(b) + " (" + std::to_string(desc.buffer_bytes[b]) +
			       " bytes): " + r->message;
		}
		program->buffer_address.push_back(address);
		hbm_held_[desc.device] += desc.buffer_bytes[b];
	}
	const uint64_t id = ctx_->programs().add(program);
	{
		auto lock = ctx_->memory().lock_exclusive();
		for (uint64_t address : program->buffer_address)
			ctx_->memory().set_program(desc.device, address, id);
	}
	uint64_t bytes = 0;
	for (uint64_t b : desc.buffer_bytes)
		bytes += b;
	if (store_)
		keep_program(id, *source);
	reply->set_program_id(id);
	reply->set_buffer_bytes(bytes);
	reply->set_validation_ns(spent);
	reply->set_nodes(static_cast<uint32_t>(program->nodes.size()));
	NLOG_DEBUG("program.register", log_fields() + " program=" + std::to_string(id) + " nodes=" +
					       std::to_string(program->nodes.size()) + " args=" +
					       std::to_string(program->arg_bytes.size()) + " buffer_bytes=" +
					       std::to_string(bytes) + " validation_us=" + std::to_string(spent / 1000));
	return {};
}

std::string Tenant::deregister_program(uint64_t id, api::ErrorCode *code)
{
	*code = api::ERROR_NOT_FOUND;
	if (auto err = unready(code); !err.empty())
		return err;
	std::shared_ptr<const program::Program> p = ctx_->programs().remove(id);
	if (!p)
		return "program " + std::to_string(id) + " is not registered by this tenant";
	if (store_)
		store_->remove(program_name(id_, id));
	retired_programs_.push_back(std::move(p));
	reap_programs();
	return {};
}

void Tenant::reap_programs()
{
	// use_count 1: only this list holds it. The table no longer has it, so no
	// engine can take a new reference; the last replay dropped its own.
	std::erase_if(retired_programs_, [&](const std::shared_ptr<const program::Program> &p) {
		if (p.use_count() != 1)
			return false;
		free_program_buffers(*p);
		return true;
	});
}

void Tenant::free_program_buffers(const program::Program &p)
{
	for (size_t b = 0; b < p.buffer_address.size(); ++b) {
		const uint64_t address = p.buffer_address[b];
		uint64_t &held = hbm_held_[p.device];
		held -= std::min(held, p.buffer_bytes[b]);
		{
			auto lock = ctx_->memory().lock_exclusive();
			ctx_->memory().set_program(p.device, address, 0);
		}
		if (auto r = ctx_->free(p.device, address))
			NLOG_ERROR("program.free", log_fields() + " program=" + std::to_string(p.id) + " error=\"" +
							   r->message + "\"");
	}
}

// Restart survival (README "Restart with tenants alive"): the Program message in
// a memfd of its own kept with the supervisor (not in the journal, which is
// written whole after every request: an image may be 64 MiB), its id and buffers
// in the journal (Tenant::save). A new neurond validates it again and takes its
// buffers back where they are in the kept HBM.
void Tenant::keep_program(uint64_t id, const api::Program &source)
{
	std::string bytes;
	std::string err;
	const int fd = memfd_create("neuron-program", MFD_CLOEXEC);
	if (fd < 0 || !source.SerializeToString(&bytes))
		err = fd < 0 ? std::string("memfd_create: ") + std::strerror(errno) : "cannot serialize the program";
	for (size_t done = 0; err.empty() && done < bytes.size();) {
		const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
		if (n <= 0)
			err = std::string("write: ") + std::strerror(errno);
		else
			done += static_cast<size_t>(n);
	}
	if (err.empty())
		err = store_->store(program_name(id_, id), fd);
	if (fd >= 0)
		close(fd);
	if (!err.empty())
		NLOG_WARN("state.keep_failed", log_fields() + " what=program program=" + std::to_string(id) +
						       " error=" + quoted(err));
}

void Tenant::forget_kept_programs()
{
	if (!store_ || !ctx_)
		return;
	for (const auto &p : ctx_->programs().snapshot())
		store_->remove(program_name(id_, p->id));
}

void Tenant::save_programs(state::Tenant *out) const
{
	if (!ctx_)
		return;
	out->set_next_program_id(ctx_->programs().next_id());
	const backend::TenantMemory &m = ctx_->memory();
	std::shared_lock lock(m.mutex);
	for (const auto &p : ctx_->programs().snapshot()) {
		auto *s = out->add_programs();
		s->set_id(p->id);
		for (size_t b = 0; b < p->buffer_address.size(); ++b) {
			s->add_buffer_address(p->buffer_address[b]);
			// The backend's buffer behind it (kmd: a GEM handle in the kept file).
			uint64_t start = 0;
			const backend::DeviceAllocation *a =
				m.find_device(p->device, p->buffer_address[b], p->buffer_bytes[b], &start);
			s->add_buffer_handle(a ? a->handle : 0);
		}
	}
}

void Tenant::adopt_program(const state::Program &s, FdStore &store, std::string *problems)
{
	const std::string what = "program " + std::to_string(s.id()) + ": ";
	const int fd = store.take(program_name(id_, s.id()));
	if (fd < 0) {
		*problems += what + "its image was not kept; ";
		return;
	}
	api::Program image;
	std::string why = read_image(fd, &image);
	close(fd); // the supervisor keeps its copy
	program::Description desc;
	auto program = std::make_shared<program::Program>();
	const uint64_t cpu_start = thread_cpu_ns();
	if (why.empty())
		why = build_program(image, &desc, program.get());
	program_validation_ns_ += thread_cpu_ns() - cpu_start;
	if (why.empty() && static_cast<size_t>(s.buffer_address_size()) != desc.buffer_bytes.size())
		why = "the journal names " + std::to_string(s.buffer_address_size()) + " buffers, the program has " +
		      std::to_string(desc.buffer_bytes.size());
	if (why.empty() && s.buffer_handle_size() != 0 && s.buffer_handle_size() != s.buffer_address_size())
		why = "the journal names " + std::to_string(s.buffer_address_size()) + " buffer addresses and " +
		      std::to_string(s.buffer_handle_size()) + " handles";
	if (!why.empty()) {
		*problems += what + why + "; ";
		return;
	}
	for (size_t b = 0; b < desc.buffer_bytes.size(); ++b) {
		const uint32_t handle = s.buffer_handle_size() ? s.buffer_handle(int(b)) : 0;
		if (auto r = ctx_->adopt_allocation(desc.device, s.buffer_address(int(b)), desc.buffer_bytes[b], handle)) {
			*problems += what + "buffer " + std::to_string(b) + ": " + r->message + "; ";
			free_program_buffers(*program);
			return;
		}
		program->buffer_address.push_back(s.buffer_address(int(b)));
		hbm_held_[desc.device] += desc.buffer_bytes[b];
	}
	{
		auto lock = ctx_->memory().lock_exclusive();
		for (uint64_t address : program->buffer_address)
			ctx_->memory().set_program(desc.device, address, s.id());
	}
	ctx_->programs().adopt(std::move(program), s.id());
}

} // namespace neuron::daemon
