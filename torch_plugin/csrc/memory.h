// The plugin's memory: the caching device (HBM) allocator (device_allocator.cpp),
// the pinned host allocator (host_allocator.cpp), and what the op files use of
// them. Device pointers are neurond device addresses cast to void*: never
// dereference them on the host.
#pragma once

#include "runtime.h"

#include <ATen/core/CachingHostAllocator.h>
#include <c10/core/CachingDeviceAllocator.h>

#include <string>
#include <vector>

namespace torch_neuron {

c10::DeviceAllocator *device_allocator();
at::HostAllocator *host_allocator();

inline uint64_t dev_addr(const void *p) { return reinterpret_cast<uint64_t>(p); }

// Pinned host memory: the buffer and offset that contain [p, p+n), or nullptr.
neuron_host_buffer *find_pinned(const void *p, size_t n, uint64_t *offset);
// The pinned block (a DataPtr of the host allocator: a staging buffer or a pinned
// tensor's storage) is not reused before the stream's DMA work submitted so far
// completes.
void pinned_record_use(const c10::DataPtr &block, const StreamQueues &sq);

// A temporary pinned staging buffer of at least n bytes (returned to the cache when
// the DataPtr dies; record its uses with pinned_record_use).
c10::DataPtr staging(size_t n);

struct MemStats {
	int64_t allocated = 0, reserved = 0, peak_allocated = 0, peak_reserved = 0;
	int64_t alloc_count = 0, free_count = 0, segments = 0;
};
MemStats mem_stats(int device);
void reset_peak(int device);
// Every device segment, flattened: device, address, size, stream, block count,
// then per block address, size, requested bytes, allocated (0/1).
std::vector<int64_t> memory_snapshot_flat();
void empty_cache();

} // namespace torch_neuron
