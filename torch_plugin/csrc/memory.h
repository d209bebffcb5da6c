// Device (HBM) caching allocator, pinned host allocator, and the glue PyTorch finds
// them through. Device pointers are neurond device addresses cast to void*: never
// dereference them on the host.
#pragma once

#include "runtime.h"

#include <c10/core/Allocator.h>

#include <string>

namespace torch_neuron {

c10::Allocator *device_allocator();
c10::Allocator *host_allocator();

inline uint64_t dev_addr(const void *p) { return reinterpret_cast<uint64_t>(p); }

// Pinned host memory: the buffer and offset that contain [p, p+n), or nullptr.
neuron_host_buffer *find_pinned(const void *p, size_t n, uint64_t *offset);
// The pinned block holding p must not be reused before seq completes on q.
void pinned_record_use(const void *p, neuron_queue *q, uint64_t seq);

// A temporary pinned staging buffer of at least n bytes (returned to the cache when
// the DataPtr dies; record its uses with pinned_record_use).
c10::DataPtr staging(size_t n);

struct MemStats {
	int64_t allocated = 0, reserved = 0, peak_allocated = 0, peak_reserved = 0;
	int64_t alloc_count = 0, free_count = 0, segments = 0;
};
MemStats mem_stats(int device);
void reset_peak(int device);
void empty_cache();

} // namespace torch_neuron
