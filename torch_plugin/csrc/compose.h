// Ops composed of other native ops (the ops_compose_*.cpp files): each checks that
// its inputs are device tensors the chip computes on, then runs the composition
// (calls of at:: ops, which reach this device's kernels), or else the CPU kernel
// through note_fallback, as every native op does.
#pragma once

#include "cmds.h"

#include <ATen/Functions.h>

#include <initializer_list>

namespace torch_neuron {

// Every defined tensor is a device tensor of a floating dtype the chip computes.
inline bool floats_on_device(std::initializer_list<const Tensor *> ts)
{
	for (const Tensor *t : ts)
		if (t->defined() && !float_dev(*t))
			return false;
	return true;
}

// Every defined tensor is a device tensor of a dtype the chip encodes.
inline bool all_on_device(std::initializer_list<const Tensor *> ts)
{
	for (const Tensor *t : ts)
		if (t->defined() && !chip_ok(*t))
			return false;
	return true;
}

// r (a CPU result) moved to like's device; tuples element by element.
inline Tensor to_dev(const Tensor &r, const Tensor &like) { return r.defined() ? r.to(like.device()) : r; }

} // namespace torch_neuron
