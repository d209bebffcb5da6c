// Helpers shared by the pooling files (ops_pool.cpp, ops_adaptive_pool.cpp): the
// geometry of strided windows, tables kept on the device, and the max-pool gradient.
#include "pool_common.h"

#include "graph_capture.h"

#include <ATen/Functions.h>

#include <map>
#include <mutex>

namespace torch_neuron {

// Output length of one pooled dim, as PyTorch's pooling_output_shape: with ceil_mode
// a last, partial window counts if it starts inside the input or its left padding.
static int64_t pooled_size(int64_t in, int64_t pad, int64_t span, int64_t stride, bool ceil_mode)
{
	const int64_t room = in + 2 * pad - span + (ceil_mode ? stride - 1 : 0);
	if (room < 0)
		return 0;
	int64_t out = room / stride + 1;
	if (ceil_mode && (out - 1) * stride >= in + pad)
		--out;
	return out;
}

bool pool_geom(const Tensor &x, int nd, c10::IntArrayRef k, c10::IntArrayRef s, c10::IntArrayRef p, c10::IntArrayRef d,
	       bool ceil_mode, PoolGeom &g)
{
	auto pick = [](c10::IntArrayRef v, int i, int64_t dflt) {
		return v.empty() ? dflt : (v.size() == 1 ? v[0] : v[static_cast<size_t>(i)]);
	};
	if (x.dim() != nd + 2 || k.empty() || (k.size() != 1 && static_cast<int>(k.size()) != nd))
		return false;
	g.nd = nd;
	g.n = x.size(0), g.c = x.size(1);
	for (int i = 0; i < nd; ++i) {
		g.in[i] = x.size(2 + i);
		g.k[i] = pick(k, i, 1);
		g.s[i] = pick(s, i, g.k[i]);
		g.p[i] = pick(p, i, 0);
		g.d[i] = pick(d, i, 1);
		if (g.k[i] <= 0 || g.s[i] <= 0 || g.p[i] < 0 || g.d[i] <= 0 || g.p[i] > g.k[i] / 2)
			return false;
		const int64_t span = g.d[i] * (g.k[i] - 1) + 1;
		g.out[i] = pooled_size(g.in[i], g.p[i], span, g.s[i], ceil_mode);
		if (g.out[i] <= 0)
			return false;
		// The padded extent: input and padding, plus (ceil_mode) what the last
		// window reaches past them (filled like the padding).
		g.padded[i] = std::max(g.in[i] + 2 * g.p[i], (g.out[i] - 1) * g.s[i] + span);
	}
	return true;
}

std::string PoolGeom::key() const
{
	std::string r = std::to_string(nd);
	for (int i = 0; i < nd; ++i)
		for (int64_t v : {in[i], k[i], s[i], p[i], d[i], out[i]})
			r += "," + std::to_string(v);
	return r;
}

// A geometry-derived table kept on the device (shapes repeat every step; an upload
// per call costs more than the pooling). Leaked: device tensors must not die at exit.
Tensor cached_table(const std::string &key, const Tensor &like, const std::function<Tensor()> &make)
{
	static std::mutex mu;
	static auto *cache = new std::map<std::string, Tensor>;
	const std::string k = key + "/" + std::to_string(like.device().index());
	std::lock_guard lock(mu);
	auto it = cache->find(k);
	if (it == cache->end()) {
		if (cache->size() >= 256)
			cache->clear(); // a graph program that binds a table keeps its own reference
		// Made once for the process, eagerly, not as part of a graph being captured.
		CapturePause pause;
		Tensor t = make().to(like.device());
		// The table may be used from any stream later: let its upload finish first.
		sync_stream(current_queues(like.device().index()));
		it = cache->emplace(k, t).first;
	}
	capture_constant(it->second);
	return it->second;
}

// Batched [N, C, spatial...] view of an input with or without its batch dim.
Tensor batched(const Tensor &x, int nd) { return x.dim() == nd + 1 ? x.unsqueeze(0) : x; }
Tensor unbatched_like(const Tensor &r, const Tensor &x, int nd) { return x.dim() == nd + 1 ? r.squeeze(0) : r; }

// The gradient of a max over windows: each output's gradient added at the input
// position its index names (SCATTER_ADD over the flattened spatial dims).
Tensor scatter_max_grad(const Tensor &grad, const Tensor &x, const Tensor &indices, int nd)
{
	const Tensor xb = batched(x, nd);
	const int64_t n = xb.size(0), c = xb.size(1);
	Tensor gi = at::empty({n, c, xb[0][0].numel()}, grad.options());
	fill_cmd(gi, 0);
	scatter_add_cmd(gi, 2, indices.reshape({n, c, -1}), grad.reshape({n, c, -1}));
	return gi.view(x.sizes());
}

} // namespace torch_neuron
