// Indexing: index_select, gather, scatter(_add), index_add, index_copy, embedding's
// backward, and advanced indexing (x[indices], index_put_ with and without
// accumulation) on the chip's INDEX_SELECT / INDEX_ADD / INDEX_COPY / GATHER /
// SCATTER / SCATTER_ADD.
#include "cmds.h"

#include <ATen/ExpandUtils.h>
#include <ATen/Functions.h>
#include <ATen/WrapDimUtils.h>
#include <c10/util/accumulate.h>
#include <torch/library.h>

#include <algorithm>
#include <optional>

namespace torch_neuron {

namespace {

// ---- index_select, gather, scatter_add, index_add (one chip command each) ----

Tensor &index_select_o(const Tensor &self, int64_t dim, const Tensor &index, Tensor &out)
{
	NEURON_NATIVE("index_select");
	const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
	TORCH_CHECK(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
	Tensor ix = index.reshape({-1});
	std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end());
	if (self.dim() > 0)
		shape[d] = ix.numel();
	if (out.sizes() != c10::IntArrayRef(shape))
		out.resize_(shape);
	if (!chip_ok(self) || !chip_ok(out) || !index_ok(on_device(ix, out)) || out.scalar_type() != self.scalar_type()) {
		note_fallback("index_select");
		out.copy_(at::index_select(self.cpu(), dim, index.cpu()));
		return out;
	}
	index_select_cmd(out, self, d, on_device(ix, out));
	return out;
}
Tensor index_select(const Tensor &self, int64_t dim, const Tensor &index)
{
	Tensor out = at::empty({0}, self.options());
	return index_select_o(self, dim, index, out);
}

Tensor embedding_dense_backward(const Tensor &grad, const Tensor &indices, int64_t num_weights, int64_t padding_idx,
				bool scale_grad_by_freq)
{
	NEURON_NATIVE("embedding_dense_backward");
	const int64_t dim = grad.size(-1);
	if (scale_grad_by_freq || !float_dev(grad) || !index_ok(indices)) {
		note_fallback("embedding_dense_backward");
		return at::embedding_dense_backward(grad.cpu(), indices.cpu(), num_weights, padding_idx, scale_grad_by_freq)
			.to(grad.device());
	}
	Tensor out = at::empty({num_weights, dim}, grad.options());
	fill_cmd(out, 0);
	index_add_cmd(out, 0, indices.reshape({-1}), grad.reshape({-1, dim}));
	if (padding_idx >= 0 && padding_idx < num_weights)
		fill_cmd(out.select(0, padding_idx), 0);
	return out;
}

Tensor gather(const Tensor &self, int64_t dim, const Tensor &index_in, bool sparse_grad)
{
	NEURON_NATIVE("gather");
	const Tensor index = index_in.device().is_cpu() && self.device().is_privateuseone() ? index_in.to(self.device()) : index_in;
	const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
	Tensor out = at::empty(index.sizes(), self.options());
	if (index.numel() == 0 && chip_ok(self))
		return out;
	if (!chip_ok(self) || !index_ok(index) || index.dim() != self.dim()) {
		note_fallback("gather");
		out.copy_(at::gather(self.cpu(), dim, index.cpu(), sparse_grad));
		return out;
	}
	if (out.numel() == 0)
		return out;
	neuron_cmd cmd;
	cmd_init(cmd, NEURON_OP_GATHER, 3);
	cmd.operands[0] = desc(out);
	cmd.operands[1] = desc(self);
	cmd.operands[2] = desc(index);
	cmd.iscalars[0] = d;
	submit(out, cmd);
	return out;
}


Tensor scatter_add_f(const Tensor &self, int64_t dim, const Tensor &index, const Tensor &src);
Tensor &scatter_add_o(const Tensor &self, int64_t dim, const Tensor &index, const Tensor &src, Tensor &out)
{
	Tensor r = scatter_add_f(self, dim, index, src);
	return assign_out(out, r);
}
Tensor scatter_add_f(const Tensor &self, int64_t dim, const Tensor &index, const Tensor &src)
{
	NEURON_NATIVE("scatter_add");
	const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
	if (!chip_ok(self) || !index_ok(index) || !chip_ok(src) || src.sizes() != index.sizes() ||
	    src.scalar_type() != self.scalar_type() || self.scalar_type() == c10::kBool) {
		note_fallback("scatter_add");
		return at::scatter_add(self.cpu(), dim, index.cpu(), src.cpu()).to(self.device());
	}
	Tensor out = self.clone(at::MemoryFormat::Contiguous);
	scatter_add_cmd(out, d, index, src);
	return out;
}


Tensor &index_add_o(const Tensor &self, int64_t dim, const Tensor &index, const Tensor &src, const Scalar &alpha,
		    Tensor &out)
{
	NEURON_NATIVE("index_add");
	const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
	if (!chip_ok(self) || !chip_ok(src) || !index_ok(index) || self.scalar_type() == c10::kBool ||
	    src.scalar_type() != self.scalar_type()) {
		note_fallback("index_add");
		Tensor r = at::index_add(self.cpu(), dim, index.cpu(), src.cpu(), alpha);
		return assign_out(out, r);
	}
	if (!same_view(out, self)) {
		if (out.sizes() != self.sizes())
			out.resize_(self.sizes());
		out.copy_(self);
	}
	Tensor s = src;
	if (alpha.toDouble() != 1.0) {
		s = at::empty(src.sizes(), src.options());
		scalar_op(NEURON_OP_MUL_SCALAR, s, src, alpha);
	}
	// A 0-d self is one slot: add into it as a 1-d tensor of one element (the chip
	// takes a 0-d output only with a 0-d source).
	index_add_cmd(out.dim() == 0 ? out.view({1}) : out, d, index.reshape({-1}), s.dim() == 0 ? s.reshape({1}) : s);
	return out;
}

// ---- advanced indexing: self[indices], self[indices] = values, += values ----
//
// Integer index tensors and bool masks (turned into integer tensors by nonzero) on
// any dims are broadcast together; the indexed dims are merged into one dim of a
// view and the per-dim indices into one linear index (elementwise i64 ops on the
// device), so the access itself is one INDEX_SELECT (read), INDEX_ADD (accumulate)
// or INDEX_COPY (write) along the merged dim. As in PyTorch, the broadcast index
// dims replace the indexed dims in place when those are adjacent, else they lead.

struct IndexPlan {
	Tensor self;                 // the tensor indexed (a view: a 0-d mask adds a dim of size 1)
	std::vector<int64_t> dims;   // the indexed dims of self, in index order
	std::vector<Tensor> index;   // one integer tensor per dim (CPU or device)
	std::vector<int64_t> bshape; // the broadcast shape of the index tensors
	bool adjacent = true;        // the indexed dims are consecutive
	std::vector<int64_t> perm;   // indexed dims first, then the others (not adjacent)

	// Where the merged dim sits in the view indexed, and that view's other dims.
	int64_t at() const { return adjacent ? dims[0] : 0; }
	Tensor ordered() const { return adjacent ? self : self.permute(perm); }
	// The shape of self[indices].
	std::vector<int64_t> result_shape() const
	{
		const Tensor o = ordered();
		const int64_t a = at(), k = static_cast<int64_t>(dims.size());
		std::vector<int64_t> r(o.sizes().begin(), o.sizes().begin() + a);
		r.insert(r.end(), bshape.begin(), bshape.end());
		r.insert(r.end(), o.sizes().begin() + a + k, o.sizes().end());
		return r;
	}
	// The same with the index dims flattened into one: the shape the chip op sees.
	std::vector<int64_t> flat_shape() const
	{
		const Tensor o = ordered();
		const int64_t a = at(), k = static_cast<int64_t>(dims.size());
		std::vector<int64_t> r(o.sizes().begin(), o.sizes().begin() + a);
		r.push_back(c10::multiply_integers(bshape));
		r.insert(r.end(), o.sizes().begin() + a + k, o.sizes().end());
		return r;
	}
};

IndexPlan plan_index(const Tensor &self_in, const c10::List<std::optional<Tensor>> &indices)
{
	IndexPlan p;
	p.self = self_in;
	int64_t pos = 0;
	for (size_t i = 0; i < indices.size(); ++i) {
		const std::optional<Tensor> o = indices.get(i);
		if (!o || !o->defined()) {
			++pos;
			continue;
		}
		const c10::ScalarType st = o->scalar_type();
		if (st == c10::kBool || st == c10::kByte) {
			Tensor mask = *o;
			if (mask.dim() == 0) { // x[True]: a new dim of size 1, indexed by [mask]
				p.self = p.self.unsqueeze(pos);
				mask = mask.reshape({1});
			}
			TORCH_CHECK_INDEX(pos + mask.dim() <= p.self.dim(), "too many indices for tensor of dimension ",
					  self_in.dim());
			for (int64_t k = 0; k < mask.dim(); ++k)
				TORCH_CHECK_INDEX(mask.size(k) == p.self.size(pos + k), "The shape of the mask ", mask.sizes(),
						  " at index ", k, " does not match the shape of the indexed tensor ",
						  p.self.sizes(), " at index ", pos + k);
			// The result's shape depends on the mask's values: read it (a host sync,
			// as CUDA's nonzero does).
			Tensor nz = at::nonzero(mask); // a device mask: on the device (ops_index_reduce.cpp)
			for (int64_t k = 0; k < mask.dim(); ++k) {
				p.dims.push_back(pos + k);
				p.index.push_back(nz.select(1, k));
			}
			pos += mask.dim();
			continue;
		}
		TORCH_CHECK_INDEX(st == c10::kLong || st == c10::kInt,
				  "tensors used as indices must be long, int, byte or bool tensors");
		TORCH_CHECK_INDEX(pos < p.self.dim(), "too many indices for tensor of dimension ", self_in.dim(), " (got ",
				  indices.size(), ")");
		p.dims.push_back(pos++);
		p.index.push_back(*o);
	}
	for (size_t i = 1; i < p.dims.size(); ++i)
		p.adjacent = p.adjacent && p.dims[i] == p.dims[i - 1] + 1;
	for (const Tensor &t : p.index) {
		c10::DimVector b;
		try {
			b = at::infer_size_dimvector(p.bshape, t.sizes());
		} catch (const c10::Error &) {
			TORCH_CHECK_INDEX(false, "shape mismatch: indexing tensors could not be broadcast together with shapes ",
					  c10::IntArrayRef(p.bshape), ", ", t.sizes());
		}
		p.bshape.assign(b.begin(), b.end());
	}
	if (!p.adjacent) {
		p.perm = p.dims;
		for (int64_t d = 0; d < p.self.dim(); ++d)
			if (std::find(p.dims.begin(), p.dims.end(), d) == p.dims.end())
				p.perm.push_back(d);
	}
	return p;
}

// Faults the stream's next command (the chip's "out of range" with the value and
// its position) if an index of ix lies outside [0, size): an INDEX_SELECT from a
// one-byte stand-in for dim `dim` of that size. Needed when several indices are
// combined into one linear index, where a bad one could land on a valid element.
void check_range_on_device(const Tensor &ix, int64_t dim, int64_t size)
{
	std::vector<int64_t> one(static_cast<size_t>(dim + 1), 1), in_shape = one, out_shape = one;
	in_shape.back() = size;
	out_shape.back() = ix.numel();
	Tensor byte = at::empty({1}, ix.options().dtype(c10::kByte));
	Tensor in = byte.view(one).expand(in_shape);
	Tensor out = at::empty(out_shape, ix.options().dtype(c10::kByte));
	index_select_cmd(out, in, dim, ix);
}

// The linear index (1-d i64 on the device) into the merged indexed dims, row-major
// over sizes[dims]; negative indices wrap as in Python. Host indices are checked on
// the host (IndexError, as the CPU); device ones by the chip (a device error).
Tensor linear_index(const IndexPlan &p, const Tensor &like)
{
	const int64_t k = static_cast<int64_t>(p.dims.size()), n = c10::multiply_integers(p.bshape);
	const auto i64 = like.options().dtype(c10::kLong);
	Tensor lin = at::empty(p.bshape, i64);
	int64_t mult = 1;
	for (int64_t i = k - 1; i >= 0; --i) {
		const int64_t size = p.self.size(p.dims[i]);
		const Tensor &ix = p.index[i];
		Tensor t;
		if (!ix.device().is_privateuseone()) {
			Tensor h = ix.to(c10::kLong);
			if (h.numel()) {
				const int64_t lo = h.min().item<int64_t>(), hi = h.max().item<int64_t>();
				TORCH_CHECK_INDEX(lo >= -size && hi < size, "index ", lo < -size ? lo : hi,
						  " is out of bounds for dimension ", p.dims[i], " with size ", size);
			}
			h = h.add(h.lt(0).to(c10::kLong).mul(size));
			t = h.expand(p.bshape).contiguous().to(like.device());
		} else {
			t = at::empty(p.bshape, i64);
			copy_cast_into(t, ix);
			Tensor neg = at::empty(p.bshape, i64.dtype(c10::kBool)), wrap = at::empty(p.bshape, i64);
			cmp_scalar_cmd(neg, t, NEURON_CMP_LT, 0.0);
			copy_cast_into(wrap, neg);
			scalar_op(NEURON_OP_MUL_SCALAR, wrap, wrap, size);
			binary_op(NEURON_OP_ADD, t, t, wrap);
			if (k > 1 && n)
				check_range_on_device(t.reshape({-1}), p.dims[i], size);
		}
		if (i == k - 1) {
			if (n)
				copy_cast_into(lin, t);
		} else if (n) {
			scalar_op(NEURON_OP_MUL_SCALAR, t, t, mult);
			binary_op(NEURON_OP_ADD, lin, lin, t);
		}
		mult *= size;
	}
	return lin.reshape({-1});
}

// t with dims [start, start + count) merged into one, as a view, if its strides allow.
std::optional<Tensor> merged_view(const Tensor &t, int64_t start, int64_t count)
{
	const int64_t last = start + count - 1;
	int64_t span = t.size(last);
	for (int64_t i = last - 1; i >= start; --i) {
		if (t.size(i) != 1 && t.stride(i) != t.stride(last) * span)
			return std::nullopt;
		span *= t.size(i);
	}
	std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().begin() + start), strides(t.strides().begin(), t.strides().begin() + start);
	sizes.push_back(span);
	strides.push_back(t.stride(last));
	sizes.insert(sizes.end(), t.sizes().begin() + last + 1, t.sizes().end());
	strides.insert(strides.end(), t.strides().begin() + last + 1, t.strides().end());
	return t.as_strided(sizes, strides, t.storage_offset());
}

bool index_dtypes_ok(const c10::List<std::optional<Tensor>> &indices)
{
	for (size_t i = 0; i < indices.size(); ++i) {
		const std::optional<Tensor> o = indices.get(i);
		if (o && o->defined() && !o->device().is_cpu() && !chip_ok(*o))
			return false;
	}
	return true;
}

c10::List<std::optional<Tensor>> cpu_indices(const c10::List<std::optional<Tensor>> &indices)
{
	c10::List<std::optional<Tensor>> r;
	for (size_t i = 0; i < indices.size(); ++i)
		r.push_back(cpu_opt(indices.get(i)));
	return r;
}

Tensor index_t(const Tensor &self, const c10::List<std::optional<Tensor>> &indices)
{
	NEURON_NATIVE("index");
	if (!chip_ok(self) || !index_dtypes_ok(indices)) {
		note_fallback("aten::index.Tensor");
		return at::index(self.cpu(), cpu_indices(indices)).to(self.device());
	}
	const IndexPlan p = plan_index(self, indices);
	if (p.dims.empty())
		return self.clone();
	const int64_t k = static_cast<int64_t>(p.dims.size());
	Tensor src = p.ordered();
	std::optional<Tensor> merged = merged_view(src, p.at(), k);
	if (!merged)
		merged = merged_view(src.contiguous(), p.at(), k);
	Tensor out = at::empty(p.result_shape(), self.options());
	if (out.numel() == 0)
		return out;
	index_select_cmd(out.view(p.flat_shape()), *merged, p.at(), linear_index(p, self));
	return out;
}

Tensor &index_put_impl(Tensor &self, const c10::List<std::optional<Tensor>> &indices, const Tensor &values_in,
		       bool accumulate, bool unsafe)
{
	NEURON_NATIVE("index_put_");
	TORCH_CHECK(values_in.scalar_type() == self.scalar_type(), "Index put requires the source and destination dtypes match, got ",
		    self.scalar_type(), " for the destination and ", values_in.scalar_type(), " for the source.");
	if (!chip_ok(self) || !index_dtypes_ok(indices) || (accumulate && self.scalar_type() == c10::kBool) ||
	    (values_in.device().is_privateuseone() && !chip_ok(values_in))) {
		note_fallback("aten::_index_put_impl_");
		Tensor c = self.cpu();
		at::_index_put_impl_(c, cpu_indices(indices), values_in.cpu(), accumulate, unsafe);
		self.copy_(c);
		return self;
	}
	const IndexPlan p = plan_index(self, indices);
	Tensor values = on_device(values_in, self);
	if (mem_overlap(values, self))
		values = values.clone();
	if (p.dims.empty()) {
		if (accumulate)
			binary_op(NEURON_OP_ADD, self, self, values);
		else
			self.copy_(values);
		return self;
	}
	const auto rshape = p.result_shape();
	TORCH_CHECK(at::is_expandable_to(values.sizes(), rshape), "shape mismatch: value tensor of shape ", values.sizes(),
		    " cannot be broadcast to indexing result of shape ", c10::IntArrayRef(rshape));
	if (c10::multiply_integers(rshape) == 0)
		return self;
	const int64_t k = static_cast<int64_t>(p.dims.size());
	Tensor src = values.expand(rshape).reshape(p.flat_shape());
	Tensor lin = linear_index(p, self);
	Tensor target = p.ordered(), work = target;
	std::optional<Tensor> merged = merged_view(target, p.at(), k);
	if (!merged) { // strides that do not merge: write a contiguous copy, then copy it back
		work = target.contiguous();
		merged = merged_view(work, p.at(), k);
	}
	if (accumulate)
		index_add_cmd(*merged, p.at(), lin, src);
	else
		index_copy_cmd(*merged, p.at(), lin, src);
	if (!work.is_same(target))
		target.copy_(work);
	return self;
}

// Data-dependent output shape: computed on the device, the count read to the host
// (a sync, as on CUDA).
Tensor nonzero_f(const Tensor &self)
{
	NEURON_NATIVE("nonzero");
	if (!chip_ok(self)) {
		note_fallback("nonzero");
		return at::nonzero(self.cpu()).to(self.device());
	}
	return device_nonzero(self);
}

// ---- scatter (non-add) and index_copy: the chip's SCATTER and INDEX_COPY ----

void scatter_checks(const Tensor &self, int64_t d, const Tensor &index, const Tensor *src)
{
	TORCH_CHECK(index.scalar_type() == c10::kLong || index.scalar_type() == c10::kInt,
		    "scatter(): Expected dtype int32/int64 for index");
	TORCH_CHECK(std::max<int64_t>(index.dim(), 1) == std::max<int64_t>(self.dim(), 1),
		    "Index tensor must have the same number of dimensions as self tensor");
	if (src)
		TORCH_CHECK(std::max<int64_t>(src->dim(), 1) == std::max<int64_t>(self.dim(), 1),
			    "Index tensor must have the same number of dimensions as src tensor");
	if (src)
		TORCH_CHECK(src->scalar_type() == self.scalar_type(), "scatter(): Expected self.dtype to be equal to src.dtype");
	for (int64_t i = 0; i < index.dim(); ++i) {
		TORCH_CHECK(i == d || index.size(i) <= self.size(i), "Expected index ", index.sizes(),
			    " to be smaller than self ", self.sizes(), " apart from dimension ", d);
		if (src)
			TORCH_CHECK(index.size(i) <= src->size(i), "Expected index ", index.sizes(), " to be smaller than src ",
				    src->sizes());
	}
}

// out = self, then out[..index..] = src (src: the leading index-shaped block of src_full).
Tensor &scatter_into(const Tensor &self, int64_t dim, const Tensor &index_in, const Tensor &src_full, Tensor &out)
{
	const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
	if (!same_view(out, self)) {
		if (out.sizes() != self.sizes())
			out.resize_(self.sizes());
		out.copy_(self);
	}
	if (index_in.numel() == 0)
		return out;
	Tensor index = on_device(index_in, out);
	Tensor src = src_full.as_strided(index.sizes(), src_full.strides(), src_full.storage_offset());
	if (mem_overlap(src, out))
		src = src.clone();
	if (mem_overlap(index, out))
		index = index.clone();
	index_write_cmd(NEURON_OP_SCATTER, out, d, index, src);
	return out;
}

Tensor &scatter_src_o(const Tensor &self, int64_t dim, const Tensor &index, const Tensor &src, Tensor &out)
{
	NEURON_NATIVE("scatter");
	const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
	scatter_checks(self, d, index, &src);
	if (!chip_ok(self) || !chip_ok(out) || !chip_ok(on_device(src, self)) || out.scalar_type() != self.scalar_type()) {
		note_fallback("aten::scatter.src");
		Tensor r = at::scatter(self.cpu(), dim, index.cpu(), src.cpu());
		return assign_out(out, r);
	}
	return scatter_into(self, dim, index, on_device(src, self), out);
}
Tensor scatter_src(const Tensor &self, int64_t dim, const Tensor &index, const Tensor &src)
{
	Tensor out = at::empty(self.sizes(), self.options());
	return scatter_src_o(self, dim, index, src, out);
}
Tensor &scatter_src_i(Tensor &self, int64_t dim, const Tensor &index, const Tensor &src)
{
	return scatter_src_o(self, dim, index, src, self);
}

Tensor &scatter_value_o(const Tensor &self, int64_t dim, const Tensor &index, const Scalar &value, Tensor &out)
{
	NEURON_NATIVE("scatter");
	const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
	scatter_checks(self, d, index, nullptr);
	if (!chip_ok(self) || !chip_ok(out) || out.scalar_type() != self.scalar_type()) {
		note_fallback("aten::scatter.value");
		Tensor r = at::scatter(self.cpu(), dim, index.cpu(), value);
		return assign_out(out, r);
	}
	Tensor v = at::empty({}, self.options());
	fill_cmd(v, value);
	return scatter_into(self, dim, index, v.expand(index.sizes()), out);
}
Tensor scatter_value(const Tensor &self, int64_t dim, const Tensor &index, const Scalar &value)
{
	Tensor out = at::empty(self.sizes(), self.options());
	return scatter_value_o(self, dim, index, value, out);
}
Tensor &scatter_value_i(Tensor &self, int64_t dim, const Tensor &index, const Scalar &value)
{
	return scatter_value_o(self, dim, index, value, self);
}

Tensor &index_copy_o(const Tensor &self, int64_t dim, const Tensor &index, const Tensor &source, Tensor &out)
{
	NEURON_NATIVE("index_copy");
	const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
	TORCH_CHECK_INDEX(index.dim() <= 1, "index_copy_(): Index should have dimension 1 or 0 (got ", index.dim(), ")");
	TORCH_CHECK(index.scalar_type() == c10::kLong, "index_copy_(): Expected a long tensor for index, but got ",
		    index.scalar_type());
	TORCH_CHECK(source.scalar_type() == self.scalar_type(), "index_copy_(): self and source expected to have the same dtype, but got (self) ",
		    self.scalar_type(), " and (source) ", source.scalar_type());
	const int64_t n = index.numel();
	TORCH_CHECK_INDEX(std::max<int64_t>(source.dim(), 1) == std::max<int64_t>(self.dim(), 1),
			  "index_copy_(): When source and destination are not scalars, their dimensionality must match.");
	for (int64_t i = 0; i < self.dim(); ++i)
		TORCH_CHECK_INDEX(source.dim() == 0 || (i == d ? source.size(i) == n : source.size(i) == self.size(i)),
				  "index_copy_(): Source/destination tensor must have same slice shapes. Destination slice shape: ",
				  self.sizes(), " at dimension ", d, " and source slice shape: ", source.sizes());
	if (!chip_ok(self) || !chip_ok(out) || !chip_ok(on_device(source, self)) || out.scalar_type() != self.scalar_type()) {
		note_fallback("aten::index_copy");
		Tensor r = at::index_copy(self.cpu(), dim, index.cpu(), source.cpu());
		return assign_out(out, r);
	}
	if (!same_view(out, self)) {
		if (out.sizes() != self.sizes())
			out.resize_(self.sizes());
		out.copy_(self);
	}
	Tensor src = on_device(source, out);
	if (mem_overlap(src, out))
		src = src.clone();
	Tensor ix = on_device(index, out).reshape({-1});
	if (src.dim() != self.dim()) { // a 0-d source for one index
		std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end());
		if (self.dim())
			shape[d] = n;
		src = src.reshape(shape);
	}
	index_copy_cmd(out, d, ix, src);
	return out;
}
Tensor index_copy_f(const Tensor &self, int64_t dim, const Tensor &index, const Tensor &source)
{
	Tensor out = at::empty(self.sizes(), self.options());
	return index_copy_o(self, dim, index, source, out);
}
Tensor &index_copy_i(Tensor &self, int64_t dim, const Tensor &index, const Tensor &source)
{
	return index_copy_o(self, dim, index, source, self);
}

// self[.., index[j], ..] = value: an INDEX_COPY from the value broadcast (stride 0).
Tensor &index_fill_i(Tensor &self, int64_t dim, const Tensor &index, const Scalar &value)
{
	NEURON_NATIVE("index_fill");
	const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
	TORCH_CHECK_INDEX(index.dim() <= 1, "index_fill_(): Index is supposed to be a vector");
	TORCH_CHECK(index.scalar_type() == c10::kLong, "index_fill_(): Expected dtype int64 for index.");
	if (!chip_ok(self)) {
		note_fallback("aten::index_fill_");
		Tensor c = self.cpu();
		c.index_fill_(dim, index.cpu(), value);
		self.copy_(c);
		return self;
	}
	if (index.numel() == 0)
		return self;
	Tensor v = at::empty({}, self.options());
	fill_cmd(v, value);
	std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end());
	if (self.dim())
		shape[d] = index.numel();
	index_copy_cmd(self, d, on_device(index, self).reshape({-1}), v.expand(shape));
	return self;
}
Tensor &index_fill_ti(Tensor &self, int64_t dim, const Tensor &index, const Tensor &value)
{
	TORCH_CHECK(value.dim() == 0, "index_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
		    value.dim(), " dimension(s).");
	return index_fill_i(self, dim, index, value.item());
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("index_fill_.int_Scalar", &index_fill_i);
	m.impl("index_fill_.int_Tensor", &index_fill_ti);
	m.impl("index_select", &index_select);
	m.impl("index_select.out", &index_select_o);
	m.impl("embedding_dense_backward", &embedding_dense_backward);
	m.impl("gather", &gather);
	m.impl("scatter_add", &scatter_add_f);
	m.impl("scatter_add.out", &scatter_add_o);
	m.impl("index_add.out", &index_add_o);
	m.impl("index.Tensor", &index_t);
	m.impl("_index_put_impl_", &index_put_impl);
	m.impl("nonzero", &nonzero_f);
	m.impl("scatter.src", &scatter_src);
	m.impl("scatter_.src", &scatter_src_i);
	m.impl("scatter.src_out", &scatter_src_o);
	m.impl("scatter.value", &scatter_value);
	m.impl("scatter_.value", &scatter_value_i);
	m.impl("scatter.value_out", &scatter_value_o);
	m.impl("index_copy", &index_copy_f);
	m.impl("index_copy_", &index_copy_i);
	m.impl("index_copy.out", &index_copy_o);
}

} // namespace torch_neuron
