// Comparisons and selection: eq/ne/lt/le/gt/ge (COMPARE, COMPARE_SCALAR), where and
// masked_fill (WHERE), logical ops, isposinf/isneginf, and triu/tril masks.
#include "graph_capture.h"
#include "cmds.h"

#include <ATen/ExpandUtils.h>
#include <ATen/Functions.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

#include <map>
#include <mutex>
#include <tuple>

namespace torch_neuron {

namespace {

// ---- comparisons ----

Tensor &compare_into(const char *name, int fn, const Tensor &a, const Tensor &b, Tensor &out)
{
	const auto shape = at::infer_size(a.sizes(), b.sizes());
	if (out.sizes() != c10::IntArrayRef(shape))
		out.resize_(shape);
	const bool ok = out.scalar_type() == c10::kBool && chip_ok(out) && chip_ok(a) &&
			(is_host_scalar(b) || chip_ok(b));
	if (!ok) {
		note_fallback(name);
		Tensor r;
		Tensor ac = a.cpu(), bc = b.cpu();
		switch (fn) {
		case NEURON_CMP_EQ: r = at::eq(ac, bc); break;
		case NEURON_CMP_NE: r = at::ne(ac, bc); break;
		case NEURON_CMP_LT: r = at::lt(ac, bc); break;
		case NEURON_CMP_LE: r = at::le(ac, bc); break;
		case NEURON_CMP_GT: r = at::gt(ac, bc); break;
		default: r = at::ge(ac, bc); break;
		}
		out.copy_(r);
		return out;
	}
	if (out.numel() == 0)
		return out;
	neuron_cmd cmd;
	if (is_host_scalar(b)) {
		cmd_init(cmd, NEURON_OP_COMPARE_SCALAR, 2);
		cmd.operands[0] = desc(out);
		cmd.operands[1] = desc(safe_input(a, out).expand(out.sizes()));
		cmd.fscalars.f[0] = b.item().toDouble();
	} else {
		cmd_init(cmd, NEURON_OP_COMPARE, 3);
		cmd.operands[0] = desc(out);
		cmd.operands[1] = desc(safe_input(a, out).expand(out.sizes()));
		cmd.operands[2] = desc(safe_input(b, out).expand(out.sizes()));
	}
	cmd.iscalars[0] = fn;
	submit(out, cmd);
	return out;
}

Tensor compare(const char *name, int fn, const Tensor &a, const Tensor &b)
{
	// a host scalar on the left: swap and mirror the comparison.
	if (is_host_scalar(a) && b.device().is_privateuseone()) {
		static const int mirror[] = {NEURON_CMP_EQ, NEURON_CMP_NE, NEURON_CMP_GT, NEURON_CMP_GE, NEURON_CMP_LT, NEURON_CMP_LE};
		return compare(name, mirror[fn], b, a);
	}
	Tensor out = at::empty(at::infer_size(a.sizes(), b.sizes()), a.options().dtype(c10::kBool));
	return compare_into(name, fn, a, b, out);
}

Tensor scalar_tensor(const Scalar &s) { return at::scalar_tensor(s, at::TensorOptions().dtype(s.type())); }

#define CMP_FAMILY(name, FN)                                                                                         \
	Tensor name##_t(const Tensor &a, const Tensor &b) { NEURON_NATIVE(#name); return compare(#name, FN, a, b); } \
	Tensor name##_s(const Tensor &a, const Scalar &b) { NEURON_NATIVE(#name); return compare(#name, FN, a, scalar_tensor(b)); } \
	Tensor &name##_to(const Tensor &a, const Tensor &b, Tensor &o) { NEURON_NATIVE(#name); return compare_into(#name, FN, a, b, o); } \
	Tensor &name##_so(const Tensor &a, const Scalar &b, Tensor &o) { NEURON_NATIVE(#name); return compare_into(#name, FN, a, scalar_tensor(b), o); }

CMP_FAMILY(eq, NEURON_CMP_EQ)
CMP_FAMILY(ne, NEURON_CMP_NE)
CMP_FAMILY(lt, NEURON_CMP_LT)
CMP_FAMILY(le, NEURON_CMP_LE)
CMP_FAMILY(gt, NEURON_CMP_GT)
CMP_FAMILY(ge, NEURON_CMP_GE)

// ---- where / masked_fill ----

// A device tensor of dtype dt holding a (device or host) value, broadcastable.
Tensor as_device_dtype(const Tensor &t, c10::ScalarType dt, const Tensor &like)
{
	if (t.device().is_privateuseone())
		return t.scalar_type() == dt ? t : t.to(dt);
	if (t.dim() == 0) {
		Tensor d = at::empty({}, like.options().dtype(dt));
		fill_cmd(d, t.item());
		return d;
	}
	return t.to(like.device(), dt);
}

Tensor where_self(const Tensor &cond, const Tensor &a, const Tensor &b)
{
	NEURON_NATIVE("where");
	const c10::ScalarType dt = at::result_type(a, b);
	const Tensor &dev = cond.device().is_privateuseone() ? cond : (a.device().is_privateuseone() ? a : b);
	const auto shape = at::infer_size(at::infer_size(cond.sizes(), a.sizes()), b.sizes());
	Tensor out = at::empty(shape, dev_opts(dev, dt));
	if (!chip_ok(out)) {
		note_fallback("where");
		out.copy_(at::where(cond.cpu(), a.cpu(), b.cpu()));
		return out;
	}
	Tensor c = cond.scalar_type() == c10::kBool ? on_device(cond, out) : on_device(cond, out).to(c10::kBool);
	where_cmd(out, c, as_device_dtype(a, dt, out), as_device_dtype(b, dt, out));
	return out;
}

Tensor &masked_fill_i(Tensor &self, const Tensor &mask, const Scalar &v)
{
	NEURON_NATIVE("masked_fill");
	if (!chip_ok(self) || mask.scalar_type() != c10::kBool) {
		note_fallback("masked_fill");
		Tensor r = at::masked_fill(self.cpu(), mask.cpu(), v);
		self.copy_(r);
		return self;
	}
	Tensor val = at::empty({}, self.options());
	fill_cmd(val, v);
	where_cmd(self, on_device(mask, self), val, self);
	return self;
}
Tensor masked_fill_f(const Tensor &self, const Tensor &mask, const Scalar &v)
{
	Tensor out = self.expand(at::infer_size(self.sizes(), mask.sizes())).clone();
	return masked_fill_i(out, mask, v);
}
Tensor &masked_fill_ti(Tensor &self, const Tensor &mask, const Tensor &v)
{
	TORCH_CHECK(v.dim() == 0, "masked_fill_ only supports a 0-dimensional value tensor");
	return masked_fill_i(self, mask, v.item());
}

// ---- masks and predicates ----

// The triu/tril keep-mask of one (rows, cols, k, upper) on one device, made on the
// host once and kept: causal masks are rebuilt every forward pass, and a fresh
// host computation plus upload each time costs milliseconds on a busy host (an
// OpenMP region in CPU triu and a pinned staging block per upload).
Tensor tri_mask(bool upper, int64_t h, int64_t w, int64_t k, c10::Device dev)
{
	using Key = std::tuple<bool, int64_t, int64_t, int64_t, int>;
	static std::mutex mu;
	static auto *cache = new std::map<Key, Tensor>; // leaked: device tensors must not die at exit
	const Key key{upper, h, w, k, dev.index()};
	std::lock_guard lock(mu);
	auto it = cache->find(key);
	if (it == cache->end()) {
		if (cache->size() >= 64)
			cache->clear(); // bounded: shapes rarely vary, but some callers sweep them
		// Made once, eagerly, also while torch.compile captures a graph: the graph's
		// program binds it as a constant (graph_capture.h).
		CapturePause pause;
		Tensor ones = at::ones({h, w}, at::TensorOptions().dtype(c10::kBool));
		Tensor keep = (upper ? at::triu(ones, k) : at::tril(ones, k)).to(dev);
		// The mask may be used from any stream later: let its upload finish first.
		sync_stream(current_queues(dev.index()));
		it = cache->emplace(key, keep).first;
	}
	capture_constant(it->second);
	return it->second;
}

// triu/tril: where(keep, self, 0) with a cached device mask.
Tensor &tri_o(bool upper, const Tensor &self, int64_t k, Tensor &out)
{
	NEURON_NATIVE(upper ? "triu" : "tril");
	TORCH_CHECK(self.dim() >= 2, "triu/tril: input tensor must have at least 2 dimensions");
	if (out.sizes() != self.sizes())
		out.resize_(self.sizes());
	if (!chip_ok(self) || !chip_ok(out) || out.scalar_type() != self.scalar_type()) {
		note_fallback(upper ? "triu" : "tril");
		out.copy_(upper ? at::triu(self.cpu(), k) : at::tril(self.cpu(), k));
		return out;
	}
	const int64_t h = self.size(-2), w = self.size(-1);
	Tensor keep = tri_mask(upper, h, w, k, self.device());
	Tensor zero = at::empty({}, self.options());
	fill_cmd(zero, 0);
	where_cmd(out, keep, self, zero);
	return out;
}
Tensor triu_f(const Tensor &self, int64_t k) { Tensor o = at::empty_like(self); return tri_o(true, self, k, o); }
Tensor tril_f(const Tensor &self, int64_t k) { Tensor o = at::empty_like(self); return tri_o(false, self, k, o); }
Tensor &triu_o(const Tensor &self, int64_t k, Tensor &o) { return tri_o(true, self, k, o); }
Tensor &tril_o(const Tensor &self, int64_t k, Tensor &o) { return tri_o(false, self, k, o); }
Tensor &triu_i(Tensor &self, int64_t k) { return tri_o(true, self, k, self); }
Tensor &tril_i(Tensor &self, int64_t k) { return tri_o(false, self, k, self); }

Tensor &isinf_sign_o(const char *name, double v, const Tensor &self, Tensor &out)
{
	NEURON_NATIVE(name);
	if (out.sizes() != self.sizes())
		out.resize_(self.sizes());
	if (!chip_ok(self) || out.scalar_type() != c10::kBool) {
		note_fallback(name);
		out.copy_(v < 0 ? at::isneginf(self.cpu()) : at::isposinf(self.cpu()));
		return out;
	}
	cmp_scalar_cmd(out, self, NEURON_CMP_EQ, v);
	return out;
}
Tensor &isneginf_o(const Tensor &self, Tensor &out) { return isinf_sign_o("isneginf", -INFINITY, self, out); }
Tensor &isposinf_o(const Tensor &self, Tensor &out) { return isinf_sign_o("isposinf", INFINITY, self, out); }

// logical ops on "!= 0" of each input
Tensor &logical_o(const char *name, int op, const Tensor &a, const Tensor &b, Tensor &out)
{
	NEURON_NATIVE(name);
	const auto shape = b.defined() ? at::infer_size(a.sizes(), b.sizes()) : a.sizes().vec();
	if (out.sizes() != c10::IntArrayRef(shape))
		out.resize_(shape);
	if (!chip_ok(a) || (b.defined() && !chip_ok(b)) || !chip_ok(out)) {
		note_fallback(name);
		Tensor r = op == 0 ? at::logical_not(a.cpu())
				   : op == 1 ? at::logical_and(a.cpu(), b.cpu())
				   : op == 2 ? at::logical_or(a.cpu(), b.cpu()) : at::logical_xor(a.cpu(), b.cpu());
		out.copy_(r);
		return out;
	}
	Tensor na = at::empty(shape, a.options().dtype(c10::kBool));
	cmp_scalar_cmd(na, a.expand(shape), op == 0 ? NEURON_CMP_EQ : NEURON_CMP_NE, 0.0);
	if (op == 0) {
		copy_cast_into(out, na);
		return out;
	}
	Tensor nb = at::empty(shape, a.options().dtype(c10::kBool));
	cmp_scalar_cmd(nb, b.expand(shape), NEURON_CMP_NE, 0.0);
	Tensor r = at::empty(shape, a.options().dtype(c10::kLong));
	binary_op(op == 1 ? NEURON_OP_MUL : NEURON_OP_ADD, r, na, nb);
	if (op == 3)
		cmp_scalar_cmd(na, r, NEURON_CMP_EQ, 1.0);
	else
		cmp_scalar_cmd(na, r, NEURON_CMP_NE, 0.0);
	copy_cast_into(out, na);
	return out;
}
Tensor &logical_not_o(const Tensor &a, Tensor &o) { return logical_o("logical_not", 0, a, Tensor(), o); }
Tensor &logical_and_o(const Tensor &a, const Tensor &b, Tensor &o) { return logical_o("logical_and", 1, a, b, o); }
Tensor &logical_or_o(const Tensor &a, const Tensor &b, Tensor &o) { return logical_o("logical_or", 2, a, b, o); }
Tensor &logical_xor_o(const Tensor &a, const Tensor &b, Tensor &o) { return logical_o("logical_xor", 3, a, b, o); }

Tensor &where_o(const Tensor &cond, const Tensor &a, const Tensor &b, Tensor &out)
{
	Tensor r = where_self(cond, a, b);
	return assign_out(out, r);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
#define REGCMP(n) m.impl(#n ".Tensor", &n##_t); m.impl(#n ".Scalar", &n##_s); m.impl(#n ".Tensor_out", &n##_to); m.impl(#n ".Scalar_out", &n##_so);
	m.impl("triu", &triu_f);
	m.impl("tril", &tril_f);
	m.impl("triu.out", &triu_o);
	m.impl("tril.out", &tril_o);
	m.impl("triu_", &triu_i);
	m.impl("tril_", &tril_i);
	m.impl("isneginf.out", &isneginf_o);
	m.impl("isposinf.out", &isposinf_o);
	m.impl("where.self_out", &where_o);
	m.impl("logical_not.out", &logical_not_o);
	m.impl("logical_and.out", &logical_and_o);
	m.impl("logical_or.out", &logical_or_o);
	m.impl("logical_xor.out", &logical_xor_o);
	REGCMP(eq) REGCMP(ne) REGCMP(lt) REGCMP(le) REGCMP(gt) REGCMP(ge)
	m.impl("where.self", &where_self);
	m.impl("masked_fill.Scalar", &masked_fill_f);
	m.impl("masked_fill_.Scalar", &masked_fill_i);
	m.impl("masked_fill_.Tensor", &masked_fill_ti);
}

} // namespace torch_neuron
