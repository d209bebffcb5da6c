// Turning ATen tensors into chip command operands.
#pragma once

#include "memory.h"
#include "runtime.h"

#include <ATen/core/Tensor.h>

namespace torch_neuron {

// The chip's dtype for a torch dtype, or NEURON_DTYPE_INVALID.
inline int chip_dtype(c10::ScalarType t)
{
	switch (t) {
	case c10::kFloat: return NEURON_DTYPE_F32;
	case c10::kBFloat16: return NEURON_DTYPE_BF16;
	case c10::kHalf: return NEURON_DTYPE_F16;
	case c10::kInt: return NEURON_DTYPE_I32;
	case c10::kLong: return NEURON_DTYPE_I64;
	case c10::kBool: return NEURON_DTYPE_BOOL;
	case c10::kByte: return NEURON_DTYPE_U8;
	default: return NEURON_DTYPE_INVALID;
	}
}

inline bool chip_ok(const at::Tensor &t)
{
	return t.device().is_privateuseone() && chip_dtype(t.scalar_type()) != NEURON_DTYPE_INVALID &&
	       t.dim() <= NEURON_MAX_DIMS;
}

inline neuron_tensor_desc desc(const at::Tensor &t)
{
	TORCH_CHECK(t.dim() <= NEURON_MAX_DIMS, "neuron: tensors of more than 8 dims are not supported (got ", t.dim(), ")");
	neuron_tensor_desc d{};
	d.addr = reinterpret_cast<uint64_t>(t.data_ptr());
	d.dtype = static_cast<uint8_t>(chip_dtype(t.scalar_type()));
	TORCH_CHECK(d.dtype != NEURON_DTYPE_INVALID, "neuron: dtype ", t.scalar_type(), " has no chip encoding");
	d.ndim = static_cast<uint8_t>(t.dim());
	for (int i = 0; i < t.dim(); ++i) {
		d.sizes[i] = t.size(i);
		d.strides[i] = t.size(i) == 1 ? 0 : t.stride(i);
	}
	return d;
}

// The bytes of t, for a same-dtype copy of a dtype the chip does not compute on
// (complex, float64 views, int8/int16, ...): t's dims and a last dim of its element
// size, as U8 (one COPY moves them exactly).
inline bool byte_copyable(const at::Tensor &t)
{
	return t.device().is_privateuseone() && t.dim() < NEURON_MAX_DIMS;
}
inline neuron_tensor_desc desc_bytes(const at::Tensor &t)
{
	TORCH_CHECK(t.dim() < NEURON_MAX_DIMS, "neuron: copies of dtype ", t.scalar_type(),
		    " take at most 7 dims (got ", t.dim(), ")");
	neuron_tensor_desc d{};
	const int64_t es = static_cast<int64_t>(t.itemsize());
	d.addr = reinterpret_cast<uint64_t>(t.data_ptr());
	d.dtype = NEURON_DTYPE_U8;
	d.ndim = static_cast<uint8_t>(t.dim() + 1);
	for (int i = 0; i < t.dim(); ++i) {
		d.sizes[i] = t.size(i);
		d.strides[i] = t.size(i) == 1 ? 0 : t.stride(i) * es;
	}
	d.sizes[t.dim()] = es;
	d.strides[t.dim()] = 1;
	return d;
}

// t broadcast to `shape` (numpy rules) without creating an expanded tensor.
inline neuron_tensor_desc desc_as(const at::Tensor &t, c10::IntArrayRef shape)
{
	if (t.sizes() == shape)
		return desc(t);
	const int64_t nd = static_cast<int64_t>(shape.size()), td = t.dim();
	TORCH_CHECK(nd <= NEURON_MAX_DIMS && td <= nd, "neuron: cannot broadcast ", t.sizes(), " to ", shape);
	neuron_tensor_desc d{};
	d.addr = reinterpret_cast<uint64_t>(t.data_ptr());
	d.dtype = static_cast<uint8_t>(chip_dtype(t.scalar_type()));
	TORCH_CHECK(d.dtype != NEURON_DTYPE_INVALID, "neuron: dtype ", t.scalar_type(), " has no chip encoding");
	d.ndim = static_cast<uint8_t>(nd);
	for (int64_t i = 0; i < nd; ++i) {
		const int64_t j = i - (nd - td);
		d.sizes[i] = shape[i];
		if (j < 0 || t.size(j) == 1 || shape[i] == 1) {
			TORCH_CHECK(j < 0 || t.size(j) == 1 || t.size(j) == shape[i], "neuron: cannot broadcast ", t.sizes(), " to ", shape);
			d.strides[i] = 0;
		} else {
			TORCH_CHECK(t.size(j) == shape[i], "neuron: cannot broadcast ", t.sizes(), " to ", shape);
			d.strides[i] = t.stride(j);
		}
	}
	return d;
}

inline void cmd_init(neuron_cmd &cmd, int op, int n) { neuron_cmd_init(&cmd, op, n); }

inline uint64_t submit(const at::Tensor &on, neuron_cmd &cmd)
{
	return submit_core(current_queues(on.device().index()), cmd);
}

} // namespace torch_neuron
