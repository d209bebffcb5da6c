// Small helpers that encode one chip command each (shared by the op files).
#include "cmds.h"

#include <ATen/ExpandUtils.h>
#include <ATen/Functions.h>
#include <ATen/WrapDimUtils.h>

namespace torch_neuron {

bool is_host_scalar(const Tensor &t) { return t.device().is_cpu() && t.dim() == 0; }

c10::TensorOptions dev_opts(const Tensor &like, c10::ScalarType dt) { return like.options().dtype(dt); }

bool same_view(const Tensor &a, const Tensor &b)
{
	return a.data_ptr() == b.data_ptr() && a.sizes() == b.sizes() && a.strides() == b.strides() &&
	       a.scalar_type() == b.scalar_type();
}

bool mem_overlap(const Tensor &a, const Tensor &b)
{
	if (!a.storage().is_alias_of(b.storage()) || a.numel() == 0 || b.numel() == 0)
		return false;
	auto span = [](const Tensor &t) {
		int64_t last = 0;
		for (int i = 0; i < t.dim(); ++i)
			last += (t.size(i) - 1) * t.stride(i);
		const auto lo = reinterpret_cast<uintptr_t>(t.data_ptr());
		return std::make_pair(lo, lo + (last + 1) * t.itemsize());
	};
	auto [al, ah] = span(a);
	auto [bl, bh] = span(b);
	return al < bh && bl < ah;
}

// An input for an op writing `out`: a private copy if it partially overlaps out.
Tensor safe_input(const Tensor &in, const Tensor &out)
{
	if (in.is_same(out))
		return in;
	if (in.device().is_privateuseone() && mem_overlap(in, out) && !same_view(in.expand(out.sizes()), out))
		return in.clone();
	return in;
}

void set_scalar(neuron_cmd &cmd, const Tensor &out, const Scalar &s)
{
	if (at::isFloatingType(out.scalar_type()))
		cmd.fscalars.f[0] = s.toDouble();
	else
		cmd.iscalars[1] = s.toLong();
}

// out = a (op) s, with reverse = s (op) a.
void scalar_op(int op, const Tensor &out, const Tensor &a, const Scalar &s, bool reverse)
{
	if (out.numel() == 0)
		return;
	neuron_cmd cmd;
	cmd_init(cmd, op, 2);
	cmd.operands[0] = desc(out);
	cmd.operands[1] = desc_as(safe_input(a, out), out.sizes());
	set_scalar(cmd, out, s);
	cmd.iscalars[0] = reverse ? 1 : 0;
	submit(out, cmd);
}

void unary_op(int op, const Tensor &out, const Tensor &in, int64_t i0)
{
	if (out.numel() == 0)
		return;
	neuron_cmd cmd;
	cmd_init(cmd, op, 2);
	cmd.operands[0] = desc(out);
	cmd.operands[1] = desc_as(safe_input(in, out), out.sizes());
	cmd.iscalars[0] = i0;
	submit(out, cmd);
}

void binary_op(int op, const Tensor &out, const Tensor &a, const Tensor &b, double alpha)
{
	if (out.numel() == 0)
		return;
	neuron_cmd cmd;
	cmd_init(cmd, op, 3);
	cmd.operands[0] = desc(out);
	cmd.operands[1] = desc_as(safe_input(a, out), out.sizes());
	cmd.operands[2] = desc_as(safe_input(b, out), out.sizes());
	if (op == NEURON_OP_ADD || op == NEURON_OP_SUB)
		cmd.fscalars.f[0] = alpha;
	submit(out, cmd);
}

void pointwise_cmd(const Tensor &out, const std::vector<Tensor> &inputs, const std::vector<PwStep> &steps,
		   const std::vector<double> &consts)
{
	TORCH_INTERNAL_ASSERT(inputs.size() >= 1 && inputs.size() <= NEURON_PW_MAX_INPUTS && steps.size() >= 1 &&
			      steps.size() <= NEURON_PW_MAX_STEPS && consts.size() <= 4);
	if (out.numel() == 0)
		return;
	neuron_cmd cmd;
	cmd_init(cmd, NEURON_OP_POINTWISE, static_cast<int>(1 + inputs.size()));
	cmd.operands[0] = desc(out);
	int k = 1;
	for (const Tensor &t : inputs)
		cmd.operands[k++] = desc_as(safe_input(t, out), out.sizes());
	int s = 0;
	for (const PwStep &st : steps) {
		const uint64_t field = st.fn | uint64_t{st.a} << 6 | uint64_t{st.b} << 11;
		cmd.iscalars[s / 4] = static_cast<int64_t>(static_cast<uint64_t>(cmd.iscalars[s / 4]) | field << (16 * (s % 4)));
		++s;
	}
	int c = 0;
	for (double v : consts)
		cmd.fscalars.f[c++] = v;
	submit(out, cmd);
}

PwChain &PwChain::then(uint8_t fn, const Tensor &t)
{
	steps_.push_back({fn, value(), pw_in(static_cast<int>(in_.size()))});
	in_.push_back(t);
	return *this;
}

PwChain &PwChain::then_const(uint8_t fn, int c)
{
	steps_.push_back({fn, value(), pw_const(c)});
	return *this;
}

PwChain &PwChain::apply(uint8_t fn)
{
	steps_.push_back({fn, value()});
	return *this;
}

void PwChain::run(const Tensor &out, const std::vector<double> &consts) const { pointwise_cmd(out, in_, steps_, consts); }

void fill_cmd(const Tensor &out, const Scalar &v)
{
	if (out.numel() == 0)
		return;
	neuron_cmd cmd;
	cmd_init(cmd, NEURON_OP_FILL, 1);
	cmd.operands[0] = desc(out);
	if (at::isFloatingType(out.scalar_type()))
		cmd.fscalars.f[0] = v.toDouble();
	else if (out.scalar_type() == c10::kBool)
		cmd.iscalars[0] = v.toBool() ? 1 : 0;
	else
		cmd.iscalars[0] = v.toLong();
	submit(out, cmd);
}

bool float_dev(const Tensor &t) { return t.device().is_privateuseone() && at::isFloatingType(t.scalar_type()) && chip_ok(t); }

Tensor float_out_like(const Tensor &self)
{
	const c10::ScalarType dt = at::isFloatingType(self.scalar_type()) ? self.scalar_type()
									      : c10::typeMetaToScalarType(c10::get_default_dtype());
	return at::empty(self.sizes(), self.options().dtype(dt));
}

Tensor &assign_out(Tensor &out, const Tensor &r)
{
	if (out.sizes() != r.sizes())
		out.resize_(r.sizes());
	out.copy_(r);
	return out;
}

int64_t dim_mask(const Tensor &self, at::OptionalIntArrayRef dims)
{
	const int64_t nd = self.dim();
	if (!dims || dims->empty())
		return nd == 0 ? 0 : (int64_t{1} << nd) - 1;
	int64_t m = 0;
	for (int64_t d : *dims)
		m |= int64_t{1} << c10::maybe_wrap_dim(d, std::max<int64_t>(nd, 1));
	return nd == 0 ? 0 : m;
}

std::vector<int64_t> keep_shape(const Tensor &self, int64_t mask)
{
	std::vector<int64_t> s(self.sizes().begin(), self.sizes().end());
	for (int64_t i = 0; i < self.dim(); ++i)
		if ((mask >> i) & 1)
			s[i] = 1;
	return s;
}

std::vector<int64_t> drop_shape(const Tensor &self, int64_t mask)
{
	std::vector<int64_t> s;
	for (int64_t i = 0; i < self.dim(); ++i)
		if (!((mask >> i) & 1))
			s.push_back(self.size(i));
	return s;
}

// Reduces into out (any shape with out.numel() == the result's); returns out.
void reduce_cmd(int op, const Tensor &out_keep, const Tensor &self, int64_t mask)
{
	if (out_keep.numel() == 0)
		return;
	neuron_cmd cmd;
	cmd_init(cmd, op, 2);
	cmd.operands[0] = desc(out_keep);
	cmd.operands[1] = desc(self);
	cmd.iscalars[0] = mask;
	submit(out_keep, cmd);
}

void math_cmd(const Tensor &out, const Tensor &in, int fn, double p0, double p1, int64_t flags, double p2)
{
	if (out.numel() == 0)
		return;
	neuron_cmd cmd;
	cmd_init(cmd, NEURON_OP_UNARY_MATH, 2);
	cmd.operands[0] = desc(out);
	cmd.operands[1] = desc(safe_input(in, out).expand(out.sizes()));
	cmd.iscalars[0] = fn;
	cmd.iscalars[1] = flags;
	cmd.fscalars.f[0] = p0;
	cmd.fscalars.f[1] = p1;
	cmd.fscalars.f[2] = p2;
	submit(out, cmd);
}

void bmath_cmd(const Tensor &out, const Tensor &a, const Tensor &b, int fn, int64_t i1, double f0, double f1, double f2)
{
	if (out.numel() == 0)
		return;
	neuron_cmd cmd;
	cmd_init(cmd, NEURON_OP_BINARY_MATH, 3);
	cmd.operands[0] = desc(out);
	cmd.operands[1] = desc(safe_input(a, out).expand(out.sizes()));
	cmd.operands[2] = desc(safe_input(b, out).expand(out.sizes()));
	cmd.iscalars[0] = fn;
	cmd.iscalars[1] = i1;
	cmd.fscalars.f[0] = f0;
	cmd.fscalars.f[1] = f1;
	cmd.fscalars.f[2] = f2;
	submit(out, cmd);
}

void where_cmd(const Tensor &out, const Tensor &cond, const Tensor &a, const Tensor &b)
{
	if (out.numel() == 0)
		return;
	neuron_cmd cmd;
	cmd_init(cmd, NEURON_OP_WHERE, 4);
	cmd.operands[0] = desc(out);
	cmd.operands[1] = desc(safe_input(cond, out).expand(out.sizes()));
	cmd.operands[2] = desc(safe_input(a, out).expand(out.sizes()));
	cmd.operands[3] = desc(safe_input(b, out).expand(out.sizes()));
	submit(out, cmd);
}

bool index_ok(const Tensor &ix) { return chip_ok(ix) && (ix.scalar_type() == c10::kLong || ix.scalar_type() == c10::kInt); }

void scatter_add_cmd(const Tensor &out, int64_t dim, const Tensor &index, const Tensor &src)
{
	if (index.numel() == 0)
		return;
	neuron_cmd cmd;
	cmd_init(cmd, NEURON_OP_SCATTER_ADD, 3);
	cmd.operands[0] = desc(out);
	cmd.operands[1] = desc(index);
	cmd.operands[2] = desc(src.sizes() == index.sizes() ? src : src.slice(0, 0, index.size(0)));
	cmd.iscalars[0] = dim;
	submit(out, cmd);
}

void copy_cast_into(const Tensor &dst, const Tensor &src)
{
	neuron_cmd cmd;
	cmd_init(cmd, NEURON_OP_COPY, 2);
	cmd.operands[0] = desc(dst);
	cmd.operands[1] = desc(src.expand(dst.sizes()));
	submit(dst, cmd);
}

void index_write_cmd(int op, const Tensor &out, int64_t dim, const Tensor &ix, const Tensor &src, int64_t reduce)
{
	if (src.numel() == 0 || ix.numel() == 0)
		return;
	neuron_cmd cmd;
	cmd_init(cmd, op, 3);
	cmd.operands[0] = desc(out);
	cmd.operands[1] = desc(ix);
	cmd.operands[2] = desc(src);
	cmd.iscalars[0] = dim;
	cmd.iscalars[1] = reduce;
	submit(out, cmd);
}

void index_add_cmd(const Tensor &out, int64_t dim, const Tensor &ix, const Tensor &src)
{
	index_write_cmd(NEURON_OP_INDEX_ADD, out, dim, ix, src);
}

void index_copy_cmd(const Tensor &out, int64_t dim, const Tensor &ix, const Tensor &src)
{
	index_write_cmd(NEURON_OP_INDEX_COPY, out, dim, ix, src);
}

void index_select_cmd(const Tensor &out, const Tensor &in, int64_t dim, const Tensor &ix)
{
	if (out.numel() == 0)
		return;
	neuron_cmd cmd;
	cmd_init(cmd, NEURON_OP_INDEX_SELECT, 3);
	cmd.operands[0] = desc(out);
	cmd.operands[1] = desc(in);
	cmd.operands[2] = desc(ix);
	cmd.iscalars[0] = dim;
	submit(out, cmd);
}

void cmp_scalar_cmd(const Tensor &out, const Tensor &a, int fn, double v)
{
	if (out.numel() == 0)
		return;
	neuron_cmd cmd;
	cmd_init(cmd, NEURON_OP_COMPARE_SCALAR, 2);
	cmd.operands[0] = desc(out);
	cmd.operands[1] = desc(a.expand(out.sizes()));
	cmd.iscalars[0] = fn;
	cmd.fscalars.f[0] = v;
	submit(out, cmd);
}

void matmul_cmd(const Tensor &out, const Tensor &a, const Tensor &b, double alpha, double beta)
{
	if (out.numel() == 0)
		return;
	if (a.size(-1) == 0) {
		if (beta == 0)
			fill_cmd(out, 0);
		else if (beta != 1)
			scalar_op(NEURON_OP_MUL_SCALAR, out, out, beta);
		return;
	}
	neuron_cmd cmd;
	cmd_init(cmd, NEURON_OP_MATMUL, 3);
	cmd.operands[0] = desc(out);
	cmd.operands[1] = desc(safe_input(a, out));
	cmd.operands[2] = desc(safe_input(b, out));
	cmd.fscalars.f[0] = alpha;
	cmd.fscalars.f[1] = beta;
	submit(out, cmd);
}

void bias_matmul_cmd(const Tensor &out, const Tensor &a, const Tensor &b, const Tensor &bias, double alpha, double beta)
{
	if (out.scalar_type() != c10::kFloat || bias.scalar_type() != c10::kFloat || bias.device() != out.device() ||
	    mem_overlap(bias, out) || a.size(-1) == 0 || out.numel() == 0) {
		out.copy_(bias);
		matmul_cmd(out, a, b, alpha, beta);
		return;
	}
	neuron_cmd cmd;
	cmd_init(cmd, NEURON_OP_MATMUL_EPILOGUE, 4);
	cmd.operands[0] = desc(out);
	cmd.operands[1] = desc(safe_input(a, out));
	cmd.operands[2] = desc(safe_input(b, out));
	cmd.operands[3] = desc(bias);
	cmd.fscalars.f[0] = alpha;
	cmd.fscalars.f[1] = beta;
	cmd.iscalars[0] = NEURON_ACT_NONE;
	submit(out, cmd);
}

Tensor on_device(const Tensor &t, const Tensor &like) { return t.device().is_privateuseone() ? t : t.to(like.device()); }

std::optional<Tensor> cpu_opt(const std::optional<Tensor> &t)
{
	return t && t->defined() ? std::optional<Tensor>(t->cpu()) : std::nullopt;
}
} // namespace torch_neuron
