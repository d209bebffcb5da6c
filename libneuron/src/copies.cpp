// Copies between host and device on DMA queues.
#include "internal.h"

#include <algorithm>
#include <cstring>

using namespace neuron;
using neuron::client::fail;

namespace {

constexpr uint64_t kStagingBytes = 8ull << 20;

neuron_tensor_desc bytes_desc(int space, uint32_t host_buffer, uint64_t addr, uint64_t size)
{
	const int64_t sizes[1] = {static_cast<int64_t>(size)};
	neuron_tensor_desc d = neuron_desc_contiguous(addr, NEURON_DTYPE_U8, 1, sizes);
	d.mem_space = static_cast<uint8_t>(space);
	d.host_buffer = host_buffer;
	return d;
}

neuron_status submit_copy(neuron_queue *q, const neuron_tensor_desc &dst, const neuron_tensor_desc &src, uint64_t *seq)
{
	if (!q || q->kind != NEURON_QUEUE_DMA)
		return fail(NEURON_ERR_INVALID, "copies need a DMA queue (NEURON_QUEUE_DMA)");
	neuron_cmd cmd;
	neuron_cmd_init(&cmd, NEURON_OP_COPY, 2);
	cmd.operands[0] = dst;
	cmd.operands[1] = src;
	return neuron_submit(q, &cmd, seq);
}

neuron_status staging(neuron_queue *q, neuron_host_buffer **out)
{
	neuron_client *c = q->client;
	if (!c->staging)
		if (neuron_status s = neuron_host_alloc(c, kStagingBytes, &c->staging); s != NEURON_OK)
			return s;
	*out = c->staging;
	return NEURON_OK;
}

} // namespace

extern "C" neuron_status neuron_copy_h2d_async(neuron_queue *q, uint64_t dst, const neuron_host_buffer *src,
					       uint64_t src_offset, uint64_t size, uint64_t *seq)
{
	if (!src)
		return fail(NEURON_ERR_INVALID, "neuron_copy_h2d_async: src is NULL");
	return submit_copy(q, bytes_desc(NEURON_MEM_DEVICE, 0, dst, size),
			   bytes_desc(NEURON_MEM_HOST, src->handle, src_offset, size), seq);
}

extern "C" neuron_status neuron_copy_d2h_async(neuron_queue *q, neuron_host_buffer *dst, uint64_t dst_offset,
					       uint64_t src, uint64_t size, uint64_t *seq)
{
	if (!dst)
		return fail(NEURON_ERR_INVALID, "neuron_copy_d2h_async: dst is NULL");
	return submit_copy(q, bytes_desc(NEURON_MEM_HOST, dst->handle, dst_offset, size),
			   bytes_desc(NEURON_MEM_DEVICE, 0, src, size), seq);
}

extern "C" neuron_status neuron_copy_d2d_async(neuron_queue *q, uint64_t dst, uint64_t src, uint64_t size,
					       uint64_t *seq)
{
	return submit_copy(q, bytes_desc(NEURON_MEM_DEVICE, 0, dst, size), bytes_desc(NEURON_MEM_DEVICE, 0, src, size),
			   seq);
}

// Pageable copies go through one staging buffer per client, a chunk at a time.
extern "C" neuron_status neuron_memcpy_h2d(neuron_queue *q, uint64_t dst, const void *src, uint64_t size)
{
	if (!q || (!src && size))
		return fail(NEURON_ERR_INVALID, "neuron_memcpy_h2d: queue and src must not be NULL");
	std::lock_guard lock(q->client->staging_mutex);
	neuron_host_buffer *stage;
	if (neuron_status s = staging(q, &stage); s != NEURON_OK)
		return s;
	for (uint64_t done = 0; done < size;) {
		const uint64_t n = std::min(kStagingBytes, size - done);
		std::memcpy(stage->ptr, static_cast<const char *>(src) + done, n);
		uint64_t seq;
		if (neuron_status s = neuron_copy_h2d_async(q, dst + done, stage, 0, n, &seq); s != NEURON_OK)
			return s;
		if (neuron_status s = neuron_queue_wait(q, seq, -1); s != NEURON_OK)
			return s;
		done += n;
	}
	return NEURON_OK;
}

extern "C" neuron_status neuron_memcpy_d2h(neuron_queue *q, void *dst, uint64_t src, uint64_t size)
{
	if (!q || (!dst && size))
		return fail(NEURON_ERR_INVALID, "neuron_memcpy_d2h: queue and dst must not be NULL");
	std::lock_guard lock(q->client->staging_mutex);
	neuron_host_buffer *stage;
	if (neuron_status s = staging(q, &stage); s != NEURON_OK)
		return s;
	for (uint64_t done = 0; done < size;) {
		const uint64_t n = std::min(kStagingBytes, size - done);
		uint64_t seq;
		if (neuron_status s = neuron_copy_d2h_async(q, stage, 0, src + done, n, &seq); s != NEURON_OK)
			return s;
		if (neuron_status s = neuron_queue_wait(q, seq, -1); s != NEURON_OK)
			return s;
		std::memcpy(static_cast<char *>(dst) + done, stage->ptr, n);
		done += n;
	}
	return NEURON_OK;
}
