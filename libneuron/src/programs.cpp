// Programs (<neuron/program.h>): registration over the control plane. The
// replay itself is a ring submission (neuron_submit_program, queue.cpp).
#include "internal.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sys/mman.h>
#include <unistd.h>

using namespace neuron;
using neuron::client::call;
using neuron::client::fail;

namespace {

// Programs larger than this go in a memfd (a frame holds at most 1 MiB).
constexpr size_t kInlineLimit = 768 << 10;

void encode_node(const neuron_program_node &n, api::ProgramNode *out)
{
	const neuron_cmd &c = n.cmd;
	out->set_opcode(c.opcode);
	out->set_flags(c.flags);
	out->set_user_tag(c.user_tag);
	int last_f = -1, last_i = -1;
	for (int k = 0; k < NEURON_MAX_SCALARS; ++k) {
		if (c.fscalars.bits[k])
			last_f = k;
		if (c.iscalars[k])
			last_i = k;
	}
	for (int k = 0; k <= last_f; ++k)
		out->add_fscalars(c.fscalars.bits[k]);
	for (int k = 0; k <= last_i; ++k)
		out->add_iscalars(c.iscalars[k]);
	for (int k = 0; k < c.num_operands && k < NEURON_MAX_OPERANDS; ++k) {
		const neuron_tensor_desc &d = c.operands[k];
		auto *o = out->add_operands();
		o->set_space(d.mem_space);
		o->set_index(d.host_buffer);
		o->set_offset(d.addr);
		o->set_dtype(d.dtype);
		for (int i = 0; i < d.ndim && i < NEURON_MAX_DIMS; ++i) {
			o->add_sizes(d.sizes[i]);
			o->add_strides(d.strides[i]);
		}
	}
	for (uint32_t k = 0; k < n.dep_count; ++k)
		out->add_deps(n.deps[k]);
	if (n.label)
		out->set_label(n.label);
}

// NEURON_PROGRAM_DUMP_DIR=DIR: each program registered is also written to
// DIR/program-<pid>-<n>.pb, the serialized Program message as sent (`protoc
// --decode=neuron.api.Program contracts/neuron.proto` reads it; the fuzz-program
// target's seeds are such files). A debugging aid: a failure to write says so
// on stderr and registration carries on.
void dump_program(const api::Program &p)
{
	const char *dir = std::getenv("NEURON_PROGRAM_DUMP_DIR");
	if (!dir || !*dir)
		return;
	static std::atomic<unsigned> count{0};
	const std::string path = std::string(dir) + "/program-" + std::to_string(getpid()) + "-" +
				 std::to_string(count.fetch_add(1)) + ".pb";
	std::ofstream out(path, std::ios::binary | std::ios::trunc);
	if (!(out << p.SerializeAsString()))
		std::fprintf(stderr, "libneuron: NEURON_PROGRAM_DUMP_DIR: cannot write %s\n", path.c_str());
}

// A sealed memfd holding `bytes`, or -1 (errno set).
int memfd_with(const std::string &bytes)
{
	const int fd = memfd_create("neuron-program", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -1;
	size_t done = 0;
	while (done < bytes.size()) {
		const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
		if (n <= 0) {
			const int e = errno;
			close(fd);
			errno = e;
			return -1;
		}
		done += static_cast<size_t>(n);
	}
	fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
	return fd;
}

} // namespace

extern "C" neuron_status neuron_program_register(neuron_client *c, const struct neuron_program_desc *desc,
						 uint64_t *program)
{
	return neuron_program_register_kernels(c, desc, nullptr, 0, program);
}

extern "C" neuron_status neuron_program_register_kernels(neuron_client *c, const struct neuron_program_desc *desc,
							 const struct neuron_tile_image *tiles, uint32_t tile_count,
							 uint64_t *program)
{
	if (!c || !desc || !program || (desc->node_count && !desc->nodes) || (desc->arg_count && !desc->arg_bytes) ||
	    (desc->buffer_count && !desc->buffer_bytes) || (tile_count && !tiles))
		return fail(NEURON_ERR_INVALID, "neuron_program_register: NULL argument (client, desc, program, or an "
						"array whose count is not 0)");
	api::Request req;
	api::Program *p = req.mutable_register_program()->mutable_program();
	p->set_device(desc->device);
	for (uint32_t k = 0; k < desc->arg_count; ++k)
		p->add_arg_bytes(desc->arg_bytes[k]);
	for (uint32_t k = 0; k < desc->buffer_count; ++k)
		p->add_buffer_bytes(desc->buffer_bytes[k]);
	for (uint32_t k = 0; k < desc->node_count; ++k) {
		if (desc->nodes[k].dep_count && !desc->nodes[k].deps)
			return fail(NEURON_ERR_INVALID, "neuron_program_register: node " + std::to_string(k) +
								" has dep_count " + std::to_string(desc->nodes[k].dep_count) +
								" and no deps array");
		encode_node(desc->nodes[k], p->add_nodes());
	}
	for (uint32_t k = 0; k < tile_count; ++k) {
		if (tiles[k].size && !tiles[k].data)
			return fail(NEURON_ERR_INVALID, "neuron_program_register_kernels: tile program " + std::to_string(k) +
								" has no data");
		p->add_tile_programs(static_cast<const char *>(tiles[k].data), tiles[k].size);
	}
	dump_program(*p);
	int fd = -1;
	if (p->ByteSizeLong() > kInlineLimit) {
		fd = memfd_with(p->SerializeAsString());
		if (fd < 0)
			return fail(NEURON_ERR_NO_MEMORY, std::string("cannot create a memfd for a large program: ") +
								  std::strerror(errno));
		req.mutable_register_program()->clear_program();
		req.mutable_register_program()->set_in_memfd(true);
	}
	api::Response resp;
	const neuron_status s = call(c, req, &resp, fd);
	if (fd >= 0)
		close(fd);
	if (s != NEURON_OK)
		return s;
	if (!resp.has_register_program())
		return fail(NEURON_ERR_PROTOCOL, "neurond answered RegisterProgram without a program id");
	*program = resp.register_program().program_id();
	return NEURON_OK;
}

extern "C" neuron_status neuron_program_release(neuron_client *c, uint64_t program)
{
	if (!c)
		return fail(NEURON_ERR_INVALID, "neuron_program_release: client is NULL");
	if (client::daemon_gone(c))
		return NEURON_OK; // its programs went with the connection
	api::Request req;
	req.mutable_deregister_program()->set_program_id(program);
	api::Response resp;
	return call(c, req, &resp);
}
