// Pinned host buffers: a sealed memfd mapped by the tenant and by neurond, so DMA
// reads and writes the tenant's bytes with no extra copy.
#include "internal.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

using namespace neuron;
using neuron::client::call;
using neuron::client::fail;

extern "C" neuron_status neuron_host_alloc(neuron_client *c, uint64_t size, neuron_host_buffer **out)
{
	if (!c || !out)
		return fail(NEURON_ERR_INVALID, "neuron_host_alloc: client and out must not be NULL");
	if (size == 0)
		return fail(NEURON_ERR_INVALID, "neuron_host_alloc: size is zero");
	int fd = memfd_create("neuron-host", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return fail(NEURON_ERR_NO_MEMORY, std::string("memfd_create: ") + std::strerror(errno));
	// The daemon maps only buffers that cannot shrink under it.
	if (ftruncate(fd, static_cast<off_t>(size)) != 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
		const int e = errno;
		close(fd);
		return fail(NEURON_ERR_NO_MEMORY, "cannot size a " + std::to_string(size) + "-byte host buffer: " +
							  std::strerror(e));
	}
	void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		const int e = errno;
		close(fd);
		return fail(NEURON_ERR_NO_MEMORY, std::string("cannot map a host buffer: ") + std::strerror(e));
	}
	api::Request req;
	req.mutable_register_host_buffer()->set_size(size);
	api::Response resp;
	if (neuron_status s = call(c, req, &resp, fd); s != NEURON_OK) {
		munmap(p, size);
		close(fd);
		return s;
	}
	*out = new neuron_host_buffer{c, p, size, resp.register_host_buffer().handle(), fd};
	return NEURON_OK;
}

extern "C" void *neuron_host_ptr(const neuron_host_buffer *b) { return b ? b->ptr : nullptr; }
extern "C" uint64_t neuron_host_size(const neuron_host_buffer *b) { return b ? b->size : 0; }
extern "C" uint32_t neuron_host_handle(const neuron_host_buffer *b) { return b ? b->handle : 0; }

extern "C" neuron_status neuron_host_free(neuron_host_buffer *b)
{
	if (!b)
		return NEURON_OK;
	neuron_status s = NEURON_OK;
	if (!client::daemon_gone(b->client)) {
		api::Request req;
		req.mutable_unregister_host_buffer()->set_handle(b->handle);
		api::Response resp;
		s = call(b->client, req, &resp);
	}
	munmap(b->ptr, b->size);
	close(b->fd);
	delete b;
	return s;
}
