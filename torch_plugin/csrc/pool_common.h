// Helpers shared by the pooling files (pool_common.cpp).
#pragma once

#include "cmds.h"

#include <functional>
#include <string>

namespace torch_neuron {

// A pooling window geometry over nd (1..3) spatial dims of a batched input.
struct PoolGeom {
	int nd = 0;
	int64_t n = 0, c = 0;
	int64_t in[3] = {}, k[3] = {}, s[3] = {}, p[3] = {}, d[3] = {}, out[3] = {}, padded[3] = {};
	std::string key() const; // identifies the geometry (for cached tables)
};

// Fills g for x [N, C, spatial...]; false if the arguments are not a valid pooling
// (the CPU kernel then reports what is wrong).
bool pool_geom(const Tensor &x, int nd, c10::IntArrayRef k, c10::IntArrayRef s, c10::IntArrayRef p, c10::IntArrayRef d,
	       bool ceil_mode, PoolGeom &g);

// A table that depends only on a geometry, made on the host by make() the first
// time and kept on like's device (key: the geometry and what the table is).
Tensor cached_table(const std::string &key, const Tensor &like, const std::function<Tensor()> &make);

// [N, C, spatial...] view of an input with or without its batch dim, and back.
Tensor batched(const Tensor &x, int nd);
Tensor unbatched_like(const Tensor &r, const Tensor &x, int nd);

// The gradient of a max over windows: grad added at the flat spatial input
// position each element of indices names (one SCATTER_ADD).
Tensor scatter_max_grad(const Tensor &grad, const Tensor &x, const Tensor &indices, int nd);

} // namespace torch_neuron
