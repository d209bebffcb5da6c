#include "geometry.h"

#include "kernels.h"

#include <algorithm>
#include <array>
#include <utility>

namespace neuron::kernels {

std::optional<uint64_t> byte_extent(const neuron_tensor_desc &d)
{
	const uint64_t elem = dtype_size(d.dtype);
	unsigned __int128 last = 0;
	for (int i = 0; i < d.ndim; ++i) {
		if (d.sizes[i] == 0)
			return 0;
		last += static_cast<unsigned __int128>(d.sizes[i] - 1) * static_cast<uint64_t>(d.strides[i]);
	}
	const unsigned __int128 bytes = (last + 1) * elem;
	if (bytes > (static_cast<unsigned __int128>(1) << 62))
		return std::nullopt;
	return static_cast<uint64_t>(bytes);
}

uint64_t numel(const neuron_tensor_desc &d)
{
	uint64_t n = 1;
	for (int i = 0; i < d.ndim; ++i)
		if (__builtin_mul_overflow(n, static_cast<uint64_t>(d.sizes[i]), &n))
			return ~0ull;
	return n;
}

uint64_t command_work(const neuron_cmd &cmd)
{
	uint64_t work = 0;
	for (int k = 0; k < std::min<int>(cmd.num_operands, NEURON_MAX_OPERANDS); ++k)
		work = std::max(work, numel(cmd.operands[k]));
	if ((cmd.opcode == NEURON_OP_MATMUL && cmd.num_operands == 3) ||
	    (cmd.opcode == NEURON_OP_MATMUL_EPILOGUE && cmd.num_operands == 4)) {
		const neuron_tensor_desc &a = cmd.operands[1];
		const uint64_t k = a.ndim >= 1 ? static_cast<uint64_t>(a.sizes[a.ndim - 1]) : 1;
		if (__builtin_mul_overflow(numel(cmd.operands[0]), k, &work))
			work = ~0ull;
	}
	if (cmd.opcode == NEURON_OP_ATTENTION && cmd.num_operands == 6) {
		// Every (row, key) pair of the mask's shape costs a dot product over E and
		// a weighted sum over Ev.
		const neuron_tensor_desc &q = cmd.operands[2], &v = cmd.operands[4];
		const uint64_t ev = v.ndim ? static_cast<uint64_t>(v.sizes[v.ndim - 1]) : 1;
		const uint64_t e = q.ndim ? static_cast<uint64_t>(q.sizes[q.ndim - 1]) : 1;
		if (__builtin_mul_overflow(numel(cmd.operands[5]), std::max<uint64_t>(e + ev, 1), &work))
			work = ~0ull;
	}
	if (cmd.opcode >= NEURON_OP_LU && cmd.opcode <= NEURON_OP_SVD && cmd.opcode != NEURON_OP_PERMUTATION) {
		// n^3 per matrix: numel of the largest operand times its longest matrix dim.
		int64_t side = 1;
		for (int k = 0; k < std::min<int>(cmd.num_operands, NEURON_MAX_OPERANDS); ++k) {
			const neuron_tensor_desc &t = cmd.operands[k];
			for (int i = std::max(0, t.ndim - 2); i < t.ndim; ++i)
				side = std::max(side, t.sizes[i]);
		}
		if (__builtin_mul_overflow(work, static_cast<uint64_t>(side), &work))
			work = ~0ull;
	}
	if (cmd.opcode == NEURON_OP_SORT && cmd.num_operands == 3) {
		// n log n per row: numel(in) times the row length's bit count.
		const neuron_tensor_desc &in = cmd.operands[2];
		const int64_t dim = cmd.iscalars[0];
		const uint64_t len = in.ndim > 0 && dim >= 0 && dim < in.ndim ? static_cast<uint64_t>(in.sizes[dim]) : 1;
		const uint64_t bits = 64 - static_cast<uint64_t>(__builtin_clzll(len | 1));
		if (__builtin_mul_overflow(numel(in), bits, &work))
			work = ~0ull;
	}
	return work;
}

bool self_overlapping(const neuron_tensor_desc &d)
{
	// Sorting dims by stride, each stride must step over everything the smaller
	// dims span; size-1 dims never step.
	std::array<std::pair<int64_t, int64_t>, NEURON_MAX_DIMS> dims{}; // stride, size
	int n = 0;
	for (int i = 0; i < d.ndim; ++i) {
		if (d.sizes[i] == 0)
			return false;
		if (d.sizes[i] > 1)
			dims[n++] = {d.strides[i], d.sizes[i]};
	}
	// Insertion sort: n <= 8, and std::sort here trips a GCC 12 -Warray-bounds false positive.
	for (int i = 1; i < n; ++i)
		for (int j = i; j > 0 && dims[j] < dims[j - 1]; --j)
			std::swap(dims[j], dims[j - 1]);
	int64_t span = 0; // largest offset reachable by the smaller dims
	for (int i = 0; i < n; ++i) {
		if (dims[i].first <= span)
			return true;
		span += dims[i].first * (dims[i].second - 1);
	}
	return false;
}

bool same_view(const neuron_tensor_desc &a, const neuron_tensor_desc &b)
{
	if (a.mem_space != b.mem_space || a.host_buffer != b.host_buffer || a.addr != b.addr ||
	    a.dtype != b.dtype || a.ndim != b.ndim)
		return false;
	for (int i = 0; i < a.ndim; ++i)
		if (a.sizes[i] != b.sizes[i] || a.strides[i] != b.strides[i])
			return false;
	return true;
}

int written_operands(uint16_t opcode)
{
	switch (opcode) {
	case NEURON_OP_ADAM_STEP:
		return 3;
	case NEURON_OP_LU:          // lu, pivots, info
	case NEURON_OP_SVD:         // u, s, vh
	case NEURON_OP_LAYER_NORM: // out, mean, rstd
		return 3;
	case NEURON_OP_LAYER_NORM_PARAM_GRAD: // dw, db
	case NEURON_OP_SORT:      // values, indices
	case NEURON_OP_ATTENTION: // out, lse
	case NEURON_OP_CHOLESKY:  // l, info
	case NEURON_OP_GEQRF:     // packed, tau
	case NEURON_OP_EIGH:      // w, v
	case NEURON_OP_DROPOUT:          // out, mask
	case NEURON_OP_AMP_UNSCALE:      // grad, found_inf
	case NEURON_OP_AMP_UPDATE_SCALE: // scale, growth_tracker
		return 2;
	default:
		return 1;
	}
}

int written_operands(const neuron_cmd &cmd)
{
	if (cmd.opcode == NEURON_OP_TILE_KERNEL)
		return static_cast<int>(std::clamp<int64_t>(cmd.iscalars[1], 0, cmd.num_operands));
	return written_operands(cmd.opcode);
}

bool overwrites_outputs(const neuron_cmd &cmd)
{
	switch (cmd.opcode) {
	case NEURON_OP_NOP:
	case NEURON_OP_FILL:
	case NEURON_OP_COPY:
	case NEURON_OP_ADD:
	case NEURON_OP_SUB:
	case NEURON_OP_MUL:
	case NEURON_OP_DIV:
	case NEURON_OP_ADD_SCALAR:
	case NEURON_OP_SUB_SCALAR:
	case NEURON_OP_MUL_SCALAR:
	case NEURON_OP_DIV_SCALAR:
	case NEURON_OP_RELU:
	case NEURON_OP_GELU:
	case NEURON_OP_SILU:
	case NEURON_OP_TANH:
	case NEURON_OP_EXP:
	case NEURON_OP_SOFTMAX:
	case NEURON_OP_UNARY_MATH:
	case NEURON_OP_BINARY_MATH:
	case NEURON_OP_COMPARE:
	case NEURON_OP_COMPARE_SCALAR:
	case NEURON_OP_WHERE:
	case NEURON_OP_LOG_SOFTMAX:
	case NEURON_OP_INDEX_SELECT:
	case NEURON_OP_GATHER:
	case NEURON_OP_ARG_REDUCE:
	case NEURON_OP_LAYER_NORM:
	case NEURON_OP_LAYER_NORM_BACKWARD:
		return true;
	case NEURON_OP_LAYER_NORM_PARAM_GRAD:
		return !(cmd.iscalars[1] & NEURON_LN_ACCUMULATE);
	case NEURON_OP_MATMUL: // beta * out is read unless beta is 0
		return cmd.fscalars.f[1] == 0.0;
	case NEURON_OP_SUM:
	case NEURON_OP_MEAN:
	case NEURON_OP_AMAX:
		return !(cmd.iscalars[1] & NEURON_REDUCE_ACCUMULATE);
	default:
		return false;
	}
}

namespace {

// Ops with several outputs (operands [0, written)): outputs and inputs all disjoint.
std::optional<Fault> check_disjoint(const neuron_cmd &cmd, std::span<const ByteRange> ranges, int written)
{
	const int n = cmd.num_operands;
	for (int o = 0; o < written && o < n; ++o) {
		if (self_overlapping(cmd.operands[o]))
			return Fault{NEURON_FAULT_OVERLAP, "operand " + std::to_string(o) +
								   " (output): its strides make distinct elements share memory"};
		for (int k = o + 1; k < n; ++k) {
			const ByteRange a = ranges[o], b = ranges[k];
			if (a.length == 0 || b.length == 0 || b.start >= a.start + a.length || a.start >= b.start + b.length)
				continue;
			return Fault{NEURON_FAULT_OVERLAP, "operand " + std::to_string(o) + " (output) overlaps operand " +
								   std::to_string(k) + "; this op's operands must be disjoint"};
		}
	}
	return std::nullopt;
}

} // namespace

std::optional<Fault> check_output_overlap(const neuron_cmd &cmd, std::span<const ByteRange> ranges)
{
	const int n = cmd.num_operands;
	if (n == 0)
		return std::nullopt;
	if (const int written = written_operands(cmd); written > 1)
		return check_disjoint(cmd, ranges, written);
	if (self_overlapping(cmd.operands[0]))
		return Fault{NEURON_FAULT_OVERLAP, "operand 0 (output): its strides make distinct elements share memory"};
	const ByteRange out = ranges[0];
	for (int k = 1; k < n; ++k) {
		const ByteRange in = ranges[k];
		if (out.length == 0 || in.length == 0 || in.start >= out.start + out.length ||
		    out.start >= in.start + in.length)
			continue;
		if (output_may_alias_inputs(static_cast<neuron_opcode>(cmd.opcode)) &&
		    same_view(cmd.operands[0], cmd.operands[k]))
			continue;
		return Fault{NEURON_FAULT_OVERLAP, "operand 0 (output) overlaps operand " + std::to_string(k) +
							   " (input); only an exact in-place view is allowed, and only "
							   "for elementwise ops"};
	}
	return std::nullopt;
}

} // namespace neuron::kernels
